# SPDX-License-Identifier: Apache-2.0
"""Conversions to and from PyTorch Geometric and DGL (used only when they are installed)."""
from __future__ import annotations

import warnings

import numpy as np

from ._tensor import require_torch, torch_to_numpy

__all__ = ["to_pyg", "from_pyg", "to_dgl_block", "from_dgl", "to_arrays"]


def to_pyg(block):
    """A Tessera Block as PyG's bipartite message-passing input: ``(edge_index [2, E],
    (num_src, num_dst))`` with row 0 the local sources and row 1 the local destinations.
    ``tessera.nn.SAGEConv`` takes the pair in place of the block (``conv(to_pyg(block), x)``);
    PyG's layers take the source and destination features as a pair,
    ``SAGEConv(..)((x, x[:num_dst]), edge_index, size=(num_src, num_dst))`` (a single ``x`` of
    ``num_src`` rows fails there: its root term has ``num_src`` rows, the output ``num_dst``)."""
    torch = require_torch("to_pyg")
    src, dst = block.edges()
    return torch.stack([torch.as_tensor(src), torch.as_tensor(dst)]), \
        (block.num_src_nodes(), block.num_dst_nodes())


# PyG attributes with a name of their own in DGL's datasets (and so in Tessera's): node
# features and labels, edge features; edge_weight keeps its name, the one weighted formats are
# read into and samplers are pointed at.
_PYG_NODE_NAMES = {"x": "feat", "y": "label"}
_PYG_EDGE_NAMES = {"edge_attr": "feat", "edge_weight": "edge_weight"}


def _pyg_attributes(data) -> dict:
    """Every attribute of a PyG ``Data`` (or of an object with its attributes), renamed ones
    first so that they win a clash with an attribute already holding their new name."""
    if hasattr(data, "to_dict"):
        attrs = dict(data.to_dict())
    else:
        attrs = {k: v for k, v in vars(data).items() if not k.startswith("_")}
    first = [k for k in attrs if k in _PYG_NODE_NAMES or k in _PYG_EDGE_NAMES]
    return {k: attrs[k] for k in first + [k for k in attrs if k not in first]}


def _pyg_level(data, key: str, rows: int, num_nodes: int, num_edges: int) -> str | None:
    """"node", "edge" or None (neither) for an attribute of ``rows`` rows: PyG's own answer
    where ``data`` gives one, else PyG's rule (by the rows; when nodes and edges are equally
    many, by whether the name says "edge")."""
    if callable(getattr(data, "is_node_attr", None)):
        node, edge = data.is_node_attr(key), data.is_edge_attr(key)
    else:
        node = rows == num_nodes and (num_nodes != num_edges or "edge" not in key)
        edge = rows == num_edges and not node
    if node and rows == num_nodes:
        return "node"
    return "edge" if edge and rows == num_edges else None


def from_pyg(data) -> dict:
    """A PyG ``Data`` as the mapping ``partition_graph`` takes.

    ``x`` becomes ndata["feat"], ``y`` ndata["label"], ``edge_attr`` edata["feat"] (DGL's
    names) and ``edge_weight`` edata["edge_weight"]; every other array with one row per node
    (masks, ``pos``, ...) is node data and one with one row per edge is edge data, under its
    own name. Attributes that are neither (graph-level ones, sparse adjacency, scalars, strings)
    are dropped with a warning. A ``HeteroData`` is refused (ValueError): Tessera's graphs have
    one node and one edge type, and ``HeteroData.to_homogeneous()`` makes the ``Data`` it
    takes. So is a ``Data`` without ``edge_index`` (ValueError), e.g. one whose edges a
    ``ToSparseTensor`` transform moved into ``adj_t``."""
    if hasattr(data, "node_types"):  # HeteroData (a Data has no node_types)
        raise ValueError("from_pyg: heterogeneous graphs are not supported; convert with "
                         f"HeteroData.to_homogeneous() (this {type(data).__name__} has node "
                         f"types {list(data.node_types)}, edge types {list(data.edge_types)})")
    if getattr(data, "edge_index", None) is None:
        hint = (" (its edges are in adj_t, where a ToSparseTensor transform moved them: "
                "convert without that transform)") if getattr(data, "adj_t", None) is not None \
            else ""
        raise ValueError(f"from_pyg: this {type(data).__name__} has no edge_index{hint}")
    edge_index = _np(data.edge_index, "from_pyg: edge_index")
    num_nodes = int(data.num_nodes)
    num_edges = int(edge_index.shape[1]) if edge_index.ndim == 2 else 0
    nd, ed, dropped = {}, {}, []
    for key, value in _pyg_attributes(data).items():
        if key in ("edge_index", "num_nodes") or value is None:
            continue
        a = _array_or_none(value, f"from_pyg: {key}")
        if a is None:
            dropped.append(f"{key} ({type(value).__name__})")
            continue
        level = None if a.ndim == 0 else \
            _pyg_level(data, key, int(a.shape[0]), num_nodes, num_edges)
        if level is None:
            dropped.append(f"{key} (shape {list(a.shape)})")
            continue
        out, name = (nd, _PYG_NODE_NAMES.get(key, key)) if level == "node" else \
            (ed, _PYG_EDGE_NAMES.get(key, key))
        if name in out:
            dropped.append(f"{key} (its name {name!r} is taken)")
            continue
        out[name] = a
    if dropped:
        warnings.warn(f"from_pyg: dropped {', '.join(dropped)}: Tessera keeps arrays with one "
                      f"row per node ({num_nodes}) or per edge ({num_edges})", stacklevel=2)
    return {"edge_index": edge_index, "num_nodes": num_nodes, "ndata": nd, "edata": ed}


def _array_or_none(value, what: str) -> np.ndarray | None:
    """A dense tensor or array as NumPy; None for anything else (sparse tensors, scalars)."""
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "detach") and str(getattr(value, "layout", "")) == "torch.strided":
        return _np(value, what)
    return None


def to_dgl_block(block):
    """A Tessera Block (or a GPU loader's DeviceBlock) as a DGL block (needs dgl): the same
    edges, ``srcdata`` / ``dstdata`` / ``edata`` holding the global IDs under ``dgl.NID`` /
    ``dgl.EID`` and every other tensor of the block's frames under its name (the node data and
    labels a sampler's ``prefetch_node_feats`` / ``prefetch_labels`` put there)."""
    import dgl  # noqa: WPS433 - optional dependency

    src, dst = block.edges()
    b = dgl.create_block((src, dst), num_src_nodes=block.num_src_nodes(),
                         num_dst_nodes=block.num_dst_nodes())
    b.srcdata[dgl.NID] = block.srcnodes
    b.dstdata[dgl.NID] = block.dstnodes
    b.edata[dgl.EID] = block.eids
    for frame in ("srcdata", "dstdata", "edata"):
        theirs = getattr(b, frame)
        for name, value in getattr(block, frame, {}).items():
            if name != dgl.NID:  # dgl.NID == dgl.EID: the IDs, set above
                theirs[name] = value
    return b


def from_dgl(g) -> dict:
    """A homogeneous DGLGraph (one node type, one edge type) as the mapping
    ``partition_graph`` takes (needs dgl). A graph of several node or edge types (a
    heterograph, e.g. a bipartite user -> item graph, whose node IDs restart at 0 per type) is
    refused with a ValueError: ``dgl.to_homogeneous`` gives the graph Tessera takes. So is a
    block (a message flow graph, whose source and destination nodes are two ID spaces).
    ``ndata[dgl.NID]`` / ``edata[dgl.EID]`` (``"_ID"``: the IDs of a subgraph's nodes and
    edges in the graph it came from) are left out, as DGL's ``partition_graph`` leaves them:
    they are IDs, not features, and the name is the one blocks give the IDs."""
    if getattr(g, "is_block", False):
        raise ValueError(f"from_dgl: a DGL block is not a graph to convert (its "
                         f"{g.num_src_nodes()} source and {g.num_dst_nodes()} destination nodes "
                         "are numbered separately); pass the graph it was sampled from")
    ntypes, etypes = list(g.ntypes), list(g.canonical_etypes)
    if len(ntypes) > 1 or len(etypes) > 1:
        raise ValueError("from_dgl: heterogeneous graphs are not supported; convert with "
                         f"dgl.to_homogeneous (this graph has node types {ntypes}, edge types "
                         f"{etypes})")
    src, dst = g.edges()
    return {"edge_index": np.stack([_np(src), _np(dst)]), "num_nodes": int(g.num_nodes()),
            "ndata": {k: _np(v, f"from_dgl: ndata[{k!r}]") for k, v in g.ndata.items()
                      if k != "_ID"},
            "edata": {k: _np(v, f"from_dgl: edata[{k!r}]") for k, v in g.edata.items()
                      if k != "_ID"}}


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


def _np(t, what: str = "array") -> np.ndarray:
    """``t`` as NumPy; a torch tensor of a dtype NumPy lacks (bfloat16) is a TypeError naming
    ``what``."""
    if hasattr(t, "detach"):
        return torch_to_numpy(t, what)
    return np.asarray(t)
