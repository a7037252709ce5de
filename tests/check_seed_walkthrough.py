#!/usr/bin/python3
"""Runs examples/seed_walkthrough and checks every number it prints against an independent computation in
Python doubles (the tutorial's math, written out; no numpy needed). On cross builds the program runs through
the cross file's exe_wrapper, which Meson passes in MESON_EXE_WRAPPER.
Usage: check_seed_walkthrough.py PROGRAM"""
import math
import os
import shlex
import subprocess
import sys

X = [[0.1, 0.5], [0.3, 0.4], [0.8, 0.0]]
TUTORIAL_SIMILARITY = [[0.26, 0.23, 0.08], [0.23, 0.25, 0.24], [0.08, 0.24, 0.64]]


def matmul_t(a, b):
    return [[sum(x * y for x, y in zip(ra, rb)) for rb in b] for ra in a]


def softmax(row):
    m = max(row)
    e = [math.exp(v - m) for v in row]
    s = sum(e)
    return [v / s for v in e]


def parse(text):
    blocks, key = {}, None
    for line in text.splitlines():
        if ":" in line and not line.startswith(" "):
            key = line.split(":")[0]
            blocks[key] = []
        elif line.strip() and key is not None:
            blocks[key].append([float(v) for v in line.split()])
    return blocks


def main():
    cmd = shlex.split(os.environ.get("MESON_EXE_WRAPPER", "")) + [sys.argv[1]]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    got = parse(out)
    sim = matmul_t(X, X)
    scaled = [softmax([v / math.sqrt(2.0) for v in row]) for row in sim]
    y = [[sum(scaled[i][j] * X[j][c] for j in range(3)) for c in range(2)] for i in range(3)]
    expected = {
        "x": X,
        "similarity": sim,
        "softmax": [softmax(row) for row in sim],
        "scaled_softmax": scaled,
        "output": y,
        "layer_output": y,
    }
    failures = 0
    for i in range(3):  # the tutorial's own (2-decimal) numbers
        for j in range(3):
            if abs(sim[i][j] - TUTORIAL_SIMILARITY[i][j]) > 1e-12:
                failures += 1
    for key, want in expected.items():
        if key not in got:
            print(f"missing block '{key}' in the output")
            failures += 1
            continue
        for r, (gr, wr) in enumerate(zip(got[key], want)):
            for c, (g, w) in enumerate(zip(gr, wr)):
                # printed with 6 decimals (±5e-7) from float results (a few 1e-8 here)
                if abs(g - w) > 1.5e-6:
                    print(f"{key}[{r}][{c}] = {g}, expected {w:.9f}")
                    failures += 1
        if len(got[key]) != len(want) or any(len(gr) != len(wr) for gr, wr in zip(got[key], want)):
            print(f"block '{key}' has the wrong shape")
            failures += 1
    print(out)
    print("seed walkthrough:", "OK" if failures == 0 else f"{failures} mismatches")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
