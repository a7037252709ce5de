#!/bin/sh
# microattn as a Meson subproject of a parent project (tests/subproject), what a firmware team gets
# (scripts/test.sh subproject): in build-subproject/, the parent is copied, subprojects/microattn comes from this
# checkout through docs/microattn.wrap as written (its url pointed at a git copy of this checkout's files, as a user
# points it at a mirror), and it is built
#   1. natively, parent at Meson's default build type (debug, -O0): only the library is built from microattn (no
#      tests, benchmarks, peers, examples), compiled -O3 all the same, and the parent's C program runs;
#   2. with the parent's own Cortex-M4 cross file (no mcu_board property): configures and builds.
set -eu
cd "$(dirname "$0")/.."
root=$(pwd)
out=build-subproject
rm -rf "$out"
mkdir -p "$out/parent/subprojects"
cp tests/subproject/meson.build tests/subproject/app.c tests/subproject/cortex-m4-user.ini "$out/parent/"
# The wrap file as documented, with the url a user would set: a git repository of this checkout's files (tracked,
# as they are in the work tree, so uncommitted changes are tested too).
mkdir -p "$out/mirror"
if git rev-parse --git-dir >/dev/null 2>&1; then
  git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$out/mirror"
else  # a copy without .git (scripts/fresh_check.sh): everything but build trees
  tar --exclude='./build*' --exclude=./.git -cf - . | tar -xf - -C "$out/mirror"
fi
git -C "$out/mirror" init -q -b main
git -C "$out/mirror" add -A
git -C "$out/mirror" -c user.name=check -c user.email=check@localhost commit -q -m mirror
sed "s|^url = .*|url = file://$root/$out/mirror|" docs/microattn.wrap >"$out/parent/subprojects/microattn.wrap"
grep -q "^url = file://" "$out/parent/subprojects/microattn.wrap" ||
  { echo "subproject_check: docs/microattn.wrap has no 'url = ' line" >&2; exit 1; }

echo "=== subproject: native, debug parent"
meson setup "$out/native" "$out/parent" >"$out/native.log"
targets=$(meson introspect --targets "$out/native" | /usr/bin/python3 -c '
import json, sys
print(" ".join(sorted(t["name"] for t in json.load(sys.stdin) if t["subproject"] == "microattn")))')
echo "microattn targets: $targets"
# microattn_portable: the objects of cpu_supported(), compiled without the arch flags, part of libmicroattn.a
[ "$targets" = "microattn microattn_portable" ] || { echo "subproject_check: microattn builds more than its library" >&2; exit 1; }
/usr/bin/python3 - "$out/native/compile_commands.json" <<'PY'
import json, sys
cmds = [c["command"] for c in json.load(open(sys.argv[1])) if c["file"].endswith("src/attention.cpp")]
assert cmds, "attention.cpp is not compiled"
last = [a for a in cmds[0].split() if a.startswith("-O")][-1:]
print("src/attention.cpp compiled with", last)
sys.exit(0 if last == ["-O3"] else "subproject_check: the library is not optimized in a debug parent")
PY
ninja -C "$out/native" >"$out/native-build.log"
meson test -C "$out/native" --print-errorlogs
"$out/native/app"

echo "=== subproject: the parent's own Cortex-M4 cross file"
meson setup "$out/cortex-m4" "$out/parent" --cross-file "$out/parent/cortex-m4-user.ini" >"$out/cortex-m4.log"
ninja -C "$out/cortex-m4" >"$out/cortex-m4-build.log"
grep -q -- "-mcpu=cortex-m4.*app.c" "$out/cortex-m4-build.log" || ninja -C "$out/cortex-m4" -t commands |
  grep -q -- "-mcpu=cortex-m4.*app.c"
echo "=== subproject: all passed"
