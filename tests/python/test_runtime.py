"""The PyTorch package without a GPU: it imports with neither torch nor a GPU, its errors name
what is wrong, a runtime opened with device=-1 plans from the cache's manifest and checks every
entry, a strict runtime over a manifest needs no compiler, and the ctypes structures match the C
header. Real caches filled by the real `prewarm run`; torch is Debian's CPU build here.

Environment (CTest sets it): PREWARM_BINARY, PREWARM_RUNTIME_LIB, PREWARM_C_ABI_TEST.
"""

import ctypes
import ctypes.util
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import prewarm_runtime
from prewarm_runtime import _lib

HERE = pathlib.Path(__file__).resolve().parent
SEEDS = HERE.parent / "data" / "models" / "mla-64-heads.json"
PYTHON_DIR = HERE.parent.parent / "python"
BINARY = os.environ.get("PREWARM_BINARY", "prewarm")


def prewarm_run(cache, *extra):
    r = subprocess.run([BINARY, "run", "--arch", "sm_90", "--cache-dir", str(cache), "--quiet",
                        "--model-config", str(SEEDS), "--kv-cache-dtype", "nvfp4",
                        "--max-num-seqs", "16", *extra], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return cache


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    """A cache `prewarm run` filled for sm_90 (NVRTC, no GPU needed): the seeds' shape, NVFP4,
    16 sequences."""
    return prewarm_run(tmp_path_factory.mktemp("filled") / "cache")


def python(code, env=None, cwd=None):
    e = dict(os.environ)
    e["PYTHONPATH"] = str(PYTHON_DIR) + os.pathsep + e.get("PYTHONPATH", "")
    e.update(env or {})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e,
                          cwd=cwd)


def test_the_package_imports_with_neither_torch_nor_a_gpu():
    r = python("import sys; sys.modules['torch'] = None\n"
               "import prewarm_runtime\n"
               "print(sorted(prewarm_runtime.LAUNCHERS))")
    assert r.returncode == 0, r.stderr
    assert "sparse_decode" in r.stdout


def test_a_missing_library_names_where_it_looked():
    r = python("import prewarm_runtime\nprewarm_runtime.Runtime('/tmp')",
               env={"PREWARM_RUNTIME_LIB": "/nonexistent/libprewarm_runtime.so"})
    assert r.returncode != 0
    assert "OSError" in r.stderr and "/nonexistent/libprewarm_runtime.so" in r.stderr, r.stderr
    assert "PREWARM_RUNTIME_LIB" in r.stderr


def test_without_a_gpu_opening_says_so(filled):
    if os.path.exists("/dev/nvidia0") or os.path.exists("/dev/kfd"):
        pytest.skip("this machine has a GPU device node")
    with pytest.raises(prewarm_runtime.NoGpuError, match="no GPU"):
        prewarm_runtime.Runtime(str(filled))


def test_with_nothing_given_the_plan_is_the_manifests(filled):
    rt = prewarm_runtime.Runtime(str(filled), device=-1, arch="sm_90")
    assert rt.info["source"].endswith("prewarm/manifest.json")
    assert rt.info["limits"]["max_num_seqs"] == 16, "the run's limits, not vLLM's defaults"
    assert rt.info["limits"]["kv_cache_dtype"] == "nvfp4"
    assert rt.info["shape"]["heads_per_rank"] == 64
    assert rt.info["gpu"] is None
    manifest = json.loads((filled / "prewarm" / "manifest.json").read_text())
    assert rt.preload() == manifest["counts"]["planned"]
    s = rt.stats()
    assert s["hits"] == manifest["counts"]["planned"] and s["misses"] == 0 and s["compiles"] == 0


def test_a_strict_miss_names_the_launcher_key_and_cache(tmp_path):
    rt = prewarm_runtime.Runtime(str(tmp_path), device=-1, arch="sm_90",
                                 kv_cache_dtype="nvfp4")
    with pytest.raises(prewarm_runtime.MissError) as e:
        rt.preload()
    assert str(e.value).startswith("strict: fp8_bmm key arch=sm_90")
    assert str(tmp_path) in str(e.value)
    assert rt.stats()["compiles"] == 0


def test_a_launcher_the_cache_does_not_run_is_an_error_saying_why(tmp_path):
    cache = prewarm_run(tmp_path / "cache", "--kv-cache-dtype", "fp8")
    rt = prewarm_runtime.Runtime(str(cache), device=-1, arch="sm_90")
    assert rt.info["launchers"] == ["fp8_bmm"]
    with pytest.raises(prewarm_runtime.InvalidArgumentError) as e:
        rt.workspace("sparse_decode", 4)
    assert "sparse_decode does not run" in str(e.value)
    assert "kv_cache_dtype fp8" in str(e.value)
    assert isinstance(e.value, ValueError)


def test_an_arch_the_cache_was_not_filled_for_is_a_miss(filled):
    with pytest.raises(prewarm_runtime.MissError, match="was filled for sm_90.*not sm_100"):
        prewarm_runtime.Runtime(str(filled), device=-1, arch="sm_100")


def test_bad_options_are_named(filled):
    with pytest.raises(prewarm_runtime.InvalidArgumentError, match="tensor_parallel_size -2"):
        prewarm_runtime.Runtime(str(filled), device=-1, arch="sm_90", tensor_parallel_size=-2)
    with pytest.raises(prewarm_runtime.InvalidArgumentError, match="bf17"):
        prewarm_runtime.Runtime(str(filled), device=-1, arch="sm_90", kv_cache_dtype="bf17")
    with pytest.raises(prewarm_runtime.InvalidArgumentError, match="device -1"):
        prewarm_runtime.Runtime(str(filled), device=-1)
    with pytest.raises(prewarm_runtime.InvalidArgumentError, match="must divide"):
        prewarm_runtime.Runtime(str(filled), device=-1, arch="sm_90", tensor_parallel_size=3)


def test_workspace_sizes_follow_the_key_rules(filled):
    rt = prewarm_runtime.Runtime(str(filled), device=-1, arch="sm_90")
    heads, L, ktop = 64, 512, 2048
    # sparse_decode: one wave of blocks on sm_90's 132 multiprocessors, a block of 64 heads
    # each: one or two rows get 32 splits (a 64-key tile a split: sm_90's one-tile candidate,
    # while 32 x rows x 64 heads <= 32 x 132), 16 rows 8, 64 rows 2; past two splits' wave, 1
    # split, which writes its output directly. 2 splits combine inside their thread block
    # cluster: no workspace either.
    assert rt.workspace("sparse_decode", 1) == (1 * heads * 32 * L * 4, 1 * heads * 32 * 4)
    assert rt.workspace("sparse_decode", 2) == (2 * heads * 32 * L * 4, 2 * heads * 32 * 4)
    assert rt.workspace("sparse_decode", 4) == (4 * heads * 16 * L * 4, 4 * heads * 16 * 4)
    assert rt.workspace("sparse_decode", 16) == (16 * heads * 8 * L * 4, 16 * heads * 8 * 4)
    assert rt.workspace("sparse_decode", 64) == (0, 0)
    assert rt.workspace("sparse_decode", 500) == (0, 0)
    # topk_prefill: ctx 8000 -> 1 strip, none; ctx 20000 -> 4 strips (pow2 >= ceil(20000 /
    # 8192)), which sm_90 runs as a thread block cluster a row: none either (the strips'
    # workspace, elsewhere and past 8 strips: tests/runtime/runtime_test.cc).
    assert rt.workspace("topk_prefill", 10, 8000) == (0, 0)
    assert rt.workspace("topk_prefill", 10, 20000) == (0, 0)
    # index_decode: none, at any size (its scores are summed on chip).
    assert rt.workspace("index_decode", 16, 30000, 30000) == (0, 0)
    assert rt.workspace("index_decode", 1024, 100000, 100000) == (0, 0)
    assert rt.workspace("fp8_bmm", 16) == (0, 0)
    with pytest.raises(prewarm_runtime.InvalidArgumentError, match="rows is -1"):
        rt.workspace("sparse_decode", -1)


def test_tensor_errors_name_the_argument(filled):
    torch = pytest.importorskip("torch")
    rt = prewarm_runtime.Runtime(str(filled), device=-1, arch="sm_90")
    rows, heads, L, Dr = 2, 64, 512, 64
    good = dict(q_latent=torch.zeros(rows, heads, L, dtype=torch.bfloat16),
                q_rope=torch.zeros(rows, heads, Dr, dtype=torch.bfloat16),
                topk=torch.zeros(rows, 2048, dtype=torch.int32),
                row_req=torch.zeros(rows, dtype=torch.int32),
                block_table=torch.zeros(rows, 4, dtype=torch.int32),
                kv_cache=torch.zeros(8, 64, L // 2 + L // 16 + 2 * Dr, dtype=torch.uint8),
                out=torch.zeros(rows, heads, L, dtype=torch.bfloat16),
                lse=torch.zeros(rows, heads, dtype=torch.float32))

    def call(**change):
        args = {**good, **change}
        rt.sparse_decode(**args, g_kv=1.0, scale=0.1)

    with pytest.raises(ValueError, match=r"sparse_decode: q_latent must be torch.bfloat16, "
                                         r"got torch.float32"):
        call(q_latent=good["q_latent"].float())
    with pytest.raises(ValueError, match=r"sparse_decode: q_rope must have shape \[2, 64, 64\], "
                                         r"got \[2, 64, 32\]"):
        call(q_rope=torch.zeros(rows, heads, 32, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match=r"sparse_decode: kv_cache must have shape \[\*, \*, 416\]"):
        call(kv_cache=torch.zeros(8, 64, 400, dtype=torch.uint8))
    with pytest.raises(ValueError, match="sparse_decode: out must be contiguous"):
        call(out=torch.zeros(heads, rows, L, dtype=torch.bfloat16).transpose(0, 1))
    with pytest.raises(TypeError, match="sparse_decode: lse must be a torch.Tensor, got list"):
        call(lse=[0.0])
    # The scales: Hopper's prefill block holds g_kv up to 512 (folded into bf16 scale pairs).
    with pytest.raises(prewarm_runtime.InvalidArgumentError,
                       match=r"sparse_prefill: g_kv is 1000; it must be finite, > 0 and <= 512"):
        rt.sparse_prefill(**good, g_kv=1000.0, scale=0.1, ctx=100)
    with pytest.raises(prewarm_runtime.InvalidArgumentError,
                       match=r"sparse_prefill: g_kv is 0; it must be finite, > 0 and <= 512"):
        rt.sparse_prefill(**good, g_kv=0.0, scale=0.1, ctx=100)
    with pytest.raises(prewarm_runtime.InvalidArgumentError,
                       match=r"sparse_prefill: scale is nan; it must be finite and > 0"):
        rt.sparse_prefill(**good, g_kv=1.0, scale=float("nan"), ctx=100)
    with pytest.raises(ValueError, match="sparse_decode: this call's kernel needs ws_o, a "
                                         "workspace of 8388608 bytes"):
        call()
    ws_o, ws_lse = (torch.zeros(n, dtype=torch.uint8) for n in rt.workspace("sparse_decode", rows))
    with pytest.raises(ValueError, match="sparse_decode: ws_lse holds 3 bytes; this call needs"):
        call(ws_o=ws_o, ws_lse=torch.zeros(3, dtype=torch.uint8))
    with pytest.raises(ValueError, match=r"fp8_bmm: w has shape \[64, 100, 128\]; this model's "
                                         r"GEMMs are q_absorb \[64, 512, 128\] and v_up"):
        rt.fp8_bmm(torch.zeros(1, 64, 128, dtype=torch.bfloat16),
                   torch.zeros(64, 100, 128, dtype=torch.uint8),
                   torch.zeros(1, 64, 100, dtype=torch.bfloat16), 1.0)
    assert rt.stats()["hits"] == 0, "nothing was looked up for a refused call"
    # Every tensor good: the library picks the key, then refuses for want of a GPU.
    with pytest.raises(prewarm_runtime.NoGpuError,
                       match=r"^sparse_decode arch=sm_90,.*splits=32.*without a GPU"):
        call(ws_o=ws_o, ws_lse=ws_lse)
    assert rt.stats()["hits"] == 1


def test_a_closed_runtime_says_so(filled):
    rt = prewarm_runtime.Runtime(str(filled), device=-1, arch="sm_90")
    rt.close()
    with pytest.raises(prewarm_runtime.PrewarmError, match="closed"):
        rt.preload()


def test_the_ctypes_structures_match_the_c_header():
    exe = os.environ.get("PREWARM_C_ABI_TEST")
    if not exe:
        pytest.skip("PREWARM_C_ABI_TEST is not set (CTest sets it)")
    layout = json.loads(subprocess.run([exe, "--layout"], capture_output=True, text=True,
                                       check=True).stdout)
    mirrors = {"options": _lib.Options, "stats": _lib.Stats, "fp8_bmm": _lib.Fp8BmmArgs,
               "norm_rope_insert": _lib.NormRopeInsertArgs, "index": _lib.IndexArgs,
               "topk": _lib.TopkArgs, "sparse": _lib.SparseArgs,
               "msa_norm_rope_insert": _lib.MsaNormRopeInsertArgs, "msa_index": _lib.MsaIndexArgs,
               "msa_topk": _lib.MsaTopkArgs, "msa_sparse": _lib.MsaSparseArgs}
    assert set(layout) == set(mirrors)
    for name, struct in mirrors.items():
        c = layout[name]
        assert ctypes.sizeof(struct) == c.pop("size"), name
        assert [f for f, _ in struct._fields_] == list(c), f"{name}: fields or their order"
        for field, offset in c.items():
            assert getattr(struct, field).offset == offset, f"{name}.{field}"


def _nvrtc_dir():
    path = ctypes.util.find_library("nvrtc")
    for line in subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout.split(
            "\n"):
        if path and path in line and "=>" in line:
            return os.path.dirname(os.path.realpath(line.split("=>")[1].strip()))
    return None


def _without_nvrtc(code, tmp_path):
    """Runs `code` in a mount namespace where NVRTC's directory is an empty one (the serving
    image has no compiler). Skips where mount namespaces are not allowed."""
    lib_dir = _nvrtc_dir()
    if lib_dir is None or shutil.which("unshare") is None:
        pytest.skip("no NVRTC on the loader path, or no unshare(1)")
    empty = tmp_path / "empty"
    empty.mkdir()
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"mount namespaces are not allowed here: {probe.stderr.decode().strip()}")
    script = tmp_path / "script.py"
    script.write_text(code)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(PYTHON_DIR)
    env["CUDA_HOME"] = str(empty)
    return subprocess.run(["unshare", "-m", "sh", "-c",
                           f'mount --bind "{empty}" "{lib_dir}" && exec "{sys.executable}" '
                           f'"{script}"'], capture_output=True, text=True, env=env)


def test_a_strict_runtime_over_a_manifest_needs_no_compiler(filled, tmp_path):
    (tmp_path / "none").mkdir()  # a cache directory with no manifest
    r = _without_nvrtc(
        "import prewarm_runtime\n"
        f"rt = prewarm_runtime.Runtime({str(filled)!r}, device=-1, arch='sm_90')\n"
        "print('preloaded', rt.preload(), rt.stats()['compiles'])\n"
        f"prewarm_runtime.Runtime({str(tmp_path / 'none')!r}, device=-1, arch='sm_90')\n",
        tmp_path)
    keys = json.loads((filled / "prewarm" / "manifest.json").read_text())["counts"]["planned"]
    assert f"preloaded {keys} 0" in r.stdout, r.stdout + r.stderr
    # Without a manifest the entries can only be named by the compiler: the error names it.
    assert "NoCompilerError" in r.stderr, r.stderr
    assert "NVRTC cannot be loaded" in r.stderr and "manifest.json is absent" in r.stderr


# ---- MiniMax-M3's msa_* launchers (docs/kernels.md) ---------------------------------------------

MSA_MODEL = HERE.parent / "data" / "models" / "minimax-m3.json"
MSA_LAUNCHERS = ["msa_norm_rope_insert", "msa_index_prefill", "msa_index_decode",
                 "msa_topk_prefill", "msa_topk_decode", "msa_sparse_prefill", "msa_sparse_decode"]


@pytest.fixture(scope="module", params=[("sm_90", 4), ("gfx90a", 1)],
                ids=["sm_90-tp4", "gfx90a-tp1"])
def msa_filled(request, tmp_path_factory):
    """A MiniMax-M3 cache `prewarm run` filled with no GPU: sm_90 (NVRTC) at the seed's tp 4 (16
    query heads, 1 KV head), gfx90a (hipRTC) at tp 1 (64, 4). (cache, arch)."""
    arch, tp = request.param
    cache = tmp_path_factory.mktemp(f"msa-{arch}") / "cache"
    r = subprocess.run([BINARY, "run", "--arch", arch, "--cache-dir", str(cache), "--quiet",
                        "--model-config", str(MSA_MODEL), "--kv-cache-dtype", "nvfp4",
                        "--block-size", "128", "--tensor-parallel-size", str(tp),
                        "--max-num-seqs", "16"], capture_output=True, text=True)
    if r.returncode != 0 and "cannot load any of" in r.stderr:
        pytest.skip(f"no {arch} compiler on this machine: {r.stderr.strip()}")
    assert r.returncode == 0, r.stderr
    return cache, arch


def msa_args(rt, rows=2, tokens=3):
    """Good CPU tensors (never read: nothing is launched without a GPU) for each msa launcher of
    the runtime's shape: {launcher: keyword arguments}."""
    torch = pytest.importorskip("torch")
    s = rt.info["shape"]
    hq, hkv, hi = s["heads_per_rank"], s["kv_heads_per_rank"], s["index_heads_per_rank"]
    d, di, kb = s["head_dim"], s["index_dim"], s["sparse_topk_blocks"]
    i32, f32 = torch.int32, torch.float32

    def z(*shape, dtype=torch.bfloat16):
        return torch.zeros(shape, dtype=dtype)

    kv, index = z(8, 2, hkv, 128, d // 2 + d // 16, dtype=torch.uint8), z(8, 128, di)
    rowwise = dict(row_req=z(rows, dtype=i32), visible=z(rows, dtype=i32),
                   block_table=z(rows, 4, dtype=i32))
    index_args = dict(index_q=z(rows, hi, di), **rowwise, index_cache=index,
                      scores=z(hi, rows, 8, dtype=f32))
    topk_args = dict(scores=z(hi, rows, 8, dtype=f32), visible=z(rows, dtype=i32),
                     topk=z(hi, rows, kb, dtype=i32))
    sparse_args = dict(q=z(rows, hq, d), topk=z(hkv, rows, kb, dtype=i32), **rowwise,
                       kv_cache=kv, o=z(rows, hq, d), lse=z(rows, hq, dtype=f32), k_scale=1.0,
                       v_scale=1.0, scale=d ** -0.5)
    ws_o, ws_lse = (torch.zeros(n, dtype=torch.uint8)
                    for n in rt.workspace("msa_sparse_decode", rows))
    return {
        "msa_norm_rope_insert": dict(
            q=z(tokens, hq, d), k=z(tokens, hkv, d), v=z(tokens, hkv, d),
            index_q=z(tokens, hi, di), index_k=z(tokens, di), q_norm=z(d, dtype=f32),
            k_norm=z(d, dtype=f32), index_q_norm=z(di, dtype=f32), index_k_norm=z(di, dtype=f32),
            pos=z(tokens, dtype=i32), slot=z(tokens, dtype=torch.int64), q_out=z(tokens, hq, d),
            index_q_out=z(tokens, hi, di), kv_cache=kv, index_cache=index, k_scale=1.0,
            v_scale=1.0),
        "msa_index_prefill": dict(index_args, prefill_work=rows * 1000),
        "msa_index_decode": index_args,
        "msa_topk_prefill": dict(topk_args, ctx=900),
        "msa_topk_decode": topk_args,
        "msa_sparse_prefill": dict(sparse_args, ctx=900),
        "msa_sparse_decode": dict(sparse_args, ws_o=ws_o, ws_lse=ws_lse),
    }


def test_an_msa_cache_plans_and_preloads_the_msa_launchers(msa_filled):
    cache, arch = msa_filled
    rt = prewarm_runtime.Runtime(str(cache), device=-1, arch=arch)
    assert rt.info["launchers"] == MSA_LAUNCHERS
    assert rt.info["shape"]["family"] == "MSA" and rt.info["limits"]["block_size"] == 128
    manifest = json.loads((cache / "prewarm" / "manifest.json").read_text())
    assert rt.preload() == manifest["counts"]["planned"] == rt.stats()["hits"]


def test_each_msa_launcher_picks_its_key_then_answers_no_gpu(msa_filled):
    """Every variant of the plan, reached from the key-deciding value of its call."""
    cache, arch = msa_filled
    rt = prewarm_runtime.Runtime(str(cache), device=-1, arch=arch)
    s = rt.info["shape"]
    shape = (f"heads={s['heads_per_rank']},.*kv_heads={s['kv_heads_per_rank']}")
    first = {"msa_norm_rope_insert": shape + ".*small=true", "msa_index_prefill": "large=false",
             "msa_index_decode": "rows_tile=2", "msa_topk_prefill": "strips=1",
             "msa_topk_decode": "topk_blocks=16", "msa_sparse_prefill": shape + ".*rounds=1",
             # 2 rows: s^2 x 2 x G <= 256, G 1 at tp 4 (8, the cap), 4 at tp 1 (4)
             "msa_sparse_decode": shape + (".*splits=8" if s["kv_heads_per_rank"] == 1
                                           else ".*splits=4")}
    args = msa_args(rt)
    for name, kwargs in args.items():
        with pytest.raises(prewarm_runtime.NoGpuError,
                           match=rf"^{name} arch={arch},.*{first[name]}.*without a GPU"):
            getattr(rt, name)(**kwargs)
    torch = pytest.importorskip("torch")
    big = msa_args(rt, tokens=600)["msa_norm_rope_insert"]  # small at every T (Thresholds)
    with pytest.raises(prewarm_runtime.NoGpuError, match="small=true"):
        rt.msa_norm_rope_insert(**big)
    with pytest.raises(prewarm_runtime.NoGpuError, match="large=true"):  # two 8K prompts
        rt.msa_index_prefill(**dict(args["msa_index_prefill"], prefill_work=2 * 8192 * 8192))
    with pytest.raises(prewarm_runtime.NoGpuError, match="rounds=1"):  # one round at any ctx
        rt.msa_sparse_prefill(**dict(args["msa_sparse_prefill"], ctx=5000))
    # 300000 keys: 2344 blocks, 4 strips of 1024 with a workspace of each strip's candidates.
    need, none = rt.workspace("msa_topk_prefill", 2, 300000)
    assert (need, none) == (2 * s["index_heads_per_rank"] * 4 * 16 * 2 * 4, 0)
    with pytest.raises(ValueError, match=f"msa_topk_prefill: this call's kernel needs workspace, "
                                         f"a workspace of {need} bytes"):
        rt.msa_topk_prefill(**dict(args["msa_topk_prefill"], ctx=300000))
    with pytest.raises(prewarm_runtime.NoGpuError, match="strips=4"):
        rt.msa_topk_prefill(**dict(args["msa_topk_prefill"], ctx=300000,
                                   workspace=torch.zeros(need, dtype=torch.uint8)))
    # 9 entries: the 7 first keys, large=true and strips=4 (small=true and rounds=1 again are no
    # new entry).
    assert rt.stats()["hits"] == 9 and rt.stats()["misses"] == 0


def test_msa_workspace_sizes_follow_the_key_rules(msa_filled):
    cache, arch = msa_filled
    rt = prewarm_runtime.Runtime(str(cache), device=-1, arch=arch)
    hq, hi = rt.info["shape"]["heads_per_rank"], rt.info["shape"]["index_heads_per_rank"]
    # msa_sparse_decode: splits = largest pow2 s with s^2 x R x G <= 256, at most 8, G = Hkv_r x
    # ceil(group / 16): at tp 4 (G 1) 8 and 4 for 1 and 16 rows, at tp 1 (G 4) 8 and 2.
    hkv = rt.info["shape"]["kv_heads_per_rank"]
    g = hkv * -(-(hq // hkv) // 16)
    for rows, splits in ((1, 8), (16, 4 if g == 1 else 2)):
        assert rt.workspace("msa_sparse_decode", rows) == (rows * hq * splits * 128 * 4,
                                                           rows * hq * splits * 4)
    # msa_topk_prefill: strips = pow2 >= ceil(ctx / 131072): one strip needs none.
    assert rt.workspace("msa_topk_prefill", 10, 131072) == (0, 0)
    assert rt.workspace("msa_topk_prefill", 10, 131073) == (10 * hi * 2 * 16 * 2 * 4, 0)
    # msa_index_decode: a counter a row for its fused top-k (prewarm_runtime_msa_index_topk_decode).
    assert rt.workspace("msa_index_decode", 16) == (16 * 4, 0)
    for name in ("msa_norm_rope_insert", "msa_index_prefill", "msa_topk_decode",
                 "msa_sparse_prefill"):
        assert rt.workspace(name, 16, 100000) == (0, 0), name


def test_msa_tensor_errors_name_the_argument(msa_filled):
    torch = pytest.importorskip("torch")
    cache, arch = msa_filled
    rt = prewarm_runtime.Runtime(str(cache), device=-1, arch=arch)
    s = rt.info["shape"]
    hq, hkv, kb = s["heads_per_rank"], s["kv_heads_per_rank"], s["sparse_topk_blocks"]
    args = msa_args(rt)

    def call(name, error, match, **change):
        with pytest.raises(error, match=match):
            getattr(rt, name)(**{**args[name], **change})

    ins = args["msa_norm_rope_insert"]
    call("msa_norm_rope_insert", ValueError,
         r"msa_norm_rope_insert: q must be torch.bfloat16, got torch.float32", q=ins["q"].float())
    call("msa_norm_rope_insert", ValueError,
         rf"msa_norm_rope_insert: k must have shape \[3, {hkv}, 128\], got \[3, {hkv + 1}, 128\]",
         k=torch.zeros(3, hkv + 1, 128, dtype=torch.bfloat16))
    call("msa_norm_rope_insert", ValueError,
         r"msa_norm_rope_insert: slot must be torch.int64, got torch.int32",
         slot=torch.zeros(3, dtype=torch.int32))
    call("msa_norm_rope_insert", ValueError,
         rf"msa_norm_rope_insert: kv_cache must have shape \[\*, 2, {hkv}, 128, 72\]",
         kv_cache=torch.zeros(8, 2, hkv, 128, 64, dtype=torch.uint8))
    call("msa_norm_rope_insert", ValueError,
         r"msa_norm_rope_insert: index_cache must have shape \[8, 128, 128\], got \[9, 128, 128\]",
         index_cache=torch.zeros(9, 128, 128, dtype=torch.bfloat16))
    call("msa_norm_rope_insert", prewarm_runtime.InvalidArgumentError,
         "msa_norm_rope_insert: k_scale is 0; it must be finite and > 0", k_scale=0.0)
    call("msa_norm_rope_insert", prewarm_runtime.InvalidArgumentError,
         "msa_norm_rope_insert: eps is -1", eps=-1.0)
    call("msa_index_prefill", ValueError,
         r"msa_index_prefill: scores must have shape \[\d+, 2, \*\], got \[2, 8\]",
         scores=torch.zeros(2, 8))
    call("msa_index_prefill", prewarm_runtime.InvalidArgumentError,
         "msa_index_prefill: prefill_work is 0; it must be >= 1", prefill_work=0)
    call("msa_index_decode", ValueError, r"msa_index_decode: visible must be torch.int32",
         visible=torch.zeros(2, dtype=torch.int64))
    call("msa_topk_prefill", prewarm_runtime.InvalidArgumentError,
         "msa_topk_prefill: ctx is 0; it must be >= 1", ctx=0)
    call("msa_topk_decode", ValueError,
         rf"msa_topk_decode: topk must have shape \[\d+, 2, {kb}\], got \[2, {kb}\]",
         topk=torch.zeros(2, kb, dtype=torch.int32))
    call("msa_sparse_prefill", ValueError,
         rf"msa_sparse_prefill: topk must have shape \[{hkv}, 2, {kb}\]",
         topk=torch.zeros(2, hkv, kb, dtype=torch.int32))
    call("msa_sparse_prefill", prewarm_runtime.InvalidArgumentError,
         "msa_sparse_prefill: scale is nan", scale=float("nan"))
    call("msa_sparse_decode", ValueError, "msa_sparse_decode: o must be contiguous",
         o=torch.zeros(hq, 2, 128, dtype=torch.bfloat16).transpose(0, 1))
    call("msa_sparse_decode", TypeError, "msa_sparse_decode: lse must be a torch.Tensor, got list",
         lse=[0.0])
    need = rt.workspace("msa_sparse_decode", 2)[0]
    call("msa_sparse_decode", ValueError, f"msa_sparse_decode: this call's kernel needs ws_o, a "
                                          f"workspace of {need} bytes", ws_o=None)
    call("msa_sparse_decode", ValueError, "msa_sparse_decode: ws_lse holds 3 bytes",
         ws_lse=torch.zeros(3, dtype=torch.uint8))
    assert rt.stats()["hits"] == 0, "nothing was looked up for a refused call"


def test_the_fused_msa_index_topk_decode_checks_topk_and_its_workspace(msa_filled):
    """msa_index_topk_decode (msa_index_decode's kernel with msa_topk_decode fused): the index
    arguments checked as msa_index_decode's, then topk and its workspace (a counter a row, uint8
    or int32), each error naming the call and the argument; a good call picks msa_index_decode's
    key, then answers NoGpuError."""
    torch = pytest.importorskip("torch")
    cache, arch = msa_filled
    rt = prewarm_runtime.Runtime(str(cache), device=-1, arch=arch)
    s = rt.info["shape"]
    hi, kb = s["index_heads_per_rank"], s["sparse_topk_blocks"]
    rows, i32, u8 = 2, torch.int32, torch.uint8
    need = rt.workspace("msa_index_decode", rows)[0]
    assert need == rows * 4
    good = dict(msa_args(rt, rows=rows)["msa_index_decode"],
                topk=torch.zeros(hi, rows, kb, dtype=i32), workspace=torch.zeros(need, dtype=u8))
    n = "msa_index_topk_decode"

    def call(error, match, **change):
        with pytest.raises(error, match=match):
            rt.msa_index_topk_decode(**{**good, **change})

    call(ValueError, rf"^{n}: visible must be torch.int32, got torch.int64",
         visible=torch.zeros(rows, dtype=torch.int64))
    call(ValueError, rf"^{n}: scores must have shape \[{hi}, 2, \*\], got \[2, 8\]",
         scores=torch.zeros(2, 8))
    call(ValueError, rf"^{n}: topk must be torch.int32, got torch.int64",
         topk=torch.zeros(hi, rows, kb, dtype=torch.int64))
    call(ValueError, rf"^{n}: topk must have shape \[{hi}, 2, {kb}\], got \[{hi}, 2, {kb - 1}\]",
         topk=torch.zeros(hi, rows, kb - 1, dtype=i32))
    call(ValueError, rf"^{n}: topk must be contiguous",
         topk=torch.zeros(hi, kb, rows, dtype=i32).transpose(1, 2))
    call(TypeError, rf"^{n}: topk must be a torch.Tensor, got list", topk=[0])
    call(ValueError, rf"^{n}: workspace must be torch.uint8 or torch.int32, got torch.float32",
         workspace=torch.zeros(rows))
    call(ValueError, rf"^{n}: workspace must have shape \[\*\], got \[1, {need}\]",
         workspace=torch.zeros(1, need, dtype=u8))
    call(ValueError, rf"^{n}: workspace holds {need - 1} bytes; this call needs {need}",
         workspace=torch.zeros(need - 1, dtype=u8))
    call(ValueError, rf"^{n}: workspace holds 4 bytes; this call needs {need}",
         workspace=torch.zeros(1, dtype=i32))
    call(ValueError, rf"^{n}: this call's kernel needs workspace, a workspace of {need} bytes",
         workspace=None)
    with pytest.raises(TypeError, match="workspace"):  # keyword-only, no default
        rt.msa_index_topk_decode(*(v for k, v in good.items() if k != "workspace"))
    assert rt.stats()["hits"] == 0, "nothing was looked up for a refused call"
    # uint8 of the bytes asked, int32 of a counter a row, or more (a server's, for its most
    # rows): msa_index_decode's key, then no GPU.
    for ws in (torch.zeros(need, dtype=u8), torch.zeros(rows, dtype=i32),
               torch.zeros(64, dtype=i32)):
        with pytest.raises(prewarm_runtime.NoGpuError,
                           match=rf"^msa_index_decode arch={arch},.*rows_tile=2.*without a GPU"):
            rt.msa_index_topk_decode(**{**good, "workspace": ws})
    assert rt.stats()["hits"] == 1 and rt.stats()["misses"] == 0


def test_the_other_familys_launchers_are_an_error_saying_why(msa_filled, filled):
    torch = pytest.importorskip("torch")
    cache, arch = msa_filled
    rt = prewarm_runtime.Runtime(str(cache), device=-1, arch=arch)
    with pytest.raises(prewarm_runtime.InvalidArgumentError,
                       match="sparse_decode does not run for this cache's model.*MLA model.*"
                             "the plan has kv_cache_dtype nvfp4 and an MSA model"):
        rt.sparse_decode(None, None, None, None, None, None, None, None, g_kv=1.0, scale=1.0)
    with pytest.raises(prewarm_runtime.InvalidArgumentError, match="fp8_bmm does not run"):
        rt.fp8_bmm(torch.zeros(1), torch.zeros(1), torch.zeros(1), 1.0)
    with pytest.raises(prewarm_runtime.InvalidArgumentError, match="topk_prefill does not run"):
        rt.workspace("topk_prefill", 4, 100)
    mla = prewarm_runtime.Runtime(str(filled), device=-1, arch="sm_90")
    with pytest.raises(prewarm_runtime.InvalidArgumentError,
                       match="msa_sparse_decode does not run for this cache's model.*MSA model"):
        mla.msa_sparse_decode(*[None] * 8, k_scale=1.0, v_scale=1.0, scale=1.0)
    with pytest.raises(prewarm_runtime.InvalidArgumentError,
                       match="msa_index_decode does not run for this cache's model.*MSA model"):
        mla.msa_index_topk_decode(*[None] * 7, workspace=None)
    with pytest.raises(prewarm_runtime.InvalidArgumentError, match="msa_topk_prefill does not run"):
        mla.workspace("msa_topk_prefill", 4, 100)
    assert rt.stats()["hits"] == mla.stats()["hits"] == 0


def test_the_c_abi_test_over_an_msa_cache(msa_filled):
    """tests/runtime/c_abi_test.c's no-GPU checks (each msa function's argument errors, key and
    no-GPU answer; an MLA function's refusal) over the MSA cache."""
    exe = os.environ.get("PREWARM_C_ABI_TEST")
    if not exe:
        pytest.skip("PREWARM_C_ABI_TEST is not set (CTest sets it)")
    cache, arch = msa_filled
    r = subprocess.run([exe, str(cache), arch], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    # 18, and the fused index + top-k call's 4 (its key, a NULL topk, a NULL workspace, the
    # workspace's size).
    assert r.stdout.count("ok: msa_") == 22, r.stdout


def test_the_msa_reference_on_cases_worked_by_hand():
    """tests/python/msa_reference.py (test_msa_gpu.py's reference) on the CPU."""
    torch = pytest.importorskip("torch")
    import math

    import msa_reference as mref

    # Top-k: the own block (nb - 1) always, then the best scores, ties to the lower id;
    # ascending, -1 padded. visible 600: nb 5.
    s = torch.tensor([[[1.0, 3.0, 3.0, 0.0, -1.0, -math.inf]]])
    vis = torch.tensor([600], dtype=torch.int32)
    assert mref.topk(s, vis, 3, 0, 1).tolist() == [[[1, 2, 4]]]
    assert mref.topk(s, vis, 2, 1, 1).tolist() == [[[0, 4]]]  # one init block too
    assert mref.topk(s, vis, 8, 0, 1).tolist() == [[[0, 1, 2, 3, 4, -1, -1, -1]]]
    # Norm then RoPE: e_0 normed is sqrt(128) e_0; the pair (0, 32) turns by pos * theta^0.
    x = torch.zeros(1, 1, 128, dtype=torch.bfloat16)
    x[0, 0, 0] = 1
    out = mref.norm_rope(x, torch.zeros(128), torch.tensor([1]), eps=0.0)
    assert torch.allclose(out[0, 0, [0, 32]],
                          math.sqrt(128) * torch.tensor([math.cos(1), math.sin(1)],
                                                        dtype=torch.float64))
    assert mref.norm_rope(x[:, 0], torch.full((128,), 1.0), torch.tensor([0]),
                          eps=0.0)[0, 0].item() == pytest.approx(2 * math.sqrt(128))
    # Block scores through a block table [1, 0]: key j (in its request) has j % 7 in dim 0.
    index = torch.zeros(2, 128, 128, dtype=torch.bfloat16)
    for pos in range(256):
        index[1 - pos // 128, pos % 128, 0] = pos % 7
    q = torch.zeros(1, 1, 128, dtype=torch.bfloat16)
    q[0, 0, 0] = 1
    table = torch.tensor([[1, 0]], dtype=torch.int32)
    got = mref.block_scores(q, torch.tensor([0]), torch.tensor([130]), table, index, 3)
    assert got.tolist() == [[[6.0, 3.0, -math.inf]]]  # block 1 sees keys 128 (2) and 129 (3)
    # Sparse attention over one block of which 2 keys are visible: K rows e2m1 1.0 and 2.0, V
    # rows 1.0 and -1.0 (scale code 0x38 = 1.0, g 1); key 2 (huge) is past visible.
    kv = torch.zeros(1, 2, 1, 128, 72, dtype=torch.uint8)
    kv[..., 64:] = 0x38
    kv[0, 0, 0, 0, :64], kv[0, 0, 0, 1, :64], kv[0, 0, 0, 2, :64] = 0x22, 0x44, 0x77
    kv[0, 1, 0, 0, :64], kv[0, 1, 0, 1, :64] = 0x22, 0xAA
    q = torch.ones(1, 2, 128, dtype=torch.bfloat16)
    sel = torch.tensor([[[0, -1]]], dtype=torch.int32)
    o, lse = mref.sparse_attention(q, sel, torch.tensor([0]), torch.tensor([2]),
                                   torch.tensor([[0]], dtype=torch.int32), kv, 1.0, 1.0, 1 / 128)
    e = math.e
    assert lse[0].tolist() == pytest.approx([math.log(e + e * e)] * 2)
    assert torch.allclose(o, torch.full((1, 2, 128), (e - e * e) / (e + e * e),
                                        dtype=torch.float64))
