# SPDX-License-Identifier: Apache-2.0
"""Failure modes of a 2-rank job.

    faults.py rank-dies          rank 1 raises after initialize; rank 0 waits in an all_reduce
    faults.py wrong-parts CFG..  every rank builds a DistGraph from each config and prints the
                                 error (a partition count that does not divide the world size)
                                 or "no error for CFG"
    faults.py init-shape CFG     rank 1's DistTensor init_func returns one row for its rows;
                                 every rank prints the error or "no error", then the rows of a
                                 tensor created next (the ranks are still in step)
"""
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

        try:
            tessera.DistTensor((n, 3), np.float32, "init-shape", one_row_on_rank1, policy)
            print("no error", flush=True)
        except ValueError as e:
            print(f"ValueError: {e}", flush=True)
        t = tessera.DistTensor((n, 3), np.float32, "init-after",
                               lambda shape, dtype: np.full(shape, rank + 1.0, np.float32), policy)
        print(f"rows {t[np.array([0, n - 1])][:, 0].tolist()}", flush=True)
        tessera.exit_client()
        return 0
    raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    sys.exit(main())
