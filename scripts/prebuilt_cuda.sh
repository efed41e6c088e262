#!/usr/bin/env bash
# scripts/prebuilt_cuda.sh [BUILD_DIR] [OUT_DIR] -- build here the binaries that
# scripts/device_cuda.sh runs on a GPU machine (nvfp4_test_cuda, nvfp4_test_cuda_threads,
# nvfp4_bench_cuda, nvfp4, the example decode_linear, and the CPU tests and cpu_paths_bench its
# `cpu` step runs), strip and xz them into OUT_DIR (default build-prebuilt: ignored by git, so a
# device call can carry it) with the runtime .deb files they need in OUT_DIR/debs, and print the
# command that uses them there (device_cuda.sh unpacks both).
# Why: the device machine's time is the scarce part, and a build there needs the -dev packages;
# compiled here (same Debian 12 toolchain) the binaries are ~1.8 MB each with xz -9e. The device
# tool carries at most 64 MiB: with gzip (28 MB) and all of .devdeps (22 MB) beside the tree
# (~29 MB) a call could not carry every binary (2026-12-07); xz (16 MB) and the runtime packages
# alone (15 MB) fit.
#   BUILD_DIR: a configured CUDA build folder (default build-lead-cuda; configured if missing:
#   cmake -G Ninja -DCMAKE_BUILD_TYPE=Release -DNVFP4_CUDA=ON).
#   NVFP4_PACK_DEBS=0: leave the packages out (a second folder for an A/B: NVFP4_AB_BASE).
set -euo pipefail
root=$(git rev-parse --show-toplevel)
build=${1:-$root/build-lead-cuda}
out=${2:-$root/build-prebuilt}
# The runtime packages of the binaries' shared libraries (oneDNN, fmt, Highway, OpenBLAS and
# theirs), as fetched by scripts/fetch-device-deps.sh; the device image has none of them.
RUNTIME_DEBS=(libdnnl2 libfmt9 libgfortran5 libgomp1 libhwy1 libopenblas0 libopenblas0-pthread libquadmath0
              ocl-icd-libopencl1)
[ -f "$build/build.ninja" ] || cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNVFP4_CUDA=ON >/dev/null
ninja -C "$build" nvfp4_test_cuda nvfp4_test_cuda_threads nvfp4_bench_cuda nvfp4_cli decode_linear test_matmul_cpu test_gemv_amx test_repack_cpu cpu_paths_bench >/dev/null
rm -rf "$out"
mkdir -p "$out"
for b in nvfp4_test_cuda nvfp4_test_cuda_threads nvfp4_bench_cuda nvfp4 decode_linear test_matmul_cpu test_gemv_amx test_repack_cpu cpu_paths_bench; do
  f=$(find "$build" -name "$b" -type f -perm -u+x | head -1)
  [ -n "$f" ] || { echo "prebuilt_cuda.sh: $b was not built in $build" >&2; exit 1; }
  cp "$f" "$out/$b"
done
strip "$out"/*
xz -9e -T0 "$out"/*
if [ "${NVFP4_PACK_DEBS:-1}" != 0 ]; then
  mkdir -p "$out/debs"
  for p in "${RUNTIME_DEBS[@]}"; do
    d=$(ls "$root"/.devdeps/"${p}"_*.deb 2>/dev/null | head -1)
    [ -n "$d" ] || { echo "prebuilt_cuda.sh: no .devdeps/${p}_*.deb (run scripts/fetch-device-deps.sh)" >&2; exit 1; }
    cp "$d" "$out/debs/"
  done
fi
commit=$(git -C "$root" rev-parse --short HEAD)
dirty=$(git -C "$root" status --porcelain --untracked-files=no | grep -q . && echo "+changes" || true)
rel=${out#"$root"/}
echo "$(du -sh "$out" | cut -f1) in $out (HEAD $commit$dirty). On the device (carry [\"$rel\"], not .devdeps):"
echo "  NVFP4_COMMIT=$commit$dirty NVFP4_PREBUILT=\$PWD/$rel NVFP4_OUT_TAR=1 OUT=\$OUT bash scripts/device_cuda.sh test sanitize"
