#!/usr/bin/env bash
# nvfp4 quantize against the producers' own code (tests/python/check_real_producers.py): every
# nvidia-modelopt release with NVFP4QTensor in its Python package (0.35.1 to the newest), every
# compressed-tensors release from 0.10.2 to the newest (their CPU path, and for 0.20 on the
# Triton path under Triton's interpreter), and MLX's CPU build; then those libraries load
# nvfp4's checkpoints; last, modelopt's own quantize + export_hf_checkpoint of a tiny Llama model
# against nvfp4's checkpoint of it, and mlx-lm loading and running nvfp4's MLX checkpoint of it
# (tests/python/check_producer_e2e.py --producer modelopt / mlx-lm).
# Not in CI: torch from PyPI brings ~5 GB of CUDA libraries. Everything goes into a cache
# folder (NVFP4_PRODUCERS_CACHE, default ~/.cache/nvfp4-producers), reused by later runs.
# Usage: scripts/check_producers.sh [JSON_OUT]   (builds nvfp4 first; exit 0 = every check passed)
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${NVFP4_PRODUCERS_CACHE:-$HOME/.cache/nvfp4-producers}
CT_VERSIONS=(0.10.2 0.11.0 0.12.2 0.13.0 0.14.0.1 0.15.0.1 0.16.0 0.17.1 0.18.0 0.19.0 0.20.1)
# Before 0.35 the quantizer lived in the compiled nvidia-modelopt-core package.
MO_VERSIONS=(0.35.1 0.37.0 0.39.0 0.41.0 0.43.0 0.44.0 0.45.0 0.46.1 0.47.0)
mkdir -p "$CACHE/wheels" "$CACHE/ct" "$CACHE/modelopt"
if [ ! -x "$CACHE/venv/bin/python" ]; then
  python3 -m venv "$CACHE/venv"
fi
PY="$CACHE/venv/bin/python"
# The newest compressed-tensors is installed with its dependencies (torch, triton, loguru, ...);
# the older releases are unpacked wheels put on sys.path one at a time.
"$PY" -m pip install -q torch "nvidia-modelopt==${MO_VERSIONS[-1]}" "compressed-tensors==${CT_VERSIONS[-1]}" \
  "mlx[cpu]" mlx-lm transformers numpy ml_dtypes safetensors requests frozendict torchprofile
args=()
for v in "${CT_VERSIONS[@]}"; do
  if [ ! -d "$CACHE/ct/$v" ]; then
    "$PY" -m pip download -q --no-deps "compressed-tensors==$v" -d "$CACHE/wheels"
    "$PY" -m zipfile -e "$CACHE/wheels/compressed_tensors-$v-py3-none-any.whl" "$CACHE/ct/$v"
  fi
  args+=(--ct "$CACHE/ct/$v")
done
for v in "${MO_VERSIONS[@]:0:${#MO_VERSIONS[@]}-1}"; do  # the newest is the installed one
  if [ ! -d "$CACHE/modelopt/$v" ]; then
    "$PY" -m pip download -q --no-deps "nvidia-modelopt==$v" -d "$CACHE/wheels"
    "$PY" -m zipfile -e "$(ls "$CACHE"/wheels/nvidia_modelopt-"$v"-*.whl | head -1)" "$CACHE/modelopt/$v"
  fi
  args+=(--modelopt "$CACHE/modelopt/$v")
done
bash scripts/install-deps.sh
BUILD=${NVFP4_BUILD_DIR:-build}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" --target nvfp4 >/dev/null
OUT=${1:-}
status=0
"$PY" -W ignore tests/python/check_real_producers.py --cli "$BUILD/nvfp4" "${args[@]}" ${OUT:+--json "$OUT"} ||
  status=$?
for producer in modelopt mlx-lm; do
  for seed in 20261201 7 11; do
    "$PY" -W ignore tests/python/check_producer_e2e.py --producer $producer --cli "$BUILD/nvfp4" --seed "$seed" ||
      status=1
  done
done
exit $status
