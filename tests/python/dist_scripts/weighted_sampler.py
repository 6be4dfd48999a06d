"""Weighted sampling (prob=) over a distributed DistGraph of several partitions is not
implemented: every entry point must say so with a ValueError on every rank (before anything
collective, so no rank hangs), and the unweighted sampler must still work on the same graph.

    python -m tessera launch --nproc-per-node P -- python weighted_sampler.py CONFIG

Prints "raised <entry point>: <message>" per entry point and "unweighted <edges>" per rank."""
import sys

sys.modules["torch"] = None  # NumPy is enough here
import numpy as np  # noqa: E402

import tessera  # noqa: E402


def main() -> int:
    config = sys.argv[1]
    tessera.initialize()
    g = tessera.DistGraph("cora", part_config=config)
    assert g.is_distributed and g.get_partition_book().num_partitions() > 1, g
    assert "w" in g.edata, list(g.edata)
    lo, hi = g.local_node_range()
    seeds = np.arange(lo, min(hi, lo + 16), dtype=np.int64)
    eids = np.arange(8, dtype=np.int64)
    entry_points = {
        "sample_blocks": lambda s: s.sample_blocks(g, seeds),
        "NodeDataLoader": lambda s: tessera.NodeDataLoader(g, seeds, s, batch_size=4),
        "EdgeDataLoader": lambda s: tessera.EdgeDataLoader(g, eids, s, batch_size=4),
    }
    for name, call in entry_points.items():
        for prob in ("w", np.ones(g.num_edges(), dtype=np.float32)):
            try:
                call(tessera.NeighborSampler([3, 2], prob=prob))
            except ValueError as e:
                print(f"raised {name}: {e}", flush=True)
            else:
                print(f"no error from {name}", flush=True)
    _, _, blocks = tessera.NeighborSampler([3, 2]).sample_blocks(g, seeds)
    print(f"unweighted {sum(b.num_edges() for b in blocks)}", flush=True)
    g.barrier()
    tessera.exit_client()
    return 0


if __name__ == "__main__":
    sys.exit(main())
