# SPDX-License-Identifier: Apache-2.0
"""C++ exceptions arrive as the Python exceptions docs/design.md names, with the C++ message."""
import os

import numpy as np
import pytest

import tessera
from tessera import _C

from conftest import CORA


@pytest.mark.parametrize("kind,exc", [
    ("value", ValueError), ("index", IndexError), ("type", TypeError), ("io", OSError),
    ("internal", RuntimeError), ("not_compiled", RuntimeError), ("other", RuntimeError)])
def test_translators_map_every_kind(kind, exc):
    with pytest.raises(exc, match=f"message of {kind}"):
        _C._raise(kind, f"message of {kind}")


def test_not_compiled_is_its_own_runtime_error():
    with pytest.raises(tessera.NotCompiledError):
        _C._raise("not_compiled", "cuda")
    assert issubclass(tessera.NotCompiledError, RuntimeError)


def test_missing_dataset_is_oserror_naming_the_path(tmp_path):
    missing = tmp_path / "nope"
    missing.mkdir()
    (missing / "edge_index.npy").write_bytes(b"not an npy file")
    with pytest.raises((OSError, ValueError), match="edge_index"):
        tessera.load_dataset(missing)


def test_seed_out_of_range_is_indexerror(cora):
    s = _C.NeighborSampler(cora.graph, [5])
    with pytest.raises(IndexError, match="5000"):
        s.sample_blocks(np.array([5000], dtype=np.int64))


def test_negative_fanout_is_valueerror(cora):
    with pytest.raises(ValueError, match="fanout -3"):
        _C.NeighborSampler(cora.graph, [-3])


def test_float_ids_are_typeerror(cora):
    with pytest.raises(TypeError):
        _C.NodeDataLoader(_C.NeighborSampler(cora.graph, [5]), np.array([0.5, 1.5]))


def test_graph_arrays_validated(cora):
    with pytest.raises(IndexError):
        _C.build_csc(np.array([0, 7]), np.array([1, 2]), 3)
    with pytest.raises(ValueError):
        _C.Graph(np.array([0, 2, 1]), np.array([0, 1]))


def test_unknown_balance_mask_is_valueerror(tmp_path):
    with pytest.raises(ValueError, match="no_such_mask"):
        tessera.partition_graph(CORA, "cora", 2, tmp_path / "p", symmetrize=True,
                                balance_ntypes=["no_such_mask"])
    assert not os.path.exists(tmp_path / "p" / "cora.json")


def test_missing_partition_config_is_oserror(tmp_path):
    with pytest.raises(OSError):
        tessera.DistGraph("cora", part_config=str(tmp_path / "missing.json"))


def test_incomplete_job_environment_is_a_clear_error(monkeypatch):
    from tessera import _runtime

    monkeypatch.setattr(_runtime, "_state", {"initialized": False, "rank": 0, "world_size": 1,
                                             "runtime": None})
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.delenv("RANK", raising=False)
    with pytest.raises(ValueError, match="RANK and WORLD_SIZE must be set together"):
        _runtime.initialize()
    monkeypatch.setenv("RANK", "1")
    monkeypatch.delenv("TESSERA_JOB_TOKEN", raising=False)
    with pytest.raises(ValueError, match="job token"):
        _runtime.initialize()
    assert not _runtime.is_initialized()
    monkeypatch.delenv("WORLD_SIZE")
    monkeypatch.delenv("RANK")
    _runtime.initialize()
    assert tessera.get_world_size() == 1 and tessera.get_rank() == 0


def test_all_reduce_checks_its_input_in_a_world_of_one(monkeypatch):
    """Standalone, all_reduce returned any input unchecked (a list, a strided view, a read-only
    array, float16, op "mean") that the same script's all_reduce refuses under the launcher; a
    read-only array there was nanobind's "incompatible function arguments", a bfloat16 tensor
    torch's "Got unsupported ScalarType BFloat16"."""
    import tessera.distributed as dist

    for var in ("WORLD_SIZE", "RANK"):
        monkeypatch.delenv(var, raising=False)
    assert dist.get_world_size() == 1
    with pytest.raises(TypeError, match="expected a C-contiguous CPU array or tensor, got list"):
        dist.all_reduce([1.0, 2.0])
    with pytest.raises(TypeError, match=r"non-contiguous array of shape \(4,\)"):
        dist.all_reduce(np.zeros((4, 4))[:, 0])
    ro = np.ones(3)
    ro.setflags(write=False)
    with pytest.raises(TypeError, match="read-only"):
        dist.all_reduce(ro)
    with pytest.raises(TypeError, match=r"dtype float16 is not reducible \(float32, float64, "
                                        r"int32, int64, uint64\)"):
        dist.all_reduce(np.ones(3, dtype=np.float16))
    with pytest.raises(ValueError, match="op must be 'sum', 'max' or 'min', got 'mean'"):
        dist.all_reduce(np.ones(3), "mean")
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match="dtype bfloat16 is not reducible"):
        dist.all_reduce(torch.ones(3, dtype=torch.bfloat16))
    x = np.ones(3)
    assert dist.all_reduce(x) is x
