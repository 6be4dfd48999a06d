# SPDX-License-Identifier: Apache-2.0
"""The GPU training path on every rank of a job: the GPU loader's batches equal the CPU loader's.

    python -m tessera launch --nproc-per-node P -- python gpu_loader.py CONFIG OUT [PROB]

Each rank takes cuda:<LOCAL_RANK % GPUs>, places its partition (structure, labels and features
mirrored on the GPU), and runs one epoch of a GPU loader (NeighborSampler(device="cuda") with
the features and labels prefetched) and of a CPU loader with the same seed, comparing every
batch bit for bit: seeds, blocks (remote neighborhoods come from their owners), feature rows
(remote rows from their owners) and labels; with PROB (an edge feature's name) both sample
weighted by it. Writes <OUT>/rank<r>.json with the counts."""
import json
import os
import sys

import numpy as np
import torch

import tessera


def main() -> int:
    config, out = sys.argv[1], sys.argv[2]
    prob = sys.argv[3] if len(sys.argv) > 3 else None
    tessera.initialize()
    rank = tessera.get_rank()
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    g = tessera.DistGraph("cora", part_config=config)
    placed = g.place_on_device(["label", "feat"])
    train = np.nonzero(g.ndata["train_mask"].numpy())[0]
    val = np.nonzero(g.ndata["val_mask"].numpy())[0]
    nids = np.concatenate([train, val])  # the same on every rank: global batches

    def loader(device):
        s = tessera.NeighborSampler([5, 10], device=device, prefetch_node_feats=["feat"],
                                    prefetch_labels=["label"], prob=prob)
        return tessera.DistNodeDataLoader(g, nids, s, batch_size=48, shuffle=True, seed=11,
                                          global_order=True, num_workers=2,
                                          device=dev if device == "cuda" else None)

    gpu, cpu = loader("cuda"), loader("cpu")
    batches = edges = 0
    for (ia, sa, ba), (ib, sb, bb) in zip(cpu, gpu):
        assert ib.device == dev and sb.device == dev, (ib.device, sb.device)
        assert torch.equal(ia, ib.cpu()) and torch.equal(sa, sb.cpu())
        for x, y in zip(ba, bb):
            assert x.num_dst_nodes() == y.num_dst_nodes() and x.num_edges() == y.num_edges()
            for u, v in zip(x.edges() + (x.eids, x.srcnodes), y.edges() + (y.eids, y.srcnodes)):
                assert torch.equal(u, v.cpu())
            edges += y.num_edges()
        assert torch.equal(ba[0].srcdata["feat"], bb[0].srcdata["feat"].cpu())
        assert torch.equal(ba[-1].dstdata["label"], bb[-1].dstdata["label"].cpu())
        batches += 1
    assert batches == len(cpu) == len(gpu) > 0
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump({"rank": rank, "batches": batches, "edges": edges, "prob": prob,
                   "placement": placed["describe"]}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
