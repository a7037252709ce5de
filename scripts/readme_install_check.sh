#!/bin/sh
# The README's "library alone" commands as written (scripts/test.sh fresh runs this on a new Debian root): its sh
# block run in this checkout with HOME in a temporary folder, app.cpp the demo; then, with the variables it
# exports, a C program through pkg-config and a CMake project through find_package. Needs cmake (scripts/deps.sh
# cmake).
set -eu
cd "$(dirname "$0")/.."
root=$(pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp" "$root/build-lib" "$root/app.cpp" "$root/app"' EXIT
[ ! -e build-lib ] && [ ! -e app.cpp ] && [ ! -e app ] ||
  { echo "readme_install_check: build-lib, app.cpp or app exists here; run it in a clean checkout" >&2; exit 1; }
/usr/bin/python3 - README.md >"$tmp/install.sh" <<'PY'
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
m = re.search(r"\*\*The library alone\*\*.*?```sh\n(.*?)```", text, re.S)
sys.exit("README.md: no sh block after 'The library alone'") if m is None else print(m.group(1), end="")
PY
cp examples/demo.cpp app.cpp
mkdir -p "$tmp/home"
cat >>"$tmp/install.sh" <<EOF2
./app
cc -std=c99 tests/subproject/app.c \$(pkg-config --cflags --libs microattn) -o "$tmp/app_c"
"$tmp/app_c"
cmake -S tests/cmake -B "$tmp/cmake" -DMICROATTN_FROM=package >"$tmp/cmake.log"
cmake --build "$tmp/cmake" >>"$tmp/cmake.log"
"$tmp/cmake/firmware_c"
"$tmp/cmake/firmware_cpp"
EOF2
echo "=== readme install: the README's commands"
cat "$tmp/install.sh"
HOME="$tmp/home" sh -eu "$tmp/install.sh" >"$tmp/log" 2>&1 || { cat "$tmp/log" >&2; echo "readme_install_check: failed" >&2; exit 1; }
grep -q "microattn" "$tmp/home/.local/lib/pkgconfig/microattn.pc"
echo "readme install: built, installed, linked with pkg-config (C++, C) and find_package, ran"
