"""What scripts/mcu_bench.py and scripts/arm_bench.py share: the QEMU TCG plugin that counts instructions
(tools/qemu_insn_count.c, built with the host's gcc) and the budget files that make the counts a CI gate
(one line per case: target op shape instructions; a count may exceed its budget by at most 2 %)."""
import os
import subprocess

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
TOLERANCE = 0.02  # a count may grow by at most 2 % over its budget


def build_plugin():
    out_dir = os.path.join(ROOT, "build-qemu-plugin")
    so = os.path.join(out_dir, "qemu_insn_count.so")
    src = os.path.join(ROOT, "tools", "qemu_insn_count.c")
    if not os.path.isfile(so) or os.path.getmtime(so) < os.path.getmtime(src):
        os.makedirs(out_dir, exist_ok=True)
        subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-o", so, src], check=True)
    return so


class Budgets:
    """The budgets of one file, the counts measured against them, and the failures found."""

    def __init__(self, path, mode):
        self.path, self.mode = path, mode  # mode: None (print), "--check" or "--update"
        self.budgets, self.measured, self.failures = {}, [], []
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                for line in f:
                    if line.strip() and not line.startswith("#"):
                        target, op, shape, insns = line.split()
                        self.budgets[(target, op, shape)] = int(insns)

    def note(self, target, op, shape, insns):
        """Records a count; returns the budget column of the table ("(none)" or "budget (+x.x%)")."""
        self.measured.append((target, op, shape, insns))
        budget = self.budgets.get((target, op, shape))
        if budget is None:
            if self.mode == "--check":
                self.failures.append(f"{target} {op} {shape}: no budget in {os.path.relpath(self.path, ROOT)}")
            return "(none)"
        change = insns / budget - 1.0
        if self.mode == "--check" and change > TOLERANCE:
            self.failures.append(f"{target} {op} {shape}: {insns} instructions, budget {budget} ({change:+.1%})")
        return f"{budget} ({change:+.1%})"

    def finish(self, targets, header, name):
        """--update: rewrites the file (other targets' lines kept). Prints the verdict; returns the exit status."""
        if self.mode == "--update":
            kept = {k: v for k, v in self.budgets.items() if k[0] not in targets}
            kept.update({(t, o, s): i for t, o, s, i in self.measured})
            with open(self.path, "w", encoding="utf-8") as f:
                f.write(header + "# target op shape instructions\n")
                for (t, o, s), i in sorted(kept.items(), key=lambda kv: (kv[0][0], kv[0][1])):
                    f.write(f"{t} {o} {s} {i}\n")
            print(f"wrote {os.path.relpath(self.path, ROOT)}")
        if self.failures:
            print(f"{name.upper()} INSTRUCTION COUNTS FAILED:\n  " + "\n  ".join(self.failures))
            return 1
        if self.mode == "--check":
            print(f"{name.lower()}_bench: every instruction count within 2 % of its budget")
        return 0
