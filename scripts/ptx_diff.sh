#!/usr/bin/env bash
# Compares the PTX of a CUDA source file's kernels between a git revision and the working tree,
# with register numbers and labels normalised away, so an edit meant to leave a kernel alone can
# be checked for free before any device time is spent (docs/perf-cuda.md 14: a refactor that kept
# the registers still moved the M = 1 GEMV by 5%). Needs nvcc; runs on any machine.
#   scripts/ptx_diff.sh REV [FILE] [KERNEL_REGEX]
#   e.g. scripts/ptx_diff.sh HEAD~1 src/kernels/cuda/gemv_nvfp4_sm90_repacked.cu rp_kernel
# Prints, per matching kernel, the number of differing normalised lines (0: same code).
# PTX_DIFF_RENAME: a sed expression applied to the new PTX first, for a kernel whose mangled
# name changed (e.g. a template parameter added: PTX_DIFF_RENAME='s/ELb0EEEv/EEEv/g').
# PTX_DIFF_OLD_FILE: the file's path at REV when it differs (the repacked kernel lived in
# gemv_nvfp4_sm90.cu before 2026-12-01: PTX_DIFF_OLD_FILE=src/kernels/cuda/gemv_nvfp4_sm90.cu).
# When a shared header changed too (code moved into it), the old file must compile against the
# old headers: ptx_diff.sh makes a temporary git worktree of REV for that (always; it is cheap).
set -euo pipefail
rev=${1:?usage: ptx_diff.sh REV [FILE] [KERNEL_REGEX]}
file=${2:-src/kernels/cuda/gemv_nvfp4_sm90_repacked.cu}
pattern=${3:-_kernel}
root=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
flags=(-std=c++17 "-gencode=arch=compute_90a,code=compute_90a" --expt-relaxed-constexpr -I "$root/include" -I "$root/src" -I "$root")
# The old file compiles in a worktree of REV, against REV's headers.
git -C "$root" worktree add --detach -q "$tmp/old" "$rev"
trap 'git -C "$root" worktree remove --force "$tmp/old"; rm -rf "$tmp"' EXIT
old_flags=(-std=c++17 "-gencode=arch=compute_90a,code=compute_90a" --expt-relaxed-constexpr -I "$tmp/old/include" -I "$tmp/old/src" -I "$tmp/old")
nvcc "${old_flags[@]}" -ptx "$tmp/old/${PTX_DIFF_OLD_FILE:-$file}" -o "$tmp/old.ptx"
nvcc "${flags[@]}" -ptx "$root/$file" -o "$tmp/new.ptx"
if [ -n "${PTX_DIFF_RENAME:-}" ]; then sed -i -E "$PTX_DIFF_RENAME" "$tmp/new.ptx"; fi
# One file per kernel entry, named by its mangled name without the file-unique prefix,
# %r123 -> %r, $L__BB1_2 -> L, module-unique symbol suffixes dropped.
split() {
  awk -v dir="$1" '
    /^(\.visible )?\.entry / { name = $0; sub(/\(.*/, "", name); sub(/.* /, "", name); sub(/.*_cu_[0-9a-f]+/, "", name);
                               gsub(/[^A-Za-z0-9_]/, "_", name); out = dir "/" name }
    out { print > out }
    /^}/ { out = "" }' "$2"
}
mkdir -p "$tmp/a" "$tmp/b"
split "$tmp/a" "$tmp/old.ptx"
split "$tmp/b" "$tmp/new.ptx"
norm() { sed -E 's/_ZN[A-Za-z0-9_]*_GLOBAL__N__[0-9a-f]+_[0-9]+_[A-Za-z0-9_]*//g; s/%(r|rd|f|fd|p|rs|h|hh)[0-9]+/%\1/g; s/\$L__BB[0-9_]+/L/g; s/^[[:space:]]+//' "$1" | grep -v '^\.reg\|^//'; }
status=0
for b in "$tmp"/b/*; do
  k=$(basename "$b")
  [[ "$k" =~ $pattern ]] || continue
  a="$tmp/a/$k"
  if [ ! -f "$a" ]; then echo "$k: new kernel"; status=1; continue; fi
  d=$(diff <(norm "$a") <(norm "$b") | grep -c '^[<>]' || true)
  echo "$k: $d differing lines"
  [ "$d" = 0 ] || status=1
done
exit $status
