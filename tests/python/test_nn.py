# SPDX-License-Identifier: Apache-2.0
"""SAGEConv against a hand computation; GraphSAGE over sampled blocks."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tessera  # noqa: E402
from conftest import needs_cuda_build  # noqa: E402


def test_sageconv_matches_hand_computation():
    from tessera.nn import SAGEConv

    torch.manual_seed(0)
    # 4 source nodes, the first 2 are the destinations; edges src -> dst:
    # dst 0 <- {1, 2, 3}, dst 1 <- {0}. Node 3 feeds only dst 0.
    src = torch.tensor([1, 2, 3, 0])
    dst = torch.tensor([0, 0, 0, 1])
    h = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]])
    conv = SAGEConv(2, 3)
    with torch.no_grad():
        conv.fc_self.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))
        conv.fc_neigh.weight.copy_(torch.tensor([[2.0, 0.0], [0.0, -1.0], [0.5, 0.5]]))
        conv.bias.copy_(torch.tensor([0.1, 0.2, 0.3]))
    out = conv((torch.stack([src, dst]), (4, 2)), h)
    mean0 = (h[1] + h[2] + h[3]) / 3  # [5, 6]
    mean1 = h[0]  # [1, 2]
    want = torch.stack([
        torch.tensor([1.0, 2.0, 3.0]) + torch.tensor([2 * mean0[0], -mean0[1],
                                                      0.5 * (mean0[0] + mean0[1])]),
        torch.tensor([3.0, 4.0, 7.0]) + torch.tensor([2 * mean1[0], -mean1[1],
                                                      0.5 * (mean1[0] + mean1[1])]),
    ]) + torch.tensor([0.1, 0.2, 0.3])
    assert torch.allclose(out, want)
    # in_feats > out_feats projects before aggregating: same numbers.
    conv2 = SAGEConv(2, 1, bias=False)
    with torch.no_grad():
        conv2.fc_self.weight.copy_(torch.tensor([[1.0, -1.0]]))
        conv2.fc_neigh.weight.copy_(torch.tensor([[0.5, 2.0]]))
    out2 = conv2((torch.stack([src, dst]), (4, 2)), h)
    want2 = torch.tensor([[1 - 2 + 0.5 * 5 + 2 * 6], [3 - 4 + 0.5 * 1 + 2 * 2]], dtype=torch.float)
    assert torch.allclose(out2, want2)


def test_node_without_edges_gets_only_its_own_term():
    from tessera.nn import SAGEConv

    conv = SAGEConv(2, 2)
    h = torch.randn(3, 2)
    out = conv((torch.tensor([[2], [0]]), (3, 2)), h)
    want1 = conv.fc_self(h[1:2])  # with the bias
    assert torch.allclose(out[1:2], want1)


def test_sageconv_on_tessera_blocks_and_gradients(cora):
    from tessera.nn import GraphSAGE

    sampler = tessera.NeighborSampler([5, 5])
    input_nodes, seeds, blocks = sampler.sample_blocks(cora, np.arange(32), seed=1)
    x = torch.from_numpy(cora.ndata["feat"][np.asarray(input_nodes)].astype(np.float32))
    model = GraphSAGE(x.shape[1], 16, 7, num_layers=2)
    out = model(blocks, x)
    assert out.shape == (32, 7)
    out.sum().backward()
    assert all(p.grad is not None for p in model.parameters())
    pyg = tessera.convert.to_pyg(blocks[1])
    assert pyg[0].shape == (2, blocks[1].num_edges()) and pyg[1] == (blocks[1].num_src,
                                                                     blocks[1].num_dst)


def test_dgl_block_conversion_when_dgl_is_installed(cora):
    pytest.importorskip("dgl")
    _, _, blocks = tessera.NeighborSampler([3]).sample_blocks(cora, np.arange(8), seed=0)
    b = tessera.convert.to_dgl_block(blocks[0])
    assert b.num_src_nodes() == blocks[0].num_src and b.num_edges() == blocks[0].num_edges()


@pytest.mark.parametrize("dtype,fan_in", [(torch.bfloat16, 1000), (torch.float16, 5000)])
def test_mean_of_low_precision_features_counts_past_their_integers(dtype, fan_in):
    # bfloat16 counts no further than 256, float16 no further than 2048: one destination with
    # more in-edges than that must still average its sources.
    from tessera.nn import AvgPooling, mean_aggregate, readout_nodes

    src, dst = torch.arange(1, fan_in + 1), torch.zeros(fan_in, dtype=torch.long)
    h = torch.ones(fan_in + 1, 4, dtype=dtype)
    out = mean_aggregate(h, src, dst, 2)
    assert out.dtype == dtype
    assert out.float().tolist() == [[1.0] * 4, [0.0] * 4]
    vals = torch.linspace(-3, 5, fan_in + 1).to(dtype)[:, None]
    ref = vals[1:].double().mean()
    assert float(mean_aggregate(vals, src, dst, 1)) == pytest.approx(float(ref), abs=2e-2)
    ids = torch.zeros(fan_in, dtype=torch.long)
    got = readout_nodes(h[1:], ids, 2, "mean")
    assert got.dtype == dtype and got.float().tolist() == [[1.0] * 4, [0.0] * 4]

    class Batch:
        graph_ids, num_graphs = ids, 1

    assert AvgPooling()(Batch(), h[1:]).float().tolist() == [[1.0] * 4]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_softmax_aggregate_gives_zeros_without_in_edges_in_any_dtype(dtype):
    from tessera.nn import softmax_aggregate

    # Node 2 has no in-edges.
    msg = torch.tensor([[1.0], [2.0], [3.0]], dtype=dtype, requires_grad=True)
    t = torch.tensor(1.0, dtype=dtype, requires_grad=True)
    out = softmax_aggregate(msg, torch.tensor([0, 0, 1]), 3, t)
    assert out.dtype == dtype
    e1, e2 = torch.exp(torch.tensor(1.0)), torch.exp(torch.tensor(2.0))
    want = [float((e1 * 1 + e2 * 2) / (e1 + e2)), 3.0, 0.0]
    tol = 1e-6 if dtype in (torch.float32, torch.float64) else 1e-2
    assert out.float().flatten().tolist() == pytest.approx(want, abs=tol)
    out.sum().backward()
    assert torch.isfinite(msg.grad).all() and torch.isfinite(t.grad).all()


def test_inference_leaves_the_model_in_its_mode(cora_one):
    from tessera.nn import GraphSAGE

    g = tessera.DistGraph("cora", part_config=cora_one)
    feat = g.ndata["feat"]

    def x_of(ids):
        return torch.as_tensor(np.asarray(feat[ids]), dtype=torch.float32)

    model = GraphSAGE(int(feat.shape[1]), 8, 7, dropout=0.5)
    model.train()
    out = model.inference(g, x_of, batch_size=1000)
    assert out.shape == (g.num_nodes(), 7)
    assert model.training and all(m.training for m in model.modules())
    model.eval()
    model.layers[0].train()  # a mixed state comes back as it was
    model.inference(g, x_of, batch_size=1000)
    assert [m.training for m in model.modules()] == [
        m is model.layers[0] or m in list(model.layers[0].modules()) for m in model.modules()]

    def fail(ids):
        raise RuntimeError("x_of failed")

    model.train()
    with pytest.raises(RuntimeError, match="x_of failed"):
        model.inference(g, fail)
    assert model.training and model.dropout.training


def test_feat_drop_drops_a_block_once_as_dgl():
    from tessera.nn import SAGEConv

    torch.manual_seed(0)
    conv = SAGEConv(1000, 1000, feat_drop=0.5, bias=False)
    with torch.no_grad():
        conv.fc_self.weight.copy_(torch.eye(1000))
        conv.fc_neigh.weight.copy_(torch.eye(1000))
    h = torch.ones(1, 1000)
    # One node with an in-edge from itself: h_dst is the dropped h_src, so every channel is
    # dropped in both terms (0) or kept in both (2 + 2), never in one only (2).
    out = conv((torch.tensor([[0], [0]]), (1, 1)), h)
    assert set(out.unique().tolist()) == {0.0, 4.0}
    # A pair (h_src, h_dst) is dropped side by side, as DGL does.
    out = conv((torch.tensor([[0], [0]]), (1, 1)), (h, h))
    assert set(out.unique().tolist()) == {0.0, 2.0, 4.0}
    conv.eval()
    assert set(conv((torch.tensor([[0], [0]]), (1, 1)), h).unique().tolist()) == {2.0}


class _SortedBlock:
    """A block with its CSR offsets, as the GPU loader's: what SAGEConv's fused path takes."""
    dst_sorted = True

    def __init__(self, src, dst, num_src, num_dst):
        self.src, self.dst, self.num_src, self.num_dst = src, dst, num_src, num_dst
        self.indptr = torch.searchsorted(dst, torch.arange(num_dst + 1, device=dst.device))

    def edges(self):
        return self.src, self.dst

    def num_src_nodes(self):
        return self.num_src

    def num_dst_nodes(self):
        return self.num_dst


def _hub_block(device, fan_in=600):
    src = torch.arange(1, fan_in + 1, device=device)
    return _SortedBlock(src, torch.zeros(fan_in, dtype=torch.long, device=device), fan_in + 1, 1)


def test_autocast_keeps_sageconv_off_the_fused_operator(monkeypatch):
    # The fused operator aggregates float32 only; under autocast the projection before the
    # aggregation is 16-bit, so the layer must take the per-operator path.
    from tessera import nn as tnn

    calls = []

    class FusedOps:
        def sage_layer(self, x, *args):
            calls.append(x.dtype)
            return torch.zeros(1, 4)

    monkeypatch.setattr(tnn._torch_ops, "ops", lambda: FusedOps())
    monkeypatch.setattr(tnn, "_csr_engine",
                        lambda h, ordered: "rows" if h.dtype == torch.float32 else None)
    torch.manual_seed(0)
    conv = tnn.SAGEConv(16, 4)  # in > out: projected before aggregating
    block, x = _hub_block("cpu"), torch.randn(601, 16)
    conv(block, x)
    assert calls == [torch.float32]  # without autocast the fused operator runs
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = conv(block, x)
    assert calls == [torch.float32]
    monkeypatch.setattr(tnn._torch_ops, "ops", lambda: None)
    ref = conv(block, x)
    torch.testing.assert_close(y.float(), ref, rtol=2e-2, atol=2e-2)


@needs_cuda_build
def test_sageconv_under_cuda_autocast_matches_float32():
    from tessera import _torch_ops
    from tessera.nn import SAGEConv

    assert _torch_ops.ops() is not None, _torch_ops.why()
    dev = torch.device("cuda")
    torch.manual_seed(0)
    conv = SAGEConv(16, 4).to(dev)
    block, x = _hub_block(dev), torch.randn(601, 16, device=dev)
    ref = conv(block, x)  # the fused operator
    with torch.autocast("cuda", dtype=torch.float16):
        y = conv(block, x)  # the fused operator raised TypeError on the 16-bit projection
    torch.testing.assert_close(y.float(), ref, rtol=1e-2, atol=1e-2)


def test_graphsage_refuses_what_it_cannot_build():
    from tessera.nn import GraphSAGE

    with pytest.raises(ValueError, match="num_layers must be >= 1, got 0"):
        GraphSAGE(8, 16, 3, num_layers=0)
    # An unknown norm used to build a model without any norm.
    for norm in ("batch", "Layer", ""):
        with pytest.raises(ValueError, match=f"norm must be None or 'layer', got {norm!r}"):
            GraphSAGE(8, 16, 3, norm=norm)
    assert isinstance(GraphSAGE(8, 16, 3, norm="layer").norms[0], torch.nn.LayerNorm)
    assert isinstance(GraphSAGE(8, 16, 3, norm=None).norms[0], torch.nn.Identity)
    assert len(GraphSAGE(8, 16, 3, num_layers=1).layers) == 1


def test_mean_aggregation_differentiates_twice_as_index_add():
    """The CSR products' backward (Python's _SortedMean and the C++ operator, the float32 GPU
    path) took the gradient as a constant under create_graph: a gradient penalty's gradient
    w.r.t. the neighbour weights was off by 67.5 of 227 (a reviewer's repro). Both run here on
    the CPU twin and must agree with index_add's autograd."""
    from tessera import _torch_ops
    from tessera.nn import _SortedMean

    g = torch.Generator().manual_seed(0)
    ns, nd = 12, 5
    dst = torch.sort(torch.randint(0, nd - 1, (30,), generator=g)).values  # node 4: no in-edge
    src = torch.randint(0, ns, (30,), generator=g)
    src[1] = src[0]  # a duplicate edge
    dst[1] = dst[0]
    indptr = torch.searchsorted(dst, torch.arange(nd + 1))
    x = torch.randn(ns, 4, generator=g, requires_grad=True)
    w_neigh = torch.randn(3, 4, generator=g, requires_grad=True)
    w_self = torch.randn(3, 4, generator=g, requires_grad=True)

    def index_add_mean(h):
        out = torch.zeros(nd, h.shape[1]).index_add(0, dst, h[src])
        return out / torch.bincount(dst, minlength=nd).clamp(min=1).unsqueeze(1)

    impls = {"_SortedMean": lambda h: _SortedMean.apply(h, src, indptr, "rows")}
    tops = _torch_ops.ops()
    if tops is not None:
        impls["torch.ops.tessera.mean_aggregate"] = lambda h: tops.mean_aggregate(
            h, src, indptr, "rows")

    def penalty_grads(mean):
        out = mean(x) @ w_neigh.T + x[:nd] @ w_self.T
        (gx,) = torch.autograd.grad(out.pow(2).sum(), x, create_graph=True)
        return torch.autograd.grad(gx.pow(2).sum(), (w_neigh, w_self))

    want = penalty_grads(index_add_mean)
    for name, mean in impls.items():
        for got, ref in zip(penalty_grads(mean), want):
            torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-4, msg=name)


def test_sageconv_parameters_are_dgls():
    """DGL's names and init order: the same torch seed gives DGL's weights, a DGL state dict
    loads, and so does the older layout with the bias as the layer's own `bias`."""
    from tessera.nn import SAGEConv

    dglnn = pytest.importorskip("dgl.nn")
    torch.manual_seed(3)
    theirs = dglnn.SAGEConv(5, 4, "mean")
    torch.manual_seed(3)
    ours = SAGEConv(5, 4, "mean")
    a, b = theirs.state_dict(), ours.state_dict()
    assert list(a) == list(b) == ["fc_neigh.weight", "fc_self.weight", "fc_self.bias"]
    for k in a:
        assert torch.equal(a[k], b[k]), k
    fresh = SAGEConv(5, 4)
    fresh.load_state_dict(theirs.state_dict())
    assert torch.equal(fresh.bias, theirs.fc_self.bias)
    old = {"bias": torch.arange(4.0), "fc_self.weight": b["fc_self.weight"],
           "fc_neigh.weight": b["fc_neigh.weight"]}
    fresh.load_state_dict(old)
    assert torch.equal(fresh.fc_self.bias, torch.arange(4.0))
    assert SAGEConv(5, 4, bias=False).bias is None


def test_sageconv_takes_dgls_pair_of_input_widths():
    from tessera.nn import SAGEConv

    dglnn = pytest.importorskip("dgl.nn")
    dgl = pytest.importorskip("dgl")
    src, dst = torch.tensor([0, 3, 4, 1, 4]), torch.tensor([0, 0, 1, 1, 2])
    h_src, h_dst = torch.randn(5, 6), torch.randn(3, 2)
    for out in (3, 8):  # projection before and after the aggregation
        torch.manual_seed(1)
        theirs = dglnn.SAGEConv((6, 2), out, "mean")
        torch.manual_seed(1)
        ours = SAGEConv((6, 2), out)
        block = dgl.create_block((src, dst), num_src_nodes=5, num_dst_nodes=3)
        want = theirs(block, (h_src, h_dst))
        got = ours((torch.stack([src, dst]), (5, 3)), (h_src, h_dst))
        torch.testing.assert_close(got, want)
    for bad in ((6, 2, 1), 0, 2.5, (6, True)):
        with pytest.raises(ValueError, match="in_feats must be a width or a pair"):
            SAGEConv(bad, 3)


def test_ginconv_is_dgls():
    """DGL's GINConv, argument for argument (``GINConv(mlp, "max")``): each aggregator, with
    and without edge weights ([E] and [E, 1]), on a graph, a block and a pair of features, in
    the output and in the gradients of the features and of eps (max: a tie goes to the last
    edge; DGL's choice depends on the CPU, so there only the tie's total is DGL's)."""
    from tessera.nn import GINConv

    dglnn = pytest.importorskip("dgl.nn")
    dgl = pytest.importorskip("dgl")
    src = torch.tensor([0, 1, 2, 3, 4, 0, 1, 5, 5, 2])
    dst = torch.tensor([1, 0, 1, 2, 2, 3, 3, 0, 1, 1])
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(6, 4, generator=gen)
    x[5, 1] = x[0, 1]  # node 0 ties with node 5 at the max of column 1 (edges 1 -> 0, 5 -> 0)
    weights = {"none": None, "[E]": torch.rand(10, generator=gen),
               "[E,1]": torch.rand(10, 1, generator=gen)}
    for agg in ("sum", "mean", "max"):
        for wname, w in weights.items():
            for kind in ("graph", "block", "pair"):
                torch.manual_seed(2)
                theirs = dglnn.GINConv(torch.nn.Linear(4, 3), agg, 0.3, True, torch.relu)
                torch.manual_seed(2)
                ours = GINConv(torch.nn.Linear(4, 3), agg, 0.3, True, torch.relu)
                nd = 6 if kind == "graph" else 4
                if kind == "graph":
                    g = dgl.graph((src, dst), num_nodes=6)
                else:
                    g = dgl.create_block((src, dst), num_src_nodes=6, num_dst_nodes=4)
                grads = []
                for conv, graph in ((theirs, g), (ours, (torch.stack([src, dst]), (6, nd)))):
                    h = x.clone().requires_grad_()
                    feat = (h, h[:nd] * 2) if kind == "pair" else h
                    out = conv(graph, feat, w)
                    (out * torch.arange(out.numel()).view_as(out)).sum().backward()
                    grads.append((out.detach(), h.grad, conv.eps.grad))
                (out_a, dx_a, eps_a), (out_b, dx_b, eps_b) = grads
                torch.testing.assert_close(out_b, out_a, msg=f"{agg} {wname} {kind}")
                torch.testing.assert_close(eps_b, eps_a, msg=f"{agg} {wname} {kind}")
                if agg != "max":
                    torch.testing.assert_close(dx_b, dx_a, msg=f"{agg} {wname} {kind}")
                    continue
                # Which of the tied nodes 0 and 5 DGL gives the gradient depends on the CPU
                # (libxsmm's kernel on AVX-512: the last in-edge; its own kernel: the first):
                # everywhere else the gradients are DGL's, and the tie's in total.
                tied = torch.zeros_like(dx_a, dtype=torch.bool)
                tied[[0, 5], 1] = True
                torch.testing.assert_close(dx_b[~tied], dx_a[~tied], msg=f"{wname} {kind}")
                torch.testing.assert_close(dx_b[tied].sum(), dx_a[tied].sum())
                # Tessera's rule, on every CPU: the last in-edge. Node 5 (edge 8 into node 1,
                # after node 0's edge 0) gets the gradient it gets when it is the maximum alone.
                h = x.clone()
                h[5, 1] += 1e-6
                h.requires_grad_()
                feat = (h, h[:nd] * 2) if kind == "pair" else h
                out = ours(graph, feat, w)
                ours.eps.grad = None
                (out * torch.arange(out.numel()).view_as(out)).sum().backward()
                torch.testing.assert_close(dx_b, h.grad, msg=f"last in-edge {wname} {kind}")


def test_sageconv_refuses_rows_that_do_not_fit_the_block():
    from tessera.nn import SAGEConv

    conv = SAGEConv(4, 3)
    ei = torch.tensor([[0, 3, 4, 1, 5, 3], [0, 0, 1, 1, 1, 0]])
    x = torch.randn(6, 4)
    with pytest.raises(ValueError, match="1 destination features for a block with 3"):
        conv((ei, (6, 3)), (x, x[:1]))  # one row would broadcast to all three
    with pytest.raises(ValueError, match="6 source and 8 destination nodes takes a pair"):
        conv((ei, (6, 8)), x)


def test_float_indices_are_refused_not_truncated():
    from tessera.nn import GINConv, SAGEConv, mean_aggregate, readout_nodes, softmax_aggregate

    x = torch.randn(4, 2)
    ei = torch.tensor([[0.9, 2.6], [0.2, 1.7]])
    with pytest.raises(TypeError, match="edge_index must hold integer node IDs.*float32"):
        SAGEConv(2, 2)((ei, (4, 2)), x)
    with pytest.raises(TypeError, match="edge_index must hold integer"):
        GINConv()((ei.numpy(), (4, 4)), x)
    with pytest.raises(TypeError, match="graph_ids must hold integer"):
        readout_nodes(x, torch.tensor([0.2, 0.9, 1.5, 1.99]), 2)
    with pytest.raises(TypeError, match="graph_ids must hold integer"):
        readout_nodes(x, torch.tensor([True, False, True, False]), 2)
    with pytest.raises(TypeError, match="mean_aggregate: dst must hold integer"):
        mean_aggregate(x, torch.tensor([0, 1]), torch.tensor([0.0, 1.0]), 2)
    with pytest.raises(TypeError, match="softmax_aggregate: dst must hold integer"):
        softmax_aggregate(x, torch.tensor([0.0, 1.0, 1.0, 0.0]), 2, torch.tensor(1.0))
    # integer IDs of any width still work
    out = readout_nodes(x, torch.tensor([0, 0, 1, 1], dtype=torch.int32), 2)
    torch.testing.assert_close(out, torch.stack([x[:2].sum(0), x[2:].sum(0)]))


def test_inference_over_a_dataset(cora):
    """model.inference on a tessera Dataset (not a DistGraph): every node's output, as the
    full-neighbor forward over the whole graph computes it."""
    from tessera.nn import GraphSAGE

    feat = torch.from_numpy(np.asarray(cora.ndata["feat"])).float()
    torch.manual_seed(0)
    model = GraphSAGE(feat.shape[1], 8, 7, num_layers=2)
    out = model.inference(cora, lambda ids: feat[torch.as_tensor(np.asarray(ids))],
                          batch_size=1000)
    indptr = np.asarray(cora.graph.indptr)
    n = cora.graph.num_nodes
    src = torch.from_numpy(np.asarray(cora.graph.indices).astype(np.int64))
    dst = torch.from_numpy(np.repeat(np.arange(n), np.diff(indptr)))
    whole = (torch.stack([src, dst]), (n, n))
    with torch.no_grad():
        want = model.layers[1](whole, torch.relu(model.layers[0](whole, feat)))
    assert out.shape == (n, 7)
    torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-5)


@needs_cuda_build
@pytest.mark.parametrize("layer", ["graphconv-both", "graphconv-none", "gatconv"])
def test_graphconv_and_gatconv_on_cuda_equal_the_cpu(cora, layer):
    """GraphConv's sum and GATConv on CUDA tensors: a sampled Cora block moved to the GPU (no
    CSR offsets: the layer makes them on the device) and as the GPU loader's DeviceBlock (with
    offsets), with gradients (the rows kernels) and without (cuSPARSE when it is chosen); the
    outputs and every gradient equal the CPU layer's within float32 reordering."""
    import copy

    from tessera.dataloading import DeviceBlock
    from tessera.nn import GATConv, GraphConv

    _, _, blocks = tessera.NeighborSampler([-1]).sample_blocks(cora, np.arange(0, 900, 3),
                                                              seed=3)
    block = blocks[0]
    torch.manual_seed(0)
    conv = GATConv(12, 5, 2) if layer == "gatconv" else GraphConv(12, 7,
                                                                   norm=layer.split("-")[1])
    dev = torch.device("cuda")
    gpu = copy.deepcopy(conv).to(dev)
    x = torch.randn(block.num_src_nodes(), 12)
    src, dst = block.src.to(torch.int64), block.dst.to(torch.int64)
    indptr = torch.zeros(block.num_dst_nodes() + 1, dtype=torch.int64)
    indptr[1:] = torch.bincount(dst, minlength=block.num_dst_nodes()).cumsum(0)
    device_block = DeviceBlock({
        "num_src": block.num_src_nodes(), "num_dst": block.num_dst_nodes(),
        "num_edges": block.num_edges(), "src": src.to(dev), "dst": dst.to(dev),
        "src_nodes": block.srcnodes.to(torch.int64).to(dev),
        "eids": block.eids.to(torch.int64).to(dev), "indptr": indptr.to(dev)}, dev)

    def run(layer, graph, x, grad):
        layer.zero_grad()
        x = x.clone().requires_grad_(grad)
        with torch.set_grad_enabled(grad):
            out = layer(graph, x)
        if not grad:
            return out, {}
        r = torch.randn(out.shape, generator=torch.Generator().manual_seed(1)).to(out.device)
        (out * r).sum().backward()
        grads = {"x": x.grad}
        grads.update({k: p.grad for k, p in layer.named_parameters()})
        return out, grads

    for grad in (True, False):
        want, want_grads = run(conv, block, x, grad)
        for name, graph in (("Block.to('cuda')", block.to(dev)), ("DeviceBlock", device_block)):
            out, grads = run(gpu, graph, x.to(dev), grad)
            assert out.device.type == "cuda"
            torch.testing.assert_close(out.cpu(), want, rtol=1e-4, atol=1e-5,
                                       msg=f"{layer} on a {name}, grad {grad}: output")
            assert set(grads) == set(want_grads)
            for k, g in want_grads.items():
                torch.testing.assert_close(grads[k].cpu(), g, rtol=1e-4, atol=1e-5,
                                           msg=f"{layer} on a {name}: gradient {k}")
