#!/usr/bin/env bash
# scripts/prebuilt_experiment.sh PATCH OUT_DIR -- build the device binaries of an experiment patch
# (bench/results/*-experiment-*.patch) without leaving it in the tree: apply it, build and pack
# with scripts/prebuilt_cuda.sh into OUT_DIR (ignored by git: build-prebuilt-*), then reverse it
# except its exp/ scripts, which are written afresh from the patch and stay (untracked) for the
# device call to run.
# Why: the device time is the scarce part, and an incremental build in build-lead-cuda takes ~1
# minute where a fresh CUDA build takes ~10; the patches are kept, never merged, until measured.
#   e.g. scripts/prebuilt_experiment.sh bench/results/ws-stream-k-experiment-2026-12-02.patch build-prebuilt-sk
set -euo pipefail
patch=${1:?usage: scripts/prebuilt_experiment.sh PATCH OUT_DIR}
out=${2:?usage: scripts/prebuilt_experiment.sh PATCH OUT_DIR}
root=$(git rev-parse --show-toplevel)
cd "$root"
if ! git diff --quiet -- src tests bench include; then
  echo "prebuilt_experiment.sh: src/tests/bench/include have uncommitted changes; commit or stash them first" >&2
  exit 1
fi
git apply --exclude='exp/*' "$patch"
trap 'git apply -R --exclude="exp/*" "$patch"' EXIT
for f in $(git apply --numstat --include='exp/*' "$patch" | cut -f3); do rm -f "$f"; done
git apply --include='exp/*' "$patch"
bash scripts/prebuilt_cuda.sh build-lead-cuda "$out"
