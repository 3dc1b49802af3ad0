#!/usr/bin/env bash
# bench/kernel_bench's command line: every bad argument is exit 2 with a message naming it and
# the usage, before any GPU is touched; --help prints the usage and exits 0; with no GPU it says
# it skipped and exits 0.
#   kernel_bench_test.sh PATH_TO_KERNEL_BENCH
set -uo pipefail
bench=$1
models=$(cd "$(dirname "$0")/../data/models" && pwd)
name=kernel_bench
# shellcheck source=tests/bench/expect_bad.sh
source "$(dirname "${BASH_SOURCE[0]}")/expect_bad.sh"
expect_bad "unknown argument --bogus" --bogus
expect_bad "--rows needs a value" --rows
expect_bad "--rows abc: must be a positive integer" --rows abc
expect_bad "--rows 1.5: must be a positive integer" --rows 1.5
expect_bad "--reps -3: must be a positive integer" --reps -3
expect_bad "--ctx 0: must be a positive integer" --ctx 0
expect_bad "--rows 1,,16: must be a positive integer, or a comma list of them" --rows 1,,16
expect_bad "--rows 16,x: must be a positive integer, or a comma list of them" --rows 16,x
expect_bad "--rows 16,: must be a positive integer" --rows 16,
expect_bad "--rows 1e3: must be a positive integer" --rows 1e3
expect_bad "--ctx 4294967296: must be a positive integer" --ctx 4294967296
expect_bad "--ctx 8192,131073: must be at most 131072" --ctx 8192,131073
expect_bad "--bf16-tflops x: must be a positive number" --bf16-tflops x
expect_bad "--launcher topk: must be sparse_prefill, sparse_decode, norm_rope_insert, fp8_bmm, topk_prefill, topk_decode, index_prefill or index_decode" \
  --launcher topk
expect_bad "--launcher topk: must be" --launcher topk_decode,topk
expect_bad "--ctx 131073: must be at most 131072" --ctx 131073
expect_bad "--tensor-parallel-size 0: must be a positive integer" --tensor-parallel-size 0
expect_bad "--tensor-parallel-size 3: must divide num_attention_heads (128)" --tensor-parallel-size 3
expect_bad "--tensor-parallel-size 128: must divide num_attention_heads (64) of $models/mla-64-heads.json" \
  --model-config "$models/mla-64-heads.json" --tensor-parallel-size 128
expect_bad "--dcp x: must be a positive integer" --dcp x
expect_bad "--decode-context-parallel-size 3 (from --dcp) must divide --tensor-parallel-size 8" \
  --tensor-parallel-size 8 --dcp 3
expect_bad "--decode-context-parallel-size 2 (from --dcp) must divide --tensor-parallel-size 1 (from default)" \
  --dcp 2
expect_bad "--model-config $models/none.json: cannot open the file" --model-config "$models/none.json"
expect_bad "minimax_m3_vl is MSA" --model-config "$models/minimax-m3.json"
expect_bad "(llama) is not an MLA model" --model-config "$models/llama-like-not-mla.json"
expect_bad "--shapes tp8: not a shape of this run (stand-in, v3.2-tp1, v3.2-tp8)" --shapes v3.2-tp1,tp8
expect_bad "--arch sm_90: only with --list or --compile-only" --arch sm_90
expect_bad "--arch gfx9999: not an arch prewarm knows" --list --arch gfx9999
expect_bad "--list and --compile-only: give one" --list --compile-only
expect_bad "--variant -1: must be a non-negative integer" --variant -1
expect_bad "--variant 2.5: must be a non-negative integer" --variant 2.5
expect_bad "--variant strips=x: must be a non-negative integer, or FIELD=VALUE" --variant strips=x
expect_bad "--variant =4: FIELD=VALUE needs a key field's name (strips=4)" --variant =4
expect_bad "--define 1X: must be NAME or NAME=VALUE, NAME a C identifier" --define 1X
expect_bad "--define =3: must be NAME or NAME=VALUE, NAME a C identifier" --define =3
expect_bad "--define A-B=1: must be NAME or NAME=VALUE, NAME a C identifier" --define A-B=1
expect_bad "--define needs a value" --define
# Filters that select no row (the bench's decode rows are at 32K): exit 2 naming them (--list
# here; a GPU run checks the rows of its GPU's arch).
expect_bad "no row matches --launcher sparse_decode --ctx 8192" --list --launcher sparse_decode \
  --ctx 8192
expect_bad "no row matches --shapes v3.2-tp8 --launcher sparse_prefill --rows 3" --list \
  --shapes v3.2-tp8 --launcher sparse_prefill --rows 3
expect_bad "no row matches --shapes v3.2-tp8 --launcher sparse_prefill --rows 3,5" --list \
  --shapes v3.2-tp8 --launcher sparse_prefill --rows 3,5
expect_bad "no row matches --launcher topk_decode --variant strips=2" --compile-only \
  --launcher topk_decode --variant strips=2
# The geometry defines the launch code reads too pass only at the host's own value (the
# defaults: kernels/nvfp4_mla/sparse_geometry.h, index_geometry.h); an A/B of another value needs
# a host built with it. 7 is no value of any of them.
expect_bad "--define PW_SPARSE_NARROW_PARTS=2: the launch code reads PW_SPARSE_NARROW_PARTS too, and this host was built with PW_SPARSE_NARROW_PARTS=8; build the host with it" \
  --define PW_SPARSE_NARROW_PARTS=2
expect_bad "--define PW_SPARSE_DEC_CLUSTER=0: the launch code reads" --define PW_SPARSE_DEC_CLUSTER=0
expect_bad "--define PW_SPARSE_WG=0: the launch code reads" --list --define PW_SPARSE_WG=0
expect_bad "--define PW_SPARSE_WG_NARROW=7: the launch code reads PW_SPARSE_WG_NARROW too" \
  --define PW_SPARSE_WG_NARROW=7
expect_bad "-DCMAKE_CXX_FLAGS=-DPW_INDEX_DECODE_RING=6)" --define PW_INDEX_DECODE_RING=6
expect_bad "--define PW_INDEX_DECODE_M_WARPS=8: the launch code reads" --define PW_INDEX_DECODE_M_WARPS=8
expect_bad "--define PW_INDEX_DECODE_M_BLOCKS=x: the launch code reads" --define PW_INDEX_DECODE_M_BLOCKS=x
for d in PW_SPARSE_NARROW_PARTS=8 PW_SPARSE_DEC_CLUSTER PW_INDEX_DECODE_RING=3 PW_INDEX_DECODE_M_WARPS=4; do
  out=$("$bench" --list --shapes v3.2-tp8 --launcher index_decode --define "$d" 2>&1)
  if [[ $? -ne 0 ]] || ! grep -q "^v3.2-tp8  *index_decode" <<<"$out"; then
    echo "FAIL: kernel_bench --list --define $d (the host's own value) refused: $out"
    fail=1
  fi
done
out=$("$bench" --help 2>&1)
rc=$?
if [[ $rc -ne 0 ]] || ! grep -q "usage: kernel_bench" <<<"$out" || ! grep -q -- "--launcher" <<<"$out"; then
  echo "FAIL: --help: exit $rc, output: $out"
  fail=1
fi
# --list: the rows, from prewarm's own plan, without a GPU.
list() { "$bench" --list "$@" 2>&1; }
expect_rows() {  # what, expected count of rows matching the regex, regex, then the arguments
  local what=$1 want=$2 re=$3
  shift 3
  local out got
  out=$(list "$@")
  got=$(grep -cE -- "$re" <<<"$out")
  if [[ $got -ne $want ]]; then
    echo "FAIL: $what: kernel_bench --list $*: $got rows match '$re', want $want; output: $out"
    fail=1
  fi
}
# sparse_decode takes --rows as its batch sizes (the split rule's bounds lie between the defaults).
for r in 3 9; do
  expect_rows "sparse_decode at $r rows" 6 "^v3.2-tp8 +sparse_decode +splits=[0-9]+ +\\*? +$r +32768 " \
    --shapes v3.2-tp8 --launcher sparse_decode --rows 3,9
done
out=$(list)
# The default run: every launcher, the stand-in's earlier rows, DeepSeek-V3.2 at tp 1 and tp 8.
expect_rows "stand-in's 8192-token chunk at 32K" 2 '^stand-in +sparse_prefill +rounds=[12] +\*? +8192 +32768 .*heads=64,' 
# --variant as the variant column prints it: that field's rows only (not index_prefill's large=1).
expect_rows "--variant strips=4" 8 '^v3\.2-tp8 +topk_prefill +strips=4 ' --shapes v3.2-tp8 --variant strips=4
expect_rows "--variant strips=4, no other launcher" 0 '^v3\.2-tp8 +(index|sparse|fp8|norm|topk_decode)' --shapes v3.2-tp8 --variant strips=4
expect_rows "tp 8's 16 heads" 6 '^v3\.2-tp8 +sparse_decode +splits=[0-9]+ .* 32 +32768 .*heads=16,' --shapes v3.2-tp8
expect_rows "tp 1's 128 heads at 64 rows" 6 '^v3\.2-tp1 +sparse_decode .* 64 +32768 .*heads=128,' --shapes v3.2-tp1
expect_rows "long-context top-k, shared by both tps" 3 '^v3\.2-tp1,v3\.2-tp8 +topk_decode .* 131072 ' --launcher topk_decode
expect_rows "top-k at 8K, shared by all three" 3 '^stand-in,v3\.2-tp1,v3\.2-tp8 +topk_decode .* 8192 ' --launcher topk_decode
expect_rows "index_decode at 128K, 64 index heads" 3 'index_decode .* 131072 .*index_heads=64,' --launcher index_decode
expect_rows "no stand-in row past its 32768 positions" 0 '^stand-in[^ ]* +[a-z_]+ +[^ ]+ +\*? +[0-9]+ +(65536|131072) '
# On sm_90 rows of up to 64K take one block (strips 1); 128K rows the strips of 8192 keys (16).
expect_rows "the rule's pick at 8192 rows of 32K" 1 'topk_prefill +strips=1 +\* +8192 +32768' --launcher topk_prefill
expect_rows "the rule's pick at 4096 rows of 128K" 1 'topk_prefill +strips=16 +\* +4096 +131072' --launcher topk_prefill
# --rows and --ctx take a comma list (as msa_kernel_bench's --rows does): the rows of any of them.
expect_rows "tp 8's decode rows at 1 and 16 rows" 12 '^v3\.2-tp8 +sparse_decode +splits=[0-9]+ .* (1|16) +32768 ' --shapes v3.2-tp8 --launcher sparse_decode --rows 1,16
expect_rows "no other decode row count" 0 '^v3\.2-tp8 +sparse_decode +splits=[0-9]+ .* (32|64|128) +32768 ' --shapes v3.2-tp8 --launcher sparse_decode --rows 16,1
expect_rows "topk_decode at two contexts" 6 '^v3\.2-tp1,v3\.2-tp8 +topk_decode .* (65536|131072) ' --launcher topk_decode --ctx 65536,131072
# A boolean field (large) marks its pick too: one of each (rows, ctx) pair's two rows.
ip=$(list --launcher index_prefill)
all=$(grep -cE 'index_prefill +large=[01] ' <<<"$ip")
picked=$(grep -cE 'index_prefill +large=[01] +\* ' <<<"$ip")
if [[ $all -eq 0 || $((2 * picked)) -ne $all ]]; then
  echo "FAIL: index_prefill: $picked of $all rows carry the rule's pick mark, want half; output: $ip"
  fail=1
fi
for l in sparse_prefill sparse_decode norm_rope_insert fp8_bmm topk_prefill topk_decode index_prefill index_decode; do
  expect_rows "$l in the default run" 1 "^kernel_bench --list: " --launcher "$l"
  if ! grep -qE "^[^ ]+ +$l " <<<"$out"; then
    echo "FAIL: the default --list has no $l row"
    fail=1
  fi
done
# --model-config is read by prewarm's own model code: DeepSeek-V3.2's published config at tp 8
# gives the embedded example's rows and keys at tp 8, row for row.
a=$(list --model-config "$models/deepseek-v3.2.json" --tensor-parallel-size 8 | grep -E '^deepseek_v32-tp8 ' | sed 's/^deepseek_v32-tp8 */X /')
b=$(list --tensor-parallel-size 8 | grep -E '^v3\.2-tp8 ' | sed 's/^v3\.2-tp8 */X /')
if [[ -z $a || $a != "$b" ]]; then
  echo "FAIL: deepseek-v3.2.json at tp 8 and the embedded example at tp 8 list different rows"
  fail=1
fi
# --dcp: sparse_decode gathers the dcp group's heads (16 x 2), the prefill keeps its 16.
expect_rows "dcp 2's decode heads" 6 '^v3\.2-tp8-dcp2 +sparse_decode .*heads=32,' --tensor-parallel-size 8 --dcp 2 --rows 16
expect_rows "dcp 2's prefill heads" 2 '^v3\.2-tp8-dcp2 +sparse_prefill .*heads=16,' --tensor-parallel-size 8 --dcp 2 --rows 8192 --ctx 8192
# A model without an indexer runs fp8_bmm only.
expect_rows "deepseek-v2-lite: fp8_bmm only" 0 '^deepseek_v2-tp1 +(sparse|index|topk|norm)' --model-config "$models/deepseek-v2-lite.json"
# --compile-only: the keys compile with the arch's own compiler, no GPU (where NVRTC is).
if compgen -G "/usr/local/cuda/lib64/libnvrtc.so*" >/dev/null; then
  out=$("$bench" --compile-only --shapes v3.2-tp8 --launcher sparse_decode,index_decode --rows 16 --ctx 131072 2>&1)
  rc=$?
  if [[ $rc -ne 0 ]] || ! grep -q "^kernel_bench --compile-only: 1 keys for sm_90" <<<"$out"; then
    echo "FAIL: --compile-only: exit $rc, output: $out"
    fail=1
  fi
  # --trace's builds (PW_TRACE=1) compile, and carry the trace points: the 128-head warpgroup
  # block's code object is larger than without them (its key's line: "... N bytes").
  size() {
    "$bench" --compile-only "$@" --shapes v3.2-tp1 --launcher sparse_decode --rows 16 --variant 2 2>&1 |
      sed -nE 's/^compiled sparse_decode +heads=128,.* ([0-9]+) bytes .*/\1/p'
  }
  plain=$(size) traced=$(size --trace)
  if [[ -z $plain || -z $traced || $traced -le $plain ]]; then
    echo "FAIL: --compile-only --trace: the traced code object ($traced bytes) is not larger than the plain one ($plain)"
    fail=1
  fi
  out=$("$bench" --compile-only --shapes v3.2-tp8 --launcher sparse_decode --rows 16 --variant 4 --define int=struct 2>&1)
  rc=$?
  if [[ $rc -ne 1 ]] || ! grep -q "sparse_decode arch=sm_90,heads=16" <<<"$out"; then
    echo "FAIL: --compile-only of a key that cannot compile: exit $rc (want 1 naming the key), output: $out"
    fail=1
  fi
fi
if ! [[ -e /dev/nvidiactl || -e /dev/kfd ]]; then
  out=$("$bench" --rows 16 --launcher index_decode --variant 16 2>&1)
  rc=$?
  if [[ $rc -ne 0 ]] || ! grep -q "skipped: no GPU" <<<"$out"; then
    echo "FAIL: without a GPU: exit $rc, output: $out"
    fail=1
  fi
fi
exit $fail
