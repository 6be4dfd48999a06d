#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Full-graph message passing with ``tessera.update_all``: SGC and GCN inference.

    python python/examples/full_graph.py --dataset data/cora --model sgc
    python -m tessera launch --nproc-per-node 2 -- \\
        python python/examples/full_graph.py --dataset data/citeseer --model sgc
    python python/examples/full_graph.py --dataset data/cora --model gcn

Both models propagate with the symmetric normalization of the graph with self loops,
``A_hat = D^-1/2 (A + I) D^-1/2`` (D: in-degree + 1), computed over the partitioned graph as
``A_hat h = n * (update_all(g, n * h) + n * h)`` with ``n = D^-1/2`` and the degree itself from
``update_all`` of a column of ones. Every rank computes only its own rows; each ``update_all``
exchanges the rows of remote in-neighbors once.

* ``--model sgc`` (Wu et al., ICML 2019): features row-normalized, propagated K times
  (``--k 2``), then a logistic regression on the training nodes (Adam, lr 0.2, 100 epochs, no
  dropout), its weight decay picked on the validation nodes from ``--weight-decays``; prints the
  test accuracy (published: Cora 81.0, Citeseer 71.9). The propagated features are read by
  every rank in original node order, so every rank, at any world size, trains the same model.
* ``--model gcn`` (Kipf & Welling): a 2-layer GCN (16 hidden, dropout 0.5) trained full-batch
  in PyTorch on the whole graph, then **full-graph inference over the partitions**
  (``A_hat relu(A_hat X W1) W2``, two update_all per layer as above); prints the test accuracy
  of the distributed inference and its largest difference to PyTorch's logits.

Rank 0 partitions the dataset (``--part-method metis|random``, one part per rank) under
``--part-dir`` (default ``out/partitions/<name>-<method>-p<P>``). ``--results FILE`` writes the
figures as JSON. Rank 0 logs each phase with its time: every propagation step (SGC), every
tenth of the GCN's training epochs (loss, validation accuracy) and every inference layer.
"""
from __future__ import annotations

import argparse
import json
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

from tessera import distributed as dist
from tessera.utils import reusable_partitions


def log(msg: str) -> None:
    if tessera.get_rank() == 0:
        print(msg, flush=True)


def prepare_partitions(args, world: int) -> str:
    name = os.path.basename(os.path.normpath(args.dataset))
    out = args.part_dir or os.path.join("out", "partitions", f"{name}-{args.part_method}-p{world}")
    config = os.path.join(out, f"{name}.json")
    if tessera.get_rank() == 0:
        try:
            if args.repartition or not reusable_partitions(config, args.dataset, world):
                tessera.partition_graph(args.dataset, name, world, out, num_hops=1,
                                        part_method=args.part_method, seed=args.seed,
                                        symmetrize=True)
                print(f"[full-graph] partitioned {args.dataset} into {world} part(s): {config}",
                      flush=True)
        finally:
            dist.barrier()
    else:
        dist.barrier()
    return config


def new_tensor(g, name: str, cols: int, local_rows: np.ndarray):
    """A float32 node DistTensor [N, cols] whose local rows are `local_rows` (collective)."""
    t = tessera.DistTensor((g.num_nodes(), cols), np.float32, name,
                           part_policy=g.get_node_partition_policy())
    t.local_partition()[...] = local_rows.reshape(-1, cols)
    g.barrier()  # every rank's rows are in place before anyone reads them
    return t


class Propagation:
    """A_hat h over the partitioned graph, on this rank's rows."""

    def __init__(self, g):
        self.g = g
        self.lo, self.hi = g.ndata["label"].local_range()
        ones = new_tensor(g, "full-graph:ones", 1, np.ones((self.hi - self.lo, 1), np.float32))
        deg = tessera.update_all(g, ones, "copy_u", "sum").local_partition().reshape(-1)
        self.norm = (1.0 / np.sqrt(deg.astype(np.float64) + 1.0)).astype(np.float32)[:, None]
        self.calls = 0

    def __call__(self, local_h: np.ndarray) -> np.ndarray:
        self.calls += 1
        y = (self.norm * local_h).astype(np.float32)
        t = new_tensor(self.g, f"full-graph:h{self.calls}", y.shape[1], y)
        agg = tessera.update_all(self.g, t, "copy_u", "sum").local_partition()
        return self.norm * (agg.reshape(y.shape) + y)


def read_all(g, local: np.ndarray, name: str, orig: np.ndarray) -> np.ndarray:
    """Every rank's rows of `local`, in original node order (collective)."""
    t = new_tensor(g, name, local.shape[1], local)
    rows = t.gather(np.arange(g.num_nodes(), dtype=np.int64))
    out = np.empty_like(rows)
    out[orig] = rows
    return out


def masks(g, orig: np.ndarray) -> dict:
    n = g.num_nodes()
    out = {}
    for key in ("train_mask", "val_mask", "test_mask", "label"):
        rows = np.asarray(g.ndata[key].gather(np.arange(n, dtype=np.int64)))
        if rows.ndim > 1 and key != "label":
            rows = rows[:, 0]
        v = np.empty_like(rows)
        v[orig] = rows
        out[key] = v
    return out


def accuracy(logits: torch.Tensor, y: torch.Tensor, m: torch.Tensor) -> float:
    return float((logits[m].argmax(1) == y[m]).float().mean()) * 100.0


def train_sgc(feats: np.ndarray, data: dict, args) -> dict:
    x = torch.from_numpy(feats)
    y = torch.from_numpy(data["label"].astype(np.int64))
    tr, va, te = (torch.from_numpy(data[k].astype(bool)) for k in
                  ("train_mask", "val_mask", "test_mask"))
    classes = int(y.max()) + 1
    best = None
    t0 = time.perf_counter()
    for wd in args.weight_decays:
        torch.manual_seed(args.seed)
        model = torch.nn.Linear(x.shape[1], classes)
        opt = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=wd)
        for _ in range(args.epochs):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x[tr]), y[tr])
            loss.backward()
            opt.step()
        with torch.no_grad():
            logits = model(x)
        r = {"weight_decay": wd, "val_acc": accuracy(logits, y, va),
             "test_acc": accuracy(logits, y, te)}
        log(f"[sgc] weight decay {wd:g}: val {r['val_acc']:.2f}% test {r['test_acc']:.2f}% "
            f"({time.perf_counter() - t0:.1f}s)")
        if best is None or r["val_acc"] > best["val_acc"]:
            best = r
    return best


def train_gcn(feats: np.ndarray, edges: tuple, data: dict, args):
    """A 2-layer GCN trained full-batch on the whole graph (original IDs); returns its
    weights and logits."""
    n = feats.shape[0]
    src, dst = edges
    deg = np.bincount(dst, minlength=n).astype(np.float64) + 1.0
    loops = np.arange(n)
    rows = np.concatenate([dst, loops])
    cols = np.concatenate([src, loops])
    vals = (1.0 / np.sqrt(deg[rows] * deg[cols])).astype(np.float32)
    a_hat = torch.sparse_coo_tensor(np.stack([rows, cols]), vals, (n, n)).coalesce()
    x = torch.from_numpy(feats)
    y = torch.from_numpy(data["label"].astype(np.int64))
    tr, va, te = (torch.from_numpy(data[k].astype(bool)) for k in
                  ("train_mask", "val_mask", "test_mask"))
    torch.manual_seed(args.seed)
    classes = int(y.max()) + 1
    w1 = torch.nn.Linear(x.shape[1], args.hidden, bias=False)
    w2 = torch.nn.Linear(args.hidden, classes, bias=False)
    params = list(w1.parameters()) + list(w2.parameters())
    opt = torch.optim.Adam([{"params": w1.parameters(), "weight_decay": 5e-4},
                            {"params": w2.parameters(), "weight_decay": 0.0}], lr=0.01)

    def forward(train: bool):
        h = torch.nn.functional.dropout(x, 0.5, train)
        h = torch.relu(torch.sparse.mm(a_hat, w1(h)))
        h = torch.nn.functional.dropout(h, 0.5, train)
        return torch.sparse.mm(a_hat, w2(h))

    best, state = -1.0, None
    every = max(1, args.gcn_epochs // 10)
    t0 = time.perf_counter()
    for epoch in range(1, args.gcn_epochs + 1):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(forward(True)[tr], y[tr])
        loss.backward()
        opt.step()
        with torch.no_grad():
            logits = forward(False)
        acc = accuracy(logits, y, va)
        if acc > best:
            best, state = acc, [p.detach().clone() for p in params]
        if epoch % every == 0 or epoch == args.gcn_epochs:
            log(f"[gcn] epoch {epoch}/{args.gcn_epochs}: loss {loss.item():.4f}, val {acc:.1f}% "
                f"(best {best:.1f}%), {time.perf_counter() - t0:.1f}s")
    with torch.no_grad():
        for p, s in zip(params, state):
            p.copy_(s)
        logits = forward(False)
    return w1.weight.detach().numpy().T.copy(), w2.weight.detach().numpy().T.copy(), logits, \
        {"val_acc": accuracy(logits, y, va), "test_acc": accuracy(logits, y, te)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dataset", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                     "data", "cora"))
    p.add_argument("--model", choices=["sgc", "gcn"], default="sgc")
    p.add_argument("--part-method", choices=["metis", "random"], default="metis")
    p.add_argument("--part-dir", default=None)
    p.add_argument("--repartition", action="store_true")
    p.add_argument("--k", type=int, default=2, help="SGC propagation steps")
    p.add_argument("--epochs", type=int, default=100)
    p.add_argument("--lr", type=float, default=0.2)
    p.add_argument("--weight-decays", type=float, nargs="+",
                   default=[1e-6, 5e-6, 1e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3])
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--gcn-epochs", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--results", default=None)
    args = p.parse_args(argv)
    if args.k < 1:
        p.error(f"--k must be at least 1, got {args.k}")
    if not os.path.isdir(args.dataset):
        p.error(f"--dataset {args.dataset} is not a dataset folder")
    torch.set_num_threads(1)  # the same model on every rank and at every world size

    tessera.initialize()
    world = tessera.get_world_size()
    config = prepare_partitions(args, world)
    g = tessera.DistGraph("", part_config=config)
    lo, hi = g.ndata["label"].local_range()
    if not g.is_distributed:
        p.error(f"{config} has a part per rank only when launched with one rank per part")
    orig = np.asarray(g.orig_nids())
    data = masks(g, orig)
    feat = np.asarray(g.ndata["feat"].gather(np.arange(lo, hi, dtype=np.int64)), np.float32)
    log(f"[full-graph] {g.num_nodes()} nodes, {g.num_edges()} edges, {feat.shape[1]} features "
        f"at {world} rank(s); rank 0 holds rows [{lo}, {hi})")
    g.barrier()  # time the propagation alone, not waiting for slower ranks to get here
    t0 = time.perf_counter()
    prop = Propagation(g)
    log(f"[full-graph] degrees: {time.perf_counter() - t0:.3f}s")
    result = {"dataset": os.path.basename(os.path.normpath(args.dataset)), "model": args.model,
              "world_size": world, "part_method": args.part_method}
    if args.model == "sgc":
        rs = feat.sum(1, keepdims=True)
        h = feat / np.where(rs > 0, rs, 1)  # row-normalized, as in SGC's preprocessing
        for step in range(1, args.k + 1):
            t_step = time.perf_counter()
            h = prop(h)
            log(f"[sgc] propagation step {step}/{args.k}: {time.perf_counter() - t_step:.3f}s")
        prop_s = time.perf_counter() - t0
        feats = read_all(g, h.astype(np.float32), "full-graph:sgc", orig)
        best = train_sgc(feats, data, args)
        result.update(k=args.k, propagate_seconds=prop_s, **best)
        log(f"[sgc] {result['dataset']} K={args.k} at {world} rank(s) ({args.part_method}): "
            f"test accuracy {best['test_acc']:.1f}% (weight decay {best['weight_decay']:g}, "
            f"val {best['val_acc']:.1f}%); propagation {prop_s:.3f}s")
    else:
        full = read_all(g, feat, "full-graph:x", orig)
        ep = np.asarray(g.runtime_graph.edge_endpoints.read(
            np.arange(g.num_edges(), dtype=np.int64)))
        edges = (orig[ep[:, 0]], orig[ep[:, 1]])
        log(f"[gcn] training {args.gcn_epochs} epochs in PyTorch on the whole graph (every rank "
            "the same model)")
        w1, w2, ref_logits, ref = train_gcn(full, edges, data, args)
        g.barrier()
        t0 = time.perf_counter()
        h = np.maximum(prop(feat @ w1), 0)
        log(f"[gcn] inference layer 1/2 over the partitions: {time.perf_counter() - t0:.3f}s")
        t1 = time.perf_counter()
        logits_local = prop(h @ w2).astype(np.float32)
        log(f"[gcn] inference layer 2/2 over the partitions: {time.perf_counter() - t1:.3f}s")
        infer_s = time.perf_counter() - t0
        logits = torch.from_numpy(read_all(g, logits_local, "full-graph:logits", orig))
        y = torch.from_numpy(data["label"].astype(np.int64))
        te = torch.from_numpy(data["test_mask"].astype(bool))
        diff = float((logits - ref_logits).abs().max())
        result.update(test_acc=accuracy(logits, y, te), torch_test_acc=ref["test_acc"],
                      max_abs_diff_to_torch=diff, inference_seconds=infer_s)
        log(f"[gcn] {result['dataset']} at {world} rank(s) ({args.part_method}): distributed "
            f"full-graph inference test accuracy {result['test_acc']:.1f}% (PyTorch on the "
            f"whole graph: {ref['test_acc']:.1f}%, largest logit difference {diff:.2e}); "
            f"inference {infer_s:.3f}s")
    if args.results and tessera.get_rank() == 0:
        with open(args.results, "w") as f:
            json.dump(result, f, indent=1)
    tessera.exit_client()
    return 0


if __name__ == "__main__":
    sys.exit(main())
