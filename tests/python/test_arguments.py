"""Every value the package hands to C is checked first (issue 29 item 13): ctypes would cut a str
at a NUL (opening another path), wrap an int to 32 bits (device 2**32 - 1 opened no GPU while
reporting 4294967295; tensor_parallel_size 2**32 + 1 became 1) and turn a double past float32's
range into inf, all without a word. Each is an InvalidArgumentError (a ValueError) naming the
argument and the value, or a TypeError for a value of the wrong kind, raised before C sees it: the
cache is untouched and the library counts nothing. And a cache_dir that does not exist is an
error at open, not an empty cache planned from the embedded example. Real caches filled by the
real `prewarm run`, the real library, no GPU (device=-1).

Environment (CTest sets it): PREWARM_BINARY, PREWARM_RUNTIME_LIB.
"""

import hashlib
import os
import pathlib
import subprocess
import sys

import pytest

import prewarm_runtime
from prewarm_runtime import _lib

HERE = pathlib.Path(__file__).resolve().parent
SEEDS = HERE.parent / "data" / "models" / "mla-64-heads.json"
BINARY = os.environ.get("PREWARM_BINARY", "prewarm")
IARG = prewarm_runtime.InvalidArgumentError


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    cache = tmp_path_factory.mktemp("args") / "cache"
    r = subprocess.run([BINARY, "run", "--arch", "sm_90", "--cache-dir", str(cache), "--quiet",
                        "--model-config", str(SEEDS), "--kv-cache-dtype", "nvfp4",
                        "--max-num-seqs", "16"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return cache


def snapshot(root):
    """Every path under root with its bytes' hash: what a refused call must leave as it was."""
    return {str(p.relative_to(root)): (hashlib.sha256(p.read_bytes()).hexdigest()
                                       if p.is_file() else "dir")
            for p in sorted(pathlib.Path(root).rglob("*"))}


def opens(cache, **kw):
    kw.setdefault("device", -1)
    kw.setdefault("arch", "sm_90")
    return prewarm_runtime.Runtime(cache, **kw)


# ---- open ------------------------------------------------------------------------------------

def test_a_nul_in_a_string_is_refused_naming_it(filled, tmp_path):
    before = snapshot(filled)
    for cache, kw, name in [(f"{filled}\0/elsewhere", {}, "cache_dir"),
                            (str(filled), {"model_config": f"{SEEDS}\0.bak"}, "model_config"),
                            (str(filled), {"kv_cache_dtype": "nvfp4\0"}, "kv_cache_dtype"),
                            (str(filled), {"arch": "sm_90\0a"}, "arch")]:
        for strict in (True, False):
            with pytest.raises(IARG) as e:
                opens(cache, strict=strict, **kw)
            msg = str(e.value)
            assert msg.startswith(f"{name} "), msg
            assert "\\x00" in msg and "contains a NUL byte" in msg, msg
            assert isinstance(e.value, ValueError)
    # Bytes paths and os.PathLike are paths too, with the same check.
    with pytest.raises(IARG, match="cache_dir b'.*\\\\x00x': contains a NUL byte"):
        opens(os.fsencode(filled) + b"\0x")
    assert opens(pathlib.Path(filled)).info["limits"]["max_num_seqs"] == 16
    assert opens(os.fsencode(filled)).info["limits"]["max_num_seqs"] == 16
    assert snapshot(filled) == before


def test_integers_that_do_not_fit_are_refused_not_wrapped(filled):
    before = snapshot(filled)
    for kw, want in [({"device": 2**32 - 1}, "device 4294967295: must be a GPU ordinal"),
                     ({"device": 2**31}, "device 2147483648: must be a GPU ordinal"),
                     ({"device": -2}, "device -2: must be a GPU ordinal"),
                     ({"tensor_parallel_size": 2**32 + 1}, "tensor_parallel_size 4294967297: "),
                     ({"tensor_parallel_size": 2**31}, "tensor_parallel_size 2147483648: "),
                     ({"tensor_parallel_size": -2}, "tensor_parallel_size -2: ")]:
        with pytest.raises(IARG) as e:
            opens(filled, **kw)
        assert str(e.value).startswith(want), str(e.value)
    # Wrapped, 2**32 + 1 would have been tp 1, which this 64-head model takes: the check is
    # what refuses it. tp 2**32 + 3 wraps to 3, which the library refuses as 3, not as given.
    assert opens(filled, tensor_parallel_size=1).info["limits"]["tensor_parallel_size"] == 1
    assert snapshot(filled) == before


def test_values_of_the_wrong_kind_are_a_type_error_naming_them(filled):
    for kw, name in [({"device": 1.0}, "device"), ({"device": True}, "device"),
                     ({"tensor_parallel_size": "4"}, "tensor_parallel_size"),
                     ({"tensor_parallel_size": 4.5}, "tensor_parallel_size"),
                     ({"kv_cache_dtype": b"nvfp4"}, "kv_cache_dtype"), ({"arch": 90}, "arch"),
                     ({"model_config": 3}, "model_config")]:
        with pytest.raises(TypeError, match=f"^{name} must be"):
            opens(filled, **kw)
    with pytest.raises(TypeError, match="^cache_dir must be a path"):
        prewarm_runtime.Runtime(None, device=-1, arch="sm_90")


def test_a_huge_bad_value_is_named_cut_to_a_readable_length(filled):
    bad = "x" * 1_000_000 + "\0"
    with pytest.raises(IARG) as e:
        opens(filled, kv_cache_dtype=bad)
    msg = str(e.value)
    assert len(msg) < 600, len(msg)
    assert msg.startswith("kv_cache_dtype 'xxx") and f"... ({len(repr(bad))} characters)" in msg


def test_a_cache_dir_that_does_not_exist_fails_at_open(tmp_path):
    nope = tmp_path / "nope"
    for strict in (True, False):
        with pytest.raises(FileNotFoundError, match=f"cache_dir '{nope}': no such directory"):
            opens(str(nope), strict=strict)
    assert not nope.exists(), "opening created it"
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(NotADirectoryError, match=f"cache_dir '{afile}': not a directory"):
        opens(str(afile))
    assert afile.read_text() == "x"
    # An empty directory is a cache with nothing in it yet: it opens (strict: every key a miss).
    (tmp_path / "empty").mkdir()
    rt = opens(str(tmp_path / "empty"), kv_cache_dtype="nvfp4")
    with pytest.raises(prewarm_runtime.MissError):
        rt.preload()


def test_a_cache_dir_that_does_not_exist_fails_without_the_library_too(tmp_path):
    """The checks need no library: they run before it is loaded."""
    r = subprocess.run([sys.executable, "-c", "import prewarm_runtime\n"
                        f"prewarm_runtime.Runtime({str(tmp_path / 'nope')!r}, device=-1)"],
                       capture_output=True, text=True,
                       env={**os.environ, "PREWARM_RUNTIME_LIB": "/nonexistent/lib.so"})
    assert r.returncode == 1
    assert "FileNotFoundError: cache_dir" in r.stderr and "OSError" not in r.stderr, r.stderr


# ---- workspace and launches -------------------------------------------------------------------

def test_workspace_refuses_what_c_cannot_hold(filled):
    rt = opens(filled)
    # 2**32 + 1 rows would have been 1 row's workspace: too small by 2**32 rows.
    assert rt.workspace("sparse_decode", 1)[0] > 0
    for args, want in [(("sparse_decode", 2**32 + 1), "rows 4294967297: does not fit a C int"),
                       (("topk_prefill", 4, 2**64 + 20000), "ctx 18446744073709571616: does not "
                                                           "fit a C long long"),
                       (("topk_prefill", 4, 20000, 2**31), "stride 2147483648: does not fit"),
                       (("sparse_decode\0", 1), "launcher 'sparse_decode\\x00': contains a NUL")]:
        with pytest.raises(IARG) as e:
            rt.workspace(*args)
        assert str(e.value).startswith(want), str(e.value)
    with pytest.raises(TypeError, match="^ctx must be an integer, got float"):
        rt.workspace("topk_prefill", 4, 20000.0)


def test_a_launch_refuses_host_values_c_cannot_hold_before_the_library_sees_them(filled):
    torch = pytest.importorskip("torch")
    rt = opens(filled)
    rows, Ktop = 2, 2048
    scores = torch.zeros(rows, 30000, dtype=torch.float32)
    visible = torch.full((rows,), 30000, dtype=torch.int32)
    out = torch.zeros(rows, Ktop, dtype=torch.int32)
    ws = torch.zeros(1 << 22, dtype=torch.uint8)
    # A good call reaches the library: it picks the key (a hit), then there is no GPU.
    with pytest.raises(prewarm_runtime.NoGpuError):
        rt.topk_prefill(scores, visible, out, ctx=30000, ws_key=ws, ws_idx=ws)
    hits = rt.stats()["hits"]
    for ctx, err, want in [(2**63, IARG, "ctx 9223372036854775808: does not fit a C long long"),
                           (30000.5, TypeError, "ctx must be an integer, got float")]:
        with pytest.raises(err) as e:
            rt.topk_prefill(scores, visible, out, ctx=ctx, ws_key=ws, ws_idx=ws)
        assert str(e.value).startswith(want), str(e.value)
    # Index: the key-deciding prefill_work and max_ctx, and the float g_idx.
    q = torch.zeros(rows, 4, 128, dtype=torch.bfloat16)  # Hi 4, Di 128
    w = torch.zeros(rows, 4, dtype=torch.float32)
    req = torch.zeros(rows, dtype=torch.int32)
    table = torch.zeros(1, 4, dtype=torch.int32)
    cache = torch.zeros(4, 64, 72, dtype=torch.uint8)
    sc = torch.zeros(rows, 256, dtype=torch.float32)
    for call, want in [
            (lambda: rt.index_prefill(q, w, req, visible, table, cache, sc, 1.0,
                                      prefill_work=2**64 + 5),
             "index_prefill: prefill_work 18446744073709551621: does not fit a C long long"),
            (lambda: rt.index_decode(q, w, req, visible, table, cache, sc, 1.0, max_ctx=-2**63 - 1),
             "index_decode: max_ctx -9223372036854775809: does not fit"),
            (lambda: rt.index_decode(q, w, req, visible, table, cache, sc, 1e39, max_ctx=100),
             "index_decode: g_idx 1e+39: past a C float's range")]:
        with pytest.raises(IARG) as e:
            call()
        assert str(e.value).startswith(want), str(e.value)
    with pytest.raises(TypeError, match="^fp8_bmm: w_scale must be a number, got str"):
        rt.fp8_bmm(torch.zeros(1, 64, 128, dtype=torch.bfloat16),
                   torch.zeros(64, 512, 128, dtype=torch.uint8),
                   torch.zeros(1, 64, 512, dtype=torch.bfloat16), "1.0")
    assert rt.stats()["hits"] == hits, "a refused call reached the library"


def test_every_launch_structure_checks_each_field():
    """Sizes taken from tensor shapes cross into C too: a dimension past a C int is refused
    naming the launcher and the field, in every structure."""
    for launcher, struct in _lib.LAUNCH_ARGS.items():
        fields = struct._fields_
        for i, (name, ctype) in enumerate(fields):
            values = [None if t is _lib._vp else 0 for _, t in fields]
            bad = {_lib._int: 2**31, _lib._ll: 2**63, _lib._float: 1e39,
                   _lib._vp: -1}[ctype]
            values[i] = bad
            with pytest.raises(IARG, match=f"^{launcher}: {name} "):
                struct(*values, where=launcher)
            values[i] = {_lib._int: 2**31 - 1, _lib._ll: -2**63, _lib._float: 3.4e38,
                         _lib._vp: 2**64 - 1}[ctype]
            s = struct(*values, where=launcher)
            assert getattr(s, name) == pytest.approx(values[i], rel=1e-6), (launcher, name)
