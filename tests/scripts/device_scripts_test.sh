#!/usr/bin/env bash
# The device scripts' command lines: every bad argument is exit 2 naming it, before anything is
# built, packed or run (scripts/package-device, msa-check, msa-profile, mla-bench), and
# package-device --help explains --out, --base and --variant. msa-profile's summary, ncu_sass_top.py, on a
# real Nsight Compute SASS table (msa_index_decode at 16 rows on the H200, 2026-12-03, its 120
# lines with the most samples): the counts, the top lines with their reasons, the kernel's
# reasons; and a table it cannot read is exit 2 naming the file.
#   device_scripts_test.sh REPO_ROOT
set -uo pipefail
root=$1
fail=0
expect_bad() {  # the script, the expected message, then the arguments
  local script=$1 want=$2
  shift 2
  local out rc
  out=$("$root/scripts/$script" "$@" 2>&1)
  rc=$?
  if [[ $rc -ne 2 ]] || ! grep -qF -- "$want" <<<"$out"; then
    echo "FAIL: $script $*: exit $rc (want 2 naming '$want'), output: $out"
    fail=1
  fi
}
expect_bad package-device "unknown argument --bogus" --bogus
expect_bad package-device "--out needs a value" --out
expect_bad package-device "--out foo: must be a folder of the repo's root named .device*" --out foo
expect_bad package-device "--out ../.device: must be" --out ../.device
expect_bad package-device "--base needs a value" --base
expect_bad package-device "--base no-such-revision: not a commit of this repository" \
  --base no-such-revision
expect_bad package-device "--variant needs a value" --variant
expect_bad package-device "--variant narrow: must be NAME=REV" --variant narrow
expect_bad package-device "--variant a/b=HEAD: must be NAME=REV" --variant a/b=HEAD
expect_bad package-device "--variant x=: must be NAME=REV" --variant x=
expect_bad package-device "--variant x=no-such-revision: no-such-revision is not a commit" \
  --variant x=no-such-revision
expect_bad package-device "--variant x=HEAD: the name x is given twice" \
  --variant x=HEAD --variant x=HEAD
expect_bad msa-check "unknown argument --bogus" --bogus
expect_bad msa-check "--device .device-none: no .device-none/bin/msa_kernel_bench" --device .device-none
expect_bad msa-profile "unknown argument --bogus" --bogus
expect_bad msa-profile "--rows 0: must be a whole number" --rows 0
expect_bad msa-profile "--launcher msa_foo: not one of" --launcher msa_foo
expect_bad msa-profile "--device .device-none: no .device-none/bin/msa_kernel_bench" \
  --device .device-none
expect_bad mla-bench "unknown argument --bogus" --bogus
expect_bad mla-bench "--device .device-none: no .device-none/bin/kernel_bench" --device .device-none
data=$root/tests/data/ncu/msa_index_decode-sass.csv.gz
out=$("$root/scripts/ncu_sass_top.py" "$data" 3 2>&1)
rc=$?
for want in "120 SASS lines, 2048 warp-stall samples; the top 3:" \
  "9.4%  SHFL.IDX PT, R116, R111, R106, 0x1f  [long_sb]" "reasons: no_inst 48%, long_sb 41%"; do
  if [[ $rc -ne 0 ]] || ! grep -qF -- "$want" <<<"$out"; then
    echo "FAIL: ncu_sass_top.py on the real table: exit $rc, no '$want' in: $out"
    fail=1
  fi
done
[[ $(grep -c '%  ' <<<"$out") -eq 3 ]] || { echo "FAIL: not 3 lines: $out"; fail=1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'a,b\n1,2\n' >"$tmp/plain.csv"
printf 'not gzip' >"$tmp/bad.csv.gz"
gzip -dc "$data" | sed 's/Warp Stall Sampling (All Samples)/Something Else/' >"$tmp/nostall.csv"
expect_bad ncu_sass_top.py "$tmp/none.csv: cannot read it" "$tmp/none.csv"
expect_bad ncu_sass_top.py "$tmp/bad.csv.gz: cannot read it" "$tmp/bad.csv.gz"
expect_bad ncu_sass_top.py "$tmp/plain.csv: no header with a Source column" "$tmp/plain.csv"
expect_bad ncu_sass_top.py "$tmp/nostall.csv: no 'Warp Stall Sampling (All Samples)' column" \
  "$tmp/nostall.csv"
expect_bad ncu_sass_top.py "TOP 0: must be a whole number from 1" "$data" 0
expect_bad ncu_sass_top.py "usage: ncu_sass_top.py"
out=$("$root/scripts/package-device" --help 2>&1)
rc=$?
if [[ $rc -ne 0 ]] || ! grep -q -- "--out DIR" <<<"$out" || ! grep -q -- "--base REV" <<<"$out" ||
  ! grep -q -- "--variant NAME=REV" <<<"$out"; then
  echo "FAIL: package-device --help: exit $rc, output: $out"
  fail=1
fi
if [[ -e $root/.device-none ]]; then
  echo "FAIL: a refused command left $root/.device-none"
  fail=1
fi
exit $fail
