#!/bin/sh
# Quick start, step 1: install what is missing, configure, build the library and the demo (nothing else), run it.
set -eu
cd "$(dirname "$0")/.."
scripts/deps.sh native
[ -f build/build.ninja ] || meson setup build
ninja -C build examples/demo
./build/examples/demo
