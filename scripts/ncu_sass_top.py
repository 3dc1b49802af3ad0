#!/usr/bin/env python3
"""Where a kernel's warps wait, from Nsight Compute's SASS source page.

    ncu_sass_top.py SASS_CSV[.gz] [TOP]

SASS_CSV is `ncu --import R.ncu-rep --page source --csv --print-source sass` (gzipped or not).
Prints the kernel's SASS lines and warp-stall samples, the TOP (default 20) lines holding the
most samples with each line's own largest stall reason, then the kernel's stall reasons summed
(the issued and not-issued samples together: ncu's stall_* columns, not their "(Not Issued)"
halves). Exit 2 naming the file when it cannot be read or has no stall-sampling columns.
"""
import csv
import gzip
import sys


def fail(msg):
    print(f"ncu_sass_top: {msg}", file=sys.stderr)
    sys.exit(2)


def number(x):
    try:
        return float(x.replace(",", ""))
    except ValueError:
        return 0.0


def main(argv):
    if len(argv) not in (2, 3):
        fail("usage: ncu_sass_top.py SASS_CSV[.gz] [TOP]")
    path = argv[1]
    top = argv[2] if len(argv) == 3 else "20"
    if not top.isdigit() or int(top) < 1:
        fail(f"TOP {top}: must be a whole number from 1")
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt", newline="") as f:
            rows = [r for r in csv.reader(f) if r]
    except (OSError, UnicodeDecodeError, EOFError, csv.Error) as e:
        fail(f"{path}: cannot read it ({e})")
    head = next((i for i, r in enumerate(rows) if "Source" in (c.strip() for c in r)), None)
    if head is None:
        fail(f"{path}: no header with a Source column (not ncu's SASS source page)")
    cols = [c.strip() for c in rows[head]]
    src = cols.index("Source")
    total = next((i for i, c in enumerate(cols) if c.startswith("Warp Stall Sampling (All")), None)
    if total is None:
        fail(f"{path}: no 'Warp Stall Sampling (All Samples)' column")
    reasons = [(c, i) for i, c in enumerate(cols) if c.startswith("stall_") and "Not Issued" not in c]
    body = [r for r in rows[head + 1:] if len(r) == len(cols)]
    samples = sum(number(r[total]) for r in body) or 1.0
    print(f"{len(body)} SASS lines, {samples:.0f} warp-stall samples; the top {int(top)}:")
    for r in sorted(body, key=lambda r: -number(r[total]))[: int(top)]:
        why = max(reasons, key=lambda ci: number(r[ci[1]]), default=None)
        why_s = f"  [{why[0][6:]}]" if why and number(r[why[1]]) > 0 else ""
        print(f"  {100 * number(r[total]) / samples:5.1f}%  {r[src].strip()[:100]}{why_s}")
    sums = sorted(((sum(number(r[i]) for r in body), c) for c, i in reasons), reverse=True)
    shown = [f"{c[6:]} {100 * v / samples:.0f}%" for v, c in sums[:8] if v]
    if shown:
        print("  reasons: " + ", ".join(shown))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
