#!/usr/bin/env bash
# bench/kernel_bench's command line: every bad argument is exit 2 with a message naming it and
# the usage, before any GPU is touched; --help prints the usage and exits 0; with no GPU it says
# it skipped and exits 0.
#   kernel_bench_test.sh PATH_TO_KERNEL_BENCH
set -uo pipefail
bench=$1
fail=0
expect_bad() {  # expected message, then the arguments
  local want=$1
  shift
  local out rc
  out=$("$bench" "$@" 2>&1)
  rc=$?
  if [[ $rc -ne 2 ]] || ! grep -qF -- "$want" <<<"$out" || ! grep -q "usage: kernel_bench" <<<"$out"; then
    echo "FAIL: kernel_bench $*: exit $rc, output: $out"
    fail=1
  fi
}
expect_bad "unknown argument --bogus" --bogus
expect_bad "--rows needs a value" --rows
expect_bad "--rows abc: must be a positive integer" --rows abc
expect_bad "--rows 1.5: must be a positive integer" --rows 1.5
expect_bad "--reps -3: must be a positive integer" --reps -3
expect_bad "--ctx 0: must be a positive integer" --ctx 0
expect_bad "--bf16-tflops x: must be a positive number" --bf16-tflops x
expect_bad "--launcher topk: must be sparse_prefill, sparse_decode, index_prefill, index_decode, fp8_bmm, topk_prefill, topk_decode or norm_rope_insert" \
  --launcher topk
expect_bad "--variant -1: must be a non-negative integer" --variant -1
expect_bad "--variant 2.5: must be a non-negative integer" --variant 2.5
expect_bad "--define 1X: must be NAME or NAME=VALUE, NAME a C identifier" --define 1X
expect_bad "--define =3: must be NAME or NAME=VALUE, NAME a C identifier" --define =3
expect_bad "--define A-B=1: must be NAME or NAME=VALUE, NAME a C identifier" --define A-B=1
expect_bad "--define needs a value" --define
out=$("$bench" --help 2>&1)
rc=$?
if [[ $rc -ne 0 ]] || ! grep -q "usage: kernel_bench" <<<"$out" || ! grep -q -- "--launcher" <<<"$out"; then
  echo "FAIL: --help: exit $rc, output: $out"
  fail=1
fi
if ! [[ -e /dev/nvidiactl || -e /dev/kfd ]]; then
  out=$("$bench" --rows 16 --launcher index_decode --variant 0 2>&1)
  rc=$?
  if [[ $rc -ne 0 ]] || ! grep -q "skipped: no GPU" <<<"$out"; then
    echo "FAIL: without a GPU: exit $rc, output: $out"
    fail=1
  fi
fi
exit $fail
