"""prewarm-runtime's own PEP 517 build backend: the standard library only, so `pip install
python/` needs nothing from an index (no setuptools, no wheel), with or without build isolation,
on a machine with no network.

The wheel bundles libprewarm_runtime.so when one is built: config setting `runtime-lib`
(pip -C runtime-lib=PATH), else $PREWARM_RUNTIME_LIB, else the tree's own build
(../build/prewarm/runtime/libprewarm_runtime.so beside python/). One named explicitly must be
there. A wheel with the library is tagged for the platform the library is built for, read from
its ELF header (py3-none-linux_x86_64: the package loads it through ctypes, so no Python ABI
tag), and pip refuses it elsewhere; without one the wheel is pure (py3-none-any) and the package
finds the library at run time ($PREWARM_RUNTIME_LIB or the loader's path).

Wheels and sdists are reproducible: entries sorted, timestamps from $SOURCE_DATE_EPOCH (else
1980-01-01), modes 0644 (0755 for the library). Nothing is written into the source tree.
"""

import base64
import gzip
import hashlib
import io
import os
import pathlib
import re
import sys
import tarfile
import time
import zipfile

SOURCE = pathlib.Path(__file__).resolve().parent.parent  # python/
PACKAGE = "prewarm_runtime"
LIBRARY = "libprewarm_runtime.so"

# ELF e_machine -> the platform tag's architecture (PEP 425 / sysconfig.get_platform()).
_ELF_MACHINES = {(2, 62): "x86_64", (2, 183): "aarch64", (2, 21): "ppc64le", (2, 22): "s390x",
                 (2, 243): "riscv64", (1, 3): "i686", (1, 40): "armv7l"}


class BuildError(Exception):
    """A build that cannot give what was asked: the message names the file and why."""


# ---- metadata (pyproject.toml's [project], the one place it is written) -------------------------

def _project():
    text = (SOURCE / "pyproject.toml").read_text()
    try:
        import tomllib  # Python 3.11+
        return tomllib.loads(text)["project"]
    except ImportError:
        pass
    # Python 3.9/3.10: the [project] table's plain `key = "value"` lines and the license table.
    section = re.search(r"^\[project\]\n(.*?)(?=^\[|\Z)", text, re.S | re.M).group(1)
    project = {k: v for k, v in re.findall(r'^([\w-]+)\s*=\s*"([^"]*)"', section, re.M)}
    lic = re.search(r'^license\s*=\s*\{\s*text\s*=\s*"([^"]*)"', section, re.M)
    if lic:
        project["license"] = {"text": lic.group(1)}
    return project


def _dist_name(project):
    return re.sub(r"[-_.]+", "_", project["name"]).lower()


def _metadata(project):
    lines = ["Metadata-Version: 2.1", f"Name: {project['name']}",
             f"Version: {project['version']}"]
    if "description" in project:
        lines.append(f"Summary: {project['description']}")
    if "license" in project:
        lines.append(f"License: {project['license']['text']}")
    if "requires-python" in project:
        lines.append(f"Requires-Python: {project['requires-python']}")
    for dep in project.get("dependencies", []):
        lines.append(f"Requires-Dist: {dep}")
    body = ""
    if "readme" in project:
        lines.append("Description-Content-Type: text/markdown")
        body = "\n" + (SOURCE / project["readme"]).read_text()
    return ("\n".join(lines) + "\n" + body).encode()


# ---- the library ---------------------------------------------------------------------------------

def _library(config_settings):
    """(path, where it was named) of the library to bundle, or (None, why there is none)."""
    for value, where in (((config_settings or {}).get("runtime-lib"), "config setting runtime-lib"),
                         (os.environ.get("PREWARM_RUNTIME_LIB"), "PREWARM_RUNTIME_LIB")):
        if value:
            path = pathlib.Path(value)
            if not path.is_file():
                raise BuildError(f"{where}={value}: no such file (the {LIBRARY} to bundle)")
            return path, where
    tree = SOURCE.parent / "build" / "prewarm" / "runtime" / LIBRARY
    if tree.is_file():
        return tree, "the tree's build"
    return None, (f"no {LIBRARY}: runtime-lib and PREWARM_RUNTIME_LIB unset, {tree} absent")


def platform_tag(path):
    """The wheel platform tag of the ELF shared library at path (linux_x86_64, ...)."""
    with open(path, "rb") as f:
        head = f.read(20)
    if len(head) < 20 or head[:4] != b"\x7fELF":
        raise BuildError(f"{path}: not an ELF file, so not a {LIBRARY} to bundle")
    cls, data = head[4], head[5]
    order = {1: "little", 2: "big"}.get(data)
    if cls not in (1, 2) or order is None:
        raise BuildError(f"{path}: an ELF header with class {cls} and data {data}")
    e_type = int.from_bytes(head[16:18], order)
    machine = int.from_bytes(head[18:20], order)
    if e_type != 3:  # ET_DYN
        raise BuildError(f"{path}: an ELF file of type {e_type}, not a shared library (3)")
    arch = _ELF_MACHINES.get((cls, machine))
    if arch is None or (arch == "ppc64le" and order != "little"):
        raise BuildError(f"{path}: ELF machine {machine} ({cls * 32}-bit {order}-endian) has no "
                         "wheel platform tag here")
    return f"linux_{arch}"


# ---- archives ------------------------------------------------------------------------------------

def _epoch():
    return max(int(os.environ.get("SOURCE_DATE_EPOCH", "315532800")), 315532800)


def _package_files():
    """(archive name, source path) of the package's Python files, sorted."""
    root = SOURCE / PACKAGE
    return [(f"{PACKAGE}/{p.relative_to(root).as_posix()}", p)
            for p in sorted(root.rglob("*.py")) if "__pycache__" not in p.parts]


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _write_wheel(wheel_directory, tag, purelib, files):
    """files: [(archive name, bytes, executable)]. Returns the wheel's file name."""
    project = _project()
    dist = _dist_name(project)
    info = f"{dist}-{project['version']}.dist-info"
    files = sorted(files) + [
        (f"{info}/METADATA", _metadata(project), False),
        (f"{info}/WHEEL", (f"Wheel-Version: 1.0\nGenerator: prewarm_build\nRoot-Is-Purelib: "
                           f"{'true' if purelib else 'false'}\nTag: {tag}\n").encode(), False)]
    record = "\n".join([_record_line(n, d) for n, d, _ in files] + [f"{info}/RECORD,,"]) + "\n"
    files.append((f"{info}/RECORD", record.encode(), False))
    name = f"{dist}-{project['version']}-{tag}.whl"
    stamp = time.gmtime(_epoch())[:6]
    tmp = pathlib.Path(wheel_directory) / f".{name}.partial"
    try:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
            for n, data, executable in files:
                zi = zipfile.ZipInfo(n, stamp)
                zi.external_attr = (0o100755 if executable else 0o100644) << 16
                zi.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(zi, data)
        os.replace(tmp, pathlib.Path(wheel_directory) / name)
    finally:
        if tmp.exists():
            tmp.unlink()
    return name


# ---- PEP 517 / PEP 660 hooks ---------------------------------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = [(n, p.read_bytes(), False) for n, p in _package_files()]
    lib, where = _library(config_settings)
    if lib is None:
        print(f"prewarm_build: {where}; a pure-Python wheel (the package finds the library at "
              "run time)", file=sys.stderr)
        return _write_wheel(wheel_directory, "py3-none-any", True, files)
    tag = platform_tag(lib)
    files.append((f"{PACKAGE}/_native/{LIBRARY}", lib.read_bytes(), True))
    print(f"prewarm_build: bundled {lib} ({where}), tagged {tag}", file=sys.stderr)
    return _write_wheel(wheel_directory, f"py3-none-{tag}", False, files)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """A wheel whose .pth puts python/ on sys.path: the package runs from the tree, and finds the
    library at run time."""
    pth = (str(SOURCE) + "\n").encode()
    return _write_wheel(wheel_directory, "py3-none-any", True,
                        [(f"__editable__.{PACKAGE}.pth", pth, False)])


def build_sdist(sdist_directory, config_settings=None):
    project = _project()
    base = f"{_dist_name(project)}-{project['version']}"
    members = [("pyproject.toml", SOURCE / "pyproject.toml"), ("README.md", SOURCE / "README.md"),
               ("_build/prewarm_build.py", pathlib.Path(__file__).resolve())] + _package_files()
    name = f"{base}.tar.gz"
    tmp = pathlib.Path(sdist_directory) / f".{name}.partial"

    def add(tar, arcname, data):
        ti = tarfile.TarInfo(f"{base}/{arcname}")
        ti.size, ti.mtime, ti.mode = len(data), _epoch(), 0o644
        tar.addfile(ti, io.BytesIO(data))

    try:
        with open(tmp, "wb") as raw:
            with gzip.GzipFile(fileobj=raw, mode="wb", mtime=_epoch()) as gz:
                with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
                    add(tar, "PKG-INFO", _metadata(project))
                    for arcname, path in sorted(members):
                        add(tar, arcname, path.read_bytes())
        os.replace(tmp, pathlib.Path(sdist_directory) / name)
    finally:
        if tmp.exists():
            tmp.unlink()
    return name
