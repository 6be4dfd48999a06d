# SPDX-License-Identifier: Apache-2.0
"""Offline partitioning (DGL: ``dgl.distributed.partition_graph``)."""
from __future__ import annotations

import json
import operator
import os
import re
import warnings
from typing import Any, Mapping, Sequence

import numpy as np

from . import _C
from ._tensor import HAVE_TORCH, torch, torch_to_numpy

__all__ = ["partition_graph", "load_dataset", "graph_from_arrays", "validate_partitions",
           "load_partition_config"]


def _np(a, what: str = "array") -> np.ndarray:
    if HAVE_TORCH and isinstance(a, torch.Tensor):
        return torch_to_numpy(a, what)
    return np.asarray(a)


def _flag(name: str, value, none_ok: bool = False) -> bool | None:
    """``value`` as a bool (NumPy's bool too), or None where ``none_ok``; a TypeError naming the
    argument otherwise. No truth value is taken: ``symmetrize='false'`` or ``overwrite=0`` is a
    mistake, not a request."""
    if value is None and none_ok:
        return None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    expected = "None, True or False" if none_ok else "True or False"
    raise TypeError(f"{name} must be {expected}, got {value!r}")


def _string(name: str, value) -> str:
    """``value`` if it is a str; a TypeError naming the argument otherwise."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {value!r}")
    return value


def load_dataset(path: str | os.PathLike, format: str = "auto", symmetrize: bool | None = None,
                 drop_self_loops: bool = False, deduplicate: bool = False,
                 ogb_split: str = "") -> "_C.Dataset":
    """Reads a dataset (npy folder, OGB folder, SNAP, METIS, Matrix Market or ``rmat:`` spec)
    and builds its CSC. Masks of S fixed splits come back as [N, S].

    ``symmetrize`` (as ``tessera partition``): ``None`` follows the input, symmetrizing one
    that says it is undirected with each pair stored once (``ds.edge_storage``; data/cora);
    ``True`` adds the reverse of every edge whose reversed pair the input lacks, and is met
    as stored by an input whose meta.json says ``"symmetrized": true``; ``False`` keeps the
    edges as stored. No pair is ever stored twice in one direction by symmetrizing
    (docs/partition-format.md, "Symmetrizing")."""
    symmetrize = _flag("symmetrize", symmetrize, none_ok=True)
    drop_self_loops = _flag("drop_self_loops", drop_self_loops)
    deduplicate = _flag("deduplicate", deduplicate)
    _string("format", format)
    _string("ogb_split", ogb_split)
    return _C.read_dataset(os.fspath(path), format, symmetrize, drop_self_loops, deduplicate,
                           ogb_split)


def _edges(edge_index) -> tuple[np.ndarray, np.ndarray]:
    """(src, dst) of a [2, E] ``edge_index`` or a pair (src, dst), as int64."""
    if isinstance(edge_index, (tuple, list)) and len(edge_index) == 2:
        src, dst = _np(edge_index[0]), _np(edge_index[1])
    else:
        ei = _np(edge_index)
        if ei.ndim != 2 or ei.shape[0] != 2:
            raise ValueError(f"edge_index: expected shape [2, E], got {list(ei.shape)}")
        src, dst = ei[0], ei[1]
    for a in (src, dst):
        # A float ID would be truncated to another node's; an empty edge list may be of any type.
        if a.size and not np.issubdtype(a.dtype, np.integer):
            raise TypeError(f"edge_index: node IDs must be integers, got {a.dtype}")
    return (np.ascontiguousarray(src, dtype=np.int64),
            np.ascontiguousarray(dst, dtype=np.int64))


def _named_arrays(what: str, arrays: Mapping[str, Any] | None) -> dict[str, np.ndarray]:
    """``arrays`` ({name: NumPy or torch array}; None for none) as C-contiguous NumPy arrays of
    the types a dataset stores; a TypeError naming ``what`` and the key otherwise."""
    if arrays is None:
        return {}
    if not isinstance(arrays, Mapping):
        raise TypeError(f"{what} must be a dict of name -> array, got {type(arrays).__name__}")
    out = {}
    for k, v in arrays.items():
        if not isinstance(k, str):
            raise TypeError(f"{what}: names must be str, got {k!r}")
        a = np.ascontiguousarray(_np(v, f"{what}[{k!r}]"))
        if a.dtype.kind not in "biu" and not (a.dtype.kind == "f" and a.itemsize in (2, 4, 8)):
            raise TypeError(f"{what}[{k!r}]: dtype {a.dtype} is not supported; store bool, "
                            "integers or float16/32/64")
        out[k] = a
    return out


def graph_from_arrays(edge_index, num_nodes: int | None = None,
                      ndata: Mapping[str, Any] | None = None,
                      edata: Mapping[str, Any] | None = None, name: str = "graph",
                      symmetrize: bool = False, drop_self_loops: bool = False,
                      deduplicate: bool = False) -> "_C.Dataset":
    """A dataset from a [2, E] ``edge_index`` (PyG layout: row 0 sources, row 1 destinations)
    or a pair (src, dst), plus node and edge arrays (NumPy or torch; copied). ``num_nodes``, an
    integer, defaults to the node arrays' rows (which must agree and cover the edges), else to
    1 + the edges' largest node ID. Node and edge arrays hold bool, integers or float16/32/64.
    ``symmetrize`` adds the reverse E + i of edge i unless the input already holds that reversed
    pair."""
    symmetrize = _flag("symmetrize", symmetrize)
    drop_self_loops = _flag("drop_self_loops", drop_self_loops)
    deduplicate = _flag("deduplicate", deduplicate)
    _string("name", name)
    src, dst = _edges(edge_index)
    nd = _named_arrays("ndata", ndata)
    ed = _named_arrays("edata", edata)
    num_nodes = _num_nodes(num_nodes, nd, src, dst)
    return _C.dataset_from_arrays(src, dst, num_nodes, nd, ed, name, symmetrize,
                                  drop_self_loops, deduplicate)


def _num_nodes(num_nodes, ndata: Mapping[str, np.ndarray], src: np.ndarray,
               dst: np.ndarray) -> int:
    """The graph's node count: ``num_nodes`` where given (an integer: a float is refused, not
    truncated), else the rows of the node arrays, which must agree with each
    other and hold every node the edges name, else 1 + the largest node ID of the edges."""
    if num_nodes is not None:
        try:
            n = None if isinstance(num_nodes, (bool, np.bool_)) else operator.index(num_nodes)
        except TypeError:
            n = None
        if n is None:
            raise TypeError(f"num_nodes must be an integer, got {num_nodes!r}")
        if n < 0:
            raise ValueError(f"num_nodes must be >= 0, got {n}")
        return n
    implied = int(max(src.max(initial=-1), dst.max(initial=-1))) + 1
    if not ndata:
        return implied
    (first, a), *others = ndata.items()
    rows = int(a.shape[0])
    for key, b in others:
        if int(b.shape[0]) != rows:
            raise ValueError(f"num_nodes is omitted and the node arrays disagree in rows: "
                             f"ndata[{first!r}] has {rows}, ndata[{key!r}] has {b.shape[0]} "
                             "(pass num_nodes, or one row per node in each)")
    if rows < implied:
        raise ValueError(f"num_nodes is omitted and ndata[{first!r}] has {rows} rows, but the "
                         f"edges name node {implied - 1}, so the graph has at least {implied} "
                         "nodes (pass num_nodes, or one row per node)")
    return rows


def _arrays_of(g) -> Mapping[str, Any] | None:
    """A graph given as arrays ({edge_index, num_nodes, ndata, edata}; a PyG ``Data`` or a
    DGLGraph converted to that), or None for a dataset path or a ``tessera.load_dataset``
    result."""
    if isinstance(g, (_C.Dataset, str, os.PathLike)):
        return None
    if isinstance(g, Mapping):
        _check_dict_graph(g)
        return g
    from . import convert  # PyG Data / DGLGraph, when those libraries are installed

    return convert.to_arrays(g)


_DICT_GRAPH_KEYS = ("edge_index", "num_nodes", "ndata", "edata", "name")


def _check_dict_graph(g: Mapping[str, Any]) -> None:
    """A graph given as a dict has an ``edge_index`` and no key partition_graph would ignore (a
    misspelt ``ndata`` would drop the node arrays silently)."""
    needs = ("a dict graph holds 'edge_index' ([2, E] or (src, dst)) and optionally "
             "'num_nodes', 'ndata', 'edata' and 'name'")
    if "edge_index" not in g:
        have = ", ".join(repr(k) for k in g) or "none"
        raise ValueError(f"g: no 'edge_index' ({needs}; this one has {have})")
    unknown = [k for k in g if k not in _DICT_GRAPH_KEYS]
    if unknown:
        raise ValueError(f"g: unknown key {unknown[0]!r} ({needs})")


# Node arrays with a meaning of their own (METIS vertex weights, IDs in the source file): never
# taken for a balance mask.
_RESERVED_NDATA = ("node_weight", "orig_id")


def _find_mask(ndata: Mapping[str, Any], mask: np.ndarray) -> str | None:
    """The balance-mask name ("name", or "name:c" for column c of an [N, S] array) of the node
    array of 0/1 entries whose ones are exactly ``mask``, or None (the partitioner balances a
    named array only as a mask: an array of other values is no such name)."""
    def is_mask(a):
        return a.dtype == np.bool_ or bool(np.all((a == 0) | (a == 1)))

    for name in sorted(ndata):
        if name in _RESERVED_NDATA:
            continue
        a = _np(ndata[name])
        if a.dtype != np.bool_ and not np.issubdtype(a.dtype, np.integer):
            continue
        if a.ndim == 1 and a.shape[0] == mask.shape[0]:
            if np.array_equal(a != 0, mask) and is_mask(a):
                return name
        elif a.ndim == 2 and a.shape[0] == mask.shape[0]:
            for c in range(a.shape[1]):
                if np.array_equal(a[:, c] != 0, mask) and is_mask(a[:, c]):
                    return f"{name}:{c}"
    return None


def _balance_constraints(balance_ntypes, ndata: Mapping[str, Any],
                         num_nodes: int) -> tuple[list[str], dict[str, np.ndarray]]:
    """Maps DGL's ``balance_ntypes`` onto Tessera's balance constraints: (names of node arrays
    to balance, {name: uint8 [N], 1 in the set} of the node sets no node array holds).

    Accepts mask names ("train_mask", "train_mask:3" for column 3 of [N, S]), DGL's array of
    per-node types, or a {name: types} mapping. Every non-zero type value v becomes one
    constraint, the nodes of type v (type 0, like DGL's unlabelled nodes, is the "in none"
    constraint Tessera adds itself). A constraint whose nodes are exactly the non-zero entries
    of a node array (``balance_ntypes=g.ndata["train_mask"]``) is that array's name, so the
    partitioning is the one the name gives."""
    if balance_ntypes is None:
        return [], {}
    if isinstance(balance_ntypes, str):
        return [balance_ntypes], {}
    if isinstance(balance_ntypes, Sequence) and all(isinstance(x, str) for x in balance_ntypes):
        return list(balance_ntypes), {}
    if isinstance(balance_ntypes, Mapping):
        given = [(str(k), v, False) for k, v in balance_ntypes.items()]
    else:
        given = [("ntype", balance_ntypes, True)]
    names: list[str] = []
    extra: dict[str, np.ndarray] = {}
    for key, value, by_type in given:
        types = _np(value)
        what = "balance_ntypes" if by_type else f"balance_ntypes[{key!r}]"
        if types.ndim != 1 or types.shape[0] != num_nodes:
            raise ValueError(f"{what}: expected {num_nodes} entries (one per node), got shape "
                             f"{list(types.shape)}")
        if types.dtype != np.bool_ and not np.issubdtype(types.dtype, np.integer):
            raise TypeError(f"{what}: expected bool or integer node types, got {types.dtype}")
        values = [v for v in np.unique(types) if v != 0]
        for v in values:
            mask = types == v
            name = _find_mask(ndata, mask)
            if name is not None:
                names.append(name)
            else:
                name = f"balance_{key}{int(v)}" if by_type or len(values) > 1 else \
                    f"balance_{key}"
                extra[name] = mask.astype(np.uint8)
    return names, extra


_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def _integer(name: str, value, lo: int, hi: int | None = None) -> int:
    """``value`` as an int in [lo, hi]; a ValueError naming the argument otherwise (floats and
    bools are not integers here)."""
    try:
        v = None if isinstance(value, bool) else operator.index(value)
    except TypeError:
        v = None
    if v is None or v < lo or (hi is not None and v > hi):
        bound = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
        raise ValueError(f"{name} must be an integer {bound}, got {value!r}")
    return v


def _check_arguments(g, graph_name, num_parts, out_path, num_hops, part_method, balance_ntypes,
                     num_trainers_per_machine, seed, overwrite, low_memory, node_order) -> None:
    """partition_graph's arguments, checked before anything is read, each error naming the
    argument as the caller wrote it (its flags checked already by ``_check_flags``)."""
    if not isinstance(graph_name, str) or not _NAME.fullmatch(graph_name) or \
            graph_name in (".", ".."):
        raise ValueError(f"graph_name {graph_name!r}: use letters, digits, '_', '-' and '.' only "
                         "(it names the config file)")
    _integer("num_parts", num_parts, 1, 2**31 - 1)
    _integer("num_hops", num_hops, 0, 2**31 - 1)
    _integer("num_trainers_per_machine", num_trainers_per_machine, 1)
    # METIS keeps its seed in 32 bits (seeds 2^32 apart gave one partitioning).
    _integer("seed", seed, -1, 2**31 - 1 if part_method == "metis" else 2**63 - 1)
    if part_method not in ("metis", "random"):
        raise ValueError(f"part_method must be 'metis' or 'random', got {part_method!r}")
    if node_order not in ("degree", "original"):
        raise ValueError(f"node_order: unknown node order {node_order!r} (expected 'degree' or "
                         "'original')")
    if low_memory and isinstance(g, _C.Dataset):
        raise ValueError("low_memory releases the graph's arrays during METIS: pass the dataset's "
                         "path (or arrays) instead of a loaded tessera dataset")
    if low_memory and part_method != "metis":
        raise ValueError(f"low_memory applies to part_method='metis', not '{part_method}'")
    if not isinstance(out_path, (str, os.PathLike)) or not os.fspath(out_path):
        raise ValueError(f"out_path must name a folder, got {out_path!r}")
    _check_out_path(os.fspath(out_path), overwrite)


def _check_out_path(out_path: str, overwrite: bool) -> None:
    """An existing ``out_path`` is replaced only with ``overwrite``, and only when it is a folder
    of what partition_graph writes (the partitioner's own predicates, ``_C.is_partition_config``
    and ``_C.is_partition_folder``), so a mistyped path cannot wipe a real folder. The
    partitioner refuses the same, in the words of ``tessera partition``'s flags; checked here
    first, in partition_graph's."""
    if not os.path.exists(out_path):
        return
    if not overwrite:
        raise ValueError(f"out_path {out_path} already exists (pass overwrite=True to replace it)")
    if not os.path.isdir(out_path):
        raise ValueError(f"out_path {out_path}: exists and is not a folder; refusing to replace it")
    with os.scandir(out_path) as it:
        for e in sorted(it, key=lambda e: e.name):
            is_dir = e.is_dir() and not e.is_symlink()
            ours = _C.is_partition_folder(e.path) if is_dir else _C.is_partition_config(e.path)
            if not ours:
                raise ValueError(f"out_path {out_path}: refusing to overwrite a folder that holds "
                                 f"{e.name!r}, which partition_graph did not write (choose an "
                                 "empty or new folder, or remove it yourself)")


def _check_flags(**flags) -> tuple:
    """partition_graph's flags (name=value), in the order given, as bools (``symmetrize`` may
    also be None), checked before anything is read: a TypeError naming the first that is
    neither."""
    return tuple(_flag(k, v, none_ok=k == "symmetrize") for k, v in flags.items())


# Keyword arguments DGL's partition_graph passes on to its GraphBolt conversion.
_GRAPHBOLT_KWARGS = ("store_eids", "store_inner_node", "store_inner_edge", "n_jobs")


def _check_dgl_arguments(objtype, graph_formats, use_graphbolt, kwargs: Mapping[str, Any]) -> None:
    """DGL's arguments that Tessera takes and does not act on: a UserWarning for each value
    that asks for something Tessera does not do; unknown keywords are a TypeError."""
    unknown = sorted(set(kwargs) - set(_GRAPHBOLT_KWARGS))
    if unknown:
        raise TypeError(f"partition_graph() got an unexpected keyword argument {unknown[0]!r}")
    if objtype not in ("cut", "vol"):
        raise ValueError(f"objtype must be 'cut' or 'vol', got {objtype!r}")
    if objtype == "vol":
        warnings.warn("partition_graph: objtype='vol' is ignored: METIS minimizes the edge cut",
                      stacklevel=3)
    if graph_formats is not None:
        formats = [graph_formats] if isinstance(graph_formats, str) else list(graph_formats)
        bad = [f for f in formats if f not in ("coo", "csr", "csc")]
        if bad:
            raise ValueError(f"graph_formats: expected 'coo', 'csr' or 'csc', got {bad[0]!r}")
        if set(formats) != {"csc"}:
            warnings.warn(f"partition_graph: graph_formats={graph_formats!r} is ignored: each "
                          "partition is stored as CSC, which DistGraph reads", stacklevel=3)
    if use_graphbolt or kwargs:
        given = (["use_graphbolt=True"] if use_graphbolt else []) + sorted(kwargs)
        warnings.warn(f"partition_graph: {', '.join(given)} ignored: Tessera writes its own "
                      "partition format (DistGraph reads it), not GraphBolt's", stacklevel=3)


def _check_masks(masks: Sequence[str], ndata: Mapping[str, Any]) -> None:
    """Each balance mask ("name" or "name:column") names a bool or integer node array of shape
    [N] or [N, S] (and one of its S columns) of 0s and 1s: the partitioner's checks, made first
    to name partition_graph's argument rather than ``tessera partition``'s flag."""
    for spec in masks:
        name, colon, col = spec.rpartition(":") if ":" in spec else (spec, "", "")
        if colon and not (col.isdigit() and col.isascii() and len(col) < 10):
            raise ValueError(f"balance_ntypes {spec!r}: expected NAME or NAME:COLUMN")
        if name not in ndata:
            have = ", ".join(sorted(ndata)) or "none"
            raise ValueError(f"balance_ntypes {spec!r}: the dataset has no node array {name!r} "
                             f"(it has: {have})")
        a = ndata[name]
        if a.dtype != np.bool_ and not np.issubdtype(a.dtype, np.integer):
            raise TypeError(f"balance_ntypes {spec!r}: node array {name!r} must be bool or "
                            f"integer, got {a.dtype}")
        if a.ndim not in (1, 2):
            raise ValueError(f"balance_ntypes {spec!r}: node array {name!r} must have shape [N] "
                             f"or [N, S], got {list(a.shape)}")
        ncol = a.shape[1] if a.ndim == 2 else 1
        if colon and int(col) >= ncol:
            raise IndexError(f"balance_ntypes {spec!r}: column {col} outside [0, {ncol}) of "
                             f"{name!r} (shape {list(a.shape)})")
        values = np.asarray(a)[:, int(col or 0)] if a.ndim == 2 else np.asarray(a)
        bad = np.flatnonzero((values != 0) & (values != 1))
        if bad.size:
            v = int(bad[0])
            raise ValueError(f"balance_ntypes {spec!r}: node {v} holds {values[v]} in {name!r}; "
                             "a mask holds 0 or 1 (to balance each class of a label, give one "
                             "mask per class)")


def _check_not_empty(ds: "_C.Dataset", num_parts: int, what: str, allow_empty: bool) -> None:
    """An empty graph, or more partitions than nodes, is almost always a mistake (a wrong file
    or argument): refused unless asked for, as ``tessera partition`` does."""
    if allow_empty:
        return
    if ds.num_nodes == 0:
        raise ValueError(f"{what}: the graph has no nodes; pass allow_empty=True to write an "
                         "empty partitioning on purpose")
    if num_parts > ds.num_nodes:
        raise ValueError(f"num_parts {num_parts} is more than the {ds.num_nodes} nodes of {what}: "
                         f"at most {ds.num_nodes} partitions can hold a node each "
                         "(allow_empty=True writes the others empty on purpose)")


def _report(stats: str, summary: str) -> None:
    """Prints the partitioning's summary as ``tessera partition`` does, its warnings raised as
    UserWarnings (by the caller of partition_graph) instead of printed."""
    for w in json.loads(stats)["warnings"]:
        warnings.warn(w, stacklevel=3)
    print("".join(line for line in summary.splitlines(keepends=True)
                  if not line.startswith("warning: ")), end="", flush=True)


def partition_graph(g, graph_name: str, num_parts: int, out_path: str | os.PathLike,
                    num_hops: int = 1, part_method: str = "metis", balance_ntypes=None,
                    balance_edges: bool = False, return_mapping: bool = False,
                    num_trainers_per_machine: int = 1, objtype: str = "cut",
                    graph_formats: str | Sequence[str] | None = None,
                    use_graphbolt: bool = False, symmetrize: bool | None = None,
                    seed: int = -1, overwrite: bool = True, low_memory: bool = False,
                    node_order: str = "degree", allow_empty: bool = False, **kwargs):
    """Partitions a graph into ``num_parts`` parts under ``out_path`` (DGL's signature).

    ``g`` is a dataset path (read with ``symmetrize`` as ``load_dataset`` and
    ``tessera partition`` do: ``None`` follows the dataset's meta.json), a
    ``tessera.load_dataset`` result (built already: ``symmetrize`` is not applied), a mapping
    {"edge_index", "num_nodes", "ndata", "edata"} (as ``graph_from_arrays`` takes them;
    "edge_index" required, no other key but "name"), or a PyG ``Data`` / DGLGraph when those
    libraries are installed (``symmetrize=None`` keeps their edges as they are). Writes ``<out_path>/<graph_name>.json`` and
    ``part<p>/`` atomically. Returns the config path, or with ``return_mapping`` the pair
    (orig_nids, orig_eids): for every new (relabelled) node / edge ID, its ID in the input.

    ``balance_ntypes`` (DGL's; METIS only) balances node sets across the partitions, one
    constraint each: node-array names ("train_mask", "train_mask:c" for column c of [N, S]),
    DGL's array of per-node types, or {name: types}, where every non-zero type is one set.
    A set that is a node array's non-zero entries (DGL's ``balance_ntypes=g.ndata["train_mask"]``)
    is that array's constraint, as its name would be; any other is balanced as given, named
    ``balance_<name>`` in the config, and not written with the partitions.

    ``low_memory`` (METIS only; not in DGL) keeps the graph's CSR in a temporary file while
    METIS runs, as ``tessera partition --low-memory`` does: the peak drops by 16 bytes per edge
    for one more write and read of them. It needs a graph this call loads or converts itself
    (a path, a mapping, a PyG/DGL graph), not a ``tessera.load_dataset`` result, whose arrays
    the caller may still be viewing.

    ``node_order`` (not in DGL) numbers the nodes within each partition: ``"degree"`` (the
    default) puts them by in-degree, highest first, so the hubs that neighbor sampling visits
    in almost every batch share the cache lines of every per-node array (the committed CPU
    sampling runs do not show it faster; docs/sampling.md); ``"original"`` keeps the input's
    relative order. Either way ``return_mapping`` and the partition book give each node's input ID.

    Prints what ``tessera partition`` prints: each partition's nodes, edges, halo and
    constraint weights, the edge cut and the balance; what it warns of (empty partitions, METIS
    skipped) comes as a ``UserWarning``. A graph without nodes, or fewer nodes than
    ``num_parts``, is refused unless ``allow_empty`` (not in DGL) asks for empty partitions.

    DGL's other arguments are accepted so that DGL code runs unchanged, with a UserWarning for
    a value Tessera does not honour: ``objtype="vol"`` (METIS minimizes the edge cut here),
    ``graph_formats`` other than CSC (partitions are stored as CSC, which DistGraph reads),
    ``use_graphbolt=True`` and the GraphBolt conversion's keyword arguments (``store_eids``,
    ``store_inner_node``, ``store_inner_edge``, ``n_jobs``): Tessera writes its own format.

    ``num_trainers_per_machine`` (DGL's) is accepted and stores nothing: the partition is the
    machine's, and a job of ``num_parts`` x T ranks (``tessera launch --nproc-per-node T`` on
    each machine) shares it among the machine's T trainers at load, cutting its node range into
    T contiguous ranges, one per trainer (docs/dist.md, "Several trainers per machine"). DGL
    instead stores a trainer ID per node for ``node_split(node_trainer_ids=...)``.
    """
    (balance_edges, return_mapping, use_graphbolt, symmetrize, overwrite, low_memory,
     allow_empty) = _check_flags(balance_edges=balance_edges, return_mapping=return_mapping,
                                 use_graphbolt=use_graphbolt, symmetrize=symmetrize,
                                 overwrite=overwrite, low_memory=low_memory,
                                 allow_empty=allow_empty)
    _check_arguments(g, graph_name, num_parts, out_path, num_hops, part_method, balance_ntypes,
                     num_trainers_per_machine, seed, overwrite, low_memory, node_order)
    _check_dgl_arguments(objtype, graph_formats, use_graphbolt, kwargs)
    if part_method != "metis" and (balance_ntypes is not None or balance_edges):
        # DGL ignores them too; they are left out of the config, which records what was done.
        warnings.warn(f"balance_ntypes/balance_edges apply to part_method='metis' only: ignored "
                      f"with '{part_method}' (the random partitioner balances node counts)",
                      UserWarning, stacklevel=2)
        balance_ntypes, balance_edges = None, False
    arrays = _arrays_of(g)
    if arrays is None:
        ds = g if isinstance(g, _C.Dataset) else load_dataset(g, symmetrize=symmetrize)
    else:
        # Arrays say nothing about their edges: None keeps them as they are.
        ds = graph_from_arrays(arrays["edge_index"], arrays.get("num_nodes"), arrays.get("ndata"),
                               arrays.get("edata"), arrays.get("name", "graph"),
                               symmetrize=symmetrize is True)
    masks, sets = _balance_constraints(balance_ntypes, ds.ndata, ds.num_nodes)
    out_path = os.fspath(out_path)
    source = os.fspath(g) if isinstance(g, (str, os.PathLike)) else ""
    _check_masks(masks, ds.ndata)
    _check_not_empty(ds, int(num_parts), source or f"graph {graph_name!r}", allow_empty)
    # The config's graph_name is the dataset's name: make it the name asked for.
    saved_name, ds.name = ds.name, graph_name
    try:
        stats, summary = _C.partition_dataset(
            ds, out_path, graph_name, int(num_parts), part_method, masks, balance_edges,
            int(num_hops), int(seed), -1, overwrite, source, low_memory, node_order,
            **({"balance_sets": sets} if sets else {}))
    finally:
        ds.name = saved_name
    _report(stats, summary)
    config = os.path.join(out_path, f"{graph_name}.json")
    if not return_mapping:
        return config
    book = _C.PartitionBook.load(config)
    orig_nids = np.empty(book.num_nodes, dtype=np.int64)
    orig_eids = np.empty(book.num_edges, dtype=np.int64)
    for p in range(int(num_parts)):
        lp = _C.load_partition(config, p)
        inner_n = np.asarray(lp.inner_node, dtype=bool)
        orig_nids[np.asarray(lp.nid)[inner_n]] = np.asarray(lp.orig_nid)[inner_n]
        inner_e = np.asarray(lp.inner_edge, dtype=bool)
        orig_eids[np.asarray(lp.eid)[inner_e]] = np.asarray(lp.orig_eid)[inner_e]
    return orig_nids, orig_eids


def validate_partitions(config: str | os.PathLike, original=None,
                        verify_checksums: bool = True) -> dict:
    """Runs every partition-format check (``tessera validate``); returns
    {'ok', 'errors', 'num_errors', 'summary'}. ``original`` is the dataset that was
    partitioned (read with the same build options) to also check features and labels."""
    return _C.validate_partitions(os.fspath(config), original, verify_checksums)


def load_partition_config(config: str | os.PathLike) -> dict:
    """The partition config as a dict (checked by the C++ loader)."""
    return json.loads(_C.load_partition_config(os.fspath(config)))
