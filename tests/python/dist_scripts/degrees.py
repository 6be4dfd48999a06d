# SPDX-License-Identifier: Apache-2.0
"""In- and out-degrees across ranks: every rank asks for every node's (the first out_degrees
call is collective), then rank 0 alone asks for some IDs with repeats and a mask (later calls
are not collective), and rank 1 for an ID out of range.

    python -m tessera launch --nproc-per-node P -- python degrees.py CONFIG OUT

Writes <OUT>/rank<r>.npz; the test checks it against the input graph."""
import os
import sys

sys.modules["torch"] = None  # NumPy is enough here, and 4 ranks start faster on 2 cores
import numpy as np  # noqa: E402

import tessera  # noqa: E402


def main() -> int:
    config, out = sys.argv[1], sys.argv[2]
    tessera.initialize()
    rank = tessera.get_rank()
    g = tessera.DistGraph("", part_config=config)
    assert g.is_distributed, g
    n = g.num_nodes()
    outdeg = np.asarray(g.out_degrees())
    indeg = np.asarray(g.in_degrees())
    ids = np.random.default_rng(rank).integers(0, n, 700).astype(np.int64)
    some, masked, err = (np.zeros(0, np.int64),) * 2 + ("",)
    if rank == 0:  # alone: the table exists, later calls are not collective
        some = np.asarray(g.out_degrees(ids))
        mask = np.zeros(n, dtype=bool)
        mask[ids[:20]] = True
        masked = np.asarray(g.out_degrees(mask))
    if rank == 1:
        try:
            g.out_degrees(np.array([0, n], dtype=np.int64))
        except IndexError as e:
            err = str(e)
    os.makedirs(out, exist_ok=True)
    tmp = os.path.join(out, f".rank{rank}.npz")
    np.savez(tmp, outdeg=outdeg, indeg=indeg, ids=ids, some=some, masked=masked,
             err=np.array(err), orig_nids=np.asarray(g.orig_nids()))
    os.replace(tmp, os.path.join(out, f"rank{rank}.npz"))
    g.barrier()  # rank 0's reads are answered before any owner leaves
    tessera.exit_client()
    return 0


if __name__ == "__main__":
    sys.exit(main())
