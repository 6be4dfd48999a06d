# SPDX-License-Identifier: Apache-2.0
"""DistGraph, DistTensor, the partition book and node_split (DGL's ``dgl.distributed``).

Two modes, one API:

* **distributed** (the partitioning has one partition per process: a job of P ranks under
  ``tessera launch`` / torchrun, or one process with a 1-part partitioning): rank r loads
  partition r into the C++ runtime; ``DistTensor`` reads and writes go to the owning rank
  (one batched request or one-sided get per owner), sampling of remote nodes is answered by
  their owners, and everything is keyed so that results equal the unpartitioned graph's.
* **simulated** (one process, a P-part partitioning with P > 1): the process serves every
  partition itself (memory-mapped) and samples the union of their inner edges, which is the
  relabelled global graph. Useful to inspect a partitioning or to run P trainers in one
  process.
"""
from __future__ import annotations

import json
import os
from typing import Callable, Dict, Optional, Sequence

import numpy as np

from . import _C, _runtime
from ._collectives import all_gather_object, all_reduce
from ._tensor import (HAVE_TORCH, as_tensor, check_id_range, check_mask_ndim, cuda_stream_of,
                      device_of, on_device_of, refuse_per_type, to_numpy_ids, torch,
                      torch_to_numpy)

__all__ = ["DistGraph", "DistTensor", "GraphPartitionBook", "PartitionPolicy",
           "NodePartitionPolicy", "EdgePartitionPolicy", "node_split", "edge_split"]


class _OneType:
    """DGL's type names of a homogeneous graph, for DistGraph and its partition book: the one node
    type "_N" and edge type "_E"."""

    @property
    def ntypes(self) -> list[str]:
        return ["_N"]

    @property
    def etypes(self) -> list[str]:
        return ["_E"]

    @property
    def canonical_etypes(self) -> list[tuple]:
        return [("_N", "_E", "_N")]

    def to_canonical_etype(self, etype) -> tuple:
        """``("_N", "_E", "_N")`` for the one edge type (DGL's; another name is a ValueError)."""
        _check_type(etype, "edge", f"{type(self).__name__}.to_canonical_etype")
        return ("_N", "_E", "_N")


class GraphPartitionBook(_OneType):
    """Which partition owns each (relabelled) node and edge ID (DGL's RangePartitionBook).

    One partition per machine. With several trainers per machine (a job of M x T ranks over an
    M-part partitioning) ``trainer_book`` cuts each machine's ranges into T contiguous ranges,
    one per trainer: the rows each rank serves (``trainer_node_offsets``), which DistTensors
    created over the book's policies follow."""

    def __init__(self, book: "_C.PartitionBook", part_id: int = 0, distributed: bool = False,
                 trainer_book: "Optional[_C.PartitionBook]" = None):
        self._book = book
        self._part_id = part_id
        self._trainer_book = trainer_book if trainer_book is not None else book
        # True when the book is a distributed-mode DistGraph's: tensors over its policies live
        # in the C++ runtime, one trainer range per rank.
        self.distributed = bool(distributed)

    @property
    def num_trainers_per_machine(self) -> int:
        """Trainers per machine (partition): T of a job of M x T ranks over M partitions."""
        return int(self._trainer_book.num_parts) // max(1, int(self._book.num_parts))

    def num_owners(self) -> int:
        """Ranks that own rows: num_partitions() x num_trainers_per_machine."""
        return int(self._trainer_book.num_parts)

    @property
    def trainer_node_offsets(self) -> np.ndarray:
        """Node offsets of the trainers' ranges (machine p's trainer l: entry p * T + l)."""
        return np.asarray(self._trainer_book.node_offsets, dtype=np.int64)

    @property
    def trainer_edge_offsets(self) -> np.ndarray:
        return np.asarray(self._trainer_book.edge_offsets, dtype=np.int64)

    @property
    def partid(self) -> int:
        """The partition this process serves (0 in standalone mode)."""
        return self._part_id

    def num_partitions(self) -> int:
        return int(self._book.num_parts)

    # DGL's ID queries take a node or edge type last: "_N" / "_E" (or None, or the canonical
    # ("_N", "_E", "_N")) here; any other is a ValueError (_check_type).
    def nid2partid(self, nids, ntype: str = "_N"):
        _check_type(ntype, "node", "GraphPartitionBook.nid2partid")
        ids = to_numpy_ids(nids, "nids", num_nodes=self.num_nodes)
        return on_device_of(self._book.nid2part(ids).astype(np.int64), nids)

    def eid2partid(self, eids, etype: str = "_E"):
        _check_type(etype, "edge", "GraphPartitionBook.eid2partid")
        ids = to_numpy_ids(eids, "eids", num_edges=self.num_edges)
        return on_device_of(self._book.eid2part(ids).astype(np.int64), eids)

    def partid2nids(self, partid: int, ntype: str = "_N"):
        _check_type(ntype, "node", "GraphPartitionBook.partid2nids")
        lo, hi = self._book.node_range(partid)
        return as_tensor(np.arange(lo, hi, dtype=np.int64))

    def partid2eids(self, partid: int, etype: str = "_E"):
        _check_type(etype, "edge", "GraphPartitionBook.partid2eids")
        lo, hi = self._book.edge_range(partid)
        return as_tensor(np.arange(lo, hi, dtype=np.int64))

    def node_range(self, partid: int) -> tuple[int, int]:
        return tuple(self._book.node_range(partid))

    def edge_range(self, partid: int) -> tuple[int, int]:
        return tuple(self._book.edge_range(partid))

    def nid2localnid(self, nids, partid: int, ntype: str = "_N"):
        _check_type(ntype, "node", "GraphPartitionBook.nid2localnid")
        ids = to_numpy_ids(nids, "nids", num_nodes=self.num_nodes)
        lo, hi = self._book.node_range(partid)
        if ids.size and (ids.min() < lo or ids.max() >= hi):
            raise IndexError(f"nid2localnid: some IDs are not owned by partition {partid} "
                             f"[{lo}, {hi})")
        return on_device_of(ids - lo, nids)

    def eid2localeid(self, eids, partid: int, etype: str = "_E"):
        """Offsets of edges ``eids`` in partition ``partid``'s edge range (IndexError for an
        edge it does not own), as DGL's: the row of its edge data."""
        _check_type(etype, "edge", "GraphPartitionBook.eid2localeid")
        ids = to_numpy_ids(eids, "eids", num_edges=self.num_edges)
        lo, hi = self._book.edge_range(partid)
        if ids.size and (ids.min() < lo or ids.max() >= hi):
            raise IndexError(f"eid2localeid: some IDs are not owned by partition {partid} "
                             f"[{lo}, {hi})")
        return on_device_of(ids - lo, eids)

    # The type helpers of DGL's book (_OneType), for the one node type "_N" and edge type "_E":
    # per-type IDs are the homogeneous IDs (DGL maps them through its per-type ranges).
    @property
    def is_homogeneous(self) -> bool:
        return True

    def map_to_homo_nid(self, ids, ntype: str):
        """Node IDs of type ``ntype`` as homogeneous IDs: the same IDs (range-checked)."""
        _check_type(ntype, "node", "GraphPartitionBook.map_to_homo_nid")
        return self._same_ids(ids, self.num_nodes, "map_to_homo_nid")

    def map_to_homo_eid(self, ids, etype):
        """Edge IDs of type ``etype`` as homogeneous IDs: the same IDs (range-checked)."""
        _check_type(etype, "edge", "GraphPartitionBook.map_to_homo_eid")
        return self._same_ids(ids, self.num_edges, "map_to_homo_eid")

    def map_to_per_ntype(self, ids):
        """(node type IDs, per-type IDs) of homogeneous node IDs: (zeros, the IDs)."""
        same = self._same_ids(ids, self.num_nodes, "map_to_per_ntype")
        return on_device_of(np.zeros(len(same), dtype=np.int64), ids), same

    def map_to_per_etype(self, ids):
        """(edge type IDs, per-type IDs) of homogeneous edge IDs: (zeros, the IDs)."""
        same = self._same_ids(ids, self.num_edges, "map_to_per_etype")
        return on_device_of(np.zeros(len(same), dtype=np.int64), ids), same

    @staticmethod
    def _same_ids(ids, count: int, what: str):
        idx = to_numpy_ids(ids, f"GraphPartitionBook.{what}")
        check_id_range(idx, count, f"GraphPartitionBook.{what}")
        return on_device_of(idx.copy(), ids)

    def metadata(self) -> list[dict]:
        out = []
        for p in range(self.num_partitions()):
            nlo, nhi = self._book.node_range(p)
            elo, ehi = self._book.edge_range(p)
            out.append({"machine_id": p, "num_nodes": nhi - nlo, "num_edges": ehi - elo})
        return out

    @property
    def node_offsets(self) -> np.ndarray:
        return np.asarray(self._book.node_offsets, dtype=np.int64)

    @property
    def edge_offsets(self) -> np.ndarray:
        return np.asarray(self._book.edge_offsets, dtype=np.int64)

    @property
    def num_nodes(self) -> int:
        return int(self._book.num_nodes)

    @property
    def num_edges(self) -> int:
        return int(self._book.num_edges)


_CANONICAL_ETYPE = ("_N", "_E", "_N")


class HeteroDataName:
    """The kvstore key of a tensor (DGL's ``HeteroDataName``): node or edge data, its type and
    its name; ``str()`` gives ``"<policy_str>~<name>"``, e.g. ``"node~_N~feat"``."""

    def __init__(self, is_node: bool, entity_type, data_name: str):
        self._is_node = bool(is_node)
        self._entity_type = entity_type
        self.data_name = data_name

    @property
    def policy_str(self) -> str:
        if self._is_node:
            return f"node~{self._entity_type}"
        return "edge~" + ":".join(self._entity_type)

    def is_node(self) -> bool:
        return self._is_node

    def is_edge(self) -> bool:
        return not self._is_node

    def get_type(self):
        """``"_N"`` for node data, ``("_N", "_E", "_N")`` for edge data."""
        return self._entity_type

    def get_name(self) -> str:
        return self.data_name

    def __str__(self) -> str:
        return f"{self.policy_str}~{self.data_name}"

    def __repr__(self) -> str:
        return f"HeteroDataName({str(self)!r})"


class PartitionPolicy:
    """Which partition owns each row of a DistTensor (DGL's ``PartitionPolicy``).

    ``PartitionPolicy(policy_str, partition_book)``: ``policy_str`` is DGL's ``"node~_N"`` or
    ``"edge~_N:_E:_N"`` (``"node"`` and ``"edge"`` alone mean these); another node or edge
    type is a ValueError (a Tessera graph is homogeneous). Rows follow the book's trainer
    ranges (``offsets()``); ``part_id``, ``get_part_size()`` and ``to_local`` answer for the
    book's partition (this machine), as DGL's do."""

    def __init__(self, policy_str: str, partition_book: GraphPartitionBook):
        if not isinstance(partition_book, GraphPartitionBook):
            raise TypeError("PartitionPolicy: partition_book must be a GraphPartitionBook "
                            f"(g.get_partition_book()), got {partition_book!r}")
        if not isinstance(policy_str, str):
            raise TypeError(f"PartitionPolicy: policy_str must be a str such as 'node~_N' or "
                            f"'edge~_N:_E:_N', got {policy_str!r}")
        kind, _, type_str = policy_str.partition("~")
        if kind not in ("node", "edge"):
            raise ValueError(f"PartitionPolicy: policy_str must start with 'node' or 'edge', "
                             f"got {policy_str!r}")
        if kind == "node":
            type_name = type_str or "_N"
        elif not type_str:
            type_name = _CANONICAL_ETYPE
        else:
            type_name = tuple(type_str.split(":"))
            if len(type_name) != 3:
                raise ValueError(f"PartitionPolicy {policy_str!r}: an edge type is canonical, "
                                 "'src:etype:dst' (here '_N:_E:_N')")
        _check_type(type_name, kind, f"PartitionPolicy {policy_str!r}")
        self._is_node = kind == "node"
        self._type_name = type_name
        self.partition_book = partition_book

    @property
    def kind(self) -> str:
        """``"node"`` or ``"edge"``: the runtime's name for the policy."""
        return "node" if self._is_node else "edge"

    @property
    def policy_str(self) -> str:
        """``"node~_N"`` or ``"edge~_N:_E:_N"``, as DGL's on a homogeneous graph."""
        return HeteroDataName(self._is_node, self._type_name, "").policy_str

    @property
    def type_name(self):
        """``"_N"``, or the canonical edge type ``("_N", "_E", "_N")``."""
        return self._type_name

    @property
    def is_node(self) -> bool:
        return self._is_node

    @property
    def part_id(self) -> int:
        """The partition (machine) of this process: the book's ``partid``."""
        return self.partition_book.partid

    @property
    def distributed(self) -> bool:
        return self.partition_book.distributed

    def get_data_name(self, name: str) -> HeteroDataName:
        """The key of data ``name`` under this policy (``str()``: ``"node~_N~<name>"``)."""
        return HeteroDataName(self._is_node, self._type_name, name)

    def to_local(self, ids):
        """Offsets of ``ids`` in partition ``part_id``'s range (IndexError for an ID it does
        not own)."""
        book = self.partition_book
        if self._is_node:
            return book.nid2localnid(ids, self.part_id, self._type_name)
        return book.eid2localeid(ids, self.part_id, self._type_name)

    def to_partid(self, ids):
        """The partition that owns each of ``ids``."""
        book = self.partition_book
        if self._is_node:
            return book.nid2partid(ids, self._type_name)
        return book.eid2partid(ids, self._type_name)

    def get_part_size(self) -> int:
        """Nodes (edges) partition ``part_id`` owns."""
        rng = self.partition_book.node_range if self._is_node else self.partition_book.edge_range
        lo, hi = rng(self.part_id)
        return int(hi - lo)

    def get_size(self) -> int:
        """Nodes (edges) of the whole graph: a tensor's row count."""
        return int(self.offsets()[-1])

    def offsets(self) -> np.ndarray:
        """Row offsets of the ranks (trainers) that own the rows."""
        book = self.partition_book
        return book.trainer_node_offsets if self._is_node else book.trainer_edge_offsets

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.policy_str!r}, part_id={self.part_id})"


class NodePartitionPolicy(PartitionPolicy):
    """Rows of a DistTensor belong to the partition that owns the node (``"node~_N"``)."""

    def __init__(self, partition_book: GraphPartitionBook, ntype: str = "_N"):
        _check_type(ntype, "node", "NodePartitionPolicy")
        super().__init__("node~_N", partition_book)


class EdgePartitionPolicy(PartitionPolicy):
    """Rows of a DistTensor belong to the partition that owns the edge (``"edge~_N:_E:_N"``)."""

    def __init__(self, partition_book: GraphPartitionBook, etype=_CANONICAL_ETYPE):
        _check_type(etype, "edge", "EdgePartitionPolicy")
        super().__init__("edge~_N:_E:_N", partition_book)


def _check_write_cast(vals: np.ndarray, dtype, name: str) -> None:
    """Values written into a tensor of ``dtype`` keep their value: floats go only into float
    tensors (TypeError otherwise, as torch's index_put refuses a dtype mismatch), integers into
    integer or bool tensors only when every value fits (ValueError naming the first that does
    not; a bool tensor takes 0 and 1)."""
    src, dst = np.dtype(vals.dtype), np.dtype(dtype)
    if src == dst or dst.kind in "fc" or (dst.kind == "V" and src.kind in "fiub"):
        return  # exact, into floats (bfloat16 as raw rows included), or a raw row type
    if src.kind not in "iub":
        raise TypeError(f"DistTensor {name!r}: writing {src} values into a {dst} tensor would "
                        f"change them; convert them first (e.g. .round().to(...))")
    if src.kind == "b" or vals.size == 0:
        return
    lo, hi = (0, 1) if dst.kind == "b" else (np.iinfo(dst).min, np.iinfo(dst).max)
    vmin, vmax = vals.min(), vals.max()
    if vmin < lo or vmax > hi:
        bad = vmin if vmin < lo else vmax
        raise ValueError(f"DistTensor {name!r}: value {bad} is outside the range [{lo}, {hi}] "
                         f"of its {dst} rows")


class DistTensor:
    """A tensor whose rows are spread over the partitions (DGL's ``DistTensor``).

    Indexed by global (relabelled) IDs: ``t[ids]`` gathers rows (a torch tensor when torch
    is installed, else NumPy) and ``t[ids] = values`` writes them. In standalone mode the rows
    live in this process (the partition files, memory-mapped, or memory it allocated);
    memory-mapped rows are copied on first write, never written back to the files.

    Without ``part_policy`` the tensor takes, as in DGL, the node or edge partition policy of
    the DistGraph created last in this process, whichever covers ``shape[0]`` rows (ValueError
    when neither or both do). In distributed mode (the C++ runtime holds the rows) creating a
    tensor under a name that exists attaches to it (same shape and dtype, else ValueError), as
    DGL's does, collectively: when the name exists on some ranks only (a non-persistent tensor
    whose handles only some ranks dropped), every rank raises ValueError naming which ranks
    create and which attach. In simulated mode every construction allocates new rows.

    ``t[ids]`` returns the rows on the device of ``ids``: IDs in a CUDA torch tensor give a
    CUDA tensor. The IDs are copied to the host (they route the read to the owners); with a
    CUDA build of Tessera and a runtime tensor (distributed mode, or one process with a 1-part
    partitioning) the rows are written straight into a torch-allocated CUDA tensor by the C++
    ``read_into_device`` on torch's current stream, with no host copy of the rows on this
    side of the boundary (host-resident rows still pass through pinned staging and one
    host-to-device copy inside C++). Otherwise (simulated mode, a build without CUDA) the rows
    are gathered on the host and copied to the device by torch.
    """

    def __init__(self, shape: Sequence[int], dtype, name: Optional[str] = None,
                 init_func: Optional[Callable] = None,
                 part_policy: Optional[PartitionPolicy] = None,
                 persistent: bool = False, is_gdata: bool = True, attach: bool = True, *,
                 placement: str = "host", _parts: Optional[list] = None, _dist=None):
        self._dist = _dist
        if _dist is not None:  # a tensor of the C++ runtime (DistGraph data, or created below)
            self._policy = part_policy
            self._shape = tuple(int(x) for x in _dist.shape)
            self._offsets = np.asarray(_dist.offsets, dtype=np.int64)
            self._name = name or _dist.name
            self._dtype = np.dtype(_dist.dtype)
            self.persistent = bool(_dist.persistent)
            return
        if persistent and not name:
            # DGL asserts this too: a nameless tensor cannot be found again to attach to.
            raise ValueError("DistTensor: a persistent tensor needs a name (another handle "
                             "attaches to it by name)")
        if part_policy is None:
            part_policy = _default_policy(shape, name)
        self._policy = part_policy
        self._offsets = part_policy.offsets()
        self._shape = tuple(int(s) for s in shape)
        if self._shape[0] != int(self._offsets[-1]):
            raise ValueError(f"DistTensor {name!r}: {self._shape[0]} rows, but the partition "
                             f"policy covers {int(self._offsets[-1])} IDs")
        self.persistent = persistent
        if placement not in ("host", "device"):
            raise ValueError(f"DistTensor {name!r}: placement must be 'host' or 'device', got "
                             f"{placement!r}")
        if part_policy.distributed and _parts is None:
            self._create_distributed(name, dtype, init_func, persistent, placement)
            return
        self._name = name or f"tensor{id(self):x}"
        if _parts is not None:
            self._parts = list(_parts)
            self._dtype = self._parts[0].dtype if self._parts else np.dtype(np.float32)
        else:
            np_dtype = _to_numpy_dtype(dtype)
            self._dtype = np_dtype
            self._parts = []
            for p in range(len(self._offsets) - 1):
                rows = int(self._offsets[p + 1] - self._offsets[p])
                pshape = (rows,) + self._shape[1:]
                if init_func is None:
                    arr = np.zeros(pshape, dtype=np_dtype)
                else:
                    arr = _init_rows(init_func, pshape, dtype, f"DistTensor {self._name!r}")
                    arr = np.ascontiguousarray(arr, dtype=np_dtype)
                self._parts.append(arr)

    def _create_distributed(self, name, dtype, init_func, persistent, placement) -> None:
        """Creates the tensor collectively in the C++ runtime; ``init_func(shape, dtype)`` fills
        this rank's rows (DGL calls it with the local shape). ``placement="device"`` keeps this
        rank's rows in GPU memory (a CUDA build; ``init_func`` is not supported there)."""
        global _anonymous
        if name is None:  # every rank creates tensors in the same order: same names
            _anonymous += 1
            name = f"anonymous-{_anonymous}"
        np_dtype = _to_numpy_dtype(dtype)
        self._name, self._dtype = name, np_dtype
        if placement == "device" and not _C.cuda_compiled:
            # Every rank runs the same build: refusing here fails them all, as C++ would.
            raise _C.NotCompiledError(
                f"DistTensor {name!r}: placement='device' needs CUDA (not_compiled_with_cuda: "
                "this Tessera build has none; reinstall with TESSERA_WITH_CUDA=ON pip install "
                ".), or create the tensor with placement='host'")
        if placement == "device" and init_func is not None:
            raise ValueError(f"DistTensor {name!r}: init_func is not supported with "
                             "placement='device' (write the rows instead)")
        extra = () if placement == "host" else (placement,)
        self._dist = _C.DistTensor(_runtime.runtime(), name, list(self._shape), np_dtype.name,
                                   self._policy.kind, [int(o) for o in self._offsets],
                                   bool(persistent), *extra)
        _fill_local(self._dist, init_func, dtype)

    # --- DGL's interface -------------------------------------------------------------------
    @property
    def shape(self) -> tuple:
        return self._shape

    @property
    def dtype(self):
        """The element type (a torch dtype when torch is installed, else NumPy's)."""
        if HAVE_TORCH:
            return _TORCH_DTYPES.get(np.dtype(self._dtype), None) or self._dtype
        return self._dtype

    @property
    def name(self) -> str:
        return self._name

    @property
    def part_policy(self) -> Optional[PartitionPolicy]:
        """The node or edge policy of the rows (None for a DistEmbedding's even ranges)."""
        return self._policy

    @property
    def tensor_name(self) -> str:
        """The name the tensor was created under (DGL's ``tensor_name``; the same as ``name``
        here, which DGL prefixes with the policy)."""
        return self._name

    @property
    def kvstore_key(self) -> str:
        """DGL's key of the tensor: ``"<policy_str>~<name>"``, e.g. ``"node~_N~feat"`` or
        ``"edge~_N:_E:_N~w"`` (without the ``_<group id>`` DGL appends to a tensor created with
        ``attach=True``: Tessera has no client groups); the name alone without a policy."""
        if self._policy is None:
            return self._name
        return str(self._policy.get_data_name(self._name))

    def count_nonzero(self) -> int:
        """Nonzero elements over every row of the tensor (DGL's ``count_nonzero``). Not
        collective: in distributed mode the rows of every owner are read, as ``t[ids]`` reads
        them, in chunks of about 16 MiB."""
        if self._dist is None:
            return int(sum(np.count_nonzero(p) for p in self._parts))
        row_bytes = max(1, self._dtype.itemsize * int(np.prod(self._shape[1:], dtype=np.int64)))
        step = max(1, (16 << 20) // row_bytes)
        total = 0
        for lo in range(0, self._shape[0], step):
            ids = np.arange(lo, min(lo + step, self._shape[0]), dtype=np.int64)
            total += int(np.count_nonzero(self._dist.read(ids)))
        return total

    def __len__(self) -> int:
        return self._shape[0]

    def __repr__(self) -> str:
        return f"DistTensor(name={self._name!r}, shape={self._shape}, dtype={self._dtype})"

    def _ids_of(self, ids):
        """A slice (DGL's ``t[0:3]``, steps included) as the IDs it selects."""
        if isinstance(ids, slice):
            return np.arange(*ids.indices(self._shape[0]), dtype=np.int64)
        return ids

    def __getitem__(self, ids):
        ids = self._ids_of(ids)
        dev = device_of(ids)
        if dev is not None:
            return self.read_to(ids, dev)
        return as_tensor(self.gather(ids))

    def __setitem__(self, ids, values) -> None:
        idx = self._to_ids(self._ids_of(ids))
        self._check_range(idx)
        vals = values.detach().cpu().numpy() if HAVE_TORCH and isinstance(values, torch.Tensor) \
            else np.asarray(values)
        _check_write_cast(vals, self._dtype, self._name)
        vals = self._rows_to_write(vals.astype(self._dtype, copy=False), idx.size)
        if self._dist is not None:
            self._dist.write(idx, np.ascontiguousarray(vals))
            return
        owner = self._owner(idx)
        for p in np.unique(owner):
            sel = owner == p
            if not self._parts[p].flags.writeable:  # memory-mapped: copy on first write
                self._parts[p] = np.array(self._parts[p])
            self._parts[p][idx[sel] - self._offsets[p]] = vals[sel]

    def _rows_to_write(self, vals: np.ndarray, count: int) -> np.ndarray:
        """``vals`` as ``count`` rows of this tensor: of shape (count,) + row shape, or one that
        broadcasts to it (a scalar, one row); ValueError naming the tensor and both shapes
        otherwise (DGL's kvstore asserts that the rows match the IDs)."""
        want = (count,) + self._shape[1:]
        try:
            return np.broadcast_to(vals, want)
        except ValueError:
            raise ValueError(f"DistTensor {self._name!r}: writing values of shape "
                             f"{tuple(vals.shape)} to {count} rows of shape {self._shape[1:]} "
                             f"needs values of shape {want} (or one row or a scalar, "
                             "broadcast)") from None

    # --- Tessera extras ----------------------------------------------------------------------
    def gather(self, ids) -> np.ndarray:
        """Rows ``ids`` as a new NumPy array (the CPU gather op; IndexError when out of range)."""
        idx = self._to_ids(ids)
        if self._dist is not None:
            return self._dist.read(idx)
        self._check_range(idx)
        if len(self._parts) == 1:
            return self._take(self._parts[0], idx)
        out = np.empty((idx.size,) + self._shape[1:], dtype=self._dtype)
        owner = self._owner(idx)
        for p in np.unique(owner):
            sel = np.nonzero(owner == p)[0]
            out[sel] = self._take(self._parts[p], idx[sel] - self._offsets[p])
        return out

    def read_to(self, ids, device):
        """Rows ``ids`` as a torch tensor on ``device`` (``t[ids]`` with IDs on a device).

        A CUDA device with a runtime tensor and a CUDA build: ``read_into_device`` writes the
        rows into a new torch CUDA tensor (DLPack, no copy across the boundary) on torch's
        current stream of that device. Otherwise the host gather followed by one copy to
        ``device``."""
        device = torch.device(device)
        tdtype = _TORCH_DTYPES.get(np.dtype(self._dtype))
        if self._dist is not None and device.type == "cuda" and _C.cuda_compiled \
                and tdtype is not None and isinstance(ids, torch.Tensor) \
                and ids.device == device and ids.dtype == torch.int64 and ids.dim() == 1:
            # IDs already on the device: C++ gathers from the device mirror without a host
            # round trip when this rank owns every row, else it copies the IDs to route them.
            ids = ids.contiguous()
            out = torch.empty((ids.numel(),) + self._shape[1:], dtype=tdtype, device=device)
            if ids.numel():
                lo, hi = (int(v) for v in torch.aminmax(ids))  # one host sync: a bad ID is an error
                if lo < 0 or hi >= self._shape[0]:
                    bad = ids[(ids < 0) | (ids >= self._shape[0])][0]
                    raise IndexError(f"DistTensor {self._name!r}: ID {int(bad)} outside "
                                     f"[0, {self._shape[0]})")
                with torch.cuda.device(device):
                    self._dist.read_into_ids(ids, out, cuda_stream_of(device))
            return out
        idx = self._to_ids(ids)  # host IDs: they route the read
        if self._dist is not None and device.type == "cuda" and _C.cuda_compiled \
                and tdtype is not None:
            if device.index is None:
                device = torch.device("cuda", torch.cuda.current_device())
            out = torch.empty((idx.size,) + self._shape[1:], dtype=tdtype, device=device)
            with torch.cuda.device(device):
                self._dist.read_into(idx, out, cuda_stream_of(device))
            return out
        return as_tensor(self.gather(idx)).to(device)

    def local_partition(self, part: Optional[int] = None) -> np.ndarray:
        """The rows partition ``part`` (default: this rank's) owns: a view of the stored array
        (distributed mode: writable, only this rank's)."""
        if self._dist is not None:
            if part not in (None, _runtime.get_rank()):
                raise ValueError(f"DistTensor {self._name!r}: rank {_runtime.get_rank()} holds "
                                 f"only its own rows, not partition {part}'s")
            return self._dist.local_view()
        return self._parts[part or 0]

    def local_range(self) -> tuple[int, int]:
        """[first, last) global row IDs this rank owns."""
        if self._dist is not None:
            return tuple(self._dist.local_range)
        return 0, self._shape[0]

    def numpy(self) -> np.ndarray:
        """All rows, in global ID order (a copy when there are several partitions; in
        distributed mode every row is read, remote ones from their owners)."""
        if self._dist is not None:
            return self._dist.read(np.arange(self._shape[0], dtype=np.int64))
        return self._parts[0] if len(self._parts) == 1 else np.concatenate(self._parts)

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        """``np.asarray(t)``: all rows (``numpy()``) in one read per owner. Without it NumPy
        would read the tensor row by row through ``__getitem__`` (a request per row) and stack
        an [N] tensor as [N, 1]."""
        a = self.numpy()
        own = self._dist is None and len(self._parts) == 1  # numpy() gave the storage itself
        if copy is False and own:
            raise ValueError(f"DistTensor '{self._name}': np.asarray(copy=False) would share "
                             "the tensor's storage; read it with numpy()")
        if dtype is not None and np.dtype(dtype) != a.dtype:
            return a.astype(dtype)  # a new array
        return a.copy() if own else a  # never the storage: a caller may write to the result

    def _to_ids(self, ids) -> np.ndarray:
        """``ids`` as int64 row IDs; a boolean mask must be 1-D with one entry per row."""
        return to_numpy_ids(ids, f"{self._name} IDs", num_rows=self._shape[0])

    def _owner(self, idx: np.ndarray) -> np.ndarray:
        return np.searchsorted(self._offsets, idx, side="right") - 1

    def _check_range(self, idx: np.ndarray) -> None:
        check_id_range(idx, self._shape[0], f"DistTensor {self._name!r}")

    @staticmethod
    def _take(arr: np.ndarray, idx: np.ndarray) -> np.ndarray:
        if arr.ndim <= 2 and arr.flags.c_contiguous and arr.dtype != np.bool_:
            return _C.gather_rows(arr, idx)  # the CPU twin of the gather op
        return arr[idx]


_anonymous = 0  # names of DistTensors created without one (same sequence on every rank)
# The partition book of the DistGraph this process created last: DGL picks a DistTensor's
# default partition policy among that graph's (its kvstore's) policies.
_default_book: Optional[GraphPartitionBook] = None


def _default_policy(shape, name) -> PartitionPolicy:
    """DGL's rule for ``DistTensor(shape, dtype, name)`` without ``part_policy``: the node or
    edge policy of the DistGraph created last whose size is ``shape[0]``; ValueError when there
    is no DistGraph, when neither matches, or when both do (as many nodes as edges)."""
    what = f"DistTensor {name!r}" if name else "DistTensor"
    if _default_book is None:
        raise ValueError(f"{what}: no part_policy given and no DistGraph was created in this "
                         "process to take one from; pass part_policy="
                         "g.get_node_partition_policy() (or the edge one)")
    rows = int(shape[0])
    matches = [pol for pol in (NodePartitionPolicy(_default_book),
                               EdgePartitionPolicy(_default_book)) if pol.get_size() == rows]
    if len(matches) > 1:
        raise ValueError(f"{what}: {rows} rows match both the node and the edge partition "
                         "policy of the DistGraph (as many nodes as edges); pass part_policy")
    if not matches:
        raise ValueError(f"{what}: {rows} rows are neither the DistGraph's number of nodes "
                         f"({_default_book.num_nodes}) nor of edges ({_default_book.num_edges});"
                         " pass part_policy")
    return matches[0]


def _init_rows(init_func: Callable, shape, dtype, what: str) -> np.ndarray:
    """``init_func(shape, dtype)`` as a NumPy array of exactly ``shape``: ValueError naming
    ``what`` otherwise (assigning it would broadcast, e.g. one row into every row)."""
    v = init_func(shape, dtype)
    arr = v.detach().cpu().numpy() if HAVE_TORCH and isinstance(v, torch.Tensor) \
        else np.asarray(v)
    if arr.shape != tuple(shape):
        raise ValueError(f"{what}: init_func(shape, dtype) returned shape {tuple(arr.shape)}, "
                         f"expected {tuple(shape)}")
    return arr


def _fill_local(t: "_C.DistTensor", init_func: Optional[Callable], dtype,
                what: Optional[str] = None) -> None:
    """DGL's init_func(shape, dtype) fills this rank's rows of a new runtime tensor (not of one
    that existed under its name: its rows stay as they are, as in DGL); then the ranks exchange
    their outcomes, which also stands for a barrier (every rank's rows are initialized before
    anyone reads them). A failure on one rank (init_func raises, or returns another shape than
    this rank's rows) fails every rank, as the C++ creation does, instead of leaving the others
    waiting at their next collective, and releases the new tensor's name on every rank, so that
    creating it again runs init_func again. Collective."""
    what = what or f"DistTensor {t.name!r}"
    try:
        try:
            if init_func is not None and t.created:
                local = t.local_view()
                v = _init_rows(init_func, local.shape, dtype, what)
                local[...] = v.astype(local.dtype, copy=False)
                t.local_rows_changed(*t.local_range)
        except Exception as e:  # noqa: BLE001 - the other ranks learn of it, then it goes on
            _agree_on_init(what, e)
            raise
        _agree_on_init(what, None)
    except Exception:
        # Every rank fails here together: none keeps the name of rows it did not initialize (a
        # persistent tensor would otherwise live on, and creating it again would attach to it).
        if t.created:
            t.release_name()
        raise


# The error types that a rank whose init_func failed names to the others, which raise the same.
_INIT_ERRORS = {e.__name__: e for e in (ValueError, TypeError, IndexError, OSError)}


def _agree_on_init(what: str, err: Optional[BaseException]) -> None:
    """Every rank's init_func outcome to every rank (a no-op in a world of one); a rank whose
    own init succeeded raises the first failed rank's error, as the same type where it is one
    of ``_INIT_ERRORS`` (else RuntimeError). Collective."""
    if _runtime.get_world_size() == 1:
        return
    mine = None if err is None else (type(err).__name__, str(err))
    failed = [(r, m) for r, m in
              enumerate(all_gather_object(mine, _what=f"{what} initialization")) if m is not None]
    if failed and err is None:
        r, (kind, msg) = failed[0]
        raise _INIT_ERRORS.get(kind, RuntimeError)(f"{what} initialization: rank {r} failed: "
                                                   f"{msg}")


_TORCH_DTYPES = {}
if HAVE_TORCH:
    _TORCH_DTYPES = {np.dtype(k): v for k, v in {
        np.float32: torch.float32, np.float64: torch.float64, np.float16: torch.float16,
        np.int64: torch.int64, np.int32: torch.int32, np.int16: torch.int16,
        np.int8: torch.int8, np.uint8: torch.uint8, np.bool_: torch.bool}.items()}


def _to_numpy_dtype(dtype) -> np.dtype:
    if HAVE_TORCH and isinstance(dtype, torch.dtype):
        return np.dtype(torch_to_numpy(torch.empty(0, dtype=dtype), "DistTensor").dtype)
    return np.dtype(dtype)


def _set_default_book(book: GraphPartitionBook) -> None:
    global _default_book
    _default_book = book


class _DataView(dict):
    """g.ndata / g.edata: name -> DistTensor; assigning a DistTensor registers it."""

    def __setitem__(self, key, value):
        if not isinstance(value, DistTensor):
            raise TypeError(f"{key}: assign a DistTensor (DGL semantics), got {type(value)}")
        super().__setitem__(key, value)


class _TypeSpace:
    """``g.nodes[ntype]`` / ``g.edges[etype]`` of a DistGraph: ``.data`` is ``g.ndata`` /
    ``g.edata`` (DGL's NodeSpace / EdgeSpace)."""

    __slots__ = ("data",)

    def __init__(self, data: "_DataView"):
        self.data = data


class _TypeView:
    """``g.nodes`` / ``g.edges`` (DGL's HeteroNodeView / HeteroEdgeView): indexed by the one
    node type "_N" or edge type "_E" (or ("_N", "_E", "_N")); another name is a ValueError.
    Not callable, as DGL's DistGraph's are not (``g.nodes()`` fails there too)."""

    __slots__ = ("_graph", "_kind")

    def __init__(self, graph: "DistGraph", kind: str):
        self._graph, self._kind = graph, kind

    def __getitem__(self, key) -> _TypeSpace:
        node = self._kind == "node"
        _check_type(key, self._kind, f"DistGraph.{'nodes' if node else 'edges'}[...]")
        return _TypeSpace(self._graph.ndata if node else self._graph.edata)


class _LocalPartitionView:
    """``g.local_partition``: DGL's property (``g.local_partition.<attr>``) and Tessera's
    method (``g.local_partition(part)``) in one object. Attributes are read from this rank's
    ``_C.LocalPartition``, loaded on the first one; calling it loads partition ``part``."""

    __slots__ = ("_load", "_part")

    def __init__(self, load: Callable):
        self._load, self._part = load, None

    def __call__(self, part: Optional[int] = None) -> "_C.LocalPartition":
        return self._load(part)

    def __getattr__(self, name: str):
        if self._part is None:
            self._part = self._load(None)
        return getattr(self._part, name)

    def __dir__(self):
        return sorted(set(object.__dir__(self)) | set(dir(self._load(None))))

    def __repr__(self) -> str:
        return "<DistGraph.local_partition: this rank's partition; call it for a _C.LocalPartition>"


class DistGraph(_OneType):
    """A partitioned graph (DGL's ``DistGraph``).

    ``DistGraph(graph_name, part_config=config_json)``: loads the partition book and the node
    and edge data as DistTensors. IDs are the relabelled ones: partition p owns nodes
    ``get_partition_book().node_range(p)``. With one partition per process (``tessera launch
    --nproc-per-node P`` over a P-part partitioning, or one process and a 1-part one) rank r
    loads partition r into the C++ runtime (collective: every rank constructs it). One process
    given a P-part partitioning serves all P partitions itself (simulated mode).

    Every file loaded is checked against the size and CRC-32 its config lists (a corrupt file
    is a ``ValueError`` naming it); ``verify_checksums=False`` skips that check, e.g. for files
    just checked by ``tessera validate``. Stored IDs are range-checked either way.
    """

    def __init__(self, graph_name: str, gpb=None, part_config: Optional[str] = None,
                 mmap: bool = True, verify_checksums: bool = True):
        if part_config is None:
            raise ValueError("DistGraph needs part_config (the partition config JSON written "
                             "by partition_graph)")
        if not _runtime.is_initialized():
            _runtime.initialize()
        self._config_path = os.fspath(part_config)
        self.config = json.loads(_C.load_partition_config(self._config_path))
        if graph_name and self.config["graph_name"] != graph_name:
            raise ValueError(f"DistGraph: {self._config_path} holds graph "
                             f"{self.config['graph_name']!r}, not {graph_name!r}")
        self.graph_name = self.config["graph_name"]
        nparts, world = int(self.config["num_parts"]), _runtime.get_world_size()
        self._g = None
        self._graph = None
        self._ends = None  # (src, dst) by edge ID, for find_edges off the runtime
        self._degree_sampler = None  # full-neighborhood sampler for in_degrees
        self._out_deg = None  # out_degrees: NumPy [N] (one owner) or a runtime DistTensor
        if nparts == world or (world > 1 and world % nparts == 0):
            _check_trainers_per_machine(self._config_path, nparts, world)
            self._init_distributed(verify_checksums)
            return
        if world > 1:
            raise ValueError(f"DistGraph: {self._config_path} has {nparts} partitions but the "
                             f"job has {world} ranks; partition into {world} parts (one per "
                             f"rank), or into M parts for M machines of {world} // M trainers "
                             f"each (the ranks must be a multiple of the partitions)")
        self._book = GraphPartitionBook(_C.PartitionBook.load(self._config_path), 0)
        _set_default_book(self._book)
        # Simulated: this process serves every partition.
        self.local_parts = list(range(nparts))
        self._parts = [_C.load_partition(self._config_path, p, mmap, verify_checksums)
                       for p in self.local_parts]
        self._graph = self._assemble_graph()
        npol, epol = NodePartitionPolicy(self._book), EdgePartitionPolicy(self._book)
        self.ndata = _DataView()
        for name, schema in self.config.get("ndata_schema", {}).items():
            parts = [lp.ndata[name] for lp in self._parts]
            dict.__setitem__(self.ndata, name, DistTensor(
                schema["shape"], schema["dtype"], name, part_policy=npol, _parts=parts))
        self.edata = _DataView()
        for name, schema in self.config.get("edata_schema", {}).items():
            parts = [lp.edata[name] for lp in self._parts]
            dict.__setitem__(self.edata, name, DistTensor(
                schema["shape"], schema["dtype"], name, part_policy=epol, _parts=parts))

    def _init_distributed(self, verify_checksums: bool) -> None:
        self._g = _C.DistGraph(_runtime.runtime(), self.graph_name, self._config_path,
                               verify_checksums)
        self._book = GraphPartitionBook(self._g.machine_book, self._g.machine, distributed=True,
                                        trainer_book=self._g.book)
        _set_default_book(self._book)
        self.local_parts = [self._g.machine]
        self._parts = None
        npol, epol = NodePartitionPolicy(self._book), EdgePartitionPolicy(self._book)
        self.ndata = _DataView()
        for name, t in self._g.ndata.items():
            dict.__setitem__(self.ndata, name, DistTensor(t.shape, None, name, part_policy=npol,
                                                          _dist=t))
        self.edata = _DataView()
        for name, t in self._g.edata.items():
            dict.__setitem__(self.edata, name, DistTensor(t.shape, None, name, part_policy=epol,
                                                          _dist=t))

    @property
    def trainers_per_machine(self) -> int:
        """T of a job of M x T ranks over an M-part partitioning (1: a partition per rank)."""
        return int(self._g.trainers_per_machine) if self._g is not None else 1

    @property
    def machine(self) -> int:
        """The machine (= partition) this rank belongs to: rank // trainers_per_machine."""
        return int(self._g.machine) if self._g is not None else 0

    @property
    def shared_bytes(self) -> int:
        """Bytes of this machine's partition data in memory its trainers share (0 with one
        trainer per machine)."""
        return int(self._g.shared_bytes) if self._g is not None else 0

    @property
    def is_distributed(self) -> bool:
        """True when this rank holds only its own partition (the C++ runtime serves it)."""
        return self._g is not None

    @property
    def runtime_graph(self) -> "_C.DistGraph":
        """The C++ DistGraph (distributed mode)."""
        if self._g is None:
            raise ValueError("DistGraph: not in distributed mode (one process serves "
                             f"{self._book.num_partitions()} partitions)")
        return self._g

    def _assemble_graph(self) -> "_C.Graph":
        """CSC over global (relabelled) IDs from the partitions' inner nodes' in-edges.

        The relabelled graph stores edge ``e`` at position ``e`` of its CSC, so placing every
        inner edge at its global edge ID rebuilds it. A version 2 partitioning stores each row
        in the original graph's order, not by the relabelled source: such rows are sorted by
        (source, edge ID), the order a Graph promises (METIS clustering and the samplers rely
        on it), and the edge IDs travel with them."""
        n, e = int(self.config["num_nodes"]), int(self.config["num_edges"])
        local_indices = bool(self.config.get("local_indices", True))
        deg = np.zeros(n, dtype=np.int64)
        indices = np.full(e, -1, dtype=np.int64)
        for lp in self._parts:
            k = int(lp.num_inner_nodes)
            indptr = np.asarray(lp.indptr)
            nid = np.asarray(lp.nid)
            deg[nid[:k]] = np.diff(indptr[: k + 1])
            lo, hi = int(indptr[0]), int(indptr[k])
            src = np.asarray(lp.indices[lo:hi])
            indices[np.asarray(lp.eid[lo:hi])] = nid[src] if local_indices else src
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(deg, out=indptr[1:])
        if (indices < 0).any():
            raise ValueError(f"{self._config_path}: the partitions' inner edges do not cover "
                             f"edge IDs [0, {e})")
        row = np.repeat(np.arange(n, dtype=np.int64), deg)
        if e > 1 and ((indices[1:] < indices[:-1]) & (row[1:] == row[:-1])).any():
            eids = np.lexsort((np.arange(e, dtype=np.int64), indices, row))
            return _C.Graph(indptr, indices[eids], eids)
        return _C.Graph(indptr, indices)

    # --- DGL's interface -------------------------------------------------------------------
    def num_nodes(self, ntype=None) -> int:
        _check_type(ntype, "node", "DistGraph.num_nodes")
        return int(self.config["num_nodes"])

    def num_edges(self, etype=None) -> int:
        _check_type(etype, "edge", "DistGraph.num_edges")
        return int(self.config["num_edges"])

    number_of_nodes = num_nodes
    number_of_edges = num_edges

    def get_partition_book(self) -> GraphPartitionBook:
        return self._book

    @property
    def nodes(self) -> _TypeView:
        """``g.nodes["_N"].data`` is ``g.ndata`` (DGL's per-type view, for code written over
        ``g.ntypes``)."""
        return _TypeView(self, "node")

    @property
    def edges(self) -> _TypeView:
        """``g.edges["_E"].data`` (or ``g.edges[("_N", "_E", "_N")].data``) is ``g.edata``."""
        return _TypeView(self, "edge")

    def get_node_partition_policy(self, ntype: str = "_N") -> NodePartitionPolicy:
        _check_type(ntype, "node", "DistGraph.get_node_partition_policy")
        return NodePartitionPolicy(self._book)

    def get_edge_partition_policy(self, etype: str = "_E") -> EdgePartitionPolicy:
        _check_type(etype, "edge", "DistGraph.get_edge_partition_policy")
        return EdgePartitionPolicy(self._book)

    def rank(self) -> int:
        return _runtime.get_rank()


    def get_ntype_id(self, ntype) -> int:
        _check_type(ntype, "node", "DistGraph.get_ntype_id")
        return 0

    def get_etype_id(self, etype) -> int:
        _check_type(etype, "edge", "DistGraph.get_etype_id")
        return 0

    @property
    def idtype(self):
        """The dtype of node and edge IDs: int64 (torch's when installed, as DGL's)."""
        return torch.int64 if HAVE_TORCH else np.dtype(np.int64)

    @property
    def device(self):
        """Where the graph's IDs and the tensors read from it live: the CPU, as DGL's
        DistGraph (rows placed on a GPU with place_on_device are read into device tensors by
        the loaders and ``t[ids]`` with CUDA IDs)."""
        return torch.device("cpu") if HAVE_TORCH else "cpu"

    def is_pinned(self) -> bool:
        """False, as DGL's DistGraph."""
        return False

    def node_attr_schemes(self) -> Dict[str, tuple]:
        return {k: (v.shape[1:], v.dtype) for k, v in self.ndata.items()}

    def edge_attr_schemes(self) -> Dict[str, tuple]:
        return {k: (v.shape[1:], v.dtype) for k, v in self.edata.items()}

    @property
    def local_partition(self) -> "_LocalPartitionView":
        """This rank's partition (DGL's ``local_partition`` property): its attributes are those
        of the ``_C.LocalPartition`` (``nid``, ``indptr``, ``ndata``, ...), loaded on first use.
        Calling it, ``g.local_partition(part=None)``, returns the ``_C.LocalPartition`` of
        ``part`` (default: this rank's) as stored on disk."""
        return _LocalPartitionView(self._load_partition)

    def _load_partition(self, part: Optional[int] = None) -> "_C.LocalPartition":
        part = self._book.partid if part is None else int(part)
        if self._parts is None:
            return _C.load_partition(self._config_path, part)
        return self._parts[part]

    @property
    def local_graph(self) -> "_C.Graph":
        """The whole CSC (global relabelled IDs): in simulated mode the graph the sampler
        draws from; in distributed mode only with one partition (standalone), assembled from
        it on first use."""
        if self._graph is None:
            if self._book.num_partitions() != 1:
                raise ValueError("DistGraph.local_graph: a rank of a distributed job holds "
                                 "only its partition, not the whole graph")
            self._parts = [_C.load_partition(self._config_path, 0)]
            self._graph = self._assemble_graph()
        return self._graph

    def in_degrees(self, v=None):
        """In-degrees of every node (or of ``v``: node IDs, or a 1-D boolean mask over every
        node; an ID outside [0, num_nodes()) is an IndexError naming it), int64, in ``v``'s
        order (DGL's ``DistGraph.in_degrees``). Standalone, simulated or over one partition
        they are read from the whole CSC. A rank of a job over several partitions asks the
        owners: every in-edge of the distinct nodes asked, by the distributed sampler with
        fanout -1 (one request per owner, 65,536 nodes at a time; the owners' own nodes are
        counted here), so a query costs about the edges it counts; not collective."""
        if self._g is not None and self._book.num_owners() > 1:
            ids = np.arange(self.num_nodes(), dtype=np.int64) if _is_all(v) \
                else self._node_ids(v, "in_degrees")
            uniq, inverse = np.unique(ids, return_inverse=True)
            if self._degree_sampler is None:
                self._degree_sampler = _C.DistNeighborSampler(self._g, [-1], False, "")
            deg = np.empty(len(uniq), dtype=np.int64)
            step = 1 << 16
            for b in range(0, len(uniq), step):
                chunk = np.ascontiguousarray(uniq[b:b + step])
                (block,) = self._degree_sampler.sample_blocks(chunk, 0, 0, 0)
                assert np.array_equal(np.asarray(block.dst_nodes), chunk), \
                    "in_degrees: the block's destinations are not the nodes asked, in order"
                dst = np.asarray(block.dst)
                deg[b:b + len(chunk)] = np.bincount(dst, minlength=len(chunk))
            out = deg[inverse.reshape(-1)]
            return as_tensor(out) if _is_all(v) else on_device_of(out, v)
        deg = np.diff(np.asarray(self.local_graph.indptr))
        if _is_all(v):
            return as_tensor(deg)
        return on_device_of(deg[self._node_ids(v, "in_degrees")], v)

    def out_degrees(self, u=None):
        """Out-degrees of every node (or of ``u``: node IDs, or a 1-D boolean mask over every
        node; an ID outside [0, num_nodes()) is an IndexError naming it), int64, in ``u``'s
        order (DGL's ``DistGraph.out_degrees``; a single ID gives a 1-element tensor, as DGL
        1.1.3 does). Standalone, simulated or over one partition they are counted from the
        whole CSC (once, then kept: 8 bytes a node).

        A partition holds only the in-edges of its nodes, so a node's out-edges are spread
        over every partition. Over several partitions the **first call is collective**: every
        rank must make it (DGL's is not). It counts the sources of the edges this rank owns,
        sums the counts of all ranks (an all-reduce of 8 bytes a node) and keeps the sums as
        an int64 node-policy DistTensor (8 bytes a node over the job); that call and every
        later one read the rows asked from their owners, one request per owner, not
        collectively."""
        if self._g is not None and self._book.num_owners() > 1:
            table = self._out_degree_table()  # before checking u: every rank joins it
            ids = np.arange(self.num_nodes(), dtype=np.int64) if _is_all(u) \
                else self._node_ids(u, "out_degrees")
            out = np.asarray(table.read(ids)).reshape(-1)
            return as_tensor(out) if _is_all(u) else on_device_of(out, u)
        if self._out_deg is None:
            indices = np.asarray(self.local_graph.indices)
            self._out_deg = np.bincount(indices, minlength=self.num_nodes()).astype(np.int64)
        if _is_all(u):
            return as_tensor(self._out_deg.copy())
        return on_device_of(self._out_deg[self._node_ids(u, "out_degrees")], u)

    def _out_degree_table(self) -> "_C.DistTensor":
        """Every node's out-degree in a runtime DistTensor (int64 [N], node policy), built by
        the first call on every rank (collective): each rank counts the sources of its own
        edges (its rows of the edge endpoint table) and the counts are summed."""
        if self._out_deg is not None:
            return self._out_deg
        n, book = self.num_nodes(), self._book
        # The graph's runtime tensors are named "<graph>@<partitioning id>:<what>".
        prefix = self._g.orig_nid.name.rsplit(":", 1)[0]
        t = _C.DistTensor(_runtime.runtime(), f"{prefix}:out_degrees", [n], "int64", "node",
                          [int(o) for o in book.trainer_node_offsets], False)
        if t.created:  # the same on every rank; else another DistGraph of it filled the rows
            pairs = np.asarray(self._g.edge_endpoints.local_view())  # (src, dst) of own edges
            counts = np.bincount(pairs[:, 0], minlength=n).astype(np.int64)
            all_reduce(counts, "sum", _what="DistGraph.out_degrees (first call, collective)")
            lo, hi = t.local_range
            t.local_view()[...] = counts[lo:hi]
            t.local_rows_changed(lo, hi)
        _runtime.barrier()  # every rank's rows are filled before anyone reads them
        self._out_deg = t
        return t

    def find_edges(self, edges, etype=None):
        """``(src, dst)`` of the edges ``edges`` (edge IDs, or a 1-D boolean mask over every
        edge), as int64 tensors in ``edges``' order (DGL's ``DistGraph.find_edges``); an ID
        outside [0, num_edges()) is an IndexError naming it. A rank of a job over several
        partitions reads the owners' rows of the graph's endpoint table (one request per owner,
        as a DistTensor read; the owner of an edge owns its destination)."""
        _check_type(etype, "edge", "DistGraph.find_edges")
        idx = to_numpy_ids(edges, "DistGraph.find_edges", num_edges=self.num_edges())
        check_id_range(idx, self.num_edges(), "DistGraph.find_edges")
        if self._g is not None:
            ends = np.asarray(self._g.edge_endpoints.read(idx)).reshape(-1, 2)
            src, dst = ends[:, 0], ends[:, 1]
        else:
            if self._ends is None:
                g = self.local_graph
                indptr, indices = np.asarray(g.indptr), np.asarray(g.indices)
                row = np.repeat(np.arange(g.num_nodes, dtype=np.int64), np.diff(indptr))
                eids = np.asarray(g.eids)
                if eids.size == 0:  # edge e at position e of the CSC
                    self._ends = (indices, row)
                else:
                    src, dst = np.empty_like(indices), np.empty_like(row)
                    src[eids], dst[eids] = indices, row
                    self._ends = (src, dst)
            src, dst = self._ends[0][idx], self._ends[1][idx]
        return (on_device_of(np.ascontiguousarray(src, dtype=np.int64), edges),
                on_device_of(np.ascontiguousarray(dst, dtype=np.int64), edges))

    def _node_ids(self, ids, what: str) -> np.ndarray:
        """``ids`` (node IDs, or a 1-D boolean mask over every node) as int64 IDs in
        [0, num_nodes()): IndexError naming the first outside (NumPy would wrap a negative
        one)."""
        idx = to_numpy_ids(ids, f"DistGraph.{what}", num_nodes=self.num_nodes())
        check_id_range(idx, self.num_nodes(), f"DistGraph.{what}")
        return idx

    def orig_nids(self, ids=None) -> np.ndarray:
        """For every new (relabelled) node ID (or those in ``ids``: node IDs, or a 1-D boolean
        mask over every node; an ID outside [0, num_nodes()) is an IndexError naming it), its
        ID in the input graph."""
        if self._g is not None:
            t = self._g.orig_nid
            idx = np.arange(self.num_nodes(), dtype=np.int64) if ids is None \
                else self._node_ids(ids, "orig_nids")
            return t.read(idx)
        out = np.empty(self.num_nodes(), dtype=np.int64)
        for lp in self._parts:
            k = int(lp.num_inner_nodes)
            out[np.asarray(lp.nid[:k])] = np.asarray(lp.orig_nid[:k])
        return out if ids is None else out[self._node_ids(ids, "orig_nids")]

    def local_node_range(self) -> tuple[int, int]:
        """[first, last) of the node IDs this rank owns (simulated: every node)."""
        if self._g is not None:
            return tuple(self._g.local_node_range)
        return 0, self.num_nodes()

    def place_on_device(self, node_data: Sequence[str] = ("label", "feat"),
                        gpu_budget: Optional[int] = None, weighted: bool = False) -> dict:
        """Prepares this rank's partition for the GPU training path on the current CUDA device
        (``torch.cuda.set_device``): within ``gpu_budget`` bytes of device memory (default:
        half of what is free now), the sampling structure goes to the GPU first, then each
        node-data tensor of ``node_data`` in that order (names missing from ``ndata`` are
        skipped); what does not fit lives in pinned host memory read through UVA, and what the
        budget has left caches the hottest rows (highest in-degree) of the first such tensor on
        the GPU. The tensors get read-only device mirrors (writes to them are refused while
        mirrored); GPU samplers created afterwards (``NeighborSampler(device="cuda")``) place
        the structure as decided. ``weighted``: charge the structure with edge weights and
        their prefix sums, for samplers with ``prob``; a sampler that places a structure the
        plan did not reserve (weights the plan left out, another placement) is charged to what
        the budget has left, and refused with ValueError when it does not fit. The per-row
        arrays of the structure (16 bytes a node, 32 weighted) are always in device memory: a
        budget below them is a ValueError. Returns the plan (``device_placement``). Not
        collective. Needs distributed mode (a partition per process) and a CUDA build."""
        if self._g is None:
            raise ValueError("DistGraph.place_on_device: needs distributed mode (one partition "
                             "per process, or one process and a 1-part partitioning)")
        if not _C.cuda_compiled:
            raise _C.NotCompiledError("DistGraph.place_on_device: not_compiled_with_cuda: this "
                                      "Tessera build has no CUDA support")
        names = [n for n in node_data if n in self.ndata]
        budget = -1 if gpu_budget is None else int(gpu_budget)
        self._device_placement = _C.place_on_device(self._g, names, budget, bool(weighted))
        return self._device_placement

    @property
    def device_placement(self) -> Optional[dict]:
        """What ``place_on_device`` decided (None before): ``structure`` (gpu/uva), per tensor
        its placement and cache rows, bytes, and ``describe`` for logs."""
        return getattr(self, "_device_placement", None)

    def barrier(self) -> None:
        """Returns once every rank has called it (DGL's ``g.barrier()``)."""
        _runtime.barrier()

    def __repr__(self) -> str:
        mode = f"distributed, rank {_runtime.get_rank()}" if self._g is not None else "simulated"
        return (f"DistGraph(name={self.graph_name!r}, num_nodes={self.num_nodes()}, "
                f"num_edges={self.num_edges()}, num_parts={self._book.num_partitions()}, "
                f"mode={mode})")


def _check_trainers_per_machine(config: str, nparts: int, world: int) -> None:
    """Several trainers per machine: the T = world / nparts ranks of a machine must be on one
    host (they share its partition in memory), which LOCAL_WORLD_SIZE, when set, must allow."""
    tpm = world // nparts
    local = os.environ.get("LOCAL_WORLD_SIZE")
    if tpm > 1 and local and local.isdigit() and int(local) % tpm != 0:
        raise ValueError(f"DistGraph: {config} has {nparts} partitions for {world} ranks, so "
                         f"{tpm} trainers per machine share each partition in memory, but this "
                         f"host runs LOCAL_WORLD_SIZE={local} ranks, not a multiple of {tpm}: "
                         f"launch --nproc-per-node {tpm} on each of {nparts} machines")


def _split_even(ids: np.ndarray, rank: int, world: int) -> np.ndarray:
    chunks = np.array_split(ids, world)
    return chunks[rank]


def _split(mask_or_ids, offsets: np.ndarray, total: int, force_even: bool, rank, world,
           what: str):
    rank = _runtime.get_rank() if rank is None else int(rank)
    world = _runtime.get_world_size() if world is None else int(world)
    if not 0 <= rank < world:
        raise ValueError(f"{what}: rank {rank} outside [0, {world})")
    refuse_per_type(mask_or_ids, what)
    a = mask_or_ids

    def on_dev(ids):  # the result on the device of a torch input
        return on_device_of(ids, mask_or_ids)

    if isinstance(a, DistTensor):
        a = a.numpy()
    if HAVE_TORCH and isinstance(a, torch.Tensor):
        a = a.detach().cpu().numpy()
    a = np.asarray(a)
    if a.dtype == np.bool_:
        check_mask_ndim(a.shape, what)
    # DGL reads the argument as a mask: a boolean array, or one entry per node (edge) of any
    # dtype, an integer one when it holds only 0 and 1. IDs are unique, so such an array of
    # more than two entries cannot be an ID list; of one or two ([0], [0, 1], [1, 0]: every
    # node) it can, and is read as one.
    every_id = a.ndim == 1 and a.shape[0] <= 2 and sorted(a.tolist()) == list(range(total))
    if a.dtype == np.bool_ or (a.ndim == 1 and a.shape[0] == total and (
            not np.issubdtype(a.dtype, np.integer)
            or (((a == 0) | (a == 1)).all() and not every_id))):
        if a.shape[0] != total:
            raise ValueError(f"{what}: a mask needs {total} entries, got {a.shape[0]}")
        ids = np.nonzero(a)[0].astype(np.int64)
    else:
        ids = np.sort(to_numpy_ids(a, what))
        if ids.size and (ids[0] < 0 or ids[-1] >= total):
            raise IndexError(f"{what}: ID outside [0, {total})")
        twice = np.nonzero(ids[1:] == ids[:-1])[0]
        if twice.size:
            raise ValueError(f"{what}: ID {ids[twice[0]]} is listed more than once; pass unique "
                             f"IDs, or a mask of {total} entries")
    if world == 1:
        return on_dev(ids)
    nparts = len(offsets) - 1
    if force_even:
        # T trainers a machine (world = partitions x T): the machine's T chunks together, dealt
        # to its trainers in turn (C++ even_owner); consecutive chunks gave the first trainer the
        # machine's highest-degree nodes (degree order numbers them first).
        tpm = world // nparts if world % nparts == 0 else 1
        if tpm == 1:
            return on_dev(_split_even(ids, rank, world))
        machine, local = divmod(rank, tpm)
        chunks = np.array_split(ids, world)[machine * tpm:(machine + 1) * tpm]
        return on_dev(np.concatenate(chunks)[local::tpm])
    if world % nparts != 0:
        raise ValueError(f"{what}: force_even=False needs the same number of trainers on every "
                         f"machine ({nparts} partitions, {world} trainers)")
    # DGL's _split_local: the selected IDs of this trainer's machine, shared among the trainers
    # of the machine (T = world / partitions; global rank = machine * T + local rank), dealt in
    # turn as with force_even (DGL cuts them by count).
    tpm = world // nparts
    machine, local = divmod(rank, tpm)
    lo, hi = offsets[machine], offsets[machine + 1]
    mine = ids[(ids >= lo) & (ids < hi)]
    return on_dev(mine[local::tpm])


def _is_all(ids) -> bool:
    """True for "every node": None, or DGL's ``dgl.ALL`` (the string "__ALL__")."""
    return ids is None or (isinstance(ids, str) and ids == "__ALL__")


def _check_type(name, kind: str, what: str) -> None:
    """A homogeneous graph has one node type, "_N", and one edge type, "_E" (canonically
    ("_N", "_E", "_N")); None means it. Any other name is a ValueError (DGL's DGLError), so a
    heterograph script's type names do not pass unnoticed."""
    ok = (None, "_N") if kind == "node" else (None, "_E", ("_N", "_E", "_N"))
    if (tuple(name) if isinstance(name, list) else name) not in ok:
        raise ValueError(f"{what}: {kind} type {name!r} does not exist: a Tessera graph is "
                         f"homogeneous, its only {kind} type is "
                         f"{'_N' if kind == 'node' else '_E'!r}")


def _check_dist_mask(mask, what: str) -> None:
    """A DistTensor mask is 1-D, as any mask (``check_mask_ndim``): the runtime's split would
    read the first column of an [N, S] one."""
    if isinstance(mask, DistTensor):
        check_mask_ndim(mask.shape, f"{what}: DistTensor {mask.name!r}")


def _trainers_per_machine(mask: "DistTensor") -> int:
    """T of the job a mask DistTensor's policy partitions (0 when it has no partition book): the
    C++ split gathers a machine's selected IDs from its T trainers for tensors they do not share."""
    policy = mask.part_policy
    book = getattr(policy, "partition_book", None) if policy is not None else None
    return int(book.num_trainers_per_machine) if book is not None else 0


def _book_of(mask, partition_book: Optional[GraphPartitionBook],
             what: str) -> GraphPartitionBook:
    """``partition_book``, else, as in DGL, the book of a DistTensor mask's partition policy;
    ValueError when there is neither."""
    if partition_book is not None:
        return partition_book
    if isinstance(mask, DistTensor) and mask.part_policy is not None:
        return mask.part_policy.partition_book
    raise ValueError(f"{what} needs the partition book (g.get_partition_book()) when the mask "
                     "or IDs are not a DistTensor")


def node_split(nodes, partition_book: Optional[GraphPartitionBook] = None, ntype: str = "_N",
               rank: Optional[int] = None, force_even: bool = True, node_trainer_ids=None, *,
               world_size: Optional[int] = None):
    """This trainer's share of ``nodes``: a 1-D mask over all nodes (DGL's argument: boolean,
    or of any dtype, an integer one holding only 0 and 1; an [N, S] mask of S splits is a
    ValueError: pick a column), or unique node IDs. ``partition_book`` defaults, as in DGL, to
    the book of a DistTensor mask's ``part_policy``; other masks and IDs need it.

    With ``force_even`` the selected IDs (sorted, so mostly grouped by owner) are split into
    ``world_size`` nearly equal contiguous chunks, one per trainer (all M x T trainers with T per
    machine), a machine's T chunks then dealt to its trainers in turn (the l-th, (l + T)-th, ...
    ID to trainer l); otherwise each trainer gets the selected nodes its machine's partition
    owns, dealt in turn the same way among the machine's T trainers. At world size 1 that is
    every selected node. With one trainer per machine this is DGL's split; with several, DGL
    spreads each machine's chunk over its trainers at random, and its ``force_even=False`` cuts
    consecutive pieces, the last trainer taking the remainder (docs/dist.md, "Several trainers
    per machine"). Dealing keeps the trainers' steps equal: a contiguous cut gave the first
    trainer the machine's highest-degree nodes, numbered first. Collective (every
    rank calls it) for a DistTensor mask with ``force_even``, and without it for a mask
    DistTensor of the user's when a machine has several trainers (they exchange their IDs).
    ``rank`` / ``world_size`` default to the runtime's (0 and 1 standalone); passing them
    computes another trainer's share, e.g. to simulate ranks in one process.
    """
    _check_type(ntype, "node", "node_split")
    _check_dist_mask(nodes, "node_split")
    if isinstance(nodes, DistTensor) and nodes._dist is not None and rank is None \
            and world_size is None:  # collective, in C++: no rank reads the whole mask
        return as_tensor(_C.dist_node_split(nodes._dist, force_even, 0,
                                              _trainers_per_machine(nodes)))
    partition_book = _book_of(nodes, partition_book, "node_split")
    return _split(nodes, partition_book.node_offsets, partition_book.num_nodes, force_even,
                  rank, world_size, "node_split")


def edge_split(edges, partition_book: Optional[GraphPartitionBook] = None, etype: str = "_E",
               rank: Optional[int] = None, force_even: bool = True, edge_trainer_ids=None, *,
               world_size: Optional[int] = None):
    """``node_split`` for edges (a mask over all edges, or unique edge IDs)."""
    _check_type(etype, "edge", "edge_split")
    _check_dist_mask(edges, "edge_split")
    if isinstance(edges, DistTensor) and edges._dist is not None and rank is None \
            and world_size is None:
        return as_tensor(_C.dist_edge_split(edges._dist, force_even, 0,
                                              _trainers_per_machine(edges)))
    partition_book = _book_of(edges, partition_book, "edge_split")
    return _split(edges, partition_book.edge_offsets, partition_book.num_edges, force_even,
                  rank, world_size, "edge_split")
