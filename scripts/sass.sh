#!/usr/bin/env bash
# Registers, spills and the SASS instruction mix of a CUDA source file's kernels for sm_90a, on a
# machine without a GPU: what ptxas decided (e.g. where it scheduled a load, docs/perf-cuda.md 15)
# is visible before any device time is spent. The CUDA toolkit here has nvcc/ptxas but no
# cuobjdump; the PyPI wheels nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm (which cuobjdump
# calls) provide them, installed once into a venv.
#   scripts/sass.sh [FILE] [KERNEL_REGEX] [--dump]
#   e.g. scripts/sass.sh src/kernels/cuda/gemv_nvfp4_sm90.cu 'rp_kernelILi1ELi1E' --dump
# Prints per matching kernel: registers, spill bytes, instruction count and the 12 most frequent
# opcodes; --dump also prints the kernel's SASS.
set -euo pipefail
file=${1:-src/kernels/cuda/gemv_nvfp4_sm90.cu}
pattern=${2:-_kernel}
dump=${3:-}
root=$(git rev-parse --show-toplevel)
venv=${NVFP4_TOOLS_VENV:-$HOME/.cache/nvfp4-cuda-tools}
tool() { find "$venv" -name "$1" -type f 2>/dev/null | head -1; }
if [ -z "$(tool cuobjdump)" ] || [ -z "$(tool nvdisasm)" ]; then
  python3 -m venv "$venv" >/dev/null
  "$venv/bin/pip" install -q nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm >/dev/null
fi
cuobjdump=$(tool cuobjdump)
export PATH=$(dirname "$(tool nvdisasm)"):$PATH  # cuobjdump runs nvdisasm
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nvcc -std=c++17 -O3 -DNDEBUG -DNVFP4_HAVE_CUDA=1 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr \
  -I "$root/include" -I "$root/src" -I "$root" -cubin -Xptxas -v -o "$tmp/k.cubin" "$root/$file" 2> "$tmp/ptxas.txt"
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
  [ "$dump" = --dump ] && sed -E 's/^ +//' "$f"
done
