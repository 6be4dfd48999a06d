# SPDX-License-Identifier: Apache-2.0
"""Full-graph message passing over a DistGraph (DGL's ``update_all``).

``update_all(g, x, message, reduce, edge_weight)`` aggregates, for every node v, the messages of
its in-edges u -> v: ``x[u]`` (``'copy_u'``, DGL's ``fn.copy_u``; ``'copy_src'``, its name before
DGL 0.8, is the same) or ``x[u] * w[e]`` (``'u_mul_e'``), combined by
``'sum'``, ``'mean'`` or ``'max'`` (a node without in-edges gets zeros). The result is a new
DistTensor over the node policy. In distributed mode (one partition per rank) every rank computes
its owned rows with the local SpMM after one exchange of the remote rows it needs
(``_C.UpdateAllPlan``, collective: every rank calls it in the same order); one process serving
several partitions (simulated mode) computes on the assembled graph with NumPy.
"""
from __future__ import annotations

from typing import Optional, Union

import numpy as np

from . import _C
from .dist import DistGraph, DistTensor

__all__ = ["update_all"]

_MESSAGES = ("copy_u", "u_mul_e")
_MESSAGE_ALIASES = {"copy_src": "copy_u"}  # DGL's name before 0.8
_REDUCES = ("sum", "mean", "max")


def _edge_weight(g: DistGraph, edge_weight) -> Optional[DistTensor]:
    if edge_weight is None or isinstance(edge_weight, DistTensor):
        return edge_weight
    if isinstance(edge_weight, str):
        if edge_weight not in g.edata:
            raise ValueError(f"update_all: edge_weight {edge_weight!r} is not an edge feature of "
                             f"graph {g.graph_name!r} (it has {sorted(g.edata)})")
        return g.edata[edge_weight]
    raise TypeError(f"update_all: edge_weight must be a DistTensor, an edge feature name or "
                    f"None, got {type(edge_weight).__name__}")


def update_all(g: DistGraph, x: Union[DistTensor, str], message: str = "copy_u",
               reduce: str = "sum", edge_weight: Union[DistTensor, str, None] = None,
               name: Optional[str] = None) -> DistTensor:
    """The aggregation of ``x`` (a float32 node DistTensor, or the name of node data of ``g``)
    over every in-edge of ``g``, as a new DistTensor. ``edge_weight``: a float32 edge
    DistTensor ``[num_edges]`` or ``[num_edges, 1]`` (or an edge feature name) for
    ``'u_mul_e'``. ``name``: the result's name (default: derived from ``x``'s)."""
    if message not in _MESSAGES and message not in _MESSAGE_ALIASES:
        raise ValueError(f"update_all: message {message!r} is not one of 'copy_u' (or "
                         "'copy_src', its name before DGL 0.8), 'u_mul_e'")
    given, message = message, _MESSAGE_ALIASES.get(message, message)
    if reduce not in _REDUCES:
        raise ValueError(f"update_all: reduce {reduce!r} is not one of {list(_REDUCES)}")
    if isinstance(x, str):
        if x not in g.ndata:
            raise ValueError(f"update_all: x {x!r} is not a node feature of graph "
                             f"{g.graph_name!r} (it has {sorted(g.ndata)})")
        x = g.ndata[x]
    if not isinstance(x, DistTensor):
        raise TypeError(f"update_all: x must be a DistTensor or a node feature name, got "
                        f"{type(x).__name__}")
    w = _edge_weight(g, edge_weight)
    if (message == "u_mul_e") != (w is not None):
        raise ValueError("update_all: message 'u_mul_e' needs edge_weight" if w is None else
                         f"update_all: edge_weight is given but message is {given!r} (use "
                         "'u_mul_e')")
    if g.is_distributed:
        if x._dist is None or (w is not None and w._dist is None):
            raise ValueError("update_all: x and edge_weight must be tensors of the distributed "
                             "runtime (created after the DistGraph, over its policies)")
        plan = getattr(g, "_update_all_plan", None)
        if plan is None:
            plan = g._update_all_plan = _C.UpdateAllPlan(g.runtime_graph)
        out = plan.run(x._dist, message, reduce, None if w is None else w._dist, name or "")
        return DistTensor(out.shape, None, out.name, part_policy=x.part_policy, _dist=out)
    return _update_all_simulated(g, x, message, reduce, w, name)


def _check_edge_weight(g: DistGraph, w: DistTensor) -> None:
    """What the distributed mode's UpdateAllPlan requires of an edge weight: float32
    (TypeError), [num_edges] or [num_edges, 1] over the edge policy of ``g`` (ValueError)."""
    shape, dtype = tuple(w.shape), np.dtype(w._dtype)
    kind = getattr(w.part_policy, "kind", None)
    got = f"got {dtype} of shape {shape} over the {kind} policy"
    if dtype != np.float32:
        raise TypeError(f"update_all: edge_weight {w.name!r} must be float32, {got}")
    e = g.num_edges()
    one_col = len(shape) == 1 or (len(shape) == 2 and shape[1] == 1)
    if not (one_col and shape[0] == e and kind == "edge" and np.array_equal(
            w.part_policy.offsets(), g.get_edge_partition_policy().offsets())):
        raise ValueError(f"update_all: edge_weight {w.name!r} must be [num_edges] or "
                         f"[num_edges, 1] over the edge policy of graph {g.graph_name!r} "
                         f"({e} edges), {got}")


def _update_all_simulated(g: DistGraph, x: DistTensor, message: str, reduce: str,
                          w: Optional[DistTensor], name: Optional[str]) -> DistTensor:
    n = g.num_nodes()
    # As the distributed mode's UpdateAllPlan: a dtype is a TypeError, a shape a ValueError.
    if np.dtype(x._dtype) != np.float32:
        raise TypeError(f"update_all: x {x.name!r} must be float32, got {np.dtype(x._dtype)}")
    if len(x.shape) == 0 or x.shape[0] != n:
        raise ValueError(f"update_all: x {x.name!r} must have {n} rows (one per node), got "
                         f"shape {tuple(x.shape)}")
    if w is not None:
        _check_edge_weight(g, w)
    graph = g._graph
    indptr = np.asarray(graph.indptr, dtype=np.int64)
    src = np.asarray(graph.indices, dtype=np.int64)
    feats = x.gather(np.arange(n, dtype=np.int64)).reshape(n, -1)
    msgs = feats[src]
    if w is not None:  # the edge ID of each CSC position (sorted rows carry them as eids)
        eids = np.asarray(graph.eids, dtype=np.int64)
        if eids.size == 0:
            eids = np.arange(g.num_edges(), dtype=np.int64)
        wv = w.gather(eids).reshape(-1)
        msgs = msgs * wv[:, None]
    deg = np.diff(indptr)
    out = np.zeros_like(feats)
    has = deg > 0
    if msgs.shape[0]:
        starts = indptr[:-1][has]
        red = np.maximum.reduceat if reduce == "max" else np.add.reduceat
        out[has] = red(msgs, starts, axis=0)
    if reduce == "mean":
        out[has] *= (np.float32(1) / deg[has].astype(np.float32))[:, None]
    out = out.reshape((n,) + tuple(x.shape[1:]))
    offsets = x.part_policy.offsets()
    parts = [out[offsets[p]:offsets[p + 1]] for p in range(len(offsets) - 1)]
    return DistTensor(out.shape, np.float32, name or f"{x.name}:update_all",
                      part_policy=x.part_policy, _parts=parts)
