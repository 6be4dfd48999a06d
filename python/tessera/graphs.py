# SPDX-License-Identifier: Apache-2.0
"""Datasets of many small graphs, for graph-level tasks (graph classification, regression).

* ``GraphDataset``: the graphs of an npy folder (docs/partition-format.md, "Graph datasets"):
  concatenated edges with per-graph node and edge offsets, node features, graph labels.
  ``read_graph_dataset`` checks a folder and reads it (memory-mapped); ``write_graph_dataset``
  checks arrays and writes a folder atomically; ``graphs_to_arrays`` concatenates a list of
  graphs into those arrays.
* ``DistributedGraphSampler``: torch's ``DistributedSampler`` for graphs: rank r of P gets an
  equal share of the graph IDs each epoch, disjoint from the other ranks' and together all of
  them (padded by repeating graphs from the start of the epoch's order, or with ``drop_last``
  cut to a multiple of P), shuffled by (seed, epoch).
* ``GraphDataLoader``: mini-batches of graphs as one block-diagonal graph (``GraphBatch``):
  node IDs of graph k shifted by the nodes of the graphs before it in the batch, and the batch
  graph ID of every node for a per-graph readout (``tessera.nn.readout_nodes``).

Only NumPy is needed to read, write and sample; batches are torch tensors where torch is
installed (NumPy otherwise).
"""
from __future__ import annotations

import json
import os
import shutil
import uuid
import warnings
from typing import Optional, Sequence

import numpy as np

from ._tensor import HAVE_TORCH, torch
from .dataloading import _integer_arg

__all__ = ["GraphDataset", "read_graph_dataset", "write_graph_dataset", "graphs_to_arrays",
           "read_tu_dataset",
           "DistributedGraphSampler", "GraphDataLoader", "GraphBatch", "shuffled_order",
           "GRAPHS_FORMAT"]

GRAPHS_FORMAT = "tessera-graphs"
_FORMAT_VERSION = 1
_MASKS = ("train_mask", "val_mask", "test_mask")


class GraphDataset:
    """Many small graphs: graph ``g`` has nodes ``node_offsets[g]..node_offsets[g+1]`` of the
    concatenated node arrays and edges ``edge_offsets[g]..edge_offsets[g+1]`` of ``edge_index``,
    whose endpoints are node IDs *within the graph* (``0 <= src, dst < num_nodes of g``).

    Attributes: ``edge_index`` (int64 [2, E]), ``node_offsets`` / ``edge_offsets`` (int64
    [G + 1]), ``node_feat`` ([N, ...]), ``graph_label`` ([G, ...]), ``edge_feat`` ([E, ...] or
    None), ``masks`` (name -> bool [G]: ``train_mask``, ``val_mask``, ``test_mask`` where
    present) and ``meta`` (the folder's meta.json), all NumPy arrays (lists and CPU torch
    tensors given are viewed as arrays). Build one with ``GraphDataset(...)`` (the arrays are
    checked as ``read_graph_dataset`` checks a folder) or read a folder."""

    def __init__(self, edge_index, node_offsets, edge_offsets, node_feat, graph_label,
                 edge_feat=None, masks: Optional[dict] = None, meta: Optional[dict] = None,
                 where: str = "GraphDataset"):
        self.edge_index, self.node_offsets, self.edge_offsets = _check_arrays(
            edge_index, node_offsets, edge_offsets, node_feat, graph_label, edge_feat,
            masks or {}, where)
        # As NumPy arrays (views, no copy: a memory map stays one): lists and torch tensors
        # are taken, and batch_graphs indexes every array with an array of rows.
        self.node_feat = np.asarray(node_feat)
        self.graph_label = np.asarray(graph_label)
        self.edge_feat = None if edge_feat is None else np.asarray(edge_feat)
        self.masks = {k: np.asarray(v) for k, v in (masks or {}).items()}
        self.meta = dict(meta or {})
        classes, label = self.meta.get("num_classes"), self.graph_label
        if _is_int(classes) and label.ndim == 1 and len(label) and \
                np.issubdtype(label.dtype, np.integer) and label.max() >= classes:
            g = int(np.argmax(label >= classes))
            _fail(where, f"graph_label holds {int(label[g])} for graph {g}, but num_classes is "
                         f"{classes} (labels are class indices 0..{classes - 1}, or -1)")

    @property
    def num_graphs(self) -> int:
        return len(self.node_offsets) - 1

    @property
    def num_nodes(self) -> int:
        return int(self.node_offsets[-1])

    @property
    def num_edges(self) -> int:
        return int(self.edge_offsets[-1])

    @property
    def num_classes(self) -> int:
        """``meta["num_classes"]`` when given, else 1 + the largest label where the labels are
        class indices (integers, bools, or floats of integer value); ValueError for other
        labels (regression targets have no classes)."""
        if "num_classes" in self.meta:
            return int(self.meta["num_classes"])
        if not self.num_graphs:
            return 0
        label = self.graph_label
        hint = "meta['num_classes'] gives it for a classification set"
        if np.issubdtype(label.dtype, np.floating):
            bad = ~np.isfinite(label) | (label != np.round(label))
            if bad.any():
                raise ValueError(f"num_classes: graph_label holds {label[bad][0]}, not a class "
                                 f"index; {hint}")
        elif not (np.issubdtype(label.dtype, np.integer) or label.dtype == np.bool_):
            raise ValueError(f"num_classes: graph_label of dtype {label.dtype} is not class "
                             f"indices; {hint}")
        return int(np.max(label)) + 1

    def __len__(self) -> int:
        return self.num_graphs

    def graph_nodes(self) -> np.ndarray:
        """Nodes of every graph (int64 [G])."""
        return np.diff(self.node_offsets)

    def graph_edges(self) -> np.ndarray:
        """Edges of every graph (int64 [G])."""
        return np.diff(self.edge_offsets)

    def split(self, name: str) -> np.ndarray:
        """Graph IDs of a split (``"train"``, ``"val"``, ``"test"`` or a mask name), sorted."""
        key = name if name in self.masks else f"{name}_mask"
        if key not in self.masks:
            raise KeyError(f"no split {name!r}: the dataset has {sorted(self.masks)}")
        return np.nonzero(np.asarray(self.masks[key]))[0].astype(np.int64)

    def __getitem__(self, g: int) -> dict:
        """Graph ``g``: ``edge_index`` (within-graph IDs), ``node_feat``, ``label`` and
        ``edge_feat`` where present."""
        g = int(g)
        if not -self.num_graphs <= g < self.num_graphs:
            raise IndexError(f"graph {g} out of range for {self.num_graphs} graphs")
        g %= max(self.num_graphs, 1)
        n0, n1 = self.node_offsets[g], self.node_offsets[g + 1]
        e0, e1 = self.edge_offsets[g], self.edge_offsets[g + 1]
        out = {"edge_index": np.asarray(self.edge_index[:, e0:e1]),
               "node_feat": np.asarray(self.node_feat[n0:n1]),
               "label": np.asarray(self.graph_label[g])}
        if self.edge_feat is not None:
            out["edge_feat"] = np.asarray(self.edge_feat[e0:e1])
        return out

    def __repr__(self) -> str:
        try:
            classes = f"{self.num_classes} classes"
        except ValueError:
            classes = "labels not class indices"
        return (f"GraphDataset({self.meta.get('name', '?')}: {self.num_graphs} graphs, "
                f"{self.num_nodes} nodes, {self.num_edges} edges, {classes})")


def _fail(where: str, what: str):
    raise ValueError(f"{where}: {what}")


def _offsets(a, name: str, where: str) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim != 1 or len(a) < 1:
        _fail(where, f"{name} must be 1-D with num_graphs + 1 entries, got shape {a.shape}")
    if not np.issubdtype(a.dtype, np.integer):
        _fail(where, f"{name} must be integers, got {a.dtype}")
    a = a.astype(np.int64, copy=False)
    if a[0] != 0:
        _fail(where, f"{name}[0] is {int(a[0])}, must be 0")
    d = np.diff(a)
    if len(d) and d.min() < 0:
        g = int(np.argmax(d < 0))
        _fail(where, f"{name} is not monotone: {name}[{g + 1}] = {int(a[g + 1])} < "
                     f"{name}[{g}] = {int(a[g])}")
    return a


def _check_arrays(edge_index, node_offsets, edge_offsets, node_feat, graph_label, edge_feat,
                  masks: dict, where: str):
    """The checked (edge_index, node_offsets, edge_offsets) as int64; ValueError naming the
    first thing that is wrong."""
    no = _offsets(node_offsets, "node_offsets", where)
    eo = _offsets(edge_offsets, "edge_offsets", where)
    if len(no) != len(eo):
        _fail(where, f"node_offsets has {len(no) - 1} graphs, edge_offsets {len(eo) - 1}")
    num_graphs, n, m = len(no) - 1, int(no[-1]), int(eo[-1])
    ei = np.asarray(edge_index)
    if ei.ndim != 2 or ei.shape[0] != 2:
        _fail(where, f"edge_index must have shape [2, E], got {ei.shape}")
    if not np.issubdtype(ei.dtype, np.integer):
        _fail(where, f"edge_index must be integers, got {ei.dtype}")
    if ei.shape[1] != m:
        _fail(where, f"edge_index has {ei.shape[1]} edges, edge_offsets[-1] says {m}")
    ei = ei.astype(np.int64, copy=False)
    for name, arr, rows, what in (("node_feat", node_feat, n, "nodes (node_offsets[-1])"),
                                  ("graph_label", graph_label, num_graphs, "graphs"),
                                  ("edge_feat", edge_feat, m, "edges (edge_offsets[-1])")):
        if arr is None:
            if name != "edge_feat":
                _fail(where, f"{name} is missing")
            continue
        shape = np.shape(arr)
        if len(shape) < 1 or shape[0] != rows:
            _fail(where, f"{name} has {shape[0] if shape else 'no'} rows (shape {shape}), "
                         f"expected one per each of the {rows} {what}")
        # An .npy of Python objects is a pickle, which the reader does not load.
        if np.asarray(arr).dtype.hasobject:
            _fail(where, f"{name} has dtype object (Python objects): an .npy file holds "
                         "numbers, bools or fixed-width strings, not pickles")
    label = np.asarray(graph_label)
    if label.size and np.issubdtype(label.dtype, np.signedinteger) and label.min() < -1:
        g = int(np.argmin(label.reshape(len(label), -1).min(axis=1)))
        _fail(where, f"graph_label holds {int(label.min())} for graph {g} (labels are class "
                     "indices >= 0, or -1 for an unlabelled graph)")
    for name, mask in masks.items():
        mk = np.asarray(mask)
        if mk.dtype != np.bool_ or mk.shape != (num_graphs,):
            _fail(where, f"{name} must be bool [{num_graphs}] (one per graph), got "
                         f"{mk.dtype} {mk.shape}")
    if m:
        # Graph of every edge, and that graph's node count: each endpoint in [0, nodes).
        gid = np.repeat(np.arange(num_graphs, dtype=np.int64), np.diff(eo))
        nodes = np.diff(no)[gid]
        for row, end in ((0, "source"), (1, "destination")):
            bad = (ei[row] < 0) | (ei[row] >= nodes)
            if bad.any():
                e = int(np.argmax(bad))
                _fail(where, f"edge {e} (graph {int(gid[e])}, {int(nodes[e])} nodes) has "
                             f"{end} {int(ei[row, e])} out of range: endpoints are node IDs "
                             f"within their graph, 0 <= id < {int(nodes[e])}")
    return ei, no, eo


def _load(path: str, name: str, mmap: bool, required: bool = True):
    f = os.path.join(path, f"{name}.npy")
    if not os.path.exists(f):
        if required:
            raise FileNotFoundError(f"{path}: {name}.npy is missing (a graph dataset folder "
                                    "holds edge_index.npy, node_offsets.npy, edge_offsets.npy, "
                                    "node_feat.npy, graph_label.npy and meta.json)")
        return None
    try:
        return np.load(f, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:  # EOFError: an empty file
        raise ValueError(f"{f}: not a readable .npy file ({e})") from None


def _is_int(v) -> bool:
    """A JSON integer (a bool is not one)."""
    return isinstance(v, int) and not isinstance(v, bool)


def _read_meta(path: str) -> dict:
    """<path>/meta.json, checked: a JSON object of the format and version this reader reads,
    whose counts (where given) are integers; a ValueError naming the file and field
    otherwise."""
    meta_file = os.path.join(path, "meta.json")
    if not os.path.exists(meta_file):
        raise FileNotFoundError(f"{path}: meta.json is missing")
    try:
        with open(meta_file, encoding="utf-8") as f:
            meta = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{meta_file}: not valid JSON ({e})") from None
    return _check_meta(meta, meta_file)


def _check_meta(meta, meta_file: str) -> dict:
    """``meta`` as read from (or about to be written to) ``meta_file``: a ValueError naming
    it and the field unless it is an object of this format and version with integer counts."""
    if not isinstance(meta, dict):
        raise ValueError(f"{meta_file}: expected a JSON object of fields (format, "
                         f"format_version, ...), got a {type(meta).__name__}")
    if meta.get("format") != GRAPHS_FORMAT:
        raise ValueError(f"{meta_file}: format is {meta.get('format')!r}, expected "
                         f"{GRAPHS_FORMAT!r} (a folder of many small graphs)")
    version = meta.get("format_version")
    if not _is_int(version) or version != _FORMAT_VERSION:
        raise ValueError(f"{meta_file}: format_version {version!r}, this reader reads "
                         f"{_FORMAT_VERSION}")
    for key in ("num_graphs", "num_nodes", "num_edges", "num_classes"):
        if key in meta and not (_is_int(meta[key]) and meta[key] >= 0):
            raise ValueError(f"{meta_file}: {key} is {meta[key]!r}, expected an integer >= 0")
    return meta


def read_graph_dataset(path: str, mmap: bool = True) -> GraphDataset:
    """Reads and checks a graph dataset folder (docs/partition-format.md, "Graph datasets").
    The arrays are memory-mapped (``mmap=False`` reads them into memory). Errors name the file
    and what is wrong: a missing file, offsets not starting at 0 or not monotone, lengths that
    do not match, an edge endpoint outside its graph."""
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise FileNotFoundError(f"{path}: no such graph dataset folder")
    meta = _read_meta(path)
    arrays = {k: _load(path, k, mmap) for k in ("edge_index", "node_offsets", "edge_offsets",
                                                 "node_feat", "graph_label")}
    edge_feat = _load(path, "edge_feat", mmap, required=False)
    masks = {}
    for k in _MASKS:
        mk = _load(path, k, mmap, required=False)
        if mk is not None:
            masks[k] = mk
    ds = GraphDataset(edge_feat=edge_feat, masks=masks, meta=meta, where=path, **arrays)
    for key, value in (("num_graphs", ds.num_graphs), ("num_nodes", ds.num_nodes),
                       ("num_edges", ds.num_edges)):
        if key in meta and meta[key] != value:
            raise ValueError(f"{os.path.join(path, 'meta.json')}: {key} is {meta[key]}, the "
                             f"arrays hold {value}")
    return ds


def write_graph_dataset(path: str, edge_index, node_offsets, edge_offsets, node_feat,
                        graph_label, edge_feat=None, masks: Optional[dict] = None,
                        meta: Optional[dict] = None, overwrite: bool = False) -> GraphDataset:
    """Checks the arrays (as ``read_graph_dataset`` does) and writes them as a graph dataset
    folder: into a hidden temporary sibling first, renamed onto ``path`` when complete, so
    ``path`` is the whole new folder or untouched. An existing ``path`` is replaced only with
    ``overwrite``. ``meta`` (source, license, task, ...) goes into meta.json with the format,
    counts and ``num_classes``. Returns the dataset read back from ``path``."""
    path = os.path.abspath(os.fspath(path))
    masks = dict(masks or {})
    for k in masks:
        if k not in _MASKS:
            raise ValueError(f"write_graph_dataset: mask {k!r} is not one of {_MASKS}")
    ds = GraphDataset(edge_index, node_offsets, edge_offsets, node_feat, graph_label,
                      edge_feat=edge_feat, masks=masks, meta=meta, where="write_graph_dataset")
    if os.path.exists(path) and not overwrite:
        raise FileExistsError(f"write_graph_dataset: {path} exists (pass overwrite=True)")
    info = dict(meta or {})
    info.update(format=GRAPHS_FORMAT, format_version=_FORMAT_VERSION,
                num_graphs=ds.num_graphs, num_nodes=ds.num_nodes, num_edges=ds.num_edges)
    label = np.asarray(graph_label)
    if "num_classes" not in info and np.issubdtype(label.dtype, np.integer) and label.ndim == 1:
        info["num_classes"] = int(label.max()) + 1 if len(label) else 0
    _check_meta(info, "write_graph_dataset: meta")  # what the reader would refuse, unwritten
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    # A fresh name per write (not per process: two writers never share or delete one);
    # makedirs, unlike mkdtemp (0700), gives the folder the umask's permissions.
    tmp = os.path.join(parent, f".{os.path.basename(path)}.tmp-{os.getpid()}-"
                               f"{uuid.uuid4().hex[:12]}")
    os.makedirs(tmp)
    try:
        arrays = {"edge_index": ds.edge_index, "node_offsets": ds.node_offsets,
                  "edge_offsets": ds.edge_offsets, "node_feat": np.asarray(node_feat),
                  "graph_label": label}
        if edge_feat is not None:
            arrays["edge_feat"] = np.asarray(edge_feat)
        arrays.update({k: np.asarray(v) for k, v in masks.items()})
        for name, arr in arrays.items():
            np.save(os.path.join(tmp, f"{name}.npy"), np.ascontiguousarray(arr),
                    allow_pickle=False)
        with open(os.path.join(tmp, "meta.json"), "w") as f:
            json.dump(info, f, indent=1)
            f.write("\n")
        if os.path.exists(path):
            old = tmp + ".old"  # unique as tmp is
            os.replace(path, old)
            try:
                os.replace(tmp, path)
            except BaseException:
                os.replace(old, path)  # the old folder back: untouched, as promised
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return read_graph_dataset(path)


def graphs_to_arrays(graphs: Sequence[dict]) -> dict:
    """Concatenates graphs given as dicts with ``num_nodes`` (or taken from ``node_feat``),
    ``edge_index`` ([2, E_g], within-graph IDs), ``node_feat``, ``label`` and optionally
    ``edge_feat`` into the keyword arguments of ``write_graph_dataset`` / ``GraphDataset``."""
    if not graphs:
        raise ValueError("graphs_to_arrays: no graphs")
    nodes, edges, eis, feats, labels, efeats = [], [], [], [], [], []
    with_ef = "edge_feat" in graphs[0]
    for i, g in enumerate(graphs):
        ei = np.asarray(g["edge_index"])
        if ei.size == 0:
            ei = np.zeros((2, 0), dtype=np.int64)
        if ei.ndim != 2 or ei.shape[0] != 2:  # an [E, 2] list of pairs is not reshaped
            raise ValueError(f"graphs_to_arrays: graph {i}: edge_index must have shape [2, E] "
                             f"(sources, destinations), got {ei.shape}")
        if not np.issubdtype(ei.dtype, np.integer):  # 0.9 is not node 0
            raise ValueError(f"graphs_to_arrays: graph {i}: edge_index must hold integer node "
                             f"IDs, got {ei.dtype}")
        ei = ei.astype(np.int64)
        feat = np.asarray(g["node_feat"])
        n = int(g.get("num_nodes", feat.shape[0]))
        if feat.shape[0] != n:
            raise ValueError(f"graphs_to_arrays: graph {i} has {n} nodes and "
                             f"{feat.shape[0]} feature rows")
        if ("edge_feat" in g) != with_ef:
            raise ValueError(f"graphs_to_arrays: graph {i} {'has' if not with_ef else 'lacks'} "
                             f"edge_feat, graph 0 {'does not' if not with_ef else 'has it'}")
        if with_ef and np.shape(g["edge_feat"])[:1] != (ei.shape[1],):
            raise ValueError(f"graphs_to_arrays: graph {i} has {ei.shape[1]} edges and "
                             f"edge_feat of shape {np.shape(g['edge_feat'])}, not one row per "
                             "edge")
        nodes.append(n)
        edges.append(ei.shape[1])
        eis.append(ei)
        feats.append(feat)
        labels.append(np.asarray(g["label"]))
        if with_ef:
            efeats.append(np.asarray(g["edge_feat"]))
    out = {"edge_index": np.concatenate(eis, axis=1),
           "node_offsets": np.concatenate([[0], np.cumsum(nodes)]).astype(np.int64),
           "edge_offsets": np.concatenate([[0], np.cumsum(edges)]).astype(np.int64),
           "node_feat": np.concatenate(feats), "graph_label": np.stack(labels)}
    if with_ef:
        out["edge_feat"] = np.concatenate(efeats)
    return out


def _tu_table(path: str, dtype, required: bool = True, columns: Optional[int] = None,
              what: str = ""):
    """The rows of a TU text table, [lines, columns]; ``columns`` (with ``what`` they hold),
    where the layout fixes them, is checked (an empty file is 0 rows of them)."""
    if not os.path.exists(path):
        if required:
            raise FileNotFoundError(f"{path} is missing")
        return None
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "loadtxt: input contained no data")
            rows = np.loadtxt(path, delimiter=",", dtype=dtype, ndmin=2)
    except ValueError as e:
        raise ValueError(f"{path}: not comma-separated {np.dtype(dtype).name} values ({e})") \
            from None
    if rows.size == 0:
        return np.zeros((0, columns or 1), dtype=dtype)
    if columns is not None and rows.shape[1] != columns:
        raise ValueError(f"{path}: expected {columns} column{'s' if columns > 1 else ''} "
                         f"({what}), got {rows.shape[1]}")
    return rows


def read_tu_dataset(folder: str, name: Optional[str] = None) -> dict:
    """Reads a graph-classification set in the TU Dortmund text layout (``DS_A.txt``: 1-based
    ``row, col`` node pairs; ``DS_graph_indicator.txt``: the 1-based graph of every node;
    ``DS_graph_labels.txt``; optional ``DS_node_labels.txt``, ``DS_node_attributes.txt``,
    ``DS_edge_labels.txt``, ``DS_edge_attributes.txt``) and returns the keyword arguments of
    ``write_graph_dataset``: edges converted to within-graph IDs (in file order within a
    graph), graph labels mapped to class indices 0..C-1 (the sorted distinct values, listed in
    ``meta["classes"]``), node features = one-hot node labels (of each column where a file has
    several) followed by the node attributes, edge labels as ``edge_feat`` ([E], or [E, k] for
    k columns); with ``DS_edge_attributes.txt``, ``edge_feat`` is float32 [E, labels +
    attributes]: the edge label columns, then the attribute columns. ``DS_A.txt`` has 2
    columns, the graph indicator and graph labels 1; an empty ``DS_A.txt`` is a set without
    edges. ``name`` defaults to the folder's name. The nodes of a graph must be contiguous, as
    the layout specifies; an edge joining two graphs is an error."""
    folder = os.fspath(folder)
    name = name or os.path.basename(os.path.normpath(folder))
    f = lambda suffix: os.path.join(folder, f"{name}_{suffix}.txt")  # noqa: E731
    a = _tu_table(f("A"), np.int64, columns=2, what="row, col")
    indicator = _tu_table(f("graph_indicator"), np.int64, columns=1,
                          what="the graph of a node")[:, 0]
    labels = _tu_table(f("graph_labels"), np.float64, columns=1,
                       what="the label of a graph")[:, 0]
    if not np.isfinite(labels).all():
        bad = int(np.argmin(np.isfinite(labels)))
        raise ValueError(f"{f('graph_labels')}: line {bad + 1} is {labels[bad]}, not a class "
                         "label")
    num_graphs, n = len(labels), len(indicator)
    if n and (indicator.min() < 1 or indicator.max() > num_graphs):
        raise ValueError(f"{f('graph_indicator')}: graph IDs must be in [1, {num_graphs}] "
                         f"(one per line of {f('graph_labels')})")
    if n > 1 and (np.diff(indicator) < 0).any():
        i = int(np.argmax(np.diff(indicator) < 0)) + 1
        raise ValueError(f"{f('graph_indicator')}: node {i + 1} is in graph {indicator[i]} "
                         f"after a node of graph {indicator[i - 1]}: the nodes of a graph must "
                         "be contiguous")
    if len(a) and (a.min() < 1 or a.max() > n):
        raise ValueError(f"{f('A')}: node IDs must be in [1, {n}] (one per line of "
                         f"{f('graph_indicator')})")
    node_graph = indicator - 1
    counts = np.bincount(node_graph, minlength=num_graphs)
    no = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    src, dst = a[:, 0] - 1, a[:, 1] - 1
    eg = node_graph[src]
    if (node_graph[dst] != eg).any():
        e = int(np.argmax(node_graph[dst] != eg))
        raise ValueError(f"{f('A')}: line {e + 1} joins graph {eg[e] + 1} to graph "
                         f"{node_graph[dst[e]] + 1}")
    order = np.argsort(eg, kind="stable")
    eo = np.concatenate([[0], np.cumsum(np.bincount(eg, minlength=num_graphs))]).astype(
        np.int64)
    ei = np.stack([src[order] - no[eg[order]], dst[order] - no[eg[order]]])
    feats = []
    nl = _tu_table(f("node_labels"), np.int64, required=False)
    for table, what, rows in ((nl, "node_labels", n),):
        if table is not None and len(table) != rows:
            raise ValueError(f"{f(what)}: {len(table)} lines, expected {rows}")
    if nl is not None:
        for v in nl.T:  # one-hot of every column (one in the layout)
            values = np.unique(v)
            onehot = np.zeros((n, len(values)), dtype=np.float32)
            onehot[np.arange(n), np.searchsorted(values, v)] = 1
            feats.append(onehot)
    na = _tu_table(f("node_attributes"), np.float32, required=False)
    if na is not None and len(na) != n:
        raise ValueError(f"{f('node_attributes')}: {len(na)} lines, expected {n}")
    if na is not None:
        feats.append(na.astype(np.float32))
    node_feat = np.concatenate(feats, axis=1) if feats else np.ones((n, 1), dtype=np.float32)
    classes = np.unique(labels)
    out = {"edge_index": ei, "node_offsets": no, "edge_offsets": eo, "node_feat": node_feat,
           "graph_label": np.searchsorted(classes, labels).astype(np.int64),
           "meta": {"name": name, "num_classes": len(classes),
                    "classes": [float(c) if c != int(c) else int(c) for c in classes]}}
    edge = {}
    for what, dtype in (("edge_labels", np.int64), ("edge_attributes", np.float32)):
        table = _tu_table(f(what), dtype, required=False)
        if table is not None and len(table) != len(a):
            raise ValueError(f"{f(what)}: {len(table)} lines, expected {len(a)} (one per "
                             f"line of {f('A')})")
        if table is not None:
            edge[what] = table[order]
    if "edge_attributes" in edge:  # float32 [E, labels + attributes]
        out["edge_feat"] = np.concatenate([t.astype(np.float32) for t in edge.values()], axis=1)
    elif "edge_labels" in edge:
        el = edge["edge_labels"]
        out["edge_feat"] = el[:, 0] if el.shape[1] == 1 else el
    return out


# --- sampling -------------------------------------------------------------------------------
_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def _seed_arg(what: str, seed) -> int:
    """A shuffling seed: an integer in [0, 2^32), the bits shuffled_order keys by (a larger or
    negative seed would give another seed's orders: 2^32 those of 0)."""
    seed = _integer_arg(what, "seed", seed, 0)
    if seed >= 1 << 32:
        raise ValueError(f"{what}: seed must be below 2^32, got {seed}")
    return seed


def shuffled_order(n: int, seed: int, epoch: int) -> np.ndarray:
    """A permutation of ``range(n)`` that depends only on (seed, epoch): positions sorted by a
    SplitMix64 hash of (seed, epoch, position), so it is the same on every platform, NumPy
    version and rank (no RNG state)."""
    key = _splitmix64(np.array([(int(seed) & 0xFFFFFFFF) << 32 | (int(epoch) & 0xFFFFFFFF)],
                               dtype=np.uint64))[0]
    with np.errstate(over="ignore"):
        h = _splitmix64(np.arange(n, dtype=np.uint64) ^ key)
    return np.argsort(h, kind="stable").astype(np.int64)


def _graph_ids(what: str, indices, num_graphs: Optional[int]) -> np.ndarray:
    """``indices`` (graph IDs, or a boolean mask over the graphs) as a 1-D int64 array; a
    ValueError for another shape, for IDs that are not integers (a float is not truncated:
    0.9 is not graph 0) and, given ``num_graphs``, for an ID outside [0, num_graphs) or a mask
    of another length (a shorter one would leave out the last graphs)."""
    a = np.asarray(indices)
    if a.dtype == np.bool_:
        if num_graphs is not None and a.shape != (num_graphs,):
            raise ValueError(f"{what}: a boolean mask must have one entry per graph, "
                             f"[{num_graphs}], got shape {a.shape}")
        a = np.nonzero(a)[0]
    if a.ndim != 1 or not (a.size == 0 or np.issubdtype(a.dtype, np.integer)):
        raise ValueError(f"{what}: indices must be a 1-D array of graph IDs or a boolean mask, "
                         f"got {a.dtype} of shape {a.shape}")
    a = a.astype(np.int64)
    if num_graphs is not None and a.size and (a.min() < 0 or a.max() >= num_graphs):
        bad = int(a[np.argmax((a < 0) | (a >= num_graphs))])
        raise ValueError(f"{what}: graph IDs outside [0, {num_graphs}): {bad}")
    return a


class DistributedGraphSampler:
    """Graph IDs of this rank for one epoch, as ``torch.utils.data.DistributedSampler``.

    The epoch's order is ``indices`` (all graphs of ``dataset`` when not given), shuffled by
    (``seed``, epoch) when ``shuffle``; it is made a multiple of ``num_replicas`` P by repeating
    its first graphs (padding) or, with ``drop_last``, by cutting its last ``len % P`` graphs,
    and rank r takes positions r, r + P, r + 2P, ... So every rank gets the same number of
    graphs (``len(sampler)``) and, with the same batch size, the same number of batches: no rank
    waits for another in a gradient all-reduce. Without ``drop_last`` every graph is seen at
    least once per epoch across the ranks and fewer than P twice (with n < P graphs, the order
    repeated whole: a graph up to ceil(P / n) times); with it each at most once.
    Call ``set_epoch(e)`` before each epoch (``GraphDataLoader`` does, from its own epoch
    counter, when it drives the sampler). ``num_replicas`` / ``rank`` default to the runtime's."""

    def __init__(self, dataset=None, num_replicas: Optional[int] = None,
                 rank: Optional[int] = None, shuffle: bool = True, seed: int = 0,
                 drop_last: bool = False, indices=None):
        from . import _runtime

        if num_replicas is None:
            num_replicas = _runtime.get_world_size()
        if rank is None:
            rank = _runtime.get_rank()
        what = "DistributedGraphSampler"
        num_replicas = _integer_arg(what, "num_replicas", num_replicas, 1)
        rank = _integer_arg(what, "rank", rank, 0)
        seed = _seed_arg(what, seed)
        if not 0 <= rank < num_replicas:
            raise ValueError(f"DistributedGraphSampler: rank {rank} out of range for "
                             f"{num_replicas} replicas")
        if indices is None:
            if dataset is None:
                raise ValueError("DistributedGraphSampler: give a dataset or indices")
            indices = np.arange(len(dataset), dtype=np.int64)
        else:
            indices = _graph_ids("DistributedGraphSampler", indices,
                                 None if dataset is None else len(dataset))
        self.indices = indices
        self.num_replicas, self.rank = int(num_replicas), int(rank)
        self.shuffle, self.seed, self.drop_last = bool(shuffle), int(seed), bool(drop_last)
        self.epoch = 0
        n = len(indices)
        if self.drop_last:
            self.num_samples = n // self.num_replicas
        else:
            self.num_samples = -(-n // self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return self.num_samples

    def epoch_order(self, epoch: Optional[int] = None) -> np.ndarray:
        """The epoch's order over all ranks, after padding or cutting (``total_size`` IDs)."""
        epoch = self.epoch if epoch is None else int(epoch)
        n = len(self.indices)
        order = self.indices[shuffled_order(n, self.seed, epoch)] if self.shuffle \
            else self.indices
        if self.total_size <= n:
            return order[:self.total_size]
        reps = -(-(self.total_size - n) // n)  # padding longer than the order itself
        return np.concatenate([order] + [order] * reps)[:self.total_size]

    def rank_indices(self, epoch: Optional[int] = None) -> np.ndarray:
        """This rank's graph IDs for the epoch, in order."""
        return self.epoch_order(epoch)[self.rank:self.total_size:self.num_replicas]

    def __iter__(self):
        return iter(self.rank_indices().tolist())


# --- batching -------------------------------------------------------------------------------
class GraphBatch:
    """Graphs batched into one block-diagonal graph: batch graph k owns the nodes
    ``node_offsets[k]..node_offsets[k+1]`` and its edges are shifted by ``node_offsets[k]``.

    ``src`` / ``dst`` (int64 [E]), ``graph_ids`` (int64 [N]: the batch graph of every node,
    0..num_graphs-1, non-decreasing), ``node_offsets`` / ``edge_offsets`` (int64 [B + 1]),
    ``feat`` ([N, ...]), ``label`` ([B, ...]), ``edge_feat`` ([E, ...] or None) and ``index``
    (the dataset IDs of the graphs, [B]). Torch tensors where torch is installed. As a graph
    for ``tessera.nn`` layers: every node is both a source and a destination
    (``num_src_nodes() == num_dst_nodes() == num_nodes``)."""

    __slots__ = ("src", "dst", "graph_ids", "node_offsets", "edge_offsets", "feat", "label",
                 "edge_feat", "index", "num_nodes", "num_graphs")

    def __init__(self, **kw):
        for k in self.__slots__:
            setattr(self, k, kw.get(k))

    def num_src_nodes(self) -> int:
        return self.num_nodes

    def num_dst_nodes(self) -> int:
        return self.num_nodes

    def num_edges(self) -> int:
        return int(self.src.shape[0])

    def edges(self):
        return self.src, self.dst

    def batch_num_nodes(self):
        """Nodes of every graph of the batch (DGL's ``batch_num_nodes``)."""
        return self.node_offsets[1:] - self.node_offsets[:-1]

    def to(self, device) -> "GraphBatch":
        if not HAVE_TORCH:
            return self
        kw = {k: getattr(self, k) for k in self.__slots__}
        for k, v in kw.items():
            if isinstance(v, torch.Tensor):
                kw[k] = v.to(device, non_blocking=True)
        return GraphBatch(**kw)

    def __repr__(self) -> str:
        return (f"GraphBatch({self.num_graphs} graphs, {self.num_nodes} nodes, "
                f"{self.num_edges()} edges)")


def batch_graphs(dataset: GraphDataset, ids) -> GraphBatch:
    """The graphs ``ids`` of ``dataset`` (in that order) as one block-diagonal GraphBatch;
    ValueError for IDs outside the dataset or not integers (as the loader's ``indices``)."""
    ids = np.asarray(ids)
    ids = _graph_ids("batch_graphs", ids.reshape(-1) if ids.ndim == 0 else ids,
                     dataset.num_graphs)
    no, eo = dataset.node_offsets, dataset.edge_offsets
    n_start, n_count = no[ids], no[ids + 1] - no[ids]
    e_start, e_count = eo[ids], eo[ids + 1] - eo[ids]
    b_nodes = np.concatenate([[0], np.cumsum(n_count)]).astype(np.int64)
    b_edges = np.concatenate([[0], np.cumsum(e_count)]).astype(np.int64)
    num_graphs, num_nodes, num_edges = len(ids), int(b_nodes[-1]), int(b_edges[-1])
    # Rows of every node and edge in the dataset's arrays: the concatenated ranges.
    node_rows = np.arange(num_nodes, dtype=np.int64) + np.repeat(n_start - b_nodes[:-1], n_count)
    edge_graph = np.repeat(np.arange(num_graphs, dtype=np.int64), e_count)
    edge_rows = np.arange(num_edges, dtype=np.int64) + np.repeat(e_start - b_edges[:-1], e_count)
    ei = np.asarray(dataset.edge_index[:, edge_rows]) if num_edges else \
        np.zeros((2, 0), dtype=np.int64)
    shift = b_nodes[:-1][edge_graph]
    src, dst = ei[0] + shift, ei[1] + shift
    graph_ids = np.repeat(np.arange(num_graphs, dtype=np.int64), n_count)
    feat = np.asarray(dataset.node_feat[node_rows])
    label = np.asarray(dataset.graph_label[ids])
    edge_feat = None if dataset.edge_feat is None else np.asarray(dataset.edge_feat[edge_rows])
    conv = torch.from_numpy if HAVE_TORCH else (lambda a: a)
    return GraphBatch(src=conv(np.ascontiguousarray(src)), dst=conv(np.ascontiguousarray(dst)),
                      graph_ids=conv(graph_ids), node_offsets=conv(b_nodes),
                      edge_offsets=conv(b_edges), feat=conv(np.ascontiguousarray(feat)),
                      label=conv(np.ascontiguousarray(label)),
                      edge_feat=None if edge_feat is None else conv(np.ascontiguousarray(
                          edge_feat)),
                      index=conv(ids.copy()), num_nodes=num_nodes, num_graphs=num_graphs)


def _epoch_of(sampler) -> Optional[int]:
    """The epoch a sampler holds (``epoch``, as torch's DistributedSampler), else None."""
    epoch = getattr(sampler, "epoch", None)
    return int(epoch) if isinstance(epoch, (int, np.integer)) and not isinstance(
        epoch, bool) else None


class GraphDataLoader:
    """Mini-batches of graphs from a GraphDataset as ``GraphBatch``es (DGL's
    ``GraphDataLoader``).

    The graphs of an epoch are those of ``sampler`` (e.g. a ``DistributedGraphSampler``: this
    rank's share; its ``set_epoch`` is called with the loader's epoch before each epoch; an
    epoch set on the sampler directly since the loader last set it, torch's
    ``sampler.set_epoch(e)``, is the one run, and the loader counts on from it), or ``indices``
    (all graphs when not given) in order, shuffled by (``seed``, epoch) with ``shuffle``. They
    are cut into batches of ``batch_size`` graphs (the last one smaller unless
    ``drop_last``): the batches of what the sampler yields, so a sampler may be any iterable of
    graph IDs (``len(loader)`` then needs its ``__len__``). Iterating runs one epoch and moves
    to the next; ``set_epoch`` picks one. ``device`` moves every batch there."""

    def __init__(self, dataset: GraphDataset, batch_size: int = 32, shuffle: bool = False,
                 drop_last: bool = False, sampler=None, indices=None, seed: int = 0,
                 device=None):
        batch_size = _integer_arg("GraphDataLoader", "batch_size", batch_size, 1)
        if sampler is not None and (shuffle or indices is not None):
            raise ValueError("GraphDataLoader: give a sampler or shuffle / indices, not both "
                             "(the sampler decides the order)")
        self.dataset = dataset
        self.batch_size, self.shuffle, self.drop_last = int(batch_size), bool(shuffle), \
            bool(drop_last)
        self.sampler = sampler
        if indices is None:
            indices = np.arange(len(dataset), dtype=np.int64)
        else:
            indices = _graph_ids("GraphDataLoader", indices, len(dataset))
        self.indices = indices
        self.seed = _seed_arg("GraphDataLoader", seed)
        self.device, self.epoch = device, 0
        # The sampler's epoch as the loader last left it: another value at the next epoch was
        # set on the sampler directly (torch's idiom) and is the epoch to run.
        self._given = _epoch_of(sampler)
        if self._given is not None:
            self.epoch = self._given

    def _items(self) -> int:
        return len(self.sampler) if self.sampler is not None else len(self.indices)

    def __len__(self) -> int:
        n = self._items()
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)
        self._give_epoch(self.epoch)

    def _give_epoch(self, epoch: int) -> None:
        if self.sampler is not None and hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)
            self._given = _epoch_of(self.sampler)

    def epoch_indices(self, epoch: Optional[int] = None) -> np.ndarray:
        """The graph IDs the epoch visits, in order (before cutting into batches)."""
        if epoch is None:
            current = _epoch_of(self.sampler)
            if current is not None and current != self._given:  # sampler.set_epoch(e)
                self.epoch = current
            epoch = self.epoch
        else:
            epoch = int(epoch)
        if self.sampler is not None:
            self._give_epoch(epoch)
            ids = [int(i) if HAVE_TORCH and isinstance(i, torch.Tensor) else i
                   for i in self.sampler]
            return _graph_ids("GraphDataLoader: sampler",
                              np.asarray(ids) if ids else np.zeros(0, np.int64),
                              len(self.dataset))
        if self.shuffle:
            return self.indices[shuffled_order(len(self.indices), self.seed, epoch)]
        return self.indices

    def __iter__(self):
        ids = self.epoch_indices()
        self.epoch += 1
        # The batches of what the sampler gave (its __len__ may differ, or be absent, as for
        # torch's DataLoader over an iterable sampler).
        n = len(ids) // self.batch_size if self.drop_last else -(-len(ids) // self.batch_size)
        for b in range(n):
            batch = batch_graphs(self.dataset, ids[b * self.batch_size:(b + 1) * self.batch_size])
            yield batch if self.device is None else batch.to(self.device)
