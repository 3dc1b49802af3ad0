#!/usr/bin/env python3
"""A whole model's step through the warm kernels as PyTorch custom ops (prewarm_runtime.ops):
N layers (default 8) of one attention path with random weights, each layer the one graph of
torch.compile(fullgraph=True) (no graph break: the launchers are torch.ops.prewarm.*), the
decode steps captured once in a CUDA graph and replayed, serving the seeds' trace (16 concurrent
8K prompts prefilled in chunks of the token budget, then decode), started cold and warm:

  cold: an empty prewarm cache, a non-strict runtime: each kernel compiles the first time a step
        reaches it, inside that step;
  warm: after `prewarm run`, a strict runtime that loads every planned kernel at start and never
        compiles (a miss would raise MissError inside the compiled step).

Each mode runs in its own process, as a server start would. torch.compile's own cache
(TORCHINDUCTOR_CACHE_DIR, a fresh directory for the run) is shared: cold starts it empty, warm
finds what cold put there, as a warm server finds both caches on its volume (Dynamo still traces
every graph again in each process). Per pass one line: the step latencies (first step, prefill
total, decode p50, max, whole pass), torch.compile's graphs compiled in the pass, CUDA graph
captures, and the kernels the runtime compiled in the pass with their seconds (prewarm's share).

Layer (DeepSeek-V3.2's MLA path, the seeds' 64-head shape by default): bf16 projections of the
hidden state (torch, compiled by Inductor), fp8_bmm q_absorb, norm_rope_insert, index_prefill /
index_decode, topk_prefill / topk_decode, sparse_prefill / sparse_decode, fp8_bmm v_up, the
output projection and the residual. With a MiniMax-M3 config (--model-config
tests/data/models/minimax-m3.json --tensor-parallel-size 4) the layer is the msa_* path:
projections, msa_norm_rope_insert, msa_index_prefill and msa_topk_prefill (decode: the two in one
launch, msa_index_topk_decode), msa_sparse_*, output projection.

  examples/model_step.py [--layers N] [--hidden D] [--passes N] [--decode-steps N]
                         [--model-config FILE] [--tensor-parallel-size N] [--prewarm BIN]

Needs a GPU, torch >= 2.4, the prewarm binary and the package (pip install python/, or
PYTHONPATH and PREWARM_RUNTIME_LIB). tests/python/test_compile_gpu.py uses Model from here.
"""

import argparse
import os
import pathlib
import subprocess
import sys
import tempfile
import time

T0 = time.perf_counter()
ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from serve_warm import DECODE_STEPS, PROMPTS, arch, config_family, seed_trace  # noqa: E402


def prefill_work(chunks):
    """The index_prefill key's input: the sum over the step's prefill chunks of q_len * ctx."""
    work = 0
    for q, c in chunks:
        work += q * c
    return work


class Model:
    """N attention layers of the runtime's model family with random weights, their caches and
    the step's scratch, allocated once. forward(h, pos, slot, row_req, visible, n_dec, chunks) is
    one step: h bf16 [T, hidden] the step's hidden states; pos int32 [T], slot int64 [T] (the
    cache slot of each token), row_req int32 [T] (its request: block_table row), visible int32
    [T] (position + 1); rows are the n_dec decode tokens first, then each prefill chunk's tokens,
    chunks a tuple of (q_len, ctx) per prefill chunk in row order. Returns h after the layers.

    max_tokens: the step's token budget; requests: block_table rows; max_ctx: the largest
    context; chunk_shapes: (q_len, ctx) of the prefill chunks that will run (their topk
    workspace), default the budget at max_ctx."""

    def __init__(self, rt, torch, layers, hidden, max_tokens, requests, max_ctx, seed=2026,
                 chunk_shapes=None):
        import prewarm_runtime.ops as ops

        ops.require()
        self.rt, self.torch, self.ops = rt, torch, ops
        self.dev = dev = torch.device("cuda", rt.device)
        self.msa = rt.info["shape"].get("family") == "MSA"
        self.block = rt.info["limits"]["block_size"]
        self.hidden, self.max_tokens, self.requests = hidden, max_tokens, requests
        self.max_blocks = -(-max_ctx // self.block)
        self.max_ctx = self.max_blocks * self.block
        g = torch.Generator(device=dev)
        g.manual_seed(seed)
        self.g = g
        chunk_shapes = list(chunk_shapes or [(max_tokens, max_ctx)])
        blocks = requests * self.max_blocks
        self.table = torch.arange(blocks, dtype=torch.int32, device=dev).reshape(requests, -1)
        if self.msa:
            self._init_msa(layers, blocks, chunk_shapes)
        else:
            self._init_mla(layers, blocks, chunk_shapes)

    # ---- weights and buffers --------------------------------------------------------------
    def _randn(self, *shape, scale=1.0, dtype=None):
        torch = self.torch
        x = torch.randn(shape, generator=self.g, device=self.dev) * scale
        return x.to(dtype or torch.bfloat16)

    def _proj(self, n):
        return self._randn(self.hidden, n, scale=self.hidden ** -0.5)

    def _fp8(self, *shape):
        """Random FP8 E4M3 codes of magnitude below 1 (0x00..0x37), either sign."""
        torch = self.torch
        c = torch.randint(0, 0x38, shape, generator=self.g, device=self.dev)
        s = torch.randint(0, 2, shape, generator=self.g, device=self.dev) * 0x80
        return (c | s).to(torch.uint8)

    def _empty(self, *shape, dtype):
        return self.torch.empty(shape, dtype=dtype, device=self.dev)

    def _init_mla(self, layers, blocks, chunk_shapes):
        torch, rt = self.torch, self.rt
        s = rt.info["shape"]
        self.H, self.L, self.Dr = s["heads_per_rank"], s["kv_lora_rank"], s["qk_rope_head_dim"]
        self.Dn, self.Dv = s["qk_nope_head_dim"], s["v_head_dim"]
        self.Hi, self.Di, self.K = s["index_n_heads"], s["index_head_dim"], s["index_topk"]
        H, L, Dr, Dn, Dv, Hi, Di = self.H, self.L, self.Dr, self.Dn, self.Dv, self.Hi, self.Di
        u8, T, C = torch.uint8, self.max_tokens, self.max_ctx
        self.layers = []
        for _ in range(layers):
            self.layers.append(dict(
                w_lat=self._proj(L), w_rope=self._proj(Dr), w_ikey=self._proj(Di),
                w_qi=self._proj(Hi * Di), w_w=self._proj(Hi), w_qn=self._proj(H * Dn),
                w_qr=self._proj(H * Dr),
                w_absorb=self._fp8(H, L, Dn), w_v=self._fp8(H, Dv, L),
                w_o=self._randn(H * Dv, self.hidden, scale=0.1 * (H * Dv) ** -0.5),
                gamma=torch.ones(L, device=self.dev),
                kv=torch.zeros((blocks, self.block, L // 2 + L // 16 + 2 * Dr), dtype=u8,
                               device=self.dev),
                index=torch.zeros((blocks, self.block, Di // 2 + Di // 16), dtype=u8,
                                  device=self.dev)))
        # The step's scratch, shared by the layers (each layer overwrites what it reads).
        self.q_lat = self._empty(T, H, L, dtype=torch.bfloat16)
        self.scores = self._empty(T, C, dtype=torch.float32)  # stride: the largest context
        self.topk = self._empty(T, self.K, dtype=torch.int32)
        self.out = self._empty(T, H, L, dtype=torch.bfloat16)
        self.lse = self._empty(T, H, dtype=torch.float32)
        self.y = self._empty(T, H, Dv, dtype=torch.bfloat16)
        top = [rt.workspace("topk_prefill", q, c) for q, c in chunk_shapes]
        self.ws_key, self.ws_idx = (self._ws(max(w[i] for w in top)) for i in (0, 1))
        dec = [rt.workspace("sparse_decode", r) for r in range(1, self.requests + 1)]
        self.ws_o, self.ws_lse = (self._ws(max(w[i] for w in dec)) for i in (0, 1))
        self.w_scale_absorb, self.w_scale_v = Dn ** -0.5, L ** -0.5
        self.g_kv, self.g_idx, self.scale = 0.05, 0.05, (L + Dr) ** -0.5

    def _init_msa(self, layers, blocks, chunk_shapes):
        torch, rt = self.torch, self.rt
        s = rt.info["shape"]
        self.Hq, self.Hkv, self.Hi = (s["heads_per_rank"], s["kv_heads_per_rank"],
                                      s["index_heads_per_rank"])
        self.D, self.Di, self.Kb = s["head_dim"], s["index_dim"], s["sparse_topk_blocks"]
        Hq, Hkv, Hi, D, Di = self.Hq, self.Hkv, self.Hi, self.D, self.Di
        T, nb = self.max_tokens, self.max_blocks
        self.layers = []
        for _ in range(layers):
            self.layers.append(dict(
                w_q=self._proj(Hq * D), w_k=self._proj(Hkv * D), w_v=self._proj(Hkv * D),
                w_iq=self._proj(Hi * Di), w_ik=self._proj(Di),
                norms=[(torch.rand((n,), generator=self.g, device=self.dev) - 0.5)
                       for n in (D, D, Di, Di)],
                w_o=self._randn(Hq * D, self.hidden, scale=0.1 * (Hq * D) ** -0.5),
                kv=torch.zeros((blocks, 2, Hkv, self.block, D // 2 + D // 16), dtype=torch.uint8,
                               device=self.dev),
                index=torch.zeros((blocks, self.block, Di), dtype=torch.bfloat16,
                                  device=self.dev)))
        self.q_out = self._empty(T, Hq, D, dtype=torch.bfloat16)
        self.iq_out = self._empty(T, Hi, Di, dtype=torch.bfloat16)
        self.scores = self._empty(Hi * T * nb, dtype=torch.float32)  # [Hi, rows, nb] views
        self.topk = self._empty(Hi * T * self.Kb, dtype=torch.int32)  # [Hi, rows, Kb] views
        self.o = self._empty(T, Hq, D, dtype=torch.bfloat16)
        self.lse = self._empty(T, Hq, dtype=torch.float32)
        self.ws_topk = self._ws(max(rt.workspace("msa_topk_prefill", q, c)[0]
                                    for q, c in chunk_shapes))
        dec = [rt.workspace("msa_sparse_decode", r) for r in range(1, self.requests + 1)]
        self.ws_o, self.ws_lse = (self._ws(max(w[i] for w in dec)) for i in (0, 1))
        # The fused index + top-k's counters (one a decode row): zeroed once here; every launch
        # leaves them zero, so every layer, step and graph replay shares this one.
        self.ws_index = torch.zeros(rt.workspace("msa_index_decode", self.requests)[0],
                                    dtype=torch.uint8, device=self.dev)
        self.k_scale, self.v_scale, self.scale = 0.02, 0.03, D ** -0.5

    def _ws(self, n):
        return self._empty(n, dtype=self.torch.uint8) if n else None

    # ---- the step -------------------------------------------------------------------------
    def forward(self, h, pos, slot, row_req, visible, n_dec, chunks, layer=None):
        """The step: every layer in turn, through `layer` (default self.layer; serve passes its
        torch.compile of self.layer, one graph that every layer of a step shape reuses)."""
        layer = layer or self.layer
        for w in self.layers:
            h = layer(w, h, pos, slot, row_req, visible, n_dec, chunks)
        return h

    def layer(self, w, h, pos, slot, row_req, visible, n_dec, chunks):
        """One attention layer of the step; w: the layer's weights and caches."""
        fn = self._msa_layer if self.msa else self._mla_layer
        return fn(w, h, pos, slot, row_req, visible, n_dec, chunks)

    def _mla_layer(self, w, h, pos, slot, row_req, visible, n_dec, chunks):
        ops, rt = self.ops, self.rt
        T = h.shape[0]
        H, Dr, Dn, Hi, Di = self.H, self.Dr, self.Dn, self.Hi, self.Di
        latent, rope, ikey = h @ w["w_lat"], h @ w["w_rope"], h @ w["w_ikey"]
        q_idx = (h @ w["w_qi"]).view(T, Hi, Di)
        w_idx = (h @ w["w_w"]).float()
        q_nope, q_rope = (h @ w["w_qn"]).view(T, H, Dn), (h @ w["w_qr"]).view(T, H, Dr)
        q_lat, out, lse = self.q_lat[:T], self.out[:T], self.lse[:T]
        ops.fp8_bmm(rt, q_nope, w["w_absorb"], q_lat, self.w_scale_absorb)
        ops.norm_rope_insert(rt, latent, rope, ikey, w["gamma"], pos, slot, w["kv"], w["index"],
                             self.g_kv, self.g_idx)
        if chunks:
            ops.index_prefill(rt, q_idx[n_dec:], w_idx[n_dec:], row_req[n_dec:],
                              visible[n_dec:], self.table, w["index"], self.scores[n_dec:T],
                              self.g_idx, prefill_work=prefill_work(chunks))
            row = n_dec
            for q, c in chunks:
                r = slice(row, row + q)
                ops.topk_prefill(rt, self.scores[r], visible[r], self.topk[r], ctx=c,
                                 ws_key=self.ws_key, ws_idx=self.ws_idx)
                ops.sparse_prefill(rt, q_lat[r], q_rope[r], self.topk[r], row_req[r], self.table,
                                   w["kv"], out[r], lse[r], g_kv=self.g_kv, scale=self.scale,
                                   ctx=c)
                row += q
        if n_dec:
            d = slice(0, n_dec)
            ops.index_decode(rt, q_idx[d], w_idx[d], row_req[d], visible[d], self.table,
                             w["index"], self.scores[d], self.g_idx, max_ctx=self.max_ctx)
            ops.topk_decode(rt, self.scores[d], visible[d], self.topk[d])
            ops.sparse_decode(rt, q_lat[d], q_rope[d], self.topk[d], row_req[d], self.table,
                              w["kv"], out[d], lse[d], g_kv=self.g_kv, scale=self.scale,
                              ws_o=self.ws_o, ws_lse=self.ws_lse)
        y = self.y[:T]
        ops.fp8_bmm(rt, out, w["w_v"], y, self.w_scale_v)
        return h + y.view(T, H * self.Dv) @ w["w_o"]

    def _msa_layer(self, w, h, pos, slot, row_req, visible, n_dec, chunks):
        ops, rt = self.ops, self.rt
        T = h.shape[0]
        Hq, Hkv, Hi, D, Di, Kb, nb = (self.Hq, self.Hkv, self.Hi, self.D, self.Di, self.Kb,
                                      self.max_blocks)
        q, k, v = ((h @ w["w_q"]).view(T, Hq, D), (h @ w["w_k"]).view(T, Hkv, D),
                   (h @ w["w_v"]).view(T, Hkv, D))
        iq, ik = (h @ w["w_iq"]).view(T, Hi, Di), h @ w["w_ik"]
        q_out, iq_out, o, lse = self.q_out[:T], self.iq_out[:T], self.o[:T], self.lse[:T]
        ops.msa_norm_rope_insert(rt, q, k, v, iq, ik, *w["norms"], pos, slot, q_out, iq_out,
                                 w["kv"], w["index"], k_scale=self.k_scale, v_scale=self.v_scale)
        if chunks:
            n = T - n_dec
            scores = self.scores[:Hi * n * nb].view(Hi, n, nb)
            ops.msa_index_prefill(rt, iq_out[n_dec:], row_req[n_dec:], visible[n_dec:],
                                  self.table, w["index"], scores,
                                  prefill_work=prefill_work(chunks))
            row = 0
            for q_len, c in chunks:
                r, rr = slice(row, row + q_len), slice(n_dec + row, n_dec + row + q_len)
                s = scores[:, r]
                if Hi > 1:  # a chunk's rows of [Hi, n, nb] are contiguous only with one head
                    s = s.contiguous()
                topk = self.topk[:Hi * q_len * Kb].view(Hi, q_len, Kb)
                ops.msa_topk_prefill(rt, s, visible[rr], topk, ctx=c, workspace=self.ws_topk)
                ops.msa_sparse_prefill(rt, q_out[rr], topk, row_req[rr], visible[rr], self.table,
                                       w["kv"], o[rr], lse[rr], k_scale=self.k_scale,
                                       v_scale=self.v_scale, scale=self.scale, ctx=c)
                row += q_len
        if n_dec:
            d = slice(0, n_dec)
            scores = self.scores[:Hi * n_dec * nb].view(Hi, n_dec, nb)
            topk = self.topk[:Hi * n_dec * Kb].view(Hi, n_dec, Kb)
            ops.msa_index_topk_decode(rt, iq_out[d], row_req[d], visible[d], self.table,
                                      w["index"], scores, topk, workspace=self.ws_index)
            ops.msa_sparse_decode(rt, q_out[d], topk, row_req[d], visible[d], self.table,
                                  w["kv"], o[d], lse[d], k_scale=self.k_scale,
                                  v_scale=self.v_scale, scale=self.scale, ws_o=self.ws_o,
                                  ws_lse=self.ws_lse)
        return h + o.reshape(T, Hq * D) @ w["w_o"]

    # ---- the scheduler's side ---------------------------------------------------------------
    def meta(self, reqs):
        """The step's host metadata for forward, from (phase, q_len, ctx, request) in row order
        (decode first): pos, slot, row_req, visible as CPU tensors, n_dec, chunks."""
        torch = self.torch
        pos, slot, req, vis, chunks = [], [], [], [], []
        n_dec = 0
        for phase, q, c, p in reqs:
            for i in range(c - q, c):
                pos.append(i)
                slot.append(p * self.max_blocks * self.block + i)
                req.append(p)
                vis.append(i + 1)
            if phase == "decode":
                assert not chunks, "decode rows come first"
                n_dec += 1
            else:
                chunks.append((q, c))
        i32 = torch.int32
        return (torch.tensor(pos, dtype=i32), torch.tensor(slot, dtype=torch.int64),
                torch.tensor(req, dtype=i32), torch.tensor(vis, dtype=i32), n_dec, tuple(chunks))


class DecodeGraph:
    """The compiled step of `rows` decode tokens captured once in a CUDA graph: static input
    buffers (h, pos, slot, row_req, visible), refilled per step, then replayed."""

    def __init__(self, torch, step, h, meta):
        self.torch = torch
        dev = h.device
        self.h = h.clone()
        self.bufs = [t.to(dev) for t in meta[:4]]
        self.n_dec, self.chunks = meta[4], meta[5]
        side = torch.cuda.Stream(dev)
        side.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(side):  # warm-up outside the capture, as PyTorch recommends
            step(self.h, *self.bufs, self.n_dec, self.chunks)
        torch.cuda.current_stream(dev).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.out = step(self.h, *self.bufs, self.n_dec, self.chunks)

    def __call__(self, h, meta):
        if meta[4] != self.n_dec or meta[5] != self.chunks:
            raise ValueError("DecodeGraph: another step's shape")
        self.h.copy_(h)
        for buf, t in zip(self.bufs, meta[:4]):
            buf.copy_(t, non_blocking=True)
        self.graph.replay()
        return self.out


def configure(torch):
    """torch.compile's settings for the step: the scalars (scales, eps) are constants, not
    graph inputs (specialize_float), and one graph per distinct step shape is allowed."""
    if hasattr(torch._dynamo.config, "specialize_float"):
        torch._dynamo.config.specialize_float = True
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, 256)


def torch_graphs(torch):
    """torch.compile's graphs compiled so far in this process (Dynamo's count)."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def serve(a):
    import torch

    import prewarm_runtime

    configure(torch)
    warm = a.mode == "warm"
    rt = prewarm_runtime.Runtime(a.cache_dir, strict=warm, model_config=a.model_config,
                                 kv_cache_dtype="nvfp4",
                                 tensor_parallel_size=a.tensor_parallel_size)
    if warm:
        rt.preload()
    budget = rt.info["limits"]["max_num_batched_tokens"]
    steps = seed_trace(budget, a.decode_steps)
    max_ctx = max(c for s in steps for _, _, c, _ in s)
    chunks = sorted({(q, c) for s in steps for ph, q, c, _ in s if ph == "prefill"})
    model = Model(rt, torch, a.layers, a.hidden, budget, PROMPTS, max_ctx, chunk_shapes=chunks)
    dev = model.dev
    h0 = model._randn(budget, a.hidden)
    # One layer compiled, not the whole step: Dynamo guards on the step's structure (the number
    # of decode rows, the prefill chunks), so each distinct structure is a graph; a layer's graph
    # is N times smaller than the step's and serves all N layers (their weights are inputs).
    layer = torch.compile(model.layer, fullgraph=True, dynamic=True)

    def step(*args):
        return model.forward(*args, layer=layer)

    torch.cuda.synchronize(dev)
    ready_ms = (time.perf_counter() - T0) * 1000
    graph = None
    for p in range(1, a.passes + 1):
        st0, g0, cap = rt.stats(), torch_graphs(torch), 0
        ms, prefill_ms, decode_ms = [], 0.0, []
        for reqs in steps:
            t = time.perf_counter()
            meta = model.meta(reqs)
            T = len(meta[0])
            if not meta[5] and meta[4] == PROMPTS:  # a decode-only step: the captured graph
                if graph is None:
                    graph = DecodeGraph(torch, step, h0[:T], meta)
                    cap += 1
                out = graph(h0[:T], meta)
            else:
                out = step(h0[:T], *(x.to(dev, non_blocking=True) for x in meta[:4]), *meta[4:])
            del out
            torch.cuda.synchronize(dev)
            dt = (time.perf_counter() - t) * 1000
            ms.append(dt)
            if meta[5]:
                prefill_ms += dt
            else:
                decode_ms.append(dt)
        st = rt.stats()
        decode_ms.sort()
        print(f"{a.mode:<5} {p:<4} {len(ms):<5} {ready_ms:<9.0f} {ms[0]:<10.1f} "
              f"{prefill_ms:<11.1f} {decode_ms[len(decode_ms) // 2] if decode_ms else 0:<10.3f} "
              f"{max(ms):<9.1f} {sum(ms) / 1000:<8.2f} {torch_graphs(torch) - g0:<7} {cap:<5} "
              f"{st['compiles'] - st0['compiles']:<8} "
              f"{st['compile_seconds'] - st0['compile_seconds']:.2f}", flush=True)
    s = rt.stats()
    if warm and (s["misses"] or s["compiles"]):
        sys.exit(f"model_step: the warm runtime missed: {s}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prewarm", default=os.environ.get("PREWARM_BINARY", "prewarm"),
                    help="the prewarm binary (default: $PREWARM_BINARY or prewarm on PATH)")
    ap.add_argument("--model-config",
                    default=str(ROOT / "tests" / "data" / "models" / "mla-64-heads.json"),
                    help="the model's config.json (default: the seeds' 64-head MLA shape)")
    ap.add_argument("--tensor-parallel-size", type=int, default=0,
                    help="tp of the serve (default: unset, prewarm's default 1)")
    ap.add_argument("--layers", type=int, default=8, help="attention layers (default 8)")
    ap.add_argument("--hidden", type=int, default=1024,
                    help="hidden size of the random projections (default 1024)")
    ap.add_argument("--passes", type=int, default=2, help="passes over the trace (default 2)")
    ap.add_argument("--decode-steps", type=int, default=DECODE_STEPS,
                    help=f"decode steps after the prefill (default {DECODE_STEPS})")
    ap.add_argument("--modes", default="cold,warm", help="cold, warm or both (default)")
    ap.add_argument("--mode", choices=["cold", "warm"], help=argparse.SUPPRESS)
    ap.add_argument("--cache-dir", help=argparse.SUPPRESS)
    a = ap.parse_args()
    for name in ("layers", "hidden", "passes"):
        if getattr(a, name) < 1:
            ap.error(f"--{name} {getattr(a, name)}: must be >= 1")
    if a.decode_steps < 0:
        ap.error(f"--decode-steps {a.decode_steps}: must be >= 0")
    modes = a.modes.split(",")
    if not set(modes) <= {"cold", "warm"}:
        ap.error(f"--modes {a.modes}: cold, warm or cold,warm")
    if a.mode:
        serve(a)
        return
    run = [a.prewarm, "run", "--arch", arch(), "--quiet", "--model-config", a.model_config,
           "--kv-cache-dtype", "nvfp4"]
    if a.tensor_parallel_size:
        run += ["--tensor-parallel-size", str(a.tensor_parallel_size)]
    if config_family(a.model_config) == "MSA":
        run += ["--block-size", "128"]
    common = ["--layers", str(a.layers), "--hidden", str(a.hidden), "--passes", str(a.passes),
              "--decode-steps", str(a.decode_steps), "--model-config", a.model_config,
              "--tensor-parallel-size", str(a.tensor_parallel_size)]
    with tempfile.TemporaryDirectory() as work:
        warm_cache = os.path.join(work, "warm")
        if "warm" in modes:
            t = time.perf_counter()
            subprocess.run(run + ["--cache-dir", warm_cache], check=True)
            print(f"prewarm run (the init container): {time.perf_counter() - t:.2f} s")
        print(f"{a.layers} layers, hidden {a.hidden}, {PROMPTS} prompts; a layer under "
              "torch.compile(fullgraph=True, dynamic=True), decode steps replayed from one CUDA "
              "graph")
        print(f"{'mode':<5} {'pass':<4} {'steps':<5} {'ready_ms':<9} {'first_ms':<10} "
              f"{'prefill_ms':<11} {'decode_p50':<10} {'max_ms':<9} {'total_s':<8} "
              f"{'graphs':<7} {'capt':<5} {'kernels':<8} kernel_s", flush=True)
        for mode in modes:
            cache = warm_cache if mode == "warm" else os.path.join(work, "cold")
            os.makedirs(cache, exist_ok=True)
            env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join(work, "inductor"))
            subprocess.run([sys.executable, __file__, "--mode", mode, "--cache-dir", cache]
                           + common, check=True, env=env)


if __name__ == "__main__":
    main()
