# SPDX-License-Identifier: Apache-2.0
"""Cluster-GCN batches from Python: the C++ ``ClusterGcnSampler`` over a graph, a DistGraph, or
the nodes a rank of a distributed job owns, and a loader that hands each batch's subgraph,
features and labels to training on the CPU or the GPU.

A batch is the subgraph induced by the nodes of ``parts_per_batch`` clusters: every edge whose
two ends are among them, i.e. the edges inside the chosen clusters and between them (Cluster-GCN;
DeepGCN's ogbn-proteins training). The clustering is either

* ``"random"``: a balanced random clustering redrawn every epoch, keyed by (seed, epoch, rank)
  (``_C.random_clustering``), as DeepGCN re-clusters ogbn-proteins every epoch; or
* ``"metis"``: METIS parts of the graph, computed once (Cluster-GCN).

Either way the order of the clusters is shuffled every epoch by (seed, epoch, rank). Rank 0 is
the order of a single trainer; a rank r of a "parallel epochs" job passes ``rank=r`` and draws
its own clustering and order, so the trainers see different subgraphs from the same seed.
"""
from __future__ import annotations

import queue
import threading
from typing import Mapping, Optional

import numpy as np

from . import _C, _runtime
from ._tensor import HAVE_TORCH, as_tensor, torch
from .dataloading import _integer_arg

__all__ = ["ClusterGCNSampler", "ClusterGCNLoader", "ClusterBatch", "rank_graph"]


def rank_graph(g):
    """``(graph, first_id)``: the graph a Cluster-GCN sampler over ``g`` clusters, with its
    node ``i`` being node ``first_id + i`` of ``g``.

    ``g`` is a ``_C.Graph``, a ``_C.Dataset`` (its graph), a standalone or simulated
    ``DistGraph`` (the whole graph), or a ``DistGraph`` of a distributed job, for which it is
    the subgraph induced by the nodes this rank owns (its partition's inner nodes, or with
    several trainers per machine its own range of them, and the inner edges between them;
    edges from other nodes are left out)."""
    if isinstance(g, _C.Graph):
        return g, 0
    if isinstance(g, _C.Dataset):
        return g.graph, 0
    from .dist import DistGraph

    if not isinstance(g, DistGraph):
        raise TypeError(f"ClusterGCNSampler: expected a tessera graph, Dataset or DistGraph, "
                        f"got {type(g).__name__}")
    if not g.is_distributed:
        return g.local_graph, 0
    lp = g.local_partition()
    lo, hi = g.local_node_range()
    k = hi - lo
    # This rank's rows of its machine's partition: all of them, or with several trainers per
    # machine its own contiguous range of them.
    first = lo - int(g.get_partition_book().node_range(g.machine)[0])
    if first < 0 or first + k > int(lp.num_inner_nodes):
        raise ValueError(f"ClusterGCNSampler: rank owns [{lo}, {hi}), outside partition "
                         f"{lp.part_id}'s {int(lp.num_inner_nodes)} inner nodes")
    indptr = np.asarray(lp.indptr)[first: first + k + 1]
    indices = np.asarray(lp.indices)[int(indptr[0]):int(indptr[k])]
    nid = np.asarray(lp.nid)
    if not bool(g.config.get("local_indices", True)):
        src = indices - lo  # global new IDs: owned ones are [lo, hi)
    else:
        src = nid[indices] - lo  # local IDs: inner nodes first, then halo
    dst = np.repeat(np.arange(k, dtype=np.int64), np.diff(indptr))
    eid = np.asarray(lp.eid)[int(indptr[0]):int(indptr[k])]
    keep = (src >= 0) & (src < k)
    order = np.lexsort((src[keep], dst[keep]))
    dst, src, eid = dst[keep][order], src[keep][order], eid[keep][order]
    ptr = np.zeros(k + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=k), out=ptr[1:])
    return _C.Graph(ptr, np.ascontiguousarray(src, dtype=np.int64),
                    np.ascontiguousarray(eid, dtype=np.int64)), lo


class ClusterBatch:
    """One Cluster-GCN batch: ``nodes`` (IDs of the sampled graph: global IDs for a DistGraph),
    the induced subgraph's edges ``src -> dst`` as positions in ``nodes`` and their edge IDs
    ``eids``, the ``parts`` it was built from, and the node data the loader gathered
    (``ndata[name]`` rows in the order of ``nodes``). The arrays are torch tensors on the
    loader's device (NumPy without torch)."""

    __slots__ = ("epoch", "index", "parts", "nodes", "src", "dst", "eids", "ndata")

    def __init__(self, epoch, index, parts, nodes, src, dst, eids, ndata=None):
        self.epoch, self.index, self.parts = epoch, index, parts
        self.nodes, self.src, self.dst, self.eids = nodes, src, dst, eids
        self.ndata = ndata or {}

    @property
    def num_nodes(self) -> int:
        return int(self.nodes.shape[0])

    @property
    def num_edges(self) -> int:
        return int(self.src.shape[0])

    def __repr__(self) -> str:
        return (f"ClusterBatch(epoch={self.epoch}, index={self.index}, parts={len(self.parts)}, "
                f"num_nodes={self.num_nodes}, num_edges={self.num_edges})")


def _check_parts(part_of_node: np.ndarray) -> int:
    """The number of parts of a fixed clustering (int64, one part per node): its largest part
    + 1. ValueError naming the node for a negative part, or naming the part for a part number
    that no node has (parts are numbered 0..P-1, none empty)."""
    if part_of_node.size == 0:
        return 0
    neg = np.flatnonzero(part_of_node < 0)
    if neg.size:
        i = int(neg[0])
        raise ValueError(f"ClusterGCNSampler: part_of_node[{i}] is {int(part_of_node[i])}; "
                         "parts are numbered from 0")
    used = np.unique(part_of_node)  # sorted; not bincount, which a part 10**12 would blow up
    if int(used[-1]) + 1 != len(used):
        gap = int(np.flatnonzero(used != np.arange(len(used)))[0])
        raise ValueError(f"ClusterGCNSampler: part {gap} has no nodes (part_of_node numbers "
                         f"its parts 0..{int(used[-1])}, none empty)")
    return len(used)


class ClusterGCNSampler:
    """Cluster-GCN batches of ``g`` (see the module docstring).

    ``num_parts`` clusters, ``parts_per_batch`` of them per batch (so ``num_batches`` =
    ceil(num_parts / parts_per_batch) per epoch); ``method`` ``"random"`` (reclustered every
    epoch) or ``"metis"`` (once); ``part_of_node`` gives a fixed clustering instead (one int
    per node, parts numbered from 0, none empty: ValueError here otherwise). ``seed`` < 2^32;
    ``rank`` (default: this process's rank) keys the clustering and the order, so each trainer
    of a parallel-epochs job draws its own. A DistGraph of a distributed job is clustered over
    the nodes this rank owns (``rank_graph``)."""

    def __init__(self, g, num_parts: Optional[int] = None, parts_per_batch: int = 1,
                 method: str = "random", seed: int = 0, rank: Optional[int] = None,
                 part_of_node=None, num_threads: int = 1):
        self.graph, self.first_id = rank_graph(g)
        n = int(self.graph.num_nodes)
        # The node IDs of the batches index [0, num_ids): all nodes of a DistGraph, whatever
        # part of them this rank clusters.
        self._num_ids = int(g.num_nodes()) if callable(getattr(g, "num_nodes", None)) else \
            self.first_id + n
        self.method = "fixed" if part_of_node is not None else method
        if self.method not in ("random", "metis", "fixed"):
            raise ValueError(f"ClusterGCNSampler: method must be 'random' or 'metis', got "
                             f"{method!r}")
        parts_per_batch = _integer_arg("ClusterGCNSampler", "parts_per_batch", parts_per_batch)
        if parts_per_batch < 1:
            raise ValueError(f"ClusterGCNSampler: parts_per_batch {parts_per_batch} < 1")
        seed = _integer_arg("ClusterGCNSampler", "seed", seed)
        if not 0 <= seed < 2 ** 32:
            raise ValueError(f"ClusterGCNSampler: seed {seed} outside [0, 2^32)")
        self.parts_per_batch, self.seed = parts_per_batch, seed
        self.rank = _runtime.get_rank() if rank is None else \
            _integer_arg("ClusterGCNSampler", "rank", rank)
        if self.rank < 0:
            raise ValueError(f"ClusterGCNSampler: rank {self.rank} < 0")
        self.num_threads = _integer_arg("ClusterGCNSampler", "num_threads", num_threads)
        self._fixed = None
        if self.method == "fixed":
            p = np.asarray(part_of_node)
            if p.dtype.kind not in "iu":  # a cast would truncate 0.5 and 1.5 into parts 0, 1
                raise TypeError(f"ClusterGCNSampler: part_of_node must hold integers, got "
                                f"dtype {p.dtype}")
            p = np.ascontiguousarray(p, dtype=np.int64)
            if p.shape != (n,):
                raise ValueError(f"ClusterGCNSampler: part_of_node has shape {p.shape} for a "
                                 f"graph of {n} nodes")
            self._fixed = p
            self.num_parts = _check_parts(p)
        else:
            if num_parts is not None:  # a float is refused, never truncated (2708 / 1500)
                num_parts = _integer_arg("ClusterGCNSampler", "num_parts", num_parts)
            if num_parts is None or not 1 <= num_parts <= n:
                raise ValueError(f"ClusterGCNSampler: num_parts {num_parts} outside "
                                 f"[1, {n}] (the nodes clustered)")
            self.num_parts = int(num_parts)
            if self.method == "metis":
                p = np.asarray(_C.metis_clustering(self.graph, self.num_parts, self.seed))
                # METIS may leave a part empty: number the non-empty ones densely.
                used, dense = np.unique(p, return_inverse=True)
                self._fixed = np.ascontiguousarray(dense, dtype=np.int64)
                self.num_parts = int(len(used))
        self._cache = (None, None)  # (epoch, _C.ClusterGcnSampler)
        self._lock = threading.Lock()

    @property
    def num_nodes(self) -> int:
        return int(self.graph.num_nodes)

    @property
    def num_batches(self) -> int:
        return -(-self.num_parts // self.parts_per_batch)

    def clustering(self, epoch: int) -> np.ndarray:
        """The cluster of every node in ``epoch`` (int64 [num_nodes])."""
        if self._fixed is not None:
            return self._fixed
        return np.asarray(_C.random_clustering(self.num_nodes, self.num_parts, self.seed,
                                               int(epoch), self.rank))

    def _sampler(self, epoch: int) -> "_C.ClusterGcnSampler":
        with self._lock:
            e, s = self._cache
            if e == epoch and s is not None:
                return s
            s = _C.ClusterGcnSampler(self.graph, self.clustering(epoch), self.parts_per_batch,
                                     self.seed, self.rank)
            self._cache = (epoch, s)
            return s

    def batch_parts(self, epoch: int, batch: int) -> np.ndarray:
        return np.asarray(self._sampler(epoch).batch_parts(int(epoch), int(batch)))

    def sample(self, epoch: int, batch: int) -> ClusterBatch:
        """Batch ``batch`` of ``epoch`` as NumPy arrays (``nodes`` in the IDs of ``g``)."""
        s = self._sampler(epoch)
        nodes, indptr, indices, eids = s.sample(int(epoch), int(batch), self.num_threads)
        nodes, indptr = np.asarray(nodes), np.asarray(indptr)
        dst = np.repeat(np.arange(len(nodes), dtype=np.int64), np.diff(indptr))
        return ClusterBatch(int(epoch), int(batch), s.batch_parts(int(epoch), int(batch)),
                            nodes + self.first_id, np.asarray(indices), dst, np.asarray(eids))


def _host_rows(src, ids: np.ndarray) -> np.ndarray:
    if isinstance(src, np.ndarray):
        return src[ids]
    return np.asarray(src[ids])  # DistTensor: rows from their owners


class ClusterGCNLoader:
    """Iterates the batches of one epoch of a ``ClusterGCNSampler`` (``set_epoch`` picks it;
    each ``iter()`` after the first advances to the next epoch, as the other loaders do).

    ``node_data`` maps names to per-node data indexed by the IDs of ``g``: a DistTensor, a
    NumPy array, or a torch tensor, with one row per node of ``g`` (ValueError otherwise). Each batch carries ``batch.ndata[name]`` = the rows of its
    nodes, and its structure, all on ``device``:

    * a torch tensor already on ``device`` (data made GPU-resident once: ``resident=True``
      uploads NumPy arrays and DistTensors of a standalone graph there at construction) is
      indexed there, no host round trip;
    * a DistTensor of a distributed job on a CUDA device of a CUDA build is read with
      ``read_to`` from its device mirror (``DistGraph.place_on_device``, the GPU training
      path) for the rows this rank owns;
    * otherwise rows are gathered on the host and copied once.

    ``prefetch`` batches are sampled ahead on a background thread (the C++ sampler releases the
    GIL)."""

    def __init__(self, sampler: ClusterGCNSampler, node_data: Optional[Mapping] = None,
                 device=None, prefetch: int = 2, resident: bool = True):
        self.sampler = sampler
        self.device = torch.device(device) if (HAVE_TORCH and device is not None) else None
        self.prefetch = max(0, int(prefetch))
        self.epoch, self._started = 0, False
        self.node_data = {}
        for name, src in (node_data or {}).items():
            shape = getattr(src, "shape", None)
            n = sampler._num_ids
            if shape is not None and (len(shape) == 0 or int(shape[0]) != n):
                raise ValueError(f"ClusterGCNLoader: node_data[{name!r}] has shape "
                                 f"{tuple(shape)}, but needs one row per node of the graph "
                                 f"({n}), indexed by node ID")
            self.node_data[name] = self._place(src, resident)

    def _place(self, src, resident: bool):
        from .dist import DistTensor

        on_dev = self.device is not None and self.device.type != "cpu"
        if HAVE_TORCH and isinstance(src, torch.Tensor):
            return src.to(self.device) if (resident and on_dev) else src
        if isinstance(src, DistTensor) and src._dist is not None:
            if on_dev and _C.cuda_compiled:
                return src  # read_to: the device mirror of place_on_device
            if not HAVE_TORCH or not (resident or not on_dev):
                return src
            # The rows this rank owns (every node of its batches): a view on the CPU, one
            # upload to the device.
            lo, hi = src.local_range()
            rows = torch.from_numpy(np.asarray(src.local_partition()))
            return ("owned", lo, hi, rows.to(self.device) if on_dev else rows)
        if isinstance(src, DistTensor):
            src = src.numpy()
        if not isinstance(src, np.ndarray):
            raise TypeError(f"ClusterGCNLoader: node data must be a DistTensor, NumPy array or "
                            f"torch tensor, got {type(src).__name__}")
        if resident and on_dev:
            return as_tensor(np.ascontiguousarray(src)).to(self.device)
        return src

    def __len__(self) -> int:
        return self.sampler.num_batches

    def set_epoch(self, epoch: int) -> None:
        self.epoch, self._started = int(epoch), False

    def _rows(self, src, nodes_np: np.ndarray, nodes_dev):
        from .dist import DistTensor

        if isinstance(src, tuple):  # ("owned", lo, hi, rows on the device)
            _, lo, hi, rows = src
            return rows[nodes_dev - lo]
        if HAVE_TORCH and isinstance(src, torch.Tensor):
            idx = nodes_dev if (nodes_dev is not None and nodes_dev.device == src.device) \
                else torch.from_numpy(nodes_np).to(src.device)
            out = src[idx]
            return out if self.device is None else out.to(self.device)
        if isinstance(src, DistTensor) and self.device is not None and \
                self.device.type == "cuda":
            return src.read_to(nodes_dev, self.device)
        rows = _host_rows(src, nodes_np)
        if not HAVE_TORCH:
            return rows
        t = as_tensor(np.ascontiguousarray(rows))
        return t if self.device is None else t.to(self.device)

    def _finish(self, b: ClusterBatch) -> ClusterBatch:
        if not HAVE_TORCH:
            b.ndata = {k: self._rows(v, b.nodes, None) for k, v in self.node_data.items()}
            return b
        nodes_np = b.nodes
        dev = self.device
        pin = dev is not None and dev.type == "cuda"

        def t(a):
            x = torch.from_numpy(np.ascontiguousarray(a, dtype=np.int64))
            if dev is None or dev.type == "cpu":
                return x
            return (x.pin_memory() if pin else x).to(dev, non_blocking=pin)

        b.nodes, b.src, b.dst, b.eids = t(b.nodes), t(b.src), t(b.dst), t(b.eids)
        b.ndata = {k: self._rows(v, nodes_np, b.nodes) for k, v in self.node_data.items()}
        return b

    def __iter__(self):
        if self._started:
            self.epoch += 1
        self._started = True
        epoch, nb = self.epoch, self.sampler.num_batches
        if self.prefetch == 0:
            for i in range(nb):
                yield self._finish(self.sampler.sample(epoch, i))
            return
        q: "queue.Queue" = queue.Queue(maxsize=self.prefetch)
        stop = threading.Event()

        def work():
            try:
                for i in range(nb):
                    if stop.is_set():
                        return
                    q.put(self.sampler.sample(epoch, i))
                q.put(None)
            except BaseException as e:  # handed to the consumer, raised there
                q.put(e)

        th = threading.Thread(target=work, name="cluster-gcn-sampler", daemon=True)
        th.start()
        try:
            while True:
                item = q.get()
                if item is None:
                    break
                if isinstance(item, BaseException):
                    raise item
                yield self._finish(item)
        finally:
            stop.set()
            while th.is_alive():  # unblock a worker waiting on a full queue
                try:
                    q.get(timeout=0.05)
                except queue.Empty:
                    pass
            th.join()
