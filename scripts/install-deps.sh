#!/usr/bin/env bash
# Installs what nvfp4 needs to build and test on a fresh Debian 12 machine (run as root, or
# with sudo available). Idempotent: skips apt when every package is already installed.
# Arguments: extra packages a script needs beyond this list (scripts/fuzz.sh: libclang-rt-dev).
# ocl-icd-opencl-dev: Debian's dnnl-config.cmake calls find_package(OpenCL) (libdnnl-dev only
# recommends it, and --no-install-recommends skips it), so configure fails without it on a bare machine.
set -euo pipefail
PKGS=(cmake ninja-build g++ pkg-config python3 python3-pip
      libfmt-dev nlohmann-json3-dev libcli11-dev libhwy-dev libgtest-dev libgmock-dev
      libopenblas-dev libdnnl-dev ocl-icd-opencl-dev shellcheck clang "$@")  # + a script's extras
missing=()
for p in "${PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "install-deps: apt-get install ${missing[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Python packages used only by tests (the official safetensors reader, numpy, ml_dtypes).
if ! python3 -c "import numpy, ml_dtypes, safetensors" 2>/dev/null; then
  echo "install-deps: pip install numpy ml_dtypes safetensors" >&2
  python3 -m pip install -q numpy ml_dtypes safetensors 2>/dev/null ||
    python3 -m pip install -q --break-system-packages numpy ml_dtypes safetensors
fi
# MLX's CPU build (~30 MB) for the CTest check against MLX's own quantizer and loader
# (tests/python/check_real_producers.py --mlx-only). Best effort: without it that test skips.
if ! python3 -c "import mlx.core" 2>/dev/null; then
  echo "install-deps: pip install mlx[cpu]==0.32.4" >&2
  python3 -m pip install -q "mlx[cpu]==0.32.4" 2>/dev/null ||
    python3 -m pip install -q --break-system-packages "mlx[cpu]==0.32.4" 2>/dev/null ||
    echo "install-deps: mlx[cpu] could not be installed; python.real_producers_mlx will skip" >&2
fi
