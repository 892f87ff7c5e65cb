#!/usr/bin/env python3
"""The file map of docs/ARCHITECTURE.md: every Rust file of the two crates (src/ and
media/src/) with the first sentence of its opening `//!` comment, between the markers
`<!-- file-map:start -->` and `<!-- file-map:end -->`.

  scripts/file-map.py          rewrites the map in place
  scripts/file-map.py --check  fails when the map does not match the tree (run by `make lint`)
"""
import os
import re
import sys

DOC = "docs/ARCHITECTURE.md"
ROOTS = ("src", "media/src")
START, END = "<!-- file-map:start -->", "<!-- file-map:end -->"


def summary(path):
    lines = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.startswith("//!"):
                break
            lines.append(line[3:].strip())
    text = " ".join(l for l in lines if l)
    if not text:
        return None
    # The first sentence: up to a full stop followed by a space or the end (not one inside
    # a path or a number such as `a.rs` or 1.5).
    m = re.match(r"(.+?\.)(\s|$)", text)
    return (m.group(1) if m else text).rstrip(".").replace("|", "\\|")


def entries():
    rows, missing = [], []
    for root in ROOTS:
        for dirpath, dirs, files in os.walk(root):
            dirs.sort()
            for name in sorted(files):
                if not name.endswith(".rs"):
                    continue
                path = os.path.join(dirpath, name)
                text = summary(path)
                if text is None:
                    missing.append(path)
                rows.append(f"| `{path}` | {text or ''} |")
    return rows, missing


def render():
    rows, missing = entries()
    body = "\n".join(["| file | what it is |", "|---|---|", *rows])
    return f"{START}\n{body}\n{END}", missing


def main():
    block, missing = render()
    if missing:
        print("file-map: these files open without a //! comment saying what they are:", *missing, sep="\n  ")
        sys.exit(1)
    with open(DOC, encoding="utf-8") as f:
        doc = f.read()
    if START not in doc or END not in doc:
        print(f"file-map: {DOC} has no {START} ... {END} block")
        sys.exit(1)
    current = doc[doc.index(START) : doc.index(END) + len(END)]
    if "--check" in sys.argv:
        if current != block:
            print(f"file-map: {DOC}'s file map does not match the tree; run scripts/file-map.py")
            sys.exit(1)
        print(f"file-map: {block.count(chr(10)) - 3} files, map up to date")
        return
    with open(DOC, "w", encoding="utf-8") as f:
        f.write(doc.replace(current, block))


main()
