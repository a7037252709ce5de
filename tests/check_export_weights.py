#!/usr/bin/python3
"""Test of scripts/export_weights.py: writes state_dicts the way PyTorch names them (a .safetensors file written
here byte by byte, with float32, float16 and bfloat16 tensors, and a .npz), exports them, compiles programs that
run every exported layer through the C API (C) and through MultiHeadAttention (C++), and compares their outputs
with nn.MultiheadAttention's math in numpy float64 on the tensors as generated.
Then the weight formats (--format f32, f16, q8 with groups per row, straddling rows evenly and unevenly, the
whole matrix): the header's arrays decoded here (binary16 bits by hand, q8 as scale * q) and compared with the
source tensors (f16: the bit pattern struct's own 'e' conversion gives, so within half an ulp; q8: the scale
float32(max|w| / 127), |w - scale * q| <= scale / 2, ties to even, and, when PyTorch is installed, the same
int8 values and scales as llama2.c's quantization written with torch ops), and every projection run through
microattn_linear (C, NAME_c_matrices) and microattn::linear (C++, NAME_matrices) against a float64 product with
the decoded weights, within linear's bound, with canaries around y. A .pt state_dict gives the same header as
the .safetensors one when PyTorch is installed (skipped with a message otherwise).
With PyTorch, also whole nn.TransformerEncoder blocks against its float64 forward (post- and pre-norm, ReLU and
GELU, f32 and q8; wrong --activation / --norm-first must miss it). Then nn.TransformerEncoderLayer blocks (an
nn.Transformer-like file: a decoder layer that must stay attention-only, an encoder layer with biases and one
without): the block arrays hold the file's numbers in every format, and C and C++ programs check that
NAME_encoder_weights / NAME_c_encoder_weights point at them with their shapes and that the config carries
--norm-first / --activation / --layer-norm-eps.
Usage: check_export_weights.py EXPORT_SCRIPT INCLUDE_DIR LIBRARY CC CXX [LINK_FLAG...]"""
import re
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

U = 2.0 ** -24
E, HEADS, TOKENS, MAX_SEQ = 16, 4, 7, 8
from check_util import check, failures  # noqa: E402


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


# --- weight formats --------------------------------------------------------------------------------------------

FE, FHEADS, FTOKENS = 12, 3, 5  # 12 columns: group 8 straddles rows unevenly, 36 evenly (3 rows)


def header_arrays(text):
    """{identifier: numpy array} of the header's static const float / uint16_t / int8_t arrays."""
    arrays = {}
    for ctype, ident, n, body in re.findall(r"^static const (float|uint16_t|int8_t) (\w+)\[(\d+)\] \w+ = \{\n(.*?)\n\};$",
                                            text, re.M | re.S):
        items = [v.strip() for v in body.replace("\n", " ").split(",") if v.strip()]
        if ctype == "float":
            a = np.array([float(v.rstrip("f")) for v in items], np.float32)
        elif ctype == "uint16_t":
            a = np.array([int(v, 16) for v in items], np.uint16)
        else:
            a = np.array([int(v) for v in items], np.int8)
        check(a.size == int(n), f"{ident}: {a.size} values for [{n}]")
        arrays[ident] = (ctype, a)
    return arrays


def half_value(bits):
    """binary16 bit pattern -> float64, from the format's definition (not numpy's conversion)."""
    sign = -1.0 if bits & 0x8000 else 1.0
    e, m = (bits >> 10) & 0x1F, bits & 0x3FF
    if e == 0x1F:
        return sign * np.inf if m == 0 else np.nan
    return sign * (m * 2.0 ** -24 if e == 0 else (1024 + m) * 2.0 ** (e - 25))


def half_ulp(v):
    """The spacing of binary16 values at |v| (2**-24 for subnormals)."""
    a = abs(v)
    return 2.0 ** -24 if a < 2.0 ** -14 else 2.0 ** (np.floor(np.log2(a)) - 10)


def torch_quantize_q80(w, group):
    """llama2.c's export.py quantize_q80 restated with torch ops: (int8 values, float32 scales)."""
    import torch
    t = torch.from_numpy(w.astype(np.float32).reshape(-1, group))
    scale = t.abs().max(dim=1).values / 127.0
    q = torch.round(t / scale[:, None]).to(torch.int8)
    return q.numpy().reshape(w.shape), scale.numpy()


def have_torch():
    try:
        import torch  # noqa: F401
        return True
    except ImportError:
        return False


def decoded_weights(what, arrays, ident, source, fmt, group):
    """The weight matrix ident of the header decoded (float64), after checking it against source (float64)."""
    ctype, data = arrays[ident]
    rows, cols = source.shape
    if fmt == "f32":
        check(ctype == "float" and np.array_equal(data.astype(np.float64), source.ravel()), f"{what}: f32 values")
        return data.astype(np.float64).reshape(rows, cols)
    if fmt == "f16":
        check(ctype == "uint16_t", f"{what}: f16 stored as {ctype}")
        dec = np.array([half_value(int(b)) for b in data]).reshape(rows, cols)
        want = np.array([struct.unpack("<H", struct.pack("<e", float(v)))[0] for v in source.ravel()], np.uint16)
        check(np.array_equal(data, want), f"{what}: f16 bits differ from round-to-nearest-even at "
                                          f"{np.flatnonzero(data != want)[:5]}")
        err = np.abs(dec - source)
        ulp = np.array([half_ulp(v) for v in source.ravel()]).reshape(rows, cols)
        check(np.all(err <= ulp / 2), f"{what}: f16 error {err.max():.3g} over half an ulp")
        return dec
    check(ctype == "int8_t", f"{what}: q8 stored as {ctype}")
    g = group or cols
    _, scales = arrays[ident[:-len("_weight")] + "_scales"]
    check(scales.size == rows * cols // g, f"{what}: {scales.size} scales for group {g}")
    s = scales.astype(np.float64)
    q = data.astype(np.float64).reshape(-1, g)
    src = source.reshape(-1, g)
    want_scale = (np.abs(src).max(axis=1) / 127).astype(np.float32)  # correctly rounded: float64, then float32
    check(np.array_equal(scales, want_scale), f"{what}: scales are not float32(max|w| / 127)")
    check(np.all(np.abs(q) <= 127), f"{what}: |q| > 127")
    dec = s[:, None] * q
    err = np.abs(dec - src)
    check(np.all(err <= s[:, None] * (0.5 + 2.0 ** -17)), f"{what}: q8 error over scale / 2: "
          f"{(err / np.maximum(s[:, None], 1e-300)).max():.6g} scales")
    ratio = np.divide(src, s[:, None], out=np.zeros_like(src), where=s[:, None] > 0)
    ties = (ratio - np.floor(ratio) == 0.5)
    check(np.all(q[ties] % 2 == 0), f"{what}: a tie not rounded to even: w/scale {ratio[ties][q[ties] % 2 != 0]}")
    check(np.all(q[s == 0] == 0), f"{what}: an all-zero group with q != 0")
    if have_torch():
        tq, ts = torch_quantize_q80(source, g)
        zero = np.repeat(ts == 0, g).reshape(rows, cols)  # llama2.c divides 0 by 0 there
        check(np.array_equal(tq[~zero], data.reshape(rows, cols)[~zero]) and
              np.array_equal(ts[ts > 0], scales[ts > 0]), f"{what}: differs from llama2.c's quantize_q80")
    return dec.reshape(rows, cols), int(ties.sum())


def layer_matrices_stand_in(include):
    """The C struct of a layer's weight matrices, with the fields fixed for the C API, where microattn.h does
    not declare it yet ('' where it does)."""
    with open(os.path.join(include, "microattn", "microattn.h")) as f:
        if "microattn_layer_weight_matrices;" in f.read():
            return ""
    return """
typedef struct {
  microattn_weight_matrix q, k, v;
  const float* q_bias;
  const float* k_bias;
  const float* v_bias;
  microattn_weight_matrix out;
  const float* out_bias;
} microattn_layer_weight_matrices;
"""


def linear_programs(tmp, header, name, layers, x, include, library, cc, cxx, link_flags):
    """Runs every projection of the header through microattn_linear (C) and microattn::linear (C++):
    [{(layer, field): (format, rows, cols, group, y)}] for C and C++."""
    m, k = x.shape
    xs = ", ".join("%.9ef" % v for v in x.astype(np.float32).ravel())
    stand_in = layer_matrices_stand_in(include)
    canary = 8
    body = []
    for i, f in layers:
        body.append(f'  run("{i} {f}", &{name}_c_matrices[{i}].{f}, {name}_c_matrices[{i}].{f}_bias);')
    c_src = f"""#include <stdio.h>
#include <microattn/microattn.h>
{stand_in}
#include "{header}"
static const float x[{m * k}] = {{{xs}}};
static float y[{canary} + {m} * {k} * 4 + {canary}];
static void run(const char* what, const microattn_weight_matrix* w, const float* bias) {{
  size_t j, n = {m} * w->rows;
  int ok = 1;
  microattn_cview xv = {{x, {m}, {k}, {k}}};
  microattn_view yv;
  yv.data = y + {canary}; yv.rows = {m}; yv.cols = w->rows; yv.stride = w->rows;
  for (j = 0; j < sizeof y / sizeof y[0]; ++j) y[j] = 1234.5f;
  if (microattn_linear(xv, w, bias, yv) != MICROATTN_OK) ok = 0;
  for (j = 0; j < {canary}; ++j) ok &= y[j] == 1234.5f && y[{canary} + n + j] == 1234.5f;
  printf("M %s %d %u %u %u %d\\n", what, (int)w->format, (unsigned)w->rows, (unsigned)w->cols, (unsigned)w->group, ok);
  for (j = 0; j < n; ++j) printf("%.9g\\n", (double)y[{canary} + j]);
}}
int main(void) {{
{chr(10).join(body)}
  return 0;
}}
"""
    cpp_body = [f'  run("{i} {f}", {name}_matrices[{i}].{f}, {name}_matrices[{i}].{f}_bias);' for i, f in layers]
    cpp_src = f"""#include <cstdio>
#include <microattn/microattn.h>
{stand_in}
#include "{header}"
static const float x[{m * k}] = {{{xs}}};
static float y[{canary} + {m} * {k} * 4 + {canary}];
static void run(const char* what, const microattn::WeightMatrix& w, const float* bias) {{
  std::size_t n = {m} * w.rows;
  int ok = 1;
  for (float& v : y) v = 1234.5f;
  if (microattn::linear(microattn::make_view(x, {m}, {k}), w, bias, microattn::make_view(y + {canary}, {m}, w.rows)) !=
      microattn::Status::ok) ok = 0;
  for (std::size_t j = 0; j < {canary}; ++j) ok &= y[j] == 1234.5f && y[{canary} + n + j] == 1234.5f;
  std::printf("M %s %d %u %u %u %d\\n", what, int(w.format), unsigned(w.rows), unsigned(w.cols), unsigned(w.group), ok);
  for (std::size_t j = 0; j < n; ++j) std::printf("%.9g\\n", double{{y[{canary} + j]}});
}}
int main() {{
{chr(10).join(cpp_body)}
}}
"""
    results = []
    for lang, compiler, src, flags in (("c", cc, c_src, ["-std=c99"]), ("cpp", cxx, cpp_src, ["-std=c++17"])):
        path = os.path.join(tmp, f"linear_{name}.{lang}")
        exe = os.path.join(tmp, f"linear_{name}_{lang}")
        with open(path, "w") as f:
            f.write(src)
        subprocess.run([compiler] + flags + ["-Wall", "-Wextra", "-Wpedantic", "-Werror", "-I", include, "-I", tmp,
                                             "-c", path, "-o", exe + ".o"], check=True)
        subprocess.run([compiler, exe + ".o", library, "-o", exe, "-lm"] + link_flags, check=True)
        lines = subprocess.run([exe], check=True, capture_output=True, text=True).stdout.splitlines()
        out, n = {}, 0
        while n < len(lines):
            _, i, f, fmt, rows, cols, group, ok = lines[n].split()
            rows = int(rows)
            y = np.array([float(v) for v in lines[n + 1:n + 1 + m * rows]]).reshape(m, rows)
            out[int(i), f] = (int(fmt), rows, int(cols), int(group), int(ok), y)
            n += 1 + m * rows
        results.append(out)
    return results


def layer_programs(tmp, header, name, x, include, library, cc, cxx, link_flags):
    """Every layer of the header from its weight matrices, forward over x: {"C" / "C++": layers x rows x cols},
    for the APIs the headers have (the layer from weight matrices may not be there yet)."""
    with open(os.path.join(include, "microattn", "microattn.h")) as f:
        c_api = "microattn_layer_init_matrices(" in f.read()
    with open(os.path.join(include, "microattn", "layers.hpp")) as f:
        cpp_api = "MultiHeadAttention(const LayerWeightMatrices&" in f.read()
    up, (m, k) = name.upper(), x.shape
    xs = ", ".join("%.9ef" % v for v in x.astype(np.float32).ravel())
    seq = 8
    programs = []
    if c_api:
        programs.append(("C", cc, "c", ["-std=c99"], f"""#include <stdio.h>
#include "{header}"
static const float x[{m * k}] = {{{xs}}};
static float cache[MICROATTN_LAYER_CACHE_FLOATS({seq}, {up}_MODEL_DIM, {up}_HEADS, {up}_KV_HEADS)];
static float scratch[MICROATTN_LAYER_SCRATCH_FLOATS({up}_MODEL_DIM, {up}_HEADS)];
static float y[{m * k}];
int main(void) {{
  int i, j;
  for (i = 0; i < {up}_LAYERS; ++i) {{
    microattn_layer layer;
    microattn_cview xv = {{x, {m}, {k}, {k}}};
    microattn_view yv = {{y, {m}, {k}, {k}}};
    if (microattn_layer_init_matrices(&layer, {seq}, {up}_MODEL_DIM, {up}_HEADS, {up}_KV_HEADS, &{name}_c_matrices[i],
                                      NULL, MICROATTN_FORMAT_F32, cache, sizeof cache, scratch,
                                      sizeof scratch / sizeof scratch[0]) != MICROATTN_OK ||
        microattn_layer_forward(&layer, xv, yv, NULL) != MICROATTN_OK) return 1;
    for (j = 0; j < {m * k}; ++j) printf("%.9g\\n", (double)y[j]);
  }}
  return 0;
}}
"""))
    if cpp_api:
        programs.append(("C++", cxx, "cpp", ["-std=c++17"], f"""#include <cstdio>
#include <microattn/microattn.h>
{layer_matrices_stand_in(include)}
#include "{header}"
static const float x[{m * k}] = {{{xs}}};
static float y[{m * k}];
int main() {{
  for (int i = 0; i < {up}_LAYERS; ++i) {{
    microattn::MultiHeadAttention<{seq}, {up}_MODEL_DIM, {up}_HEADS, {up}_KV_HEADS> layer{{{name}_matrices[i]}};
    if (layer.forward(microattn::make_view(x, {m}, {k}), microattn::make_view(y, {m}, {k})) != microattn::Status::ok)
      return 1;
    for (float v : y) std::printf("%.9g\\n", double{{v}});
  }}
}}
"""))
    results = {}
    for lang, compiler, ext, flags, src in programs:
        path = os.path.join(tmp, f"layer_{name}.{ext}")
        exe = os.path.join(tmp, f"layer_{name}_{ext}")
        with open(path, "w") as f:
            f.write(src)
        subprocess.run([compiler] + flags + ["-Wall", "-Wextra", "-Wpedantic", "-Werror", "-I", include, "-I", tmp,
                                             "-c", path, "-o", exe + ".o"], check=True)
        subprocess.run([compiler, exe + ".o", library, "-o", exe, "-lm"] + link_flags, check=True)
        out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout.split()
        results[lang] = np.array([float(v) for v in out]).reshape(-1, m, k)
    return results


def linear_bound(x, w, b, fmt):
    """linear's error bound (weights.hpp) against the float64 product with w as stored, s_g taken as the row's
    max|x| / 127 (no smaller than any group's)."""
    u, k = 2.0 ** -24, w.shape[1]
    mag = np.abs(x) @ np.abs(w).T + (0 if b is None else np.abs(b))
    if fmt != "q8":
        return 2 * (k + 3) * u * mag
    s = np.abs(x).max(axis=1, keepdims=True) / 127
    quant = s * np.abs(w).sum(axis=1)[None, :]
    return 0.5 * (1 + 2.0 ** -16) * quant + 2 * (k + 3) * u * (mag + quant)


def format_model(rng):
    """Two nn.MultiheadAttention(FE, FHEADS) layers as float32 {name: array}, with values that test the rounding:
    binary16 ties, subnormals, -0, 60000 (f16's range), q8 ties (a group whose scale is 2**-6 exactly holding
    w / scale = k + 0.5), an all-zero row."""
    t = {}
    for i in range(2):
        p = f"encoder.layers.{i}.self_attn."
        w = rng.uniform(-0.3, 0.3, (3 * FE, FE)).astype(np.float32)
        b = rng.uniform(-0.3, 0.3, 3 * FE).astype(np.float32)
        wo = rng.uniform(-0.3, 0.3, (FE, FE)).astype(np.float32)
        bo = rng.uniform(-0.3, 0.3, FE).astype(np.float32)
        if i == 0:
            # q rows: binary16 ties (1 + 2**-11 between 1 and 1 + 2**-10, 1 + 3 * 2**-11), subnormal and tiny values
            w[0, :6] = [1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, 2.0 ** -25, 3 * 2.0 ** -26, -0.0, 2.0 ** -20]
            w[1, :3] = [60000.0, -65504.0, 2.0 ** -14 + 2.0 ** -25]
            w[2, :] = 0.0  # q8: scale 0
            # v (rows 2FE..3FE): the largest |w| of the matrix (127 * 2**-6 = 1.984375) and ties in the first 8
            t6 = 2.0 ** -6
            w[2 * FE, :8] = np.array([127, 0.5, 1.5, 2.5, -2.5, -0.5, 3.5, 0]) * t6
            w[2 * FE, 8:] = np.array([-127, 4.5, -5.5, 6.5]) * t6
        t.update({p + "in_proj_weight": w, p + "in_proj_bias": b, p + "out_proj.weight": wo, p + "out_proj.bias": bo})
    return t


def check_formats(tmp, export, include, library, cc, cxx, link_flags, rng):
    model = format_model(rng)
    st_path = os.path.join(tmp, "fmt.safetensors")
    write_safetensors(st_path, {k: ("F32", v) for k, v in model.items()})
    x = rng.uniform(-1, 1, (FTOKENS, FE)).astype(np.float32)
    x[1, 3] = 40.0  # one large element: q8's activation scale is set by it
    x[2, :] = 0.0
    x = x.astype(np.float64)
    sources = {}
    for i in range(2):
        p = f"encoder.layers.{i}.self_attn."
        w, b = model[p + "in_proj_weight"].astype(np.float64), model[p + "in_proj_bias"].astype(np.float64)
        for j, f in enumerate("qkv"):
            sources[i, f] = (w[j * FE:(j + 1) * FE], b[j * FE:(j + 1) * FE])
        sources[i, "out"] = (model[p + "out_proj.weight"].astype(np.float64),
                             model[p + "out_proj.bias"].astype(np.float64))
    headers = {}
    for fmt, group in (("f32", None), ("f16", None), ("q8", None), ("q8", 8), ("q8", 36), ("q8", 3), ("q8", 144),
                       ("q8", 1)):
        what = f"--format {fmt}" + (f" --group {group}" if group else "")
        name = "fm_" + fmt + (f"_{group}" if group else "")
        header = os.path.join(tmp, name + ".h")
        argv = [export, st_path, "--heads", str(FHEADS), "-o", header, "--name", name, "--format", fmt]
        subprocess.run(argv + (["--group", str(group)] if group else []), check=True, capture_output=True)
        with open(header) as f:
            text = f.read()
        headers[fmt, group] = text
        arrays = header_arrays(text)
        check(("_c_weights[" in text) == (fmt == "f32"), f"{what}: microattn_layer_weights only for f32")
        check(f"#define {name.upper()}_FORMAT MICROATTN_FORMAT_{fmt.upper()}" in text, f"{what}: FORMAT macro")
        decoded, ties = {}, 0
        for (i, f), (w, b) in sources.items():
            ident = f"{name}_{i}_{f}_weight"
            got = decoded_weights(f"{what} {ident}", arrays, ident, w, fmt, group)
            if fmt == "q8":
                got, n = got
                ties += n
            decoded[i, f] = got
            check(np.array_equal(arrays[f"{name}_{i}_{f}_bias"][1], b.astype(np.float32)), f"{what}: {f} bias")
        results = linear_programs(tmp, name + ".h", name, sorted(sources), x.astype(np.float32), include, library, cc,
                                  cxx, link_flags)
        worst = 0.0
        for lang, res in zip(("C", "C++"), results):
            for (i, f), (w, b) in sources.items():
                code, rows, cols, g, ok, y = res[i, f]
                want_group = 0 if fmt != "q8" else (group or FE)
                check((code, rows, cols, g, ok) == ({"f32": 0, "f16": 1, "q8": 2}[fmt], FE, FE, want_group, 1),
                      f"{what} {lang} {i} {f}: format {code} {rows}x{cols} group {g}, ok (status, canaries) {ok}")
                ref = x @ decoded[i, f].T + b
                err = np.abs(y - ref)
                bound = linear_bound(x, decoded[i, f], b, fmt)
                check(np.all(err <= bound), f"{what} {lang} {i} {f}: linear error {err.max():.3g} over the bound "
                                            f"(at {np.unravel_index(np.argmax(err - bound), err.shape)})")
                worst = max(worst, float((err / np.maximum(bound, 1e-300)).max()))
        print(f"{what}: arrays decoded and checked against the source ({ties} q8 ties), 8 projections through "
              f"linear in C and C++: max error {worst:.3g} of the bound")
        layer_out = layer_programs(tmp, name + ".h", name, x.astype(np.float32), include, library, cc, cxx, link_flags)
        wants = [mha(x, decoded[i, "q"], decoded[i, "k"], decoded[i, "v"], sources[i, "q"][1], sources[i, "k"][1],
                     sources[i, "v"][1], decoded[i, "out"], sources[i, "out"][1], FHEADS) for i in range(2)]
        for lang, got in layer_out.items():
            for i, want in enumerate(wants):
                err = np.abs(got[i] - want)
                scale = np.abs(want).max(axis=1, keepdims=True)
                # f32 / f16: the fp32 layer's bound of compare(); q8: x quantized to 8 bits in every projection,
                # a sanity tolerance of 3 % of the row (linear()'s own bound is checked above)
                bound = (8.0 * (3 * FE + 2 * FTOKENS + 32) * 2.0 ** -24 + (0.03 if fmt == "q8" else 0)) * scale + 1e-6
                check(np.all(err <= bound), f"{what} layer {i} from weight matrices ({lang}): error {err.max():.3g}")
            worst = max(np.abs(g - w).max() for g, w in zip(got, wants))
            relative = max((np.abs(g - w) / np.abs(w).max(axis=1, keepdims=True)).max() for g, w in zip(got, wants))
            print(f"{what}: both layers from weight matrices ({lang}) against float64 attention of the decoded "
                  f"weights: max error {worst:.3g}, {relative:.3g} of the row's max |y|")
        if not layer_out and fmt == "f32":
            print("SKIP layers from weight matrices: this microattn has no microattn_layer_init_matrices / "
                  "MultiHeadAttention(const LayerWeightMatrices&) yet")
    # --format f32 is the default header plus the matrices
    default = os.path.join(tmp, "fm_f32.h")
    subprocess.run([export, st_path, "--heads", str(FHEADS), "-o", default, "--name", "fm_f32"], check=True,
                   capture_output=True)
    with open(default) as f:
        plain = f.read()
    extra = headers["f32", None]
    check(plain.split("/* clang-format on */")[0].split("/* clang-format off */")[1] in extra,
          "--format f32: arrays and layer weights differ from the default header's")
    # the Llama layout with grouped-query attention (k, v 4 x 12), through .npz
    hd = FE // FHEADS
    llama = {"model.layers.0.self_attn.q_proj.weight": rng.uniform(-1, 1, (FE, FE)).astype(np.float32),
             "model.layers.0.self_attn.k_proj.weight": rng.uniform(-1, 1, (hd, FE)).astype(np.float32),
             "model.layers.0.self_attn.v_proj.weight": rng.uniform(-1, 1, (hd, FE)).astype(np.float32),
             "model.layers.0.self_attn.o_proj.weight": rng.uniform(-1, 1, (FE, FE)).astype(np.float32)}
    npz = os.path.join(tmp, "gqa.npz")
    np.savez(npz, **llama)
    for fmt, group in (("f16", None), ("q8", 8), ("q8", None)):
        name = "gqa_" + fmt + (f"_{group}" if group else "")
        header = os.path.join(tmp, name + ".h")
        subprocess.run([export, npz, "--heads", str(FHEADS), "-o", header, "--name", name, "--format", fmt] +
                       (["--group", str(group)] if group else []), check=True, capture_output=True)
        with open(header) as f:
            arrays = header_arrays(f.read())
        what = f"npz GQA --format {fmt}" + (f" --group {group}" if group else "")
        decoded = {}
        for f, theirs in (("q", "q_proj"), ("k", "k_proj"), ("v", "v_proj"), ("out", "o_proj")):
            w = llama[f"model.layers.0.self_attn.{theirs}.weight"].astype(np.float64)
            got = decoded_weights(f"{what} {f}", arrays, f"{name}_0_{f}_weight", w, fmt, group)
            decoded[f] = (got[0] if fmt == "q8" else got, w)
        results = linear_programs(tmp, name + ".h", name, [(0, f) for f in decoded], x.astype(np.float32), include,
                                  library, cc, cxx, link_flags)
        for lang, res in zip(("C", "C++"), results):
            for f, (dec, w) in decoded.items():
                code, rows, cols, g, ok, y = res[0, f]
                check((rows, cols, ok) == (w.shape[0], FE, 1), f"{what} {lang} {f}: {rows}x{cols} ok {ok}")
                err = np.abs(y - x @ dec.T)
                check(np.all(err <= linear_bound(x, dec, None, fmt)), f"{what} {lang} {f}: error {err.max():.3g}")
        print(f"{what}: checked, 4 projections through linear in C and C++")
    # a .pt state_dict: the same header as the .safetensors file
    if not have_torch():
        print("SKIP .pt input: PyTorch is not installed (python3-torch)")
        return
    import torch
    pt = os.path.join(tmp, "fmt.pt")
    torch.save({k: torch.from_numpy(v) for k, v in model.items()}, pt)
    for fmt, group in ((None, None), ("f16", None), ("q8", 8)):
        name = "fm_" + (fmt or "f32") + (f"_{group}" if group else "")
        header = os.path.join(tmp, name + "_pt.h")
        argv = [export, pt, "--heads", str(FHEADS), "-o", header, "--name", name]
        argv += (["--format", fmt] if fmt else []) + (["--group", str(group)] if group else [])
        subprocess.run(argv, check=True, capture_output=True)
        with open(header) as f:
            text = f.read().replace("fmt.pt", "fmt.safetensors").replace(name.upper() + "_PT_H", name.upper() + "_H")
        want = plain if fmt is None else headers[fmt, group]
        check(text == want, f".pt --format {fmt}: the header differs from the .safetensors one")
    print(".pt input: the same headers as from .safetensors (default, f16, q8 group 8)")


NPZ_ONE_LINER = ('numpy.savez("model.npz", **{k: v.detach().float().cpu().numpy() '
                 'for k, v in model.state_dict().items()})')  # the README's line, run as written


def check_torch_module(tmp, export, include, library, cc, cxx, link_flags):
    """A real nn.TransformerEncoder's attention, saved with the README's one-line .npz export (from bfloat16
    parameters too), exported, run through both APIs and compared with PyTorch's own float64 forward."""
    if not have_torch():
        print("SKIP the PyTorch module through the README's .npz line: PyTorch is not installed (python3-torch)")
        return
    import torch
    torch.manual_seed(3)
    model = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(E, HEADS, 32, batch_first=True), 2)
    model.eval()
    with torch.no_grad():  # the encoder's layers start as copies of one: each its own weights
        for p in model.parameters():
            p.uniform_(-0.3, 0.3)
    model.layers[1].to(torch.bfloat16)
    x = torch.rand(1, TOKENS, E, dtype=torch.float64) * 2 - 1
    want = []
    for layer in model.layers:
        dtype = next(layer.parameters()).dtype
        a = layer.self_attn.double()  # exact from float32 and bfloat16
        want.append(a(x, x, x, need_weights=False)[0][0].detach().numpy())
        a.to(dtype)
    cwd = os.getcwd()
    os.chdir(tmp)
    try:
        exec(NPZ_ONE_LINER, {"numpy": np, "model": model})
    finally:
        os.chdir(cwd)
    header = os.path.join(tmp, "torch_weights.h")
    subprocess.run([export, os.path.join(tmp, "model.npz"), "--heads", str(HEADS), "-o", header, "--name", "tm"],
                   check=True)
    got = run_programs(tmp, header, "tm", range(2), x[0].numpy(), include, library, cc, cxx, link_flags)
    compare("PyTorch nn.TransformerEncoder via the .npz line (C API)", got[0], want)
    compare("PyTorch nn.TransformerEncoder via the .npz line (C++)", got[1], want)
    check_torch_blocks(tmp, export, include, library, cxx, link_flags)


def check_torch_blocks(tmp, export, include, library, cxx, link_flags):
    """Whole nn.TransformerEncoder blocks against PyTorch's float64 forward: both norm orders, the activations
    PyTorch's layer takes (relu, gelu), f32 and q8, exported with the flags that say how the model was built,
    run layer after layer through TransformerEncoderLayer (the blocks' documented tolerance: 1e-4 of the output's
    magnitude; q8 by its quantization, 3e-2); the same file exported with the wrong --activation or without
    --norm-first must miss it."""
    import torch
    ff = 32
    for norm_first, act in ((False, "relu"), (True, "gelu")):
        torch.manual_seed(5 if norm_first else 6)
        model = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(
            E, HEADS, ff, activation=act, norm_first=norm_first, batch_first=True), 2, enable_nested_tensor=False)
        with torch.no_grad():
            for n, p in model.named_parameters():
                p.uniform_(-0.3, 0.3) if "norm" not in n else p.uniform_(0.5, 1.5)
        model.eval()
        x = torch.rand(1, TOKENS, E, dtype=torch.float32) * 2 - 1
        with torch.no_grad():
            want = model.double()(x.double())[0].numpy()
        model.float()
        npz = os.path.join(tmp, "blocks.npz")
        np.savez(npz, **{k: v.detach().float().numpy() for k, v in model.state_dict().items()})
        right = (["--norm-first"] if norm_first else []) + ["--activation", act]
        wrong = ["--activation", "gelu" if act == "relu" else "relu"] + (["--norm-first"] if norm_first else [])
        for fmt, flags, tol in (("f32", right, 1e-4), ("q8", right, 3e-2), ("f32", wrong, None),
                                ("f32", right[1:] if norm_first else ["--norm-first"] + right, None)):
            name = "tb"
            header = os.path.join(tmp, "tb.h")
            subprocess.run([export, npz, "--heads", str(HEADS), "--format", fmt, "-o", header, "--name", name] + flags,
                           check=True, capture_output=True)
            xs = ", ".join("%.9gf" % v for v in x.numpy().ravel())
            src = f"""#include <cstdio>
#include "tb.h"
static float x[{TOKENS * E}] = {{{xs}}};
using Layer = microattn::TransformerEncoderLayer<{MAX_SEQ}, TB_MODEL_DIM, TB_HEADS, TB_FEED_FORWARD>;
static Layer layers[] = {{Layer{{tb_encoder_weights[0], tb_encoder_config}},
                          Layer{{tb_encoder_weights[1], tb_encoder_config}}}};
int main() {{
  for (Layer& layer : layers)
    if (layer.forward(microattn::make_view(x, {TOKENS}, {E}), microattn::make_view(x, {TOKENS}, {E})) !=
        microattn::Status::ok) return 1;
  for (float v : x) std::printf("%.9g\\n", double{{v}});
}}
"""
            path, exe = os.path.join(tmp, "tb.cpp"), os.path.join(tmp, "tb_cpp")
            with open(path, "w") as f:
                f.write(src)
            subprocess.run([cxx, "-std=c++17", "-Wall", "-Wextra", "-Wpedantic", "-Werror", "-I", include, "-I", tmp,
                            "-c", path, "-o", exe + ".o"], check=True)
            subprocess.run([cxx, exe + ".o", library, "-o", exe, "-lm"] + link_flags, check=True)
            out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout.split()
            got = np.array([float(v) for v in out]).reshape(TOKENS, E)
            err = np.abs(got - want).max() / np.abs(want).max()
            what = f"nn.TransformerEncoder(norm_first={norm_first}, {act}) --format {fmt} {' '.join(flags)}"
            if tol is not None:
                check(err <= tol, f"{what}: error {err:.3g} of max|y|, over {tol}")
            else:
                check(err > 1e-2, f"{what}: the wrong flags gave the right output (error {err:.3g})")
            print(f"{what}: max error / max|y| {err:.3g}" + ("" if tol else " (wrong flags: must be large)"))


BLOCK_KEYS = (("linear1.weight", "linear1_weight"), ("linear1.bias", "linear1_bias"),
              ("linear2.weight", "linear2_weight"), ("linear2.bias", "linear2_bias"),
              ("norm1.weight", "norm1_weight"), ("norm1.bias", "norm1_bias"), ("norm2.weight", "norm2_weight"),
              ("norm2.bias", "norm2_bias"))


def check_blocks(tmp, export, include, library, cc, cxx, link_flags, rng):
    """nn.TransformerEncoderLayer blocks: an nn.Transformer-like state_dict (a decoder layer, whose attention is
    exported as before but which is no encoder block, and two encoder layers, the second without biases as
    bias=False writes it): the block arrays hold the file's numbers in each format, the encoder initializers
    point at them with the right shapes (checked by C and C++ programs compiled with -Werror), the macros and
    configs carry the flags."""
    ff = 24
    t = {}
    for i in range(2):
        b = f"transformer.encoder.layers.{i}."
        t[b + "self_attn.in_proj_weight"] = rng.uniform(-0.3, 0.3, (3 * E, E))
        t[b + "self_attn.out_proj.weight"] = rng.uniform(-0.3, 0.3, (E, E))
        shapes = {"linear1.weight": (ff, E), "linear1.bias": (ff,), "linear2.weight": (E, ff), "linear2.bias": (E,),
                  "norm1.weight": (E,), "norm1.bias": (E,), "norm2.weight": (E,), "norm2.bias": (E,)}
        for key, shape in shapes.items():
            if i == 1 and key.endswith(".bias"):
                continue  # bias=False
            t[b + key] = rng.uniform(-0.5, 0.5, shape)
        if i == 0:
            t[b + "self_attn.in_proj_bias"] = rng.uniform(-0.3, 0.3, 3 * E)
            t[b + "self_attn.out_proj.bias"] = rng.uniform(-0.3, 0.3, E)
    d = "transformer.decoder.layers.0."
    for a in ("self_attn.", "multihead_attn."):
        t[d + a + "in_proj_weight"] = rng.uniform(-0.3, 0.3, (3 * E, E))
        t[d + a + "out_proj.weight"] = rng.uniform(-0.3, 0.3, (E, E))
    for key, shape in (("linear1.weight", (ff, E)), ("linear2.weight", (E, ff)), ("norm1.weight", (E,)),
                       ("norm2.weight", (E,)), ("norm3.weight", (E,))):
        t[d + key] = rng.uniform(-0.5, 0.5, shape)
    t = {k: v.astype(np.float32) for k, v in t.items()}
    path = os.path.join(tmp, "transformer.safetensors")
    write_safetensors(path, {k: ("F32", v) for k, v in t.items()})
    # layers in name order: decoder multihead_attn (0), decoder self_attn (1), encoder 0 (2), encoder 1 (3)
    blocks = {2: "transformer.encoder.layers.0.", 3: "transformer.encoder.layers.1."}
    for fmt, flags in ((None, []), ("f32", ["--norm-first"]), ("f16", ["--activation", "silu"]),
                       ("q8", ["--activation", "gelu_tanh", "--layer-norm-eps", "1e-6", "--norm-first"])):
        name = f"blk_{fmt}"
        header = os.path.join(tmp, name + ".h")
        argv = [export, path, "--heads", str(HEADS), "-o", header, "--name", name] + flags
        r = subprocess.run(argv + (["--format", fmt] if fmt else []), capture_output=True, text=True)
        what = f"encoder blocks, --format {fmt}"
        if not check(r.returncode == 0, f"{what}: exit {r.returncode} {r.stderr.strip()}"):
            continue
        with open(header) as f:
            text = f.read()
        arrays = header_arrays(text)
        up = name.upper()
        norm_first = "--norm-first" in flags
        act = flags[flags.index("--activation") + 1] if "--activation" in flags else "relu"
        for macro, value in (("LAYERS", 4), ("FEED_FORWARD", ff), ("ENCODER_LAYERS", 2),
                             ("NORM_FIRST", int(norm_first)), ("ACTIVATION", "MICROATTN_ACTIVATION_" + act.upper())):
            check(f"#define {up}_{macro} {value}\n" in text, f"{what}: #define {up}_{macro} {value}")
        eps = float(flags[flags.index("--layer-norm-eps") + 1]) if "--layer-norm-eps" in flags else 1e-5
        m = re.search(rf"^#define {up}_LAYER_NORM_EPS (\S+)f$", text, re.M)
        check(m is not None and np.float32(float(m.group(1))) == np.float32(eps), f"{what}: LAYER_NORM_EPS")
        check(not any(k.startswith(f"{name}_0_linear") or k.startswith(f"{name}_1_norm") for k in arrays),
              f"{what}: the decoder layer got block arrays")
        cpp_checks, c_checks = [], []
        for j, (i, base) in enumerate(blocks.items()):
            for theirs, field in BLOCK_KEYS:
                ident = f"{name}_{i}_{field}"
                src = t.get(base + theirs)
                if src is None:
                    check(ident not in arrays, f"{what}: {ident} for a tensor the file does not hold")
                    cpp_checks.append(f"bad |= w[{j}].{field} != nullptr;")
                    c_checks.append(f"bad |= cw[{j}].{field} != NULL;")
                    continue
                if not check(ident in arrays, f"{what}: no {ident}"):
                    continue
                if field.endswith("_weight") and field.startswith("linear"):
                    decoded_weights(f"{what} {ident}", arrays, ident, src.astype(np.float64), fmt or "f32", None)
                    rows, cols = src.shape
                    mat = field[:-len("_weight")]
                    scales = f"{name}_{i}_{mat}_scales" if fmt == "q8" else None
                    for lang, v, null in (("cpp", "w", "nullptr"), ("c", "cw", "NULL")):
                        cond = (f"bad |= {v}[{j}].{mat}.data != {ident} || {v}[{j}].{mat}.rows != {rows} || "
                                f"{v}[{j}].{mat}.cols != {cols} || {v}[{j}].{mat}.scales != {scales or null};")
                        (cpp_checks if lang == "cpp" else c_checks).append(cond)
                else:
                    check(np.array_equal(arrays[ident][1], src), f"{what}: {ident} values")
                    cpp_checks.append(f"bad |= w[{j}].{field} != {ident};")
                    c_checks.append(f"bad |= cw[{j}].{field} != {ident};")
            for part in ("q", "k", "v", "out"):  # the block's self_attn is the layer's own attention
                cpp_checks.append(f"bad |= w[{j}].self_attn.{part}.data != {name}_{i}_{part}_weight;")
                c_checks.append(f"bad |= cw[{j}].self_attn.{part}.data != {name}_{i}_{part}_weight;")
            bias = f"{name}_{i}_q_bias" if i == 2 else None
            cpp_checks.append(f"bad |= w[{j}].self_attn.q_bias != {bias or 'nullptr'};")
            c_checks.append(f"bad |= cw[{j}].self_attn.q_bias != {bias or 'NULL'};")
        act_cpp = {"relu": "relu", "gelu": "gelu", "silu": "silu", "gelu_tanh": "gelu_tanh"}[act]
        cpp_checks.append(f"bad |= {name}_encoder_config.norm_first != {str(norm_first).lower()} || "
                          f"{name}_encoder_config.activation != microattn::Activation::{act_cpp} || "
                          f"{name}_encoder_config.layer_norm_eps != {float(np.float32(eps))!r}f;")
        c_checks.append(f"bad |= {name}_c_encoder_config.norm_first != {int(norm_first)} || "
                        f"{name}_c_encoder_config.activation != MICROATTN_ACTIVATION_{act.upper()} || "
                        f"{name}_c_encoder_config.layer_norm_eps != {float(np.float32(eps))!r}f;")
        for lang, compiler, suffix, std, body, w in (
                ("C++", cxx, ".cpp", "-std=c++17", cpp_checks, f"const microattn::EncoderLayerWeights* w = "
                                                               f"{name}_encoder_weights;"),
                ("C", cc, ".c", "-std=c99", c_checks, f"const microattn_encoder_layer_weights* cw = "
                                                      f"{name}_c_encoder_weights;")):
            src = os.path.join(tmp, f"{name}_check{suffix}")
            exe = os.path.join(tmp, f"{name}_check_{lang.replace('+', 'p')}")
            with open(src, "w") as f:
                f.write(f'#include <stdio.h>\n#include "{name}.h"\nint main(void) {{\n  int bad = 0;\n  {w}\n  ' +
                        "\n  ".join(body) + '\n  puts(bad ? "bad" : "ok");\n  return bad;\n}\n')
            r = subprocess.run([compiler, std, "-Wall", "-Wextra", "-Wpedantic", "-Werror", "-Wno-float-equal",
                                "-I", include, "-I", tmp, src, "-o", exe], capture_output=True, text=True)
            if not check(r.returncode == 0, f"{what}: the {lang} program does not compile: {r.stderr[:2000]}"):
                continue
            r = subprocess.run([exe], capture_output=True, text=True)
            check(r.returncode == 0 and r.stdout.strip() == "ok", f"{what}: {lang} initializers wrong")
    print("encoder blocks: arrays, macros and C / C++ initializers (none, f32, f16, q8 with the config flags)")


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

        # 4. weight formats
        check_formats(tmp, export, include, library, cc, cxx, link_flags, rng)
        check_blocks(tmp, export, include, library, cc, cxx, link_flags, rng)
        check_torch_module(tmp, export, include, library, cc, cxx, link_flags)

    print("FAILED" if failures else "PASSED", f"({len(failures)} failures)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
