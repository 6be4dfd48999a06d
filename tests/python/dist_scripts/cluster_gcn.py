# SPDX-License-Identifier: Apache-2.0
"""Cluster-GCN over a DistGraph of a real job: every rank clusters the nodes it owns, takes
batch 0 of epoch 1 and one epoch's nodes, and checks that the loader's feature rows are the
DistTensor's rows of the batch's nodes.

    python -m tessera launch --nproc-per-node P -- python cluster_gcn.py CONFIG OUT

Writes <OUT>/rank<r>.npz (the batch's nodes, edges as positions and edge IDs, the rank's node
range, every node of one epoch); the test checks them against the whole graph."""
import os
import sys

import numpy as np

import tessera
from tessera.cluster import ClusterGCNLoader, ClusterGCNSampler


def main() -> int:
    config, out = sys.argv[1], sys.argv[2]
    tessera.initialize()
    rank = tessera.get_rank()
    g = tessera.DistGraph("cora", part_config=config)
    assert g.is_distributed, g
    lo, hi = g.local_node_range()
    s = ClusterGCNSampler(g, 5, 2, seed=11)
    b = s.sample(1, 0)
    loader = ClusterGCNLoader(s, {"feat": g.ndata["feat"]}, prefetch=1)
    all_nodes = []
    for batch in loader:
        ids = batch.nodes.numpy()
        want = g.ndata["feat"].gather(ids)
        assert np.array_equal(batch.ndata["feat"].numpy(), want), "feature rows differ"
        all_nodes.append(ids)
    np.savez(os.path.join(out, f"rank{rank}.npz"), nodes=b.nodes, src=b.src, dst=b.dst,
             eids=b.eids, lo=lo, hi=hi, all_nodes=np.concatenate(all_nodes))
    g.barrier()
    return 0


if __name__ == "__main__":
    sys.exit(main())
