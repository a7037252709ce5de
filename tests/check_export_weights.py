#!/usr/bin/python3
"""Test of scripts/export_weights.py: writes state_dicts the way PyTorch names them (a .safetensors file written
here byte by byte, with float32, float16 and bfloat16 tensors, and a .npz), exports them, compiles programs that
run every exported layer through the C API (C) and through MultiHeadAttention (C++), and compares their outputs
with nn.MultiheadAttention's math in numpy float64 on the tensors as generated.
Usage: check_export_weights.py EXPORT_SCRIPT INCLUDE_DIR LIBRARY CC CXX [LINK_FLAG...]"""
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

U = 2.0 ** -24
E, HEADS, TOKENS, MAX_SEQ = 16, 4, 7, 8
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def write_safetensors(path, tensors):
    """tensors: {name: (dtype string, numpy array of that storage type)}"""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, (dtype, arr) in tensors.items():
        raw = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)  # the format pads the header with spaces to 8 bytes
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def as_bf16(x):
    """x (float32) rounded to bfloat16: (storage uint16, value as float64)."""
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)  # round to nearest even
    return bits, (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def mha(x, wq, wk, wv, bq, bk, bv, wo, bo, heads):
    """nn.MultiheadAttention (and grouped-query attention) in float64; None biases are zero."""
    q = x @ wq.T + (0 if bq is None else bq)
    k = x @ wk.T + (0 if bk is None else bk)
    v = x @ wv.T + (0 if bv is None else bv)
    hd = wq.shape[0] // heads
    group = heads // (wk.shape[0] // hd)
    out = np.zeros_like(q)
    for h in range(heads):
        g = h // group
        s = q[:, h * hd:(h + 1) * hd] @ k[:, g * hd:(g + 1) * hd].T / np.sqrt(hd)
        p = np.exp(s - s.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        out[:, h * hd:(h + 1) * hd] = p @ v[:, g * hd:(g + 1) * hd]
    return out if wo is None else out @ wo.T + (0 if bo is None else bo)


def run_programs(tmp, header, name, layers, x, include, library, cc, cxx, link_flags):
    """Outputs (layers × TOKENS × E) of the C and the C++ program."""
    xs = ", ".join("%.9gf" % v for v in x.astype(np.float32).ravel())
    c_src = f"""#include <stdio.h>
#include "{header}"
static const float x[{TOKENS * E}] = {{{xs}}};
static float buffer[MICROATTN_LAYER_BUFFER_FLOATS({MAX_SEQ}, {E}, {HEADS}, {name.upper()}_KV_HEADS)];
static float y[{TOKENS * E}];
int main(void) {{
  int i, j;
  for (i = 0; i < {name.upper()}_LAYERS; ++i) {{
    microattn_layer layer;
    microattn_cview xv = {{x, {TOKENS}, {E}, {E}}};
    microattn_view yv = {{y, {TOKENS}, {E}, {E}}};
    if (microattn_layer_init(&layer, {MAX_SEQ}, {name.upper()}_MODEL_DIM, {name.upper()}_HEADS,
                             {name.upper()}_KV_HEADS, &{name}_c_weights[i], buffer,
                             sizeof buffer / sizeof buffer[0]) != MICROATTN_OK ||
        microattn_layer_forward(&layer, xv, yv, NULL) != MICROATTN_OK) return 1;
    for (j = 0; j < {TOKENS * E}; ++j) printf("%.9g\\n", (double)y[j]);
  }}
  return 0;
}}
"""
    cpp_src = f"""#include <cstdio>
#include "{header}"
static const float x[{TOKENS * E}] = {{{xs}}};
using Layer = microattn::MultiHeadAttention<{MAX_SEQ}, {name.upper()}_MODEL_DIM, {name.upper()}_HEADS, {name.upper()}_KV_HEADS>;
static float y[{TOKENS * E}];
int main() {{
  for (int i = 0; i < {name.upper()}_LAYERS; ++i) {{
    Layer layer{{{name}_weights[i]}};
    if (layer.forward(microattn::make_view(x, {TOKENS}, {E}), microattn::make_view(y, {TOKENS}, {E})) !=
        microattn::Status::ok) return 1;
    for (float v : y) std::printf("%.9g\\n", double{{v}});
  }}
}}
"""
    results = []
    for lang, compiler, src, flags in (("c", cc, c_src, ["-std=c99"]), ("cpp", cxx, cpp_src, ["-std=c++17"])):
        path = os.path.join(tmp, f"use_{name}.{lang}")
        exe = os.path.join(tmp, f"use_{name}_{lang}")
        with open(path, "w") as f:
            f.write(src)
        cmd = [compiler] + flags + ["-Wall", "-Wextra", "-Wpedantic", "-Werror", "-I", include, "-I", tmp, "-c", path,
                                    "-o", exe + ".o"]
        subprocess.run(cmd, check=True)
        # C links with the C driver: the library needs nothing of the C++ runtime (microattn.h)
        subprocess.run([compiler, exe + ".o", library, "-o", exe, "-lm"] + link_flags, check=True)
        out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout.split()
        results.append(np.array([float(v) for v in out]).reshape(len(layers), TOKENS, E))
    return results


def compare(what, got, want):
    for i, (g, w) in enumerate(zip(got, want)):
        row_max = np.abs(w).max(axis=1, keepdims=True)
        bound = 8.0 * (3 * E + 2 * TOKENS + 32) * U * row_max + 1e-6
        err = np.abs(g - w)
        check(np.all(err <= bound), f"{what} layer {i}: max error {err.max():.3g} > bound")
        print(f"{what} layer {i}: max |error| {err.max():.3g} (bound {bound.min():.3g}..{bound.max():.3g})")


def main():
    export, include, library, cc, cxx = sys.argv[1:6]
    link_flags = sys.argv[6:]
    rng = np.random.default_rng(11)
    x = rng.uniform(-1, 1, (TOKENS, E)).astype(np.float32).astype(np.float64)

    with tempfile.TemporaryDirectory() as tmp:
        # 1. nn.MultiheadAttention, two layers of an encoder, one tensor per storage type
        st, want, dtypes = {}, [], ["F32", "F16", "BF16"]
        for i in range(2):
            p = f"encoder.layers.{i}.self_attn."
            vals = {}
            for j, (key, shape) in enumerate((("in_proj_weight", (3 * E, E)), ("in_proj_bias", (3 * E,)),
                                              ("out_proj.weight", (E, E)), ("out_proj.bias", (E,)))):
                v = rng.uniform(-0.3, 0.3, shape).astype(np.float32)
                dtype = dtypes[(i + j) % 3]
                if dtype == "F32":
                    st[p + key] = ("F32", v)
                    vals[key] = v.astype(np.float64)
                elif dtype == "F16":
                    h = v.astype(np.float16)
                    st[p + key] = ("F16", h)
                    vals[key] = h.astype(np.float64)
                else:
                    bits, value = as_bf16(v)
                    st[p + key] = ("BF16", bits)
                    vals[key] = value
            st[f"encoder.layers.{i}.norm1.weight"] = ("F32", np.ones(E, np.float32))  # not attention: ignored
            w, b = vals["in_proj_weight"], vals["in_proj_bias"]
            want.append(mha(x, w[:E], w[E:2 * E], w[2 * E:], b[:E], b[E:2 * E], b[2 * E:], vals["out_proj.weight"],
                            vals["out_proj.bias"], HEADS))
        model = os.path.join(tmp, "encoder.safetensors")
        write_safetensors(model, st)
        header = os.path.join(tmp, "encoder_weights.h")
        subprocess.run([export, model, "--heads", str(HEADS), "-o", header, "--name", "enc"], check=True)
        got = run_programs(tmp, header, "enc", range(2), x, include, library, cc, cxx, link_flags)
        compare("safetensors MHA (C API)", got[0], want)
        compare("safetensors MHA (C++)", got[1], want)
        check(np.array_equal(got[0], got[1]), "C and C++ outputs differ")

        # 2. Llama-style names, grouped-query attention (2 key/value heads), q bias only, no o_proj bias, in .npz;
        #    --prefix picks layers 1 and 2 of three
        kv = 2
        hd = E // HEADS
        tensors, want = {}, []
        for i in range(3):
            p = f"model.layers.{i}.self_attn."
            wq = rng.uniform(-0.3, 0.3, (E, E)).astype(np.float32)
            wk = rng.uniform(-0.3, 0.3, (kv * hd, E)).astype(np.float32)
            wv = rng.uniform(-0.3, 0.3, (kv * hd, E)).astype(np.float32)
            wo = rng.uniform(-0.3, 0.3, (E, E)).astype(np.float32)
            bq = rng.uniform(-0.3, 0.3, E).astype(np.float32)
            tensors.update({p + "q_proj.weight": wq, p + "k_proj.weight": wk, p + "v_proj.weight": wv,
                            p + "o_proj.weight": wo, p + "q_proj.bias": bq})
            if i >= 1:
                f64 = [a.astype(np.float64) for a in (wq, wk, wv, bq, wo)]
                want.append(mha(x, f64[0], f64[1], f64[2], f64[3], None, None, f64[4], None, HEADS))
        model = os.path.join(tmp, "llama.npz")
        np.savez(model, **tensors)
        header = os.path.join(tmp, "llama_weights.h")
        subprocess.run([export, model, "--heads", str(HEADS), "--kv-heads", str(kv), "--prefix",
                        r"model\.layers\.[12]\.", "-o", header, "--name", "llama"], check=True)
        with open(header) as f:
            text = f.read()
        check("#define LLAMA_LAYERS 2" in text and "#define LLAMA_KV_HEADS 2" in text, "llama header macros")
        got = run_programs(tmp, header, "llama", range(2), x, include, library, cc, cxx, link_flags)
        compare("npz Llama GQA (C API)", got[0], want)
        compare("npz Llama GQA (C++)", got[1], want)

        # 3. errors: a wrong --kv-heads and a file without attention layers are refused
        r = subprocess.run([export, model, "--heads", str(HEADS), "--kv-heads", "4", "-o", header],
                           capture_output=True, text=True)
        check(r.returncode != 0 and "kv-heads" in (r.stderr + r.stdout), "wrong --kv-heads accepted")
        empty = os.path.join(tmp, "empty.safetensors")
        write_safetensors(empty, {"w": ("F32", np.ones((2, 2), np.float32))})
        r = subprocess.run([export, empty, "--heads", "1", "-o", header], capture_output=True, text=True)
        check(r.returncode != 0 and "no attention layer" in r.stderr, "file without layers accepted")

    print("FAILED" if failures else "PASSED", f"({len(failures)} failures)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
