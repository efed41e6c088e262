#!/usr/bin/env bash
# Downloads (does not install) the Debian 12 packages the device machine lacks into .devdeps/,
# which scripts/device_cuda.sh unpacks into a private prefix there (the device reaches no package
# registry). Carry the folder with the device tool: carry: [".devdeps"]. Keep .devdeps/ out of git
# (it is listed in .git/info/exclude by this script).
set -euo pipefail
cd "$(dirname "$0")/.."
PKGS=(googletest libgtest-dev libgmock-dev libcli11-dev libfmt-dev libfmt9 nlohmann-json3-dev
      libhwy-dev libhwy1 libdnnl-dev libdnnl2 libopenblas-dev libopenblas-pthread-dev libopenblas0
      libopenblas0-pthread libgfortran5 libgomp1 libquadmath0 libpkgconf3 pkgconf pkgconf-bin
      ocl-icd-libopencl1 ocl-icd-opencl-dev opencl-c-headers opencl-clhpp-headers)
mkdir -p .devdeps
grep -qx '/.devdeps/' .git/info/exclude 2>/dev/null || echo '/.devdeps/' >> .git/info/exclude
apt-get update -qq
(cd .devdeps && apt-get download "${PKGS[@]}")
ls .devdeps | wc -l
