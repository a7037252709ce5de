#!/usr/bin/python3
"""Exports a llama2.c checkpoint and its tokenizer to one C/C++ header of const arrays (flash) for microattn.

    scripts/export_llama.py CHECKPOINT -z TOKENIZER -o HEADER --format f32|f16|q8 [--group N] [--name llama]

Reads (numpy only):
  CHECKPOINT  run.c's version 0 (seven int32: dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size -- negative:
              a separate classifier --, seq_len; then fp32 tensors: embedding, attention norms, wq, wk, wv, wo, ffn
              norms, w1, w2, w3, final norm, two unused rope tables, classifier) or runq.c's version 2 (a 256-byte
              header: uint32 magic "ak42", int32 2, the seven int32, a byte shared_classifier, int32 group_size;
              fp32 norms; then each q8 tensor as its int8 values followed by one fp32 scale per group).
  TOKENIZER   tokenizer.bin: int32 max_token_length, then per token a float score, an int32 length and the bytes
              (as many tokens as the checkpoint's vocabulary, nothing after them).
Weight formats (--format), for every matrix (wq wk wv wo w1 w2 w3 of each layer, the token embedding, the classifier):
  f32  float32; a version-2 file is dequantized (scale * q, rounded once to float32, as runq.c does).
  f16  IEEE-754 binary16 bit patterns (uint16_t), float32 rounded to nearest, ties to even; a value beyond
       float16's range (65504) is refused.
  q8   int8 with one float32 scale per group of --group N consecutive values in row-major order (groups may straddle
       rows), element i = scale[i / N] * q[i]. A version-0 file is quantized as llama2.c's export.py does: scale =
       max|w| / 127 over the group, q = round(w / scale) in float32, ties to even. Default N: export.py's (64, halved
       until it divides dim); N must divide every matrix. A version-2 file is written as stored (its own group; a
       different --group is refused: requantizing would round twice).
The token embedding is stored in the same format as the matrices and, with a shared classifier (stories260K and
most llama2.c models), is the classifier: one copy in flash. The firmware dequantizes the one row it looks up per
token (runq.c also reads the embedding of a version-2 file from its q8 values). Norms stay float32.
Writes (NAME from --name, upper case for macros):
  NAME_DIM NAME_HIDDEN NAME_LAYERS NAME_HEADS NAME_KV_HEADS NAME_VOCAB NAME_SEQ NAME_GROUP (q8; else 0)
  NAME_SHARED_CLASSIFIER NAME_FORMAT (MICROATTN_FORMAT_F32/F16/Q8) NAME_WEIGHT_BYTES (flash of all tensors)
  NAME_l<i>_<tensor>[...] (wq .. w3 with their _scales for q8, attention_norm, ffn_norm), NAME_embedding,
      NAME_final_norm, NAME_classifier (separate only)
  NAME_WEIGHTS_SECTION (defined by the build, e.g. -DLLAMA_WEIGHTS_SECTION='".qspi_rodata"'): the matrices and
      their scales go to that linker section, for a model larger than the internal flash
  NAME_vocab_bytes[] and NAME_vocab_offsets[NAME_VOCAB + 1]: token i is bytes offsets[i] .. offsets[i + 1] (as
      tokenizer.bin has them, cut at a NUL byte as run.c's C strings are)
  C++: NAME_layers[NAME_LAYERS] (microattn::DecoderLayerWeights), NAME_embedding_matrix, NAME_classifier_matrix
      (microattn::WeightMatrix)
The arrays have internal linkage: include the header in one translation unit.

Refuses, with one line 'export_llama.py: FILE: problem' on stderr and exit status 1 (2 for bad arguments), writing
nothing (the header goes to a temporary file renamed over OUTPUT only when complete): a file shorter or longer than
its header's shapes, a versioned header whose version is not 2, header fields that are not positive or do not fit
together (dim / heads / kv heads, odd head dimension), a group that does not divide a matrix, a tokenizer that does
not hold exactly the model's vocabulary, NaN or inf in a tensor, a weight beyond float16's range (f16).
"""
import argparse
import os
import re
import struct
import sys

import numpy as np

# The header writer's shared pieces: the error type, the f16 and q8 rounding (llama2.c's export.py), C arrays, the
# all-or-nothing write.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_weights import ExportError, c_floats, c_ints, to_f16, to_q8, write_atomically  # noqa: E402

MAGIC_AK42 = 0x616B3432
FORMATS = {"f32": "F32", "f16": "F16", "q8": "Q8"}
MATRICES = ("wq", "wk", "wv", "wo", "w1", "w2", "w3")


def read_file(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise ExportError(path, f"cannot read it: {e.strerror or e}") from None


class Reader:
    """Consecutive tensors of a file's bytes; refuses to read past the end (the shapes are checked first)."""

    def __init__(self, path, data, at):
        self.path, self.data, self.at = path, data, at

    def take(self, dtype, count):
        n = count * np.dtype(dtype).itemsize
        if self.at + n > len(self.data):
            raise ExportError(self.path, "truncated")  # unreachable: sizes are checked before reading
        a = np.frombuffer(self.data, dtype=dtype, count=count, offset=self.at)
        self.at += n
        return a


def read_checkpoint(path):
    """{'config': dict, 'group': int or 0, tensors as float32 arrays or ('q8', int8 values, float32 scales)}."""
    data = read_file(path)
    if len(data) < 28:
        raise ExportError(path, f"truncated: {len(data)} bytes, shorter than the 28-byte header")
    (magic,) = struct.unpack_from("<I", data, 0)
    version, at = 0, 28
    if magic == MAGIC_AK42:
        if len(data) < 256:
            raise ExportError(path, f"truncated: {len(data)} bytes, shorter than the 256-byte version-2 header")
        (version,) = struct.unpack_from("<i", data, 4)
        if version != 2:
            raise ExportError(path, f"bad magic: checkpoint version {version}, only 0 (run.c) and 2 (runq.c) are read")
        fields = struct.unpack_from("<7i", data, 8)
        shared_byte, group = struct.unpack_from("<Bi", data, 36)
        if shared_byte > 1:
            raise ExportError(path, f"bad header: shared_classifier byte is {shared_byte}, must be 0 or 1")
        shared = shared_byte == 1
        at = 256
    else:
        fields = struct.unpack_from("<7i", data, 0)
        group = 0
    dim, hidden, layers, heads, kv_heads, vocab, seq = fields
    if version == 0:
        if vocab == -(2 ** 31):
            raise ExportError(path, f"bad header: vocab_size is {vocab}")
        shared = vocab > 0
        vocab = abs(vocab)
    names = ("dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len")
    for name, value in zip(names, (dim, hidden, layers, heads, kv_heads, vocab, seq)):
        if value <= 0:
            raise ExportError(path, f"bad header: {name} is {value}, must be positive")
    if dim % heads:
        raise ExportError(path, f"bad header: dim {dim} is not a multiple of n_heads {heads}")
    if heads % kv_heads:
        raise ExportError(path, f"bad header: n_heads {heads} is not a multiple of n_kv_heads {kv_heads}")
    hd = dim // heads
    if hd % 2:
        raise ExportError(path, f"bad header: head dimension {hd} is odd (rope rotates pairs)")
    kv = hd * kv_heads
    shapes = {"wq": (dim, dim), "wk": (kv, dim), "wv": (kv, dim), "wo": (dim, dim), "w1": (hidden, dim),
              "w2": (dim, hidden), "w3": (hidden, dim)}
    if version == 2:
        if group <= 0:
            raise ExportError(path, f"bad group: group_size is {group}, must be positive")
        for what, (r, c) in [("embedding", (vocab, dim))] + list(shapes.items()):
            if (r * c) % group:
                raise ExportError(path, f"bad group: group_size {group} does not divide the {r * c} values of "
                                        f"{what} ({r} x {c})")
    # Bytes the shapes need, before anything is read.
    n_mats = sum(r * c for r, c in shapes.values())
    if version == 0:
        need = 28 + 4 * (vocab * dim + layers * (2 * dim + n_mats) + dim + seq * hd + (0 if shared else vocab * dim))
    else:
        def q8(n):
            return n + 4 * (n // group)
        need = 256 + 4 * (2 * layers * dim + dim) + q8(vocab * dim) + layers * sum(q8(r * c) for r, c in
                                                                                    shapes.values())
        need += 0 if shared else q8(vocab * dim)
    if len(data) < need:
        raise ExportError(path, f"truncated: {len(data)} bytes, shorter than the {need} bytes its header's shapes need")
    if len(data) > need:
        raise ExportError(path, f"size mismatch: {len(data)} bytes, longer than the {need} bytes its header's shapes "
                                "need")
    r = Reader(path, data, at)
    m = {"config": dict(dim=dim, hidden=hidden, layers=layers, heads=heads, kv_heads=kv_heads, vocab=vocab, seq=seq,
                        shared=shared, version=version), "group": group, "layers": [{} for _ in range(layers)]}

    def floats(shape):
        return r.take("<f4", int(np.prod(shape))).astype(np.float32).reshape(shape)

    def q8t(shape):
        n = int(np.prod(shape))
        return ("q8", r.take("i1", n).reshape(shape), r.take("<f4", n // group).astype(np.float32))

    if version == 0:
        m["embedding"] = floats((vocab, dim))
        for name in ("attention_norm", "wq", "wk", "wv", "wo", "ffn_norm", "w1", "w2", "w3"):
            for layer in m["layers"]:
                layer[name] = floats(shapes.get(name, (dim,)))
        m["final_norm"] = floats((dim,))
        r.take("<f4", seq * hd)  # run.c's unused rope tables
        m["classifier"] = None if shared else floats((vocab, dim))
    else:
        for name in ("attention_norm", "ffn_norm"):
            for layer in m["layers"]:
                layer[name] = floats((dim,))
        m["final_norm"] = floats((dim,))
        m["embedding"] = q8t((vocab, dim))
        for name in MATRICES:
            for layer in m["layers"]:
                layer[name] = q8t(shapes[name])
        m["classifier"] = None if shared else q8t((vocab, dim))
    for label, t in tensors(m):
        values = [t] if not isinstance(t, tuple) else [t[2]]
        for v in values:
            if not np.all(np.isfinite(v)):
                raise ExportError(path, f"{label} holds NaN or inf")
    return m


def tensors(m):
    """(label, tensor) of every tensor of a model, in header order."""
    out = [("embedding", m["embedding"])]
    for i, layer in enumerate(m["layers"]):
        out += [(f"layer {i} {k}", layer[k]) for k in ("attention_norm", "ffn_norm") + MATRICES]
    out.append(("final_norm", m["final_norm"]))
    if m["classifier"] is not None:
        out.append(("classifier", m["classifier"]))
    return out


def read_tokenizer(path, vocab):
    if vocab < 3:  # llama2.c's fixed ids: BOS 1 starts and ends the text, EOS 2
        raise ExportError(path, f"bad header: a vocabulary of {vocab} tokens has no BOS (1) and EOS (2)")
    data = read_file(path)
    if len(data) < 4:
        raise ExportError(path, "truncated: shorter than its 4-byte header")
    (max_len,) = struct.unpack_from("<i", data, 0)
    if max_len <= 0:
        raise ExportError(path, f"bad header: max_token_length is {max_len}, must be positive")
    at, pieces = 4, []
    for i in range(vocab):
        if len(data) - at < 8:
            raise ExportError(path, f"truncated: the file ends in the header of token {i} (offset {at}); the model's "
                                    f"vocabulary has {vocab} tokens")
        _, n = struct.unpack_from("<fi", data, at)
        at += 8
        if n < 0 or n > max_len:
            raise ExportError(path, f"bad header: token {i} has length {n}, outside 0..max_token_length {max_len}")
        if len(data) - at < n:
            raise ExportError(path, f"truncated: the file ends inside token {i} (offset {at}, length {n})")
        piece = data[at:at + n]
        pieces.append(piece.split(b"\0", 1)[0])  # run.c reads the pieces as C strings
        at += n
    if at != len(data):
        raise ExportError(path, f"size mismatch: {len(data) - at} bytes after the {vocab} tokens of the model's "
                                "vocabulary")
    return pieces


def dequantize(t):
    _, q, s = t
    group = q.size // s.size
    return (q.reshape(-1, group).astype(np.float32) * s[:, None]).astype(np.float32).reshape(q.shape)


def encode(path, label, t, fmt, group):
    """(storage array, scales or None) of one matrix in format fmt."""
    if fmt == "q8":
        if isinstance(t, tuple):
            return t[1], t[2]
        if t.size % group:
            raise ExportError(path, f"bad group: --group {group} does not divide the {t.size} values of {label} "
                                    f"({t.shape[0]} x {t.shape[1]})")
        return to_q8(t, group)
    w = dequantize(t) if isinstance(t, tuple) else t
    return (w, None) if fmt == "f32" else (to_f16(path, label, w), None)


def c_string(piece):
    """A C string literal of bytes: printable ASCII as is, everything else octal (no trigraphs, no hex run-on)."""
    out = []
    for b in piece:
        c = chr(b)
        if c in "\\\"":
            out.append("\\" + c)
        elif 32 <= b < 127 and c != "?":
            out.append(c)
        else:
            out.append("\\%03o" % b)
    return '"' + "".join(out) + '"'


def header_text(args, m, pieces):
    c, fmt, name = m["config"], args.format, args.name
    up = name.upper()
    group = m["group"] if (fmt == "q8" and m["config"]["version"] == 2) else (args.group if fmt == "q8" else 0)
    ctype = {"f32": "float", "f16": "uint16_t", "q8": "int8_t"}[fmt]
    guard = re.sub(r"[^A-Za-z0-9]+", "_", os.path.basename(args.output)).strip("_").upper()
    if not guard[:1].isalpha():
        guard = "HEADER_" + guard
    src = "".join(ch if ch.isprintable() else "?" for ch in os.path.basename(args.checkpoint)).replace("*/", "* /")
    stored = {"f32": "float32", "f16": "binary16 bit patterns",
              "q8": f"int8, one float32 scale per group of {group} consecutive values (row-major)"}[fmt]
    body, weight_bytes = [], 0

    def array(ident, t, kind, section=False):
        nonlocal weight_bytes
        attr = f"{up}_UNUSED" + (f" {up}_WEIGHTS" if section else "")
        if kind == "float":
            body.append(f"static const float {ident}[{t.size}] {attr} = {{\n{c_floats(t)}\n}};")
            weight_bytes += 4 * t.size
        elif kind == "uint16_t":
            body.append(f"static const uint16_t {ident}[{t.size}] {attr} = {{\n{c_ints(t, '0x%04x', 12)}\n}};")
            weight_bytes += 2 * t.size
        else:
            body.append(f"static const int8_t {ident}[{t.size}] {attr} = {{\n{c_ints(t, '%d', 24)}\n}};")
            weight_bytes += t.size

    def matrix(ident, label, t):
        data, scales = encode(args.checkpoint, label, t, fmt, group)
        array(ident, data, ctype, section=True)
        rows, cols = data.shape
        if scales is None:
            return f"microattn::weights_{fmt}({ident}, {rows}, {cols})"
        array(ident + "_scales", scales, "float", section=True)
        return f"microattn::weights_q8({ident}, {ident}_scales, {rows}, {cols}, {group})"

    emb = matrix(f"{name}_embedding", "embedding", m["embedding"])
    cls = emb if m["classifier"] is None else matrix(f"{name}_classifier", "classifier", m["classifier"])
    layer_inits = []
    for i, layer in enumerate(m["layers"]):
        mats = [matrix(f"{name}_l{i}_{k}", f"layer {i} {k}", layer[k]) for k in MATRICES]
        for k in ("attention_norm", "ffn_norm"):
            array(f"{name}_l{i}_{k}", layer[k], "float")
        layer_inits.append("  {" + ",\n   ".join(mats + [f"{name}_l{i}_attention_norm", f"{name}_l{i}_ffn_norm"]) +
                           "},")
    array(f"{name}_final_norm", m["final_norm"], "float")
    offsets = np.cumsum([0] + [len(p) for p in pieces])
    vocab_text = "\n".join("  " + c_string(p) for p in pieces if p) or '  ""'
    hd = c["dim"] // c["heads"]
    out = [
        f"/* Generated by scripts/export_llama.py from {src} (llama2.c checkpoint version {c['version']}): do not",
        f" * edit. dim {c['dim']}, hidden {c['hidden']}, {c['layers']} layers, {c['heads']} heads ({c['kv_heads']} "
        f"key/value heads, head dim {hd}), vocabulary {c['vocab']}, seq_len {c['seq']},",
        f" * {'shared' if c['shared'] else 'separate'} classifier. Matrices (embedding included) {stored}, in",
        " * nn.Linear layout (out x in); norms float32. Include in one translation unit (internal linkage). */",
        f"#ifndef {guard}", f"#define {guard}", "", "#include <stddef.h>", "#include <stdint.h>", "",
        "#include <microattn/microattn.h>", "#ifdef __cplusplus", "#include <microattn/blocks.hpp>",
        "#include <microattn/weights.hpp>", "#endif", "",
        "#if defined(__GNUC__)", f"#define {up}_UNUSED __attribute__((unused))", "#else", f"#define {up}_UNUSED",
        "#endif",
        f"/* -D{up}_WEIGHTS_SECTION='\".name\"': the matrices in that linker section (e.g. an external flash). */",
        f"#if defined({up}_WEIGHTS_SECTION) && defined(__GNUC__)",
        f"#define {up}_WEIGHTS __attribute__((section({up}_WEIGHTS_SECTION)))", "#else", f"#define {up}_WEIGHTS",
        "#endif", "",
        f"#define {up}_DIM {c['dim']}", f"#define {up}_HIDDEN {c['hidden']}", f"#define {up}_LAYERS {c['layers']}",
        f"#define {up}_HEADS {c['heads']}", f"#define {up}_KV_HEADS {c['kv_heads']}", f"#define {up}_VOCAB {c['vocab']}",
        f"#define {up}_SEQ {c['seq']}", f"#define {up}_GROUP {group}",
        f"#define {up}_SHARED_CLASSIFIER {int(c['shared'])}", f"#define {up}_FORMAT MICROATTN_FORMAT_{FORMATS[fmt]}",
        f"#define {up}_WEIGHT_BYTES {weight_bytes}", "", "/* clang-format off */"]
    out += body
    out += ["/* The vocabulary: token i is the bytes offsets[i] .. offsets[i + 1] of vocab_bytes. */",
            f"static const char {name}_vocab_bytes[{int(offsets[-1]) + 1}] {up}_UNUSED =\n{vocab_text};",
            f"static const uint32_t {name}_vocab_offsets[{up}_VOCAB + 1] {up}_UNUSED = {{\n"
            f"{c_ints(offsets, '%d', 16)}\n}};", "",
            "#ifdef __cplusplus",
            "/* microattn::DecoderLayer<MaxSeq, DIM, HEADS, KV_HEADS, HIDDEN, Cache> layer{NAME_layers[i], ...} */",
            f"static const microattn::DecoderLayerWeights {name}_layers[{up}_LAYERS] {up}_UNUSED = {{"]
    out += layer_inits
    out += ["};", f"static const microattn::WeightMatrix {name}_embedding_matrix {up}_UNUSED = {emb};",
            f"static const microattn::WeightMatrix {name}_classifier_matrix {up}_UNUSED = {cls};", "#endif",
            "/* clang-format on */", "", f"#endif /* {guard} */", ""]
    return "\n".join(out)


def export(args):
    m = read_checkpoint(args.checkpoint)
    c = m["config"]
    if args.format == "q8":
        if c["version"] == 2:
            if args.group is not None and args.group != m["group"]:
                raise ExportError(args.checkpoint, f"bad group: the file is q8 in groups of {m['group']}; --group "
                                                   f"{args.group} would quantize twice (omit --group)")
        elif args.group is None:
            args.group = 64  # export.py's default
            while c["dim"] % args.group:
                args.group //= 2
    pieces = read_tokenizer(args.tokenizer, c["vocab"])
    for p in (args.checkpoint, args.tokenizer):
        if os.path.exists(args.output) and os.path.samefile(p, args.output):
            raise ExportError(args.output, "is an input: the header would replace it")
    write_atomically(args.output, header_text(args, m, pieces))
    print(f"{args.output}: {c['layers']} layers, dim {c['dim']}, vocabulary {c['vocab']}, {args.format} weights"
          + (f" (group {m['group'] if c['version'] == 2 else args.group})" if args.format == "q8" else ""))


def main(argv=None):
    """Exit status: 0 written, 1 a problem with a file (one line on stderr, nothing written), 2 bad arguments."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("checkpoint", help="llama2.c checkpoint, version 0 or 2")
    ap.add_argument("-z", "--tokenizer", required=True, help="tokenizer.bin")
    ap.add_argument("-o", "--output", required=True, help="header to write")
    ap.add_argument("--format", required=True, choices=sorted(FORMATS), help="weight storage format")
    ap.add_argument("--group", type=int, help="q8: values per scale (default: the file's, or export.py's)")
    ap.add_argument("--name", default="llama", help="C identifier prefix (default: llama)")
    args = ap.parse_args(argv)
    if args.group is not None:
        if args.format != "q8":
            ap.error("--group is for --format q8 only")
        if args.group < 1:
            ap.error(f"--group must be at least 1 (got {args.group})")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", args.name):
        ap.error(f"--name {args.name!r} is not a C identifier")
    try:
        export(args)
    except ExportError as e:
        print(f"export_llama.py: {e}", file=sys.stderr)
        return 1
    except MemoryError:
        print(f"export_llama.py: {args.checkpoint}: not enough memory to read it", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
