#!/usr/bin/python3
"""Runs every command README.md and docs/*.md tell a user to type, as written, in the order given, after the quick
start (scripts/test.sh docs; scripts/fresh_check.sh runs it on a new Debian root).

Every ```sh block runs, README.md first, then docs/*.md by name, each with `sh -eu` at the checkout's root, HOME in
a folder of its own. HTML comments on the lines right above a block steer it:
  <!-- doc-check: skip: REASON -->     not run here (REASON says where it is checked instead)
  <!-- doc-check: before: COMMAND -->  run first: what the block takes as given (a user's own file, say)
  <!-- doc-check: after: COMMAND -->   run afterwards, in the same shell: a check of what the block made (the
                                       block's output so far is in the file $DOC_CHECK_LOG)
The checkout is a copy of the tracked files in build-docs/checkout (with --in-place, the current folder: for a
throwaway root), where scripts/demo.sh runs first, as the quick start does.
  scripts/docs_check.py [--in-place] [--list] [--only FILE]
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FENCE = re.compile(r"^```(\w*)\s*$")
MARK = re.compile(r"^<!--\s*doc-check:\s*(skip|before|after):\s*(.*?)\s*-->\s*$")


def blocks(path):
    """(line, language, text, marks) for every fenced block of a markdown file."""
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, lang = i, m.group(1)
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        marks = []
        k = start - 1
        while k >= 0 and MARK.match(lines[k]):
            marks.insert(0, MARK.match(lines[k]).groups())
            k -= 1
        if k >= 0 and lines[k].lstrip().startswith("<!--") and "doc-check" in lines[k]:
            sys.exit(f"{path}:{k + 1}: a doc-check comment this script cannot read: {lines[k]}")
        yield start + 1, lang, "\n".join(lines[start + 1:j]) + "\n", marks
        i = j + 1


def documents(root):
    return [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))


def copy_checkout(dest):
    if os.path.exists(dest):
        shutil.rmtree(dest)
    os.makedirs(dest)
    try:
        listed = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]  # new files too
        files = subprocess.run(listed, cwd=ROOT, check=True, capture_output=True).stdout
        names = [n for n in files.decode().split("\0") if n and os.path.lexists(os.path.join(ROOT, n))]
    except (OSError, subprocess.CalledProcessError):  # no git (a fresh root): everything but build trees
        names = []
        for d, subdirs, fs in os.walk(ROOT):
            subdirs[:] = [s for s in subdirs if not (d == ROOT and (s.startswith("build") or s == ".git"))]
            names += [os.path.relpath(os.path.join(d, f), ROOT) for f in fs]
    for n in names:
        os.makedirs(os.path.dirname(os.path.join(dest, n)) or dest, exist_ok=True)
        shutil.copy2(os.path.join(ROOT, n), os.path.join(dest, n), follow_symlinks=False)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--in-place", action="store_true", help="run in this checkout (a throwaway root)")
    ap.add_argument("--list", action="store_true", help="list the blocks and what is done with each, run nothing")
    ap.add_argument("--only", help="only the blocks of this document (README.md, docs/llama.md, ...)")
    args = ap.parse_args()

    work = os.path.join(ROOT, "build-docs")
    checkout = ROOT if args.in_place else os.path.join(work, "checkout")
    todo = []
    for doc in documents(ROOT):
        rel = os.path.relpath(doc, ROOT)
        if args.only and rel != args.only:
            continue
        for line, lang, text, marks in blocks(doc):
            if lang != "sh":
                if any(marks):
                    sys.exit(f"{rel}:{line}: doc-check comments above a {lang or 'plain'} block")
                continue
            skip = [v for k, v in marks if k == "skip"]
            if skip and not skip[0]:
                sys.exit(f"{rel}:{line}: a skip needs its reason")
            todo.append((rel, line, text, marks, skip[0] if skip else None))
    if args.list:
        for rel, line, text, marks, skip in todo:
            print(f"{rel}:{line}: {'skip: ' + skip if skip else 'run'}")
        return 0

    os.makedirs(work, exist_ok=True)
    if not args.in_place:
        print("=== docs: a copy of the checkout in", os.path.relpath(checkout, ROOT))
        copy_checkout(checkout)
    home = os.path.join(work, "home")
    shutil.rmtree(home, ignore_errors=True)
    os.makedirs(home)
    env = dict(os.environ, HOME=home)
    env.pop("PKG_CONFIG_PATH", None)
    env.pop("CMAKE_PREFIX_PATH", None)

    def run(what, script):
        print(f"=== docs: {what}", flush=True)
        t0 = time.time()
        log = os.path.join(work, "last.log")
        with open(log, "w", encoding="utf-8") as out:
            rc = subprocess.run(["sh", "-eux", "-c", script], cwd=checkout, env=dict(env, DOC_CHECK_LOG=log),
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL).returncode
        text = open(log, encoding="utf-8", errors="replace").read()
        if rc != 0:
            sys.stderr.write(text[-6000:])
            print(f"docs_check: {what} failed (exit status {rc}); the commands:\n{script}", file=sys.stderr)
            sys.exit(1)
        print(f"    ok in {time.time() - t0:.0f} s")

    if not os.path.exists(os.path.join(checkout, "build", "examples", "demo")):
        run("quick start: scripts/demo.sh", "scripts/demo.sh")
    skipped = 0
    for rel, line, text, marks, skip in todo:
        if skip:
            print(f"=== docs: {rel}:{line}: skipped: {skip}")
            skipped += 1
            continue
        script = "".join(v + "\n" for k, v in marks if k == "before") + text + \
                 "".join(v + "\n" for k, v in marks if k == "after")
        run(f"{rel}:{line}", script)
    print(f"docs: {len(todo) - skipped} blocks ran as written, {skipped} checked elsewhere (skip lines above)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
