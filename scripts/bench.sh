#!/usr/bin/env bash
# The README's main job: install deps, build, run `nvfp4 bench` (decode + prefill replay of the
# default model on the best backend against the dense baseline). Extra arguments go to bench.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
BUILD=${NVFP4_BUILD_DIR:-build}
"$BUILD/nvfp4" bench "$@"
