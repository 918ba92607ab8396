#!/usr/bin/env python3
"""What a function's time is made of, from a `perf record --call-graph dwarf` profile.

    Benchmarks/perf-below.py PERF_DATA PATTERN [DEPTH]

For the samples whose call stack has a frame matching PATTERN (a Python regular expression
over the demangled, simplified names), prints their share of all samples, then the inclusive
share of each frame 1..DEPTH (default 3) levels below the outermost match. `perf report
--children` gives a function's inclusive share but not what it splits into along one path;
this is that split, e.g. how much of `BatchWriter.drain` is the commit:

    Benchmarks/perf-below.py perf.data '^BatchWriter.drain' 9

Needs `perf` and `swift demangle` on PATH.
"""
import collections
import re
import subprocess
import sys


def stacks(path):
    text = subprocess.run(f"perf script -i '{path}' -F ip,sym 2>/dev/null | swift demangle --simplified",
                          shell=True, capture_output=True, text=True, check=True).stdout
    current = []
    for line in text.split("\n"):
        if not line.strip():
            if current:
                yield current
            current = []
            continue
        parts = line.strip().split(None, 1)
        current.append(parts[1] if len(parts) > 1 else parts[0])
    if current:
        yield current


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    path, pattern = sys.argv[1], re.compile(sys.argv[2])
    depth = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    total = hits = 0
    below = collections.Counter()
    for stack in stacks(path):  # leaf first
        total += 1
        matches = [i for i, frame in enumerate(stack) if pattern.search(frame)]
        if not matches:
            continue
        hits += 1
        outermost = max(matches)
        for level in range(1, depth + 1):
            if outermost - level >= 0:
                below[(level, stack[outermost - level][:140])] += 1
    if total == 0:
        sys.exit("no samples")
    print(f"{hits}/{total} samples = {100 * hits / total:.1f}%")
    for (level, frame), count in sorted(below.items(), key=lambda item: -item[1])[:40]:
        if count * 100 / total >= 0.3:
            print(f"{100 * count / total:6.2f}%  {'  ' * (level - 1)}{frame}")


if __name__ == "__main__":
    main()
