#!/usr/bin/python3
"""Flash and RAM of the llama2.c firmware (examples/llama_mcu) as the Cortex-M builds link it.

  scripts/llama_mcu_size.py OUT BUILD_DIR...   (e.g. build-cortex-m7 build-cortex-m55)

For every firmware the build made (one per model and run of examples/llama_mcu/meson.build) it writes one line:
the target (the build directory's name without "build-"), the model, the weight and cache formats, flash (.text,
.data's initial values and the external-flash section .qspi_rodata), the exported weights (LLAMA_WEIGHT_BYTES of
its header), .bss and the K/V caches in it (layers × 2 × positions × kv_dim elements of the cache format, plus
a float scale per position and KV head for q8). scripts/doc_tables.py reads the file.
"""
import os
import re
import subprocess
import sys

ELEMENT = {"f32": 4, "f16": 2, "q8": 1}


def sections(elf):
    out = subprocess.run(["arm-none-eabi-size", "-A", elf], check=True, capture_output=True, text=True).stdout
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\.\S+)\s+(\d+)\s+\d+$", out, re.M)}


def macros(header):
    text = open(header).read()
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^#define LLAMA_(\w+) (\d+)$", text, re.M)}


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: llama_mcu_size.py OUT BUILD_DIR...")
    lines = ["# scripts/llama_mcu_size.py: examples/llama_mcu's firmware, GCC 12 -Os, bytes",
             "# target model version weights cache: flash weights bss kv_cache"]
    for build in sys.argv[2:]:
        target = os.path.basename(os.path.normpath(build)).removeprefix("build-")
        folder = os.path.join(build, "examples", "llama_mcu")
        for name in sorted(os.listdir(folder)):
            m = re.fullmatch(r"llama_mcu_(\w+?)_(v[02])_(f32|f16|q8)_cache_(f32|f16|q8)_n(\d+)", name)
            if not m:
                continue
            model, version, weights, cache, _ = m.groups()
            s = sections(os.path.join(folder, name))
            h = macros(os.path.join(folder, name.replace("llama_mcu_", "llama_", 1) + ".h"))
            flash = s.get(".text", 0) + s.get(".data", 0) + s.get(".qspi_rodata", 0)
            kv_dim = h["DIM"] // h["HEADS"] * h["KV_HEADS"]
            kv = h["LAYERS"] * 2 * h["SEQ"] * kv_dim * ELEMENT[cache]
            if cache == "q8":
                kv += h["LAYERS"] * 2 * h["SEQ"] * h["KV_HEADS"] * 4
            lines.append(f"{target} {model} {version} {weights} {cache}: {flash} {h['WEIGHT_BYTES']} {s.get('.bss', 0)} {kv}")
    with open(sys.argv[1], "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
