#!/usr/bin/python3
"""Instructions per call and per MAC of microattn on Cortex-M4, M7 and M55, counted under QEMU (docs/cortex-m.md).

Usage: scripts/mcu_bench.sh [--check | --update] [TARGET ...]     (TARGET: cortex-m4 cortex-m7 cortex-m55)
       scripts/mcu_bench.sh --profile TARGET CASE      instructions per function of case CASE alone
       scripts/mcu_bench.sh --profile-steps TARGET CASE  the same per token, of a llama_token case's measured steps
  (no option)  print the table
  --check      also compare with the budgets in scripts/mcu_insn_budgets.txt: exit 1 when any count grew by
               more than 2 % (or a case has no budget, or the firmware reported a wrong result)
  --update     rewrite the budgets file with the counts of this run (after a deliberate change)

For each target it builds build-TARGET (set up from cross/TARGET.ini when missing; the library exactly as the
cross file builds it, -Os) and its mcu/mcu_bench firmware, builds the TCG plugin tools/qemu_insn_count.c with
the host's gcc into build-qemu-plugin/, boots the firmware on the target's QEMU board with the plugin given
the addresses of mcu_bench_mark_begin/_end, and joins the firmware's rows (op, shape, MACs) with the plugin's
counts. The count of an empty marker pair (case 0) is subtracted from every row. QEMU models no timing, so
the counts are exact and the same on every run: a regression gate that machine load cannot break.
"""
import os
import re
import subprocess
import sys

from insn_budgets import ROOT, Budgets, build_plugin

BUDGETS = os.path.join(ROOT, "scripts", "mcu_insn_budgets.txt")
DEFAULT_TARGETS = ["cortex-m4", "cortex-m7", "cortex-m55"]


def run(*cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def build_firmware(target):
    build = os.path.join(ROOT, "build-" + target)
    cross = os.path.join(ROOT, "cross", target + ".ini")
    if not os.path.isfile(os.path.join(build, "build.ninja")):
        subprocess.run(["meson", "setup", build, "--cross-file", cross, "-Dbenchmarks=disabled"], check=True,
                       stdout=subprocess.DEVNULL)
    subprocess.run(["ninja", "-C", build, "mcu/mcu_bench"], check=True, stdout=subprocess.DEVNULL)
    with open(cross, encoding="utf-8") as f:
        board = re.search(r"^board = '([^']+)'", f.read(), re.M).group(1)
    return os.path.join(build, "mcu", "mcu_bench"), board


def measure(target, plugin):
    elf, board = build_firmware(target)
    symbols = {f[2]: int(f[0], 16) for f in (line.split() for line in run("arm-none-eabi-nm", elf).splitlines())
               if len(f) == 3}
    begin, end = symbols["mcu_bench_mark_begin"], symbols["mcu_bench_mark_end"]
    log = elf + ".insns.log"
    proc = subprocess.run(
        ["timeout", "600", "qemu-system-arm", "-M", board, "-nographic", "-monitor", "none", "-serial", "none",
         "-semihosting-config", "enable=on,target=native,arg=mcu_bench",
         "-plugin", f"{plugin},begin={begin:#x},end={end:#x}", "-d", "plugin", "-D", log, "-kernel", elf],
        capture_output=True, text=True)
    with open(log, encoding="utf-8") as f:
        counts = {int(m.group(1)): int(m.group(2)) for m in re.finditer(r"^insns (\d+) (\d+)$", f.read(), re.M)}
    rows, problems = [], []
    head = proc.stdout.splitlines()[0] if proc.stdout else ""
    for m in re.finditer(r"^case (\d+) \| (\S+) \| (\S+) \| (\d+) \|[^|]*\|[^|\n]*(\| WRONG RESULT)?$", proc.stdout,
                         re.M):
        index, op, shape, work, wrong = int(m.group(1)), m.group(2), m.group(3), int(m.group(4)), m.group(5)
        if index == 0:
            continue
        if wrong:
            problems.append(f"{target} {op} {shape}: the firmware reports a wrong result")
        insns = counts.get(index, 0) - counts.get(0, 0)
        rows.append((op, shape, work, insns))
    if proc.returncode != 0:
        problems.append(f"{target}: mcu_bench exited {proc.returncode}\n{proc.stdout}{proc.stderr}")
    if not rows or len(counts) != len(rows) + 1:
        problems.append(f"{target}: {len(rows)} rows and {len(counts)} counts (plugin log {log})")
    return head, rows, problems


def profile(target, case, plugin, mode=None):
    """Instructions per function for one case of the firmware run alone (start-up and checks included); with a mode
    (llama cases: 1 skips the check, 2 the measured steps too) returns them instead of printing."""
    elf, board = build_firmware(target)
    symbols = sorted((int(f[0], 16) & ~1, int(f[1], 16), f[3]) for f in
                     (line.split(maxsplit=3) for line in run("arm-none-eabi-nm", "-S", "-C", "--defined-only", elf).splitlines())
                     if len(f) >= 4 and f[2] in "tTwW")
    prof = elf + ".profile"
    subprocess.run(["timeout", "600", "qemu-system-arm", "-M", board, "-nographic", "-monitor", "none", "-serial",
                    "none", "-semihosting-config",
                    f"enable=on,target=native,arg=mcu_bench,arg={case}" + (f",arg={mode}" if mode else ""),
                    "-plugin", f"{plugin},begin=0,end=0,profile={prof}", "-d", "plugin", "-D", "/dev/null",
                    "-kernel", elf], check=True)
    per_function = {}
    with open(prof, encoding="utf-8") as f:
        for line in f:
            addr, count = (int(x, 0) for x in line.split())
            name = "?"
            for start, size, sym in symbols:
                if start <= (addr & ~1) < start + size:
                    name = sym.replace("(anonymous namespace)::", "").replace("microattn::detail::", "")
                    name = re.sub(r"^(void |float |microattn::Status )", "", name).split("(")[0]
                    break
            per_function[name] = per_function.get(name, 0) + count
    if mode:
        return per_function
    total = sum(per_function.values())
    for name, count in sorted(per_function.items(), key=lambda kv: -kv[1])[:25]:
        print(f"{count:12} {count / total:6.1%}  {name}")


def profile_steps(target, case, plugin):
    """A llama_token case's measured steps alone, per token: the profile with the steps minus the one without."""
    with_steps, without = profile(target, case, plugin, 1), profile(target, case, plugin, 2)
    steps = 8  # llama::steps in mcu/mcu_bench.cpp
    diff = {k: with_steps.get(k, 0) - without.get(k, 0) for k in set(with_steps) | set(without)}
    total = sum(diff.values())
    print(f"{total / steps:12.0f} instructions per token")
    for name, count in sorted(diff.items(), key=lambda kv: -kv[1])[:25]:
        print(f"{count / steps:12.0f} {count / total:6.1%}  {name}")


def main():
    args = sys.argv[1:]
    if args and args[0] == "--profile-steps":
        profile_steps(args[1], int(args[2]), build_plugin())
        return 0
    if args and args[0] == "--profile":
        profile(args[1], int(args[2]), build_plugin())
        return 0
    mode = args.pop(0) if args and args[0] in ("--check", "--update") else None
    targets = args or DEFAULT_TARGETS
    plugin = build_plugin()
    budgets = Budgets(BUDGETS, mode)
    failures = budgets.failures
    for target in targets:
        head, rows, problems = measure(target, plugin)
        failures += problems
        print(f"=== {target}: {head}")
        print(f"{'op':20} {'shape':14} {'MACs':>9} {'instructions':>12} {'per MAC':>8}   budget")
        for op, shape, work, insns in rows:
            note = budgets.note(target, op, shape, insns)
            unit = "per elem" if op == "softmax_rows" else ""
            if op == "llama_token":  # shape 260K_FORMAT@POSITIONxSTEPS: the count covers STEPS tokens
                unit = f"{insns / int(shape.rsplit('x', 1)[1]):.0f} per token"
            print(f"{op:20} {shape:14} {work:9} {insns:12} {insns / work:8.3f}   {note} {unit}".rstrip())
        print()
    return budgets.finish(targets,
                          "# Instructions per call of mcu/mcu_bench under QEMU (scripts/mcu_bench.sh --update writes this;\n"
                          "# --check, part of scripts/test.sh, fails when a count exceeds its figure by more than 2 %).\n",
                          "MCU")


if __name__ == "__main__":
    sys.exit(main())
