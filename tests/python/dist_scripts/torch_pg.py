# SPDX-License-Identifier: Apache-2.0
"""torch.distributed beside Tessera's runtime, in the order of DGL's scripts: initialize()
first, then torch.distributed.init_process_group("gloo") through env://.

    python -m tessera launch --nproc-per-node P -- python torch_pg.py   (or without a launcher)

Prints one line per check; the test reads them."""
import os

import numpy as np
import torch
import torch.distributed

import tessera
import tessera.distributed as dist

tessera.initialize()
torch.distributed.init_process_group(backend="gloo")
rank, world = tessera.get_rank(), tessera.get_world_size()
assert torch.distributed.get_rank() == rank, (torch.distributed.get_rank(), rank)
assert torch.distributed.get_world_size() == world
x = torch.full((3,), float(rank + 1))
torch.distributed.all_reduce(x)  # torch's collective (gloo)
y = dist.all_reduce(np.full(3, rank + 1.0))  # Tessera's, still working beside it
print(f"torch all_reduce {x.tolist()} tessera all_reduce {y.tolist()} "
      f"MASTER_PORT {os.environ['MASTER_PORT']} "
      f"rendezvous {os.environ.get('TESSERA_RENDEZVOUS_PORT', '-')}", flush=True)
torch.distributed.destroy_process_group()
tessera.exit_client()
