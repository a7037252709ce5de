#!/usr/bin/python3
"""Plot and tabulate bench_peers results (Google Benchmark JSON, --benchmark_out).

Draws GFLOP/s versus n at d = 64 for every implementation, dense and causal side by side, to a PNG, and
writes a markdown table of the performance issue's shapes: each implementation's GFLOP/s (median over the
repetitions), microattn's % of the FMA peak measured in the same run, the best peer and microattn ÷ best
peer. Uses Debian's python3-matplotlib (Agg backend, no display needed).

Usage: scripts/plot_peers.py RESULTS.json [--png OUT.png] [--markdown OUT.md] [--console RUN.txt]
                             [--title TEXT] [--compact OUT.json]
RESULTS.json: Google Benchmark's JSON, or the compact form written by --compact (the committed results are
compact: bench/results/peers_*.json; the raw output is bench/results/peers_*.raw.json, not committed).
--console: the program's console output, for the FMA peak it measured again at the end (noise check).
--title: the heading (plot and table); ", FMA peak … GFLOP/s" is appended.
"""

import argparse
import json
import re
import statistics
import sys

NAME = re.compile(r"^peers/(?P<impl>[^/]+)/(?P<mode>dense|causal)/n:(?P<n>\d+)/d:(?P<d>\d+)$")
ORDER = ["microattn", "eigen", "openblas", "cblas", "onednn"]
LABEL = {
    "microattn": "microattn",
    "eigen": "Eigen",
    "openblas": "OpenBLAS + softmax_rows",
    "cblas": "CBLAS + softmax_rows",
    "onednn": "oneDNN matmul+softmax",
}
ISSUE_SHAPES = [(16, 32), (64, 64), (128, 64), (256, 64), (512, 64), (256, 128)]


def load(path):
    """Google Benchmark's JSON (--benchmark_out), or the compact form this script writes (--compact)."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    runs, errors = {}, {}
    if "results" in data:  # compact
        for r in data["results"]:
            key = (r["impl"], r["mode"], r["n"], r["d"])
            if r.get("error"):
                errors[key] = r["error"]
            else:
                runs[key] = r["gflops"]
        return data.get("context", {}), runs, errors, data.get("end_peak")
    for b in data.get("benchmarks", []):
        if b.get("run_type", "iteration") != "iteration":
            continue  # aggregates: recomputed here from the repetitions
        m = NAME.match(b.get("run_name", b["name"]))
        if not m:
            continue
        key = (m["impl"], m["mode"], int(m["n"]), int(m["d"]))
        if b.get("error_occurred"):
            errors[key] = b.get("error_message", "error")
            continue
        runs.setdefault(key, []).append(b["GFLOPS"])
    return data.get("context", {}), runs, errors, None


def write_compact(path, context, runs, errors, end_peak):
    """Context, end peak and every repetition's GFLOP/s per benchmark: what the table and plot need, small."""
    results = [
        {"impl": k[0], "mode": k[1], "n": k[2], "d": k[3], "gflops": [round(g, 3) for g in v]}
        for k, v in sorted(runs.items())
    ]
    results += [{"impl": k[0], "mode": k[1], "n": k[2], "d": k[3], "error": e} for k, e in sorted(errors.items())]
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"context": context, "end_peak": end_peak, "results": results}, f, indent=1)
        f.write("\n")


def implementations(runs):
    present = {k[0] for k in runs}
    return [i for i in ORDER if i in present] + sorted(present - set(ORDER))


def median(values):
    return statistics.median(values) if values else None


def spread(values):
    """(max − min) / median of a benchmark's repetitions."""
    return (max(values) - min(values)) / statistics.median(values) if len(values) > 1 else 0.0


def plot(runs, peak, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    impls = implementations(runs)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), sharey=True)
    for ax, mode in zip(axes, ["dense", "causal"]):
        for impl in impls:
            pts = sorted((n, median(v)) for (i, m, n, d), v in runs.items() if i == impl and m == mode and d == 64)
            if not pts:
                continue
            style = dict(linewidth=2.5, marker="o") if impl == "microattn" else dict(linewidth=1.5, marker=".")
            ax.plot([p[0] for p in pts], [p[1] for p in pts], label=LABEL.get(impl, impl), **style)
        if peak == peak:
            ax.axhline(peak, color="grey", linestyle="--", linewidth=1)
            ax.text(16, peak, f" FMA peak {peak:.0f}", va="bottom", color="grey", fontsize=8)
        ax.set_xscale("log", base=2)
        ns = sorted({n for (_, m, n, d) in runs if m == mode and d == 64})
        ax.set_xticks(ns)
        ax.set_xticklabels([str(n) for n in ns])
        ax.minorticks_off()
        ax.set_xlabel("n (queries = keys), d = 64")
        ax.set_title(mode + (" (GFLOP/s counting 4·n²·d, as dense)" if mode == "causal" else ""))
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("GFLOP/s (4·n²·d / time), single thread")
    axes[0].set_ylim(bottom=0)
    axes[0].legend(loc="lower right", fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def fmt(g):
    return "—" if g is None else f"{g:.1f}"


def markdown(context, runs, errors, title, start_peak, end_peak, peak):
    impls = implementations(runs) or ["microattn"]
    peers = [i for i in impls if i != "microattn"]
    out = [f"### {title}", ""]
    reps = max((len(v) for v in runs.values()), default=0)
    peak_note = f"FMA peak measured at start {start_peak:.1f} GFLOP/s"
    if end_peak is not None:
        peak_note += f", at the end {end_peak:.1f} (% of peak against {peak:.1f})"
    out.append(
        f"GFLOP/s counting 4·n²·d for dense and causal alike, single thread, median of {reps} repetition(s); "
        f"{peak_note}. Ratio = microattn ÷ best peer (> 1: microattn is faster)."
    )
    out.append("")
    header = ["n × d", "mode"] + [LABEL.get(i, i) for i in impls] + ["microattn % peak", "best peer", "ratio"]
    out.append("| " + " | ".join(header) + " |")
    out.append("|" + "---|" * len(header))
    shapes = ISSUE_SHAPES + sorted({(n, d) for (_, _, n, d) in runs} - set(ISSUE_SHAPES))
    for n, d in shapes:
        for mode in ["dense", "causal"]:
            g = {i: median(runs.get((i, mode, n, d), [])) for i in impls}
            if all(v is None for v in g.values()):
                continue
            best = max((i for i in peers if g[i] is not None), key=lambda i: g[i], default=None)
            mine = g.get("microattn")
            ratio = f"**{mine / g[best]:.2f}**" if mine is not None and best is not None else "—"
            pct = f"{100 * mine / peak:.0f} %" if mine is not None and peak == peak else "—"
            cells = [f"{n} × {d}", mode] + [fmt(g[i]) for i in impls]
            cells += [pct, LABEL.get(best, best) if best else "—", ratio]
            out.append("| " + " | ".join(cells) + " |")
    out.append("")
    out.append(
        "Causal rows count the dense 4·n²·d, so their rate shows the skipped hidden half (it can pass 100 % of "
        "the peak); the peers' causal variant works in blocks of query rows and skips it too (bench_peers.cpp)."
    )
    out.append("")
    spreads = sorted((spread(v), k) for k, v in runs.items() if len(v) > 1)
    if spreads:
        worst, wk = spreads[-1]
        med = statistics.median(s for s, _ in spreads)
        out.append(
            f"Noise: spread (max − min) / median of the repetitions of one benchmark: median {100 * med:.0f} %, "
            f"worst {100 * worst:.0f} % ({wk[0]} {wk[1]} {wk[2]}×{wk[3]})."
        )
    for (i, m, n, d), msg in sorted(errors.items()):
        out.append(f"- error: {i} {m} {n}×{d}: {msg}")
    keys = ["simd_arch", "eigen", "openblas", "onednn", "peer_block_q"]
    versions = [f"{k}: {context[k]}" for k in keys if k in context]
    if versions:
        out.append("")
        out.append("Run: " + "; ".join(versions) + ".")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json")
    ap.add_argument("--png")
    ap.add_argument("--markdown")
    ap.add_argument("--console")
    ap.add_argument("--title")
    ap.add_argument("--compact")
    a = ap.parse_args()
    context, runs, errors, end_peak = load(a.json)
    if not runs and not errors:
        sys.exit(f"plot_peers.py: no bench_peers results in {a.json}")
    start_peak = float(context.get("fma_peak_gflops", "nan"))
    if a.console:
        with open(a.console, encoding="utf-8") as f:
            m = re.search(r"FMA peak measured again at the end: ([0-9.]+)", f.read())
            end_peak = float(m[1]) if m else None
    # % of peak against the larger of the peaks measured at start and end: this core's clock follows the other
    # core's load on a shared machine, and the best measurement is the peak.
    peak = max(start_peak, end_peak) if end_peak is not None else start_peak
    title = (a.title or f"microattn vs peers, {context.get('simd_arch', '?')} build, single core") + (
        f", FMA peak {peak:.0f} GFLOP/s"
    )
    md = markdown(context, runs, errors, title, start_peak, end_peak, peak)
    sys.stdout.write(md)
    if a.markdown:
        with open(a.markdown, "w", encoding="utf-8") as f:
            f.write(md)
    if a.png:
        plot(runs, peak, a.png, title)
    if a.compact:
        write_compact(a.compact, context, runs, errors, end_peak)


if __name__ == "__main__":
    main()
