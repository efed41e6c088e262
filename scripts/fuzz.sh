#!/usr/bin/env bash
# scripts/fuzz.sh [SECONDS] [libFuzzer args...] -- fuzz the checkpoint reader (tests/io/fuzz_checkpoint.cpp)
# under AddressSanitizer + UndefinedBehaviorSanitizer for SECONDS (default 600), starting from
# seeds the harness writes itself (one valid input per mode and layout) plus the corpus kept from
# earlier runs in ${NVFP4_FUZZ_DIR:-build-fuzz}/corpus. Not part of CI: the clang build of the
# library takes ~10 minutes on 2 cores, and a fuzzer finds things in proportion to its time.
# A finding stops the run with the sanitizer report and leaves the input as crash-*/oom-*/timeout-*
# in the build folder; reproduce with `build-fuzz/tests/io/fuzz_checkpoint FILE`.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-600}
shift || true
# clang (in install-deps' list) and libFuzzer, which lives in libclang-rt-dev; g++ has no
# coverage-guided fuzzer.
bash scripts/install-deps.sh libclang-rt-dev
BUILD=${NVFP4_FUZZ_DIR:-build-fuzz}
FLAGS="-fsanitize=address,undefined,fuzzer-no-link -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
CC=clang CXX=clang++ cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNVFP4_CUDA=OFF \
  -DNVFP4_FUZZ=ON -DCMAKE_CXX_FLAGS="$FLAGS" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build "$BUILD" --target fuzz_checkpoint -j "$(nproc)"
seeds=$BUILD/seeds
corpus=$BUILD/corpus
mkdir -p "$corpus"
"$BUILD/tests/io/fuzz_checkpoint" --write-seeds "$seeds"
# -rss_limit_mb: a header may claim any size; the reader must refuse before allocating it.
# Leaks are off for the same reason as scripts/sanitize_cpu.sh (the thread pool lives until exit).
cd "$BUILD"
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
  ./tests/io/fuzz_checkpoint corpus seeds -max_total_time="$secs" -rss_limit_mb=2048 -timeout=20 \
  -max_len=65536 -print_final_stats=1 "$@"
