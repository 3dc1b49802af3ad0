#!/usr/bin/env bash
# docker/Dockerfile built for real with podman, from a base image made here, then run with no
# network as the non-root user the image declares: `prewarm plan` and a real `prewarm run`,
# with the root filesystem read-only.
#   debian: --target debian on a debootstrap Debian 12 (Debian's HIP 5.2), run for gfx90a.
#   rocm6:  --target rocm (the default image) on Debian unstable with ROCm 6.4's hipRTC from
#           Debian (tests/rocm6/rocm6_root.sh's root, imported), run for gfx950.
# Exit 77 (CTest: skipped) when podman or the base cannot work on this machine.
# Then the filled cache as an image (prewarm pack, run inside the image from a read-only mount):
# the same digest on a second pack of a copy, the image mounted read-only as podman's image
# mount (what a Kubernetes `image` volume is), and verify, verify --serve and replay --strict
# inside on it; another arch is refused naming both, and (rocm6) the host's prewarm, whose hipRTC
# is another, refuses it naming both compilers.
#   container_test.sh SOURCE_DIR WORK_DIR [debian|rocm6] [HOST_PREWARM]
set -uo pipefail
src=$1
work=$2
variant=${3:-debian}
host_prewarm=${4:-}
skip() { echo "skipped: $*"; exit 77; }
command -v podman >/dev/null || skip "podman is not installed (scripts/setup installs it)"
command -v debootstrap >/dev/null || skip "debootstrap is not installed"
mkdir -p "$work"
# podman here: runc, cgroupfs, explicit ulimits within this machine's hard limits (podman's own
# defaults exceed them, and runc then cannot set them: "error setting rlimit type 6/7").
cat > "$work/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=$(ulimit -Hn):$(ulimit -Hn)", "nproc=4096:4096"]
[engine]
cgroup_manager = "cgroupfs"
runtime = "runc"
events_logger = "file"
CONF
# podman's storage outside the clone (beside the other cached test roots), so that the base
# images, the Dockerfile's package layers and its compile cache (a RUN cache mount) stay from one
# run to the next; a content change rebuilds only the layers after it. PREWARM_PODMAN_STORE
# moves it; where it cannot be written, the work directory holds it (a cold build each run).
store=${PREWARM_PODMAN_STORE:-/var/cache/prewarm-test-roots/podman}
mkdir -p "$store" 2>/dev/null && [[ -w $store ]] || store=$work
cat > "$work/storage.conf" <<CONF
[storage]
driver = "overlay"
runroot = "$store/run"
graphroot = "$store/storage"
CONF
export CONTAINERS_CONF="$work/containers.conf" CONTAINERS_STORAGE_CONF="$work/storage.conf"
podman info >/dev/null 2>&1 || skip "podman cannot run here: $(podman info 2>&1 | tail -1)"
build_args=()
if [[ $variant == debian ]]; then
  base=localhost/prewarm-debian-base:bookworm
  if ! podman image exists "$base"; then
    set -e
    rm -rf "$work/rootfs"
    echo "debootstrap: a minimal Debian 12"
    debootstrap --variant=minbase bookworm "$work/rootfs" http://deb.debian.org/debian >"$work/debootstrap.log" 2>&1 \
      || { tail -5 "$work/debootstrap.log"; exit 1; }
    tar -C "$work/rootfs" -c . | podman import - "$base" >/dev/null
    rm -rf "$work/rootfs"
    set +e
  fi
  target=debian arch=gfx90a
else
  root=$("$src/tests/rocm6/rocm6_root.sh")
  rc=$?
  [[ $rc == 0 ]] || exit $rc
  # Named by the root's own content hash: a new root is a new base image.
  base=localhost/prewarm-rocm6-base:$(basename "$root" | sed 's/^rocm6-//')
  if ! podman image exists "$base"; then
    echo "podman import $root"
    tar -C "$root" --exclude=./.complete -c . | podman import - "$base" >/dev/null || exit 1
  fi
  # Debian's mirror here serves a frozen snapshot whose Release is past its Valid-Until date.
  build_args=(--build-arg "APT_OPTIONS=-o Acquire::Check-Valid-Until=false")
  target=rocm arch=gfx950
fi
image=localhost/prewarm:$variant
# A trivial container first: where podman cannot start one at all (no user namespaces, no
# cgroup access), that is this machine's limit, said as a skip, not the image's failure.
trivial=$(podman run --rm --network none "$base" true 2>&1) \
  || skip "podman cannot run a trivial container here: $(tail -1 <<<"$trivial")"
set -e
echo "podman build --target $target --build-arg BASE_IMAGE=$base"
podman build --network host -f "$src/docker/Dockerfile" --target "$target" \
  --build-arg BASE_IMAGE="$base" "${build_args[@]}" -t "$image" "$src" >"$work/build.log" 2>&1 \
  || { tail -30 "$work/build.log"; exit 1; }
echo "image $image: $(podman image inspect "$image" --format '{{.Size}}') bytes"

fail=0
passed=0
check() {  # check NAME EXPECTED_SUBSTRING -- podman run args...
  local name=$1 want=$2
  shift 3
  local out
  out=$(podman run --rm --network none "$@" 2>&1) || { echo "FAIL $name: exit $?: $out"; fail=$((fail + 1)); return; }
  if [[ $out != *"$want"* ]]; then
    echo "FAIL $name: no '$want' in: $out"
    fail=$((fail + 1))
  else
    echo "ok   $name"
    passed=$((passed + 1))
  fi
}
expect() {  # expect NAME ACTUAL WANTED
  if [[ $2 == "$3" ]]; then echo "ok   $1"; passed=$((passed + 1)); else echo "FAIL $1: '$2', want '$3'"; fail=$((fail + 1)); fi
}
refuse() {  # refuse NAME EXPECTED_SUBSTRING -- podman run args...: must exit non-zero
  local name=$1 want=$2
  shift 3
  local out
  if out=$(podman run --rm --network none "$@" 2>&1); then
    echo "FAIL $name: exit 0: $out"; fail=$((fail + 1)); return
  fi
  if [[ $out != *"$want"* ]]; then
    echo "FAIL $name: no '$want' in: $out"; fail=$((fail + 1))
  else
    echo "ok   $name"; passed=$((passed + 1))
  fi
}
digest() { grep -o '"digest":"sha256:[0-9a-f]*"' "$1/index.json"; }

check "plan in the image" "prewarm plan: 69 keys, 8 launchers" -- "$image" plan
check "runs as uid 10001" "10001" -- --entrypoint id "$image" -u
expect "no HEALTHCHECK" "$(podman image inspect "$image" --format '{{.Config.Healthcheck}}')" "<nil>"
expect "entrypoint and command" \
  "$(podman image inspect "$image" --format '{{.Config.Entrypoint}} {{.Config.Cmd}}')" \
  "[prewarm] [run --serve]"
rm -rf "$work/cache" && mkdir -p "$work/cache" && chmod 777 "$work/cache"
check "hipRTC compiles $arch inside the image" "8 keys: 8 compiled, 0 cached, 0 failed" -- \
  --read-only --tmpfs /tmp -v "$work/cache:/cache" "$image" \
  run --arch "$arch" --kv-cache-dtype fp8 --max-num-seqs 4 --cache-dir /cache --quiet
# The filled cache as an image volume. What the cache holds now: 8 fp8_bmm keys for $arch.
limits=(--kv-cache-dtype fp8 --max-num-seqs 4)
rm -rf "$work/oci1" "$work/oci2" "$work/cache2"
mkdir -p "$work/oci1" "$work/oci2" && chmod 777 "$work/oci1" "$work/oci2"
check "pack inside the image, from a read-only mount" "prewarm pack: 8 entries" -- \
  --read-only --tmpfs /tmp -v "$work/cache:/cache:ro" -v "$work/oci1:/oci" "$image" \
  pack --cache-dir /cache --tag "localhost/prewarm-cache:$variant" --output /oci
# A copy made later (new mtimes, a lock file more): the same image, to the byte.
cp -r "$work/cache" "$work/cache2" && touch "$work/cache2"/*/* && chmod -R a+rX "$work/cache2"
check "pack of a copy" "prewarm pack: 8 entries" -- \
  --read-only --tmpfs /tmp -v "$work/cache2:/cache:ro" -v "$work/oci2:/oci" "$image" \
  pack --cache-dir /cache --tag "localhost/prewarm-cache:$variant" --output /oci
expect "the same digest from the same cache" "$(digest "$work/oci1")" "$(digest "$work/oci2")"
cache_image=localhost/prewarm-cache:$variant
podman rmi -f "$cache_image" >/dev/null 2>&1
# podman names an image pulled from a layout after its path and refuses capitals (a mktemp
# clone's path has them): pull through a lowercase link.
layout=/tmp/prewarm-oci-$$-$variant
ln -sfn "$work/oci1" "$layout"
id=$(podman pull -q "oci:$layout:$variant" 2>&1) && podman tag "$id" "$cache_image" \
  || { echo "FAIL podman pull oci:$layout:$variant: $id"; fail=$((fail + 1)); }
rm -f "$layout"
mount=(--read-only --tmpfs /tmp --mount "type=image,source=$cache_image,destination=/cache")
check "verify on the read-only image volume" "prewarm verify: 8/8 keys valid in /cache" -- \
  "${mount[@]}" "$image" verify --arch "$arch" "${limits[@]}" --cache-dir /cache
printf '%s\n' '{"requests":[{"phase":"decode","q_len":1,"ctx":100}]}' \
  '{"requests":[{"phase":"decode","q_len":1,"ctx":9},{"phase":"decode","q_len":1,"ctx":4000}]}' \
  '{"requests":[{"phase":"decode","q_len":1,"ctx":7},{"phase":"decode","q_len":1,"ctx":8},{"phase":"prefill","q_len":900,"ctx":900}]}' \
  '{"requests":[{"phase":"decode","q_len":1,"ctx":5},{"phase":"decode","q_len":1,"ctx":6},{"phase":"decode","q_len":1,"ctx":7},{"phase":"decode","q_len":1,"ctx":9000}]}' \
  >"$work/trace.jsonl"
check "replay --strict on the image volume: every key a hit" "8 hits, 0 misses in /cache" -- \
  "${mount[@]}" -v "$work/trace.jsonl:/trace.jsonl:ro" "$image" \
  replay --strict --trace /trace.jsonl --arch "$arch" "${limits[@]}" --cache-dir /cache
# The sidecar of an image volume: verify --serve answers SERVING on the standard health protocol,
# and nothing compiles (the mount is read-only, and no worker is started).
check "verify --serve on the image volume: SERVING, then stops on SIGTERM" "probe: SERVING" -- \
  "${mount[@]}" --entrypoint /bin/sh "$image" -c \
  "prewarm verify --serve --arch $arch ${limits[*]} --cache-dir /cache --grpc-address 127.0.0.1:9401 --metrics-address 127.0.0.1:0 & p=\$!; \
   for i in \$(seq 100); do prewarm probe --addr 127.0.0.1:9401 >/dev/null 2>&1 && break; sleep 0.1; done; \
   prewarm probe --addr 127.0.0.1:9401 && echo probe: SERVING; kill -TERM \$p; wait \$p"
refuse "another arch is refused, naming both" "it was filled for $arch, and this verify plans gfx908" -- \
  "${mount[@]}" "$image" verify --arch gfx908 "${limits[@]}" --cache-dir /cache
if [[ $variant == rocm6 && -n $host_prewarm ]]; then
  # The host's prewarm (Debian 12's hipRTC 5.2) on the image that ROCm 6.4's hipRTC filled.
  # podman's own read-only mount of the image (what the kubelet hands a pod).
  root_mount=$(podman image mount "$cache_image")
  rc=0
  out=$("$host_prewarm" verify --arch "$arch" "${limits[@]}" --cache-dir "$root_mount" 2>&1) || rc=$?
  podman image unmount "$cache_image" >/dev/null 2>&1 || true
  if [[ $rc == 1 && $out == *"it was compiled by hiprtc libhiprtc.so.6"*"and this prewarm compiles with hiprtc libamdhip64.so.5"* ]]; then
    echo "ok   another compiler is refused, naming both"; passed=$((passed + 1))
  else
    echo "FAIL another compiler is refused, naming both: exit $rc: $out"; fail=$((fail + 1))
  fi
fi
if [[ $variant == rocm6 ]]; then
  rm -rf "$work/cache" && mkdir -p "$work/cache" && chmod 777 "$work/cache"
  check "the embedded example's 69 keys for gfx950, read-only" "69 keys: 69 compiled, 0 cached, 0 failed" -- \
    --read-only --tmpfs /tmp -v "$work/cache:/cache" "$image" \
    run --arch gfx950 --cache-dir /cache --jobs 2 --quiet
fi
# Untagged images a week old (earlier runs' builds) go; what a rebuild reuses is newer.
podman image prune -f --filter until=168h >/dev/null 2>&1 || true
echo "$passed passed, $fail failed"
[[ $fail == 0 ]]
