# SPDX-License-Identifier: Apache-2.0
"""``python -m tessera launch --nproc-per-node N [options] -- CMD [ARGS...]``: the launcher
without the C++ command-line tool, with the same options (tessera.launch runs the same code)."""
from __future__ import annotations

import argparse
import shlex
import sys

from . import launch

USAGE = "python -m tessera launch --nproc-per-node N [options] -- CMD [ARGS...]"
DESCRIPTION = (
    "Start --nproc-per-node ranks of CMD on this node with RANK, WORLD_SIZE, LOCAL_RANK, "
    "LOCAL_WORLD_SIZE, NODE_RANK, MASTER_ADDR, MASTER_PORT and TESSERA_JOB_TOKEN set; prefix "
    "their output with the rank; when one fails, stop the others and return its exit code. "
    "The command and its arguments follow `--`.")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tessera launch", usage=USAGE,
                                description=DESCRIPTION)
    p.add_argument("--nproc-per-node", "--nproc_per_node", type=int, required=True, metavar="N",
                   help="Ranks to start on this node")
    p.add_argument("--nnodes", type=int, default=1, metavar="M",
                   help="Number of nodes in the job (default: %(default)s)")
    p.add_argument("--node-rank", "--node_rank", type=int, default=0, metavar="R",
                   help="This node's index in [0, nnodes) (default: %(default)s)")
    p.add_argument("--master-addr", "--master_addr", default="127.0.0.1", metavar="H",
                   help="Host of rank 0, the rendezvous store (default: %(default)s)")
    p.add_argument("--master-port", "--master_port", type=int, default=0, metavar="P",
                   help="Port of the rendezvous store (default: a free port on one node, 29500 "
                        "on several)")
    p.add_argument("--token-file", metavar="FILE",
                   help="File holding the job token, readable only by you (default: "
                        "TESSERA_JOB_TOKEN or TESSERA_JOB_TOKEN_FILE, else a random token on a "
                        "single node)")
    p.add_argument("--grace", type=float, default=None, metavar="SECONDS",
                   help="Seconds between SIGTERM and SIGKILL when stopping (default: 5)")
    p.add_argument("--no-prefix", action="store_true",
                   help="Do not prefix output lines with [rank R]")
    return p


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] != "launch":
        sys.stderr.write(f"usage: {USAGE}\n       python -m tessera launch --help\n")
        return 2
    argv = argv[1:]
    p = parser()
    if "--" in argv:
        i = argv.index("--")
        opts, command = argv[:i], argv[i + 1:]
        a = p.parse_args(opts)
    else:
        # Without `--` the command's own options would be read as the launcher's: parse what is
        # the launcher's (and answer --help), then name what was left over.
        a, rest = p.parse_known_args(argv)
        p.error("put the command the ranks run after `--` (python -m tessera launch "
                f"--nproc-per-node {a.nproc_per_node} -- "
                f"{shlex.join(rest) if rest else 'python3 train.py'})")
    if not command:
        p.error("no command after --: give the command to run for every rank")
    try:
        return launch(command, a.nproc_per_node, a.nnodes, a.node_rank, a.master_addr,
                      a.master_port, not a.no_prefix, token_file=a.token_file, grace=a.grace)
    except (ValueError, OSError) as e:
        sys.stderr.write(f"tessera launch: {e}\n")
        return 2


if __name__ == "__main__":
    sys.exit(main())
