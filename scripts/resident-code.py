#!/usr/bin/env python3
"""Where the resident pages of a running program's own binary lie, by crate: each page of
the binary mapped in memory now (/proc/PID/pagemap, root only) is shared among the symbols
it holds (`nm -C -S`), and their bytes are summed by the first path segment of the
symbol's name (`core`, `tokio`, `condense`...). Used by scripts/idle-memory.sh to say what
code start-up ran through (BENCHMARKS.md, memory of the idle main node).

Usage: scripts/resident-code.py PID BINARY [TOP]
"""
import bisect
import collections
import re
import struct
import subprocess
import sys

PAGE = 4096


def loads(binary):
    """The binary's LOAD segments: (file offset, address, size in the file)."""
    out = subprocess.run(["readelf", "-lW", binary], capture_output=True, text=True, check=True).stdout
    segments = []
    for line in out.splitlines():
        f = line.split()
        if f and f[0] == "LOAD":
            offset, vaddr, _, filesz = (int(x, 16) for x in f[1:5])
            segments.append((offset, vaddr, filesz))
    return segments


def resident(pid, binary, segments):
    """The ELF addresses of the binary's pages present in memory now, and bytes by mapping mode."""
    pages, modes = [], collections.Counter()
    with open(f"/proc/{pid}/pagemap", "rb") as pagemap, open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            f = line.split()
            if len(f) < 6 or f[5] != binary:
                continue
            start, end = (int(x, 16) for x in f[0].split("-"))
            offset = int(f[2], 16)
            for addr in range(start, end, PAGE):
                pagemap.seek(addr // PAGE * 8)
                if not struct.unpack("<Q", pagemap.read(8))[0] >> 63 & 1:
                    continue
                modes[f[1]] += PAGE
                file_offset = addr - start + offset
                for seg_offset, vaddr, size in segments:
                    if seg_offset <= file_offset < seg_offset + size:
                        pages.append(vaddr + file_offset - seg_offset)
                        break
    return pages, modes


def crate(name):
    name = re.sub(r"^<", "", name)
    name = re.sub(r"^(impl |dyn )", "", name)
    m = re.match(r"[A-Za-z_][A-Za-z0-9_]*", name)
    return m.group(0) if m else "?"


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    pid, binary = int(sys.argv[1]), sys.argv[2]
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 25
    symbols = []
    out = subprocess.run(["nm", "-C", "-S", "--defined-only", binary], capture_output=True, text=True).stdout
    for line in out.splitlines():
        m = re.match(r"([0-9a-f]+) ([0-9a-f]+) \w (.*)", line)
        if m:
            symbols.append((int(m.group(1), 16), int(m.group(2), 16), m.group(3)))
    symbols.sort()
    starts = [s[0] for s in symbols]
    pages, modes = resident(pid, binary, loads(binary))
    by_crate = collections.Counter()
    for page in pages:
        shares = collections.Counter()
        i = bisect.bisect_right(starts, page + PAGE) - 1
        # Symbols that start before the page's end, walked back while they may reach into it.
        while i >= 0 and page - symbols[i][0] < (4 << 20):
            start, size, name = symbols[i]
            overlap = min(start + size, page + PAGE) - max(start, page)
            if overlap > 0:
                shares[crate(name)] += overlap
            i -= 1
        total = sum(shares.values())
        if total == 0:
            by_crate["(no symbol)"] += PAGE
        for name, part in shares.items():
            by_crate[name] += PAGE * part / total
    print("resident pages of", binary, "by mapping:", ", ".join(f"{m} {b / 1024:.0f} kB" for m, b in modes.items()))
    for name, size in by_crate.most_common(top):
        print(f"{size / 1024:9.0f} kB  {name}")


if __name__ == "__main__":
    main()
