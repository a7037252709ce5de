#!/usr/bin/python3
"""Test of scripts/export_weights.py on broken input: every file a firmware engineer could hand it by mistake
must be refused with exit status 1 and one line on stderr, 'export_weights.py: FILE: problem', naming the file
and (for the named cases below) the problem, with no traceback and no header written: the output must not
exist afterwards, or, when it existed, be left byte for byte as it was. Good files must still export, the header
must hold exactly the file's numbers and compile as C and C++.

1. Named cases (broken files, each a way to crash the exporter or make it write a wrong header; missing and
   unwritable paths; bad arguments), through a real subprocess and in-process (with and without an existing
   output file), each file with a keyword its message must contain.
2. Good files with awkward names (output starting with a digit, tensor names holding */ and line breaks,
   unused non-float tensors, Fortran-order and big-endian .npy arrays, tensors stored out of order): exported,
   checked value by value against an independent reading of the file, compiled.
3. Fuzzing, in-process through main(argv) (a subprocess each would take minutes): a few thousand mutants of good
   .safetensors and .npz files (bytes, header length, dtype / shape / data_offsets fields, entries added,
   removed, duplicated, arrays of other types or shapes, .npy header fields, NaN and inf), from a fixed seed.
   Each must either fail as above, or export a header whose arrays equal what this test's own reading of the
   file (the safetensors rules restated here; numpy.load for .npz) says the file holds. A quarter of them run
   with a random --format and --group (dividing or not): the header's binary16 bits must be the
   ties-to-even rounding of those values (struct's 'e'), its q8 scales float32(max|w| / 127) with
   |w - scale * q| <= scale / 2 and ties to even, and a group that does not divide a matrix, or an f16
   overflow, must be refused.
4. Weight formats and .pt input: bad --format / --group arguments (exit 2), a group not dividing a matrix and a
   weight beyond float16's range (exit 1), .pt/.pth with PyTorch hidden (a stand-in torch package that fails
   to import, in a subprocess, and sys.modules in-process), and, when PyTorch is installed, broken .pt files
   (garbage, not a dict, a pickled object weights_only refuses, a non-float weight) and a nested checkpoint
   that must export as its flattened state_dict.
Usage: check_export_bad_input.py EXPORT_SCRIPT INCLUDE_DIR --cc CC... --cxx CXX..."""
import contextlib
import copy
import importlib.util
import io
import json
import os
import random
import re
import struct
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
import zipfile

import numpy as np

E, HEADS = 8, 2
FUZZ_CASES = 3000
from check_util import check, failures  # noqa: E402


# --- files --------------------------------------------------------------------------------------------------

def st_parts(tensors):
    """tensors {name: (dtype, array of that storage type)}: (header dict, data bytes), in order."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, (dtype, arr) in tensors.items():
        raw = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    return header, b"".join(blobs)


def st_bytes(header, data, text=None):
    h = (json.dumps(header) if text is None else text).encode()
    h += b" " * (-len(h) % 8)  # the format pads the header with spaces to 8 bytes
    return struct.pack("<Q", len(h)) + h + data


def st_file(tensors, mutate=None):
    header, data = st_parts(tensors)
    if mutate is not None:
        data = mutate(header, data) or data
    return st_bytes(header, data)


def npz_bytes(arrays, compressed=False):
    buf = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buf, **arrays)
    return buf.getvalue()


def npy_bytes(arr):
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def npy_with_header(text, payload):
    """A version 1.0 .npy member with header text as given (numpy's is a Python dict literal) and payload."""
    h = text.encode("latin1")
    h += b" " * (-(10 + len(h) + 1) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + payload


def npz_members(members):
    """An .npz from {member name: bytes}, written as given."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, blob in members.items():
            z.writestr(name, blob)
    return buf.getvalue()


def bf16(x):
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def mha_tensors(rng, layers=2, prefix="encoder.layers.{}.self_attn.", int_tensor=True):
    """nn.MultiheadAttention(E, HEADS) layers, one storage type per tensor, plus tensors no layer uses."""
    t, kinds = {}, ["F32", "F16", "BF16", "F64"]
    for i in range(layers):
        p = prefix.format(i)
        for j, (key, shape) in enumerate((("in_proj_weight", (3 * E, E)), ("in_proj_bias", (3 * E,)),
                                          ("out_proj.weight", (E, E)), ("out_proj.bias", (E,)))):
            v = rng.uniform(-0.5, 0.5, shape)
            dtype = kinds[(i + j) % 4]
            t[p + key] = (dtype, {"F32": v.astype(np.float32), "F16": v.astype(np.float16), "BF16": bf16(v),
                                  "F64": v}[dtype])
        t[prefix.format(i).replace("self_attn.", "norm1.weight")] = ("F32", np.ones(E, np.float32))
    if int_tensor:
        t["encoder.num_batches_tracked"] = ("I64", np.array(7, np.int64))  # not attention, not float: ignored
    return t


def encoder_tensors(rng, layers=2, ff=12):
    """nn.TransformerEncoderLayer(E, HEADS, ff) blocks: the attention of mha_tensors and the feed-forward and
    norm tensors around it (float32)."""
    t = mha_tensors(rng, layers, int_tensor=False)
    for i in range(layers):
        b = f"encoder.layers.{i}."
        for key, shape in (("linear1.weight", (ff, E)), ("linear1.bias", (ff,)), ("linear2.weight", (E, ff)),
                           ("linear2.bias", (E,)), ("norm1.weight", (E,)), ("norm1.bias", (E,)),
                           ("norm2.weight", (E,)), ("norm2.bias", (E,))):
            t[b + key] = ("F32", rng.uniform(-0.5, 0.5, shape).astype(np.float32))
    return t


def llama_tensors(rng):
    """One Llama-style layer, grouped-query (1 key/value head of E / HEADS), q/k/v biases, o_proj without."""
    p, hd = "model.layers.0.self_attn.", E // HEADS
    shapes = {"q_proj.weight": (E, E), "k_proj.weight": (hd, E), "v_proj.weight": (hd, E), "o_proj.weight": (E, E),
              "q_proj.bias": (E,), "k_proj.bias": (hd,), "v_proj.bias": (hd,)}
    return {p + k: ("BF16", bf16(rng.uniform(-0.5, 0.5, s))) if k.startswith("v") else
            ("F32", rng.uniform(-0.5, 0.5, s).astype(np.float32)) for k, s in shapes.items()}


def as_arrays(tensors):
    """{name: float32 array} of the float tensors (for .npz)."""
    out = {}
    for name, (dtype, arr) in tensors.items():
        if dtype == "BF16":
            out[name] = (arr.astype(np.uint32) << 16).view(np.float32)
        elif dtype.startswith("F"):
            out[name] = arr.astype(np.float32)
    return out


# --- the file's contents, read independently of the exporter --------------------------------------------------

ITEMSIZE = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1, "I16": 2, "U16": 2, "F16": 2,
            "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "C64": 8, "I64": 8, "U64": 8, "F64": 8}


def reference_safetensors(blob):
    """{name: float64 array, or None for a non-float tensor} if blob keeps the safetensors rules, else None."""
    def no_duplicates(pairs):
        if len({k for k, _ in pairs}) != len(pairs):
            raise ValueError("duplicate")
        return dict(pairs)

    def no_constants(_):
        raise ValueError("constant")

    if len(blob) < 8:
        return None
    n = struct.unpack("<Q", blob[:8])[0]
    if 8 + n > len(blob):
        return None
    try:
        header = json.loads(blob[8:8 + n].decode("utf-8"), object_pairs_hook=no_duplicates,
                            parse_constant=no_constants)
    except (ValueError, RecursionError):
        return None
    if type(header) is not dict:
        return None
    data, ranges, out = blob[8 + n:], [], {}
    for name, info in header.items():
        if name == "__metadata__":
            if type(info) is not dict or any(type(v) is not str for v in info.values()):
                return None
            continue
        if type(info) is not dict or not {"dtype", "shape", "data_offsets"} <= set(info):
            return None
        dtype, shape, offs = info["dtype"], info["shape"], info["data_offsets"]
        if type(dtype) is not str or dtype not in ITEMSIZE:
            return None
        if type(shape) is not list or any(type(s) is not int or s < 0 for s in shape):
            return None
        if type(offs) is not list or len(offs) != 2 or any(type(o) is not int for o in offs):
            return None
        count = 1
        for s in shape:
            count *= s
        b, e = offs
        if not 0 <= b <= e <= len(data) or e - b != count * ITEMSIZE[dtype]:
            return None
        ranges.append((b, e))
        raw = data[b:e]
        if dtype == "BF16":
            out[name] = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        elif dtype in ("F16", "F32", "F64"):
            out[name] = np.frombuffer(raw, {"F16": "<f2", "F32": "<f4", "F64": "<f8"}[dtype]).astype(np.float64)
        else:
            out[name] = None
            continue
        out[name] = out[name].reshape(shape)
    pos = 0
    for b, e in sorted(ranges):  # every data byte in exactly one tensor
        if b != pos:
            return None
        pos = e
    return out if pos == len(data) else None


def reference_npz(path):
    """{name: float64 array, or None for one of another type} as numpy.load reads it, or None if it cannot."""
    out = {}
    try:
        with np.load(path, allow_pickle=False) as z:
            if not hasattr(z, "files"):
                return None
            for name in z.files:
                try:
                    a = z[name]
                except ValueError as e:
                    if "allow_pickle" not in str(e):
                        return None
                    out[name] = None
                    continue
                out[name] = a.astype(np.float64) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else None
    except Exception:  # anything numpy cannot read
        return None
    return out


def header_arrays(text):
    """({layer index: prefix as written in the comment}, {identifier: float32 values}) of an exported header."""
    prefixes = {int(i): p for i, p in re.findall(r"^/\* layer (\d+): '(.*)' \*/$", text, re.M)}
    arrays = {}
    for ident, n, body in re.findall(r"^static const float (\w+)\[(\d+)\] \w+ = \{\n(.*?)\n\};$", text, re.M | re.S):
        try:
            values = np.array([float(v.strip().rstrip("f")) for v in body.replace("\n", " ").split(",")
                               if v.strip()], np.float32)
        except ValueError:  # not a C float literal (nan.0f, say)
            values = None
        arrays[ident] = values if values is not None and values.size == int(n) else None
    return prefixes, arrays


class NotExportable(Exception):
    pass


def expected_layers(ref, with_shapes=False):
    """{prefix: {field: float32 values}} the exporter must write for a file holding ref (NotExportable if it
    must not export it), with nn.TransformerEncoderLayer blocks' fields too; with_shapes: also {prefix: {field:
    shape}}."""
    feed_forward, shapes = set(), {}
    def tensor(name, required=True, ndim=None):
        if name not in ref:
            if required:
                raise NotExportable(f"{name} missing")
            return None
        t = ref[name]
        if t is None or (ndim is not None and t.ndim != ndim) or not np.all(np.isfinite(t)):
            raise NotExportable(f"{name} is not a finite float tensor of {ndim} dimensions")
        return t

    layers = {}
    for name in ref:
        if name.endswith("in_proj_weight"):
            p = name[:-len("in_proj_weight")]
            w, b = tensor(name, ndim=2), tensor(p + "in_proj_bias", False, 1)
            e = w.shape[1]
            if e == 0 or w.shape[0] != 3 * e or (b is not None and b.shape != (3 * e,)):
                raise NotExportable(f"{p}: in_proj shapes {w.shape}, {None if b is None else b.shape}")
            layer = {f + "_weight": w[i * e:(i + 1) * e] for i, f in enumerate("qkv")}
            if b is not None:
                layer.update({f + "_bias": b[i * e:(i + 1) * e] for i, f in enumerate("qkv")})
            out = "out_proj"
        elif name.endswith("q_proj.weight"):
            p = name[:-len("q_proj.weight")]
            layer = {}
            for f, theirs in (("q", "q_proj"), ("k", "k_proj"), ("v", "v_proj")):
                layer[f + "_weight"] = tensor(p + theirs + ".weight", ndim=2)
                if tensor(p + theirs + ".bias", False, 1) is not None:
                    layer[f + "_bias"] = ref[p + theirs + ".bias"]
            out = "o_proj"
        else:
            if name.endswith("q_proj_weight"):  # nn.MultiheadAttention with kdim / vdim
                raise NotExportable(f"{name}: separate projections")
            continue
        extras = [x for x in ("bias_k", "bias_v", "q_norm.weight", "k_norm.weight") if p + x in ref]
        if extras or (p + out + ".bias" in ref and p + out + ".weight" not in ref):
            raise NotExportable(f"{p}: {extras or 'out bias without out weight'}")
        if tensor(p + out + ".weight", False, 2) is not None:
            layer["out_weight"] = ref[p + out + ".weight"]
        if tensor(p + out + ".bias", False, 1) is not None:
            layer["out_bias"] = ref[p + out + ".bias"]
        base = p[:-len("self_attn.")] if out == "out_proj" and p.endswith("self_attn.") else None
        if base is not None and (base + "linear1.weight" in ref or base + "linear2.weight" in ref) and not (
                base + "norm3.weight" in ref or any(n.startswith(base + "multihead_attn.") for n in ref)):
            # an nn.TransformerEncoderLayer: its feed-forward and norms, shapes from the attention's model dim
            w1 = tensor(base + "linear1.weight", ndim=2)
            ff = w1.shape[0]
            if ff == 0 or w1.shape[1] != e:
                raise NotExportable(f"{base}linear1.weight shape {w1.shape}")
            feed_forward.add(ff)
            for theirs, shape, required in (("linear1.weight", (ff, e), True), ("linear1.bias", (ff,), False),
                                            ("linear2.weight", (e, ff), True), ("linear2.bias", (e,), False),
                                            ("norm1.weight", (e,), True), ("norm1.bias", (e,), False),
                                            ("norm2.weight", (e,), True), ("norm2.bias", (e,), False)):
                t = tensor(base + theirs, required)
                if t is None:
                    continue
                if t.shape != shape:
                    raise NotExportable(f"{base}{theirs} shape {t.shape}, not {shape}")
                layer[theirs.replace(".", "_")] = t
        layers[p] = {k: np.asarray(v).astype(np.float32).ravel() for k, v in layer.items()}
        shapes[p] = {k: np.shape(v) for k, v in layer.items()}
    if len(feed_forward) > 1:
        raise NotExportable(f"encoder blocks of feed-forward sizes {sorted(feed_forward)}")
    return (layers, shapes) if with_shapes else layers


def as_comment(text):
    """text as the header's /* layer i: '...' */ comments show it: unprintables escaped, no */ to end them."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text).replace("*/", "* /")


def header_matches(text, ref, name):
    """'' if the header holds exactly ref's attention layers, each array equal, else what differs."""
    if ref is None:
        return "exported a file that breaks the format (or that numpy cannot read)"
    prefixes, arrays = header_arrays(text)
    try:
        want = expected_layers(ref)
    except NotExportable as e:
        return f"exported a file it must refuse: {e}"
    by_comment = {as_comment(p): p for p in want}
    if len(prefixes) != len(want):
        return f"{len(prefixes)} layers written, the file has {len(want)}"
    if any(v is None or not np.all(np.isfinite(v)) for v in arrays.values()):
        return "an array of the wrong length or with a non-finite value"
    seen = set()
    for i, comment in prefixes.items():
        p = by_comment.get(comment)
        if p is None:
            return f"layer {i} '{comment}' is no layer of the file"
        for field, values in want[p].items():
            ident = f"{name}_{i}_{field}"
            seen.add(ident)
            if ident not in arrays:
                return f"{ident} missing"
            if arrays[ident].shape != values.shape or not np.array_equal(arrays[ident], values):
                return f"{ident} differs from the file's values"
    if set(arrays) != seen:
        return f"arrays the file does not have: {sorted(set(arrays) - seen)}"
    return ""


def typed_arrays(text):
    """{identifier: (C type, values)} of every static const array of an exported header (None: unparsable)."""
    arrays = {}
    for ctype, ident, n, body in re.findall(r"^static const (float|uint16_t|int8_t) (\w+)\[(\d+)\] \w+ = "
                                            r"\{\n(.*?)\n\};$", text, re.M | re.S):
        items = [v.strip() for v in body.replace("\n", " ").split(",") if v.strip()]
        try:
            if ctype == "float":
                values = np.array([float(v.rstrip("f")) for v in items], np.float32)
            elif ctype == "uint16_t":
                values = np.array([int(v, 16) for v in items], np.uint16)
            else:
                values = np.array([int(v) for v in items], np.int8)
        except (ValueError, OverflowError):
            values = None
        arrays[ident] = (ctype, values if values is not None and values.size == int(n) else None)
    return arrays


def expected_f16(values):
    """binary16 bits of float32 values, rounded to nearest even by struct (not numpy); NotExportable on overflow."""
    try:
        return np.array([struct.unpack("<H", struct.pack("<e", float(v)))[0] for v in values], np.uint16)
    except OverflowError:
        raise NotExportable("beyond float16's range") from None


def q8_differs(q, scales, w, group):
    """'' if (q, scales) quantize w (float32 values) per group as the exporter promises, else what differs."""
    if w.size % group:
        return "a group that does not divide the matrix was accepted"
    if scales is None or scales.size != w.size // group:
        return "wrong number of scales"
    src = w.astype(np.float64).reshape(-1, group)
    if not np.array_equal(scales, (np.abs(src).max(axis=1) / 127).astype(np.float32)):
        return "scales are not float32(max|w| / 127)"
    s = scales.astype(np.float64)[:, None]
    qq = q.astype(np.float64).reshape(-1, group)
    if np.any(np.abs(qq) > 127) or np.any(np.abs(src - s * qq) > s * (0.5 + 2.0 ** -17)):
        return "an int8 value off by more than half a scale"
    ratio = np.divide(src, s, out=np.zeros_like(src), where=s > 0)
    if np.any(qq[ratio - np.floor(ratio) == 0.5] % 2 != 0):
        return "a tie not rounded to even"
    return ""


WEIGHT_FIELDS = ("q_weight", "k_weight", "v_weight", "out_weight", "linear1_weight", "linear2_weight")


def format_header_matches(text, ref, name, fmt, group):
    """As header_matches, for a header exported with --format fmt (--group group)."""
    if ref is None:
        return "exported a file that breaks the format (or that numpy cannot read)"
    try:
        want, shapes = expected_layers(ref, with_shapes=True)
        prefixes = {int(i): p for i, p in re.findall(r"^/\* layer (\d+): '(.*)' \*/$", text, re.M)}
        arrays = typed_arrays(text)
        if len(prefixes) != len(want):
            return f"{len(prefixes)} layers written, the file has {len(want)}"
        if any(v is None for _, v in arrays.values()):
            return "an array of the wrong length or not C literals"
        by_comment = {as_comment(p): p for p in want}
        seen = set()
        for i, comment in prefixes.items():
            p = by_comment.get(comment)
            if p is None:
                return f"layer {i} '{comment}' is no layer of the file"
            for field, values in want[p].items():
                ident = f"{name}_{i}_{field}"
                seen.add(ident)
                if ident not in arrays:
                    return f"{ident} missing"
                ctype, got = arrays[ident]
                if field not in WEIGHT_FIELDS or fmt == "f32":
                    if ctype != "float" or not np.array_equal(got, values):
                        return f"{ident} differs from the file's values"
                elif fmt == "f16":
                    if ctype != "uint16_t" or not np.array_equal(got, expected_f16(values)):
                        return f"{ident}: not the binary16 rounding of the file's values"
                else:
                    n = group or shapes[p][field][1]  # default: one scale per row
                    if values.size % n:
                        raise NotExportable(f"--group {n} does not divide {ident}")
                    scales = arrays.get(ident[:-len("_weight")] + "_scales", (None, None))[1]
                    seen.add(ident[:-len("_weight")] + "_scales")
                    differs = q8_differs(got, scales, values, n) if ctype == "int8_t" else f"{ident} is {ctype}"
                    if differs:
                        return f"{ident}: {differs}"
        if set(arrays) != seen:
            return f"arrays the file does not have: {sorted(set(arrays) - seen)}"
    except NotExportable as e:
        return f"exported a file it must refuse: {e}"
    if f"{name}_c_matrices[" not in text or f"{name}_matrices[" not in text:
        return "no weight matrices initializers"
    return ""


# --- running the exporter ---------------------------------------------------------------------------------------

def run_subprocess(export, argv, env=None):
    r = subprocess.run([sys.executable, export] + argv, capture_output=True, text=True, env=env)
    return r.returncode, r.stdout, r.stderr, ""


def have_torch():
    try:
        import torch  # noqa: F401
        return True
    except ImportError:
        return False


def torch_bytes(obj):
    import torch
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def torch_state_dict(tensors):
    """tensors {name: (dtype, array)} as a torch state_dict (bfloat16 from its bits)."""
    import torch
    out = {}
    for name, (dtype, arr) in tensors.items():
        if dtype == "BF16":
            out[name] = torch.from_numpy((arr.astype(np.uint32) << 16).view(np.float32).copy()).to(torch.bfloat16)
        else:
            out[name] = torch.from_numpy(np.ascontiguousarray(arr).copy())
    return out


def run_inprocess(exporter, argv):
    out, err, tb = io.StringIO(), io.StringIO(), ""
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
            warnings.simplefilter("always")  # every warning reaches stderr, where it would break the one line
            code = exporter.main(argv)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) or e.code is None else 1
        if isinstance(e.code, str):
            err.write(e.code + "\n")
    except BaseException:  # an exception out of main() is a crash: what this test looks for
        code, tb = None, traceback.format_exc()
    return code, out.getvalue(), err.getvalue(), tb


SENTINEL = b"/* an existing file the failed export must leave alone */\n"


def refused(what, result, named_path, output, existed, keyword=None):
    """Checks a failed export: exit 1, one line naming named_path, keyword in it, nothing written."""
    code, _, err, tb = result
    ok = check(not tb and "Traceback" not in err, f"{what}: traceback: {(tb or err).strip().splitlines()[-1:]}")
    ok &= check(code == 1, f"{what}: exit status {code}, expected 1 ({err.strip()[:200]!r})")
    lines = err.splitlines()
    ok &= check(len(lines) == 1, f"{what}: {len(lines)} lines on stderr, expected 1: {err[:300]!r}")
    if lines:
        line = lines[0]
        prefix = f"export_weights.py: {named_path if named_path.isprintable() else repr(named_path)}: "
        ok &= check(line.startswith(prefix) and len(line) > len(prefix),
                    f"{what}: message does not start with {prefix!r}: {line!r}")
        ok &= check("internal error" not in line, f"{what}: internal error: {line!r}")
        if keyword is not None:
            ok &= check(keyword.lower() in line.lower(), f"{what}: {keyword!r} not in {line!r}")
    ok &= check(nothing_written(output, existed), f"{what}: the output was written (or removed)")
    return ok


def nothing_written(output, existed):
    leftovers = [n for n in os.listdir(os.path.dirname(output) or ".") if n.endswith(".tmp")]
    if leftovers:
        return False
    if existed:
        with open(output, "rb") as f:
            return f.read() == SENTINEL
    return not os.path.exists(output)


def prepare_output(output, existed):
    if os.path.isdir(output):
        return
    if existed:
        with open(output, "wb") as f:
            f.write(SENTINEL)
    elif os.path.exists(output):
        os.remove(output)


# The C struct of a layer's weight matrices (fields fixed for the C API) where microattn.h does not have it yet
LAYER_MATRICES_STAND_IN = """#include <microattn/microattn.h>
typedef struct {
  microattn_weight_matrix q, k, v;
  const float* q_bias;
  const float* k_bias;
  const float* v_bias;
  microattn_weight_matrix out;
  const float* out_bias;
} microattn_layer_weight_matrices;
"""


def layer_matrices_prelude(include):
    with open(os.path.join(include, "microattn", "microattn.h"), encoding="utf-8") as f:
        return "" if "microattn_layer_weight_matrices;" in f.read() else LAYER_MATRICES_STAND_IN


def compiles(tmp, header, cc, cxx, include):
    """'' if a C and a C++ translation unit including header compile without a warning, else the errors."""
    src = os.path.join(tmp, "use_header.c")
    with open(header, encoding="utf-8") as f:
        prelude = layer_matrices_prelude(include) if "_c_matrices[" in f.read() else ""
    with open(src, "w", encoding="utf-8") as f:
        f.write(prelude + f'#include "{os.path.basename(header)}"\n#include "{os.path.basename(header)}"\n'
                "int use_header(void) { return 0; }\n")
    for compiler, flags in ((cc, ["-std=c99", "-x", "c"]), (cxx, ["-std=c++17", "-x", "c++"])):
        r = subprocess.run(compiler + flags + ["-Wall", "-Wextra", "-Wpedantic", "-Werror", "-fsyntax-only", "-I",
                                               include, "-I", os.path.dirname(header), src],
                           capture_output=True, text=True)
        if r.returncode != 0:
            return r.stderr
    return ""


# --- 1. named cases -------------------------------------------------------------------------------------------

def named_cases(rng):
    """[(label, suffix, file bytes, extra argv, keyword)]: each must be refused with keyword in its message."""
    mha = mha_tensors(rng, int_tensor=False)  # floats only: each case reaches what it is named for
    llama = llama_tensors(rng)
    p0 = "encoder.layers.0.self_attn."
    lp = "model.layers.0.self_attn."
    cases = []

    def st(label, keyword, mutate=None, tensors=None, argv=()):
        cases.append((label, ".safetensors", st_file(tensors if tensors is not None else mha, mutate), list(argv),
                      keyword))

    def field(name, key, value):
        def mutate(h, _):
            h[name][key] = value
        return mutate

    def replaced(tensors, name, value):
        t = dict(tensors)
        t[name] = value
        return t

    header, data = st_parts(mha)
    cases.append(("header is a JSON list", ".safetensors", st_bytes(None, data, json.dumps(list(header))), [],
                  "JSON list"))
    st("an entry is not an object", "entry is a JSON list", lambda h, _: h.__setitem__(p0 + "in_proj_bias", [0, 96]))
    st("dtype is a list", "dtype is a JSON list", field(p0 + "out_proj.bias", "dtype", ["F32"]))
    st("unknown dtype", "unknown dtype", field(p0 + "out_proj.bias", "dtype", "F33"))
    st("shape of strings", "not a list of integers", field(p0 + "in_proj_weight", "shape", [str(3 * E), str(E)]))
    st("shape of floats", "not a list of integers", field(p0 + "in_proj_weight", "shape", [3.0 * E, 1.0 * E]))
    st("shape null", "not a list of integers", field(p0 + "in_proj_weight", "shape", None))
    st("shape of booleans", "not a list of integers", field(p0 + "out_proj.bias", "shape", [True]))
    st("shape [2**64]", "too large", field(p0 + "out_proj.bias", "shape", [2 ** 64]))
    st("shape [0, 2**64]", "too large", field(p0 + "out_proj.bias", "shape", [0, 2 ** 64]))
    st("negative shape", "negative", field(p0 + "out_proj.bias", "shape", [-E]))
    st("data_offsets of strings", "not a list of two integers", field(p0 + "out_proj.bias", "data_offsets", ["0", "8"]))
    st("three data_offsets", "not a list of two integers", field(p0 + "out_proj.bias", "data_offsets", [0, 8, 16]))

    def overlapping(h, _):  # layer 0's out_proj.bias on the bytes of its in_proj_bias
        b, e = h[p0 + "out_proj.bias"]["data_offsets"]
        at = h[p0 + "in_proj_bias"]["data_offsets"][0]
        h[p0 + "out_proj.bias"]["data_offsets"] = [at, at + e - b]
    st("overlapping data_offsets", "overlap", overlapping)

    def odd(name):
        def mutate(h, _):
            h[name]["data_offsets"] = [o + 1 for o in h[name]["data_offsets"]]
        return mutate
    st("odd data_offsets (a middle tensor moved by one byte)", "data_offsets", odd(p0 + "out_proj.bias"))
    st("odd data_offsets (the last tensor moved by one byte)", "data_offsets", odd("encoder.layers.1.norm1.weight"))

    def negative(h, data):  # the same bytes, counted from the end as a Python slice would
        h[p0 + "out_proj.bias"]["data_offsets"] = [o - len(data) for o in h[p0 + "out_proj.bias"]["data_offsets"]]
    st("negative data_offsets", "data_offsets", negative)

    def short(h, _):
        h[p0 + "out_proj.bias"]["shape"] = [E - 1]
    st("data_offsets span more than the shape", "span", short)
    st("bytes after the last tensor", "belong to no tensor", lambda h, d: d + b"\0" * 8)

    def duplicate_text():
        header, data = st_parts(mha)
        text = json.dumps(header)
        entry = json.dumps({p0 + "out_proj.bias": header[p0 + "out_proj.bias"]})[1:-1]
        return st_bytes(None, data, text[:-1] + ", " + entry + "}")
    cases.append(("a tensor named twice", ".safetensors", duplicate_text(), [], "twice"))
    header, data = st_parts(mha)
    cases.append(("NaN constant in the header", ".safetensors",
                  st_bytes(None, data, json.dumps(header).replace(f"[{3 * E}, {E}]", f"[NaN, {E}]", 1)), [],
                  "not valid JSON"))
    cases.append(("header not UTF-8", ".safetensors", struct.pack("<Q", 8) + b"\xff" * 8 + data, [], "UTF-8"))
    full = st_file(mha)
    cases.append(("header length past the end", ".safetensors", struct.pack("<Q", len(full)) + full[8:], [],
                  "runs past the end"))
    cases.append(("truncated file", ".safetensors", full[:-5], [], "data_offsets"))
    cases.append(("empty file", ".safetensors", b"", [], "too short"))
    cases.append(("an .npz named .safetensors", ".safetensors", npz_bytes(as_arrays(mha)), [], "zip archive"))

    nan_q = dict(mha)
    w = mha[p0 + "in_proj_weight"]
    nan_w = w[1].copy()
    nan_w[1, 2] = np.nan  # in the q rows
    nan_q[p0 + "in_proj_weight"] = (w[0], nan_w)
    st("NaN in q_weight", "NaN", tensors=nan_q)
    inf_q = dict(llama)
    qw = llama[lp + "q_proj.weight"][1].copy()
    qw[0, 0] = np.inf
    inf_q[lp + "q_proj.weight"] = ("F32", qw)
    st("inf in q_proj.weight", "NaN or inf", tensors=inf_q)
    big = dict(mha)
    bw = np.zeros((3 * E, E))
    bw[5, 5] = 1e300
    big[p0 + "in_proj_weight"] = ("F64", bw)
    st("F64 beyond float32's range", "beyond float32", tensors=big)
    st("0-d in_proj_bias", "has shape ()", tensors=replaced(mha, p0 + "in_proj_bias", ("F32", np.array(1, np.float32))))
    st("int in_proj_weight", "I64", tensors=replaced(mha, p0 + "in_proj_weight",
                                                      ("I64", np.ones((3 * E, E), np.int64))))
    st("q_proj 0x0", "(0, 0)", tensors=replaced(llama, lp + "q_proj.weight", ("F32", np.zeros((0, 0), np.float32))))
    st("k_proj of 0 rows", "rows >= 1", tensors=replaced(llama, lp + "k_proj.weight",
                                                          ("F32", np.zeros((0, E), np.float32))))
    kv = dict(mha)
    kv[p0 + "bias_k"] = ("F32", np.ones((1, 1, E), np.float32))
    kv[p0 + "bias_v"] = ("F32", np.ones((1, 1, E), np.float32))
    st("add_bias_kv=True", "add_bias_kv", tensors=kv)
    st("q_norm", "q_norm", tensors=replaced(llama, lp + "q_norm.weight", ("F32", np.ones(E // HEADS, np.float32))))
    sep = {k: v for k, v in mha.items() if not k.startswith(p0 + "in_proj_weight")}
    for i, part in enumerate("qkv"):
        sep[p0 + part + "_proj_weight"] = ("F32", mha[p0 + "in_proj_weight"][1][i * E:(i + 1) * E].astype(np.float32))
    st("kdim/vdim (separate q_proj_weight)", "kdim", tensors=sep)
    st("out_proj.bias without out_proj.weight", "without",
       tensors={k: v for k, v in mha.items() if k != p0 + "out_proj.weight"})
    st("no attention layer", "no attention layer", tensors={"w": ("F32", np.ones((2, 2), np.float32))})
    st("wrong --kv-heads", "kv-heads", tensors=llama, argv=["--kv-heads", "2"])
    st("--heads not dividing the model dim", "multiple of --heads", argv=["--heads", "3"])

    arrays = as_arrays(mha)
    good_npz = npz_bytes(arrays)
    cases.append(("garbage .npz", ".npz", bytes(random.Random(5).randrange(256) for _ in range(300)), [],
                  "not a zip archive"))
    cases.append(("truncated .npz", ".npz", good_npz[:len(good_npz) // 2], [], "not a zip archive"))
    cases.append(("empty .npz", ".npz", b"", [], "not a zip archive"))
    cases.append((".npy renamed .npz", ".npz", npy_bytes(arrays[p0 + "in_proj_weight"]), [], "single .npy"))

    def npz_with(name, value):
        a = dict(arrays)
        a[name] = value
        return npz_bytes(a)
    cases.append(("int .npz array as a weight", ".npz", npz_with(p0 + "in_proj_weight",
                                                                 np.ones((3 * E, E), np.int64)), [], "int64"))
    cases.append(("complex .npz array as a weight", ".npz", npz_with(p0 + "out_proj.weight",
                                                                     np.ones((E, E), np.complex64)), [], "complex"))
    obj = np.empty(E, dtype=object)
    obj[:] = [float(i) for i in range(E)]
    cases.append(("object .npz array as a weight", ".npz", npz_with(p0 + "out_proj.bias", obj), [], "object array"))
    cases.append(("bool .npz array as a weight", ".npz", npz_with(p0 + "out_proj.bias", np.ones(E, bool)), [],
                  "bool"))
    nan_b = arrays[p0 + "in_proj_bias"].copy()
    nan_b[E] = np.nan
    cases.append(("NaN in an .npz bias", ".npz", npz_with(p0 + "in_proj_bias", nan_b), [], "NaN"))
    cases.append(("0-d .npz in_proj_bias", ".npz", npz_with(p0 + "in_proj_bias", np.float32(1)), [], "has shape ()"))

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:  # what a PyTorch .pt holds
        z.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
        z.writestr("archive/data/0", b"\0" * 16)
    cases.append(("PyTorch .pt renamed .npz", ".npz", buf.getvalue(), [], "PyTorch"))
    cases.append(("an .npy member shorter than its shape", ".npz",
                  npz_members({p0 + "in_proj_weight.npy": npy_bytes(arrays[p0 + "in_proj_weight"])[:-12]}), [],
                  "data bytes"))
    open_header = npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (24,)",
                                  arrays[p0 + "in_proj_bias"].tobytes())
    cases.append(("an .npy header left open", ".npz",  # numpy's parser then fails in its tokenizer
                  npz_members({p0 + "in_proj_bias.npy": open_header}), [], "not a valid .npy"))
    comp = bytearray(npz_bytes(arrays, compressed=True))
    comp[len(comp) // 3] ^= 0x55  # in the deflate stream of a member
    cases.append(("corrupt compressed .npz", ".npz", bytes(comp), [], "corrupt"))

    # weight formats
    st("--group not dividing the matrices", "does not divide", argv=["--format", "q8", "--group", "5"])
    st("--group dividing q but not the GQA k (4 x 8)", "does not divide", tensors=llama,
       argv=["--format", "q8", "--group", "64"])
    st("--group larger than the matrices", "does not divide", argv=["--format", "q8", "--group", str(2 ** 70)])
    big16 = dict(mha)
    w16 = mha[p0 + "in_proj_weight"][1].astype(np.float32)
    w16[3, 1] = 65520.0  # the first value that rounds to infinity
    big16[p0 + "in_proj_weight"] = ("F32", w16)
    st("f16: a weight beyond float16's range", "float16's range", tensors=big16, argv=["--format", "f16"])
    st("q8: int in_proj_weight", "I64", tensors=replaced(mha, p0 + "in_proj_weight",
                                                          ("I64", np.ones((3 * E, E), np.int64))),
       argv=["--format", "q8"])
    st("f16: NaN in q_weight", "NaN", tensors=nan_q, argv=["--format", "f16"])
    cases.append(("q8: bool .npz array as a weight", ".npz", npz_with(p0 + "out_proj.weight", np.ones((E, E), bool)),
                  ["--format", "q8", "--group", "8"], "bool"))
    # nn.TransformerEncoderLayer blocks: tensors that do not fit together, a missing one, bad values, flags
    enc = encoder_tensors(rng)
    b0, b1 = "encoder.layers.0.", "encoder.layers.1."

    def without(tensors, name):
        return {k: v for k, v in tensors.items() if k != name}
    f32 = lambda shape: ("F32", rng.uniform(-0.5, 0.5, shape).astype(np.float32))  # noqa: E731
    st("block: linear1.weight of the wrong model dim", "linear1.weight", tensors=replaced(enc, b0 + "linear1.weight",
                                                                                        f32((12, E + 1))))
    st("block: linear1.weight 1-d", "linear1.weight", tensors=replaced(enc, b0 + "linear1.weight", f32((12 * E,))))
    st("block: linear1.weight with no rows", "linear1.weight", tensors=replaced(enc, b1 + "linear1.weight",
                                                                              f32((0, E))))
    st("block: linear2.weight not (E, ff)", "linear2.weight", tensors=replaced(enc, b1 + "linear2.weight",
                                                                             f32((E, 13))))
    st("block: linear2.weight transposed", "linear2.weight", tensors=replaced(enc, b0 + "linear2.weight",
                                                                            f32((12, E))))
    st("block: linear1.bias of the wrong length", "linear1.bias", tensors=replaced(enc, b0 + "linear1.bias",
                                                                                 f32((E,))))
    st("block: linear2.bias of the wrong length", "linear2.bias", tensors=replaced(enc, b1 + "linear2.bias",
                                                                                 f32((12,))))
    st("block: norm1.weight of the wrong length", "norm1.weight", tensors=replaced(enc, b0 + "norm1.weight",
                                                                                 f32((E - 1,))))
    st("block: norm2.bias 2-d", "norm2.bias", tensors=replaced(enc, b1 + "norm2.bias", f32((1, E))))
    st("block: norm1.weight missing", "norm1.weight", tensors=without(enc, b0 + "norm1.weight"))
    st("block: norm2.weight missing", "is missing", tensors=without(enc, b1 + "norm2.weight"))
    st("block: linear2.weight missing", "linear2.weight", tensors=without(enc, b0 + "linear2.weight"))
    st("block: linear1.weight missing (linear2 there)", "linear1.weight", tensors=without(enc, b1 + "linear1.weight"))
    st("block: the layers' feed-forward sizes differ", "feed-forward",
       tensors=dict(replaced(replaced(enc, b1 + "linear1.weight", f32((16, E))), b1 + "linear2.weight", f32((E, 16))),
                    **{b1 + "linear1.bias": f32((16,))}))
    nan_norm = enc[b1 + "norm2.bias"][1].copy()
    nan_norm[3] = np.nan
    st("block: NaN in norm2.bias", "NaN", tensors=replaced(enc, b1 + "norm2.bias", ("F32", nan_norm)))
    inf_ff = enc[b0 + "linear1.weight"][1].copy()
    inf_ff[2, 1] = -np.inf
    st("block: inf in linear1.weight (q8)", "NaN or inf", tensors=replaced(enc, b0 + "linear1.weight",
                                                                          ("F32", inf_ff)), argv=["--format", "q8"])
    st("block: int linear2.weight", "I64", tensors=replaced(enc, b0 + "linear2.weight",
                                                            ("I64", np.ones((E, 12), np.int64))))
    big_ff = enc[b1 + "linear2.weight"][1].copy()
    big_ff[1, 1] = 70000.0
    st("block f16: linear2.weight beyond float16's range", "float16's range",
       tensors=replaced(enc, b1 + "linear2.weight", ("F32", big_ff)), argv=["--format", "f16"])
    # 64 divides every attention matrix (8 x 8) but not linear1's 12 x 8
    st("block q8: --group dividing the attention but not linear1", "linear1.weight",
       argv=["--format", "q8", "--group", "64"], tensors=enc)
    st("block flags on a file without blocks", "--activation", argv=["--activation", "gelu"])
    st("--norm-first on a file without blocks", "--norm-first", argv=["--norm-first"])
    if have_torch():
        import fractions
        import torch
        sd = torch_state_dict(mha)
        cases.append((".pt: garbage", ".pt", bytes(random.Random(6).randrange(256) for _ in range(300)), [],
                      "torch.load"))
        cases.append((".pt: a tensor, not a dict", ".pt", torch_bytes(torch.ones(3)), [], "not a state_dict"))
        cases.append((".pth: a list, not a dict", ".pth", torch_bytes([torch.ones(3)]), [], "not a state_dict"))
        cases.append((".pt: an object weights_only does not load", ".pt",
                      torch_bytes({"x": fractions.Fraction(1, 3)}), [], "torch.load"))
        cases.append((".pt: int64 in_proj_weight", ".pt",
                      torch_bytes(dict(sd, **{p0 + "in_proj_weight": torch.ones(3 * E, E, dtype=torch.int64)})), [],
                      "int64"))
        cases.append((".pt: NaN in q_weight", ".pt", torch_bytes(torch_state_dict(nan_q)), ["--format", "q8"], "NaN"))
        cases.append((".pt: float64 beyond float32", ".pt", torch_bytes(torch_state_dict(big)), [], "beyond float32"))
        cases.append((".pt: --group not dividing", ".pt", torch_bytes(sd), ["--format", "q8", "--group", "3"],
                      "does not divide"))
    else:
        print("SKIP broken .pt files: PyTorch is not installed (python3-torch)")
    return cases


# --- 3. mutations -------------------------------------------------------------------------------------------------

NAN_BYTES = {"F32": [struct.pack("<f", v) for v in (float("nan"), float("inf"), -float("inf"))],
             "F16": [b"\x00\x7e", b"\x00\x7c", b"\x00\xfc"], "BF16": [b"\xc0\x7f", b"\x80\x7f", b"\x80\xff"],
             "F64": [struct.pack("<d", float("nan")), struct.pack("<d", float("inf")), struct.pack("<d", 1e300)]}
NPY_FIELD_VALUES = {
    "descr": ["'<f4'", "'>f4'", "'<f2'", "'<f8'", "'|O'", "'<U4'", "[('a', '<f4')]", "'<f99'", "'x'", "3", "None",
              "'<c8'", "'V4'", "'<M8[s]'", "'|b1'", "[]"],
    "fortran_order": ["True", "'x'", "1", "None"],
    "shape": ["(-1,)", "(2**64,)", "(18446744073709551616,)", "('a',)", "(1.5,)", "()", "24", "(0,)", "[24]",
              "(" + "1, " * 40 + ")", "(-1, -24)", "(24, 0)", "(3, 8)", "(8, 3)"],
}
ODD_VALUES = [None, True, False, 0, -1, 1, 2 ** 31, 2 ** 63, 2 ** 64, 1.5, "8", "", [], {}, [1], [[1]], "F32"]


def mutate_bytes(r, blob):
    kind = r.choice(["byte", "bit", "truncate", "append", "splice"])
    b = bytearray(blob)
    if kind == "byte" and b:
        b[r.randrange(len(b))] = r.randrange(256)
    elif kind == "bit" and b:
        i = r.randrange(len(b))
        b[i] ^= 1 << r.randrange(8)
    elif kind == "truncate":
        del b[r.randrange(len(b) + 1):]
    elif kind == "append":
        b += bytes(r.randrange(256) for _ in range(r.randrange(1, 17)))
    else:  # a run of bytes copied elsewhere
        i, j = r.randrange(len(b)), r.randrange(len(b))
        n = r.randrange(1, 33)
        b[j:j + n] = b[i:i + n]
    return "bytes/" + kind, bytes(b)


def mutate_safetensors(r, tensors):
    header, data = st_parts(tensors)
    names = [n for n in header if n != "__metadata__"]
    name = r.choice(names)
    entry = header[name]
    kind = r.choice(["bytes", "bytes", "header_len", "dtype", "shape", "offsets", "offsets", "entry", "remove",
                     "add", "swap", "reorder", "toplevel", "metadata", "duplicate", "text", "nan"])
    if kind == "bytes":
        return mutate_bytes(r, st_bytes(header, data))
    if kind == "header_len":
        blob = st_bytes(header, data)
        n = struct.unpack("<Q", blob[:8])[0]
        n = r.choice([n + r.randint(-16, 16), r.randrange(2 ** 64), r.randrange(len(blob)), 0])
        return kind, struct.pack("<Q", n % 2 ** 64) + blob[8:]
    if kind == "dtype":
        entry["dtype"] = r.choice(list(ITEMSIZE) + ["f32", "F33", "F4", "", "Float"] + ODD_VALUES)
    elif kind == "shape":
        s = list(entry["shape"])
        op = r.randrange(9)
        if op == 0 and s:
            s.reverse()
        elif op == 1:
            s.insert(r.randrange(len(s) + 1), r.choice([1, 0, 2]))
        elif op == 2 and s:
            s.pop(r.randrange(len(s)))
        elif op == 3 and s:
            s[r.randrange(len(s))] += r.choice([-1, 1, -s[0]])
        elif op == 4 and s:
            s[r.randrange(len(s))] = r.choice(ODD_VALUES)
        elif op == 5:
            s = r.choice(ODD_VALUES)
        elif op == 6:
            s = [1] * r.choice([33, 40]) + s
        elif op == 7 and len(s) == 2 and s[0] % 2 == 0:
            s = [s[0] // 2, s[1] * 2]  # same size, other shape
        else:
            s = [0, 2 ** r.choice([48, 62, 63, 64])]
        entry["shape"] = s
    elif kind == "offsets":
        b, e = entry["data_offsets"]
        op = r.randrange(8)
        d = r.choice([1, 2, 3, 4, 8, -1, -2, -4])
        entry["data_offsets"] = [[b + d, e + d], [b, e + d], [b + d, e], [e, b], [b - len(data), e - len(data)],
                                 [b, e, e], r.choice(ODD_VALUES), [float(b), e]][op]
        if op == 7 and r.random() < 0.5:  # another tensor's bytes
            entry["data_offsets"] = list(header[r.choice(names)]["data_offsets"])
    elif kind == "entry":
        op = r.randrange(3)
        if op == 0:
            header[name] = r.choice(ODD_VALUES)
        elif op == 1:
            del entry[r.choice(["dtype", "shape", "data_offsets"])]
        else:
            entry["extra"] = r.choice(ODD_VALUES)  # unknown keys are allowed
    elif kind == "remove":
        del header[name]
    elif kind == "add":
        prefix = re.sub(r"(in_proj_weight|in_proj_bias|out_proj\.weight|out_proj\.bias|[qkvo]_proj\.(weight|bias)"
                        r"|norm1\.weight|num_batches_tracked)$", "", name)
        extra = r.choice(["bias_k", "bias_v", "q_norm.weight", "k_norm.weight", "q_proj_weight", "unused.weight",
                          "in_proj_bias", "out_proj.bias", "o_proj.bias"])
        dtype = r.choice(["F32", "F16", "I32"])
        n = r.choice([E, 3 * E, 1])
        raw = np.ones(n, {"F32": "<f4", "F16": "<f2", "I32": "<i4"}[dtype]).tobytes()
        if prefix + extra in header:
            return "add/exists", st_bytes(header, data)
        header[prefix + extra] = {"dtype": dtype, "shape": [n], "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
        kind = "add/" + extra
    elif kind == "swap":  # two tensors of the same byte size trade places: a valid file, values must follow
        sizes = {}
        for n in names:
            o = header[n]["data_offsets"]
            sizes.setdefault(o[1] - o[0], []).append(n)
        pairs = [v for v in sizes.values() if len(v) > 1]
        if pairs:
            a, c = r.sample(r.choice(pairs), 2)
            header[a]["data_offsets"], header[c]["data_offsets"] = header[c]["data_offsets"], header[a]["data_offsets"]
            if r.random() < 0.5:  # and the bytes too, so that the tensors keep their values
                oa, oc = header[a]["data_offsets"], header[c]["data_offsets"]
                b = bytearray(data)
                b[oa[0]:oa[1]], b[oc[0]:oc[1]] = data[oc[0]:oc[1]], data[oa[0]:oa[1]]
                data = bytes(b)
    elif kind == "reorder":  # the data in another order than the header's: valid
        order = names[:]
        r.shuffle(order)
        blobs, pos = [], 0
        for n in order:
            b, e = header[n]["data_offsets"]
            blobs.append(data[b:e])
            header[n]["data_offsets"] = [pos, pos + e - b]
            pos += e - b
        data = b"".join(blobs)
    elif kind == "toplevel":
        return kind, st_bytes(None, data, json.dumps(r.choice([list(header), [header], "x", 3, None, True])))
    elif kind == "metadata":
        header["__metadata__"] = r.choice(ODD_VALUES + [{"format": 1}, {"format": "pt", "x": "y"}])
    elif kind == "duplicate":
        text = json.dumps(header)
        entry_text = json.dumps({name: header[name]})[1:-1]
        return kind, st_bytes(None, data, text[:-1] + ", " + entry_text + "}")
    elif kind == "text":
        text = json.dumps(header)
        i = r.randrange(len(text))
        text = r.choice([text[:i] + text[i + 1:], text[:i] + r.choice(',:[]{}"\\0-e. NaN') + text[i:],
                         text.replace("]", ", ]", 1), text + "x", "\ufeff" + text, text.replace(", ", ",\n")])
        return kind, st_bytes(None, data, text)
    else:  # NaN, inf or (from F64) a value beyond float32's range in one element
        floats = [n for n in names if header[n]["dtype"] in NAN_BYTES]
        name = r.choice(floats)
        dtype = header[name]["dtype"]
        b, e = header[name]["data_offsets"]
        size = ITEMSIZE[dtype]
        if e > b:
            at = b + size * r.randrange((e - b) // size)
            data = data[:at] + r.choice(NAN_BYTES[dtype]) + data[at + size:]
    return kind, st_bytes(header, data)


def mutate_npz(r, arrays):
    a = dict(arrays)
    names = list(a)
    name = r.choice(names)
    compressed = r.random() < 0.3
    kind = r.choice(["bytes", "bytes", "bytes", "dtype", "shape", "nan", "remove", "add", "layout", "npy", "zip",
                     "npy_header"])
    if kind == "bytes":
        return mutate_bytes(r, npz_bytes(a, compressed))
    if kind == "dtype":
        t = r.choice(["int32", "int64", "uint8", "bool", "complex64", "float16", "float64", ">f4", ">f8", "object",
                      "S4", "datetime64[s]"])
        if t == "object":
            v = np.empty(a[name].shape, dtype=object)
            v.ravel()[:] = list(a[name].ravel())
        else:
            v = a[name].astype(t)
        a[name] = v
        kind += "/" + t
    elif kind == "shape":
        v = a[name]
        a[name] = r.choice([v.reshape(-1), v.reshape(v.shape[::-1]) if v.ndim == 2 else v[None], v[..., :-1],
                            np.float32(1), v[:0], np.concatenate([v.ravel(), v.ravel()[:1]])])
    elif kind == "nan":
        v = a[name].copy()
        if v.size:
            v.ravel()[r.randrange(v.size)] = r.choice([np.nan, np.inf, -np.inf])
        a[name] = v
    elif kind == "remove":
        del a[name]
    elif kind == "add":
        extra = r.choice(["bias_k", "q_norm.weight", "unused_int", "unused_object"])
        p = name[:name.rfind("self_attn.") + len("self_attn.")] if "self_attn." in name else ""
        if extra == "unused_int":
            a["encoder.step"] = np.arange(3)  # valid: no layer uses it
        elif extra == "unused_object":
            v = np.empty(2, dtype=object)
            v[:] = ["a", "b"]
            a["encoder.names"] = v  # valid: not loaded
        else:
            a[p + extra] = np.ones(E, np.float32)
        kind += "/" + extra
    elif kind == "layout":  # valid: numpy.load reads these as the same values
        v = a[name]
        a[name] = r.choice([np.asfortranarray(v), v.astype(">f4"), v.astype(np.float64)])
    elif kind == "npy":
        return kind, npy_bytes(a[name])
    elif kind == "npy_header":  # one member's header dict rewritten
        v = np.ascontiguousarray(a[name])
        fields = {"descr": repr(v.dtype.str), "fortran_order": "False", "shape": repr(v.shape)}
        field = r.choice(list(fields))
        fields[field] = r.choice(NPY_FIELD_VALUES[field])
        text = "{" + ", ".join(f"'{k}': {x}" for k, x in fields.items()) + ", }"
        i = r.randrange(len(text))
        text = r.choice([text, text, text[:i] + text[i + 1:], text[:i] + r.choice("{}()[]',:-0") + text[i:],
                         text[:-3], "{" * r.choice([1, 100, 2000])])
        members = {n + ".npy": npy_bytes(x) for n, x in a.items()}
        members[name + ".npy"] = npy_with_header(text, v.tobytes())
        return kind + "/" + field, npz_members(members)
    else:  # the zip itself: a member added, duplicated, stored as a directory
        buf = io.BytesIO(npz_bytes(a, compressed))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # zipfile warns of the duplicate name
            with zipfile.ZipFile(buf, "a") as z:
                op = r.randrange(3)
                if op == 0:
                    z.writestr(name + ".npy", npy_bytes(a[name] * 2))
                elif op == 1:
                    z.writestr("notes.txt", "hello")
                else:
                    z.writestr("dir/", b"")
        return kind, buf.getvalue()
    return kind, npz_bytes(a, compressed)


# --- the test ---------------------------------------------------------------------------------------------------

def main():
    export, include = sys.argv[1:3]
    rest = sys.argv[3:]
    cc = rest[rest.index("--cc") + 1:rest.index("--cxx")]
    cxx = rest[rest.index("--cxx") + 1:]
    spec = importlib.util.spec_from_file_location("export_weights", export)
    exporter = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(exporter)
    rng = np.random.default_rng(23)
    start = time.monotonic()

    with tempfile.TemporaryDirectory() as tmp:
        out_dir = os.path.join(tmp, "out")
        os.mkdir(out_dir)
        output = os.path.join(out_dir, "weights.h")

        # 1. named cases
        cases = named_cases(rng)
        failed_named = []
        for n, (label, suffix, blob, argv, keyword) in enumerate(cases):
            path = os.path.join(tmp, f"case{n}{suffix}")
            with open(path, "wb") as f:
                f.write(blob)
            args = [path] + (argv if "--heads" in argv else ["--heads", str(HEADS)] + argv) + ["-o", output]
            before = len(failures)
            existed = n % 2 == 1
            prepare_output(output, existed)
            refused(f"{label} (subprocess)", run_subprocess(export, args), path, output, existed, keyword)
            for existed in (False, True):
                prepare_output(output, existed)
                refused(f"{label} (in-process{', output existed' if existed else ''})",
                        run_inprocess(exporter, args), path, output, existed, keyword)
            if len(failures) > before:
                failed_named.append(label)
        good, itself = os.path.join(tmp, "good.safetensors"), os.path.join(tmp, "itself.safetensors")
        good_blob = st_file(mha_tensors(rng, int_tensor=False))
        for path in (good, itself):
            with open(path, "wb") as f:
                f.write(good_blob)
        for label, args, named in (
                ("missing input", [os.path.join(tmp, "missing.safetensors"), "--heads", "2", "-o", output],
                 os.path.join(tmp, "missing.safetensors")),
                ("output directory missing", [good, "--heads", "2", "-o", os.path.join(tmp, "no", "w.h")],
                 os.path.join(tmp, "no", "w.h")),
                ("output is a directory", [good, "--heads", "2", "-o", out_dir], out_dir),
                ("output is the input", [itself, "--heads", "2", "-o", itself], itself)):
            before = len(failures)
            keyword = "is the input" if label == "output is the input" else "cannot"
            target = output if label != "output is a directory" else os.path.join(out_dir, "absent")
            prepare_output(output, False)
            refused(label, run_subprocess(export, args), named, target, False, keyword)
            if len(failures) > before:
                failed_named.append(label)
        with open(itself, "rb") as f:
            if not check(f.read() == good_blob, "output is the input: the input was overwritten"):
                failed_named.append("output is the input (overwritten)")
        named = len(cases) + 5
        # the header replaces the output as open(path, "w") would have: through a link, keeping the file's mode
        real, link = os.path.join(out_dir, "real.h"), os.path.join(out_dir, "link.h")
        with open(real, "wb") as f:
            f.write(SENTINEL)
        os.chmod(real, 0o640)
        os.symlink("real.h", link)
        code, _, err, _ = run_subprocess(export, [good, "--heads", "2", "-o", link])
        with open(real, "rb") as f:
            written = f.read() != SENTINEL
        if not check(code == 0 and os.path.islink(link) and written and os.stat(real).st_mode & 0o777 == 0o640,
                     f"output through a link, mode 0640: exit {code}, link kept {os.path.islink(link)}, target "
                     f"written {written}, mode {os.stat(real).st_mode & 0o777:o} {err.strip()}"):
            failed_named.append("output through a link")
        os.remove(link)
        os.remove(real)
        if os.geteuid() != 0:  # root may write a read-only file, and so may the exporter run as root
            read_only = os.path.join(out_dir, "read_only.h")
            with open(read_only, "wb") as f:
                f.write(SENTINEL)
            os.chmod(read_only, 0o444)
            if not refused("read-only output", run_subprocess(export, [good, "--heads", "2", "-o", read_only]),
                           read_only, read_only, True, "read-only"):
                failed_named.append("read-only output")
            os.chmod(read_only, 0o644)
            os.remove(read_only)
            named += 1
        else:
            print("read-only output: not checked (running as root)")
        for label, argv in (("--name starting with a digit", ["--heads", "2", "--name", "1model"]),
                            ("--name with -", ["--heads", "2", "--name", "a-b"]),
                            ("--name not ASCII", ["--heads", "2", "--name", "modèle"]),
                            ("--name with a newline", ["--heads", "2", "--name", "m\n"]),
                            ("no --heads", []), ("--heads 0", ["--heads", "0"]),
                            ("bad --prefix", ["--heads", "2", "--prefix", "("]),
                            ("--format q4", ["--heads", "2", "--format", "q4"]),
                            ("--format F16 (names are lower case)", ["--heads", "2", "--format", "F16"]),
                            ("--format without a value", ["--heads", "2", "--format"]),
                            ("--group 0", ["--heads", "2", "--format", "q8", "--group", "0"]),
                            ("--group -8", ["--heads", "2", "--format", "q8", "--group", "-8"]),
                            ("--group 1.5", ["--heads", "2", "--format", "q8", "--group", "1.5"]),
                            ("--group x", ["--heads", "2", "--format", "q8", "--group", "x"]),
                            ("--group with --format f16", ["--heads", "2", "--format", "f16", "--group", "8"]),
                            ("--group without --format", ["--heads", "2", "--group", "8"]),
                            ("--activation tanh", ["--heads", "2", "--activation", "tanh"]),
                            ("--layer-norm-eps -1", ["--heads", "2", "--layer-norm-eps", "-1"]),
                            ("--layer-norm-eps nan", ["--heads", "2", "--layer-norm-eps", "nan"]),
                            ("--layer-norm-eps inf", ["--heads", "2", "--layer-norm-eps", "inf"])):
            args = [good] + argv + ["-o", output]
            prepare_output(output, False)
            code, _, err, tb = run_subprocess(export, args)
            ok = check(code == 2 and "Traceback" not in err and "error: " in err and not os.path.exists(output),
                       f"{label}: exit {code}, {err.strip().splitlines()[-1:]}")
            if ok and "--name" in argv:
                ok = check("not a C identifier" in err, f"{label}: {err.strip().splitlines()[-1:]}")
            if ok and "--group" in argv:
                ok = check("--group" in err.strip().splitlines()[-1], f"{label}: {err.strip().splitlines()[-1:]}")
            if not ok:
                failed_named.append(label)
            named += 1
        # .pt without PyTorch: a stand-in torch package that fails to import (subprocess), None in sys.modules
        # (in-process); the message names the alternatives
        hidden = os.path.join(tmp, "no_torch")
        os.makedirs(os.path.join(hidden, "torch"))
        with open(os.path.join(hidden, "torch", "__init__.py"), "w") as f:
            f.write("raise ImportError('PyTorch hidden by the test')\n")
        pt = os.path.join(tmp, "model.pt")
        with open(pt, "wb") as f:
            f.write(good_blob)  # never read: the import fails first
        env = dict(os.environ, PYTHONPATH=hidden + os.pathsep + os.environ.get("PYTHONPATH", ""))
        for existed in (False, True):
            for how in ("subprocess", "in-process"):
                label = f".pt without PyTorch ({how}{', output existed' if existed else ''})"
                prepare_output(output, existed)
                args = [pt, "--heads", "2", "-o", output]
                if how == "subprocess":
                    result = run_subprocess(export, args + ["--format", "q8"], env)
                else:
                    saved = sys.modules.get("torch")
                    sys.modules["torch"] = None  # import torch raises ImportError
                    try:
                        result = run_inprocess(exporter, args)
                    finally:
                        if saved is None:
                            del sys.modules["torch"]
                        else:
                            sys.modules["torch"] = saved
                ok = refused(label, result, pt, output, existed, "python3-torch")
                ok &= check(".safetensors" in result[2] and ".npz" in result[2], f"{label}: alternatives not named")
                if not ok:
                    failed_named.append(label)
                named += 1
        print(f"{named} named cases, {len(failed_named)} failed: {failed_named}")

        # 2. good files with awkward names: exported, the values of the file, compiled as C and C++
        weird = mha_tensors(rng, layers=2, prefix="enc*/ oder\n.layers.{}.self_attn.", int_tensor=False)
        weird = {k.replace("layers.1.", "schicht.ä.1."): v for k, v in weird.items()}
        arrays = as_arrays(mha_tensors(rng))
        p0 = "encoder.layers.0.self_attn."
        arrays[p0 + "in_proj_weight"] = np.asfortranarray(arrays[p0 + "in_proj_weight"])
        arrays[p0 + "out_proj.weight"] = arrays[p0 + "out_proj.weight"].astype(">f4")
        arrays["encoder.layers.1.self_attn.in_proj_bias"] = arrays["encoder.layers.1.self_attn.in_proj_bias"] \
            .astype(np.float16)
        arrays["encoder.step"] = np.arange(4)
        names = np.empty(2, dtype=object)
        names[:] = ["not", "loaded"]
        arrays["encoder.names"] = names
        unused_nan = mha_tensors(rng, int_tensor=False)
        unused_nan["encoder.layers.0.norm1.weight"] = ("F32", np.full(E, np.nan, np.float32))
        goods = [
            ("output name starting with a digit", "1weights.h", ".safetensors",
             st_file(mha_tensors(rng, int_tensor=False)), "model"),
            ("output name with spaces, - and __", "my weights-v2__.h", ".safetensors", st_file(llama_tensors(rng)),
             "llama"),
            ("output name starting with _", "_w.h", ".safetensors", st_file(mha_tensors(rng, int_tensor=False)), "_m"),
            ("output name that is one of the header's macros", "model_layers", ".safetensors",
             st_file(mha_tensors(rng, int_tensor=False)), "model"),
            ("tensor names with */, a line break, non-ASCII", "weird.h", ".safetensors", st_file(weird), "weird"),
            ("an int64 tensor no layer uses", "unused_int.h", ".safetensors", st_file(mha_tensors(rng)), "model"),
            ("NaN in a tensor no layer uses", "unused_nan.h", ".safetensors", st_file(unused_nan), "model"),
            ("tensors stored out of order", "reordered.h", ".safetensors",
             st_file(mha_tensors(rng, int_tensor=False), reorder), "model"),
            (".npz: Fortran order, big-endian, float16, unused int and object arrays", "npz.h", ".npz",
             npz_bytes(arrays), "model"),
            (".npz compressed", "npzc.h", ".npz", npz_bytes(as_arrays(llama_tensors(rng)), True), "model"),
        ]
        for label, header_name, suffix, blob, name in goods:
            path = os.path.join(tmp, "good" + suffix)
            with open(path, "wb") as f:
                f.write(blob)
            header = os.path.join(out_dir, header_name)
            code, _, err, tb = run_subprocess(export, [path, "--heads", str(HEADS), "-o", header, "--name", name])
            if not check(code == 0 and os.path.exists(header), f"{label}: exit {code}: {err.strip()}"):
                continue
            with open(header, encoding="utf-8") as f:
                text = f.read()
            ref = reference_safetensors(blob) if suffix == ".safetensors" else reference_npz(path)
            differs = header_matches(text, ref, name)
            ok = check(not differs, f"{label}: {differs}")
            guard = re.search(r"^#ifndef (\S+)$", text, re.M).group(1)
            ok &= check(re.fullmatch(r"[A-Z][A-Z0-9_]*", guard) and "__" not in guard,
                        f"{label}: include guard {guard}")
            errors = compiles(out_dir, header, cc, cxx, include)
            ok &= check(not errors, f"{label}: the header does not compile:\n{errors}")
            if ok:
                print(f"good: {label}: exported, values equal, compiled (guard {guard})")
        if have_torch():  # a checkpoint {"model": state_dict, ...}: the layers under "model.", as in the .npz
            import torch
            fixture = mha_tensors(rng, int_tensor=False)
            pt, npz = os.path.join(tmp, "ckpt.pt"), os.path.join(tmp, "ckpt.npz")
            with open(pt, "wb") as f:
                f.write(torch_bytes({"model": torch_state_dict(fixture), "epoch": 3, "step": torch.tensor(7)}))
            with open(npz, "wb") as f:
                f.write(npz_bytes({"model." + k: v for k, v in as_arrays(fixture).items()}))
            texts = []
            for path in (pt, npz):
                for fmt in ([], ["--format", "q8", "--group", "16"]):
                    header = os.path.join(out_dir, "ckpt.h")
                    code, _, err, _ = run_subprocess(export, [path, "--heads", str(HEADS), "-o", header] + fmt)
                    check(code == 0, f".pt checkpoint {path} {fmt}: exit {code} {err.strip()}")
                    with open(header) as f:
                        texts.append(f.read().replace(os.path.basename(path), "ckpt"))
            if check(texts[:2] == texts[2:], ".pt checkpoint: headers differ from the .npz ones"):
                print("good: .pt checkpoint {'model': state_dict, ...}: the headers of the flattened .npz (f32, q8)")
        named_done = time.monotonic()

        # 3. fuzzing
        r = random.Random(2023)
        st_fixtures = [mha_tensors(rng), llama_tensors(rng), mha_tensors(rng, layers=1), encoder_tensors(rng)]
        npz_fixtures = [as_arrays(t) for t in st_fixtures]
        stats, format_stats, compiled, before = {}, {}, 0, len(failures)
        for n in range(FUZZ_CASES):
            fixture = r.randrange(len(st_fixtures))
            if n % 3 < 2:
                kind, blob = mutate_safetensors(r, copy.deepcopy(st_fixtures[fixture]))
                suffix = ".safetensors"
            else:
                kind, blob = mutate_npz(r, npz_fixtures[fixture])
                suffix = ".npz"
            kind = suffix[1:] + ":" + kind
            path = os.path.join(tmp, "mutant" + suffix)
            with open(path, "wb") as f:
                f.write(blob)
            existed = r.random() < 0.5
            prepare_output(output, existed)
            fmt, group, flags = None, None, []
            if n % 4 == 3:  # the formats, with groups that divide every matrix, some, or none
                fmt = r.choice(["f32", "f16", "q8", "q8"])
                group = r.choice([None, None, 1, 2, 3, 4, 5, 8, 12, 16, 32, 64, 96]) if fmt == "q8" else None
                flags = ["--format", fmt] + (["--group", str(group)] if group else [])
            result = run_inprocess(exporter, [path, "--heads", str(HEADS), "-o", output] + flags)
            code, _, err, tb = result
            what = f"mutant {n} ({kind}{' ' + ' '.join(flags) if flags else ''})"
            if fmt is not None:
                format_stats.setdefault(fmt, [0, 0])[0 if code == 0 and not tb else 1] += 1
            if code == 0 and not tb:
                stats.setdefault(kind, [0, 0])[0] += 1
                with open(output, encoding="utf-8") as f:
                    text = f.read()
                ref = reference_safetensors(blob) if suffix == ".safetensors" else reference_npz(path)
                differs = header_matches(text, ref, "model") if fmt is None else \
                    format_header_matches(text, ref, "model", fmt, group)
                check(not differs and not err, f"{what}: exported, but {differs or err}")
                if (compiled < 4 or (fmt is not None and compiled < 10)) and not differs:
                    compiled += 1
                    errors = compiles(out_dir, output, cc, cxx, include)
                    check(not errors, f"{what}: the header does not compile:\n{errors}")
            else:
                stats.setdefault(kind, [0, 0])[1] += 1
                if not refused(what, result, path, output, existed):
                    with open(os.path.join(tmp, "first_failing_mutant" + suffix), "wb") as f:
                        f.write(blob)
            if len(failures) - before > 200:
                print("too many failures, stopping")
                break
        total_ok = sum(s[0] for s in stats.values())
        print(f"{n + 1} mutants: {total_ok} exported (checked value by value), {n + 1 - total_ok} refused; "
              f"{compiled} headers compiled")
        for kind in sorted(stats):
            print(f"  {kind}: {stats[kind][0]} exported, {stats[kind][1]} refused")
        for fmt in sorted(format_stats):
            print(f"  of them with --format {fmt} (and --group): {format_stats[fmt][0]} exported, "
                  f"{format_stats[fmt][1]} refused")
        print(f"named cases and good files {named_done - start:.1f} s, fuzzing {time.monotonic() - named_done:.1f} s")

    print("FAILED" if failures else "PASSED", f"({len(failures)} failures)")
    return 1 if failures else 0


def reorder(header, data):
    """The tensors' bytes in reverse order of the header's entries."""
    names = [n for n in header if n != "__metadata__"][::-1]
    blobs, pos = [], 0
    for n in names:
        b, e = header[n]["data_offsets"]
        blobs.append(data[b:e])
        header[n]["data_offsets"] = [pos, pos + e - b]
        pos += e - b
    return b"".join(blobs)


if __name__ == "__main__":
    sys.exit(main())
