"""Bundles libprewarm_runtime.so into the package when one is built: $PREWARM_RUNTIME_LIB, else
the tree's own build (../build/prewarm/runtime). Without one the package still installs and
finds the library at run time ($PREWARM_RUNTIME_LIB or the loader's path)."""

import os
import pathlib
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPyWithLibrary(build_py):
    def run(self):
        super().run()
        here = pathlib.Path(__file__).resolve().parent
        candidates = [os.environ.get("PREWARM_RUNTIME_LIB"),
                      here.parent / "build" / "prewarm" / "runtime" / "libprewarm_runtime.so"]
        for c in candidates:
            if c and pathlib.Path(c).is_file():
                dest = pathlib.Path(self.build_lib) / "prewarm_runtime" / "_native"
                dest.mkdir(parents=True, exist_ok=True)
                shutil.copy2(c, dest / "libprewarm_runtime.so")
                print(f"prewarm_runtime: bundled {c}")
                break


setup(cmdclass={"build_py": BuildPyWithLibrary})
