"""The PyTorch package on a GPU: every launcher against reference.py (an independent PyTorch
implementation of docs/kernels.md) on fresh random inputs, a decode step captured in a CUDA graph
and replayed with new inputs, and no compile in strict mode. Skipped where torch sees no GPU; a GPU
torch sees that the runtime cannot open is a failure.

Needs PREWARM_BINARY (the prewarm binary, to fill the cache) and the library
(PREWARM_RUNTIME_LIB or an installed package).
"""

import os
import subprocess

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("torch sees no GPU", allow_module_level=True)

import prewarm_runtime  # noqa: E402
import reference as ref  # noqa: E402

SEEDS = os.path.join(os.path.dirname(__file__), "..", "data", "models", "mla-64-heads.json")
BLOCK = 64
DEV = torch.device("cuda", 0)


def arch():
    major, minor = torch.cuda.get_device_capability(0)
    return f"sm_{major * 10 + minor}"


@pytest.fixture(scope="module")
def rt(tmp_path_factory):
    """A cache filled by `prewarm run` for this GPU (the seeds' shape, NVFP4 KV, vLLM's default
    limits for the GPU), opened strict from its manifest alone, every kernel preloaded."""
    cache = str(tmp_path_factory.mktemp("cache"))
    binary = os.environ.get("PREWARM_BINARY", "prewarm")
    subprocess.run([binary, "run", "--arch", arch(), "--cache-dir", cache, "--quiet",
                    "--model-config", SEEDS, "--kv-cache-dtype", "nvfp4"], check=True)
    r = prewarm_runtime.Runtime(cache, strict=True)
    loaded = r.preload()
    assert loaded == r.stats()["hits"] > 0
    yield r
    s = r.stats()
    assert s["misses"] == 0 and s["compiles"] == 0, s
    r.close()


def gen(seed):
    g = torch.Generator(device=DEV)
    g.manual_seed(seed)
    return g


def randn(shape, g, dtype=torch.bfloat16, scale=1.0):
    return (torch.randn(shape, generator=g, device=DEV, dtype=torch.float32) * scale).to(dtype)


class Paged:
    """A paged cache and block table for `requests` requests of up to `ctx` tokens each, blocks
    handed out in a random order; records of random valid NVFP4 (scales 0.25..2) and bf16."""

    def __init__(self, rt, requests, ctx, g):
        s = rt.info["shape"]
        self.L, self.Dr, self.Di = s["kv_lora_rank"], s["qk_rope_head_dim"], s["index_head_dim"]
        self.max_blocks = (ctx + BLOCK - 1) // BLOCK
        nblocks = requests * self.max_blocks + 3
        perm = torch.randperm(nblocks, generator=g, device=DEV)[: requests * self.max_blocks]
        self.table = perm.reshape(requests, self.max_blocks).to(torch.int32).contiguous()
        self.kv = self._records(nblocks, self.L, g, rope=self.Dr)
        self.index = self._records(nblocks, self.Di, g)

    def _records(self, nblocks, n, g, rope=0):
        vals = torch.randint(0, 256, (nblocks, BLOCK, n // 2), generator=g, device=DEV)
        scales = torch.randint(0x30, 0x41, (nblocks, BLOCK, n // 16), generator=g, device=DEV)
        parts = [vals, scales]
        if rope:
            bits = randn((nblocks, BLOCK, rope), g).view(torch.int16).to(torch.int32) & 0xFFFF
            parts.append(torch.stack([bits & 0xFF, bits >> 8], dim=-1).reshape(nblocks, BLOCK, -1))
        return torch.cat(parts, dim=-1).to(torch.uint8).contiguous()


def fp8_codes(shape, g):
    """Random finite E4M3 codes (no NaN: 0x7f and 0xff excluded)."""
    c = torch.randint(0, 0x7F, shape, generator=g, device=DEV)
    sign = torch.randint(0, 2, shape, generator=g, device=DEV) * 0x80
    return (c | sign).to(torch.uint8)


@pytest.mark.parametrize("m", [1, 7, 16, 100, 600])
@pytest.mark.parametrize("gemm", ["q_absorb", "v_up"])
def test_fp8_bmm(rt, m, gemm):
    s = rt.info["shape"]
    b, L, Dn, Dv = s["heads_per_rank"], s["kv_lora_rank"], s["qk_nope_head_dim"], s["v_head_dim"]
    n, k = (L, Dn) if gemm == "q_absorb" else (Dv, L)
    g = gen(m * 7 + len(gemm))
    x = randn((m, b, k), g)
    w = fp8_codes((b, n, k), g)
    y = torch.full((m, b, n), float("nan"), device=DEV, dtype=torch.bfloat16)
    rt.fp8_bmm(x, w, y, 0.01)
    torch.cuda.synchronize()
    err = ref.rel_err(y, ref.fp8_bmm(x, w, 0.01))
    assert err <= 1e-2, err


@pytest.mark.parametrize("tokens", [5, 700])
def test_norm_rope_insert(rt, tokens):
    g = gen(tokens)
    p = Paged(rt, 1, 4096, g)
    L, Dr, Di = p.L, p.Dr, p.Di
    nslots = p.kv.shape[0] * BLOCK
    slot = torch.randperm(nslots, generator=g, device=DEV)[:tokens].to(torch.int64)
    slot[::7] = -1  # written nowhere
    latent, rope, ikey = randn((tokens, L), g), randn((tokens, Dr), g), randn((tokens, Di), g)
    gamma = (torch.rand((L,), generator=g, device=DEV) + 0.5).contiguous()
    pos = torch.randint(0, 30000, (tokens,), generator=g, device=DEV, dtype=torch.int32)
    kv, index = p.kv.clone(), p.index.clone()
    rt.norm_rope_insert(latent, rope, ikey, gamma, pos, slot, kv, index, 0.05, 0.05)
    torch.cuda.synchronize()
    written = slot >= 0
    normed, rotated = ref.norm_rope(latent[written], rope[written], gamma, pos[written])
    got_latent, got_rope = ref.kv_records(kv, slot[written], L, Dr, 0.05)
    assert ref.rel_err(got_latent, ref.nvfp4_quantize(normed, 0.05)) <= 2e-2
    assert ref.rel_err(got_rope, rotated) <= 1e-2
    got_key = ref.nvfp4_dequant(index.reshape(-1, index.shape[-1])[slot[written]], Di, 0.05)
    assert ref.rel_err(got_key, ref.nvfp4_quantize(ikey[written].double(), 0.05)) <= 2e-2
    untouched = torch.ones(nslots, dtype=torch.bool, device=DEV)
    untouched[slot[written]] = False
    assert torch.equal(kv.reshape(nslots, -1)[untouched], p.kv.reshape(nslots, -1)[untouched])


def prefill_rows(q_len, ctx):
    """Rows of one prefill request: request 0, visible ctx - q_len + i + 1."""
    vis = torch.arange(ctx - q_len + 1, ctx + 1, device=DEV, dtype=torch.int32)
    return torch.zeros(q_len, device=DEV, dtype=torch.int32), vis


def decode_rows(ctxs):
    req = torch.arange(len(ctxs), device=DEV, dtype=torch.int32)
    return req, torch.tensor(ctxs, device=DEV, dtype=torch.int32)


@pytest.mark.parametrize("q_len,ctx", [(64, 2000), (512, 4096)])  # shared, large
def test_index_prefill(rt, q_len, ctx):
    g = gen(q_len + ctx)
    p = Paged(rt, 1, ctx, g)
    s = rt.info["shape"]
    q = randn((q_len, s["index_n_heads"], p.Di), g)
    w = torch.rand((q_len, s["index_n_heads"]), generator=g, device=DEV)
    req, vis = prefill_rows(q_len, ctx)
    out = torch.full((q_len, ctx), float("nan"), device=DEV)
    rt.index_prefill(q, w, req, vis, p.table, p.index, out, 0.05, prefill_work=q_len * ctx)
    torch.cuda.synchronize()
    want = ref.index_scores(q, w, req, vis, p.table, p.index, 0.05, ctx, BLOCK)
    assert torch.equal(torch.isinf(out), torch.isinf(want))
    assert ref.rel_err(out, want) <= 1e-4


@pytest.mark.parametrize("ctxs", [[3000] * 16, [20000] * 64])  # rows_tile 16 and 64
def test_index_decode(rt, ctxs):
    g = gen(len(ctxs))
    p = Paged(rt, len(ctxs), max(ctxs), g)
    s = rt.info["shape"]
    rows = len(ctxs)
    q = randn((rows, s["index_n_heads"], p.Di), g)
    w = torch.rand((rows, s["index_n_heads"]), generator=g, device=DEV)
    req, vis = decode_rows([c - i for i, c in enumerate(ctxs)])
    stride = max(ctxs)
    out = torch.full((rows, stride), float("nan"), device=DEV)
    rt.index_decode(q, w, req, vis, p.table, p.index, out, 0.05, max_ctx=max(ctxs))
    torch.cuda.synchronize()
    want = ref.index_scores(q, w, req, vis, p.table, p.index, 0.05, stride, BLOCK)
    assert ref.rel_err(out, want) <= 1e-4


def grid_scores(rows, stride, g):
    """Scores on a 1/8 grid: ties are common, so the ties rule is exercised."""
    return (torch.randint(-40, 40, (rows, stride), generator=g, device=DEV) / 8.0).float()


@pytest.mark.parametrize("q_len,ctx", [(40, 1500), (24, 20000)])  # one strip, four strips
def test_topk_prefill(rt, q_len, ctx):
    g = gen(q_len * 3 + ctx)
    scores = grid_scores(q_len, ctx, g)
    _, vis = prefill_rows(q_len, ctx)
    ktop = rt.info["shape"]["index_topk"]
    out = torch.full((q_len, ktop), -7, device=DEV, dtype=torch.int32)
    nbytes = rt.workspace("topk_prefill", q_len, ctx)
    ws = [torch.empty(n, dtype=torch.uint8, device=DEV) if n else None for n in nbytes]
    rt.topk_prefill(scores, vis, out, ctx=ctx, ws_key=ws[0], ws_idx=ws[1])
    torch.cuda.synchronize()
    assert torch.equal(out, ref.topk(scores, vis, ktop))


def test_topk_decode(rt):
    g = gen(99)
    ctxs = [5000, 100, 2048, 9000]
    scores = grid_scores(len(ctxs), max(ctxs), g)
    _, vis = decode_rows(ctxs)
    ktop = rt.info["shape"]["index_topk"]
    out = torch.full((len(ctxs), ktop), -7, device=DEV, dtype=torch.int32)
    rt.topk_decode(scores, vis, out)
    torch.cuda.synchronize()
    assert torch.equal(out, ref.topk(scores, vis, ktop))


def selection(vis, ktop, g):
    """Per row min(ktop, visible) distinct random positions below its visible count, -1 after."""
    rows = vis.shape[0]
    out = torch.full((rows, ktop), -1, device=DEV, dtype=torch.int32)
    for r in range(rows):
        v = int(vis[r])
        pick = torch.randperm(v, generator=g, device=DEV)[:ktop]
        out[r, : pick.numel()] = torch.sort(pick).values.to(torch.int32)
    return out


def sparse_inputs(rt, heads, req, vis, p, g):
    s = rt.info["shape"]
    rows = req.shape[0]
    ql = randn((rows, heads, p.L), g)
    qr = randn((rows, heads, p.Dr), g)
    sel = selection(vis, s["index_topk"], g)
    return ql, qr, sel


@pytest.mark.parametrize("q_len,ctx", [(16, 900), (8, 6000)])  # rounds 1, rounds 2
def test_sparse_prefill(rt, q_len, ctx):
    g = gen(q_len + 5 * ctx)
    p = Paged(rt, 1, ctx, g)
    heads = rt.info["shape"]["heads_per_rank"]
    req, vis = prefill_rows(q_len, ctx)
    ql, qr, sel = sparse_inputs(rt, heads, req, vis, p, g)
    out = torch.full((q_len, heads, p.L), float("nan"), device=DEV, dtype=torch.bfloat16)
    lse = torch.full((q_len, heads), float("nan"), device=DEV)
    scale = 1.0 / (p.L + p.Dr) ** 0.5
    rt.sparse_prefill(ql, qr, sel, req, p.table, p.kv, out, lse, g_kv=0.05, scale=scale, ctx=ctx)
    torch.cuda.synchronize()
    want_o, want_lse = ref.sparse_attention(ql, qr, sel, req, p.table, p.kv, 0.05, scale, BLOCK)
    assert ref.rel_err(out, want_o) <= 1e-2
    assert ref.rel_err(lse, want_lse) <= 1e-3


def sparse_decode_once(rt, ql, qr, sel, req, p, out, lse, ws):
    scale = 1.0 / (p.L + p.Dr) ** 0.5
    rt.sparse_decode(ql, qr, sel, req, p.table, p.kv, out, lse, g_kv=0.05, scale=scale,
                     ws_o=ws[0], ws_lse=ws[1])
    return scale


@pytest.mark.parametrize("rows", [1, 16, 100])  # splits 16, 8, 2 (64 heads)
def test_sparse_decode(rt, rows):
    g = gen(rows + 1000)
    ctxs = [3000 + 37 * i for i in range(rows)]
    p = Paged(rt, rows, max(ctxs), g)
    heads = rt.info["shape"]["decode_heads"]
    req, vis = decode_rows(ctxs)
    ql, qr, sel = sparse_inputs(rt, heads, req, vis, p, g)
    out = torch.full((rows, heads, p.L), float("nan"), device=DEV, dtype=torch.bfloat16)
    lse = torch.full((rows, heads), float("nan"), device=DEV)
    ws = [torch.empty(n, dtype=torch.uint8, device=DEV) if n else None
          for n in rt.workspace("sparse_decode", rows)]
    scale = sparse_decode_once(rt, ql, qr, sel, req, p, out, lse, ws)
    torch.cuda.synchronize()
    want_o, want_lse = ref.sparse_attention(ql, qr, sel, req, p.table, p.kv, 0.05, scale, BLOCK)
    assert ref.rel_err(out, want_o) <= 1e-2
    assert ref.rel_err(lse, want_lse) <= 1e-3


def test_a_decode_step_captured_in_a_cuda_graph_replays_with_new_inputs(rt):
    """top-k, sparse attention and v_up of 16 decode rows, captured once; new scores, queries
    and weights copied into the same tensors; the replay matches the reference of the new
    inputs and an eager run on them."""
    g = gen(4242)
    s = rt.info["shape"]
    rows, heads, ktop = 16, s["decode_heads"], s["index_topk"]
    ctxs = [4000 + 100 * i for i in range(rows)]
    p = Paged(rt, rows, max(ctxs), g)
    req, vis = decode_rows(ctxs)
    stride = max(ctxs)
    scores = grid_scores(rows, stride, g)
    ql, qr = randn((rows, heads, p.L), g), randn((rows, heads, p.Dr), g)
    w = fp8_codes((heads, s["v_head_dim"], p.L), g)
    sel = torch.empty((rows, ktop), device=DEV, dtype=torch.int32)
    out = torch.empty((rows, heads, p.L), device=DEV, dtype=torch.bfloat16)
    lse = torch.empty((rows, heads), device=DEV)
    y = torch.empty((rows, heads, s["v_head_dim"]), device=DEV, dtype=torch.bfloat16)
    ws = [torch.empty(n, dtype=torch.uint8, device=DEV) if n else None
          for n in rt.workspace("sparse_decode", rows)]

    def step():
        rt.topk_decode(scores, vis, sel)
        sparse_decode_once(rt, ql, qr, sel, req, p, out, lse, ws)
        rt.fp8_bmm(out, w, y, 0.02)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()  # warm-up outside the capture, as PyTorch recommends
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    compiles = rt.stats()["compiles"]
    with torch.cuda.graph(graph):
        step()
    # New inputs into the captured tensors.
    scores.copy_(grid_scores(rows, stride, g))
    ql.copy_(randn((rows, heads, p.L), g))
    qr.copy_(randn((rows, heads, p.Dr), g))
    w.copy_(fp8_codes(tuple(w.shape), g))
    y.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    replayed = y.clone()
    want_sel = ref.topk(scores, vis, ktop)
    assert torch.equal(sel, want_sel)
    scale = 1.0 / (p.L + p.Dr) ** 0.5
    want_o, _ = ref.sparse_attention(ql, qr, want_sel, req, p.table, p.kv, 0.05, scale, BLOCK)
    assert ref.rel_err(out, want_o) <= 1e-2
    assert ref.rel_err(replayed, ref.fp8_bmm(out, w, 0.02)) <= 1e-2
    step()
    torch.cuda.synchronize()
    assert torch.equal(y, replayed), "eager and replay run the same kernels on the same inputs"
    assert rt.stats()["compiles"] == compiles == 0


def test_a_tensor_on_the_wrong_device_or_of_the_wrong_dtype_is_refused_before_any_launch(rt):
    s = rt.info["shape"]
    b, L, Dn = s["heads_per_rank"], s["kv_lora_rank"], s["qk_nope_head_dim"]
    x = torch.zeros((4, b, Dn), dtype=torch.bfloat16, device=DEV)
    w = torch.zeros((b, L, Dn), dtype=torch.uint8, device=DEV)
    y = torch.zeros((4, b, L), dtype=torch.bfloat16, device=DEV)
    with pytest.raises(ValueError, match="fp8_bmm: x must be on cuda:0"):
        rt.fp8_bmm(x.cpu(), w, y, 1.0)
    with pytest.raises(ValueError, match="fp8_bmm: y must be torch.bfloat16"):
        rt.fp8_bmm(x, w, y.float(), 1.0)
    with pytest.raises(ValueError, match="fp8_bmm: x must be contiguous"):
        rt.fp8_bmm(x.transpose(0, 1).contiguous().transpose(0, 1), w, y, 1.0)
