#!/usr/bin/python3
"""Compiles every ```cpp and ```c block of README.md and docs/*.md, so the documentation cannot drift from the API.
Usage: check_readme_snippets.py README INCLUDE_DIR EXPORT_SCRIPT --cxx CXX... --c CC...
(docs/*.md is found next to README.)
Each block becomes one translation unit: its #include lines first, after a prelude (the umbrella header, and
for C++ <iterator> and `namespace ma = microattn;`), then the block itself, at file scope when it defines a
function, else as the body of a function. A block that includes "weights.h" gets one written by
scripts/export_weights.py --format q8 --group 32 from a generated nn.MultiheadAttention(64, 4) state_dict (.npz,
needs numpy); one that includes "encoder_weights.h", one of a generated 2-layer nn.TransformerEncoder (the
encoder recipe's).
Compiled with -Wall -Wextra -Wpedantic -Werror (unused names allowed: snippets show, they do not use).
Also checks that every `README "Section"` or `docs/FILE.md "Section"` reference in the public headers, the sources
and CMakeLists.txt names a heading of that document ("Section" may also be the start of a heading followed by
" (")."""
import glob
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
    # As README's example: int8 with a scale per 32 weights (the header then holds model_matrices too).
    subprocess.run([sys.executable, export, model, "--heads", "4", "-o", os.path.join(tmp, "weights.h"),
                    "--name", "model", "--format", "q8", "--group", "32"], check=True, stdout=subprocess.DEVNULL)


def write_encoder_header(tmp, export):
    """encoder_weights.h: a generated 2-layer nn.TransformerEncoder(d 32, 4 heads, feed-forward 64) exported as the
    README's encoder recipe does (--activation gelu --format q8)."""
    import numpy as np

    rng = np.random.default_rng(4)
    e, ff, t = 32, 64, {}
    for i in range(2):
        b = f"encoder.layers.{i}."
        for key, shape in (("self_attn.in_proj_weight", (3 * e, e)), ("self_attn.in_proj_bias", (3 * e,)),
                           ("self_attn.out_proj.weight", (e, e)), ("self_attn.out_proj.bias", (e,)),
                           ("linear1.weight", (ff, e)), ("linear1.bias", (ff,)), ("linear2.weight", (e, ff)),
                           ("linear2.bias", (e,)), ("norm1.weight", (e,)), ("norm1.bias", (e,)),
                           ("norm2.weight", (e,)), ("norm2.bias", (e,))):
            t[b + key] = rng.uniform(-0.1, 0.1, shape).astype(np.float32)
    model = os.path.join(tmp, "encoder_model.npz")
    np.savez(model, **t)
    subprocess.run([sys.executable, export, model, "--heads", "4", "--activation", "gelu", "--format", "q8", "-o",
                    os.path.join(tmp, "encoder_weights.h")], check=True, stdout=subprocess.DEVNULL)


def headings(path):
    """The Markdown headings of a document (lines starting with '#' outside fenced code blocks)."""
    out, fenced = set(), False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                fenced = not fenced
            elif not fenced and re.match(r"^#+\s", line):
                out.add(re.sub(r"^#+\s*", "", line).strip())
    return out


def dangling_references(readme, include):
    """`README "X"` and `docs/F.md "X"` references in the headers, sources and CMakeLists.txt whose X is no heading
    of that document."""
    root = os.path.dirname(os.path.abspath(readme))
    known = {}
    bad = []
    paths = [os.path.join(root, "CMakeLists.txt")]
    for top in (include, os.path.join(root, "src")):
        for dirpath, _, names in os.walk(top):
            paths += [os.path.join(dirpath, name) for name in names]
    for path in paths:
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                for doc, ref in re.findall(r'(README|docs/[\w-]+\.md) "([^"]+)"', line):
                    target = readme if doc == "README" else os.path.join(root, doc)
                    if target not in known:
                        known[target] = headings(target) if os.path.isfile(target) else None
                    where = f"{os.path.relpath(path, root)}:{n}: {doc} \"{ref}\""
                    if known[target] is None:
                        bad.append(f"{where}: there is no {doc}")
                    elif not any(h == ref or h.startswith(ref + " (") for h in known[target]):
                        bad.append(f"{where} is no section of {doc}")
    return bad


def main():
    readme, include, export = sys.argv[1:4]
    args = sys.argv[4:]
    cxx = args[args.index("--cxx") + 1:args.index("--c")]
    cc = args[args.index("--c") + 1:]
    docs = [readme] + sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(readme)), "docs", "*.md")))
    found = [(doc, line, lang, text) for doc in docs for line, lang, text in blocks(doc)]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        if any('"weights.h"' in text for _, _, _, text in found):
            write_weights_header(tmp, export)
        if any('"encoder_weights.h"' in text for _, _, _, text in found):
            write_encoder_header(tmp, export)
        for doc, line, lang, text in found:
            name = os.path.splitext(os.path.basename(doc))[0].replace("-", "_")
            src = os.path.join(tmp, f"{name}_{line}.{lang}")
            with open(src, "w", encoding="utf-8") as f:
                f.write(translation_unit(lang, text))
            compiler = cxx if lang == "cpp" else cc
            cmd = compiler + FLAGS[lang] + COMMON + ["-I", include, "-I", tmp, "-c", src, "-o", os.devnull]
            r = subprocess.run(cmd, capture_output=True, text=True)
            status = "ok" if r.returncode == 0 else "FAILED"
            print(f"{os.path.relpath(doc, os.path.dirname(os.path.abspath(readme)))}:{line}: ```{lang} block: {status}")
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
