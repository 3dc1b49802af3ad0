"""serve_warm.py's step for MiniMax-M3 (docs/kernels.md): one sparse layer's attention path
through the seven msa_* launchers of prewarm_runtime, on random inputs of the runtime's per-rank
shape.

Per step (rows: the step's tokens, decode rows first, then each prefill request's chunk):
  msa_norm_rope_insert  every token of the step (q, k, v, index q and key; K/V into the NVFP4
                        cache, the index key into the bf16 index cache, at the token's slot);
  msa_index_prefill     all prefill rows at once, prefill_work = sum q_len * ctx (the key rule's
                        input, as a scheduler has it);
  msa_topk_prefill      per prefill request (ctx: its context);
  msa_sparse_prefill    per prefill request;
  msa_index_decode, msa_topk_decode, msa_sparse_decode   the decode rows.
Inputs are random (this measures first-pass latency and compiles, not numerics); the shapes,
dtypes, block table and slots are the real ones. Buffers are allocated once at the step's
largest size (a server's static memory) and viewed per call.
"""


class MsaLayer:
    """One MSA layer's buffers and its step. rt: a prewarm_runtime.Runtime of a MiniMax-M3 cache
    (or serve_warm's dry-run wrapper of one); dev: the torch device of the buffers; steps:
    seed_trace's steps (for the context and workspace sizes); sync: called at the end of a step."""

    def __init__(self, rt, torch, dev, steps, prompts, sync):
        self.rt, self.torch, self.dev, self.sync = rt, torch, dev, sync
        s, lim = rt.info["shape"], rt.info["limits"]
        self.Hq, self.Hkv, self.Hi = (s["heads_per_rank"], s["kv_heads_per_rank"],
                                      s["index_heads_per_rank"])
        self.D, self.Di, self.Kb = s["head_dim"], s["index_dim"], s["sparse_topk_blocks"]
        self.block = lim["block_size"]  # 128: a KV page is one sparse block
        tokens = lim["max_num_batched_tokens"]
        reqs = [r for step in steps for r in step]
        max_ctx = max(c for _, _, c, _ in reqs)
        self.max_blocks = -(-max_ctx // self.block)
        g = torch.Generator(device=dev)
        g.manual_seed(2027)
        bf, f32, i32, u8 = torch.bfloat16, torch.float32, torch.int32, torch.uint8

        def randn(*shape):
            return torch.randn(shape, generator=g, device=dev).to(bf)

        # The projections' outputs for the step's tokens (random), and the insert's outputs.
        self.q, self.iq = randn(tokens, self.Hq, self.D), randn(tokens, self.Hi, self.Di)
        self.k, self.v = randn(tokens, self.Hkv, self.D), randn(tokens, self.Hkv, self.D)
        self.ik = randn(tokens, self.Di)
        self.norms = [(torch.rand((n,), generator=g, device=dev) - 0.5).contiguous()
                      for n in (self.D, self.D, self.Di, self.Di)]
        self.q_out = torch.empty((tokens, self.Hq, self.D), dtype=bf, device=dev)
        self.iq_out = torch.empty((tokens, self.Hi, self.Di), dtype=bf, device=dev)
        # Caches: each prompt owns max_blocks consecutive blocks (block_table row p).
        blocks = prompts * self.max_blocks
        self.kv = torch.zeros((blocks, 2, self.Hkv, self.block, self.D // 2 + self.D // 16),
                              dtype=u8, device=dev)
        self.index = torch.zeros((blocks, self.block, self.Di), dtype=bf, device=dev)
        self.table = torch.arange(blocks, dtype=i32, device=dev).reshape(prompts, -1)
        # Flat scratch, viewed per call as scores [Hi, rows, stride] and topk [Hi, rows, Kb].
        self.scores = torch.empty(self.Hi * tokens * self.max_blocks, dtype=f32, device=dev)
        self.topk = torch.empty(self.Hi * tokens * self.Kb, dtype=i32, device=dev)
        self.o = torch.empty((tokens, self.Hq, self.D), dtype=bf, device=dev)
        self.lse = torch.empty((tokens, self.Hq), dtype=f32, device=dev)
        # Workspaces for the largest calls of the trace, allocated once.
        top = max([rt.workspace("msa_topk_prefill", q, c)[0]
                   for ph, q, c, _ in reqs if ph == "prefill"] + [0])
        self.ws_topk = torch.empty(top, dtype=u8, device=dev) if top else None
        dec = [rt.workspace("msa_sparse_decode", r) for r in range(1, prompts + 1)]
        self.ws_o, self.ws_lse = (torch.empty(n, dtype=u8, device=dev) if n else None
                                  for n in (max(w[0] for w in dec), max(w[1] for w in dec)))
        self.k_scale, self.v_scale, self.scale = 0.02, 0.03, self.D ** -0.5

    def ints(self, values, dtype=None):
        return self.torch.tensor(values, dtype=dtype or self.torch.int32, device=self.dev)

    def nb(self, ctx):
        return -(-ctx // self.block)

    def view(self, flat, *shape):
        n = 1
        for s in shape:
            n *= s
        return flat[:n].view(*shape)

    def step(self, reqs):
        torch, rt = self.torch, self.rt
        dec = [r for r in reqs if r[0] == "decode"]
        pre = [r for r in reqs if r[0] == "prefill"]
        order = dec + pre  # rows: decode rows first, then each prefill request's chunk
        T = sum(q for _, q, _, _ in order)
        pos, slot = [], []
        for _, q, c, p in order:
            for i in range(c - q, c):
                pos.append(i)
                slot.append((p * self.max_blocks + i // self.block) * self.block + i % self.block)
        rt.msa_norm_rope_insert(self.q[:T], self.k[:T], self.v[:T], self.iq[:T], self.ik[:T],
                                *self.norms, self.ints(pos), self.ints(slot, torch.int64),
                                self.q_out[:T], self.iq_out[:T], self.kv, self.index,
                                k_scale=self.k_scale, v_scale=self.v_scale)
        n_dec = len(dec)
        if pre:
            req = [p for _, q, _, p in pre for _ in range(q)]
            vis = [c - q + i + 1 for _, q, c, _ in pre for i in range(q)]
            n, stride = len(req), self.nb(max(c for _, _, c, _ in pre))
            scores = self.view(self.scores, self.Hi, n, stride)
            rt.msa_index_prefill(self.iq_out[n_dec:n_dec + n], self.ints(req), self.ints(vis),
                                 self.table, self.index, scores,
                                 prefill_work=sum(q * c for _, q, c, _ in pre))
            row = 0
            for _, q, c, p in pre:
                rows, out = slice(row, row + q), slice(n_dec + row, n_dec + row + q)
                visible = self.ints(vis[rows])
                # A request's rows of [Hi, n, stride] are contiguous only with one index head
                # (tp >= 4); with more they are copied out.
                s = scores[:, rows]
                s = s if s.is_contiguous() else s.contiguous()
                topk = self.view(self.topk, self.Hi, q, self.Kb)
                rt.msa_topk_prefill(s, visible, topk, ctx=c, workspace=self.ws_topk)
                rt.msa_sparse_prefill(self.q_out[out], topk, self.ints([p] * q), visible,
                                      self.table, self.kv, self.o[out], self.lse[out],
                                      k_scale=self.k_scale, v_scale=self.v_scale,
                                      scale=self.scale, ctx=c)
                row += q
        if dec:
            req, vis = self.ints([p for *_, p in dec]), self.ints([c for _, _, c, _ in dec])
            scores = self.view(self.scores, self.Hi, n_dec, self.nb(max(c for _, _, c, _ in dec)))
            rt.msa_index_decode(self.iq_out[:n_dec], req, vis, self.table, self.index, scores)
            topk = self.view(self.topk, self.Hi, n_dec, self.Kb)
            rt.msa_topk_decode(scores, vis, topk)
            rt.msa_sparse_decode(self.q_out[:n_dec], topk, req, vis, self.table, self.kv,
                                 self.o[:n_dec], self.lse[:n_dec], k_scale=self.k_scale,
                                 v_scale=self.v_scale, scale=self.scale, ws_o=self.ws_o,
                                 ws_lse=self.ws_lse)
        self.sync()
