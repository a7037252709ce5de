#!/usr/bin/python3
"""Fit the polynomial behind microattn's erfc (src/blocks_math.hpp, used by the exact GELU):
erfc(a) = t·exp(P(t) − a²), t = 1/(1 + a/2), a in [0, A], with P a polynomial in u = k1·t + k0 (t's range mapped
onto [−1, 1]), minimax in absolute error of P (= relative error of erfc) by Remez exchange. mpmath only.
Prints float32 coefficients c0..cN (Horner from cN), k1, k0, and the error of the float evaluation without FMA.
Usage: scripts/fit_erfc_poly.py [degree] [A]"""
import struct
import sys

import mpmath as mp

mp.mp.dps = 40
deg = int(sys.argv[1]) if len(sys.argv) > 1 else 9
amax = mp.mpf(sys.argv[2]) if len(sys.argv) > 2 else mp.mpf("10.25")
tmin = 1 / (1 + amax / 2)
k1 = 2 / (1 - tmin)
k0 = -(1 + tmin) / (1 - tmin)


def f32(v):
    return struct.unpack("f", struct.pack("f", float(v)))[0]


def p_of_t(t):  # P(t) = ln(erfc(a)/t) + a², a = 2/t − 2
    a = 2 * (1 / t - 1)
    return mp.log(mp.erfc(a) / t) + a * a


def p_of_u(x):
    return p_of_t((x - k0) / k1)


n = deg + 2
xs = [mp.cos(mp.pi * (n - 1 - i) / (n - 1)) for i in range(n)]
grid = [-1 + 2 * mp.mpf(i) / 4000 for i in range(4001)]
want = [p_of_u(x) for x in grid]
for _ in range(30):
    A = mp.matrix(n, n)
    b = mp.matrix(n, 1)
    for r, x in enumerate(xs):
        for i in range(deg + 1):
            A[r, i] = x ** i
        A[r, deg + 1] = (-1) ** r
        b[r] = p_of_u(x)
    sol = mp.lu_solve(A, b)
    c = [sol[i] for i in range(deg + 1)]
    err = [mp.polyval(c[::-1], x) - w for x, w in zip(grid, want)]
    runs, cur = [], [0]
    for i in range(1, len(err)):
        if (err[i] >= 0) == (err[i - 1] >= 0):
            cur.append(i)
        else:
            runs.append(cur)
            cur = [i]
    runs.append(cur)
    ext = [max(r, key=lambda i: abs(err[i])) for r in runs]
    if len(ext) != n:
        ext = sorted(sorted(ext, key=lambda i: -abs(err[i]))[:n])
    xs = [grid[i] for i in ext]
cf = [f32(v) for v in c]
err32 = max(abs(mp.polyval([mp.mpf(v) for v in cf[::-1]], x) - w) for x, w in zip(grid, want))
print(f"degree {deg} on a in [0, {amax}]: levelled {mp.nstr(abs(sol[deg + 1]), 3)}, float coefficients "
      f"{float(err32 / mp.mpf(2) ** -24):.3f}·2^-24")
print("c0..cN:", ", ".join("%.9e" % v for v in cf))
print("k1, k0: %.9e %.9e" % (f32(k1), f32(k0)))
worst = 0
for i in range(20001):  # float32 evaluation as blocks_math.hpp does it, each operation rounded (no FMA)
    a = f32(amax * i / 20000)
    t = f32(1 / f32(1 + f32(a * 0.5)))
    u = f32(f32(t * f32(k1)) + f32(k0))
    p = cf[-1]
    for cc in cf[-2::-1]:
        p = f32(f32(p * u) + cc)
    worst = max(worst, abs(p - p_of_t(mp.mpf(t))))
print(f"float evaluation (no FMA): {float(worst / mp.mpf(2) ** -24):.3f}·2^-24 absolute in P")
