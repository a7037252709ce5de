#!/bin/sh
# Quick start, step 2 (and what CI runs): install what is missing, then build and run the test suite on the
# host and on every cross target in cross/ (under QEMU where the host cannot run it).
#   scripts/test.sh              everything
#   scripts/test.sh native       the host build only
#   scripts/test.sh TARGET...    cross targets by cross-file name, e.g. aarch64-linux-gnu or cortex-m4
#   scripts/test.sh footprint    the Cortex-M4/M7 flash, RAM and stack figures against their budgets
set -eu
cd "$(dirname "$0")/.."

linux_targets="aarch64-linux-gnu arm-linux-gnueabihf i686-linux-gnu x86_64-v3 x86_64-v4"
mcu_targets="cortex-m4 cortex-m7 cortex-m55"
targets=${*:-"native $linux_targets $mcu_targets footprint"}

groups=native
for t in $targets; do
  case $t in
    native) ;;
    cortex-m* | footprint) groups="$groups mcu" ;;
    *) groups="$groups cross" ;;
  esac
done
# shellcheck disable=SC2086
scripts/deps.sh $(printf '%s\n' $groups | sort -u)

run_suite() {  # build dir, meson setup arguments...
  dir=$1
  shift
  echo "=== $dir"
  [ -f "$dir/build.ninja" ] || meson setup "$dir" "$@"
  ninja -C "$dir"
  meson test -C "$dir" --print-errorlogs
}

for t in $targets; do
  case $t in
    native) run_suite build ;;
    footprint)
      echo "=== footprint"
      /usr/bin/python3 scripts/footprint.py build-cortex-m4 build-cortex-m7 ;;
    *)
      [ -f "cross/$t.ini" ] || { echo "test.sh: no cross/$t.ini" >&2; exit 2; }
      run_suite "build-$t" --cross-file "cross/$t.ini" -Dbenchmarks=disabled ;;
  esac
done
echo "=== all suites passed: $targets"
