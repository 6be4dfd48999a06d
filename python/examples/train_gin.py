#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Trains GIN for graph classification on a dataset of many small graphs.

    python python/examples/train_gin.py --dataset data/solubility
    tessera launch --nproc-per-node 2 -- python python/examples/train_gin.py

GIN (Xu et al., ICLR 2019): ``--layers`` GINConv layers, each with a 2-layer MLP, batch norm
and ReLU, a readout (``--readout`` sum, mean or max) of the input and of every layer's output,
each through a linear classifier, summed. The training graphs (the dataset's train split) are
shared over the ranks by ``DistributedGraphSampler`` (every graph once per epoch across the
ranks, shuffled by (seed, epoch), padded to equal shares or with ``--drop-last`` cut to them) and
batched by ``GraphDataLoader`` into block-diagonal graphs. ``--batch-size`` is the global batch:
each rank takes ceil(batch / P) graphs per step, and the gradients are averaged over the ranks
after every step (``all_reduce_gradients``, or DDP when every rank has a GPU of its own). With
P dividing the batch, step j of all ranks trains on the graphs of step j at one rank, so the
learning rate stays the same.

Every epoch prints the training loss and accuracy and the test accuracy (the test split shared
over the ranks without repeats, the counts summed). ``--results FILE`` writes the per-epoch
figures; ``benchmarks/plot_gin.py`` draws accuracy against epochs for several runs.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time

import numpy as np

try:
    import tessera
except ImportError:  # running from a source tree without `pip install .`
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
    import tessera

import torch
import torch.nn.functional as F
from torch import nn

import tessera.distributed as dist
from tessera.graphs import DistributedGraphSampler, GraphDataLoader, read_graph_dataset
from tessera.nn import GINConv, readout_nodes
from tessera.utils import atomic_write_json, commit_id, log, per_rank_batch, pick_device


class GIN(nn.Module):
    """GIN with jumping-knowledge readout: every layer's node states (and the input) are read
    out per graph and classified; the logits are summed (the GIN paper's model)."""

    def __init__(self, in_feats: int, hidden: int, num_classes: int, num_layers: int = 4,
                 dropout: float = 0.5, readout: str = "sum"):
        super().__init__()
        self.convs, self.norms = nn.ModuleList(), nn.ModuleList()
        for i in range(num_layers):
            mlp = nn.Sequential(nn.Linear(in_feats if i == 0 else hidden, hidden),
                                nn.BatchNorm1d(hidden), nn.ReLU(), nn.Linear(hidden, hidden))
            self.convs.append(GINConv(mlp, learn_eps=False))
            self.norms.append(nn.BatchNorm1d(hidden))
        self.heads = nn.ModuleList(nn.Linear(in_feats if i == 0 else hidden, num_classes)
                                   for i in range(num_layers + 1))
        self.dropout = nn.Dropout(dropout)
        self.readout = readout

    def forward(self, batch, x: torch.Tensor) -> torch.Tensor:
        hs = [x]
        h = x
        for conv, norm in zip(self.convs, self.norms):
            h = F.relu(norm(conv(batch, h)))
            hs.append(h)
        out = 0
        for head, h in zip(self.heads, hs):
            out = out + self.dropout(head(readout_nodes(h, batch.graph_ids, batch.num_graphs,
                                                        self.readout)))
        return out


def average_buffers(model, world: int) -> None:
    """Averages the floating-point buffers (batch norm's running mean and variance) over the
    ranks. Collective; a no-op in a world of one."""
    if world == 1:
        return
    with torch.no_grad():
        for buf in model.buffers():
            if buf.is_floating_point():
                dist.all_reduce(buf)
                buf /= world


def evaluate(model, ds, ids, device, batch_size: int) -> tuple:
    """(correct, total) of this rank's share of ``ids``: ranks take disjoint strided shares
    with no padding, so the summed counts are over every graph exactly once."""
    rank, world = tessera.get_rank(), tessera.get_world_size()
    mine = ids[rank::world]
    loader = GraphDataLoader(ds, batch_size=batch_size, indices=mine, device=device)
    model.eval()
    correct = 0
    with torch.no_grad():
        for batch in loader:
            pred = model(batch, batch.feat.float()).argmax(1)
            correct += int((pred == batch.label).sum())
    counts = np.array([correct, len(mine)], dtype=np.int64)
    dist.all_reduce(counts)
    return int(counts[0]), int(counts[1])


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                     "data", "solubility"))
    p.add_argument("--epochs", type=int, default=100)
    p.add_argument("--batch-size", type=int, default=32, help="graphs per step, all ranks")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--readout", choices=["sum", "mean", "max"], default="sum")
    p.add_argument("--seed", type=int, default=0, help="model init and sampler order")
    p.add_argument("--drop-last", action="store_true",
                   help="cut the epoch to equal shares instead of padding")
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: cores / ranks)")
    p.add_argument("--grad-sync", choices=["auto", "ddp", "host"], default="auto")
    p.add_argument("--results", help="write per-epoch figures to this JSON (rank 0)")
    a = p.parse_args(argv)
    if a.batch_size < 1:
        p.error(f"--batch-size must be >= 1, got {a.batch_size}")
    return a


def main(argv=None) -> int:
    a = parse_args(argv)
    try:
        device = pick_device(a.device)
        ds = read_graph_dataset(a.dataset)
        num_classes = ds.num_classes  # ValueError for labels that are not classes
        for split in ("train", "test"):
            if not np.asarray(ds.masks.get(f"{split}_mask", [])).any():
                raise ValueError(f"{a.dataset}: no {split} graphs ({split}_mask.npy "
                                 f"{'holds none' if f'{split}_mask' in ds.masks else 'missing'}"
                                 "): the example trains on the train split and tests on the "
                                 "test split")
    except (ValueError, FileNotFoundError) as e:
        print(f"train_gin.py: error: {e}", file=sys.stderr)
        return 2
    tessera.initialize()
    rank, world = tessera.get_rank(), tessera.get_world_size()
    if a.threads:
        torch.set_num_threads(a.threads)
    elif world > 1:  # the ranks of this node share its cores
        local = int(os.environ.get("LOCAL_WORLD_SIZE", world))
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // local))
    train_ids, test_ids = ds.split("train"), ds.split("test")
    log(f"{ds}; train {len(train_ids)}, test {len(test_ids)} graphs; {world} rank(s) on "
        f"{device}")

    torch.manual_seed(a.seed)
    feats = int(np.prod(ds.node_feat.shape[1:]))
    model = GIN(feats, a.hidden, num_classes, a.layers, a.dropout, a.readout).to(device)
    dist.broadcast_parameters(model)
    mode = dist.gradient_sync_mode(device, a.grad_sync)
    net = dist.data_parallel(model, device, mode)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=50, gamma=0.5)

    sampler = DistributedGraphSampler(ds, indices=train_ids, shuffle=True, seed=a.seed,
                                      drop_last=a.drop_last)
    batch = per_rank_batch(a.batch_size)
    loader = GraphDataLoader(ds, batch_size=batch, sampler=sampler, device=device)
    log(f"{len(sampler)} training graphs and {len(loader)} steps of {batch} graphs per rank "
        f"and epoch; gradient sync {mode}")

    epochs = []
    t0 = time.time()
    for epoch in range(a.epochs):
        loader.set_epoch(epoch)
        net.train()
        te = time.time()
        stats = np.zeros(3)  # loss sum, correct, graphs (this rank)
        for b in loader:
            logits = net(b, b.feat.float())
            loss = F.cross_entropy(logits, b.label)
            opt.zero_grad()
            loss.backward()
            if mode == "host":
                dist.all_reduce_gradients(model)
            opt.step()
            hits = int((logits.argmax(1) == b.label).sum())
            stats += [float(loss.detach()) * b.num_graphs, hits, b.num_graphs]
        sched.step()
        dist.all_reduce(stats)
        # Batch norm's running statistics are buffers each rank updates from its own
        # batches: averaged over the ranks, so every rank evaluates the same model.
        average_buffers(model, world)
        correct, total = evaluate(model, ds, test_ids, device, 256)
        rec = {"epoch": epoch, "loss": stats[0] / stats[2], "train_acc": stats[1] / stats[2],
               "test_acc": correct / total, "seconds": time.time() - te}
        epochs.append(rec)
        log(f"epoch {epoch:3d}  loss {rec['loss']:.4f}  train acc {rec['train_acc']:.4f}  "
            f"test acc {rec['test_acc']:.4f}  ({rec['seconds']:.2f}s)")
    wall = time.time() - t0
    # Data parallelism keeps one model: every rank must end with the same parameter bits.
    digest = hashlib.sha256(b"".join(t.detach().cpu().contiguous().numpy().tobytes()
                                     for t in model.state_dict().values())).hexdigest()[:16]
    in_sync = len(set(dist.all_gather_object(digest))) == 1
    final = epochs[-1]["test_acc"] if epochs else float("nan")
    last10 = float(np.mean([e["test_acc"] for e in epochs[-10:]])) if epochs else float("nan")
    log(f"final test accuracy {final:.4f} (mean of the last 10 epochs {last10:.4f}); "
        f"{wall:.1f}s; parameters {digest}, "
        f"{'the same on every rank' if in_sync else 'DIFFERENT across the ranks'}")
    if a.results and rank == 0:
        args = dict(vars(a), dataset=os.path.relpath(a.dataset))  # no machine-specific path
        atomic_write_json({"dataset": os.path.basename(os.path.normpath(a.dataset)),
                           "ranks": world, "device": str(device), "grad_sync": mode,
                           "commit": commit_id(__file__), "command": " ".join(sys.argv),
                           "torch_threads": torch.get_num_threads(),
                           "args": args, "per_rank_batch": batch,
                           "train_graphs": len(train_ids), "test_graphs": len(test_ids),
                           "graphs_per_rank_epoch": len(sampler),
                           "params_in_sync": in_sync, "final_test_acc": final,
                           "last10_test_acc": last10,
                           "seconds": wall, "epochs": epochs}, a.results)
    return 0 if in_sync else 1


if __name__ == "__main__":
    sys.exit(main())
