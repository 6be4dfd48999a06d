# SPDX-License-Identifier: Apache-2.0
"""tessera.update_all across ranks: features and edge weights are formulas of the original node
and edge IDs; every message and reduce is computed and rank 0 reads the whole result.

    python -m tessera launch --nproc-per-node P -- python update_all.py CONFIG OUT

Writes <OUT>/result.npz (keyed "<message>-<reduce>", rows in new node ID order, plus the
new -> original node ID map); the test checks it against a whole-graph NumPy reference."""
import os
import sys

sys.modules["torch"] = None  # NumPy is enough here
import numpy as np  # noqa: E402

import tessera  # noqa: E402

F = 5


def feature(orig: np.ndarray) -> np.ndarray:
    f = np.arange(F, dtype=np.int64)
    return (((orig[:, None] * 131 + f[None, :] * 71) % 997) / 498.5 - 1.0).astype(np.float32)


def weight(orig_eid: np.ndarray) -> np.ndarray:
    return (0.25 + (orig_eid * 2654435761 % 1000) / 1000.0).astype(np.float32)


def main() -> int:
    config, out, orig_eid_file = sys.argv[1], sys.argv[2], sys.argv[3]
    tessera.initialize()
    g = tessera.DistGraph("cora", part_config=config)
    assert g.is_distributed, g
    n = g.num_nodes()
    orig_nid = np.asarray(g.orig_nids())
    orig_eid = np.load(orig_eid_file)  # new edge ID -> input edge ID (partition_graph's map)
    x = tessera.DistTensor((n, F), np.float32, "ua-x", part_policy=g.get_node_partition_policy())
    lo, hi = x.local_range()
    x.local_partition()[...] = feature(orig_nid[lo:hi])
    w = tessera.DistTensor((g.num_edges(),), np.float32, "ua-w",
                           part_policy=g.get_edge_partition_policy())
    elo, ehi = w.local_range()
    w.local_partition()[...] = weight(orig_eid[elo:ehi])
    g.barrier()
    res = {}
    for message in ("copy_u", "u_mul_e"):
        for reduce in ("sum", "mean", "max"):
            y = tessera.update_all(g, x, message, reduce,
                                   edge_weight=w if message == "u_mul_e" else None)
            assert y.shape == (n, F) and isinstance(y, tessera.DistTensor), y
            res[f"{message}-{reduce}"] = np.asarray(y[np.arange(n, dtype=np.int64)])
    if tessera.get_rank() == 0:
        os.makedirs(out, exist_ok=True)
        tmp = os.path.join(out, ".result.npz")
        np.savez(tmp, orig_nid=orig_nid, **res)
        os.replace(tmp, os.path.join(out, "result.npz"))
    tessera.exit_client()
    return 0


if __name__ == "__main__":
    sys.exit(main())
