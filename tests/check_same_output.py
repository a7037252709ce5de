#!/usr/bin/python3
"""Runs two programs (through the cross file's exe_wrapper, which Meson passes in MESON_EXE_WRAPPER) and fails
unless both exit 0 with the same standard output. Usage: check_same_output.py PROGRAM_A PROGRAM_B"""
import os
import shlex
import subprocess
import sys


def run(program):
    cmd = shlex.split(os.environ.get("MESON_EXE_WRAPPER", "")) + [program]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    print(f"$ {program} (exit {r.returncode})\n{r.stdout}")
    return r.returncode, r.stdout


def main():
    a, b = run(sys.argv[1]), run(sys.argv[2])
    if a[0] != 0 or b[0] != 0:
        print("FAIL: a program failed")
        return 1
    if a[1] != b[1]:
        print("FAIL: the outputs differ")
        return 1
    print("same output")
    return 0


if __name__ == "__main__":
    sys.exit(main())
