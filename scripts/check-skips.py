#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Lists the skipped tests of a CI run with their reasons; fails on any skip not for want of a GPU.

    scripts/check-skips.py JUNIT.xml [JUNIT.xml ...]

Reads JUnit XML files as ctest (``--output-junit``) and pytest (``--junitxml``) write them. A
GoogleTest case skipped with ``GTEST_SKIP() << reason`` appears in ctest's file as "notrun" with
its output; the reason is the text after gtest's "Skipped" line. A pytest skip carries its
reason in the ``message`` attribute.

The only accepted reason is the absence of a GPU, which every GPU case words the same way: the
reason starts with "no CUDA device". Any other skip (a missing library, a test compiled for the
wrong build, a dataset not found) is a test that did not run although it should have, so it
fails the run. A file with no test case at all fails too (a suite that vanished).

Exit status: 0 when every skip is for want of a GPU, 1 when some other skip was found, 2 when a
file is missing, unreadable or empty.
"""
import collections
import re
import sys
import xml.etree.ElementTree as ET

GPU_REASON = re.compile(r"^no CUDA device\b")


def gtest_reason(output: str) -> str:
    """The message of GTEST_SKIP() in a GoogleTest log: the lines after "<file>:<line>: Skipped"
    up to the "[  SKIPPED ]" line."""
    m = re.search(r": Skipped\n(.*?)\n\[  SKIPPED \]", output, re.S)
    if not m:
        return "(no reason given)"
    return " ".join(line.strip() for line in m.group(1).splitlines() if line.strip()) or \
        "(no reason given)"


def skipped_cases(path: str):
    """(test name, reason) of every skipped case in one JUnit file, and the number of cases."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"check-skips: {path}: cannot read JUnit XML: {e}", file=sys.stderr)
        sys.exit(2)
    cases = list(root.iter("testcase"))
    out = []
    for case in cases:
        name = case.get("name", "?")
        if case.get("classname") and case.get("classname") != name:
            name = f"{case.get('classname')}::{name}"
        skipped = case.find("skipped")
        if case.get("status") == "notrun" or (skipped is not None and
                                              case.get("status") != "disabled"):
            text = case.findtext("system-out") or ""
            if ": Skipped\n" in text:
                reason = gtest_reason(text)
            else:
                reason = (skipped.get("message") if skipped is not None else "") or \
                    "(no reason given)"
            out.append((name, " ".join(reason.split())))
    return out, len(cases)


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    by_reason = collections.defaultdict(list)
    total = 0
    for path in argv[1:]:
        skips, n = skipped_cases(path)
        if n == 0:
            print(f"check-skips: {path}: no test case at all", file=sys.stderr)
            return 2
        total += n
        for name, reason in skips:
            by_reason[reason].append(name)
    n_skips = sum(len(v) for v in by_reason.values())
    bad = {r: v for r, v in by_reason.items() if not GPU_REASON.match(r)}
    print(f"[skips] {n_skips} of {total} tests skipped "
          f"({n_skips - sum(len(v) for v in bad.values())} for want of a GPU)")
    for reason in sorted(by_reason, key=lambda r: (r in bad, -len(by_reason[r]), r)):
        names = by_reason[reason]
        mark = "NOT ACCEPTED" if reason in bad else "no GPU"
        print(f"  {len(names)} x [{mark}] {reason}")
        for name in sorted(names):
            print(f"      {name}")
    if bad:
        print(f"[skips] FAILED: {sum(len(v) for v in bad.values())} tests skipped for a reason "
              "other than the absence of a GPU (the reason must start with 'no CUDA device')",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
