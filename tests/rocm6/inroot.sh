#!/usr/bin/env bash
# Runs a prewarm binary built here inside the ROCm 6.4 root (rocm6_root.sh), in a private mount
# namespace so the cached root is never changed: the binary and the libraries it links (less
# glibc's and the C++ runtime, which must be the root's newer ones, serving hipRTC too) staged
# under WORK_DIR/stage and bound at /opt/prewarm, WORK_DIR/cache at /cache, tests/data/models at
# /data, and /proc (compile workers run /proc/self/exe).
#   inroot.sh ROOT PREWARM_BINARY WORK_DIR PREWARM_ARGS...
set -euo pipefail
root=$1 binary=$2 work=$3
shift 3
src=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$work/stage" "$work/cache"
if [[ ! -x $work/stage/prewarm || $binary -nt $work/stage/prewarm ]]; then
  cp "$binary" "$work/stage/prewarm"
  ldd "$binary" | awk '/=> \// {print $3}' |
    grep -v -E '/(libc|libm|libpthread|libdl|librt|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
    xargs -r -I{} cp -L {} "$work/stage/"
fi
exec unshare --mount --fork /bin/sh -c '
  root=$1 work=$2 data=$3; shift 3
  mount --bind "$work/stage" "$root/opt/prewarm" && mount --bind "$work/cache" "$root/cache" &&
  mount --bind "$data" "$root/data" && mount -t proc proc "$root/proc" &&
  exec chroot "$root" env LD_LIBRARY_PATH=/opt/prewarm HOME=/tmp /opt/prewarm/prewarm "$@"
' sh "$root" "$work" "$src/tests/data/models" "$@"
