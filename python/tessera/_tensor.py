# SPDX-License-Identifier: Apache-2.0
"""Optional torch: Tessera runs without it; training needs it."""
from __future__ import annotations

from typing import Mapping, Optional

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


def torch_to_numpy(t, what: str) -> np.ndarray:
    """A CPU copy (or view) of torch tensor ``t`` as NumPy; TypeError naming ``what`` for a dtype
    NumPy has no type for (bfloat16 and others) instead of torch's "unsupported ScalarType"."""
    try:
        return t.detach().cpu().numpy()
    except TypeError:
        raise TypeError(f"{what}: dtype {t.dtype} is not supported (NumPy has no such type); "
                        "store float16 or float32") from None


def is_dist_tensor(x) -> bool:
    """True for a ``DistTensor`` (recognized by its interface: _dist imports this module)."""
    return hasattr(x, "part_policy") and hasattr(x, "numpy")


def check_mask_ndim(shape, what: str) -> None:
    """A mask (boolean, or a 0/1 array read as one) of ``shape`` is 1-D: ValueError naming the
    shape otherwise. ``np.nonzero(a)[0]`` of an [N, S] mask (a dataset's S fixed splits, one
    column each) would be the union of the splits with each node listed once per column
    selecting it, so the caller picks a column."""
    shape = tuple(int(d) for d in shape)
    if len(shape) == 1:
        return
    hint = ("; it holds one split per column: pick one, e.g. mask[:, 0] (of a DistTensor, "
            "mask[:][:, 0])" if len(shape) == 2 else "")
    raise ValueError(f"{what}: a mask must be 1-D (one entry per node or edge), got shape "
                     f"{shape}{hint}")


def refuse_per_type(x, what: str) -> None:
    """TypeError for a dict of IDs or masks per node or edge type (DGL's heterogeneous form):
    a Tessera graph is homogeneous, and NumPy would read the dict as one opaque object."""
    if isinstance(x, Mapping):
        raise TypeError(f"{what}: a dict per type (keys {sorted(map(str, x))}) is for "
                        "heterogeneous graphs, which are not supported: a Tessera graph is "
                        "homogeneous; pass the IDs or the mask itself")


def check_id_range(idx: np.ndarray, count: int, what: str) -> None:
    """IndexError naming the first ID of ``idx`` outside [0, ``count``) (NumPy would wrap a
    negative one and raise its own IndexError for one past the end)."""
    if idx.size and (idx.min() < 0 or idx.max() >= count):
        bad = idx[(idx < 0) | (idx >= count)][0]
        raise IndexError(f"{what}: ID {int(bad)} outside [0, {count})")


def to_numpy_ids(ids, what: str = "ids", num_nodes: Optional[int] = None, *,
                 num_edges: Optional[int] = None, num_rows: Optional[int] = None) -> np.ndarray:
    """Node or edge IDs as a 1-D int64 NumPy array (no copy when already int64 on the CPU).

    A boolean array is a mask (the IDs where it is true): it must be 1-D (ValueError naming
    the shape otherwise) and as long as what it indexes: given the graph's ``num_nodes``, or
    the ``num_rows`` of a tensor it reads or writes, exactly that long (a longer one would
    surface as an out-of-range ID, a shorter one drop nodes or rows silently); given
    ``num_edges`` (one past the graph's largest edge ID), at least that long (a longer one's
    extra true entries are refused as IDs of no edge). A DistTensor is read whole, in one
    request per owner (``numpy()``), and is then IDs or a mask like any array. A dict (IDs
    per node or edge type) is a TypeError: Tessera graphs are homogeneous.

    IDs on a GPU are copied to the host: IDs route reads and sampling requests to their owners
    on the CPU. A caller whose result belongs on the IDs' device takes it from ``device_of(ids)``
    (``DistTensor.__getitem__`` does)."""
    refuse_per_type(ids, what)
    if is_dist_tensor(ids):  # np.asarray would read it row by row, one request per row
        ids = ids.numpy()
    if HAVE_TORCH and isinstance(ids, torch.Tensor):
        if ids.device.type != "cpu":
            ids = ids.detach().cpu()
        ids = ids.numpy()
    if isinstance(ids, slice):
        raise TypeError(f"{what}: slices are not supported; pass an array of IDs")
    a = np.asarray(ids)
    if a.dtype == np.bool_:
        return _mask_ids(a, what, num_nodes, num_edges, num_rows)
    if a.ndim == 0:
        a = a.reshape(1)
    if a.ndim != 1:
        raise ValueError(f"{what}: expected a 1-D array of IDs, got shape {a.shape}")
    if a.size == 0:  # np.asarray([]) is float64: an empty list is an empty ID list
        return np.empty(0, dtype=np.int64)
    if not np.issubdtype(a.dtype, np.integer):
        raise TypeError(f"{what}: expected integer IDs, got {a.dtype}")
    if a.dtype == np.uint64 and a.max() > np.iinfo(np.int64).max:
        # The cast to int64 would report it as a negative ID.
        raise IndexError(f"{what}: ID {int(a.max())} is beyond the largest ID, "
                         f"{np.iinfo(np.int64).max}")
    return np.ascontiguousarray(a, dtype=np.int64)


def _mask_ids(a: np.ndarray, what: str, num_nodes: Optional[int], num_edges: Optional[int],
              num_rows: Optional[int]) -> np.ndarray:
    """The IDs a boolean mask selects, after checking its shape (see ``to_numpy_ids``)."""
    check_mask_ndim(a.shape, what)
    if num_nodes is not None and len(a) != num_nodes:
        raise ValueError(f"{what}: a boolean mask of length {len(a)} for a graph of "
                         f"{num_nodes} nodes")
    if num_rows is not None and len(a) != num_rows:
        raise ValueError(f"{what}: a boolean mask of length {len(a)} for {num_rows} rows")
    # A Dataset's edge-ID space can reach past its largest stored ID (a symmetrized one's
    # is 2E, of which the reverses of self loops and repeated pairs are not stored): a
    # mask that long is fine, a shorter one would drop edges silently.
    if num_edges is not None and len(a) < num_edges:
        raise ValueError(f"{what}: a boolean mask of length {len(a)} for a graph whose "
                         f"edge IDs are [0, {num_edges})")
    return np.nonzero(a)[0].astype(np.int64)


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


def device_of(x):
    """The torch device of ``x`` when it is a torch tensor off the CPU, else None."""
    if HAVE_TORCH and isinstance(x, torch.Tensor) and x.device.type != "cpu":
        return x.device
    return None


def on_device_of(result, like):
    """``result`` (NumPy or torch) as a torch tensor on the device of ``like`` when ``like`` is
    a torch tensor off the CPU (one host-to-device copy); otherwise ``as_tensor(result)``."""
    t = as_tensor(result) if isinstance(result, np.ndarray) else result
    dev = device_of(like)
    return t if dev is None else t.to(dev)


def cuda_stream_of(device) -> int:
    """torch's current CUDA stream on ``device`` as the integer (cudaStream_t) the bindings
    take, so Tessera's kernels are ordered with the caller's torch work on that stream. Read
    raw where torch offers it (no Stream object per call: ops run per layer and step)."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        index = torch.device(device).index
        return int(raw(torch.cuda.current_device() if index is None else index))
    return int(torch.cuda.current_stream(device).cuda_stream)
