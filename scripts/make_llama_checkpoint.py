#!/usr/bin/python3
"""Random-weight llama2.c checkpoints and a synthetic tokenizer, deterministic by seed.

Writes run.c's version 0 (fp32) and runq.c's version 2 (q8: per group of --group values, scale = absmax / 127,
values rounded as export.py's torch.round does, half to even) checkpoints of one shape, and a tokenizer.bin of
--vocab tokens: <unk>, BOS, EOS, the 256 byte tokens <0x00>..<0xFF> (when the vocabulary has room), printable
characters, then merges of earlier tokens.

  /usr/bin/python3 scripts/make_llama_checkpoint.py OUT_PREFIX [--dim 64 --hidden 172 --layers 5 --heads 8
      --kv-heads 4 --vocab 512 --seq 512 --group 64 --separate-classifier --seed 1]
writes OUT_PREFIX-v0.bin, OUT_PREFIX-v2.bin and OUT_PREFIX-tok.bin. The defaults are the stories260K shape; the
default group is export.py's (the largest power of two <= 64 dividing dim).
"""
import argparse
import struct
import sys

import numpy as np


def quantize_q8(w, group):
    """export.py's Q8_0: symmetric int8 per group of `group` consecutive values (row-major), scale absmax/127."""
    flat = w.astype(np.float32).reshape(-1, group)
    scale = (np.abs(flat).max(axis=1) / np.float32(127.0)).astype(np.float32)
    safe = np.where(scale == 0, np.float32(1), scale)
    q = np.round(flat / safe[:, None]).astype(np.int8)  # np.round is torch.round: half to even
    return q.reshape(-1), scale


def make_weights(args, rng):
    d, h, hd = args.dim, args.hidden, args.dim // args.heads
    kv = hd * args.kv_heads

    # Gains that keep greedy text from repeating one token: a small embedding (the shared classifier would
    # otherwise favour the input token) and projections of gain 3.
    def mat(rows, cols):
        return (3.0 * rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)

    def norm(n):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    w = {'embedding': (0.1 * rng.standard_normal((args.vocab, d))).astype(np.float32)}
    L = range(args.layers)
    w['attention_norm'] = [norm(d) for _ in L]
    w['wq'] = [mat(d, d) for _ in L]
    w['wk'] = [mat(kv, d) for _ in L]
    w['wv'] = [mat(kv, d) for _ in L]
    w['wo'] = [mat(d, d) for _ in L]
    w['ffn_norm'] = [norm(d) for _ in L]
    w['w1'] = [mat(h, d) for _ in L]
    w['w2'] = [mat(d, h) for _ in L]
    w['w3'] = [mat(h, d) for _ in L]
    w['final_norm'] = norm(d)
    w['classifier'] = mat(args.vocab, d) if args.separate_classifier else None
    return w


def header_ints(args, vocab_field):
    return struct.pack('<7i', args.dim, args.hidden, args.layers, args.heads, args.kv_heads, vocab_field, args.seq)


def write_v0(path, args, w):
    shared = w['classifier'] is None
    hd = args.dim // args.heads
    with open(path, 'wb') as f:
        f.write(header_ints(args, args.vocab if shared else -args.vocab))
        f.write(w['embedding'].tobytes())
        for name in ['attention_norm', 'wq', 'wk', 'wv', 'wo', 'ffn_norm', 'w1', 'w2', 'w3']:
            for t in w[name]:
                f.write(t.astype('<f4').tobytes())
        f.write(w['final_norm'].astype('<f4').tobytes())
        # The legacy rope tables (cos, then sin; run.c skips them).
        freqs = 1.0 / (10000.0 ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
        angles = np.outer(np.arange(args.seq), freqs)
        f.write(np.cos(angles).astype('<f4').tobytes())
        f.write(np.sin(angles).astype('<f4').tobytes())
        if not shared:
            f.write(w['classifier'].astype('<f4').tobytes())


def write_v2(path, args, w):
    shared = w['classifier'] is None
    tensors = [w['embedding']]
    for name in ['wq', 'wk', 'wv', 'wo', 'w1', 'w2', 'w3']:
        tensors += w[name]
    if not shared:
        tensors.append(w['classifier'])
    for t in tensors:
        if t.size % args.group != 0:
            sys.exit(f'make_llama_checkpoint: group {args.group} does not divide a tensor of {t.size} values')
    with open(path, 'wb') as f:
        head = struct.pack('<Ii', 0x616b3432, 2) + header_ints(args, args.vocab)
        head += struct.pack('<B', int(shared)) + struct.pack('<i', args.group)
        f.write(head + b'\0' * (256 - len(head)))
        for name in ['attention_norm', 'ffn_norm']:
            for t in w[name]:
                f.write(t.astype('<f4').tobytes())
        f.write(w['final_norm'].astype('<f4').tobytes())
        for t in tensors:
            q, s = quantize_q8(t, args.group)
            f.write(q.tobytes())
            f.write(s.astype('<f4').tobytes())


def make_vocab(n, rng):
    pieces = ['<unk>', '\n<s>\n', '\n</s>\n']
    if n >= 259:
        pieces += ['<0x%02X>' % b for b in range(256)]
    chars = [' '] + [chr(c) for c in range(ord('a'), ord('z') + 1)] + list('ETAOISHL.,!?\'"') + ['\u00e9', '\u2014']
    for c in chars:
        if len(pieces) < n:
            pieces.append(c)
    seen = set(pieces)
    words = [' the', ' and', ' a', ' was', ' to', ' he', ' she', ' it', ' of', 'ing', 'ed', ' once', ' upon',
             ' time', ' there', ' little', ' day']
    for word in words:
        if len(pieces) < n and word not in seen:
            pieces.append(word)
            seen.add(word)
    base = pieces[259 if n >= 259 else 3:]
    while len(pieces) < n:
        a = base[rng.integers(len(base))]
        b = base[rng.integers(len(base))]
        m = a + b
        if m not in seen and len(m.encode('utf-8')) <= 12:
            pieces.append(m)
            seen.add(m)
            base.append(m)
    return pieces[:n]


def write_tokenizer(path, vocab, rng):
    data = [p.encode('utf-8') for p in vocab]
    # Scores as sentencepiece's: later (longer) merges score lower; special and byte tokens 0.
    scores = [0.0 if p.startswith('<') or i < 3 else -float(i) for i, p in enumerate(vocab)]
    with open(path, 'wb') as f:
        f.write(struct.pack('<i', max(len(b) for b in data)))
        for b, s in zip(data, scores):
            f.write(struct.pack('<fi', s, len(b)))
            f.write(b)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('out_prefix')
    ap.add_argument('--dim', type=int, default=64)
    ap.add_argument('--hidden', type=int, default=172)
    ap.add_argument('--layers', type=int, default=5)
    ap.add_argument('--heads', type=int, default=8)
    ap.add_argument('--kv-heads', type=int, default=4)
    ap.add_argument('--vocab', type=int, default=512)
    ap.add_argument('--seq', type=int, default=512)
    ap.add_argument('--group', type=int, default=0, help='q8 group (default: export.py\'s, the largest power of '
                    'two <= 64 dividing dim)')
    ap.add_argument('--separate-classifier', action='store_true')
    ap.add_argument('--seed', type=int, default=1)
    args = ap.parse_args()
    if args.dim % args.heads or args.heads % args.kv_heads or (args.dim // args.heads) % 2:
        sys.exit('make_llama_checkpoint: dim must be a multiple of heads, heads of kv-heads, dim/heads even')
    if args.group == 0:
        args.group = 64
        while args.dim % args.group:
            args.group //= 2
    rng = np.random.default_rng(args.seed)
    w = make_weights(args, rng)
    write_v0(args.out_prefix + '-v0.bin', args, w)
    write_v2(args.out_prefix + '-v2.bin', args, w)
    write_tokenizer(args.out_prefix + '-tok.bin', make_vocab(args.vocab, rng), rng)


if __name__ == '__main__':
    main()
