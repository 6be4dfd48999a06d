# SPDX-License-Identifier: Apache-2.0
"""Row gather and scatter of feature matrices, and sparse x dense products (message passing),
on the CPU or a CUDA device, in place.

``gather_rows(src, idx)`` is ``src[idx]`` and ``scatter_rows(src, idx, dst)`` is
``dst[idx] = src`` for rows of any width and dtype with int32 or int64 indices, run by
Tessera's ops (host/ops gather.hpp): its CPU twin when every operand is on the CPU, its CUDA
twin when every operand is on one CUDA device. The buffers cross into C++ by DLPack with no
copy (NumPy arrays, torch tensors, anything with ``__dlpack__``); outputs are written in place.

On a CUDA device the kernel is enqueued on torch's current stream of that device (so it is
ordered with the caller's torch work), unless ``stream`` (a ``cudaStream_t`` as an integer)
is given; arrays of other libraries use the legacy default stream (0). With
``check_indices=True`` (default) the call then synchronizes that stream once to turn an index
outside the table into ``IndexError``; with ``False`` it returns at once and an out-of-range
index zero-fills its row (gather) or writes nothing (scatter). On the CPU every index is always
checked. Operands on different devices are a ``TypeError`` naming each one's device; a CUDA
operand in a build without CUDA is ``tessera.NotCompiledError``.
"""
from __future__ import annotations

from typing import Optional

from . import _C
from ._tensor import HAVE_TORCH, cuda_stream_of, torch

if HAVE_TORCH:
    import torch.utils.dlpack  # noqa: F401  (to_dlpack, by _export)

__all__ = ["gather_rows", "scatter_rows", "spmm"]


def _plain(x):
    """A torch tensor without autograd history (DLPack refuses tensors that require grad);
    anything else as it is."""
    if HAVE_TORCH and isinstance(x, torch.Tensor):
        return x.detach()
    return x


def _index(idx):
    """``idx`` as gather_rows/scatter_rows take it: a Python list, tuple or range of IDs becomes
    an int64 NumPy array (the C++ op takes only buffers); arrays and tensors pass as they are."""
    if isinstance(idx, (list, tuple, range)):
        import numpy as np

        return np.asarray(idx, dtype=np.int64)
    return _plain(idx)


def _export(x):
    """A torch tensor as a DLPack capsule (torch.utils.dlpack.to_dlpack, no copy); anything
    else as it is. The capsule skips ``Tensor.__dlpack__``'s Python-level stream handshake,
    which costs more host time than a training step's small ops take on the GPU: the ops are
    enqueued on the caller's current stream anyway, so nothing needs ordering."""
    if HAVE_TORCH and isinstance(x, torch.Tensor):
        return torch.utils.dlpack.to_dlpack(x.detach())
    return x


def _run(fn, args, device_tensor, stream: Optional[int], *after):
    """fn(*args, stream, *after) on the device of ``device_tensor``: torch's current stream of
    that CUDA device unless ``stream`` is given (0, the legacy default stream, otherwise).
    Torch tensors among ``args`` cross as DLPack capsules (_export)."""
    args = tuple(_export(a) for a in args)
    dev = device_tensor.device if HAVE_TORCH and isinstance(device_tensor, torch.Tensor) \
        else None
    if dev is not None and dev.type == "cuda":
        s = cuda_stream_of(dev) if stream is None else int(stream)
        # torch exports a CUDA tensor only while its device is the current one; switching costs
        # host time on every call (spmm runs per layer and step), so only when it is not.
        if dev.index is None or dev.index == torch.cuda.current_device():
            return fn(*args, s, *after)
        with torch.cuda.device(dev):
            return fn(*args, s, *after)
    return fn(*args, 0 if stream is None else int(stream), *after)


def gather_rows(src, idx, out=None, *, check_indices: bool = True,
                stream: Optional[int] = None):
    """``out[i] = src[idx[i]]``: rows of ``src`` ([R, ...]) picked by ``idx`` (int32/int64,
    [n]; a Python list of IDs is taken too) into ``out`` ([n, ...], ``src``'s dtype,
    C-contiguous), which is allocated on ``src``'s device when not given (a torch tensor for a
    torch ``src``, else NumPy). Returns ``out``."""
    src, idx = _plain(src), _index(idx)
    if out is None and HAVE_TORCH and isinstance(src, torch.Tensor):
        out = torch.empty((len(idx),) + tuple(src.shape[1:]), dtype=src.dtype,
                          device=src.device)
    if out is None:  # NumPy: the C++ op allocates the host result
        return _C.gather_rows(src, idx, None, 0, check_indices)
    _run(_C.gather_rows, (src, idx, _plain(out)), src, stream, check_indices)
    return out


def scatter_rows(src, idx, dst, *, check_indices: bool = True,
                 stream: Optional[int] = None):
    """``dst[idx[i]] = src[i]`` in place (``src`` [n, ...], ``idx`` int32/int64 [n], ``dst``
    [R, ...] of ``src``'s dtype, C-contiguous). With repeated indices the CPU twin keeps the
    last row and the CUDA twin an unspecified one. Returns ``dst``."""
    _run(_C.scatter_rows, (_plain(src), _index(idx), _plain(dst)), dst, stream, check_indices)
    return dst


def spmm(indptr, indices, num_cols: int, B, out=None, *, reduce: str = "sum",
         transpose: bool = False, stream: Optional[int] = None, engine: str = "cusparse",
         num_threads: int = 0):
    """``out = op(A) @ B`` for the CSR pattern A (``indptr`` [R + 1], ``indices`` [nnz], both
    int32 or both int64) of R rows and ``num_cols`` columns whose values are 1 (``reduce="sum"``)
    or 1 / the row's degree (``"mean"``; a row without entries gives zeros). ``op(A)`` is A, or
    A^T with ``transpose`` (the gradient of the forward aggregation w.r.t. B). ``B`` is float32
    [num_cols, F] ([R, F] transposed); ``out`` float32 [R, F] ([num_cols, F] transposed),
    C-contiguous, allocated on ``B``'s device when not given. On the CPU the CPU twin
    (deterministic for any thread count); on a CUDA device, on the stream as ``gather_rows``'s,
    cuSPARSE (``engine="cusparse"``: fastest on large patterns) or Tessera's row kernels
    (``"rows"``: a warp per row, two launches and no scratch per call, for the small per-step
    blocks of training; the forward gives the CPU twin's bits). Either transpose adds with
    atomics: the order of its sums may differ run to run. ``num_threads``: the CPU twin's
    threads (0: ``tessera.num_threads()``; the results do not depend on it). Returns ``out``."""
    B = _plain(B)
    indptr, indices = _index(indptr), _index(indices)  # lists, as gather_rows takes them
    out_rows = int(num_cols) if transpose else int(indptr.shape[0]) - 1
    if out is None:
        if HAVE_TORCH and isinstance(B, torch.Tensor):
            out = torch.empty((out_rows,) + tuple(B.shape[1:]), dtype=B.dtype, device=B.device)
        else:
            import numpy as np

            out = np.empty((out_rows,) + tuple(B.shape[1:]), dtype=B.dtype)
    _run(_C.spmm, (indptr, indices, int(num_cols), B, _plain(out), reduce,
                   bool(transpose)), B, stream, engine, int(num_threads))
    return out
