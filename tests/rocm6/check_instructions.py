#!/usr/bin/env python3
"""Disassembles every gfx942 and gfx950 code object of a `prewarm verify --format json` report
(LLVM's objdump from the ROCm 6.4 root: disasm.sh) and checks that each kernel uses exactly the
matrix instructions its launcher is designed to use (EXPECT below), so a change that silently
falls back to SIMT multiply-adds (or to another instruction) fails. Prints, per key and kernel,
the instruction mix (each MFMA's count, VALU count, all instructions: static counts) beside the
registers, LDS and the occupancy they allow, and writes it as TSV with --mix.

  check_instructions.py VERIFY_JSON CACHE_DIR WORK_DIR [ROOT] [--mix FILE]

With ROOT, each key's ELF goes to WORK_DIR/NAME.elf and is disassembled to WORK_DIR/NAME.s;
without, the .s files already in WORK_DIR are read (rocm6_test.sh doctors one to check that the
checker fails).
"""
import hashlib
import json
import os
import struct
import subprocess
import sys

BF16 = "v_mfma_f32_16x16x16_bf16"  # common/mma.h's PW_MMA_MFMA
BF16X32 = "v_mfma_f32_16x16x32_bf16"  # its pw_mma2 on gfx950: two k steps in one instruction
FP8 = "v_mfma_f32_16x16x32_fp8_fp8"  # fp8_bmm's MFMA path (e4m3fnuz on gfx942, e4m3fn on gfx950)
NONE = frozenset()

# launcher -> {kernel: MFMA mnemonics it must use, all of them and no other}; "*" any kernel of
# the launcher not named. gfx942's; gfx950's differ where GFX950 says.
EXPECT = {
    "fp8_bmm": {"pw_fp8_bmm": {FP8}},
    "norm_rope_insert": {"*": NONE},
    "index_prefill": {"pw_index_prefill": {BF16}},
    "index_decode": {"pw_index_decode": {BF16}},
    "topk_prefill": {"*": NONE},
    "topk_decode": {"*": NONE},
    "sparse_prefill": {"pw_sparse_prefill": {BF16}},
    "sparse_decode": {"pw_sparse_decode": {BF16}, "pw_sparse_decode_combine": NONE},
    "msa_norm_rope_insert": {"*": NONE},
    "msa_index_prefill": {"*": {BF16}},
    "msa_index_decode": {"*": NONE},
    "msa_topk_prefill": {"*": NONE},
    "msa_topk_decode": {"*": NONE},
    "msa_sparse_prefill": {"*": {BF16}},
    "msa_sparse_decode": {"pw_msa_sparse_decode": {BF16}, "*": NONE},
}
# gfx950: the k loops over the head or index dim (S = Q K^T, the index scores) take two k steps
# an instruction (pw_mma2: v_mfma_f32_16x16x32_bf16); the P V loops (k the keys) keep the
# 16x16x16. The index kernels have no P V: the 16x16x32 only.
GFX950 = {
    "index_prefill": {"pw_index_prefill": {BF16X32}},
    "index_decode": {"pw_index_decode": {BF16X32}},
    "sparse_prefill": {"pw_sparse_prefill": {BF16, BF16X32}},
    "sparse_decode": {"pw_sparse_decode": {BF16, BF16X32}, "pw_sparse_decode_combine": NONE},
    "msa_index_prefill": {"*": {BF16X32}},
    "msa_sparse_prefill": {"*": {BF16, BF16X32}},
    "msa_sparse_decode": {"pw_msa_sparse_decode": {BF16, BF16X32}, "*": NONE},
}
ARCHS = ("gfx942", "gfx950")
LDS_PER_CU = {"gfx942": 64 * 1024, "gfx950": 160 * 1024}


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


def entry_key(path):
    """The key string of a cache entry."""
    raw = open(path, "rb").read()
    (n,) = struct.unpack_from("<I", raw, 12)
    o = 16 + n
    (n,) = struct.unpack_from("<I", raw, o)
    return raw[o + 4 : o + 4 + n].decode()


def mix(asm_path):
    """{kernel: {"mfma": {mnemonic: count}, "valu": n, "all": n}} from objdump's text."""
    out, cur = {}, None
    for line in open(asm_path):
        s = line.strip()
        if s.startswith("<") and s.endswith(">:"):
            cur = out.setdefault(s[1:-2], {"mfma": {}, "valu": 0, "all": 0})
            continue
        if cur is None or not line.startswith("\t") or not s or s.startswith("//"):
            continue
        op = s.split("//")[0].split()[0]
        cur["all"] += 1
        if op.startswith(("v_mfma", "v_smfmac")):
            cur["mfma"][op] = cur["mfma"].get(op, 0) + 1
        elif op.startswith("v_"):
            cur["valu"] += 1
    return out


def occupancy(arch, e):
    """Waves a SIMD from the registers (prewarm's figure) and from LDS (blocks a CU: a block of
    T threads puts T / 256 waves on each of the CU's 4 SIMDs)."""
    regs = e["waves_per_simd"]
    per_simd = max(1, e["threads"] // 256)
    lds = 8 if e["lds_bytes"] == 0 else LDS_PER_CU[arch] // e["lds_bytes"] * per_simd
    return regs, min(8, lds), min(regs, lds, 8)


def main():
    args = sys.argv[1:]
    mix_out = None
    if "--mix" in args:
        i = args.index("--mix")
        mix_out = args[i + 1]
        del args[i : i + 2]
    report, cache, work = json.load(open(args[0])), args[1], args[2]
    root = args[3] if len(args) > 3 else None
    paths = {}
    for d in os.listdir(cache):
        full = os.path.join(cache, d)
        if not os.path.isdir(full):
            continue
        for f in os.listdir(full):
            if f.endswith(".co"):
                p = os.path.join(full, f)
                paths[(d.rsplit("_", 1)[0], entry_key(p))] = p
    keys = []
    for k in report["keys"]:
        arch = dict(p.split("=", 1) for p in k["key"].split(","))["arch"]
        if arch in ARCHS and k["state"] == "valid":
            name = k["launcher"] + "-" + hashlib.sha1(k["key"].encode()).hexdigest()[:12]
            keys.append((k, arch, name))
    if root:
        os.makedirs(work, exist_ok=True)
        for f in os.listdir(work):
            if f.endswith((".elf", ".s")):
                os.remove(os.path.join(work, f))
        for k, _, name in keys:
            elf = payload(paths[(k["launcher"], k["key"])])
            open(os.path.join(work, name + ".elf"), "wb").write(elf)
        here = os.path.dirname(os.path.abspath(__file__))
        subprocess.run([os.path.join(here, "disasm.sh"), root, work], check=True)
    problems, rows = [], []
    for k, arch, name in keys:
        what = f'{k["launcher"]} {k["key"]}'
        kernels = mix(os.path.join(work, name + ".s"))
        expect = (GFX950 if arch == "gfx950" else {}).get(k["launcher"], EXPECT.get(k["launcher"]))
        if expect is None:
            problems.append(f"{what}: no expected matrix instructions for launcher {k['launcher']}")
            continue
        for e in k["resources"]["entries"]:
            got = kernels.get(e["name"])
            if got is None:
                problems.append(f"{what}: {e['name']} not in the disassembly")
                continue
            want = expect.get(e["name"], expect.get("*"))
            if want is None:
                problems.append(f"{what}: no expected matrix instructions for {e['name']}")
            elif set(got["mfma"]) != set(want):
                problems.append(
                    f"{what}: {e['name']} uses {sorted(got['mfma']) or 'no MFMA'}, "
                    f"designed for {sorted(want) or 'none'}")
            regs, lds, occ = occupancy(arch, e)
            rows.append([k["launcher"], k["key"], e["name"],
                         ",".join(f"{m}:{c}" for m, c in sorted(got["mfma"].items())) or "-",
                         sum(got["mfma"].values()), got["valu"], got["all"], e["registers"],
                         e["agprs"], e["lds_bytes"], regs, lds, occ])
    header = ["launcher", "key", "kernel", "mfma", "mfma_n", "valu", "all", "vgpr", "agpr", "lds",
              "waves_regs", "waves_lds", "waves"]
    if mix_out:
        with open(mix_out, "w") as f:
            f.write("\t".join(header) + "\n")
            for r in rows:
                f.write("\t".join(str(x) for x in r) + "\n")
    for p in problems:
        print("FAIL", p)
    print(f"instructions: {len(rows)} kernels of {len(keys)} gfx942/gfx950 keys disassembled, "
          f"{len(problems)} problems")
    return 1 if problems or not keys else 0


if __name__ == "__main__":
    sys.exit(main())
