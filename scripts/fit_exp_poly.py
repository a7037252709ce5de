#!/usr/bin/python3
"""Fit the polynomials behind microattn's exp: p(r) ~ e^r on [-ln2/2, ln2/2] (or, with --base2,
p(r) ~ 2^r on [-1/2, 1/2]), minimax in relative error (Remez exchange, numpy only). Prints float32
coefficients c0..cN for src/kernels/exp/constants.hpp.
Usage: scripts/fit_exp_poly.py [degree] [--base2]"""
import sys
import numpy as np

args = [a for a in sys.argv[1:] if not a.startswith("--")]
deg = int(args[0]) if args else 5
base2 = "--base2" in sys.argv
h = 0.5 if base2 else np.log(2.0) / 2
k = np.log(2.0) if base2 else 1.0  # target e^(k·r)
# unknowns: c0..c_deg and the levelled error E; p(r) = sum c_i r^i; relative error (p - e^r)/e^r
n = deg + 2  # equations (alternation points)
xs = h * np.cos(np.pi * np.arange(n)[::-1] / (n - 1))  # initial Chebyshev extrema
grid = np.linspace(-h, h, 200001)
for it in range(50):
    A = np.zeros((n, n))
    b = np.zeros(n)
    for row, x in enumerate(xs):
        A[row, :deg + 1] = [x ** i for i in range(deg + 1)]
        A[row, deg + 1] = -((-1) ** row) * np.exp(k * x)
        b[row] = np.exp(k * x)
    sol = np.linalg.solve(A, b)
    c, E = sol[:deg + 1], sol[deg + 1]
    err = (sum(c[i] * grid ** i for i in range(deg + 1)) - np.exp(k * grid)) / np.exp(k * grid)
    # new alternation points: extrema of err in each sign-run
    sign = np.sign(err)
    runs = np.split(np.arange(grid.size), np.where(np.diff(sign) != 0)[0] + 1)
    ext = [r[np.argmax(np.abs(err[r]))] for r in runs]
    if len(ext) != n:
        ext = sorted(ext, key=lambda i: -abs(err[i]))[:n]
        ext.sort()
    xs = grid[ext]
cf = np.float32(c)
err32 = (sum(np.float64(cf[i]) * grid ** i for i in range(deg + 1)) - np.exp(k * grid)) / np.exp(k * grid)
print(f"degree {deg}: levelled rel error {abs(E):.3e}, with float32 coefficients {np.max(np.abs(err32)):.3e}"
      f" ({np.max(np.abs(err32)) / 2**-24:.3f} half-ULP units)")
for i, v in enumerate(cf):
    print(f"  c{i} = {float(v):.9e}f  // 0x{np.float32(v).view(np.uint32):08x}")
