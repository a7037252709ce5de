#!/bin/sh
# Quick start, step 1: install what is missing, configure, build, run the demo.
set -eu
cd "$(dirname "$0")/.."
scripts/deps.sh native
[ -f build/build.ninja ] || meson setup build
ninja -C build
./build/examples/demo
