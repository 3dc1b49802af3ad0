#!/usr/bin/env python3
"""The seeds' experiment in PyTorch: a minimal serving loop over one layer's attention path
(norm/RoPE insert, index scores, top-k, sparse MLA attention, the two FP8 GEMMs of each step; for
MiniMax-M3 the seven msa_* launchers, serve_warm_msa.py) replaying the seeds' workload (16
concurrent 8K prompts, chunked prefill, then 64 decode steps), started cold and warm:

  cold: an empty cache, a non-strict runtime: every kernel compiles the first time a step
        reaches it, inside the step (the JIT behaviour prewarm exists to remove);
  warm: after `prewarm run` (what the init container does), a strict runtime that loads every
        planned kernel at start and never compiles.

Each mode runs in its own process, as a server start would, and prints one line per pass:
ready_ms (process start to first step), the step latencies, compiles and load/compile seconds.

  examples/serve_warm.py [--prewarm BIN] [--model-config FILE] [--tensor-parallel-size N]
                         [--passes N] [--decode-steps N] [--no-gpu-dry-run [--arch ARCH]]

Needs a GPU, torch, the prewarm binary and the package (pip install python/, or PYTHONPATH and
PREWARM_RUNTIME_LIB). The model defaults to the seeds' shape (64 heads, 4 index heads), so the
numbers compare with bench/warm_start's; MiniMax-M3 (tests/data/models/minimax-m3.json, the
family read from the runtime) runs with block size 128 and the seed's tp 4 when given
--tensor-parallel-size 4. --no-gpu-dry-run needs no GPU: it fills a cache for --arch (default
sm_90), opens it strict with device -1 and replays the trace, each launch stopping at the
library's NoGpuError after its key was picked; it prints the launches of each pass and the
distinct keys reached per launcher (every one must be in the plan, or strict mode fails).
"""

import argparse
import collections
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

T0 = time.perf_counter()
ROOT = pathlib.Path(__file__).resolve().parent.parent
PROMPTS, PROMPT_LEN, DECODE_STEPS = 16, 8192, 64


def seed_trace(budget, decode_steps=DECODE_STEPS):
    """The seeds' steps: lists of (phase, q_len, ctx). Prompts are prefilled in chunks of the
    token budget (a prompt finishing mid-budget lets the next one start in the same step); a
    finished prompt decodes one token a step; then decode_steps steps of all of them."""
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
    for _ in range(decode_steps):
        steps.append([])
        for p in range(PROMPTS):
            ctx[p] += 1
            steps[-1].append(("decode", 1, ctx[p], p))
    return steps


class Layer:
    """One layer's buffers, allocated once (a server's static memory), and its step."""

    def __init__(self, rt, torch, dev, steps, sync):
        self.rt, self.torch, self.sync = rt, torch, sync
        s, lim = rt.info["shape"], rt.info["limits"]
        self.H, self.L, self.Dr = s["heads_per_rank"], s["kv_lora_rank"], s["qk_rope_head_dim"]
        self.Dn, self.Dv = s["qk_nope_head_dim"], s["v_head_dim"]
        self.Hi, self.Di, self.K = s["index_n_heads"], s["index_head_dim"], s["index_topk"]
        tokens, self.block = lim["max_num_batched_tokens"], lim["block_size"]  # 64 for MLA
        self.max_ctx = max(c for step in steps for _, _, c, _ in step)
        self.max_blocks = (self.max_ctx + self.block - 1) // self.block
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
        self.kv = torch.zeros((blocks, self.block, kv_rec), dtype=torch.uint8, device=dev)
        self.index = torch.zeros((blocks, self.block, self.Di // 2 + self.Di // 16),
                                 dtype=torch.uint8, device=dev)
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
                slot.append(p * self.max_blocks * self.block + i)
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
        self.sync()


def make_layer(rt, torch, dev, steps, sync=lambda: None):
    """The step of the runtime's model family: MLA (Layer) or MSA (serve_warm_msa.MsaLayer)."""
    if rt.info["shape"].get("family") == "MSA":
        from serve_warm_msa import MsaLayer

        return MsaLayer(rt, torch, dev, steps, PROMPTS, sync)
    return Layer(rt, torch, dev, steps, sync)


def serve(mode, cache, passes, model_config, tp, decode_steps):
    import torch

    import prewarm_runtime

    rt = prewarm_runtime.Runtime(cache, strict=(mode == "warm"), model_config=model_config,
                                 kv_cache_dtype="nvfp4", tensor_parallel_size=tp)
    if mode == "warm":
        rt.preload()
    steps = seed_trace(rt.info["limits"]["max_num_batched_tokens"], decode_steps)
    dev = torch.device("cuda", rt.device)
    layer = make_layer(rt, torch, dev, steps, lambda: torch.cuda.synchronize(dev))
    torch.cuda.synchronize()
    ready_ms = (time.perf_counter() - T0) * 1000
    load_s = rt.stats()["load_seconds"]
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


class DryRuntime:
    """A device -1 runtime whose launches count: each reaches the library, which picks its key
    and answers NoGpuError naming it (the launch a GPU would have run)."""

    def __init__(self, rt, launchers):
        self._rt, self._launchers = rt, launchers
        self.calls, self.keys = collections.Counter(), collections.defaultdict(set)

    def __getattr__(self, name):
        attr = getattr(self._rt, name)
        if name not in self._launchers:
            return attr

        def launch(*args, **kwargs):
            import prewarm_runtime

            try:
                attr(*args, **kwargs)
            except prewarm_runtime.NoGpuError as e:
                self.calls[name] += 1
                self.keys[name].add(str(e).split(": this runtime", 1)[0])
            else:
                raise RuntimeError(f"{name} launched on a runtime without a GPU")

        return launch


def dry_run(cache, passes, tp, decode_steps, arch_):
    """The trace on a strict device -1 runtime of a filled cache (CPU tensors, nothing
    launched): per pass the launches per launcher, then the distinct keys reached."""
    import torch

    import prewarm_runtime

    rt = prewarm_runtime.Runtime(cache, strict=True, device=-1, arch=arch_,
                                 tensor_parallel_size=tp)
    planned = rt.preload()
    dry = DryRuntime(rt, prewarm_runtime.LAUNCHERS)
    steps = seed_trace(rt.info["limits"]["max_num_batched_tokens"], decode_steps)
    layer = make_layer(dry, torch, torch.device("cpu"), steps)
    s = rt.info["shape"]
    print(f"dry run: {s.get('family')} {s['model']} tp {rt.info['limits']['tensor_parallel_size']}"
          f" block {rt.info['limits']['block_size']} arch {arch_}, {len(steps)} steps a pass, "
          f"{planned} keys planned", flush=True)
    for p in range(1, passes + 1):
        before = collections.Counter(dry.calls)
        t = time.perf_counter()
        for reqs in steps:
            layer.step(reqs)
        got = dry.calls - before
        print(f"pass {p}: {sum(got.values())} launches ({time.perf_counter() - t:.1f} s): "
              + ", ".join(f"{n} {got[n]}" for n in rt.info["launchers"] if got[n]), flush=True)
    st = rt.stats()
    total = sum(len(k) for k in dry.keys.values())
    print(f"distinct keys reached: {total} of {planned} planned (hits {st['hits']}, misses "
          f"{st['misses']}, compiles {st['compiles']})")
    for n in rt.info["launchers"]:
        print(f"  {n:<22} {len(dry.keys[n])}")
        for k in sorted(dry.keys[n]):
            print(f"    {k}")
    if st["misses"] or st["compiles"]:
        sys.exit("serve_warm: the dry run missed the plan")


def config_family(path):
    """MSA when the config's (text_config's) sparse_attention_config uses sparse attention."""
    with open(path) as f:
        c = json.load(f)
    c = c.get("text_config", c)
    return "MSA" if (c.get("sparse_attention_config") or {}).get("use_sparse_attention") else "MLA"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prewarm", default=os.environ.get("PREWARM_BINARY", "prewarm"),
                    help="the prewarm binary (default: $PREWARM_BINARY or prewarm on PATH)")
    ap.add_argument("--model-config",
                    default=str(ROOT / "tests" / "data" / "models" / "mla-64-heads.json"),
                    help="the model's config.json (default: the seeds' shape)")
    ap.add_argument("--tensor-parallel-size", type=int, default=0,
                    help="tp of the serve (default: unset, prewarm's default 1)")
    ap.add_argument("--passes", type=int, default=2, help="passes over the trace (default 2)")
    ap.add_argument("--decode-steps", type=int, default=DECODE_STEPS,
                    help=f"decode steps after the prefill (default {DECODE_STEPS})")
    ap.add_argument("--no-gpu-dry-run", action="store_true",
                    help="no GPU: replay the trace on a device -1 runtime, counting launches")
    ap.add_argument("--arch", default="sm_90", help="the dry run's arch (default sm_90)")
    ap.add_argument("--mode", choices=["cold", "warm"], help=argparse.SUPPRESS)
    ap.add_argument("--cache-dir", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.passes < 1:
        ap.error(f"--passes {a.passes}: must be >= 1")
    if a.decode_steps < 0:
        ap.error(f"--decode-steps {a.decode_steps}: must be >= 0")
    common = ["--passes", str(a.passes), "--model-config", a.model_config,
              "--tensor-parallel-size", str(a.tensor_parallel_size),
              "--decode-steps", str(a.decode_steps)]
    if a.mode:
        serve(a.mode, a.cache_dir, a.passes, a.model_config, a.tensor_parallel_size,
              a.decode_steps)
        return
    run = [a.prewarm, "run", "--arch", a.arch if a.no_gpu_dry_run else arch(), "--quiet",
           "--model-config", a.model_config, "--kv-cache-dtype", "nvfp4"]
    if a.tensor_parallel_size:
        run += ["--tensor-parallel-size", str(a.tensor_parallel_size)]
    if config_family(a.model_config) == "MSA":
        run += ["--block-size", "128"]  # the model's sparse block (vLLM requires it)
    with tempfile.TemporaryDirectory() as work:
        warm, cold = os.path.join(work, "warm"), os.path.join(work, "cold")
        t = time.perf_counter()
        subprocess.run(run + ["--cache-dir", warm], check=True)
        print(f"prewarm run (the init container): {time.perf_counter() - t:.2f} s")
        if a.no_gpu_dry_run:
            dry_run(warm, a.passes, a.tensor_parallel_size, a.decode_steps, a.arch)
            return
        print(f"{'mode':<5} {'pass':<4} {'steps':<5} {'ready_ms':<9} {'mean_ms':<9} "
              f"{'p50_ms':<9} {'p99_ms':<9} {'max_ms':<9} {'compiles':<8} {'load_s':<7} "
              f"compile_s", flush=True)
        for mode, cache in (("cold", cold), ("warm", warm)):
            subprocess.run([sys.executable, __file__, "--mode", mode, "--cache-dir", cache]
                           + common, check=True)


def arch():
    import torch

    if not torch.cuda.is_available():
        sys.exit("serve_warm: torch sees no GPU")
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major * 10 + minor}"


if __name__ == "__main__":
    main()
