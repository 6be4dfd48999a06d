# SPDX-License-Identifier: Apache-2.0
"""Weighted sampling (prob=) over a distributed DistGraph of several partitions: prob as an edge
feature name samples every node weighted by its owner's rows of that feature (the distributed
sampler), through every entry point; prob as an array raises a clear ValueError on every rank
(before anything collective, so no rank hangs).

    python -m tessera launch --nproc-per-node P -- python weighted_sampler.py CONFIG OUT

Prints "ok <entry point> <edges>" / "raised <entry point>: <message>" per entry point and
writes OUT/rank<r>.npz: the blocks of sample_blocks with prob="w" (without and with
replacement) for the test to compare with the standalone weighted sampler's."""
import os
import sys

sys.modules["torch"] = None  # NumPy is enough here
import numpy as np  # noqa: E402

import tessera  # noqa: E402
from tessera import _C  # noqa: E402


def main() -> int:
    config, out = sys.argv[1], sys.argv[2]
    tessera.initialize()
    g = tessera.DistGraph("cora", part_config=config)
    assert g.is_distributed and g.get_partition_book().num_partitions() > 1, g
    assert "w" in g.edata, list(g.edata)
    rank = g.rank()
    lo, hi = g.local_node_range()
    seeds = np.arange(lo, min(hi, lo + 16), dtype=np.int64)
    eids = np.arange(8, dtype=np.int64)

    def edges(blocks):
        return sum(b.num_edges() for b in blocks)

    entry_points = {
        "sample_blocks": lambda s: edges(s.sample_blocks(g, seeds)[2]),
        "NodeDataLoader": lambda s: sum(edges(b) for _, _, b in
                                        tessera.NodeDataLoader(g, seeds, s, batch_size=4)),
        "EdgeDataLoader": lambda s: sum(edges(b[-1]) for b in
                                        tessera.EdgeDataLoader(g, eids, s, batch_size=4)),
    }
    for name, call in entry_points.items():
        for prob in ("w", np.ones(g.num_edges(), dtype=np.float32)):
            try:
                n = call(tessera.NeighborSampler([3, 2], prob=prob))
            except ValueError as e:
                print(f"raised {name}: {e}", flush=True)
            else:
                print(f"ok {name} {n}", flush=True)
    assert isinstance(tessera.NeighborSampler([3], prob="w").bind(g), _C.DistNeighborSampler)
    try:
        tessera.NeighborSampler([3], prob="nope").sample_blocks(g, seeds)
    except KeyError as e:
        print(f"unknown name: {e}", flush=True)
    # Seeds of every partition (remote ones are sampled by their owners), for the comparison.
    many = np.arange(rank, g.num_nodes(), 5 * g.get_partition_book().num_partitions(),
                     dtype=np.int64)
    arrays = {"seeds": many}
    for replace in (False, True):
        _, _, blocks = tessera.NeighborSampler([4, 3], prob="w", replace=replace).sample_blocks(
            g, many, seed=5, epoch=1, batch=rank)
        for i, b in enumerate(blocks):
            tag = f"r{int(replace)}_b{i}"
            arrays[tag + "_srcnodes"] = np.asarray(b.srcnodes)
            arrays[tag + "_dstnodes"] = np.asarray(b.dstnodes)
            arrays[tag + "_src"] = np.asarray(b.src)
            arrays[tag + "_dst"] = np.asarray(b.dst)
            arrays[tag + "_eids"] = np.asarray(b.eids)
    np.savez(os.path.join(out, f"rank{rank}.npz"), **arrays)
    _, _, blocks = tessera.NeighborSampler([3, 2]).sample_blocks(g, seeds)
    print(f"unweighted {edges(blocks)}", flush=True)
    g.barrier()
    tessera.exit_client()
    return 0


if __name__ == "__main__":
    sys.exit(main())
