#!/usr/bin/python3
"""Exports attention weights from a PyTorch state_dict (.safetensors or .npz) to a C/C++ header for microattn.

    scripts/export_weights.py MODEL.safetensors --heads 4 [--kv-heads 2] -o weights.h [--name model]
                              [--prefix REGEX] [--format f32|f16|q8 [--group N]] [--list]
                              [--norm-first] [--activation relu|gelu|gelu_tanh|silu] [--layer-norm-eps EPS]

Reads (numpy; PyTorch only for .pt/.pth):
  .safetensors   parsed directly: 8-byte little-endian header length, JSON header (dtype, shape, data_offsets per
                 tensor), raw little-endian tensors; F32 as is, F16 and BF16 converted to float32 exactly, F64
                 rounded to float32.
  .npz           numpy.savez or numpy.savez_compressed of the state_dict ({name: tensor.numpy()}); no pickles.
  .pt, .pth      torch.save(model.state_dict()), read with torch.load (weights_only=True where the installed
                 PyTorch has it, which loads tensors and containers only, never code); nested dicts (a checkpoint
                 {"model": state_dict, ...}) are read with their keys joined by '.'. Needs PyTorch (python3-torch);
                 without it, one line naming the alternatives (.safetensors, .npz).
Weight formats (--format; the biases always stay float32):
  (none)  float32 arrays and microattn_layer_weights / LayerWeights initializers: the header of earlier versions.
  f32     the same, plus WeightMatrix initializers (below).
  f16     IEEE-754 binary16 bit patterns (uint16_t), float32 rounded to nearest, ties to even (exact for F16
          input); a value beyond float16's range (|w| > 65504 after rounding) is refused.
  q8      int8 with one float scale per group of --group N consecutive elements in row-major order (default: one
          scale per row, N = cols); element i = scale[i / N] * q[i]. As llama2.c's export.py (version 2): scale =
          max|w| / 127 over the group (float32), q = round(w / scale) (a float32 division) with ties to even (as
          torch.round), so |w - scale * q| <= scale / 2 for normal scales; an all-zero group has scale 0 and q 0.
          N must divide every weight matrix's rows * cols (it may straddle rows).
  With --format, the header also holds NAME_c_matrices[NAME_LAYERS] (microattn_layer_weight_matrices, for
  microattn_layer_init_matrices) and, in C++, NAME_matrices[NAME_LAYERS] (microattn::LayerWeightMatrices, for
  MultiHeadAttention's constructor from weight matrices); a projection is NAME_c_matrices[i].q, usable with
  microattn_linear / microattn::linear.
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
nn.TransformerEncoderLayer blocks: an nn.MultiheadAttention named BASE self_attn. with BASE linear1.weight or
linear2.weight next to it (and no multihead_attn. or norm3: a decoder layer's attention is exported as before) is
exported whole, its tensors checked against the attention's model dim:
  BASE linear1.weight (F x E, F >= 1, the same F in every block), linear1.bias (F), linear2.weight (E x F),
  linear2.bias (E), norm1.weight, norm1.bias, norm2.weight, norm2.bias (E each); the biases may be missing
  (bias=False: NULL), the rest may not.
  NAME_<i>_linear1_weight ... NAME_<i>_norm2_bias   linear1 / linear2 weights in --format (float32 without it,
                                    q8 scales NAME_<i>_linear1_scales), biases and norms float32
  NAME_FEED_FORWARD, NAME_ENCODER_LAYERS            macros (the blocks, in layer order: all layers, or those of
                                    a model that has other attention too)
  NAME_NORM_FIRST, NAME_ACTIVATION, NAME_LAYER_NORM_EPS   nn.TransformerEncoderLayer's constructor arguments,
                                    which a state_dict does not hold: --norm-first, --activation (relu by default,
                                    PyTorch's; "gelu" is the erf form, activation="gelu"), --layer-norm-eps (1e-5)
  NAME_c_encoder_weights[NAME_ENCODER_LAYERS], NAME_c_encoder_config   microattn_encoder_layer_weights / _config,
                                    for microattn_encoder_layer_init (C API)
  NAME_encoder_weights[NAME_ENCODER_LAYERS], NAME_encoder_config   microattn::EncoderLayerWeights /
                                    EncoderLayerConfig, for TransformerEncoderLayer<MaxSeq, NAME_MODEL_DIM,
                                    NAME_HEADS, NAME_FEED_FORWARD> (C++ only)
  A file without blocks gives the header it gave before, byte for byte; the three flags are refused for it.
The arrays have internal linkage: include the header in one translation unit. The number of heads is not stored
in a state_dict: give --heads (nn.MultiheadAttention's num_heads). Llama-style models rotate q and k (RoPE)
before attention, which this layer does not do by itself: the export maps the projections only. The include
guard comes from the output's file name (made a C identifier); --name must be one.

Refuses, with one line 'export_weights.py: FILE: problem' on stderr and exit status 1 (2 for bad arguments),
writing nothing (the header is written to a temporary file and renamed over OUTPUT only when complete):
  a .safetensors file that breaks the format: header not a JSON object, an entry without a known dtype string,
  a shape that is not a list of non-negative integers, data_offsets that are not [begin, end] with
  0 <= begin <= end <= data size and end - begin = the shape's bytes, two tensors sharing bytes, or bytes that
  belong to no tensor;
  an .npz file that is not a zip of .npy arrays (a single .npy, a PyTorch .pt zip, a corrupt or truncated one),
  or holds a pickled (object) array where a layer needs weights;
  a layer whose tensors are not floating point, hold NaN or inf (or F64 values beyond float32's range), or have
  shapes that do not fit together (--heads, --kv-heads, an empty projection);
  a weight beyond float16's range (--format f16), a --group that does not divide a weight matrix (--format q8);
  a .pt/.pth without PyTorch installed, or one torch.load cannot read as a state_dict (a whole pickled model);
  parts of a layer microattn's layer does not compute: nn.MultiheadAttention(add_bias_kv=True) (bias_k,
  bias_v), separate q/k/v_proj_weight (kdim or vdim other than embed_dim), per-head q_norm / k_norm;
  an encoder block missing linear1, linear2, norm1.weight or norm2.weight, with a tensor of the wrong shape (or
  NaN / inf, or not floating point), or blocks of different feed-forward sizes; --norm-first, --activation or
  --layer-norm-eps for a file without blocks (a --layer-norm-eps negative or not finite: exit 2).
Tensors no layer uses may be of any dtype (e.g. an int64 num_batches_tracked).
"""
import argparse
import json
import os
import re
import stat
import struct
import sys
import tempfile
import tokenize
import zipfile
import zlib

import numpy as np

# The safetensors dtypes whose elements are whole bytes (the packed sub-byte F4/F6 types are not read), and the
# float ones this script converts; BF16 is read as its bit pattern and widened.
SAFETENSORS_ITEMSIZE = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1, "I16": 2, "U16": 2,
                        "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "C64": 8, "I64": 8, "U64": 8, "F64": 8}
SAFETENSORS_FLOATS = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "BF16": "<u2"}
SAFETENSORS_MAX_HEADER = 100_000_000  # the format's own limit
MAX_DIMS = 32  # numpy's
# Far beyond any real tensor, and small enough that numpy can hold the shape even with a zero dimension
MAX_ELEMENTS = 2 ** 48


class ExportError(Exception):
    """A problem with an input or output file, printed as 'export_weights.py: FILE: problem'."""

    def __init__(self, path, problem):
        super().__init__(f"{shown(path)}: {problem}")


class Unusable:
    """A tensor read but not converted to float32: listed by --list (as what), an error only if a layer uses it."""

    def __init__(self, shape, what, reason):
        self.shape, self.what, self.reason = tuple(shape), what, f"{what}: {reason}"


def shown(text):
    """text for a one-line message: quoted with escapes when it holds line breaks or other unprintables."""
    return text if text.isprintable() else repr(text)


def json_kind(value):
    return {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null"}.get(type(value),
                                                                                                "number")


def brief(value):
    s = json.dumps(value)
    return s if len(s) <= 60 else s[:57] + "..."


def is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)  # JSON true is no dimension


def count_elements(shape, what):
    """The number of elements of shape (non-negative ints), or why it is none."""
    if len(shape) > MAX_DIMS:
        raise ValueError(f"{what} has {len(shape)} dimensions (at most {MAX_DIMS})")
    if any(s < 0 for s in shape):
        raise ValueError(f"{what} {brief(list(shape))} has a negative dimension")
    bound = 1
    for s in shape:
        bound *= max(s, 1)
    if bound > MAX_ELEMENTS:
        raise ValueError(f"{what} {brief(list(shape))} is too large")
    n = 1
    for s in shape:
        n *= s
    return n


def to_float32(values, shape):
    """values (a float type) as float32 in shape, or Unusable when rounding makes finite values infinite."""
    with np.errstate(over="ignore", invalid="ignore"):
        out = values.astype(np.float32)
    beyond = np.isfinite(values) & ~np.isfinite(out)
    if beyond.any():
        return Unusable(shape, f"holds {float(values[beyond][0]):.6g}", "beyond float32's range")
    return out.reshape(shape)


def read_bytes(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise ExportError(path, f"cannot read it: {e.strerror or e}") from None


class DuplicateName(ValueError):
    pass


def reject_duplicates(pairs):
    seen = {}
    for key, value in pairs:
        if key in seen:  # json.loads would keep the last silently
            raise DuplicateName(key)
        seen[key] = value
    return seen


def reject_constant(name):
    raise ValueError(f"{name} is not JSON")


def read_safetensors(path):
    blob = read_bytes(path)
    if blob[:4] == b"PK\x03\x04":
        raise ExportError(path, "a zip archive (numpy.savez, or a PyTorch .pt/.pth), not safetensors: "
                                "numpy.savez files need the .npz suffix")
    if len(blob) < 8:
        raise ExportError(path, f"{len(blob)} bytes, too short for a safetensors file (8-byte header length, JSON "
                                "header, data)")
    (header_len,) = struct.unpack("<Q", blob[:8])
    if header_len > len(blob) - 8:
        raise ExportError(path, f"header length {header_len} runs past the end of the file ({len(blob)} bytes): "
                                "truncated, or not safetensors")
    if header_len > SAFETENSORS_MAX_HEADER:
        raise ExportError(path, f"header length {header_len} is over the format's limit of {SAFETENSORS_MAX_HEADER}")
    try:
        text = blob[8:8 + header_len].decode("utf-8")
    except UnicodeDecodeError as e:
        raise ExportError(path, f"header is not UTF-8 (byte {e.start}): corrupt, or not safetensors") from None
    try:
        header = json.loads(text, object_pairs_hook=reject_duplicates, parse_constant=reject_constant)
    except DuplicateName as e:
        raise ExportError(path, f"header names {shown(str(e))} twice") from None
    except (ValueError, RecursionError) as e:
        raise ExportError(path, f"header is not valid JSON: {str(e).splitlines()[0]}") from None
    if not isinstance(header, dict):
        raise ExportError(path, f"header is a JSON {json_kind(header)}, not an object of tensors")
    data = memoryview(blob)[8 + header_len:]
    entries = []
    for name, info in header.items():
        if name == "__metadata__":
            if not isinstance(info, dict) or not all(isinstance(v, str) for v in info.values()):
                raise ExportError(path, "__metadata__ is not an object of strings")
            continue
        what = f"tensor {shown(name)}"
        if not isinstance(info, dict):
            raise ExportError(path, f"{what}: entry is a JSON {json_kind(info)}, not an object with dtype, shape and "
                                    "data_offsets")
        for key in ("dtype", "shape", "data_offsets"):
            if key not in info:
                raise ExportError(path, f"{what}: entry has no {key}")
        dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        if not isinstance(dtype, str):
            raise ExportError(path, f"{what}: dtype is a JSON {json_kind(dtype)}, not a string")
        if dtype not in SAFETENSORS_ITEMSIZE:
            raise ExportError(path, f"{what}: unknown dtype {brief(dtype)} (this script reads "
                                    f"{', '.join(SAFETENSORS_ITEMSIZE)})")
        if not isinstance(shape, list) or not all(is_int(s) for s in shape):
            raise ExportError(path, f"{what}: shape {brief(shape)} is not a list of integers")
        try:
            count = count_elements(shape, "shape")
        except ValueError as e:
            raise ExportError(path, f"{what}: {e}") from None
        if not isinstance(offsets, list) or len(offsets) != 2 or not all(is_int(o) for o in offsets):
            raise ExportError(path, f"{what}: data_offsets {brief(offsets)} is not a list of two integers "
                                    "[begin, end]")
        begin, end = offsets
        if not 0 <= begin <= end <= len(data):
            raise ExportError(path, f"{what}: data_offsets [{begin}, {end}] are not 0 <= begin <= end <= "
                                    f"{len(data)} (the data bytes)")
        nbytes = count * SAFETENSORS_ITEMSIZE[dtype]
        if end - begin != nbytes:
            raise ExportError(path, f"{what}: data_offsets [{begin}, {end}] span {end - begin} bytes, but shape "
                                    f"{brief(shape)} of {dtype} takes {nbytes}")
        entries.append((begin, end, name, dtype, shape))
    # The format indexes every data byte exactly once: shared bytes mean one tensor would read another's, and
    # bytes of no tensor mean the offsets are off (or the file has something appended).
    entries.sort(key=lambda e: (e[0], e[1]))
    pos, previous = 0, None
    for begin, end, name, _, _ in entries:
        if begin < pos:
            raise ExportError(path, f"tensor {shown(name)}: data_offsets [{begin}, {end}] overlap those of tensor "
                                    f"{shown(previous[2])}, [{previous[0]}, {previous[1]}]")
        if begin > pos:
            raise ExportError(path, f"data bytes {pos} to {begin} belong to no tensor (a gap in the data_offsets, "
                                    f"before tensor {shown(name)})")
        pos, previous = end, (begin, end, name)
    if pos != len(data):
        raise ExportError(path, f"data bytes {pos} to {len(data)} (the end of the file) belong to no tensor "
                                "(data_offsets end early, or bytes were appended)")
    tensors = {}
    for begin, end, name, dtype, shape in entries:
        if dtype not in SAFETENSORS_FLOATS:
            tensors[name] = Unusable(shape, f"dtype {dtype}",
                                     f"a layer's weights must be {', '.join(SAFETENSORS_FLOATS)}")
            continue
        # a copy: frombuffer needs no alignment then, whatever the offset
        raw = np.frombuffer(bytes(data[begin:end]), dtype=SAFETENSORS_FLOATS[dtype])
        if dtype == "BF16":  # the upper half of a float32: exact
            raw = (raw.astype("<u4") << 16).view("<f4")
        tensors[name] = to_float32(raw, shape)
    return tensors


class NpyError(Exception):
    pass


def read_npy(f, size):
    """One .npy member (size bytes) of an .npz: float32 array, or Unusable for arrays of other types."""
    try:
        version = np.lib.format.read_magic(f)
        readers = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
        if version not in readers:
            raise NpyError(f".npy format version {version[0]}.{version[1]} (this script reads 1.0 and 2.0)")
        shape, fortran_order, dtype = readers[version](f)
    # numpy parses the header as a Python literal: a broken one can raise any of these
    except (ValueError, SyntaxError, TypeError, tokenize.TokenError, RecursionError) as e:
        raise NpyError(f"not a valid .npy array ({str(e).splitlines()[0] if str(e) else type(e).__name__})") from None
    try:
        count = count_elements(shape, "shape")
    except ValueError as e:
        raise NpyError(str(e)) from None
    if dtype.hasobject:  # its bytes are a pickle, which may run code when loaded
        return Unusable(shape, "an object array (pickled Python objects, which this script does not load)",
                        "a layer's weights must be floating point")
    nbytes = count * dtype.itemsize
    available = size - f.tell()
    if available != nbytes:
        raise NpyError(f"holds {available} data bytes, but shape {tuple(shape)} of {dtype} takes {nbytes}")
    raw = f.read(nbytes)
    if len(raw) != nbytes:
        raise NpyError(f"truncated: {len(raw)} of {nbytes} data bytes")
    if dtype.kind != "f":
        return Unusable(shape, f"dtype {dtype}", "a layer's weights must be floating point")
    values = np.frombuffer(raw, dtype=dtype)
    if fortran_order:
        return to_float32(values.reshape(shape[::-1]).T.ravel(), shape)
    return to_float32(values, shape)


def read_npz(path):
    try:
        archive = zipfile.ZipFile(path)
    except OSError as e:
        raise ExportError(path, f"cannot read it: {e.strerror or e}") from None
    except (zipfile.BadZipFile, EOFError, ValueError, NotImplementedError) as e:  # e.g. a zip version it lacks
        head = read_bytes(path)[:6]
        if head == b"\x93NUMPY":
            raise ExportError(path, "a single .npy array (numpy.save), not an .npz archive of named tensors "
                                    "(numpy.savez)") from None
        raise ExportError(path, f"not an .npz file: not a zip archive, or a truncated one ({e})") from None
    tensors = {}
    with archive:
        for info in archive.infolist():
            member = info.filename
            if not member.endswith(".npy"):
                raise ExportError(path, f"member {shown(member)} is not a .npy array: numpy.savez writes only those "
                                        "(a PyTorch .pt/.pth is a zip too: save with safetensors or numpy.savez)")
            name = member[:-4]
            if name in tensors:
                raise ExportError(path, f"array {shown(name)} appears twice")
            try:
                with archive.open(info) as f:
                    tensors[name] = read_npy(f, info.file_size)
            except NpyError as e:
                raise ExportError(path, f"array {shown(name)}: {e}") from None
            except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, RuntimeError,
                    ValueError) as e:
                raise ExportError(path, f"array {shown(name)}: corrupt archive member ({e})") from None
    return tensors


TORCH_ALTERNATIVES = ("export a .safetensors (safetensors.torch.save_file) or .npz (numpy.savez) of the state_dict "
                      "instead")


def read_torch(path):
    """A torch.save'd state_dict: {name: float32 array or Unusable}; nested dicts' keys joined by '.'."""
    try:
        import torch
    except Exception as e:  # ImportError, or a broken installation
        raise ExportError(path, f"reading a PyTorch .pt/.pth needs PyTorch (python3-torch), which is not installed "
                                f"(import torch: {type(e).__name__}): {TORCH_ALTERNATIVES}") from None
    try:
        import inspect
        safe = "weights_only" in inspect.signature(torch.load).parameters
    except (TypeError, ValueError):
        safe = False
    try:
        # weights_only: tensors and plain containers only, no code run from the pickle
        loaded = torch.load(path, map_location="cpu", **({"weights_only": True} if safe else {}))
    except OSError as e:
        raise ExportError(path, f"cannot read it: {e.strerror or e}") from None
    except MemoryError:
        raise
    except Exception as e:  # torch.load raises many kinds for a file it cannot read
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ExportError(path, f"torch.load cannot read it as a state_dict ({type(e).__name__}: {first[:200]}); "
                                "save model.state_dict(), not the model, or use .safetensors / .npz") from None
    if not isinstance(loaded, dict):
        raise ExportError(path, f"holds a {type(loaded).__name__}, not a state_dict (a dict of tensors): save "
                                "model.state_dict()")
    tensors = {}

    def add(prefix, mapping, depth):
        for key, value in mapping.items():
            name = prefix + str(key)
            if isinstance(value, dict) and depth < MAX_DIMS:
                add(name + ".", value, depth + 1)
            elif name in tensors:
                raise ExportError(path, f"tensor {shown(name)} appears twice (a key with a '.' and a nested dict)")
            else:
                tensors[name] = torch_tensor(torch, value)
    add("", loaded, 0)
    return tensors


def torch_tensor(torch, t):
    """A torch value as float32 array, or Unusable for anything but a dense floating-point tensor."""
    if not isinstance(t, torch.Tensor):
        return Unusable((), f"a {type(t).__name__}", "a layer's weights must be floating-point tensors")
    shape = tuple(int(s) for s in t.shape)
    try:
        count_elements(shape, "shape")
    except ValueError as e:
        return Unusable(shape, "a tensor", str(e))
    dtype = str(t.dtype).replace("torch.", "")
    if t.layout != torch.strided or t.is_quantized:
        return Unusable(shape, f"a {dtype} tensor of layout {str(t.layout).replace('torch.', '')}"
                               f"{' (quantized)' if t.is_quantized else ''}", "a layer's weights must be dense floats")
    if not t.is_floating_point():
        return Unusable(shape, f"dtype {dtype}", "a layer's weights must be floating point")
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.float64:
        return to_float32(t.numpy().ravel(), shape)
    return t.to(torch.float32).numpy().reshape(shape)  # float16, bfloat16 and float8 widen exactly


def natural_key(text):
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


# Parameters of attention variants that microattn's layer does not compute: exporting without them would give a
# header that compiles and computes something else.
BIAS_KV = "nn.MultiheadAttention(add_bias_kv=True) appends a learned key and value row (bias_k, bias_v)"
QK_NORM = "the layer normalizes q and k per head (q_norm, k_norm, as Qwen3 and OLMo 2 do)"
UNSUPPORTED = {"bias_k": BIAS_KV, "bias_v": BIAS_KV, "q_norm.weight": QK_NORM, "k_norm.weight": QK_NORM}
KINDS = (("mha", "in_proj_weight"), ("llama", "q_proj.weight"), ("mha_separate", "q_proj_weight"))


def find_layers(source, tensors, prefix_filter):
    """[(prefix, {field: (description, float32 array)})] for q_weight, k_weight, v_weight, q_bias, k_bias, v_bias,
    out_weight, out_bias (those present)."""
    kinds = {}
    for name in tensors:
        for kind, suffix in KINDS:
            if name.endswith(suffix):
                kinds.setdefault(name[:-len(suffix)], set()).add(kind)
    if prefix_filter is not None:
        kinds = {p: k for p, k in kinds.items() if re.match(prefix_filter, p)}

    def get(name):
        t = tensors.get(name)
        if isinstance(t, Unusable):
            raise ExportError(source, f"{shown(name)}: {t.reason}")
        return t

    layers = []
    for p in sorted(kinds, key=natural_key):
        kind = kinds[p]
        if len(kind) > 1:
            raise ExportError(source, f"layer {p!r} has tensors of two kinds of attention: "
                                      f"{', '.join(s for k, s in KINDS if k in kind)}")
        if "mha_separate" in kind:
            raise ExportError(source, f"layer {p!r}: nn.MultiheadAttention with kdim or vdim other than "
                                      "embed_dim (q_proj_weight, k_proj_weight, v_proj_weight) is not supported: "
                                      "microattn's layer projects q, k and v from one input (--prefix can leave it "
                                      "out)")
        kind = kind.pop()
        for extra, what in UNSUPPORTED.items():  # next to either kind of names: not to be ignored
            if p + extra in tensors:
                raise ExportError(source, f"{shown(p + extra)}: {what}, which microattn's layer does not compute "
                                          "(--prefix can leave the layer out)")
        layer = {}
        if kind == "mha":
            w = get(p + "in_proj_weight")
            if w.ndim != 2 or w.shape[1] == 0 or w.shape[0] != 3 * w.shape[1]:
                raise ExportError(source, f"{shown(p + 'in_proj_weight')} has shape {w.shape}, expected (3E, E) "
                                          "with E >= 1")
            e = w.shape[1]
            for i, part in enumerate("qkv"):
                layer[part + "_weight"] = (f"{shown(p + 'in_proj_weight')}[{i * e}:{(i + 1) * e}] ({part})",
                                           w[i * e:(i + 1) * e])
            b = get(p + "in_proj_bias")
            if b is not None:
                if b.shape != (3 * e,):
                    raise ExportError(source, f"{shown(p + 'in_proj_bias')} has shape {b.shape}, expected "
                                              f"({3 * e},)")
                for i, part in enumerate("qkv"):
                    layer[part + "_bias"] = (f"{shown(p + 'in_proj_bias')}[{i * e}:{(i + 1) * e}] ({part})",
                                             b[i * e:(i + 1) * e])
            out = "out_proj"
        else:
            for part, theirs in (("q", "q_proj"), ("k", "k_proj"), ("v", "v_proj")):
                w = get(p + theirs + ".weight")
                if w is None:
                    raise ExportError(source, f"{shown(p + theirs + '.weight')} is missing (found "
                                              f"{shown(p + 'q_proj.weight')})")
                layer[part + "_weight"] = (shown(p + theirs + ".weight"), w)
                b = get(p + theirs + ".bias")
                if b is not None:
                    layer[part + "_bias"] = (shown(p + theirs + ".bias"), b)
            out = "o_proj"
        w, b = get(p + out + ".weight"), get(p + out + ".bias")
        if b is not None and w is None:
            raise ExportError(source, f"{shown(p + out + '.bias')} without {shown(p + out + '.weight')}")
        if w is not None:
            layer["out_weight"] = (shown(p + out + ".weight"), w)
        if b is not None:
            layer["out_bias"] = (shown(p + out + ".bias"), b)
        if kind == "mha":
            find_block(source, tensors, p, layer, get)
        layers.append((p, layer))
    return layers


def block_base(tensors, prefix):
    """The name prefix of the nn.TransformerEncoderLayer whose self_attn is prefix, or None: a block has
    linear1 or linear2 next to self_attn; a decoder layer (multihead_attn, norm3) is not one."""
    if not prefix.endswith("self_attn."):
        return None
    base = prefix[:-len("self_attn.")]
    if base + "linear1.weight" not in tensors and base + "linear2.weight" not in tensors:
        return None
    if any(n.startswith(base + "multihead_attn.") for n in tensors) or base + "norm3.weight" in tensors:
        return None  # nn.TransformerDecoderLayer: its attention only, as before
    return base


def find_block(source, tensors, prefix, layer, get):
    """Adds the feed-forward and norm tensors of the encoder block around layer (BLOCK_FIELDS), if it is one."""
    base = block_base(tensors, prefix)
    if base is None:
        return
    for field, theirs in zip(BLOCK_FIELDS, BLOCK_NAMES):
        t = get(base + theirs)
        if t is None:
            if field in BLOCK_REQUIRED:
                raise ExportError(source, f"{shown(base + theirs)} is missing: the nn.TransformerEncoderLayer "
                                          f"{base!r} needs linear1, linear2, norm1 and norm2 (--prefix can leave it "
                                          "out)")
            continue
        layer[field] = (shown(base + theirs), t)
    layer["block"] = base


def check_shapes(source, prefix, layer, heads, kv_heads):
    """The model dimension and the number of key/value heads, after checking every tensor against them."""
    def fail(problem):
        raise ExportError(source, f"layer {prefix!r}: {problem}")

    def fail_tensor(label, problem):
        raise ExportError(source, f"{label} {problem}")

    qname, q = layer["q_weight"]
    if q.ndim != 2 or q.shape[0] != q.shape[1] or q.shape[0] == 0:
        fail_tensor(qname, f"has shape {q.shape}: microattn's layers need q_proj out = in = model dim >= 1")
    d = q.shape[1]
    if d % heads != 0:
        fail(f"model dim {d} is not a multiple of --heads {heads}")
    hd = d // heads
    kname, k = layer["k_weight"]
    if k.ndim != 2 or k.shape[1] != d or k.shape[0] == 0:
        fail_tensor(kname, f"has shape {k.shape}, expected (rows >= 1, {d})")
    kv_dim = k.shape[0]
    if kv_dim % hd != 0:
        fail_tensor(kname, f"has {kv_dim} rows, not a multiple of the head dim {hd} (model dim {d} / --heads {heads})")
    derived = kv_dim // hd
    if kv_heads is not None and kv_heads != derived:
        fail(f"--kv-heads {kv_heads}, but k has {derived} heads of {hd}")
    if heads % derived != 0:
        fail(f"{heads} heads are not a multiple of {derived} key/value heads")
    want = {"v_weight": (kv_dim, d), "q_bias": (d,), "k_bias": (kv_dim,), "v_bias": (kv_dim,), "out_weight": (d, d),
            "out_bias": (d,)}
    for key, shape in want.items():
        if key in layer and tuple(layer[key][1].shape) != shape:
            fail_tensor(layer[key][0], f"has shape {tuple(layer[key][1].shape)}, expected {shape}")
    if "block" in layer:
        fname, f1 = layer["linear1_weight"]
        if f1.ndim != 2 or f1.shape[1] != d or f1.shape[0] == 0:
            fail_tensor(fname, f"has shape {tuple(f1.shape)}, expected (feed-forward >= 1, {d}) (model dim {d})")
        ff = f1.shape[0]
        want = {"linear1_bias": (ff,), "linear2_weight": (d, ff), "linear2_bias": (d,), "norm1_weight": (d,),
                "norm1_bias": (d,), "norm2_weight": (d,), "norm2_bias": (d,)}
        for key, shape in want.items():
            if key in layer and tuple(layer[key][1].shape) != shape:
                fail_tensor(layer[key][0], f"has shape {tuple(layer[key][1].shape)}, expected {shape} (model dim "
                                           f"{d}, feed-forward {ff} from linear1)")
    for key in FIELDS + BLOCK_FIELDS:  # every number the header would hold
        if key in layer and not np.all(np.isfinite(layer[key][1])):
            bad = np.flatnonzero(~np.isfinite(layer[key][1]))
            fail_tensor(layer[key][0], f"holds NaN or inf ({bad.size} value(s), the first at flat index {bad[0]})")
    return d, derived


FIELDS = ("q_weight", "k_weight", "v_weight", "q_bias", "k_bias", "v_bias", "out_weight", "out_bias")
# nn.TransformerEncoderLayer's tensors around self_attn, as the header names them and as PyTorch does
BLOCK_FIELDS = ("linear1_weight", "linear1_bias", "linear2_weight", "linear2_bias", "norm1_weight", "norm1_bias",
                "norm2_weight", "norm2_bias")
BLOCK_NAMES = tuple(f.replace("_", ".") for f in BLOCK_FIELDS)
BLOCK_REQUIRED = ("linear1_weight", "linear2_weight", "norm1_weight", "norm2_weight")
BLOCK_WEIGHTS = ("linear1_weight", "linear2_weight")
ACTIVATIONS = {"relu": "RELU", "gelu": "GELU", "gelu_tanh": "GELU_TANH", "silu": "SILU"}


def c_floats(values):
    flat = np.asarray(values, dtype=np.float32).ravel()
    if not np.all(np.isfinite(flat)):  # check_shapes refuses these: never print nan.0f
        raise AssertionError("non-finite value reached the header")
    # %.9g round-trips every float32
    items = [("%.9g" % float(v)) for v in flat]
    items = [s + ("f" if ("." in s or "e" in s) else ".0f") for s in items]
    return "\n".join("    " + ", ".join(items[i:i + 8]) + "," for i in range(0, len(items), 8))


def c_comment(text):
    """text safe inside /* */ on one line: tensor and file names may hold anything."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text).replace("*/", "* /")


def include_guard(path, macros):
    """A C identifier from the output's file name: other characters become _, and no reserved __ or leading _,
    no leading digit, none of the header's other macros."""
    guard = re.sub(r"[^A-Za-z0-9]+", "_", os.path.basename(path)).strip("_").upper()
    if not guard[:1].isalpha():
        guard = "HEADER_" + guard if guard else "HEADER"
    return guard + "_H" if guard in macros else guard


WEIGHTS = ("q_weight", "k_weight", "v_weight", "out_weight")
FORMATS = {"f32": "F32", "f16": "F16", "q8": "Q8"}


def c_ints(values, fmt, per_line):
    items = [fmt % int(v) for v in np.asarray(values).ravel()]
    return "\n".join("    " + ", ".join(items[i:i + per_line]) + "," for i in range(0, len(items), per_line))


def to_f16(source, label, w):
    """w (float32) as binary16 bit patterns, rounded to nearest, ties to even (numpy's conversion)."""
    with np.errstate(over="ignore"):
        h = w.astype(np.float16)
    beyond = ~np.isfinite(h)  # w is finite (check_shapes)
    if beyond.any():
        i = np.flatnonzero(beyond.ravel())[0]
        raise ExportError(source, f"{label} holds {float(w.ravel()[i]):.9g} (flat index {i}), beyond float16's "
                                  "range (65504): export it as f32 or q8")
    return h.view(np.uint16)


def to_q8(w, group):
    """w (float32) as (int8 values, float32 scales), one scale per group of consecutive elements, as llama2.c's
    export.py quantize_q80: scale = absmax / 127 and q = round(w / scale) in float32, ties to even."""
    g = w.astype(np.float32).reshape(-1, group)
    scale = (np.abs(g).max(axis=1) / np.float32(127)).astype(np.float32)
    divisor = np.where(scale > 0, scale, np.float32(1))  # an all-zero group: scale 0, q 0 (llama2.c divides 0 by 0)
    q = np.clip(np.rint(g / divisor[:, None]), -127, 127)  # the clip only matters for subnormal scales
    return q.astype(np.int8).reshape(w.shape), scale


def encode(source, layers, fmt, group):
    """{(layer index, weight field): (storage array, scales or None, group or 0)} in format fmt."""
    encoded = {}
    for i, (_, layer) in enumerate(layers):
        for field in WEIGHTS + BLOCK_WEIGHTS:
            if field not in layer:
                continue
            label, w = layer[field]
            if fmt == "f32":
                encoded[i, field] = (w, None, 0)
            elif fmt == "f16":
                encoded[i, field] = (to_f16(source, label, w), None, 0)
            else:
                n = group if group is not None else w.shape[1]
                if w.size % n != 0:
                    raise ExportError(source, f"{label} has {w.shape[0]} x {w.shape[1]} = {w.size} elements, which "
                                              f"--group {n} does not divide (a group may straddle rows, but the "
                                              f"groups must tile the matrix: e.g. --group {w.shape[1]}, one scale "
                                              "per row)")
                q, scales = to_q8(w, n)
                encoded[i, field] = (q, scales, n)
    return encoded


def header_text(path, name, source, layers, d, heads, kv_heads, fmt=None, encoded=None, block=None):
    """The header; fmt None: the float32 header of earlier versions, byte for byte, for attention layers only.
    block: None, or (feed-forward, norm_first, activation, eps) when some layers are encoder blocks (their
    feed-forward weights then in fmt, float32 for None, with encoded holding them)."""
    upper = name.upper()
    macros = {f"{upper}_{m}" for m in ("UNUSED", "MODEL_DIM", "HEADS", "KV_HEADS", "LAYERS")}
    if fmt is not None:
        macros.add(f"{upper}_FORMAT")
    blocks = [i for i, (_, layer) in enumerate(layers) if "block" in layer]
    if blocks:
        macros |= {f"{upper}_{m}" for m in ("FEED_FORWARD", "ENCODER_LAYERS", "NORM_FIRST", "ACTIVATION",
                                            "LAYER_NORM_EPS")}
    guard = include_guard(path, macros)
    if fmt is None:
        stored = "Weights in"
    elif fmt == "q8":
        groups = sorted({encoded[k][2] for k in encoded})
        stored = (f"Weights int8 (q8, one float scale per group of {'/'.join(map(str, groups))} consecutive elements, "
                  "row-major: w = scale * q, scale = max|w| / 127, q = round(w / scale), ties to even), biases "
                  "float32; in")
    else:
        stored = f"Weights {'binary16 bit patterns' if fmt == 'f16' else 'float32'} ({fmt}), biases float32; in"
    out = [
        f"/* Generated by scripts/export_weights.py from {c_comment(os.path.basename(source))}: do not edit.",
        f" * {len(layers)} attention layer(s): model dim {d}, {heads} heads, {kv_heads} key/value heads. {stored}",
        " * nn.Linear layout (out x in, row-major); the arrays have internal linkage: include this header in one",
        " * translation unit. */",
        f"#ifndef {guard}", f"#define {guard}", "", "#include <stddef.h>"]
    if blocks:
        ff = block[0]
        out[3:4] = [" * translation unit.",
                    f" * {len(blocks)} encoder block(s) (nn.TransformerEncoderLayer): feed-forward {ff}; linear1 / "
                    "linear2 weights stored as the attention's, their biases and the norms float32. */"]
    if fmt in ("f16", "q8"):
        out.append("#include <stdint.h>")
    out += ["", "#include <microattn/microattn.h>", "#ifdef __cplusplus", "#include <microattn/layers.hpp>"]
    if fmt is not None or blocks:
        out.append("#include <microattn/weights.hpp>")
    if blocks:
        out.append("#include <microattn/blocks.hpp>")
    out += ["#endif", "",
            "#if defined(__GNUC__)", f"#define {upper}_UNUSED __attribute__((unused))", "#else",
            f"#define {upper}_UNUSED", "#endif", "",
            f"#define {upper}_MODEL_DIM {d}", f"#define {upper}_HEADS {heads}", f"#define {upper}_KV_HEADS {kv_heads}",
            f"#define {upper}_LAYERS {len(layers)}"]
    if fmt is not None:
        out.append(f"#define {upper}_FORMAT MICROATTN_FORMAT_{FORMATS[fmt]}")
    if blocks:
        ff, norm_first, activation, eps = block
        out += [f"#define {upper}_FEED_FORWARD {ff}", f"#define {upper}_ENCODER_LAYERS {len(blocks)}",
                "/* Not in a state_dict: as given to the exporter (--norm-first, --activation, --layer-norm-eps) */",
                f"#define {upper}_NORM_FIRST {int(norm_first)}",
                f"#define {upper}_ACTIVATION MICROATTN_ACTIVATION_{ACTIVATIONS[activation]}",
                f"#define {upper}_LAYER_NORM_EPS {c_floats([eps]).strip().rstrip(',')}"]
    out += ["", "/* clang-format off */"]
    refs, matrices, block_refs = [], [], {}
    for i, (prefix, layer) in enumerate(layers):
        out.append(f"/* layer {i}: '{c_comment(prefix)}' */")
        row, mats = [], {}
        fields = FIELDS
        if "block" in layer:
            fields = FIELDS + BLOCK_FIELDS
        for field in fields:
            if field in BLOCK_FIELDS and field == BLOCK_FIELDS[0]:
                out.append(f"/* encoder block {i}: '{c_comment(layer['block'])}' (feed-forward and norms) */")
            if field not in layer:
                row.append("NULL")
                continue
            t = layer[field][1]
            ident = f"{name}_{i}_{field}"
            if fmt in ("f16", "q8") and field in WEIGHTS + BLOCK_WEIGHTS:
                data, scales, group = encoded[i, field]
                ctype = "uint16_t" if fmt == "f16" else "int8_t"
                out.append(f"static const {ctype} {ident}[{data.size}] {upper}_UNUSED = {{")
                out.append(c_ints(data, "0x%04x", 12) if fmt == "f16" else c_ints(data, "%d", 16))
                out.append("};")
                if scales is not None:
                    out.append(f"static const float {name}_{i}_{field[:-len('_weight')]}_scales[{scales.size}] "
                               f"{upper}_UNUSED = {{")
                    out.append(c_floats(scales))
                    out.append("};")
            else:
                out.append(f"static const float {ident}[{t.size}] {upper}_UNUSED = {{")
                out.append(c_floats(t))
                out.append("};")
            row.append(ident)
            if field in WEIGHTS + BLOCK_WEIGHTS:
                mats[field] = (ident, t.shape)
        block_refs[i] = row[len(FIELDS):]
        refs.append(row[:len(FIELDS)])
        matrices.append(mats)
    if fmt in (None, "f32"):
        out += ["", "/* C API: microattn_layer_init(&layer, max_seq, MODEL_DIM, HEADS, KV_HEADS, &NAME_c_weights[i], ...) */",
                f"static const microattn_layer_weights {name}_c_weights[{upper}_LAYERS] {upper}_UNUSED = {{"]
        out += ["    {" + ", ".join(r) + "}," for r in refs]
        out += ["};", "", "#ifdef __cplusplus",
                f"/* C++: microattn::MultiHeadAttention<MaxSeq, MODEL_DIM, HEADS, KV_HEADS> layer{{NAME_weights[i]}} */",
                f"static const microattn::LayerWeights {name}_weights[{upper}_LAYERS] {upper}_UNUSED = {{"]
        out += ["    {" + ", ".join("nullptr" if x == "NULL" else x for x in r) + "}," for r in refs]
        out += ["};", "#endif"]
    format_macro = f"{upper}_FORMAT" if fmt is not None else "MICROATTN_FORMAT_F32"

    def c_matrix(i, field):
        if field not in matrices[i]:
            return "{MICROATTN_FORMAT_F32, NULL, 0, 0, NULL, 0}"
        ident, (rows, cols) = matrices[i][field]
        _, scales, group = encoded[i, field]
        if scales is None:
            return f"{{{format_macro}, {ident}, {rows}, {cols}, NULL, 0}}"
        return f"{{{format_macro}, {ident}, {rows}, {cols}, {ident[:-len('_weight')]}_scales, {group}}}"

    def cpp_matrix(i, field):
        if field not in matrices[i]:
            return "microattn::WeightMatrix{}"
        ident, (rows, cols) = matrices[i][field]
        _, scales, group = encoded[i, field]
        if scales is None:
            return f"microattn::weights_{fmt or 'f32'}({ident}, {rows}, {cols})"
        return f"microattn::weights_q8({ident}, {ident[:-len('_weight')]}_scales, {rows}, {cols}, {group})"

    def matrices_row(i, matrix, null, indent="    "):
        r = dict(zip(FIELDS, refs[i]))
        bias = [null if r[f] == "NULL" else r[f] for f in ("q_bias", "k_bias", "v_bias")]
        out_bias = null if r["out_bias"] == "NULL" else r["out_bias"]
        parts = [matrix(i, "q_weight"), matrix(i, "k_weight"), matrix(i, "v_weight"), ", ".join(bias),
                 matrix(i, "out_weight"), out_bias]
        return indent + "{" + (",\n " + indent).join(parts) + "},"

    def encoder_row(i, matrix, null):
        r = {f: (null if v == "NULL" else v) for f, v in zip(BLOCK_FIELDS, block_refs[i])}
        parts = [matrices_row(i, matrix, null, "     ")[5:-1], matrix(i, "linear1_weight"), r["linear1_bias"],
                 matrix(i, "linear2_weight"), r["linear2_bias"],
                 ", ".join(r[f] for f in ("norm1_weight", "norm1_bias", "norm2_weight", "norm2_bias"))]
        return f"    /* layer {i} */\n    {{" + ",\n     ".join(parts) + "},"

    if fmt is not None:
        out += ["", "/* C API: microattn_layer_init_matrices(&layer, max_seq, MODEL_DIM, HEADS, KV_HEADS, "
                    "&NAME_c_matrices[i], ...);",
                " * one projection: microattn_linear(x, &NAME_c_matrices[i].q, NAME_c_matrices[i].q_bias, y) */",
                f"static const microattn_layer_weight_matrices {name}_c_matrices[{upper}_LAYERS] {upper}_UNUSED = {{"]
        out += [matrices_row(i, c_matrix, "NULL") for i in range(len(layers))]
        out += ["};", "", "#ifdef __cplusplus",
                "/* C++: microattn::MultiHeadAttention<MaxSeq, MODEL_DIM, HEADS, KV_HEADS> layer{NAME_matrices[i]};",
                " * one projection: microattn::linear(x, NAME_matrices[i].q, NAME_matrices[i].q_bias, y) */",
                f"static const microattn::LayerWeightMatrices {name}_matrices[{upper}_LAYERS] {upper}_UNUSED = {{"]
        out += [matrices_row(i, cpp_matrix, "nullptr") for i in range(len(layers))]
        out += ["};", "#endif"]
    if blocks:
        which = "" if len(blocks) == len(layers) else f" (layers {', '.join(map(str, blocks))})"
        out += ["", f"/* Encoder blocks{which}. C API: microattn_encoder_layer_init(&layer, max_seq, MODEL_DIM, HEADS, "
                    "FEED_FORWARD,",
                " * &NAME_c_encoder_weights[i], &NAME_c_encoder_config, cache, cache_floats, scratch, "
                "scratch_floats) */",
                f"static const microattn_encoder_layer_config {name}_c_encoder_config {upper}_UNUSED = "
                f"{{{upper}_NORM_FIRST, {upper}_ACTIVATION, {upper}_LAYER_NORM_EPS}};",
                f"static const microattn_encoder_layer_weights {name}_c_encoder_weights[{upper}_ENCODER_LAYERS] "
                f"{upper}_UNUSED = {{"]
        out += [encoder_row(i, c_matrix, "NULL") for i in blocks]
        out += ["};", "", "#ifdef __cplusplus",
                "/* C++: microattn::TransformerEncoderLayer<MaxSeq, MODEL_DIM, HEADS, FEED_FORWARD> "
                "layer{NAME_encoder_weights[i], NAME_encoder_config} */",
                f"static const microattn::EncoderLayerConfig {name}_encoder_config {upper}_UNUSED = "
                f"{{{upper}_NORM_FIRST != 0, static_cast<microattn::Activation>({upper}_ACTIVATION), "
                f"{upper}_LAYER_NORM_EPS}};",
                f"static const microattn::EncoderLayerWeights {name}_encoder_weights[{upper}_ENCODER_LAYERS] "
                f"{upper}_UNUSED = {{"]
        out += [encoder_row(i, cpp_matrix, "nullptr") for i in blocks]
        out += ["};", "#endif"]
    out += ["/* clang-format on */", "", f"#endif /* {guard} */", ""]
    return "\n".join(out)


def write_atomically(path, text):
    """Writes path whole or not at all: a failure leaves an existing file as it was. Otherwise as open(path, "w")
    would: through a symbolic link, keeping an existing file's mode, not over a read-only file."""
    target = os.path.realpath(path)
    if os.path.isfile(target) and not os.access(target, os.W_OK):
        raise ExportError(path, "cannot write it: it is read-only")
    try:
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(target), prefix="." + os.path.basename(target) + ".",
                                   suffix=".tmp")
    except OSError as e:
        raise ExportError(path, f"cannot write it: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        if os.path.isfile(target):
            mode = stat.S_IMODE(os.stat(target).st_mode)
        else:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)  # not mkstemp's 0600
        os.replace(tmp, target)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise ExportError(path, f"cannot write it: {e.strerror or e}") from None
        raise


def export(args):
    if args.input.endswith(".npz"):
        tensors = read_npz(args.input)
    elif args.input.lower().endswith((".pt", ".pth")):
        tensors = read_torch(args.input)
    else:
        tensors = read_safetensors(args.input)
    if args.list:
        for n in sorted(tensors, key=natural_key):
            t = tensors[n]
            note = f"  ({t.what}: not usable as weights)" if isinstance(t, Unusable) else ""
            print(f"{shown(n)}: {tuple(t.shape)}{note}")
        for p, layer in find_layers(args.input, tensors, args.prefix):
            print(f"layer {p!r}" + (f" (encoder block {layer['block']!r})" if "block" in layer else ""))
        return
    layers = find_layers(args.input, tensors, args.prefix)
    if not layers:
        raise ExportError(args.input, "no attention layer found (in_proj_weight or q_proj.weight names); try --list")
    dims = {check_shapes(args.input, p, l, args.heads, args.kv_heads) for p, l in layers}
    if len(dims) != 1:
        raise ExportError(args.input, f"the layers differ in model dim or key/value heads: {sorted(dims)}")
    (d, kv_heads), = dims
    block = None
    feed_forward = sorted({layer["linear1_weight"][1].shape[0] for _, layer in layers if "block" in layer})
    if len(feed_forward) > 1:
        raise ExportError(args.input, f"the encoder blocks differ in feed-forward size (linear1 rows): {feed_forward}")
    if feed_forward:
        block = (feed_forward[0], args.norm_first, args.activation or "relu",
                 1e-5 if args.layer_norm_eps is None else args.layer_norm_eps)
    elif args.norm_first or args.activation is not None or args.layer_norm_eps is not None:
        raise ExportError(args.input, "--norm-first, --activation and --layer-norm-eps are for "
                                      "nn.TransformerEncoderLayer blocks (linear1, linear2, norm1, norm2 next to "
                                      "self_attn), and it has none")
    if os.path.exists(args.output) and os.path.samefile(args.input, args.output):
        raise ExportError(args.output, "is the input: the header would replace the model")
    encoded = None
    if args.format is not None or block is not None:
        encoded = encode(args.input, layers, args.format or "f32", args.group)
    write_atomically(args.output, header_text(args.output, args.name, args.input, layers, d, args.heads, kv_heads,
                                              args.format, encoded, block))
    stored = "" if args.format is None else f", {args.format} weights"
    if args.format == "q8":
        stored += f" (group {args.group})" if args.group is not None else " (one scale per row)"
    if block is not None:
        stored += (f", {sum('block' in layer for _, layer in layers)} encoder block(s) with feed-forward "
                   f"{block[0]}")
    print(f"{args.output}: {len(layers)} layer(s), model dim {d}, {args.heads} heads, {kv_heads} key/value heads"
          f"{stored}")


def main(argv=None):
    """Exit status: 0 written, 1 a problem with a file (one line on stderr, nothing written), 2 bad arguments."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("input", help=".safetensors, .npz or .pt/.pth state_dict")
    ap.add_argument("-o", "--output", help="header to write (e.g. weights.h)")
    ap.add_argument("--name", default="model", help="C identifier prefix (default: model)")
    ap.add_argument("--heads", type=int, help="query heads (nn.MultiheadAttention num_heads)")
    ap.add_argument("--kv-heads", type=int, help="key/value heads (checked against the k/v shapes)")
    ap.add_argument("--prefix", help="regular expression a layer's name prefix must match (re.match)")
    ap.add_argument("--list", action="store_true", help="print the tensors and the layers found, write nothing")
    ap.add_argument("--format", choices=sorted(FORMATS), help="weight storage format (default: the float32 header "
                                                                "without weight matrices)")
    ap.add_argument("--group", type=int, help="q8: elements per scale, consecutive in row-major order (default: "
                                              "one scale per row)")
    # nn.TransformerEncoderLayer's constructor arguments, which its state_dict does not hold
    ap.add_argument("--norm-first", action="store_true", help="encoder blocks: norm_first=True (pre-norm)")
    ap.add_argument("--activation", choices=sorted(ACTIVATIONS), help="encoder blocks: the feed-forward activation "
                                                                      "(default relu; PyTorch's 'gelu' is gelu)")
    ap.add_argument("--layer-norm-eps", type=float, help="encoder blocks: layer_norm_eps (default 1e-5)")
    args = ap.parse_args(argv)
    if args.group is not None:
        if args.format != "q8":
            ap.error("--group is for --format q8 only")
        if args.group < 1:
            ap.error(f"--group must be at least 1 (got {args.group})")
    if args.layer_norm_eps is not None and not 0 <= args.layer_norm_eps <= 3.4028234663852886e38:
        ap.error(f"--layer-norm-eps must be finite and >= 0 (got {args.layer_norm_eps})")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", args.name):
        ap.error(f"--name {args.name!r} is not a C identifier (ASCII letters, digits and _, not starting with a "
                 "digit)")
    if args.prefix is not None:
        try:
            re.compile(args.prefix)
        except re.error as e:
            ap.error(f"--prefix {args.prefix!r} is not a regular expression: {e}")
    if not args.list:
        if args.heads is None or args.output is None:
            ap.error("give --heads N and -o OUTPUT (or --list)")
        if args.heads < 1 or (args.kv_heads is not None and args.kv_heads < 1):
            ap.error("--heads and --kv-heads must be at least 1")
    try:
        export(args)
    except ExportError as e:
        print(f"export_weights.py: {e}", file=sys.stderr)
        return 1
    except MemoryError:
        print(f"export_weights.py: {shown(args.input)}: not enough memory to read it", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # a bug of this script, not of the file: still one line, and no header was written
        sys.exit(f"export_weights.py: internal error, please report it with the input file: {type(e).__name__}: "
                 f"{str(e).splitlines()[0] if str(e) else ''}")
