#!/bin/sh
# Builds llama2.c's run.c and runq.c as its `runomp` target does, without OpenMP (one core): -Ofast -march=native,
# into build-peers/ (git-ignored, outside the product), for examples/llama's LlamaPeers test and the benchmark.
#   scripts/llama_peers.sh [SOURCE]          build; SOURCE: a llama2.c checkout, or a bare/mirror git directory
#                                            (default: build-peers/llama2.c, cloned from GitHub when absent)
#   scripts/llama_peers.sh bench BUILD [N] [STEPS]
#                                            tokens/s of llama_run against run.c (v0) and runq.c (v2) on the
#                                            checkpoints the Meson build generated (BUILD/examples/llama), pinned
#                                            to core 1, N alternating runs each (default 11) of -t 0 -n STEPS (256)
set -eu
cd "$(dirname "$0")/.."
out=build-peers
mkdir -p "$out"

if [ "${1:-}" = bench ]; then
  build=${2:?build directory}
  runs=${3:-11}
  steps=${4:-256}
  dir=$build/examples/llama
  ours=$dir/llama_run
  [ -x "$out/run" ] && [ -x "$out/runq" ] || { echo "llama_peers.sh: build the peers first" >&2; exit 2; }
  # Each program's own "achieved tok/s" (run.c's clock counts milliseconds: a 256-token run of this shape takes
  # about 10 ms, so single runs are coarse; the medians over the alternating runs are compared).
  tps() { taskset -c 1 "$@" -t 0 -n "$steps" 2>&1 >/dev/null | sed -n 's/^achieved tok\/s: *//p'; }
  median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
  echo "llama_peers.sh bench: -t 0 -n $steps, $runs alternating runs each, taskset -c 1, $(date -u +%Y-%m-%d)"
  for model in ${LLAMA_BENCH_MODELS:-s260k s260k-g4}; do
    for version in v0 v2; do
      peer=$out/run
      [ $version = v2 ] && peer=$out/runq
      ckpt=$dir/$model-$version.bin
      tok=$dir/$model-tok.bin
      [ -f "$ckpt" ] || continue
      a_all=""
      b_all=""
      i=0
      while [ $i -lt "$runs" ]; do
        a_all="$a_all $(tps "$ours" "$ckpt" -z "$tok")"
        b_all="$b_all $(tps "$peer" "$ckpt" -z "$tok")"
        i=$((i + 1))
      done
      a=$(echo "$a_all" | median)
      b=$(echo "$b_all" | median)
      echo "$model-$version: llama_run median $a tok/s, $(basename "$peer") median $b tok/s, ratio $(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", a / b }')"
      echo "  llama_run:$a_all"
      echo "  $(basename "$peer"):$b_all"
    done
  done
  exit 0
fi

src=${1:-$out/llama2.c}
if [ ! -e "$src" ]; then
  git clone --depth 1 https://github.com/karpathy/llama2.c "$src"
fi
for f in run.c runq.c; do
  if [ -f "$src/$f" ]; then
    cp "$src/$f" "$out/$f"
  else
    git --git-dir="$src" show "HEAD:$f" >"$out/$f"
  fi
done
cc=${CC:-gcc}
"$cc" -Ofast -march=native -o "$out/run" "$out/run.c" -lm
"$cc" -Ofast -march=native -o "$out/runq" "$out/runq.c" -lm
echo "llama_peers.sh: built $out/run and $out/runq ($("$cc" --version | head -1))"
