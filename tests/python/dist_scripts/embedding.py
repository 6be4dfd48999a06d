# SPDX-License-Identifier: Apache-2.0
"""DistEmbedding + SparseAdagrad over the ranks, then a save / overwrite / load round trip of
the rows, and one of the optimizer's state in a folder per rank; saves into a folder one rank
cannot create fail on every rank.

    python -m tessera launch --nproc-per-node P -- python embedding.py CONFIG OUT

Every rank reads a fixed set of rows (its own and other ranks', some twice, some read by every
rank) and fits them to fixed targets. Writes <OUT>/rank<r>.npz: the initial and final rows,
the ids each rank read, the global loss per step, the rows around the save / load and the
optimizer's state rows around its save / load, and the errors of the refused saves."""
import os
import sys

import numpy as np
import torch

import tessera

DIM, STEPS, LR = 8, 12, 0.05


def target(ids: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.sin(ids[:, None] * 0.37 + np.arange(DIM)[None, :]).astype(
        np.float32))


def rows_of(rank: int, n: int) -> np.ndarray:
    """The rows rank `rank` reads every step (the test recomputes them)."""
    rng = np.random.default_rng(1000 + rank)
    shared = np.arange(0, n, 97)  # every rank reads these: the owners sum the gradients
    own = rng.choice(n, 150, replace=False)
    return np.concatenate([shared, own, own[:20]]).astype(np.int64)  # repeats too


def main() -> int:
    config, out = sys.argv[1], sys.argv[2]
    tessera.initialize()
    rank = tessera.get_rank()
    g = tessera.DistGraph("cora", part_config=config)
    n = g.num_nodes()

    def init(shape, dtype):
        gen = torch.Generator().manual_seed(7 + rank)
        return torch.rand(shape, generator=gen, dtype=dtype) * 2 - 1

    emb = tessera.DistEmbedding(n, DIM, "node-emb", init,
                                part_policy=g.get_node_partition_policy())
    opt = tessera.optim.SparseAdagrad([emb], lr=LR)
    all_ids = np.arange(n, dtype=np.int64)
    with torch.no_grad():
        initial = emb(all_ids).numpy().copy()
    g.barrier()
    ids = rows_of(rank, n)
    losses = []
    for _ in range(STEPS):
        x = emb(ids)
        loss = ((x - target(ids)) ** 2).sum()
        loss.backward()
        opt.step()
        losses.append(float(tessera.distributed.all_reduce(
            np.array([loss.item()], dtype=np.float64))[0]))
    with torch.no_grad():
        final = emb(all_ids).numpy().copy()

    # Save, read every row, overwrite every row this rank owns, load: bitwise the saved rows.
    save_dir = os.path.join(out, "emb")
    emb.save(save_dir)
    saved = emb.weight.numpy().copy()
    g.barrier()  # nobody overwrites a row before every rank has read it
    lo, hi = emb.weight.local_range()
    emb.weight[np.arange(lo, hi)] = np.full((hi - lo, DIM), -5.0, dtype=np.float32)
    g.barrier()
    overwritten = emb.weight.numpy().copy()
    g.barrier()  # every rank read the overwritten rows before the load replaces them
    emb.load(save_dir)
    loaded = emb.weight.numpy().copy()

    # The optimizer's state through a folder of each rank's own (node-local disks): saved,
    # scrambled, loaded back.
    opt_dir = os.path.join(out, f"opt-rank{rank}")
    opt.save(opt_dir)
    state = opt._opt[0].state_tensors[0]
    opt_saved = np.array(state.local_view(), copy=True)
    state.local_view()[...] = -1.0
    opt.load(opt_dir)
    opt_loaded = np.array(state.local_view(), copy=True)

    # A folder that one rank cannot create (a file in its way): both saves fail on every rank.
    blocked = os.path.join(out, f"blocked-rank{rank}")
    if rank == 1:
        open(blocked, "w").close()
    refusals = []
    for save in (emb.save, opt.save):
        try:
            save(blocked)
            refusals.append("saved")
        except OSError as e:
            refusals.append(f"{type(e).__name__}: {e}")

    os.makedirs(out, exist_ok=True)
    tmp = os.path.join(out, f".rank{rank}.npz")
    np.savez(tmp, initial=initial, final=final, ids=ids, losses=np.array(losses),
             saved=saved, overwritten=overwritten, loaded=loaded,
             local_range=np.array([lo, hi]), opt_saved=opt_saved, opt_loaded=opt_loaded,
             refusals=np.array(refusals))
    os.replace(tmp, os.path.join(out, f"rank{rank}.npz"))
    tessera.exit_client()
    return 0


if __name__ == "__main__":
    sys.exit(main())
