#!/usr/bin/env bash
# Prints the path of a Debian unstable root with ROCm 6.4's hipRTC from Debian's own packages
# (libhiprtc6, comgr 3), made with debootstrap the first time and cached outside the clone under
# $PREWARM_TEST_ROOTS (default /var/cache/prewarm-test-roots), in a directory named by a hash of
# what it contains (suite, packages, this recipe), so a change to any of them makes a new one.
# Exit 77 (CTest: skipped), saying why on stderr, when it cannot be made: not root, no
# debootstrap, or no network to deb.debian.org.
#   rocm6_root.sh
set -uo pipefail
skip() { echo "skipped: $*" >&2; exit 77; }
suite=sid
mirror=http://deb.debian.org/debian
packages="libhiprtc6 libhiprtc-builtins6 libamdhip64-dev libamd-comgr3 llvm-21"
recipe=2  # bump when the steps below change what the root holds
key=$(printf '%s\n' "$suite" "$packages" "$recipe" | sha256sum | cut -c1-16)
cache=${PREWARM_TEST_ROOTS:-/var/cache/prewarm-test-roots}
root=$cache/rocm6-$suite-$key
if [[ -f $root/.complete ]]; then echo "$root"; exit 0; fi

[[ $(id -u) == 0 ]] || skip "making the ROCm 6.4 root needs root (debootstrap, chroot)"
command -v debootstrap >/dev/null || skip "debootstrap is not installed (scripts/setup installs it)"
mkdir -p "$cache" || skip "cannot create $cache"
exec 9>"$cache/.lock"
flock 9  # one maker at a time; the others find it complete
if [[ -f $root/.complete ]]; then echo "$root"; exit 0; fi
timeout 20 bash -c "exec 3<>/dev/tcp/deb.debian.org/80" 2>/dev/null ||
  skip "no network to deb.debian.org (needed once, to make the ROCm 6.4 root)"
tmp=$root.tmp
rm -rf "$tmp"
log=$cache/rocm6-$key.log
echo "rocm6_root: debootstrap $suite into $tmp (a few minutes, once)" >&2
if ! debootstrap --variant=minbase "$suite" "$tmp" "$mirror" >"$log" 2>&1; then
  tail -5 "$log" >&2
  grep -qiE "resolve|connect|network|Failed getting release" "$log" && skip "debootstrap could not reach $mirror"
  exit 1
fi
cp /etc/resolv.conf "$tmp/etc/resolv.conf"
echo "rocm6_root: apt-get install $packages" >&2
# The mirror here serves a frozen snapshot whose Release may be past its Valid-Until date.
if ! chroot "$tmp" /bin/sh -c "apt-get -o Acquire::Check-Valid-Until=false update -q && DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends $packages && apt-get clean \
    && rm -rf /var/lib/apt/lists/*" >>"$log" 2>&1; then
  tail -5 "$log" >&2
  exit 1
fi
mkdir -p "$tmp/opt/prewarm" "$tmp/cache" "$tmp/data"
printf '%s\n' "$suite" "$packages" "$recipe" >"$tmp/.complete"
mv "$tmp" "$root"
echo "$root"
