#!/usr/bin/env python3
"""llama_run's command line and error exits: usage (exit 1) for bad arguments, a message naming the problem
(exit 2) for a missing, truncated or inconsistent checkpoint or tokenizer, text and tok/s for good ones.
  check_llama_cli.py LLAMA_RUN PREFIX   (PREFIX-v0.bin, PREFIX-v2.bin, PREFIX-tok.bin from make_llama_checkpoint.py)"""
import os
import re
import struct
import subprocess
import sys
import tempfile

run, prefix = sys.argv[1], sys.argv[2]
v0, v2, tok = prefix + '-v0.bin', prefix + '-v2.bin', prefix + '-tok.bin'
failures = []


def check(args, code, stderr_has=None, stdout_has=None, env=None):
    try:
        p = subprocess.run([run] + args, capture_output=True, timeout=60, env=dict(os.environ, **(env or {})))
    except subprocess.TimeoutExpired:
        failures.append(f'{str(args)[:300]}: no exit within 60 s')
        return ''
    err, out = p.stderr.decode(errors='replace'), p.stdout.decode(errors='replace')
    ok = p.returncode == code and (stderr_has is None or stderr_has in err) and (stdout_has is None or stdout_has in out)
    if not ok:
        failures.append(f'{str(args)[:300]}: exit {p.returncode} (want {code}), stderr {err[:300]!r}')
    check.stderr = err
    return out


for bad in [[], [v0, '-t'], [v0, '-x', '1'], [v0, 't', '1'], [v0, '-tt', '1'], [v0, '-n', 'ten'],
            [v0, '-t', '0.5x'], [v0, '-s', '99999999999999'], [v0, '-z', tok, '-n'], [v0, '-j', '0'],
            [v0, '-j', '65'], [v0, '-j', 'two']]:
    check(bad, 1, 'Usage')
check(['/nonexistent.bin', '-z', tok], 2, 'cannot open')
check([v0, '-z', '/nonexistent.tok'], 2, 'cannot open')
with tempfile.TemporaryDirectory() as d:
    data = open(v2, 'rb').read()
    for name, blob, message in [('empty', b'', 'shorter than the 28-byte header'),
                                ('cut', data[:len(data) // 2], 'shorter than'),
                                ('long', data + b'\0', 'longer than'),
                                ('version', data[:4] + b'\3\0\0\0' + data[8:], 'version 3'),
                                ('group', data[:37] + b'\3\0\0\0' + data[41:], 'group_size 3')]:
        path = os.path.join(d, name)
        open(path, 'wb').write(blob)
        check([path, '-z', tok], 2, message)
    tdata = open(tok, 'rb').read()
    path = os.path.join(d, 'tok')
    open(path, 'wb').write(tdata[:-1])
    check([v0, '-z', path], 2, 'tokenizer')
    check([v0, '-z', v0], 2, 'tokenizer')

for ckpt in (v0, v2):
    out = check([ckpt, '-z', tok, '-t', '0', '-n', '20'], 0, 'achieved tok/s')
    again = check([ckpt, '-z', tok, '-t', '0', '-n', '20'], 0)
    if out != again or not out.endswith('\n'):
        failures.append(f'{ckpt}: -t 0 output not reproducible or unterminated: {out!r} {again!r}')
    a = check([ckpt, '-z', tok, '-t', '0.9', '-p', '0.8', '-s', '5', '-n', '30', '-i', 'the day'], 0)
    b = check([ckpt, '-z', tok, '-t', '0.9', '-p', '0.8', '-s', '5', '-n', '30', '-i', 'the day'], 0)
    if a != b or not a.startswith('the day'):
        failures.append(f'{ckpt}: seeded sampling not reproducible or prompt not echoed: {a!r} {b!r}')
    for j in ('2', '3', '64'):  # workers: the same text
        c = check([ckpt, '-z', tok, '-t', '0.9', '-p', '0.8', '-s', '5', '-n', '30', '-i', 'the day', '-j', j], 0)
        if c != a:
            failures.append(f'{ckpt}: -j {j} gave other text: {c!r} {a!r}')
    check([ckpt, '-z', tok, '-n', '0', '-s', '3'], 0)  # 0: seq_len steps
    check([ckpt, '-z', tok, '-n', '-5', '-t', '-1', '-p', '7'], 0)  # run.c's clamps

# A temperature so small that logits / temperature overflow (1e-45 rounds to the smallest subnormal float): the
# greedy text of -t 0, not the last token of the vocabulary over and over.
for ckpt in (v0, v2):
    for prompt in ([], ['-i', 'the day']):
        greedy = check([ckpt, '-z', tok, '-t', '0', '-n', '20'] + prompt, 0)
        for t in ('1e-45', '1e-38'):
            out = check([ckpt, '-z', tok, '-t', t, '-s', '9', '-n', '20'] + prompt, 0)
            if out != greedy:
                failures.append(f'{ckpt} -t {t} {prompt}: {out!r}, not the -t 0 text {greedy!r}')

# The small model's context is 40 positions. "7" is no token of its vocabulary and no byte token pair merges, so
# "7" * k is BOS, the dummy prefix " " and k byte tokens: k + 2 tokens. 40 fit (the whole prompt is printed, one
# token generated); 41 are refused, nothing generated.
check([v0, '-z', tok, '-t', '0', '-n', '0', '-i', '7' * 38], 0, env={'LLAMA_RUN_TOKENS': '1'})
ids = next((ln.split()[1:] for ln in check.stderr.splitlines() if ln.startswith('tokens:')), [])
if ids[:39] != ['259'] + ['58'] * 38:
    failures.append(f'"7" * 38 is not " " and 38 byte tokens: {ids}')
# The small vocabulary has no merges; its last three tokens respelled "aa", "aaaa", "aaaaaaaa" (scores falling)
# make 120 000 a's 60 000 merges into "aa", then 15 000 into 8 a's: 15 002 tokens with BOS and " ", whose encoding
# must take less than minutes.
tdata = open(tok, 'rb').read()
pieces, at = [], 4
while at < len(tdata):
    score, length = struct.unpack('<fi', tdata[at:at + 8])
    pieces.append((score, tdata[at + 8:at + 8 + length]))
    at += 8 + length
pieces[-3:] = [(-1.0, b'aa'), (-2.0, b'aaaa'), (-3.0, b'aaaaaaaa')]
with tempfile.TemporaryDirectory() as d:
    merging = os.path.join(d, 'merging-tok.bin')
    with open(merging, 'wb') as f:
        f.write(struct.pack('<i', max(len(b) for _, b in pieces)))
        for score, b in pieces:
            f.write(struct.pack('<fi', score, len(b)) + b)
    for prompt, t, count, steps in [('7' * 39, tok, 41, '0'), ('7' * 39, tok, 41, '4'),
                                    ('a' * 120000, merging, 15002, '4')]:
        try:
            p = subprocess.run([run, v0, '-z', t, '-n', steps, '-i', prompt], capture_output=True, timeout=60)
        except subprocess.TimeoutExpired:
            failures.append(f'{len(prompt)}-byte prompt, -n {steps}: no exit within 60 s')
            continue
        err = p.stderr.decode(errors='replace')
        numbers = [int(x) for x in re.findall(r'\d+', err)]
        if p.returncode == 0 or p.stdout or 40 not in numbers or count not in numbers:
            failures.append(f'{len(prompt)}-byte prompt, -n {steps}: exit {p.returncode}, stdout {p.stdout[:100]!r}, '
                            f'stderr {err[:300]!r} (want an error naming its token count, {count}, and 40)')

# stderr's lines come after all of stdout (the text and its newline) when both go to one pipe.
for env in ({}, {'LLAMA_RUN_TOKENS': '1'}):
    args = [v0, '-z', tok, '-t', '0', '-n', '20', '-i', 'the day']
    text = check(args, 0)
    p = subprocess.run([run] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60,
                       env=dict(os.environ, **env))
    both = p.stdout.decode(errors='replace')
    tail = r'(tokens:( \d+)+\n)?achieved tok/s: [0-9.]+\n'
    if not (both.startswith(text) and re.fullmatch(tail, both[len(text):])):
        failures.append(f'{env}: stdout and stderr interleaved: {both!r}')

for f in failures:
    print('FAIL', f)
print(f'{len(failures)} failures')
sys.exit(1 if failures else 0)
