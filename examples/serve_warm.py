#!/usr/bin/env python3
"""The seeds' experiment in PyTorch: a minimal serving loop over one layer's attention path
(norm/RoPE insert, index scores, top-k, sparse MLA attention, the two FP8 GEMMs of each step)
replaying the seeds' workload (16 concurrent 8K prompts, chunked prefill, then 64 decode steps),
started cold and warm:

  cold: an empty cache, a non-strict runtime: every kernel compiles the first time a step
        reaches it, inside the step (the JIT behaviour prewarm exists to remove);
  warm: after `prewarm run` (what the init container does), a strict runtime that loads every
        planned kernel at start and never compiles.

Each mode runs in its own process, as a server start would, and prints one line per pass:
ready_ms (process start to first step), the step latencies, compiles and load/compile seconds.

  examples/serve_warm.py [--prewarm BIN] [--model-config FILE] [--passes N]

Needs a GPU, torch, the prewarm binary and the package (pip install python/, or PYTHONPATH and
PREWARM_RUNTIME_LIB). The model defaults to the seeds' shape (64 heads, 4 index heads), so the
numbers compare with bench/warm_start's.
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
PROMPTS, PROMPT_LEN, DECODE_STEPS, BLOCK = 16, 8192, 64, 64


def seed_trace(budget):
    """The seeds' steps: lists of (phase, q_len, ctx). Prompts are prefilled in chunks of the
    token budget (a prompt finishing mid-budget lets the next one start in the same step); a
    finished prompt decodes one token a step; then DECODE_STEPS steps of all of them."""
    steps, done, ctx, nxt = [], [0] * PROMPTS, [0] * PROMPTS, 0
    while nxt < PROMPTS:
        s, left = [], budget
        for p in range(PROMPTS):
            if done[p] == PROMPT_LEN:
                ctx[p] += 1
                s.append(("decode", 1, ctx[p], p))
                left -= 1
        while left > 0 and nxt < PROMPTS:
            q = min(left, PROMPT_LEN - done[nxt])
            done[nxt] += q
            ctx[nxt] = done[nxt]
            s.append(("prefill", q, ctx[nxt], nxt))
            left -= q
            if done[nxt] == PROMPT_LEN:
                nxt += 1
        steps.append(s)
    for _ in range(DECODE_STEPS):
        steps.append([])
        for p in range(PROMPTS):
            ctx[p] += 1
            steps[-1].append(("decode", 1, ctx[p], p))
    return steps


class Layer:
    """One layer's buffers, allocated once (a server's static memory), and its step."""

    def __init__(self, rt, torch):
        self.rt, self.torch = rt, torch
        s, lim = rt.info["shape"], rt.info["limits"]
        self.H, self.L, self.Dr = s["heads_per_rank"], s["kv_lora_rank"], s["qk_rope_head_dim"]
        self.Dn, self.Dv = s["qk_nope_head_dim"], s["v_head_dim"]
        self.Hi, self.Di, self.K = s["index_n_heads"], s["index_head_dim"], s["index_topk"]
        tokens = lim["max_num_batched_tokens"]
        self.max_ctx = PROMPT_LEN + DECODE_STEPS + 1
        self.max_blocks = (self.max_ctx + BLOCK - 1) // BLOCK
        dev = torch.device("cuda", rt.device)
        g = torch.Generator(device=dev)
        g.manual_seed(2026)
        bf = torch.bfloat16

        def randn(*shape, dtype=bf, scale=1.0):
            return (torch.randn(shape, generator=g, device=dev) * scale).to(dtype)

        self.dev = dev
        self.latent, self.rope = randn(tokens, self.L), randn(tokens, self.Dr)
        self.ikey = randn(tokens, self.Di)
        self.gamma = torch.ones(self.L, device=dev)
        blocks = PROMPTS * self.max_blocks
        kv_rec = self.L // 2 + self.L // 16 + 2 * self.Dr
        self.kv = torch.zeros((blocks, BLOCK, kv_rec), dtype=torch.uint8, device=dev)
        self.index = torch.zeros((blocks, BLOCK, self.Di // 2 + self.Di // 16), dtype=torch.uint8,
                                 device=dev)
        self.table = torch.arange(blocks, dtype=torch.int32, device=dev).reshape(PROMPTS, -1)
        self.q_idx, self.w_idx = randn(tokens, self.Hi, self.Di), randn(tokens, self.Hi,
                                                                        dtype=torch.float32)
        self.q_lat, self.q_rope = randn(tokens, self.H, self.L), randn(tokens, self.H, self.Dr)
        self.scores = torch.empty((tokens, self.max_ctx), device=dev)
        self.topk = torch.empty((tokens, self.K), dtype=torch.int32, device=dev)
        self.out = torch.empty((tokens, self.H, self.L), dtype=bf, device=dev)
        self.lse = torch.empty((tokens, self.H), device=dev)
        self.x_nope = randn(PROMPTS, self.H, self.Dn)
        self.q_absorb_w = torch.randint(0, 0x7F, (self.H, self.L, self.Dn), generator=g,
                                        device=dev, dtype=torch.uint8)
        self.v_up_w = torch.randint(0, 0x7F, (self.H, self.Dv, self.L), generator=g, device=dev,
                                    dtype=torch.uint8)
        self.y_absorb = torch.empty((PROMPTS, self.H, self.L), dtype=bf, device=dev)
        self.y_v = torch.empty((PROMPTS, self.H, self.Dv), dtype=bf, device=dev)
        # Workspaces for the largest calls of the trace, allocated once.
        ws = max(rt.workspace("sparse_decode", r)[0] for r in range(1, PROMPTS + 1))
        self.ws_o = torch.empty(ws, dtype=torch.uint8, device=dev)
        self.ws_lse = torch.empty(max(1, ws // self.L), dtype=torch.uint8, device=dev)
        self.ws_topk = [torch.empty(max(1, rt.workspace("topk_prefill", tokens, self.max_ctx)[0]),
                                    dtype=torch.uint8, device=dev) for _ in range(2)]
        self.scale = 1.0 / (self.L + self.Dr) ** 0.5

    def ints(self, values, dtype=None):
        return self.torch.tensor(values, dtype=dtype or self.torch.int32, device=self.dev)

    def step(self, reqs):
        torch, rt = self.torch, self.rt
        T = sum(q for _, q, _, _ in reqs)
        pos, slot = [], []
        for _, q, c, p in reqs:
            for i in range(c - q, c):
                pos.append(i)
                slot.append(p * self.max_blocks * BLOCK + i)
        rt.norm_rope_insert(self.latent[:T], self.rope[:T], self.ikey[:T], self.gamma,
                            self.ints(pos), self.ints(slot, torch.int64), self.kv, self.index,
                            0.05, 0.05)
        pre = [r for r in reqs if r[0] == "prefill"]
        dec = [r for r in reqs if r[0] == "decode"]
        if pre:
            req = [p for _, q, _, p in pre for _ in range(q)]
            vis = [c - q + i + 1 for _, q, c, _ in pre for i in range(q)]
            n, stride = len(req), max(c for _, _, c, _ in pre)
            scores = self.scores.view(-1)[:n * stride].view(n, stride)
            rt.index_prefill(self.q_idx[:n], self.w_idx[:n], self.ints(req), self.ints(vis),
                             self.table, self.index, scores, 0.05,
                             prefill_work=sum(q * c for _, q, c, _ in pre))
            row = 0
            for _, q, c, p in pre:
                rows = slice(row, row + q)
                visible = self.ints(vis[rows])
                rt.topk_prefill(scores[rows], visible, self.topk[rows], ctx=c,
                                ws_key=self.ws_topk[0], ws_idx=self.ws_topk[1])
                rt.sparse_prefill(self.q_lat[rows], self.q_rope[rows], self.topk[rows],
                                  self.ints([p] * q), self.table, self.kv, self.out[rows],
                                  self.lse[rows], g_kv=0.05, scale=self.scale, ctx=c)
                row += q
        if dec:
            n = len(dec)
            req, vis = self.ints([p for *_, p in dec]), self.ints([c for _, _, c, _ in dec])
            stride = max(c for _, _, c, _ in dec)
            scores = self.scores.view(-1)[:n * stride].view(n, stride)
            rt.index_decode(self.q_idx[:n], self.w_idx[:n], req, vis, self.table, self.index,
                            scores, 0.05, max_ctx=stride)
            rt.topk_decode(scores, vis, self.topk[:n])
            rt.sparse_decode(self.q_lat[:n], self.q_rope[:n], self.topk[:n], req, self.table,
                             self.kv, self.out[:n], self.lse[:n], g_kv=0.05, scale=self.scale,
                             ws_o=self.ws_o, ws_lse=self.ws_lse)
            rt.fp8_bmm(self.x_nope[:n], self.q_absorb_w, self.y_absorb[:n], 0.01)
            rt.fp8_bmm(self.out[:n], self.v_up_w, self.y_v[:n], 0.01)
        torch.cuda.synchronize(self.dev)


def serve(mode, cache, passes, model_config):
    import torch

    import prewarm_runtime

    rt = prewarm_runtime.Runtime(cache, strict=(mode == "warm"), model_config=model_config,
                                 kv_cache_dtype="nvfp4")
    if mode == "warm":
        rt.preload()
    layer = Layer(rt, torch)
    torch.cuda.synchronize()
    ready_ms = (time.perf_counter() - T0) * 1000
    load_s = rt.stats()["load_seconds"]
    steps = seed_trace(rt.info["limits"]["max_num_batched_tokens"])
    for p in range(1, passes + 1):
        c0 = rt.stats()["compiles"]
        ms = []
        for reqs in steps:
            t = time.perf_counter()
            layer.step(reqs)
            ms.append((time.perf_counter() - t) * 1000)
        ms.sort()
        s = rt.stats()
        print(f"{mode:<5} {p:<4} {len(ms):<5} {ready_ms:<9.1f} {sum(ms) / len(ms):<9.2f} "
              f"{ms[len(ms) // 2]:<9.2f} {ms[min(len(ms) - 1, int(0.99 * len(ms)))]:<9.2f} "
              f"{ms[-1]:<9.2f} {s['compiles'] - c0:<8} {load_s:<7.3f} {s['compile_seconds']:.3f}",
              flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prewarm", default=os.environ.get("PREWARM_BINARY", "prewarm"),
                    help="the prewarm binary (default: $PREWARM_BINARY or prewarm on PATH)")
    ap.add_argument("--model-config",
                    default=str(ROOT / "tests" / "data" / "models" / "mla-64-heads.json"),
                    help="the model's config.json (default: the seeds' shape)")
    ap.add_argument("--passes", type=int, default=2, help="passes over the trace (default 2)")
    ap.add_argument("--mode", choices=["cold", "warm"], help=argparse.SUPPRESS)
    ap.add_argument("--cache-dir", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.passes < 1:
        ap.error(f"--passes {a.passes}: must be >= 1")
    if a.mode:
        serve(a.mode, a.cache_dir, a.passes, a.model_config)
        return
    with tempfile.TemporaryDirectory() as work:
        warm, cold = os.path.join(work, "warm"), os.path.join(work, "cold")
        t = time.perf_counter()
        subprocess.run([a.prewarm, "run", "--arch", arch(), "--cache-dir", warm, "--quiet",
                        "--model-config", a.model_config, "--kv-cache-dtype", "nvfp4"],
                       check=True)
        print(f"prewarm run (the init container): {time.perf_counter() - t:.2f} s")
        print(f"{'mode':<5} {'pass':<4} {'steps':<5} {'ready_ms':<9} {'mean_ms':<9} "
              f"{'p50_ms':<9} {'p99_ms':<9} {'max_ms':<9} {'compiles':<8} {'load_s':<7} "
              f"compile_s", flush=True)
        for mode, cache in (("cold", cold), ("warm", warm)):
            subprocess.run([sys.executable, __file__, "--mode", mode, "--cache-dir", cache,
                            "--passes", str(a.passes), "--model-config", a.model_config],
                           check=True)


def arch():
    import torch

    if not torch.cuda.is_available():
        sys.exit("serve_warm: torch sees no GPU")
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major * 10 + minor}"


if __name__ == "__main__":
    main()
