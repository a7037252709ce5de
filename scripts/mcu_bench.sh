#!/bin/sh
# Instructions per call and per MAC of microattn on Cortex-M4, M7 and M55 under QEMU, with a TCG plugin built
# from tools/qemu_insn_count.c (docs/cortex-m.md). See scripts/mcu_bench.py for the options:
#   scripts/mcu_bench.sh [--check | --update] [cortex-m4 cortex-m7 cortex-m55]
set -eu
cd "$(dirname "$0")/.."
exec /usr/bin/python3 scripts/mcu_bench.py "$@"
