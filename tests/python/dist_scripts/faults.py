# SPDX-License-Identifier: Apache-2.0
"""Failure modes of a 2-rank job.

    faults.py rank-dies          rank 1 raises after initialize; rank 0 waits in an all_reduce
    faults.py wrong-parts CFG..  every rank builds a DistGraph from each config and prints the
                                 error (a partition count that does not divide the world size)
                                 or "no error for CFG"
    faults.py init-shape CFG     rank 1's init_func of a persistent DistTensor returns one row
                                 for its rows; every rank prints the error or "no error", then
                                 the rows of a tensor created next (the ranks are still in
                                 step), then those of the failed one's name created again
    faults.py vanishes           rank 1 ends with os._exit(0) after a barrier, without
                                 exit_client; rank 0 returns from main and leaves through the
                                 exit_client() run at interpreter exit
    faults.py mismatch CFG       the ranks call different collectives at the same point, three
                                 times: rank 0 node_split, rank 1 all_reduce; rank 0 builds a
                                 loader, rank 1 all_gather_object; every rank re-creates a
                                 DistTensor whose handle only rank 0 dropped. Every rank prints
                                 "<step>: <error type>: <message>" (or "<step>: no error ...")
                                 and "<step>: in step <sum>" after an all_reduce of rank + 1
"""
import os
import sys
import time

sys.modules["torch"] = None
import numpy as np  # noqa: E402

import tessera  # noqa: E402
import tessera.distributed as dist  # noqa: E402


def main() -> int:
    mode = sys.argv[1]
    tessera.initialize()
    rank = tessera.get_rank()
    if mode == "rank-dies":
        dist.barrier()
        if rank == 1:
            time.sleep(0.5)  # rank 0 is waiting in the all_reduce by now
            raise RuntimeError("rank 1 fails on purpose")
        print("rank 0 enters all_reduce", flush=True)
        dist.all_reduce(np.ones(16))
        print("rank 0 returned from all_reduce", flush=True)  # must not happen
        return 0
    if mode == "vanishes":
        dist.barrier()
        if rank == 1:
            os._exit(0)  # e.g. a library ending the process: no exit_client
        print("rank 0 returns from main", flush=True)
        return 0
    if mode == "wrong-parts":
        for config in sys.argv[2:]:
            try:
                tessera.DistGraph("cora", part_config=config)
                print(f"no error for {config}", flush=True)
            except ValueError as e:
                print(f"ValueError: {e}", flush=True)
        tessera.exit_client()
        return 0
    if mode == "init-shape":
        g = tessera.DistGraph("cora", part_config=sys.argv[2])
        n, policy = g.num_nodes(), g.get_node_partition_policy()

        def one_row_on_rank1(shape, dtype):  # NumPy would broadcast the row into every row
            return np.ones(shape[1:] if rank == 1 else shape, np.float32)

        def rank_plus_one(shape, dtype):
            return np.full(shape, rank + 1.0, np.float32)

        try:
            tessera.DistTensor((n, 3), np.float32, "init-shape", one_row_on_rank1, policy,
                               persistent=True)
            print("no error", flush=True)
        except ValueError as e:
            print(f"ValueError: {e}", flush=True)
        t = tessera.DistTensor((n, 3), np.float32, "init-after", rank_plus_one, policy)
        print(f"rows {t[np.array([0, n - 1])][:, 0].tolist()}", flush=True)
        # The failed persistent tensor left no rows behind: its name creates a new one.
        t = tessera.DistTensor((n, 3), np.float32, "init-shape", rank_plus_one, policy,
                               persistent=True)
        print(f"again {t[np.array([0, n - 1])][:, 0].tolist()}", flush=True)
        tessera.exit_client()
        return 0
    if mode == "mismatch":
        g = tessera.DistGraph("cora", part_config=sys.argv[2])
        n = g.num_nodes()

        def step(name, body):
            try:
                print(f"{name}: no error, {body()}", flush=True)
            except Exception as e:  # noqa: BLE001 - printed for the test to check
                print(f"{name}: {type(e).__name__}: {e}", flush=True)
            total = dist.all_reduce(np.array([rank + 1.0]))  # the ranks are still in step
            print(f"{name}: in step {total[0]}", flush=True)

        def split_or_reduce():
            if rank == 0:
                return dist.node_split(g.ndata["train_mask"], g.get_partition_book())
            return dist.all_reduce(np.array([1.0, 2.0], dtype=np.float64))

        def loader_or_gather():
            if rank == 0:
                nids = np.arange(64)
                return tessera.NodeDataLoader(g, nids, tessera.NeighborSampler([5]),
                                              batch_size=16)
            return dist.all_gather_object({"rank": rank})

        def recreate():
            b = dist.DistTensor((n, 2), np.float32, "b")
            dist.barrier()
            if rank == 0:
                del b
            dist.barrier()
            return dist.DistTensor((n, 2), np.float32, "b")

        step("split", split_or_reduce)
        step("loader", loader_or_gather)
        step("recreate", recreate)
        tessera.exit_client()
        return 0
    raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    sys.exit(main())
