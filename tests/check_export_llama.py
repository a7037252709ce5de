#!/usr/bin/python3
"""Test of scripts/export_llama.py: good checkpoints export to headers holding exactly the file's numbers (checked
against this test's own reading of the llama2.c formats) that compile as C++; broken files and bad arguments are
refused with exit status 1 (2 for arguments) and one line 'export_llama.py: FILE: problem', writing nothing (an
existing output stays byte for byte as it was).

Usage: check_export_llama.py EXPORT_SCRIPT MAKE_CHECKPOINT_SCRIPT INCLUDE_DIR CXX...
"""
import os
import re
import struct
import subprocess
import sys
import tempfile

import numpy as np

from check_util import check, failures  # noqa: E402


def run(args):
    p = subprocess.run([sys.executable, EXPORT] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return p.returncode, p.stdout, p.stderr


def arrays(header):
    """{name: numpy array} of every static const array of a header."""
    text = open(header).read()
    out = {}
    for ctype, name, n, body in re.findall(r"static const (float|uint16_t|int8_t|uint32_t) (\w+)\[([^\]]+)\][ \w]+ = "
                                           r"\{(.*?)\};", text, re.S):
        items = [s.strip() for s in body.replace("\n", " ").split(",") if s.strip()]
        if ctype == "float":
            a = np.array([float(s.rstrip("f")) for s in items], dtype=np.float32)
        else:
            a = np.array([int(s, 0) for s in items], dtype=np.int64)
        check(not n.isdigit() or a.size == int(n), f"{header}: {name} has {a.size} values, declared {n}")
        out[name] = a
    return out


def macros(header):
    return dict(re.findall(r"#define LLAMA_(\w+) (\S+)", open(header).read()))


# --- an independent reading of the formats ---------------------------------------------------------------------

def read_v0(path):
    data = open(path, "rb").read()
    dim, hidden, layers, heads, kvh, vocab, seq = struct.unpack_from("<7i", data, 0)
    shared, vocab = vocab > 0, abs(vocab)
    kv = dim // heads * kvh
    f = np.frombuffer(data, dtype="<f4", offset=28)
    at = 0

    def take(n):
        nonlocal at
        at += n
        return f[at - n:at]
    t = {"embedding": take(vocab * dim)}
    t["attention_norm"] = [take(dim) for _ in range(layers)]
    for k, n in (("wq", dim * dim), ("wk", kv * dim), ("wv", kv * dim), ("wo", dim * dim)):
        t[k] = [take(n) for _ in range(layers)]
    t["ffn_norm"] = [take(dim) for _ in range(layers)]
    for k in ("w1", "w2", "w3"):
        t[k] = [take(hidden * dim) for _ in range(layers)]
    t["final_norm"] = take(dim)
    take(seq * dim // heads)
    t["classifier"] = None if shared else take(vocab * dim)
    return t


def read_v2(path):
    data = open(path, "rb").read()
    dim, hidden, layers, heads, kvh, vocab, seq = struct.unpack_from("<7i", data, 8)
    shared, group = struct.unpack_from("<Bi", data, 36)
    kv = dim // heads * kvh
    at = 256

    def floats(n):
        nonlocal at
        a = np.frombuffer(data, dtype="<f4", count=n, offset=at)
        at += 4 * n
        return a

    def q8(n):
        nonlocal at
        q = np.frombuffer(data, dtype="i1", count=n, offset=at)
        at += n
        return q, floats(n // group)
    t = {"attention_norm": [floats(dim) for _ in range(layers)], "ffn_norm": [floats(dim) for _ in range(layers)]}
    t["final_norm"] = floats(dim)
    t["embedding"] = q8(vocab * dim)
    for k, n in (("wq", dim * dim), ("wk", kv * dim), ("wv", kv * dim), ("wo", dim * dim), ("w1", hidden * dim),
                 ("w2", hidden * dim), ("w3", hidden * dim)):
        t[k] = [q8(n) for _ in range(layers)]
    t["classifier"] = None if shared else q8(vocab * dim)
    return t, group


def f16_bits(values):
    return np.array([struct.unpack("<H", struct.pack("<e", float(v)))[0] for v in values], dtype=np.int64)


def check_q8_of(label, w, q, s, group):
    """q, s: export.py's quantization of w (float32 arithmetic, ties to even)."""
    g = w.astype(np.float32).reshape(-1, group)
    want_s = (np.abs(g).max(axis=1) / np.float32(127)).astype(np.float32)
    check(np.array_equal(s.astype(np.float32), want_s), f"{label}: scales are not absmax / 127")
    r = g / np.where(want_s > 0, want_s, np.float32(1))[:, None]
    check(np.array_equal(q.reshape(-1, group), np.rint(r)), f"{label}: values are not round(w / scale), ties to even")


def main():
    global EXPORT
    EXPORT, make, include, cxx = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    tmp = tempfile.mkdtemp(prefix="export_llama_")
    shapes = {"shared": ["--dim", "8", "--hidden", "12", "--layers", "2", "--heads", "2", "--kv-heads", "1",
                         "--vocab", "300", "--seq", "8", "--group", "4", "--seed", "5"],
              "separate": ["--dim", "16", "--hidden", "36", "--layers", "1", "--heads", "4", "--kv-heads", "2",
                           "--vocab", "40", "--seq", "6", "--group", "8", "--separate-classifier", "--seed", "6"]}
    for name, args in shapes.items():
        subprocess.run([sys.executable, make, os.path.join(tmp, name)] + args, check=True)

    # 1. Good files: every format, the numbers as the files hold them, compiled.
    for name in shapes:
        v0, v2, tok = (os.path.join(tmp, f"{name}-{s}.bin") for s in ("v0", "v2", "tok"))
        t0 = read_v0(v0)
        t2, group = read_v2(v2)
        for src, fmt in ((v0, "f32"), (v0, "f16"), (v0, "q8"), (v2, "q8"), (v2, "f32"), (v2, "f16")):
            out = os.path.join(tmp, f"{name}-{os.path.basename(src)}-{fmt}.h")
            extra = ["--group", str(group)] if (src == v0 and fmt == "q8") else []
            rc, _, err = run([src, "-z", tok, "-o", out, "--format", fmt] + extra)
            if not check(rc == 0, f"{name} {src} {fmt}: exit {rc}: {err}"):
                continue
            a, m = arrays(out), macros(out)
            t = t0 if src == v0 else t2
            for key in ("wq", "wk", "wv", "wo", "w1", "w2", "w3"):
                for i in range(len(t[key])):
                    label = f"{name} {fmt} from {os.path.basename(src)}: layer {i} {key}"
                    got = a[f"llama_l{i}_{key}"]
                    if src == v0:
                        w = t[key][i]
                        if fmt == "f32":
                            check(np.array_equal(got, w), label)
                        elif fmt == "f16":
                            check(np.array_equal(got, f16_bits(w)), label)
                        else:
                            check_q8_of(label, w, got, a[f"llama_l{i}_{key}_scales"], group)
                    else:
                        q, s = t[key][i]
                        deq = (q.reshape(-1, group).astype(np.float32) * s[:, None]).astype(np.float32).ravel()
                        if fmt == "q8":
                            check(np.array_equal(got, q) and np.array_equal(a[f"llama_l{i}_{key}_scales"], s), label)
                        elif fmt == "f32":
                            check(np.array_equal(got, deq), label)
                        else:
                            check(np.array_equal(got, f16_bits(deq)), label)
            for i in range(len(t["attention_norm"])):
                check(np.array_equal(a[f"llama_l{i}_attention_norm"], t["attention_norm"][i]) and
                      np.array_equal(a[f"llama_l{i}_ffn_norm"], t["ffn_norm"][i]), f"{name} {fmt}: layer {i} norms")
            check(np.array_equal(a["llama_final_norm"], t["final_norm"]), f"{name} {fmt}: final norm")
            check(("llama_classifier" in a) == (name == "separate"), f"{name} {fmt}: classifier array")
            check(m["SHARED_CLASSIFIER"] == ("1" if name == "shared" else "0"), f"{name}: SHARED_CLASSIFIER")
            # The vocabulary as tokenizer.bin holds it.
            data, at, pieces = open(tok, "rb").read(), 4, []
            while at < len(data):
                n = struct.unpack_from("<i", data, at + 4)[0]
                pieces.append(data[at + 8:at + 8 + n])
                at += 8 + n
            offs = a["llama_vocab_offsets"]
            check(list(np.diff(offs)) == [len(p) for p in pieces], f"{name}: vocabulary offsets")
            src_cpp = os.path.join(tmp, "use.cpp")
            with open(src_cpp, "w") as f:
                f.write(f'#include "{out}"\nint main() {{ return llama_layers[0].wq.rows == LLAMA_DIM && '
                        'llama_classifier_matrix.cols == LLAMA_DIM ? 0 : 1; }\n')
            # As it is, and with the matrices in a linker section of their own.
            for extra in ([], ['-DLLAMA_WEIGHTS_SECTION=".big_flash"']):
                p = subprocess.run(cxx + ["-std=c++17", "-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-I", include,
                                          src_cpp] + extra, stderr=subprocess.PIPE, text=True)
                check(p.returncode == 0, f"{out} {extra} does not compile: {p.stderr[:2000]}")

    # 2. Broken files: exit 1, one line naming the file and the problem, nothing written.
    v0, v2, tok = (os.path.join(tmp, f"shared-{s}.bin") for s in ("v0", "v2", "tok"))
    raw0, raw2, rawt = (open(p, "rb").read() for p in (v0, v2, tok))
    ov = bytearray(raw0)
    ov[28:32] = struct.pack("<f", 1e5)  # the first embedding value, beyond float16's range
    nan = bytearray(raw0)
    nan[32:36] = struct.pack("<f", float("nan"))
    bad_group = bytearray(raw2)
    bad_group[37:41] = struct.pack("<i", 5)
    zero_dim = bytearray(raw0)
    zero_dim[0:4] = struct.pack("<i", 0)
    odd_heads = bytearray(raw0)
    odd_heads[12:16] = struct.pack("<i", 3)
    cases = [
        ("truncated v0", raw0[:-4], rawt, ["--format", "f32"], "truncated"),
        ("truncated v0 header", raw0[:20], rawt, ["--format", "f32"], "truncated"),
        ("truncated v2", raw2[:-1], rawt, ["--format", "q8"], "truncated"),
        ("truncated v2 header", raw2[:100], rawt, ["--format", "q8"], "truncated"),
        ("longer v0", raw0 + b"\0\0\0\0", rawt, ["--format", "f32"], "size mismatch"),
        ("wrong magic (version 3)", raw2[:4] + struct.pack("<i", 3) + raw2[8:], rawt, ["--format", "q8"],
         "bad magic"),
        ("group not dividing (v0 -> q8)", raw0, rawt, ["--format", "q8", "--group", "5"], "does not divide"),
        ("group field not dividing (v2)", bytes(bad_group), rawt, ["--format", "q8"], "does not divide"),
        ("another group than the v2 file's", raw2, rawt, ["--format", "q8", "--group", "2"], "quantize twice"),
        ("dim 0", bytes(zero_dim), rawt, ["--format", "f32"], "dim is 0"),
        ("heads not dividing dim", bytes(odd_heads), rawt, ["--format", "f32"], "not a multiple"),
        ("f16 overflow", bytes(ov), rawt, ["--format", "f16"], "float16"),
        ("NaN", bytes(nan), rawt, ["--format", "f32"], "NaN"),
        ("tokenizer truncated", raw0, rawt[:-3], ["--format", "f32"], "truncated"),
        ("tokenizer longer", raw0, rawt + b"x", ["--format", "f32"], "size mismatch"),
        ("tokenizer empty", raw0, b"", ["--format", "f32"], "truncated"),
    ]
    for label, ck, tk, args, keyword in cases:
        for existing in (False, True):
            c, t, out = (os.path.join(tmp, f"bad.{s}") for s in ("bin", "tok", "h"))
            open(c, "wb").write(ck)
            open(t, "wb").write(tk)
            if os.path.exists(out):
                os.unlink(out)
            if existing:
                open(out, "w").write("keep me\n")
            rc, _, err = run([c, "-z", t, "-o", out] + args)
            lines = err.strip().split("\n")
            check(rc == 1, f"{label}: exit {rc}, want 1 ({err.strip()})")
            check(len(lines) == 1 and lines[0].startswith("export_llama.py: ") and keyword in lines[0],
                  f"{label}: message {err.strip()!r} (want one line with {keyword!r})")
            if existing:
                check(open(out).read() == "keep me\n", f"{label}: the existing output was changed")
            else:
                check(not os.path.exists(out), f"{label}: an output was written")
            check(not [f for f in os.listdir(tmp) if f.endswith(".tmp")], f"{label}: a temporary file is left")

    # A vocabulary without BOS and EOS (llama2.c's ids 1 and 2).
    small = os.path.join(tmp, "small")
    subprocess.run([sys.executable, make, small, "--dim", "4", "--hidden", "4", "--layers", "1", "--heads", "2",
                    "--kv-heads", "1", "--vocab", "2", "--seq", "2", "--group", "2"], check=True)
    out = os.path.join(tmp, "small.h")
    rc, _, err = run([small + "-v0.bin", "-z", small + "-tok.bin", "-o", out, "--format", "f32"])
    check(rc == 1 and "no BOS" in err and not os.path.exists(out), f"vocabulary of 2: exit {rc} {err.strip()}")

    # 3. Bad arguments: exit 2, nothing written.
    out = os.path.join(tmp, "args.h")
    for args in (["--format", "f32", "--group", "4"], ["--format", "q8", "--group", "0"], ["--format", "f64"],
                 ["--format", "f32", "--name", "9x"], []):
        rc, _, err = run([v0, "-z", tok, "-o", out] + args)
        check(rc == 2 and not os.path.exists(out), f"arguments {args}: exit {rc}, want 2")
    rc, _, _ = run([v0, "-o", out, "--format", "f32"])
    check(rc == 2, "no -z: exit 2")
    rc, _, err = run([os.path.join(tmp, "missing.bin"), "-z", tok, "-o", out, "--format", "f32"])
    check(rc == 1 and "cannot read" in err and not os.path.exists(out), f"missing checkpoint: exit {rc} {err}")

    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
