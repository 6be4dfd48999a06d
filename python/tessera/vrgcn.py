# SPDX-License-Identifier: Apache-2.0
"""VR-GCN: GCN training with control variates (Chen, Zhu and Song, ICML 2018).

A GCN layer computes ``Z = P H W`` with ``P`` the mean over a node's in-neighbors and itself
(``P[u, v] = 1 / (d_u + 1)`` for ``v`` in ``N(u) + {u}``). Sampling ``D`` of the ``d_u``
neighbors estimates ``(P H)_u``; the *neighbor sampling* (``"ns"``) estimator is

    (P H)_u ~ H_u / (d_u + 1) + d_u / D_u * sum_{v sampled} H_v / (d_u + 1)

and the *control variate* (``"cv"``) estimator keeps a history ``Hbar`` of every node's
activations (one DistTensor per layer) and samples only the difference to it:

    (P H)_u ~ H_u / (d_u + 1) + d_u / D_u * sum_{v sampled} (H_v - Hbar_v) / (d_u + 1)
              + sum_{v in N(u)} Hbar_v / (d_u + 1)

Both are unbiased; the second has a variance that shrinks as the history approaches the
activations, which is what lets fanout 1-2 reach the accuracy of full-neighbor training.
After each step the fresh activations of every node the batch computed are written back into
the histories. The first layer's input ``P X`` is computed exactly once (the paper's
preprocessing), so ``L`` layers sample ``L - 1`` hops and keep ``L - 1`` histories
(``H^1 .. H^{L-1}``).

Everything lives in DistTensors over the graph's node policy, so the same code runs on one
process and under ``tessera launch``: ``deg`` (in-degree), ``px`` (``P X``), the histories, and
the two buffers of layer-wise inference. Histories written by several ranks at once follow the
DistTensor row contract (docs/dist.md): every row read is one writer's row, whole.
"""
from __future__ import annotations

from typing import List, Sequence

import numpy as np

from . import _runtime
from ._tensor import require_torch
from .dataloading import NeighborSampler
from .dist import DistGraph, DistTensor

__all__ = ["GCN", "VRGCNSampler", "precompute", "evaluate", "ESTIMATORS"]

ESTIMATORS = ("cv", "ns")


def _torch():
    return require_torch("tessera.vrgcn")


def _scatter_rows(rows, index, n: int):
    """out[index[i]] += rows[i] for a [n, ...] output (torch)."""
    torch = _torch()
    out = torch.zeros((n,) + tuple(rows.shape[1:]), dtype=rows.dtype, device=rows.device)
    return out.index_add_(0, index, rows)


def _local_nodes(g: DistGraph) -> np.ndarray:
    lo, hi = g.get_partition_book().node_range(_runtime.get_rank())
    return np.arange(lo, hi, dtype=np.int64)


def _chunks(ids: np.ndarray, size: int):
    for b in range(0, len(ids), size):
        yield ids[b:b + size]


def _node_tensor(g: DistGraph, name: str, shape, dtype, placement: str = "host") -> DistTensor:
    return DistTensor(shape, dtype, f"{g.graph_name}:{name}",
                      part_policy=g.get_node_partition_policy(), persistent=True,
                      placement=placement)


def _check_distributed(g, who: str) -> None:
    if not isinstance(g, DistGraph) or not g.is_distributed:
        raise ValueError(f"{who}: needs a DistGraph in distributed mode (one partition per "
                         "rank; a 1-part partitioning for one process)")


def precompute(g: DistGraph, feat: str = "feat", norm: str = "auto", chunk: int = 4096):
    """Collective. Creates ``deg`` (float32 [N], in-degree) and ``px`` (float32 [N, F], the
    exact first aggregation ``P X``) and fills this rank's rows of both; returns them.

    ``norm``: input features are first row-normalized (``"row"``: each row divided by its sum,
    as GCN does for bag-of-words features), standardized per column (``"standard"``: statistics
    over all nodes, all-reduced), or left alone (``"none"``); ``"auto"`` picks ``row`` when
    every value is a non-negative integer (counts or binary, of any dtype) and ``standard``
    otherwise."""
    _check_distributed(g, "vrgcn.precompute")
    torch = _torch()
    from .distributed import all_reduce
    x_t = g.ndata[feat]
    n, f = g.num_nodes(), int(np.prod(x_t.shape[1:]))
    if norm not in ("auto", "row", "standard", "none"):
        raise ValueError(f"vrgcn.precompute: norm must be auto, row, standard or none, got "
                         f"{norm!r}")
    deg_t = _node_tensor(g, "vrgcn:deg", (n,), np.float32)
    px_t = _node_tensor(g, "vrgcn:px", (n, f), np.float32)
    own = _local_nodes(g)
    if norm == "auto":  # counts (bag of words, binary: any dtype) -> row, else standard
        not_counts = np.zeros(1, dtype=np.float64)
        for ids in _chunks(own, chunk):
            x = np.asarray(x_t.gather(ids), dtype=np.float64)
            if x.size and (x.min() < 0 or not np.array_equal(x, np.round(x))):
                not_counts[0] = 1.0
                break
        all_reduce(not_counts, "max")
        norm = "standard" if not_counts[0] else "row"
    mean = np.zeros(f, dtype=np.float64)
    std = np.ones(f, dtype=np.float64)
    if norm == "standard":
        s = np.zeros((2, f), dtype=np.float64)
        for ids in _chunks(own, chunk):
            x = np.asarray(x_t.gather(ids), dtype=np.float64).reshape(len(ids), f)
            s[0] += x.sum(0)
            s[1] += (x * x).sum(0)
        all_reduce(s)
        mean = s[0] / max(n, 1)
        std = np.sqrt(np.maximum(s[1] / max(n, 1) - mean * mean, 0.0))
        std[std == 0] = 1.0

    def prep(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64).reshape(len(x), f)
        if norm == "row":
            s = x.sum(1, keepdims=True)
            s[s == 0] = 1.0
            x = x / s
        elif norm == "standard":
            x = (x - mean) / std
        return x.astype(np.float32)

    full = NeighborSampler([-1])  # every neighbor: with seed=0 it draws nothing from torch
    for ids in _chunks(own, chunk):
        _, _, (b,) = full.sample_blocks(g, ids, seed=0)
        src = np.asarray(b._b.src_nodes)
        dst = torch.as_tensor(np.asarray(b._b.dst), dtype=torch.int64)
        s_idx = torch.as_tensor(np.asarray(b._b.src), dtype=torch.int64)
        x = torch.from_numpy(prep(x_t.gather(src)))
        d = torch.bincount(dst, minlength=len(ids)).to(torch.float32)
        agg = x[: len(ids)] + _scatter_rows(x[s_idx], dst, len(ids))
        deg_t[ids] = d.numpy()
        px_t[ids] = (agg / (d + 1).unsqueeze(1)).numpy()
    _runtime.barrier()
    return deg_t, px_t


class GCN:
    """Factory of the GCN (a torch ``nn.Module``): ``L`` linear layers, ReLU between them,
    dropout on the input ``P X`` rows."""

    def __new__(cls, in_feats: int, hidden: int, classes: int, layers: int = 2,
                dropout: float = 0.5):
        torch = _torch()
        if layers < 2:
            raise ValueError(f"vrgcn.GCN: layers must be >= 2 (one is a linear model), got "
                             f"{layers}")
        dims = [in_feats] + [hidden] * (layers - 1) + [classes]
        m = torch.nn.Module()
        m.linears = torch.nn.ModuleList(
            torch.nn.Linear(dims[i], dims[i + 1]) for i in range(layers))
        m.dropout = torch.nn.Dropout(dropout)
        m.num_layers = layers
        m.hidden = hidden
        return m


class VRGCNSampler:
    """Samples and computes one mini-batch of VR-GCN (``estimator="cv"``) or of plain neighbor
    sampling (``"ns"``; ``fanout=-1`` is exact full-neighbor training) over a DistGraph.

    ``histories[l - 1]`` (``l = 1 .. L-1``) is the DistTensor of layer ``l``'s history
    (float32 [N, hidden], zeros at first), created collectively by the constructor on the
    device given by ``placement`` (``"device"``: this rank's rows in GPU memory, CUDA builds)
    and named after the graph and ``tag`` (samplers with the same tag share them).
    ``forward(model, seeds, ...)`` returns the logits of ``seeds`` and, for ``cv``, writes the
    fresh activations of every node it computed into the histories (after the forward pass,
    detached). ``stats`` counts, per epoch, the sampled edges (whose source activations were
    computed) and, for ``cv``, the history rows aggregated over full neighborhoods."""

    def __init__(self, g: DistGraph, deg: DistTensor, px: DistTensor, layers: int, hidden: int,
                 fanout: int, estimator: str = "cv", placement: str = "host", tag: str = ""):
        _check_distributed(g, "VRGCNSampler")
        if estimator not in ESTIMATORS:
            raise ValueError(f"VRGCNSampler: estimator must be one of {ESTIMATORS}, got "
                             f"{estimator!r}")
        if fanout == 0 or fanout < -1:
            raise ValueError(f"VRGCNSampler: fanout must be -1 (all) or positive, got {fanout}")
        if layers < 2:
            raise ValueError(f"VRGCNSampler: layers must be >= 2, got {layers}")
        self.g, self.deg, self.px = g, deg, px
        self.layers, self.hidden, self.fanout = int(layers), int(hidden), int(fanout)
        self.estimator = estimator
        self.sampler = NeighborSampler([self.fanout] * (self.layers - 1))
        self.full = NeighborSampler([-1])
        self.histories: List[DistTensor] = []
        if estimator == "cv":
            n = g.num_nodes()
            self.histories = [_node_tensor(g, f"vrgcn:{tag}:hist{l}", (n, self.hidden), np.float32,
                                           placement) for l in range(1, self.layers)]
        self.reset_stats()

    def reset_stats(self) -> None:
        self.stats = {"sampled_edges": 0, "history_edges": 0, "computed_nodes": 0}

    def _read(self, t: DistTensor, ids: np.ndarray, device):
        torch = _torch()
        if device.type == "cuda":
            return t.read_to(torch.as_tensor(ids), device)
        return torch.as_tensor(t.gather(ids))

    def forward(self, model, seeds: np.ndarray, seed: int = 0, epoch: int = 0, batch: int = 0,
                device=None):
        """Logits of ``seeds`` (a torch tensor on ``device``) under the chosen estimator."""
        torch = _torch()
        device = torch.device(device or "cpu")
        seeds = np.ascontiguousarray(seeds, dtype=np.int64)
        _, _, blocks = self.sampler.sample_blocks(self.g, seeds, seed, epoch, batch)
        nodes = np.asarray(blocks[0]._b.src_nodes)  # V_1: every node whose H^1 is computed
        h = self._read(self.px, nodes, device)
        h = torch.relu(model.linears[0](model.dropout(h)))
        writes = []
        for l in range(1, self.layers):
            b = blocks[l - 1]
            src_nodes = np.asarray(b._b.src_nodes)
            dst_nodes = np.asarray(b._b.dst_nodes)
            nd = len(dst_nodes)
            src = torch.as_tensor(np.asarray(b._b.src), dtype=torch.int64, device=device)
            dst = torch.as_tensor(np.asarray(b._b.dst), dtype=torch.int64, device=device)
            self.stats["sampled_edges"] += int(b.num_edges())
            self.stats["computed_nodes"] += len(src_nodes)
            d = self._read(self.deg, dst_nodes, device)
            cnt = torch.bincount(dst, minlength=nd).to(h.dtype)
            # Per edge: d_u / D_u * P[u, v] with P[u, v] = 1 / (d_u + 1).
            scale = torch.where(cnt > 0, d / cnt.clamp(min=1), torch.zeros_like(d)) / (d + 1)
            w = scale[dst].unsqueeze(1)
            if self.estimator == "cv":
                hist = self.histories[l - 1]
                hbar = self._read(hist, src_nodes, device)
                agg = _scatter_rows(w * (h[src] - hbar[src]), dst, nd)
                # The history over every neighbor: a full 1-hop block of the destinations.
                _, _, (fb,) = self.full.sample_blocks(self.g, dst_nodes, seed, epoch, batch)
                f_src = np.asarray(fb._b.src_nodes)
                f_s = torch.as_tensor(np.asarray(fb._b.src), dtype=torch.int64, device=device)
                f_d = torch.as_tensor(np.asarray(fb._b.dst), dtype=torch.int64, device=device)
                self.stats["history_edges"] += int(fb.num_edges())
                hf = self._read(hist, f_src, device)
                agg = agg + _scatter_rows(hf[f_s], f_d, nd) / (d + 1).unsqueeze(1)
                writes.append((hist, src_nodes, h.detach()))
            else:
                agg = _scatter_rows(w * h[src], dst, nd)
            agg = agg + h[:nd] / (d + 1).unsqueeze(1)
            z = model.linears[l](agg)
            h = torch.relu(z) if l < self.layers - 1 else z
        for hist, ids, rows in writes:
            hist[ids] = rows
        return h


def evaluate(g: DistGraph, model, px: DistTensor, deg: DistTensor,
             masks: Sequence[np.ndarray], labels: np.ndarray, chunk: int = 4096,
             device=None, metric: str = "accuracy") -> List[float]:
    """Collective. Exact layer-wise inference of ``model`` over every node (each rank computes
    its own nodes' rows layer by layer through two DistTensor buffers), then the metric (%) on
    each boolean mask, over all ranks' nodes: ``"accuracy"``, or ``"roc_auc"`` of two classes
    (score: logit of class 1 minus logit of class 0); NaN for a mask without nodes, as
    ``tessera.metrics`` gives. ``labels``: [N] int64."""
    if metric not in ("accuracy", "roc_auc"):
        raise ValueError(f"vrgcn.evaluate: metric must be accuracy or roc_auc, got {metric!r}")
    labels = np.asarray(labels)
    n = g.num_nodes()
    if labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels.reshape(-1)
    if labels.shape != (n,):
        raise ValueError(f"vrgcn.evaluate: labels must be [N] = [{n}] (or [N, 1]), got shape "
                         f"{labels.shape}")
    masks = [np.asarray(m) for m in masks]
    for i, m in enumerate(masks):
        if m.dtype != np.bool_ or m.shape != (n,):
            raise ValueError(f"vrgcn.evaluate: masks[{i}] must be a boolean [N] = [{n}] mask, "
                             f"got {m.dtype} of shape {m.shape}")
    if metric == "roc_auc" and labels.size and int(labels.max()) > 1:
        raise ValueError(f"vrgcn.evaluate: roc_auc scores two classes (labels 0 and 1), but "
                         f"the labels go up to {int(labels.max())} ({int(labels.max()) + 1} "
                         "classes); use accuracy")
    _check_distributed(g, "vrgcn.evaluate")
    torch = _torch()
    from .distributed import all_reduce
    device = torch.device(device or "cpu")
    own = _local_nodes(g)
    bufs = [_node_tensor(g, f"vrgcn:infer{i}", (n, model.hidden), np.float32)
            for i in range(2)]
    full = NeighborSampler([-1])  # every neighbor: with seed=0 it draws nothing from torch
    correct = np.zeros((len(masks), 2), dtype=np.float64)
    scores = [[] for _ in masks]
    ys = [[] for _ in masks]
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for ids in _chunks(own, chunk):
            x = torch.as_tensor(px.gather(ids)).to(device)
            bufs[0][ids] = torch.relu(model.linears[0](x)).cpu().numpy()
        _runtime.barrier()
        for l in range(1, model.num_layers):
            cur, nxt = bufs[(l - 1) % 2], bufs[l % 2]
            for ids in _chunks(own, chunk):
                _, _, (b,) = full.sample_blocks(g, ids, seed=0)
                src_nodes = np.asarray(b._b.src_nodes)
                s_idx = torch.as_tensor(np.asarray(b._b.src), dtype=torch.int64, device=device)
                d_idx = torch.as_tensor(np.asarray(b._b.dst), dtype=torch.int64, device=device)
                h = torch.as_tensor(cur.gather(src_nodes)).to(device)
                d = torch.as_tensor(deg.gather(ids)).to(device)
                agg = (h[: len(ids)] + _scatter_rows(h[s_idx], d_idx, len(ids))) / \
                    (d + 1).unsqueeze(1)
                z = model.linears[l](agg)
                if l < model.num_layers - 1:
                    nxt[ids] = torch.relu(z).cpu().numpy()
                    continue
                if metric == "roc_auc":
                    zs = z.cpu().numpy()
                    for k, m in enumerate(masks):
                        sel = m[ids]
                        scores[k].append(zs[sel, 1] - zs[sel, 0])
                        ys[k].append(labels[ids][sel])
                    continue
                pred = z.argmax(1).cpu().numpy()
                for k, m in enumerate(masks):
                    sel = m[ids]
                    correct[k, 0] += float((pred[sel] == labels[ids][sel]).sum())
                    correct[k, 1] += float(sel.sum())
            _runtime.barrier()
    model.train(was_training)
    if metric == "roc_auc":
        from .distributed import all_gather_object
        from .metrics import roc_auc
        out = []
        for k in range(len(masks)):
            mine = (np.concatenate(scores[k]) if scores[k] else np.zeros(0),
                    np.concatenate(ys[k]) if ys[k] else np.zeros(0, dtype=np.int64))
            parts = all_gather_object(mine)
            sc = np.concatenate([p[0] for p in parts])
            y = np.concatenate([p[1] for p in parts])
            out.append(100.0 * roc_auc(sc[y == 1], sc[y == 0]))
        return out
    all_reduce(correct)
    return [100.0 * c / t if t else float("nan") for c, t in correct]
