#!/usr/bin/env bash
# bench/mla_peers.py on the CPU (--cpu-smoke: tiny sizes, Debian's torch): every peer it can run
# there runs and passes its own check against a float64 reference (no BAD, no exception), each
# launcher has rows; a bad --shapes is refused; without a GPU (and no --cpu-smoke) it fails
# saying so. Skipped (77) where /usr/bin/python3 has no torch.
#   mla_peers_test.sh PATH_TO_MLA_PEERS_PY
set -uo pipefail
peers=$1
py=/usr/bin/python3
if ! "$py" -c "import torch" 2>/dev/null; then
  echo "skipped: $py has no torch (scripts/setup installs python3-torch)"
  exit 77
fi
fail=0
out=$("$py" "$peers" --cpu-smoke 2>&1)
rc=$?
if [[ $rc -ne 0 ]] || grep -qE "BAD|not run: [A-Za-z]+Error|could not be made" <<<"$out"; then
  echo "FAIL: --cpu-smoke: exit $rc, output: $out"
  fail=1
fi
for l in sparse_decode sparse_prefill fp8_bmm index_decode index_prefill topk_decode topk_prefill; do
  if ! grep -qE "^[^ ]+ +$l +[^ ]+ +[0-9]+ .* ok$" <<<"$out"; then
    echo "FAIL: --cpu-smoke has no checked $l row"
    fail=1
  fi
done
out=$("$py" "$peers" --shapes v3.2-tp2 2>&1)
rc=$?
if [[ $rc -ne 2 ]] || ! grep -qF -- "--shapes v3.2-tp2: not one of stand-in, v3.2-tp1, v3.2-tp8" <<<"$out"; then
  echo "FAIL: --shapes v3.2-tp2: exit $rc, output: $out"
  fail=1
fi
if ! "$py" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  out=$("$py" "$peers" 2>&1)
  rc=$?
  if [[ $rc -ne 1 ]] || ! grep -q "mla_peers: no CUDA GPU" <<<"$out"; then
    echo "FAIL: without a GPU: exit $rc (want 1), output: $out"
    fail=1
  fi
fi
exit $fail
