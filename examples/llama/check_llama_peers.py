#!/usr/bin/env python3
"""llama_run's text against llama2.c's run.c (version 0) and runq.c (version 2), built by scripts/llama_peers.sh.
  check_llama_peers.py LLAMA_RUN PEERS_DIR MODELS_DIR
Skipped (exit 77) when the peers are not built. Greedy (-t 0 -n 64, -n 512, and with a prompt): the texts must be
identical up to a near-tie (llama_run's LLAMA_RUN_TIES report: two best logits within 1e-4 relative, which the
summation order decides; 1e-3 for version 2, whose activation quantization turns a last-bit difference into a
rounding step of a quantized value: runq.c's own -O2 and -O3 builds print other text than its -Ofast build on
s260k-g4-v2 -n 512 at the position where llama_run's two best logits lie 2.5e-4 to 3.4e-4 apart, as the
summation order goes) at or before the first difference. Seeded sampling (top-p and plain) is compared and reported, not required: a logit that differs in its
last bits (summation order) moves a cumulative probability past the random number now and then. runq.c is compared only where the q8 group divides every row length (dim and
hidden_dim): elsewhere its matmul drops each row's last hidden_dim % group columns and uses a neighbouring group's
scale for rows that start inside a group, while llama_run computes the product exactly as stored. A prompt of more
tokens than the model's context (seq_len) llama_run refuses, where the peer prints it cut short: there the peer's
text must be a proper prefix of the prompt."""
import os
import struct
import subprocess
import sys

run, peers, models = sys.argv[1:4]
if not (os.path.exists(os.path.join(peers, 'run')) and os.path.exists(os.path.join(peers, 'runq'))):
    print(f'skipped: no llama2.c peers in {peers} (scripts/llama_peers.sh builds them)')
    sys.exit(77)

cases = [['-t', '0', '-n', '64'], ['-t', '0', '-n', '512'], ['-t', '0', '-n', '40', '-i', 'Once upon a time'],
         ['-t', '1', '-p', '0.9', '-s', '42', '-n', '64'], ['-t', '0.8', '-p', '1', '-s', '7', '-n', '64']]
failures = compared = 0
model_sets = [(models, name, f'{name}-tok.bin') for name in ['s260k', 's260k-g4', 'small', 'tiny', 'mha32']]
# The committed model trained by scripts/train_tiny_llama.py, whose greedy texts LlamaTinyModel pins.
model_sets.append((os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'models'), 'tiny-llama',
                   'tiny-llama-tokenizer.bin'))
for where, name, tok_name in model_sets:
    for version, peer in [('v0', 'run'), ('v2', 'runq')]:
        ckpt = os.path.join(where, f'{name}-{version}.bin')
        tok = os.path.join(where, tok_name)
        if version == 'v2':
            head = open(ckpt, 'rb').read(41)
            dim, hidden = struct.unpack('<2i', head[8:16])
            group = struct.unpack('<i', head[37:41])[0]
            if dim % group or hidden % group:
                print(f'{name}-{version}: not compared with runq.c (group {group} does not divide hidden_dim {hidden})')
                continue
        for args in cases:
            p = subprocess.run([run, ckpt, '-z', tok] + args, capture_output=True, timeout=120,
                               env=dict(os.environ, LLAMA_RUN_TIES='1e-4' if version == 'v0' else '1e-3'))
            ours = p.stdout
            if p.returncode == 1 and b"more than the model's context" in p.stderr and '-i' in args:
                theirs = subprocess.run([os.path.join(peers, peer), ckpt, '-z', tok] + args, capture_output=True,
                                        timeout=120).stdout
                prompt = args[args.index('-i') + 1].encode()
                cut = theirs.endswith(b'\n') and len(theirs) - 1 < len(prompt) and prompt.startswith(theirs[:-1])
                compared += 1
                failures += not cut or ours != b''
                print(f'{"refused" if cut else "REFUSED"} {name}-{version} {" ".join(args)}: longer than the context, '
                      f'{peer} prints {theirs!r}')
                continue
            ties = [int(line.split()[5]) for line in p.stderr.decode().splitlines() if line.startswith('near-tie')]
            theirs = subprocess.run([os.path.join(peers, peer), ckpt, '-z', tok] + args, capture_output=True,
                                    timeout=120).stdout
            compared += 1
            if ours != theirs:
                common = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
                tie = any(t <= common for t in ties)
                required = args[1] == '0' and not tie
                failures += required
                why = '' if required else '(after a near-tie) ' if tie else '(sampled, not required) '
                print(f'{why}first difference at byte {common}: ', end='')
                print(f'DIFFERENT {name}-{version} {" ".join(args)}:\n  llama_run: {ours[:200]!r}\n  {peer}: {theirs[:200]!r}')
            else:
                print(f'same {name}-{version} {" ".join(args)}: {len(ours)} bytes')
print(f'{compared} compared, {failures} greedy different')
sys.exit(1 if failures else 0)
