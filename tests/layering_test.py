"""The libraries of prewarm/ depend one way (DESIGN.md section 4): util <- arch <- model, limits
<- launchers (the plan) and toolchain (compilers, workers; no launcher) <- cache (no compiler) <-
catalog <- compile and runtime <- service, cli. Each directory's #include "prewarm/<dir>/..." lines
and each prewarm_library's prewarm::<lib> DEPS must name only layers below it (or its own): a
toolchain that links prewarm::plan, or a cache that includes a compiler header, fails here.

Usage: layering_test.py SOURCE_ROOT. Prints every violation; exit 1 when there is one."""
import pathlib
import re
import sys

# Each layer and the layers it may use (transitively closed below).
BELOW = {
    "util": set(),
    "arch": {"util"},
    "model": {"arch"},
    "limits": {"model"},
    "launchers": {"limits", "model"},
    "toolchain": {"arch"},
    "cache": {"launchers"},
    "catalog": {"cache", "toolchain"},
    "compile": {"catalog"},
    "runtime": {"catalog"},
    "service": {"compile", "runtime"},
    "cli": {"service"},
}
# prewarm::<name> -> the directory that builds it.
LIBRARY_DIR = {"plan": "launchers", "code_object": "toolchain", "launch": "runtime"}


def closure(layer):
    seen, todo = set(), [layer]
    while todo:
        for below in BELOW[todo.pop()]:
            if below not in seen:
                seen.add(below)
                todo.append(below)
    return seen


def main(root):
    prewarm = pathlib.Path(root) / "prewarm"
    problems = []
    for layer in BELOW:
        allowed = closure(layer) | {layer}
        directory = prewarm / layer
        for path in sorted(directory.iterdir()):
            if path.suffix in (".h", ".cc"):
                for n, line in enumerate(path.read_text().splitlines(), 1):
                    m = re.match(r'#include "prewarm/([a-z_]+)/', line)
                    if m and m.group(1) in BELOW and m.group(1) not in allowed:
                        problems.append(f"{path.relative_to(root)}:{n}: includes prewarm/"
                                        f"{m.group(1)}/, above or beside {layer}")
        cmake = directory / "CMakeLists.txt"
        for lib in re.findall(r"prewarm::([a-z_]+)", cmake.read_text()):
            used = LIBRARY_DIR.get(lib, lib)
            if used in BELOW and used not in allowed:
                problems.append(f"{cmake.relative_to(root)}: links prewarm::{lib} ({used}), above "
                                f"or beside {layer}")
    for p in problems:
        print(p)
    print(f"layering: {len(problems)} problems in {len(BELOW)} layers")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
