# SPDX-License-Identifier: Apache-2.0
"""GNN layers in plain PyTorch over Tessera's blocks, with DGL's ``dgl.nn`` arguments."""
from __future__ import annotations

import os
from typing import Optional, Sequence

from . import _C, _torch_ops
from ._tensor import require_torch
from .dataloading import _integer_arg
from .ops import spmm

torch = require_torch("tessera.nn")
from torch import nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.modules import module as _m  # noqa: E402  (its global hook registries)

__all__ = ["SAGEConv", "GraphSAGE", "mean_aggregate", "block_edges", "softmax_aggregate",
           "GENConv", "DeepGCN"]


def block_edges(block):
    """(src, dst, num_src, num_dst) of a Tessera Block, a DGL block, or a tuple
    ``(edge_index [2, E], (num_src, num_dst))`` in PyG's bipartite convention. TypeError for
    edge indices that are not integers (a float index would be truncated to another node)."""
    if isinstance(block, tuple):
        edge_index, (ns, nd) = block
        _require_index(edge_index, "edge_index")
        return edge_index[0], edge_index[1], int(ns), int(nd)
    if hasattr(block, "num_src_nodes"):
        src, dst = block.edges()
        return src, dst, int(block.num_src_nodes()), int(block.num_dst_nodes())
    raise TypeError(f"expected a block, got {type(block).__name__}")


def _is_width(w) -> bool:
    """Whether ``w`` is a layer width: an integer (not a bool, nor a float) >= 1, by the rule
    the loaders' integer arguments follow."""
    try:
        _integer_arg("", "", w, 1)
    except (TypeError, ValueError):
        return False
    return True


def _require_index(t, what: str) -> None:
    """TypeError unless ``t`` (a tensor or array) holds integers (bool is not an index)."""
    dtype = getattr(t, "dtype", None)
    if isinstance(dtype, torch.dtype):
        ok = not (dtype.is_floating_point or dtype.is_complex or dtype == torch.bool)
    else:
        import numpy as np
        ok = dtype is not None and np.issubdtype(dtype, np.integer)
    if not ok:
        raise TypeError(f"{what} must hold integer node IDs, got dtype {dtype}")


class _SortedMean(torch.autograd.Function):
    """Mean (or, with ``reduce="sum"``, sum) aggregation over edges grouped by destination (dst
    non-decreasing) as one sparse x dense product each way (tessera.ops.spmm, by ``engine``): no
    per-edge message tensor, no atomics forward, the degrees read from the CSR offsets.
    ``transpose`` gives A^T h (the gradient w.r.t. the sources): each direction's backward is
    the other's forward, so the backward records its own graph (double backward differentiates
    through it)."""

    @staticmethod
    def forward(ctx, h, src, indptr, engine, transpose=False, num_src=None, reduce="mean"):
        num_src = h.shape[0] if num_src is None else num_src
        # On the CPU torch's threads, as the model's other operators (and the torch operator).
        out = spmm(indptr, src, num_src, h.contiguous(), reduce=reduce, transpose=transpose,
                   engine=engine, num_threads=0 if h.is_cuda else torch.get_num_threads())
        ctx.save_for_backward(src, indptr)
        ctx.num_src, ctx.engine, ctx.transpose, ctx.reduce = num_src, engine, transpose, reduce
        return out

    @staticmethod
    def backward(ctx, grad):
        src, indptr = ctx.saved_tensors
        g = _SortedMean.apply(grad, src, indptr, ctx.engine, not ctx.transpose, ctx.num_src,
                              ctx.reduce)
        return g, None, None, None, None, None, None


def _sorted_sum(graph, h_src: "torch.Tensor", src: "torch.Tensor", dst: "torch.Tensor",
                num_dst: int) -> Optional["torch.Tensor"]:
    """sum of h_src[u] over the edges u -> v by the CSR product when ``graph`` is a Tessera block
    (edges grouped by destination) and h_src a float32 matrix (as mean_aggregate: no [E, F]
    message tensor; on the CPU the CPU twin, whose sums run in edge order as index_add_'s do),
    else None."""
    if not getattr(graph, "dst_sorted", False):
        return None
    engine = _csr_engine(h_src, True)
    if engine is None:
        return None
    indptr = _offsets(getattr(graph, "indptr", None), dst, num_dst, h_src.device)
    return _SortedMean.apply(h_src, src.contiguous(), indptr, engine, False, None, "sum")


def _offsets(indptr: Optional["torch.Tensor"], dst: "torch.Tensor", num_dst: int,
             device) -> "torch.Tensor":
    """The CSR offsets of destination-grouped edges (``num_dst + 1``, int64, on ``device``): the
    block's ``indptr`` when it has one, else searched for in the sorted ``dst``."""
    if indptr is None:
        indptr = torch.searchsorted(dst.contiguous(), torch.arange(num_dst + 1, device=dst.device))
    return indptr.to(device, torch.int64)


#: TESSERA_MEAN_AGGREGATE: how mean_aggregate runs (see there).
_MEAN_MODES = ("auto", "rows", "csr", "index")


def _csr_engine(h_src: "torch.Tensor", dst_sorted: bool) -> Optional[str]:
    """The engine of mean_aggregate's CSR products for ``h_src`` (``"rows"`` or ``"cusparse"``,
    by ``TESSERA_MEAN_AGGREGATE``; on the CPU the CPU twin, whatever the name), or None when it
    takes index_select + index_add_."""
    mode = os.environ.get("TESSERA_MEAN_AGGREGATE", "auto")
    if mode not in _MEAN_MODES:
        raise ValueError(f"TESSERA_MEAN_AGGREGATE must be one of {', '.join(_MEAN_MODES)}, "
                         f"got {mode!r}")
    if not (mode != "index" and dst_sorted and h_src.dtype == torch.float32
            and h_src.dim() == 2 and h_src.device.type in ("cpu", "cuda")):
        return None
    if not h_src.is_cuda:
        return "rows"  # the CPU twin: no [E, F] message tensor (DGL's CPU SpMM does the same)
    if not _C.cuda_compiled:
        return None
    if mode == "auto":  # rows in training steps, cuSPARSE for inference's large blocks
        mode = "rows" if torch.is_grad_enabled() else "csr"
    return "cusparse" if mode == "csr" else "rows"


def mean_aggregate(h_src: "torch.Tensor", src: "torch.Tensor", dst: "torch.Tensor",
                   num_dst: int, dst_sorted: bool = False,
                   indptr: Optional["torch.Tensor"] = None) -> "torch.Tensor":
    """out[v] = mean of h_src[u] over the edges u -> v (zeros for a node without edges).

    With ``dst_sorted`` (the edges grouped by destination in ascending order, as Tessera's
    blocks are), a float32 matrix, on the CPU or a GPU, as one sparse x dense product each way
    over the block's CSR offsets (``tessera.ops.spmm``): no message tensor per edge and no
    atomics forward. On the CPU that is the CPU twin (deterministic for any thread count; on
    torch's threads, ``torch.set_num_threads``, as the model's other operators);
    index_select + index_add_ there built an [E, F] message tensor whose fresh pages cost more
    than the sums (a full-neighbor inference layer of 6.5M edges x 256 floats: 6.7 GB). Other
    inputs (unsorted edges, other dtypes) take index_select + index_add_ (on the CPU index_add_
    adds in edge order, so the result is deterministic). ``TESSERA_MEAN_AGGREGATE=index``
    forces that way everywhere; on a GPU it picks among: ``rows``
    (Tessera's row kernels: a warp per destination, two launches a pass, no scratch), ``csr``
    (cuSPARSE: balanced over hub rows, but its descriptors and workspace cost more host time
    per call than the small blocks of a training step repay), ``index`` (index_select +
    index_add_), or ``auto`` (the default: rows with autograd on, csr without, i.e. for
    inference's full neighborhoods, where one warp would walk a hub's row). The product runs
    as ``torch.ops.tessera.mean_aggregate`` (C++ autograd, no Python per call beyond the
    dispatcher's; ``tessera._torch_ops``) when the package has its torch operator library, else
    through ``tessera.ops.spmm`` (the same kernels and result). Nothing here waits for
    the GPU (the degrees come from the offsets or a scatter, not from bincount, which reads
    its size back to the host). ``indptr``: those offsets when the caller has them (a GPU
    loader's block carries them), else they are searched for."""
    _require_index(src, "mean_aggregate: src")
    _require_index(dst, "mean_aggregate: dst")
    src = src.to(h_src.device, torch.int64)
    dst = dst.to(h_src.device, torch.int64)
    engine = _csr_engine(h_src, dst_sorted)
    if engine is not None:
        indptr = _offsets(indptr, dst, num_dst, h_src.device)
        tops = _torch_ops.ops()
        if tops is not None:  # one dispatcher call, its backward in C++ autograd
            return tops.mean_aggregate(h_src, src, indptr, engine)
        return _SortedMean.apply(h_src, src.contiguous(), indptr, engine)
    # float16 / bfloat16 stop counting at 2048 / 256: sums, counts and the division run in
    # float32 (float32 and float64 in their own dtype), then the mean is cast back.
    acc = _accumulation_dtype(h_src.dtype)
    out = torch.zeros((num_dst,) + tuple(h_src.shape[1:]), dtype=acc, device=h_src.device)
    out.index_add_(0, dst, h_src.index_select(0, src).to(acc))
    deg = torch.zeros(num_dst, dtype=torch.int64, device=dst.device).index_add_(
        0, dst, torch.ones_like(dst))
    out = out / deg.clamp_(min=1).to(acc).view(-1, *([1] * (h_src.dim() - 1)))
    return out if acc == h_src.dtype else out.to(h_src.dtype)


def _accumulation_dtype(dtype: "torch.dtype") -> "torch.dtype":
    """The dtype sums and counts of ``dtype`` features run in: float32 for the 16-bit floats
    (whose integers stop being exact at 2048 and 256), else ``dtype`` itself."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _hooked(*modules) -> bool:
    """Whether a forward hook would see these modules' calls (theirs or a global one)."""
    return bool(_m._global_forward_hooks or _m._global_forward_pre_hooks or any(
        m._forward_hooks or m._forward_pre_hooks for m in modules))


class SAGEConv(nn.Module):
    """GraphSAGE layer with the mean aggregator (DGL semantics):

        h_dst' = fc_self(h_dst) + fc_neigh(mean_{u -> v} h_src[u])

    ``feat`` is the source-node features of the block (the first ``num_dst`` rows are the
    destination nodes), or a pair ``(h_src, h_dst)``. ``in_feats`` is one width or DGL's pair
    ``(in_src_feats, in_dst_feats)``. As DGL does, when ``in_src_feats > out_feats`` the
    neighbor projection runs before aggregation (same result, fewer FLOPs). The parameters are
    DGL's (``fc_neigh.weight``, ``fc_self.weight``, ``fc_self.bias``, created and initialized
    in DGL's order, so a DGL checkpoint loads and the same torch seed gives the same weights; a
    state dict of the older layout, with a separate ``bias``, still loads).
    On a GPU block with its CSR offsets (the GPU loader's) and no feature dropout, the layer
    runs as one call of ``torch.ops.tessera.sage_layer`` (the same operators in the same order,
    issued from C++: a training step there is bound by the host's time per call), unless a
    forward hook on ``fc_self`` / ``fc_neigh`` (or a global module hook) wants their calls or
    autocast is on for the features' device.
    """

    def __init__(self, in_feats, out_feats: int, aggregator_type: str = "mean",
                 feat_drop: float = 0.0, bias: bool = True, norm=None, activation=None):
        super().__init__()
        if aggregator_type != "mean":
            raise ValueError(f"SAGEConv: only the 'mean' aggregator is implemented, got "
                             f"{aggregator_type!r}")
        pair = in_feats if isinstance(in_feats, (tuple, list)) else (in_feats, in_feats)
        if len(pair) != 2 or not all(_is_width(w) for w in pair) or not _is_width(out_feats):
            raise ValueError(f"SAGEConv: in_feats must be a width or a pair (in_src_feats, "
                             f"in_dst_feats) and out_feats a width, all integers >= 1; got "
                             f"{in_feats!r} and {out_feats!r}")
        self.in_src_feats, self.in_dst_feats = int(pair[0]), int(pair[1])
        self.in_feats = self.in_src_feats
        self.out_feats = int(out_feats)
        self.feat_drop = nn.Dropout(feat_drop)
        # DGL's order: fc_neigh, then fc_self with the bias; each draws nn.Linear's default
        # init, then reset_parameters redraws both weights (the bias keeps its draw, as DGL's).
        self.fc_neigh = nn.Linear(self.in_src_feats, self.out_feats, bias=False)
        self.fc_self = nn.Linear(self.in_dst_feats, self.out_feats, bias=bias)
        self.norm, self.activation = norm, activation
        self.reset_parameters()

    @property
    def bias(self) -> Optional["torch.Tensor"]:
        """The bias (``fc_self.bias``), or None."""
        return self.fc_self.bias

    def reset_parameters(self) -> None:
        """DGL's: Xavier-uniform (gain of ReLU) on ``fc_self.weight`` then ``fc_neigh.weight``;
        the bias is left as it is."""
        gain = nn.init.calculate_gain("relu")
        nn.init.xavier_uniform_(self.fc_self.weight, gain=gain)
        nn.init.xavier_uniform_(self.fc_neigh.weight, gain=gain)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # The older layout kept the bias as the layer's own parameter `bias`.
        old, new = prefix + "bias", prefix + "fc_self.bias"
        if old in state_dict and new not in state_dict:
            state_dict[new] = state_dict.pop(old)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def forward(self, block, feat) -> "torch.Tensor":
        src, dst, num_src, num_dst = block_edges(block)
        fused = not isinstance(feat, tuple)
        h_src = feat if fused else feat[0]
        if h_src.shape[0] != num_src:
            raise ValueError(f"SAGEConv: {h_src.shape[0]} source features for a block with "
                             f"{num_src} source nodes")
        if fused and num_dst > num_src:
            raise ValueError(f"SAGEConv: a block of {num_src} source and {num_dst} destination "
                             "nodes takes a pair (h_src, h_dst): the destinations are not its "
                             "first source nodes")
        if not fused and feat[1].shape[0] != num_dst:
            raise ValueError(f"SAGEConv: {feat[1].shape[0]} destination features for a block "
                             f"with {num_dst} destination nodes")
        ordered = bool(getattr(block, "dst_sorted", False))
        indptr = getattr(block, "indptr", None) if ordered else None
        # A GPU block with its CSR offsets (the GPU loader's) and no feature dropout: the layer in
        # one call of the torch operator (the same operators in the same order as below), unless
        # a hook on fc_self / fc_neigh wants their calls, or autocast would make the projection
        # before aggregation 16-bit (the operator aggregates float32 only).
        fused = fused and indptr is not None and self.feat_drop.p == 0 and not _hooked(
            self.fc_self, self.fc_neigh) and not torch.is_autocast_enabled(h_src.device.type)
        engine = _csr_engine(h_src, ordered) if fused else None
        tops = _torch_ops.ops() if engine is not None else None
        if tops is not None:
            rst = tops.sage_layer(h_src, src.to(h_src.device, torch.int64),
                                  _offsets(indptr, dst, num_dst, h_src.device),
                                  self.fc_self.weight, self.fc_neigh.weight, self.fc_self.bias,
                                  engine)
            return self._finish(rst)
        h_dst = feat[1] if isinstance(feat, tuple) else feat[:num_dst]
        if self.feat_drop.p > 0:  # dropout(p=0) returns its input: skip the module calls
            # As DGL: one mask over a block's features, whose first rows are the destinations;
            # a pair (h_src, h_dst) is dropped side by side.
            h_src = self.feat_drop(h_src)
            h_dst = self.feat_drop(h_dst) if isinstance(feat, tuple) else h_src[:num_dst]
        if self.in_src_feats > self.out_feats:
            h_neigh = mean_aggregate(self.fc_neigh(h_src), src, dst, num_dst, ordered, indptr)
        else:
            h_neigh = self.fc_neigh(mean_aggregate(h_src, src, dst, num_dst, ordered, indptr))
        return self._finish(self.fc_self(h_dst) + h_neigh)

    def _finish(self, rst: "torch.Tensor") -> "torch.Tensor":
        if self.activation is not None:
            rst = self.activation(rst)
        if self.norm is not None:
            rst = self.norm(rst)
        return rst


class GraphSAGE(nn.Module):
    """A stack of mean-aggregator SAGEConv layers for mini-batch training on blocks.

    ``forward(blocks, x)``: ``x`` holds the features of ``blocks[0]``'s source nodes; returns
    the outputs of ``blocks[-1]``'s destination nodes. ReLU, optional layer norm
    (``norm="layer"``; ``None`` for none) and dropout between layers (not after the last)."""

    def __init__(self, in_feats: int, hidden: int, out_feats: int, num_layers: int = 2,
                 dropout: float = 0.5, input_dropout: float = 0.0, norm: Optional[str] = None):
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"GraphSAGE: num_layers must be >= 1, got {num_layers}")
        if norm not in (None, "layer"):
            raise ValueError(f"GraphSAGE: norm must be None or 'layer', got {norm!r}")
        dims = [in_feats] + [hidden] * (num_layers - 1) + [out_feats]
        self.layers = nn.ModuleList(SAGEConv(dims[i], dims[i + 1]) for i in range(num_layers))
        self.norms = nn.ModuleList(
            (nn.LayerNorm(hidden) if norm == "layer" else nn.Identity())
            for _ in range(num_layers - 1))
        self.dropout = nn.Dropout(dropout)
        self.input_dropout = nn.Dropout(input_dropout)

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    @torch.no_grad()
    def inference(self, g, x_of, batch_size: int = 32768, name: str = "inference"):
        """Outputs of every node of ``g`` with full neighborhoods, one layer at a time (DGL's
        ``model.inference``). ``x_of(ids)`` gives the input rows of node IDs (e.g. a feature
        DistTensor's ``__getitem__``).

        On a distributed DistGraph of several ranks each rank computes the nodes it owns and
        writes them into a DistTensor per layer (``<name>-layer<i>``), whose rows the next layer
        reads from their owners; the result is that DistTensor (collective). Otherwise a torch
        tensor on the model's device.

        With the model on a GPU and a distributed-mode DistGraph, the full neighborhoods are
        sampled by the GPU sampler straight into device memory (``NeighborSampler([-1],
        device="cuda")``), ``x_of`` gets the input nodes on the device (a DistTensor with a
        device mirror gathers them there), and with one rank each layer's output stays on the
        GPU. The model runs in eval mode and is left in the mode it was in."""
        modes = [(m, m.training) for m in self.modules()]
        self.eval()
        try:
            return self._layerwise_inference(g, x_of, batch_size, name)
        finally:
            for m, training in modes:
                m.training = training

    def _layerwise_inference(self, g, x_of, batch_size: int, name: str):
        import numpy as np

        import tessera

        n = g.num_nodes() if callable(g.num_nodes) else int(g.num_nodes)  # a Dataset's is an int
        distributed = bool(getattr(g, "is_distributed", False))
        several = distributed and tessera.get_world_size() > 1
        device = next(self.parameters()).device
        on_gpu = device.type != "cpu"
        gpu_sampling = on_gpu and distributed and tessera._C.cuda_compiled
        lo, hi = g.local_node_range() if hasattr(g, "local_node_range") else (0, n)
        sampler = tessera.NeighborSampler([-1], device="cuda" if gpu_sampling else "cpu")
        loader = tessera.NodeDataLoader(g, np.arange(lo, hi, dtype=np.int64), sampler,
                                        batch_size=batch_size, shuffle=False, num_workers=1,
                                        seed=0, device=device if on_gpu else None)
        h = None
        for i, layer in enumerate(self.layers):
            dim = layer.out_feats
            out = tessera.DistTensor((n, dim), torch.float32, f"{name}-layer{i}",
                                     part_policy=g.get_node_partition_policy()) \
                if several else torch.empty((n, dim), dtype=torch.float32,
                                            device=device if on_gpu else None)
            for input_nodes, seeds, blocks in loader:
                x = x_of(input_nodes) if i == 0 else h[input_nodes]
                if on_gpu:
                    x = x.to(device)
                y = layer(blocks[0], x)
                if i < self.num_layers - 1:
                    y = F.relu(self.norms[i](y))
                out[seeds] = y
            if several:
                g.barrier()  # every rank's rows are written before anyone reads them
            h = out
        return h

    def forward(self, blocks: Sequence, x: "torch.Tensor") -> "torch.Tensor":
        if len(blocks) != len(self.layers):
            raise ValueError(f"GraphSAGE: {len(self.layers)} layers but {len(blocks)} blocks")
        # Dropout(p=0) and Identity return their input: skipped, since in a GPU training step
        # every Python-level call costs host time the GPU waits for.
        h = self.input_dropout(x) if self.input_dropout.p > 0 else x
        for i, (layer, block) in enumerate(zip(self.layers, blocks)):
            h = layer(block, h)
            if i < len(self.layers) - 1:
                norm = self.norms[i]
                h = F.relu(h if isinstance(norm, nn.Identity) else norm(h))
                h = self.dropout(h) if self.dropout.p > 0 else h
        return h


# --- graph-level layers: GIN and per-graph readout over a GraphBatch -------------------------
__all__ += ["readout_nodes", "SumPooling", "AvgPooling", "MaxPooling", "GINConv"]


def readout_nodes(h: "torch.Tensor", graph_ids: "torch.Tensor", num_graphs: int,
                  op: str = "sum") -> "torch.Tensor":
    """Per-graph readout: ``out[k] = op(h[v] for the nodes v with graph_ids[v] == k)`` for
    ``op`` in ``sum``, ``mean``, ``max`` (DGL's ``sum_nodes`` / ``mean_nodes`` / ``max_nodes``).
    A segment reduction over ``graph_ids`` (a GraphBatch's): ``index_add_`` for sum and mean,
    ``scatter_reduce_(amax)`` for max, whose gradient goes to the first node holding the
    maximum, as DGL's. A graph without nodes reads out zeros. On the CPU the sum adds in node
    order, so the result is deterministic."""
    if op not in ("sum", "mean", "max"):
        raise ValueError(f"readout_nodes: op must be sum, mean or max, got {op!r}")
    _require_index(graph_ids, "readout_nodes: graph_ids")
    if h.shape[0] != graph_ids.shape[0]:
        raise ValueError(f"readout_nodes: {h.shape[0]} node rows but {graph_ids.shape[0]} "
                         "graph IDs")
    ids = graph_ids.to(h.device, torch.int64)
    shape = (int(num_graphs),) + tuple(h.shape[1:])
    if op == "max":
        return _segment_max(h, ids, int(num_graphs))
    if op == "sum":
        return h.new_zeros(shape).index_add_(0, ids, h)
    # The mean's sums, counts and division in float32 for 16-bit floats (see mean_aggregate).
    acc = _accumulation_dtype(h.dtype)
    out = torch.zeros(shape, dtype=acc, device=h.device).index_add_(0, ids, h.to(acc))
    cnt = torch.zeros(int(num_graphs), dtype=torch.int64, device=h.device).index_add_(
        0, ids, torch.ones_like(ids))
    out = out / cnt.clamp_(min=1).to(acc).view(-1, *([1] * (h.dim() - 1)))
    return out if acc == h.dtype else out.to(h.dtype)


def _segment_max(h: "torch.Tensor", ids: "torch.Tensor", num: int,
                 last: bool = False) -> "torch.Tensor":
    """``out[k] = max(h[i] for the rows i with ids[i] == k)`` per column (int64 ``ids`` on
    ``h``'s device), zeros for a segment without rows. The maximum is read from one row holding
    it, so its gradient goes to that row alone (amax's backward shares it among tied maxima):
    the first (lowest index), as DGL's segment max (``readout_nodes``), or with ``last`` the
    last (the last in-edge by edge ID), as DGL 1.1's ``update_all`` max reducer on a CPU with
    AVX-512, where it runs libxsmm's kernel (its own kernel, elsewhere, keeps the first)."""
    shape = (num,) + tuple(h.shape[1:])
    n = h.shape[0]
    if n == 0:
        return h.new_zeros(shape)
    index = ids.view(-1, *([1] * (h.dim() - 1))).expand_as(h)
    with torch.no_grad():
        top = h.new_zeros(shape).scatter_reduce(0, index, h, reduce="amax",
                                                include_self=False).gather(0, index)
        match = (h == top) | (torch.isnan(h) & torch.isnan(top))
        rows = torch.arange(n, device=h.device).view(-1, *([1] * (h.dim() - 1)))
        none = -1 if last else n
        pick = torch.full(shape, none, dtype=torch.int64, device=h.device).scatter_reduce(
            0, index, torch.where(match, rows.expand_as(h), none),
            reduce="amax" if last else "amin")
    picked = h.gather(0, pick.clamp(0, n - 1))
    return torch.where(pick != none, picked, torch.zeros((), dtype=h.dtype, device=h.device))


def _src_dst_feats(name: str, feat, num_src: int, num_dst: int):
    """(feat_src, feat_dst) of a layer's input ``feat``: a pair as given, else one tensor whose
    first ``num_dst`` rows are the destinations (a block's, DGL's convention; a whole graph's
    are all its nodes). ValueError when the rows do not fit the graph's nodes."""
    pair = isinstance(feat, (tuple, list))
    feat_src = feat[0] if pair else feat
    if feat_src.shape[0] != num_src:
        raise ValueError(f"{name}: {feat_src.shape[0]} source features for a graph of "
                         f"{num_src} source nodes")
    if pair:
        if feat[1].shape[0] != num_dst:
            raise ValueError(f"{name}: {feat[1].shape[0]} destination features for a "
                             f"graph of {num_dst} destination nodes")
        return feat_src, feat[1]
    if num_dst > num_src:
        raise ValueError(f"{name}: a graph of {num_src} source and {num_dst} destination "
                         "nodes takes a pair (feat_src, feat_dst): the destinations are "
                         "not its first source nodes")
    return feat_src, feat_src[:num_dst]


def _weigh_messages(name: str, msg: "torch.Tensor",
                    edge_weight: Optional["torch.Tensor"]) -> "torch.Tensor":
    """``msg`` [E, ...] scaled by ``edge_weight`` as DGL's ``u_mul_e``: [E] scales each edge's
    message, [E, ...] broadcasts against it. ValueError for a weight count that is not E."""
    if edge_weight is None:
        return msg
    if edge_weight.dim() == 0 or edge_weight.shape[0] != msg.shape[0]:
        got = edge_weight.shape[0] if edge_weight.dim() else "scalar"
        raise ValueError(f"{name}: {got} edge weights for a graph of {msg.shape[0]} edges")
    w = edge_weight.to(msg.device)
    return msg * w.view(-1, *([1] * (msg.dim() - 1))) if w.dim() == 1 else msg * w


class _Pooling(nn.Module):
    op = "sum"

    def forward(self, batch, h: "torch.Tensor") -> "torch.Tensor":
        """``batch``: a GraphBatch (its ``graph_ids`` and ``num_graphs``)."""
        return readout_nodes(h, batch.graph_ids, batch.num_graphs, self.op)


class SumPooling(_Pooling):
    """Sum of the node features of every graph of a GraphBatch (DGL's SumPooling)."""
    op = "sum"


class AvgPooling(_Pooling):
    """Mean of the node features of every graph of a GraphBatch (DGL's AvgPooling)."""
    op = "mean"


class MaxPooling(_Pooling):
    """Element-wise max of the node features of every graph of a GraphBatch (DGL's
    MaxPooling)."""
    op = "max"


class GINConv(nn.Module):
    """Graph Isomorphism Network layer (Xu et al., ICLR 2019), DGL's ``GINConv``:

        h_v' = activation(apply_func((1 + eps) h_v + aggregate_{u -> v} w_e h_u))

    ``aggregator_type`` is ``sum``, ``mean`` or ``max`` (a node without in-edges aggregates
    zeros; max's gradient goes to the last in-edge holding the maximum, as DGL's on an AVX-512
    CPU), ``eps`` is learnable with ``learn_eps``, and ``edge_weight`` ([E] or [E, ...],
    broadcast against the features) scales each message as DGL's ``u_mul_e``. ``graph`` is anything ``block_edges``
    takes: a GraphBatch, a block (the destinations are its first source nodes), a tuple
    ``(edge_index, (num_src, num_dst))``. ``feat`` is the source features, or a pair
    ``(feat_src, feat_dst)``. The arguments are DGL's, in DGL's order: ``GINConv(mlp, "sum")``.
    """

    def __init__(self, apply_func: Optional[nn.Module] = None, aggregator_type: str = "sum",
                 init_eps: float = 0.0, learn_eps: bool = False, activation=None):
        super().__init__()
        if not isinstance(aggregator_type, str) or aggregator_type not in ("sum", "mean", "max"):
            raise ValueError(f"GINConv: aggregator_type must be 'sum', 'mean' or 'max', got "
                             f"{aggregator_type!r} (init_eps is the third argument, as in "
                             "DGL's GINConv)")
        self.apply_func = apply_func
        self._aggregator_type = aggregator_type
        self.activation = activation
        if learn_eps:
            self.eps = nn.Parameter(torch.tensor([float(init_eps)]))
        else:
            self.register_buffer("eps", torch.tensor([float(init_eps)]))

    def forward(self, graph, feat, edge_weight: Optional["torch.Tensor"] = None
                ) -> "torch.Tensor":
        src, dst, num_src, num_dst = block_edges(graph)
        feat_src, feat_dst = _src_dst_feats("GINConv", feat, num_src, num_dst)
        src = src.to(feat_src.device, torch.int64)
        dst = dst.to(feat_src.device, torch.int64)
        msg = _weigh_messages("GINConv", feat_src.index_select(0, src), edge_weight)
        # A segment reduction of the messages by destination.
        if self._aggregator_type == "max":
            agg = _segment_max(msg, dst, num_dst, last=True)
        else:
            agg = readout_nodes(msg, dst, num_dst, self._aggregator_type)
        rst = (1 + self.eps) * feat_dst + agg
        if self.apply_func is not None:
            rst = self.apply_func(rst)
        if self.activation is not None:
            rst = self.activation(rst)
        return rst


def _segment_exp(z: "torch.Tensor", dst: "torch.Tensor", num_dst: int):
    """The terms of a softmax over the in-edges of each destination, per channel: ``(w, den)``
    with ``w[e] = exp(z[e] - max of z over the edges into dst[e])`` ([E, ...]) and ``den[v]``
    the sum of ``w`` over the in-edges of v ([num_dst, ...], 0 for a node without any).
    Subtracting the maximum (a constant to autograd: the softmax does not depend on it) keeps
    large ``z`` from overflowing; every edge's own destination has ``den >= 1``. ``dst``: int64
    on ``z``'s device. Segment ops only (scatter_reduce, index_add_): no host sync."""
    shape = (num_dst,) + tuple(z.shape[1:])
    index = dst.view(-1, *([1] * (z.dim() - 1))).expand_as(z)
    with torch.no_grad():
        zmax = z.new_zeros(shape).scatter_reduce(0, index, z, "amax", include_self=False)
    w = torch.exp(z - zmax.index_select(0, dst))
    return w, z.new_zeros(shape).index_add_(0, dst, w)


def _edge_softmax(z: "torch.Tensor", dst: "torch.Tensor", num_dst: int) -> "torch.Tensor":
    """DGL's ``edge_softmax`` (normalized by destination): ``z`` [E, ...] scores, softmax over
    the in-edges of each destination per channel; [E, ...]."""
    w, den = _segment_exp(z, dst, num_dst)
    return w / den.index_select(0, dst)


def softmax_aggregate(msg: "torch.Tensor", dst: "torch.Tensor", num_dst: int,
                      t: "torch.Tensor") -> "torch.Tensor":
    """DeepGCN's SoftMax_Agg: out[v] = sum over the edges e = u -> v of
    softmax_e(t * msg[e]) * msg[e], the softmax taken per feature channel over the in-edges of
    v (``msg`` [E, H], ``dst`` [E], ``t`` the inverse temperature, a scalar tensor: t -> 0 is
    the mean, t -> inf the max). Zeros for a node without in-edges. The per-destination maximum
    is subtracted before the exponential, so large ``t * msg`` do not overflow."""
    _require_index(dst, "softmax_aggregate: dst")
    dst = dst.to(msg.device, torch.int64)
    w, den = _segment_exp(msg * t, dst, num_dst)
    num = msg.new_zeros(den.shape).index_add_(0, dst, w * msg)
    # A node with in-edges has den >= 1 (its largest message contributes exp(0)); one without
    # has num = den = 0 and divides by 1 (a tiny clamp such as 1e-16 is 0 in float16).
    return num / torch.where(den > 0, den, torch.ones_like(den))


class GENConv(nn.Module):
    """DeepGCN's generalized graph convolution (GENConv, Li et al. 2020) on a graph given by
    its edges ``src -> dst`` over ``num_nodes`` nodes:

        m_e  = relu(h[src_e]) + eps
        h'_v = MLP(h_v + softmax_aggregate(m, dst, t))

    with a learnable inverse temperature ``t`` (``learn_t``) of the softmax aggregation and a
    two-layer MLP (hidden 2x, LayerNorm, ReLU) as in the ogbn-proteins model."""

    def __init__(self, in_feats: int, out_feats: int, t: float = 1.0, learn_t: bool = True,
                 eps: float = 1e-7, mlp_expansion: int = 2):
        super().__init__()
        if learn_t:
            self.t = nn.Parameter(torch.tensor(float(t)))
        else:
            self.register_buffer("t", torch.tensor(float(t)))
        self.eps = float(eps)
        hid = int(out_feats) * int(mlp_expansion)
        self.mlp = nn.Sequential(nn.Linear(in_feats, hid), nn.LayerNorm(hid), nn.ReLU(),
                                 nn.Linear(hid, out_feats))

    def forward(self, h: "torch.Tensor", src: "torch.Tensor",
                dst: "torch.Tensor") -> "torch.Tensor":
        _require_index(src, "GENConv: src")
        src = src.to(h.device, torch.int64)
        m = F.relu(h.index_select(0, src)) + self.eps
        return self.mlp(h + softmax_aggregate(m, dst, h.shape[0], self.t))


class DeepGCN(nn.Module):
    """ResGCN+ (DeepGCN's "res+" block, as its ogbn-proteins model): a linear node encoder,
    ``num_layers`` GENConv layers, every one after the first in a pre-activation residual
    block

        h = h + GENConv(dropout(relu(LayerNorm(h))))

    then LayerNorm, ReLU, dropout and a linear classifier. ``forward(x, src, dst)`` runs on a
    whole graph or on a Cluster-GCN subgraph (edges ``src -> dst`` over the rows of ``x``)."""

    def __init__(self, in_feats: int, hidden: int, out_feats: int, num_layers: int = 7,
                 dropout: float = 0.1, t: float = 1.0, learn_t: bool = True):
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"DeepGCN: num_layers {num_layers} < 1")
        self.encoder = nn.Linear(in_feats, hidden)
        self.convs = nn.ModuleList(GENConv(hidden, hidden, t=t, learn_t=learn_t)
                                   for _ in range(num_layers))
        self.norms = nn.ModuleList(nn.LayerNorm(hidden) for _ in range(num_layers))
        self.dropout = float(dropout)
        self.classifier = nn.Linear(hidden, out_feats)

    @property
    def num_layers(self) -> int:
        return len(self.convs)

    def forward(self, x: "torch.Tensor", src: "torch.Tensor",
                dst: "torch.Tensor") -> "torch.Tensor":
        h = self.convs[0](self.encoder(x), src, dst)
        for conv, norm in zip(self.convs[1:], self.norms[:-1]):
            z = F.dropout(F.relu(norm(h)), p=self.dropout, training=self.training)
            h = h + conv(z, src, dst)
        h = F.dropout(F.relu(self.norms[-1](h)), p=self.dropout, training=self.training)
        return self.classifier(h)


# --- DGL's GraphConv and GATConv over blocks, graphs and PyG edge indices ---------------------
__all__ += ["GraphConv", "GATConv"]


def _degrees(index: "torch.Tensor", n: int) -> "torch.Tensor":
    """How often each of ``n`` nodes occurs in ``index`` (int64 on its device): a scatter, not
    bincount, which reads its size back to the host."""
    return torch.zeros(n, dtype=torch.int64, device=index.device).index_add_(
        0, index, torch.ones_like(index))


def _refuse_zero_in_degree(name: str, in_deg: "torch.Tensor") -> None:
    """DGL's check: ValueError when a destination node has no in-edges (its output would be
    the bias alone). One host sync per call, as DGL's ``(in_degrees() == 0).any()``."""
    lonely = in_deg == 0
    if bool(lonely.any()):
        first = lonely.nonzero().flatten()[:5].tolist()
        raise ValueError(f"{name}: {int(lonely.sum())} destination node(s) without in-edges "
                         f"(0-in-degree; the first: {first}), whose output would be invalid: "
                         "add self-loops (dgl.add_self_loop(g)) or build the layer with "
                         "allow_zero_in_degree=True")


def _degree_norm(deg: "torch.Tensor", norm: str, like: "torch.Tensor") -> "torch.Tensor":
    """GraphConv's factor per node, shaped to scale ``like``'s rows: deg^-1/2 for ``both``,
    1/deg otherwise, a degree of 0 counted as 1."""
    d = deg.to(like).clamp(min=1)
    d = d.pow(-0.5) if norm == "both" else 1.0 / d
    return d.view(-1, *([1] * (like.dim() - 1)))


class GraphConv(nn.Module):
    """Graph convolution (Kipf & Welling, ICLR 2017), DGL's ``GraphConv``:

        h_v' = activation(c_v^right * sum_{u -> v} w_e c_u^left h_u W + b)

    with ``norm`` ``both`` (c = deg^-1/2: the source's out-degree on the left, the
    destination's in-degree on the right), ``right`` (1 / in-degree), ``left``
    (1 / out-degree) or ``none``; a degree of 0 counts as 1, edge weights do not enter the
    degrees. ``edge_weight`` ([E] or [E, ...]) scales each message as DGL's ``u_mul_e``. As DGL
    does, W multiplies before the aggregation when ``in_feats > out_feats`` (same result, fewer
    FLOPs). ``weight=False`` builds the layer without W: then ``forward`` takes an external
    ``weight`` [in, out] (or none: no projection). ``graph`` is anything ``block_edges`` takes
    (a Tessera or DGL block, whose destinations are its first source nodes, a DGL graph, a tuple
    ``(edge_index, (num_src, num_dst))``); ``feat`` the source features or a pair
    ``(feat_src, feat_dst)``. A destination without in-edges raises ValueError unless
    ``allow_zero_in_degree``. The parameters are DGL's (``weight`` [in, out], Xavier-uniform;
    ``bias`` [out], zeros), so a DGL state dict loads and one torch seed gives DGL's weights.
    """

    _NORMS = ("none", "both", "right", "left")

    def __init__(self, in_feats: int, out_feats: int, norm: str = "both", weight: bool = True,
                 bias: bool = True, activation=None, allow_zero_in_degree: bool = False):
        super().__init__()
        if not isinstance(norm, str) or norm not in self._NORMS:
            raise ValueError(f"GraphConv: norm must be 'none', 'both', 'right' or 'left', got "
                             f"{norm!r}")
        if not (_is_width(in_feats) and _is_width(out_feats)):
            raise ValueError(f"GraphConv: in_feats and out_feats must be integers >= 1, got "
                             f"{in_feats!r} and {out_feats!r}")
        self._in_feats, self._out_feats = int(in_feats), int(out_feats)
        self._norm = norm
        self._allow_zero_in_degree = bool(allow_zero_in_degree)
        if weight:
            self.weight = nn.Parameter(torch.empty(self._in_feats, self._out_feats))
        else:
            self.register_parameter("weight", None)
        if bias:
            self.bias = nn.Parameter(torch.empty(self._out_feats))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()
        self._activation = activation

    @property
    def in_feats(self) -> int:
        return self._in_feats

    @property
    def out_feats(self) -> int:
        return self._out_feats

    def reset_parameters(self) -> None:
        """DGL's: Xavier-uniform ``weight``, zero ``bias``."""
        if self.weight is not None:
            nn.init.xavier_uniform_(self.weight)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def set_allow_zero_in_degree(self, set_value: bool) -> None:
        self._allow_zero_in_degree = bool(set_value)

    def extra_repr(self) -> str:
        return f"in={self._in_feats}, out={self._out_feats}, normalization={self._norm}"

    def _projection(self, weight, feat_src: "torch.Tensor") -> Optional["torch.Tensor"]:
        """The W this call multiplies by (its own or the external one, or None), checked
        against the features' width."""
        if weight is not None and self.weight is not None:
            raise ValueError("GraphConv: an external weight was given to a layer with its own; "
                             "build it with weight=False")
        if weight is None:
            weight = self.weight
        if weight is None:
            return None
        if weight.dim() != 2 or weight.shape[0] != feat_src.shape[-1]:
            which = "its weight" if weight is self.weight else "the external weight"
            raise ValueError(f"GraphConv: features of width {feat_src.shape[-1]} for "
                             f"{which} of shape {tuple(weight.shape)} ([in_feats, out_feats])")
        return weight

    def forward(self, graph, feat, weight: Optional["torch.Tensor"] = None,
                edge_weight: Optional["torch.Tensor"] = None) -> "torch.Tensor":
        src, dst, num_src, num_dst = block_edges(graph)
        feat_src, feat_dst = _src_dst_feats("GraphConv", feat, num_src, num_dst)
        weight = self._projection(weight, feat_src)
        src = src.to(feat_src.device, torch.int64)
        dst = dst.to(feat_src.device, torch.int64)
        norm = self._norm
        in_deg = None
        if norm in ("right", "both") or not self._allow_zero_in_degree:
            in_deg = _degrees(dst, num_dst)
        if not self._allow_zero_in_degree:
            _refuse_zero_in_degree("GraphConv", in_deg)
        if norm in ("left", "both"):
            feat_src = feat_src * _degree_norm(_degrees(src, num_src), norm, feat_src)
        if weight is not None and self._in_feats > self._out_feats:
            feat_src = torch.matmul(feat_src, weight)
        rst = _sorted_sum(graph, feat_src, src, dst, num_dst) if edge_weight is None else None
        if rst is None:
            msg = _weigh_messages("GraphConv", feat_src.index_select(0, src), edge_weight)
            rst = msg.new_zeros((num_dst,) + tuple(msg.shape[1:])).index_add_(0, dst, msg)
        if weight is not None and self._in_feats <= self._out_feats:
            rst = torch.matmul(rst, weight)
        if norm in ("right", "both"):
            rst = rst * _degree_norm(in_deg, norm, feat_dst)
        if self.bias is not None:
            rst = rst + self.bias
        if self._activation is not None:
            rst = self._activation(rst)
        return rst


class GATConv(nn.Module):
    """Graph attention layer (Veličković et al., ICLR 2018), DGL's ``GATConv``: per head k,

        e_uv = leaky_relu(a_l . (W h_u) + a_r . (W h_v)),   alpha_uv = softmax_{u -> v} e_uv
        h_v' = activation(sum_{u -> v} alpha_uv w_e W h_u + residual(h_v) + b)

    the softmax taken over the in-edges of each destination (``_edge_softmax``: segment ops, no
    loop over nodes); output [num_dst, num_heads, out_feats]. ``in_feats`` is one width (one
    ``fc`` for sources and destinations) or a pair ``(in_src, in_dst)`` (``fc_src`` and
    ``fc_dst``, and ``feat`` must be a pair). ``feat_drop`` drops the input features (one mask
    for a block's features, whose first rows are the destinations), ``attn_drop`` the
    attention. ``residual`` adds ``h_dst`` itself when ``in_dst == num_heads * out_feats``, else
    a linear map of it (``res_fc``, which then holds the bias). ``edge_weight`` [E] scales each
    edge's attention (the returned attention includes it, as DGL's). ``get_attention=True``
    also returns the attention, [E, num_heads, 1]. ``graph``, ``feat`` and the zero-in-degree
    check as GraphConv's. The parameters are DGL's, created and initialized in DGL's order
    (``fc.weight``, ``attn_l``, ``attn_r`` [1, heads, out], ``res_fc.*``, ``bias`` [heads *
    out]; Xavier-normal with ReLU's gain, zero biases).
    """

    def __init__(self, in_feats, out_feats: int, num_heads: int, feat_drop: float = 0.0,
                 attn_drop: float = 0.0, negative_slope: float = 0.2, residual: bool = False,
                 activation=None, allow_zero_in_degree: bool = False, bias: bool = True):
        super().__init__()
        pair = isinstance(in_feats, (tuple, list))
        widths = tuple(in_feats) if pair else (in_feats, in_feats)
        if len(widths) != 2 or not all(_is_width(w) for w in widths) or not _is_width(out_feats):
            raise ValueError(f"GATConv: in_feats must be a width or a pair (in_src_feats, "
                             f"in_dst_feats) and out_feats a width, all integers >= 1; got "
                             f"{in_feats!r} and {out_feats!r}")
        if not _is_width(num_heads):
            raise ValueError(f"GATConv: num_heads must be an integer >= 1, got {num_heads!r}")
        heads, out = int(num_heads), int(out_feats)
        self._num_heads = heads
        self._in_src_feats, self._in_dst_feats = int(widths[0]), int(widths[1])
        self._out_feats = out
        self._allow_zero_in_degree = bool(allow_zero_in_degree)
        if pair:
            self.fc_src = nn.Linear(self._in_src_feats, out * heads, bias=False)
            self.fc_dst = nn.Linear(self._in_dst_feats, out * heads, bias=False)
        else:
            self.fc = nn.Linear(self._in_src_feats, out * heads, bias=False)
        self.attn_l = nn.Parameter(torch.empty(1, heads, out))
        self.attn_r = nn.Parameter(torch.empty(1, heads, out))
        self.feat_drop = nn.Dropout(feat_drop)
        self.attn_drop = nn.Dropout(attn_drop)
        self.leaky_relu = nn.LeakyReLU(negative_slope)
        self.has_linear_res = False
        self.has_explicit_bias = False
        if residual:
            if self._in_dst_feats != out * heads:
                self.res_fc = nn.Linear(self._in_dst_feats, out * heads, bias=bias)
                self.has_linear_res = True
            else:
                self.res_fc = nn.Identity()
        else:
            self.register_buffer("res_fc", None)
        if bias and not self.has_linear_res:
            self.bias = nn.Parameter(torch.empty(out * heads))
            self.has_explicit_bias = True
        else:
            self.register_buffer("bias", None)
        self.reset_parameters()
        self.activation = activation

    @property
    def out_feats(self) -> int:
        return self._out_feats

    @property
    def num_heads(self) -> int:
        return self._num_heads

    def reset_parameters(self) -> None:
        """DGL's: Xavier-normal (gain of ReLU) on the projections, ``attn_l``, ``attn_r`` and a
        linear residual's weight, in that order; zero biases."""
        gain = nn.init.calculate_gain("relu")
        for fc in ((self.fc,) if hasattr(self, "fc") else (self.fc_src, self.fc_dst)):
            nn.init.xavier_normal_(fc.weight, gain=gain)
        nn.init.xavier_normal_(self.attn_l, gain=gain)
        nn.init.xavier_normal_(self.attn_r, gain=gain)
        if self.has_explicit_bias:
            nn.init.zeros_(self.bias)
        if isinstance(self.res_fc, nn.Linear):
            nn.init.xavier_normal_(self.res_fc.weight, gain=gain)
            if self.res_fc.bias is not None:
                nn.init.zeros_(self.res_fc.bias)

    def set_allow_zero_in_degree(self, set_value: bool) -> None:
        self._allow_zero_in_degree = bool(set_value)

    def _check_widths(self, feat_src: "torch.Tensor", feat_dst: "torch.Tensor",
                      pair: bool) -> None:
        if not pair and not hasattr(self, "fc"):
            raise ValueError(f"GATConv: built for a pair of input widths ({self._in_src_feats}, "
                             f"{self._in_dst_feats}), it takes a pair (feat_src, feat_dst)")
        for what, t, want in (("source", feat_src, self._in_src_feats),
                              ("destination", feat_dst, self._in_dst_feats)):
            if t.dim() < 2 or t.shape[-1] != want:
                raise ValueError(f"GATConv: {what} features of shape {tuple(t.shape)}, "
                                 f"expected [N, ..., {want}]")

    def _project(self, feat, feat_src, feat_dst, num_dst: int):
        """(h_dst, ft_src, ft_dst): the dropped destination inputs (for the residual) and the
        projected features [N, ..., heads, out]."""
        heads, out = self._num_heads, self._out_feats
        drop = self.feat_drop if self.feat_drop.p > 0 else (lambda t: t)
        if isinstance(feat, (tuple, list)):
            h_src, h_dst = drop(feat_src), drop(feat_dst)
            fc_src, fc_dst = (self.fc, self.fc) if hasattr(self, "fc") else (self.fc_src,
                                                                              self.fc_dst)
            ft_src = fc_src(h_src).view(*h_src.shape[:-1], heads, out)
            return h_dst, ft_src, fc_dst(h_dst).view(*h_dst.shape[:-1], heads, out)
        h_src = drop(feat_src)  # one mask; the destinations are the first rows
        ft_src = self.fc(h_src).view(*h_src.shape[:-1], heads, out)
        return h_src[:num_dst], ft_src, ft_src[:num_dst]

    def forward(self, graph, feat, edge_weight: Optional["torch.Tensor"] = None,
                get_attention: bool = False):
        src, dst, num_src, num_dst = block_edges(graph)
        feat_src, feat_dst = _src_dst_feats("GATConv", feat, num_src, num_dst)
        self._check_widths(feat_src, feat_dst, isinstance(feat, (tuple, list)))
        if edge_weight is not None and (edge_weight.dim() not in (1, 2) or (
                edge_weight.dim() == 2 and edge_weight.shape[1] != 1)):
            raise ValueError(f"GATConv: edge_weight must be [E] (one weight an edge), got "
                             f"shape {tuple(edge_weight.shape)}")
        src = src.to(feat_src.device, torch.int64)
        dst = dst.to(feat_src.device, torch.int64)
        if not self._allow_zero_in_degree:
            _refuse_zero_in_degree("GATConv", _degrees(dst, num_dst))
        h_dst, ft_src, ft_dst = self._project(feat, feat_src, feat_dst, num_dst)
        el = (ft_src * self.attn_l).sum(dim=-1, keepdim=True)  # [N_src, ..., heads, 1]
        er = (ft_dst * self.attn_r).sum(dim=-1, keepdim=True)
        e = self.leaky_relu(el.index_select(0, src) + er.index_select(0, dst))
        a = _edge_softmax(e, dst, num_dst)
        if self.attn_drop.p > 0:
            a = self.attn_drop(a)
        if edge_weight is not None:
            a = _weigh_messages("GATConv", a, edge_weight.reshape(-1))
        msg = ft_src.index_select(0, src) * a
        rst = msg.new_zeros((num_dst,) + tuple(msg.shape[1:])).index_add_(0, dst, msg)
        if self.res_fc is not None:
            rst = rst + self.res_fc(h_dst).view(*h_dst.shape[:-1], -1, self._out_feats)
        if self.has_explicit_bias:
            rst = rst + self.bias.view(self._num_heads, self._out_feats)
        if self.activation is not None:
            rst = self.activation(rst)
        return (rst, a) if get_attention else rst
