#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""clang-format and clang-tidy on the C++ files changed since a base commit.

    scripts/lint.py BUILD_DIR            (BUILD_DIR holds compile_commands.json)
    TESSERA_LINT_BASE=<commit> scripts/lint.py BUILD_DIR

Base: $TESSERA_LINT_BASE, else the merge base of HEAD with main (origin/main first), else, when
HEAD is main itself, the previous commit. Changed files are those that differ between the base
and the working tree (committed or not).

* clang-format: every changed .cpp/.hpp/.h/.cu/.cuh file must be formatted as .clang-format says
  (whole files: the repository is formatted).
* clang-tidy: the checks of .clang-tidy, as errors, on the changed lines of the changed C++
  files (new code is kept clean; older code is not rewritten for it). Each changed .cpp in
  compile_commands.json is analysed; a changed header through one translation unit that
  includes it. CUDA sources (.cu, .cuh) are left to nvcc: their compile commands are not
  clang's.

Exit status: 0 clean, 1 findings, 2 a tool or the base is missing.
"""
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys

FORMAT_EXT = (".cpp", ".cc", ".hpp", ".h", ".cu", ".cuh")
TIDY_SOURCE_EXT = (".cpp", ".cc")
TIDY_HEADER_EXT = (".hpp", ".h")


def git(*args):
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout


def rev(ref):
    r = subprocess.run(["git", "rev-parse", "--verify", "-q", ref + "^{commit}"],
                       capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else ""


def find_base():
    if os.environ.get("TESSERA_LINT_BASE"):
        base = rev(os.environ["TESSERA_LINT_BASE"])
        if not base:
            sys.exit(f"lint: TESSERA_LINT_BASE={os.environ['TESSERA_LINT_BASE']} is no commit")
        return base, "TESSERA_LINT_BASE"
    head = rev("HEAD")
    for ref in ("origin/main", "main"):
        if rev(ref):
            mb = git("merge-base", "HEAD", ref).strip()
            if mb and mb != head:
                return mb, f"merge base with {ref}"
            break
    prev = rev("HEAD~1")
    return prev, "previous commit"


def changed_lines(base, files):
    """{file: [[first, last], ...]} of the lines added or changed since `base`."""
    out = {}
    cur = None
    wanted = set(files)
    # The whole diff with rename detection: limited to the new paths, git would see a moved
    # file as added and every line of it as changed.
    for line in git("diff", "-U0", "-M", "--no-color", base).splitlines():
        if line.startswith("+++ "):
            cur = line[6:] if line.startswith("+++ b/") and line[6:] in wanted else None
        elif line.startswith("@@") and cur:
            m = re.match(r"@@ -\S+ \+(\d+)(?:,(\d+))? @@", line)
            start, count = int(m.group(1)), int(m.group(2) or "1")
            if count:
                out.setdefault(cur, []).append([start, start + count - 1])
    return out


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    build = argv[1]
    os.chdir(git("rev-parse", "--show-toplevel").strip())
    for tool in ("clang-format", "clang-tidy"):
        if not shutil.which(tool):
            print(f"lint: {tool} not found (scripts/setup.sh installs it)", file=sys.stderr)
            return 2
    base, why = find_base()
    if not base:
        shallow = git("rev-parse", "--is-shallow-repository").strip() == "true"
        print("lint: no base commit to compare with (" +
              ("a shallow clone: fetch more history" if shallow else "a repository of one commit") +
              ", or set TESSERA_LINT_BASE)", file=sys.stderr)
        return 2
    files = [f for f in git("diff", "--name-only", "--diff-filter=ACMR", base).splitlines()
             if f.endswith(FORMAT_EXT) and os.path.isfile(f)]
    print(f"[lint] {len(files)} changed C++/CUDA files since {base[:10]} ({why})")
    failed = False

    bad = []
    for f in files:
        r = subprocess.run(["clang-format", "--dry-run", "--Werror", f], capture_output=True,
                           text=True)
        if r.returncode != 0:
            bad.append(f)
            sys.stderr.write(r.stderr)
    if bad:
        failed = True
        print(f"[lint] clang-format: {len(bad)} files not formatted (clang-format -i "
              f"{' '.join(bad)})", file=sys.stderr)
    else:
        print(f"[lint] clang-format: {len(files)} files formatted")

    db_path = os.path.join(build, "compile_commands.json")
    if not os.path.exists(db_path):
        print(f"lint: {db_path} missing (configure the build first)", file=sys.stderr)
        return 2
    with open(db_path) as fh:
        db = {os.path.realpath(e["file"]) for e in json.load(fh)}
    tidy_files = [f for f in files if f.endswith(TIDY_SOURCE_EXT + TIDY_HEADER_EXT)]
    lines = changed_lines(base, tidy_files) if tidy_files else {}
    units = sorted(f for f in lines if f.endswith(TIDY_SOURCE_EXT) and os.path.realpath(f) in db)
    for h in sorted(f for f in lines if f.endswith(TIDY_HEADER_EXT)):
        name = re.escape(os.path.basename(h))
        inc = re.compile(r'#include\s+["<](?:[\w./]*/)?' + name + r'[">]')
        if any(inc.search(open(u, errors="replace").read()) for u in units):
            continue
        for tu in sorted(db):
            if tu.endswith(TIDY_SOURCE_EXT) and inc.search(open(tu, errors="replace").read()):
                units.append(os.path.relpath(tu))
                break
    line_filter = json.dumps([{"name": f, "lines": r} for f, r in lines.items()])

    def tidy(unit):
        # The line filter limits findings to changed lines, so every header of the repository
        # may report (the .clang-tidy header filter would hide tests/ and python/ headers).
        cmd = ["clang-tidy", "-p", build, "--quiet", "--header-filter=.*",
               "--warnings-as-errors=*", f"--line-filter={line_filter}", unit]
        r = subprocess.run(cmd, capture_output=True, text=True)
        return unit, r.returncode, r.stdout + r.stderr

    jobs = max(1, min(len(units), int(os.environ.get("TESSERA_LINT_JOBS", os.cpu_count() or 1))))
    tidy_bad = []
    with concurrent.futures.ThreadPoolExecutor(jobs) as ex:
        for unit, rc, out in ex.map(tidy, units):
            if rc != 0:
                tidy_bad.append(unit)
                print(out.rstrip(), file=sys.stderr)
    if tidy_bad:
        failed = True
        print(f"[lint] clang-tidy: findings on changed lines in {len(tidy_bad)} of {len(units)} "
              f"translation units: {' '.join(tidy_bad)}", file=sys.stderr)
    else:
        print(f"[lint] clang-tidy: changed lines of {len(units)} translation units clean")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
