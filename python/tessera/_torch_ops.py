# SPDX-License-Identifier: Apache-2.0
"""Tessera's torch operator library (``libtessera_torch_ops.so`` beside ``tessera._C``, built
when torch is installed at build time; python/torch_ops): Tessera's ops as operators of torch's
dispatcher, ``torch.ops.tessera.*``. A training step calls one with a single dispatcher call and
its backward runs in C++ autograd; the same kernels through ``tessera.ops`` cross by DLPack with
a Python ``autograd.Function`` each way, which costs more host time than a step's small blocks
take on a GPU.

``ops()`` loads the library on first use and returns ``torch.ops.tessera``, or None when it is
absent, fails to load, was built for another torch, or ``TESSERA_TORCH_OPS=0``; ``why()`` says
which. Callers then take the ``tessera.ops`` path, which computes the same result."""
from __future__ import annotations

import os
import threading
import warnings
from typing import Optional

from ._tensor import HAVE_TORCH, torch

LIBRARY = "libtessera_torch_ops.so"

_loaded = False
_ops = None
_why = "not loaded yet"
_lock = threading.Lock()


def _load():
    """Sets _ops and _why, then _loaded; once, whichever thread comes first (the others wait)."""
    global _loaded
    with _lock:
        if not _loaded:
            _try_load()
            _loaded = True


def _try_load():
    global _ops, _why
    if os.environ.get("TESSERA_TORCH_OPS", "1") == "0":
        _why = "disabled by TESSERA_TORCH_OPS=0"
        return
    if not HAVE_TORCH:
        _why = "torch is not installed"
        return
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), LIBRARY)
    if not os.path.exists(path):
        _why = f"{path} is absent (the package was built without torch)"
        return
    try:
        torch.ops.load_library(path)
        built_for = str(torch.ops.tessera.torch_version())
    except Exception as e:  # noqa: BLE001 - any load failure means: use the DLPack path
        _why = f"loading {path} failed: {e}"
        warnings.warn(f"tessera: {_why}; the ops run through tessera.ops instead "
                      "(reinstall Tessera against this torch)", RuntimeWarning, stacklevel=4)
        return
    if built_for != torch.__version__.split("+")[0]:
        _why = f"{path} was built for torch {built_for}, this is torch {torch.__version__}"
        warnings.warn(f"tessera: {_why}; the ops run through tessera.ops instead (reinstall "
                      "Tessera against this torch)", RuntimeWarning, stacklevel=4)
        return
    _ops = torch.ops.tessera
    _why = f"loaded from {path}"


def ops():
    """``torch.ops.tessera`` when the operator library is usable, else None (see ``why()``)."""
    if not _loaded:
        _load()
    return _ops


def why() -> Optional[str]:
    """Why ``ops()`` is what it is: where the library was loaded from, or why it was not."""
    if not _loaded:
        _load()
    return _why
