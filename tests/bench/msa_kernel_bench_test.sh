#!/usr/bin/env bash
# bench/msa_kernel_bench's command line: every bad argument is exit 2 with a message naming it and
# the usage, before any GPU is touched; --help prints the usage and exits 0; with no GPU it says
# it skipped and exits 0.
#   msa_kernel_bench_test.sh PATH_TO_MSA_KERNEL_BENCH
set -uo pipefail
bench=$1
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.." || exit 1  # the default --model-config is relative to the root
name=msa_kernel_bench
# shellcheck source=tests/bench/expect_bad.sh
source "$here/expect_bad.sh"
expect_bad "bad argument --bogus 1" --bogus 1
expect_bad "--rows needs a value" --rows
expect_bad "--rows 16,0: must be a positive integer, or a comma list of them" --rows 16,0
# What atoi took as a count: trailing text, an empty item, a sign, a fraction, past INT_MAX.
expect_bad "--rows 16x: must be a positive integer" --rows 16x
expect_bad "--rows 1,,16: must be a positive integer" --rows 1,,16
expect_bad "--rows 16,: must be a positive integer" --rows 16,
expect_bad "--rows +16: must be a positive integer" --rows +16
expect_bad "--rows 1.5: must be a positive integer" --rows 1.5
expect_bad "--rows 4294967312: must be a positive integer" --rows 4294967312
expect_bad "bad argument --tp x" --tp x
expect_bad "bad argument --reps -3" --reps -3
expect_bad "bad argument --prefill-grid 0" --prefill-grid 0
expect_bad "bad argument --prefill-grid 0" --prefill-grid 1 --prefill-grid 0
expect_bad "bad argument --prefill-grid -2" --prefill-grid -2
expect_bad "bad argument --prefill-grid 1.5" --prefill-grid 1.5
expect_bad "bad argument --prefill-grid 4294967296" --prefill-grid 4294967296
expect_bad "--define 1X: must be NAME or NAME=VALUE, NAME a C identifier" --define 1X
expect_bad "--define =2: must be NAME or NAME=VALUE, NAME a C identifier" --define =2
# The geometry defines the launch code reads too pass only at the host's own value (the defaults:
# kernels/nvfp4_msa/msa_sparse_geometry.h, msa_index_geometry.h); an A/B of another value needs a
# host built with it.
for d in PW_MSA_DEC_WARPS=16 PW_MSA_DEC_STAGES=5 PW_MSA_WG_RAW_STAGES=3 PW_MSA_WG_TILE_STAGES=3 PW_MSA_WG_PRODUCERS=1 \
  PW_MSA_INDEX_DECODE_RING=3 PW_MSA_DEC_WARPS; do
  expect_bad "--define $d: the launch code reads ${d%%=*} too" --define "$d"
done
expect_bad "this host was built with PW_MSA_DEC_WARPS=8; build the host with it" --define PW_MSA_DEC_WARPS=16
if ! command -v nvidia-smi >/dev/null && [[ ! -e /dev/kfd ]]; then
  for d in PW_MSA_DEC_WARPS=8 PW_MSA_WG_TILE_STAGES=4 PW_MSA_INDEX_DECODE_RING=2; do
    out=$("$bench" --launcher msa_sparse_decode --define "$d" 2>&1)
    if [[ $? -ne 0 ]] || ! grep -q "skipped: no GPU" <<<"$out"; then
      echo "FAIL: msa_kernel_bench --define $d (the host's own value) refused: $out"
      fail=1
    fi
  done
fi
out=$("$bench" --help 2>&1)
if [[ $? -ne 0 ]] || ! grep -qF -- "[--prefill-grid N]" <<<"$out" ||
  ! grep -qF -- "[--distinct-pages]" <<<"$out"; then
  echo "FAIL: msa_kernel_bench --help: $out"
  fail=1
fi
if ! command -v nvidia-smi >/dev/null && [[ ! -e /dev/kfd ]]; then
  out=$("$bench" --prefill-grid 8 --distinct-pages --launcher msa_sparse_prefill 2>&1)
  if [[ $? -ne 0 ]] || ! grep -q "skipped: no GPU" <<<"$out"; then
    echo "FAIL: msa_kernel_bench with no GPU: $out"
    fail=1
  fi
fi
exit $fail
