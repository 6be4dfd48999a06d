# SPDX-License-Identifier: Apache-2.0
"""Shared fixtures: the shipped Cora (data/cora), a partitioned Cora."""
import importlib.util
import os

import numpy as np
import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CORA = os.path.join(REPO, "data", "cora")  # shipped with the repository

# Not importing tessera is a failure of the whole suite, never a silent skip.
try:
    import tessera
except ImportError as e:
    raise ImportError(f"tessera cannot be imported ({e}); install the package first: "
                      "pip install . --no-build-isolation") from e

# For tests whose scripts import torch in a subprocess (training, torch collectives): torch is
# needed only for training, so without it they skip instead of failing.
requires_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                    reason="torch is not installed (needed for training)")


def _torch_sees_a_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


# GPU cases skip for want of a device with one wording, "no CUDA device ...", the only skip
# reason CI accepts.
HAVE_GPU = _torch_sees_a_gpu()
NO_GPU = "no CUDA device (torch sees none)"
needs_gpu = pytest.mark.skipif(not HAVE_GPU, reason=NO_GPU)
# GPU cases through Tessera's bindings also need a CUDA build of the package; on a machine with
# a GPU, a CPU-only build is not a reason CI accepts.
needs_cuda_build = pytest.mark.skipif(
    not (HAVE_GPU and tessera._C.cuda_compiled),
    reason=NO_GPU if not HAVE_GPU else
    "tessera built without CUDA (pip install with TESSERA_WITH_CUDA=ON)")


@pytest.fixture(scope="session")
def cora():
    """Cora read with symmetrized edges (the way it is partitioned)."""
    return tessera.load_dataset(CORA, symmetrize=True)


@pytest.fixture(scope="session")
def cora_parts(tmp_path_factory):
    """Cora partitioned into 2 parts with METIS, and the (orig_nids, orig_eids) mapping."""
    out = tmp_path_factory.mktemp("cora2")
    orig_nids, orig_eids = tessera.partition_graph(CORA, "cora", 2, out, symmetrize=True,
                                                   return_mapping=True)
    return str(out / "cora.json"), orig_nids, orig_eids


@pytest.fixture(scope="session")
def cora_one(tmp_path_factory):
    out = tmp_path_factory.mktemp("cora1")
    return tessera.partition_graph(CORA, "cora", 1, out, symmetrize=True)


def cora_copy(tmp_path, **arrays):
    """Cora with some arrays replaced (name -> numpy array), in tmp_path/cora; its path."""
    import shutil

    d = tmp_path / "cora"
    shutil.copytree(CORA, d)
    for name, a in arrays.items():
        np.save(d / f"{name}.npy", a)
    return str(d)


def in_neighbors(graph, v):
    ip = np.asarray(graph.indptr)
    return np.asarray(graph.indices[ip[v]:ip[v + 1]])
