#!/usr/bin/python3
"""Writes the seed corpus of the libFuzzer targets: tests/fuzz/corpus/<target>/<name>, one small file per named
scenario (valid calls at tile edges, strides, misalignment, in place, every bad-argument class, special values).

Each encoder below writes the bytes in the order the target's decoder reads them (see the comment at the top of
tests/fuzz/fuzz_<target>.cpp); a byte the decoder reads past the end is 0. Rerun after changing a decoder:
    scripts/make_fuzz_corpus.py            (rewrites tests/fuzz/corpus/)
"""
import os
import shutil
import struct
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")

EDGES = [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 70]
BIG_EDGES = [127, 128, 129, 255, 256, 257]
PADS = [0, 0, 0, 0, 1, 2, 3, 5, 8, 16]

# Argument mutations (fuzz_support.cpp, mutate): kind numbers.
NULL, ROWS0, COLS0, ROWS_PLUS, ROWS_MINUS, COLS_PLUS, COLS_MINUS, STRIDE_LT_COLS, HUGE_ROWS, HUGE_COLS, MAX_ROWS, \
    HUGE_STRIDE, HEAD_TOO_LARGE = range(13)
# Special values (fuzz_support.cpp, special_value) and where they go.
NAN, PINF, NINF, BIG, NBIG, FMAX, NFMAX, SUBNORMAL, NZERO, ZERO, TEN4, NTEN4 = range(12)
CELL, ROW, COL = 0, 1, 2


def dim(v):
    if v in EDGES:
        return EDGES.index(v)
    if v in BIG_EDGES:
        return 248 + BIG_EDGES.index(v)
    if v == 0:
        return 254
    assert 1 <= v <= 70, v
    return 128 + v - 1


def pad(p):
    return PADS.index(p)


def count_byte(n, first):
    """The byte whose count (0, or 1 + b % 3 for b >= first) is n."""
    if n == 0:
        return 0
    b = first
    while 1 + b % 3 != n:
        b += 1
    return b


def mutations(*muts):
    """muts: (target index, kind) pairs."""
    out = [count_byte(len(muts), 176)]
    for target, kind in muts:
        out += [target, kind]
    return out


def specials(*sp):
    """sp: (target index, row, col, value kind, where) tuples."""
    out = [count_byte(len(sp), 160)]
    for target, row, col, kind, where in sp:
        out += [target, row, col, kind | (where << 4)]
    return out


def seed(s):
    return list(struct.pack("<I", s))


def int8(v):
    return v & 0xFF


# ---- matmul -------------------------------------------------------------------------------------------------------
def matmul(m, k, n, tb=False, scalar=False, pads=(0, 0, 0), gaps=(0, 0, 0), c_mode=0, delta=0, over_b=False,
           muts=(), va=(0, 0), vb=(0, 0), sp=(), s=1):
    b = seed(s) + [dim(m), dim(k), dim(n), (1 if tb else 0) | (2 if scalar else 0)]
    for p, g in zip(pads, gaps):
        b += [pad(p), g]
    b += [c_mode, int8(delta), 1 if over_b else 0]
    b += mutations(*muts)
    b += list(va) + list(vb)  # (style, range index): ranges 1, 1, 1, 0.5, 10, 1e4, 1e-20
    b += specials(*sp)
    return bytes(b)


MATMUL = {
    "valid-1x1x1": matmul(1, 1, 1),
    "valid-7x33x65": matmul(7, 33, 65, s=2),
    "valid-transposed-16x64x32-scalar-too": matmul(16, 64, 32, tb=True, scalar=True, s=3),
    "valid-strided-misaligned-9x17x15": matmul(9, 17, 15, pads=(3, 5, 1), gaps=(1, 3, 2), scalar=True, s=4),
    "valid-block-edges-5x257x129-transposed": matmul(5, 257, 129, tb=True, scalar=True, s=5),
    "valid-block-edges-3x256x128": matmul(3, 256, 128, s=6),
    "valid-c-interleaved-with-a": matmul(4, 4, 4, pads=(16, 0, 0), gaps=(0, 5, 0), c_mode=3, s=7),
    "valid-ties-and-spread-values": matmul(6, 31, 17, va=(1, 4), vb=(3, 5), s=8),
    "valid-subnormal-products": matmul(8, 9, 8, va=(0, 6), vb=(0, 6), s=9),
    "valid-nan-inf-huge-in-a-and-b": matmul(7, 8, 9, sp=((0, 2, 3, NAN, CELL), (1, 0, 4, PINF, COL),
                                                         (0, 5, 1, BIG, CELL)), s=10),
    "alias-c-is-a": matmul(8, 8, 8, c_mode=1, s=11),
    "alias-c-shifted-into-b": matmul(5, 6, 6, c_mode=2, delta=3, over_b=True, s=12),
    "alias-c-other-stride-spans-meet": matmul(4, 4, 4, pads=(8, 0, 0), c_mode=4, delta=4, s=13),
    "null-a": matmul(3, 3, 3, muts=((0, NULL),)),
    "null-c": matmul(3, 3, 3, muts=((2, NULL),)),
    "zero-k": matmul(3, 4, 5, muts=((0, COLS0),)),
    "mismatched-inner-dimension": matmul(3, 4, 5, muts=((1, ROWS_PLUS),)),
    "stride-smaller-than-cols": matmul(3, 4, 5, muts=((2, STRIDE_LT_COLS),)),
    "extent-overflows": matmul(3, 4, 5, muts=((2, HUGE_ROWS), (0, MAX_ROWS))),
}


# ---- softmax_rows / exp_elements ----------------------------------------------------------------------------------
def softmax(rows, cols, scalar=False, p=0, gap=0, muts=(), values=(0, 0), sp=(), s=1):
    b = seed(s) + [2 if scalar else 0, dim(rows), dim(cols), pad(p), gap]
    b += mutations(*muts) + list(values) + specials(*sp)  # ranges 1, 1, 10, 100, 1e4, 1e30, 1e-20
    return bytes(b)


def exp(n, scalar=False, gaps=(0, 0), mode=0, delta=0, mutation=0, style=0, rng=0, sp=(), s=1):
    b = seed(s) + [1 | (2 if scalar else 0), dim(n), gaps[0], gaps[1], mode, int8(delta), mutation, style, rng]
    return bytes(b + specials(*sp))  # styles 0-3 fill, 4 raw bits, 5 range edges; ranges 1, 10, 88.7, 104, 120, 200


SOFTMAX = {
    "softmax-valid-3x17": softmax(3, 17),
    "softmax-wide-strided-2x257-scalar-too": softmax(2, 257, scalar=True, p=5, gap=3, s=2),
    "softmax-valid-65x64-spread-1e4": softmax(65, 64, values=(0, 4), s=3),
    "softmax-huge-range-1e30": softmax(4, 33, values=(0, 5), s=4),
    "softmax-special-rows": softmax(6, 9, sp=((0, 1, 0, NAN, CELL), (0, 2, 0, NINF, ROW), (0, 4, 3, PINF, CELL)),
                                    s=5),
    "softmax-neg-inf-column-and-ties": softmax(5, 16, values=(1, 1), sp=((0, 0, 7, NINF, COL),), s=6),
    "softmax-null": softmax(3, 4, muts=((0, NULL),)),
    "softmax-zero-rows": softmax(3, 4, muts=((0, ROWS0),)),
    "softmax-stride-smaller-than-cols": softmax(3, 4, muts=((0, STRIDE_LT_COLS),)),
    "softmax-extent-overflows": softmax(3, 4, muts=((0, MAX_ROWS),)),
    "exp-valid-65": exp(65, rng=2, s=7),
    "exp-in-place-129-scalar-too": exp(129, scalar=True, mode=1, rng=4, s=8),
    "exp-raw-bit-patterns-257": exp(257, scalar=True, style=4, s=9),
    "exp-range-edges": exp(64, style=5, s=10),
    "exp-specials": exp(16, sp=((0, 0, 1, NAN, CELL), (0, 0, 2, NINF, CELL), (0, 0, 3, PINF, CELL)), s=11),
    "exp-partial-overlap": exp(33, mode=2, delta=1),
}
# exp mutation byte: >= 176, kind = byte % 6: 0 null x, 1 null y, 2 both null, 3 n = 0, 4 n = SIZE_MAX / 2, 5 SIZE_MAX
EXP_MUTATION = {k: next(b for b in range(176, 256) if b % 6 == k) for k in range(6)}
SOFTMAX["exp-null-y"] = exp(8, mutation=EXP_MUTATION[1])
SOFTMAX["exp-null-x"] = exp(8, mutation=EXP_MUTATION[0])
SOFTMAX["exp-n-zero-is-valid"] = exp(8, mutation=EXP_MUTATION[3])
SOFTMAX["exp-n-overflows"] = exp(8, mutation=EXP_MUTATION[5])


# ---- attention ----------------------------------------------------------------------------------------------------
SCALE = {"default": 0, "1": 1, "0.5": 2, "0.125": 3, "1e-3": 4, "4": 5, "16": 6, "-1": 7, "nan": 8, "inf": 9,
         "1e30": 10}
OFFSET = {"top-left": 0, "bottom-right": 1, "-n_q": 2, "n_kv": 3, "-n_q-1": 4, "n_kv+1": 5, "min": 6, "max": 7,
          "min+1": 8, "max-1": 9, "small": 10}
WS = {"exact": 0, "one-less": 3, "more": 4, "zero": 5, "size-max": 6, "half": 7}
Q, K, V, OUT, MASK = range(5)


ATTENTION_WINDOWS = [0, 1, 2, 5, 16, 33, 64, "huge"]  # fuzz_attention.cpp: flags bits 3–5


def attention(n_q, n_kv, d_k, d_v, causal=False, mask=False, scalar=False, scale="default", offset="top-left",
              small=0, pads=(0,) * 5, gaps=(0,) * 5, ws="exact", ws_extra=0, ws_gap=0, ws_null=False, out_mode=0,
              out_delta=0, out_over=Q, ws_place=0, ws_delta=0, ws_over=Q, muts=(), vq=(0, 0), vk=(0, 0), vv=(0, 0),
              mask_style=0, sp=(), s=1, window=0):
    b = seed(s) + [dim(n_q), dim(n_kv), dim(d_k), dim(d_v), (1 if causal else 0) | (2 if mask else 0) |
                   (4 if scalar else 0) | (ATTENTION_WINDOWS.index(window) << 3), SCALE[scale], OFFSET[offset],
                   int8(small)]
    for p, g in zip(pads, gaps):
        b += [pad(p), g]
    b += [WS[ws], ws_extra, ws_gap, 15 if ws_null else 0, out_mode, int8(out_delta), out_over, ws_place,
          int8(ws_delta), ws_over]
    b += mutations(*muts) + list(vq) + list(vk) + list(vv)  # ranges 1, 1, 1, 0.5, 4, 10, 100, 1e-20
    b += [mask_style]  # % 6: share of −inf 0, 0, 1/8, 1/2, 7/8, 1; / 6 % 4: range 1, 1, 10, 100; / 24 % 4: period
    return bytes(b + specials(*sp))


def mask_style(hide=0, rng=0, period=0):
    return hide + 6 * rng + 24 * period


ATTENTION = {
    "valid-1x1": attention(1, 1, 1, 1),
    "valid-window-causal-65x70-scalar-too": attention(65, 70, 16, 16, causal=True, offset="bottom-right", window=5,
                                                      scalar=True, s=40),
    "valid-window-local-33x65-mask": attention(33, 65, 8, 8, mask=True, mask_style=mask_style(hide=2), window=16,
                                               s=41),
    "valid-window-1-causal": attention(40, 40, 4, 4, causal=True, window=1, s=42),
    "valid-window-huge-offset-max": attention(9, 17, 4, 4, causal=True, offset="max", window="huge", s=43),
    "valid-dense-33x65-d16-scalar-too": attention(33, 65, 16, 16, scalar=True, s=2),
    "valid-causal-top-left-65x65-d8": attention(65, 65, 8, 8, causal=True, s=3),
    "valid-causal-bottom-right-5x70": attention(5, 70, 16, 16, causal=True, offset="bottom-right", s=4),
    "valid-causal-offset-min": attention(9, 17, 4, 4, causal=True, offset="min", s=5),
    "valid-causal-offset-max": attention(9, 17, 4, 4, causal=True, offset="max", s=6),
    "valid-causal-offset-hides-all-but-one": attention(32, 64, 8, 3, causal=True, offset="small", small=-31, s=7),
    "valid-mask-hidden-rows-31x17": attention(31, 17, 9, 5, mask=True, mask_style=mask_style(2, 1, 1), s=8),
    "valid-mask-and-causal-scalar-too": attention(33, 33, 4, 4, causal=True, mask=True, scalar=True,
                                                  mask_style=mask_style(3, 2, 2), s=9),
    "valid-cross-dv-ne-dk-scale": attention(4, 9, 3, 7, scale="0.125", s=10),
    "valid-scores-up-to-1e4": attention(16, 16, 64, 8, scale="1", vq=(0, 6), vk=(0, 6), s=11),
    "valid-strided-misaligned": attention(7, 15, 5, 9, pads=(3, 1, 2, 5, 0), gaps=(1, 2, 3, 1, 0), s=12),
    "valid-out-interleaved-with-q": attention(8, 8, 4, 4, pads=(8, 0, 0, 0, 0), gaps=(0, 5, 0, 0, 0), out_mode=3,
                                              out_over=Q, s=13),
    "valid-workspace-size-max": attention(3, 70, 70, 70, ws="size-max", s=14),
    "valid-workspace-more-adjacent-after-out": attention(5, 7, 3, 3, ws="more", ws_extra=9, ws_place=6, ws_over=OUT,
                                                         s=15),
    "alias-workspace-ending-at-out": attention(5, 7, 3, 3, ws_place=7, ws_over=OUT, s=16),
    "nan-in-k-row-causal": attention(40, 40, 8, 8, causal=True, sp=((K, 20, 0, NAN, ROW),), s=17),
    "nan-in-q-and-inf-in-mask": attention(10, 12, 4, 4, mask=True, sp=((Q, 3, 1, NAN, CELL),
                                                                       (MASK, 6, 2, PINF, CELL)), s=18),
    "nan-in-v-column-and-huge-k": attention(12, 20, 4, 6, sp=((V, 7, 2, NAN, CELL), (K, 3, 0, BIG, CELL)), s=19),
    "masked-out-nan-key": attention(20, 30, 8, 8, mask=True, mask_style=mask_style(3), sp=((K, 9, 2, NAN, ROW),), s=20),
    "scale-nan": attention(3, 4, 2, 2, scale="nan", s=21),
    # Issue 12 reproducers (finite extremes and non-finite V across key blocks; the oracle checks the rows it can)
    "issue12-mask-minus-fmax-row": attention(2, 3, 2, 1, mask=True, sp=((MASK, 0, 0, NFMAX, ROW),), s=40),
    "issue12-mask-plus-fmax-cell": attention(2, 3, 2, 1, mask=True, sp=((MASK, 1, 1, FMAX, CELL),), s=41),
    "issue12-q-fmax-scores-overflow": attention(4, 5, 1, 1, scale="1", sp=((Q, 0, 0, FMAX, CELL),), s=42),
    "issue12-v-fmax-column-sum-overflows": attention(9, 40, 4, 3, sp=((V, 0, 1, FMAX, COL),), s=43),
    "issue12-v-inf-row-across-key-blocks": attention(3, 70, 2, 2, sp=((V, 1, 0, PINF, ROW), (K, 66, 0, BIG, ROW)),
                                                     s=44),
    "issue12-v-nan-row-causal-hidden": attention(33, 70, 4, 4, causal=True, sp=((V, 40, 0, NAN, ROW),), s=45),
    "scale-negative": attention(6, 6, 4, 4, scale="-1", s=22),
    "null-q": attention(3, 3, 2, 2, muts=((Q, NULL),)),
    "null-workspace": attention(3, 3, 2, 2, ws_null=True),
    "null-mask-is-no-mask": attention(3, 3, 2, 2, mask=True, muts=((MASK, NULL),)),
    "zero-n-kv": attention(3, 3, 2, 2, muts=((K, ROWS0), (V, ROWS0))),
    "mismatched-v-rows": attention(3, 3, 2, 2, muts=((V, ROWS_PLUS),)),
    "head-dim-too-large": attention(2, 2, 2, 2, muts=((Q, HEAD_TOO_LARGE), (K, HEAD_TOO_LARGE))),
    "mask-wrong-shape": attention(3, 4, 2, 2, mask=True, muts=((MASK, COLS_MINUS),)),
    "extent-overflows": attention(3, 4, 2, 2, muts=((OUT, HUGE_STRIDE),)),
    "workspace-one-float-short": attention(6, 9, 4, 5, ws="one-less"),
    "workspace-zero": attention(6, 9, 4, 5, ws="zero"),
    "alias-out-is-v": attention(6, 6, 5, 5, out_mode=1, out_over=V),
    "alias-out-inside-mask": attention(6, 9, 4, 5, mask=True, pads=(0, 0, 0, 0, 0), out_mode=4, out_delta=1,
                                       out_over=MASK),
    "alias-workspace-overlaps-k": attention(6, 9, 4, 5, ws_place=5, ws_delta=3, ws_over=K),
    "alias-workspace-overlaps-out": attention(6, 9, 4, 5, ws_place=5, ws_delta=-3, ws_over=OUT),
}
# A library bug the fuzzer found (see docs/testing.md "Fuzzing"): out overlaps v AND the workspace is too small; the
# documented order (null, shapes, workspace size, overlap) says workspace_too_small, the library says aliasing.
ATTENTION["repro-check-order-out-overlaps-v-and-workspace-too-small"] = attention(1, 1, 1, 1, ws="zero", out_mode=1,
                                                                                   out_over=V)


# ---- layers -------------------------------------------------------------------------------------------------------
LAYER_SEQ = {0: 64, 1: 40, 2: 3, 3: 33}
Y = {"own": 0, "query": 4, "context": 5, "over-query": 6, "over-context": 7, "over-query-own-stride": 8,
     "over-mask": 9, "over-weight": 10, "query-other-stride": 11}


def seq(n, max_seq):
    if 1 <= n <= max_seq:
        return n - 1
    return 160 if n == max_seq + 1 else 161  # the edge list's MaxSeq + 1 and 0


def layer(config, n_q, n_kv=None, cross=False, causal=False, mask=False, biases=True, out=True, out_bias=True,
          offset=0, small=0, pads=(0,) * 4, gaps=(0,) * 4, wgap=0, y="own", delta=0, missing=0, muts=(),
          vq=(0, 0), vc=(0, 0), mask_style=0, sp=(), s=1):
    ms = LAYER_SEQ[config]
    flags = (1 if cross else 0) | (2 if causal else 0) | (4 if mask else 0) | (0 if biases else 8) | \
        (0 if out else 16) | (0 if out_bias else 32)
    b = seed(s) + [config, flags, offset, int8(small), seq(n_q, ms)]
    if cross:
        b.append(seq(n_kv, ms))
    views = [0, 1, 2, 3] if cross else [0, 2, 3]  # query, context, y, mask
    for i in views:
        b += [pad(pads[i]), gaps[i]]
    b += [wgap, Y[y], int8(delta), missing]
    b += mutations(*muts) + list(vq) + list(vc) + [mask_style]
    return bytes(b + specials(*sp))


LAYERS = {
    "mha-64-64-4-self-n64": layer(0, 64, s=1),
    "mha-64-64-4-self-causal-mask-n33": layer(0, 33, causal=True, mask=True, mask_style=8, s=2),
    "gqa-40-48-6-2-cross-17x40": layer(1, 17, 40, cross=True, pads=(3, 1, 2, 0), gaps=(1, 2, 3, 0), s=3),
    "gqa-40-48-6-2-causal-bottom-right": layer(1, 9, 40, cross=True, causal=True, offset=1, s=4),
    "self-3-2-in-place": layer(2, 3, y="query", s=5),
    "mqa-33-12-3-1-cross-y-is-context-no-bias-no-out": layer(3, 20, 33, cross=True, y="context", biases=False,
                                                             out=False, s=6),
    "mqa-33-12-3-1-out-bias-without-out-weight": layer(3, 7, out=False, s=7),
    "nan-token-causal": layer(3, 33, causal=True, sp=((0, 12, 5, NAN, CELL),), s=8),
    "inf-in-context-hidden-by-mask": layer(1, 10, 12, cross=True, mask=True, mask_style=3,
                                           sp=((1, 4, 0, PINF, ROW),), s=9),
    "causal-offset-hides-everything": layer(0, 10, causal=True, offset=2, s=10),
    "causal-offset-max": layer(1, 10, causal=True, offset=4, s=11),
    "alias-y-overlaps-query": layer(0, 10, y="over-query", delta=5),
    "alias-y-overlaps-context": layer(3, 5, 9, cross=True, y="over-context", delta=-4),
    "alias-y-over-weight": layer(3, 4, y="over-weight", delta=1 + 8 * 2),
    "alias-y-same-start-other-stride": layer(0, 10, y="query-other-stride"),
    "alias-y-over-mask": layer(2, 3, mask=True, y="over-mask", delta=0),
    "missing-k-weight": layer(0, 4, missing=241),
    "null-y": layer(0, 4, muts=((1, NULL),)),
    "too-many-rows": layer(1, 41),
    "context-too-many-rows": layer(3, 5, 34, cross=True),
    "zero-rows": layer(2, 0),
    "cols-not-model-dim": layer(1, 5, muts=((0, COLS_MINUS), (1, COLS_MINUS))),
    "mask-wrong-shape": layer(0, 6, mask=True, muts=((2, ROWS_MINUS),)),
}


# ---- decode (append / attend / forward / reset sequences) ----------------------------------------------------------
APPEND, ATTEND, FORWARD, RESET, APPEND_OPTS = 0, 6, 7, 8, 9
WINDOW_BITS = {0: 0, 1: 1, 3: 2, 6: 3}


def decode(layer_index, steps, rope=False, interleaved=False, half=False, window=0, biases=True, out=True, s=1):
    """steps: (op, rows, y_mode, opts) tuples; rows 1..9 (or 0 / 'over' / 13 through the odd byte values)."""
    cfg = (1 if rope else 0) | (2 if interleaved else 0) | (4 if half else 0) | (WINDOW_BITS[window] << 3) | \
        (0 if biases else 32) | (0 if out else 64)
    b = seed(s) + [layer_index, cfg, len(steps) - 1]
    odd = {0: 200, "over": 201, 13: 202}
    for op, rows, y_mode, opts in steps:
        b += [op, odd[rows] if rows in odd else rows - 1, y_mode, opts]
    return bytes(b)


DECODE = {
    "rope-window-appends-then-attend": decode(0, [(APPEND, 3, 0, 0), (APPEND, 1, 0, 0), (APPEND, 5, 2, 0),
                                                  (ATTEND, 4, 0, 8 | (5 << 4))], rope=True, window=3, s=1),
    "one-by-one-mqa": decode(0, [(APPEND, 1, 0, 0)] * 12, s=2),
    "chunks-gqa-none-interleaved-half": decode(1, [(APPEND, 7, 0, 0), (APPEND, 9, 2, 0), (APPEND, 4, 0, 0)],
                                               rope=True, interleaved=True, half=True, s=3),
    "ring-window-1-wraps": decode(0, [(APPEND, 7, 0, 0)] * 6, window=1, s=4),
    "ring-window-6-wraps-in-place": decode(1, [(APPEND, 5, 2, 0), (APPEND, 9, 2, 0), (APPEND, 9, 0, 0),
                                               (APPEND, 3, 0, 0), (APPEND, 9, 0, 0)], window=6, rope=True, s=5),
    "full-cache-refuses": decode(0, [(APPEND, 9, 0, 0), (APPEND, 4, 0, 0), (APPEND, 3, 0, 0), (APPEND, 1, 0, 0)],
                                 s=6),
    "mask-in-position-order": decode(1, [(APPEND, 4, 0, 0), (APPEND_OPTS, 3, 0, 1), (APPEND_OPTS, 2, 0, 1 | 4)], s=7),
    "mask-on-ring-refused": decode(0, [(APPEND, 2, 0, 0), (APPEND_OPTS, 2, 0, 1)], window=3, s=8),
    "wider-window-on-ring-refused": decode(0, [(APPEND_OPTS, 2, 0, 6)], window=3, s=9),
    "y-overlaps-x": decode(1, [(APPEND, 4, 3, 0), (ATTEND, 2, 3, 0)], s=10),
    "forward-then-append-then-attend": decode(1, [(FORWARD, 9, 0, 0), (APPEND, 5, 0, 0), (ATTEND, 13, 0, 0)],
                                              rope=True, s=11),
    "reset-and-attend-empty": decode(0, [(APPEND, 2, 0, 0), (RESET, 1, 0, 0), (ATTEND, 3, 0, 0), (APPEND, 1, 0, 0)],
                                     s=12),
    "zero-rows-and-short-y": decode(0, [(APPEND, 0, 0, 0), (APPEND, 3, 5, 0), (APPEND, "over", 0, 0)], s=13),
    "no-bias-no-out-window-options": decode(1, [(APPEND_OPTS, 6, 0, 2), (APPEND_OPTS, 6, 4, 6)], biases=False,
                                            out=False, s=14),
}


# Found by fuzzing (libFuzzer's bytes, kept as found): k = 1, so b (not transposed) is one row with a stride of 2^62,
# valid for one row; the kernels stepped the row pointer past it, which wrapped (UBSan). matmul() now hands the
# kernels a one-row view's column count as its stride.
MATMUL["repro-one-row-b-huge-stride"] = bytes.fromhex("010000080000b90200ef0010beffff7e54cc70e800b1020000010900")

def main():
    targets = {"matmul": MATMUL, "softmax": SOFTMAX, "attention": ATTENTION, "layers": LAYERS, "decode": DECODE}
    for name, seeds in targets.items():
        d = os.path.join(CORPUS, name)
        if os.path.isdir(d):
            shutil.rmtree(d)
        os.makedirs(d)
        for seed_name, data in seeds.items():
            with open(os.path.join(d, seed_name), "wb") as f:
                f.write(data)
        print(f"{name}: {len(seeds)} seeds in {os.path.relpath(d, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
