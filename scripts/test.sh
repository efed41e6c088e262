#!/usr/bin/env bash
# The README's test command: install deps, build, run every test (CTest). GPU tests skip, saying
# so, on a machine without a CUDA device.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
BUILD=${NVFP4_BUILD_DIR:-build}
ctest --test-dir "$BUILD" --output-on-failure -j "$(nproc)" "$@"
