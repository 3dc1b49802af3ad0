#!/usr/bin/env bash
# scripts/ncu_sass_top.py on a real Nsight Compute SASS table (msa_index_decode at 16 rows on the
# H200, 2026-12-03, its 120 lines with the most samples): the counts, the top lines with their
# reasons, the kernel's reasons; and bad input is exit 2 naming the file.
#   ncu_sass_top_test.sh REPO_ROOT
set -uo pipefail
root=$1
top=$root/scripts/ncu_sass_top.py
data=$root/tests/data/ncu/msa_index_decode-sass.csv.gz
fail=0
check() {  # what, then the command's output, then the grep patterns it must hold
  local what=$1 out=$2
  shift 2
  for p in "$@"; do
    if ! grep -qF -- "$p" <<<"$out"; then
      echo "FAIL: $what: no '$p' in:"
      echo "$out"
      fail=1
    fi
  done
}
out=$("$top" "$data" 3 2>&1)
rc=$?
[[ $rc -eq 0 ]] || { echo "FAIL: good table: exit $rc"; fail=1; }
check "good table" "$out" "120 SASS lines, 2048 warp-stall samples; the top 3:" \
  "9.4%  SHFL.IDX PT, R116, R111, R106, 0x1f  [long_sb]" "reasons: no_inst 48%, long_sb 41%"
[[ $(grep -c '%  ' <<<"$out") -eq 3 ]] || { echo "FAIL: not 3 lines:"; echo "$out"; fail=1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'a,b\n1,2\n' >"$tmp/plain.csv"
printf 'not gzip' >"$tmp/bad.csv.gz"
gzip -dc "$data" | sed 's/Warp Stall Sampling (All Samples)/Something Else/' >"$tmp/nostall.csv"
bad() {  # the expected message, then the arguments
  local want=$1
  shift
  local o
  o=$("$top" "$@" 2>&1)
  local r=$?
  if [[ $r -ne 2 ]] || ! grep -qF -- "$want" <<<"$o"; then
    echo "FAIL: ncu_sass_top.py $*: exit $r, want 2 and '$want':"
    echo "$o"
    fail=1
  fi
}
bad "$tmp/none.csv: cannot read it" "$tmp/none.csv"
bad "$tmp/bad.csv.gz: cannot read it" "$tmp/bad.csv.gz"
bad "$tmp/plain.csv: no header with a Source column" "$tmp/plain.csv"
bad "$tmp/nostall.csv: no 'Warp Stall Sampling (All Samples)' column" "$tmp/nostall.csv"
bad "TOP 0: must be a whole number from 1" "$data" 0
bad "usage: ncu_sass_top.py" 
exit $fail
