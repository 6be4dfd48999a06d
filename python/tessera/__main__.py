# SPDX-License-Identifier: Apache-2.0
"""``python -m tessera launch --nproc-per-node N [...] -- CMD ...``: the launcher without the C++
command-line tool (the same code: tessera._C.launch)."""
from __future__ import annotations

import argparse
import sys

from . import launch


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] != "launch":
        sys.stderr.write("usage: python -m tessera launch --nproc-per-node N [--nnodes M "
                         "--node-rank R --master-addr H --master-port P] -- CMD ...\n")
        return 2
    argv = argv[1:]
    if "--" in argv:
        i = argv.index("--")
        opts, command = argv[:i], argv[i + 1:]
    else:
        opts, command = argv, []
    p = argparse.ArgumentParser(prog="python -m tessera launch")
    p.add_argument("--nproc-per-node", type=int, default=1)
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument("--node-rank", type=int, default=0)
    p.add_argument("--master-addr", default="127.0.0.1")
    p.add_argument("--master-port", type=int, default=0)
    p.add_argument("--no-prefix", action="store_true", help="do not prefix output with the rank")
    a = p.parse_args(opts)
    if not command:
        p.error("give the command to run after --")
    try:
        return launch(command, a.nproc_per_node, a.nnodes, a.node_rank, a.master_addr,
                      a.master_port, not a.no_prefix)
    except ValueError as e:
        sys.stderr.write(f"tessera launch: {e}\n")
        return 2


if __name__ == "__main__":
    sys.exit(main())
