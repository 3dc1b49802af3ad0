#!/usr/bin/env bash
# The device scripts' command lines: every bad argument is exit 2 naming it, before anything is
# built, packed or run (scripts/package-device, msa-check, msa-profile, mla-bench), and
# package-device --help explains --out and --base.
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
expect_bad msa-check "unknown argument --bogus" --bogus
expect_bad msa-check "--device .device-none: no .device-none/bin/msa_kernel_bench" --device .device-none
expect_bad msa-profile "unknown argument --bogus" --bogus
expect_bad msa-profile "--rows 0: must be a whole number" --rows 0
expect_bad msa-profile "--launcher msa_foo: not one of" --launcher msa_foo
expect_bad msa-profile "--device .device-none: no .device-none/bin/msa_kernel_bench" \
  --device .device-none
expect_bad mla-bench "unknown argument --bogus" --bogus
expect_bad mla-bench "--device .device-none: no .device-none/bin/kernel_bench" --device .device-none
out=$("$root/scripts/package-device" --help 2>&1)
rc=$?
if [[ $rc -ne 0 ]] || ! grep -q -- "--out DIR" <<<"$out" || ! grep -q -- "--base REV" <<<"$out"; then
  echo "FAIL: package-device --help: exit $rc, output: $out"
  fail=1
fi
if [[ -e $root/.device-none ]]; then
  echo "FAIL: a refused command left $root/.device-none"
  fail=1
fi
exit $fail
