#!/usr/bin/env python3
"""llama_run's command line and error exits: usage (exit 1) for bad arguments, a message naming the problem
(exit 2) for a missing, truncated or inconsistent checkpoint or tokenizer, text and tok/s for good ones.
  check_llama_cli.py LLAMA_RUN PREFIX   (PREFIX-v0.bin, PREFIX-v2.bin, PREFIX-tok.bin from make_llama_checkpoint.py)"""
import os
import subprocess
import sys
import tempfile

run, prefix = sys.argv[1], sys.argv[2]
v0, v2, tok = prefix + '-v0.bin', prefix + '-v2.bin', prefix + '-tok.bin'
failures = []


def check(args, code, stderr_has=None, stdout_has=None):
    p = subprocess.run([run] + args, capture_output=True, timeout=60)
    err, out = p.stderr.decode(errors='replace'), p.stdout.decode(errors='replace')
    ok = p.returncode == code and (stderr_has is None or stderr_has in err) and (stdout_has is None or stdout_has in out)
    if not ok:
        failures.append(f'{args}: exit {p.returncode} (want {code}), stderr {err[:300]!r}')
    return out


for bad in [[], [v0, '-t'], [v0, '-x', '1'], [v0, 't', '1'], [v0, '-tt', '1'], [v0, '-n', 'ten'],
            [v0, '-t', '0.5x'], [v0, '-s', '99999999999999'], [v0, '-z', tok, '-n']]:
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
    check([ckpt, '-z', tok, '-n', '0', '-s', '3'], 0)  # 0: seq_len steps
    check([ckpt, '-z', tok, '-n', '-5', '-t', '-1', '-p', '7'], 0)  # run.c's clamps

for f in failures:
    print('FAIL', f)
print(f'{len(failures)} failures')
sys.exit(1 if failures else 0)
