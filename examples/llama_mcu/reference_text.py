#!/usr/bin/python3
"""Greedy text of a llama2.c model in float64 (numpy), an independent reference for the firmware's f16 build.

    reference_text.py CHECKPOINT_V0 TOKENIZER STEPS OUTPUT [--f16] [--min-gap REL] [--expect FILE]

The model's arithmetic as llama2.c's run.c defines it (rms norm eps 1e-5, rope base 10000 on interleaved pairs,
grouped-query attention, SiLU gate), every product and sum in float64. --f16: the weights as binary16 stores them
(each matrix, the embedding included, rounded to nearest, ties to even, as scripts/export_llama.py --format f16
writes them) and the K/V cache rounded to binary16 when stored (the firmware's f16 cache); the norms stay float32.
Writes the text as run.c prints it (BOS start, first maximum, stop at BOS, the space after BOS dropped, <0xHH> as raw
bytes, unprintable single bytes skipped) and a newline. Refuses (exit 1, nothing written) when the two best logits
of a step lie within --min-gap (default 1e-3) relative: there float32 arithmetic could pick the other token.
"""
import argparse
import struct
import sys

import numpy as np


def load_v0(path):
    data = open(path, "rb").read()
    dim, hidden, layers, heads, kvh, vocab, seq = struct.unpack_from("<7i", data, 0)
    shared, vocab = vocab > 0, abs(vocab)
    hd = dim // heads
    f = np.frombuffer(data, dtype="<f4", offset=28).astype(np.float32)
    at = 0

    def take(*shape):
        nonlocal at
        n = int(np.prod(shape))
        at += n
        return f[at - n:at].reshape(shape)
    m = {"emb": take(vocab, dim), "att_norm": [take(dim) for _ in range(layers)]}
    m["wq"] = [take(dim, dim) for _ in range(layers)]
    m["wk"] = [take(hd * kvh, dim) for _ in range(layers)]
    m["wv"] = [take(hd * kvh, dim) for _ in range(layers)]
    m["wo"] = [take(dim, dim) for _ in range(layers)]
    m["ffn_norm"] = [take(dim) for _ in range(layers)]
    m["w1"] = [take(hidden, dim) for _ in range(layers)]
    m["w2"] = [take(dim, hidden) for _ in range(layers)]
    m["w3"] = [take(hidden, dim) for _ in range(layers)]
    m["final_norm"] = take(dim)
    take(seq * hd)
    m["cls"] = m["emb"] if shared else take(vocab, dim)
    m["shape"] = (dim, hidden, layers, heads, kvh, vocab, seq)
    return m


def read_vocab(path, vocab):
    data, at, pieces = open(path, "rb").read(), 4, []
    for _ in range(vocab):
        n = struct.unpack_from("<i", data, at + 4)[0]
        pieces.append(data[at + 8:at + 8 + n].split(b"\0", 1)[0])
        at += 8 + n
    return pieces


def decode(pieces, prev, token):
    p = pieces[token]
    if prev == 1 and p[:1] == b" ":
        p = p[1:]
    if len(p) >= 4 and p[:3] == b"<0x" and chr(p[3]) in "0123456789abcdefABCDEF":
        hi = int(chr(p[3]), 16)
        lo = chr(p[4]) if len(p) > 4 else ""
        byte = hi * 16 + int(lo, 16) if lo and lo in "0123456789abcdefABCDEF" else hi
        p = bytes([byte]) if byte else b""
    if len(p) == 1 and not (0x20 <= p[0] < 0x7F or 0x09 <= p[0] <= 0x0D):
        return b""
    return p


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("tokenizer")
    ap.add_argument("steps", type=int)
    ap.add_argument("output")
    ap.add_argument("--f16", action="store_true")
    ap.add_argument("--min-gap", type=float, default=1e-3)
    ap.add_argument("--expect", help="compare the text with this file instead of writing OUTPUT (exit 1 if not equal)")
    a = ap.parse_args()
    m = load_v0(a.checkpoint)
    dim, hidden, layers, heads, kvh, vocab, seq = m["shape"]
    hd, group = dim // heads, heads // kvh

    def weight(w):
        return (w.astype(np.float16) if a.f16 else w).astype(np.float64)
    W = {k: [weight(w) for w in m[k]] for k in ("wq", "wk", "wv", "wo", "w1", "w2", "w3")}
    emb, cls = weight(m["emb"]), weight(m["cls"])
    norms = {k: [n.astype(np.float64) for n in m[k]] for k in ("att_norm", "ffn_norm")}
    final_norm = m["final_norm"].astype(np.float64)
    kc = np.zeros((layers, a.steps, kvh, hd))
    vc = np.zeros((layers, a.steps, kvh, hd))
    idx = np.arange(0, hd, 2)
    freq = 1.0 / 10000.0 ** (idx / hd)

    def rms(x, w):
        return x / np.sqrt(np.mean(x * x) + 1e-5) * w

    def rope(v, pos):
        v = v.reshape(-1, hd).copy()
        c, s = np.cos(pos * freq), np.sin(pos * freq)
        v0, v1 = v[:, 0::2].copy(), v[:, 1::2].copy()
        v[:, 0::2], v[:, 1::2] = v0 * c - v1 * s, v0 * s + v1 * c
        return v

    pieces = read_vocab(a.tokenizer, vocab)
    out, token, pos = b"", 1, 0
    while pos < a.steps:
        x = emb[token].copy()
        for l in range(layers):
            xb = rms(x, norms["att_norm"][l])
            q = rope(W["wq"][l] @ xb, pos)
            k = rope(W["wk"][l] @ xb, pos)
            v = (W["wv"][l] @ xb).reshape(kvh, hd)
            if a.f16:
                k, v = k.astype(np.float16).astype(np.float64), v.astype(np.float16).astype(np.float64)
            kc[l, pos], vc[l, pos] = k, v
            att = np.empty((heads, hd))
            for h in range(heads):
                s = kc[l, :pos + 1, h // group] @ q[h] / np.sqrt(hd)
                p = np.exp(s - s.max())
                att[h] = (p / p.sum()) @ vc[l, :pos + 1, h // group]
            x = x + W["wo"][l] @ att.ravel()
            xb = rms(x, norms["ffn_norm"][l])
            g = W["w1"][l] @ xb
            x = x + W["w2"][l] @ (g / (1.0 + np.exp(-g)) * (W["w3"][l] @ xb))
        logits = cls @ rms(x, final_norm)
        nxt = int(np.argmax(logits))
        best, second = np.sort(logits)[-1], np.sort(logits)[-2]
        if best - second <= a.min_gap * abs(best):
            print(f"reference_text.py: {a.checkpoint}: near-tie at step {pos} ({best:.6g} vs {second:.6g}): choose "
                  f"fewer than {pos + 1} steps", file=sys.stderr)
            return 1
        pos += 1
        if nxt == 1:
            break
        out += decode(pieces, token, nxt)
        token = nxt
    out += b"\n"
    if a.expect is not None:
        want = open(a.expect, "rb").read()
        if out != want:
            at = next((i for i, (x, y) in enumerate(zip(out, want)) if x != y), min(len(out), len(want)))
            print(f"FAIL: the float64 reference's text differs from {a.expect} at byte {at}")
            return 1
        print(f"the float64 reference's {pos} tokens are {a.expect}'s text ({len(out)} bytes)")
        return 0
    with open(a.output, "wb") as f:
        f.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
