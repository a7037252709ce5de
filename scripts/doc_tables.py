#!/usr/bin/python3
"""The figure tables of README.md and docs/*.md, generated from the committed result files.

Usage: scripts/doc_tables.py --write | --check [ROOT]
  --write  regenerate every table in place
  --check  exit 1, naming each table that differs from what its result file gives (the Meson test DocTables)

A table sits between two marker comments, on lines of their own:
    <!-- table: NAME -->
    ...generated: a Markdown table and a line naming its source...
    <!-- end table -->
NAME is a key of TABLES below; each entry names the files it reads (bench/results/*, scripts/*budgets*.txt) and
the function that turns them into rows. To change a figure, rerun what produced its file (the file says how),
commit the file, then run --write. A marker with an unknown name, or without its end, is an error.
"""
import glob
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
BEGIN = re.compile(r"^<!-- table: ([\w-]+) -->$")
END = "<!-- end table -->"


def read(root, path):
    with open(os.path.join(root, path), encoding="utf-8") as f:
        return f.read()


def table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return out


def markdown_rows(text, first_cell):
    """Cells of the rows of the Markdown table whose header starts with first_cell."""
    rows, inside = [], False
    for line in text.splitlines():
        if line.startswith("| " + first_cell + " |"):
            inside = True
            continue
        if inside:
            if not line.startswith("|"):
                break
            if line.startswith("|---"):
                continue
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    if not rows:
        raise ValueError(f"no table starting with '{first_cell}'")
    return rows


def benchmark_times(text):
    """{name: (real time, cpu time) in µs} from Google Benchmark's console output."""
    scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}
    out = {}
    for m in re.finditer(r"^(\S.*?)\s{2,}([\d.]+) (ns|us|ms|s)\s+([\d.]+) (ns|us|ms|s)\s+\d+", text, re.M):
        out[m.group(1)] = (float(m.group(2)) * scale[m.group(3)], float(m.group(4)) * scale[m.group(5)])
    return out


def counter(text, name, key):
    m = re.search(r"^" + re.escape(name) + r"\s.*?\b" + key + r"=([\d.]+)([kMG]?)", text, re.M)
    if not m:
        raise ValueError(f"{name}: no counter {key}")
    return float(m.group(1)) * {"": 1, "k": 1e3, "M": 1e6, "G": 1e9}[m.group(2)]


def summary_section(text, title):
    """Rows (lists of fields) of a 'Summary: TITLE…' block of a result file, header line skipped."""
    rows, inside = [], False
    for line in text.splitlines():
        if line.startswith("Summary: " + title):
            inside, rows = True, []
            continue
        if inside:
            if not line.strip():
                break
            if line.startswith("point"):
                continue
            rows.append(line.split())
    if not rows:
        raise ValueError(f"no 'Summary: {title}' block")
    return rows


def fmt(x, digits=2):
    return f"{x:.{digits}f}"


def us(x):
    """A time in µs with three significant figures (at least one decimal)."""
    return f"{x:.2f}" if x < 10 else f"{x:.1f}" if x < 1000 else f"{x:.0f}"


def thousands(n):
    return f"{n:,}".replace(",", " ")


# ---- Cortex-M footprint (scripts/footprint.py --results) -------------------------------------------------------
FOOTPRINT = "bench/results/footprint_cortex_m.txt"
FOOTPRINT_LABELS = {
    "library text": "library text, `libmicroattn.a` without `linear()`",
    "linear text": "`linear()` text, every kernel table (a firmware links its own)",
    "linear f32 kernels text": "`linear()` f32 path (matmul's gemm counted with the library)",
    "linear f16 kernels text": "`linear()` f16 kernels, as linked by a firmware calling it",
    "linear q8 kernels text": "`linear()` q8 kernels (quantization, chunk kernel, float row path)",
    "blocks text": "blocks text (norms, activations, encoder and decoder layers)",
    "library data + bss": "library `.data` + `.bss`",
    "firmware example text": "firmware example text (mostly newlib: printf with floats, semihosting)",
    "firmware example data": "firmware example `.data`",
    "firmware example bss": "firmware example `.bss`",
    "libmicroattn in the firmware example, text": "library text linked into the firmware example",
    "MultiHeadAttention<64, 64, 4> RAM": "a `static MultiHeadAttention<64, 64, 4>` (`.bss`)",
}


def footprint_rows(root):
    rows = markdown_rows(read(root, FOOTPRINT), "figure (bytes)")
    out = []
    for key, *cells in rows:
        label = FOOTPRINT_LABELS.get(key)
        if key == "stack, layer from weight matrices":
            label = "worst-case stack, a layer from `LayerWeightMatrices` (q8)"
        if label is None and key.startswith("stack, "):
            label = "worst-case stack, `" + key[len("stack, "):] + "`"
        out.append([label or key] + cells)
    return out


def footprint_table(root):
    head = ["bytes (GCC 12, -Os, newlib-nano)", "Cortex-M4", "Cortex-M7", "Cortex-M55", "budget (M4, M7 / M55)"]
    return table(head, footprint_rows(root)), [FOOTPRINT]


def footprint_summary(root):
    keep = ("library text, ", "a `static MultiHeadAttention",
            "worst-case stack, `MultiHeadAttention::forward`", "worst-case stack, `linear`")
    rows = [r for r in footprint_rows(root) if r[0].startswith(keep)]
    return table(["bytes", "Cortex-M4", "Cortex-M7", "Cortex-M55", "budget"], rows), [FOOTPRINT]


def footprint_stack_paths(root):
    """Deepest call path of the layer's forward and of attention, and the QEMU cross-check, per target."""
    text = read(root, FOOTPRINT)
    rows = []
    for section in re.split(r"^=== ", text, flags=re.M)[1:]:
        target = section.split()[0].removeprefix("build-")
        for label in ("MultiHeadAttention::forward", "attention", "linear"):
            m = re.search(r"^  " + re.escape(label) + r"\s+(\d+)  (.*)$", section, re.M)
            probe = {"MultiHeadAttention::forward": "call_forward", "attention": "call_attention",
                     "linear": "call_linear"}[label]
            q = re.search(r"^\s+" + probe + r"\s+static\s+(\d+), measured\s+(\d+)", section, re.M)
            if not m or not q:
                raise ValueError(f"{target}: no stack line for {label}")
            path = " → ".join(re.sub(r"^(.*) (\d+)$", r"\1 (\2)", p) for p in m.group(2).split(" > "))
            rows.append([target, f"`{label}`", m.group(1), f"{q.group(2)} of {q.group(1)}", path])
    head = ["target", "entry point", "static worst case", "QEMU: measured of static (probe)", "deepest path (frame bytes)"]
    return table(head, rows), [FOOTPRINT]


# ---- stack on x86 (test SmallStack) ----------------------------------------------------------------------------
STACK = "bench/results/stack_avx512.txt"


def stack_native(root):
    text = read(root, STACK)
    rows = [[m.group(1).strip(), m.group(2)] for m in
            re.finditer(r"^\[ stack \] (.+?)\s+(\d+) bytes \(", text, re.M)]
    kernel = re.search(r"bytes \((\w+)\)", text).group(1)
    return table([f"call (x86-64 AVX-512, `{kernel}`)", "stack bytes"], rows), [STACK]


# ---- test suite times (scripts/test.sh's build-times.txt, copied) ------------------------------------------------
TEST_TIMES = "bench/results/test_times.txt"


def test_times(root):
    rows, total = [], None
    for line in read(root, TEST_TIMES).splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, secs, result = line.split()[:3]  # then the CPU seconds, in files from runs that recorded them
        if name == "total":
            total = int(secs)
            continue
        if result != "passed":
            sys.exit(f"{TEST_TIMES}: target {name} {result}: the file must come from a run that passed")
        rows.append([f"`{name}`", f"{int(secs) / 60:.1f}"])
    rows.append(["**whole suite**", f"**{total / 60:.1f}**"])
    return table(["target", "minutes (2 cores)"], rows), [TEST_TIMES]


# ---- accuracy (test AttentionAccuracy) ---------------------------------------------------------------------------
ACCURACY = "bench/results/accuracy_avx512.txt"


def accuracy(root):
    found = {}
    for m in re.finditer(r"^\s+(\d+)\s+(\d+)\s+([\d.e+-]+)\s+([\d.e+-]+)$", read(root, ACCURACY), re.M):
        found[(int(m.group(1)), int(m.group(2)))] = (float(m.group(3)), float(m.group(4)))
    ns, ds = sorted({k[0] for k in found}), sorted({k[1] for k in found})
    rows = [[n] + [f"{found[(n, d)][0]:.1e} / {found[(n, d)][1]:.1e}" for d in ds] for n in ns]
    return table(["n_kv"] + [f"d = {d}: measured / bound" for d in ds], rows), [ACCURACY]


# ---- peers (scripts/bench_peers.sh) -------------------------------------------------------------------------------
PEERS = {"avx512": "bench/results/peers_avx512.md", "avx2": "bench/results/peers_avx2.md"}
PEER_SHORT = {"Eigen": "Eigen", "OpenBLAS + softmax_rows": "OpenBLAS", "oneDNN matmul+softmax": "oneDNN"}


def peer_rows(root, arch):
    rows = markdown_rows(read(root, PEERS[arch]), "n × d")
    key = lambda r: tuple(int(x) for x in r[0].split(" × ")[::-1]) + (r[1] != "dense",)
    return {(r[0], r[1]): r for r in sorted(rows, key=key)}


def peer_peak(root, arch):
    return re.search(r"FMA peak measured at start ([\d.]+) GFLOP/s", read(root, PEERS[arch])).group(1)


def best_peer_value(r):
    return r[{"Eigen": 3, "OpenBLAS + softmax_rows": 4, "oneDNN matmul+softmax": 5}[r[7]]]


def peers_full(root):
    a, b = peer_rows(root, "avx512"), peer_rows(root, "avx2")
    rows = []
    for k, r in a.items():
        s = b[k]
        rows.append([r[0], r[1], r[2], r[3], r[4], r[5], r[8], s[2], f"{best_peer_value(s)} ({PEER_SHORT[s[7]]})",
                     s[8]])
    head = ["n × d", "mode", "microattn", "Eigen", "OpenBLAS", "oneDNN", "ratio", "AVX2: microattn", "best peer",
            "ratio"]
    return table(head, rows), list(PEERS.values())


def peers_summary(root):
    a, b = peer_rows(root, "avx512"), peer_rows(root, "avx2")
    rows = []
    for k, r in a.items():
        n, d = r[0].split(" × ")
        if d != "64" or n not in ("64", "1024"):
            continue
        s = b[k]
        rows.append([r[0], r[1], r[2], f"{best_peer_value(r)} ({PEER_SHORT[r[7]]})", r[8], s[2],
                     f"{best_peer_value(s)} ({PEER_SHORT[s[7]]})", s[8]])
    head = ["n × d", "mode", "AVX-512: microattn", "best peer", "ratio", "AVX2: microattn", "best peer", "ratio"]
    return table(head, rows), list(PEERS.values())


# ---- linear() against fp32 matmul (bench/bench_linear) ------------------------------------------------------------
LINEAR = {"avx512": "bench/results/linear_avx512.txt", "avx2": "bench/results/linear_avx2.txt"}


def linear_table(root):
    rows = {}
    for arch, path in LINEAR.items():
        for f in summary_section(read(root, path), "fastest"):
            rows.setdefault(f[0], []).extend(f[8:12])  # after "|": f16 q8_g64 q8_g32 q8_grow
    out = []
    for point, cells in rows.items():
        size, m = point.split("/")
        n = size.split("x")[0]
        out.append([f"{n}² m = {m[1:]}"] + cells)
    head = ["point", "AVX-512 VNNI: f16", "q8 g64", "q8 g32", "q8 row", "AVX2: f16", "q8 g64", "q8 g32", "q8 row"]
    return table(head, out), list(LINEAR.values())


# ---- decoding (bench/bench_decode_peers, bench/bench_decode) ------------------------------------------------------
DECODE_PEERS = "bench/results/decode_peers_avx512_quiet.txt"
DECODE_LAYER = "bench/results/decode_layer_avx512.txt"


def decode_summary(root):
    return {f[0]: f[1:] for f in summary_section(read(root, DECODE_PEERS), "median CPU")}


def decode_attention(root):
    s = decode_summary(root)
    rows = []
    for shape in ("1x256", "1x1024", "1x4096", "4x256", "4x1024", "4x4096", "8x256", "8x1024", "8x4096"):
        d, c = s[f"attention/dense/{shape}"], s[f"attention/causal/{shape}"]
        rows.append([shape.replace("x", " × ")] + d[:3] + [f"**{d[3]}**"] + c[:3] + [f"**{c[3]}**"])
    head = ["n_q × n_kv", "dense: microattn µs", "Eigen", "OpenBLAS", "ratio", "causal: microattn µs", "Eigen",
            "OpenBLAS", "ratio"]
    return table(head, rows), [DECODE_PEERS]


def decode_matmul(root):
    s = decode_summary(root)
    rows = []
    for m in range(1, 9):
        row = [m]
        for kind in ("xWt", "xW"):
            for kn in (256, 1024):
                f = s[f"matmul/{kind}/m:{m}/kn:{kn}"]
                row += [f[0], fmt(float(f[1]) / float(f[0]))]
        rows.append(row)
    head = ["m", "x·Wᵀ 256² µs", "Eigen ÷", "x·Wᵀ 1024² µs", "Eigen ÷", "x·W 256² µs", "Eigen ÷", "x·W 1024² µs",
            "Eigen ÷"]
    return table(head, rows), [DECODE_PEERS]


def decode_layer(root):
    text = read(root, DECODE_LAYER)
    t = benchmark_times(text)
    proj = t["BM_decode_projections_median"][1]
    rows = []
    for n in (64, 256, 1024):
        rows.append([n, us(t[f"BM_decode_append/{n}/0_median"][1]), us(t[f"BM_decode_append/{n}/1_median"][1]),
                     us(proj), us(t[f"BM_decode_attention/{n}_median"][1])])
    head = ["cached rows", "`append`, one token, µs", "with rope", "the 4 one-row projections alone (`matmul`)",
            "8 separate `attention()` calls, one per head"]
    return table(head, rows), [DECODE_LAYER]


# ---- x86 kernels and attention (bench/bench_kernels, bench/bench_attention) ----------------------------------------
KERNELS = "bench/results/kernels_avx512.txt"
ATTENTION = "bench/results/attention_avx512.txt"


def peak(text):
    return float(re.search(r"^fma_peak_gflops: ([\d.]+)", text, re.M).group(1))


def gflops(text, name):
    return counter(text, name, "GFLOPS")


def kernels_table(root):
    text = read(root, KERNELS)
    t, p = benchmark_times(text), peak(text)
    rows = []
    for label, name in (("matmul 256³", "BM_matmul_square/256_median"),
                        ("matmul 256³, b transposed", "BM_matmul_square_transposed/256_median"),
                        ("matmul 1024³", "BM_matmul_square/1024_median")):
        g = gflops(text, name)
        rows.append([label, f"{g:.0f} GFLOP/s, {100 * g / p:.0f} % of peak"])
    soft, naive = t["BM_softmax_rows/256_median"][1], t["BM_softmax_rows_std_exp_loop/256_median"][1]
    rows.append(["softmax_rows 256×256", f"{us(soft)} µs; a plain `std::exp` loop {us(naive)} µs: "
                                         f"{naive / soft:.1f}×"])
    e = counter(text, "BM_exp_elements/4096_median", "elems_per_s")
    rows.append(["exp_elements", f"{e / 1e9:.1f} G elements/s"])
    return table([f"benchmark (FMA peak {p:.0f} GFLOP/s)", "median of 3"], rows), [KERNELS]


def attention_table(root):
    text = read(root, ATTENTION)
    t, p = benchmark_times(text), peak(text)
    rows = []
    for n, d in ((16, 32), (16, 64), (64, 64), (128, 64), (256, 64), (512, 64), (1024, 64), (256, 32), (256, 128),
                 (1024, 128)):
        dense, causal = t[f"BM_attention/{n}/{d}/0_median"][1], t[f"BM_attention/{n}/{d}/1_median"][1]
        g = 4.0 * n * n * d / dense / 1e3
        unfused = t.get(f"BM_attention_unfused/{n}/{d}_median")
        rows.append([f"{n} × {d}", us(dense), f"{g:.0f}", f"{100 * g / p:.0f} %", us(causal), fmt(causal / dense, 3),
                     us(unfused[1]) + " µs" if unfused else "—"])
    head = ["n × d", "dense µs", "GFLOP/s", "% of peak", "causal µs", "causal ÷ dense",
            "unfused (matmul + softmax_rows + matmul)"]
    return table(head, rows), [ATTENTION]


PHASES = ["scores Q·Kᵀ", "online softmax: max, 2^(s−m), sums", "P·V with the rescale fused in",
          "per tile: Q transpose-pack, output transpose-store", "(copy of the scores, subtracted from the softmax)"]


def attention_phases(root):
    text = read(root, ATTENTION)
    t, p = benchmark_times(text), peak(text)
    ph = {n: [t[f"BM_attention_phase/{n}/64/{i}_median"][1] for i in range(5)] for n in (256, 1024)}
    rows = []
    for n in (256, 1024):
        x = ph[n]
        x[1] -= x[4]  # the softmax phase restores the scores before each pass
    total = {n: sum(ph[n][:4]) for n in ph}
    for i in (0, 2, 1, 3):
        rate = ""
        if i in (0, 2):
            rate = f"{100 * 2.0 * 256 * 256 * 64 / ph[256][i] / 1e3 / p:.0f} % of peak"
        rows.append([PHASES[i], us(ph[256][i]), us(ph[1024][i]), f"{100 * ph[256][i] / total[256]:.1f} %", rate])
    return table(["phase (dense, d = 64)", "µs, n = 256", "µs, n = 1024", "share at 256", "rate"], rows), [ATTENTION]


def layers_table(root):
    text = read(root, ATTENTION)
    t = benchmark_times(text)
    rows = []
    for shape, label in (("64, 64, 4, 4", "<64, 64, 4>"), ("128, 64, 1, 1", "<128, 64, 1>"),
                         ("256, 256, 8, 8", "<256, 256, 8>"), ("256, 256, 8, 2", "<256, 256, 8, 2>")):
        name = f"BM_layer<{shape}>/0_median"
        if name not in t:
            raise ValueError(f"no {name}")
        rows.append([f"`MultiHeadAttention{label}`", us(t[name][1]), f"{gflops(text, name):.0f}",
                     thousands(int(counter(text, name, "ram_bytes")))])
    return table(["layer, forward over MaxSeq tokens", "µs", "GFLOP/s", "RAM bytes"], rows), [ATTENTION]


# ---- instruction counts (scripts/mcu_insn_budgets.txt, bench/results/arm_insns.txt) --------------------------------
MCU_BUDGETS = "scripts/mcu_insn_budgets.txt"


def mcu_counts(root):
    out = {}
    for line in read(root, MCU_BUDGETS).splitlines():
        if line and not line.startswith("#"):
            target, op, shape, n = line.split()
            out[(target, op, shape)] = int(n)
    return out


def macs(op, shape):
    if op.startswith("attention"):
        n, d = (int(x) for x in shape.split("x"))
        return 2 * n * n * d
    if op.startswith("matmul"):
        m, k, n = (int(x) for x in shape.split("x"))
        return m * k * n
    if op == "mha_forward":  # <MaxSeq, ModelDim, Heads>xTokens: 4 projections + attention over all heads
        dim, tokens = int(shape.split(",")[1]), int(shape.split("x")[-1])
        return 4 * tokens * dim * dim + 2 * tokens * tokens * dim
    if op == "softmax_rows":
        r, c = (int(x) for x in shape.split("x"))
        return r * c
    raise ValueError(op)


def mcu_table(root):
    c = mcu_counts(root)
    cases = [("attention", "16x16"), ("attention", "64x16"), ("attention", "32x32"), ("attention", "64x32"),
             ("attention", "128x32"), ("attention", "64x64"), ("attention_causal", "16x16"),
             ("attention_causal", "128x32"), ("matmul", "64x64x64"), ("mha_forward", "<64,64,4>x64"),
             ("softmax_rows", "64x64")]
    rows = []
    for op, shape in cases:
        label = {"attention": f"attention {shape.replace('x', '×')}",
                 "attention_causal": f"attention causal {shape.replace('x', '×')}", "matmul": "matmul 64³",
                 "mha_forward": "`MultiHeadAttention<64, 64, 4>`, 64 tokens",
                 "softmax_rows": "`softmax_rows` 64×64, per element"}[op]
        row = [label]
        for target in ("cortex-m4", "cortex-m7", "cortex-m55"):
            row.append(fmt(c[(target, op, shape)] / macs(op, shape)))
            naive = c.get((target, op + "_naive_O2", shape))
            row.append(fmt(naive / macs(op, shape)) if naive else "—")
        rows.append(row)
    head = ["instructions / MAC", "M4F", "M4F naive -O2", "M7", "M7 naive -O2", "M55 (Helium)", "M55 naive -O2"]
    return table(head, rows), [MCU_BUDGETS]


def mcu_llama_token(root):
    """Instructions per generated token of mcu_bench's llama_token cases (8 steps at positions 128-135)."""
    c = mcu_counts(root)
    rows = []
    for target, label in (("cortex-m4", "Cortex-M4"), ("cortex-m7", "Cortex-M7"), ("cortex-m55", "Cortex-M55")):
        q8, f32 = c[(target, "llama_token", "260K_q8@128x8")] / 8, c[(target, "llama_token", "260K_f32@128x8")] / 8
        rows.append([label, f"{q8 / 1e6:.2f} M ({thousands(round(q8))})", f"{f32 / 1e6:.2f} M ({thousands(round(f32))})"])
    return table(["target", "q8 weights, q8 cache", "f32"], rows), [MCU_BUDGETS]


ARM = "bench/results/arm_insns.txt"


def arm_counts(root):
    """{(target, impl, op, shape): (instructions, per MAC)} from scripts/arm_bench.sh's output."""
    out = {}
    for section in re.split(r"^=== ", read(root, ARM), flags=re.M)[1:]:
        target = section.split(":")[0]
        for m in re.finditer(r"^(\w+)\s+(\d+x\d+x\d+)\s+\d+\s+(\d+)\s+([\d.]+)\s+(\d+)\s+([\d.]+)\s", section, re.M):
            out[(target, "microattn", m.group(1), m.group(2))] = (int(m.group(3)), float(m.group(4)))
            out[(target, "eigen", m.group(1), m.group(2))] = (int(m.group(5)), float(m.group(6)))
    if not out:
        raise ValueError("no count rows")
    return out


def arm_row(c, op, shape):
    row = []
    for target in ("aarch64-linux-gnu", "arm-linux-gnueabihf"):
        a, e = c[(target, "microattn", op, shape)], c[(target, "eigen", op, shape)]
        row += [f"{thousands(a[0])} ({a[1]:.2f})", f"{thousands(e[0])} ({e[1]:.2f})", f"**{a[0] / e[0]:.2f}**"]
    return row


def arm_table(root):
    c = arm_counts(root)
    rows = []
    for op, shape, label in (("attention", "64x64x64", "attention 64×64"),
                             ("attention_causal", "64x64x64", "attention 64×64 causal"),
                             ("attention", "128x128x64", "attention 128×64"),
                             ("attention_causal", "128x128x64", "attention 128×64 causal"),
                             ("attention", "256x256x64", "attention 256×64"),
                             ("attention_causal", "256x256x64", "attention 256×64 causal"),
                             ("matmul", "128x128x128", "matmul 128³"), ("decode", "1x1024x64", "decode 1×1024×64")):
        rows.append([label] + arm_row(c, op, shape))
    head = ["shape", "AArch64 microattn", "Eigen", "ratio", "ARMv7 microattn", "Eigen", "ratio"]
    return table(head, rows), [ARM]


def arm_decode_table(root):
    c = arm_counts(root)
    rows = []
    for q in (1, 4, 8):
        for n in (256, 1024, 4096):
            shape = f"{q}x{n}x64"
            d = arm_row(c, "decode", shape)
            causal = [fmt(c[(t, "microattn", "decode_causal", shape)][0] / c[(t, "eigen", "decode_causal", shape)][0])
                      for t in ("aarch64-linux-gnu", "arm-linux-gnueabihf")]
            rows.append([f"{q} × {n}"] + d[:3] + [causal[0]] + d[3:] + [causal[1]])
    head = ["n_q × n_kv", "AArch64 microattn", "Eigen", "ratio", "causal ratio", "ARMv7 microattn", "Eigen", "ratio",
            "causal ratio"]
    return table(head, rows), [ARM]


# ---- weight and cache formats (scripts/format_table.py, kept current by the test FormatTable) ---------------------
FORMATS = "bench/results/format_sizes.txt"


def format_weights(root):
    rows = markdown_rows(read(root, FORMATS), "weights")
    head = ["weights", "f32", "f16", "q8, group 32", "q8, group 64", "q8, per row", "+ biases, norms (f32)"]
    return table(head, rows), [FORMATS]


def format_cache(root):
    rows = markdown_rows(read(root, FORMATS), "cache format")
    return table(["cache format", "K/V cache", "vs f32"], rows), [FORMATS]


# ---- llama2.c runner against run.c / runq.c (scripts/llama_peers.sh bench) ----------------------------------------
LLAMA = "bench/results/llama_host.txt"
LLAMA_LABELS = {"s260k-v0": "version 0 (fp32) vs run.c",
                "s260k-v2": "version 2, q8 group 64 (export.py's) vs runq.c",
                "s260k-g4-v0": "version 0, the group-4 file's fp32 twin (the same bytes), vs run.c",
                "s260k-g4-v2": "version 2, q8 group 4 vs runq.c"}


def llama_host(root):
    """The newest run of the file (its first block): medians and their ratio per checkpoint."""
    text = read(root, LLAMA).split("# Earlier run")[0]
    rows = []
    for m in re.finditer(r"^(\S+): llama_run median ([\d.]+) tok/s, (\w+) median ([\d.]+) tok/s, ratio ([\d.]+)$",
                         text, re.M):
        label = LLAMA_LABELS.get(m.group(1), m.group(1))
        rows.append([label, f"{float(m.group(2)):.0f}", f"{float(m.group(4)):.0f} ({m.group(3)}.c)",
                     f"**{m.group(5)}**"])
    if not rows:
        raise ValueError("no 'llama_run median' lines")
    runs = re.search(r"(\d+) alternating runs", text)
    head = ["checkpoint (stories260K shape)", "llama_run tok/s", "peer tok/s",
            f"llama_run / peer (medians of {runs.group(1) if runs else '?'})"]
    return table(head, rows), [LLAMA]


LLAMA_15M = "bench/results/llama_host_15m.txt"


def llama_host_15m(root):
    """The stories15M shape (scripts/llama_peers.sh bench15m): medians, ratios, the fraction of the read bandwidth."""
    text = read(root, LLAMA_15M).split("# Earlier run")[0]
    v0 = re.search(r"^s15m-v0: llama_run ([\d.]+) tok/s, run ([\d.]+), ratio ([\d.]+); ([\d.]+) GB/s read = "
                   r"([\d.]+) of the ([\d.]+) GB/s bandwidth$", text, re.M)
    f16 = re.search(r"^s15m-v0 -w f16: llama_run ([\d.]+) tok/s, ratio to run ([\d.]+)$", text, re.M)
    v2 = re.search(r"^s15m-v2: llama_run ([\d.]+) tok/s, runq ([\d.]+), ratio ([\d.]+)$", text, re.M)
    rounds = re.search(r"(\d+) alternating rounds", text)
    if not (v0 and f16 and v2 and rounds):
        raise ValueError("no complete bench15m block")
    head = ["stories15M shape", "llama_run tok/s", "peer tok/s", f"llama_run / peer (medians of {rounds.group(1)})",
            "weights read per second"]
    rows = [["version 0 (fp32) vs run.c", f"{float(v0.group(1)):.0f}", f"{float(v0.group(2)):.0f} (run.c)",
             f"**{v0.group(3)}**", f"{v0.group(4)} GB/s, {float(v0.group(5)):.0%} of {v0.group(6)} GB/s"],
            ["version 0, `-w f16` (f16 at load) vs run.c", f"{float(f16.group(1)):.0f}",
             f"{float(v0.group(2)):.0f} (run.c)", f"**{f16.group(2)}**", ""],
            ["version 2 (q8 group 32) vs runq.c", f"{float(v2.group(1)):.0f}", f"{float(v2.group(2)):.0f} (runq.c)",
             f"**{v2.group(3)}**", ""]]
    return table(head, rows), [LLAMA_15M]


LLAMA_MCU = "bench/results/llama_mcu_size.txt"
LLAMA_MCU_MODELS = {"s260k": "stories260K shape", "tiny": "the trained model"}


def llama_mcu_size(root):
    """examples/llama_mcu's firmware (scripts/llama_mcu_size.py): the runs whose cache has the weights' format."""
    rows = []
    for m in re.finditer(r"^(\S+) (\S+) v[02] (\S+) (\S+): (\d+) (\d+) (\d+) (\d+)$", read(root, LLAMA_MCU), re.M):
        target, model, weights, cache, flash, wbytes, bss, kv = m.groups()
        if weights != cache or (target != "cortex-m7" and weights != "q8"):
            continue
        target = target.replace("cortex-m", "Cortex-M")
        rows.append([f"{LLAMA_MCU_MODELS.get(model, model)}, {weights}, {target}", thousands(int(flash)),
                     thousands(int(wbytes)), thousands(int(flash) - int(wbytes)), thousands(int(bss)),
                     thousands(int(kv))])
    if not rows:
        raise ValueError("no firmware lines")
    head = ["model, weights and K/V cache, target", "flash", "of which weights", "code and the rest", ".bss",
            "of which K/V caches"]
    return table(head, rows), [LLAMA_MCU]


# ---- linear() with one row of x: instructions per MAC (scripts/mcu_insn_budgets.txt, scripts/arm_insn_budgets.txt)
ARM_BUDGETS = "scripts/arm_insn_budgets.txt"
LINEAR_SHAPES = ("1x64x256", "1x256x64", "1x256x256")  # 1 × n × k: n × k weights


def budget_counts(root, path):
    out = {}
    for line in read(root, path).splitlines():
        if line and not line.startswith("#"):
            target, op, shape, n = line.split()
            out[(target, op, shape)] = int(n)
    return out


def linear_macs(shape):
    _, n, k = (int(x) for x in shape.split("x"))
    return n * k


def shape_label(shape):
    _, n, k = shape.split("x")
    return f"{n} × {k}" if n != k else f"{n}²"


def mcu_linear_table(root):
    c = budget_counts(root, MCU_BUDGETS)
    rows = []
    for target, name in (("cortex-m4", "M4"), ("cortex-m7", "M7"), ("cortex-m55", "M55")):
        for op, label in (("linear_f32", "f32 (matmul's gemm)"), ("linear_f16", "f16"), ("linear_q8", "q8"),
                          ("linear_q8_g64", "q8 g64")):
            rows.append([f"{name} {label}"] + [fmt(c[(target, op, s)] / linear_macs(s)) for s in LINEAR_SHAPES] +
                        [fmt(c[(target, op, LINEAR_SHAPES[-1])] / c[(target, "linear_f32", LINEAR_SHAPES[-1])])])
    head = ["instructions / MAC"] + [shape_label(s) for s in LINEAR_SHAPES] + ["÷ f32 at 256²"]
    return table(head, rows), [MCU_BUDGETS]


def arm_linear_table(root):
    c = budget_counts(root, ARM_BUDGETS)
    shapes = LINEAR_SHAPES + ("1x1024x1024",)
    rows = []
    for target, name in (("aarch64-linux-gnu", "AArch64"), ("arm-linux-gnueabihf", "ARMv7")):
        rows.append([f"{name} f32, per MAC"] + [fmt(c[(target, "linear_f32", s)] / linear_macs(s)) for s in shapes])
        for op in ("f16", "q8"):
            rows.append([f"{name} {op} ÷ f32"] +
                        [fmt(c[(target, "linear_" + op, s)] / c[(target, "linear_f32", s)]) for s in shapes])
    head = ["instructions"] + [shape_label(s) for s in shapes]
    return table(head, rows), [ARM_BUDGETS]


# ---- K/V cache formats (scripts/report_cache_error.py, bench/bench_decode BM_decode_formats) ----------------------
CACHE_ERROR = "bench/results/cache_error.txt"
DECODE_FORMATS = "bench/results/decode_formats_avx512.txt"


def cache_error(root):
    found = {}
    for m in re.finditer(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+(f32|f16|q8) \|\s+([\d.e+-]+)\s+([\d.e+-]+) \|"
                         r"\s+([\d.e+-]+)\s+([\d.e+-]+)$", read(root, CACHE_ERROR), re.M):
        found.setdefault(m.group(1, 2, 3), {})[m.group(4)] = [float(x) for x in m.group(5, 6, 7, 8)]
    if not found:
        raise ValueError("no error rows")
    e = lambda x: f"{x:.1e}"
    rows = [[n, d, h, f"{e(c['f16'][0])} / {e(c['f16'][1])}", f"{e(c['q8'][0])} / {e(c['q8'][1])}", e(c["f32"][2])]
            for (n, d, h), c in found.items()]
    head = ["n", "d", "heads", "f16 cache vs f32 cache: max / rms", "q8 cache: max / rms", "f32 cache vs torch fp64: max"]
    return table(head, rows), [CACHE_ERROR]


def decode_formats(root):
    text = read(root, DECODE_FORMATS).split("\n# the same before")[0]
    t = benchmark_times(text)
    base = t["BM_decode_formats/0/0/min_time:0.100_median"][1]
    rows = []
    for c, cache in enumerate(("f32", "f16", "q8")):
        for w, weights in enumerate(("f32", "q8")):
            name = f"BM_decode_formats/{w}/{c}/min_time:0.100_median"
            ram = counter(text, name, "layer_ram_bytes")
            rows.append([weights, cache, us(t[name][1]), fmt(base / t[name][1]), f"{ram / 1024:.0f} KiB"])
    head = ["weights", "K/V cache", "`append` µs (CPU, median)", "speed vs f32/f32", "layer RAM (`ram_bytes`)"]
    return table(head, rows), [DECODE_FORMATS]


TABLES = {
    "footprint-summary": footprint_summary,
    "footprint": footprint_table,
    "stack-paths": footprint_stack_paths,
    "stack-native": stack_native,
    "test-times": test_times,
    "accuracy": accuracy,
    "peers-summary": peers_summary,
    "peers": peers_full,
    "linear": linear_table,
    "decode-attention": decode_attention,
    "decode-matmul": decode_matmul,
    "decode-layer": decode_layer,
    "kernels": kernels_table,
    "attention": attention_table,
    "attention-phases": attention_phases,
    "layers": layers_table,
    "mcu-insns": mcu_table,
    "mcu-llama-token": mcu_llama_token,
    "arm-insns": arm_table,
    "arm-decode-insns": arm_decode_table,
    "format-weights": format_weights,
    "format-cache": format_cache,
    "llama-host": llama_host,
    "llama-host-15m": llama_host_15m,
    "llama-mcu-size": llama_mcu_size,
    "mcu-linear-insns": mcu_linear_table,
    "arm-linear-insns": arm_linear_table,
    "cache-error": cache_error,
    "decode-formats": decode_formats,
}


def generate(root, name):
    lines, sources = TABLES[name](root)
    return lines + ["", "<sub>Generated by `scripts/doc_tables.py` from " +
                    ", ".join(f"`{s}`" for s in sources) + ".</sub>"]


def documents(root):
    return [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))


def process(root, path, write):
    """Regenerated text of one document and the names of its tables that differed."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    out, differ, i = [], [], 0
    rel = os.path.relpath(path, root)
    while i < len(lines):
        m = BEGIN.match(lines[i])
        out.append(lines[i])
        i += 1
        if not m:
            continue
        name = m.group(1)
        if name not in TABLES:
            raise ValueError(f"{rel}:{i}: unknown table '{name}' (known: {', '.join(TABLES)})")
        try:
            end = lines.index(END, i)
        except ValueError:
            raise ValueError(f"{rel}:{i}: table '{name}' has no '{END}'") from None
        want = generate(root, name)
        if lines[i:end] != want:
            differ.append(f"{rel}:{i}: table '{name}' differs from " + want[-1].split(" from ", 1)[1][:-7])
        out += want
        i = end
    if write and differ:
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(out))
    return differ


def main():
    args = sys.argv[1:]
    if not args or args[0] not in ("--write", "--check"):
        sys.exit(__doc__)
    root = args[1] if len(args) > 1 else ROOT
    write = args[0] == "--write"
    try:
        differ = [d for p in documents(root) for d in process(root, p, write)]
    except (ValueError, KeyError, OSError, AttributeError) as e:
        print(f"doc_tables.py: {type(e).__name__}: {e}")
        return 1
    for d in differ:
        print(("rewrote " if write else "") + d)
    if differ and not write:
        print(f"{len(differ)} table(s) disagree with their result files: run scripts/doc_tables.py --write")
        return 1
    print(f"doc_tables.py: every table {'written' if write else 'matches its result file'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
