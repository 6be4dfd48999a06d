# SPDX-License-Identifier: Apache-2.0
"""Neighbor sampling and mini-batch loaders (DGL's ``dgl.dataloading``).

A loader yields ``(input_nodes, seeds, blocks)`` for node classification and
``(input_nodes, pos_graph, neg_graph, blocks)`` for link prediction, like DGL. Sampling runs
in C++ threads (``num_workers``) and is keyed by (seed, epoch, batch, layer, node) with a
counter-based RNG: the same seed gives the same batches for any thread count.
"""
from __future__ import annotations

import copy
import inspect
import operator
import warnings
from typing import Optional, Sequence

import numpy as np

from . import _C, _runtime
from ._collectives import all_gather_object
from ._dist import _TORCH_DTYPES
from ._tensor import HAVE_TORCH, as_tensor, to_numpy_ids, torch

__all__ = ["NID", "EID", "NeighborSampler", "MultiLayerNeighborSampler",
           "MultiLayerFullNeighborSampler", "Block", "PairGraph", "NodeDataLoader",
           "DistNodeDataLoader", "EdgeDataLoader", "DistEdgeDataLoader", "DataLoader",
           "DistDataLoader",
           "negative_sampler", "as_edge_prediction_sampler"]


def _is_distributed(g) -> bool:
    return bool(getattr(g, "is_distributed", False))


def _is_dist_graph(g) -> bool:
    return hasattr(g, "local_graph") and hasattr(g, "get_partition_book")


def _graph_of(g) -> "_C.Graph":
    if isinstance(g, _C.Graph):
        return g
    if isinstance(g, _C.Dataset):
        return g.graph
    if hasattr(g, "local_graph"):  # DistGraph
        return g.local_graph
    raise TypeError(f"expected a DistGraph, a tessera Dataset or Graph, got {type(g).__name__}")


NID = "_ID"  # DGL's dgl.NID: the key of the global node IDs in block.srcdata / dstdata
EID = "_ID"  # DGL's dgl.EID: the key of the global edge IDs in block.edata


class Block:
    """A message-flow graph (DGL's block): ``num_src_nodes()`` sources, the first
    ``num_dst_nodes()`` of which are the destinations; edge i runs ``src[i] -> dst[i]``
    (local IDs). Arrays are torch tensors (NumPy without torch) sharing the C++ memory.

    DGL's spellings work too: ``number_of_src_nodes()`` / ``number_of_dst_nodes()`` /
    ``number_of_edges()``, and ``srcdata[NID]`` / ``dstdata[NID]`` / ``edata[EID]`` (``NID`` =
    ``EID`` = ``"_ID"``, DGL's ``dgl.NID`` / ``dgl.EID``) are ``srcnodes`` / ``dstnodes`` /
    ``eids``; the frames also keep other tensors stored in them (``to`` moves those too)."""

    __slots__ = ("_b", "_cache")

    #: The edges are grouped by destination, destinations in ascending order (``dst`` never
    #: decreases): every sampler of Tessera builds its blocks so (tessera.nn aggregates such
    #: blocks as CSR products).
    dst_sorted = True

    def __init__(self, block: "_C.Block"):
        self._b = block
        self._cache = {}

    def _get(self, name):
        t = self._cache.get(name)
        if t is None:
            t = self._cache[name] = as_tensor(getattr(self._b, name))
        return t

    @property
    def src(self):
        return self._get("src")

    @property
    def dst(self):
        return self._get("dst")

    @property
    def srcnodes(self):
        """Global IDs of the source nodes (destinations first)."""
        return self._get("src_nodes")

    @property
    def dstnodes(self):
        """Global IDs of the destination nodes."""
        return self._get("dst_nodes")

    @property
    def eids(self):
        """Global edge IDs of the block's edges."""
        return self._get("eids")

    @property
    def num_src(self) -> int:
        return int(self._b.num_src)

    @property
    def num_dst(self) -> int:
        return int(self._b.num_dst)

    def num_src_nodes(self) -> int:
        return int(self._b.num_src)

    def num_dst_nodes(self) -> int:
        return int(self._b.num_dst)

    def num_edges(self) -> int:
        return int(self._b.num_edges)

    number_of_src_nodes = num_src_nodes  # DGL's older names
    number_of_dst_nodes = num_dst_nodes
    number_of_edges = num_edges

    # DGL's frames and the ID array each holds under NID / EID.
    _FRAMES = {"srcdata": "src_nodes", "dstdata": "dst_nodes", "edata": "eids"}

    def _frame(self, name: str) -> dict:
        # A plain dict holding the IDs tensor (no reference back to the block: no cycle).
        f = self._cache.get(name)
        if f is None:
            f = self._cache[name] = {NID: self._get(self._FRAMES[name])}
        return f

    @property
    def srcdata(self) -> dict:
        """DGL's ``block.srcdata``: ``srcdata[NID]`` is ``srcnodes`` (global IDs)."""
        return self._frame("srcdata")

    @property
    def dstdata(self) -> dict:
        """DGL's ``block.dstdata``: ``dstdata[NID]`` is ``dstnodes`` (global IDs)."""
        return self._frame("dstdata")

    @property
    def edata(self) -> dict:
        """DGL's ``block.edata``: ``edata[EID]`` is ``eids`` (global edge IDs)."""
        return self._frame("edata")

    def edges(self):
        """(src, dst) local IDs, like DGL's ``block.edges()``."""
        return self.src, self.dst

    def in_degrees(self):
        """In-degree of every destination node (torch int64, on the device of ``dst``)."""
        d = as_tensor(np.bincount(np.asarray(self._b.dst), minlength=self.num_dst)
                      .astype(np.int64))
        dev = getattr(self._cache.get("dst"), "device", None)  # set by to(device)
        if dev is not None and HAVE_TORCH and isinstance(d, torch.Tensor) and d.device != dev:
            d = d.to(dev)
        return d

    def to(self, device):
        """Moves the edge arrays to ``device`` (returns a new Block-like view)."""
        out = Block(self._b)
        for name in ("src", "dst", "src_nodes", "dst_nodes", "eids"):
            out._cache[name] = self._get(name).to(device)
        for name in self._FRAMES:
            frame = self._cache.get(name)
            if frame is not None:  # the caller's tensors (the IDs are read from out)
                dst = out._frame(name)
                for k, v in frame.items():
                    if k != NID:
                        dst[k] = v.to(device) if hasattr(v, "to") else v
        return out

    @property
    def raw(self) -> "_C.Block":
        return self._b

    def __repr__(self) -> str:
        return (f"Block(num_src_nodes={self.num_src}, num_dst_nodes={self.num_dst}, "
                f"num_edges={self.num_edges()})")


class DeviceBlock:
    """A block whose arrays are CUDA tensors sharing the memory of a device batch (the GPU
    loader's; see ``NodeDataLoader``): the interface of ``Block``. ``srcdata`` / ``dstdata``
    hold the prefetched node data and labels (DGL's ``prefetch_node_feats`` /
    ``prefetch_labels``) next to ``NID``. ``indptr`` (int64, ``num_dst + 1``) holds the CSR
    offsets of the destination nodes' edges when the loader made them on its stream (the GPU
    loader does), else None."""

    __slots__ = ("num_src", "num_dst", "_n_edges", "src", "dst", "srcnodes", "eids", "srcdata",
                 "dstdata", "edata", "_deg", "indptr")

    #: As Block's: edges grouped by destination in ascending order.
    dst_sorted = True

    def __init__(self, parts: dict, device):
        def t(x):
            return x if x is not None else torch.empty(0, dtype=torch.int64, device=device)

        self.num_src, self.num_dst = int(parts["num_src"]), int(parts["num_dst"])
        self._n_edges = int(parts["num_edges"])
        self.src, self.dst = t(parts["src"]), t(parts["dst"])
        self.srcnodes, self.eids = t(parts["src_nodes"]), t(parts["eids"])
        self.srcdata = {NID: self.srcnodes}
        self.dstdata = {NID: self.srcnodes[: self.num_dst]}
        self.edata = {EID: self.eids}
        self._deg = None
        self.indptr = parts.get("indptr")

    @property
    def dstnodes(self):
        return self.srcnodes[: self.num_dst]

    def num_src_nodes(self) -> int:
        return self.num_src

    def num_dst_nodes(self) -> int:
        return self.num_dst

    def num_edges(self) -> int:
        return self._n_edges

    number_of_src_nodes = num_src_nodes
    number_of_dst_nodes = num_dst_nodes
    number_of_edges = num_edges

    def edges(self):
        return self.src, self.dst

    def in_degrees(self):
        """In-degree of every destination node (int64, on the block's device; no host sync)."""
        if self._deg is None:
            self._deg = torch.zeros(self.num_dst, dtype=torch.int64, device=self.dst.device)
            self._deg.index_add_(0, self.dst, torch.ones_like(self.dst))
        return self._deg

    def to(self, device):
        """The same block with every array on ``device`` (itself when already there)."""
        device = torch.device(device)
        if self.src.device == device:
            return self
        out = DeviceBlock.__new__(DeviceBlock)
        out.num_src, out.num_dst, out._n_edges = self.num_src, self.num_dst, self._n_edges
        out.src, out.dst = self.src.to(device), self.dst.to(device)
        out.srcnodes, out.eids = self.srcnodes.to(device), self.eids.to(device)
        out.srcdata = {k: v.to(device) for k, v in self.srcdata.items()}
        out.dstdata = {k: v.to(device) for k, v in self.dstdata.items()}
        out.edata = {k: v.to(device) for k, v in self.edata.items()}
        out._deg = None
        out.indptr = None if self.indptr is None else self.indptr.to(device)
        return out

    def __repr__(self) -> str:
        return (f"DeviceBlock(num_src_nodes={self.num_src}, num_dst_nodes={self.num_dst}, "
                f"num_edges={self._n_edges}, device={self.src.device})")


class PairGraph:
    """The positive or negative pair graph of a link-prediction batch: edges between the
    batch's output nodes (local IDs into ``blocks[-1].dstnodes``)."""

    def __init__(self, src, dst, num_nodes: int, eids=None):
        self.src, self.dst, self._n = as_tensor(src), as_tensor(dst), int(num_nodes)
        self.eids = None if eids is None else as_tensor(eids)

    def edges(self):
        return self.src, self.dst

    def num_nodes(self) -> int:
        return self._n

    def to(self, device):
        """The same pairs with their arrays on ``device`` (a new PairGraph)."""
        out = PairGraph.__new__(PairGraph)
        out.src, out.dst, out._n = self.src.to(device), self.dst.to(device), self._n
        out.eids = None if self.eids is None else self.eids.to(device)
        return out

    def num_edges(self) -> int:
        return int(len(self.src))

    def __repr__(self) -> str:
        return f"PairGraph(num_nodes={self._n}, num_edges={self.num_edges()})"


def _float_weights(x, what: str) -> np.ndarray:
    """``x`` (NumPy, torch on any device, a DistTensor, a sequence) as a 1-D float32 or
    float64 NumPy array (other float types become float32; C++ checks that float64 values fit);
    TypeError for a non-float dtype, ValueError for another shape."""
    if hasattr(x, "part_policy") and hasattr(x, "numpy"):  # a DistTensor: every row
        x = x.numpy()
    if HAVE_TORCH and isinstance(x, torch.Tensor):
        if not x.is_floating_point():
            raise TypeError(f"{what}: weights must be floating point, got {x.dtype}")
        x = x.detach().to("cpu", x.dtype if x.dtype == torch.float64 else torch.float32).numpy()
    a = np.asarray(x)
    if a.dtype.kind != "f":
        raise TypeError(f"{what}: weights must be floating point, got {a.dtype}")
    if a.ndim == 2 and a.shape[1] == 1:
        a = a.reshape(-1)
    if a.ndim != 1:
        raise ValueError(f"{what}: expected one weight per edge (shape [E] or [E, 1]), got "
                         f"shape {a.shape}")
    return np.ascontiguousarray(a, dtype=a.dtype if a.dtype == np.float64 else np.float32)


def _integer_arg(what: str, name: str, value, lo: Optional[int] = None) -> int:
    """``value`` as an int: a Python, NumPy or 0-d torch integer. TypeError for anything else,
    a float (never truncated: 2.9 is not 2, nor 2.0 a batch size, as in torch's DataLoader) or a
    bool included; ValueError below ``lo``."""
    try:
        v = None if isinstance(value, (bool, np.bool_)) else operator.index(value)
    except TypeError:
        v = None
    if v is None:
        raise TypeError(f"{what}: {name} must be an integer, got {value!r}")
    if lo is not None and v < lo:
        raise ValueError(f"{what}: {name} must be >= {lo}, got {v}")
    return int(v)


# The largest fanout a sampler takes: the largest int32. A sanity bound, not a memory check:
# with replacement a seed gets exactly `fanout` edges (24 bytes each), so a fanout of 2^31 asked
# for 48 GiB per seed and the process was killed for memory; without replacement -1 takes every
# neighbor. Below the bound, fanout x seeds edges must still fit in memory.
_MAX_FANOUT = 2**31 - 1


def _fanout_list(fanouts, what: str) -> list:
    """``fanouts`` as a list of ints (each an integer, -1 for all); TypeError for a fraction,
    ValueError for a fanout above ``_MAX_FANOUT``."""
    out = []
    for layer, f in enumerate(fanouts):
        try:
            i = operator.index(f)  # int, NumPy and 0-d torch integers
        except TypeError:
            if isinstance(f, (float, np.floating)) and float(f).is_integer():
                i = int(f)
            else:
                raise TypeError(f"{what}: fanouts must be integers (-1 for all), got "
                                f"{list(fanouts)!r}") from None
        if i > _MAX_FANOUT:
            raise ValueError(f"{what}: fanout {i} of layer {layer} is above {_MAX_FANOUT} "
                             "(2^31 - 1), the largest fanout; use -1 for all neighbors")
        out.append(int(i))
    return out


class NeighborSampler:
    """Multi-layer neighbor sampler (DGL's ``dgl.dataloading.NeighborSampler``).

    ``fanouts`` lists neighbors per layer, input layer first (DGL's order); -1 takes all, and
    a fanout above 2^31 - 1 is refused (ValueError).

    ``edge_dir`` (DGL's): "in" samples each seed's in-edges, "out" its out-edges (read from
    the graph's transpose, made once per graph: a second copy of its structure). The blocks
    keep the seeds as destinations either way: with "out" a sampled edge e = (seed -> v)
    appears as v -> seed with edge ID e (messages flow from the out-neighbors to the seeds).
    Over a distributed DistGraph of several partitions only "in" is implemented.

    ``prob`` (DGL's): the name of an edge feature of the graph (``g.edata[prob]``, one
    non-negative float per edge, indexed by edge ID), or such an array itself (NumPy, torch,
    a DistTensor). Neighbors are then drawn with probability proportional to their edge's
    weight, with or without replacement as ``replace`` says; an edge of weight 0 is never drawn
    (without replacement a node with at most ``fanout`` positive-weight neighbors keeps all of
    them). The weights are read once, when the sampler is first bound to a graph (the first
    ``sample_blocks`` or loader over it), and copied into the sampler: later writes to the
    feature are not seen (create a new sampler). Over a distributed DistGraph of several
    partitions ``prob`` must be a name: each owner then samples its nodes weighted by its own
    partition's rows of that edge feature (C++ ``DistNeighborSampler`` with ``weights_name``;
    the owner reads them on its first request for the name), and the blocks equal the
    standalone weighted sampler's after ID mapping; an array there raises ValueError. A 1-part
    distributed-mode DistGraph is sampled in this process. For a Dataset built with
    ``symmetrize``, a feature of one row per input edge is also accepted (edge ``E + i``, the
    reverse of input edge ``i``, takes row ``i``).

    ``device="cuda"`` samples and compacts every batch with the CUDA kernels on the current
    CUDA device: the graph is copied once into GPU memory, or with ``use_uva=True`` into pinned
    host memory that the kernels read in place (DGL's ``use_uva``). Over a distributed-mode
    DistGraph (any number of partitions) that is this rank's partition, placed where
    ``DistGraph.place_on_device`` decided (else GPU memory), sampled with the keys of the CPU
    distributed sampler (the original node IDs), remote nodes by their owners; the loaders then
    make every batch in device memory on their own streams. The blocks are bit-identical to the
    CPU sampler's. Needs a CUDA build of Tessera and a GPU.

    ``prefetch_node_feats`` / ``prefetch_labels`` (DGL's): names of node data the loaders gather
    for each batch, into ``blocks[0].srcdata[name]`` (rows of the input nodes) and
    ``blocks[-1].dstdata[name]`` (rows of the seeds); with ``device="cuda"`` straight into
    device memory (from the tensors' device mirrors when placed), ahead of training.
    """

    def __init__(self, fanouts: Sequence[int], edge_dir: str = "in", prob=None,
                 replace: bool = False, num_threads: int = 1, device: str = "cpu",
                 use_uva: bool = False, prefetch_node_feats: Optional[Sequence[str]] = None,
                 prefetch_labels: Optional[Sequence[str]] = None):
        device = str(device)
        if device.startswith("cuda:"):
            device = "cuda"  # the current CUDA device (torch.cuda.set_device picks it)
        if device not in ("cpu", "cuda"):
            raise ValueError("NeighborSampler: device must be 'cpu' or 'cuda' (the current CUDA "
                             f"device), got {device!r}")
        self.fanouts = _fanout_list(fanouts, "NeighborSampler")
        if edge_dir not in ("in", "out"):
            raise ValueError(f"NeighborSampler: edge_dir must be 'in' or 'out', got {edge_dir!r}")
        self.edge_dir = edge_dir
        self.prob = prob
        self.replace = bool(replace)
        self.num_threads = int(num_threads)
        self.device = device
        self.use_uva = bool(use_uva)
        for what, names in (("prefetch_node_feats", prefetch_node_feats),
                            ("prefetch_labels", prefetch_labels)):
            if names is not None and (isinstance(names, str) or
                                      not all(isinstance(n, str) for n in names)):
                raise TypeError(f"NeighborSampler: {what} must be a list of node-data names, "
                                f"got {names!r}")
        self.prefetch_node_feats = list(prefetch_node_feats or [])
        self.prefetch_labels = list(prefetch_labels or [])
        # (graph, weights' source) -> (C++ sampler, the source: kept alive, so its id is not
        # reused while it keys the cache)
        self._bound = {}

    def _weights_source(self, g):
        """The object ``self.prob`` names on ``g`` (cheap: nothing is read): the edge feature's
        DistTensor, the Dataset holding it, or the array given."""
        prob = self.prob
        if not isinstance(prob, str):
            return prob
        if isinstance(g, _C.Graph) or not hasattr(g, "edata"):
            raise ValueError(f"NeighborSampler(prob={prob!r}): a {type(g).__name__} has no edge "
                             "features; pass a Dataset or DistGraph, or prob as an array of "
                             "weights by edge ID")
        edata = g.edata
        if prob not in edata:
            raise KeyError(f"NeighborSampler: prob={prob!r} is not an edge feature of the "
                           f"graph; its edge features: {sorted(edata)}")
        return edata[prob] if _is_dist_graph(g) else g  # Dataset.edata is a new dict per call

    def _edge_weights(self, g, graph) -> np.ndarray:
        """``self.prob`` on ``g`` as weights by edge ID (every row read)."""
        prob = self.prob
        if isinstance(prob, str):
            w = _float_weights(g.edata[prob], f"NeighborSampler: edge feature {prob!r}")
        else:
            w = _float_weights(prob, "NeighborSampler: prob")
        if isinstance(g, _C.Dataset) and g.build_options["symmetrize"] \
                and 0 < len(w) == g.num_input_edges:
            # One row per input edge: edge ID e (E + i reverses input edge i) takes row e mod E.
            eids = np.asarray(graph.eids)
            num_ids = max(graph.num_edges, int(eids.max()) + 1 if eids.size else 0)
            w = w[np.arange(num_ids) % len(w)]
        return w

    def bind(self, g, local: bool = False):
        """The C++ sampler over ``g``'s graph (cached per graph and weights): a distributed
        sampler (local nodes sampled here, remote ones by their owners) for a distributed-mode
        DistGraph, unless ``local`` (a 1-part DistGraph's whole graph sampled here), a GPU
        sampler or weights (``prob``) ask for the standalone one."""
        if _is_distributed(g):
            one_part = g.get_partition_book().num_owners() == 1
            if self.prob is not None and not one_part and not isinstance(self.prob, str):
                raise ValueError("NeighborSampler(prob=<array>): over a distributed DistGraph "
                                 f"of {g.get_partition_book().num_partitions()} partitions "
                                 "prob must be the name of an edge feature of the graph (each "
                                 "owner samples with its own rows of it), not an array")
            # One part: weights and out-edges are sampled over the whole graph, in this process.
            if not local and (self.prob is None or not one_part) and \
                    not (one_part and self.edge_dir == "out"):
                key = (id(g.runtime_graph), self.prob, self.device)
                hit = self._bound.get(key)
                if hit is None:
                    if self.edge_dir != "in":
                        raise ValueError("NeighborSampler over a distributed DistGraph of "
                                         "several partitions: only edge_dir='in' is "
                                         "implemented")
                    if self.prob is not None and self.prob not in g.edata:
                        raise KeyError(f"NeighborSampler: prob={self.prob!r} is not an edge "
                                       f"feature of the graph; its edge features: "
                                       f"{sorted(g.edata)}")
                    if self.device == "cuda":
                        # This rank's rows on its GPU, keyed as the CPU distributed sampler:
                        # where place_on_device put the structure, else gpu (uva if asked).
                        placed = getattr(g, "device_placement", None) or {}
                        where = "uva" if self.use_uva else placed.get("structure", "gpu")
                        s = _C.DistDeviceSampler(g.runtime_graph, self.fanouts, self.replace,
                                                 where, self.prob or "")
                    else:
                        s = _C.DistNeighborSampler(g.runtime_graph, self.fanouts, self.replace,
                                                   self.prob or "")
                    hit = self._bound[key] = (s, None)
                return hit[0]
            # A standalone job: the whole graph, sampled in this process (or on the GPU).
        graph = _graph_of(g)
        source = None if self.prob is None else self._weights_source(g)
        key = (id(graph), None if self.prob is None else
               (self.prob if isinstance(self.prob, str) else None, id(source)), self.device)
        hit = self._bound.get(key)
        if hit is None:
            w = None if self.prob is None else self._edge_weights(g, graph)
            # A GPU sampler places the structure where place_on_device said, else on the GPU.
            placed = getattr(g, "device_placement", None) or {}
            where = "uva" if self.use_uva else placed.get("structure", "gpu")
            s = _C.NeighborSampler(self._adjacency(graph), self.fanouts, self.replace,
                                   self.edge_dir, self.num_threads, self.device, where, w)
            hit = self._bound[key] = (s, source)
        return hit[0]

    def _adjacency(self, graph: "_C.Graph") -> "_C.Graph":
        """The adjacency the C++ sampler reads for ``self.edge_dir``: ``graph`` (the CSC, rows
        of in-edges) for "in", its transpose (the CSR, rows of out-edges, the same edge IDs)
        for "out", made once per graph (the entry keeps ``graph`` alive, so its id, which keys
        the samplers, is not reused)."""
        if self.edge_dir != "out":
            return graph  # "in", or a wrong name the C++ sampler refuses
        key = ("out-edges", id(graph))
        hit = self._bound.get(key)
        if hit is None:
            hit = self._bound[key] = (graph.transpose(), graph)
        return hit[0]

    def sample_blocks(self, g, seed_nodes, seed: Optional[int] = None,
                      epoch: Optional[int] = None, batch: int = 0):
        """Blocks of one batch of ``seed_nodes`` (unique IDs), input layer first:
        ``(input_nodes, seed_nodes, blocks)``.

        The sample is a pure function of the key (``seed``, ``epoch``, ``batch``; docs/
        sampling.md): with ``seed`` given, the key is ``(seed, epoch or 0, batch)`` and the
        same call returns the same blocks. Without ``seed`` (DGL's call, e.g. as a
        ``collate_fn``) every call draws a fresh key, as DGL's sampler draws fresh randomness:
        ``seed`` and, unless given, ``epoch`` are drawn from torch's global RNG (NumPy's
        without torch), so ``torch.manual_seed`` makes a sequence of calls repeatable. The
        loaders pass their own keys (loader seed, epoch, batch) and draw nothing from torch."""
        ids = to_numpy_ids(seed_nodes, "seed_nodes", num_nodes=_num_nodes(g))
        sampler = self.bind(g)
        if seed is None:
            seed, drawn_epoch = _fresh_key_words()
            epoch = drawn_epoch if epoch is None else epoch
        blocks = sampler.sample_blocks(ids, seed, 0 if epoch is None else epoch, batch)
        return as_tensor(np.asarray(blocks[0].src_nodes)), as_tensor(ids), \
            [Block(b) for b in blocks]


# DGL's alias of NeighborSampler (dgl.dataloading.MultiLayerNeighborSampler).
MultiLayerNeighborSampler = NeighborSampler


class MultiLayerFullNeighborSampler(NeighborSampler):
    """Every neighbor of every seed at each of ``num_layers`` layers (DGL's
    ``dgl.dataloading.MultiLayerFullNeighborSampler``): ``NeighborSampler([-1] * num_layers,
    ...)`` with the same keyword arguments (``edge_dir``, ``prefetch_node_feats``,
    ``prefetch_labels``, ``device``, ...). Without replacement, so the blocks hold every edge
    once, whatever the key."""

    def __init__(self, num_layers: int, edge_dir: str = "in", **kwargs):
        n = _integer_arg("MultiLayerFullNeighborSampler", "num_layers", num_layers, 1)
        for unfit in ("fanouts", "replace", "prob"):
            if unfit in kwargs:
                raise TypeError(f"MultiLayerFullNeighborSampler: {unfit} does not apply (every "
                                "neighbor is taken); use NeighborSampler")
        super().__init__([-1] * n, edge_dir=edge_dir, **kwargs)


def _fresh_key_words() -> tuple:
    """Two random 32-bit words (a key's seed and epoch) from torch's global RNG, or NumPy's
    global RNG without torch: a run seeded with ``torch.manual_seed`` draws the same words."""
    if HAVE_TORCH:
        words = torch.randint(0, 2**32, (2,), dtype=torch.int64).tolist()
    else:
        words = np.random.randint(0, 2**32, size=2, dtype=np.int64).tolist()
    return int(words[0]), int(words[1])


class _Uniform:
    """Uniform negative sampler: ``k`` negatives (src, random node) per positive edge."""

    def __init__(self, k: int):
        try:
            k = operator.index(k)  # an integer (NumPy's too), never a truncated float
        except TypeError:
            raise TypeError(f"negative_sampler.Uniform: k must be an integer, got {k!r}") from None
        if k < 1:
            raise ValueError(f"negative_sampler.Uniform: k must be >= 1, got {k}")
        self.k = int(k)


class negative_sampler:  # noqa: N801 - mirrors dgl.dataloading.negative_sampler
    Uniform = _Uniform


def _check_edge_prediction_args(what: str, exclude, negative_sampler,
                                reverse_eids=None) -> None:
    """TypeError for what Tessera's edge loaders cannot take in place of DGL's: a negative
    sampler other than ``negative_sampler.Uniform``, an ``exclude`` that is not a name (a
    callable); ValueError for ``exclude="reverse_id"`` without ``reverse_eids``. A name other
    than "self" / "reverse_id" is refused by the C++ loader."""
    if negative_sampler is not None and not isinstance(negative_sampler, _Uniform):
        raise TypeError(f"{what}: negative_sampler must be tessera.dataloading.negative_sampler"
                        ".Uniform(k), the negative sampler Tessera implements, got "
                        f"{type(negative_sampler).__name__}")
    if exclude is not None and not isinstance(exclude, str):
        raise TypeError(f"{what}: exclude must be None, 'self' or 'reverse_id' (with "
                        f"reverse_eids), got {type(exclude).__name__}; a callable is not "
                        "supported")
    if exclude == "reverse_id" and reverse_eids is None:
        raise ValueError(f"{what}: exclude='reverse_id' needs reverse_eids (the ID of each "
                         "edge's reverse, e.g. from "
                         "tessera.dataloading.symmetrized_reverse_eids)")


def as_edge_prediction_sampler(sampler: NeighborSampler, exclude=None, reverse_eids=None,
                               negative_sampler=None):
    """DGL's wrapper: a copy of ``sampler`` configured for link prediction. ``sampler`` itself
    is left as it was, so a training and a validation edge sampler can be derived from one base
    sampler with different exclusions and negatives. ``exclude`` and ``negative_sampler`` as
    ``EdgeDataLoader`` takes them."""
    _check_edge_prediction_args("as_edge_prediction_sampler", exclude, negative_sampler,
                                reverse_eids)
    out = copy.copy(sampler)  # shares the bound C++ samplers: the same fanouts and weights
    out._edge_pred = {"exclude": exclude, "reverse_eids": reverse_eids,
                      "negative_sampler": negative_sampler}
    return out


# Keyword arguments of DGL's and torch's DataLoader that have no counterpart here and change
# nothing about the batches: accepted (so ported scripts run) with a warning that they do nothing.
_IGNORED_LOADER_ARGS = ("pin_memory", "persistent_workers", "pin_prefetcher",
                        "use_prefetch_thread", "use_alternate_streams", "timeout")


def _check_loader_kwargs(cls: str, kwargs: dict) -> None:
    """TypeError for an unknown keyword (a misspelt ``batchsize=`` must not be ignored), a
    warning for the ones listed in _IGNORED_LOADER_ARGS, and ValueError for ``use_ddp=True``,
    whose seed split Tessera does differently."""
    for name, value in kwargs.items():
        if name == "use_ddp":
            if value:
                raise ValueError(f"{cls}(use_ddp=True): split the seeds with node_split / "
                                 "edge_split (each rank passes its share) or pass the same seeds "
                                 "on every rank with global_order=True")
        elif name in _IGNORED_LOADER_ARGS:
            warnings.warn(f"{cls}: {name}={value!r} has no effect in Tessera (sampling runs in "
                          "C++ threads: see num_workers and prefetch)", stacklevel=3)
        else:
            raise TypeError(f"{cls}() got an unexpected keyword argument {name!r}")


def _num_nodes(g) -> Optional[int]:
    """The node count of a DistGraph (``num_nodes()``), Dataset or Graph (``num_nodes``)."""
    n = getattr(g, "num_nodes", None)
    n = n() if callable(n) else n
    return None if n is None else int(n)


def _num_edge_ids(g) -> Optional[int]:
    """One past the largest edge ID of ``g``, the length of a mask over its edges: a DistGraph's
    ``num_edges()`` (its IDs are 0..E-1); a Dataset or Graph can lack some IDs below it (the
    reverses ``symmetrize`` did not add, the edges ``deduplicate`` dropped)."""
    if hasattr(g, "get_partition_book"):  # a DistGraph (local_graph: not in distributed mode)
        return int(g.num_edges())
    graph = _graph_of(g)
    eids = np.asarray(graph.eids)
    return int(eids.max()) + 1 if eids.size else int(graph.num_edges)


class _LoaderBase:
    def __init__(self, batch_size: int, shuffle: bool, drop_last: bool, num_workers: int,
                 seed: Optional[int], device):
        self.batch_size = _integer_arg(type(self).__name__, "batch_size", batch_size, 1)
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.num_workers = int(num_workers)
        if seed is None:
            seed = int(np.random.default_rng().integers(0, 2**31))
            if _runtime.get_world_size() > 1:  # loader creation is collective: take rank 0's
                seed = all_gather_object(seed, _what=f"{type(self).__name__} (seed)")[0]
        self.seed = int(seed)
        if not 0 <= self.seed < 2**32:
            raise ValueError(f"seed must be in [0, 2^32), got {self.seed}")
        self.device = device
        self.epoch = 0  # the epoch the next __iter__ runs
        self._start_batch = 0  # resume position within that epoch
        self.batch_index = 0  # batches of the current epoch handed out
        self._active = None  # (token, epoch) of the unfinished latest iteration (_batches)

    def __len__(self) -> int:
        return int(self._loader.num_batches)

    def set_epoch(self, epoch: int, start_batch: int = 0) -> None:
        """The epoch the next iteration runs (and the batch it starts at, for resuming); an
        unfinished iteration ends (its iterator raises if resumed)."""
        epoch, start_batch = int(epoch), int(start_batch)
        if epoch < 0 or not 0 <= start_batch < max(len(self), 1):
            raise ValueError(f"{type(self).__name__}: cannot start epoch {epoch} at batch "
                             f"{start_batch}: epochs start at 0 and this loader has {len(self)} "
                             "batches per epoch")
        if self._active is not None:
            self._active = None
            self._loader.stop()
        self.epoch, self._start_batch = epoch, start_batch

    def state_dict(self) -> dict:
        """Loader position: resume with ``load_state_dict`` to continue the same sequence."""
        return {"seed": self.seed, "epoch": self.epoch, "batch": self._start_batch,
                "num_batches": len(self)}

    def load_state_dict(self, state: dict) -> None:
        """Resumes at the position ``state_dict`` gave. Refused when the state is another
        sequence's: another seed, or another number of batches per epoch (another batch size,
        seed set or world size, where the same batch index would hold other seeds)."""
        if int(state["seed"]) != self.seed:
            raise ValueError(f"loader state has seed {state['seed']}, this loader {self.seed}")
        if "num_batches" in state and int(state["num_batches"]) != len(self):
            raise ValueError(f"loader state is of {state['num_batches']} batches per epoch, this "
                             f"loader has {len(self)} (another batch size, seed set or number "
                             "of ranks)")
        self.set_epoch(state["epoch"], state.get("batch", 0))

    def _batches(self, next_batch=None, sample_batch=None):
        if self._active is not None:
            # An earlier iteration is unfinished but still referenced (``it = iter(dl);
            # next(it)``): it ends here as if it had been left early, and a resumed or freed
            # old iterator neither moves the loader's position nor stops this one.
            self.epoch, self._start_batch = self._active[1] + 1, 0
            self._active = None
            self._loader.stop()
        epoch, start = self.epoch, self._start_batch
        n = len(self)
        next_batch = next_batch or self._loader.next
        sample_batch = sample_batch or self._loader.sample_batch
        token = (object(), epoch)
        self._active = token
        if start == 0:
            self._loader.start_epoch(epoch)
            it = iter(next_batch, None)
        else:  # resume mid-epoch: the same batches, sampled synchronously from `start` on
            it = (sample_batch(epoch, b) for b in range(start, n))
        self.batch_index = start
        try:
            while True:
                if self._active is not token:
                    raise RuntimeError(
                        f"{type(self).__name__}: this iterator was left unfinished and a newer "
                        "iteration of the loader has started since; iterate the new one")
                mb = next(it, None)
                if mb is None:
                    break
                self.batch_index += 1
                # Position after this batch: a checkpoint (state_dict) taken now resumes at the
                # next one.
                if self.batch_index >= n:
                    self.epoch, self._start_batch = epoch + 1, 0
                else:
                    self.epoch, self._start_batch = epoch, self.batch_index
                yield mb
        finally:
            # Done, or left early (break, an exception in the loop body, next(iter(loader))):
            # like a torch DataLoader, the next iteration is a new epoch from its first batch
            # (resume a position on purpose with load_state_dict / set_epoch). The epoch stops
            # now without waiting: its prefetched batches are freed, and a batch being sampled
            # finishes in the background.
            if self._active is token:
                self._active = None
                self.epoch, self._start_batch = epoch + 1, 0
                self._loader.stop()

    def _to(self, t):
        if self.device is None or not HAVE_TORCH:
            return t
        return t.to(self.device)

    def _prefetch_names(self, g, graph_sampler) -> None:
        """The sampler's DGL ``prefetch_node_feats`` / ``prefetch_labels``, each checked to be
        node data of ``g`` (KeyError otherwise)."""
        self._node_names = list(getattr(graph_sampler, "prefetch_node_feats", []))
        self._label_names = list(getattr(graph_sampler, "prefetch_labels", []))
        for name in self._node_names + self._label_names:
            if not hasattr(g, "ndata") or name not in g.ndata:
                raise KeyError(f"{type(self).__name__}: node data {name!r} to prefetch is not in "
                               f"the graph; it has {sorted(getattr(g, 'ndata', {}))}")

    def _prefetch(self, blocks, input_nodes, output_nodes) -> None:
        """DGL's prefetching: the node data into ``blocks[0].srcdata`` (rows of
        ``input_nodes``), the labels into ``blocks[-1].dstdata`` (rows of ``output_nodes``, the
        last block's destinations), as torch tensors on the device of the IDs (the loader's
        ``device``; NumPy without torch)."""
        for name in self._node_names:
            blocks[0].srcdata[name] = self._node_rows(name, input_nodes)
        for name in self._label_names:
            blocks[-1].dstdata[name] = self._node_rows(name, output_nodes)

    def _node_rows(self, name: str, ids):
        """Rows ``ids`` of node data ``name``: a DistGraph's DistTensor reads them onto the
        IDs' device itself; a Dataset's NumPy array is indexed on the host, and its rows are
        made a tensor and moved to the loader's device."""
        data = self.g.ndata[name]
        if isinstance(data, np.ndarray):
            return self._to(as_tensor(data[to_numpy_ids(ids, f"rows of {name!r}")]))
        return data[ids]


class NodeDataLoader(_LoaderBase):
    """Mini-batches of seed nodes with their sampled blocks (DGL's ``NodeDataLoader`` /
    ``DistNodeDataLoader``). Iterating runs one epoch and moves to the next; yields
    ``(input_nodes, seeds, blocks)``.

    Over a distributed-mode DistGraph creation is collective and every rank gets the same
    number of batches per epoch, so no rank leaves the gradient all-reduce early: a rank with
    fewer batches repeats batches from the start of the epoch (its own first ones with
    ``global_order=False``; with ``global_order=True`` the global list wraps, as torch's
    DistributedSampler pads). ``global_order=False`` (DGL's way): ``nids`` is this
    rank's share (``node_split``). ``global_order=True``: every rank passes the same ``nids``
    (e.g. all training nodes); they are ordered by original node ID, shuffled per epoch and
    cut into global batches, rank r taking batches r, r + P, ...; batch j has the same seeds
    and, after mapping through ``orig_nids``, the same blocks for any number of ranks and any
    partitioning. ``batch_index`` counts the batches of the epoch handed out so far, so the
    batch just yielded is this rank's batch ``batch_index - 1``, and
    ``global_batch_index(batch_index - 1)`` its global index.

    With a ``NeighborSampler(device="cuda")`` over a distributed-mode DistGraph the batches are
    the same, made in device memory by C++ worker threads (``num_workers``, each on a CUDA
    stream of its own, ``prefetch`` batches ahead): the yielded IDs and ``DeviceBlock``s are
    CUDA tensors sharing the batch's memory, with the prefetched node data in their frames.
    That memory is reused only after the work queued on the CUDA stream that was current when
    iteration began, at the time the batch's last tensor is freed.
    """

    def __init__(self, g, nids, graph_sampler: NeighborSampler, batch_size: int = 1024,
                 shuffle: bool = True, drop_last: bool = False, num_workers: int = 1,
                 seed: Optional[int] = 0, device=None, prefetch: int = 4,
                 global_order: bool = False, **kwargs):
        _check_loader_kwargs(type(self).__name__, kwargs)
        if _edge_prediction(graph_sampler) is not None:
            raise ValueError(f"{type(self).__name__}: graph_sampler comes from "
                             "as_edge_prediction_sampler (link prediction over edge IDs); use "
                             "EdgeDataLoader, or DataLoader, which yields (input_nodes, "
                             "pair_graph, neg_pair_graph, blocks) for it")
        super().__init__(batch_size, shuffle, drop_last, num_workers, seed, device)
        self.g = g
        self.graph_sampler = graph_sampler
        self.nids = to_numpy_ids(nids, "nids", num_nodes=_num_nodes(g))
        self.global_order = bool(global_order)
        self._sampler = graph_sampler.bind(g)
        self._prefetch_names(g, graph_sampler)
        self._device_batches = isinstance(self._sampler, _C.DistDeviceSampler)
        if self._device_batches:
            # The GPU path: batches (blocks, prefetched rows) made in device memory by C++.
            if device is not None and torch.device(device).type != "cuda":
                raise ValueError(f"{type(self).__name__}: a NeighborSampler(device='cuda') "
                                 f"yields CUDA batches; device={device!r} asks for another")
            self._cuda = torch.device("cuda", self._sampler.device)
            self.device = self._cuda
            self._node_tensors = [g.ndata[n] for n in self._node_names]
            self._label_tensors = [g.ndata[n] for n in self._label_names]
            self._loader = _C.DistDeviceNodeLoader(
                self._sampler, self.nids, self.batch_size, self.shuffle, self.drop_last,
                self.num_workers, int(prefetch), self.seed, self.global_order,
                [t._dist for t in self._node_tensors], [t._dist for t in self._label_tensors])
        # A GPU sampler, or a weighted one over one partition, is standalone: the whole graph.
        elif isinstance(self._sampler, _C.DistNeighborSampler):
            self._loader = _C.DistNodeDataLoader(self._sampler, self.nids, self.batch_size,
                                                 self.shuffle, self.drop_last,
                                                 self.num_workers, int(prefetch), self.seed,
                                                 self.global_order)
        else:
            if self.global_order:
                raise ValueError("NodeDataLoader(global_order=True) needs a distributed-mode "
                                 "DistGraph (one partition per process) and its distributed "
                                 "sampler (device='cpu', no prob)")
            self._loader = _C.NodeDataLoader(self._sampler, self.nids, self.batch_size,
                                             self.shuffle, self.drop_last, self.num_workers,
                                             int(prefetch), self.seed)

    def global_batch_index(self, b: int) -> int:
        """The sampling key's batch index of this rank's batch ``b`` (b itself standalone)."""
        if hasattr(self._loader, "global_batch_index"):
            return int(self._loader.global_batch_index(b))
        return int(b)

    def batch_seeds(self, epoch: int, batch: int) -> np.ndarray:
        return self._loader.batch_seeds(epoch, batch)

    def __iter__(self):
        if self._device_batches:
            yield from self._iter_device()
            return
        for mb in self._batches():
            blocks = [Block(b) for b in mb["blocks"]]
            if self.device is not None and HAVE_TORCH:
                blocks = [b.to(self.device) for b in blocks]
            input_nodes = self._to(as_tensor(mb["input_nodes"]))
            seeds = self._to(as_tensor(mb["seeds"]))
            self._prefetch(blocks, input_nodes, seeds)
            yield input_nodes, seeds, blocks

    def _iter_device(self):
        stream = torch.cuda.current_stream(self._cuda).cuda_stream
        nxt = lambda: self._loader.next(stream)  # noqa: E731
        smp = lambda e, b: self._loader.sample_batch(e, b, stream)  # noqa: E731
        for mb in self._batches(nxt, smp):
            blocks = [DeviceBlock(mb.block(i), self._cuda) for i in range(mb.num_blocks)]
            seeds = mb.seeds()
            if seeds is None:
                seeds = torch.empty(0, dtype=torch.int64, device=self._cuda)
            for i, t in enumerate(self._node_tensors):
                blocks[0].srcdata[self._node_names[i]] = _rows_of(
                    mb.node_rows(i, _row_bytes(t)), t, mb.num_input_nodes, self._cuda)
            for i, t in enumerate(self._label_tensors):
                blocks[-1].dstdata[self._label_names[i]] = _rows_of(
                    mb.label_rows(i, _row_bytes(t)), t, mb.num_seeds, self._cuda)
            self.last_batch_stats = (mb.sample_seconds, mb.gather_seconds, mb.sampled_edges)
            yield blocks[0].srcnodes, seeds, blocks


def _row_bytes(t) -> int:
    """Bytes of one row of a DistTensor."""
    n = 1
    for d in t.shape[1:]:
        n *= int(d)
    return n * np.dtype(t._dtype).itemsize


def _rows_of(raw, t, rows: int, device):
    """A device batch's uint8 [rows, row_bytes] rows of DistTensor ``t`` viewed as ``t``'s dtype
    and row shape (no copy); an empty tensor of that shape when there are none."""
    dtype = _TORCH_DTYPES[np.dtype(t._dtype)]
    shape = (rows,) + tuple(int(d) for d in t.shape[1:])
    if raw is None:
        return torch.zeros(shape, dtype=dtype, device=device)
    return raw.view(dtype).view(shape)


DistNodeDataLoader = NodeDataLoader


class _DataLoaderType(type):
    """DataLoader's metaclass: the EdgeDataLoader a DataLoader call returns over an
    edge-prediction sampler is an instance of DataLoader too, as DGL's is."""

    def __instancecheck__(cls, obj):
        return super().__instancecheck__(obj) or (
            cls is DataLoader and isinstance(obj, _EdgePredictionDataLoader))


class DataLoader(NodeDataLoader, metaclass=_DataLoaderType):
    """DGL 1.x's ``dgl.dataloading.DataLoader``: the loader the sampler calls for. Takes
    ``NodeDataLoader``'s arguments. Over a sampler from ``as_edge_prediction_sampler`` the
    indices are edge IDs and the result is an ``EdgeDataLoader`` (with the wrapper's
    ``exclude``, ``reverse_eids`` and ``negative_sampler``; ``isinstance(it, DataLoader)``
    holds), which yields DGL's ``(input_nodes, pair_graph, neg_pair_graph, blocks)``
    (``(input_nodes, pair_graph, blocks)`` without a negative sampler); over any other sampler
    it is a ``NodeDataLoader`` yielding ``(input_nodes, seeds, blocks)``."""

    def __new__(cls, *args, **kwargs):
        if not args and not kwargs:  # copy / pickle make the object before its state
            return super().__new__(cls)
        bound = inspect.signature(NodeDataLoader.__init__).bind(None, *args, **kwargs)
        if _edge_prediction(bound.arguments["graph_sampler"]) is None:
            return super().__new__(cls)
        named = {k: v for k, v in bound.arguments.items() if k not in ("self", "kwargs")}
        named["eids"] = named.pop("nids")
        return _EdgePredictionDataLoader(**named, **bound.arguments.get("kwargs", {}))


def _edge_prediction(graph_sampler) -> Optional[dict]:
    """What ``as_edge_prediction_sampler`` set on ``graph_sampler`` (exclude, reverse_eids,
    negative_sampler), or None for a sampler it did not make."""
    return getattr(graph_sampler, "_edge_pred", None)


class EdgeDataLoader(_LoaderBase):
    """Link-prediction mini-batches over edge IDs (DGL's ``EdgeDataLoader`` /
    ``DistEdgeDataLoader``): yields ``(input_nodes, pos_graph, neg_graph, blocks)``; with no
    negative sampler, ``(input_nodes, pos_graph, blocks)``.

    ``negative_sampler`` is None or ``negative_sampler.Uniform(k)`` (DGL's other negative
    samplers and callables are not implemented). ``exclude`` is None, "self" or "reverse_id"
    (with ``reverse_eids``; DGL's callable is not supported); for a graph built with
    ``symmetrize`` from E input edges, ``reverse_eids`` is
    ``tessera.dataloading.symmetrized_reverse_eids(E)`` (in the graph's edge IDs: for a
    partitioned graph map it through the relabelling, or pass the DistGraph itself). Where the
    input already lists both directions of a pair, symmetrize adds no E + i: the other
    direction is an input edge of its own ID, a parallel edge this map does not name, so it is
    not excluded (DGL's recipe behaves the same); pass ``reverse_eids`` of your own for that.

    The sampler's ``prefetch_node_feats`` / ``prefetch_labels`` are gathered as by
    ``NodeDataLoader``: into ``blocks[0].srcdata`` (rows of the input nodes) and
    ``blocks[-1].dstdata`` (rows of its destinations, the nodes of the pair graphs).

    Over a distributed-mode DistGraph of several partitions (one per rank) this is DGL's
    ``DistEdgeDataLoader`` (C++ ``dist::DistEdgeDataLoader``): creation is collective, every
    rank runs the same number of batches per epoch (short shares wrap around), positives are
    looked up in the graph's edge-endpoint table, negatives are drawn over original node IDs
    keyed by (seed, epoch, global batch index, original edge ID), and ``exclude`` is applied as
    a post-filter of each hop's sampled edges (as DGL's distributed sampler does; the
    standalone loader never draws excluded edges instead). ``reverse_eids`` then holds, per new
    edge ID, its reverse or -1. ``global_order=False``: ``eids`` is this rank's share
    (``edge_split``); ``global_order=True``: every rank passes the same ``eids``; they are
    ordered by original edge ID and cut into global batches dealt round-robin, so batch j is
    the same for any number of ranks (also selects the distributed loader at one partition).
    A 1-part distributed-mode graph without ``global_order`` samples its whole graph locally.
    """

    def __init__(self, g, eids, graph_sampler: NeighborSampler, batch_size: int = 1024,
                 shuffle: bool = True, drop_last: bool = False, num_workers: int = 1,
                 seed: Optional[int] = 0, device=None, negative_sampler=None, exclude=None,
                 reverse_eids=None, prefetch: int = 4, global_order: bool = False,
                 **kwargs):
        _check_loader_kwargs(type(self).__name__, kwargs)
        super().__init__(batch_size, shuffle, drop_last, num_workers, seed, device)
        self.global_order = bool(global_order)
        distributed = _is_distributed(g) and (
            g.get_partition_book().num_owners() > 1 or self.global_order)
        if self.global_order and not distributed:
            raise ValueError("EdgeDataLoader(global_order=True) needs a distributed-mode "
                             "DistGraph (one partition per process)")
        ep = _edge_prediction(graph_sampler) or {}
        negative_sampler = negative_sampler or ep.get("negative_sampler")
        exclude = exclude if exclude is not None else ep.get("exclude")
        reverse_eids = reverse_eids if reverse_eids is not None else ep.get("reverse_eids")
        _check_edge_prediction_args(type(self).__name__, exclude, negative_sampler,
                                    reverse_eids)
        self.g = g
        self.graph_sampler = graph_sampler
        self._prefetch_names(g, graph_sampler)
        self.eids = to_numpy_ids(eids, "eids", num_edges=_num_edge_ids(g))
        self.negatives = negative_sampler.k if negative_sampler is not None else 0
        rev = None if reverse_eids is None else to_numpy_ids(reverse_eids, "reverse_eids",
                                                                  num_edges=_num_edge_ids(g))
        if distributed:
            several = g.get_partition_book().num_owners() > 1
            prob = getattr(graph_sampler, "prob", None)
            device = getattr(graph_sampler, "device", "cpu")
            if device != "cpu":  # checked before bind, which would place the graph on the GPU
                raise ValueError(f"{type(self).__name__} over a distributed-mode DistGraph samples "
                                 f"on the CPU; the NeighborSampler has device={device!r} (the "
                                 "GPU sampler serves NodeDataLoader): use device='cpu'")
            if prob is not None and not (several and isinstance(prob, str)):
                if several:
                    graph_sampler.bind(g)  # raises, saying what several partitions lack
                raise ValueError("EdgeDataLoader(global_order=True) needs the distributed "
                                 "sampler (device='cpu', no prob)")
            self._sampler = graph_sampler.bind(g)
            self._loader = _C.DistEdgeDataLoader(self._sampler, self.eids, self.batch_size,
                                                 self.shuffle, self.drop_last,
                                                 self.num_workers, int(prefetch), self.seed,
                                                 self.negatives, exclude or "none", rev,
                                                 self.global_order)
        else:
            # A 1-part distributed-mode graph (standalone) samples its whole graph locally.
            self._sampler = graph_sampler.bind(g, local=True)
            self._loader = _C.EdgeDataLoader(self._sampler, self.eids, self.batch_size,
                                             self.shuffle, self.drop_last, self.num_workers,
                                             int(prefetch), self.seed, self.negatives,
                                             exclude or "none", rev)

    def global_batch_index(self, b: int) -> int:
        """The sampling key's batch index of this rank's batch ``b`` (b itself standalone)."""
        if hasattr(self._loader, "global_batch_index"):
            return int(self._loader.global_batch_index(b))
        return int(b)

    def batch_eids(self, epoch: int, batch: int) -> np.ndarray:
        """The seed edges of this rank's batch ``batch`` of ``epoch`` (nothing is sampled)."""
        return self._loader.batch_eids(epoch, batch)

    def __iter__(self):
        for mb in self._batches():
            blocks = [Block(b) for b in mb["blocks"]]
            n = len(mb["seeds"])
            pos = PairGraph(mb["pos_src_local"], mb["pos_dst_local"], n, mb["eids"])
            input_nodes = self._to(as_tensor(mb["input_nodes"]))
            moved = self.device is not None and HAVE_TORCH
            if moved:
                blocks = [b.to(self.device) for b in blocks]
                pos = pos.to(self.device)
            if self._node_names or self._label_names:
                self._prefetch(blocks, input_nodes, self._to(as_tensor(mb["seeds"])))
            if self.negatives:
                neg = PairGraph(mb["neg_src_local"], mb["neg_dst_local"], n)
                yield input_nodes, pos, neg.to(self.device) if moved else neg, blocks
            else:
                yield input_nodes, pos, blocks


class _EdgePredictionDataLoader(EdgeDataLoader):
    """The EdgeDataLoader a DataLoader call makes over an edge-prediction sampler (an instance
    of DataLoader as well, by DataLoader's metaclass)."""


# What it is to its users: its messages and repr say EdgeDataLoader.
_EdgePredictionDataLoader.__name__ = _EdgePredictionDataLoader.__qualname__ = "EdgeDataLoader"



DistEdgeDataLoader = EdgeDataLoader


class DistDataLoader:
    """DGL's ``dgl.distributed.DistDataLoader``: mini-batches of ``dataset`` (a tensor, array or
    sequence of node or edge IDs) handed to ``collate_fn`` as a list of Python ints, the
    batch's items in order; the loader yields what ``collate_fn`` returns (the list itself
    without one). ``shuffle`` permutes the items at every epoch with torch's global RNG, as
    DGL's does (``torch.manual_seed`` repeats it); ``drop_last`` drops a last batch smaller than
    ``batch_size``. An item that is a pair ``(type, id)`` keeps its type and has its ID made an
    int.

    ``collate_fn`` runs in this process, batch by batch as the loop asks (DGL's without sampler
    workers). ``queue_size`` is accepted for DGL's signature and has no effect: Tessera's
    samplers run in C++ threads (``NeighborSampler(num_threads=...)``), and
    ``DistNodeDataLoader`` / ``DistEdgeDataLoader`` prepare batches ahead of the loop. A typical
    ``collate_fn`` is ``functools.partial(sampler.sample_blocks, g)``. Not collective: each rank
    iterates its own dataset. ``len(loader)`` is the number of batches per epoch (DGL's loader
    has no length)."""

    def __init__(self, dataset, batch_size: int, shuffle: bool = False, collate_fn=None,
                 drop_last: bool = False, queue_size: Optional[int] = None):
        self.batch_size = _integer_arg("DistDataLoader", "batch_size", batch_size, 1)
        if collate_fn is not None and not callable(collate_fn):
            raise TypeError(f"DistDataLoader: collate_fn must be callable, got "
                            f"{type(collate_fn).__name__}")
        if queue_size is not None:
            _integer_arg("DistDataLoader", "queue_size", queue_size, 1)
        try:
            n = len(dataset)
        except TypeError:
            raise TypeError(f"DistDataLoader: dataset must be a sequence of IDs (a tensor, an "
                            f"array, a list), got {type(dataset).__name__}") from None
        if HAVE_TORCH and isinstance(dataset, torch.Tensor) and dataset.dim() != 1:
            raise ValueError(f"DistDataLoader: dataset must be 1-D IDs, got shape "
                             f"{tuple(dataset.shape)}")
        if isinstance(dataset, np.ndarray) and dataset.ndim != 1:
            raise ValueError(f"DistDataLoader: dataset must be 1-D IDs, got shape "
                             f"{dataset.shape}")
        self.dataset, self.collate_fn = dataset, collate_fn
        self.shuffle, self.drop_last = bool(shuffle), bool(drop_last)
        self.queue_size = queue_size
        self._n = int(n)
        self._order = None
        self._pos = self._n

    def __len__(self) -> int:
        full, rest = divmod(self._n, self.batch_size)
        return full + (1 if rest and not self.drop_last else 0)

    def __iter__(self):
        if not self.shuffle:
            self._order = None
        elif HAVE_TORCH:
            self._order = torch.randperm(self._n).numpy()
        else:
            self._order = np.random.permutation(self._n)
        self._pos = 0
        return self

    def _items(self, begin: int, end: int) -> list:
        idx = np.arange(begin, end) if self._order is None else self._order[begin:end]
        d = self.dataset
        if HAVE_TORCH and isinstance(d, torch.Tensor):
            return d[torch.from_numpy(np.ascontiguousarray(idx))].tolist()
        if isinstance(d, np.ndarray):
            return d[idx].tolist()
        out = [d[int(i)] for i in idx]
        return [(x[0], _scalar(x[1])) if isinstance(x, tuple) else _scalar(x) for x in out]

    def __next__(self):
        left = self._n - self._pos
        if left <= 0 or (self.drop_last and left < self.batch_size):
            self._pos = self._n
            raise StopIteration
        end = min(self._pos + self.batch_size, self._n)
        batch = self._items(self._pos, end)
        self._pos = end
        return batch if self.collate_fn is None else self.collate_fn(batch)


def _scalar(x):
    """A 0-d tensor or NumPy scalar as a Python number (DGL's ``F.as_scalar``)."""
    return x.item() if hasattr(x, "item") else x


def symmetrized_reverse_eids(num_input_edges) -> np.ndarray:
    """reverse_eids of a graph built with ``symmetrize``: edges i and E + i reverse each other.

    Given a DistGraph instead of E (distributed or simulated mode): the same in its new
    (relabelled) edge IDs, -1 where an edge's partner i or E + i is not stored: symmetrize did
    not add E + i because the input held the reversed pair itself (that input edge, stored under
    its own ID, is the reverse but is not named), or deduplicate / drop_self_loops dropped it;
    every rank can call it (it reads the original ID of every edge)."""
    g = num_input_edges
    if _is_distributed(g):
        return _C.dist_symmetrized_reverse_eids(g.runtime_graph)
    if _is_dist_graph(g):  # simulated: this process holds every partition
        return _simulated_reverse_eids(g)
    return _C.symmetrized_reverse_eids(int(num_input_edges))


def _simulated_reverse_eids(g) -> np.ndarray:
    """``symmetrized_reverse_eids`` of a DistGraph in simulated mode, as the C++ distributed
    one computes it: from the original ID of every edge, read from the partitions' inner
    edges."""
    what = f"symmetrized_reverse_eids: DistGraph {g.graph_name!r}"
    if not g.config.get("build", {}).get("symmetrize", False):
        raise ValueError(f"{what} was not built with symmetrize; pass reverse_eids of your own")
    ne, ein = g.num_edges(), int(g.config["num_input_edges"])
    orig = np.full(ne, -1, dtype=np.int64)
    for p in range(g.get_partition_book().num_partitions()):
        lp = g.local_partition(p)
        inner = np.asarray(lp.inner_edge, dtype=bool)
        orig[np.asarray(lp.eid)[inner]] = np.asarray(lp.orig_eid)[inner]
    return _C.symmetrized_reverse_eids_of(orig, ein, what)
