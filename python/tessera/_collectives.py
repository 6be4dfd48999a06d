# SPDX-License-Identifier: Apache-2.0
"""Collectives of a data-parallel training loop over Tessera's transport (no torch.distributed
process group needed), and the choice between them and torch's DDP. Public as
``tessera.distributed.all_reduce`` etc.; here so that the loaders can use them without importing
the public namespace (which imports the loaders).
"""
from __future__ import annotations

import numpy as np

from ._runtime import get_rank, job_world_size, runtime
from ._tensor import HAVE_TORCH, torch


def all_reduce(x, op: str = "sum", *, _what: str = "all_reduce"):
    """Reduces ``x`` (a contiguous NumPy array or torch tensor) in place over all ranks and
    returns it. Every rank gets the same bits (the reduction runs in rank order). A tensor on a
    GPU is copied to the host, reduced there by the host transport and copied back in place.
    Collective; a no-op in a world of one. Ranks that call different collectives here (another
    dtype, op or size, or another call altogether) all raise one ValueError naming each rank's
    call (``_what`` names this one: Tessera's own callers pass theirs)."""
    # The input is checked in a world of one too: a script run standalone first meets the
    # errors it would meet under the launcher (the transport's own checks, repeated here).
    world = job_world_size()
    if op not in ("sum", "max", "min"):
        raise ValueError(f"all_reduce: op must be 'sum', 'max' or 'min', got '{op}'")
    if HAVE_TORCH and isinstance(x, torch.Tensor):
        if not x.is_contiguous():
            raise TypeError("all_reduce: expected a contiguous tensor")
        _check_reducible(str(x.dtype).replace("torch.", ""))
        if x.device.type != "cpu":
            if world == 1:
                return x
            host = x.detach().cpu()
            runtime().all_reduce(host.numpy(), op, _what)
            with torch.no_grad():
                x.copy_(host)
            return x
        # detach(): a tensor that requires grad (a loss all-reduced for logging) is reduced in
        # place as on a GPU above and as torch.distributed.all_reduce does; its .numpy()
        # refuses.
        arr = x.detach().numpy()
    else:
        arr = x
        if not isinstance(arr, np.ndarray) or not arr.flags.c_contiguous:
            raise TypeError("all_reduce: expected a C-contiguous CPU array or tensor, got "
                            f"{_describe(arr)}")
        _check_reducible(arr.dtype.name)
    if not arr.flags.writeable:
        raise TypeError("all_reduce: the array is read-only (it is reduced in place)")
    if world == 1:
        return x
    runtime().all_reduce(arr, op, _what)
    return x


_REDUCIBLE = ("float32", "float64", "int32", "int64", "uint64")


def _check_reducible(dtype: str) -> None:
    if dtype not in _REDUCIBLE:
        raise TypeError(f"all_reduce: dtype {dtype} is not reducible ({', '.join(_REDUCIBLE)})")


def _describe(x) -> str:
    if isinstance(x, np.ndarray):
        return f"a non-contiguous array of shape {x.shape}"
    return f"{type(x).__name__}"


def all_gather_object(obj, *, _what: str = "all_gather_object") -> list:
    """Every rank's ``obj`` (picklable), in rank order. Collective (ranks that call another
    collective meanwhile all raise one ValueError naming each rank's call; ``_what`` names this
    one)."""
    import pickle

    if job_world_size() == 1:
        return [obj]
    return [pickle.loads(b) for b in runtime().all_gather_bytes(pickle.dumps(obj), _what)]


def _flat(tensors):
    return torch.cat([t.reshape(-1) for t in tensors]) if tensors else torch.zeros(0)


def all_reduce_gradients(module, average: bool = True) -> None:
    """Sums (or averages) the gradients of ``module``'s parameters over all ranks in one
    all-reduce: synchronous data parallelism, as DDP's gradient all-reduce. A parameter without
    a gradient on this rank contributes zeros; one without a gradient on every rank keeps
    ``grad`` None (as under DDP, and in a world of one: optimizers skip it). Collective; a
    no-op in a world of one."""
    world = job_world_size()
    if world == 1:
        return
    params = [p for p in module.parameters() if p.requires_grad]
    grads = [p.grad.detach() if p.grad is not None else torch.zeros_like(p) for p in params]
    wide = any(g.dtype == torch.float64 for g in grads)  # reduce in the widest dtype present
    # One more element per parameter, 1 where this rank has its gradient: summed, it counts the
    # ranks that have one.
    has_grad = torch.tensor([p.grad is not None for p in params], dtype=torch.float32)
    # The transport reduces host memory (UCX / the CPU backend; no device transport is used
    # here), so gradients on a GPU are copied to the host in one flat buffer and back into each
    # parameter's .grad on its device below. On the CPU .cpu() is the tensor itself.
    dtype = torch.float64 if wide else torch.float32
    flat = torch.cat([_flat(grads).to(dtype).cpu(), has_grad.to(dtype)]).contiguous()
    runtime().all_reduce(flat.numpy(), "sum", "all_reduce_gradients")
    ranks_with_grad = flat[flat.numel() - len(params):].tolist()
    if average:
        flat /= world
    offset = 0
    for p, ranks in zip(params, ranks_with_grad):
        n = p.numel()
        if ranks == 0:  # no rank has a gradient of p: it stays None
            offset += n
            continue
        g = flat[offset:offset + n].view_as(p).to(device=p.device, dtype=p.dtype)
        if p.grad is None:
            p.grad = g.clone()
        else:
            p.grad.copy_(g)
        offset += n


def broadcast_parameters(module, src: int = 0) -> None:
    """Makes every rank's parameters and buffers equal to rank ``src``'s (bitwise). Collective;
    a no-op in a world of one. ``src`` outside [0, world size) is a ValueError."""
    world = job_world_size()
    if isinstance(src, bool) or not isinstance(src, (int, np.integer)) or not 0 <= src < world:
        # No rank would contribute its bytes: every rank's tensors would become zeros.
        raise ValueError(f"broadcast_parameters: src must be a rank in [0, {world}), got {src!r}")
    if world == 1:
        return
    tensors = list(module.parameters()) + list(module.buffers())
    with torch.no_grad():
        # The bytes of every tensor (any dtype), summed as int64 with zeros from the other
        # ranks: an integer x + 0 + ... + 0 is x for every bit pattern, whereas a float sum
        # turns -0.0 into +0.0 and float32 only would skip float64, int and bool tensors.
        raw = [t.detach().cpu().contiguous().reshape(-1).view(torch.uint8) for t in tensors]
        nbytes = sum(r.numel() for r in raw)
        buf = torch.zeros(-(-nbytes // 8) * 8, dtype=torch.uint8)
        if get_rank() == src and nbytes:
            buf[:nbytes].copy_(torch.cat(raw))
        runtime().all_reduce(buf.view(torch.int64).numpy(), "sum", "broadcast_parameters")
        offset = 0
        for t, r in zip(tensors, raw):
            n = r.numel()
            t.copy_(buf[offset:offset + n].clone().view(t.dtype).view(t.shape))
            offset += n


def gradient_sync_mode(device, choice: str = "auto") -> str:
    """How a data-parallel trainer on ``device`` all-reduces its gradients: ``"ddp"`` (torch's
    DistributedDataParallel: buckets all-reduced while the backward pass runs, over NCCL on
    GPUs and gloo on CPUs) or ``"host"`` (``all_reduce_gradients`` after the backward pass,
    over Tessera's host transport: deterministic, the same bits on every rank). ``auto`` takes
    ddp when every rank of the node has a GPU of its own (NCCL refuses two ranks on one GPU)
    and host otherwise (CPU ranks, ranks sharing a GPU). ``"none"`` in a world of one."""
    if job_world_size() == 1:
        return "none"
    if choice not in ("auto", "ddp", "host"):
        raise ValueError(f"gradient sync must be auto, ddp or host, got {choice!r}")
    if choice != "auto":
        return choice
    dev = torch.device(device)
    if dev.type != "cuda":
        return "host"
    import os

    local = int(os.environ.get("LOCAL_WORLD_SIZE", job_world_size()))
    if not torch.distributed.is_nccl_available() or local > torch.cuda.device_count():
        return "host"
    return "ddp"


class CommTimer:
    """Times the all-reduces of a DistributedDataParallel model (a communication hook that
    averages each bucket, as DDP's default, and records CUDA events around it; on the CPU,
    wall time). ``seconds()`` sums what was recorded since the last call (synchronizes)."""

    def __init__(self, model, world: int):
        self.world = world
        self.spans = []
        self.cuda = next(model.parameters()).is_cuda
        model.register_comm_hook(None, self._hook)

    def _hook(self, state, bucket):
        import time

        import torch.distributed as tdist

        if self.cuda:
            start = torch.cuda.Event(enable_timing=True)
            start.record()
        else:
            start = time.perf_counter()
        buf = bucket.buffer().div_(self.world)
        fut = tdist.all_reduce(buf, async_op=True).get_future()

        def done(f):
            if self.cuda:
                end = torch.cuda.Event(enable_timing=True)
                end.record()
                self.spans.append((start, end))
            else:
                self.spans.append((start, time.perf_counter()))
            return f.value()[0]

        return fut.then(done)

    def seconds(self) -> float:
        total = 0.0
        if self.cuda and self.spans:
            self.spans[-1][1].synchronize()
        for a, b in self.spans:
            total += a.elapsed_time(b) / 1000.0 if self.cuda else b - a
        self.spans.clear()
        return total


def data_parallel(model, device, mode: str):
    """``model`` wrapped for ``mode`` (gradient_sync_mode): DistributedDataParallel over a
    torch.distributed process group of this job (NCCL on a GPU, gloo on the CPU; joined from
    the environment ``initialize()`` exported), else ``model`` itself."""
    if mode != "ddp":
        return model
    import torch.distributed as tdist

    dev = torch.device(device)
    if not tdist.is_initialized():
        if dev.type == "cuda":
            tdist.init_process_group("nccl", device_id=dev)
        else:
            tdist.init_process_group("gloo")
    ids = [dev.index] if dev.type == "cuda" else None
    return torch.nn.parallel.DistributedDataParallel(model, device_ids=ids,
                                                     gradient_as_bucket_view=True)
