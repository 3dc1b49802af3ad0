#!/usr/bin/env bash
# gfx942 and gfx950 for real: the prewarm binary this build made runs in a Debian unstable root
# with ROCm 6.4's hipRTC (rocm6_root.sh) and compiles every key of five model shapes (DeepSeek-V3.2
# at tp 1 and 8, the 64-head MLA, MiniMax-M3 at tp 4 and 1) for both archs; then its own
# `verify --format json` and an independent ELF reader (check_code_objects.py) check each code
# object: the right machine in e_flags, every entry the launch code needs,
# kernel descriptors that agree with the metadata, wave64, no scratch, LDS within the arch's
# limit; and LLVM's objdump from the same root disassembles every gfx942 and gfx950 key
# (check_instructions.py): each kernel uses exactly the matrix instructions its launcher is
# designed to use (fp8_bmm v_mfma_f32_16x16x32_fp8_fp8, the sparse attention and index kernels
# v_mfma_f32_16x16x16_bf16, on gfx950 v_mfma_f32_16x16x32_bf16 for their k loops over the head
# or index dim, the others none), so a silent fall back to SIMT fails; the
# instruction mix of each run is left in WORK_DIR/mix-N.tsv. Exit 77 (skipped) when the root
# cannot be made here (rocm6_root.sh says why).
#   rocm6_test.sh SOURCE_DIR PREWARM_BINARY WORK_DIR
set -uo pipefail
src=$1
binary=$2
work=$3
root=$("$src/tests/rocm6/rocm6_root.sh")
rc=$?
[[ $rc == 0 ]] || exit $rc
set -e
rm -rf "$work" && mkdir -p "$work"
inroot() { "$src/tests/rocm6/inroot.sh" "$root" "$binary" "$work" "$@"; }
fail=0
n=0
# Each run: a name, then its arguments. RDNA (gfx1100, gfx1200) is there for the wave width:
# its kernels must be wave32 like the launch code's blocks.
runs=(
  "embedded example (DeepSeek-V3.2's shape)|--arch gfx942,gfx950"
  "the seeds' shape|--arch gfx942,gfx950 --kv-cache-dtype nvfp4 --model-config /data/mla-64-heads.json"
  "DeepSeek-V3.2 tp 8|--arch gfx942,gfx950 --kv-cache-dtype nvfp4 --tensor-parallel-size 8 --model-config /data/deepseek-v3.2.json"
  "MiniMax-M3 tp 4 (the seed's deployment)|--arch gfx942,gfx950 --model-config /data/minimax-m3.json --vllm-args 'vllm serve MiniMaxAI/MiniMax-M3 --tensor-parallel-size 4 --block-size 128 --kv-cache-dtype nvfp4'"
  "MiniMax-M3 tp 1|--arch gfx942,gfx950 --model-config /data/minimax-m3.json --tensor-parallel-size 1 --block-size 128 --kv-cache-dtype nvfp4"
  "RDNA, small limits|--arch gfx1100,gfx1200 --max-num-seqs 4 --max-num-batched-tokens 256"
)
for entry in "${runs[@]}"; do
  name=${entry%%|*}
  eval "args=(${entry#*|} --cache-dir /cache)"  # quoted --vllm-args stay one word
  echo "== $name: prewarm run ${args[*]} --jobs 2"
  if ! inroot run "${args[@]}" --jobs 2 --quiet >"$work/run.out" 2>"$work/run.err"; then
    echo "FAIL $name: run failed"; tail -20 "$work/run.err"; fail=1; continue
  fi
  cat "$work/run.out"
  if [[ $name != RDNA* ]] && grep -q "warning:" "$work/run.err"; then
    echo "FAIL $name: run warned:"; grep "warning:" "$work/run.err" | head -20; fail=1
  fi
  inroot verify "${args[@]}" --format json >"$work/verify.json" 2>"$work/verify.err" ||
    { echo "FAIL $name: verify failed"; tail -5 "$work/verify.err"; fail=1; continue; }
  python3 "$src/tests/rocm6/check_code_objects.py" "$work/verify.json" "$work/cache" || fail=1
  n=$((n + 1))
  if [[ $name != RDNA* ]]; then
    python3 "$src/tests/rocm6/check_instructions.py" "$work/verify.json" "$work/cache" "$work/asm-$n" \
      "$root" --mix "$work/mix-$n.tsv" || fail=1
  fi
  [[ -f $work/first.json ]] || cp "$work/verify.json" "$work/first.json"
done
# The checker must be able to fail: a report claiming wave32, scratch and too much LDS.
python3 - "$work/first.json" >"$work/doctored.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
e = r["keys"][-1]["resources"]["entries"][0]
e.update(wave_size=32, scratch_bytes=16, lds_bytes=1 << 20)
print(json.dumps(r))
PY
if python3 "$src/tests/rocm6/check_code_objects.py" "$work/doctored.json" "$work/cache" >"$work/doctored.out"; then
  echo "FAIL the checker accepted a doctored report"; fail=1
elif [[ $(grep -c "^FAIL" "$work/doctored.out") != 3 ]]; then
  echo "FAIL the checker did not name the three doctored problems:"; cat "$work/doctored.out"; fail=1
fi
# And the instruction checker: one fp8_bmm key's disassembly with its MFMAs turned into VALU
# multiply-adds (what a SIMT fall back looks like) must fail, naming that key.
doctored=
for f in "$work"/asm-1/fp8_bmm-*.s; do
  grep -q v_mfma_f32_16x16x32_fp8_fp8 "$f" && { doctored=$f; break; }
done
if [[ -z $doctored ]]; then
  echo "FAIL no fp8_bmm disassembly with an FP8 MFMA to doctor"; fail=1
else
  sed -i 's/v_mfma_f32_16x16x32_fp8_fp8/v_fma_f32/' "$doctored"
  if python3 "$src/tests/rocm6/check_instructions.py" "$work/first.json" "$work/cache" "$work/asm-1" \
    >"$work/doctored-asm.out"; then
    echo "FAIL the instruction checker accepted an fp8_bmm key without MFMA"; fail=1
  elif [[ $(grep -c "^FAIL fp8_bmm .*pw_fp8_bmm uses no MFMA" "$work/doctored-asm.out") != 1 ]]; then
    echo "FAIL the instruction checker did not name the doctored key:"; cat "$work/doctored-asm.out"; fail=1
  fi
fi
[[ $fail == 0 ]] && echo "rocm6: every key of every model compiled and checked for gfx942 and gfx950 (and RDNA's wave32)"
exit $fail
