"""Small helpers of training scripts: rank-0 logging, a progress bar, atomic writes."""
from __future__ import annotations

import json
import os
import sys
import time

from . import _runtime

__all__ = ["log", "Progress", "atomic_write_json", "per_rank_batch"]


def log(*a) -> None:
    """Prints on rank 0 only (in data parallelism every rank computes the same figures)."""
    if _runtime.get_rank() == 0:
        print(*a, flush=True)


class Progress:
    """A progress bar over ``total`` steps: tqdm when installed, else one rewritten status line
    on stderr (only the final state when stderr is not a terminal)."""

    def __init__(self, total: int, desc: str, enabled: bool = True):
        self.total, self.desc, self.n, self.enabled = total, desc, 0, enabled
        self._bar = None
        if enabled:
            try:
                from tqdm import tqdm

                self._bar = tqdm(total=total, desc=desc, leave=False, file=sys.stderr)
            except ImportError:
                pass
        self.t0 = time.time()

    def update(self, loss: float) -> None:
        self.n += 1
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(1)
            self._bar.set_postfix(loss=f"{loss:.4f}")
        elif sys.stderr.isatty() or self.n == self.total:
            sys.stderr.write(f"\r{self.desc}: {self.n}/{self.total} batches, loss {loss:.4f}, "
                             f"{time.time() - self.t0:.1f}s")
            if self.n == self.total:
                sys.stderr.write("\n")
            sys.stderr.flush()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def atomic_write_json(obj, path: str) -> None:
    """Writes ``obj`` as JSON to ``path`` through a temporary file and a rename: a reader sees
    the old file or the whole new one."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def per_rank_batch(global_batch: int) -> int:
    """Items per rank and step when ``global_batch`` is the batch of one step over all ranks:
    ceil(global_batch / P), so a step trains on as many items at any number of ranks P."""
    return max(1, -(-int(global_batch) // _runtime.get_world_size()))
