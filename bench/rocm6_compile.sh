#!/usr/bin/env bash
# Compile time per variant for gfx942 and gfx950 with ROCm 6.4's hipRTC (Debian unstable root,
# tests/rocm6/rocm6_root.sh), the embedded example, --jobs 1 and 2, each from an empty cache.
# Prints a Markdown table: wall time, keys per second, and the per-key compile seconds from the
# manifest (median, mean, max), overall and for the slowest launcher.
#   bench/rocm6_compile.sh [PREWARM_BINARY]   (default build/prewarm/prewarm; needs root)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
binary=${1:-$src/build/prewarm/prewarm}
root=$("$src/tests/rocm6/rocm6_root.sh")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "| arch | jobs | keys | wall s | keys/s | per key median s | mean s | max s (launcher) |"
echo "|---|---|---|---|---|---|---|---|"
for arch in gfx942 gfx950; do
  for jobs in 1 2; do
    rm -rf "$work/cache"
    start=$(date +%s.%N)
    "$src/tests/rocm6/inroot.sh" "$root" "$binary" "$work" run --arch "$arch" --cache-dir /cache \
      --jobs "$jobs" --quiet >/dev/null 2>&1
    end=$(date +%s.%N)
    python3 - "$work/cache/prewarm/manifest.json" "$arch" "$jobs" "$start" "$end" <<'PY'
import json, statistics, sys
m = json.load(open(sys.argv[1]))
arch, jobs, wall = sys.argv[2], sys.argv[3], float(sys.argv[5]) - float(sys.argv[4])
t = [(k["compile_seconds"], k["launcher"]) for k in m["keys"] if k["state"] == "compiled"]
s = [x for x, _ in t]
mx = max(t)
print(f"| {arch} | {jobs} | {len(t)} | {wall:.1f} | {len(t) / wall:.1f} | "
      f"{statistics.median(s):.3f} | {statistics.mean(s):.3f} | {mx[0]:.2f} ({mx[1]}) |")
PY
  done
done
