# SPDX-License-Identifier: Apache-2.0
"""Conversions to and from PyTorch Geometric and DGL (used only when they are installed)."""
from __future__ import annotations

import numpy as np

from ._tensor import require_torch

__all__ = ["to_pyg", "from_pyg", "to_dgl_block", "from_dgl", "to_arrays"]


def to_pyg(block):
    """A Tessera Block as PyG's bipartite message-passing input: ``(edge_index [2, E],
    (num_src, num_dst))`` with row 0 the local sources and row 1 the local destinations,
    which ``tessera.nn.SAGEConv`` and PyG's ``SAGEConv(..)(x, edge_index, size=...)`` accept."""
    torch = require_torch("to_pyg")
    src, dst = block.edges()
    return torch.stack([torch.as_tensor(src), torch.as_tensor(dst)]), \
        (block.num_src_nodes(), block.num_dst_nodes())


def from_pyg(data) -> dict:
    """A PyG ``Data`` (edge_index, x, y, *_mask) as the mapping ``partition_graph`` takes."""
    nd = {}
    for key, name in (("x", "feat"), ("y", "label")):
        if getattr(data, key, None) is not None:
            nd[name] = _np(getattr(data, key))
    for key in ("train_mask", "val_mask", "test_mask"):
        if getattr(data, key, None) is not None:
            nd[key] = _np(getattr(data, key))
    return {"edge_index": _np(data.edge_index), "num_nodes": int(data.num_nodes), "ndata": nd,
            "edata": {}}


def to_dgl_block(block):
    """A Tessera Block as a DGL block (needs dgl)."""
    import dgl  # noqa: WPS433 - optional dependency

    src, dst = block.edges()
    b = dgl.create_block((src, dst), num_src_nodes=block.num_src_nodes(),
                         num_dst_nodes=block.num_dst_nodes())
    b.srcdata[dgl.NID] = block.srcnodes
    b.dstdata[dgl.NID] = block.dstnodes
    b.edata[dgl.EID] = block.eids
    return b


def from_dgl(g) -> dict:
    """A homogeneous DGLGraph as the mapping ``partition_graph`` takes (needs dgl)."""
    src, dst = g.edges()
    return {"edge_index": np.stack([_np(src), _np(dst)]), "num_nodes": int(g.num_nodes()),
            "ndata": {k: _np(v) for k, v in g.ndata.items()},
            "edata": {k: _np(v) for k, v in g.edata.items()}}


def to_arrays(g) -> dict:
    """Any supported foreign graph (PyG Data, DGLGraph) as {edge_index, num_nodes, ndata,
    edata}."""
    mod = type(g).__module__
    if mod.startswith("torch_geometric"):
        return from_pyg(g)
    if mod.startswith("dgl"):
        return from_dgl(g)
    raise TypeError(f"cannot partition a {type(g).__name__}: pass a dataset path, a "
                    "tessera.load_dataset result, a dict with edge_index, a PyG Data or a "
                    "DGLGraph")


def _np(t) -> np.ndarray:
    if hasattr(t, "detach"):
        return t.detach().cpu().numpy()
    return np.asarray(t)
