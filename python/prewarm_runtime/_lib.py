"""The C ABI of libprewarm_runtime.so (prewarm/runtime/prewarm_runtime.h) through ctypes.

The structures below mirror the header field by field (C cannot tell us its layout at run
time): the header is the contract, so change both together. tests/python/test_runtime.py
compiles a small C program that prints the header's sizeof and offsetof for each structure and
compares them with these.
"""

import ctypes
import os
import pathlib

from . import _errors
# The return codes, as _lib.OK etc.
OK, ENOGPU, EINVAL, EMISS, EFAIL, ENOCOMPILER = (_errors.OK, _errors.ENOGPU, _errors.EINVAL,
                                                 _errors.EMISS, _errors.EFAIL, _errors.ENOCOMPILER)


_vp = ctypes.c_void_p
_int = ctypes.c_int
_float = ctypes.c_float
_ll = ctypes.c_longlong


_CHECKS = {_int: _errors.c_int, _ll: _errors.c_longlong, _float: _errors.c_float,
           _vp: _errors.pointer, ctypes.c_char_p: lambda name, v, where: None if v is None else
           _errors.c_string(name, v, where, path=True)}


class _Checked(ctypes.Structure):
    """A structure whose every field is checked as it is given (positionally, in _fields_ order):
    ctypes would truncate an int to the field's width, a str at a NUL and a double past float32's
    range to inf without a word. `where` (a keyword) prefixes the errors (the launcher)."""

    def __init__(self, *values, where=None):
        if len(values) > len(self._fields_):
            raise TypeError(f"{type(self).__name__} takes {len(self._fields_)} fields, got "
                            f"{len(values)}")
        super().__init__(*(_CHECKS[ctype](name, v, where)
                           for (name, ctype), v in zip(self._fields_, values)))


class Options(_Checked):
    _fields_ = [("cache_dir", ctypes.c_char_p), ("model_config", ctypes.c_char_p),
                ("tensor_parallel_size", _int), ("kv_cache_dtype", ctypes.c_char_p),
                ("arch", ctypes.c_char_p), ("strict", _int), ("device", _int)]


class Stats(ctypes.Structure):
    _fields_ = [("hits", _ll), ("misses", _ll), ("compiles", _ll), ("memory_hits", _ll),
                ("load_seconds", ctypes.c_double), ("compile_seconds", ctypes.c_double)]


class Fp8BmmArgs(_Checked):
    _fields_ = [("x", _vp), ("w", _vp), ("y", _vp), ("w_scale", _float), ("m", _int),
                ("batch", _int), ("n", _int), ("k", _int)]


class NormRopeInsertArgs(_Checked):
    _fields_ = [("latent", _vp), ("rope", _vp), ("index_key", _vp), ("gamma", _vp),
                ("pos", _vp), ("slot", _vp), ("g_kv", _float), ("g_idx", _float),
                ("num_tokens", _int), ("kv_cache", _vp), ("index_cache", _vp)]


class IndexArgs(_Checked):
    _fields_ = [("q", _vp), ("w", _vp), ("row_req", _vp), ("visible", _vp),
                ("block_table", _vp), ("max_blocks", _int), ("block_size", _int),
                ("index_cache", _vp), ("g_idx", _float), ("out", _vp), ("stride", _int),
                ("rows", _int), ("ws", _vp), ("prefill_work", _ll), ("max_ctx", _ll)]


class TopkArgs(_Checked):
    _fields_ = [("scores", _vp), ("visible", _vp), ("stride", _int), ("rows", _int),
                ("out", _vp), ("ws_key", _vp), ("ws_idx", _vp), ("ctx", _ll)]


class SparseArgs(_Checked):
    _fields_ = [("q_latent", _vp), ("q_rope", _vp), ("topk", _vp), ("row_req", _vp),
                ("block_table", _vp), ("max_blocks", _int), ("block_size", _int),
                ("kv_cache", _vp), ("g_kv", _float), ("scale", _float), ("out", _vp),
                ("lse", _vp), ("rows", _int), ("ws_o", _vp), ("ws_lse", _vp), ("ctx", _ll)]


# MiniMax-M3's msa_* launchers (docs/kernels.md).
class MsaNormRopeInsertArgs(_Checked):
    _fields_ = [("q", _vp), ("k", _vp), ("v", _vp), ("index_q", _vp), ("index_k", _vp),
                ("q_norm", _vp), ("k_norm", _vp), ("index_q_norm", _vp), ("index_k_norm", _vp),
                ("pos", _vp), ("slot", _vp), ("eps", _float), ("theta", _float),
                ("k_scale", _float), ("v_scale", _float), ("num_tokens", _int), ("q_out", _vp),
                ("index_q_out", _vp), ("kv_cache", _vp), ("index_cache", _vp)]


class MsaIndexArgs(_Checked):
    _fields_ = [("index_q", _vp), ("row_req", _vp), ("visible", _vp), ("block_table", _vp),
                ("max_blocks", _int), ("index_cache", _vp), ("scores", _vp), ("stride", _int),
                ("rows", _int), ("prefill_work", _ll)]


class MsaTopkArgs(_Checked):
    _fields_ = [("scores", _vp), ("visible", _vp), ("stride", _int), ("rows", _int),
                ("topk", _vp), ("workspace", _vp), ("ctx", _ll)]


class MsaSparseArgs(_Checked):
    _fields_ = [("q", _vp), ("topk", _vp), ("row_req", _vp), ("visible", _vp),
                ("block_table", _vp), ("max_blocks", _int), ("kv_cache", _vp),
                ("k_scale", _float), ("v_scale", _float), ("scale", _float), ("o", _vp),
                ("lse", _vp), ("rows", _int), ("ws_o", _vp), ("ws_lse", _vp), ("ctx", _ll)]


LAUNCH_ARGS = {
    "fp8_bmm": Fp8BmmArgs,
    "norm_rope_insert": NormRopeInsertArgs,
    "index_prefill": IndexArgs,
    "index_decode": IndexArgs,
    "topk_prefill": TopkArgs,
    "topk_decode": TopkArgs,
    "sparse_prefill": SparseArgs,
    "sparse_decode": SparseArgs,
    "msa_norm_rope_insert": MsaNormRopeInsertArgs,
    "msa_index_prefill": MsaIndexArgs,
    "msa_index_decode": MsaIndexArgs,
    "msa_topk_prefill": MsaTopkArgs,
    "msa_topk_decode": MsaTopkArgs,
    "msa_sparse_prefill": MsaSparseArgs,
    "msa_sparse_decode": MsaSparseArgs,
}

# Calls that take more than their structure: msa_index_decode's kernel with msa_topk_decode's
# selection fused into it (prewarm_runtime_msa_index_topk_decode), the structure followed by the
# topk output and the workspace, then the stream.
FUSED_ARGS = {"msa_index_topk_decode": MsaIndexArgs}


def _candidates():
    """Where the library may be, first match wins."""
    env = os.environ.get("PREWARM_RUNTIME_LIB")
    if env:
        return [env], True
    here = pathlib.Path(__file__).resolve().parent
    return [str(here / "_native" / "libprewarm_runtime.so"), "libprewarm_runtime.so"], False


def load():
    """Loads libprewarm_runtime.so: $PREWARM_RUNTIME_LIB, else the copy installed with the package,
    else the loader's search path. Raises OSError naming every place tried."""
    paths, explicit = _candidates()
    errors = []
    for path in paths:
        if path.startswith("/") and not os.path.exists(path) and not explicit:
            errors.append(f"{path}: not there")
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            errors.append(f"{path}: {e}")
            continue
        _declare(lib)
        return lib
    raise OSError("cannot load prewarm's runtime library (libprewarm_runtime.so): "
                  + "; ".join(errors)
                  + ". Build it (scripts/setup) and set PREWARM_RUNTIME_LIB to its path, or "
                    "install the package from a built tree (pip install python/).")


def _declare(lib):
    err = [ctypes.c_char_p, ctypes.c_size_t]
    lib.prewarm_runtime_open_with.argtypes = [ctypes.POINTER(Options), ctypes.POINTER(_vp)] + err
    lib.prewarm_runtime_open_with.restype = _int
    lib.prewarm_runtime_info.argtypes = [_vp, ctypes.c_char_p, ctypes.c_size_t]
    lib.prewarm_runtime_info.restype = ctypes.c_size_t
    lib.prewarm_runtime_preload.argtypes = [_vp, ctypes.POINTER(_ll)] + err
    lib.prewarm_runtime_preload.restype = _int
    lib.prewarm_runtime_get_stats.argtypes = [_vp, ctypes.POINTER(Stats)]
    lib.prewarm_runtime_get_stats.restype = None
    lib.prewarm_runtime_close.argtypes = [_vp]
    lib.prewarm_runtime_close.restype = None
    lib.prewarm_runtime_workspace.argtypes = [_vp, ctypes.c_char_p, _int, _ll, _int,
                                              ctypes.POINTER(ctypes.c_size_t)] + err
    lib.prewarm_runtime_workspace.restype = _int
    for name, struct in LAUNCH_ARGS.items():
        f = getattr(lib, f"prewarm_runtime_{name}")
        f.argtypes = [_vp, ctypes.POINTER(struct), _vp] + err
        f.restype = _int
    for name, struct in FUSED_ARGS.items():
        f = getattr(lib, f"prewarm_runtime_{name}")
        f.argtypes = [_vp, ctypes.POINTER(struct), _vp, _vp, _vp] + err  # topk, workspace, stream
        f.restype = _int
