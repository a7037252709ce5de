#!/bin/sh
# Quick start, step 2 (and what CI runs): install what is missing, build, run the whole test suite.
set -eu
cd "$(dirname "$0")/.."
scripts/deps.sh native
[ -f build/build.ninja ] || meson setup build
ninja -C build
meson test -C build --print-errorlogs
