#!/usr/bin/python3
"""Compile-time misuse of the fixed-size layer templates must be rejected by a static_assert with a clear
message. Each tests/compile_fail/*.cpp says on its first line either
  // expect-error: <text>   (must NOT compile, and the compiler output must contain <text>)
  // expect: compiles        (the control case: must compile, proving the harness itself can tell)
Usage: check_compile_fail.py INCLUDE_DIR FILE... -- COMPILER [ARGS...]"""
import re
import subprocess
import sys


def unescape_octal(text):
    """Clang prints the non-ASCII bytes of a static_assert message as octal escapes (\\302\\267 for '·')."""
    return re.sub(r"(?:\\[0-7]{3})+",
                  lambda m: bytes(int(o, 8) for o in m.group(0).split("\\")[1:]).decode("utf-8", "replace"), text)


def main():
    sep = sys.argv.index("--")
    include, files, compiler = sys.argv[1], sys.argv[2:sep], sys.argv[sep + 1:]
    failures = 0
    for path in files:
        first = open(path, encoding="utf-8").readline()
        expect_error = first.startswith("// expect-error:")
        message = first.split(":", 1)[1].strip() if expect_error else ""
        proc = subprocess.run(compiler + ["-std=c++17", "-fsyntax-only", "-I", include, path],
                              capture_output=True, text=True)
        out = unescape_octal(proc.stdout + proc.stderr)
        if expect_error and proc.returncode == 0:
            print(f"FAIL {path}: compiled, but should be rejected with '{message}'")
            failures += 1
        elif expect_error and message not in out:
            print(f"FAIL {path}: rejected, but without the message '{message}':\n{out[:2000]}")
            failures += 1
        elif not expect_error and proc.returncode != 0:
            print(f"FAIL {path}: the control case does not compile:\n{out[:2000]}")
            failures += 1
        else:
            print(f"ok   {path}: " + (f"rejected with '{message}'" if expect_error else "compiles"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
