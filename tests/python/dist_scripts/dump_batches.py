# SPDX-License-Identifier: Apache-2.0
"""Dumps this rank's epoch-0 batches of a global-order NodeDataLoader to <out>/rank<r>.json.

    python -m tessera launch --nproc-per-node P -- python dump_batches.py CONFIG OUT

Every rank passes all training nodes; the test maps the (relabelled) IDs through the
partitioning's orig_nids / orig_eids and compares global batch j across world sizes."""
import argparse
import os
import sys

sys.modules["torch"] = None  # NumPy is enough here, and 4 ranks start faster on 2 cores
import numpy as np  # noqa: E402

import tessera  # noqa: E402
from tessera.utils import atomic_write_json  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("config")
    p.add_argument("out")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--fanouts", default="10,5")
    a = p.parse_args()
    tessera.initialize()
    rank, world = tessera.get_rank(), tessera.get_world_size()
    g = tessera.DistGraph("cora", part_config=a.config)
    assert g.is_distributed, g
    nids = np.nonzero(np.asarray(g.ndata["train_mask"].numpy()))[0]
    sampler = tessera.NeighborSampler([int(f) for f in a.fanouts.split(",")])
    loader = tessera.NodeDataLoader(g, nids, sampler, batch_size=a.batch_size, shuffle=True,
                                    seed=a.seed, global_order=True)
    batches = []
    for b, (input_nodes, seeds, blocks) in enumerate(loader):
        batches.append({
            "b": b, "j": loader.global_batch_index(b),
            "input_nodes": np.asarray(input_nodes).tolist(),
            "seeds": np.asarray(seeds).tolist(),
            "blocks": [{"srcnodes": np.asarray(blk.srcnodes).tolist(),
                        "dstnodes": np.asarray(blk.dstnodes).tolist(),
                        "src": np.asarray(blk.src).tolist(),
                        "dst": np.asarray(blk.dst).tolist(),
                        "eids": np.asarray(blk.eids).tolist()} for blk in blocks]})
    out = {"rank": rank, "world": world, "num_batches": len(loader),
           "train_nids": nids.tolist(), "local_node_range": list(g.local_node_range()),
           "orig_nids": np.asarray(g.orig_nids()).tolist(), "batches": batches}
    atomic_write_json(out, os.path.join(a.out, f"rank{rank}.json"))
    tessera.exit_client()
    return 0


if __name__ == "__main__":
    sys.exit(main())
