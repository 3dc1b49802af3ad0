#!/usr/bin/env python3
"""The docs against the repository and the binary (issue 31 item 13).

Fails when
  - a relative link in README.md or docs/*.md points at a file that does not exist, or at an
    #anchor that no heading of the target Markdown file makes (GitHub's slugs);
  - a metric name of prewarm/service/metric_names.h is not in docs/;
  - a long flag of `prewarm --help` (or of `prewarm COMMAND --help`) is not in docs/.
Before that it checks itself on a small tree with one fault of each kind, so a checker that
stopped finding them fails too.

usage: docs_test.py SOURCE_DIR PREWARM_BINARY
"""

import os
import re
import subprocess
import sys
import tempfile

LINK = re.compile(r"\[(?:[^\]\\]|\\.)*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE_CODE = re.compile(r"(`+)(?:.*?)\1")
METRIC = re.compile(r'inline constexpr char k\w+\[\]\s*=\s*"([a-z_:][a-z0-9_:]*)"')
FLAG_LINE = re.compile(r"^\s+(--[a-z][a-z0-9-]*)")
USAGE_LINE = re.compile(r"^\s*(?:usage:\s*)?prewarm\b")
LONG_OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")
COMMAND_LINE = re.compile(r"^  ([a-z][a-z-]*)\s{2,}\S")


def prose_lines(text):
    """(line number, line) of the lines outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = text.lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    seen = {}
    out = set()
    with open(path, encoding="utf-8") as f:
        for _, line in prose_lines(f.read()):
            m = HEADING.match(line)
            if not m:
                continue
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def markdown_files(root):
    files = [os.path.join(root, "README.md")]
    docs = os.path.join(root, "docs")
    if os.path.isdir(docs):
        files += sorted(
            os.path.join(docs, n) for n in os.listdir(docs) if n.endswith(".md"))
    return [f for f in files if os.path.isfile(f)]


def link_problems(root):
    problems = []
    cache = {}
    for path in markdown_files(root):
        rel = os.path.relpath(path, root)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for number, line in prose_lines(text):
            for m in LINK.finditer(INLINE_CODE.sub("", line)):
                target = m.group(1)
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                    continue
                file_part, _, anchor = target.partition("#")
                dest = (os.path.normpath(os.path.join(os.path.dirname(path), file_part))
                        if file_part else path)
                where = f"{rel}:{number}: link {target}"
                if not os.path.realpath(dest).startswith(os.path.realpath(root) + os.sep):
                    problems.append(f"{where}: points outside the repository")
                    continue
                if not os.path.exists(dest):
                    problems.append(f"{where}: {os.path.relpath(dest, root)} does not exist")
                    continue
                if not anchor:
                    continue
                if not dest.endswith(".md"):
                    problems.append(f"{where}: an anchor into a file that is not Markdown")
                    continue
                if dest not in cache:
                    cache[dest] = anchors(dest)
                if anchor not in cache[dest]:
                    problems.append(
                        f"{where}: no heading of {os.path.relpath(dest, root)} makes #{anchor}")
    return problems


def docs_text(root):
    parts = []
    docs = os.path.join(root, "docs")
    for name in sorted(os.listdir(docs)) if os.path.isdir(docs) else []:
        if name.endswith(".md"):
            with open(os.path.join(docs, name), encoding="utf-8") as f:
                parts.append(f.read())
    return "\n".join(parts)


def metric_names(root):
    with open(os.path.join(root, "prewarm/service/metric_names.h"), encoding="utf-8") as f:
        names = METRIC.findall(f.read())
    if not names:
        raise SystemExit("docs_test: no metric names found in prewarm/service/metric_names.h")
    return names


def run_help(binary, *args):
    p = subprocess.run([binary, *args, "--help"], capture_output=True, text=True, timeout=60)
    return p.stdout + p.stderr


def binary_flags(binary):
    """Every long flag the binary's help pages define (a line that starts with the flag), and the
    long options of its usage lines (`prewarm --version`)."""
    top = run_help(binary)
    pages = [top]
    in_commands = False
    for line in top.splitlines():
        if line.strip().lower().startswith("commands"):
            in_commands = True
            continue
        if in_commands and not line.strip():
            break
        m = COMMAND_LINE.match(line) if in_commands else None
        if m:
            pages.append(run_help(binary, m.group(1)))
    flags = set()
    for page in pages:
        for line in page.splitlines():
            m = FLAG_LINE.match(line)
            if m:
                flags.add(m.group(1))
            elif USAGE_LINE.match(line):
                flags.update(o for o in LONG_OPTION.findall(line.split("#")[0]))
    if len(pages) < 2 or not flags:
        raise SystemExit(f"docs_test: `{binary} --help` lists no commands or no flags:\n{top}")
    return sorted(flags)


def missing_words(words, text):
    """The words that do not occur in text as whole words (--arch is not --arch-list)."""
    return [w for w in words if not re.search(r"(?<![\w-])" + re.escape(w) + r"(?![\w-])", text)]


def self_test():
    """The checker finds one fault of each kind in a small tree, and only those."""
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "docs"))
        with open(os.path.join(root, "README.md"), "w") as f:
            f.write("# Top\n\n[ok](docs/a.md#the-a-section) [ok](#top) `[code](nowhere.md)`\n"
                    "[missing](docs/nope.md) [bad anchor](docs/a.md#no-such-heading)\n"
                    "```\n[fenced](nowhere.md)\n```\n")
        with open(os.path.join(root, "docs", "a.md"), "w") as f:
            f.write("# A\n\n## The `a` section\n\n[back](../README.md#top) prewarm_one --one\n")
        problems = link_problems(root)
        expected = ["docs/nope.md does not exist", "makes #no-such-heading"]
        if len(problems) != 2 or not all(any(e in p for p in problems) for e in expected):
            raise SystemExit(f"docs_test: self-test: link check found {problems}")
        text = docs_text(root)
        if missing_words(["prewarm_one", "--one"], text) or \
                missing_words(["prewarm_two", "--on"], text) != ["prewarm_two", "--on"]:
            raise SystemExit("docs_test: self-test: the word check is wrong")


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    root, binary = sys.argv[1], sys.argv[2]
    self_test()
    problems = link_problems(root)
    text = docs_text(root)
    for name in missing_words(metric_names(root), text):
        problems.append(f"metric {name} (prewarm/service/metric_names.h) is not in docs/")
    for flag in missing_words(binary_flags(binary), text):
        problems.append(f"flag {flag} (prewarm --help) is not in docs/ "
                        "(scripts/gen-cli-doc regenerates docs/cli.md's reference)")
    for p in problems:
        print(p)
    if problems:
        print(f"docs_test: {len(problems)} problems")
        return 1
    print(f"docs_test: links of {len(markdown_files(root))} files, "
          f"{len(metric_names(root))} metrics and the flags all check")
    return 0


if __name__ == "__main__":
    sys.exit(main())
