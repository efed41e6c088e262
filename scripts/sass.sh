#!/usr/bin/env bash
# Registers, spills and the SASS instruction mix of a CUDA source file's kernels for sm_90a, on a
# machine without a GPU: what ptxas decided (e.g. where it scheduled a load, docs/perf-cuda.md 15)
# is visible before any device time is spent. The CUDA toolkit here has nvcc/ptxas but no
# cuobjdump; the PyPI wheels nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm (which cuobjdump
# calls) provide them, installed once into a venv.
#   scripts/sass.sh [FILE] [KERNEL_REGEX] [--dump]
#   e.g. scripts/sass.sh src/kernels/cuda/gemv_nvfp4_sm90_repacked.cu 'rp_kernelILi1ELi1E' --dump
#   NVFP4_SASS_DEFINES='-DNAME ...' compiles an experiment variant behind a macro.
# Prints per matching kernel: registers, spill bytes, instruction count, the 12 most frequent
# opcodes, and the main loop (the backward branch whose body holds the most HMMA/FFMA, else the
# longest): its length and opcode mix; --dump also prints the kernel's SASS.
set -euo pipefail
file=${1:-src/kernels/cuda/gemv_nvfp4_sm90_repacked.cu}
pattern=${2:-_kernel}
dump=${3:-}
root=$(git rev-parse --show-toplevel)
venv=${NVFP4_TOOLS_VENV:-$HOME/.cache/nvfp4-cuda-tools}
tool() { find "$venv" -name "$1" -type f 2>/dev/null | head -1; }
if [ -z "$(tool cuobjdump)" ] || [ -z "$(tool nvdisasm)" ]; then
  python3 -m venv "$venv" >/dev/null || { echo "sass.sh: python3 -m venv failed (apt-get install python3-venv)" >&2; exit 1; }
  "$venv/bin/pip" install -q nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm >/dev/null ||
    { echo "sass.sh: pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm failed" >&2; exit 1; }
fi
cuobjdump=$(tool cuobjdump)
PATH=$(dirname "$(tool nvdisasm)"):$PATH  # cuobjdump runs nvdisasm
export PATH
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nvcc -std=c++17 -O3 -DNDEBUG -DNVFP4_HAVE_CUDA=1 ${NVFP4_SASS_DEFINES:-} -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr \
  -I "$root/include" -I "$root/src" -I "$root" -cubin -Xptxas -v -o "$tmp/k.cubin" "$root/$file" 2> "$tmp/ptxas.txt" ||
  { cat "$tmp/ptxas.txt" >&2; echo "sass.sh: nvcc failed on $file" >&2; exit 1; }
"$cuobjdump" -sass "$tmp/k.cubin" > "$tmp/k.sass"
# ptxas -v: "Compiling entry function 'NAME'" then "... N bytes spill stores ..." and "Used R registers".
awk '/Compiling entry function/ {n = $0; sub(/.*function .?/, "", n); sub(/.? for .*/, "", n)}
     /spill stores/ {sp[n] = $5 "+" $9} /Used [0-9]+ registers/ {for (i = 1; i <= NF; i++) if ($i == "Used") rg[n] = $(i + 1)}
     END {for (k in rg) print k, rg[k], sp[k]}' "$tmp/ptxas.txt" > "$tmp/regs.txt"
awk '/Function :/ {f = $3} f && /^ +\/\*[0-9a-f]+\*\// {print > ("'"$tmp"'/f_" f)}' "$tmp/k.sass"
for f in "$tmp"/f_*; do
  k=${f#"$tmp"/f_}
  [[ "$k" =~ $pattern ]] || continue
  read -r _ regs spill < <(grep "^$k " "$tmp/regs.txt" || echo "$k ? ?")
  short=$(echo "$k" | sed -E 's/.*_cu_[0-9a-f]+[0-9]+//')
  ops=$(awk '{for (i = 2; i <= NF; i++) if ($i !~ /^@/) {print $i; break}}' "$f" | sed 's/\..*//; s/;//')
  echo "$short: $regs registers, spill bytes (stores+loads) $spill, $(echo "$ops" | wc -l) instructions"
  echo "$ops" | sort | uniq -c | sort -rn | head -12 | awk '{printf "  %6d %s\n", $1, $2}'
  python3 - "$f" <<'PY'
import collections, re, sys
ins = []
for line in open(sys.argv[1]):
    m = re.match(r"\s*/\*([0-9a-f]+)\*/\s+(.*?)\s*;", line)
    if m:
        ins.append((int(m.group(1), 16), m.group(2)))
pos = {a: i for i, (a, _) in enumerate(ins)}
best = None
for i, (a, text) in enumerate(ins):
    m = re.search(r"BRA (0x[0-9a-f]+)", text)
    target = int(m.group(1), 16) if m else None
    if target is None or target >= a or target not in pos:
        continue
    body = ins[pos[target]:i + 1]
    math = sum(("HMMA" in t) or ("FFMA" in t) for _, t in body)
    if best is None or (math, len(body)) > best[0]:
        best = ((math, len(body)), body)
if best:
    mix = collections.Counter()
    for _, t in best[1]:
        w = t.split()
        op = w[1] if w[0].startswith("@") and len(w) > 1 else w[0]
        mix[op.split(".")[0]] += 1
    print("  main loop: %d instructions: %s" % (len(best[1]), " ".join("%s %d" % kv for kv in mix.most_common())))
PY
  if [ "$dump" = --dump ]; then sed -E 's/^ +//' "$f"; fi
done
