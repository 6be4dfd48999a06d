# SPDX-License-Identifier: Apache-2.0
"""Dumps this rank's epoch-0 batches of a distributed EdgeDataLoader to <out>/rank<r>.json.

    python -m tessera launch --nproc-per-node P -- python edge_batches.py CONFIG OUT [--global-order]

With --global-order every rank passes every edge; otherwise this rank's edge_split share. The
exclusion is reverse_id with the DistGraph's own reverse map. The test maps IDs through the
dumped orig_nids / orig_eids."""
import argparse
import os
import sys

sys.modules["torch"] = None  # NumPy is enough here
import numpy as np  # noqa: E402

import tessera  # noqa: E402
from tessera.utils import atomic_write_json  # noqa: E402
from tessera.dataloading import negative_sampler, symmetrized_reverse_eids  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("config")
    p.add_argument("out")
    p.add_argument("--global-order", action="store_true")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--negatives", type=int, default=2)
    p.add_argument("--seed", type=int, default=5)
    a = p.parse_args()
    tessera.initialize()
    rank = tessera.get_rank()
    g = tessera.DistGraph("cora", part_config=a.config)
    assert g.is_distributed, g
    e = g.num_edges()
    if a.global_order:
        eids = np.arange(e, dtype=np.int64)
    else:
        eids = np.asarray(tessera.distributed.edge_split(np.arange(e, dtype=np.int64),
                                                         g.get_partition_book()))
    rev = symmetrized_reverse_eids(g)
    loader = tessera.DistEdgeDataLoader(
        g, eids, tessera.NeighborSampler([10, 5]), batch_size=a.batch_size, shuffle=True,
        seed=a.seed, negative_sampler=negative_sampler.Uniform(a.negatives),
        exclude="reverse_id", reverse_eids=rev, global_order=a.global_order)
    batches = []
    for b, (input_nodes, pos, neg, blocks) in enumerate(loader):
        seeds = np.asarray(blocks[-1].dstnodes)
        batches.append({
            "b": b, "j": loader.global_batch_index(b),
            "eids": np.asarray(pos.eids).tolist(),
            "pos": [seeds[np.asarray(pos.src)].tolist(), seeds[np.asarray(pos.dst)].tolist()],
            "neg": [seeds[np.asarray(neg.src)].tolist(), seeds[np.asarray(neg.dst)].tolist()],
            "input_nodes": np.asarray(input_nodes).tolist(),
            "blocks": [{"srcnodes": np.asarray(k.srcnodes).tolist(),
                        "src": np.asarray(k.src).tolist(), "dst": np.asarray(k.dst).tolist(),
                        "eids": np.asarray(k.eids).tolist()} for k in blocks]})
    out = {"rank": rank, "num_batches": len(loader), "num_seed_edges": int(len(eids)),
           "orig_nids": np.asarray(g.orig_nids()).tolist(),
           "orig_eids": np.asarray(g.runtime_graph.orig_eid.read(
               np.arange(e, dtype=np.int64))).tolist(),
           "reverse_eids": np.asarray(rev).tolist(), "batches": batches}
    atomic_write_json(out, os.path.join(a.out, f"rank{rank}.json"))
    tessera.exit_client()
    return 0


if __name__ == "__main__":
    sys.exit(main())
