#!/usr/bin/env python3
"""Checks that every relative link in the given Markdown files (by default the front pages and
docs/*.md) names a file or folder in the repository, and that a #fragment names a heading of
the linked Markdown file (GitHub's anchors). Run from the repository root:
python3 docs/check_links.py [FILE.md ...]"""
import glob, os, re, sys

def slug(heading):
    h = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return h.replace(" ", "-")

def anchors(path):
    out, fence = set(), False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            fence = not fence
        elif not fence and line.startswith("#"):
            out.add(slug(line.lstrip("#")))
    return out

FILES = ["README.md", "ARCHITECTURE.md", "SERVER.md", "BENCHMARKS.md", "LOADTEST.md",
         "fuzz/README.md", *glob.glob("clients/*/README.md"), *sorted(glob.glob("docs/*.md"))]

bad = 0
for md in sys.argv[1:] or FILES:
    text, fence, lines = open(md, encoding="utf-8").read(), False, []
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence:
            lines.append(line)
    body = "\n".join(lines)
    for target in re.findall(r"\]\(([^)\s]+)\)", body):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, frag = target.partition("#")
        full = os.path.normpath(os.path.join(os.path.dirname(md), path)) if path else md
        if not os.path.exists(full):
            print(f"{md}: {target}: no such file"); bad += 1
        elif frag and full.endswith(".md") and frag not in anchors(full):
            print(f"{md}: {target}: no such heading"); bad += 1
print(f"{bad} broken link(s)")
sys.exit(1 if bad else 0)
