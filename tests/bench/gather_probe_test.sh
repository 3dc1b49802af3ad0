#!/usr/bin/env bash
# bench/gather_probe.cu (a standalone CUDA probe run on the device machine) compiles for sm_90
# with nvcc, warnings as errors, every kernel without a spill. No nvcc here: skipped (exit 77).
#   gather_probe_test.sh PATH_TO_gather_probe.cu
set -uo pipefail
src=$1
nvcc=${CUDA_HOME:-/usr/local/cuda}/bin/nvcc
if [[ ! -x $nvcc ]]; then
  echo "gather_probe_test: skipped: no nvcc at $nvcc"
  exit 77
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
log=$("$nvcc" -O3 -arch=sm_90 -std=c++17 -Werror all-warnings -Xptxas -v -o "$out/probe" "$src" 2>&1)
rc=$?
if [[ $rc -ne 0 ]]; then
  echo "FAIL: nvcc exit $rc: $log"
  exit 1
fi
kernels=$(grep -c "spill stores" <<<"$log")
clean=$(grep -c " 0 bytes spill stores, 0 bytes spill loads" <<<"$log")
if [[ $kernels -lt 9 || $kernels -ne $clean ]]; then
  echo "FAIL: $kernels kernels, $clean without spills: $log"
  exit 1
fi
echo "gather_probe_test: $kernels kernels, none spills"
