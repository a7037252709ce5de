#!/bin/sh
# Quick start, step 2 (and what CI runs): install what is missing, then build and run the test suite on the
# host and on every cross target in cross/ (under QEMU where the host cannot run it). docs/testing.md lists what
# each target costs on 2 cores.
#   scripts/test.sh              everything
#   scripts/test.sh native       the host build only (GCC, -Werror): the check to run before a commit
#   scripts/test.sh asan clang   the host suite under AddressSanitizer + UBSan; built with Clang, -Werror
#   scripts/test.sh fuzz         the libFuzzer targets, 60 s each (scripts/fuzz.sh)
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
# Each target's time goes to build-times.txt (target, seconds, result), and the summary prints them.
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
targets=${*:-"native asan clang fuzz $linux_targets arm-bench $mcu_targets footprint mcu-bench cmake subproject fresh"}

groups_of() {  # target -> the package groups of scripts/packages.txt it needs
  case $1 in
    native | asan) echo native ;;
    clang | fuzz) echo native checks ;;
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
    asan)
      # GCC's use-after-scope instrumentation of the xsimd kernels (src/kernels/simd.cpp) is most of this build's
      # time; Clang's, on by default in the fuzz build, keeps that check.
      run_suite build-asan -Db_sanitize=address,undefined \
        "-Dcpp_args=-fno-sanitize-recover=all -fno-sanitize-address-use-after-scope" \
        -Dc_args=-fno-sanitize-recover=all \
        -Dbuildtype=debugoptimized -Dbenchmarks=disabled ;;
    clang)
      if [ -f build-clang/build.ninja ]; then
        run_suite build-clang -Dwerror=true -Dbenchmarks=disabled
      else
        CC=clang CXX=clang++ run_suite build-clang -Dwerror=true -Dbenchmarks=disabled
      fi ;;
    footprint) /usr/bin/python3 scripts/footprint.py build-cortex-m4 build-cortex-m7 build-cortex-m55 ;;
    mcu-bench) scripts/mcu_bench.sh --check ;;
    fuzz) scripts/fuzz.sh 60 ;;
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

times=build-times.txt
: >"$times"
passed=0
failed=0
skipped=0
failures=""
start=$(date +%s)
for t in $targets; do
  echo "=== $t"
  reason=$(skip_reason "$t")
  if [ -n "$reason" ]; then
    if [ "$strict" = 1 ]; then
      echo "=== $t: FAILED: $reason (a skip fails under MICROATTN_TEST_STRICT=1 / CI)" >&2
      failed=$((failed + 1)); failures="$failures $t"
      echo "$t 0 failed" >>"$times"
    else
      echo "=== $t: skipped: $reason"
      skipped=$((skipped + 1))
      echo "$t 0 skipped" >>"$times"
    fi
    continue
  fi
  t0=$(date +%s)
  (set -e; run_target "$t")
  rc=$?
  secs=$(($(date +%s) - t0))
  if [ $rc -eq 77 ]; then  # the target found at run time that this machine cannot run it (said why above)
    echo "=== $t: skipped after $secs s"
    skipped=$((skipped + 1)); echo "$t $secs skipped" >>"$times"
    [ "$strict" = 1 ] && { failed=$((failed + 1)); failures="$failures $t"; }
  elif [ $rc -eq 0 ]; then
    echo "=== $t: passed in $secs s"
    passed=$((passed + 1)); echo "$t $secs passed" >>"$times"
  else
    echo "=== $t: FAILED after $secs s" >&2
    failed=$((failed + 1)); failures="$failures $t"; echo "$t $secs failed" >>"$times"
  fi
done
total=$(($(date +%s) - start))
echo "total $total all" >>"$times"

echo "=== time per target ($times)"
awk '{ printf "  %-22s %6d s  %s\n", $1, $2, $3 }' "$times"
if [ "$clean" = 1 ]; then
  rm -rf build build-*  # every tree the targets make (git ignores /build*/)
  echo "build trees removed (--clean)"
fi
[ -z "$failures" ] || echo "failed:$failures" >&2
echo "targets: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
