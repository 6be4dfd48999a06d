#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks (or adds) the SPDX license line of every source file git tracks.

    scripts/spdx.py          # list the files without it; exit 1 if any
    scripts/spdx.py --fix    # add it where it is missing

Source files: C++ and CUDA (.cpp .cc .h .hpp .cu .cuh), Python (.py), CMake (CMakeLists.txt,
.cmake) and shell (.sh, and files whose first line is a bash or sh shebang). The line is
`// SPDX-License-Identifier: Apache-2.0` in C++ and CUDA, `# SPDX-License-Identifier:
Apache-2.0` elsewhere; it must be among the first lines (after a shebang and a coding line,
which stay first). Files under data/ are datasets, not sources.
"""
import pathlib
import re
import subprocess
import sys

LICENSE = "Apache-2.0"
SLASH = (".cpp", ".cc", ".h", ".hpp", ".cu", ".cuh")
HASH = (".py", ".cmake", ".sh")
SKIP_DIRS = ("data/",)
LOOK = 5  # the line must be among the first LOOK lines
ROOT = pathlib.Path(__file__).resolve().parent.parent


def comment_of(path: pathlib.Path, first_line: str):
    """The comment prefix of a source file ("//" or "#"), or None for a file that is not one."""
    name = path.name
    if name.endswith(SLASH):
        return "//"
    if name.endswith(HASH) or name == "CMakeLists.txt":
        return "#"
    if "." not in name and re.match(r"#!\s*/\S*(bash|/sh)\b|#!\s*/usr/bin/env (bash|sh)\b",
                                    first_line):
        return "#"
    return None


def sources():
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    for rel in sorted(f for f in out.split("\0") if f):
        if rel.startswith(SKIP_DIRS):
            continue
        path = ROOT / rel
        if not path.is_file() or path.is_symlink():
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        prefix = comment_of(path, text.split("\n", 1)[0])
        if prefix:
            yield rel, path, text, prefix


def has_line(text: str) -> bool:
    return any(f"SPDX-License-Identifier: {LICENSE}" in line
               for line in text.splitlines()[:LOOK])


def with_line(text: str, prefix: str) -> str:
    """`text` with the SPDX line after its shebang and coding line, if any."""
    lines = text.splitlines(keepends=True)
    at = 0
    if lines and lines[0].startswith("#!"):
        at = 1
    if len(lines) > at and re.match(r"#.*coding[:=]", lines[at]):
        at += 1
    return "".join(lines[:at] + [f"{prefix} SPDX-License-Identifier: {LICENSE}\n"] + lines[at:])


def main(argv):
    fix = "--fix" in argv[1:]
    if any(a not in ("--fix",) for a in argv[1:]):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    missing = []
    for rel, path, text, prefix in sources():
        if has_line(text):
            continue
        missing.append(rel)
        if fix:
            path.write_text(with_line(text, prefix))
    if fix:
        print(f"spdx: added the license line to {len(missing)} file(s)")
        return 0
    for rel in missing:
        print(f"spdx: {rel}: no '{'//' if rel.endswith(SLASH) else '#'} SPDX-License-Identifier: "
              f"{LICENSE}' line (scripts/spdx.py --fix adds it)", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
