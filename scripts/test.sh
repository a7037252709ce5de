#!/bin/sh
# Quick start, step 2 (and what CI runs): install what is missing, then build and run the test suite on the
# host and on every cross target in cross/ (under QEMU where the host cannot run it). docs/testing.md lists what
# each target costs on 2 cores.
#   scripts/test.sh              everything
#   scripts/test.sh native       the host build only (GCC, -Werror): the check to run before a commit
#   scripts/test.sh clang        the host suite built with Clang, -Werror, under AddressSanitizer + UBSan (asan: the same)
#   scripts/test.sh fuzz         the libFuzzer targets of that tree, 30 s each (scripts/fuzz.sh: 60 s by default)
#   scripts/test.sh TARGET...    cross targets by cross-file name, e.g. aarch64-linux-gnu or cortex-m4
#   scripts/test.sh footprint    the Cortex-M4/M7/M55 flash, RAM and stack figures against their budgets
#   scripts/test.sh mcu-bench    the Cortex-M instruction counts under QEMU against their budgets (+2 % at most)
#   scripts/test.sh arm-bench    AArch64/ARMv7 instruction counts (microattn vs Eigen) against their budgets
#   scripts/test.sh cmake        CMake consumers: in-tree, find_package after meson install, Cortex-M4 under QEMU
#   scripts/test.sh subproject   a parent Meson project using microattn as a subproject (native, own M4 cross file)
#   scripts/test.sh docs         every command README.md and docs/ tell a user to type, as written (build-docs/)
#   scripts/test.sh fresh        the quick start and the documented commands in a new Debian 12 root
# Options (before the targets):
#   --clean   remove the build trees when the run ends (they take about 3 GB after a whole run)
# A target whose packages cannot be installed (no root, no sudo, no network) or that needs root is skipped with
# one line saying why, and counted in the summary; with MICROATTN_TEST_STRICT=1 (set when CI=true) a skip fails.
# Each target's time goes to build-times.txt (target, seconds, result, CPU seconds), and the summary prints them.
set -u
cd "$(dirname "$0")/.."

clean=0
while [ $# -gt 0 ]; do
  case $1 in
    --clean) clean=1; shift ;;
    --) shift; break ;;
    -*) echo "test.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
strict=${MICROATTN_TEST_STRICT:-0}
[ "${CI:-}" = true ] && strict=1

linux_targets="aarch64-linux-gnu arm-linux-gnueabihf i686-linux-gnu x86_64-v3 x86_64-v4"
mcu_targets="cortex-m4 cortex-m7 cortex-m55"
targets=${*:-"native clang fuzz $linux_targets arm-bench $mcu_targets footprint mcu-bench cmake subproject fresh"}
# fresh runs the subproject suite in its new root (its packages installed from nothing): with root, the whole run
# leaves it to fresh (and runs it alone if fresh is skipped after all).
sub_in_fresh=0
if [ "$(id -u)" -eq 0 ] && [ -z "${MICROATTN_FRESH_SUITES+set}" ] && echo " $targets " | grep -q " fresh " &&
  echo " $targets " | grep -q " subproject "; then
  sub_in_fresh=1
  targets=$(echo " $targets " | sed 's/ subproject / /; s/^ *//; s/ *$//')
fi

groups_of() {  # target -> the package groups of scripts/packages.txt it needs
  case $1 in
    native) echo native ;;
    asan | clang | fuzz) echo native checks ;;
    cortex-m* | footprint | mcu-bench) echo native mcu ;;
    subproject) echo native mcu subproject ;;
    arm-bench) echo native cross peers ;;
    cmake) echo native cmake mcu ;;
    docs) echo native cmake mcu ;;
    fresh) echo fresh ;;
    *) echo native cross ;;
  esac
}

run_suite() {  # build dir, meson setup arguments...
  dir=$1
  shift
  if [ -f "$dir/build.ninja" ]; then
    opts=""  # an existing build dir keeps its cross file; re-apply the -D options only
    for a in "$@"; do
      case $a in -D*) opts="$opts $a" ;; esac
    done
    # shellcheck disable=SC2086
    meson configure "$dir" $opts || return 1
  else
    meson setup "$dir" "$@" || return 1
  fi
  b0=$(date +%s)
  ninja -C "$dir" || return 1
  b1=$(date +%s)
  meson test -C "$dir" --print-errorlogs || return 1
  echo "$dir: built in $((b1 - b0)) s, tests ran in $(($(date +%s) - b1)) s"
}

run_target() {  # target
  case $1 in
    native) run_suite build -Dwerror=true ;;
    # the fuzz targets' own tests run in the fuzz target (scripts/fuzz.sh)
    asan | clang) scripts/fuzz.sh --tree && meson test -C build-clang --no-suite fuzz --print-errorlogs ;;
    footprint) /usr/bin/python3 scripts/footprint.py build-cortex-m4 build-cortex-m7 build-cortex-m55 ;;
    mcu-bench) scripts/mcu_bench.sh --check ;;
    fuzz) scripts/fuzz.sh 30 ;;
    arm-bench) scripts/arm_bench.sh --check ;;
    cmake) scripts/cmake_check.sh ;;
    subproject) scripts/subproject_check.sh ;;
    docs) /usr/bin/python3 scripts/docs_check.py ;;
    fresh) scripts/fresh_check.sh ;;
    *)
      [ -f "cross/$1.ini" ] || { echo "test.sh: no cross/$1.ini" >&2; return 2; }
      run_suite "build-$1" --cross-file "cross/$1.ini" -Dbenchmarks=disabled ;;
  esac
}

skip_reason() {  # target -> prints why it cannot run here (nothing: it can)
  if [ "$1" = fresh ] && [ "$(id -u)" -ne 0 ]; then
    echo "needs root (debootstrap and chroot make the new Debian root)"
    return
  fi
  # shellcheck disable=SC2046
  if ! out=$(scripts/deps.sh $(groups_of "$1") 2>&1); then
    echo "its packages could not be installed: $(echo "$out" | tail -n 1)"
    return
  fi
  [ -z "$out" ] || echo "$out" >&2
}

cpu_now() {  # cpu = user + system seconds of this shell's finished children (`times`, second line; not in a subshell)
  times >"$times.cpu"
  cpu=$(awk 'NR == 2 { split($1, u, "m"); split($2, s, "m"); printf "%d", u[1] * 60 + u[2] + s[1] * 60 + s[2] }' \
    "$times.cpu")
}

times=build-times.txt
: >"$times"
passed=0
failed=0
skipped=0
failures=""
start=$(date +%s)
cpu_now
cpu_start=$cpu
run_one() {  # target: run it (or skip it), count it and record its times
  t=$1
  echo "=== $t"
  reason=$(skip_reason "$t")
  if [ -n "$reason" ]; then
    [ "$t" = fresh ] && fresh_skipped=1
    if [ "$strict" = 1 ]; then
      echo "=== $t: FAILED: $reason (a skip fails under MICROATTN_TEST_STRICT=1 / CI)" >&2
      failed=$((failed + 1)); failures="$failures $t"
      echo "$t 0 failed 0" >>"$times"
    else
      echo "=== $t: skipped: $reason"
      skipped=$((skipped + 1))
      echo "$t 0 skipped 0" >>"$times"
    fi
    return
  fi
  t0=$(date +%s)
  cpu_now
  c0=$cpu
  (set -e; run_target "$t")
  rc=$?
  secs=$(($(date +%s) - t0))
  cpu_now
  cpu=$((cpu - c0))
  if [ $rc -eq 77 ]; then  # the target found at run time that this machine cannot run it (said why above)
    [ "$t" = fresh ] && fresh_skipped=1
    echo "=== $t: skipped after $secs s"
    skipped=$((skipped + 1)); echo "$t $secs skipped $cpu" >>"$times"
    [ "$strict" = 1 ] && { failed=$((failed + 1)); failures="$failures $t"; }
  elif [ $rc -eq 0 ]; then
    echo "=== $t: passed in $secs s"
    passed=$((passed + 1)); echo "$t $secs passed $cpu" >>"$times"
  else
    echo "=== $t: FAILED after $secs s" >&2
    failed=$((failed + 1)); failures="$failures $t"; echo "$t $secs failed $cpu" >>"$times"
  fi
}

fresh_skipped=0
for t in $targets; do
  run_one "$t"
done
# the subproject suite was left to fresh, which did not run
[ "$sub_in_fresh" = 1 ] && [ "$fresh_skipped" = 1 ] && run_one subproject
total=$(($(date +%s) - start))
cpu_now
echo "total $total all $((cpu - cpu_start))" >>"$times"
rm -f "$times.cpu"

echo "=== time per target ($times): wall-clock and CPU (user + system) seconds"
awk '{ printf "  %-22s %6d s %6d s CPU  %s\n", $1, $2, $4, $3 }' "$times"
if [ "$clean" = 1 ]; then
  rm -rf build build-*  # every tree the targets make (git ignores /build*/)
  echo "build trees removed (--clean)"
fi
[ -z "$failures" ] || echo "failed:$failures" >&2
echo "targets: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
