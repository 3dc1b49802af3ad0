"""The launchers as PyTorch custom ops on a GPU (prewarm_runtime.ops): torch.library.opcheck for
each of the sixteen ops (MLA on the seeds' cache, MSA on MiniMax-M3's at tp 4); a step of
examples/model_step.py's attention layers (projections, both FP8 GEMMs, insert, index scores,
top-k, sparse attention; MiniMax-M3's msa_* path) compiled with torch.compile(fullgraph=True) and
run against the same step eager, prefill then decode; the decode step captured in a CUDA graph
and replayed with the compiled run's outputs bit for bit, on new inputs too; a strict runtime's
miss inside a compiled step and inside a capture raises MissError, never a compile.

Skipped, saying why, without torch, with torch older than 2.4 (no torch.library.custom_op) or
where torch sees no GPU. Needs PREWARM_BINARY and the library, as test_gpu.py does.
"""

import os
import pathlib
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (the ops need torch >= 2.4)")
import prewarm_runtime  # noqa: E402
import prewarm_runtime.ops as ops  # noqa: E402

if not ops.AVAILABLE:
    pytest.skip(ops.WHY, allow_module_level=True)
if not torch.cuda.is_available():
    pytest.skip("torch sees no GPU", allow_module_level=True)

import test_gpu as mla  # noqa: E402  (its helpers: Paged, fp8_codes, ...)
import test_msa_gpu as msa  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
import model_step  # noqa: E402

DEV = torch.device("cuda", 0)
MODELS = ROOT / "tests" / "data" / "models"


def fill(tmp_path_factory, name, *extra):
    cache = str(tmp_path_factory.mktemp(name))
    subprocess.run([os.environ.get("PREWARM_BINARY", "prewarm"), "run", "--arch", mla.arch(),
                    "--cache-dir", cache, "--quiet", "--kv-cache-dtype", "nvfp4"] + list(extra),
                   check=True)
    rt = prewarm_runtime.Runtime(cache, strict=True)
    assert rt.preload() > 0
    return rt


@pytest.fixture(scope="module")
def mla_rt(tmp_path_factory):
    rt = fill(tmp_path_factory, "mla", "--model-config", str(MODELS / "mla-64-heads.json"))
    yield rt
    s = rt.stats()
    assert s["misses"] == 0 and s["compiles"] == 0, s
    rt.close()


@pytest.fixture(scope="module")
def msa_rt(tmp_path_factory):
    rt = fill(tmp_path_factory, "msa", "--model-config", str(MODELS / "minimax-m3.json"),
              "--block-size", "128", "--tensor-parallel-size", "4")
    yield rt
    s = rt.stats()
    assert s["misses"] == 0 and s["compiles"] == 0, s
    rt.close()


@pytest.fixture(autouse=True)
def _compile_config():
    model_step.configure(torch)
    torch._dynamo.reset()
    yield


def ws(n):
    return torch.empty(n, dtype=torch.uint8, device=DEV) if n else None


# ---- the inputs of one valid call of each op (outputs filled with zeros, never NaN: opcheck
# compares tensors) -------------------------------------------------------------------------
def mla_args(rt, launcher):
    s = rt.info["shape"]
    H, L, Dr, Dn = (s["heads_per_rank"], s["kv_lora_rank"], s["qk_rope_head_dim"],
                    s["qk_nope_head_dim"])
    Hi, Di, K = s["index_n_heads"], s["index_head_dim"], s["index_topk"]
    g = mla.gen(len(launcher))
    z = lambda *shape, dtype=torch.float32: torch.zeros(shape, dtype=dtype, device=DEV)  # noqa
    if launcher == "fp8_bmm":
        return (mla.randn((7, H, Dn), g), mla.fp8_codes((H, L, Dn), g),
                z(7, H, L, dtype=torch.bfloat16), 0.01)
    if launcher == "norm_rope_insert":
        p = mla.Paged(rt, 1, 4096, g)
        slot = torch.randperm(p.kv.shape[0] * mla.BLOCK, generator=g, device=DEV)[:5]
        pos = torch.randint(0, 30000, (5,), generator=g, device=DEV, dtype=torch.int32)
        return (mla.randn((5, L), g), mla.randn((5, Dr), g), mla.randn((5, Di), g),
                torch.rand((L,), generator=g, device=DEV) + 0.5, pos, slot.to(torch.int64),
                p.kv, p.index, 0.05, 0.05)
    if launcher in ("index_prefill", "index_decode"):
        prefill = launcher == "index_prefill"
        rows, ctx = (64, 2000) if prefill else (16, 3000)
        p = mla.Paged(rt, 1 if prefill else rows, ctx, g)
        req, vis = mla.prefill_rows(rows, ctx) if prefill else mla.decode_rows([ctx] * rows)
        return (mla.randn((rows, Hi, Di), g), torch.rand((rows, Hi), generator=g, device=DEV),
                req, vis, p.table, p.index, z(rows, ctx), 0.05, rows * ctx if prefill else ctx)
    if launcher == "topk_prefill":
        _, vis = mla.prefill_rows(40, 1500)
        need = rt.workspace("topk_prefill", 40, 1500)
        return (mla.grid_scores(40, 1500, g), vis, z(40, K, dtype=torch.int32), 1500,
                ws(need[0]), ws(need[1]))
    if launcher == "topk_decode":
        _, vis = mla.decode_rows([5000, 100, 2048, 9000])
        return mla.grid_scores(4, 9000, g), vis, z(4, K, dtype=torch.int32)
    prefill = launcher == "sparse_prefill"
    heads = H if prefill else s["decode_heads"]
    rows, ctxs = (16, [900]) if prefill else (16, [3000 + 37 * i for i in range(16)])
    p = mla.Paged(rt, len(ctxs), max(ctxs), g)
    req, vis = mla.prefill_rows(rows, ctxs[0]) if prefill else mla.decode_rows(ctxs)
    ql, qr, sel = mla.sparse_inputs(rt, heads, req, vis, p, g)
    common = (ql, qr, sel, req, p.table, p.kv, z(rows, heads, L, dtype=torch.bfloat16),
              z(rows, heads), 0.05, (L + Dr) ** -0.5)
    if prefill:
        return common + (ctxs[0],)
    return common + tuple(ws(n) for n in rt.workspace("sparse_decode", rows))


def msa_args(rt, launcher):
    hq, hkv, hi, d, di, kb = msa.shape(rt)
    g = msa.gen(len(launcher) + 100)
    z = lambda *shape, dtype=torch.float32: torch.zeros(shape, dtype=dtype, device=DEV)  # noqa
    bf = torch.bfloat16
    if launcher == "msa_norm_rope_insert":
        p = msa.Paged(rt, 1, 4096, g)
        slot = torch.randperm(p.kv.shape[0] * msa.BLOCK, generator=g, device=DEV)[:5]
        pos = torch.randint(0, 30000, (5,), generator=g, device=DEV, dtype=torch.int32)
        norms = [(torch.rand((n,), generator=g, device=DEV) - 0.5) for n in (d, d, di, di)]
        return (msa.randn((5, hq, d), g), msa.randn((5, hkv, d), g), msa.randn((5, hkv, d), g),
                msa.randn((5, hi, di), g), msa.randn((5, di), g), *norms, pos,
                slot.to(torch.int64), z(5, hq, d, dtype=bf), z(5, hi, di, dtype=bf), p.kv,
                p.index, msa.K_SCALE, msa.V_SCALE, 1e-6, 5e6)
    if launcher in ("msa_index_prefill", "msa_index_decode", "msa_index_topk_decode"):
        prefill = launcher == "msa_index_prefill"
        rows, ctx = (64, 2000) if prefill else (3, 3000)
        p = msa.Paged(rt, 1 if prefill else rows, ctx, g)
        req, vis = msa.prefill_rows(rows, ctx) if prefill else msa.decode_rows([ctx] * rows)
        stride = int(msa.blocks_of(vis).max()) + 3
        args = (msa.randn((rows, hi, di), g), req, vis, p.table, p.index, z(hi, rows, stride))
        if launcher == "msa_index_topk_decode":  # its workspace zeroed, as every launch leaves it
            need = rt.workspace("msa_index_decode", rows)[0]
            return args + (z(hi, rows, kb, dtype=torch.int32), z(need, dtype=torch.uint8))
        return args + ((rows * ctx,) if prefill else ())
    if launcher == "msa_topk_prefill":
        _, vis = msa.prefill_rows(40, 1500)
        return (msa.grid_scores(hi, vis, g), vis, z(hi, 40, kb, dtype=torch.int32), 1500,
                ws(rt.workspace("msa_topk_prefill", 40, 1500)[0]))
    if launcher == "msa_topk_decode":
        _, vis = msa.decode_rows([5000, 100, 2048, 2049, 9000, 128, 129, 1])
        return msa.grid_scores(hi, vis, g), vis, z(hi, 8, kb, dtype=torch.int32)
    prefill = launcher == "msa_sparse_prefill"
    rows, ctxs = (16, [900]) if prefill else (16, [3000 + 37 * i for i in range(16)])
    p = msa.Paged(rt, len(ctxs), max(ctxs), g)
    req, vis = msa.prefill_rows(rows, ctxs[0]) if prefill else msa.decode_rows(ctxs)
    common = (msa.randn((rows, hq, d), g), msa.selection(hkv, vis, kb, g), req, vis, p.table,
              p.kv, z(rows, hq, d, dtype=bf), z(rows, hq), msa.ATT_K_SCALE, msa.ATT_V_SCALE,
              d ** -0.5)
    if prefill:
        return common + (ctxs[0],)
    return common + tuple(ws(n) for n in rt.workspace("msa_sparse_decode", rows))


MLA_OPS = [n for n in prewarm_runtime.LAUNCHERS if not n.startswith("msa_")]
MSA_OPS = [n for n in prewarm_runtime.LAUNCHERS if n.startswith("msa_")]


def check_op(rt, launcher, args):
    op = getattr(torch.ops.prewarm, launcher).default
    # opcheck runs the op on copies of args: first the op itself, once, on args; a declared
    # output must change from its zeros (the op launched), then opcheck.
    before = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    op(rt.op_id, *args)
    torch.cuda.synchronize()
    outs = ops.SIGNATURES[launcher][1]
    names = [n for n, _ in ops.SIGNATURES[launcher][0]]
    changed = [n for n in outs if args[names.index(n)] is not None
               and not torch.equal(args[names.index(n)], before[names.index(n)])]
    assert changed, f"{launcher}: the op left every output ({', '.join(outs)}) as it was"
    torch.library.opcheck(op, (rt.op_id,) + tuple(before))


@pytest.mark.parametrize("launcher", MLA_OPS)
def test_opcheck_mla(mla_rt, launcher):
    check_op(mla_rt, launcher, mla_args(mla_rt, launcher))


@pytest.mark.parametrize("launcher", MSA_OPS)
def test_opcheck_msa(msa_rt, launcher):
    check_op(msa_rt, launcher, msa_args(msa_rt, launcher))


# ---- a compiled step of the attention layers --------------------------------------------------
MIXED = [("decode", 1, 513, 0), ("decode", 1, 301, 1), ("prefill", 400, 600, 2),
         ("prefill", 256, 256, 3)]


def decode(ctxs):
    return [("decode", 1, c, p) for p, c in enumerate(ctxs)]


def rel_err(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30)).item()


def run_model_against_eager(rt):
    chunks = [(q, c) for ph, q, c, _ in MIXED if ph == "prefill"]
    kw = dict(layers=1, hidden=256, max_tokens=1024, requests=4, max_ctx=2048,
              chunk_shapes=chunks)
    eager = model_step.Model(rt, torch, **kw)
    comp = model_step.Model(rt, torch, **kw)  # the same seed: the same weights, empty caches
    h0 = eager._randn(1024, 256)
    step = torch.compile(comp.forward, fullgraph=True, dynamic=True)
    from torch._dynamo.utils import counters

    def both(reqs):
        meta = eager.meta(reqs)
        dev_meta = tuple(t.to(DEV) for t in meta[:4]) + meta[4:]
        T = len(meta[0])
        want = eager.forward(h0[:T], *dev_meta)
        got = step(h0[:T], *dev_meta)
        torch.cuda.synchronize()
        return meta, want, got

    for reqs in (MIXED,):  # decode rows and two prefill chunks: one graph (each distinct
        # step structure is one more Inductor compile; examples/model_step.py runs them all)
        _, want, got = both(reqs)
        assert torch.isfinite(want).all()
        assert rel_err(got, want) <= 1e-2, f"compiled step differs from eager: {rel_err(got, want)}"
    for we, wc in zip(eager.layers, comp.layers):
        same = (we["kv"] == wc["kv"]).double().mean().item()
        assert same >= 0.99, f"{same:.4f} of the KV cache bytes agree"
    assert sum(counters["graph_break"].values()) == 0, dict(counters["graph_break"])

    # Decode: captured once, replayed; the compiled step's outputs bit for bit, eager's closely.
    ctxs = [514, 302, 601, 257]
    meta = eager.meta(decode(ctxs))
    want = eager.forward(h0[:4], *(t.to(DEV) for t in meta[:4]), *meta[4:])
    graph = model_step.DecodeGraph(torch, step, h0[:4], meta)
    replayed = graph(h0[:4], meta).clone()
    torch.cuda.synchronize()
    direct = step(h0[:4], *(t.to(DEV) for t in meta[:4]), *meta[4:])
    torch.cuda.synchronize()
    assert torch.equal(replayed, direct), "replay and the compiled step run the same kernels"
    assert rel_err(replayed, want) <= 1e-2
    for k in range(1, 3):  # new inputs copied into the captured buffers
        meta = eager.meta(decode([c + k for c in ctxs]))
        h = h0[8 * k:8 * k + 4]
        want = eager.forward(h, *(t.to(DEV) for t in meta[:4]), *meta[4:])
        replayed = graph(h, meta).clone()
        torch.cuda.synchronize()
        direct = step(h, *(t.to(DEV) for t in meta[:4]), *meta[4:])
        torch.cuda.synchronize()
        assert torch.equal(replayed, direct)
        assert rel_err(replayed, want) <= 1e-2
    assert rt.stats()["compiles"] == 0


def test_the_mla_layers_compile_without_a_graph_break_and_a_decode_graph_replays(mla_rt):
    run_model_against_eager(mla_rt)


def test_the_msa_layers_compile_without_a_graph_break_and_a_decode_graph_replays(msa_rt):
    run_model_against_eager(msa_rt)


def raised(e, cls):
    while e is not None:
        if isinstance(e, cls):
            return e
        e = e.__cause__ or e.__context__
    return None


def test_zz_a_strict_miss_inside_a_compiled_or_captured_step_raises_and_compiles_nothing(
        tmp_path):
    """Last in the file: a failed capture may leave the device's capture state behind."""
    rt = prewarm_runtime.Runtime(str(tmp_path), strict=True, kv_cache_dtype="nvfp4",
                                 model_config=str(MODELS / "mla-64-heads.json"))
    model = model_step.Model(rt, torch, layers=1, hidden=128, max_tokens=64, requests=4,
                             max_ctx=512)
    step = torch.compile(model.forward, fullgraph=True, dynamic=True)
    meta = model.meta(decode([10, 20, 30, 40]))
    h = model._randn(4, 128)
    dev_meta = tuple(t.to(DEV) for t in meta[:4]) + meta[4:]
    miss = r"^fp8_bmm: strict: fp8_bmm key arch=sm_\d+,.* is not in /"
    with pytest.raises(prewarm_runtime.MissError, match=miss):
        step(h, *dev_meta)
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(Exception) as e:
        with torch.cuda.graph(graph):
            step(h, *dev_meta)
    miss = raised(e.value, prewarm_runtime.MissError)
    assert miss is not None and str(tmp_path) in str(miss), repr(e.value)
    s = rt.stats()
    assert s["compiles"] == 0 and s["misses"] >= 2, s
    rt.close()
