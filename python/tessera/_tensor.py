"""Optional torch: Tessera runs without it; training needs it."""
from __future__ import annotations

import numpy as np

try:  # torch is optional: only training needs it
    import torch  # noqa: F401

    HAVE_TORCH = True
except Exception:  # pragma: no cover - exercised on machines without torch
    torch = None
    HAVE_TORCH = False


def require_torch(what: str):
    if not HAVE_TORCH:
        raise ImportError(f"{what} needs PyTorch (pip install torch==2.11.0)")
    return torch


def to_numpy_ids(ids, what: str = "ids") -> np.ndarray:
    """Node or edge IDs as a 1-D int64 NumPy array (no copy when already int64 on the CPU)."""
    if HAVE_TORCH and isinstance(ids, torch.Tensor):
        if ids.device.type != "cpu":
            ids = ids.cpu()
        if ids.dtype == torch.bool:
            return np.nonzero(ids.numpy())[0].astype(np.int64)
        ids = ids.numpy()
    if isinstance(ids, slice):
        raise TypeError(f"{what}: slices are not supported; pass an array of IDs")
    a = np.asarray(ids)
    if a.dtype == np.bool_:
        return np.nonzero(a)[0].astype(np.int64)
    if a.ndim == 0:
        a = a.reshape(1)
    if a.ndim != 1:
        raise ValueError(f"{what}: expected a 1-D array of IDs, got shape {a.shape}")
    if not np.issubdtype(a.dtype, np.integer):
        raise TypeError(f"{what}: expected integer IDs, got {a.dtype}")
    return np.ascontiguousarray(a, dtype=np.int64)


def as_tensor(a: np.ndarray):
    """A torch tensor sharing `a`'s memory through DLPack (NumPy when torch is absent).

    Read-only NumPy arrays (memory-mapped partitions) are copied, since torch tensors are
    always writable."""
    if not HAVE_TORCH:
        return a
    if not a.flags.writeable:
        a = a.copy()
    if a.dtype == np.bool_:
        return torch.from_numpy(a)
    return torch.utils.dlpack.from_dlpack(a)
