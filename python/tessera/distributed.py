"""DGL's ``dgl.distributed`` names, so ``import tessera.distributed as dist`` ports a script,
plus the collectives a data-parallel training loop needs (over Tessera's transport, so no
torch.distributed process group is required).
"""
from ._runtime import (barrier, exit_client, get_rank, get_world_size, initialize,  # noqa: F401
                       is_distributed, runtime)
from .dist import (DistGraph, DistTensor, EdgePartitionPolicy, GraphPartitionBook,  # noqa: F401
                   NodePartitionPolicy, edge_split, node_split)
from .partition import load_partition_config, partition_graph  # noqa: F401
from .dataloading import DistEdgeDataLoader, DistNodeDataLoader  # noqa: F401
from .embedding import DistEmbedding  # noqa: F401
from . import optim  # noqa: F401

import numpy as np

from ._tensor import HAVE_TORCH, torch


def all_reduce(x, op: str = "sum"):
    """Reduces ``x`` (a contiguous CPU NumPy array or torch tensor) in place over all ranks
    and returns it. Every rank gets the same bits (the reduction runs in rank order).
    Collective; a no-op in a world of one."""
    if get_world_size() == 1:
        return x
    arr = x.numpy() if HAVE_TORCH and isinstance(x, torch.Tensor) else x
    if not isinstance(arr, np.ndarray) or not arr.flags.c_contiguous:
        raise TypeError("all_reduce: expected a C-contiguous CPU array or tensor")
    runtime().all_reduce(arr, op)
    return x


def all_gather_object(obj) -> list:
    """Every rank's ``obj`` (picklable), in rank order. Collective."""
    import pickle

    if get_world_size() == 1:
        return [obj]
    return [pickle.loads(b) for b in runtime().all_gather_bytes(pickle.dumps(obj))]


def _flat(tensors):
    return torch.cat([t.reshape(-1) for t in tensors]) if tensors else torch.zeros(0)


def all_reduce_gradients(module, average: bool = True) -> None:
    """Sums (or averages) the gradients of ``module``'s parameters over all ranks in one
    all-reduce: synchronous data parallelism, as DDP's gradient all-reduce. A parameter without
    a gradient on this rank contributes zeros. Collective; a no-op in a world of one."""
    world = get_world_size()
    if world == 1:
        return
    params = [p for p in module.parameters() if p.requires_grad]
    grads = [p.grad.detach() if p.grad is not None else torch.zeros_like(p) for p in params]
    flat = _flat(grads).to(torch.float32).contiguous()
    runtime().all_reduce(flat.numpy(), "sum")
    if average:
        flat /= world
    offset = 0
    for p in params:
        n = p.numel()
        g = flat[offset:offset + n].view_as(p).to(p.dtype)
        if p.grad is None:
            p.grad = g.clone()
        else:
            p.grad.copy_(g)
        offset += n


def broadcast_parameters(module, src: int = 0) -> None:
    """Makes every rank's parameters and buffers equal to rank ``src``'s (bitwise). Collective;
    a no-op in a world of one."""
    if get_world_size() == 1:
        return
    tensors = [t for t in list(module.parameters()) + list(module.buffers())
               if t.dtype == torch.float32]
    with torch.no_grad():
        flat = _flat([t.detach() for t in tensors]).contiguous()
        if get_rank() != src:
            flat.zero_()
        runtime().all_reduce(flat.numpy(), "sum")  # x + 0 + ... + 0 == x: bitwise rank src's
        offset = 0
        for t in tensors:
            n = t.numel()
            t.copy_(flat[offset:offset + n].view_as(t))
            offset += n
