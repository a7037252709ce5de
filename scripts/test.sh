#!/bin/sh
# Quick start, step 2 (and what CI runs): install what is missing, then build and run the test suite on the
# host and on every cross target in cross/ (under QEMU where the host cannot run it).
#   scripts/test.sh              everything
#   scripts/test.sh native       the host build only (GCC, -Werror)
#   scripts/test.sh asan clang   the host suite under AddressSanitizer + UBSan; built with Clang, -Werror
#   scripts/test.sh fuzz         the libFuzzer targets, 60 s each (scripts/fuzz.sh)
#   scripts/test.sh TARGET...    cross targets by cross-file name, e.g. aarch64-linux-gnu or cortex-m4
#   scripts/test.sh footprint    the Cortex-M4/M7/M55 flash, RAM and stack figures against their budgets
#   scripts/test.sh mcu-bench    the Cortex-M instruction counts under QEMU against their budgets (+2 % at most)
#   scripts/test.sh arm-bench    AArch64/ARMv7 instruction counts (microattn vs Eigen) against their budgets
#   scripts/test.sh cmake        CMake consumers: in-tree, find_package after meson install, Cortex-M4 under QEMU
#   scripts/test.sh subproject   a parent Meson project using microattn as a subproject (native, own M4 cross file)
#   scripts/test.sh fresh        the demo and native, cmake, subproject in a new Debian 12 root (scripts/fresh_check.sh)
set -eu
cd "$(dirname "$0")/.."

linux_targets="aarch64-linux-gnu arm-linux-gnueabihf i686-linux-gnu x86_64-v3 x86_64-v4"
mcu_targets="cortex-m4 cortex-m7 cortex-m55"
targets=${*:-"native asan clang fuzz $linux_targets arm-bench $mcu_targets footprint mcu-bench cmake subproject fresh"}

groups=native
for t in $targets; do
  case $t in
    native | asan) ;;
    clang | fuzz) groups="$groups checks" ;;
    cortex-m* | footprint | mcu-bench) groups="$groups mcu" ;;
    arm-bench) groups="$groups cross peers" ;;
    cmake) groups="$groups cmake mcu" ;;
    subproject) groups="$groups mcu" ;;
    fresh) groups="$groups fresh" ;;
    *) groups="$groups cross" ;;
  esac
done
# shellcheck disable=SC2086
scripts/deps.sh $(printf '%s\n' $groups | sort -u)

run_suite() {  # build dir, meson setup arguments...
  dir=$1
  shift
  echo "=== $dir"
  if [ -f "$dir/build.ninja" ]; then
    opts=""  # an existing build dir keeps its cross file; re-apply the -D options only
    for a in "$@"; do
      case $a in -D*) opts="$opts $a" ;; esac
    done
    # shellcheck disable=SC2086
    meson configure "$dir" $opts
  else
    meson setup "$dir" "$@"
  fi
  ninja -C "$dir"
  meson test -C "$dir" --print-errorlogs
}

for t in $targets; do
  case $t in
    native) run_suite build -Dwerror=true ;;
    asan)
      run_suite build-asan -Db_sanitize=address,undefined -Dcpp_args=-fno-sanitize-recover=all \
        -Dc_args=-fno-sanitize-recover=all \
        -Dbuildtype=debugoptimized -Dbenchmarks=disabled ;;
    clang)
      [ -f build-clang/build.ninja ] || export CC=clang CXX=clang++
      run_suite build-clang -Dwerror=true -Dbenchmarks=disabled
      unset CC CXX ;;
    footprint)
      echo "=== footprint"
      /usr/bin/python3 scripts/footprint.py build-cortex-m4 build-cortex-m7 build-cortex-m55 ;;
    mcu-bench)
      echo "=== mcu-bench"
      scripts/mcu_bench.sh --check ;;
    fuzz) scripts/fuzz.sh 60 ;;
    arm-bench)
      echo "=== arm-bench"
      scripts/arm_bench.sh --check ;;
    cmake) scripts/cmake_check.sh ;;
    subproject) scripts/subproject_check.sh ;;
    fresh) scripts/fresh_check.sh ;;
    *)
      [ -f "cross/$t.ini" ] || { echo "test.sh: no cross/$t.ini" >&2; exit 2; }
      run_suite "build-$t" --cross-file "cross/$t.ini" -Dbenchmarks=disabled ;;
  esac
done
echo "=== all suites passed: $targets"
