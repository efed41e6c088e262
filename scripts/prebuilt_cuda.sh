#!/usr/bin/env bash
# scripts/prebuilt_cuda.sh [BUILD_DIR] [OUT_DIR] -- build here the binaries that
# scripts/device_cuda.sh runs on a GPU machine (nvfp4_test_cuda, nvfp4_test_cuda_threads,
# nvfp4_bench_cuda, nvfp4, the example decode_linear, and the CPU tests and cpu_paths_bench its `cpu` step runs), strip and gzip them into OUT_DIR (default build-prebuilt: ignored by git,
# so a device call can carry it), and print the command that unpacks and uses them there.
# Why: the device machine's time is the scarce part, and a build there needs the -dev packages;
# compiled here (same Debian 12 toolchain) the binaries are ~3 MB each gzipped.
#   BUILD_DIR: a configured CUDA build folder (default build-lead-cuda; configured if missing:
#   cmake -G Ninja -DCMAKE_BUILD_TYPE=Release -DNVFP4_CUDA=ON).
set -euo pipefail
root=$(git rev-parse --show-toplevel)
build=${1:-$root/build-lead-cuda}
out=${2:-$root/build-prebuilt}
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
gzip -f "$out"/*
commit=$(git -C "$root" rev-parse --short HEAD)
dirty=$(git -C "$root" status --porcelain --untracked-files=no | grep -q . && echo "+changes" || true)
echo "$(du -sh "$out" | cut -f1) in $out (HEAD $commit$dirty). On the device (carry .devdeps and ${out#"$root"/}):"
echo "  cd ${out#"$root"/} && gunzip -f *.gz && chmod +x * && cd .. && NVFP4_COMMIT=$commit$dirty NVFP4_PREBUILT=\$PWD/${out#"$root"/} NVFP4_OUT_TAR=1 OUT=\$OUT bash scripts/device_cuda.sh test sanitize"
