#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Trains GraphSAGE for link prediction on held-out edges, against a random baseline.

    python python/examples/train_link.py --dataset data/cora \\
        --out-json out/link_cora.json --plot out/link_cora.png
    python -m tessera launch --nproc-per-node 2 -- python python/examples/train_link.py ...

The script is the one DGL users know for link prediction (partition_graph, DistGraph,
DistEdgeDataLoader with a uniform negative sampler and ``exclude="reverse_id"``, SAGEConv):

1. The undirected edges of the dataset (self loops and duplicates dropped) are split, seeded,
   into train / val / test (85 / 5 / 10 % by default). Only the train edges enter the graph
   that messages pass over: it is built symmetrized (input edge i and its reverse E + i) and
   partitioned into one part, which relabels nodes and edges; the reverse-edge map is carried
   into the new edge IDs. Under ``tessera launch`` with P ranks, rank 0 partitions the
   training graph into P parts (the others wait) and rank r loads part r.
2. Every edge of that graph is a positive; each comes with ``--negatives`` uniform negative
   pairs. The batch's own edges and their reverses are left out of its message-flow blocks, so
   the model cannot read the answer off the graph. GraphSAGE gives node embeddings, an MLP on
   h_u * h_v (or, with ``--predictor dot``, the dot product) scores a pair, the loss is binary
   cross-entropy. With P
   ranks every rank passes every edge to the distributed loader with the global batch order
   and takes batch_size / P positives per step (global batches j = sP .. sP + P - 1 make step
   s), gradients are averaged over the ranks after backward, and exclusion is the distributed
   sampler's post-filter (docs/dist.md).
3. Validation and test pairs are the held-out edges and as many (``--eval-negatives`` times)
   sampled node pairs that are edges in no split. Embeddings come from full-neighbor
   layer-wise inference over the training graph (distributed: each rank computes the
   embeddings of the nodes it owns into a DistTensor, then every rank reads the rows of the
   pairs' endpoints and computes the same figures). Metrics: ROC-AUC and Hits@K (OGB's: the
   fraction of positive pairs scored above the K-th highest negative score), next to the same
   metrics of seeded random scores on the same pairs. The test figures reported are those of
   the epoch with the best validation ROC-AUC.

``--device auto`` (default) trains on a GPU when torch sees one, else on the CPU (under a
launcher rank r of a node takes ``cuda:<LOCAL_RANK % GPUs>``): model, predictor, blocks, pair
graphs and each batch's input features live there; gradients are all-reduced through host
memory.
"""
from __future__ import annotations

import argparse
import datetime
import math
import os
import platform
import shutil
import sys
import tempfile
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
from tessera.metrics import hits_at_k, roc_auc  # noqa: F401 (tests use them from here)
from tessera.nn import GraphSAGE
from tessera.utils import (Progress, atomic_write_json, commit_id, log,
                           per_rank_batch, pick_device, pyplot)

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


# --- small utilities -------------------------------------------------------------------------
# --- metrics ---------------------------------------------------------------------------------
def metrics(pos: np.ndarray, neg: np.ndarray, k: int) -> dict:
    return {"roc_auc": roc_auc(pos, neg), f"hits@{k}": hits_at_k(pos, neg, k)}


# --- data ------------------------------------------------------------------------------------
class SplitError(ValueError):
    pass


def undirected_pairs(ds) -> np.ndarray:
    """The dataset's edges as unique undirected pairs (u < v), self loops dropped; [M, 2]."""
    g = ds.graph
    indptr = np.asarray(g.indptr, dtype=np.int64)
    dst = np.repeat(np.arange(g.num_nodes, dtype=np.int64), np.diff(indptr))
    src = np.asarray(g.indices, dtype=np.int64)
    keep = src != dst
    lo, hi = np.minimum(src[keep], dst[keep]), np.maximum(src[keep], dst[keep])
    key = np.unique(lo * g.num_nodes + hi)
    return np.stack([key // g.num_nodes, key % g.num_nodes], axis=1)


def split_edges(pairs: np.ndarray, val_frac: float, test_frac: float, seed: int):
    """Seeded random split of the pairs into (train, val, test)."""
    m = len(pairs)
    n_val, n_test = int(round(val_frac * m)), int(round(test_frac * m))
    if n_val < 1 or n_test < 1 or m - n_val - n_test < 1:
        raise SplitError(f"{m} undirected edges cannot be split into train / val / test with "
                         f"--val-frac {val_frac} and --test-frac {test_frac} (gives "
                         f"{m - n_val - n_test} / {n_val} / {n_test})")
    perm = np.random.default_rng(seed).permutation(m)
    return (pairs[np.sort(perm[n_val + n_test:])], pairs[np.sort(perm[:n_val])],
            pairs[np.sort(perm[n_val:n_val + n_test])])


def sample_non_edges(num_nodes: int, count: int, forbidden: set, rng) -> np.ndarray:
    """``count`` distinct pairs (u < v) that are not in ``forbidden`` (keys u * N + v)."""
    possible = num_nodes * (num_nodes - 1) // 2 - len(forbidden)
    if count > possible:
        raise SplitError(f"cannot draw {count} non-edges from a graph with only {possible}")
    out, seen = [], set()
    while len(out) < count:
        u = rng.integers(0, num_nodes, size=2 * (count - len(out)) + 16)
        v = rng.integers(0, num_nodes, size=len(u))
        for a, b in zip(np.minimum(u, v).tolist(), np.maximum(u, v).tolist()):
            key = a * num_nodes + b
            if a == b or key in forbidden or key in seen:
                continue
            seen.add(key)
            out.append((a, b))
            if len(out) == count:
                break
    return np.asarray(out, dtype=np.int64).reshape(-1, 2)


def prepare(args, workdir: str) -> dict:
    """Loads the dataset, splits its edges, partitions the training graph (one part per rank,
    written by rank 0) and returns everything in the partition's (relabelled) node and edge
    IDs. Every rank reads and splits the dataset (seeded: the same split everywhere)."""
    try:
        ds = tessera.load_dataset(args.dataset)
    except (OSError, ValueError, RuntimeError, IndexError) as e:
        raise SplitError(f"cannot read dataset {args.dataset!r}: {e}") from None
    if "feat" not in ds.ndata:
        raise SplitError(f"dataset {args.dataset!r} has no node features 'feat' "
                         f"(has {sorted(ds.ndata)})")
    n = ds.num_nodes
    pairs = undirected_pairs(ds)
    train, val, test = split_edges(pairs, args.val_frac, args.test_frac, args.split_seed)
    rng = np.random.default_rng(args.split_seed + 1)
    forbidden = set((pairs[:, 0] * n + pairs[:, 1]).tolist())
    n_val_neg = int(round(args.eval_negatives * len(val)))
    n_test_neg = int(round(args.eval_negatives * len(test)))
    negs = sample_non_edges(n, n_val_neg + n_test_neg, forbidden, rng)
    val_neg, test_neg = negs[:n_val_neg], negs[n_val_neg:]

    # Training graph: the train pairs, symmetrized (input edge i reverses edge E + i), in one
    # part per rank; rank 0 writes it while the others wait.
    name = os.path.basename(os.path.normpath(args.dataset)) or "graph"
    world = tessera.get_world_size()
    if tessera.get_rank() == 0:
        try:
            train_ds = tessera.graph_from_arrays((train[:, 0], train[:, 1]), n,
                                                 ndata={"feat": ds.ndata["feat"]},
                                                 name=f"{name}-link-train", symmetrize=True)
            t0 = time.time()
            tessera.partition_graph(train_ds, name, world, workdir,
                                    part_method="random" if world == 1 else args.part_method,
                                    seed=args.seed)
            print(f"[link] partitioned the training graph ({train_ds.num_edges} directed edges) "
                  f"into {world} part(s) in {time.time() - t0:.2f}s: {workdir}", flush=True)
        finally:
            if world > 1:
                dist.barrier()
    else:
        dist.barrier()
    g = tessera.DistGraph(name, part_config=os.path.join(workdir, f"{name}.json"))

    # Original -> new node IDs (the DistGraph's new_nid table) and the reverse of every new
    # edge ID (input edges i and E + i of the symmetrized training graph).
    def new_ids(p: np.ndarray) -> np.ndarray:
        flat = np.ascontiguousarray(p.reshape(-1), dtype=np.int64)
        return np.asarray(g.runtime_graph.new_nid.read(flat)).reshape(p.shape)

    reverse_eids = np.asarray(tessera.dataloading.symmetrized_reverse_eids(g))
    if (reverse_eids < 0).any():
        raise SplitError("the training graph has edges without a reverse")
    return {
        "g": g, "reverse_eids": reverse_eids, "num_nodes": n,
        "val": (new_ids(val), new_ids(val_neg)), "test": (new_ids(test), new_ids(test_neg)),
        "split": {"num_nodes": n, "undirected_edges": len(pairs), "train_edges": len(train),
                  "val_edges": len(val), "test_edges": len(test),
                  "val_negatives": len(val_neg), "test_negatives": len(test_neg),
                  "train_graph_directed_edges": int(g.num_edges()),
                  "split_seed": args.split_seed},
    }


class Features:
    """Reads input features through the DistTensor (row-normalized with ``row``)."""

    def __init__(self, g, mode: str):
        self.t = g.ndata["feat"]
        self.mode = mode

    @property
    def dim(self) -> int:
        return int(self.t.shape[1])

    def __call__(self, ids) -> torch.Tensor:
        x = self.t[ids].to(torch.float32)
        if self.mode == "row":
            x = x / x.abs().sum(1, keepdim=True).clamp(min=1e-12)
        return x


# --- model -----------------------------------------------------------------------------------
class ScorePredictor(torch.nn.Module):
    """Score of a node pair from its embeddings: the dot product, or an MLP on h_u * h_v (the
    predictor of DGL's and OGB's GraphSAGE link-prediction examples)."""

    def __init__(self, dim: int, kind: str):
        super().__init__()
        self.kind = kind
        if kind == "mlp":
            self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, dim), torch.nn.ReLU(),
                                           torch.nn.Linear(dim, 1))

    def forward(self, h_u: torch.Tensor, h_v: torch.Tensor) -> torch.Tensor:
        if self.kind == "mlp":
            return self.mlp(h_u * h_v).squeeze(-1)
        return (h_u * h_v).sum(-1)


@torch.no_grad()
def pair_scores(pred: ScorePredictor, h, pairs: np.ndarray,
                device: torch.device = torch.device("cpu")) -> np.ndarray:
    """Scores of node pairs on ``device``; ``h`` is a tensor or a DistTensor: the endpoints'
    rows are read once (a DistTensor returns them on the device of the IDs)."""
    pred.eval()
    nodes, inv = np.unique(pairs, return_inverse=True)
    rows = h[torch.from_numpy(nodes).to(device)]
    idx = torch.from_numpy(inv.reshape(pairs.shape).astype(np.int64)).to(device)
    return pred(rows[idx[:, 0]], rows[idx[:, 1]]).cpu().numpy().astype(np.float64)


def evaluate(model, pred, g, feats, data: dict, which: str, args) -> dict:
    h = model.inference(g, feats, args.eval_batch_size, name="link-inference")
    pos, neg = data[which]
    device = next(model.parameters()).device
    return metrics(pair_scores(pred, h, pos, device), pair_scores(pred, h, neg, device),
                   args.hits_k)


def random_baseline(data: dict, which: str, args) -> dict:
    """The metrics of seeded uniform random scores on the same pairs."""
    pos, neg = data[which]
    rng = np.random.default_rng([args.seed, 7, 0 if which == "val" else 1])
    return metrics(rng.random(len(pos)), rng.random(len(neg)), args.hits_k)


# --- training ------------------------------------------------------------------------------------
def train(args, data: dict, device: torch.device) -> dict:
    g = data["g"]
    world = tessera.get_world_size()
    feats = Features(g, args.feat_norm)
    sampler = tessera.dataloading.as_edge_prediction_sampler(
        tessera.NeighborSampler(args.fanouts), exclude="reverse_id",
        reverse_eids=data["reverse_eids"],
        negative_sampler=tessera.dataloading.negative_sampler.Uniform(args.negatives))
    train_eids = np.arange(g.num_edges(), dtype=np.int64)  # both directions of every pair
    # Several ranks: every rank passes every edge, global batches dealt round-robin (the same
    # batches for any P); one rank keeps the standalone loader.
    loader = tessera.DistEdgeDataLoader(g, train_eids, sampler,
                                        batch_size=per_rank_batch(args.batch_size),
                                        shuffle=True, drop_last=False,
                                        num_workers=args.num_workers, seed=args.seed,
                                        global_order=world > 1,
                                        device=device if device.type != "cpu" else None)
    torch.manual_seed(args.seed)
    model = GraphSAGE(feats.dim, args.hidden, args.hidden, num_layers=len(args.fanouts),
                      dropout=args.dropout).to(device)
    pred = ScorePredictor(args.hidden, args.predictor).to(device)
    if world > 1:  # the same seed gives the same init; made certain here
        dist.broadcast_parameters(model)
        dist.broadcast_parameters(pred)
    opt = torch.optim.Adam(list(model.parameters()) + list(pred.parameters()), lr=args.lr,
                           weight_decay=args.weight_decay)
    hk = f"hits@{args.hits_k}"
    state = {"history": [], "best_val": -math.inf, "best_epoch": -1, "val_at_best": None,
             "test_at_best": None}
    for epoch in range(args.epochs):
        model.train()
        pred.train()
        t0 = time.time()
        bar = Progress(len(loader), f"epoch {epoch:3d}",
                       enabled=not args.quiet and tessera.get_rank() == 0)
        total, count = 0.0, 0
        for input_nodes, pos_graph, neg_graph, blocks in loader:
            h = model(blocks, feats(input_nodes))  # embeddings of the batch's pair endpoints
            ps, pd = (t.to(torch.int64) for t in pos_graph.edges())
            ns, nd = (t.to(torch.int64) for t in neg_graph.edges())
            pos_score, neg_score = pred(h[ps], h[pd]), pred(h[ns], h[nd])
            scores = torch.cat([pos_score, neg_score])
            labels = torch.cat([torch.ones_like(pos_score), torch.zeros_like(neg_score)])
            loss = F.binary_cross_entropy_with_logits(scores, labels)
            opt.zero_grad()
            loss.backward()
            if world > 1:  # the mean over the ranks
                dist.all_reduce_gradients(model)
                dist.all_reduce_gradients(pred)
            opt.step()
            total += loss.item()
            count += 1
            bar.update(loss.item())
        bar.close()
        train_seconds = time.time() - t0
        if world > 1:  # the mean loss over every rank's batches
            tc = np.array([total, count], dtype=np.float64)
            dist.all_reduce(tc)
            total, count = float(tc[0]), int(tc[1])
        train_loss = total / max(count, 1)
        entry = {"epoch": epoch, "loss": train_loss, "seconds": train_seconds}
        if (epoch + 1) % args.eval_every == 0 or epoch == args.epochs - 1:
            val = evaluate(model, pred, g, feats, data, "val", args)
            entry.update(val_roc_auc=val["roc_auc"], **{f"val_{hk}": val[hk]})
            if val["roc_auc"] > state["best_val"]:
                state.update(best_val=val["roc_auc"], best_epoch=epoch, val_at_best=val,
                             test_at_best=evaluate(model, pred, g, feats, data, "test", args))
        state["history"].append(entry)
        if not args.quiet or epoch == args.epochs - 1:
            shown = (f"val ROC-AUC {entry['val_roc_auc']:.4f}  {hk} {entry[f'val_{hk}']:.4f}"
                     if "val_roc_auc" in entry else "val -")
            log(f"epoch {epoch:3d}  loss {train_loss:.4f}  {shown}  ({train_seconds:.2f}s "
                f"training)")
    state["test_last_epoch"] = evaluate(model, pred, g, feats, data, "test", args)
    return state


def plot(history: list, hk: str, baseline: dict, path: str, title: str) -> None:
    plt = pyplot("link")
    if plt is None:
        return
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    a1.plot([h["epoch"] for h in history], [h["loss"] for h in history])
    a1.set_xlabel("epoch"), a1.set_ylabel("training BCE loss"), a1.set_title("loss")
    ev = [h for h in history if "val_roc_auc" in h]
    a2.plot([h["epoch"] for h in ev], [h["val_roc_auc"] for h in ev], "C0", label="val ROC-AUC")
    a2.plot([h["epoch"] for h in ev], [h[f"val_{hk}"] for h in ev], "C1", label=f"val {hk}")
    a2.axhline(baseline["roc_auc"], color="C0", ls=":", label="random ROC-AUC")
    a2.axhline(baseline[hk], color="C1", ls=":", label=f"random {hk}")
    a2.set_ylim(0, 1), a2.set_xlabel("epoch"), a2.set_title("validation (held-out edges)")
    a2.legend(fontsize=7, loc="lower right")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)
    os.replace(tmp, path)
    print(f"[link] loss curve: {path}", flush=True)


# --- command line --------------------------------------------------------------------------------
def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default=os.path.join(REPO, "data", "cora"),
                   help="dataset folder (npy layout) or path (default: the shipped data/cora)")
    p.add_argument("--val-frac", type=float, default=0.05, help="held-out validation edges")
    p.add_argument("--test-frac", type=float, default=0.10, help="held-out test edges")
    p.add_argument("--split-seed", type=int, default=None, help="edge split (default --seed)")
    p.add_argument("--eval-negatives", type=float, default=1.0,
                   help="non-edge pairs per held-out edge in val / test")
    p.add_argument("--hits-k", type=int, default=50, help="K of Hits@K")
    p.add_argument("--epochs", type=int, default=40)
    p.add_argument("--fanouts", default="10,10", help="per layer, input layer first")
    p.add_argument("--batch-size", type=int, default=512, help="positive edges per batch")
    p.add_argument("--negatives", type=int, default=1,
                   help="uniform negatives per positive edge in training (k)")
    p.add_argument("--hidden", type=int, default=128, help="hidden and embedding size")
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--lr", type=float, default=0.005)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--predictor", default="mlp", choices=["mlp", "dot"],
                   help="pair scorer: MLP on h_u * h_v, or the dot product")
    p.add_argument("--feat-norm", default="row", choices=["none", "row"])
    p.add_argument("--eval-every", type=int, default=1)
    p.add_argument("--eval-batch-size", type=int, default=32768,
                   help="nodes per batch of the layer-wise full-neighbor inference")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--num-workers", type=int, default=1, help="sampler threads")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    p.add_argument("--device", default="auto",
                   help="auto (cuda when torch sees a GPU, else cpu), cpu, cuda (under a "
                        "launcher cuda:<LOCAL_RANK %% GPUs>) or cuda:N")
    p.add_argument("--part-dir", default=None,
                   help="where the training graph's partition goes (default: a temporary "
                        "folder, removed at exit; under tessera launch all ranks must see it)")
    p.add_argument("--part-method", default="metis", choices=["metis", "random"],
                   help="partitioning of the training graph over several ranks")
    p.add_argument("--plot", default=None, help="loss/metric PNG (default out/link-<name>.png)")
    p.add_argument("--out-json", default=None, help="write the figures as JSON here")
    p.add_argument("--quiet", action="store_true", help="no progress bar, last epoch only")
    args = p.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # recorded in --out-json
    try:
        args.fanouts = [int(f) for f in str(args.fanouts).split(",")]
    except ValueError:
        p.error(f"--fanouts: expected comma-separated integers, got {args.fanouts!r}")
    problems = []
    if not (0.0 < args.val_frac < 1.0):
        problems.append(f"--val-frac must be in (0, 1), got {args.val_frac}")
    if not (0.0 < args.test_frac < 1.0):
        problems.append(f"--test-frac must be in (0, 1), got {args.test_frac}")
    if not problems and args.val_frac + args.test_frac >= 1.0:
        problems.append(f"--val-frac + --test-frac must be < 1 (leaving training edges), got "
                        f"{args.val_frac} + {args.test_frac}")
    for name in ("epochs", "batch_size", "negatives", "hidden", "hits_k", "eval_every",
                 "eval_batch_size"):
        if getattr(args, name) < 1:
            problems.append(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if not args.fanouts or any(f == 0 or f < -1 for f in args.fanouts):
        problems.append(f"--fanouts must be positive or -1 (all), got {args.fanouts}")
    if not (args.eval_negatives > 0):
        problems.append(f"--eval-negatives must be > 0, got {args.eval_negatives}")
    if not (0.0 <= args.dropout < 1.0):
        problems.append(f"--dropout must be in [0, 1), got {args.dropout}")
    if not os.path.exists(args.dataset) and ":" not in os.path.basename(args.dataset):
        problems.append(f"--dataset {args.dataset!r} does not exist")
    if problems:
        p.error("; ".join(problems))
    if args.split_seed is None:
        args.split_seed = args.seed
    return args


def run(args, workdir: str, device: torch.device) -> int:
    t_start = time.time()
    data = prepare(args, workdir)
    hk = f"hits@{args.hits_k}"
    s = data["split"]
    world = tessera.get_world_size()
    log(f"[link] {data['g']}; {world} rank(s) on {device}; edges train / val / test "
        f"{s['train_edges']} / "
        f"{s['val_edges']} / {s['test_edges']} (undirected), eval negatives "
        f"{s['val_negatives']} / {s['test_negatives']}; fanouts {args.fanouts}, batch "
        f"{args.batch_size} ({per_rank_batch(args.batch_size)} per rank), "
        f"k {args.negatives}, hidden "
        f"{args.hidden}, {args.predictor} predictor, lr {args.lr}, epochs {args.epochs}")
    baseline = {w: random_baseline(data, w, args) for w in ("val", "test")}
    state = train(args, data, device)
    test, last = state["test_at_best"], state["test_last_epoch"]
    rb = baseline["test"]
    log(f"[link] test (epoch {state['best_epoch']}, best val ROC-AUC "
        f"{state['best_val']:.4f}): ROC-AUC {test['roc_auc']:.4f}, {hk} {test[hk]:.4f}; "
        f"random baseline ROC-AUC {rb['roc_auc']:.4f}, {hk} {rb[hk]:.4f}; last epoch: "
        f"ROC-AUC {last['roc_auc']:.4f}, {hk} {last[hk]:.4f}; "
        f"{time.time() - t_start:.1f}s")
    if tessera.get_rank() != 0:  # every rank has the same figures; rank 0 writes them
        return 0
    name = os.path.basename(os.path.normpath(args.dataset))
    plot(state["history"], hk, baseline["val"],
         args.plot or os.path.join("out", f"link-{name}.png"),
         f"GraphSAGE link prediction on {name}: test ROC-AUC {test['roc_auc']:.3f} "
         f"(random {rb['roc_auc']:.3f}), {hk} {test[hk]:.3f} (random {rb[hk]:.3f})")
    if args.out_json:
        atomic_write_json({
            "example": "python/examples/train_link.py",
            "task": "link prediction on held-out edges",
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "commit": commit_id(__file__, dirty=True, missing=""),
            "machine": {"host": platform.node(), "cpus": os.cpu_count(),
                        "platform": platform.platform(), "torch": torch.__version__,
                        "tessera": f"{tessera.__version__} "
                                   f"({os.path.dirname(os.path.abspath(tessera.__file__))})"},
            "command": " ".join(
                ([f"python -m tessera launch --nproc-per-node {world} --"] if world > 1 else [])
                + ["python/examples/train_link.py"] + args.argv),
            "dataset": args.dataset,
            "split": s,
            "ranks": world,
            "device": str(device),
            "batch_per_rank": per_rank_batch(args.batch_size),
            "metric_definitions": {
                "roc_auc": "ROC-AUC of held-out edges against sampled non-edges",
                hk: f"fraction of held-out edges scored above the {args.hits_k}-th highest "
                    "non-edge score (OGB)"},
            "best_epoch": state["best_epoch"],
            "val": state["val_at_best"],
            "test": test,
            "test_last_epoch": last,
            "random_baseline": baseline,
            "history": state["history"],
            "seconds": time.time() - t_start,
            "args": {k: v for k, v in vars(args).items()},
        }, args.out_json)
        print(f"[link] results: {args.out_json}", flush=True)
    return 0


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        device = pick_device(args.device)
    except ValueError as e:
        print(f"train_link.py: error: {e}", file=sys.stderr)
        return 2
    if args.threads:
        torch.set_num_threads(args.threads)
    tessera.initialize()
    world = tessera.get_world_size()
    if not args.threads and world > 1:  # the ranks of this node share its cores
        local = int(os.environ.get("LOCAL_WORLD_SIZE", world))
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // local))
    try:
        if args.part_dir:
            return run(args, args.part_dir, device)
        if world == 1:
            with tempfile.TemporaryDirectory(prefix="tessera-link-") as tmp:
                return run(args, tmp, device)
        # Rank 0's temporary folder, shared with the ranks of this node (one node assumed:
        # several nodes need --part-dir on a shared file system).
        tmp = tempfile.mkdtemp(prefix="tessera-link-") if tessera.get_rank() == 0 else None
        tmp = dist.all_gather_object(tmp)[0]
        try:
            rc = run(args, tmp, device)
            dist.barrier()  # nobody reads the partition any more
            return rc
        finally:
            if tessera.get_rank() == 0:
                shutil.rmtree(tmp, ignore_errors=True)
    except SplitError as e:
        print(f"train_link.py: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
