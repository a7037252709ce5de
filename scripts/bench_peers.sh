#!/bin/sh
# microattn side by side with Eigen, OpenBLAS and oneDNN (bench/bench_peers.cpp), single thread, pinned to one
# core. For each variant: configure and build its own directory, run the benchmark, keep its JSON
# (bench/results/peers_VARIANT.raw.json, not committed) and console output (.txt) under bench/results/, then
# draw the plot (docs/), write the markdown table (.md) and a compact JSON of every repetition (.json, small
# enough to commit; plot_peers.py redraws from it) with scripts/plot_peers.py.
#
# Usage: scripts/bench_peers.sh [avx512] [avx2]        (default: both)
#   avx512  -Dsimd=avx512 (x86-64-v4) in build-avx512-bench; OpenBLAS forced to its SkylakeX kernels
#           (OPENBLAS_CORETYPE=SkylakeX: OpenBLAS 0.3.21 does not recognise this CPU and would fall back to slow
#           kernels), oneDNN and Eigen at their best (AVX-512).
#   avx2    -Dsimd=avx2 (x86-64-v3) in build-avx2-bench, run natively (it is not emulated); the peers are held
#           to AVX2 as well: OPENBLAS_CORETYPE=Haswell, ONEDNN_MAX_CPU_ISA=AVX2 (oneDNN 2.6 reads the ONEDNN_
#           and the older DNNL_ prefix; the program also caps it through dnnl::set_max_cpu_isa in an AVX2
#           build), Eigen compiled with -march=x86-64-v3 in that build.
# Environment: CPU (core to pin to, default 0), MIN_TIME (seconds per repetition, default 0.2), REPETITIONS
# (default 5; repetitions are interleaved at random across the benchmarks so that a noisy stretch of the
# shared machine hits every implementation alike), BENCH_ARGS (more flags, e.g. --benchmark_filter=n:256).
set -eu
cd "$(dirname "$0")/.."
scripts/deps.sh native peers
command -v taskset >/dev/null || { echo "bench_peers.sh: taskset (util-linux) is needed to pin the run" >&2; exit 1; }

cpu=${CPU:-0}
min_time=${MIN_TIME:-0.2}
repetitions=${REPETITIONS:-5}
mkdir -p bench/results docs

[ $# -gt 0 ] || set -- avx512 avx2
for variant in "$@"; do
  case $variant in
    avx512)
      build=build-avx512-bench simd=avx512 png=docs/attention_vs_peers.png
      isa_env="OPENBLAS_CORETYPE=SkylakeX"
      title_isa="AVX-512 build (x86-64-v4)" ;;
    avx2)
      build=build-avx2-bench simd=avx2 png=docs/attention_vs_peers_avx2.png
      isa_env="OPENBLAS_CORETYPE=Haswell ONEDNN_MAX_CPU_ISA=AVX2 DNNL_MAX_CPU_ISA=AVX2"
      title_isa="AVX2 build (x86-64-v3), peers held to AVX2" ;;
    *) echo "bench_peers.sh: unknown variant '$variant' (avx512, avx2)" >&2; exit 2 ;;
  esac
  [ -f "$build/build.ninja" ] ||
    meson setup "$build" -Dsimd="$simd" -Dbenchmarks=enabled -Dtests=disabled -Dexamples=false
  ninja -C "$build" bench/bench_peers
  json=bench/results/peers_$variant.raw.json
  txt=bench/results/peers_$variant.txt
  echo "== $variant: $isa_env taskset -c $cpu $build/bench/bench_peers"
  # shellcheck disable=SC2086
  env OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $isa_env taskset -c "$cpu" "$build/bench/bench_peers" \
    --benchmark_min_time="$min_time" --benchmark_repetitions="$repetitions" \
    --benchmark_enable_random_interleaving=true --benchmark_display_aggregates_only=true \
    --benchmark_out="$json" --benchmark_out_format=json ${BENCH_ARGS:-} | tee "$txt"
  /usr/bin/python3 scripts/plot_peers.py "$json" --console "$txt" --png "$png" \
    --markdown "bench/results/peers_$variant.md" --compact "bench/results/peers_$variant.json" \
    --title "microattn vs peers, $title_isa, pinned to core $cpu"
done
