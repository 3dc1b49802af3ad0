"""prewarm's serving side for PyTorch: the kernels a `prewarm run` put in a cache, launched on
torch tensors.

    import torch, prewarm_runtime
    rt = prewarm_runtime.Runtime("/cache", strict=True)   # the plan from the cache's manifest
    rt.preload()                                           # every planned kernel, before serving
    rt.sparse_decode(q_latent, q_rope, topk, row_req, block_table, kv_cache, out, lse,
                     g_kv=..., scale=..., ws_o=ws_o, ws_lse=ws_lse)

Every launch checks its tensors (dtype, shape, contiguity, device; the error names the argument),
picks its kernel by the same key rules `prewarm plan` enumerated, launches it on
torch.cuda.current_stream() and allocates nothing: workspaces come from the caller
(`workspace()` says how many bytes), so a step can be captured in a CUDA graph once the kernels
are loaded. Strict mode never compiles: a kernel missing from the cache is a MissError naming the
launcher, key and cache. A cache of an MLA model (DeepSeek) runs the MLA launchers below; one of
MiniMax-M3 runs the msa_* launchers (_msa.py); the other family's are an InvalidArgumentError
saying why.

Importing this module needs neither torch nor a GPU; opening a Runtime needs the library
(libprewarm_runtime.so) and, unless device=-1, a GPU. With torch >= 2.4, `prewarm_runtime.ops`
has every launcher as a custom op (torch.ops.prewarm.*) for torch.compile and CUDA graphs.
"""

import ctypes
import json
import os
import stat

from . import _errors, _lib, _registry
from ._errors import (InvalidArgumentError, MissError, NoCompilerError, NoGpuError,
                      PrewarmError)
from ._msa import MsaLaunchers

__all__ = ["Runtime", "PrewarmError", "NoGpuError", "MissError", "NoCompilerError",
           "InvalidArgumentError", "LAUNCHERS"]

# Every launch the package has: each launcher of the C ABI, and msa_index_topk_decode (its
# msa_index_decode kernel with msa_topk_decode fused into it).
LAUNCHERS = tuple(_lib.LAUNCH_ARGS) + tuple(_lib.FUSED_ARGS)


_ERRORS = {_lib.ENOGPU: NoGpuError, _lib.EINVAL: InvalidArgumentError, _lib.EMISS: MissError,
           _lib.ENOCOMPILER: NoCompilerError}

_lib_handle = None


def _library():
    global _lib_handle
    if _lib_handle is None:
        _lib_handle = _lib.load()
    return _lib_handle


def _raise_for(rc, err):
    if rc != _lib.OK:
        raise _ERRORS.get(rc, PrewarmError)(err.value.decode(errors="replace"), rc)


def _torch():
    import torch  # only launches need it

    return torch


def _check_cache_dir(given, path):
    """A Runtime opens a directory that is there: the library would open a path that does not
    exist (a typo, an unmounted volume) as an empty cache and plan the embedded example."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"cache_dir {_errors.shown(given)}: no such directory (the "
                                "volume `prewarm run` filled; is it mounted?)") from None
    except OSError as e:
        raise type(e)(e.errno, f"cache_dir {_errors.shown(given)}: {e.strerror}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise NotADirectoryError(f"cache_dir {_errors.shown(given)}: not a directory")


class _Checker:
    """The tensors of one call, checked in order: type, dtype, shape and contiguity as each is
    given (the error names it), then the device of all of them before the launch."""

    def __init__(self, launcher, device):
        self.launcher, self.device, self.seen = launcher, device, []

    def __call__(self, name, t, dtypes, shape):
        torch = _torch()
        where = f"{self.launcher}: {name}"
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{where} must be a torch.Tensor, got {type(t).__name__}")
        if t.dtype not in dtypes:
            raise ValueError(f"{where} must be {' or '.join(str(d) for d in dtypes)}, "
                             f"got {t.dtype}")
        if t.dim() != len(shape) or any(w is not None and w != s for w, s in zip(shape, t.shape)):
            want = "[" + ", ".join("*" if w is None else str(w) for w in shape) + "]"
            raise ValueError(f"{where} must have shape {want}, got {list(t.shape)}")
        if not t.is_contiguous():
            raise ValueError(f"{where} must be contiguous (strides {t.stride()})")
        self.seen.append((name, t))
        return t.data_ptr()

    def workspace(self, name, t, need, dtypes=None, required=False):
        """The pointer of a workspace of at least `need` bytes: 1-D, uint8 (or one of `dtypes`).
        An optional one is None when `need` is 0, whatever was given; a required one is checked
        at any `need`."""
        if need == 0 and not required:
            return None
        torch = _torch()
        if t is None:
            raise ValueError(f"{self.launcher}: this call's kernel needs {name}, a workspace of "
                             f"{need} bytes (Runtime.workspace); allocate it once and pass it")
        self(name, t, dtypes or (torch.uint8,), (None,))
        held = t.numel() * t.element_size()
        if held < need:
            raise ValueError(f"{self.launcher}: {name} holds {held} bytes; this call needs "
                             f"{need}")
        return t.data_ptr()

    def on_device(self):
        if self.device < 0:
            return  # nothing is launched: the library picks the key, then answers NoGpuError
        for name, t in self.seen:
            if t.device.type != "cuda" or t.device.index != self.device:
                raise ValueError(f"{self.launcher}: {name} must be on cuda:{self.device}, the "
                                 f"runtime's GPU; it is on {t.device}")


class Runtime(MsaLaunchers):
    """The kernels of one prewarm cache on one GPU.

    cache_dir: the volume `prewarm run` filled. strict: a missing kernel is a MissError, never a
    compile (what a warm start wants). model_config, tensor_parallel_size, kv_cache_dtype: leave
    them unset to plan exactly as the run that filled the cache did (its manifest); a value given
    wins. device: the CUDA ordinal (default: torch's current device, else 0); -1 opens no GPU:
    the runtime then plans, checks and preloads entries (a pre-start check that the cache covers
    the plan) but cannot launch: a launch checks its tensors (on any device), picks its key and
    raises NoGpuError naming it. arch: required with device=-1 ("sm_90", "gfx942").

    Every value that crosses into C is checked first: an integer past its C type (device
    2**32 - 1, a tensor_parallel_size of 2**32 + 1), a str with a NUL, a float past float32's
    range is an InvalidArgumentError (a ValueError) naming it, a value of the wrong kind a
    TypeError; a cache_dir that does not exist is a FileNotFoundError (NotADirectoryError for a
    file), never an empty cache planned from the embedded example.
    """

    def __init__(self, cache_dir, strict=True, *, model_config=None, tensor_parallel_size=0,
                 kv_cache_dtype=None, device=None, arch=None):
        # Every value is checked before C sees it (the error names it); then the directory.
        opts = _lib.Options(
            _errors.c_string("cache_dir", cache_dir, path=True),
            None if model_config is None else _errors.c_string("model_config", model_config,
                                                               path=True),
            _errors.integer("tensor_parallel_size", tensor_parallel_size, 0, _errors.INT_MAX,
                            why=f"must be 1 to {_errors.INT_MAX} (or 0 for the manifest's)"),
            None if kv_cache_dtype is None else _errors.c_string("kv_cache_dtype",
                                                                 kv_cache_dtype),
            None if arch is None else _errors.c_string("arch", arch),
            1 if strict else 0,
            -2 if device is None else _errors.integer(
                "device", device, -1, _errors.INT_MAX,
                why=f"must be a GPU ordinal (0 to {_errors.INT_MAX}) or -1 (no GPU)"))
        _check_cache_dir(cache_dir, opts.cache_dir)
        lib = _library()
        if device is None:
            device = 0
            try:
                torch = _torch()
                if torch.cuda.is_available():
                    device = torch.cuda.current_device()
            except ImportError:
                pass
            opts.device = device
        handle = ctypes.c_void_p()
        err = ctypes.create_string_buffer(4096)
        _raise_for(lib.prewarm_runtime_open_with(ctypes.byref(opts), ctypes.byref(handle), err,
                                                 len(err)), err)
        self._lib = lib
        self._h = handle
        self.device = int(device)
        #: The int the prewarm:: custom ops (prewarm_runtime.ops) carry to find this runtime.
        self.op_id = _registry.register(self)
        n = lib.prewarm_runtime_info(self._h, None, 0)
        buf = ctypes.create_string_buffer(n + 1)
        lib.prewarm_runtime_info(self._h, buf, len(buf))
        #: What the runtime planned with: arch, gpu, strict, source, shape, limits, launchers.
        self.info = json.loads(buf.value.decode())
        s = self.info["shape"]  # an MSA model's has no MLA fields (_msa.py reads its own)
        self._heads = s["heads_per_rank"]
        self._decode_heads = s["decode_heads"]
        self._L = s.get("kv_lora_rank")
        self._Dr = s.get("qk_rope_head_dim")
        self._Dn = s.get("qk_nope_head_dim")
        self._Dv = s.get("v_head_dim")
        self._Hi = s.get("index_n_heads")
        self._Di = s.get("index_head_dim")
        self._Ktop = s.get("index_topk")

    # ---- lifetime -------------------------------------------------------------------------
    def close(self):
        if getattr(self, "op_id", None):
            _registry.unregister(self.op_id)
        if getattr(self, "_h", None):
            self._lib.prewarm_runtime_close(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    def _handle(self):
        if not self._h:
            raise PrewarmError("this Runtime is closed")
        return self._h

    # ---- cache ----------------------------------------------------------------------------
    def preload(self):
        """Loads every planned kernel now (the warm start) and returns how many."""
        n = ctypes.c_longlong()
        err = ctypes.create_string_buffer(4096)
        _raise_for(self._lib.prewarm_runtime_preload(self._handle(), ctypes.byref(n), err,
                                                     len(err)), err)
        return n.value

    def stats(self):
        """hits, misses, compiles, memory_hits, load_seconds, compile_seconds."""
        s = _lib.Stats()
        self._lib.prewarm_runtime_get_stats(self._handle(), ctypes.byref(s))
        return {name: getattr(s, name) for name, _ in _lib.Stats._fields_}

    def workspace(self, launcher, rows, ctx=0, stride=0):
        """Bytes of the two workspaces a call needs (0 when none): topk_prefill (rows, ctx):
        (ws_key, ws_idx); sparse_decode (rows): (ws_o, ws_lse); msa_topk_prefill (rows, ctx):
        (workspace, 0); msa_sparse_decode (rows): (ws_o, ws_lse); msa_index_decode (rows):
        (msa_index_topk_decode's workspace, 0); others (0, 0). `stride` is unused (index_decode
        needed it before its buffered variant was removed). Not monotone in `rows` for the split
        decodes (fewer splits as rows grow; none at one split or a cluster's two): to size once,
        take the max over the row counts the server runs."""
        out = (ctypes.c_size_t * 2)()
        err = ctypes.create_string_buffer(4096)
        _raise_for(self._lib.prewarm_runtime_workspace(
            self._handle(), _errors.c_string("launcher", launcher), _errors.c_int("rows", rows),
            _errors.c_longlong("ctx", ctx), _errors.c_int("stride", stride), out, err, len(err)),
            err)
        return out[0], out[1]

    def _checker(self, launcher, kernel=None):
        """A _Checker for a launcher (its errors name it) whose kernel, `kernel`'s (default
        the launcher's), this cache's model runs; InvalidArgumentError (the library's, saying
        why) for one it never runs."""
        kernel = kernel or launcher
        if kernel not in self.info["launchers"]:
            self.workspace(kernel, 1, 1)  # raises the library's InvalidArgumentError
            raise InvalidArgumentError(f"{kernel} does not run for this cache's model",
                                       _lib.EINVAL)
        return _Checker(launcher, self.device)

    def _launch(self, launcher, args, checker, extra=()):
        """prewarm_runtime_<launcher>(rt, &args, *extra, stream, ...): extra, the pointers a
        fused call takes after its structure."""
        checker.on_device()
        stream = None  # device -1: the library picks the key, then answers NoGpuError
        if self.device >= 0:
            stream = _torch().cuda.current_stream(self.device).cuda_stream
        err = ctypes.create_string_buffer(4096)
        f = getattr(self._lib, f"prewarm_runtime_{launcher}")
        ptrs = [ctypes.c_void_p(p) for p in extra]
        _raise_for(f(self._handle(), ctypes.byref(args), *ptrs, ctypes.c_void_p(stream), err,
                     len(err)), err)

    # ---- launchers (docs/kernels.md) ----------------------------------------------------
    def fp8_bmm(self, x, w, y, w_scale):
        """Y[m][b][n] = X[m][b][:] . W[b][n][:], X quantized to FP8 per 128-wide K group.
        x bf16 [M, B, K]; w fp8 (float8_e4m3fn, float8_e4m3fnuz on gfx942, or uint8) [B, N, K]
        with one scale w_scale; y bf16 [M, B, N]. (B, N, K) must be one of the model's GEMMs:
        q_absorb (Hr, L, Dn) or v_up (Hr, Dv, L)."""
        torch = _torch()
        fp8 = tuple(getattr(torch, n) for n in ("float8_e4m3fn", "float8_e4m3fnuz", "uint8")
                    if hasattr(torch, n))
        c = self._checker("fp8_bmm")
        gemms = {(self._heads, self._L, self._Dn), (self._heads, self._Dv, self._L)}
        if isinstance(w, torch.Tensor) and w.dim() == 3 and tuple(w.shape) not in gemms:
            raise ValueError(f"fp8_bmm: w has shape {list(w.shape)}; this model's GEMMs are "
                             f"q_absorb [{self._heads}, {self._L}, {self._Dn}] and v_up "
                             f"[{self._heads}, {self._Dv}, {self._L}]")
        pw = c("w", w, fp8, (self._heads, None, None))
        b, n, k = w.shape
        px = c("x", x, (torch.bfloat16,), (None, b, k))
        m = x.shape[0]
        py = c("y", y, (torch.bfloat16,), (m, b, n))
        self._launch("fp8_bmm",
                     _lib.Fp8BmmArgs(px, pw, py, w_scale, m, b, n, k, where="fp8_bmm"), c)

    def norm_rope_insert(self, latent, rope, index_key, gamma, pos, slot, kv_cache, index_cache,
                         g_kv, g_idx):
        """Per new token: RMSNorm(latent) * gamma, NeoX RoPE of rope at pos, both with index_key
        quantized to NVFP4 (global scales g_kv, g_idx) into slot (-1: skipped) of the caches.
        latent bf16 [T, L]; rope bf16 [T, Dr]; index_key bf16 [T, Di]; gamma float32 [L];
        pos int32 [T]; slot int64 [T]; kv_cache uint8 [blocks, block_size, L/2 + L/16 + 2 Dr];
        index_cache uint8 [blocks, block_size, Di/2 + Di/16]."""
        torch = _torch()
        L, Dr, Di = self._L, self._Dr, self._Di
        n = "norm_rope_insert"
        c = self._checker(n)
        p_lat = c("latent", latent, (torch.bfloat16,), (None, L))
        t = latent.shape[0]
        args = _lib.NormRopeInsertArgs(
            p_lat, c("rope", rope, (torch.bfloat16,), (t, Dr)),
            c("index_key", index_key, (torch.bfloat16,), (t, Di)),
            c("gamma", gamma, (torch.float32,), (L,)),
            c("pos", pos, (torch.int32,), (t,)),
            c("slot", slot, (torch.int64,), (t,)), g_kv, g_idx, t,
            c("kv_cache", kv_cache, (torch.uint8,), (None, None, self._kv_record())),
            c("index_cache", index_cache, (torch.uint8,),
                   (kv_cache.shape[0], kv_cache.shape[1], self._index_record())), where=n)
        self._launch(n, args, c)

    def _kv_record(self):
        return self._L // 2 + self._L // 16 + 2 * self._Dr

    def _index_record(self):
        return self._Di // 2 + self._Di // 16

    def _index(self, n, q, w, row_req, visible, block_table, index_cache, out, g_idx,
               prefill_work, max_ctx):
        torch = _torch()
        c = self._checker(n)
        pq = c("q", q, (torch.bfloat16,), (None, self._Hi, self._Di))
        rows = q.shape[0]
        pt = c("block_table", block_table, (torch.int32,), (None, None))
        pc = c("index_cache", index_cache, (torch.uint8,),
                    (None, None, self._index_record()))
        po = c("out", out, (torch.float32,), (rows, None))
        stride = out.shape[1]
        args = _lib.IndexArgs(
            pq, c("w", w, (torch.float32,), (rows, self._Hi)),
            c("row_req", row_req, (torch.int32,), (rows,)),
            c("visible", visible, (torch.int32,), (rows,)), pt,
            block_table.shape[1], index_cache.shape[1], pc, g_idx, po, stride, rows,
            None, prefill_work, max_ctx, where=n)
        self._launch(n, args, c)

    def index_prefill(self, q, w, row_req, visible, block_table, index_cache, out, g_idx, *,
                      prefill_work):
        """score[t][j] = sum_h w[t][h] relu(q[t][h] . k_j) over each row's visible positions,
        -inf past them. q bf16 [rows, Hi, Di]; w float32 [rows, Hi]; row_req, visible int32
        [rows]; block_table int32 [requests, max_blocks]; index_cache uint8; out float32
        [rows, stride]. prefill_work: the sum over the step's prefill requests of q_len * ctx
        (host values the scheduler has; it picks the kernel)."""
        self._index("index_prefill", q, w, row_req, visible, block_table, index_cache, out, g_idx,
                    prefill_work, 0)

    def index_decode(self, q, w, row_req, visible, block_table, index_cache, out, g_idx, *,
                     max_ctx):
        """index_prefill's scores for decode rows. max_ctx: the largest context among the rows
        (it picks the kernel)."""
        self._index("index_decode", q, w, row_req, visible, block_table, index_cache, out, g_idx,
                    0, max_ctx)

    def _topk(self, n, scores, visible, out, ctx, ws_key, ws_idx):
        torch = _torch()
        c = self._checker(n)
        ps = c("scores", scores, (torch.float32,), (None, None))
        rows, stride = scores.shape
        need = self.workspace(n, rows, ctx)[0] if n == "topk_prefill" else 0
        args = _lib.TopkArgs(ps, c("visible", visible, (torch.int32,), (rows,)), stride,
                             rows, c("out", out, (torch.int32,), (rows, self._Ktop)),
                             c.workspace("ws_key", ws_key, need),
                             c.workspace("ws_idx", ws_idx, need), ctx, where=n)
        self._launch(n, args, c)

    def topk_prefill(self, scores, visible, out, *, ctx, ws_key=None, ws_idx=None):
        """Per row, the indices of the Ktop largest scores in [0, visible) in ascending index
        order (ties: lower index), -1 past the visible range. scores float32 [rows, stride];
        visible int32 [rows]; out int32 [rows, Ktop]. ctx: the request's context (one call per
        prefill request; it picks the kernel); ws_key/ws_idx when workspace asks for them."""
        self._topk("topk_prefill", scores, visible, out, ctx, ws_key, ws_idx)

    def topk_decode(self, scores, visible, out):
        """topk_prefill for decode rows."""
        self._topk("topk_decode", scores, visible, out, 0, None, None)

    def _sparse(self, n, heads, q_latent, q_rope, topk, row_req, block_table, kv_cache, out, lse,
                g_kv, scale, ctx, ws_o, ws_lse):
        torch = _torch()
        c = self._checker(n)
        pq = c("q_latent", q_latent, (torch.bfloat16,), (None, heads, self._L))
        rows = q_latent.shape[0]
        pr = c("q_rope", q_rope, (torch.bfloat16,), (rows, heads, self._Dr))
        pk = c("topk", topk, (torch.int32,), (rows, self._Ktop))
        preq = c("row_req", row_req, (torch.int32,), (rows,))
        pt = c("block_table", block_table, (torch.int32,), (None, None))
        pc = c("kv_cache", kv_cache, (torch.uint8,), (None, None, self._kv_record()))
        po = c("out", out, (torch.bfloat16,), (rows, heads, self._L))
        pl = c("lse", lse, (torch.float32,), (rows, heads))
        need = self.workspace(n, rows) if n == "sparse_decode" else (0, 0)
        args = _lib.SparseArgs(pq, pr, pk, preq, pt, block_table.shape[1], kv_cache.shape[1], pc,
                               g_kv, scale, po, pl, rows,
                               c.workspace("ws_o", ws_o, need[0]),
                               c.workspace("ws_lse", ws_lse, need[1]), ctx, where=n)
        self._launch(n, args, c)

    def sparse_prefill(self, q_latent, q_rope, topk, row_req, block_table, kv_cache, out, lse, *,
                       g_kv, scale, ctx):
        """MLA attention of each row's Hr heads over its selected positions (topk, -1 skipped):
        out = softmax(scale q . k_j) v_j and the natural-log LSE. q_latent bf16 [rows, Hr, L];
        q_rope bf16 [rows, Hr, Dr]; topk int32 [rows, Ktop]; row_req int32 [rows]; block_table
        int32 [requests, max_blocks]; kv_cache uint8 [blocks, block_size, record]; out bf16
        [rows, Hr, L]; lse float32 [rows, Hr]. g_kv: the cache's NVFP4 global scale, in (0, 512];
        scale > 0. ctx: the request's context (one call per prefill request; it picks the
        kernel)."""
        self._sparse("sparse_prefill", self._heads, q_latent, q_rope, topk, row_req, block_table,
                     kv_cache, out, lse, g_kv, scale, ctx, None, None)

    def sparse_decode(self, q_latent, q_rope, topk, row_req, block_table, kv_cache, out, lse, *,
                      g_kv, scale, ws_o=None, ws_lse=None):
        """sparse_prefill for decode rows (heads: Hr times the decode context parallel size),
        split-K: ws_o and ws_lse when workspace("sparse_decode", rows) asks for them."""
        self._sparse("sparse_decode", self._decode_heads, q_latent, q_rope, topk, row_req,
                     block_table, kv_cache, out, lse, g_kv, scale, 0, ws_o, ws_lse)
