#!/usr/bin/python3
"""The host runner's greedy text must still be the committed expected file the firmware tests compare against.

    check_host_text.py LLAMA_RUN CHECKPOINT TOKENIZER STEPS EXPECTED

Runs `LLAMA_RUN CHECKPOINT -t 0 -n STEPS -z TOKENIZER` and compares its stdout with EXPECTED byte for byte.
"""
import subprocess
import sys


def main():
    run, ckpt, tok, steps, expected = sys.argv[1:6]
    p = subprocess.run([run, ckpt, "-t", "0", "-n", steps, "-z", tok], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        print(f"llama_run exited {p.returncode}: {p.stderr.decode(errors='replace')}")
        return 1
    with open(expected, "rb") as f:
        want = f.read()
    if p.stdout != want:
        at = next((i for i, (a, b) in enumerate(zip(p.stdout, want)) if a != b), min(len(p.stdout), len(want)))
        print(f"FAIL: llama_run's text differs from {expected} at byte {at} ({len(p.stdout)} vs {len(want)} bytes)")
        print(f"  llama_run: {p.stdout[max(0, at - 20):at + 20]!r}")
        print(f"  expected:  {want[max(0, at - 20):at + 20]!r}")
        print(f"If the change is intended (and no near-tie: LLAMA_RUN_TIES=1e-3), regenerate it:\n"
              f"  {run} {ckpt} -t 0 -n {steps} -z {tok} > {expected}")
        return 1
    print(f"llama_run -t 0 -n {steps}: {len(want)} bytes, as {expected}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
