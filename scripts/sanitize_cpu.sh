#!/usr/bin/env bash
# Every host test under AddressSanitizer + UndefinedBehaviorSanitizer (no CUDA: compute-sanitizer
# covers the GPU side in scripts/device_cuda.sh). Not part of CI: on 2 cores the instrumented
# build takes ~13 minutes and the tests ~3.5 (2026-12-01, Emerald Rapids dev VM: 132 tests, no
# error; the timing test BenchCompare.DetectsThreePercentMoreWork skips itself there).
#   scripts/sanitize_cpu.sh [ctest args...]     (build folder: ${NVFP4_ASAN_DIR:-build-asan})
#   scripts/sanitize_cpu.sh --thread            ThreadSanitizer instead, on the test that calls the
#                                               CPU backend from 4 threads at once (test_threads_cpu;
#                                               build ~5 minutes, run ~20 s; folder build-tsan)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
if [ "${1:-}" = --thread ]; then
  BUILD=${NVFP4_TSAN_DIR:-build-tsan}
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNVFP4_CUDA=OFF \
    -DCMAKE_CXX_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" >/dev/null
  cmake --build "$BUILD" --target test_threads_cpu -j "$(nproc)"
  TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1} "$BUILD/tests/cpu/test_threads_cpu"
  exit
fi
BUILD=${NVFP4_ASAN_DIR:-build-asan}
FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNVFP4_CUDA=OFF \
  -DCMAKE_CXX_FLAGS="$FLAGS" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build "$BUILD" -j "$(nproc)"
# Leaks are off: the thread pool and the per-thread buffers live until exit by design.
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
  ctest --test-dir "$BUILD" --output-on-failure -j "$(nproc)" "$@"
