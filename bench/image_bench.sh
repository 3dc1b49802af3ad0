#!/usr/bin/env bash
# A cache image against compiling at pod start, side by side in one run, for one plan:
#   compile   prewarm run on an empty cache (what every new node pays without an image)
#   pack      prewarm pack of the filled cache (once, in CI), best of 5
#   image     the layer's bytes, and per key
#   pull      podman pull of the OCI layout into container storage (the node's side of a pull,
#             without the network), when podman works here
#   serving   from a read-only mount of the unpacked image to health SERVING: prewarm verify
#             --serve reading and checking every entry, until prewarm probe answers SERVING
#   bench/image_bench.sh [PREWARM_BINARY] [prewarm run flags...]   (default: the embedded
#   example for gfx90a, the README's main job)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/prewarm/prewarm}
shift || true
flags=("$@")
((${#flags[@]})) || flags=(--arch gfx90a)
# Lowercase: podman names an image pulled from an OCI layout after its path.
work=/tmp/prewarm-image-bench-$$
rm -rf "$work" && mkdir -p "$work"
trap 'umount "$work/mnt" 2>/dev/null || true; rm -rf "$work"' EXIT
now() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.3f}')" "$1" "$(now)"; }

t0=$(now)
"$bin" run "${flags[@]}" --cache-dir "$work/cache" --quiet >"$work/run.log"
compile_s=$(since "$t0")
keys=$(grep -o '[0-9]* keys:' "$work/run.log" | grep -o '[0-9]*')

best=
for _ in 1 2 3 4 5; do
  rm -rf "$work/oci"
  t0=$(now)
  "$bin" pack --cache-dir "$work/cache" --tag localhost/prewarm-cache:bench --output "$work/oci" >/dev/null
  s=$(since "$t0")
  best=$(python3 -c "import sys; a=sys.argv[1]; print(sys.argv[2] if not a else min(a, sys.argv[2], key=float))" "$best" "$s")
done
pack_s=$best
manifest=$(grep -o '"digest":"sha256:[0-9a-f]*"' "$work/oci/index.json" | grep -o '[0-9a-f]\{64\}')
layer=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['layers'][0]['digest'][7:])" \
  "$work/oci/blobs/sha256/$manifest")
bytes=$(stat -c %s "$work/oci/blobs/sha256/$layer")

pull_s=-
if command -v podman >/dev/null && podman info >/dev/null 2>&1; then
  export CONTAINERS_STORAGE_CONF=$work/storage.conf
  printf '[storage]\ndriver = "overlay"\nrunroot = "%s/run"\ngraphroot = "%s/storage"\n' "$work" "$work" \
    >"$CONTAINERS_STORAGE_CONF"
  t0=$(now)
  podman pull -q "oci:$work/oci:bench" >/dev/null && pull_s=$(since "$t0")
  podman system reset -f >/dev/null 2>&1 || true
fi

# The unpacked image, mounted read-only where a mount namespace is allowed (as the kubelet's is).
mkdir -p "$work/mnt"
tar -xf "$work/oci/blobs/sha256/$layer" -C "$work/mnt"
port=$((20000 + RANDOM % 20000))
t0=$(now)
if unshare -m true 2>/dev/null; then
  unshare -m sh -c 'mount --bind -o ro "$0" "$0" && exec "$@"' "$work/mnt" "$bin" verify --serve \
    "${flags[@]}" --cache-dir "$work/mnt" --grpc-address "127.0.0.1:$port" \
    --metrics-address 127.0.0.1:0 >/dev/null 2>"$work/verify.log" &
else
  "$bin" verify --serve "${flags[@]}" --cache-dir "$work/mnt" --grpc-address "127.0.0.1:$port" \
    --metrics-address 127.0.0.1:0 >/dev/null 2>"$work/verify.log" &
fi
pid=$!
until "$bin" probe --addr "127.0.0.1:$port" --timeout 0.2 >/dev/null 2>&1; do
  kill -0 $pid 2>/dev/null || { cat "$work/verify.log"; exit 1; }
  sleep 0.01
done
serving_s=$(since "$t0")
kill -TERM $pid
wait $pid || true

printf '%-6s %-10s %-9s %-12s %-12s %-8s %-8s %-9s %s\n' keys compile_s pack_s image_bytes \
  bytes_per_key pull_s serving_s ratio "(compile_s / serving_s)"
printf '%-6s %-10s %-9s %-12s %-12s %-8s %-8s %-9s\n' "$keys" "$compile_s" "$pack_s" "$bytes" \
  "$((bytes / keys))" "$pull_s" "$serving_s" \
  "$(python3 -c "import sys; print(f'{float(sys.argv[1]) / float(sys.argv[2]):.0f}x')" "$compile_s" "$serving_s")"
