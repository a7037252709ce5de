#!/usr/bin/python3
"""Exports attention weights from a PyTorch state_dict (.safetensors or .npz) to a C/C++ header for microattn.

    scripts/export_weights.py MODEL.safetensors --heads 4 [--kv-heads 2] -o weights.h [--name model]
                              [--prefix REGEX] [--list]

Reads (numpy only, no PyTorch):
  .safetensors   parsed directly: 8-byte little-endian header length, JSON header (dtype, shape, data_offsets per
                 tensor), raw little-endian tensors; F32 as is, F16 and BF16 converted to float32 exactly, F64
                 rounded to float32.
  .npz           numpy.savez of the state_dict ({name: tensor.numpy()}).
Finds every attention layer by its names (the prefix before them tells layers apart; --prefix keeps those whose
prefix matches a regular expression, e.g. 'encoder\\.layers\\.[0-3]\\.'):
  nn.MultiheadAttention  PREFIX in_proj_weight (3E x E: the q, k, v row blocks), in_proj_bias, out_proj.weight,
                         out_proj.bias
  Llama style            PREFIX q_proj.weight, k_proj.weight, v_proj.weight, o_proj.weight (+ .bias where present;
                         k/v with fewer rows than q: grouped-query attention, --kv-heads is derived from them)
Writes, for layers 0 .. N-1 in the order of their prefixes (numbers compared as numbers):
  NAME_MODEL_DIM, NAME_HEADS, NAME_KV_HEADS, NAME_LAYERS           macros
  NAME_<i>_q_weight[...], ... NAME_<i>_out_bias[...]             static const float arrays (nn.Linear layout)
  NAME_c_weights[NAME_LAYERS]       microattn_layer_weights, for microattn_layer_init (C API)
  NAME_weights[NAME_LAYERS]         microattn::LayerWeights, for MultiHeadAttention<MaxSeq, NAME_MODEL_DIM,
                                    NAME_HEADS, NAME_KV_HEADS> (C++ only)
The arrays have internal linkage: include the header in one translation unit. The number of heads is not stored
in a state_dict: give --heads (nn.MultiheadAttention's num_heads). Llama-style models rotate q and k (RoPE)
before attention, which this layer does not do by itself: the export maps the projections only.
"""
import argparse
import json
import os
import re
import struct
import sys

import numpy as np

SAFETENSORS_DTYPES = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "BF16": "<u2"}


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError(f"{path}: too short for a safetensors file")
    (header_len,) = struct.unpack("<Q", blob[:8])
    if 8 + header_len > len(blob):
        raise ValueError(f"{path}: header length {header_len} beyond the end of the file")
    header = json.loads(blob[8:8 + header_len].decode("utf-8"))
    data = memoryview(blob)[8 + header_len:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = info["dtype"]
        if dtype not in SAFETENSORS_DTYPES:
            raise ValueError(f"{path}: tensor {name}: dtype {dtype} is not a float type this script reads")
        begin, end = info["data_offsets"]
        shape = tuple(info["shape"])
        raw = np.frombuffer(data[begin:end], dtype=SAFETENSORS_DTYPES[dtype])
        if raw.size != int(np.prod(shape, dtype=np.int64)):
            raise ValueError(f"{path}: tensor {name}: {raw.size} elements for shape {shape}")
        if dtype == "BF16":  # the upper half of a float32: exact
            values = (raw.astype("<u4") << 16).view("<f4")
        else:
            values = raw.astype(np.float32)
        tensors[name] = values.reshape(shape)
    return tensors


def read_npz(path):
    with np.load(path) as z:
        return {name: np.asarray(z[name]).astype(np.float32) for name in z.files}


def natural_key(text):
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def find_layers(tensors, prefix_filter):
    """[(prefix, {q_weight, k_weight, v_weight, q_bias, k_bias, v_bias, out_weight, out_bias})]"""
    layers = {}
    for name in tensors:
        m = re.match(r"(.*)in_proj_weight$", name)
        if m:
            p = m.group(1)
            w = tensors[name]
            if w.ndim != 2 or w.shape[0] != 3 * w.shape[1]:
                raise ValueError(f"{name}: shape {w.shape}, expected (3E, E)")
            e = w.shape[1]
            layer = {"q_weight": w[:e], "k_weight": w[e:2 * e], "v_weight": w[2 * e:]}
            b = tensors.get(p + "in_proj_bias")
            if b is not None:
                layer.update(q_bias=b[:e], k_bias=b[e:2 * e], v_bias=b[2 * e:])
            if p + "out_proj.weight" in tensors:
                layer["out_weight"] = tensors[p + "out_proj.weight"]
                layer["out_bias"] = tensors.get(p + "out_proj.bias")
            layers[p] = layer
        m = re.match(r"(.*)q_proj\.weight$", name)
        if m:
            p = m.group(1)
            layer = {}
            for ours, theirs in (("q", "q_proj"), ("k", "k_proj"), ("v", "v_proj"), ("out", "o_proj")):
                if p + theirs + ".weight" not in tensors:
                    if ours == "out":
                        continue
                    raise ValueError(f"{p}{theirs}.weight is missing (found {name})")
                layer[ours + "_weight"] = tensors[p + theirs + ".weight"]
                layer[ours + "_bias"] = tensors.get(p + theirs + ".bias")
            layers[p] = layer
    if prefix_filter is not None:
        layers = {p: l for p, l in layers.items() if re.match(prefix_filter, p)}
    return [(p, layers[p]) for p in sorted(layers, key=natural_key)]


def check_shapes(prefix, layer, heads, kv_heads):
    """The model dimension and the number of key/value heads, after checking every shape against them."""
    q = layer["q_weight"]
    if q.ndim != 2 or q.shape[0] != q.shape[1]:
        raise ValueError(f"{prefix}: q weight {q.shape}: microattn's layers need q_proj out = in = model dim")
    d = q.shape[1]
    if d % heads != 0:
        raise ValueError(f"{prefix}: model dim {d} is not a multiple of --heads {heads}")
    hd = d // heads
    kv_dim = layer["k_weight"].shape[0]
    if kv_dim % hd != 0:
        raise ValueError(f"{prefix}: k weight has {kv_dim} rows, not a multiple of the head dim {hd}")
    derived = kv_dim // hd
    if kv_heads is not None and kv_heads != derived:
        raise ValueError(f"{prefix}: --kv-heads {kv_heads}, but k has {derived} heads of {hd}")
    if heads % derived != 0:
        raise ValueError(f"{prefix}: {heads} heads are not a multiple of {derived} key/value heads")
    want = {"k_weight": (kv_dim, d), "v_weight": (kv_dim, d), "q_bias": (d,), "k_bias": (kv_dim,),
            "v_bias": (kv_dim,), "out_weight": (d, d), "out_bias": (d,)}
    for key, shape in want.items():
        t = layer.get(key)
        if t is not None and tuple(t.shape) != shape:
            raise ValueError(f"{prefix}: {key} has shape {tuple(t.shape)}, expected {shape}")
        if t is not None and not np.all(np.isfinite(t)):
            raise ValueError(f"{prefix}: {key} holds NaN or inf")
    return d, derived


FIELDS = ("q_weight", "k_weight", "v_weight", "q_bias", "k_bias", "v_bias", "out_weight", "out_bias")


def c_floats(values):
    flat = np.asarray(values, dtype=np.float32).ravel()
    # %.9g round-trips every float32
    items = [("%.9g" % float(v)) for v in flat]
    items = [s + ("f" if ("." in s or "e" in s) else ".0f") for s in items]
    return "\n".join("    " + ", ".join(items[i:i + 8]) + "," for i in range(0, len(items), 8))


def write_header(path, name, source, layers, d, heads, kv_heads):
    upper = name.upper()
    guard = re.sub(r"\W", "_", os.path.basename(path)).upper()
    out = [
        f"/* Generated by scripts/export_weights.py from {os.path.basename(source)}: do not edit.",
        f" * {len(layers)} attention layer(s): model dim {d}, {heads} heads, {kv_heads} key/value heads. Weights in",
        " * nn.Linear layout (out x in, row-major); the arrays have internal linkage: include this header in one",
        " * translation unit. */",
        f"#ifndef {guard}", f"#define {guard}", "", "#include <stddef.h>", "", "#include <microattn/microattn.h>",
        "#ifdef __cplusplus", "#include <microattn/layers.hpp>", "#endif", "",
        "#if defined(__GNUC__)", f"#define {upper}_UNUSED __attribute__((unused))", "#else",
        f"#define {upper}_UNUSED", "#endif", "",
        f"#define {upper}_MODEL_DIM {d}", f"#define {upper}_HEADS {heads}", f"#define {upper}_KV_HEADS {kv_heads}",
        f"#define {upper}_LAYERS {len(layers)}", "", "/* clang-format off */",
    ]
    refs = []
    for i, (prefix, layer) in enumerate(layers):
        out.append(f"/* layer {i}: '{prefix}' */")
        row = []
        for field in FIELDS:
            t = layer.get(field)
            if t is None:
                row.append("NULL")
                continue
            ident = f"{name}_{i}_{field}"
            out.append(f"static const float {ident}[{t.size}] {upper}_UNUSED = {{")
            out.append(c_floats(t))
            out.append("};")
            row.append(ident)
        refs.append(row)
    out += ["", "/* C API: microattn_layer_init(&layer, max_seq, MODEL_DIM, HEADS, KV_HEADS, &NAME_c_weights[i], ...) */",
            f"static const microattn_layer_weights {name}_c_weights[{upper}_LAYERS] {upper}_UNUSED = {{"]
    out += ["    {" + ", ".join(r) + "}," for r in refs]
    out += ["};", "", "#ifdef __cplusplus",
            f"/* C++: microattn::MultiHeadAttention<MaxSeq, MODEL_DIM, HEADS, KV_HEADS> layer{{NAME_weights[i]}} */",
            f"static const microattn::LayerWeights {name}_weights[{upper}_LAYERS] {upper}_UNUSED = {{"]
    out += ["    {" + ", ".join("nullptr" if x == "NULL" else x for x in r) + "}," for r in refs]
    out += ["};", "#endif", "/* clang-format on */", "", f"#endif /* {guard} */", ""]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(out))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("input", help=".safetensors or .npz state_dict")
    ap.add_argument("-o", "--output", help="header to write (e.g. weights.h)")
    ap.add_argument("--name", default="model", help="C identifier prefix (default: model)")
    ap.add_argument("--heads", type=int, help="query heads (nn.MultiheadAttention num_heads)")
    ap.add_argument("--kv-heads", type=int, help="key/value heads (checked against the k/v shapes)")
    ap.add_argument("--prefix", help="regular expression a layer's name prefix must match (re.match)")
    ap.add_argument("--list", action="store_true", help="print the tensors and the layers found, write nothing")
    args = ap.parse_args(argv)

    if args.input.endswith(".npz"):
        tensors = read_npz(args.input)
    else:
        tensors = read_safetensors(args.input)
    layers = find_layers(tensors, args.prefix)
    if args.list:
        for n in sorted(tensors, key=natural_key):
            print(f"{n}: {tuple(tensors[n].shape)}")
        for p, _ in layers:
            print(f"layer '{p}'")
        return 0
    if not layers:
        sys.exit("export_weights.py: no attention layer found (in_proj_weight or q_proj.weight names); try --list")
    if args.heads is None or args.heads < 1 or args.output is None or not re.match(r"^[A-Za-z_]\w*$", args.name):
        sys.exit("export_weights.py: give --heads N, -o OUTPUT and a C identifier for --name")
    dims = {check_shapes(p, l, args.heads, args.kv_heads) for p, l in layers}
    if len(dims) != 1:
        sys.exit(f"export_weights.py: the layers differ in model dim or key/value heads: {sorted(dims)}")
    (d, kv_heads), = dims
    write_header(args.output, args.name, args.input, layers, d, args.heads, kv_heads)
    print(f"{args.output}: {len(layers)} layer(s), model dim {d}, {args.heads} heads, {kv_heads} key/value heads")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (ValueError, KeyError, OSError) as e:
        sys.exit(f"export_weights.py: {e}")
