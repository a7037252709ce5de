#!/usr/bin/python3
"""docs/design.md against the code: every file it names exists and every file of src/ is named, every kernel it
names is defined (or reported by a table) in src/, and every kernel name a table reports at run time is in it.

Usage: scripts/design_check.py [ROOT]   (the Meson test DesignDoc; exit 1 naming each mismatch)
A file is a backticked name with a source or doc extension, or a directory ending in a slash: some path of the
repository must end with it (shell patterns allowed: `include/microattn/*.hpp`). A kernel is a
backticked lowercase identifier ending in an arch of the naming rule (template arguments ignored); `…_x`-style
abbreviations (`_2x4_avx2`) are expanded from the kernel named before them in the same paragraph.
"""
import fnmatch
import os
import re
import sys

ARCHES = ("scalar", "sse2", "avx2", "avx512", "neon", "neon64", "helium", "armv7em", "x86", "simd", "avx512vnni",
          "avxvnni", "neon64dot")
KERNEL = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*_(" + "|".join(ARCHES) + r")$")
TICK = re.compile(r"`([^`]+)`")
FILE_EXT = (".cpp", ".hpp", ".h", ".md", ".ld", ".py", ".sh", ".txt")


def source_texts(root):
    texts = {}
    for base in ("src", "include"):
        for d, _, names in os.walk(os.path.join(root, base)):
            for n in names:
                if n.endswith((".cpp", ".hpp", ".h", ".c")):
                    p = os.path.join(d, n)
                    with open(p, encoding="utf-8") as f:
                        texts[os.path.relpath(p, root)] = f.read()
    return texts


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    with open(os.path.join(root, "docs", "design.md"), encoding="utf-8") as f:
        doc = f.read()
    texts = source_texts(root)
    code = "\n".join(texts.values())
    identifiers = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", code))
    literals = set(re.findall(r'"([a-z0-9_+]+)"', code))
    # Names pasted at compile time: "linear_f32_gemm_" MICROATTN_F16_ARCH, with each value the macro is defined to.
    macro_values = {}
    for name, value in re.findall(r'#define\s+([A-Z0-9_]+)\s+"([a-z0-9_]+)"', code):
        macro_values.setdefault(name, set()).add(value)
    for prefix, name in re.findall(r'"([a-z0-9_]+)"\s+([A-Z0-9_]+)', code):
        literals |= {prefix + v for v in macro_values.get(name, ())}
    problems = []

    # Files: a repository path that ends with the name (a directory for `dir/`; `*` as in a shell).
    paths, dirs = [], []
    for d, subdirs, names in os.walk(root):
        subdirs[:] = [x for x in subdirs if not x.startswith((".", "build")) and x != "subprojects"]
        rel = os.path.relpath(d, root).replace(os.sep, "/")
        dirs.append("/" + rel + "/")
        paths += ["/" + (rel + "/" if rel != "." else "") + n for n in names]
    for tok in sorted({t.strip() for t in TICK.findall(doc)}):
        if " " in tok or tok.startswith(("-", "http")) or not (tok.endswith(FILE_EXT) or tok.endswith("/")):
            continue
        pool = dirs if tok.endswith("/") else paths
        if not any(fnmatch.fnmatch(p, "*/" + tok) for p in pool):
            problems.append(f"file `{tok}`: not in the repository")

    # Every file of src/ has its row (or a mention).
    names = {t.strip() for t in TICK.findall(doc)}
    for d, _, files in os.walk(os.path.join(root, "src")):
        for n in files:
            rel = os.path.relpath(os.path.join(d, n), os.path.join(root, "src")).replace(os.sep, "/")
            if not any(t == n or rel == t or rel.endswith("/" + t) or t.endswith("/" + rel) for t in names):
                problems.append(f"src/{rel}: not named in docs/design.md")

    # Kernels named in the doc.
    named = set()
    for para in re.split(r"\n\s*\n", doc):
        prev = None
        for tok in TICK.findall(para):
            name = re.sub(r"<.*", "", tok.strip())
            if name.startswith("_") and prev is not None:
                # `_2x4_avx2` after `linear_q8_2x4_avx512vnni`: the op of the one before, this tile and arch.
                op = re.match(r"^(linear_f32_gemm|linear_(?:f16|q8)|gemm|rows_dot|rows_axpy|attn_[a-z_]+?)_", prev)
                if op is None:
                    continue
                name = op.group(1) + name
            if not KERNEL.match(name):
                continue
            prev = name
            named.add(name)
            if name not in identifiers and name not in literals:
                problems.append(f"kernel `{name}`: no function, table entry or reported name of that name in src/")

    # Other names (snake_case, one underscore or more): somewhere in the code, examples, tests or scripts.
    everything = code
    for base in ("examples", "mcu", "bench", "tests", "scripts"):
        for d, _, files in os.walk(os.path.join(root, base)):
            for n in files:
                if n.endswith((".cpp", ".hpp", ".h", ".c", ".py", ".sh", ".build")):
                    with open(os.path.join(d, n), encoding="utf-8", errors="replace") as f:
                        everything += "\n" + f.read()
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", everything))
    for tok in sorted(names):
        word = re.sub(r"(<.*|\(.*|::.*)", "", tok)
        if re.fullmatch(r"[a-z][a-z0-9]*(_[a-z0-9]+)+", word) and not KERNEL.match(word) and word not in words:
            problems.append(f"`{tok}`: no such name in the code")

    # Every name a table reports must be in the doc.
    reported = {s for s in literals if KERNEL.match(s) and s.split("_")[0] in ("gemm", "linear")}
    for name in sorted(reported - named):
        problems.append(f"reported kernel name \"{name}\" (src/): not named in docs/design.md")

    for p in problems:
        print(f"design_check.py: {p}")
    if problems:
        return 1
    print(f"design_check.py: docs/design.md names {len(named)} kernels, all in src/; src/ reports {len(reported)}, "
          "all named")
    return 0


if __name__ == "__main__":
    sys.exit(main())
