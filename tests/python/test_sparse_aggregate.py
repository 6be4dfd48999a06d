# SPDX-License-Identifier: Apache-2.0
"""tessera.ops.spmm (CSR x dense, sum or mean, and its transpose) and the mean aggregation of
tessera.nn built on it for blocks whose edges are grouped by destination."""
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from conftest import needs_cuda_build, tessera
from tessera import _torch_ops
from tessera.nn import SAGEConv, _SortedMean, mean_aggregate
from tessera.ops import spmm


def random_csr(rows, cols, nnz, seed, dtype=np.int64):
    """A CSR pattern with some empty rows (dst sorted), as (indptr, indices, dst)."""
    rng = np.random.default_rng(seed)
    dst = np.sort(rng.integers(0, rows, nnz))
    dst = dst[dst % 5 != 2]  # rows 2, 7, ... have no entries
    indices = rng.integers(0, cols, dst.shape[0]).astype(dtype)
    indptr = np.searchsorted(dst, np.arange(rows + 1)).astype(dtype)
    return indptr, indices, dst


def dense_of(indptr, indices, rows, cols, reduce):
    a = np.zeros((rows, cols), dtype=np.float64)
    for r in range(rows):
        lo, hi = int(indptr[r]), int(indptr[r + 1])
        for e in range(lo, hi):
            a[r, indices[e]] += 1.0 / (hi - lo) if reduce == "mean" else 1.0
    return a


@pytest.mark.parametrize("reduce", ["sum", "mean"])
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_spmm_equals_the_dense_product(reduce, transpose, dtype):
    rows, cols, feat = 40, 30, 9
    indptr, indices, _ = random_csr(rows, cols, 200, seed=1, dtype=dtype)
    a = dense_of(indptr, indices, rows, cols, reduce)
    b = np.random.default_rng(2).standard_normal((rows if transpose else cols, feat)) \
        .astype(np.float32)
    out = spmm(indptr, indices, cols, b, reduce=reduce, transpose=transpose)
    want = (a.T if transpose else a) @ b.astype(np.float64)
    assert out.shape == want.shape and out.dtype == np.float32
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    # torch tensors in, torch tensor out; the same bits as NumPy (one CPU twin).
    t = spmm(torch.from_numpy(indptr), torch.from_numpy(indices), cols, torch.from_numpy(b),
             reduce=reduce, transpose=transpose)
    assert isinstance(t, torch.Tensor) and np.array_equal(t.numpy(), out)
    # Python lists for the pattern, as gather_rows takes them.
    lists = spmm(indptr.tolist(), indices.tolist(), cols, b, reduce=reduce, transpose=transpose)
    assert np.array_equal(lists, out)


def test_spmm_rejects_bad_operands():
    indptr, indices, _ = random_csr(10, 8, 30, seed=3)
    b = np.ones((8, 4), dtype=np.float32)
    with pytest.raises(TypeError, match="both be int32 or both int64"):
        spmm(indptr, indices.astype(np.int32), 8, b)
    with pytest.raises(IndexError, match="outside"):
        spmm(indptr, indices, 3, b[:3])
    with pytest.raises(ValueError, match="reduce"):
        spmm(indptr, indices, 8, b, reduce="max")
    with pytest.raises(ValueError, match="B has 7 rows"):
        spmm(indptr, indices, 8, b[:7])
    with pytest.raises(TypeError, match="float32"):
        spmm(indptr, indices, 8, b.astype(np.float64))
    with pytest.raises(ValueError, match="engine must be 'cusparse' or 'rows', got 'dense'"):
        spmm(indptr, indices, 8, b, engine="dense")
    with pytest.raises(ValueError, match="indptr"):
        spmm(indptr[::-1].copy(), indices, 8, b)


def test_sorted_mean_gives_the_index_path_values_and_gradients():
    """The autograd function the GPU path runs, here over the CPU twin: forward and the
    gradient w.r.t. the source features equal index_select + index_add_'s."""
    torch.manual_seed(0)
    num_src, num_dst, feat = 60, 25, 6
    indptr, src, dst = (torch.from_numpy(x) for x in random_csr(num_dst, num_src, 150, seed=4))
    h = torch.randn(num_src, feat, dtype=torch.float32, requires_grad=True)
    ref = mean_aggregate(h, src, dst, num_dst)
    out = _SortedMean.apply(h, src, indptr, "rows")
    torch.testing.assert_close(out, ref)
    assert torch.all(out[2] == 0)  # a destination without edges
    g = torch.randn(num_dst, feat)
    (want,) = torch.autograd.grad(ref, h, g)
    (got,) = torch.autograd.grad(out, h, g)
    torch.testing.assert_close(got, want)


def test_the_torch_operator_library_is_built_and_loads():
    """pip install with torch present builds libtessera_torch_ops.so for that torch."""
    assert _torch_ops.ops() is not None, _torch_ops.why()
    assert torch.ops.tessera.torch_version() == torch.__version__.split("+")[0]


@pytest.mark.parametrize("num_src,num_dst,nnz,feat", [(60, 25, 150, 6), (7, 5, 0, 3),
                                                      (40, 1, 30, 33), (1, 3, 4, 1)])
def test_torch_op_mean_aggregate_is_the_spmm_twin_with_autograd(num_src, num_dst, nnz, feat):
    """torch.ops.tessera.mean_aggregate on the CPU: forward the bits of spmm(mean), the gradient
    w.r.t. h_src the bits of spmm(mean, transpose), both the index path's values; no graph
    without grad; the same through nn.mean_aggregate's operator (src, indptr not contiguous)."""
    ops = _torch_ops.ops()
    assert ops is not None, _torch_ops.why()
    torch.manual_seed(num_src)
    indptr, src, dst = (torch.from_numpy(x) for x in random_csr(num_dst, num_src, nnz, seed=8))
    h = torch.randn(num_src, feat, requires_grad=True)
    out = ops.mean_aggregate(h, src, indptr)
    assert out.shape == (num_dst, feat) and out.requires_grad
    assert torch.equal(out, spmm(indptr, src, num_src, h.detach(), reduce="mean"))
    torch.testing.assert_close(out, mean_aggregate(h, src, dst, num_dst))
    g = torch.randn(num_dst, feat)
    (got,) = torch.autograd.grad(out, h, g)
    assert torch.equal(got, spmm(indptr, src, num_src, g, reduce="mean", transpose=True))
    (want,) = torch.autograd.grad(mean_aggregate(h, src, dst, num_dst), h, g)
    torch.testing.assert_close(got, want)
    with torch.no_grad():
        assert ops.mean_aggregate(h, src, indptr).grad_fn is None
    strided = torch.stack([src, src], 1)[:, 0]
    assert strided.is_contiguous() == (src.numel() < 2)
    assert torch.equal(ops.mean_aggregate(h, strided, indptr), out)


@pytest.mark.parametrize("in_feats,out_feats,bias", [(9, 4, True), (4, 9, True), (6, 6, False)])
def test_torch_op_sage_layer_is_sageconv_operator_for_operator(in_feats, out_feats, bias):
    """torch.ops.tessera.sage_layer on the CPU: SAGEConv's forward over the operator's mean
    aggregation (projection before the aggregation when it shrinks the rows, or after), the
    same bits forward and in every gradient (x, both weights, the bias)."""
    ops = _torch_ops.ops()
    assert ops is not None, _torch_ops.why()
    torch.manual_seed(in_feats * 10 + out_feats)
    num_src, num_dst = 50, 20
    indptr, src, _ = (torch.from_numpy(x) for x in random_csr(num_dst, num_src, 120, seed=9))
    conv = SAGEConv(in_feats, out_feats, bias=bias)
    if bias:
        torch.nn.init.normal_(conv.bias)

    def python_layer(x):  # nn.py's unfused path with the operator's aggregation
        h_dst = x[:num_dst]
        if in_feats > out_feats:
            h_neigh = ops.mean_aggregate(conv.fc_neigh(x), src, indptr)
        else:
            h_neigh = conv.fc_neigh(ops.mean_aggregate(x, src, indptr))
        return conv.fc_self(h_dst) + h_neigh  # fc_self holds the bias (DGL's layout)

    runs = []
    for layer in (python_layer, lambda x: ops.sage_layer(
            x, src, indptr, conv.fc_self.weight, conv.fc_neigh.weight, conv.bias)):
        conv.zero_grad()
        x = torch.randn(num_src, in_feats, generator=torch.Generator().manual_seed(1),
                        requires_grad=True)
        out = layer(x)
        out.backward(torch.randn(out.shape, generator=torch.Generator().manual_seed(2)))
        grads = [x.grad, conv.fc_self.weight.grad, conv.fc_neigh.weight.grad]
        runs.append([out.detach()] + grads + ([conv.bias.grad] if bias else []))
    assert runs[0][0].shape == (num_dst, out_feats)
    for a, b in zip(*runs):
        assert torch.equal(a, b)


def test_hooks_on_the_projections_are_seen():
    """SAGEConv leaves its one-call path when a forward hook wants fc_self / fc_neigh called."""
    from tessera.nn import _hooked

    conv = SAGEConv(4, 3)
    assert not _hooked(conv.fc_self, conv.fc_neigh)
    h = conv.fc_neigh.register_forward_pre_hook(lambda m, i: None)
    assert _hooked(conv.fc_self, conv.fc_neigh)
    h.remove()
    g = torch.nn.modules.module.register_module_forward_hook(lambda m, i, o: None)
    assert _hooked(conv.fc_self, conv.fc_neigh)
    g.remove()
    assert not _hooked(conv.fc_self, conv.fc_neigh)


def test_torch_op_sage_layer_names_bad_operands():
    ops = _torch_ops.ops()
    assert ops is not None, _torch_ops.why()
    indptr, src, _ = (torch.from_numpy(x) for x in random_csr(10, 8, 30, seed=3))
    x, w, b = torch.ones(12, 4), torch.ones(3, 4), torch.ones(3)
    with pytest.raises(ValueError, match="10 destinations but x has 8 rows"):
        ops.sage_layer(x[:8], src, indptr, w, w, b)
    with pytest.raises(ValueError, match=r"w_self and w_neigh must both be \[out, 4\]"):
        ops.sage_layer(x, src, indptr, w, torch.ones(3, 5), b)
    with pytest.raises(ValueError, match=r"bias must be \[3\]"):
        ops.sage_layer(x, src, indptr, w, w, torch.ones(4))
    with pytest.raises(TypeError, match="h_src must be float32"):
        ops.sage_layer(x.double(), src, indptr, w.double(), w.double(), b.double())
    with pytest.raises(IndexError, match="outside"):
        ops.sage_layer(x, src + 12, indptr, w, w, b)


def test_torch_op_mean_aggregate_names_bad_operands():
    ops = _torch_ops.ops()
    assert ops is not None, _torch_ops.why()
    indptr, src, _ = (torch.from_numpy(x) for x in random_csr(10, 8, 30, seed=3))
    h = torch.ones(8, 4)
    with pytest.raises(TypeError, match="h_src must be float32"):
        ops.mean_aggregate(h.double(), src, indptr)
    with pytest.raises(ValueError, match="h_src must be 2-D"):
        ops.mean_aggregate(h[:, 0], src, indptr)
    with pytest.raises(TypeError, match="src and indptr must be int64"):
        ops.mean_aggregate(h, src.int(), indptr)
    with pytest.raises(ValueError, match="at least one entry"):
        ops.mean_aggregate(h, src, indptr[:0])
    with pytest.raises(IndexError, match="outside"):
        ops.mean_aggregate(h[:3], src, indptr)
    with pytest.raises(ValueError, match="indptr"):
        ops.mean_aggregate(h, src, indptr.flip(0))
    with pytest.raises(ValueError, match="engine must be 'rows' or 'cusparse', got 'dense'"):
        ops.mean_aggregate(h, src, indptr, "dense")
    if tessera._C.cuda_compiled and torch.cuda.is_available():
        with pytest.raises(ValueError, match="one device"):
            ops.mean_aggregate(h.cuda(), src, indptr)


def test_torch_ops_can_be_turned_off():
    """TESSERA_TORCH_OPS=0: no library, the reason said, the DLPack path's results."""
    code = ("from tessera import _torch_ops; print(_torch_ops.ops() is None, _torch_ops.why())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "TESSERA_TORCH_OPS": "0"}).stdout
    assert out.strip() == "True disabled by TESSERA_TORCH_OPS=0"


def test_mean_aggregate_on_the_cpu_builds_no_message_per_edge(monkeypatch):
    """float32 features over edges grouped by destination: the CPU twin's CSR product (the bits of
    spmm(mean), gradient the transposed product), not index_select + index_add_, whose [E, F]
    message tensor made full-neighbor inference several times slower than DGL's. Unsorted
    edges, float64 and TESSERA_MEAN_AGGREGATE=index keep index_add_."""
    indptr, src, dst = random_csr(50, 80, 600, seed=5)
    src_t, dst_t = torch.from_numpy(src), torch.from_numpy(dst)
    h = torch.randn(80, 16, requires_grad=True)
    adds = []
    real = torch.Tensor.index_add_
    monkeypatch.setattr(torch.Tensor, "index_add_",
                        lambda self, *a, **k: adds.append(1) or real(self, *a, **k))
    out = mean_aggregate(h, src_t, dst_t, 50, dst_sorted=True)
    out.backward(torch.ones_like(out))
    assert adds == []
    assert torch.equal(out.detach(), spmm(indptr, src, 80, h.detach(), reduce="mean"))
    assert torch.equal(h.grad, spmm(indptr, src, 80, torch.ones(50, 16), reduce="mean",
                                    transpose=True))
    mean_aggregate(h, src_t, dst_t, 50, dst_sorted=False)
    assert len(adds) == 2  # the sums and the degrees
    mean_aggregate(h.double(), src_t, dst_t, 50, dst_sorted=True)
    assert len(adds) == 4
    monkeypatch.setenv("TESSERA_MEAN_AGGREGATE", "index")
    ref = mean_aggregate(h, src_t, dst_t, 50, dst_sorted=True)
    assert len(adds) == 6
    torch.testing.assert_close(out, ref)


def test_spmm_takes_a_thread_count_and_gives_the_same_bits():
    """num_threads (the CPU twin's threads; tessera.nn passes torch's) never changes the result;
    a negative count is refused naming it."""
    indptr, src, _ = random_csr(300, 200, 6000, seed=9)
    h = torch.randn(200, 24)
    g = torch.randn(300, 24)
    for transpose, x in ((False, h), (True, g)):
        ref = spmm(indptr, src, 200, x, reduce="mean", transpose=transpose, num_threads=1)
        for t in (2, 3, 0):
            assert torch.equal(spmm(indptr, src, 200, x, reduce="mean", transpose=transpose,
                                    num_threads=t), ref)
    with pytest.raises(ValueError, match="num_threads is negative"):
        spmm(indptr, src, 200, h, num_threads=-1)


def test_mean_aggregate_names_a_bad_mode(monkeypatch):
    monkeypatch.setenv("TESSERA_MEAN_AGGREGATE", "cusparse")  # the engine's name, not a mode
    h = torch.ones(3, 2)
    idx = torch.tensor([0, 1, 2])
    with pytest.raises(ValueError, match="TESSERA_MEAN_AGGREGATE must be one of auto, rows, csr, index"):
        mean_aggregate(h, idx, idx, 3)


def test_tessera_blocks_are_grouped_by_destination(cora, cora_one):
    """The contract tessera.nn relies on (Block.dst_sorted): every sampler's blocks list each
    destination's edges together, destinations in ascending order."""
    def check(blocks):
        for b in blocks:
            assert b.dst_sorted
            d = torch.as_tensor(b.dst)
            assert bool((d[1:] >= d[:-1]).all())

    seeds = np.random.default_rng(0).permutation(cora.num_nodes)[:300]
    for fanouts in ([10, 25], [15, 10, 5], [-1, 5]):
        for replace in (False, True):
            check(tessera.NeighborSampler(fanouts, replace=replace)
                  .sample_blocks(cora, seeds, seed=5)[2])
    g = tessera.DistGraph("cora", part_config=cora_one)
    dl = tessera.DistNodeDataLoader(g, seeds, tessera.NeighborSampler([5, 10]), batch_size=64)
    for _, _, blocks in dl:
        check(blocks)
    el = tessera.EdgeDataLoader(g, np.arange(0, g.num_edges(), 9), tessera.NeighborSampler([5, 5]),
                                batch_size=128, exclude="self",
                                negative_sampler=tessera.dataloading.negative_sampler.Uniform(1))
    for *_, blocks in el:
        check(blocks)


@needs_cuda_build
@pytest.mark.parametrize("reduce", ["sum", "mean"])
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("engine", ["cusparse", "rows"])
@pytest.mark.parametrize("feat,dtype", [(100, np.int64), (7, np.int32), (300, np.int64)])
def test_spmm_on_cuda_equals_the_cpu_twin(reduce, transpose, engine, feat, dtype):
    """Both engines against the CPU twin, over feature widths that take one, four and eight
    columns per lane (300: two chunks of 256); the row engine's forward to the bit."""
    rows, cols = 3000, 2000
    indptr, indices, _ = random_csr(rows, cols, 40000, seed=6, dtype=dtype)
    b = np.random.default_rng(7).standard_normal((rows if transpose else cols, feat)) \
        .astype(np.float32)
    want = spmm(indptr, indices, cols, b, reduce=reduce, transpose=transpose)
    dev = torch.device("cuda")
    got = spmm(torch.from_numpy(indptr).to(dev), torch.from_numpy(indices).to(dev), cols,
               torch.from_numpy(b).to(dev), reduce=reduce, transpose=transpose, engine=engine)
    assert got.device.type == "cuda"
    if engine == "rows" and not transpose:
        assert np.array_equal(got.cpu().numpy(), want)
    else:
        torch.testing.assert_close(got.cpu(), torch.from_numpy(want), rtol=1e-5, atol=1e-5)


@needs_cuda_build
def test_sage_layer_on_cuda_blocks_equals_the_index_path(cora_one, monkeypatch):
    """SAGEConv over the GPU loader's blocks: the CSR products of either engine
    (TESSERA_MEAN_AGGREGATE=rows, csr), by the torch operator and through tessera.ops, give the
    index_select + index_add_ path's outputs and gradients up to float32 summation order."""
    g = tessera.DistGraph("cora", part_config=cora_one)
    g.place_on_device(["label", "feat"])
    dev = torch.device("cuda")
    assert _torch_ops.ops() is not None, _torch_ops.why()
    dl = tessera.DistNodeDataLoader(g, np.arange(512), tessera.NeighborSampler(
        [10, 25], device="cuda", prefetch_node_feats=["feat"]), batch_size=256)
    torch.manual_seed(1)
    conv = conv2 = None
    n = 0
    for _, _, blocks in dl:
        x = blocks[0].srcdata["feat"].float()
        assert x.is_cuda and blocks[0].dst_sorted
        for b in blocks:  # the loader's CSR offsets: what a search over dst gives
            want = torch.searchsorted(b.dst, torch.arange(b.num_dst + 1, device=dev))
            assert b.indptr is not None and torch.equal(b.indptr, want)
        if conv is None:
            conv, conv2 = SAGEConv(x.shape[1], 16).to(dev), SAGEConv(16, 7).to(dev)
        runs = []
        # rows and csr by the torch operator, then through tessera.ops (DLPack), then index.
        for mode, via_op in (("rows", True), ("csr", True), ("rows", False), ("csr", False),
                             ("index", False)):
            monkeypatch.setenv("TESSERA_MEAN_AGGREGATE", mode)
            if not via_op:
                monkeypatch.setattr(_torch_ops, "_ops", None)
            conv.zero_grad()
            h = conv(blocks[0], x)
            h.retain_grad()
            out = conv2(blocks[1], h)
            out.square().sum().backward()
            runs.append((out.detach(), h.grad.detach(), conv.fc_neigh.weight.grad.detach()))
        # The row engine's forward by either path: one kernel, the same bits.
        assert torch.equal(runs[0][0], runs[2][0])
        # A hook on a projection sees its call: the layer leaves the one-call path for it.
        monkeypatch.undo()
        seen = []
        hook = conv.fc_self.register_forward_hook(lambda m, i, o: seen.append(o.shape))
        conv(blocks[0], x)
        hook.remove()
        assert seen == [(blocks[0].num_dst, 16)]
        for other in runs[1:]:
            for a, b in zip(runs[0], other):
                torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
        n += 1
    assert n == 2
