#!/usr/bin/env bash
# Configure + build (Release) into ${NVFP4_BUILD_DIR:-build}. CUDA is used when nvcc is found.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
BUILD=${NVFP4_BUILD_DIR:-build}
if [ -z "${NVFP4_CUDA:-}" ] && ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNVFP4_CUDA="${NVFP4_CUDA:-AUTO}" >/dev/null
cmake --build "$BUILD" -j "$(nproc)"
