#!/usr/bin/env python3
"""llama_run on the committed model trained by scripts/train_tiny_llama.py (models/tiny-llama-*).
  check_tiny_model.py text  LLAMA_RUN MODELS_DIR   greedy text (-t 0 -n 64) of v0 and v2 equals the committed
                                                   tiny-llama-v0.txt / -v2.txt (llama_run's output when the model
                                                   was trained; the peer test compares llama_run with run.c/runq.c)
  check_tiny_model.py torch LLAMA_RUN MODELS_DIR   v0's greedy token ids (LLAMA_RUN_TOKENS=1) equal the ids the
                                                   trained torch module chose in float64 (tiny-llama-torch-tokens.txt),
                                                   without and with a prompt
No numpy or torch needed."""
import os
import subprocess
import sys

mode, run, models = sys.argv[1:4]
tok = os.path.join(models, 'tiny-llama-tokenizer.bin')
failures = []


def llama_run(version, extra, env=None):
    ckpt = os.path.join(models, f'tiny-llama-{version}.bin')
    p = subprocess.run([run, ckpt, '-z', tok, '-t', '0'] + extra, capture_output=True, timeout=60,
                       env=dict(os.environ, **(env or {})))
    if p.returncode != 0:
        failures.append(f'{version} {extra}: exit {p.returncode}: {p.stderr.decode(errors="replace")[:300]}')
    return p


if mode == 'text':
    for version in ['v0', 'v2']:
        want = open(os.path.join(models, f'tiny-llama-{version}.txt'), 'rb').read()
        got = llama_run(version, ['-n', '64']).stdout
        if got != want:
            at = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
            failures.append(f'{version}: text differs from byte {at}:\n  got  {got!r}\n  want {want!r}')
        else:
            print(f'{version}: {len(got)} bytes as committed: {got.decode(errors="replace")!r}')
elif mode == 'torch':
    lines = [ln.rstrip('\n') for ln in open(os.path.join(models, 'tiny-llama-torch-tokens.txt'), encoding='utf-8')
             if not ln.startswith('#')]
    steps = int(lines[0])
    cases = []
    for line in lines[1:]:
        prompt, ids = line.split('\t')
        cases.append((prompt, [int(t) for t in ids.split()]))
    if not cases:
        failures.append('no cases in tiny-llama-torch-tokens.txt')
    for prompt, want in cases:
        p = llama_run('v0', ['-n', str(steps)] + (['-i', prompt] if prompt else []), {'LLAMA_RUN_TOKENS': '1'})
        lines = [ln for ln in p.stderr.decode().splitlines() if ln.startswith('tokens:')]
        got = [int(t) for t in lines[0].split()[1:]] if lines else None
        if got != want:
            at = next((i for i, (a, b) in enumerate(zip(got or [], want)) if a != b), min(len(got or []), len(want)))
            failures.append(f'prompt {prompt!r}: ids differ from position {at}:\n  llama_run {got}\n  torch     {want}')
        else:
            print(f'prompt {prompt!r}: {len(got)} ids as torch chose them')
else:
    sys.exit(f'unknown mode {mode}')

for f in failures:
    print('FAIL', f)
print(f'{len(failures)} failures')
sys.exit(1 if failures else 0)
