# SPDX-License-Identifier: Apache-2.0
"""Several trainers per machine: dumps what this rank sees to <out>/rank<r>.json.

    TESSERA_JOB_TOKEN=T python -m tessera launch --nnodes M --node-rank R --nproc-per-node T \
        --master-port P -- python trainers_per_machine.py CONFIG OUT

Run on M "machines" over an M-part partitioning (M x T ranks): the rank contract (machine, local
rank), node_split with and without force_even, every node's features and out-degree read through
this rank, the epoch-0 global-order batches, and the memory of this process
(/proc/self/smaps_rollup) before and after loading the graph. With --hold the rank writes its pid to
<out>/loaded<r> after loading and sleeps (the crash test kills it there)."""
import argparse
import os
import sys
import time

sys.modules["torch"] = None  # NumPy is enough here, and 4 ranks start faster on 2 cores
import numpy as np  # noqa: E402

import tessera  # noqa: E402
from tessera.utils import atomic_write_json  # noqa: E402


def smaps() -> dict:
    """Rss / Pss / Shared / Private figures of this process, in KiB."""
    out = {}
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[2] == "kB":
                out[parts[0].rstrip(":")] = int(parts[1])
    return out


def segment_stats() -> dict:
    """Size / Rss / Pss (KiB) of this process's mappings of machine-shared partition segments
    (/dev/shm/tessera-*, deleted once every trainer of the machine has mapped them)."""
    out = {"Size": 0, "Rss": 0, "Pss": 0}
    inside = False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if head and "-" in head[0] and len(head) >= 5 and ":" in head[3]:  # a mapping
                inside = len(head) >= 6 and "/tessera-" in head[5]
            elif inside and len(head) == 3 and head[0].rstrip(":") in out:
                out[head[0].rstrip(":")] += int(head[1])
    return out


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("config")
    p.add_argument("out")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--fanouts", default="10,5")
    p.add_argument("--hold", action="store_true")
    p.add_argument("--no-batches", action="store_true")
    a = p.parse_args()
    tessera.initialize()
    rank, world = tessera.get_rank(), tessera.get_world_size()
    before = smaps()
    g = tessera.DistGraph("", part_config=a.config)
    g.barrier()
    after = smaps()
    if a.hold:  # the test reads the pid, checks the mapping and kills this process
        with open(os.path.join(a.out, f"loaded{rank}.tmp"), "w") as f:
            f.write(str(os.getpid()))
        os.replace(os.path.join(a.out, f"loaded{rank}.tmp"), os.path.join(a.out, f"loaded{rank}"))
        time.sleep(600)
    mask = g.ndata["train_mask"]
    even = np.asarray(tessera.node_split(mask, force_even=True))
    local = np.asarray(tessera.node_split(mask, force_even=False))
    book = g.get_partition_book()
    host_even = np.asarray(tessera.node_split(mask.numpy(), book, force_even=True))
    host_local = np.asarray(tessera.node_split(mask.numpy(), book, force_even=False))
    # The same mask in a DistTensor of the user's: each trainer holds its own range (no shared
    # rows), so the machine's selected IDs are gathered from its trainers.
    mine = tessera.DistTensor((g.num_nodes(),), mask.dtype, "user_train_mask",
                              part_policy=g.get_node_partition_policy())
    lo, hi = g.local_node_range()
    mine[np.arange(lo, hi)] = mask[np.arange(lo, hi)]
    g.barrier()
    user_local = np.asarray(tessera.node_split(mine, force_even=False))
    ids = np.arange(g.num_nodes(), dtype=np.int64)
    feat = np.asarray(g.ndata["feat"][ids])
    outdeg = np.asarray(g.out_degrees())  # each trainer counts only its own edges
    g.barrier()  # every trainer has read every row: the segment is touched everywhere
    seg_end = segment_stats()
    out = {"rank": rank, "world": world, "pid": os.getpid(),
           "env": {k: os.environ.get(k) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK",
                                                   "LOCAL_WORLD_SIZE", "NODE_RANK")},
           "machine": g.machine, "trainers_per_machine": g.trainers_per_machine,
           "partid": book.partid, "num_partitions": book.num_partitions(),
           "local_node_range": list(g.local_node_range()), "shared_bytes": g.shared_bytes,
           "split_even": even.tolist(), "split_local": local.tolist(),
           "host_split_even": host_even.tolist(), "host_split_local": host_local.tolist(),
           "user_split_local": user_local.tolist(),
           "feat_orig": np.asarray(g.orig_nids()).tolist(),
           "feat_sum": feat.astype(np.float64).sum(axis=1).tolist(),
           "out_degrees": outdeg.tolist(),
           "smaps_before": before, "smaps_after": after, "segment_end": seg_end}
    if not a.no_batches:
        nids = np.nonzero(np.asarray(mask.numpy()))[0]
        sampler = tessera.NeighborSampler([int(f) for f in a.fanouts.split(",")])
        loader = tessera.NodeDataLoader(g, nids, sampler, batch_size=a.batch_size, shuffle=True,
                                        seed=a.seed, global_order=True)
        batches = []
        for b, (input_nodes, seeds, blocks) in enumerate(loader):
            # Input features through this rank (a sibling's rows come from shared memory).
            x = np.asarray(g.ndata["feat"][input_nodes])
            batches.append({
                "b": b, "j": loader.global_batch_index(b),
                "input_nodes": np.asarray(input_nodes).tolist(),
                "input_feat_sum": x.astype(np.float64).sum(axis=1).tolist(),
                "seeds": np.asarray(seeds).tolist(),
                "blocks": [{"srcnodes": np.asarray(blk.srcnodes).tolist(),
                            "dstnodes": np.asarray(blk.dstnodes).tolist(),
                            "src": np.asarray(blk.src).tolist(),
                            "dst": np.asarray(blk.dst).tolist(),
                            "eids": np.asarray(blk.eids).tolist()} for blk in blocks]})
        out["batches"] = batches
        out["num_batches"] = len(loader)
    atomic_write_json(out, os.path.join(a.out, f"rank{rank}.json"))
    tessera.exit_client()
    return 0


if __name__ == "__main__":
    sys.exit(main())
