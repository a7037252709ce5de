#!/bin/sh
# Builds llama2.c's run.c and runq.c as its `runomp` target does, without OpenMP (one core): -Ofast -march=native,
# into build-peers/ (git-ignored, outside the product), for examples/llama's LlamaPeers test and the benchmark.
#   scripts/llama_peers.sh [SOURCE]          build; SOURCE: a llama2.c checkout, or a bare/mirror git directory
#                                            (default: build-peers/llama2.c, cloned from GitHub when absent)
#   scripts/llama_peers.sh bench-cpu BUILD [N] [STEPS]
#                                            the same pairs by CPU time (perf stat's task-clock, so a shared, loaded
#                                            machine's waits do not count) of the tokens after the first: time at
#                                            -n STEPS − time at -n 1, N alternating rounds of perf stat -r 5 each;
#                                            the greedy texts are the same, so both programs run the same tokens
#                                            (fewer than STEPS where the text ends, at BOS)
#   scripts/llama_peers.sh bench BUILD [N] [STEPS]
#                                            tokens/s of llama_run against run.c (v0) and runq.c (v2) on the
#                                            checkpoints the Meson build generated (BUILD/examples/llama), pinned
#                                            to core 1, N alternating runs each (default 11) of -t 0 -n STEPS (256)
#   scripts/llama_peers.sh bench15m BUILD [N] [STEPS]
#                                            the stories15M shape (dim 288, 6 layers, 6 heads, hidden 768, vocab
#                                            32000, seq 256; random weights, written to build-peers/ once): tok/s of
#                                            llama_run v0, llama_run v0 -w f16, run.c, llama_run v2, runq.c, and the
#                                            read bandwidth over the v0 file's mapping (bench/read_bandwidth.c), N
#                                            alternating rounds (default 7)
set -eu
cd "$(dirname "$0")/.."
out=build-peers
mkdir -p "$out"

if [ "${1:-}" = bench15m ]; then
  build=${2:?build directory}
  runs=${3:-7}
  steps=${4:-256}
  ours=$build/examples/llama/llama_run
  [ -x "$out/run" ] && [ -x "$out/runq" ] || { echo "llama_peers.sh: build the peers first" >&2; exit 2; }
  m=$out/s15m
  [ -f "$m-v2.bin" ] || /usr/bin/python3 scripts/make_llama_checkpoint.py "$m" --dim 288 --hidden 768 --layers 6 \
    --heads 6 --kv-heads 6 --vocab 32000 --seq 256 --seed 5
  ${CC:-gcc} -O2 -march=native -o "$out/read_bandwidth" bench/read_bandwidth.c
  tps() { taskset -c 1 "$@" -z "$m-tok.bin" -t 0 -n "$steps" 2>&1 >/dev/null | sed -n 's/^achieved tok\/s: *//p'; }
  median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
  v0="" f16="" run="" v2="" runq="" bw=""
  i=0
  while [ $i -lt "$runs" ]; do
    v0="$v0 $(tps "$ours" "$m-v0.bin")"
    f16="$f16 $(tps "$ours" "$m-v0.bin" -w f16)"
    run="$run $(tps "$out/run" "$m-v0.bin")"
    v2="$v2 $(tps "$ours" "$m-v2.bin")"
    runq="$runq $(tps "$out/runq" "$m-v2.bin")"
    bw="$bw $(taskset -c 1 "$out/read_bandwidth" "$m-v0.bin" 5 | sed -n 's/^read bandwidth: \([0-9.]*\) GB.*/\1/p')"
    i=$((i + 1))
  done
  bytes=$(stat -c %s "$m-v0.bin")
  echo "llama_peers.sh bench15m: -t 0 -n $steps, $runs alternating rounds, taskset -c 1, $(date -u +%Y-%m-%d)"
  for name in v0 f16 run v2 runq bw; do eval "echo \"  $name:\$$name\""; done
  a=$(echo "$v0" | median) h=$(echo "$f16" | median) r=$(echo "$run" | median) q=$(echo "$v2" | median)
  rq=$(echo "$runq" | median) b=$(echo "$bw" | median)
  awk -v a="$a" -v h="$h" -v r="$r" -v q="$q" -v rq="$rq" -v b="$b" -v n="$bytes" 'BEGIN {
    printf "s15m-v0: llama_run %.1f tok/s, run %.1f, ratio %.2f; %.1f GB/s read = %.2f of the %.1f GB/s bandwidth\n", a, r, a / r, a * n / 1e9, a * n / 1e9 / b, b
    printf "s15m-v0 -w f16: llama_run %.1f tok/s, ratio to run %.2f\n", h, h / r
    printf "s15m-v2: llama_run %.1f tok/s, runq %.1f, ratio %.2f\n", q, rq, q / rq }'
  exit 0
fi

if [ "${1:-}" = bench ] || [ "${1:-}" = bench-cpu ]; then
  mode=$1
  build=${2:?build directory}
  runs=${3:-11}
  steps=${4:-256}
  dir=$build/examples/llama
  ours=$dir/llama_run
  [ -x "$out/run" ] && [ -x "$out/runq" ] || { echo "llama_peers.sh: build the peers first" >&2; exit 2; }
  if [ "$mode" = bench-cpu ]; then
    command -v perf >/dev/null || { echo "llama_peers.sh: bench-cpu needs perf" >&2; exit 2; }
    msec() { perf stat -x, -e task-clock -r 5 taskset -c 1 "$@" 2>&1 >/dev/null | sed -n 's/^\([0-9.]*\),msec,task-clock.*/\1/p'; }
    # CPU milliseconds of the tokens after the first (figure), smaller is faster
    figure() {
      a=$(msec "$@" -t 0 -n "$steps")
      b=$(msec "$@" -t 0 -n 1)
      awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", a - b }'
    }
    unit=ms
    what="alternating rounds of perf stat -r 5"
  else
    # Each program's own "achieved tok/s" (run.c's clock counts milliseconds: a 256-token run of this shape takes
    # about 10 ms, so single runs are coarse; the medians over the alternating runs are compared); larger is faster.
    figure() { taskset -c 1 "$@" -t 0 -n "$steps" 2>&1 >/dev/null | sed -n 's/^achieved tok\/s: *//p'; }
    unit=tok/s
    what="alternating runs each"
  fi
  median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
  echo "llama_peers.sh $mode: -t 0 -n $steps, $runs $what, taskset -c 1, $(date -u +%Y-%m-%d)"
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
        a_all="$a_all $(figure "$ours" "$ckpt" -z "$tok")"
        b_all="$b_all $(figure "$peer" "$ckpt" -z "$tok")"
        i=$((i + 1))
      done
      a=$(echo "$a_all" | median)
      b=$(echo "$b_all" | median)
      if [ "$mode" = bench-cpu ]; then
        ratio=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", b / a }')
        echo "$model-$version: llama_run median $a $unit, $(basename "$peer") median $b $unit, speed ratio $ratio"
      else
        ratio=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", a / b }')
        echo "$model-$version: llama_run median $a $unit, $(basename "$peer") median $b $unit, ratio $ratio"
      fi
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
