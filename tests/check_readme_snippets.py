#!/usr/bin/python3
"""Compiles every ```cpp and ```c block of README.md, so the documentation cannot drift from the API.
Usage: check_readme_snippets.py README INCLUDE_DIR EXPORT_SCRIPT --cxx CXX... --c CC...
Each block becomes one translation unit: its #include lines first, after a prelude (the umbrella header, and
for C++ <iterator> and `namespace ma = microattn;`), then the block itself, at file scope when it defines a
function, else as the body of a function. A block that includes "weights.h" gets one written by
scripts/export_weights.py from a generated nn.MultiheadAttention(64, 4) state_dict (.npz, needs numpy).
Compiled with -Wall -Wextra -Wpedantic -Werror (unused names allowed: snippets show, they do not use).
Also checks that every `README "Section"` reference in the public headers and sources names a heading of README."""
import os
import re
import subprocess
import sys
import tempfile

PRELUDE = {
    "cpp": "#include <microattn/microattn.hpp>\n#include <iterator>\nnamespace ma = microattn;\n",
    "c": "#include <microattn/microattn.h>\n",
}
FLAGS = {
    "cpp": ["-std=c++17", "-x", "c++"],
    "c": ["-std=c99", "-x", "c"],
}
COMMON = ["-Wall", "-Wextra", "-Wpedantic", "-Werror", "-Wno-unused-variable", "-Wno-unused-but-set-variable",
          "-Wno-unused-function", "-Wno-unused-const-variable"]
FUNCTION_DEFINITION = re.compile(r"^[A-Za-z_][\w\s\*:<>,]*\s\**[A-Za-z_]\w*\s*\([^;]*\)\s*\{")


def blocks(readme):
    """[(line number, language, text)] of the ```cpp and ```c blocks."""
    out, lang, start, body = [], None, 0, []
    with open(readme, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if lang is None:
                m = re.match(r"^```(cpp|c)\s*$", line)
                if m:
                    lang, start, body = m.group(1), n, []
            elif line.startswith("```"):
                out.append((start, lang, "".join(body)))
                lang = None
            else:
                body.append(line)
    return out


def translation_unit(lang, text):
    includes = [l for l in text.splitlines() if l.startswith("#include")]
    rest = "\n".join(l for l in text.splitlines() if not l.startswith("#include"))
    head = PRELUDE[lang] + "\n".join(includes) + "\n"
    if any(FUNCTION_DEFINITION.match(l) for l in rest.splitlines()):
        return head + rest + "\n"
    signature = "void readme_snippet(void)" if lang == "c" else "void readme_snippet()"
    return head + signature + " {\n" + rest + "\n}\n"


def write_weights_header(tmp, export):
    import numpy as np  # only when a block needs it

    rng = np.random.default_rng(3)
    e = 64
    model = os.path.join(tmp, "model.npz")
    np.savez(model, **{"encoder.layers.0.self_attn.in_proj_weight": rng.uniform(-0.1, 0.1, (3 * e, e)),
                       "encoder.layers.0.self_attn.in_proj_bias": rng.uniform(-0.1, 0.1, 3 * e),
                       "encoder.layers.0.self_attn.out_proj.weight": rng.uniform(-0.1, 0.1, (e, e)),
                       "encoder.layers.0.self_attn.out_proj.bias": rng.uniform(-0.1, 0.1, e)})
    subprocess.run([sys.executable, export, model, "--heads", "4", "-o", os.path.join(tmp, "weights.h"),
                    "--name", "model"], check=True, stdout=subprocess.DEVNULL)


def dangling_references(readme, include):
    """`README "X"` references in the headers and sources whose X is no heading of the README."""
    with open(readme, encoding="utf-8") as f:
        headings = {re.sub(r"^#+\s*", "", l).strip() for l in f if l.startswith("#")}
    root = os.path.dirname(os.path.abspath(include))
    bad = []
    for top in (include, os.path.join(root, "src")):
        for dirpath, _, names in os.walk(top):
            for name in names:
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for n, line in enumerate(f, 1):
                        for ref in re.findall(r'README "([^"]+)"', line):
                            if not any(h == ref or h.startswith(ref + " (") for h in headings):
                                bad.append(f"{os.path.relpath(path, root)}:{n}: README \"{ref}\" is no section")
    return bad


def main():
    readme, include, export = sys.argv[1:4]
    args = sys.argv[4:]
    cxx = args[args.index("--cxx") + 1:args.index("--c")]
    cc = args[args.index("--c") + 1:]
    found = blocks(readme)
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        if any('"weights.h"' in text for _, _, text in found):
            write_weights_header(tmp, export)
        for line, lang, text in found:
            src = os.path.join(tmp, f"readme_{line}.{lang}")
            with open(src, "w", encoding="utf-8") as f:
                f.write(translation_unit(lang, text))
            compiler = cxx if lang == "cpp" else cc
            cmd = compiler + FLAGS[lang] + COMMON + ["-I", include, "-I", tmp, "-c", src, "-o", os.devnull]
            r = subprocess.run(cmd, capture_output=True, text=True)
            status = "ok" if r.returncode == 0 else "FAILED"
            print(f"README.md:{line}: ```{lang} block: {status}")
            if r.returncode != 0:
                failures += 1
                print(open(src, encoding="utf-8").read())
                print(r.stderr)
    print(f"{len(found)} blocks, {failures} failed")
    for b in dangling_references(readme, include):
        print(b)
        failures += 1
    return 1 if failures or not found else 0


if __name__ == "__main__":
    sys.exit(main())
