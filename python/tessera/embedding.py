# SPDX-License-Identifier: Apache-2.0
"""Learnable node embeddings stored in a DistTensor (DGL's ``dgl.distributed.DistEmbedding``)
and their sparse optimizers (DGL's ``dgl.distributed.optim.SparseAdagrad`` / ``SparseAdam``).

A forward pass reads the rows of the batch (remote rows from their owners) into a torch tensor
that records its gradient; ``optimizer.step()`` pushes each rank's gradient rows to the rows'
owners in one all-to-all, and the owners sum them (in rank order) and apply the update to
their rows and optimizer state. ``step()`` is collective: every rank calls it once per training
step, with or without rows of its own.
"""
from __future__ import annotations

import operator
import os
import warnings
from typing import Callable, Optional, Sequence

import numpy as np

from . import _C, _runtime
from ._tensor import device_of, require_torch, to_numpy_ids
from ._collectives import all_gather_object
from ._dist import DistTensor, _fill_local, PartitionPolicy

__all__ = ["DistEmbedding", "SparseAdagrad", "SparseAdam"]

_anonymous = 0


def _count(value, what: str) -> int:
    """``value`` as an int >= 0 (Python, NumPy or 0-d torch integers): TypeError naming
    ``what`` for anything else (a float would be truncated), ValueError when negative."""
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an integer, got {value!r}")
    try:
        n = operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an integer, got {value!r}") from None
    if n < 0:
        raise ValueError(f"{what} must be >= 0, got {n}")
    return n


def _number(value, what: str) -> float:
    """``value`` as a float: TypeError naming ``what`` when it is not a number (the range is
    checked where the optimizer is made)."""
    if isinstance(value, (str, bytes, bool)) or value is None:
        raise TypeError(f"{what} must be a number, got {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{what} must be a number, got {value!r}") from None


class DistEmbedding:
    """``num_embeddings`` x ``embedding_dim`` float32 rows spread over the ranks.

    ``part_policy``: usually ``g.get_node_partition_policy()`` (row v lives with node v's
    owner); default: even contiguous ranges over the ranks. ``init_func(shape, dtype)`` fills
    this rank's rows (an array of exactly ``shape``; default zeros, DGL's default too; pass
    e.g. a uniform init). Creation is collective and idempotent by ``name``: a second
    embedding of an existing name shares its rows as they are, and its optimizer state, for as
    long as the runtime lives, also after ``del`` (``init_func`` is not run again: a
    UserWarning says so).
    ``emb(ids)`` returns the rows as a torch tensor that records gradients in training mode
    (``torch.is_grad_enabled()``).
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, name: Optional[str] = None,
                 init_func: Optional[Callable] = None,
                 part_policy: Optional[PartitionPolicy] = None):
        torch = require_torch("DistEmbedding")
        global _anonymous
        if name is not None and not isinstance(name, str):
            raise TypeError(f"DistEmbedding: name must be a str or None, got {name!r}")
        what = "DistEmbedding" if name is None else f"DistEmbedding {name!r}"
        self.num_embeddings = _count(num_embeddings, f"{what}: num_embeddings")
        self.embedding_dim = _count(embedding_dim, f"{what}: embedding_dim")
        if init_func is not None and not callable(init_func):
            raise TypeError(f"{what}: init_func must be a callable init_func(shape, dtype) or "
                            f"None, got {init_func!r}")
        if part_policy is not None and not isinstance(part_policy, PartitionPolicy):
            raise TypeError(f"{what}: part_policy must be a DistGraph's partition policy "
                            "(g.get_node_partition_policy(), g.get_edge_partition_policy()) or "
                            f"None, got {part_policy!r}")
        if name is None:
            _anonymous += 1
            name = f"embedding-{_anonymous}"
        rt = _runtime.runtime()
        if part_policy is not None and part_policy.distributed:
            kind, offsets = part_policy.kind, [int(o) for o in part_policy.offsets()]
        else:
            if part_policy is not None and _runtime.get_world_size() > 1:
                raise ValueError("DistEmbedding: part_policy is not of a distributed DistGraph")
            kind, offsets = "even", list(_C.even_offsets(self.num_embeddings, rt.world_size))
        if offsets[-1] != self.num_embeddings:
            raise ValueError(f"DistEmbedding {name!r}: {self.num_embeddings} rows, but the "
                             f"partition policy covers {offsets[-1]} IDs")
        t = _C.DistTensor(rt, name, [self.num_embeddings, self.embedding_dim], "float32", kind,
                          offsets, True)
        if init_func is not None and not t.created:
            # The rows (and the optimizers' state over them) live as long as the runtime: a
            # script re-creating its embedding would silently warm-start from them.
            warnings.warn(f"DistEmbedding {name!r} exists in this runtime: its rows (and the "
                          "state of sparse optimizers over it) are kept and init_func is not "
                          "applied; pass another name for new rows", UserWarning, stacklevel=2)
        _fill_local(t, init_func, torch.float32, f"DistEmbedding {name!r}")
        self.name = name
        self._part_policy = part_policy
        self.weight = DistTensor(t.shape, None, name, part_policy=part_policy, _dist=t)
        self._trace: list = []  # (ids, rows) read with gradients since the last step

    @property
    def part_policy(self) -> Optional[PartitionPolicy]:
        """The ``part_policy`` given (None without one: rows in even ranges), as DGL's."""
        return self._part_policy

    def __call__(self, idx, device=None):
        """The rows of ``idx`` on ``device`` (default: the device of ``idx`` when it is a torch
        tensor, else the CPU). The recorded rows are a host leaf tensor (its gradient goes to
        the owners from the host); a device result is a differentiable copy of it."""
        torch = require_torch("DistEmbedding")
        if device is None:
            device = device_of(idx)
        ids = to_numpy_ids(idx, f"DistEmbedding {self.name!r} IDs", num_rows=self.num_embeddings)
        rows = torch.from_numpy(self.weight._dist.read(ids))
        if torch.is_grad_enabled():
            rows.requires_grad_(True)
            # A copy: to_numpy_ids shares the caller's int64 buffer, which may be reused for
            # the next batch before step() sends the gradients to these rows' owners.
            self._trace.append((ids.copy(), rows))
        return rows if device is None else rows.to(device)

    def reset_trace(self) -> None:
        self._trace = []

    def save(self, path: str) -> None:
        """Writes the rows into folder ``path`` (one .npy part per rank and a JSON written by
        rank 0, each atomically), creating it on every rank. Collective: a rank that cannot
        create it makes every rank raise."""
        _agree(f"DistEmbedding {self.name!r}: save to {path}",
               f"DistEmbedding {self.name!r}: save", lambda: os.makedirs(path, exist_ok=True))
        _C.save_dist_tensor(self.weight._dist, os.fspath(path))

    def load(self, path: str) -> None:
        """Reads rows saved by ``save`` (same shape and row ownership; every rank or none).
        Collective."""
        _C.load_dist_tensor(self.weight._dist, os.fspath(path))

    def __repr__(self) -> str:
        return (f"DistEmbedding(name={self.name!r}, num_embeddings={self.num_embeddings}, "
                f"embedding_dim={self.embedding_dim})")


# In the folder of an optimizer's save while it runs; "~" is in no state folder's name.
_SAVING_MARKER = "~optimizer-saving"
_AGREED_ERRORS = {e.__name__: e for e in (ValueError, TypeError, OSError)}


def _agree(what: str, label: str, fn: Callable[[], None]) -> None:
    """Runs ``fn`` on this rank (the folders a save needs, rank 0's save markers), then every
    rank learns every rank's outcome: when one raised, every rank raises (a failed rank its
    own error, the others the first failed rank's type where it is or derives from one of
    ``_AGREED_ERRORS``, else RuntimeError, naming ``what`` and the rank), so that none goes
    on into the next collective alone. Collective; ``label`` names it, the same on every
    rank (``what`` may hold this rank's own path)."""
    err = None
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the other ranks learn of it, then it goes on
        err = e
    mine = None
    if err is not None:  # FileExistsError goes to the others as an OSError
        kind = next((c.__name__ for c in type(err).__mro__ if c in _AGREED_ERRORS.values()),
                    type(err).__name__)
        mine = (kind, str(err))
    outcomes = all_gather_object(mine, _what=label)
    if err is not None:
        raise err
    for r, m in enumerate(outcomes):
        if m is not None:
            raise _AGREED_ERRORS.get(m[0], RuntimeError)(f"{what}: rank {r} failed: {m[1]}")


class _SparseOptimizer:
    def __init__(self, params: Sequence[DistEmbedding], make):
        if isinstance(params, DistEmbedding):
            params = [params]
        self.params = list(params)
        if not self.params or not all(isinstance(p, DistEmbedding) for p in self.params):
            raise TypeError(f"{type(self).__name__}: params must be a list of DistEmbedding")
        seen = set()
        for p in self.params:  # one name is one tensor: twice would apply two updates a step
            if p.name in seen:
                raise ValueError(f"{type(self).__name__}: DistEmbedding {p.name!r} already "
                                 "registered in the optimizer")
            seen.add(p.name)
        self._opt = [make(p.weight._dist) for p in self.params]

    def zero_grad(self) -> None:
        """Clears the gradients of the rows read since the last step, as torch's optimizers
        clear theirs: rows read before it still take the gradients of a later backward pass
        (DGL's loop calls it between the forward and the backward pass). ``step`` forgets the
        rows it applied."""
        for p in self.params:
            for _, rows in p._trace:
                rows.grad = None

    def step(self) -> None:
        """Pushes the gradients of the rows read since the last step to their owners and
        applies them there. Collective: every rank calls it, with or without rows."""
        torch = require_torch("sparse optimizers")
        for emb, opt in zip(self.params, self._opt):
            ids, grads = [], []
            for i, rows in emb._trace:
                g = rows.grad
                if g is None:  # read but not used in the loss: no gradient
                    continue
                ids.append(i)
                grads.append(g.detach().to(torch.float32).cpu().numpy())
            emb.reset_trace()
            if ids:
                all_ids = np.concatenate(ids)
                all_g = np.ascontiguousarray(np.concatenate(grads), dtype=np.float32)
            else:
                all_ids = np.zeros(0, dtype=np.int64)
                all_g = np.zeros((0, emb.embedding_dim), dtype=np.float32)
            opt.step(all_ids, all_g)

    @property
    def lr(self) -> float:
        return float(self._opt[0].lr)

    @lr.setter
    def lr(self, value: float) -> None:
        value = _number(value, f"{type(self).__name__}: lr")
        for o in self._opt:
            o.lr = value

    def _state_dirs(self, path: str) -> list:
        """The folder of each embedding's state under ``path`` (its file-name form of the
        name); ValueError when two names have the same one (e.g. "u:v" and "u_v")."""
        dirs: dict = {}
        for emb in self.params:
            d = _C.sanitized_tensor_name(emb.name)
            if d in dirs:
                raise ValueError(f"{type(self).__name__}: the states of DistEmbedding "
                                 f"{dirs[d]!r} and {emb.name!r} would share the folder {d!r} "
                                 "(names differ only in characters a file name cannot hold)")
            dirs[d] = emb.name
        return [os.path.join(path, d) for d in dirs]

    def save(self, path: str) -> None:
        """Writes the optimizer state of every embedding under folder ``path``, one subfolder
        per embedding (created on every rank). Collective: a rank that cannot create its
        folders makes every rank raise. Rank 0 keeps a marker file there while it runs: a save
        cut short between two embeddings (a crash, a full disk) leaves it, and ``load``
        refuses the states of different steps it would otherwise pair."""
        dirs = self._state_dirs(path)
        marker = os.path.join(path, _SAVING_MARKER)
        rank0 = _runtime.get_rank() == 0

        def begin() -> None:  # every rank's folders (node-local disks), rank 0's marker
            for d in [path, *dirs]:
                os.makedirs(d, exist_ok=True)
            if rank0:
                with open(marker, "w") as f:
                    f.write("a save of this optimizer's state began and has not ended\n")

        def end() -> None:  # every rank's state is on disk
            if rank0:
                os.remove(marker)

        what, label = f"{type(self).__name__}: save to {path}", f"{type(self).__name__}: save"
        try:
            _agree(what, label, begin)
        except Exception:
            if rank0:  # nothing was written: the state there (if any) is still whole
                try:
                    os.remove(marker)
                except OSError:
                    pass
            raise
        for d, o in zip(dirs, self._opt):
            o.save(d)
        _agree(what, label, end)

    def load(self, path: str) -> None:
        """Reads the state ``save`` wrote, of every embedding or of none: when the state of one
        embedding cannot be loaded (a file missing or bad, on any rank), the states loaded
        before it are put back, so no embedding's state is paired with another step's.
        Collective."""
        dirs = self._state_dirs(path)
        marker = os.path.join(path, _SAVING_MARKER)

        def check() -> None:
            if _runtime.get_rank() == 0 and os.path.exists(marker):
                raise ValueError(
                    f"{type(self).__name__}: the state in {path} is from a save that did not "
                    f"finish ({marker} is there), so its embeddings' states may come from "
                    "different steps; load an older checkpoint")

        _agree(f"{type(self).__name__}: load from {path}", f"{type(self).__name__}: load", check)
        # Each embedding's load is all-or-nothing on every rank; the ones before a failure
        # are undone from this rank's rows kept here (the last one needs no copy).
        kept = []
        try:
            for i, (d, o) in enumerate(zip(dirs, self._opt)):
                if i + 1 < len(self._opt):
                    kept += [(t, np.array(t.local_view(), copy=True)) for t in o.state_tensors]
                o.load(d)
        except BaseException:
            for t, rows in kept:
                t.local_view()[...] = rows
                t.local_rows_changed(*t.local_range)
            raise


class SparseAdagrad(_SparseOptimizer):
    """DGL's ``SparseAdagrad``: per element, sum += g^2; w -= lr * g / (sqrt(sum) + eps)."""

    def __init__(self, params, lr: float = 0.01, eps: float = 1e-10,
                 initial_accumulator_value: float = 0.0):
        lr, eps = _number(lr, "SparseAdagrad: lr"), _number(eps, "SparseAdagrad: eps")
        acc = _number(initial_accumulator_value, "SparseAdagrad: initial_accumulator_value")
        super().__init__(params, lambda t: _C.SparseOptimizer.adagrad(t, lr, eps, acc))


class SparseAdam(_SparseOptimizer):
    """DGL's ``SparseAdam`` (per-row step counts; only rows with a gradient are updated)."""

    def __init__(self, params, lr: float = 0.001, betas=(0.9, 0.999), eps: float = 1e-8):
        lr, eps = _number(lr, "SparseAdam: lr"), _number(eps, "SparseAdam: eps")
        try:
            beta1, beta2 = betas
        except (TypeError, ValueError):
            raise TypeError(f"SparseAdam: betas must be a pair (beta1, beta2), got {betas!r}") \
                from None
        beta1 = _number(beta1, "SparseAdam: betas[0]")
        beta2 = _number(beta2, "SparseAdam: betas[1]")
        super().__init__(params, lambda t: _C.SparseOptimizer.adam(t, lr, beta1, beta2, eps))
