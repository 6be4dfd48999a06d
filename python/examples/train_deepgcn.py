#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Trains a deep ResGCN+ (DeepGCN with GENConv) on Cluster-GCN subgraphs.

    python python/examples/train_deepgcn.py --dataset data/tolokers --split 0
    python -m tessera launch --nproc-per-node 4 -- \\
        python python/examples/train_deepgcn.py --dataset data/tolokers --parallel-epochs

The model is DeepGCN's ogbn-proteins model (Li et al., "DeeperGCN", 2020): a linear encoder,
``--layers`` GENConv layers (softmax aggregation with a learnable inverse temperature, a
two-layer MLP), every layer after the first in a ResGCN+ block (pre-activation: LayerNorm, ReLU,
dropout, then the convolution, then the residual addition), and a linear classifier.

Training batches are Cluster-GCN subgraphs (``tessera.cluster``): each epoch the nodes are
clustered into ``--clusters`` clusters, at random (``--cluster-method random``, redrawn every
epoch from (seed, rank, epoch), DeepGCN's way) or by METIS (computed once, the cluster order
shuffled per epoch); a batch is the subgraph induced by ``--clusters-per-batch`` clusters, with
every edge between its nodes. Rank 0 evaluates on the subgraphs of a fixed random clustering
into ``--eval-clusters`` clusters (DeeperGCN's ogbn-proteins evaluation; 0: the whole graph).

Several ranks (``tessera launch``):

* ``--parallel-epochs`` (DeepGCN's multi-GPU training): every rank holds the whole graph and
  trains a full epoch of subgraphs of its *own* clustering, drawn from (seed, rank, epoch);
  after every step the gradients are averaged over the ranks (``all_reduce_gradients``, or
  DDP on GPUs), so one step trains on P subgraphs. The samples are not split: P ranks do P
  epochs of work per epoch.
* otherwise the graph is partitioned into P parts and each rank clusters the nodes of its own
  partition (``DistGraph``; ``ClusterGCNSampler`` over the rank's partition), again averaging
  the gradients every step.

Learning rate: the averaged gradient of P subgraphs has about 1/P of the variance of one, so a
step may be larger. ``--lr-scale`` sets lr = ``--lr`` x s(P): ``sqrt`` (default) s(P) = sqrt(P),
the square-root rule for Adam (the update's noise scales with the gradient's standard
deviation); ``linear`` s(P) = P (Goyal et al.'s rule for SGD); ``none`` s(P) = 1.

On a GPU (``--device cuda``) the model, the batch's subgraph and its features are on the
device: the features and labels are uploaded once and every batch is gathered there (in the
partitioned mode on a CUDA build, through the DistTensors' device mirrors of
``DistGraph.place_on_device``, as the GPU training path does); only the clustering and the
induced subgraph are computed on the host, one batch ahead on a background thread.

``--results FILE`` writes the per-epoch validation metric, the training wall time (evaluation
excluded) and the test metric at the best validation epoch for every split;
``benchmarks/plot_deepgcn.py`` draws runs at several rank counts against epochs and wall time.
"""
from __future__ import annotations

import argparse
import json
import math
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

import tessera.distributed as dist
from tessera.cluster import ClusterGCNLoader, ClusterGCNSampler
from tessera.metrics import accuracy, roc_auc
from tessera.nn import DeepGCN
from tessera.utils import (Progress, atomic_write_json, commit_id, log, pick_device,
                           reusable_partitions)


def lr_scale(rule: str, world: int) -> float:
    if rule == "sqrt":
        return math.sqrt(world)
    if rule == "linear":
        return float(world)
    return 1.0


class WholeGraph:
    """The dataset on this rank: CSC, standardized features, labels, split masks."""

    def __init__(self, path: str):
        ds = tessera.load_dataset(path, symmetrize=True)
        self.graph = ds.graph
        nd = ds.ndata
        for need in ("feat", "label", "train_mask", "val_mask", "test_mask"):
            if need not in nd:
                raise SystemExit(f"train_deepgcn.py: {path} has no node data {need!r}")
        self.raw = np.ascontiguousarray(nd["feat"], dtype=np.float32)
        x = self.raw.astype(np.float64)
        self.mean = x.mean(0).astype(np.float32)
        self.std = np.maximum(x.std(0), 1e-6).astype(np.float32)
        self.feat = ((x - self.mean) / self.std).astype(np.float32)  # evaluation's input
        self.label = np.asarray(nd["label"]).astype(np.int64).reshape(-1)
        self.masks = {k: np.ascontiguousarray(self._columns(np.asarray(nd[k]))) for k in
                      ("train_mask", "val_mask", "test_mask")}
        indptr = np.asarray(self.graph.indptr)
        self.src = torch.from_numpy(np.array(self.graph.indices, dtype=np.int64))
        self.dst = torch.from_numpy(np.repeat(np.arange(len(indptr) - 1, dtype=np.int64),
                                              np.diff(indptr)))

    @staticmethod
    def _columns(m: np.ndarray) -> np.ndarray:
        return m.reshape(-1, 1) if m.ndim == 1 else m  # [N, S]

    @property
    def num_splits(self) -> int:
        return int(self.masks["train_mask"].shape[1])


def metric_of(logits: torch.Tensor, labels: np.ndarray, nodes: np.ndarray, kind: str) -> float:
    rows = logits[torch.from_numpy(nodes)].float()
    y = labels[nodes]
    if kind == "rocauc":
        s = torch.softmax(rows, 1)[:, 1].numpy()
        return roc_auc(s[y == 1], s[y == 0]) * 100.0
    return accuracy(rows.argmax(1).numpy(), y) * 100.0


@torch.no_grad()
def evaluate(net, whole: WholeGraph, device, clusters: int, seed: int) -> torch.Tensor:
    """Logits of every node: from the whole graph (``clusters`` = 0), or, as DeeperGCN
    evaluates ogbn-proteins, from the subgraphs of a fixed random clustering into ``clusters``
    clusters (each node predicted within its cluster's induced subgraph: 1/clusters of the
    edges, so the cost of a training epoch)."""
    net.eval()
    x = torch.from_numpy(whole.feat)
    if clusters == 0:
        out = net(x.to(device), whole.src.to(device), whole.dst.to(device)).cpu()
    else:
        s = ClusterGCNSampler(whole.graph, clusters, 1, seed=seed, rank=0)
        out = None
        for b in range(s.num_batches):
            sub = s.sample(0, b)
            nodes = torch.from_numpy(sub.nodes)
            y = net(x[nodes].to(device), torch.from_numpy(sub.src).to(device),
                    torch.from_numpy(sub.dst).to(device)).cpu()
            if out is None:
                out = y.new_empty((whole.graph.num_nodes, y.shape[1]))
            out[nodes] = y
    net.train()
    return out


def make_loader(args, g, whole: WholeGraph, device, rank: int):
    """The sampler and loader: over the whole graph (parallel epochs, one rank) or over this
    rank's partition (a DistGraph: its DistTensors give the rows, by relabelled ID)."""
    src = whole.graph if g is None else g
    sampler = ClusterGCNSampler(src, args.clusters, args.clusters_per_batch,
                                method=args.cluster_method, seed=args.seed, rank=rank,
                                num_threads=1)
    if g is None:
        data = {"feat": whole.raw, "label": whole.label, "train": whole.masks["train_mask"]}
    else:
        data = {"feat": g.ndata["feat"], "label": g.ndata["label"],
                "train": g.ndata["train_mask"]}
    return sampler, ClusterGCNLoader(sampler, data, device=device, prefetch=args.prefetch)


def train_split(args, g, whole: WholeGraph, split: int, metric: str, device) -> dict:
    rank, world = tessera.get_rank(), tessera.get_world_size()
    sampler, loader = make_loader(args, g, whole, device, rank)
    mean = torch.from_numpy(whole.mean).to(device)
    std = torch.from_numpy(whole.std).to(device)
    steps_all = dist.all_gather_object(len(loader))
    steps = max(steps_all)
    torch.manual_seed(args.seed + split)
    num_classes = int(whole.label.max()) + 1
    net = DeepGCN(whole.feat.shape[1], args.hidden, num_classes, num_layers=args.layers,
                  dropout=args.dropout, t=args.t, learn_t=not args.fixed_t).to(device)
    dist.broadcast_parameters(net)
    sync = dist.gradient_sync_mode(device, args.grad_sync)
    if sync == "ddp" and len(set(steps_all)) > 1:
        sync = "host"  # a rank without a batch contributes zeros, which DDP cannot express
    model = dist.data_parallel(net, device, sync)
    lr = args.lr * lr_scale(args.lr_scale, world)
    opt = torch.optim.Adam(net.parameters(), lr=lr, weight_decay=args.weight_decay)
    val_nodes = np.nonzero(whole.masks["val_mask"][:, split])[0]
    test_nodes = np.nonzero(whole.masks["test_mask"][:, split])[0]
    hist, best = [], {"val": -math.inf, "epoch": -1, "test": float("nan")}
    train_wall = 0.0
    for epoch in range(args.epochs):
        loader.set_epoch(epoch)
        # Rank 0's evaluation of the previous epoch is not training time: the ranks start the
        # epoch's clock together (without this the others' first all-reduce would wait for it).
        dist.barrier()
        t0 = time.perf_counter()
        it = iter(loader)
        bar = Progress(steps, f"split {split} epoch {epoch:3d}",
                       enabled=not args.quiet and rank == 0)
        loss_sum, count, nodes_seen, edges_seen = 0.0, 0, 0, 0
        for step in range(steps):
            batch = next(it, None)
            opt.zero_grad(set_to_none=True)
            if batch is not None:
                x = (batch.ndata["feat"].float() - mean) / std
                y = batch.ndata["label"].reshape(-1).long()
                m = batch.ndata["train"]
                m = (m[:, split] if m.dim() == 2 else m).bool()
                logits = model(x, batch.src, batch.dst)
                if bool(m.any()):
                    loss = F.cross_entropy(logits[m], y[m])
                else:
                    loss = logits.sum() * 0.0
                loss.backward()
                loss_sum += float(loss.detach())
                count += 1
                nodes_seen += batch.num_nodes
                edges_seen += batch.num_edges
            if sync == "host":
                dist.all_reduce_gradients(net)  # the mean over the ranks' subgraphs
            opt.step()
            bar.update(loss_sum / max(count, 1))
        for _ in it:
            pass
        bar.close()
        epoch_s = time.perf_counter() - t0
        sums = dist.all_reduce(np.array([loss_sum, count, epoch_s], dtype=np.float64))
        # The job's training time of the epoch: the slowest rank's (max) is bounded by the
        # synchronous steps; the mean is reported, they differ by the final step only.
        train_wall += float(sums[2] / world)
        val = float("nan")
        if rank == 0 and ((epoch + 1) % args.eval_every == 0 or epoch == args.epochs - 1):
            logits = evaluate(net, whole, device, args.eval_clusters, args.seed + 7919)
            val = metric_of(logits, whole.label, val_nodes, metric)
            if val > best["val"]:
                best.update(val=val, epoch=epoch,
                            test=metric_of(logits, whole.label, test_nodes, metric))
        hist.append({"epoch": epoch, "loss": float(sums[0] / max(sums[1], 1)), "val": val,
                     "train_seconds": train_wall, "epoch_seconds": epoch_s,
                     "steps": steps, "nodes_per_rank": nodes_seen,
                     "edges_per_rank": edges_seen})
        if not args.quiet and rank == 0:
            shown = f"{val:6.2f}" if val == val else "     -"
            log(f"split {split} epoch {epoch:3d}  loss {hist[-1]['loss']:.4f}  val {metric} "
                f"{shown}  ({epoch_s:.2f}s, {steps} steps of {nodes_seen // max(count, 1)} "
                f"nodes, {edges_seen // max(count, 1)} edges)")
    temps = [float(c.t.detach()) for c in net.convs]
    log(f"split {split}: best val {metric} {best['val']:.2f} at epoch {best['epoch']}, test "
        f"{best['test']:.2f}; {train_wall:.1f}s of training; lr {lr:g}; gradients: {sync}; "
        f"learned t {min(temps):.2f}..{max(temps):.2f}")
    return {"history": hist, "best_val": best["val"], "best_epoch": best["epoch"],
            "test_at_best": best["test"], "lr": lr, "grad_sync": sync,
            "train_seconds": train_wall, "temperatures": temps,
            "clusters": sampler.num_parts}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", required=True, help="dataset folder (npy layout)")
    p.add_argument("--parallel-epochs", action="store_true",
                   help="every rank trains a full epoch of its own clustering of the whole "
                        "graph; gradients averaged every step")
    p.add_argument("--part-dir", default=None, help="partitions (without --parallel-epochs)")
    p.add_argument("--layers", type=int, default=7)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--t", type=float, default=1.0, help="initial softmax inverse temperature")
    p.add_argument("--fixed-t", action="store_true", help="do not learn the temperature")
    p.add_argument("--clusters", type=int, default=10,
                   help="clusters per epoch (per rank's graph)")
    p.add_argument("--clusters-per-batch", type=int, default=1)
    p.add_argument("--cluster-method", default="random", choices=["random", "metis"])
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--lr", type=float, default=0.01, help="learning rate at one rank")
    p.add_argument("--lr-scale", default="sqrt", choices=["sqrt", "linear", "none"],
                   help="lr = --lr x sqrt(P), x P or x 1 at P ranks")
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--eval-every", type=int, default=1)
    p.add_argument("--eval-clusters", type=int, default=5,
                   help="evaluate on the subgraphs of a fixed random clustering into this many "
                        "clusters (DeeperGCN's ogbn-proteins evaluation); 0: the whole graph")
    p.add_argument("--metric", default="auto", choices=["auto", "acc", "rocauc"])
    p.add_argument("--split", default="0", help="split index, comma-separated list, or 'all'")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--prefetch", type=int, default=2, help="batches sampled ahead")
    p.add_argument("--grad-sync", default="auto", choices=["auto", "ddp", "host"])
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: cores / ranks)")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    p.add_argument("--results", default=None, help="write the results as JSON here")
    p.add_argument("--quiet", action="store_true", help="one line per split")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.eval_clusters < 0:
        raise SystemExit(f"train_deepgcn.py: --eval-clusters must be >= 0, got "
                         f"{args.eval_clusters}")
    for name in ("layers", "hidden", "clusters", "clusters_per_batch", "epochs", "eval_every"):
        if getattr(args, name) < 1:
            raise SystemExit(f"train_deepgcn.py: --{name.replace('_', '-')} must be >= 1, got "
                             f"{getattr(args, name)}")
    if not os.path.isdir(args.dataset):
        raise SystemExit(f"train_deepgcn.py: --dataset {args.dataset}: not a folder")
    try:
        device = pick_device(args.device)
    except ValueError as e:
        raise SystemExit(f"train_deepgcn.py: {e}") from None
    tessera.initialize()
    rank, world = tessera.get_rank(), tessera.get_world_size()
    local = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    torch.set_num_threads(args.threads or max(1, (os.cpu_count() or 1) // local))
    with open(os.path.join(args.dataset, "meta.json")) as f:
        meta = json.load(f)
    metric = args.metric
    if metric == "auto":
        metric = "rocauc" if "ROC" in str(meta.get("metric", "")).upper() else "acc"
    t_load = time.time()
    whole = WholeGraph(args.dataset)  # every rank: evaluation (rank 0) and parallel epochs
    classes = int(whole.label.max()) + 1 if whole.label.size else 0
    if metric == "rocauc" and classes > 2:
        raise SystemExit(f"train_deepgcn.py: --metric rocauc scores two classes; "
                         f"{args.dataset} has {classes}"
                         + (" (rocauc was picked from its meta.json)" if args.metric == "auto"
                            else " (use --metric acc)"))
    g = None
    if world > 1 and not args.parallel_epochs:
        g = partitioned(args, world)
        if device.type == "cuda" and tessera._C.cuda_compiled:
            g.place_on_device(["feat"])
    splits = list(range(whole.num_splits)) if args.split == "all" else \
        [int(s) for s in str(args.split).split(",")]
    for s in splits:
        if not 0 <= s < whole.num_splits:
            raise SystemExit(f"train_deepgcn.py: --split {s} outside [0, {whole.num_splits})")
    mode = "parallel epochs" if world > 1 and args.parallel_epochs else \
        ("partitioned" if g is not None else "one rank")
    log(f"[deepgcn] {args.dataset}: {whole.graph.num_nodes} nodes, {whole.graph.num_edges} "
        f"edges; {world} rank(s) ({mode}) on {device}; ResGCN+ {args.layers} layers x "
        f"{args.hidden}; {args.clusters} {args.cluster_method} clusters, "
        f"{args.clusters_per_batch} per batch; lr {args.lr} x {lr_scale(args.lr_scale, world):g} "
        f"({args.lr_scale}); splits {splits}; loaded in {time.time() - t_load:.1f}s")
    results = {}
    for s in splits:
        results[str(s)] = train_split(args, g, whole, s, metric, device)
    if rank != 0:
        return 0
    tests = np.array([r["test_at_best"] for r in results.values()])
    vals = np.array([r["best_val"] for r in results.values()])
    log(f"[deepgcn] {world} rank(s): val {metric} {vals.mean():.2f} +- {vals.std():.2f}, test "
        f"{tests.mean():.2f} +- {tests.std():.2f} over {len(tests)} split(s)")
    if args.results:
        atomic_write_json({"dataset": args.dataset, "ranks": world, "mode": mode,
                           "commit": commit_id(__file__), "device": str(device),
                           "torch_threads": torch.get_num_threads(), "metric": metric,
                           "val_mean": float(vals.mean()), "test_mean": float(tests.mean()),
                           "test_std": float(tests.std()), "splits": results,
                           "args": vars(args), "command": " ".join(sys.argv)}, args.results)
    return 0


def partitioned(args, world: int):
    """Partitions the dataset into one part per rank (rank 0, once; reused) and loads this
    rank's partition."""
    name = os.path.basename(os.path.normpath(args.dataset))
    out = args.part_dir or os.path.join("out", "partitions", f"{name}-metis-p{world}")
    config = os.path.join(out, f"{name}.json")
    if tessera.get_rank() == 0:
        try:  # a refused reuse or a failed partitioning still releases the others
            if not reusable_partitions(config, args.dataset, world):
                tessera.partition_graph(args.dataset, name, world, out, num_hops=1,
                                        part_method="metis", symmetrize=True, seed=args.seed)
        finally:
            dist.barrier()
    else:
        dist.barrier()
    return tessera.DistGraph(name, part_config=config)


if __name__ == "__main__":
    sys.exit(main())
