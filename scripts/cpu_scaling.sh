#!/usr/bin/env bash
# scripts/cpu_scaling.sh -- the CPU backend at 1..N threads. `nvfp4 bench --backend cpu` runs the
# issue-5 shapes once per thread count t, pinned to t cores (taskset -c 0..t-1,
# NVFP4_NUM_THREADS=t; the dense baselines get the same count: OpenBLAS through the bench,
# oneDNN through OMP_NUM_THREADS). One table follows: per shape and variant, the cold median,
# GB/s, GFLOP/s, the share of the read ceiling measured in the same run, and the speed-up over
# 1 thread. It answers whether the kernels keep every core busy on hosts with more cores than
# the 2 of the dev and CI machines (docs/perf-cpu.md 36).
#
#   scripts/cpu_scaling.sh [NVFP4_BINARY] [OUT_DIR]
#   THREADS="1 2 4 8 16"  (default: 1, 2, 4, ... up to the CPUs this process may use)
#   SHAPES="1,4096,14336 8,4096,14336 512,4096,14336 1,4096,4096"  (the default)
#   BENCH_SECONDS=1  (sampling time per variant and mode)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CLI=${1:-$ROOT/build/nvfp4}
OUT=${2:-$ROOT/cpu-scaling-out}
[ -x "$CLI" ] || { echo "cpu_scaling.sh: no nvfp4 binary at $CLI (build it, or pass its path)" >&2; exit 2; }
command -v taskset >/dev/null || { echo "cpu_scaling.sh: needs taskset (Debian: util-linux)" >&2; exit 2; }
mkdir -p "$OUT"
# The CPUs this process may use, in order: thread count t runs on the first t of them.
command -v python3 >/dev/null || { echo "cpu_scaling.sh: needs python3 (the CPU list, the table)" >&2; exit 2; }
mapfile -t CPUS < <(python3 -c 'import os; print("\n".join(map(str, sorted(os.sched_getaffinity(0)))))')
if [ -z "${THREADS:-}" ]; then
  THREADS=""
  for ((t = 1; t <= ${#CPUS[@]}; t *= 2)); do THREADS="$THREADS $t"; done
fi
SHAPES=${SHAPES:-"1,4096,14336 8,4096,14336 512,4096,14336 1,4096,4096"}
shape_args=()
for s in $SHAPES; do shape_args+=(--shape "$s"); done
for t in $THREADS; do
  [ "$t" -le "${#CPUS[@]}" ] || { echo "cpu_scaling.sh: $t threads but only ${#CPUS[@]} CPUs available" >&2; exit 2; }
  list=$(IFS=,; echo "${CPUS[*]:0:$t}")
  echo "== $t thread(s) on CPUs $list ($(date -u +%H:%M:%S) UTC)"
  taskset -c "$list" env NVFP4_NUM_THREADS="$t" OMP_NUM_THREADS="$t" \
    "$CLI" bench --backend cpu "${shape_args[@]}" --seconds "${BENCH_SECONDS:-1}" --json "$OUT/threads_$t.json" >/dev/null
done
python3 - "$OUT" $THREADS <<'EOF'
import json, sys
out, threads = sys.argv[1], [int(t) for t in sys.argv[2:]]
runs = {t: json.load(open(f"{out}/threads_{t}.json")) for t in threads}
first = runs[threads[0]]
print(f"machine: {first['machine']['cpu']}, {first['machine']['cores']} CPUs online; commit {first['commit']}")
rows = {}
for t, j in runs.items():
    for r in j["shapes"]:
        if r["cold"] and r["variant"] not in ("read_floor", "launch_floor"):
            rows.setdefault((r["m"], r["n"], r["k"], r["variant"]), {})[t] = r
print(f"{'M':>5} {'N':>6} {'K':>6}  {'variant':<14} {'threads':>7} {'us median':>11} {'GB/s':>7} {'GFLOP/s':>8} {'% read':>7} {'x 1 thread':>10}  kernel")
for key in sorted(rows):
    base = rows[key].get(threads[0])
    for t in threads:
        r = rows[key].get(t)
        if r is None:
            continue
        speed = base["us_median"] / r["us_median"] if base else float("nan")
        print(f"{key[0]:>5} {key[1]:>6} {key[2]:>6}  {key[3]:<14} {t:>7} {r['us_median']:>11.1f} {r['gbps']:>7.1f} "
              f"{r['gflops']:>8.1f} {r['pct_ceiling']:>7.1f} {speed:>10.2f}  {r['kernel']}")
EOF
