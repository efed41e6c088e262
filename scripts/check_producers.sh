#!/usr/bin/env bash
# nvfp4 quantize against the producers' own code (tests/python/check_real_producers.py): the
# installed nvidia-modelopt, every compressed-tensors release from 0.10.2 to the newest (their
# CPU path, and for 0.20 on the Triton path under Triton's interpreter), and MLX's CPU build.
# Not in CI: torch from PyPI brings ~5 GB of CUDA libraries. Everything goes into a cache
# folder (NVFP4_PRODUCERS_CACHE, default ~/.cache/nvfp4-producers), reused by later runs.
# Usage: scripts/check_producers.sh [JSON_OUT]   (builds nvfp4 first; exit 0 = every check passed)
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${NVFP4_PRODUCERS_CACHE:-$HOME/.cache/nvfp4-producers}
CT_VERSIONS=(0.10.2 0.11.0 0.12.2 0.13.0 0.14.0.1 0.15.0.1 0.16.0 0.17.1 0.18.0 0.19.0 0.20.1)
mkdir -p "$CACHE/wheels" "$CACHE/ct"
if [ ! -x "$CACHE/venv/bin/python" ]; then
  python3 -m venv "$CACHE/venv"
fi
PY="$CACHE/venv/bin/python"
# The newest compressed-tensors is installed with its dependencies (torch, triton, loguru, ...);
# the older releases are unpacked wheels put on sys.path one at a time.
"$PY" -m pip install -q torch nvidia-modelopt "compressed-tensors==${CT_VERSIONS[-1]}" "mlx[cpu]" \
  numpy ml_dtypes safetensors requests frozendict
args=()
for v in "${CT_VERSIONS[@]}"; do
  if [ ! -d "$CACHE/ct/$v" ]; then
    "$PY" -m pip download -q --no-deps "compressed-tensors==$v" -d "$CACHE/wheels"
    "$PY" -m zipfile -e "$CACHE/wheels/compressed_tensors-$v-py3-none-any.whl" "$CACHE/ct/$v"
  fi
  args+=(--ct "$CACHE/ct/$v")
done
bash scripts/install-deps.sh
BUILD=${NVFP4_BUILD_DIR:-build}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" --target nvfp4 >/dev/null
OUT=${1:-}
status=0
"$PY" -W ignore tests/python/check_real_producers.py --cli "$BUILD/nvfp4" "${args[@]}" ${OUT:+--json "$OUT"} ||
  status=$?
exit $status
