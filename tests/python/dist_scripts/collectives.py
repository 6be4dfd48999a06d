# SPDX-License-Identifier: Apache-2.0
"""tessera.distributed collectives on every rank: all_reduce (sum/max/min, NumPy and torch),
all_gather_object, broadcast_parameters and all_reduce_gradients.

    python -m tessera launch --nproc-per-node P -- python collectives.py OUT

Writes <OUT>/rank<r>.pkl with what this rank saw; the test compares the ranks."""
import hashlib
import os
import pickle
import sys

import numpy as np
import torch

import tessera
import tessera.distributed as dist


def digest(module: torch.nn.Module) -> str:
    h = hashlib.sha256()
    for name, t in sorted(module.state_dict().items()):
        h.update(name.encode())
        h.update(t.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def state(module: torch.nn.Module) -> dict:
    return {k: v.detach().clone().numpy() for k, v in module.state_dict().items()}


def main() -> int:
    out = sys.argv[1]
    tessera.initialize()
    rank, world = tessera.get_rank(), tessera.get_world_size()
    seen = {"rank": rank, "world": world}

    # all_reduce: rank-dependent inputs, sizes not divisible by the world size, 1 and 0.
    x = np.arange(1001, dtype=np.float64) * (rank + 1) + 0.1 * rank
    seen["sum_f64"] = dist.all_reduce(x).copy()
    seen["max_i64"] = dist.all_reduce(np.arange(10, dtype=np.int64) * (rank - 1), "max").copy()
    seen["min_i32"] = dist.all_reduce(np.full(3, 10 - rank, dtype=np.int32), "min").copy()
    seen["one_f32"] = dist.all_reduce(np.array([rank + 1.0], dtype=np.float32)).copy()
    seen["empty"] = dist.all_reduce(np.zeros(0, dtype=np.float32)).copy()
    t = torch.arange(7, dtype=torch.float32) + rank
    r = dist.all_reduce(t)
    seen["torch_in_place"] = r is t
    seen["sum_torch"] = t.numpy().copy()
    # Tensors that require grad, a leaf and a loss, on the CPU as on a GPU.
    leaf = torch.full((2,), rank + 1.0, requires_grad=True)
    loss = (leaf * 2).sum()
    try:
        dist.all_reduce(leaf)
        dist.all_reduce(loss)
        seen["requires_grad"] = (leaf.detach().numpy().copy(), loss.item())
    except Exception as e:  # noqa: BLE001 - recorded for the test
        seen["requires_grad"] = f"{type(e).__name__}: {e}"
    try:
        dist.all_reduce(np.zeros((4, 4))[:, 0])
        seen["non_contiguous"] = "accepted"
    except TypeError as e:
        seen["non_contiguous"] = f"TypeError: {e}"

    # all_gather_object: payloads of different sizes per rank.
    seen["gathered"] = dist.all_gather_object({"rank": rank, "payload": "x" * (1000 * rank)})

    # broadcast_parameters: differently initialized modules (buffers too) become rank 0's.
    torch.manual_seed(100 + rank)
    m = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.BatchNorm1d(4),
                            torch.nn.Linear(4, 3))
    for _ in range(rank + 1):  # running statistics and num_batches_tracked differ per rank
        m(torch.randn(8, 5))
    if rank == 0:  # bitwise means -0.0 stays -0.0 (0.0 + -0.0 is +0.0 in IEEE sums)
        with torch.no_grad():
            m[0].bias[0] = -0.0
    seen["before"], seen["state_before"] = digest(m), state(m)
    dist.broadcast_parameters(m)
    seen["after"], seen["state_after"] = digest(m), state(m)

    # A float64 module from the last rank: "parameters and buffers equal to rank src's"
    # holds for any dtype and any src.
    torch.manual_seed(200 + rank)
    m64 = torch.nn.Linear(3, 2).double()
    seen["before64"] = digest(m64)
    dist.broadcast_parameters(m64, src=world - 1)
    seen["after64"] = digest(m64)

    # A src that is no rank: refused on every rank, the module untouched (it became all zeros).
    seen["bad_src"] = []
    for src in (world, -1):
        try:
            dist.broadcast_parameters(m64, src=src)
            seen["bad_src"].append("accepted")
        except ValueError as e:
            seen["bad_src"].append(f"ValueError: {e}")
    seen["after_bad_src"] = digest(m64)

    # all_reduce_gradients: rank r's gradients are r + 1; one parameter has no gradient on
    # rank 0 (it contributes zeros there).
    for i, p in enumerate(m.parameters()):
        p.grad = None if (rank == 0 and i == 0) else torch.full_like(p, rank + 1.0)
    dist.all_reduce_gradients(m)
    seen["grads"] = [p.grad.numpy().copy() for p in m.parameters()]
    for p in m.parameters():
        p.grad = torch.full_like(p, float(rank + 1))
    dist.all_reduce_gradients(m, average=False)
    seen["grads_sum"] = [p.grad.numpy().copy() for p in m.parameters()]

    # A parameter without a gradient on every rank keeps None (DDP's unused parameter; an
    # optimizer with momentum or weight decay would move it on a zero gradient).
    for i, p in enumerate(m.parameters()):
        p.grad = None if i == 1 else torch.full_like(p, float(rank + 1))
    dist.all_reduce_gradients(m)
    seen["grads_unused"] = [None if p.grad is None else p.grad.numpy().copy()
                            for p in m.parameters()]

    os.makedirs(out, exist_ok=True)
    tmp = os.path.join(out, f".rank{rank}.pkl")
    with open(tmp, "wb") as f:
        pickle.dump(seen, f)
    os.replace(tmp, os.path.join(out, f"rank{rank}.pkl"))
    tessera.exit_client()
    return 0


if __name__ == "__main__":
    sys.exit(main())
