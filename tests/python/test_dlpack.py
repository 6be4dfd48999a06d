# SPDX-License-Identifier: Apache-2.0
"""Buffers cross the boundary without copies (DLPack / buffer protocol)."""
import numpy as np
import pytest

import tessera
from tessera import _C


def test_numpy_input_is_read_in_place():
    a = np.arange(1000, dtype=np.int64)
    assert _C._buffer_address(a) == a.ctypes.data


def test_torch_input_is_read_in_place():
    torch = pytest.importorskip("torch")
    t = torch.arange(1000, dtype=torch.int64)
    assert _C._buffer_address(t) == t.data_ptr()
    f = torch.randn(100, 8)
    assert _C._buffer_address(f) == f.data_ptr()


def test_graph_arrays_are_views_of_cpp_memory(cora):
    g = cora.graph
    a, b = g.indices, g.indices
    assert a.ctypes.data == b.ctypes.data  # the same C++ vector each time
    assert a.base is not None  # a view owned by the Graph object, not a copy


def test_block_arrays_are_views_and_torch_shares_them(cora):
    torch = pytest.importorskip("torch")
    blocks = _C.NeighborSampler(cora.graph, [5, 5]).sample_blocks(np.arange(20), seed=1)
    b = blocks[0]
    assert b.src.ctypes.data == b.src.ctypes.data
    t = torch.utils.dlpack.from_dlpack(b.src)
    assert t.data_ptr() == b.src.ctypes.data
    wrapped = tessera.Block(b)
    assert wrapped.src.data_ptr() == b.src.ctypes.data
    del blocks, b
    assert int(t.sum()) >= 0  # the tensor keeps the C++ block alive


def test_mmap_partition_data_is_read_only_view(cora_one):
    lp = _C.load_partition(cora_one, 0)
    f = lp.ndata["feat"]
    assert not f.flags.writeable
    assert lp.ndata["feat"].ctypes.data == f.ctypes.data  # the mapping, not a copy
    with pytest.raises(ValueError):
        f[0, 0] = 1


def test_moved_vectors_become_numpy_without_copy(cora):
    src, dst, eid = _C.sample_neighbors(cora.graph, np.arange(10), 3, seed=2)
    assert src.dtype == np.int64 and src.flags.writeable and src.flags.c_contiguous
    assert len(src) == len(dst) == len(eid)
