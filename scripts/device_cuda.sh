#!/usr/bin/env bash
# scripts/device_cuda.sh -- the one script for the CUDA backend on a GPU machine: configure and
# build (Release, CUDA, Ninja), run the CUDA tests (GoogleTest JSON), compute-sanitizer memcheck
# and racecheck on the CUDA test binary, the autotuner, and the benchmark (JSON + table).
#
#   scripts/device_cuda.sh [all|test|portable|tune|bench|replay|sanitize|profile|ab|cpu|none]...  (default: all; in that order)
#   (none: no step, only NVFP4_EXTRA, e.g. an experiment binary from the prebuilt folder)
#   (portable: the CUDA tests again on a build of compute_80 PTX only, the code GPUs other than
#   Hopper run; NVFP4_PORTABLE_PREBUILT=DIR for binaries built elsewhere)
#   (profile: ncu on the repacked GEMV, NVFP4_PROFILE_SHAPES; not part of all)
#   (ab: this tree's `nvfp4` (B) against another build's (A, NVFP4_AB_BASE=DIR holding its
#   `nvfp4`), both in this run: `nvfp4 compare` per linear (NVFP4_AB_SHAPES, "M,N,K ...") and per
#   Llama-3-8B decode step (NVFP4_AB_BATCHES, "1 64 ..."); not part of all)
#
# `cpu` (not part of all) runs the CPU backend on this machine's host CPU, pinned to 2 cores
# (taskset, NVFP4_NUM_THREADS=2): the CPU tests (the AMX ones run where the host has AMX) and
# `nvfp4 bench --backend cpu` at the issue-5 shapes -> cpu_tests.json, cpu_bench.json.
#
# Writes under $OUT (default ./device-out; NVFP4_OUT_TAR=1 packs it into one device-out.tgz at the end): device.log (everything), tests.json, tuning.json,
# bench.json, replay.json (the main job: `nvfp4 bench`), replay_fused.json (the same with `--fuse`), compare_*.json (A/B on the GPU). Dependencies: when the machine lacks the Debian -dev packages (fmt, nlohmann-json,
# CLI11, Highway, GoogleTest, OpenBLAS, pkgconf), put their .deb files in .devdeps/ (ignored by
# git; scripts/fetch-device-deps.sh downloads them on a Debian 12 host) and carry that folder: they are unpacked
# with dpkg -x into a private prefix, never into /. With prebuilt binaries, carry only the folder
# scripts/prebuilt_cuda.sh writes (the binaries and their runtime packages in debs/).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/device-out}
BUILD=${NVFP4_BUILD_DIR:-/tmp/nvfp4-build-cuda}
DEPS=/tmp/nvfp4-deps
STEPS=("$@")
[ ${#STEPS[@]} -eq 0 ] && STEPS=(all)
KNOWN_STEPS=(all test portable tune bench replay sanitize profile ab cpu none)
for s in "${STEPS[@]}"; do  # a mistyped step would otherwise run nothing and report status 0
  [[ " ${KNOWN_STEPS[*]} " == *" $s "* ]] || { echo "device_cuda.sh: unknown step '$s' (${KNOWN_STEPS[*]})" >&2; exit 2; }
done
mkdir -p "$OUT"
# Only this call's files: on 2026-12-03 a device machine's $OUT still held an earlier call's CPU
# results (cpu_bench.json of 2026-12-02), which the tarball below would have passed off as this
# run's. Anything already there is moved to a sibling folder, and the log says so.
if [ -n "$(ls -A "$OUT" 2>/dev/null)" ]; then
  EARLIER="${OUT%/}.earlier-$(date +%Y%m%d-%H%M%S)"
  mkdir -p "$EARLIER" && find "$OUT" -mindepth 1 -maxdepth 1 -exec mv -t "$EARLIER" {} +
  MOVED_NOTE="moved the files an earlier call left in $OUT to $EARLIER"
fi
RUN_START=$(date -u +%Y-%m-%dT%H:%M:%SZ)
# A marker older than every file this call writes: at the end, anything in $OUT not newer than it
# is an earlier call's (see the end of the script).
RUN_MARK=$(mktemp /tmp/nvfp4-run-mark.XXXXXX)
LOG="$OUT/device.log"
exec > >(tee -a "$LOG") 2>&1
want() { for s in "${STEPS[@]}"; do [ "$s" = all ] || [ "$s" = "$1" ] && return 0; done; return 1; }
named() { for s in "${STEPS[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }  # steps outside `all`
say() { printf '\n=== %s (%s)\n' "$*" "$(date +%H:%M:%S)"; }
STATUS=0

say "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv 2>&1 | head -3
NVFP4_DRIVER=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
export NVFP4_DRIVER
# The device copy of the tree has no .git: pass NVFP4_COMMIT=<hash> in the run command.
# Without either the variable stays unset: the reports then say the build's commit or "unknown"
# (nvfp4 refuses an NVFP4_COMMIT that is not a commit, bench/machine.cpp).
[ -z "${NVFP4_COMMIT:-}" ] && NVFP4_COMMIT=$(git -C "$ROOT" rev-parse -q --verify HEAD 2>/dev/null)
[ -n "${NVFP4_COMMIT:-}" ] && export NVFP4_COMMIT || unset NVFP4_COMMIT
nvcc --version | tail -1; cmake --version | head -1
echo "commit ${NVFP4_COMMIT:-unknown (no .git; pass NVFP4_COMMIT)} driver $NVFP4_DRIVER"
[ -n "${MOVED_NOTE:-}" ] && echo "$MOVED_NOTE"

say "dependencies"
# .devdeps/ (every package: a build here needs the -dev ones), else the runtime packages that
# scripts/prebuilt_cuda.sh packs beside its binaries (NVFP4_PREBUILT/debs: enough to run them).
DEBDIR=""
if ls "$ROOT"/.devdeps/*.deb >/dev/null 2>&1; then DEBDIR=$ROOT/.devdeps
elif [ -n "${NVFP4_PREBUILT:-}" ] && ls "$NVFP4_PREBUILT"/debs/*.deb >/dev/null 2>&1; then DEBDIR=$NVFP4_PREBUILT/debs; fi
if [ -n "$DEBDIR" ]; then
  mkdir -p "$DEPS"
  for f in "$DEBDIR"/*.deb; do dpkg -x "$f" "$DEPS"; done
  # Not a one-letter name: the caller's environment reaches NVFP4_EXTRA, and an exported $A was
  # silently replaced by this path (2026-12-03).
  DEPS_LIB=$DEPS/usr/lib/x86_64-linux-gnu
  export CMAKE_PREFIX_PATH=$DEPS/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
  export LD_LIBRARY_PATH=$DEPS_LIB:$DEPS_LIB/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export PKG_CONFIG_PATH=$DEPS_LIB/openblas-pthread/pkgconfig:$DEPS_LIB/pkgconfig
  export PKG_CONFIG_SYSROOT_DIR=$DEPS  # the .pc files say prefix=/usr
  command -v pkg-config >/dev/null || export PATH=$DEPS/usr/bin:$PATH
  # Debian's openblas.pc is an alternatives link into /etc: point it at the unpacked copy.
  ln -sf "$DEPS_LIB/openblas-pthread/pkgconfig/openblas.pc" "$DEPS_LIB/pkgconfig/openblas.pc" 2>/dev/null || true
  echo "unpacked $(ls "$DEBDIR"/*.deb | wc -l) packages from $DEBDIR into $DEPS"
else
  echo "no .devdeps/ or NVFP4_PREBUILT/debs/: using the system's packages"
fi

# Binaries packed by scripts/prebuilt_cuda.sh (xz; gzip before 2026-12-07) are unpacked in place
# (xz, or Python's lzma where the image has no xz) and made executable.
unpack_prebuilt() {
  local dir=$1 f
  for f in "$dir"/*.xz; do
    [ -e "$f" ] || continue
    if command -v xz >/dev/null; then xz -dcf "$f" > "${f%.xz}"
    else python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$f" "${f%.xz}"; fi ||
      { echo "could not unpack $f"; return 1; }
    chmod +x "${f%.xz}" && rm -f "$f"
  done
  for f in "$dir"/*.gz; do
    [ -e "$f" ] || continue
    gunzip -f "$f" && chmod +x "${f%.gz}" || { echo "could not unpack $f"; return 1; }
  done
}
for d in "${NVFP4_PREBUILT:-}" "${NVFP4_AB_BASE:-}" "${NVFP4_PORTABLE_PREBUILT:-}"; do
  [ -z "$d" ] || unpack_prebuilt "$d" || exit 1
done

# NVFP4_PREBUILT=DIR: use nvfp4_test_cuda / nvfp4_bench_cuda / nvfp4 built elsewhere (same
# Debian 12 toolchain; scripts/prebuilt_cuda.sh makes and packs them, unpacked above); saves the
# device-side build.
# Without it: configure + build here. A DIR whose binaries are missing or do not start is an
# error, not a silent fallback to a build (2026-12-02: a folder without the test binary fell
# back, and the build stopped at CMake for want of a dependency).
BB=""
if [ -n "${NVFP4_PREBUILT:-}" ]; then
  for b in nvfp4_test_cuda nvfp4_bench_cuda nvfp4; do
    if [ ! -x "$NVFP4_PREBUILT/$b" ]; then
      echo "NVFP4_PREBUILT=$NVFP4_PREBUILT: $b is missing or not executable (packed by scripts/prebuilt_cuda.sh?)"; exit 1
    fi
    if ldd "$NVFP4_PREBUILT/$b" | grep "not found"; then
      echo "NVFP4_PREBUILT=$NVFP4_PREBUILT: $b needs the libraries above (carry .devdeps?)"; exit 1
    fi
  done
  if ! "$NVFP4_PREBUILT/nvfp4_test_cuda" --gtest_list_tests >/dev/null 2>&1; then
    echo "NVFP4_PREBUILT=$NVFP4_PREBUILT: nvfp4_test_cuda does not start:"
    "$NVFP4_PREBUILT/nvfp4_test_cuda" --gtest_list_tests 2>&1 | tail -3; exit 1
  fi
  say "prebuilt binaries from $NVFP4_PREBUILT"
  TB=$NVFP4_PREBUILT/nvfp4_test_cuda
  TT=$NVFP4_PREBUILT/nvfp4_test_cuda_threads
  BB=$NVFP4_PREBUILT/nvfp4_bench_cuda
  CLI=$NVFP4_PREBUILT/nvfp4
  CPUT="$NVFP4_PREBUILT/test_matmul_cpu $NVFP4_PREBUILT/test_gemv_amx $NVFP4_PREBUILT/test_repack_cpu"
  CPB=$NVFP4_PREBUILT/cpu_paths_bench
  EX=$NVFP4_PREBUILT/decode_linear
else
  say "configure + build"
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNVFP4_CUDA=ON || exit 1
  ninja -C "$BUILD" nvfp4_test_cuda nvfp4_test_cuda_threads nvfp4_bench_cuda decode_linear || exit 1
  ninja -C "$BUILD" nvfp4_cli || echo "the nvfp4 CLI did not build (other parts in progress?): tuner runs through nvfp4_bench_cuda --tune"
  TB=$(find "$BUILD" -name nvfp4_test_cuda -type f -perm -u+x | head -1)
  TT=$BUILD/tests/cuda/nvfp4_test_cuda_threads
  BB=$BUILD/tests/cuda/nvfp4_bench_cuda
  CLI=$BUILD/nvfp4
  ninja -C "$BUILD" test_matmul_cpu test_gemv_amx test_repack_cpu cpu_paths_bench || true
  CPUT="$BUILD/tests/cpu/test_matmul_cpu $BUILD/tests/cpu/test_gemv_amx $BUILD/tests/cpu/test_repack_cpu"
  CPB=$BUILD/tests/cpu/cpu_paths_bench
  EX=$BUILD/examples/decode_linear
fi
say "SASS check (16-byte weight loads, no local memory)"
if command -v cuobjdump >/dev/null; then
  # Hopper's code only: the binaries also hold sm_80 code (no PDL there), which these checks are not about.
  cuobjdump -sass -arch sm_90a "$TB" > /tmp/sass.txt 2>/dev/null
  awk '/Function :/ {f=$3} /LDG.E.128.CONSTANT|LDG.E.64.CONSTANT|LDG.E.128|LDL|STL|HMMA/ {
         for (i=1;i<=NF;i++) if ($i ~ /^(LDG|LDL|STL|HMMA)/) {c[f" "$i]++; break}}
       END {for (k in c) print c[k], k}' /tmp/sass.txt | grep gemv_nvfp4 | sort -k2 | head -60
  # Instruction mix of the weights-as-A kernel (bf16, 32 rows/warp, M <= 8): whole function.
  awk '/Function :.*gemv_nvfp4_wa_kernelILb0ELi2ELi1E/ {on=1; next} /Function :/ {on=0}
       on && /^ +\/\*[0-9a-f]+\*\// {for (i = 2; i <= NF; i++) if ($i !~ /^@/) {print $i; break}}' /tmp/sass.txt | sed 's/\..*//' | sort | uniq -c | sort -rn > "$OUT/sass_wa_mix.txt"
  head -25 "$OUT/sass_wa_mix.txt"
  # Same for the repacked kernel (16 rows/warp, M <= 8, no PDL; bf16, fp16 rows on bf16 codes, and
  # fp16 rows on fp16 codes): docs/perf-cuda.md 7, 48, 49. Template arguments: RT, NB, EARLY, RpOps.
  for v in "rp:ILi1ELi1ELb0ELNS1_5RpOpsE0E" "rp_f16:ILi1ELi1ELb0ELNS1_5RpOpsE1E" "rp_f16codes:ILi1ELi1ELb0ELNS1_5RpOpsE2E"; do
    name=${v%%:*}; sig=${v#*:}
    awk -v s="gemv_nvfp4_rp_kernel$sig" '/Function :/ {on = index($0, s) > 0; next}
         on && /^ +\/\*[0-9a-f]+\*\// {for (i = 2; i <= NF; i++) if ($i !~ /^@/) {print $i; break}}' /tmp/sass.txt |
      sed 's/\..*//' | sort | uniq -c | sort -rn > "$OUT/sass_${name}_mix.txt"
    echo "repacked kernel $name (r16, m8):"; head -25 "$OUT/sass_${name}_mix.txt"
  done
  # PDL order (docs/perf-cuda.md 18): the default rp kernels (EARLY, the third template argument,
  # Lb0) must wait (ACQBULK = griddepcontrol.wait) before any global load; the early-weights ones
  # (Lb1) must issue their first weight loads before it (ptxas moves ld.global.nc below the wait).
  awk '/Function :/ {if (f != "") print f, pre, seen; f = ""; if ($3 ~ /gemv_nvfp4_rp_kernel/) {f = $3; pre = 0; seen = 0}; next}
       f != "" && /ACQBULK/ {seen = 1}
       f != "" && !seen && /LDG/ {pre++}
       END {if (f != "") print f, pre, seen}' /tmp/sass.txt > /tmp/pdl_order.txt
  while read -r fn pre seen; do
    if [[ "$fn" =~ rp_kernelILi[0-9]+ELi[0-9]+ELb1E ]]; then ok=$([ "$seen" = 1 ] && [ "$pre" -gt 0 ] && echo yes || echo no)
    else ok=$([ "$seen" = 1 ] && [ "$pre" = 0 ] && echo yes || echo no); fi
    echo "PDL order $fn: $pre loads before the wait: $ok"
    [ "$ok" = yes ] || STATUS=1
  done < /tmp/pdl_order.txt
fi

if want test; then
  say "CUDA tests"
  "$TB" --gtest_output=json:"$OUT/tests.json" || STATUS=1
  # Several host threads and every GPU of the machine (its device test skips with one GPU).
  if [ -x "${TT:-}" ]; then "$TT" --gtest_output=json:"$OUT/tests_threads.json" || STATUS=1
  else echo "no nvfp4_test_cuda_threads at ${TT:-?}"; STATUS=1; fi
  # The example an engine builder reads first (examples/decode_linear.cpp), on the GPU.
  if [ -x "${EX:-}" ]; then "$EX" || STATUS=1
  else echo "no examples/decode_linear at ${EX:-?} (older prebuilt folder?): not run"; fi
fi

if want portable; then
  # The kernels as GPUs before Hopper (and after it) get them: a build whose only device code is
  # compute_80 PTX (NVFP4_CUDA_GENCODE), which the driver compiles for this GPU on first use, and
  # where cuda::hopper_paths() is off (no wgmma GEMM, plain launches). The same test binaries.
  say "portable kernels (compute_80 PTX, JIT-compiled here): CUDA tests"
  if [ -n "${NVFP4_PORTABLE_PREBUILT:-}" ]; then
    PTB=$NVFP4_PORTABLE_PREBUILT/nvfp4_test_cuda
    PTT=$NVFP4_PORTABLE_PREBUILT/nvfp4_test_cuda_threads
  else
    cmake -S "$ROOT" -B "$BUILD-portable" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNVFP4_CUDA=ON \
      "-DNVFP4_CUDA_GENCODE=-gencode=arch=compute_80,code=compute_80" >/dev/null &&
      ninja -C "$BUILD-portable" nvfp4_test_cuda nvfp4_test_cuda_threads || STATUS=1
    PTB=$BUILD-portable/tests/cuda/nvfp4_test_cuda
    PTT=$BUILD-portable/tests/cuda/nvfp4_test_cuda_threads
  fi
  if command -v cuobjdump >/dev/null; then
    echo "device code in $PTB: $(cuobjdump -lelf "$PTB" 2>/dev/null | grep -c 'sm_') cubins, $(cuobjdump -lptx "$PTB" 2>/dev/null | grep -c 'sm_80') compute_80 PTX"
  fi
  "$PTB" --gtest_output=json:"$OUT/tests_portable.json" || STATUS=1
  "$PTT" --gtest_output=json:"$OUT/tests_portable_threads.json" || STATUS=1
  # NVFP4_PORTABLE_BENCH_SHAPES=MxNxK,...: the shape bench on the portable build too (this GPU
  # running the code other GPUs get: it says nothing about their speed).
  if [ -n "${NVFP4_PORTABLE_BENCH_SHAPES:-}" ]; then
    PBB=${NVFP4_PORTABLE_PREBUILT:+$NVFP4_PORTABLE_PREBUILT/nvfp4_bench_cuda}
    if [ -z "$PBB" ]; then ninja -C "$BUILD-portable" nvfp4_bench_cuda || STATUS=1; PBB=$BUILD-portable/tests/cuda/nvfp4_bench_cuda; fi
    NVFP4_BENCH_LEGACY=0 "$PBB" --out "$OUT/bench_portable.json" --shapes "$NVFP4_PORTABLE_BENCH_SHAPES" || STATUS=1
  fi
fi

if want tune; then
  say "autotune"
  # NVFP4_TUNE_LAYOUT=canonical|repacked|both (default both; the bench's fallback tunes both).
  if [ -x "$CLI" ]; then "$CLI" tune --layout "${NVFP4_TUNE_LAYOUT:-both}" --out "$OUT/tuning.json" || STATUS=1
  else "$BB" --tune "$OUT/tuning.json" || STATUS=1; fi
fi

if want bench; then
  say "benchmark (bf16, cold weights, built-in table; NVFP4_BENCH_LEGACY=1 adds the first kernel side by side)"
  # NVFP4_BENCH_SHAPES=MxNxK,... narrows the shapes (default: the driver's list); bf16 rows at
  # every M also time the repacked weights (variant nvfp4_repacked: the GEMV, or from 25 rows the
  # repacked GEMM, then also nvfp4_repacked_gemv16) side by side.
  # With a fresh $OUT/tuning.json (step tune), every repacked row is also timed with that table's
  # tile (variant nvfp4_repacked_tuned): same weights, rotation and run as the built-in tile.
  TUNED=""
  [ -f "$OUT/tuning.json" ] && TUNED="$OUT/tuning.json"
  NVFP4_BENCH_TUNED=$TUNED NVFP4_BENCH_LEGACY=${NVFP4_BENCH_LEGACY:-1} "$BB" --out "$OUT/bench.json" \
    ${NVFP4_BENCH_SHAPES:+--shapes "$NVFP4_BENCH_SHAPES"} || STATUS=1
  if [ "${NVFP4_BENCH_OTHER_DTYPES:-1}" = 1 ]; then
    say "benchmark fp16 / fp32 activations (M=1, 16 at one shape)"
    "$BB" --dtype f16 --shapes 1x16384x16384,16x16384x16384 || STATUS=1
    "$BB" --dtype f32 --shapes 1x16384x16384,16x16384x16384 || STATUS=1
  fi
fi
if want replay; then
  say "main job: nvfp4 bench (decode + prefill replay, NVFP4 vs cuBLAS bf16)"
  if [ -x "$CLI" ]; then
    ( time "$CLI" bench --json "$OUT/replay.json" ) || STATUS=1
    say "the same with q/k/v and gate/up fused into one matmul each (as vLLM and most engines run them)"
    "$CLI" bench --fuse --json "$OUT/replay_fused.json" || STATUS=1
    say "A/B on the GPU: A against A must be 'no detectable difference'"
    "$CLI" compare --a self --b self --mode decode --rounds 20 --json "$OUT/compare_aa.json" || STATUS=1
    say "A/B on the GPU: B does 3% more work (an extra linear of 3% of the weights) must be 'slower'"
    "$CLI" compare --a self --b "self --extra-work 0.03" --mode decode --rounds 20 \
      --json "$OUT/compare_3pct.json" || STATUS=1
    say "A/B on the GPU: canonical layout (A) against weights repacked for the GEMV (B)"
    "$CLI" compare --a "self --canonical" --b self --mode decode --rounds 12 \
      --json "$OUT/compare_repack.json" || STATUS=1
    say "A/B on the GPU: repacked GEMVs launched plainly (A) and overlapped (B), both reading weights after the wait"
    "$CLI" compare --a "self --plain-launch" --b "self --no-early-weights" --mode decode --rounds 12 \
      --json "$OUT/compare_pdl.json" || STATUS=1
    say "A/B on the GPU: weights read after the PDL wait (A, --no-early-weights) and before it where tuned (B, the default)"
    "$CLI" compare --a "self --no-early-weights" --b self --mode decode --rounds 12 --json "$OUT/compare_early.json" || STATUS=1
    "$CLI" compare --a "self --fuse --no-early-weights" --b "self --fuse" --mode decode --rounds 12 \
      --json "$OUT/compare_early_fused.json" || STATUS=1
    say "batched decode: B sequences per step (every linear at M = B), NVFP4 vs cuBLAS bf16"
    for b in 4 8 16 32 64 128; do "$CLI" bench --mode decode --batch "$b" --json "$OUT/replay_decode_b$b.json" || STATUS=1; done
    say "A/B on the GPU: batched decode (B = 4), weights read after the PDL wait (A) and before it where tuned (B)"
    "$CLI" compare --a "self --batch 4 --no-early-weights" --b "self --batch 4" --mode decode --rounds 12 \
      --json "$OUT/compare_early_b4.json" || STATUS=1
  else
    echo "no nvfp4 CLI at $CLI: replay skipped"; STATUS=1
  fi
fi
if want sanitize; then
  if command -v compute-sanitizer >/dev/null; then
    say "compute-sanitizer memcheck"
    # Left out: the longest sweeps (every tile, one-hot), which the plain run above covers, and the
    # tests that make a cudaMalloc fail on purpose (the tuner out of memory, a 2^50-byte
    # DeviceBuffer), since memcheck counts the refused call as an error (2ed2827's run, 2026-12-03).
    timeout "${SAN_TIMEOUT:-180}" compute-sanitizer --tool memcheck --error-exitcode 3 "$TB" --gtest_brief=1 \
      --gtest_filter="${MEMCHECK_FILTER:--CudaGemv.EveryTile*:CudaTuning.Autotune*:CudaOwned.DeviceBuffer*:CudaRgemm.OneHot*:CudaWgemm.OneHot*}" || { echo "memcheck FAILED rc=$?"; STATUS=1; }
    say "compute-sanitizer racecheck"
    timeout "${SAN_TIMEOUT:-150}" compute-sanitizer --tool racecheck --error-exitcode 3 "$TB" --gtest_brief=1 \
      --gtest_filter="${RACECHECK_FILTER:-CudaGemv.EveryTile*:CudaGemv.Strided*:CudaRepack.WideLaunch*:CudaRgemm.Small*:CudaWgemm.Small*:CudaWgemm.Epilogue*}" || { echo "racecheck FAILED rc=$?"; STATUS=1; }
  else
    echo "compute-sanitizer not found"
  fi
fi
if named ab; then
  # A kernel change against the build before it, in one run on one machine (lent machines differ
  # by ~2%): A B B A rounds, the median ratio's 95% CI and a verdict per workload (bench/compare.h).
  # Replaces the ad hoc NVFP4_EXTRA loops of earlier sessions (docs/perf-cuda.md 34).
  ab_compare() {  # label, JSON file under $OUT, the workload's arguments
    local label=$1 json=$2
    shift 2
    say "A/B $label: A $NVFP4_AB_BASE/nvfp4, B this tree"
    "$CLI" compare --a "$NVFP4_AB_BASE/nvfp4" --b self "$@" --rounds "${NVFP4_AB_ROUNDS:-12}" --json "$OUT/$json" |
      grep -E "B/A|verdict" || STATUS=1
  }
  if [ -x "${NVFP4_AB_BASE:-}/nvfp4" ]; then
    for s in ${NVFP4_AB_SHAPES:-}; do ab_compare "per linear $s" "ab_shape_${s//,/x}.json" --backend cuda --shape "$s"; done
    for b in ${NVFP4_AB_BATCHES:-}; do ab_compare "Llama-3-8B decode, B = $b" "ab_decode_b$b.json" --mode decode --batch "$b"; done
  else
    echo "ab: NVFP4_AB_BASE must name a folder with the other build's nvfp4"; STATUS=1
  fi
fi
if named profile && command -v ncu >/dev/null; then
  # One launch of the repacked GEMV per shape (after the warm-up), clocks left alone: duration
  # without the graph's launch gaps, DRAM throughput, and how evenly the SMs were busy.
  for s in ${NVFP4_PROFILE_SHAPES:-1x16384x16384}; do
    say "ncu: repacked GEMV, $s bf16"
    timeout 200 ncu --clock-control none -k regex:rp_kernel --launch-skip 3 -c 1 --section SpeedOfLight \
      --section LaunchStats --section Occupancy --section WorkloadDistribution --section MemoryWorkloadAnalysis \
      --section SchedulerStats --section WarpStateStats \
      --metrics sm__cycles_active.max,sm__cycles_active.avg,sm__cycles_active.min,gpu__time_duration.sum,dram__bytes_read.sum \
      "$BB" --shapes "$s" 2>&1 | grep -v "^==PROF==" | grep -v "^ *$" | tail -140
  done
fi
if named cpu; then
  say "CPU backend on the host CPU, 2 cores (taskset -c 0,1)"
  lscpu | grep -E "Model name|^CPU\(s\)|L3" ; grep -o -w 'amx_bf16\|avx512_fp16\|avx512_bf16' /proc/cpuinfo | sort -u | tr '\n' ' '; echo
  PIN=(taskset -c "0,1" env NVFP4_NUM_THREADS=2)
  for t in ${CPUT:-}; do
    if [ -x "$t" ]; then "${PIN[@]}" "$t" --gtest_brief=1 --gtest_output=json:"$OUT/cpu_$(basename "$t").json" || STATUS=1
    else echo "no CPU test binary $t"; STATUS=1; fi
  done
  # Kernel paths side by side in one process (tests/cpu/cpu_paths_bench.cpp), NVFP4_CPU_PATHS
  # = its arguments (e.g. "bf16 cold reps=30 2,4096,14336 gemv_bf16 gemv_amx stream").
  if [ -n "${NVFP4_CPU_PATHS:-}" ] && [ -x "${CPB:-}" ]; then "${PIN[@]}" "$CPB" $NVFP4_CPU_PATHS || STATUS=1; fi
  # M-scaling, paired (this host's bandwidth drifts): M=1 (A) against M (B), NVFP4_CPU_COMPARE_MS.
  for m in ${NVFP4_CPU_COMPARE_MS:-}; do
    "${PIN[@]}" "$CLI" compare --backend cpu --a "self --shape 1,4096,14336" --b "self --shape $m,4096,14336" \
      --rounds "${NVFP4_CPU_COMPARE_ROUNDS:-12}" --json "$OUT/cpu_compare_m$m.json" | grep -E "B/A|verdict" || STATUS=1
  done
  # Issue 5's shapes: M = 1 cold/hot, M = 2..8 (same weights), M = 512 (prefill, AMX where present).
  "${PIN[@]}" "$CLI" bench --backend cpu ${NVFP4_CPU_SHAPES:---shape 1,4096,14336 --shape 2,4096,14336 --shape 4,4096,14336 --shape 8,4096,14336 --shape 512,4096,14336} \
    --json "$OUT/cpu_bench.json" || STATUS=1
fi
say "done, status $STATUS"
# NVFP4_EXTRA='commands': run after the steps, in this script's environment (the unpacked
# dependencies' library path; $OUT, $CLI, $TB, $BB exported): one-off A/Bs against other binaries
# without a second device call. Their output lands in device.log.
if [ -n "${NVFP4_EXTRA:-}" ]; then
  say "extra commands (NVFP4_EXTRA)"
  OUT=$OUT CLI=$CLI TB=$TB BB=$BB bash -c "$NVFP4_EXTRA" || STATUS=1
fi
# run.json: what this call was (bench/results keeps results with date, GPU, commit and command;
# the gtest JSONs carry none of them). Written by hand: the device machine may lack python/jq.
json_str() { local v=${1//\\/\\\\}; v=${v//\"/\\\"}; printf '"%s"' "$v"; }
{
  printf '{\n  "schema": "nvfp4-device-run/1",\n'
  printf '  "date_start": %s,\n  "date_end": %s,\n' "$(json_str "$RUN_START")" "$(json_str "$(date -u +%Y-%m-%dT%H:%M:%SZ)")"
  printf '  "gpu": %s,\n' "$(json_str "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)")"
  printf '  "driver": %s,\n  "commit": %s,\n' "$(json_str "${NVFP4_DRIVER:-}")" "$(json_str "${NVFP4_COMMIT:-unknown}")"
  printf '  "command": %s,\n' "$(json_str "scripts/device_cuda.sh ${STEPS[*]}")"
  printf '  "prebuilt": %s,\n  "status": %d\n}\n' "$(json_str "${NVFP4_PREBUILT:-built here}")" "$STATUS"
} > "$OUT/run.json"
# NVFP4_OUT_TAR=1: pack everything under $OUT into $OUT/device-out.tgz and keep only that: the
# device tool returns a limited number of files per call (a full run writes ~20; on 2026-12-01 one
# run's replay JSONs and log did not come back and had to be measured again).
# On 2026-12-03 (13:11 UTC) $OUT was empty when this script started, yet the tarball held CPU
# results of 00:25 and 03:22 UTC that day: files can appear there from outside the call. Anything
# not written after RUN_MARK is moved aside here, so the results are this call's alone.
STALE=$(find "$OUT" -mindepth 1 -type f ! -newer "$RUN_MARK" | wc -l)
if [ "$STALE" -gt 0 ]; then
  EARLIER="${OUT%/}.earlier-$(date +%Y%m%d-%H%M%S)-end"
  mkdir -p "$EARLIER"
  find "$OUT" -mindepth 1 -type f ! -newer "$RUN_MARK" -exec mv -t "$EARLIER" {} +
  find "$OUT" -mindepth 1 -type d -empty -delete
  echo "moved $STALE files older than this call out of $OUT into $EARLIER" | tee -a "$LOG"
fi
rm -f "$RUN_MARK"
if [ "${NVFP4_OUT_TAR:-0}" = 1 ]; then
  tar czf /tmp/nvfp4-device-out.tgz -C "$OUT" . && find "$OUT" -mindepth 1 -delete && mv /tmp/nvfp4-device-out.tgz "$OUT/device-out.tgz"
fi
exit $STATUS
