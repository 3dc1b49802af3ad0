#!/usr/bin/env bash
# The Debian 12 variant of docker/Dockerfile, built for real with podman from a base image that
# debootstrap makes here, then run with no network: `prewarm plan` and a real `prewarm run` for
# gfx90a inside the image, as the non-root user the image declares.
# Exit 77 (CTest: skipped) when podman or debootstrap cannot work on this machine.
#   container_test.sh SOURCE_DIR WORK_DIR
set -uo pipefail
src=$1
work=$2
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
cat > "$work/storage.conf" <<CONF
[storage]
driver = "overlay"
runroot = "$work/run"
graphroot = "$work/storage"
CONF
export CONTAINERS_CONF="$work/containers.conf" CONTAINERS_STORAGE_CONF="$work/storage.conf"
podman info >/dev/null 2>&1 || skip "podman cannot run here: $(podman info 2>&1 | tail -1)"
set -e
base=localhost/prewarm-debian-base:bookworm
if ! podman image exists "$base"; then
  rm -rf "$work/rootfs"
  echo "debootstrap: a minimal Debian 12"
  debootstrap --variant=minbase bookworm "$work/rootfs" http://deb.debian.org/debian >"$work/debootstrap.log" 2>&1 \
    || { tail -5 "$work/debootstrap.log"; exit 1; }
  tar -C "$work/rootfs" -c . | podman import - "$base" >/dev/null
  rm -rf "$work/rootfs"
fi
echo "podman build --target debian"
podman build --network host -f "$src/docker/Dockerfile" --target debian \
  --build-arg BASE_IMAGE="$base" -t localhost/prewarm:debian "$src" >"$work/build.log" 2>&1 \
  || { tail -30 "$work/build.log"; exit 1; }

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
check "plan in the image" "prewarm plan: 64 keys, 8 launchers" -- localhost/prewarm:debian plan
check "runs as uid 10001" "10001" -- --entrypoint id localhost/prewarm:debian -u
expect "no HEALTHCHECK" "$(podman image inspect localhost/prewarm:debian --format '{{.Config.Healthcheck}}')" "<nil>"
expect "entrypoint and command" \
  "$(podman image inspect localhost/prewarm:debian --format '{{.Config.Entrypoint}} {{.Config.Cmd}}')" \
  "[prewarm] [run --serve]"
rm -rf "$work/cache" && mkdir -p "$work/cache" && chmod 777 "$work/cache"
check "hipRTC compiles inside the image" "8 keys: 8 compiled, 0 cached, 0 failed" -- \
  --read-only --tmpfs /tmp -v "$work/cache:/cache" localhost/prewarm:debian \
  run --arch gfx90a --kv-cache-dtype fp8 --max-num-seqs 4 --cache-dir /cache --quiet
echo "$passed passed, $fail failed"
[[ $fail == 0 ]]
