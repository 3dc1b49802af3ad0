#!/usr/bin/env bash
# Disassembles every *.elf under DIR (AMDGPU code objects) with the LLVM objdump of the ROCm 6.4
# root (rocm6_root.sh installs llvm-21, the LLVM its comgr is built on, so it knows gfx942 and
# gfx950), writing NAME.s beside each NAME.elf. Runs in a private mount namespace with DIR bound
# at the root's /mnt, so the cached root is never changed.
#   disasm.sh ROOT DIR
set -euo pipefail
root=$1 dir=$(cd "$2" && pwd)
exec unshare --mount --fork /bin/sh -c '
  root=$1 dir=$2
  mount --bind "$dir" "$root/mnt" &&
  exec chroot "$root" /bin/sh -c "for f in /mnt/*.elf; do
    llvm-objdump-21 --disassemble --no-show-raw-insn --no-leading-addr \"\$f\" >\"\${f%.elf}.s\" || exit 1
  done"
' sh "$root" "$dir"
