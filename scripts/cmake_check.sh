#!/bin/sh
# The CMake integration, as a firmware team would use it (scripts/test.sh cmake): builds the consumer project
# tests/cmake (the firmware examples, C and C++) and runs its programs
#   1. natively, with microattn in-tree (add_subdirectory), Debug build type and no build type (the library stays
#      optimized in both);
#   2. natively, with find_package(microattn CONFIG) from a `meson install` prefix;
#   3. for Cortex-M4 with cmake/toolchains/cortex-m4.cmake (scalar kernels), in-tree, under qemu-system-arm.
# It also checks that CMake and Meson compile the same library sources (both read sources.txt).
# Build directories: build-cmake/ (removed first).
set -eu
cd "$(dirname "$0")/.."
root=$(pwd)
out=build-cmake
rm -rf "$out"
mkdir -p "$out"
jobs=${MICROATTN_JOBS:-2}

run_native() {  # build dir
  for p in firmware_c firmware_cpp; do
    echo "--- $1/$p"
    "$1/$p"
  done
}

echo "=== cmake: in-tree (add_subdirectory), Debug"
cmake -S tests/cmake -B "$out/native" -DCMAKE_BUILD_TYPE=Debug -DMICROATTN_FROM=subdirectory >"$out/native.log"
cmake --build "$out/native" -j "$jobs" -- VERBOSE=1 >>"$out/native.log"
# The library is compiled optimized in a Debug build (MICROATTN_OPTIMIZE), the consumer's own code is not.
grep -q -- "-g .*-O3 .*src/attention.cpp" "$out/native.log" ||
  { echo "cmake_check: the library was not compiled -O3 in a Debug build" >&2; exit 1; }
# The arch flags reach the kernels, not the CPU check (it must run on any CPU), and the parent sees the choice.
grep -q -- "-march=native .*src/kernels/attention/simd.cpp" "$out/native.log" &&
  ! grep -q -- "-march=native .*src/cpu_check.cpp" "$out/native.log" ||
  { echo "cmake_check: src/cpu_check.cpp must be compiled without the arch flags, the kernels with them" >&2; exit 1; }
grep -q "microattn_SIMD=native microattn_SIMD_FLAGS=-march=native microattn_SIMD_FEATURES=.*sse2" "$out/native.log" ||
  { echo "cmake_check: add_subdirectory() does not set microattn_SIMD, _FLAGS and _FEATURES" >&2; exit 1; }
run_native "$out/native"

echo "=== cmake: in-tree, no build type (CMake's default)"
cmake -S tests/cmake -B "$out/default" -DMICROATTN_FROM=subdirectory >"$out/default.log"
cmake --build "$out/default" -j "$jobs" --target microattn -- VERBOSE=1 >>"$out/default.log"
grep -q -- "-O3 .*src/attention.cpp" "$out/default.log" ||
  { echo "cmake_check: the library was not compiled -O3 without a build type" >&2; exit 1; }
echo "library compiled -O3"

echo "=== cmake: find_package(microattn CONFIG) after meson install"
meson setup "$out/meson" --prefix "$root/$out/prefix" --libdir lib -Dtests=disabled -Dbenchmarks=disabled \
  -Dexamples=false >"$out/meson.log"
meson install -C "$out/meson" >>"$out/meson.log"
test -f "$out/prefix/lib/cmake/microattn/microattnConfig.cmake"
test -f "$out/prefix/lib/cmake/microattn/microattnConfigVersion.cmake"
if grep -q '^Requires' "$out/prefix/lib/pkgconfig/microattn.pc"; then
  echo "cmake_check: microattn.pc requires a package (no public header includes xsimd)" >&2
  exit 1
fi
# The instruction set the library was built for, as pkg-config variables (the setup above leaves -Dsimd=native).
pc_var() { PKG_CONFIG_PATH="$root/$out/prefix/lib/pkgconfig" pkg-config --variable="$1" microattn; }
[ "$(pc_var simd)" = native ] && [ "$(pc_var simd_flags)" = -march=native ] &&
  pc_var simd_features | grep -qw sse2 ||
  { echo "cmake_check: microattn.pc records simd='$(pc_var simd)' simd_flags='$(pc_var simd_flags)'" \
      "simd_features='$(pc_var simd_features)'" >&2; exit 1; }
echo "microattn.pc: simd=$(pc_var simd), simd_features=$(pc_var simd_features)"
# pkg-config alone, as a Makefile would use it: the C firmware example from the installed prefix.
PKG_CONFIG_PATH="$root/$out/prefix/lib/pkgconfig" cc -std=c99 -o "$out/firmware_c_pkgconfig" \
  examples/firmware/main.c $(PKG_CONFIG_PATH="$root/$out/prefix/lib/pkgconfig" pkg-config --cflags --libs microattn)
echo "--- $out/firmware_c_pkgconfig"
"$out/firmware_c_pkgconfig"
cmake -S tests/cmake -B "$out/package" -DMICROATTN_FROM=package -DCMAKE_PREFIX_PATH="$root/$out/prefix" \
  >"$out/package.log"
cmake --build "$out/package" -j "$jobs" >>"$out/package.log"
grep -q "microattn_SIMD=native microattn_SIMD_FLAGS=-march=native microattn_SIMD_FEATURES=.*sse2" "$out/package.log" ||
  { echo "cmake_check: find_package(microattn) does not set microattn_SIMD, _FLAGS and _FEATURES" >&2; exit 1; }
run_native "$out/package"

echo "=== cmake: one source list"
# The library sources of a CMake and a Meson build of the same rule: the native builds above, and a scalar
# configuration of each (configured only).
cmake_sources() {  # CMake build dir of microattn
  grep -o 'src/[a-z0-9_/]*\.cpp\.o' "$1/CMakeFiles/microattn.dir/build.make" | sed 's/\.o$//' | sort -u  # digits: linear/x86.cpp
}
meson_sources() {  # Meson build dir
  meson introspect --targets "$1" | /usr/bin/python3 -c '
import json, os, sys
for t in json.load(sys.stdin):
    if t["name"] in ("microattn", "microattn_portable"):  # the portable objects go into libmicroattn.a
        for s in t["target_sources"]:
            for f in s["sources"]:
                print(os.path.relpath(f, sys.argv[1]))' "$root" | sort -u
}
same_sources() {  # what, cmake list, meson list
  if [ "$2" != "$3" ]; then
    printf 'cmake_check: CMake and Meson compile different sources (%s):\ncmake: %s\nmeson: %s\n' "$1" "$2" "$3" >&2
    exit 1
  fi
  echo "$1: $(echo "$2" | wc -l) sources, the same in both"
}
same_sources native "$(cmake_sources "$out/native/microattn")" "$(meson_sources "$out/meson")"
cmake -S . -B "$out/scalar" -DMICROATTN_SIMD=scalar >"$out/scalar.log"
meson setup "$out/meson-scalar" -Dsimd=scalar -Dtests=disabled -Dbenchmarks=disabled -Dexamples=false \
  >"$out/meson-scalar.log"
same_sources scalar "$(cmake_sources "$out/scalar")" "$(meson_sources "$out/meson-scalar")"

echo "=== cmake: Cortex-M4 (toolchain file), under qemu-system-arm"
cmake -S tests/cmake -B "$out/cortex-m4" -DCMAKE_TOOLCHAIN_FILE="$root/cmake/toolchains/cortex-m4.cmake" \
  -DCMAKE_BUILD_TYPE=MinSizeRel -DMICROATTN_MCU_BOARD=mps2-an386 >"$out/cortex-m4.log"
grep -q "microattn: kernels native -> scalar" "$out/cortex-m4.log" ||
  { echo "cmake_check: Cortex-M4 did not select the scalar kernels" >&2; exit 1; }
cmake --build "$out/cortex-m4" -j "$jobs" >>"$out/cortex-m4.log"
for p in firmware_c firmware_cpp; do
  echo "--- $out/cortex-m4/$p (qemu-system-arm -M mps2-an386)"
  timeout 120 qemu-system-arm -M mps2-an386 -nographic -monitor none -serial none \
    -semihosting-config "enable=on,target=native,arg=$p" -kernel "$out/cortex-m4/$p"
done
echo "=== cmake: all passed"
