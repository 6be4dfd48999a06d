# SPDX-License-Identifier: Apache-2.0
"""torch.distributed beside Tessera's runtime, in the order of DGL's scripts: initialize()
first, then torch.distributed.init_process_group("gloo") through env://.

    python -m tessera launch --nproc-per-node P -- python torch_pg.py   (or without a launcher)

Prints one line per check; the test reads them. Also whether torch's port was held before
init_process_group (a bind without SO_REUSEADDR is refused: rank 0's runtime reserved it) and
which of torch's store backends served (USE_LIBUV=0: the classic one)."""
import errno
import os
import socket

import numpy as np
import torch
import torch.distributed

import tessera
import tessera.distributed as dist

tessera.initialize()
with socket.socket() as s:
    try:
        s.bind(("127.0.0.1", int(os.environ["MASTER_PORT"])))
        held = "free"
    except OSError as e:
        held = "held" if e.errno == errno.EADDRINUSE else errno.errorcode[e.errno]
torch.distributed.init_process_group(backend="gloo")
store = torch.distributed.distributed_c10d._get_default_store()
while hasattr(store, "underlying_store"):
    store = store.underlying_store
backend = "libuv" if getattr(store, "libuvBackend", False) else "classic"
rank, world = tessera.get_rank(), tessera.get_world_size()
assert torch.distributed.get_rank() == rank, (torch.distributed.get_rank(), rank)
assert torch.distributed.get_world_size() == world
x = torch.full((3,), float(rank + 1))
torch.distributed.all_reduce(x)  # torch's collective (gloo)
y = dist.all_reduce(np.full(3, rank + 1.0))  # Tessera's, still working beside it
print(f"torch all_reduce {x.tolist()} tessera all_reduce {y.tolist()} "
      f"MASTER_PORT {os.environ['MASTER_PORT']} "
      f"rendezvous {os.environ.get('TESSERA_RENDEZVOUS_PORT', '-')} "
      f"torch port {held} before init, {backend} store", flush=True)
torch.distributed.destroy_process_group()
tessera.exit_client()
