#!/usr/bin/python3
"""Instructions per call of microattn and Eigen 3.4 on the Linux ARM targets, counted under qemu-user
(docs/benchmarks.md "Cortex-A (NEON): instruction counts").

Usage: scripts/arm_bench.sh [--check | --update] [TARGET ...]   (TARGET: aarch64-linux-gnu arm-linux-gnueabihf)
  (no option)  print the table
  --check      also compare microattn's counts with scripts/arm_insn_budgets.txt: exit 1 when any grew by more
               than 2 % (or a case has no budget, or a result was wrong)
  --update     rewrite the budgets of the given targets with this run's counts (after a deliberate change)

For each target it builds build-TARGET (set up from cross/TARGET.ini when missing, as scripts/test.sh does: the
library exactly as the cross file builds it, -O3) and its bench/arm/arm_bench program (microattn and Eigen with
the same flags, statically linked), builds the TCG plugin tools/qemu_insn_count.c with the host's gcc into
build-qemu-plugin/, runs the program under qemu-aarch64 / qemu-arm with the plugin given the addresses of
arm_bench_mark_begin/_end, and joins the program's rows (implementation, op, shape, MACs, check) with the
plugin's counts. The count of an empty marker pair (case 0) is subtracted from every row. QEMU models no timing:
the counts are exact and the same on every run, a regression gate that machine load cannot break.
"""
import os
import re
import subprocess
import sys

from insn_budgets import ROOT, Budgets, build_plugin

BUDGETS = os.path.join(ROOT, "scripts", "arm_insn_budgets.txt")
TARGETS = {  # target: (qemu, binutils prefix)
    "aarch64-linux-gnu": ("qemu-aarch64", "aarch64-linux-gnu-"),
    "arm-linux-gnueabihf": ("qemu-arm", "arm-linux-gnueabihf-"),
}


def build_program(target):
    build = os.path.join(ROOT, "build-" + target)
    if not os.path.isfile(os.path.join(build, "build.ninja")):
        subprocess.run(["meson", "setup", build, "--cross-file", os.path.join(ROOT, "cross", target + ".ini"),
                        "-Dbenchmarks=disabled"], check=True, stdout=subprocess.DEVNULL)
    if not has_target(build):
        # A tree configured before Eigen was installed (scripts/test.sh installs each target's packages as it
        # reaches it, after the cross suite set this tree up): Meson looks for Eigen again.
        subprocess.run(["meson", "setup", "--reconfigure", build], check=True, stdout=subprocess.DEVNULL)
        if not has_target(build):
            sys.exit(f"arm_bench.py: {build} has no bench/arm/arm_bench: Eigen (libeigen3-dev) not found "
                     "(scripts/deps.sh peers)")
    subprocess.run(["ninja", "-C", build, "bench/arm/arm_bench"], check=True, stdout=subprocess.DEVNULL)
    return os.path.join(build, "bench", "arm", "arm_bench")


def has_target(build):
    out = subprocess.run(["ninja", "-C", build, "-t", "targets", "all"], check=True, capture_output=True,
                         text=True).stdout
    return any(line.split(":")[0] == "bench/arm/arm_bench" for line in out.splitlines())


def measure(target, plugin):
    qemu, prefix = TARGETS[target]
    prog = build_program(target)
    nm = subprocess.run([prefix + "nm", prog], check=True, capture_output=True, text=True).stdout
    symbols = {f[2]: int(f[0], 16) for f in (line.split() for line in nm.splitlines()) if len(f) == 3}
    begin, end = symbols["arm_bench_mark_begin"], symbols["arm_bench_mark_end"]
    log = prog + ".insns.log"
    proc = subprocess.run(["timeout", "900", qemu, "-plugin", f"{plugin},begin={begin:#x},end={end:#x}", "-d", "plugin",
                           "-D", log, prog], capture_output=True, text=True)
    with open(log, encoding="utf-8") as f:
        counts = {int(m.group(1)): int(m.group(2)) for m in re.finditer(r"^insns (\d+) (\d+)$", f.read(), re.M)}
    rows, problems = [], []
    head = proc.stdout.splitlines()[0] if proc.stdout else ""
    for m in re.finditer(r"^case (\d+) \| (\S+) \| (\S+) \| (\S+) \| (\d+) \| (ok|WRONG RESULT)$", proc.stdout, re.M):
        index, impl, op, shape, macs, check = int(m.group(1)), m.group(2), m.group(3), m.group(4), int(m.group(5)), m.group(6)
        if index == 0:
            continue
        if check != "ok":
            problems.append(f"{target} {impl} {op} {shape}: wrong result")
        rows.append((impl, op, shape, macs, counts.get(index, 0) - counts.get(0, 0)))
    if proc.returncode != 0:
        problems.append(f"{target}: arm_bench exited {proc.returncode}\n{proc.stdout}{proc.stderr}")
    if not rows or len(counts) != len(rows) + 1:
        problems.append(f"{target}: {len(rows)} rows and {len(counts)} counts (plugin log {log})")
    return head, rows, problems


# The NEON kernels whose registers are checked: the gemm tiles, and the row kernels' dot-product chunks and
# AXPY tiles (rows_dot / rows_axpy of the decoding path).
NEON_KERNELS = ("gemm_mrxnr_neon<", "rows_dot_1xn_chunk_neon<", "rows_axpy_1xc_neon<")


def tile_loop_stack_accesses(target):
    """Stack loads and stores inside the loops of every NEON kernel function (NEON_KERNELS) of the build's kernel
    object, from its disassembly: the accumulators must stay in registers. Returns ({name: functions},
    [(function, insn), ...])."""
    _, prefix = TARGETS[target]
    obj = os.path.join(ROOT, "build-" + target, "libmicroattn.a.p", "src_kernels_attention_simd.cpp.o")
    dis = subprocess.run([prefix + "objdump", "-d", "--no-show-raw-insn", "-C", obj], check=True, capture_output=True,
                         text=True).stdout
    counts, bad = {}, []
    for name in NEON_KERNELS:
        counts[name], b = stack_accesses_in_loops(dis, name, target.startswith("aarch64"))
        bad += b
    return counts, bad


def stack_accesses_in_loops(dis, name, aarch64):
    """(functions whose name contains `name`, [(function, instruction)]) for objdump -d output `dis`: memory
    operands on sp (and AArch64's frame pointer x29; on ARMv7 Thumb code fp = r11 is an ordinary register),
    push/pop, between the target and the source of a conditional backward branch (a loop; an unconditional one is
    block layout). A function's epilogue laid out inside such a range is not a spill: restores with post-index
    writeback of sp (AArch64) and pops that load pc (ARMv7) are left out."""
    stack_operand = r"\[(sp|x29)\b" if aarch64 else r"\[sp\b|\bsp!|\b(v?push|v?pop)\b"
    functions, bad = 0, []
    for func in re.finditer(r"^[0-9a-f]+ <([^\n]*)>:\n(.*?)(?:\n\n|\Z)", dis, re.M | re.S):
        if name not in func.group(1):
            continue
        functions += 1
        label = re.search(re.escape(name) + r"[^>]*>", func.group(1))
        label = label.group(0) if label else func.group(1)
        insns = [(int(m.group(1), 16), m.group(2)) for m in re.finditer(r"^\s*([0-9a-f]+):\s+(.*)$", func.group(2), re.M)]
        loops = []
        for addr, text in insns:
            m = re.match(r"(b\S*|cbn?z|tbn?z)\s+(?:\S+,\s*)*([0-9a-f]+) <", text)
            if m and m.group(1) not in ("b", "b.n", "b.w", "bl", "blx") and int(m.group(2), 16) <= addr:
                loops.append((int(m.group(2), 16), addr))
        for addr, text in insns:
            epilogue = re.search(r"\[sp\], #", text) if aarch64 else re.search(r"\b(pop|ldmia(\.w)?\s+sp!).*\bpc\}", text)
            if re.search(stack_operand, text) and not epilogue and any(lo <= addr <= hi for lo, hi in loops):
                bad.append((label, text.strip()))
    return functions, bad


def main():
    args = sys.argv[1:]
    mode = args.pop(0) if args and args[0] in ("--check", "--update") else None
    targets = args or list(TARGETS)
    for t in targets:
        if t not in TARGETS:
            print(f"arm_bench: unknown target {t} (known: {' '.join(TARGETS)})", file=sys.stderr)
            return 2
    plugin = build_plugin()
    budgets = Budgets(BUDGETS, mode)
    failures = budgets.failures
    for target in targets:
        head, rows, problems = measure(target, plugin)
        failures += problems
        print(f"=== {target}: {head}")
        tiles, spills = tile_loop_stack_accesses(target)
        print("NEON kernels: " + ", ".join(f"{n} {name.rstrip('<')}" for name, n in tiles.items()) +
              f" functions, {len(spills)} stack accesses inside their loops")
        failures += [f"{target} {tile}: stack access in a loop: {insn}" for tile, insn in spills[:10]]
        failures += [f"{target}: no {name.rstrip('<')} function in the kernel object" for name, n in tiles.items() if n == 0]
        print(f"{'op':17} {'shape':12} {'MACs':>8} {'microattn':>10} {'/MAC':>6} {'Eigen':>10} {'/MAC':>6} {'ratio':>6}"
              "   budget")
        eigen = {(op, shape): insns for impl, op, shape, _, insns in rows if impl == "eigen"}
        for impl, op, shape, macs, insns in rows:
            if impl != "microattn":
                continue
            note = budgets.note(target, op, shape, insns)
            e = eigen.get((op, shape))
            peer = f"{e:10} {e / macs:6.3f} {insns / e:6.2f}" if e else f"{'-':>10} {'':6} {'':6}"
            print(f"{op:17} {shape:12} {macs:8} {insns:10} {insns / macs:6.3f} {peer}   {note}")
        print()
    return budgets.finish(targets,
                          "# Instructions per call of microattn in bench/arm/arm_bench under qemu-user (scripts/arm_bench.sh\n"
                          "# --update writes this; --check, part of scripts/test.sh, fails when a count exceeds its figure by\n"
                          "# more than 2 %).\n",
                          "ARM")


if __name__ == "__main__":
    sys.exit(main())
