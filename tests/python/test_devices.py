# SPDX-License-Identifier: Apache-2.0
"""Tensors of any device cross the boundary by DLPack, in place.

* CPU (always run): ``_C.gather_rows`` / ``_C.scatter_rows`` and ``tessera.ops`` on NumPy and
  torch CPU arrays give the CPU twin's result (NumPy indexing is the oracle) and write the
  caller's buffer; mixed devices, wrong dtypes, bad indices, non-contiguous or read-only outputs
  are clear Python exceptions; ``DistTensor.read_into`` with a CPU output equals ``read``; a
  CUDA operand in a build without CUDA is ``NotCompiledError``.
* CUDA (a GPU that torch sees and, for the bindings, a CUDA build of Tessera): the CUDA path
  against the CPU path bit for bit (gather / scatter of fp32, fp16, int64 rows; DistTensor rows
  read into device memory), and a one-epoch ``train_sage.py --device cuda`` on Cora.

Device operands on a CPU-only machine come from ``_C._device_view``: a view of host memory that
claims to live on a CUDA device. It is only passed where the call must fail before touching it.
"""
import json
import os
import sys

import numpy as np
import pytest

from conftest import CORA, HAVE_GPU, REPO, needs_cuda_build, needs_gpu, tessera

torch = pytest.importorskip("torch")

from tessera import _C  # noqa: E402

CUDA = 2  # DLPack's kDLCUDA


def fake_cuda(a, device_id=0):
    """A view of host array ``a`` that claims to be CUDA memory (never dereferenced)."""
    return _C._device_view(np.ascontiguousarray(a), CUDA, device_id)


def bits(t):
    """The bytes of a tensor or array (bit-for-bit comparison; -0.0 and NaN included)."""
    if isinstance(t, torch.Tensor):
        return t.detach().cpu().contiguous().numpy().tobytes()
    return np.ascontiguousarray(t).tobytes()


# --- CPU: the bindings give the CPU twin's result --------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64, np.uint8])
@pytest.mark.parametrize("shape", [(50,), (50, 7), (50, 64), (50, 3, 5), (0, 4)])
@pytest.mark.parametrize("idx_dtype", [np.int32, np.int64])
def test_gather_rows_numpy_is_the_cpu_twin(dtype, shape, idx_dtype):
    rng = np.random.default_rng(1)
    src = (rng.standard_normal(shape) * 100).astype(dtype)
    n = 0 if shape[0] == 0 else 37
    idx = rng.integers(0, max(shape[0], 1), n).astype(idx_dtype)
    got = _C.gather_rows(src, idx)  # the host convenience: a new array
    assert got.dtype == src.dtype and got.shape == (n,) + shape[1:]
    assert bits(got) == bits(src[idx])
    out = np.full((n,) + shape[1:], 7, dtype=dtype)
    assert _C.gather_rows(src, idx, out) is out  # written in place
    assert bits(out) == bits(src[idx])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.bool])
def test_gather_rows_torch_cpu_writes_the_tensor_in_place(dtype):
    g = torch.Generator().manual_seed(2)
    src = (torch.randn(40, 9, generator=g) * 50).to(dtype)
    idx = torch.randint(0, 40, (25,), generator=g)
    out = torch.empty(25, 9, dtype=dtype)
    ptr = out.data_ptr()
    assert _C.gather_rows(src, idx.to(torch.int32), out) is out
    assert out.data_ptr() == ptr and torch.equal(out, src[idx])
    # tessera.ops allocates on src's device; a src that requires grad is read without it.
    w = torch.randn(40, 9, requires_grad=True)
    r = tessera.ops.gather_rows(w, idx)
    assert isinstance(r, torch.Tensor) and r.device.type == "cpu" and not r.requires_grad
    assert bits(r) == bits(w.detach()[idx])
    assert bits(tessera.ops.gather_rows(src.numpy(), idx.numpy())) == bits(src[idx])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64])
def test_scatter_rows_cpu_matches_indexed_assignment(dtype):
    g = torch.Generator().manual_seed(3)
    dst = (torch.randn(60, 5, generator=g) * 10).to(dtype)
    idx = torch.randperm(60, generator=g)[:21]
    src = (torch.randn(21, 5, generator=g) * 10).to(dtype)
    want = dst.clone()
    want[idx] = src
    assert tessera.ops.scatter_rows(src, idx, dst) is dst
    assert bits(dst) == bits(want)
    # Repeated indices: the CPU twin keeps the last row.
    d = np.zeros((4, 2), np.float32)
    _C.scatter_rows(np.arange(6, dtype=np.float32).reshape(3, 2), np.array([1, 1, 3]), d)
    assert d.tolist() == [[0, 0], [2, 3], [0, 0], [4, 5]]


# --- CPU: errors are clear Python exceptions --------------------------------------------------
def test_mixed_devices_are_a_typeerror_naming_every_argument():
    src = np.zeros((5, 4), np.float32)
    idx = np.array([0, 1], np.int64)
    out = np.zeros((2, 4), np.float32)
    with pytest.raises(TypeError, match=r"different devices \(src: cpu, idx: cpu, "
                                        r"out: cuda:0\)"):
        _C.gather_rows(src, idx, fake_cuda(out))
    with pytest.raises(TypeError, match=r"src: cuda:0, idx: cpu, out: cuda:0"):
        _C.gather_rows(fake_cuda(src), idx, fake_cuda(out))
    with pytest.raises(TypeError, match=r"src: cuda:0, idx: cuda:1, out: cuda:0"):
        _C.gather_rows(fake_cuda(src), fake_cuda(idx, 1), fake_cuda(out))
    with pytest.raises(TypeError, match=r"dst: cpu, idx: cuda:0, src: cpu"):
        _C.scatter_rows(out, fake_cuda(idx), src)
    with pytest.raises(TypeError, match=r"src is on cuda:0 and idx on cuda:0; without `out`"):
        _C.gather_rows(fake_cuda(src), fake_cuda(idx))
    with pytest.raises(TypeError, match="CPU or a CUDA device.*DLPack device 7:0"):
        _C.gather_rows(src, idx, _C._device_view(out, 7, 0))


def test_wrong_dtypes_shapes_and_layouts_are_clear_errors():
    src = np.arange(20, dtype=np.float32).reshape(5, 4)
    idx = np.array([4, 0], np.int64)
    with pytest.raises(TypeError, match="idx must be int32 or int64, got float32"):
        _C.gather_rows(src, idx.astype(np.float32))
    with pytest.raises(TypeError, match="src is float32 but out is float64"):
        _C.gather_rows(src, idx, np.zeros((2, 4), np.float64))
    with pytest.raises(ValueError, match=r"out has shape \[2, 5\] .* need \[2, 4\]"):
        _C.gather_rows(src, idx, np.zeros((2, 5), np.float32))
    with pytest.raises(ValueError, match=r"out has shape \[8\] .* need \[2, 4\]"):
        _C.gather_rows(src, idx, np.zeros(8, np.float32))  # same bytes, another shape
    with pytest.raises(ValueError, match="out is not C-contiguous"):
        _C.gather_rows(src, idx, np.zeros((4, 2), np.float32).T)
    with pytest.raises(ValueError, match="src is not C-contiguous"):
        _C.gather_rows(src[:, ::2], idx)
    ro = np.zeros((2, 4), np.float32)
    ro.setflags(write=False)
    with pytest.raises(TypeError, match="out must be a writable array.*read-only"):
        _C.gather_rows(src, idx, ro)
    with pytest.raises(TypeError, match="out must be a writable array.*list"):
        _C.gather_rows(src, idx, [[0.0] * 4] * 2)
    with pytest.raises(ValueError, match="idx must be 1-D"):
        _C.gather_rows(src, idx.reshape(2, 1), np.zeros((2, 4), np.float32))


def test_bad_indices_are_indexerrors_naming_the_position():
    src = np.zeros((5, 3), np.float32)
    with pytest.raises(IndexError, match=r"gather_rows: idx\[2\] = 5 is outside \[0, 5\)"):
        _C.gather_rows(src, np.array([0, 4, 5], np.int32))
    with pytest.raises(IndexError, match=r"idx\[0\] = -1"):
        tessera.ops.gather_rows(torch.zeros(5, 3), torch.tensor([-1]))
    with pytest.raises(IndexError, match=r"scatter_rows: idx\[1\] = 9 is outside \[0, 5\)"):
        _C.scatter_rows(np.ones((2, 3), np.float32), np.array([0, 9]), src)
    assert not src.any()  # validated before anything was written


def test_python_lists_of_ids_are_taken():
    src = np.arange(12, dtype=np.float32).reshape(6, 2)
    assert np.array_equal(tessera.ops.gather_rows(src, [1, 2]), src[[1, 2]])
    assert tessera.ops.gather_rows(src, []).shape == (0, 2)
    dst = np.zeros_like(src)
    tessera.ops.scatter_rows(src[:2], (4, 5), dst)
    assert np.array_equal(dst[4:], src[:2]) and not dst[:4].any()
    with pytest.raises(IndexError, match=r"idx\[1\] = 9"):
        tessera.ops.gather_rows(src, [1, 9])


# Fake device operands may only reach a build that refuses them before touching memory, so each
# case below belongs to one build and exists only there (as a C++ case of one build is compiled
# only in it): a CPU-only build, or a CUDA build on a machine without a GPU.
if not _C.cuda_compiled:
    def test_cuda_operands_without_a_cuda_build_are_not_compiled_errors(cora_one):
        src = np.zeros((5, 4), np.float32)
        idx = np.array([1, 2], np.int64)
        out = np.zeros((2, 4), np.float32)
        with pytest.raises(tessera.NotCompiledError,
                           match="gather_rows: not_compiled_with_cuda"):
            _C.gather_rows(fake_cuda(src), fake_cuda(idx), fake_cuda(out))
        with pytest.raises(RuntimeError, match="scatter_rows: not_compiled_with_cuda"):
            _C.scatter_rows(fake_cuda(out), fake_cuda(idx), fake_cuda(src))
        t = tessera.DistGraph("cora", part_config=cora_one).ndata["label"]
        with pytest.raises(tessera.NotCompiledError,
                           match="read_into_device: device output needs CUDA"):
            t._dist.read_into(idx, fake_cuda(np.zeros(2, np.int64)))
        assert _C.cuda_device_count() == 0

    def test_device_placement_without_a_cuda_build_is_told_in_python_terms(cora_one):
        g = tessera.DistGraph("cora", part_config=cora_one)
        with pytest.raises(tessera.NotCompiledError) as e:
            tessera.DistTensor((g.num_nodes(), 4), np.float32, "placed-on-device",
                               part_policy=g.get_node_partition_policy(), placement="device")
        msg = str(e.value)
        assert "DistTensor 'placed-on-device': placement='device' needs CUDA" in msg, msg
        assert "TESSERA_WITH_CUDA=ON pip install" in msg, msg
        assert "placement='host'" in msg, msg
        assert "Placement::" not in msg and "-DTESSERA" not in msg, msg
        # Nothing was created: the same name is free for a host tensor.
        t = tessera.DistTensor((g.num_nodes(), 4), np.float32, "placed-on-device",
                               part_policy=g.get_node_partition_policy())
        assert t.gather([0]).shape == (1, 4)
elif _C.cuda_device_count() == 0:
    def test_cuda_operands_without_a_gpu_are_value_errors(cora_one):
        src = np.zeros((5, 4), np.float32)
        idx = np.array([1, 2], np.int64)
        with pytest.raises(ValueError,
                           match="gather_rows: device=cuda requested but no CUDA device"):
            _C.gather_rows(fake_cuda(src), fake_cuda(idx),
                           fake_cuda(np.zeros((2, 4), np.float32)))
        t = tessera.DistGraph("cora", part_config=cora_one).ndata["label"]
        with pytest.raises(ValueError, match="'.*label' read_into: device=cuda requested but no"):
            t._dist.read_into(idx, fake_cuda(np.zeros(2, np.int64)))


# --- CPU: DistTensor ----------------------------------------------------------------------------
def test_dist_tensor_read_into_a_cpu_output(cora_one):
    g = tessera.DistGraph("cora", part_config=cora_one)
    ids = np.array([5, 0, 2707, 5, 1000], np.int64)
    for name in ("feat", "label", "train_mask"):
        t = g.ndata[name]
        want = t.gather(ids)
        out = np.empty_like(want)
        assert t._dist.read_into(ids, out) is out and bits(out) == bits(want)
        tt = torch.empty(want.shape, dtype=t.dtype)
        t._dist.read_into(ids, tt)
        assert bits(tt) == bits(want)
        # torch CPU IDs: a CPU tensor, as before
        r = t[torch.from_numpy(ids)]
        assert r.device.type == "cpu" and bits(r) == bits(want)
    t = g.ndata["feat"]
    with pytest.raises(TypeError, match=r"read_into: out is float64, the tensor is"):
        t._dist.read_into(ids, np.empty((5, t.shape[1]), np.float64))
    with pytest.raises(ValueError, match=r"out has shape \[4, 1433\] but 5 IDs"):
        t._dist.read_into(ids, np.empty((4, t.shape[1]), t._dtype))
    with pytest.raises(IndexError, match="row ID 2708 at position 0"):
        t._dist.read_into(np.array([2708]), np.empty((1, t.shape[1]), t._dtype))
    with pytest.raises(TypeError, match="CPU or a CUDA device"):
        t._dist.read_into(ids, _C._device_view(np.empty((5, t.shape[1]), t._dtype), 9, 0))


def test_ids_helpers_keep_cpu_results_on_the_cpu(cora_parts):
    from tessera._tensor import device_of, on_device_of, to_numpy_ids

    ids = torch.tensor([3, 1, 2], dtype=torch.int32)
    assert to_numpy_ids(ids).dtype == np.int64 and to_numpy_ids(ids).tolist() == [3, 1, 2]
    assert device_of(ids) is None and device_of(np.arange(3)) is None
    assert on_device_of(np.arange(3), ids).device.type == "cpu"
    config, _, _ = cora_parts
    g = tessera.DistGraph("cora", part_config=config)  # simulated: 2 parts in this process
    pb = g.get_partition_book()
    assert pb.nid2partid(torch.tensor([0, 2707])).device.type == "cpu"
    assert bits(g.ndata["feat"].read_to(torch.tensor([7, 3]), "cpu")) == \
        bits(g.ndata["feat"].gather(np.array([7, 3])))


def test_pick_device():
    from tessera.utils import local_rank, pick_device

    assert pick_device("cpu") == torch.device("cpu")
    assert pick_device("auto").type == ("cuda" if HAVE_GPU else "cpu")
    with pytest.raises(ValueError, match="--device must be auto, cpu, cuda or cuda:N"):
        pick_device("tpu")
    if not HAVE_GPU:
        with pytest.raises(ValueError, match="torch sees no CUDA device"):
            pick_device("cuda")
    assert isinstance(local_rank(), int)


def test_edge_loader_moves_pair_graphs_and_blocks_to_the_device(cora_one):
    g = tessera.DistGraph("cora", part_config=cora_one)
    kw = dict(batch_size=256, seed=3, shuffle=False,
              negative_sampler=tessera.dataloading.negative_sampler.Uniform(1))
    eids = np.arange(600)
    a = next(iter(tessera.EdgeDataLoader(g, eids, tessera.NeighborSampler([3]), **kw)))
    b = next(iter(tessera.EdgeDataLoader(g, eids, tessera.NeighborSampler([3]),
                                         device=torch.device("cpu"), **kw)))
    for x, y in zip(a[1].edges() + a[2].edges() + a[3][0].edges(),
                    b[1].edges() + b[2].edges() + b[3][0].edges()):
        assert isinstance(y, torch.Tensor) and torch.equal(x, y)
    assert torch.equal(a[1].eids, b[1].eids)


def test_neighbor_sampler_device_argument_is_checked(cora_one):
    g = tessera.DistGraph("cora", part_config=cora_one)
    with pytest.raises(ValueError, match="device must be 'cpu' or 'cuda'"):
        tessera.NeighborSampler([3], device="gpu")
    seeds = np.arange(10)
    gpu = tessera.NeighborSampler([3, 2], device="cuda")
    if not _C.cuda_compiled:
        with pytest.raises(tessera.NotCompiledError, match="DistDeviceSampler: not_compiled_with_cuda"):
            gpu.sample_blocks(g, seeds)
    elif _C.cuda_device_count() == 0:
        with pytest.raises(ValueError, match="no CUDA device"):
            gpu.sample_blocks(g, seeds)


# --- CUDA: the CUDA path against the CPU path, bit for bit ------------------------------------
@needs_cuda_build
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64])
@pytest.mark.parametrize("shape", [(1000,), (1000, 7), (1000, 64), (1000, 3, 5)])
@pytest.mark.parametrize("idx_dtype", [torch.int32, torch.int64])
def test_gather_and_scatter_cuda_equal_the_cpu_twin(dtype, shape, idx_dtype):
    g = torch.Generator().manual_seed(4)
    src = (torch.randn(shape, generator=g) * 100).to(dtype)
    idx = torch.randint(0, shape[0], (4097,), generator=g).to(idx_dtype)
    want = tessera.ops.gather_rows(src, idx)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):  # the op runs on torch's current stream: this one
        d_src, d_idx = src.cuda(), idx.cuda()
        got = tessera.ops.gather_rows(d_src, d_idx)
        assert got.device == d_src.device
    torch.cuda.synchronize()
    assert bits(got) == bits(want)
    # scatter of unique indices (bit-identity is promised for those only)
    perm = torch.randperm(shape[0], generator=g)[:513].to(idx_dtype)
    rows = (torch.randn((513,) + shape[1:], generator=g) * 100).to(dtype)
    dst = torch.zeros(shape, dtype=dtype)
    tessera.ops.scatter_rows(rows, perm, dst)
    d_dst = torch.zeros(shape, dtype=dtype, device="cuda")
    tessera.ops.scatter_rows(rows.cuda(), perm.cuda(), d_dst)
    assert bits(d_dst) == bits(dst)
    # _C directly, legacy default stream, into a given output
    out = torch.empty_like(got)
    assert _C.gather_rows(d_src, d_idx, out) is out
    torch.cuda.synchronize()
    assert bits(out) == bits(want)


@needs_cuda_build
def test_cuda_bad_index_and_mixed_devices():
    src = torch.zeros(10, 4, device="cuda")
    with pytest.raises(IndexError, match=r"gather_rows: idx\[2\] = 10 is outside \[0, 10\)"):
        tessera.ops.gather_rows(src, torch.tensor([0, 1, 10, 3], device="cuda"))
    src = torch.ones(10, 4, device="cuda")
    out = tessera.ops.gather_rows(src, torch.tensor([1, 99], device="cuda"),
                                  check_indices=False)  # no sync; the bad row is zero-filled
    assert out.cpu().tolist() == [[1.0] * 4, [0.0] * 4]
    with pytest.raises(TypeError, match=r"src: cuda:0, idx: cpu, out: cuda:0"):
        tessera.ops.gather_rows(src, torch.tensor([1]))
    with pytest.raises(TypeError, match=r"src: cpu, idx: cpu, out: cuda:0"):
        tessera.ops.gather_rows(src.cpu(), torch.tensor([1]), torch.empty(1, 4, device="cuda"))


@needs_cuda_build
def test_dist_tensor_rows_land_on_cuda_written_in_place(cora_one):
    g = tessera.DistGraph("cora", part_config=cora_one)
    ids = torch.tensor([5, 0, 2707, 5, 1000, 17], device="cuda")
    calls = []

    class Spy:  # records that the read went through C++ with a CUDA output (IDs on the host,
        # or on the device: read_into_ids, which copies them to the host only to route them)
        def __init__(self, t):
            self.t = t

        def read_into(self, i, out, stream):
            calls.append((out.device.type, out.data_ptr(), stream))
            return self.t.read_into(i, out, stream)

        def read_into_ids(self, i, out, stream):
            calls.append((out.device.type, out.data_ptr(), stream))
            return self.t.read_into_ids(i, out, stream)

    for name in ("feat", "label", "train_mask"):
        t = g.ndata[name]
        real = t._dist
        t._dist = Spy(real)
        try:
            rows = t[ids]
        finally:
            t._dist = real
        assert rows.device == ids.device and rows.dtype == t.dtype
        assert calls[-1][0] == "cuda" and calls[-1][1] == rows.data_ptr()
        assert bits(rows) == bits(t[ids.cpu()])
    # DistEmbedding: rows on the IDs' device, gradients flow back to the host rows.
    emb = tessera.DistEmbedding(2708, 8, "devices-emb",
                                init_func=lambda s, d: torch.ones(s) * 0.5)
    opt = tessera.optim.SparseAdagrad([emb], lr=0.1)
    r = emb(ids)
    assert r.device == ids.device
    (r.sum()).backward()
    opt.step()
    assert (emb.weight[torch.tensor([5])] < 0.5).all()


@needs_gpu
def test_simulated_dist_tensor_rows_on_cuda(cora_parts):
    config, _, _ = cora_parts
    g = tessera.DistGraph("cora", part_config=config)
    ids = torch.tensor([2707, 0, 1500], device="cuda")
    rows = g.ndata["feat"][ids]
    assert rows.device.type == "cuda" and bits(rows) == bits(g.ndata["feat"][ids.cpu()])
    from tessera._tensor import to_numpy_ids

    assert to_numpy_ids(ids).tolist() == [2707, 0, 1500]
    assert g.get_partition_book().nid2partid(ids).device.type == "cuda"


@needs_gpu
def test_train_sage_one_epoch_cuda_reaches_a_sane_accuracy(tmp_path):
    sys.path.insert(0, os.path.join(REPO, "python", "examples"))
    import train_sage

    res = tmp_path / "res.json"
    argv = ["--dataset", CORA, "--part-dir", str(tmp_path / "parts"), "--quiet",
            "--plot", str(tmp_path / "loss.png"), "--results", str(res), "--threads", "1",
            "--epochs", "1", "--batch-size", "8", "--dropout", "0.2", "--device", "cuda"]
    assert train_sage.main(argv) == 0
    r = json.loads(res.read_text())
    assert r["device"].startswith("cuda")
    # 60-76 % on the CPU for seeds 0-4 with these settings; chance is about 30 %.
    assert r["mean"] >= 50.0, r["mean"]


@needs_cuda_build
@pytest.mark.parametrize("use_uva", [False, True])
@pytest.mark.parametrize("replace", [False, True])
def test_neighbor_sampler_on_cuda_equals_the_cpu_sampler(cora_one, use_uva, replace):
    g = tessera.DistGraph("cora", part_config=cora_one)
    cpu = tessera.NeighborSampler([10, 5], replace=replace)
    gpu = tessera.NeighborSampler([10, 5], replace=replace, device="cuda", use_uva=use_uva)
    seeds = np.random.default_rng(0).permutation(g.num_nodes())[:300]
    for batch in range(3):
        a = cpu.sample_blocks(g, seeds, seed=7, epoch=1, batch=batch)
        b = gpu.sample_blocks(g, seeds, seed=7, epoch=1, batch=batch)
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
        for x, y in zip(a[2], b[2]):
            assert x.num_dst == y.num_dst
            for u, v in zip(x.edges() + (x.eids, x.srcnodes), y.edges() + (y.eids, y.srcnodes)):
                assert torch.equal(u, v)


@needs_cuda_build
@pytest.mark.parametrize("exclude", [None, "self"])
def test_edge_loader_sampling_on_cuda_equals_the_cpu_loader(cora_one, exclude):
    """Link-prediction batches whose blocks are sampled on the GPU (the CUDA exclusion twin
    leaves each batch's own edges out of every hop) equal the CPU loader's, batch for batch."""
    g = tessera.DistGraph("cora", part_config=cora_one)
    eids = np.arange(0, g.num_edges(), 7, dtype=np.int64)

    def batches(device):
        sampler = tessera.NeighborSampler([5, 5], device=device)
        dl = tessera.EdgeDataLoader(g, eids, sampler, batch_size=128, seed=3,
                                    negative_sampler=tessera.dataloading.negative_sampler.Uniform(2),
                                    exclude=exclude)
        return list(dl)

    cpu, gpu = batches("cpu"), batches("cuda")
    assert len(cpu) == len(gpu) > 3
    for (ia, pa, na, ba), (ib, pb, nb, bb) in zip(cpu, gpu):
        assert torch.equal(ia, ib)
        for u, v in zip(pa.edges() + na.edges(), pb.edges() + nb.edges()):
            assert torch.equal(u, v)
        for x, y in zip(ba, bb):
            assert x.num_dst == y.num_dst
            for u, v in zip(x.edges() + (x.eids, x.srcnodes), y.edges() + (y.eids, y.srcnodes)):
                assert torch.equal(u, v)
    if exclude == "self":  # the batch's own edges never reach message passing
        for _, pos, _, blocks in gpu:
            own = set(np.asarray(pos.eids).tolist())
            for blk in blocks:
                assert own.isdisjoint(np.asarray(blk.eids).tolist())
