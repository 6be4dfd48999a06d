# SPDX-License-Identifier: Apache-2.0
"""train_sage.py's --feat-norm standard statistics on several ranks: each rank reads its own
rows only, and every rank ends with the same statistics.

    python -m tessera launch --nproc-per-node P -- python feature_stats.py NAME CONFIG OUT

Writes <OUT>/rank<r>.npz: the rank's mean and std (float32, as training uses them) and the
largest number of rows it read in one gather and the IDs it read."""
import os
import sys

import numpy as np

import tessera

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "python", "examples"))
import train_sage  # noqa: E402


def main() -> int:
    import torch

    name, config, out = sys.argv[1], sys.argv[2], sys.argv[3]
    tessera.initialize()
    g = tessera.DistGraph(name, part_config=config)
    assert g.is_distributed, g
    t = g.ndata["feat"]
    seen = []
    gather = type(t).gather

    def recording_gather(self, ids):
        seen.append(np.asarray(ids).copy())
        return gather(self, ids)

    type(t).gather = recording_gather
    train_sage.STATS_CHUNK_BYTES = 8 * int(t.shape[1]) * 13  # 13 rows a read
    f = train_sage.Features(g, "standard", torch.device("cpu"))
    type(t).gather = gather
    ids = np.concatenate(seen) if seen else np.zeros(0, np.int64)
    lo, hi = g.local_node_range()
    np.savez(os.path.join(out, f"rank{tessera.get_rank()}.npz"), mean=f.mean.numpy(),
             std=f.std.numpy(), most=max(len(s) for s in seen), ids=ids, lo=lo, hi=hi)
    return 0


if __name__ == "__main__":
    sys.exit(main())
