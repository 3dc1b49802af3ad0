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
    # sparse_decode: one row gets 16 splits; 16 rows get 16 (256 / R, at most 16).
    assert rt.workspace("sparse_decode", 1) == (1 * heads * 16 * L * 4, 1 * heads * 16 * 4)
    assert rt.workspace("sparse_decode", 16) == (16 * heads * 16 * L * 4, 16 * heads * 16 * 4)
    # topk_prefill: ctx 20000 -> 4 strips (pow2 >= ceil(20000 / 8192)); ctx 8000 -> none.
    assert rt.workspace("topk_prefill", 10, 20000) == (10 * 4 * ktop * 4,) * 2
    assert rt.workspace("topk_prefill", 10, 8000) == (0, 0)
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
    with pytest.raises(ValueError, match="sparse_decode: this call's kernel needs ws_o, a "
                                         "workspace of 4194304 bytes"):
        call()
    ws_o, ws_lse = (torch.zeros(n, dtype=torch.uint8) for n in rt.workspace("sparse_decode", rows))
    with pytest.raises(ValueError, match="sparse_decode: ws_lse holds 3 bytes; this call needs"):
        call(ws_o=ws_o, ws_lse=torch.zeros(3, dtype=torch.uint8))
    with pytest.raises(ValueError, match="without a GPU"):
        call(ws_o=ws_o, ws_lse=ws_lse)
    with pytest.raises(ValueError, match=r"fp8_bmm: w has shape \[64, 100, 128\]; this model's "
                                         r"GEMMs are q_absorb \[64, 512, 128\] and v_up"):
        rt.fp8_bmm(torch.zeros(1, 64, 128, dtype=torch.bfloat16),
                   torch.zeros(64, 100, 128, dtype=torch.uint8),
                   torch.zeros(1, 64, 100, dtype=torch.bfloat16), 1.0)
    assert rt.stats()["hits"] == 0, "nothing was looked up for a refused call"


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
               "topk": _lib.TopkArgs, "sparse": _lib.SparseArgs}
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
    r = _without_nvrtc(
        "import prewarm_runtime\n"
        f"rt = prewarm_runtime.Runtime({str(filled)!r}, device=-1, arch='sm_90')\n"
        "print('preloaded', rt.preload(), rt.stats()['compiles'])\n"
        f"prewarm_runtime.Runtime({str(tmp_path / 'none')!r}, device=-1, arch='sm_90')\n",
        tmp_path)
    assert "preloaded 48 0" in r.stdout, r.stdout + r.stderr
    # Without a manifest the entries can only be named by the compiler: the error names it.
    assert "NoCompilerError" in r.stderr, r.stderr
    assert "NVRTC cannot be loaded" in r.stderr and "manifest.json is absent" in r.stderr


def test_pip_installs_the_package_with_its_library(tmp_path):
    """`pip install python/` bundles the built library; the installed package finds it with no
    environment. (A copy of python/, so the build leaves nothing in the tree.)"""
    src = tmp_path / "src"
    shutil.copytree(PYTHON_DIR, src, ignore=shutil.ignore_patterns("build", "*.egg-info",
                                                                   "__pycache__", "_native"))
    target = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                        "--no-index", "--no-build-isolation", "--target", str(target), str(src)],
                       capture_output=True, text=True,
                       env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    assert r.returncode == 0, r.stderr
    assert (target / "prewarm_runtime" / "_native" / "libprewarm_runtime.so").is_file()
    env = {k: v for k, v in os.environ.items() if k not in ("PREWARM_RUNTIME_LIB", "PYTHONPATH")}
    env["PYTHONPATH"] = str(target)
    r = subprocess.run([sys.executable, "-c",
                        "import prewarm_runtime, sys\n"
                        "print(prewarm_runtime.__file__)\n"
                        "try:\n"
                        "    prewarm_runtime.Runtime('/tmp', device=-1)\n"
                        "except prewarm_runtime.InvalidArgumentError as e:\n"
                        "    print('library answered:', e)\n"],
                       capture_output=True, text=True, env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert str(target) in r.stdout
    assert "library answered: a runtime without a GPU (device -1) needs the arch" in r.stdout
