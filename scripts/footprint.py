#!/usr/bin/python3
"""Flash, RAM and stack of microattn on Cortex-M, checked against the budgets below (docs/cortex-m.md "Footprint").

Usage: scripts/footprint.py [--results FILE] [BUILD_DIR ...]
  --results FILE  also write the report to FILE (bench/results/footprint_cortex_m.txt: the docs' tables read it,
                  scripts/doc_tables.py)
  Default: build-cortex-m4, build-cortex-m7 and build-cortex-m55, set up with cross/<target>.ini when
  missing, and brought up to date with ninja. The Cortex-M cross files build at -Os; the figures are those
  of the very objects the test suite runs.
Prints, for each build: text/data/bss of every object of libmicroattn.a and of the firmware example
(arm-none-eabi-size), what the library contributes to the firmware example (from its link map), the
worst-case stack of each public entry point, and the RAM held by MultiHeadAttention<64, 64, 4>. Exits 1 when
a figure exceeds its budget or cannot be established, or when a stack use measured under QEMU exceeds the
static worst case (which would mean the analysis below missed something).

How the stack is derived: the library objects are compiled with -fstack-usage -fcallgraph-info=su, which give
each function's frame (all must be "static": a fixed size) and its calls. The worst case of an entry point
is the largest sum of frames along any call path from it (recursion is an error). The kernels are reached
through function pointers (detail::Kernels): GCC records those calls as "__indirect_call", and the script
lets each one reach every function whose address the library stores in data (found from the relocations of
the objects' data sections, i.e. the kernel tables), taking the worst. Functions outside the library
(memset, sqrtf from newlib) have no .su: their frames are read from the prologues (push, vpush, sub sp) of
mcu/footprint_probe's disassembly, following their direct calls. Where a prologue allocates more than the
.su figure says (GCC leaves out the area where an argument straddling registers and stack is spilled), the
prologue's figure is taken. MultiHeadAttention::forward() is an inline member: its figure is that of
footprint::call_forward (mcu/footprint_probe.cpp), a function that only calls it for <64, 64, 4>.
Cross-check: mcu/footprint_probe calls every entry point through such a wrapper on a painted stack under
QEMU and prints the bytes used; each must be at most the static worst case of its wrapper.
Interrupts that preempt the library stack their own frames on top: budget those in the application.
"""
import os
import re
import subprocess
import sys

# Budgets, in bytes. A figure above its budget fails the check (and CI).
BUDGETS = {
    # The whole of libmicroattn.a: fp32 matmul, softmax, exp, attention (query-tile and few-query paths, windows,
    # the exact row path of finite extremes), layers with the K/V cache and rotary embeddings, and the C API
    # (1.9 KiB, dropped by the linker from C++ firmware). Was 8 KiB before decoding, the exact row path and the C
    # API (issues 10, 12, 11): 17.0 KiB measured after them, 16 484 B once trimmed (issue 9), 16 094 B after a
    # second round (issue 9: C API duplicates, one 2^x for the exact path); a C++ firmware links 12.7 KiB of it.
    # linear() and its kernels (LINEAR_OBJECTS) are counted on their own below: a firmware that never calls linear()
    # links none of them (their kernel table is separate from detail::Kernels).
    # Raised by 256 B for the exact rotary reduction (sin_cos.hpp, +132), the C API's init weight checks (+48) and
    # microattn_linear's wrapper (+112): 16 440 B measured on M4.
    # Raised by 1152 B for layers from LayerWeightMatrices (the weight readers, layers.cpp +350; the C API's
    # microattn_layer_init_matrices and its conversions, capi.cpp +750): 17 536 B measured on M4. A C++ firmware
    # that builds its layers from LayerWeights links about 150 B of it (the fp32 reader), none of the rest.
    # Raised by 5120 B for the f16/q8 K/V caches (the cache attention path, its layer entry and conversion kernels,
    # +4837 B on M4, and the C API's cache layout, +370: 22 743 B measured). A firmware whose caches are all f32
    # links none of it (the firmware example's budget below is unchanged).
    # Raised by 640 B for the cache's fused scores and P·V (the scalar table's rows_dot_stored / rows_axpy_stored,
    # reading the stored rows without a converted copy of a key block): 23 521 B measured on M4; still none of it in
    # an f32-cache firmware.
    # Raised by 512 B for decoding speed (a llama2.c 260K model: 2.67 -> 1.48 M instructions per token on M7 with
    # q8 weights and cache, 2.43 -> 1.56 M in fp32): the q8 cache's fused products two query rows at a time (+308),
    # gemm's one-row tile of eight contiguous weight rows (+224) and the fp32 rows_dot / rows_axpy two rows at a time
    # (+116): 24 009 B measured on M4.
    # Raised by 4608 B for blocks whose scratch does not grow with MaxSeq (the layer's check, store and tile
    # functions instantiated a second time for a block's rows, normalized a query tile at a time: f32 and f16/q8
    # caches, +3.6 KiB, linked only by firmwares that run blocks) and the decoding products four keys or four
    # columns at a time (rows_dot / rows_axpy, f32 and q8: +0.9 KiB; M7 per llama token: f32 1.56 -> 1.39 M
    # instructions, q8 1.48 -> 1.29 M): 28 517 B measured on M4.
    # Raised by 1536 B for the head-dim-8 decoding kernels in asm (f32 and q8 dot and P·V, two rows held in
    # registers) and the online softmax's max and 2^x two scores a loop (M7 per llama token: q8 1.22 -> 0.98 M
    # instructions, f32 1.32 -> 1.09 M): 30 137 B measured on M4.
    # Raised by 384 B for cpu_supported() (cpu_check.cpp, 149 B; 1 on bare metal, but the C and C++ entries are
    # linked), the norms' eps floor for rows rescaled down and the saturating size arithmetic: 30 488 B on M4.
    # Raised by 640 B for the public format conversions (f16_from_float, float_from_f16, quantize_q8 and their C
    # entries; linked only by a program that calls them): 31 112 B on M4. Raised by 256 B for the C entry
    # microattn_linear_parallel and its hook adapter (linked only by a program that calls it): 31 295 B on M4.
    "library text": 31488,
    # linear(): its checks, q8's chunked quantization and the scalar f32/f16/q8 kernels (linear.cpp, kernels/linear_*).
    # The archive's linear objects, every table included (a firmware links only its own: "linear ... kernels text").
    # 7181 B measured on M4 (3333 before the Armv7E-M and Helium tables and the layers' entries; the Armv7E-M f16
    # kernel's 8-column asm steps: +378 B; linear()'s three per-format entry points, each with its checks' call, and
    # the q8 tables without the f16 kernel: +251 B, 7432 B; the parallel linear() over the caller's workers, linked
    # only by a firmware that calls it: +402 B, 7996 B)
    "linear text": 8192,
    # What a firmware calling linear() links of it, by format (functions of linear()'s objects in footprint_probe,
    # named by their format; footprint_probe calls linear() with q8 weights through a WeightMatrix whose format it
    # reads at run time, so it links all three):
    # matmul's gemm plus the bias, 52 B (the gemm is counted in the library), and linear()'s f32 entry point (its
    # checks' call and arguments, +90 B; linear_checks is "common"): 214 B measured on M4
    "linear f32 kernels text": 256,
    # linear() is inline and picks its format's entry point: where the format is known at the call, the firmware
    # links no other format's kernels (mcu/linear_f32_probe: f32 only).
    "linear f32 caller, f16 and q8 text": 0,
    # So do blocks: they pick their readers from the formats when constructed, and with constant weights only the
    # formats used are referenced (mcu/block_f32_probe: an encoder and a decoder block, f32 weights).
    "block f32 caller, f16 and q8 text": 0,
    # Armv7E-M VCVTB/VCVTT, 4 rows: 1158 B measured on M7 (768 B before its 8-column asm steps: the 4-row step is 71
    # 32-bit instructions, the 1-row step 20, and the columns before and after them come in C); 1246 B with
    # linear()'s f16 entry point
    "linear f16 kernels text": 1280,
    # q8: the chunked quantization driver, absmax, runq.c's rounding, the chunk kernel, the float row path.
    # 2904 B measured on M4; 3154 B with linear()'s q8 entry point and its table; 3224 B once q8's dispatch is a
    # function of its own (linear_q8_in, shared with the layers' and blocks' q8 entry): 70 B that were "common"
    "linear q8 kernels text": 3328,
    # The firmware example (fp32 layers, no linear()) links none of linear()'s code, and its library text stays
    # what it was before linear() came in.
    # 13333 B on M4: the fp32 weight reader of layers (+132); 13 737 B with gemm's 1x8 row tile and the two-row
    # rows_dot / rows_axpy (+384, see "library text"); 14 319 B with rows_dot / rows_axpy four keys or four columns at
    # a time (+540, see "library text"); 14 949 B with the head-dim-8 f32 kernels and the two-score softmax loops
    # (+630, see "library text": the example's own heads are 8 wide)
    "firmware example library text": 15104,
    # The transformer blocks (BLOCKS_OBJECTS: norms and activations 2578 B, encoder and decoder layers 2582 B, C API
    # 3752 B), counted on their own like linear(): no existing firmware calls them, so none links them.
    # Raised by 3584 B for the C API of the encoder and decoder layers (blocks_capi.cpp 186 -> 3752 B on M4: the
    # inits' weight, size and overlap checks, the calls' BlockParts and the cache layouts); the firmware example's
    # library text is unchanged (13353 B on M4).
    "blocks text": 9216,  # 8538 B measured on M4 (8912 before the attention rows moved into the layer)
    "library data + bss": 0,  # the library keeps no static state
    # Static worst case along the deepest path, the footprint probe's own frame (216 B) included: 1024 B on M4/M7
    # (QEMU measures 964 B), the 1 KiB; it was 1128 B while the exact row path sat under the tile loop. The
    # head-dim-8 asm kernels sit at the bottom of that path: they keep their rows in s0–s15 and save only d8–d10.
    "stack, any entry point": 1024,
    # linear() with q8 on Armv7E-M: x expanded to SXTB16 pairs (512 B for the 256-byte chunk) under the driver's
    # 256-byte quantization buffer, and the int32 sums of 16 rows.
    "stack, linear": 1664,  # 1648 B measured on M4/M7 (908 with the scalar kernels)
    # A layer from LayerWeightMatrices projects through linear()'s kernels: the q8 chunk's sums on the stack.
    "stack, layer from weight matrices": 1664,  # 1648 B on M4/M7
    "MultiHeadAttention<64, 64, 4> RAM": 36 * 1024,  # 35 696 bytes of buffers + 8 weight pointers
    "firmware example text": 60 * 1024,  # mostly newlib: printf with floats, semihosting
    "firmware example data": 1024,
    "firmware example bss": 10 * 1024,
}
# The Cortex-M55 build carries two kernel tables (scalar and Helium) and its own figures: overrides by target.
# The objects of linear() (weights in f32/f16/q8), whose text has its own budget.
LINEAR_OBJECTS = re.compile(r"^src_(kernels_)?linear[a-z0-9_]*\.cpp\.o$")
BLOCKS_OBJECTS = re.compile(r"^src_blocks[a-z0-9_]*\.cpp\.o$")
TARGET_BUDGETS = {
    "cortex-m55": {
        # two kernel tables: scalar (4.5 KiB) and Helium (7.2 KiB); 24 195 B measured, 25 261 with layers from
        # LayerWeightMatrices
        # 30 558 B with the f16/q8 caches, 31 372 with their fused scalar products, 31 900 with the decoding tiles,
        # 36 420 with the blocks' tile-at-a-time rows and the four-key / four-column decoding products, 38 024 with
        # the head-dim-8 kernels and the two-score softmax loops, 38 357 with cpu_supported(), the norms' eps floor
        # and the saturating sizes, 38 973 with the public format conversions
        "library text": 39168,
        # Helium's gemm row tiles (56 + 80 + 120 B) under the few-query path: 1096 B measured (QEMU: 1052 B)
        "stack, any entry point": 1104,
        "firmware example text": 64 * 1024,
        # 21 507 B with the decoding tiles (+259); 22 077 B with the four-key / four-column decoding products; 22 691 B
        # with the head-dim-8 kernels and the two-score softmax loops
        "firmware example library text": 22784,
        # the Helium f16 (960 B) and q8 kernels and the parallel linear(); the Armv7E-M f16 kernel is not compiled
        # for Helium builds
        "linear text": 8192,
        # the Helium f16 kernel (MVE VCVTB/VCVTT quads in asm, x's subnormal check, VCVTB scalar rows): 960 B measured,
        # 1076 B with linear()'s f16 entry point
        "linear f16 kernels text": 1152,
        "stack, linear": 1408,  # Helium q8, the int32 sums and floats of 32 rows: 1384 B measured (16 rows: 1120 B, 16 % more instructions at 256 x 64)
        "stack, layer from weight matrices": 1408,  # 1384 B (Helium q8, as linear)
        "linear q8 kernels text": 3328,  # 3182 B measured
    },
}


def budget(build, key):
    target = os.path.basename(os.path.normpath(build)).removeprefix("build-")
    return TARGET_BUDGETS.get(target, {}).get(key, BUDGETS[key])

ENTRY_POINTS = [  # name in the table, pattern matched against the demangled function name
    ("matmul", r"^microattn::Status microattn::matmul\("),
    ("softmax_rows", r"^microattn::Status microattn::softmax_rows\("),
    ("exp_elements", r"^microattn::Status microattn::exp_elements\("),
    ("attention", r"^microattn::Status microattn::attention\("),
    ("MultiHeadAttention::forward", r"^microattn::Status footprint::call_forward\("),
    ("MultiHeadAttention::append", r"^microattn::Status footprint::call_append\("),
    ("linear", r"^microattn::Status microattn::detail::linear_entry\(.*\[with F = q8_format\]"),  # inline linear()'s deepest format
]
PROBE_WRAPPER = r"^microattn::Status footprint::{}\("  # the measured out-of-line calls of the probe

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
TOOL = "arm-none-eabi-"


def run(*cmd, cwd=None):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=cwd).stdout


def ensure_build(build):
    target = os.path.basename(build).removeprefix("build-")
    if not os.path.isfile(os.path.join(build, "build.ninja")):
        cross = os.path.join(ROOT, "cross", target + ".ini")
        if not os.path.isfile(cross):
            sys.exit(f"footprint.py: {build} is not set up and there is no {cross}")
        subprocess.run(["meson", "setup", build, "--cross-file", cross, "-Dbenchmarks=disabled"], check=True,
                       stdout=subprocess.DEVNULL)
    subprocess.run(["ninja", "-C", build], check=True, stdout=subprocess.DEVNULL)


def size_table(path):
    """(name, text, data, bss) rows of arm-none-eabi-size for an archive's members or one program."""
    rows = []
    for line in run(TOOL + "size", path).splitlines()[1:]:
        f = line.split()
        name = re.sub(r" \(ex .*\)$", "", line.split("\t")[-1].strip())
        rows.append((os.path.basename(name), int(f[0]), int(f[1]), int(f[2])))
    return rows


def linked_from_library(map_path):
    """Bytes of the library's input sections in a link map, split into flash (text, rodata) and RAM."""
    text = ram = 0
    with open(map_path, encoding="utf-8") as f:
        body = f.read().split("Linker script and memory map", 1)[1]
    for m in re.finditer(r"^ (\.\S+)\s+0x[0-9a-f]+\s+0x([0-9a-f]+) \S*libmicroattn\.a\(", body, re.M):
        section, size = m.group(1), int(m.group(2), 16)
        if section.startswith((".data", ".bss")):
            ram += size
        elif section.startswith((".text", ".rodata", ".ARM")):
            text += size
    return text, ram


# linear()'s functions (those defined in its objects) by format, from their names: each format's kernels in flash.
LINEAR_FORMATS = [
    ("f16", re.compile(r"f16")),
    ("q8", re.compile(r"q8|quantize|absmax|dot16|dot4|scales4|pairs_x16|quads_x16")),
    ("f32", re.compile(r"f32")),
]


def linear_text_by_format(build, elf):
    objects = [os.path.join(build, "libmicroattn.a.p", o) for o in os.listdir(os.path.join(build, "libmicroattn.a.p"))
               if o.endswith(".o") and is_linear(o)]
    names = set()
    for obj in objects:
        for line in run(TOOL + "nm", "-C", "--defined-only", obj).splitlines():
            f = line.split(maxsplit=2)
            if len(f) == 3:
                names.add(f[2])
    sizes = {fmt: 0 for fmt, _ in LINEAR_FORMATS}
    sizes["common"] = 0
    for line in run(TOOL + "nm", "-S", "-C", "--defined-only", elf).splitlines():
        f = line.split(maxsplit=3)
        if len(f) != 4 or f[3] not in names:
            continue
        bare = f[3].replace("(anonymous namespace)::", "").split("(")[0]  # the name without its arguments
        fmt = next((fmt for fmt, p in LINEAR_FORMATS if p.search(bare)), "common")
        sizes[fmt] += int(f[1], 16)
    return sizes


def linear_sections(map_path):
    """Input sections of a link map that come from linear()'s objects."""
    with open(map_path, encoding="utf-8") as f:
        body = f.read().split("Linker script and memory map", 1)[1]
    return sorted({m.group(2) for m in re.finditer(r"^ (\.\S+)\s+0x[0-9a-f]+\s+0x[0-9a-f]+ \S*libmicroattn\.a\((\S+)\)", body, re.M)
                   if LINEAR_OBJECTS.match(m.group(2))})


# ---- stack ---------------------------------------------------------------------------------------------
NODE = re.compile(r'^node: \{ title: "([^"]+)" label: "([^"]*)"')
EDGE = re.compile(r'^edge: \{ sourcename: "([^"]+)" targetname: "([^"]+)"')


class CallGraph:
    def __init__(self):
        self.frame = {}  # title -> bytes
        self.name = {}  # title -> demangled name
        self.calls = {}  # title -> set of titles
        self.origin = {}  # title -> the .ci file (object) that defines it
        self.problems = []

    def read_ci(self, path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                m = NODE.match(line)
                if m:
                    title, label = m.groups()
                    parts = label.split("\\n")
                    self.name.setdefault(title, parts[0])
                    su = re.match(r"(\d+) bytes \(([a-z,]+)\)", parts[-1])
                    if su:
                        self.origin.setdefault(title, os.path.basename(path))
                        if su.group(2) not in ("static", "dynamic,bounded"):
                            self.problems.append(f"{parts[0]}: stack use is {su.group(2)} (unbounded)")
                        self.frame[title] = max(self.frame.get(title, 0), int(su.group(1)))
                    continue
                m = EDGE.match(line)
                if m:
                    self.calls.setdefault(m.group(1), set()).add(m.group(2))

    def titles(self, symbol):
        """Node titles of a (mangled) symbol: file-local functions are titled 'FILE:symbol', one per file."""
        if symbol in self.frame:
            return [symbol]
        return [t for t in self.frame if t.endswith(":" + symbol)]


def defined_functions(obj):
    return {f.split()[-1] for f in run(TOOL + "nm", "--defined-only", obj).splitlines() if f.split()[1] in "tTwW"}


def address_taken_functions(objects, graph, defined_in=None):
    """Functions whose address the library stores in data (the kernel tables): targets of indirect calls. Those
    defined in the same object, or in the objects `defined_in`."""
    targets = set()
    elsewhere = set().union(*(defined_functions(o) for o in defined_in)) if defined_in is not None else None
    for obj in objects:
        functions = defined_functions(obj) if elsewhere is None else elsewhere
        out = run(TOOL + "objdump", "-r", obj)
        for block in re.split(r"^RELOCATION RECORDS FOR \[", out, flags=re.M)[1:]:
            section = block.split("]", 1)[0]
            if section.startswith((".text", ".ARM", ".debug")):
                continue
            for m in re.finditer(r"R_ARM_ABS32\s+(\S+)", block):
                if m.group(1) in functions:
                    targets.update(graph.titles(m.group(1)) or [m.group(1)])
    return targets


def disassembly_frames(elf):
    """Frames of the functions of a linked program, from their prologues, and their direct calls."""
    frames, calls, current = {}, {}, None
    for line in run(TOOL + "objdump", "-d", "--no-show-raw-insn", elf).splitlines():
        m = re.match(r"^[0-9a-f]+ <([^>]+)>:$", line)
        if m:
            current = m.group(1)
            frames[current], calls[current] = 0, set()
            continue
        m = re.match(r"^\s+[0-9a-f]+:\s+(\S+)\s+(.*)$", line)
        if not m or current is None:
            continue
        op, args = m.group(1), m.group(2)
        if op in ("push", "push.w") or (op.startswith("stmdb") and args.startswith("sp!")):
            frames[current] += 4 * len(args.split("{", 1)[1].split(","))
        elif op == "vpush" or (op.startswith("vstmdb") and args.startswith("sp!")):
            for reg in args.split("{", 1)[1].rstrip("}").split(","):
                r = re.match(r"\s*([sd])(\d+)(?:-[sd](\d+))?", reg)
                count = int(r.group(3) or r.group(2)) - int(r.group(2)) + 1
                frames[current] += count * (4 if r.group(1) == "s" else 8)
        elif re.match(r"subw?(\.w)?$", op) and re.match(r"sp, (sp, )?#\d+", args):
            frames[current] += int(args.rsplit("#", 1)[1].split()[0])
        elif op.startswith("str") and re.search(r"\[sp, #-\d+\]!", args):  # one register pushed
            frames[current] += int(re.search(r"#-(\d+)", args).group(1))
        elif op in ("bl", "b.w", "b") and "<" in args:
            target = args.split("<", 1)[1].split(">")[0]
            if "+" not in target:  # a branch inside the function is not a call
                calls[current].add(target)
    return frames, calls


def is_linear(name):
    """Whether an object (or its .ci file) is one of linear()'s."""
    return LINEAR_OBJECTS.match(re.sub(r"\.ci$", ".o", name)) is not None


def calls_linear_table(name):
    """Whether an object (or its .ci file) calls through linear()'s kernel table: linear.cpp alone (its kernels call
    matmul's, through detail::Kernels)."""
    return re.sub(r"\.ci$", ".o", name) == "src_linear.cpp.o"


def is_layers(name):
    """Whether an object (or its .ci file) is layers.cpp, whose data holds the layers' weight readers."""
    return re.sub(r"\.ci$", ".o", name) == "src_layers.cpp.o"


# The functions that call through a layer's weight reader (LayerParts::reader, layers.cpp): their indirect calls may
# also reach the readers' functions (the projections and weight checks of LayerWeights and LayerWeightMatrices).
READER_CALLERS = re.compile(r"layer_(prepare|attend_tiles)\(")
READER_LINEAR_CALLERS = re.compile(r"project_matrices\(")  # calls the reader's linear() entry


def worst_stack(graph, indirect, external, title, path=()):
    """(bytes, path) of the deepest call chain from title. indirect = (the functions stored in detail::Kernels' tables,
    those stored in linear()'s): only linear.cpp calls through linear()'s table, and its kernels call matmul's
    (detail::Kernels) for f32, so the rest of the library cannot reach linear()'s kernels."""
    if title in path:
        raise ValueError("recursion: " + " -> ".join(graph.name.get(t, t) for t in path + (title,)))
    frames, calls = external
    if title not in graph.frame and graph.titles(title):
        # A weak definition (a template's explicit instantiation, an inline function emitted out of line) is titled
        # 'FILE:symbol' as a file-local one is, and called by its bare symbol from other files: the worst of them.
        return max(worst_stack(graph, indirect, external, t, path) for t in graph.titles(title))
    if title in graph.frame:
        own, callees = graph.frame[title], set(graph.calls.get(title, ()))
        if "__indirect_call" in callees:
            callees.discard("__indirect_call")
            origin = graph.origin.get(title, "")
            callees |= indirect[1] if calls_linear_table(origin) else indirect[0]
            if is_layers(origin) and READER_CALLERS.search(graph.name.get(title, "")):
                callees |= indirect[2]
            if is_layers(origin) and READER_LINEAR_CALLERS.search(graph.name.get(title, "")):
                callees |= indirect[3]
        label = short_name(graph.name.get(title, title))
    elif title in frames:  # outside the library: from the disassembly
        own, callees, label = frames[title], calls[title], title + " (disassembly)"
    else:
        raise ValueError(f"no stack figure for {graph.name.get(title, title)}: not in the library's .su files, "
                         "nor in the firmware example")
    best, best_path = 0, ()
    for c in sorted(callees):
        n, p = worst_stack(graph, indirect, external, c, path + (title,))
        if n > best:
            best, best_path = n, p
    return own + best, ((label, own),) + best_path


def short_name(pretty):
    name = re.sub(r"^.*?(\S+)\(.*$", r"\1", pretty)  # drop the return type and the arguments
    return re.sub(r"^microattn::(detail::)?(\{anonymous\}::)?", "", name)


def stack_report(build, probe):
    graph = CallGraph()
    objects, cis = [], []
    for sub in ("libmicroattn.a.p", os.path.join("mcu", "footprint_probe.p")):
        d = os.path.join(build, sub)
        for f in sorted(os.listdir(d)):
            if f.endswith(".ci"):
                cis.append(os.path.join(d, f))
            elif f.endswith(".o"):
                objects.append(os.path.join(d, f))
    if not cis:
        raise ValueError(f"no .ci files in {build}: the library was not built with -fcallgraph-info=su")
    for ci in cis:
        graph.read_ci(ci)
    if graph.problems:
        raise ValueError("; ".join(graph.problems))
    # GCC's .su figure leaves out the area where an argument that straddles registers and stack is spilled
    # (the "pretend args", a "sub sp" before the register push); the prologues show it: take the larger.
    # (A file-local function defined in several files gets the largest of their prologues: conservative.)
    corrected = []
    for obj in objects:
        for symbol, prologue in disassembly_frames(obj)[0].items():
            for title in graph.titles(symbol):
                if prologue > graph.frame[title]:
                    corrected.append(f"{short_name(graph.name[title])} {graph.frame[title]} -> {prologue}")
                    graph.frame[title] = prologue
    library = [o for o in objects if "libmicroattn.a.p" in o]
    readers = address_taken_functions([o for o in library if is_layers(os.path.basename(o))], graph)
    linear_objects = [o for o in library if is_linear(os.path.basename(o))]
    # The readers' linear() entries (linear_checked<F> and linear_checked_mixed), defined in linear()'s objects.
    reader_linear = address_taken_functions([o for o in library if is_layers(os.path.basename(o))], graph,
                                            defined_in=linear_objects)
    indirect = (address_taken_functions([o for o in library if not is_linear(os.path.basename(o))], graph) - readers,
                address_taken_functions(linear_objects, graph), readers, reader_linear)
    external = disassembly_frames(probe)

    def worst(label, pattern):
        titles = [t for t, n in graph.name.items() if t in graph.frame and re.search(pattern, n)]
        if len(titles) != 1:
            raise ValueError(f"{label}: {len(titles)} matching functions in the call graphs")
        return worst_stack(graph, indirect, external, titles[0])

    results = [(label,) + worst(label, pattern) for label, pattern in ENTRY_POINTS]
    # A layer built from LayerWeights reaches only the fp32 reader; one from LayerWeightMatrices reaches linear()'s
    # kernels (q8 quantizes and sums on the stack). Two figures, two budgets: the layer entry points above count
    # every reader (conservative, what the QEMU cross-check compares with), the ones below the fp32 reader alone.
    every_reader = indirect[2]
    fp32_readers = {t for t in every_reader if re.search(r"_f32\b", short_name(graph.name.get(t, t)))}
    indirect = (indirect[0], indirect[1], fp32_readers, indirect[3])
    layer_results = []
    for label, total, path in results:
        if label.startswith("MultiHeadAttention::"):
            layer_results.append((label + " (weight matrices)", total, path))
    results = [(label,) + worst(label, pattern) if label.startswith("MultiHeadAttention::") else (label, total, path)
               for label, total, path in results for pattern in [dict(ENTRY_POINTS)[label]]]
    results += layer_results
    indirect = (indirect[0], indirect[1], every_reader, indirect[3])
    wrappers = {}
    for m in re.finditer(r"^measured (\w+) (\d+)$", run_on_board(build, probe), re.M):
        wrappers[m.group(1)] = (worst(m.group(1), PROBE_WRAPPER.format(m.group(1)))[0], int(m.group(2)))
    if len(wrappers) != len(ENTRY_POINTS):
        raise ValueError(f"{probe} measured {len(wrappers)} calls, not {len(ENTRY_POINTS)}")
    reached = indirect[0] | indirect[1] | indirect[2] | indirect[3]
    return results, sorted(short_name(graph.name.get(t, t)) for t in reached), corrected, wrappers


def run_on_board(build, program):
    """Output of a program run under QEMU on the board of the build's cross file."""
    with open(os.path.join(build, "meson-private", "cmd_line.txt"), encoding="utf-8") as f:
        cross = re.search(r"cross_file = \['([^']+)'", f.read()).group(1)
    with open(cross, encoding="utf-8") as f:
        board = re.search(r"^board = '([^']+)'", f.read(), re.M).group(1)
    return run("qemu-system-arm", "-M", board, "-nographic", "-monitor", "none", "-serial", "none",
               "-semihosting-config", "enable=on,target=native,arg=" + os.path.basename(program), "-kernel", program)


def reference_layer_ram(probe):
    for line in run(TOOL + "nm", "-S", probe).splitlines():
        f = line.split()
        if len(f) == 4 and f[3] == "_ZN9footprint15reference_layerE":
            return int(f[1], 16), f[2]
    raise ValueError("footprint::reference_layer not found in " + probe)


# ---- report --------------------------------------------------------------------------------------------
class Tee:
    """Writes to stdout and to a results file."""

    def __init__(self, path):
        self.stdout, self.file = sys.stdout, open(path, "w", encoding="utf-8")

    def write(self, text):
        self.stdout.write(text)
        self.file.write(text)

    def flush(self):
        self.stdout.flush()
        self.file.flush()


def main():
    args = sys.argv[1:]
    if args[:1] == ["--results"]:
        sys.stdout = Tee(args[1])
        args = args[2:]
    builds = args or [os.path.join(ROOT, "build-" + t) for t in ("cortex-m4", "cortex-m7", "cortex-m55")]
    failures, summary = [], {}

    def figure(build, key, value, budget_key):
        summary.setdefault((key, budget_key), {})[build] = value
        if value is None or value > budget(build, budget_key):
            failures.append(f"{os.path.basename(build)}: {key} = {value} bytes, budget {budget(build, budget_key)}")

    for build in builds:
        ensure_build(build)
        name = os.path.basename(build)
        print(f"=== {name} (-Os)")
        lib = size_table(os.path.join(build, "libmicroattn.a"))
        print(f"{'libmicroattn.a object':32} {'text':>6} {'data':>6} {'bss':>6}")
        for obj, t, d, b in lib:
            print(f"{obj:32} {t:6} {d:6} {b:6}")
        text, data, bss = (sum(r[i] for r in lib) for i in (1, 2, 3))
        print(f"{'total':32} {text:6} {data:6} {bss:6}")
        linear_text = sum(r[1] for r in lib if LINEAR_OBJECTS.match(r[0]))
        print(f"{'of which linear()':32} {linear_text:6}")
        blocks_text = sum(r[1] for r in lib if BLOCKS_OBJECTS.match(r[0]))
        print(f"{'of which the blocks':32} {blocks_text:6}")
        figure(build, "library text", text - linear_text - blocks_text, "library text")
        figure(build, "linear text", linear_text, "linear text")
        figure(build, "blocks text", blocks_text, "blocks text")
        figure(build, "library data + bss", data + bss, "library data + bss")

        elf = os.path.join(build, "examples", "firmware", "firmware")
        _, ft, fd, fb = size_table(elf)[0]
        linked_text, linked_ram = linked_from_library(os.path.join(build, "examples", "firmware", "firmware.map"))
        print(f"\nfirmware example: text {ft}, data {fd}, bss {fb}; of which libmicroattn: {linked_text} bytes of "
              f"flash (attention + layers as linked), {linked_ram} bytes of static RAM")
        figure(build, "firmware example text", ft, "firmware example text")
        figure(build, "firmware example data", fd, "firmware example data")
        figure(build, "firmware example bss", fb, "firmware example bss")
        figure(build, "libmicroattn in the firmware example, text", linked_text, "firmware example library text")
        leaked = linear_sections(os.path.join(build, "examples", "firmware", "firmware.map"))
        if leaked:
            failures.append(f"{name}: the firmware example (no linear()) links linear()'s objects: " + ", ".join(leaked))

        by_format = linear_text_by_format(build, os.path.join(build, "mcu", "footprint_probe"))
        print("\nlinear() in a firmware that calls it (footprint_probe), text by format: " +
              ", ".join(f"{fmt} {size}" for fmt, size in by_format.items()))
        for fmt, size in by_format.items():
            if fmt != "common":
                figure(build, f"linear {fmt} kernels text", size, f"linear {fmt} kernels text")
        # A firmware calling linear() with f32 weights only (mcu/linear_f32_probe): the format is known at the call,
        # so no f16 or q8 kernel may be linked.
        only_f32 = linear_text_by_format(build, os.path.join(build, "mcu", "linear_f32_probe"))
        print("linear() called with f32 weights only (linear_f32_probe), text by format: " +
              ", ".join(f"{fmt} {size}" for fmt, size in only_f32.items()))
        figure(build, "linear() with f32 weights only: f16 and q8 text", only_f32["f16"] + only_f32["q8"],
               "linear f32 caller, f16 and q8 text")
        blocks_f32 = linear_text_by_format(build, os.path.join(build, "mcu", "block_f32_probe"))
        print("blocks with f32 weights only (block_f32_probe), text by format: " +
              ", ".join(f"{fmt} {size}" for fmt, size in blocks_f32.items()))
        figure(build, "blocks with f32 weights only: f16 and q8 text", blocks_f32["f16"] + blocks_f32["q8"],
               "block f32 caller, f16 and q8 text")

        probe = os.path.join(build, "mcu", "footprint_probe")
        ram, kind = reference_layer_ram(probe)
        print(f"\nMultiHeadAttention<64, 64, 4>: {ram} bytes (nm section type {kind})")
        if kind not in "bB":
            failures.append(f"{name}: a static MultiHeadAttention is in section '{kind}', not .bss")
        figure(build, "MultiHeadAttention<64, 64, 4> RAM", ram, "MultiHeadAttention<64, 64, 4> RAM")

        print("\nworst-case stack per entry point (frames along the deepest call path)")
        try:
            stacks, indirect, corrected, wrappers = stack_report(build, probe)
            print("  indirect calls (detail::Kernels) may reach: " + ", ".join(indirect))
            if corrected:
                print("  frames raised to what the prologue allocates (.su omits spilled arguments): " +
                      ", ".join(corrected))
            for label, total, path in stacks:
                print(f"  {label:28} {total:5}  " + " > ".join(f"{n} {b}" for n, b in path))
                figure(build, f"stack, {label}", total,
                       "stack, linear" if label == "linear" else
                       "stack, layer from weight matrices" if label.endswith("(weight matrices)") else
                       "stack, any entry point")
            print("  cross-check under QEMU, footprint_probe (static worst case >= measured use):")
            for wrapper, (static, measured) in wrappers.items():
                ok = 0 < measured <= static
                print(f"    {wrapper:28} static {static:5}, measured {measured:5}  {'ok' if ok else 'FAILED'}")
                if not ok:
                    failures.append(f"{name}: {wrapper} measured {measured} bytes of stack, static analysis "
                                    f"says at most {static} (0: the call failed)")
        except (ValueError, OSError, subprocess.CalledProcessError) as e:
            failures.append(f"{name}: stack analysis failed: {e}")
        print()

    names = [os.path.basename(b) for b in builds]
    print("| figure (bytes) | " + " | ".join(names) + " | budget |")
    print("|---|" + "---|" * len(names) + "---|")
    for (key, budget_key), values in summary.items():
        cells = [str(values.get(b, "?")) for b in builds]
        limits = list(dict.fromkeys(budget(b, budget_key) for b in builds)) if budget_key else []  # M4, M7 / M55
        text = " / ".join(str(v) for v in limits) if limits else "—"
        print(f"| {key} | " + " | ".join(cells) + f" | {text} |")
    if failures:
        print("\nFOOTPRINT CHECK FAILED:\n  " + "\n  ".join(failures))
        return 1
    print("\nfootprint: every figure within its budget")
    return 0


if __name__ == "__main__":
    sys.exit(main())
