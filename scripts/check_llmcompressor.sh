#!/usr/bin/env bash
# llm-compressor end to end against `nvfp4 quantize --format compressed-tensors`
# (tests/python/check_producer_e2e.py --producer llmcompressor): oneshot with the NVFP4A16 scheme on a tiny Llama
# model, save_compressed, and every tensor compared with nvfp4's checkpoint of the same model;
# then transformers loads nvfp4's compressed-tensors checkpoint and runs it (--producer transformers).
# Not in CI: llm-compressor pins its own torch (~5 GB with its CUDA libraries); it gets a venv of
# its own in NVFP4_LLMC_CACHE (default ~/.cache/nvfp4-llmcompressor), reused by later runs.
# Usage: scripts/check_llmcompressor.sh [SEED...]   (exit 0 = identical for every seed)
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${NVFP4_LLMC_CACHE:-$HOME/.cache/nvfp4-llmcompressor}
LLMC_VERSION=0.14.0.1
[ -x "$CACHE/venv/bin/python" ] || python3 -m venv "$CACHE/venv"
PY="$CACHE/venv/bin/python"
"$PY" -m pip install -q "llmcompressor==$LLMC_VERSION" numpy ml_dtypes safetensors
bash scripts/install-deps.sh
BUILD=${NVFP4_BUILD_DIR:-build}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" --target nvfp4 >/dev/null
status=0
for seed in "${@:-20261201}"; do
  for producer in llmcompressor transformers; do  # its venv also has transformers + compressed-tensors
    "$PY" -W ignore tests/python/check_producer_e2e.py --producer $producer --cli "$BUILD/nvfp4" --seed "$seed" ||
      status=1
  done
done
exit $status
