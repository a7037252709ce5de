#!/usr/bin/python3
"""Trains a tiny llama2.c model on the fortune cookies of Debian's `fortunes` packages and exports it.

The model is llama2.c's architecture, exactly what run.c computes: RMSNorm (eps 1e-5), rope (theta 10000) on
interleaved pairs of each head, grouped-query attention, SwiGLU feed-forward, the classifier shared with the token
embedding. The tokenizer is a byte-pair vocabulary trained here: <unk>, BOS, EOS, the 256 byte-fallback tokens
<0x00>..<0xFF> (ids 3..258, as in llama2.c's sentencepiece vocabulary), the corpus's common characters, then merges,
scored so that run.c's encoder (repeatedly merge the best-scoring adjacent pair) applies them in training order.
Each fortune is one sequence: BOS, run.c's dummy-prefix space, the text; BOS follows it, which ends run.c's text.

Setup and run (Debian; the corpus is BSD-licensed plain English text in /usr/share/games/fortunes):
  apt-get install -y python3-torch python3-numpy fortunes-min fortunes
  taskset -c 1 /usr/bin/python3 scripts/train_tiny_llama.py [--out-dir models] [--steps 1200]
Writes OUT_DIR/tiny-llama-v0.bin (run.c, fp32), tiny-llama-v2.bin (runq.c, q8, group 64),
tiny-llama-tokenizer.bin, and tiny-llama-torch-tokens.txt: the greedy token ids of the trained torch module
(float64 forward), against which a Meson test checks llama_run. One thread, deterministic by --seed; about 5.5
CPU minutes with the defaults, which made the committed models/ files (loss train 2.84, validation 2.89 nats per
token). After retraining, regenerate the texts the tests pin with llama_run:
  build/examples/llama/llama_run models/tiny-llama-v0.bin -z models/tiny-llama-tokenizer.bin -t 0 -n 64 \
      > models/tiny-llama-v0.txt   (and the same for v2)
"""
import argparse
import ctypes
import glob
import heapq
import math
import os
import re
import sys
import time
from collections import Counter, defaultdict

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_llama_checkpoint import write_tokenizer, write_v0, write_v2  # noqa: E402

FORTUNE_DIR = '/usr/share/games/fortunes'
SPECIAL = ['<unk>', '\n<s>\n', '\n</s>\n']
BOS = 1
N_BYTE = 256
FIRST_CHAR = 3 + N_BYTE

# ---------------------------------------------------------------------------------------------------------------
# Corpus


def load_fortunes(directory, skip=('ascii-art',)):
    """Every fortune of every file (split at lines of '%'), whitespace-trimmed. Fortunes with control characters
    (backspace overstrikes, bells) or non-ASCII bytes (a few mis-encoded quotes) are left out."""
    files = sorted(f for f in glob.glob(os.path.join(directory, '*'))
                   if '.' not in os.path.basename(f) and os.path.basename(f) not in skip and os.path.isfile(f))
    if not files:
        sys.exit(f'train_tiny_llama: no fortune files in {directory} (apt-get install fortunes-min fortunes)')
    out = []
    for path in files:
        text = open(path, 'rb').read().decode('ascii', errors='replace')
        for f in text.split('\n%\n'):
            f = f.strip('\n').rstrip()
            if f.strip() and all(c in '\t\n' or ' ' <= c <= '~' for c in f):
                out.append(f)
    return out


# ---------------------------------------------------------------------------------------------------------------
# Tokenizer: run.c's algorithm, so the ids trained on are the ids llama_run's encoder produces.

CHUNK = re.compile(r' ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+')


def train_bpe(texts, vocab_size, min_char_count):
    """Pieces: specials, byte tokens, characters seen min_char_count times, then merges of the most frequent
    adjacent pair within pre-split chunks (words with their leading space, punctuation runs, whitespace runs),
    counts updated incrementally. Rare characters stay byte tokens, which never merge in run.c."""
    chars = Counter()
    for t in texts:
        chars.update(t)
    chars[' '] += 1
    alphabet = sorted(c for c, n in chars.items() if n >= min_char_count)
    pieces = SPECIAL + ['<0x%02X>' % b for b in range(N_BYTE)] + alphabet
    if len(pieces) > vocab_size:
        sys.exit('train_tiny_llama: the vocabulary has no room for the alphabet')
    char_id = {c: FIRST_CHAR + i for i, c in enumerate(alphabet)}
    seen = set(pieces)

    words = Counter()
    for t in texts:
        words.update(CHUNK.findall(' ' + t))  # run.c's dummy prefix: the first word has its space
    seqs = []  # symbol ids per distinct chunk; -1 for a rare character (a byte token: never merged)
    counts = []
    for w, n in words.items():
        seqs.append([char_id.get(c, -1) for c in w])
        counts.append(n)
    pair_count = Counter()
    where = defaultdict(set)
    for wi, s in enumerate(seqs):
        for a, b in zip(s, s[1:]):
            if a >= 0 and b >= 0:
                pair_count[(a, b)] += counts[wi]
                where[(a, b)].add(wi)
    while len(pieces) < vocab_size and pair_count:
        (a, b), n = max(pair_count.items(), key=lambda kv: (kv[1], -kv[0][0], -kv[0][1]))
        if n < 2:
            break
        merged = pieces[a] + pieces[b]
        # write_tokenizer scores pieces starting with '<' as specials (0), and run.c decodes '<0x..' as a byte.
        if merged in seen or merged.startswith('<') or '<0x' in merged:
            del pair_count[(a, b)]
            continue
        new = len(pieces)
        pieces.append(merged)
        seen.add(merged)
        for wi in list(where[(a, b)]):
            s, c = seqs[wi], counts[wi]
            for x, y in zip(s, s[1:]):
                if x >= 0 and y >= 0:
                    pair_count[(x, y)] -= c
            out, i = [], 0
            while i < len(s):
                if i + 1 < len(s) and s[i] == a and s[i + 1] == b:
                    out.append(new)
                    i += 2
                else:
                    out.append(s[i])
                    i += 1
            seqs[wi] = out
            for x, y in zip(out, out[1:]):
                if x >= 0 and y >= 0:
                    pair_count[(x, y)] += c
                    where[(x, y)].add(wi)
        for p in [p for p, v in pair_count.items() if v <= 0]:
            del pair_count[p]
            where.pop(p, None)
    return pieces


def scores_of(pieces):
    """make_llama_checkpoint.write_tokenizer's scores: 0 for specials and byte tokens, -id for the rest."""
    return [0.0 if p.startswith('<') or i < 3 else -float(i) for i, p in enumerate(pieces)]


class Encoder:
    """run.c's encode: optional BOS, the dummy-prefix " " for non-empty text, each character as its token or its
    byte tokens (byte + 3), then merge the best-scoring adjacent pair (the first on a tie) until none is in the
    vocabulary. A heap of candidate pairs keyed (-score, position) picks the same pair as run.c's scan."""

    def __init__(self, pieces):
        self.pieces = pieces
        self.scores = scores_of(pieces)
        self.ids = {p: i for i, p in enumerate(pieces)}

    def encode(self, text, bos=True):
        toks = ([BOS] if bos else []) + ([self.ids[' ']] if text else [])
        for ch in text:
            if ch in self.ids:
                toks.append(self.ids[ch])
            else:
                toks += [b + 3 for b in ch.encode('utf-8')]
        n = len(toks)
        nxt = list(range(1, n + 1))
        prv = list(range(-1, n - 1))
        alive = [True] * n
        heap = []

        def push(i):
            j = nxt[i]
            if j < n:
                m = self.ids.get(self.pieces[toks[i]] + self.pieces[toks[j]])
                if m is not None:
                    heapq.heappush(heap, (-self.scores[m], i, toks[i], toks[j], m))

        for i in range(n - 1):
            push(i)
        while heap:
            _, i, a, b, m = heapq.heappop(heap)
            j = nxt[i] if alive[i] else n
            if j >= n or toks[i] != a or toks[j] != b:
                continue  # stale: one side merged since
            toks[i] = m
            alive[j] = False
            nxt[i] = nxt[j]
            if nxt[j] < n:
                prv[nxt[j]] = i
            if prv[i] >= 0:
                push(prv[i])
            push(i)
        return [t for t, a in zip(toks, alive) if a]

    def decode(self, ids):
        """run.c's decode of a generated sequence after BOS (leading space dropped after BOS, <0xHH> as the byte,
        unprintable single bytes not printed)."""
        out, prev = [], BOS
        for t in ids:
            p = self.pieces[t]
            if prev == BOS and p.startswith(' '):
                p = p[1:]
            m = re.fullmatch(r'<0x([0-9A-Fa-f]{2})>', p)
            if m:
                b = int(m.group(1), 16)
                p = chr(b) if (32 <= b < 127 or chr(b) in '\t\n\v\f\r') else ''
            out.append(p)
            prev = t
        return ''.join(out)


# ---------------------------------------------------------------------------------------------------------------
# Model: llama2.c's architecture


class RMSNorm(torch.nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope(x, cos, sin):
    """Turns pairs (2i, 2i+1) of each head by pos * theta_i (run.c's interleaved convention). x: (B, T, H, hd)."""
    xr = x.reshape(*x.shape[:-1], -1, 2)
    a, b = xr[..., 0], xr[..., 1]
    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)


class Block(torch.nn.Module):
    def __init__(self, a):
        super().__init__()
        self.heads, self.kv_heads, self.hd = a.heads, a.kv_heads, a.dim // a.heads
        lin = lambda i, o: torch.nn.Linear(i, o, bias=False)  # noqa: E731
        self.wq, self.wk = lin(a.dim, a.dim), lin(a.dim, a.kv_heads * self.hd)
        self.wv, self.wo = lin(a.dim, a.kv_heads * self.hd), lin(a.dim, a.dim)
        self.w1, self.w2, self.w3 = lin(a.dim, a.hidden), lin(a.hidden, a.dim), lin(a.dim, a.hidden)
        self.attention_norm, self.ffn_norm = RMSNorm(a.dim), RMSNorm(a.dim)

    def forward(self, x, cos, sin, mask):
        B, T, _ = x.shape
        n = self.attention_norm(x)
        q = rope(self.wq(n).view(B, T, self.heads, self.hd), cos, sin)
        k = rope(self.wk(n).view(B, T, self.kv_heads, self.hd), cos, sin)
        v = self.wv(n).view(B, T, self.kv_heads, self.hd)
        rep = self.heads // self.kv_heads  # head h reads KV head h // rep, as run.c
        k = k.repeat_interleave(rep, dim=2)
        v = v.repeat_interleave(rep, dim=2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        s = (q @ k.transpose(-1, -2)) / math.sqrt(self.hd) + mask
        o = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(B, T, -1)
        x = x + self.wo(o)
        n = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(n)) * self.w3(n))


class TinyLlama(torch.nn.Module):
    def __init__(self, a):
        super().__init__()
        self.a = a
        self.embedding = torch.nn.Embedding(a.vocab, a.dim)
        self.layers = torch.nn.ModuleList(Block(a) for _ in range(a.layers))
        self.norm = RMSNorm(a.dim)
        hd = a.dim // a.heads
        freqs = 1.0 / (10000.0 ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
        ang = torch.outer(torch.arange(a.seq, dtype=torch.float64), freqs)
        self.register_buffer('cos64', torch.cos(ang)[:, None, :], persistent=False)
        self.register_buffer('sin64', torch.sin(ang)[:, None, :], persistent=False)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * a.layers) if name.endswith(('wo.weight', 'w2.weight')) else 0.02
                torch.nn.init.normal_(p, 0.0, std)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.embedding(idx)
        cos, sin = self.cos64[:T].to(x.dtype), self.sin64[:T].to(x.dtype)
        mask = torch.full((T, T), float('-inf'), dtype=x.dtype).triu(1)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.norm(x) @ self.embedding.weight.t()  # shared classifier


# ---------------------------------------------------------------------------------------------------------------
# Training


def batches(stream, seq, batch, gen):
    starts = torch.randint(0, len(stream) - seq - 1, (batch,), generator=gen)
    x = torch.stack([stream[s:s + seq] for s in starts.tolist()])
    y = torch.stack([stream[s + 1:s + seq + 1] for s in starts.tolist()])
    return x, y


@torch.no_grad()
def evaluate(model, stream, seq, n_batches, batch):
    model.eval()
    gen = torch.Generator().manual_seed(12345)
    total = 0.0
    for _ in range(n_batches):
        x, y = batches(stream, seq, batch, gen)
        total += F.cross_entropy(model(x).flatten(0, 1), y.flatten()).item()
    model.train()
    return total / n_batches


@torch.no_grad()
def greedy(model, prompt_ids, steps):
    """run.c's -t 0 loop in float64: from BOS, prompt tokens forced, argmax (first maximum) after; BOS stops.
    Returns the tokens after BOS and the smallest relative gap between the two best logits of a sampled step."""
    m = model.double().eval()
    toks, out, gap = [BOS], [], float('inf')
    for pos in range(steps):
        if pos + 1 < len(prompt_ids):
            nxt = prompt_ids[pos + 1]
        else:
            logits = m(torch.tensor([toks]))[0, -1]
            top = torch.topk(logits, 2).values
            gap = min(gap, ((top[0] - top[1]) / top[0].abs()).item())
            nxt = int(torch.argmax(logits))
        if nxt == BOS:
            break
        out.append(nxt)
        toks.append(nxt)
    model.float()
    return out, gap


def export_weights(model):
    f = lambda t: t.detach().float().numpy()  # noqa: E731
    L = model.layers
    return {
        'embedding': f(model.embedding.weight),
        'attention_norm': [f(b.attention_norm.weight) for b in L], 'ffn_norm': [f(b.ffn_norm.weight) for b in L],
        'wq': [f(b.wq.weight) for b in L], 'wk': [f(b.wk.weight) for b in L], 'wv': [f(b.wv.weight) for b in L],
        'wo': [f(b.wo.weight) for b in L], 'w1': [f(b.w1.weight) for b in L], 'w2': [f(b.w2.weight) for b in L],
        'w3': [f(b.w3.weight) for b in L], 'final_norm': f(model.norm.weight), 'classifier': None,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--out-dir', default='models')
    ap.add_argument('--corpus', default=FORTUNE_DIR)
    ap.add_argument('--dim', type=int, default=64)
    ap.add_argument('--hidden', type=int, default=128)
    ap.add_argument('--layers', type=int, default=4)
    ap.add_argument('--heads', type=int, default=8)
    ap.add_argument('--kv-heads', type=int, default=4)
    ap.add_argument('--vocab', type=int, default=512)
    ap.add_argument('--seq', type=int, default=256)
    ap.add_argument('--batch', type=int, default=16)
    ap.add_argument('--steps', type=int, default=1200)
    ap.add_argument('--lr', type=float, default=4e-3)
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--check-steps', type=int, default=64, help='greedy steps recorded from the torch module')
    ap.add_argument('--prompt', default='You will', help='prompt of the second recorded greedy run')
    args = ap.parse_args()
    # export.py's q8 group: the largest power of two <= 64 dividing dim.
    args.group = 64
    while args.dim % args.group:
        args.group //= 2
    if args.hidden % args.group:
        print(f'note: group {args.group} does not divide hidden {args.hidden}: q8 groups straddle w2 rows')
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    # glibc would map and unmap each step's large activations (page faults: 60 % of the step time); keep them.
    libc = ctypes.CDLL('libc.so.6')
    libc.mallopt(-3, 1 << 30)  # M_MMAP_THRESHOLD
    libc.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD
    t0 = time.time()

    fortunes = load_fortunes(args.corpus)
    order = np.random.default_rng(args.seed).permutation(len(fortunes))
    n_val = len(fortunes) // 20
    val_f = [fortunes[i] for i in order[:n_val]]
    train_f = [fortunes[i] for i in order[n_val:]]
    pieces = train_bpe(train_f, args.vocab, min_char_count=20)
    enc = Encoder(pieces)
    if len(pieces) < args.vocab:
        sys.exit(f'train_tiny_llama: only {len(pieces)} tokens learned')

    def stream_of(texts):
        ids = []
        for t in texts:
            ids += enc.encode(t)
        return torch.tensor(ids, dtype=torch.long)

    train_s, val_s = stream_of(train_f), stream_of(val_f)
    chars = sum(len(t) for t in train_f)
    print(f'corpus: {len(fortunes)} fortunes, {chars} training characters, {len(train_s)} training tokens '
          f'({chars / len(train_s):.2f} characters per token), {len(val_s)} validation tokens; '
          f'tokenizer {time.time() - t0:.1f} s')

    model = TinyLlama(args)
    n_params = sum(p.numel() for p in model.parameters())
    print(f'model: dim {args.dim}, hidden {args.hidden}, {args.layers} layers, {args.heads} heads, '
          f'{args.kv_heads} KV heads, vocab {args.vocab}, seq {args.seq}: {n_params} parameters')
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{'params': decay, 'weight_decay': 0.1}, {'params': no_decay, 'weight_decay': 0.0}],
                            lr=args.lr, betas=(0.9, 0.95))
    gen = torch.Generator().manual_seed(args.seed)
    warmup = max(1, args.steps // 20)
    t1 = time.time()
    for step in range(args.steps):
        lr = args.lr * (step + 1) / warmup if step < warmup else \
            args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - warmup) / (args.steps - warmup))))
        for g in opt.param_groups:
            g['lr'] = lr
        x, y = batches(train_s, args.seq, args.batch, gen)
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 100 == 0 or step == args.steps - 1:
            print(f'step {step}: loss {loss.item():.3f}, lr {lr:.2e}, {time.time() - t1:.0f} s', flush=True)
    train_time = time.time() - t1
    train_loss = evaluate(model, train_s, args.seq, 20, args.batch)
    val_loss = evaluate(model, val_s, args.seq, 20, args.batch)
    print(f'trained {args.steps} steps ({args.steps * args.batch * args.seq} tokens) in {train_time:.0f} s; '
          f'loss train {train_loss:.3f}, validation {val_loss:.3f}')

    os.makedirs(args.out_dir, exist_ok=True)
    w = export_weights(model)
    prefix = os.path.join(args.out_dir, 'tiny-llama')
    write_v0(prefix + '-v0.bin', args, w)
    write_v2(prefix + '-v2.bin', args, w)
    write_tokenizer(prefix + '-tokenizer.bin', pieces, None)

    # The independent check of llama_run: greedy ids of this module in float64 (fp32 weights, exact in float64).
    lines = []
    for prompt in ['', args.prompt]:
        ids, gap = greedy(model, enc.encode(prompt), args.check_steps)
        print(f'torch greedy (prompt {prompt!r}, smallest top-2 gap {gap:.2e} relative): {enc.decode(ids)!r}')
        lines.append(f'{prompt}\t{" ".join(map(str, ids))}')
    with open(prefix + '-torch-tokens.txt', 'w') as f:
        f.write('# scripts/train_tiny_llama.py: greedy ids after BOS of the trained torch module (float64): the\n'
                '# number of steps (-n), then a line per case: prompt<TAB>ids\n')
        f.write(f'{args.check_steps}\n' + '\n'.join(lines) + '\n')
    for suffix in ['-v0.bin', '-v2.bin', '-tokenizer.bin']:
        print(f'{prefix + suffix}: {os.path.getsize(prefix + suffix)} bytes')
    print(f'total {time.time() - t0:.0f} s')


if __name__ == '__main__':
    main()
