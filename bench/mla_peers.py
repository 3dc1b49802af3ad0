#!/usr/bin/env python3
"""PyTorch peers of the MLA launchers (bench/kernel_bench.cc), timed on the GPU.

What a PyTorch user would run instead of our kernels, on kernel_bench's shapes and printed in its
row format (model, launcher, variant, rows, ctx, median/p10/p90 us, reps, TFLOP/s, GB/s, %copy,
%bf16, then what the peer is and its check), so bench/RESULTS.md can set the rows side by side.
Models (kernel_bench's labels): stand-in (the seeds' 64-head shape: Hr 64, Hi 4), v3.2-tp1
(DeepSeek-V3.2 per rank at tp 1: Hr 128, Hi 64), v3.2-tp8 (Hr 16, Hi 64); L 512, Dr 64, Di 128,
Ktop 2048, 64-token pages. The peers keep a bf16 KV cache (PyTorch has no NVFP4): [slots][L + Dr].

  sparse_decode / sparse_prefill  MLA over the selected positions, bf16: the block table turns each
      selected position into a slot, the records are gathered, S = einsum(q, kv) over L + Dr,
      softmax in fp32 (masked where nothing is selected), O = einsum(P, latent). `eager` and
      `compiled` (torch.compile of the same function); a prefill chunk runs in row chunks of at
      most --chunk rows (the gathered records of 8192 rows would be 19 GB).
  fp8_bmm  q_absorb (X [M][B][128] -> [M][B][512]) and v_up ([M][B][512] -> [M][B][128]), B the
      heads per rank: `bf16` torch.bmm (as vLLM calls it: transposed views); `fp8`
      torch._scaled_grouped_mm with X already FP8 (rowwise scales: the GEMM alone); `q+fp8` the
      same after quantizing X from bf16 (what our kernel does inside). When _scaled_grouped_mm
      is missing or refuses a shape the row says why.
  index_decode / index_prefill  score[t][j] = sum_h w[t][h] relu(q[t][h] . k[j]) over the visible
      keys (-inf past them), keys bf16 contiguous per request (the peer is spared the paging).
      `eager` and `compiled`; a prefill chunk runs in row chunks.
  topk_decode / topk_prefill  torch.topk(scores, 2048) (sorted=False) over rows whose positions
      past the visible range are -inf.

TFLOP/s and GB/s use kernel_bench's formulas (its header states them): the same FLOPs, and the
fewest bytes of the same problem with NVFP4 records and no split-K workspace, so the rates of a
peer and of our row compare as their times do. Timing as kernel_bench: one call checked, warm-up,
then per launch the L2 flushed (512 MiB written) and CUDA events around it; median, p10, p90.
Eager peers of several ops include the host's launch gaps, as the events see them. Each peer is
checked once at its timed size (the check column): against a float64 reference on sampled rows,
or the compiled peer against the eager one. Needs a CUDA GPU (exit 1 without one); --cpu-smoke
runs tiny sizes on the CPU (any torch >= 1.13) to check the code paths, timing nothing of worth.

  python3 bench/mla_peers.py [--shapes LABEL,...] [--only WORD,...] [--reps N] [--chunk N]
                             [--bf16-tflops T] [--time-limit-s S] [--seed S] [--cpu-smoke]
WORD: a launcher (sparse_decode, fp8_bmm, ...) or a variant word (eager, compiled, bf16, fp8).
"""
import argparse
import math
import sys
import time

import torch

L, DR, DI, KTOP, PAGE = 512, 64, 128, 2048, 64
RECORD = L // 2 + L // 16 + 2 * DR  # our NVFP4 record, bytes: kernel_bench's byte formulas
IRECORD = DI // 2 + DI // 16
MODELS = {"stand-in": (64, 4), "v3.2-tp1": (128, 64), "v3.2-tp8": (16, 64)}  # label: (Hr, Hi)
STAND_IN_MAX_CTX = 32768  # its max_position_embeddings: kernel_bench has no row past it
NEG = float("-inf")
FMT = "%-26s %-16s %-14s %1s %6d %7s %10.1f %9.1f %9.1f %5d %8s %8.1f %6.1f %6s  %s"
HEAD = ("%-26s %-16s %-14s %1s %6s %7s %10s %9s %9s %5s %8s %8s %6s %6s  %s" %
        ("model", "launcher", "variant", "", "rows", "ctx", "median_us", "p10_us", "p90_us",
         "reps", "TFLOP/s", "GB/s", "%copy", "%bf16", "key (the peer), check"))


class Sizes:
    """kernel_bench's sizes, or tiny ones for --cpu-smoke."""

    def __init__(self, smoke):
        self.smoke = smoke
        self.ktop = 64 if smoke else KTOP
        self.pool_blocks = 64 if smoke else 16384  # KV pages the tables scatter over


def rel_err(out, ref):
    out, ref = out.double(), ref.double()
    if not bool(torch.isfinite(out).all()):
        return float("nan")
    return ((out - ref).norm() / ref.norm().clamp(min=1e-300)).item()


def verdict(name, err, tol):
    return "%s %.1e %s" % (name, err, "ok" if err == err and err < tol else "BAD")


def sample_rows(n, k=4):
    return sorted(set([0, n - 1] + [int(x) for x in torch.randint(0, n, (k - 2,))]))


def labels_for(hi=None, ctx=0):
    """kernel_bench's model column: the models a shape stands for."""
    out = []
    for label, (_, h) in MODELS.items():
        if (hi is None or h == hi) and not (label == "stand-in" and ctx > STAND_IN_MAX_CTX):
            out.append(label)
    return ",".join(out)


# ------------------------------------------------------------------------------------------------
# The peers

def sparse_mla(q, kv, table, req, pos, scale):
    """q [R, H, L + DR] bf16; kv [slots, L + DR] bf16; table [requests, blocks]; req [R]; pos
    [R, K] selected positions (-1: none). -> [R, H, L] bf16."""
    valid = pos >= 0
    p = pos.clamp(min=0)
    slots = table[req[:, None], p // PAGE] * PAGE + p % PAGE
    g = kv[slots]  # [R, K, L + DR]
    s = torch.einsum("rhd,rkd->rhk", q, g).float() * scale
    s = s.masked_fill(~valid[:, None, :], NEG)
    pr = torch.softmax(s, dim=-1).to(q.dtype)
    return torch.einsum("rhk,rkd->rhd", pr, g[..., :L])


def index_scores(q, w, k, visible):
    """q [R, Hi, DI] bf16, w [R, Hi] fp32, k [R or 1, N, DI] bf16, visible [R] -> [R, N] fp32."""
    s = torch.relu(torch.matmul(q, k.transpose(-1, -2)).float())  # [R, Hi, N]
    s = (s * w[..., None]).sum(1)
    j = torch.arange(k.shape[-2], device=q.device)
    return s.masked_fill(j[None, :] >= visible[:, None], NEG)


def chunked(fn, chunk, rows, *row_args, rest=()):
    """fn over row chunks of at most `chunk` rows (each arg of row_args split on dim 0)."""
    if rows <= chunk:
        return fn(*row_args, *rest)
    return torch.cat([fn(*[a[i:i + chunk] for a in row_args], *rest)
                      for i in range(0, rows, chunk)])


_COMPILED = {}


def compiled(fn):
    """torch.compile of fn, one per function, its defaults (a second shape makes it dynamic), as
    a user would leave it: a compile a shape would cost minutes for the run's 20 shapes."""
    if fn not in _COMPILED:
        _COMPILED[fn] = torch.compile(fn)
    return _COMPILED[fn]


class Case:
    """One shape of one launcher: its peers (variant, fn, key text), FLOPs, bytes, checks."""
    flops = 0.0
    bytes = 0.0

    def check(self, variant, out, eager_out):
        return "-"


class Sparse(Case):
    def __init__(self, sz, label, heads, rows, ctx, prefill, chunk, dev):
        self.launcher = "sparse_prefill" if prefill else "sparse_decode"
        self.model, self.rows, self.ctx = label, rows, ctx
        k, requests = sz.ktop, 1 if prefill else rows
        blocks = (ctx + PAGE - 1) // PAGE
        nb = min(blocks * requests, sz.pool_blocks)
        self.kv = (torch.randn(nb * PAGE, L + DR, device=dev) * 0.5).to(torch.bfloat16)
        self.table = ((torch.arange(blocks * requests, device=dev) * 7919) % nb).view(requests,
                                                                                       blocks)
        self.req = torch.zeros(rows, dtype=torch.long, device=dev) if prefill else torch.arange(
            rows, device=dev)
        vis = (ctx - rows + 1 + torch.arange(rows, device=dev)) if prefill else torch.full(
            (rows,), ctx, device=dev)
        n = vis.clamp(max=k)
        pos = (torch.rand(rows, k, device=dev) * vis[:, None]).long().sort(-1).values
        self.pos = pos.masked_fill(torch.arange(k, device=dev)[None, :] >= n[:, None], -1)
        self.q = (torch.randn(rows, heads, L + DR, device=dev) * 0.5).to(torch.bfloat16)
        self.scale = 1.0 / math.sqrt(192.0)
        sel = float(n.sum())
        self.flops = 2.0 * heads * sel * (2 * L + DR)
        records = min(sel, ctx) if prefill else sel
        self.bytes = rows * heads * (2.0 * (L + DR) + 2.0 * L + 4) + 4.0 * rows * k + records * RECORD
        self.key = "gather+einsum+softmax bf16, heads=%d,topk=%d%s" % (
            heads, k, ",chunk=%d" % min(chunk, rows) if rows > chunk else "")
        self.chunk = chunk

    def peers(self):
        args = (self.q, self.pos, self.req)

        def run(fn):
            return lambda: chunked(lambda q, p, r: fn(q, self.kv, self.table, r, p, self.scale),
                                   self.chunk, self.rows, *args)

        out = [("eager", run(sparse_mla))]
        if hasattr(torch, "compile") and self.q.is_cuda:
            out.append(("compiled", run(compiled(sparse_mla))))
        return out

    def check(self, variant, out, eager_out):
        if variant != "eager":
            return verdict("vs eager", rel_err(out, eager_out), 2e-2)
        rows = sample_rows(self.rows)
        r = torch.tensor(rows, device=self.q.device)
        p = self.pos[r]
        slots = self.table[self.req[r][:, None], p.clamp(min=0) // PAGE] * PAGE + p.clamp(
            min=0) % PAGE
        g = self.kv[slots].double()
        s = torch.einsum("rhd,rkd->rhk", self.q[r].double(), g) * self.scale
        s = s.masked_fill((p < 0)[:, None, :], NEG)
        ref = torch.einsum("rhk,rkd->rhd", torch.softmax(s, -1), g[..., :L])
        return verdict("vs fp64", rel_err(out[r], ref), 2e-2)


class Bmm(Case):
    def __init__(self, label, heads, gemm, m, dev):
        self.launcher, self.model, self.rows, self.ctx = "fp8_bmm", label, m, 0
        self.gemm = gemm
        n, k = (512, 128) if gemm == "q_absorb" else (128, 512)
        self.x = (torch.randn(m, heads, k, device=dev) * 0.5).to(torch.bfloat16)
        self.w = (torch.randn(heads, n, k, device=dev) * 0.05).to(torch.bfloat16)
        self.flops = 2.0 * m * heads * n * k
        self.bytes = 2.0 * m * heads * k + heads * n * k + 2.0 * m * heads * n
        self.key = "batch=%d,n=%d,k=%d" % (heads, n, k)
        self.why_not = None
        f8 = getattr(torch, "float8_e4m3fn", None)
        if f8 is None or not hasattr(torch, "_scaled_grouped_mm"):
            self.why_not = "torch %s has no %s" % (
                torch.__version__, "float8_e4m3fn" if f8 is None else "_scaled_grouped_mm")
            return
        self.w8, self.ws = quantize_rows(self.w)  # [B, N, K], [B, N]
        self.x8, self.xs = quantize_rows(self.x.transpose(0, 1))  # [B, M, K], [B, M]

    def peers(self):
        x, w = self.x, self.w
        out = [("%s,bf16" % self.gemm, lambda: torch.bmm(x.transpose(0, 1),
                                                         w.transpose(1, 2)).transpose(0, 1))]
        if self.why_not is None:
            w8t, ws = self.w8.transpose(-2, -1), self.ws

            def fp8():
                return torch._scaled_grouped_mm(self.x8, w8t, self.xs, ws,
                                                out_dtype=torch.bfloat16).transpose(0, 1)

            def quant_fp8():
                x8, xs = quantize_rows(x.transpose(0, 1))
                return torch._scaled_grouped_mm(x8, w8t, xs, ws,
                                                out_dtype=torch.bfloat16).transpose(0, 1)

            out += [("%s,fp8" % self.gemm, fp8), ("%s,q+fp8" % self.gemm, quant_fp8)]
        return out

    def check(self, variant, out, eager_out):
        b = sample_rows(self.x.shape[1], 3)
        ref = torch.einsum("mbk,bnk->mbn", self.x[:, b].double(), self.w[b].double())
        # FP8 rounds X and W to 3 mantissa bits: a few percent is the format, not an error.
        return verdict("vs fp64", rel_err(out[:, b], ref), 1e-2 if variant.endswith("bf16") else 8e-2)


def quantize_rows(x):
    """bf16 [..., K] -> (e4m3fn [..., K], fp32 scales [...]): one scale per row, amax / 448."""
    amax = x.float().abs().amax(-1).clamp(min=1e-12)
    s = (amax / 448.0).contiguous()
    # Row-major groups as _scaled_grouped_mm reads them, whatever the view of x.
    return (x.float() / s[..., None]).to(torch.float8_e4m3fn,
                                          memory_format=torch.contiguous_format), s


class Index(Case):
    def __init__(self, label, hi, rows, ctx, prefill, chunk, dev):
        self.launcher = "index_prefill" if prefill else "index_decode"
        self.model, self.rows, self.ctx, self.chunk = label, rows, ctx, chunk
        self.q = (torch.randn(rows, hi, DI, device=dev) * 0.5).to(torch.bfloat16)
        self.w = torch.rand(rows, hi, device=dev)
        self.k = (torch.randn(1 if prefill else rows, ctx, DI, device=dev) * 0.5).to(torch.bfloat16)
        self.vis = (ctx - rows + 1 + torch.arange(rows, device=dev)) if prefill else torch.full(
            (rows,), ctx, device=dev)
        self.prefill = prefill
        seen = float(self.vis.sum())
        self.flops = 2.0 * hi * DI * seen
        records = ctx if prefill else rows * ctx
        self.bytes = rows * (2.0 * hi * DI + 4.0 * hi) + 4.0 * rows * ctx + records * IRECORD
        self.key = "matmul+relu+weighted sum bf16, index_heads=%d%s" % (
            hi, ",chunk=%d" % min(chunk, rows) if rows > chunk else "")

    def peers(self):
        def run(fn):
            if self.prefill:
                return lambda: chunked(lambda q, w, v: fn(q, w, self.k, v), self.chunk, self.rows,
                                       self.q, self.w, self.vis)
            return lambda: fn(self.q, self.w, self.k, self.vis)

        out = [("eager", run(index_scores))]
        if hasattr(torch, "compile") and self.q.is_cuda:
            out.append(("compiled", run(compiled(index_scores))))
        return out

    def check(self, variant, out, eager_out):
        if variant != "eager":
            return verdict("vs eager", rel_err(out.nan_to_num(neginf=0), eager_out.nan_to_num(
                neginf=0)), 2e-2)
        rows = sample_rows(self.rows, 2)
        k = self.k[0 if self.prefill else rows].double()
        s = torch.relu(torch.matmul(self.q[rows].double(), k.transpose(-1, -2)))
        ref = (s * self.w[rows].double()[..., None]).sum(1)
        mask = torch.arange(self.ctx, device=ref.device)[None, :] < self.vis[rows][:, None]
        return verdict("vs fp64", rel_err(out[rows][mask], ref[mask]), 2e-2)


class Topk(Case):
    def __init__(self, sz, rows, ctx, prefill, dev):
        self.launcher = "topk_prefill" if prefill else "topk_decode"
        self.model, self.rows, self.ctx, self.k = labels_for(None, ctx), rows, ctx, sz.ktop
        vis = (ctx - rows + 1 + torch.arange(rows, device=dev)) if prefill else torch.full(
            (rows,), ctx, device=dev)
        s = torch.rand(rows, ctx, device=dev)
        self.s = s.masked_fill(torch.arange(ctx, device=dev)[None, :] >= vis[:, None], NEG)
        self.bytes = 4.0 * float(vis.sum()) + 4.0 * rows * self.k
        self.key = "torch.topk fp32, topk=%d, sorted=False" % self.k

    def peers(self):
        return [("torch.topk", lambda: torch.topk(self.s, self.k, dim=-1, sorted=False))]

    def check(self, variant, out, eager_out):
        rows = sample_rows(self.rows, 2)
        got = out.values[rows].sort(-1, descending=True).values
        want = self.s[rows].sort(-1, descending=True).values[:, :self.k]
        return "vs sort %s" % ("ok" if torch.equal(got, want) else "BAD")


def cases(sz, shapes, chunk, dev):
    """Constructors of the timed cases, the headline rows first (a time limit cuts the tail)."""
    smoke = sz.smoke
    models = [(lbl, MODELS[lbl]) for lbl in MODELS if lbl in shapes]
    his = sorted({hi for _, (_, hi) in models})
    c = (lambda n: max(n // 64, 128)) if smoke else (lambda n: n)  # ctx
    r = (lambda n: min(n, 8)) if smoke else (lambda n: n)  # rows
    out = []
    for lbl, (hr, _) in models:
        for rows in (16, 128, 32, 64):
            out.append(lambda lbl=lbl, hr=hr, rows=rows: Sparse(sz, lbl, hr, r(rows), c(32768),
                                                                False, chunk, dev))
        out.append(lambda lbl=lbl, hr=hr: Sparse(sz, lbl, hr, r(8192), c(8192), True, chunk, dev))
    for lbl, (hr, _) in models:
        for m in (1, 16, 128, 512, 8192):
            for gemm in ("q_absorb", "v_up"):
                out.append(lambda lbl=lbl, hr=hr, m=m, gemm=gemm: Bmm(lbl, hr, gemm, r(m), dev))
    for hi in his:
        lbl = labels_for(hi)
        for rows, ctx in ((16, 8192), (16, 131072), (128, 8192), (16, 32768), (16, 65536)):
            if ctx <= STAND_IN_MAX_CTX or "v3.2" in lbl:
                out.append(lambda hi=hi, rows=rows, ctx=ctx: Index(
                    labels_for(hi, ctx), hi, r(rows), c(ctx), False, chunk, dev))
        out.append(lambda hi=hi, lbl=lbl: Index(lbl, hi, r(8192), c(8192), True,
                                                max(1, chunk // 2), dev))
    for ctx in (8192, 8256, 32768, 65536, 131072):
        for rows in (1, 16, 128):
            out.append(lambda rows=rows, ctx=ctx: Topk(sz, r(rows), c(ctx), False, dev))
    for rows, ctx in ((512, 8192), (8192, 8192), (512, 32768), (8192, 32768)):
        out.append(lambda rows=rows, ctx=ctx: Topk(sz, r(rows), c(ctx), True, dev))
    for lbl, (hr, _) in models:
        out.append(lambda lbl=lbl, hr=hr: Sparse(sz, lbl, hr, r(8192), c(32768), True, chunk, dev))
    return out


# ------------------------------------------------------------------------------------------------
# Timing

class Timer:
    def __init__(self, dev):
        self.cuda = dev.type == "cuda"
        if self.cuda:
            self.flush = torch.empty(512 << 20, dtype=torch.uint8, device=dev)

    def __call__(self, fn, reps):
        """Sorted times in us of `reps` calls, each after an L2 flush; fn() warmed up first."""
        for _ in range(2):
            fn()
        if not self.cuda:
            us = []
            for _ in range(reps):
                t = time.perf_counter()
                fn()
                us.append((time.perf_counter() - t) * 1e6)
            return sorted(us)
        torch.cuda.synchronize()
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(reps)]
        for a, b in ev:
            self.flush.zero_()
            a.record()
            fn()
            b.record()
        torch.cuda.synchronize()
        return sorted(a.elapsed_time(b) * 1e3 for a, b in ev)

    def copy_tbs(self):
        if not self.cuda:
            return 0.0
        a = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
        b = torch.empty_like(a)
        us = self(lambda: b.copy_(a), 20)
        return 2.0 * (1 << 30) / (us[len(us) // 2] * 1e-6) / 1e12


def pick(us, f):
    return us[min(len(us) - 1, int(f * len(us)))]


def wanted(only, launcher, variant):
    return not only or launcher in only or any(w in variant.replace(",", ".").split(".")
                                               or w == variant for w in only)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", default=",".join(MODELS), help="of: " + ", ".join(MODELS))
    ap.add_argument("--only", default="", help="launchers or variant words, comma-separated")
    ap.add_argument("--reps", type=int, default=0, help="timed calls a row (default: by row)")
    ap.add_argument("--chunk", type=int, default=1024, help="rows a prefill chunk runs at once")
    ap.add_argument("--bf16-tflops", type=float, default=790.0)
    ap.add_argument("--time-limit-s", type=float, default=0, help="rows left past it: skipped")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cpu-smoke", action="store_true", help="tiny sizes on the CPU, no timing")
    a = ap.parse_args()
    shapes = [s for s in a.shapes.split(",") if s]
    for s in shapes:
        if s not in MODELS:
            ap.error("--shapes %s: not one of %s" % (s, ", ".join(MODELS)))
    if a.chunk < 1 or a.reps < 0:
        ap.error("--chunk %d / --reps %d: must be positive" % (a.chunk, a.reps))
    if a.cpu_smoke:
        dev = torch.device("cpu")
    elif torch.cuda.is_available():
        dev = torch.device("cuda")
    else:
        print("mla_peers: no CUDA GPU (torch %s, torch.cuda.is_available() is False); the peers "
              "time nothing without one (--cpu-smoke runs the code paths on the CPU)"
              % torch.__version__, file=sys.stderr)
        return 1
    only = [w for w in a.only.split(",") if w]
    t0 = time.time()
    torch.manual_seed(a.seed)
    sz = Sizes(a.cpu_smoke)
    timer = Timer(dev)
    copy = timer.copy_tbs()
    gpu = torch.cuda.get_device_name() if timer.cuda else "cpu (smoke: tiny sizes)"
    print("mla_peers on %s, torch %s: copy %.2f TB/s (measured), bf16 peak %.0f TFLOP/s (given)"
          % (gpu, torch.__version__, copy, a.bf16_tflops))
    print("times in us: median, p10, p90 of `reps` calls, CUDA events around each, the L2 "
          "flushed (512 MiB written) before each; TFLOP/s and GB/s: kernel_bench's formulas")
    if hasattr(torch, "_dynamo"):
        import torch._dynamo as dynamo
        for attr in ("cache_size_limit", "recompile_limit"):
            if hasattr(dynamo.config, attr):
                setattr(dynamo.config, attr, 256)
    print(HEAD)
    sys.stdout.flush()
    for make in cases(sz, shapes, a.chunk, dev):
        if a.time_limit_s and time.time() - t0 > a.time_limit_s:
            print("# time limit (%.0f s): the rows left are skipped" % a.time_limit_s)
            break
        try:
            c = make()
        except Exception as e:  # noqa: BLE001 (one shape's failure is a line, not the end)
            print("# a case could not be made: %s: %s" % (type(e).__name__, str(e)[:160]))
            continue
        if only and c.launcher not in only and not any(
                wanted(only, c.launcher, v) for v, _ in c.peers()):
            continue
        eager_out = None
        for variant, fn in c.peers():
            if not wanted(only, c.launcher, variant) and variant != "eager":
                continue
            ctx = str(c.ctx) if c.ctx else "-"
            try:
                out = fn()  # the first call compiles
                chk = c.check(variant, out, eager_out)
                if variant == "eager":
                    eager_out = out
                if not wanted(only, c.launcher, variant):
                    continue
                first = timer(fn, 3)[1]
                reps = a.reps or max(10, min(100, int(400e3 / max(first, 1.0))))
                us = timer(fn, 2 if a.cpu_smoke else reps)
                med = pick(us, 0.5) * 1e-6
                gbs, tf = c.bytes / med / 1e9, c.flops / med / 1e12
                print(FMT % (c.model, c.launcher, variant, "", c.rows, ctx, pick(us, 0.5),
                             pick(us, 0.1), pick(us, 0.9), len(us),
                             "%.1f" % tf if c.flops else "-", gbs,
                             100 * gbs / 1e3 / copy if copy else 0,
                             "%.1f" % (100 * tf / a.bf16_tflops) if c.flops else "-",
                             "%s  %s" % (c.key, chk)))
            except Exception as e:  # noqa: BLE001
                print("%-26s %-16s %-14s   %6d %7s  not run: %s: %s" % (
                    c.model, c.launcher, variant, c.rows, ctx, type(e).__name__,
                    str(e).replace("\n", " ")[:200]))
            sys.stdout.flush()
        if isinstance(c, Bmm) and c.why_not and wanted(only, c.launcher, "fp8"):
            print("%-26s %-16s %-14s   %6d %7s  not run: %s" % (
                c.model, c.launcher, c.gemm + ",fp8", c.rows, "-", c.why_not))
        del c, eager_out
        if timer.cuda:
            torch.cuda.empty_cache()
    print("mla_peers: done in %.0f s" % (time.time() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
