#!/usr/bin/env python3
"""Fails when files under src/ import each other in a circle (run by `make lint`).

Builds the graph of files from the paths the code names (`use crate::a::b`, `crate::a::b::f()`,
`super::x`, `self::x`), each path resolved to the deepest file that defines that module, and
prints every strongly connected group of more than one file. Test modules (`#[cfg(test)]`)
are left out: a test may reach anywhere. A module's `mod.rs` is its own node, so a parent that
re-exports from a child and a child that uses the parent's items form a circle too.
See docs/ARCHITECTURE.md, "Layers".
"""
import os
import re
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else "src"

# module path (tuple of names, crate root = ()) -> file
modules = {}
for dirpath, _dirs, files in os.walk(ROOT):
    for f in files:
        if not f.endswith(".rs"):
            continue
        path = os.path.join(dirpath, f)
        rel = os.path.relpath(path, ROOT)
        parts = rel[:-3].split(os.sep)
        if parts[0] == "bin":
            continue  # binaries are leaves: nothing imports them
        if parts[-1] in ("mod", "lib"):
            parts = parts[:-1]
        elif parts == ["main"]:
            continue
        modules[tuple(parts)] = path

TEST_START = re.compile(r"^\s*#\[cfg\(test\)\]\s*$")
PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
USE_GROUP = re.compile(r"\buse\s+(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{([^;]*)\}", re.S)


def strip(text):
    """The file without comments, string literals and its test modules."""
    out = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if TEST_START.match(line):
            # Skip the item the attribute applies to: up to its matching closing brace, or
            # the end of a one-line item.
            depth = 0
            seen = False
            i += 1
            while i < len(lines):
                depth += lines[i].count("{") - lines[i].count("}")
                seen = seen or "{" in lines[i]
                if (seen and depth <= 0) or (not seen and lines[i].rstrip().endswith(";")):
                    break
                i += 1
            i += 1
            continue
        out.append(line)
        i += 1
    text = "\n".join(out)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'r#*"(?:.|\n)*?"#*', '""', text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    return text


def expand_groups(text):
    """`use crate::a::{b, c::d}` -> paths crate::a::b and crate::a::c::d (one level of braces
    is enough for what the tree writes)."""
    paths = []
    for m in USE_GROUP.finditer(text):
        head = m.group(1) + m.group(2)
        for item in re.split(r",", m.group(3)):
            item = item.strip().split(" as ")[0].strip()
            item = re.sub(r"::\{.*", "", item)
            if item and item != "self" and re.match(r"^[A-Za-z_][A-Za-z0-9_:]*$", item):
                paths.append(head + "::" + item)
    return paths


ALIAS = re.compile(r"\buse\s+((?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)+)(?:\s+as\s+([A-Za-z_][A-Za-z0-9_]*))?\s*;")


def full_module(base, path):
    """The module `path` names when every segment of it is a module, else None."""
    target = resolve(base, path)
    if target is None:
        return None
    segs = path.split("::")
    return target if segs[-1] in ("self", "super", "crate") or target[-1:] == (segs[-1],) else None


def aliased(base, text):
    """Paths through a module brought in by name (`use crate::http;` then `http::jobs::list`)."""
    found = []
    for m in ALIAS.finditer(text):
        target = full_module(base, m.group(1))
        if target is None:
            continue
        alias = m.group(2) or m.group(1).split("::")[-1]
        for p in re.finditer(r"(?<![:\w])" + re.escape(alias) + r"((?:::[A-Za-z_][A-Za-z0-9_]*)+)", text):
            found.append(("crate::" + "::".join(target) if target else "crate") + p.group(1))
    return found


def resolve(base, path):
    """The file module named by `path` written in module `base`."""
    segs = path.split("::")
    if segs[0] == "crate":
        cur = ()
        segs = segs[1:]
    else:
        cur = base
        while segs and segs[0] in ("super", "self"):
            if segs[0] == "super":
                cur = cur[:-1]
            segs = segs[1:]
    best = cur if cur in modules else None
    for s in segs:
        cur = cur + (s,)
        if cur in modules:
            best = cur
        else:
            break
    return best


edges = {m: set() for m in modules}
for mod, path in modules.items():
    with open(path, encoding="utf-8") as fh:
        text = strip(fh.read())
    # A file's module path for `super`: a mod.rs is its folder's module, so `super` from it
    # is the folder above; for a plain file it is its folder.
    found = [m.group(1) + m.group(2) for m in PATH.finditer(text)] + expand_groups(text)
    found += aliased(mod, text)
    # Paths through a child module written without `self::` (`auth::login` in http/mod.rs).
    for child in {m[-1] for m in modules if m[:-1] == mod and len(m) == len(mod) + 1}:
        for p in re.finditer(r"(?<![:\w])" + re.escape(child) + r"((?:::[A-Za-z_][A-Za-z0-9_]*)+)", text):
            found.append("self::" + child + p.group(1))
    for p in found:
        target = resolve(mod, p)
        if target is not None and target != mod:
            # A parent's `mod child;` is a declaration, not a use; only paths count.
            edges[mod].add(target)

# Tarjan's strongly connected components.
index = {}
low = {}
stack = []
on = set()
groups = []
counter = [0]
sys.setrecursionlimit(10000)


def visit(v):
    index[v] = low[v] = counter[0]
    counter[0] += 1
    stack.append(v)
    on.add(v)
    for w in edges[v]:
        if w not in index:
            visit(w)
            low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        group = []
        while True:
            w = stack.pop()
            on.discard(w)
            group.append(w)
            if w == v:
                break
        if len(group) > 1:
            groups.append(group)


for v in sorted(modules):
    if v not in index:
        visit(v)


def name(m):
    return modules[m]


if groups:
    print(f"module-cycles: {len(groups)} circle(s) between files under {ROOT}/:")
    for g in groups:
        members = set(g)
        print("  " + ", ".join(sorted(name(m) for m in g)))
        for m in sorted(g):
            inner = sorted(name(t) for t in edges[m] if t in members)
            print(f"    {name(m)} -> {', '.join(inner)}")
    sys.exit(1)
print(f"module-cycles: {len(modules)} files, no circle")
