"""Process-group state: rank and world size (DGL's ``dgl.distributed.initialize``).

Today every run is standalone: a world of one process that serves every partition of the
graph. The distributed runtime (issue 4) will read RANK / WORLD_SIZE (or the variables
``tessera launch``, srun, mpirun and torchrun set), join the rendezvous and start the
transport here; callers do not change.
"""
from __future__ import annotations

import os

_state = {"initialized": False, "rank": 0, "world_size": 1, "mode": "standalone"}


def _env_world_size() -> int:
    for var in ("WORLD_SIZE", "TESSERA_WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS"):
        v = os.environ.get(var)
        if v:
            try:
                return int(v)
            except ValueError:
                raise ValueError(f"{var}={v!r} is not an integer world size") from None
    return 1


def initialize(ip_config: str | None = None, num_servers: int = 1, num_workers: int = 0,
               **kwargs) -> None:
    """Initializes Tessera's runtime (DGL: ``dgl.distributed.initialize``).

    Standalone mode (a world of one process) is all this build supports. When the
    environment describes more than one process (WORLD_SIZE > 1) this raises
    RuntimeError instead of silently training on a single rank's share.
    ``ip_config``, ``num_servers`` and ``num_workers`` are accepted for DGL compatibility.
    """
    world = _env_world_size()
    if world > 1:
        raise RuntimeError(
            f"tessera.initialize(): the environment asks for {world} processes (WORLD_SIZE), "
            "but this build has only the standalone runtime; the distributed runtime "
            "(DistGraph over many processes) is not built yet")
    _state.update(initialized=True, rank=0, world_size=1, mode="standalone")


def is_initialized() -> bool:
    return bool(_state["initialized"])


def get_rank() -> int:
    """This process's rank (0 in standalone mode)."""
    return int(_state["rank"])


def get_world_size() -> int:
    """Number of trainer processes (1 in standalone mode)."""
    return int(_state["world_size"])


def exit_client() -> None:
    """DGL compatibility: tears the runtime down (nothing to do in standalone mode)."""
    _state.update(initialized=False)
