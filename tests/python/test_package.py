"""`pip install python/` as a user on a fresh machine runs it: offline (no index, and where this
machine allows it no network at all), into a plain venv that has neither setuptools' wheel
support nor `wheel`, with and without build isolation; the wheel is tagged for the platform of
the library it bundles, and pip refuses one built for another; the installed package opens a
runtime with no environment. Real pip, real wheels, the real library.

Environment (CTest sets it): PREWARM_RUNTIME_LIB, the built libprewarm_runtime.so.
"""

import base64
import hashlib
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile

import pytest

HERE = pathlib.Path(__file__).resolve().parent
PYTHON_DIR = HERE.parent.parent / "python"
LIB = os.environ.get("PREWARM_RUNTIME_LIB", "")
PLATFORM = sysconfig.get_platform().replace("-", "_").replace(".", "_")  # linux_x86_64


@pytest.fixture(autouse=True)
def _needs_the_library():
    if not os.path.isfile(LIB):
        pytest.skip("PREWARM_RUNTIME_LIB is not the built library (CTest sets it)")


def _offline():
    """A prefix that runs a command with no network (a new network namespace), where allowed."""
    if shutil.which("unshare") and subprocess.run(["unshare", "-n", "true"],
                                                  capture_output=True).returncode == 0:
        return ["unshare", "-n"]
    return []


def _env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("PREWARM_RUNTIME_LIB", "PYTHONPATH") and not k.startswith("PIP_")}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INDEX="1", PIP_NO_CACHE_DIR="1")
    env.update(extra)
    return env


def _run(cmd, env, cwd=None):
    return subprocess.run(_offline() + [str(c) for c in cmd], capture_output=True, text=True,
                          env=env, cwd=cwd)


def _venv(path):
    """A plain venv (no system site-packages): pip (and before Python 3.12 setuptools) from
    ensurepip, no `wheel`. Skipped where this python has no ensurepip (scripts/setup installs
    python3-venv, so never under CTest here; a device machine's python may lack it)."""
    if subprocess.run([sys.executable, "-c", "import ensurepip"],
                      capture_output=True).returncode != 0:
        pytest.skip(f"{sys.executable} has no ensurepip (Debian: python3-venv)")
    r = subprocess.run([sys.executable, "-m", "venv", str(path)], capture_output=True, text=True)
    assert r.returncode == 0, f"python3 -m venv failed (scripts/setup installs python3-venv): " \
                              f"{r.stderr}"
    py = path / "bin" / "python"
    assert subprocess.run([py, "-c", "import wheel"], capture_output=True).returncode != 0, \
        "this venv has `wheel`: it would not show that the build needs none"
    return py


def _source_copy(tmp_path, with_tree_build=False):
    """python/ copied as a clone has it; with_tree_build: beside a build/ holding the library, as
    in a built tree (the backend's fallback)."""
    root = tmp_path / "repo"
    shutil.copytree(PYTHON_DIR, root / "python",
                    ignore=shutil.ignore_patterns("__pycache__", "_native", "*.egg-info", "build"))
    if with_tree_build:
        lib_dir = root / "build" / "prewarm" / "runtime"
        lib_dir.mkdir(parents=True)
        shutil.copy2(LIB, lib_dir / "libprewarm_runtime.so")
    return root / "python"


def _opens(py, cwd):
    """The installed package, from its own files with no environment: Runtime('/tmp', device=-1)
    reaches the library (which answers that device -1 needs an arch)."""
    r = subprocess.run([py, "-c",
                        "import prewarm_runtime, sys\n"
                        "print(prewarm_runtime.__file__)\n"
                        "try:\n"
                        "    prewarm_runtime.Runtime('/tmp', device=-1)\n"
                        "except prewarm_runtime.InvalidArgumentError as e:\n"
                        "    print('library answered:', e)\n"],
                       capture_output=True, text=True, env=_env(), cwd=cwd)
    assert r.returncode == 0, r.stderr
    assert "library answered: a runtime without a GPU (device -1) needs the arch" in r.stdout
    return r.stdout.splitlines()[0]


def _tree_files():
    return sorted(str(p.relative_to(PYTHON_DIR)) for p in PYTHON_DIR.rglob("*")
                  if "__pycache__" not in p.parts)


@pytest.mark.parametrize("isolation", [True, False], ids=["isolated", "no-build-isolation"])
def test_pip_installs_python_dir_offline_into_a_fresh_venv(tmp_path, isolation):
    py = _venv(tmp_path / "venv")
    before = _tree_files()
    cmd = [py, "-m", "pip", "install", "--no-index"]
    if not isolation:
        cmd.append("--no-build-isolation")
    r = _run(cmd + [PYTHON_DIR], _env(PREWARM_RUNTIME_LIB=LIB), cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"prewarm_runtime-0.1.0-py3-none-{PLATFORM}.whl" in r.stdout, r.stdout
    site = pathlib.Path(_opens(py, tmp_path)).parent
    assert str(site).startswith(str(tmp_path / "venv")), site
    bundled = site / "_native" / "libprewarm_runtime.so"
    assert bundled.read_bytes() == pathlib.Path(LIB).read_bytes()
    assert _tree_files() == before, "the build wrote into python/"


def test_the_trees_own_build_is_bundled_into_a_target_dir(tmp_path):
    """No PREWARM_RUNTIME_LIB: the library of the tree's build/ (pip install python/ in a clone
    after scripts/setup), installed with --target, the system python's pip."""
    src = _source_copy(tmp_path, with_tree_build=True)
    target = tmp_path / "site"
    r = _run([sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "--target",
              target, src], _env(), cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (target / "prewarm_runtime" / "_native" / "libprewarm_runtime.so").is_file()
    r = subprocess.run([sys.executable, "-c",
                        "import prewarm_runtime; print(prewarm_runtime.__file__)"],
                       capture_output=True, text=True, env=_env(PYTHONPATH=str(target)),
                       cwd=tmp_path)
    assert r.stdout.startswith(str(target)), r.stdout + r.stderr


def _wheel(tmp_path, src, **env):
    out = tmp_path / "wheels"
    r = _run([sys.executable, "-m", "pip", "wheel", "--no-index", "--no-deps", "-w", out, src],
             _env(**env), cwd=tmp_path)
    return r, sorted(out.glob("*.whl")) if out.is_dir() else []


def test_the_wheel_is_tagged_for_the_librarys_platform_and_its_record_holds(tmp_path):
    r, wheels = _wheel(tmp_path, PYTHON_DIR, PREWARM_RUNTIME_LIB=LIB)
    assert r.returncode == 0, r.stdout + r.stderr
    assert [w.name for w in wheels] == [f"prewarm_runtime-0.1.0-py3-none-{PLATFORM}.whl"]
    with zipfile.ZipFile(wheels[0]) as z:
        names = z.namelist()
        wheel_meta = z.read("prewarm_runtime-0.1.0.dist-info/WHEEL").decode()
        assert f"Tag: py3-none-{PLATFORM}\n" in wheel_meta
        assert "Root-Is-Purelib: false\n" in wheel_meta
        assert z.read("prewarm_runtime/_native/libprewarm_runtime.so") == \
            pathlib.Path(LIB).read_bytes()
        assert z.getinfo("prewarm_runtime/_native/libprewarm_runtime.so").external_attr >> 16 \
            == 0o100755
        for want in ("prewarm_runtime/__init__.py", "prewarm_runtime/_lib.py",
                     "prewarm_runtime/_msa.py", "prewarm_runtime/_errors.py"):
            assert want in names
        # Every file's hash and size as RECORD says (pip checks them too, on install).
        record = z.read("prewarm_runtime-0.1.0.dist-info/RECORD").decode().splitlines()
        assert len(record) == len(names)
        for line in record:
            name, digest, size = line.rsplit(",", 2)
            if name.endswith("RECORD"):
                continue
            data = z.read(name)
            want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert (digest, int(size)) == (f"sha256={want}", len(data)), name
        assert "Requires-Python: >=3.9" in z.read(
            "prewarm_runtime-0.1.0.dist-info/METADATA").decode()
    # Reproducible: the same inputs make the same bytes.
    first = wheels[0].read_bytes()
    wheels[0].unlink()
    _, again = _wheel(tmp_path, PYTHON_DIR, PREWARM_RUNTIME_LIB=LIB)
    assert again[0].read_bytes() == first


def test_without_a_library_the_wheel_is_pure(tmp_path):
    r, wheels = _wheel(tmp_path, _source_copy(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert [w.name for w in wheels] == ["prewarm_runtime-0.1.0-py3-none-any.whl"]
    with zipfile.ZipFile(wheels[0]) as z:
        assert not any("_native" in n for n in z.namelist())
        assert "Root-Is-Purelib: true" in z.read("prewarm_runtime-0.1.0.dist-info/WHEEL").decode()


def test_a_library_for_another_machine_is_tagged_so_and_pip_refuses_it_here(tmp_path):
    other = tmp_path / "aarch64" / "libprewarm_runtime.so"
    other.parent.mkdir()
    data = bytearray(pathlib.Path(LIB).read_bytes())
    data[18:20] = (183).to_bytes(2, "little")  # e_machine EM_AARCH64
    other.write_bytes(bytes(data))
    r, wheels = _wheel(tmp_path, PYTHON_DIR, PREWARM_RUNTIME_LIB=str(other))
    assert r.returncode == 0, r.stdout + r.stderr
    assert [w.name for w in wheels] == ["prewarm_runtime-0.1.0-py3-none-linux_aarch64.whl"]
    target = tmp_path / "site"
    r = _run([sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "--target",
              target, wheels[0]], _env())
    assert r.returncode != 0
    assert "is not a supported wheel on this platform" in r.stderr, r.stderr
    assert not (target / "prewarm_runtime").exists()


@pytest.mark.parametrize("bad", ["missing", "not-elf", "executable"])
def test_a_named_library_that_is_not_one_fails_the_build_naming_it(tmp_path, bad):
    path = tmp_path / "libprewarm_runtime.so"
    if bad == "not-elf":
        path.write_text("not a library\n")
    elif bad == "executable":
        data = bytearray(pathlib.Path(LIB).read_bytes())
        data[16:18] = (2).to_bytes(2, "little")  # e_type ET_EXEC
        path.write_bytes(bytes(data))
    r, wheels = _wheel(tmp_path, PYTHON_DIR, PREWARM_RUNTIME_LIB=str(path))
    assert r.returncode != 0
    assert wheels == [], "no wheel from a failed build"
    why = {"missing": f"PREWARM_RUNTIME_LIB={path}: no such file",
           "not-elf": f"{path}: not an ELF file",
           "executable": f"{path}: an ELF file of type 2, not a shared library"}[bad]
    assert why in r.stdout + r.stderr, r.stdout + r.stderr


def test_the_sdist_builds_and_installs_offline(tmp_path):
    """The PEP 517 sdist hook (the backend's own, imported as pip's build frontend would), then
    pip installs that sdist into a fresh venv: a pure wheel (no build/ beside an unpacked sdist;
    the package then finds the library through PREWARM_RUNTIME_LIB)."""
    out = tmp_path / "dist"
    out.mkdir()
    r = subprocess.run([sys.executable, "-c",
                        "import sys; sys.path.insert(0, sys.argv[1]); import prewarm_build; "
                        "print(prewarm_build.build_sdist(sys.argv[2]))",
                        PYTHON_DIR / "_build", out], capture_output=True, text=True, env=_env())
    assert r.returncode == 0, r.stderr
    sdist = out / r.stdout.strip()
    assert sdist.name == "prewarm_runtime-0.1.0.tar.gz"
    with tarfile.open(sdist) as t:
        names = t.getnames()
    for want in ("PKG-INFO", "pyproject.toml", "README.md", "_build/prewarm_build.py",
                 "prewarm_runtime/__init__.py", "prewarm_runtime/_errors.py"):
        assert f"prewarm_runtime-0.1.0/{want}" in names, names
    py = _venv(tmp_path / "venv")
    r = _run([py, "-m", "pip", "install", "--no-index", sdist], _env(), cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run([py, "-c", "import prewarm_runtime, os; print(os.listdir("
                        "os.path.dirname(prewarm_runtime.__file__)))"],
                       capture_output=True, text=True, env=_env(PREWARM_RUNTIME_LIB=LIB))
    assert r.returncode == 0 and "_native" not in r.stdout, r.stdout + r.stderr
