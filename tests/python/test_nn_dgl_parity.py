# SPDX-License-Identifier: Apache-2.0
"""GraphConv and GATConv against DGL 1.1.3's own layers, given the same parameters (one torch
seed builds both; the state dicts must be equal): outputs, attention, and the gradients of the
features, edge weights, external weight and every parameter, on a whole graph, a DGL block
(``dgl.to_block``, handed to Tessera's layer as it is and as a PyG edge index), a pair of
features on a bipartite block, and a Tessera Block sampled from Cora (DGL gets
``tessera.convert.to_dgl_block`` of it)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
dgl = pytest.importorskip("dgl")
dglnn = pytest.importorskip("dgl.nn")

import tessera  # noqa: E402
from tessera.nn import GATConv, GraphConv  # noqa: E402

# 7 nodes; every node has an in-edge, node 6 none out (left norm's clamp), 1 -> 0 twice.
SRC = torch.tensor([0, 1, 1, 2, 3, 4, 0, 5, 5, 2, 3, 1, 4, 0])
DST = torch.tensor([1, 0, 0, 1, 2, 2, 3, 3, 4, 5, 6, 6, 6, 4])
N = 7
KINDS = ("graph", "dgl-block", "pyg-block", "pair", "tessera-block")
_MAX_DIFF = {}


@pytest.fixture(scope="module", autouse=True)
def _report_max_diffs():
    yield
    for name, d in sorted(_MAX_DIFF.items()):
        print(f"max |tessera - dgl| {name}: {d:.3g}")


def _case(kind, width, dst_width=None, cora=None):
    """(DGL graph, Tessera's graph argument, a function of the leaf inputs giving the
    features, the leaf inputs, num_edges) for ``kind``."""
    gen = torch.Generator().manual_seed(7)
    if kind == "graph":
        g = dgl.graph((SRC, DST), num_nodes=N)
        ours = (torch.stack([SRC, DST]), (N, N))
    elif kind in ("dgl-block", "pyg-block"):
        seeds = torch.tensor([0, 2, 4, 6])
        frontier = dgl.in_subgraph(dgl.graph((SRC, DST), num_nodes=N), seeds)
        g = dgl.to_block(frontier, dst_nodes=seeds)
        s, d = g.edges()
        ours = g if kind == "dgl-block" else (torch.stack([s, d]),
                                               (g.num_src_nodes(), g.num_dst_nodes()))
    elif kind == "pair":  # 7 sources, 5 destinations with their own features
        keep = DST < 5
        g = dgl.create_block((SRC[keep], DST[keep]), num_src_nodes=N, num_dst_nodes=5)
        ours = (torch.stack([SRC[keep], DST[keep]]), (N, 5))
    else:
        _, _, blocks = tessera.NeighborSampler([4]).sample_blocks(cora, np.arange(0, 60, 5),
                                                                  seed=3)
        ours = blocks[0]
        g = tessera.convert.to_dgl_block(ours)
    x = torch.randn(g.num_src_nodes(), width, generator=gen)
    if kind == "pair":
        y = torch.randn(g.num_dst_nodes(), dst_width or width, generator=gen)
        return g, ours, (lambda x, y: (x, y)), [x, y], g.num_edges()
    return g, ours, (lambda x: x), [x], g.num_edges()


def _run(conv, graph, make_feat, leaves, extra, **kwargs):
    """conv's output (and attention) and the gradients of (out * R).sum() w.r.t. the leaf
    inputs, the extra tensors (edge weight, external weight) and the parameters by name."""
    inputs = [t.clone().requires_grad_() for t in leaves]
    extra = {k: (v.clone().requires_grad_() if v is not None else None)
             for k, v in extra.items()}
    got = conv(graph, make_feat(*inputs), **extra, **kwargs)
    out, attn = got if isinstance(got, tuple) else (got, None)
    r = torch.randn(out.shape, generator=torch.Generator().manual_seed(11))
    loss = (out * r).sum() + (0 if attn is None else (attn * attn).sum())
    loss.backward()
    grads = {f"d{i}": t.grad for i, t in enumerate(inputs)}
    grads.update({f"d_{k}": v.grad for k, v in extra.items() if v is not None})
    grads.update({f"d_{k}": p.grad for k, p in conv.named_parameters()})
    return out, attn, grads


def _compare(layer, theirs, ours, case, extra, **kwargs):
    """Runs both layers on ``case`` and asserts equal outputs, attention and gradients."""
    a, b = theirs.state_dict(), ours.state_dict()
    assert list(a) == list(b), (list(a), list(b))
    for k in a:
        assert torch.equal(a[k], b[k]), f"{layer}: {k} is not DGL's initial value"
    g, ours_graph, make_feat, leaves, _ = case
    want = _run(theirs, g, make_feat, leaves, extra, **kwargs)
    got = _run(ours, ours_graph, make_feat, leaves, extra, **kwargs)
    for what, x, y in (("output", got[0], want[0]), ("attention", got[1], want[1])):
        if y is None:
            assert x is None
            continue
        assert x.shape == y.shape, (what, x.shape, y.shape)
        torch.testing.assert_close(x, y, msg=f"{layer} {what}")
        _note(f"{layer} {what}", x, y)
    assert set(got[2]) == set(want[2])
    for k, y in want[2].items():
        x = got[2][k]
        assert (x is None) == (y is None), k
        if y is not None:
            torch.testing.assert_close(x, y, msg=f"{layer} gradient {k}")
            _note(f"{layer} gradients", x, y)


def _note(name, x, y):
    d = float((x.detach() - y.detach()).abs().max()) if x.numel() else 0.0
    _MAX_DIFF[name] = max(_MAX_DIFF.get(name, 0.0), d)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("norm", ["both", "right", "left", "none"])
def test_graphconv_is_dgls(kind, norm, cora):
    for fin, fout in ((5, 3), (3, 5)):  # W before and after the aggregation
        case = _case(kind, fin, cora=cora)
        ew = torch.rand(case[4], generator=torch.Generator().manual_seed(5)) + 0.5
        for edge_weight in (None, ew):
            for own_weight in (True, False):
                extra = {"edge_weight": edge_weight}
                if not own_weight:
                    extra["weight"] = torch.randn(fin, fout)
                torch.manual_seed(2)
                theirs = dglnn.GraphConv(fin, fout, norm, weight=own_weight,
                                         activation=torch.tanh)
                torch.manual_seed(2)
                ours = GraphConv(fin, fout, norm, weight=own_weight, activation=torch.tanh)
                _compare("GraphConv", theirs, ours, case, extra)
    # No weight at all, no bias: the normalized aggregation alone.
    case = _case(kind, 4, cora=cora)
    _compare("GraphConv", dglnn.GraphConv(4, 2, norm, weight=False, bias=False),
             GraphConv(4, 2, norm, weight=False, bias=False), case, {})


GAT_SHAPES = [(5, 4, 1), (4, 4, 1), (6, 2, 3), (5, 2, 3)]  # (in, out, heads): residual
# is linear where in != heads * out, the identity where they are equal.


@pytest.mark.parametrize("kind", KINDS)
def test_gatconv_is_dgls(kind, cora):
    for fin, fout, heads in GAT_SHAPES:
        case = _case(kind, fin, cora=cora)
        ew = torch.rand(case[4], generator=torch.Generator().manual_seed(5)) + 0.5
        for residual in (False, True):
            for bias in (True, False):
                for edge_weight in (None, ew):
                    args = (fin, fout, heads)
                    kw = dict(negative_slope=0.1, residual=residual, bias=bias,
                              activation=torch.nn.functional.elu)
                    torch.manual_seed(2)
                    theirs = dglnn.GATConv(*args, **kw)
                    torch.manual_seed(2)
                    ours = GATConv(*args, **kw)
                    assert isinstance(ours.res_fc, torch.nn.Linear) == (
                        residual and fin != fout * heads)
                    _compare("GATConv", theirs, ours, case, {"edge_weight": edge_weight},
                             get_attention=True)


def test_gatconv_with_a_pair_of_input_widths_is_dgls():
    for residual in (False, True):
        for heads in (1, 3):
            case = _case("pair", 5, dst_width=3)
            torch.manual_seed(4)
            theirs = dglnn.GATConv((5, 3), 2, heads, residual=residual)
            torch.manual_seed(4)
            ours = GATConv((5, 3), 2, heads, residual=residual)
            assert hasattr(ours, "fc_src") and not hasattr(ours, "fc")
            _compare("GATConv", theirs, ours, case, {}, get_attention=True)
            _compare("GATConv", theirs, ours, case, {})


def test_gatconv_dropout_is_off_in_eval_and_drops_in_training():
    case = _case("graph", 4)
    torch.manual_seed(2)
    theirs = dglnn.GATConv(4, 3, 2, feat_drop=0.5, attn_drop=0.5).eval()
    torch.manual_seed(2)
    ours = GATConv(4, 3, 2, feat_drop=0.5, attn_drop=0.5).eval()
    _compare("GATConv", theirs, ours, case, {}, get_attention=True)
    ours.train()
    g, graph, _, (x,), _ = case
    _, a = ours(graph, x, get_attention=True)
    assert (a == 0).any()  # some attention dropped; the kept is scaled by 2
    assert torch.all((a == 0) | (a > 0))


def _graph_with_a_lonely_node():
    # Node 3 has no in-edges.
    src, dst = torch.tensor([0, 1, 2, 3, 0, 4]), torch.tensor([1, 0, 1, 2, 4, 0])
    return dgl.graph((src, dst), num_nodes=5), (torch.stack([src, dst]), (5, 5))


@pytest.mark.parametrize("layer", ["GraphConv", "GATConv"])
def test_zero_in_degree_raises_unless_allowed_as_dgl(layer):
    g, ei = _graph_with_a_lonely_node()
    x = torch.randn(5, 4)

    def build(mod, allow):
        torch.manual_seed(1)
        if layer == "GraphConv":
            return getattr(mod, layer)(4, 3, allow_zero_in_degree=allow)
        return getattr(mod, layer)(4, 2, 2, residual=True, allow_zero_in_degree=allow)

    with pytest.raises(dgl.DGLError, match="0-in-degree"):
        build(dglnn, False)(g, x)
    for graph in (ei, g):
        with pytest.raises(ValueError, match=r"1 destination node\(s\) without in-edges "
                                             r"\(0-in-degree; the first: \[3\]\).*"
                                             "allow_zero_in_degree=True"):
            build(tessera.nn, False)(graph, x)
    theirs, ours = build(dglnn, True), build(tessera.nn, True)
    _compare(layer, theirs, ours, (g, ei, lambda x: x, [x], 6), {})
    ours = build(tessera.nn, False)
    ours.set_allow_zero_in_degree(True)
    ours(ei, x)


def test_graphconv_refuses_bad_input():
    g = (torch.stack([SRC, DST]), (N, N))
    x = torch.randn(N, 4)
    for bad in ((2.5, 3), (4, 0), (True, 3), (4, "3"), ((4, 2), 3)):
        with pytest.raises(ValueError, match="in_feats and out_feats must be integers >= 1"):
            GraphConv(*bad)
    with pytest.raises(ValueError, match="norm must be 'none', 'both', 'right' or 'left', "
                                         "got 'sym'"):
        GraphConv(4, 3, norm="sym")
    with pytest.raises(ValueError, match=r"features of width 5 for its weight of shape \(4, 3\)"):
        GraphConv(4, 3)(g, torch.randn(N, 5))
    with pytest.raises(ValueError, match="external weight was given to a layer with its own"):
        GraphConv(4, 3)(g, x, weight=torch.randn(4, 3))
    with pytest.raises(ValueError, match=r"width 4 for the external weight of shape \(5, 3\)"):
        GraphConv(4, 3, weight=False)(g, x, weight=torch.randn(5, 3))
    with pytest.raises(ValueError, match="GraphConv: 3 edge weights for a graph of 14 edges"):
        GraphConv(4, 3)(g, x, edge_weight=torch.ones(3))
    with pytest.raises(ValueError, match="GraphConv: 6 source features for a graph of 7"):
        GraphConv(4, 3)(g, x[:6])
    with pytest.raises(TypeError, match="edge_index must hold integer"):
        GraphConv(4, 3)((g[0].float(), (N, N)), x)


def test_gatconv_refuses_bad_input():
    g = (torch.stack([SRC, DST]), (N, N))
    x = torch.randn(N, 4)
    for heads in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="num_heads must be an integer >= 1"):
            GATConv(4, 3, heads)
    for bad in ((4, 0), (2.5, 3), ((4, 2, 1), 3), ((4, 0), 3)):
        with pytest.raises(ValueError, match="in_feats must be a width or a pair"):
            GATConv(*bad, 1)
    with pytest.raises(ValueError, match=r"source features of shape \(7, 5\), expected "
                                         r"\[N, \.\.\., 4\]"):
        GATConv(4, 3, 2)(g, torch.randn(N, 5))
    with pytest.raises(ValueError, match=r"destination features of shape \(7, 3\)"):
        GATConv(4, 3, 2)(g, (x, torch.randn(N, 3)))
    with pytest.raises(ValueError, match=r"built for a pair of input widths \(4, 2\)"):
        GATConv((4, 2), 3, 2)(g, x)
    with pytest.raises(ValueError, match="GATConv: 13 edge weights for a graph of 14 edges"):
        GATConv(4, 3, 2)(g, x, edge_weight=torch.ones(13))
    with pytest.raises(ValueError, match=r"edge_weight must be \[E\]"):
        GATConv(4, 3, 2)(g, x, edge_weight=torch.ones(14, 2))


def test_forward_and_backward_read_nothing_back_to_the_host():
    # On the meta device any .item(), .tolist(), .numpy() or bool() of a tensor raises: the
    # layers' hot path (the zero-in-degree check is off) is device ops only, as on a GPU.
    meta = torch.device("meta")
    ei = torch.stack([SRC, DST]).to(meta)
    x = torch.randn(N, 5, device=meta, requires_grad=True)
    w = torch.ones(len(SRC), device=meta, requires_grad=True)
    layers = [GraphConv(5, fout, norm, allow_zero_in_degree=True)
              for norm in ("both", "left", "right", "none") for fout in (3, 8)]
    layers += [GATConv(5, 2, 3, residual=True, allow_zero_in_degree=True),
               GATConv(5, 5, 1, residual=True, allow_zero_in_degree=True)]
    for layer in layers:
        out = layer.to(meta)((ei, (N, N)), x, edge_weight=w)
        assert out.device == meta
        out.sum().backward()
    assert x.grad.shape == x.shape and w.grad.shape == w.shape


@pytest.mark.parametrize("norm", ["both", "none"])
def test_graphconv_sums_a_tessera_block_without_messages(cora, monkeypatch, norm):
    """On a Tessera block (edges grouped by destination) GraphConv sums by the CSR product, as
    SAGEConv's mean does: no [E, F] message tensor (index_add_ is not called), and on the CPU
    the same bits and gradients as the index_add_ path over the same edges (both sum in edge
    order)."""
    _, _, blocks = tessera.NeighborSampler([-1]).sample_blocks(cora, np.arange(0, 300, 3),
                                                              seed=3)
    block = blocks[0]
    src, dst = (torch.as_tensor(np.asarray(x), dtype=torch.int64) for x in block.edges())
    as_pyg = (torch.stack([src, dst]), (block.num_src_nodes(), block.num_dst_nodes()))
    torch.manual_seed(0)
    conv = GraphConv(12, 7, norm=norm)
    x = torch.randn(block.num_src_nodes(), 12, requires_grad=True)
    ref = conv(as_pyg, x)  # no destination order known: index_select + index_add_
    (g_ref,) = torch.autograd.grad(ref.square().sum(), x)
    adds = []
    real = torch.Tensor.index_add_
    monkeypatch.setattr(torch.Tensor, "index_add_",
                        lambda self, *a, **k: adds.append(self.dtype) or real(self, *a, **k))
    out = conv(block, x)
    (g_out,) = torch.autograd.grad(out.square().sum(), x)
    assert torch.float32 not in adds  # only the integer degree counts
    assert torch.equal(out, ref) and torch.equal(g_out, g_ref)
