#!/bin/sh
# Instructions per call of microattn and Eigen on AArch64 and ARMv7 (NEON) under qemu-user, with the TCG plugin
# tools/qemu_insn_count.c (docs/benchmarks.md). See scripts/arm_bench.py for the options:
#   scripts/arm_bench.sh [--check | --update] [aarch64-linux-gnu arm-linux-gnueabihf]
set -eu
cd "$(dirname "$0")/.."
exec /usr/bin/python3 scripts/arm_bench.py "$@"
