#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Trains a GCN with VR-GCN's control-variate sampling (or plain neighbor sampling) and, for
comparison, with full neighborhoods; prints the test accuracy and sampled edges per epoch of
each.

    python python/examples/train_vrgcn.py --dataset data/cora --estimator cv --fanout 2
    python python/examples/train_vrgcn.py --dataset data/citeseer --estimator ns --fanout 2
    tessera launch --nproc-per-node 2 -- python python/examples/train_vrgcn.py --dataset data/cora
    python python/examples/train_vrgcn.py --dataset data/cora --sweep \\
        --results benchmarks/results/vrgcn/cora.json

``--estimator cv`` (VR-GCN, tessera.vrgcn): each step samples ``--fanout`` neighbors per node
and layer, corrects with the history of every neighbor kept in a DistTensor per layer, and
writes the fresh activations of the batch's nodes back into the histories. ``ns``: the same
sampled edges without histories (scaled neighbor sampling). The full-neighbor run (fanout -1)
is trained after it unless ``--no-full``; both report the test accuracy at the epoch of best
validation accuracy, evaluated with exact layer-wise inference.

Distributed: ``tessera launch --nproc-per-node P`` partitions the dataset into P parts (rank 0,
once, reused) and each rank trains on its part of every global batch (``--batch-size`` nodes
per step over all ranks); gradients are averaged after every step; histories live in
DistTensors that every rank reads and writes. ``--sweep`` trains cv at fanouts 1 and 2, ns at
1, 2, 5 and 10, and full, and with ``--results`` writes them (JSON) and plots test accuracy
against sampled edges per epoch next to it.
"""
from __future__ import annotations

import argparse
import math
import os
import platform
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
from tessera import vrgcn
from tessera.utils import (Progress, atomic_write_json, commit_id, log, pick_device, pyplot,
                           reusable_partitions)


def prepare_partitions(args, name: str, parts: int) -> str:
    out = args.part_dir or os.path.join("out", "partitions", f"{name}-vrgcn-p{parts}")
    config = os.path.join(out, f"{name}.json")
    if tessera.get_rank() == 0:
        try:
            if not reusable_partitions(config, args.dataset, parts):
                tessera.partition_graph(args.dataset, name, parts, out, num_hops=1,
                                        part_method="metis", balance_edges=parts > 1,
                                        symmetrize=True, seed=args.seed)
                log(f"[vrgcn] partitioned {args.dataset} into {parts} part(s): {config}")
        finally:
            dist.barrier()
    else:
        dist.barrier()
    return config


def mask_of(g, name: str, split: int) -> np.ndarray:
    m = np.asarray(g.ndata[name].numpy())
    if m.ndim == 2:
        m = m[:, split]
    return np.ascontiguousarray(m.astype(bool))


def train(args, g, deg, px, labels, masks, estimator: str, fanout: int, device,
          seed: int) -> dict:
    """One training run; returns its figures (the same on every rank)."""
    rank, world = tessera.get_rank(), tessera.get_world_size()
    train_mask, val_mask, test_mask = masks
    train_ids = np.nonzero(train_mask)[0].astype(np.int64)
    classes = int(labels.max()) + 1
    torch.manual_seed(seed)
    model = vrgcn.GCN(px.shape[1], args.hidden, classes, args.layers, args.dropout).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    tag = f"{estimator}{fanout}s{seed}"
    placement = "device" if device.type == "cuda" and tessera._C.cuda_compiled else "host"
    sampler = vrgcn.VRGCNSampler(g, deg, px, args.layers, args.hidden, fanout, estimator,
                                 placement=placement, tag=tag)
    y = torch.as_tensor(labels, dtype=torch.int64)
    label = ("full" if fanout == -1 else f"{estimator} fanout {fanout}") + f" seed {seed}"
    best = {"val": -math.inf, "test": float("nan"), "epoch": -1}  # NaN epochs never best
    history = []
    steps = -(-len(train_ids) // args.batch_size)
    t0 = time.time()
    for epoch in range(args.epochs):
        model.train()
        sampler.reset_stats()
        perm = np.random.default_rng([seed, epoch]).permutation(train_ids)
        bar = Progress(steps, f"{label} epoch {epoch:3d}", enabled=args.progress and rank == 0)
        total = 0.0
        for j in range(steps):
            mine = np.array_split(perm[j * args.batch_size:(j + 1) * args.batch_size],
                                  world)[rank]
            opt.zero_grad()
            if len(mine):
                logits = sampler.forward(model, mine, seed, epoch, j * world + rank, device)
                loss = F.cross_entropy(logits, y[mine].to(device))
                loss.backward()
                total += loss.item()
            dist.all_reduce_gradients(model)
            opt.step()
            bar.update(total / (j + 1))
        bar.close()
        st = np.array([sampler.stats["sampled_edges"], sampler.stats["history_edges"]],
                      dtype=np.float64)
        dist.all_reduce(st)
        if (epoch + 1) % args.eval_every == 0 or epoch + 1 == args.epochs:
            val, test = vrgcn.evaluate(g, model, px, deg, [val_mask, test_mask], labels,
                                       device=device, metric=args.metric)
            if val > best["val"]:
                best = {"val": val, "test": test, "epoch": epoch}
            history.append({"epoch": epoch, "loss": total / max(steps, 1), "val": val,
                            "test": test, "sampled_edges": int(st[0]),
                            "history_edges": int(st[1])})
            if args.verbose:
                log(f"[vrgcn] {label} epoch {epoch:3d} loss {total / max(steps, 1):.4f} "
                    f"val {val:.2f} test {test:.2f} sampled edges {int(st[0])}")
    seconds = time.time() - t0
    edges = float(np.mean([h["sampled_edges"] for h in history]))
    hist_edges = float(np.mean([h["history_edges"] for h in history]))
    log(f"[vrgcn] {label}: test {args.metric} {best['test']:.2f}% (best val {best['val']:.2f}% at "
        f"epoch {best['epoch']}), sampled edges per epoch {edges:,.0f}"
        + (f" (+ {hist_edges:,.0f} history rows aggregated)" if estimator == "cv" and
           fanout != -1 else "") + f", {seconds:.1f}s")
    return {"estimator": "full" if fanout == -1 else estimator, "fanout": fanout, "seed": seed,
            "test": best["test"], "val": best["val"], "best_epoch": best["epoch"],
            "sampled_edges_per_epoch": edges, "history_edges_per_epoch": hist_edges,
            "seconds": seconds, "history": history}


def plot(results: dict, path: str) -> None:
    plt = pyplot("vrgcn")
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    runs = results["runs"]
    for est, marker in (("cv", "o"), ("ns", "s"), ("full", "*")):
        pts = sorted((r["sampled_edges_per_epoch"], r["test"], r["fanout"], r.get("test_std", 0))
                     for r in runs if r["estimator"] == est)
        if not pts:
            continue
        xs, ys, fs, es = zip(*pts)
        name = {"cv": "VR-GCN (control variates)", "ns": "neighbor sampling",
                "full": "full neighbors"}[est]
        ax.errorbar(xs, ys, yerr=es, marker=marker, ms=9 if est == "full" else 6, label=name,
                    linestyle="-" if est != "full" else "none", capsize=3)
        for x, yv, f in zip(xs, ys, fs):
            if f != -1:
                ax.annotate(f"D={f}", (x, yv), textcoords="offset points", xytext=(4, -10),
                            fontsize=8)
    full = [r["test"] for r in runs if r["estimator"] == "full"]
    if full:
        ax.axhspan(full[0] - 1, full[0] + 1, color="grey", alpha=0.15,
                   label="full neighbors +- 1 point")
    ax.set_xscale("log")
    ax.set_xlabel("sampled edges per epoch (log)")
    ax.set_ylabel(f"test {results['metric']} (%)")
    ax.set_title(f"{results['dataset']}: {results['layers']}-layer GCN, {results['ranks']} "
                 f"rank(s), {results['epochs']} epochs, mean of {results['seeds']} seed(s)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=120)
    print(f"[vrgcn] plot: {path}", flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="data/cora", help="npy or OGB-layout dataset folder")
    p.add_argument("--estimator", default="cv", choices=vrgcn.ESTIMATORS)
    p.add_argument("--fanout", type=int, default=2, help="sampled neighbors per node and layer")
    p.add_argument("--no-full", action="store_true", help="skip the full-neighbor run")
    p.add_argument("--sweep", action="store_true",
                   help="cv at fanouts 1, 2; ns at 1, 2, 5, 10; full")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--epochs", type=int, default=100)
    p.add_argument("--batch-size", type=int, default=32, help="seed nodes per step, all ranks")
    p.add_argument("--eval-every", type=int, default=1)
    p.add_argument("--split", type=int, default=0, help="column of [N, S] split masks")
    p.add_argument("--metric", default="accuracy", choices=["accuracy", "roc_auc"],
                   help="the test metric, also the one the best validation epoch is chosen by")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--seeds", type=int, default=1,
                   help="runs per configuration (seeds --seed, --seed + 1, ...): mean and std")
    p.add_argument("--part-dir", default=None)
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--results", default=None, help="write the figures to this JSON file")
    p.add_argument("--plot", default=None,
                   help="plot path (default with --results: the results' .png; drawn without "
                        "--results too)")
    p.add_argument("--machine", default=platform.node(), help="machine name in the results")
    p.add_argument("--verbose", action="store_true", help="one line per evaluated epoch")
    p.add_argument("--progress", action="store_true", help="a progress bar per epoch")
    args = p.parse_args(argv)
    for what in ("epochs", "batch_size", "hidden", "eval_every", "seeds"):
        if getattr(args, what) < 1:
            p.error(f"--{what.replace('_', '-')} must be >= 1")
    if args.layers < 2:
        p.error("--layers must be >= 2")
    if args.fanout == 0 or args.fanout < -1:
        p.error("--fanout must be -1 or positive")
    if not os.path.isdir(args.dataset):
        p.error(f"--dataset {args.dataset}: no such folder")
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        device = pick_device(args.device)
    except ValueError as e:
        p.error(str(e))
    tessera.initialize()
    world = tessera.get_world_size()
    name = os.path.basename(os.path.normpath(args.dataset))
    config = prepare_partitions(args, name, world)
    g = tessera.DistGraph(name, part_config=config)
    labels = np.asarray(g.ndata["label"].numpy(), dtype=np.int64).reshape(-1)
    masks = [mask_of(g, m, args.split) for m in ("train_mask", "val_mask", "test_mask")]
    for m in masks:
        m &= labels >= 0
    classes = int(labels.max()) + 1 if labels.size else 0
    if args.metric == "roc_auc" and classes > 2:
        p.error(f"--metric roc_auc scores two classes; {name} has {classes} (use accuracy)")
    deg, px = vrgcn.precompute(g)
    log(f"[vrgcn] {name}: {g.num_nodes()} nodes, {g.num_edges()} edges, {px.shape[1]} "
        f"features; {world} rank(s) on {device}; {args.layers} layers, hidden {args.hidden}, "
        f"batch {args.batch_size}, {args.epochs} epochs")
    if args.sweep:
        plan = [("cv", 1), ("cv", 2), ("ns", 1), ("ns", 2), ("ns", 5), ("ns", 10), ("ns", -1)]
    else:
        plan = [(args.estimator, args.fanout)] + ([] if args.no_full else [("ns", -1)])
    runs = []
    for est, f in plan:
        per_seed = [train(args, g, deg, px, labels, masks, est, f, device, args.seed + k)
                    for k in range(args.seeds)]
        tests = np.array([r["test"] for r in per_seed])
        runs.append({"estimator": per_seed[0]["estimator"], "fanout": f,
                     "test": float(tests.mean()), "test_std": float(tests.std()),
                     "tests": tests.tolist(),
                     "sampled_edges_per_epoch": float(np.mean(
                         [r["sampled_edges_per_epoch"] for r in per_seed])),
                     "history_edges_per_epoch": float(np.mean(
                         [r["history_edges_per_epoch"] for r in per_seed])),
                     "seeds": per_seed})
    full = [r for r in runs if r["estimator"] == "full"]
    for r in runs:
        if r["estimator"] == "full":
            continue
        gap = f", {r['test'] - full[0]['test']:+.2f} points against full" if full else ""
        log(f"[vrgcn] result {r['estimator']} fanout {r['fanout']}: test {r['test']:.2f}% "
            f"+- {r['test_std']:.2f} over {args.seeds} seed(s), "
            f"{r['sampled_edges_per_epoch']:,.0f} sampled edges per epoch{gap}")
    if full:
        log(f"[vrgcn] result full: test {full[0]['test']:.2f}% +- {full[0]['test_std']:.2f} "
            f"over {args.seeds} seed(s), "
            f"{full[0]['sampled_edges_per_epoch']:,.0f} sampled edges per epoch")
    if (args.results or args.plot) and tessera.get_rank() == 0:
        results = {"dataset": name, "ranks": world, "layers": args.layers, "metric": args.metric,
                   "epochs": args.epochs, "batch_size": args.batch_size, "seeds": args.seeds,
                   "commit": commit_id(__file__),
                   "machine": args.machine, "device": str(device),
                   "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
                   "args": vars(args), "runs": runs}
        if args.results:
            atomic_write_json(results, args.results)
            print(f"[vrgcn] results: {args.results}", flush=True)
        plot(results, args.plot or os.path.splitext(args.results)[0] + ".png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
