#!/usr/bin/env python3
"""Checks a `prewarm verify --format json` report of a gfx942/gfx950 cache, and reads each
entry's code object with its own ELF reader (independent of prewarm's):

  every key valid; prewarm read its resources with no problem listed;
  each payload an AMDGPU ELF (e_machine 224) whose e_flags machine is the key's arch
  (EF_AMDGPU_MACH 0x4c gfx942, 0x4f gfx950, 0x41 gfx1100, 0x48 gfx1200);
  each entry the launch code needs present, with a dynamic symbol NAME (function) and NAME.kd
  (a 64-byte kernel descriptor) in the ELF;
  the wave width the launch code assumes (64 on CDNA, 32 on RDNA: gfx1100, gfx1200);
  on gfx942 and gfx950 (the archs the product is for) no scratch and no VGPR spills;
  LDS (static + dynamic) within the arch's limit (160 KiB gfx950, 64 KiB the others).

  check_code_objects.py VERIFY_JSON CACHE_DIR
"""
import json
import os
import struct
import sys

MACH = {0x4C: "gfx942", 0x4F: "gfx950", 0x41: "gfx1100", 0x48: "gfx1200"}
LDS_LIMIT = {"gfx942": 64 * 1024, "gfx950": 160 * 1024, "gfx1100": 64 * 1024, "gfx1200": 64 * 1024}
WAVE = {"gfx942": 64, "gfx950": 64, "gfx1100": 32, "gfx1200": 32}
NO_SCRATCH = ("gfx942", "gfx950")


def payload(path):
    """The code object of a cache entry (format: docs/cache-format.md)."""
    b = open(path, "rb").read()
    assert b[:8] == b"PREWARM\0", path
    o = 12
    for _ in range(3):  # producer, key, arch
        (n,) = struct.unpack_from("<I", b, o)
        o += 4 + n
    (n,) = struct.unpack_from("<Q", b, o)
    return b[o + 8 : o + 8 + n]


def dynamic_symbols(elf):
    """{name: (type, size)} of .dynsym."""
    (shoff,) = struct.unpack_from("<Q", elf, 40)
    (shnum,) = struct.unpack_from("<H", elf, 60)
    secs = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + 64 * i) for i in range(shnum)]
    out = {}
    for s in secs:
        if s[1] != 11:  # SHT_DYNSYM
            continue
        strtab = secs[s[6]]
        for o in range(s[4], s[4] + s[5], 24):
            name, info, _, _, _, size = struct.unpack_from("<IBBHQQ", elf, o)
            start = strtab[4] + name
            end = elf.index(b"\0", start)
            out[elf[start:end].decode()] = (info & 0xF, size)
    return out


def main():
    report = json.load(open(sys.argv[1]))
    cache = sys.argv[2]
    files = {}
    for d in os.listdir(cache):
        for f in os.listdir(os.path.join(cache, d)) if os.path.isdir(os.path.join(cache, d)) else []:
            if f.endswith(".co"):
                p = os.path.join(cache, d, f)
                files.setdefault(d.rsplit("_", 1)[0], []).append(p)
    problems = []
    by_key = {}
    for launcher, paths in files.items():
        for p in paths:
            raw = open(p, "rb").read()
            (n,) = struct.unpack_from("<I", raw, 12)
            o = 16 + n
            (n,) = struct.unpack_from("<I", raw, o)
            by_key[(launcher, raw[o + 4 : o + 4 + n].decode())] = p
    checked = 0
    for k in report["keys"]:
        what = f'{k["launcher"]} {k["key"]}'
        if k["state"] != "valid":
            problems.append(f"{what}: {k['state']}")
            continue
        r = k["resources"]
        arch = dict(p.split("=", 1) for p in k["key"].split(","))["arch"]
        if "error" in r:
            problems.append(f"{what}: {r['error']}")
            continue
        listed = [p for p in r["problems"] if arch in NO_SCRATCH or "scratch" not in p]
        if listed:
            problems.append(f"{what}: {listed}")
        elf = payload(by_key[(k["launcher"], k["key"])])
        if elf[:4] != b"\x7fELF" or struct.unpack_from("<H", elf, 18)[0] != 224:
            problems.append(f"{what}: not an AMDGPU ELF")
            continue
        (flags,) = struct.unpack_from("<I", elf, 48)
        if MACH.get(flags & 0xFF) != arch:
            problems.append(f"{what}: e_flags 0x{flags:x} is not {arch}")
        syms = dynamic_symbols(elf)
        for e in r["entries"]:
            n = e["name"]
            if syms.get(n, (0,))[0] != 2 or syms.get(n + ".kd") != (1, 64):
                problems.append(f"{what}: {n} lacks its function symbol or 64-byte descriptor")
            if e["wave_size"] != WAVE[arch]:
                problems.append(f"{what}: {n} wave {e['wave_size']}, expected {WAVE[arch]}")
            if arch in NO_SCRATCH and (e["scratch_bytes"] or e["vgpr_spills"]):
                problems.append(f"{what}: {n} scratch {e['scratch_bytes']}")
            if e["lds_bytes"] > LDS_LIMIT[arch]:
                problems.append(f"{what}: {n} LDS {e['lds_bytes']} over {LDS_LIMIT[arch]}")
        checked += 1
    if not report["keys"] or report["valid"] != report["planned"]:
        problems.append(f"{report['valid']} of {report['planned']} keys valid")
    for p in problems:
        print("FAIL", p)
    print(f"checked {checked} code objects: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
