#!/usr/bin/env bash
# The README's test command: install deps, build, run every test (CTest). GPU tests skip, saying
# so, on a machine without a CUDA device.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
BUILD=${NVFP4_BUILD_DIR:-build}
status=0
ctest --test-dir "$BUILD" --output-on-failure -j "$(nproc)" "$@" || status=$?
# CTest lists skipped tests without the reason; print each GTEST_SKIP reason with its count
# (GPU tests: "no CUDA device ..."; AMX tests: "no AMX on this CPU").
LOG="$BUILD/Testing/Temporary/LastTest.log"
if [ -f "$LOG" ] && grep -q ": Skipped$" "$LOG"; then
  echo "Why tests were skipped (count, reason):"
  awk '/: Skipped$/ { getline reason; print reason }' "$LOG" | sort | uniq -c | sort -rn
fi
exit $status
