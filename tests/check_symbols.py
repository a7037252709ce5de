#!/usr/bin/python3
"""Fails when the library archive references allocation, exception or RTTI machinery.

Usage: check_symbols.py NM LIBRARY.a
A static library lists the external symbols each object needs (nm -u). Any of malloc/free/new/delete,
__cxa_throw/__cxa_allocate_exception, typeinfo (_ZTI*) or __dynamic_cast among them means the library could
allocate, throw or needs RTTI, which firmware built with -fno-exceptions -fno-rtti and no heap cannot take."""
import re
import subprocess
import sys

FORBIDDEN = re.compile(r"^(malloc|calloc|realloc|free|aligned_alloc|posix_memalign|memalign|_Znw\w*|_Zna\w*|"
                       r"_ZdlPv\w*|_ZdaPv\w*|__cxa_throw|__cxa_allocate_exception|__cxa_begin_catch|"
                       r"__gxx_personality_v0|_ZTI\w*|_ZTS\w*|__dynamic_cast|_Unwind_Resume)$")


def main():
    nm, lib = sys.argv[1], sys.argv[2]
    out = subprocess.run([nm, "-u", lib], check=True, capture_output=True, text=True).stdout
    obj, bad = "?", []
    for line in out.splitlines():
        line = line.strip()
        if line.endswith(":"):
            obj = line[:-1]
            continue
        sym = line.split()[-1] if line else ""
        if FORBIDDEN.match(sym):
            bad.append(f"{obj}: {sym}")
    if bad:
        print("forbidden symbols referenced by the library:\n  " + "\n  ".join(bad))
        return 1
    print(f"{lib}: no allocation, exception or RTTI symbols referenced")
    return 0


if __name__ == "__main__":
    sys.exit(main())
