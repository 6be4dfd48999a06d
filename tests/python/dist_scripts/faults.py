# SPDX-License-Identifier: Apache-2.0
"""Failure modes of a 2-rank job.

    faults.py rank-dies          rank 1 raises after initialize; rank 0 waits in an all_reduce
    faults.py wrong-parts CFG..  every rank builds a DistGraph from each config and prints the
                                 error (a partition count that does not divide the world size)
                                 or "no error for CFG"
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
    raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    sys.exit(main())
