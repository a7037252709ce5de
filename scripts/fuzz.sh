#!/bin/sh
# The sanitized Clang tree (build-clang: ASan + UBSan with no recovery, libFuzzer's coverage instrumentation,
# -Werror, -O1 -g as the sanitizers' documentation advises) holds the test suite and the libFuzzer targets of
# tests/fuzz over one library. This script builds it, runs the fuzz targets' Meson tests (each seed corpus once,
# and the planted-discrepancy checks), then fuzzes each target for a bounded time starting from its seed corpus
# (MICROATTN_JOBS targets at a time, default one per core), and prints how many executions each did.
#   scripts/fuzz.sh                      60 s per target
#   scripts/fuzz.sh 10                   10 s per target
#   scripts/fuzz.sh 30 attention layers  only those targets (matmul softmax attention layers decode llama)
#   scripts/fuzz.sh --tree               only set up and build the tree (scripts/test.sh clang, then its tests)
# Exits non-zero if a test or a target fails. A failing input is saved as build-clang/fuzz-artifacts/<target>-crash-*;
# rerun it with build-clang/tests/fuzz/fuzz_<target> FILE. Inputs that found new coverage accumulate in
# build-clang/fuzz-corpus/<target>/ (reused by the next run; the committed seeds stay as they are).
set -eu
cd "$(dirname "$0")/.."

dir=build-clang
opts="-Dwerror=true -Db_sanitize=address,undefined -Dfuzz=true -Doptimization=1 -Ddebug=true -Dbenchmarks=disabled
  -Dcpp_args=-fno-sanitize-recover=all -Dc_args=-fno-sanitize-recover=all"
if [ -f "$dir/build.ninja" ]; then
  # shellcheck disable=SC2086
  meson configure "$dir" $opts
else
  # shellcheck disable=SC2086
  CC=clang CXX=clang++ meson setup "$dir" $opts
fi
ninja -C "$dir"
[ "${1:-}" = --tree ] && exit 0

seconds=${1:-60}
[ $# -gt 0 ] && shift
targets=${*:-"matmul softmax attention layers decode llama"}

status=0
meson test -C "$dir" --suite fuzz --print-errorlogs || status=1

mkdir -p "$dir/fuzz-artifacts" "$dir/fuzz-logs"
# The targets run MICROATTN_JOBS at a time (default: the number of cores), each for the whole time on a core of its
# own: the executions each gets are those of a run alone, in a fraction of the wall-clock time.
jobs=${MICROATTN_JOBS:-$(nproc 2>/dev/null || echo 1)}
fuzz_one() {  # target: fuzz it, then print its line (and what failed)
  t=$1
  mkdir -p "$dir/fuzz-corpus/$t"
  log="$dir/fuzz-logs/$t.log"
  if "$dir/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=60 -print_final_stats=1 \
    -artifact_prefix="$dir/fuzz-artifacts/$t-" "$dir/fuzz-corpus/$t" "tests/fuzz/corpus/$t" >"$log" 2>&1; then
    result=ok
  else
    result=FAILED
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  echo "fuzz_$t: ${execs:-?} executions in $seconds s: $result"
  if [ "$result" = FAILED ]; then
    grep -A2 -E 'FUZZ CHECK FAILED|ERROR: (AddressSanitizer|libFuzzer)|runtime error|SUMMARY|Test unit written' "$log" |
      head -40 >&2 || true
    echo "    (full log: $log)" >&2
    return 1
  fi
}
for t in $targets; do
  [ -d "tests/fuzz/corpus/$t" ] || { echo "fuzz.sh: no target '$t'" >&2; exit 2; }
done
pids=""
running=0
for t in $targets; do
  fuzz_one "$t" &
  pids="$pids $!"
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    for p in $pids; do wait "$p" || status=1; done
    pids=""
    running=0
  fi
done
for p in $pids; do wait "$p" || status=1; done
exit $status
