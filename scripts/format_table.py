#!/usr/bin/python3
"""Flash and RAM of the weight and cache formats: the README's table, computed, never typed.

    scripts/format_table.py [-o bench/results/format_sizes.txt] [--cxx c++] [--include include] [--check]

Flash: the weights of MultiHeadAttention<64, 64, 4> (q, k, v, out projections and their biases) and of a 4-layer
encoder (4 x nn.TransformerEncoderLayer(64, 4, dim_feedforward=256): attention, linear1 256 x 64, linear2 64 x 256,
their biases, norm1 and norm2) in f32, f16 and q8 with one float scale per group of 32 or 64 consecutive elements
or per row; biases and norms stay float32 in every format (as scripts/export_weights.py writes them).
RAM: the K/V cache of MultiHeadAttention<1024, 256, 8, 2> in f32, f16 and q8 (int8 K and V rows with one float
scale per row per K/V head), next to the f32 layer's scratch.
The shapes come from the library: a C++ program compiled here against the headers prints the template's
HeadDim, cache_floats, scratch_floats and ram_bytes, and the formulas below must give the same f32 numbers.
"""
import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
F32, F16, I8 = 4, 2, 1  # bytes per element; a q8 scale is a float


def matrix_bytes(rows, cols, fmt, group):
    """Bytes of a rows x cols weight matrix in fmt ('f32', 'f16', 'q8'); q8 group None: one scale per row."""
    n = rows * cols
    if fmt == "f32":
        return n * F32
    if fmt == "f16":
        return n * F16
    g = cols if group is None else group
    if n % g:
        raise ValueError(f"group {g} does not divide {rows} x {cols}")
    return n * I8 + (n // g) * F32


def attention_parts(d, heads, kv_heads):
    """([(rows, cols)] of the weight matrices, float32 bias elements) of one attention layer."""
    hd = d // heads
    kv = kv_heads * hd
    return [(d, d), (kv, d), (kv, d), (d, d)], d + 2 * kv + d


def encoder_layer_parts(d, heads, ff):
    """The same for an nn.TransformerEncoderLayer: attention, linear1 (ff x d), linear2 (d x ff), two LayerNorms."""
    mats, floats = attention_parts(d, heads, heads)
    return mats + [(ff, d), (d, ff)], floats + ff + d + 2 * (d + d)


def weights_bytes(parts, layers, fmt, group):
    mats, floats = parts
    return layers * (sum(matrix_bytes(r, c, fmt, group) for r, c in mats) + floats * F32)


def cache_bytes(max_seq, d, heads, kv_heads, fmt):
    """K and V: max_seq rows of kv_heads x head_dim each; q8 adds one float scale per row per K/V head."""
    hd = d // heads
    elements = 2 * max_seq * kv_heads * hd
    if fmt == "f32":
        return elements * F32
    if fmt == "f16":
        return elements * F16
    return elements * I8 + 2 * max_seq * kv_heads * F32


def template_numbers(cxx, include):
    """{name: value} printed by a program that instantiates the templates the table describes."""
    src = r"""#include <cstdio>
#include <microattn/microattn.hpp>
using Cache = microattn::MultiHeadAttention<1024, 256, 8, 2>;
using Small = microattn::MultiHeadAttention<64, 64, 4>;
int main() {
  std::printf("cache_head_dim %zu\ncache_floats %zu\ncache_scratch_floats %zu\ncache_ram_bytes %zu\n",
              Cache::HeadDim, Cache::cache_floats, Cache::scratch_floats, Cache::ram_bytes);
  std::printf("small_head_dim %zu\n", Small::HeadDim);
}
"""
    with tempfile.TemporaryDirectory() as tmp:
        path, exe = os.path.join(tmp, "probe.cpp"), os.path.join(tmp, "probe")
        with open(path, "w") as f:
            f.write(src)
        subprocess.run(cxx.split() + ["-std=c++17", "-I", include, path, "-o", exe], check=True)
        out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
    return {k: int(v) for k, v in (line.split() for line in out.splitlines())}


def kib(n):
    return f"{n / 1024:.1f} KiB" if n % 1024 else f"{n // 1024} KiB"


def table(t):
    hd = t["cache_head_dim"]
    if hd != 256 // 8 or t["small_head_dim"] != 64 // 4:
        raise SystemExit(f"format_table.py: head dims {hd}, {t['small_head_dim']} differ from the formulas'")
    if cache_bytes(1024, 256, 8, 2, "f32") != t["cache_floats"] * F32:
        raise SystemExit(f"format_table.py: the template's cache_floats {t['cache_floats']} differs from "
                         f"2 * 1024 * 2 * {hd}")
    if t["cache_ram_bytes"] != (t["cache_floats"] + t["cache_scratch_floats"]) * F32:
        raise SystemExit("format_table.py: ram_bytes is not cache + scratch")
    formats = [("f32", "f32", None), ("f16", "f16", None), ("q8, group 32", "q8", 32), ("q8, group 64", "q8", 64),
               ("q8, per row", "q8", None)]
    models = [("`MultiHeadAttention<64, 64, 4>`: q, k, v, out", attention_parts(64, 4, 4), 1),
              ("4-layer encoder, d = 64, ff 256: 4 x `nn.TransformerEncoderLayer(64, 4, 256)`",
               encoder_layer_parts(64, 4, 256), 4)]
    lines = ["Flash of the weight matrices in each format (q8 with its float scales), and of the biases and norms, "
             "which stay float32:", "",
             "| weights | " + " | ".join(f[0] for f in formats) + " | + biases, norms (f32) |",
             "|---|" + "---:|" * (len(formats) + 1)]
    for label, (mats, floats), layers in models:
        f32 = weights_bytes((mats, 0), layers, "f32", None)
        cells = []
        for _, fmt, group in formats:
            b = weights_bytes((mats, 0), layers, fmt, group)
            cells.append(f"{b} B ({kib(b)})" + ("" if fmt == "f32" else f", {b / f32:.3f}x"))
        extra = layers * floats * F32
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {extra} B ({kib(extra)}) |")
    scratch = t["cache_scratch_floats"] * F32
    lines += ["", f"RAM of the K/V cache of `MultiHeadAttention<1024, 256, 8, 2>` (head dim {hd}, 2 K/V heads, "
                  "1024 rows; q8: one float scale per row per K/V head). The f32 layer's scratch, "
                  f"{scratch} B ({kib(scratch)}), comes on top:", "",
              "| cache format | K/V cache | vs f32 |", "|---|---:|---:|"]
    for fmt in ("f32", "f16", "q8"):
        c = cache_bytes(1024, 256, 8, 2, fmt)
        lines.append(f"| {fmt} | {c} B ({kib(c)}) | {c / cache_bytes(1024, 256, 8, 2, 'f32'):.3f}x |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", default=os.path.join(HERE, "..", "bench", "results", "format_sizes.txt"))
    ap.add_argument("--cxx", default="c++", help="C++ compiler for the probe of the templates")
    ap.add_argument("--include", default=os.path.join(HERE, "..", "include"))
    ap.add_argument("--check", action="store_true", help="compare with OUTPUT instead of writing it (exit 1 if stale)")
    args = ap.parse_args()
    text = table(template_numbers(args.cxx, args.include))
    if args.check:
        with open(args.output) as f:
            if f.read() != text:
                sys.exit(f"format_table.py: {args.output} is stale: run scripts/format_table.py")
        print(f"{args.output}: up to date")
        return
    with open(args.output, "w") as f:
        f.write(text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
