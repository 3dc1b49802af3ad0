"""Every launcher as a PyTorch custom op (`torch.ops.prewarm.*`), so that torch.compile traces a
step through the warm kernels without a graph break and a CUDA graph captures them.

    import prewarm_runtime, prewarm_runtime.ops as ops
    rt = prewarm_runtime.Runtime("/cache", strict=True); rt.preload()

    @torch.compile(fullgraph=True)
    def decode(...):
        ops.sparse_decode(rt, q_latent, q_rope, topk, row_req, block_table, kv_cache, out, lse,
                          g_kv=g_kv, scale=scale, ws_o=ws_o, ws_lse=ws_lse)

Each op is `torch.library.custom_op("prewarm::<launcher>")` over the same C ABI as the Runtime
methods: its first argument is the runtime's `op_id` (an int: an op's arguments are tensors and
scalars, so the Runtime is found by it), then the method's arguments in its order, keyword ones
included. The tensors a kernel writes are declared mutated (`mutates_args`: outputs, caches,
workspaces); every op returns nothing. The fake implementation (shape and dtype inference under
FakeTensor: torch.compile, torch.export) checks each tensor's dtype and rank, and the sizes that
are concrete, and writes nothing; the real one is the Runtime method, with all its checks.

Strict stays strict: an op of a strict runtime whose kernel is not in the cache raises the
Runtime's MissError when the compiled step runs (tracing runs only the fake implementation, which
never looks a kernel up), and inside a CUDA graph capture the capture fails with it; nothing
compiles. The key-deciding host values (ctx, prefill_work) are int arguments: torch.compile
guards on them or, once they vary, passes them as SymInts, which the real op receives as ints.

The ops need torch >= 2.4 (torch.library.custom_op); importing this module with an older torch
(or none) registers nothing: AVAILABLE is False, WHY says why, and calling an op raises
RuntimeError with that reason. `import prewarm_runtime` itself never imports torch.
"""

import typing

from ._registry import runtime as _runtime

NAMESPACE = "prewarm"


try:
    import torch
except ImportError:
    torch = None
    AVAILABLE, WHY = False, "torch is not installed (the prewarm:: custom ops need torch >= 2.4)"
else:
    if not hasattr(getattr(torch, "library", None), "custom_op"):
        AVAILABLE = False
        WHY = (f"torch {torch.__version__} has no torch.library.custom_op (the prewarm:: custom "
               "ops need torch >= 2.4; the Runtime methods work with any torch)")
    else:
        AVAILABLE, WHY = True, None


def require():
    """Raises RuntimeError naming why the ops are not registered (torch missing or older than
    2.4)."""
    if not AVAILABLE:
        raise RuntimeError(f"prewarm_runtime.ops: {WHY}")


# ---- the ops' signatures --------------------------------------------------------------------
# Per launcher: its arguments after op_id, in the Runtime method's order, each
# (name, kind, spec) where kind is "T" (Tensor), "T?" (optional Tensor), "int" or "float", and a
# tensor's spec is (dtype names, rank); then the names the kernel writes. The fake
# implementation checks dtype and rank from this; the real one is the Runtime method.
_BF16, _F32, _I32, _I64, _U8 = ("bfloat16",), ("float32",), ("int32",), ("int64",), ("uint8",)
_FP8 = ("float8_e4m3fn", "float8_e4m3fnuz", "uint8")


def _t(dt, rank):
    return ("T", (dt, rank))


_INDEX = [("q", _t(_BF16, 3)), ("w", _t(_F32, 2)), ("row_req", _t(_I32, 1)),
          ("visible", _t(_I32, 1)), ("block_table", _t(_I32, 2)), ("index_cache", _t(_U8, 3)),
          ("out", _t(_F32, 2)), ("g_idx", ("float", None))]
_SPARSE = [("q_latent", _t(_BF16, 3)), ("q_rope", _t(_BF16, 3)), ("topk", _t(_I32, 2)),
           ("row_req", _t(_I32, 1)), ("block_table", _t(_I32, 2)), ("kv_cache", _t(_U8, 3)),
           ("out", _t(_BF16, 3)), ("lse", _t(_F32, 2)), ("g_kv", ("float", None)),
           ("scale", ("float", None))]
_MSA_INDEX = [("index_q", _t(_BF16, 3)), ("row_req", _t(_I32, 1)), ("visible", _t(_I32, 1)),
              ("block_table", _t(_I32, 2)), ("index_cache", _t(_BF16, 3)),
              ("scores", _t(_F32, 3))]
_MSA_SPARSE = [("q", _t(_BF16, 3)), ("topk", _t(_I32, 3)), ("row_req", _t(_I32, 1)),
               ("visible", _t(_I32, 1)), ("block_table", _t(_I32, 2)), ("kv_cache", _t(_U8, 5)),
               ("o", _t(_BF16, 3)), ("lse", _t(_F32, 2)), ("k_scale", ("float", None)),
               ("v_scale", ("float", None)), ("scale", ("float", None))]
_I, _OPT_U8 = ("int", None), ("T?", (_U8, 1))

SIGNATURES = {
    "fp8_bmm": ([("x", _t(_BF16, 3)), ("w", _t(_FP8, 3)), ("y", _t(_BF16, 3)),
                 ("w_scale", ("float", None))], ("y",)),
    "norm_rope_insert": ([("latent", _t(_BF16, 2)), ("rope", _t(_BF16, 2)),
                          ("index_key", _t(_BF16, 2)), ("gamma", _t(_F32, 1)),
                          ("pos", _t(_I32, 1)), ("slot", _t(_I64, 1)), ("kv_cache", _t(_U8, 3)),
                          ("index_cache", _t(_U8, 3)), ("g_kv", ("float", None)),
                          ("g_idx", ("float", None))], ("kv_cache", "index_cache")),
    "index_prefill": (_INDEX + [("prefill_work", _I)], ("out",)),
    "index_decode": (_INDEX + [("max_ctx", _I)], ("out",)),
    "topk_prefill": ([("scores", _t(_F32, 2)), ("visible", _t(_I32, 1)), ("out", _t(_I32, 2)),
                      ("ctx", _I), ("ws_key", _OPT_U8), ("ws_idx", _OPT_U8)],
                     ("out", "ws_key", "ws_idx")),
    "topk_decode": ([("scores", _t(_F32, 2)), ("visible", _t(_I32, 1)), ("out", _t(_I32, 2))],
                    ("out",)),
    "sparse_prefill": (_SPARSE + [("ctx", _I)], ("out", "lse")),
    "sparse_decode": (_SPARSE + [("ws_o", _OPT_U8), ("ws_lse", _OPT_U8)],
                      ("out", "lse", "ws_o", "ws_lse")),
    "msa_norm_rope_insert": (
        [("q", _t(_BF16, 3)), ("k", _t(_BF16, 3)), ("v", _t(_BF16, 3)),
         ("index_q", _t(_BF16, 3)), ("index_k", _t(_BF16, 2)), ("q_norm", _t(_F32, 1)),
         ("k_norm", _t(_F32, 1)), ("index_q_norm", _t(_F32, 1)), ("index_k_norm", _t(_F32, 1)),
         ("pos", _t(_I32, 1)), ("slot", _t(_I64, 1)), ("q_out", _t(_BF16, 3)),
         ("index_q_out", _t(_BF16, 3)), ("kv_cache", _t(_U8, 5)), ("index_cache", _t(_BF16, 3)),
         ("k_scale", ("float", None)), ("v_scale", ("float", None)), ("eps", ("float", None)),
         ("theta", ("float", None))],
        ("q_out", "index_q_out", "kv_cache", "index_cache")),
    "msa_index_prefill": (_MSA_INDEX + [("prefill_work", _I)], ("scores",)),
    "msa_index_decode": (_MSA_INDEX, ("scores",)),
    # msa_index_decode's kernel with msa_topk_decode fused: its counters (workspace) return to
    # zero, but the kernel writes them, so they are declared mutated too.
    "msa_index_topk_decode": (
        _MSA_INDEX + [("topk", _t(_I32, 3)), ("workspace", _t(_U8 + _I32, 1))],
        ("scores", "topk", "workspace")),
    "msa_topk_prefill": ([("scores", _t(_F32, 3)), ("visible", _t(_I32, 1)),
                          ("topk", _t(_I32, 3)), ("ctx", _I), ("workspace", _OPT_U8)],
                         ("topk", "workspace")),
    "msa_topk_decode": ([("scores", _t(_F32, 3)), ("visible", _t(_I32, 1)),
                         ("topk", _t(_I32, 3))], ("topk",)),
    "msa_sparse_prefill": (_MSA_SPARSE + [("ctx", _I)], ("o", "lse")),
    "msa_sparse_decode": (_MSA_SPARSE + [("ws_o", _OPT_U8), ("ws_lse", _OPT_U8)],
                          ("o", "lse", "ws_o", "ws_lse")),
}

# The Runtime methods' keyword-only arguments (after `*`), which the op takes positionally.
_KEYWORD = {"index_prefill": ("prefill_work",), "index_decode": ("max_ctx",),
            "topk_prefill": ("ctx", "ws_key", "ws_idx"),
            "sparse_prefill": ("g_kv", "scale", "ctx"),
            "sparse_decode": ("g_kv", "scale", "ws_o", "ws_lse"),
            "msa_norm_rope_insert": ("k_scale", "v_scale", "eps", "theta"),
            "msa_index_prefill": ("prefill_work",), "msa_index_topk_decode": ("workspace",),
            "msa_topk_prefill": ("ctx", "workspace"),
            "msa_sparse_prefill": ("k_scale", "v_scale", "scale", "ctx"),
            "msa_sparse_decode": ("k_scale", "v_scale", "scale", "ws_o", "ws_lse")}
_DEFAULTS = {"msa_norm_rope_insert": {"eps": 1e-6, "theta": 5e6}}


def _fake_check(launcher, names, values):
    """The fake implementation: each tensor's dtype and rank (and nothing written)."""
    params = SIGNATURES[launcher][0]
    for (name, (kind, spec)), v in zip(params, values):
        if kind == "T?" and v is None:
            continue
        if kind in ("T", "T?"):
            dtypes, rank = spec
            if str(v.dtype).replace("torch.", "") not in dtypes:
                raise ValueError(f"{launcher}: {name} must be "
                                 f"{' or '.join('torch.' + d for d in dtypes)}, got {v.dtype}")
            if v.dim() != rank:
                raise ValueError(f"{launcher}: {name} must have {rank} dimensions, got "
                                 f"{v.dim()} ({list(v.shape)})")


_ANNOTATION = {"T": "torch.Tensor", "T?": "typing.Optional[torch.Tensor]", "int": "int",
               "float": "float"}


def _define(launcher):
    """custom_op("prewarm::launcher") from SIGNATURES: a function with real annotations (the
    schema is inferred from them), its real implementation the Runtime method."""
    params, mutated = SIGNATURES[launcher]
    names = [n for n, _ in params]
    keyword = _KEYWORD.get(launcher, ())
    positional = [n for n in names if n not in keyword]
    args = ", ".join(f"{n}: {_ANNOTATION[k]}" for n, (k, _) in params)
    call = ", ".join(positional + [f"{n}={n}" for n in keyword])
    src = (f"def {launcher}(op_id: int, {args}) -> None:\n"
           f"    _runtime(op_id, {launcher!r}).{launcher}({call})\n"
           f"def fake(op_id: int, {args}) -> None:\n"
           f"    _fake_check({launcher!r}, None, [{', '.join(names)}])\n")
    scope = {"__name__": __name__, "torch": torch, "typing": typing, "_runtime": _runtime,
             "_fake_check": _fake_check}
    exec(compile(src, f"<prewarm::{launcher}>", "exec"), scope)  # noqa: S102 (our own source)
    op = torch.library.custom_op(f"{NAMESPACE}::{launcher}", scope[launcher],
                                 mutates_args=mutated)
    op.register_fake(scope["fake"])
    return op


OPS = {}
if AVAILABLE:
    for _name in SIGNATURES:
        OPS[_name] = _define(_name)


def _wrapper(launcher):
    params, _ = SIGNATURES[launcher]
    names = [n for n, _ in params]
    keyword = _KEYWORD.get(launcher, ())
    defaults = _DEFAULTS.get(launcher, {})
    optional = {n for n, (k, _) in params if k == "T?"}

    def call(rt, *args, **kwargs):
        require()
        if len(args) > len(names) - len(keyword):
            raise TypeError(f"ops.{launcher} takes {len(names) - len(keyword)} positional "
                            f"arguments after the runtime, got {len(args)}")
        values = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names or k in values:
                raise TypeError(f"ops.{launcher}: unexpected or repeated argument {k!r}")
            values[k] = v
        missing = [n for n in names if n not in values and n not in optional
                   and n not in defaults]
        if missing:
            raise TypeError(f"ops.{launcher}: missing {', '.join(missing)}")
        full = [values.get(n, defaults.get(n)) for n in names]
        return getattr(torch.ops.prewarm, launcher).default(rt.op_id, *full)

    call.__name__ = call.__qualname__ = launcher
    call.__doc__ = (f"torch.ops.prewarm.{launcher}(rt.op_id, ...): Runtime.{launcher}'s "
                    "arguments, the same keywords.")
    return call


for _name in SIGNATURES:
    globals()[_name] = _wrapper(_name)

__all__ = ["AVAILABLE", "WHY", "NAMESPACE", "OPS", "SIGNATURES", "require"] + list(SIGNATURES)
