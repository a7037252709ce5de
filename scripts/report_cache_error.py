#!/usr/bin/python3
"""Error of the f16 and q8 K/V cache on real PyTorch modules: seeded torch.nn.MultiheadAttention modules (a few
shapes), a causal self-attention forward through microattn::MultiHeadAttention with an f32, an f16 and a q8 cache
(tools/cache_error_driver.cpp, compiled here against the build's library), and the error of each against our f32
cache and against torch in float64. Prints a table (bench/results/cache_error.txt holds one).

Usage: scripts/report_cache_error.py [--build-dir build] [--seeds 3]
Needs python3-torch (Debian) and a built library (build/libmicroattn.a)."""
import argparse
import os
import subprocess
import sys
import tempfile

try:
    import torch
except ImportError:
    sys.exit("report_cache_error.py needs PyTorch: apt install python3-torch (run with /usr/bin/python3)")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# (driver shape index, sequence length, model dim, heads): the driver's compiled shapes.
SHAPES = [(0, 128, 64, 4), (1, 256, 128, 8), (2, 512, 256, 8), (3, 256, 64, 1)]


def build_driver(build_dir, out):
    lib = os.path.join(build_dir, "libmicroattn.a")
    if not os.path.exists(lib):
        sys.exit(f"no {lib}: build the library first (meson setup {build_dir} && ninja -C {build_dir})")
    cmd = [os.environ.get("CXX", "c++"), "-std=c++17", "-O2", "-I", os.path.join(ROOT, "include"),
           os.path.join(ROOT, "tools", "cache_error_driver.cpp"), lib, "-o", out]
    subprocess.run(cmd, check=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        driver = os.path.join(tmp, "cache_error_driver")
        build_driver(args.build_dir, driver)
        print("Causal self-attention forward, torch.nn.MultiheadAttention weights (default init), x ~ N(0, 1).")
        print("Errors relative to max|y| of the reference, over every output element; worst of the seeds.")
        print(f"{'n':>5} {'d':>4} {'heads':>5} {'cache':>5} | {'vs our f32: max':>15} {'rms':>9} | "
              f"{'vs torch fp64: max':>18} {'rms':>9}")
        for index, n, d, heads in SHAPES:
            worst = {}
            for seed in range(args.seeds):
                torch.manual_seed(seed)
                mha = torch.nn.MultiheadAttention(d, heads, batch_first=True)
                with torch.no_grad():  # non-zero biases, as trained modules have
                    mha.in_proj_bias.uniform_(-0.1, 0.1)
                    mha.out_proj.bias.uniform_(-0.1, 0.1)
                x = torch.randn(1, n, d)
                blob = torch.cat([mha.in_proj_weight.detach().flatten(), mha.in_proj_bias.detach().flatten(),
                                  mha.out_proj.weight.detach().flatten(), mha.out_proj.bias.detach().flatten(),
                                  x.flatten()]).numpy().astype("<f4").tobytes()
                r = subprocess.run([driver, str(index)], input=blob, capture_output=True, check=True)
                ys = torch.frombuffer(bytearray(r.stdout), dtype=torch.float32).reshape(3, n, d).double()
                mask = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
                m64 = mha.double()
                with torch.no_grad():
                    ref, _ = m64(x.double(), x.double(), x.double(), attn_mask=mask, need_weights=False)
                ref = ref[0]
                for k, name in enumerate(["f32", "f16", "q8"]):
                    e_ours = (ys[k] - ys[0]).abs()
                    e_torch = (ys[k] - ref).abs()
                    scale_ours, scale_torch = ys[0].abs().max().item(), ref.abs().max().item()
                    row = (e_ours.max().item() / scale_ours, e_ours.pow(2).mean().sqrt().item() / scale_ours,
                           e_torch.max().item() / scale_torch, e_torch.pow(2).mean().sqrt().item() / scale_torch)
                    worst[name] = tuple(max(a, b) for a, b in zip(worst.get(name, (0, 0, 0, 0)), row))
            for name in ["f32", "f16", "q8"]:
                a, b, c, e = worst[name]
                print(f"{n:>5} {d:>4} {heads:>5} {name:>5} | {a:>15.2e} {b:>9.2e} | {c:>18.2e} {e:>9.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
