# SPDX-License-Identifier: Apache-2.0
"""Tessera blocks and graphs against the real DGL and PyTorch Geometric, when installed.

Each library's own GraphSAGE layer, given Tessera's SAGEConv weights, must compute the same
output on the converted block as Tessera's layer on the block itself; and a DGLGraph or a PyG
Data partitions exactly like the same arrays given directly. scripts/setup-python.sh installs
DGL 1.1.3 and PyG 2.8.1 (CPU), the newest that coexist with torch 2.11 (why: there); where one
is absent its cases skip, which CI does not accept. See the module docstring of
tessera.convert for what the conversions promise.
"""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tessera  # noqa: E402
from tessera.nn import SAGEConv  # noqa: E402

from conftest import CORA  # noqa: E402


def _cora_blocks(cora, fanouts=(5, 5), seeds=64):
    sampler = tessera.NeighborSampler(list(fanouts))
    input_nodes, _, blocks = sampler.sample_blocks(cora, np.arange(seeds), seed=3)
    x = torch.from_numpy(np.asarray(cora.ndata["feat"])[np.asarray(input_nodes)]).float()
    return x, blocks


def _tessera_conv(in_feats, out_feats, seed):
    torch.manual_seed(seed)
    conv = SAGEConv(in_feats, out_feats)
    with torch.no_grad():
        conv.bias.uniform_(-0.5, 0.5)  # non-zero, so a dropped bias shows
    return conv


def _cora_arrays():
    ds = tessera.load_dataset(CORA)
    edge_index = np.stack([np.asarray(ds.graph.indices), np.repeat(
        np.arange(ds.graph.num_nodes), np.diff(np.asarray(ds.graph.indptr)))])
    order = np.argsort(np.asarray(ds.graph.eids), kind="stable")  # input (edge ID) order
    return ds, edge_index[:, order]


def _layers_agree(make_theirs, run_theirs):
    """Over the blocks of sampled Cora, layer by layer: the other library's SAGEConv
    (``make_theirs(in_feats, ours)``, given our weights) run on the converted block
    (``run_theirs(conv, block, h)``) equals Tessera's SAGEConv on the block."""
    cora = tessera.load_dataset(CORA, symmetrize=True)
    h, blocks = _cora_blocks(cora)
    for layer, block in enumerate(blocks):
        ours = _tessera_conv(h.shape[1], 16, seed=layer)
        theirs = make_theirs(h.shape[1], ours)
        with torch.no_grad():
            want = ours(block, h)
            got = run_theirs(theirs, block, h)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        h = want


def test_dgl_sageconv_on_converted_blocks_equals_tessera():
    dgl = pytest.importorskip("dgl")
    from dgl.nn import SAGEConv as DglSAGEConv

    def make(in_feats, ours):
        conv = DglSAGEConv(in_feats, 16, "mean")
        with torch.no_grad():
            conv.fc_self.weight.copy_(ours.fc_self.weight)
            conv.fc_neigh.weight.copy_(ours.fc_neigh.weight)
            conv.fc_self.bias.copy_(ours.fc_self.bias)  # DGL 1.x and 2.x keep it there
        return conv

    def run(conv, block, h):
        b = tessera.convert.to_dgl_block(block)
        assert b.num_src_nodes() == block.num_src and b.num_dst_nodes() == block.num_dst
        assert b.num_edges() == block.num_edges()
        np.testing.assert_array_equal(np.asarray(b.srcdata[dgl.NID]), np.asarray(block.srcnodes))
        np.testing.assert_array_equal(np.asarray(b.edata[dgl.EID]), np.asarray(block.eids))
        return conv(b, (h, h[:block.num_dst]))

    _layers_agree(make, run)


def test_to_dgl_block_keeps_the_prefetched_node_data_and_labels():
    """The frames of a loader's blocks (prefetch_node_feats / prefetch_labels, and tensors the
    caller stores) come over to the DGL block; only the IDs were copied before."""
    dgl = pytest.importorskip("dgl")
    cora = tessera.load_dataset(CORA, symmetrize=True)
    sampler = tessera.NeighborSampler([3, 3], prefetch_node_feats=["feat"],
                                      prefetch_labels=["label"])
    loader = tessera.NodeDataLoader(cora, np.arange(16), sampler, batch_size=8)
    _, _, blocks = next(iter(loader))
    first, last = blocks[0], blocks[-1]
    first.edata["w"] = torch.arange(first.num_edges(), dtype=torch.float32)
    b0, b1 = tessera.convert.to_dgl_block(first), tessera.convert.to_dgl_block(last)
    assert sorted(b0.srcdata) == [dgl.NID, "feat"] and sorted(b0.edata) == [dgl.EID, "w"]
    assert sorted(b1.dstdata) == [dgl.NID, "label"]
    torch.testing.assert_close(b0.srcdata["feat"], first.srcdata["feat"])
    torch.testing.assert_close(b0.edata["w"], first.edata["w"])
    torch.testing.assert_close(b1.dstdata["label"], last.dstdata["label"])
    np.testing.assert_array_equal(np.asarray(b0.srcdata[dgl.NID]), np.asarray(first.srcnodes))


def test_partition_of_a_dgl_graph_equals_partition_of_its_arrays(tmp_path):
    dgl = pytest.importorskip("dgl")
    ds, edge_index = _cora_arrays()
    feat = np.asarray(ds.ndata["feat"])
    g = dgl.graph((torch.from_numpy(edge_index[0]), torch.from_numpy(edge_index[1])),
                  num_nodes=ds.graph.num_nodes)
    g.ndata["feat"] = torch.from_numpy(feat)
    arrays = {"edge_index": edge_index, "num_nodes": ds.graph.num_nodes,
              "ndata": {"feat": feat}, "edata": {}}
    a = tessera.partition_graph(g, "cora", 2, tmp_path / "dgl", symmetrize=True,
                                return_mapping=True)
    b = tessera.partition_graph(arrays, "cora", 2, tmp_path / "arr", symmetrize=True,
                                return_mapping=True)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_pyg_sageconv_on_converted_blocks_equals_tessera():
    pyg_nn = pytest.importorskip("torch_geometric.nn")

    def make(in_feats, ours):
        # PyG's SAGEConv: lin_l(mean of neighbors) + lin_r(root); lin_l carries the bias.
        conv = pyg_nn.SAGEConv(in_feats, 16, aggr="mean")
        with torch.no_grad():
            conv.lin_l.weight.copy_(ours.fc_neigh.weight)
            conv.lin_l.bias.copy_(ours.bias)
            conv.lin_r.weight.copy_(ours.fc_self.weight)
        return conv

    def run(conv, block, h):
        edge_index, size = tessera.convert.to_pyg(block)
        assert tuple(edge_index.shape) == (2, block.num_edges())
        assert size == (block.num_src, block.num_dst)
        return conv((h, h[:block.num_dst]), edge_index, size=size)

    _layers_agree(make, run)


def test_partition_of_a_pyg_data_equals_partition_of_its_arrays(tmp_path):
    tg_data = pytest.importorskip("torch_geometric.data")
    ds, edge_index = _cora_arrays()
    feat = np.asarray(ds.ndata["feat"])
    label = np.asarray(ds.ndata["label"])
    train = np.asarray(ds.ndata["train_mask"]).astype(bool)
    data = tg_data.Data(x=torch.from_numpy(feat), y=torch.from_numpy(label),
                        edge_index=torch.from_numpy(edge_index),
                        train_mask=torch.from_numpy(train))
    arrays = {"edge_index": edge_index, "num_nodes": ds.graph.num_nodes,
              "ndata": {"feat": feat, "label": label, "train_mask": train}, "edata": {}}
    a = tessera.partition_graph(data, "cora", 2, tmp_path / "pyg", symmetrize=True,
                                balance_ntypes="train_mask", return_mapping=True)
    b = tessera.partition_graph(arrays, "cora", 2, tmp_path / "arr", symmetrize=True,
                                balance_ntypes="train_mask", return_mapping=True)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


class _PygLikeData:
    """What from_pyg reads of a PyG Data (attributes and to_dict()), for machines without
    torch_geometric; partition_graph recognises a PyG graph by its module."""

    def __init__(self, **attrs):
        self._attrs = attrs

    def __getattr__(self, key):
        try:
            return self.__dict__["_attrs"][key]
        except KeyError:
            raise AttributeError(key) from None

    def to_dict(self):
        return dict(self._attrs)


_PygLikeData.__module__ = "torch_geometric.data.data"


@pytest.mark.parametrize("kind", ["pyg", "pyg-like"])
def test_from_pyg_keeps_edge_attr_edge_weight_and_every_node_or_edge_array(tmp_path, kind):
    make = pytest.importorskip("torch_geometric.data").Data if kind == "pyg" else _PygLikeData
    edge_index = torch.tensor([[0, 1, 2, 3, 0], [1, 2, 3, 0, 2]])
    edge_attr = torch.arange(10, 20, dtype=torch.float32).view(5, 2)
    edge_weight = torch.tensor([0.5, 0.25, 1.0, 2.0, 4.0])
    pos = torch.arange(8, dtype=torch.float32).view(4, 2)
    data = make(x=torch.eye(4), edge_index=edge_index, edge_attr=edge_attr,
                edge_weight=edge_weight, y=torch.tensor([0, 1, 0, 1]), pos=pos,
                edge_type=torch.tensor([0, 1, 0, 1, 1]), num_nodes=4, name="ring",
                graph_y=torch.tensor([1]))
    with pytest.warns(UserWarning, match=r"dropped name \(str\), graph_y \(shape \[1\]\)"):
        arrays = tessera.convert.from_pyg(data)
    assert sorted(arrays["ndata"]) == ["feat", "label", "pos"]
    assert sorted(arrays["edata"]) == ["edge_type", "edge_weight", "feat"]
    with pytest.warns(UserWarning, match="dropped name"):
        orig_nids, orig_eids = tessera.partition_graph(data, "ring", 2, tmp_path,
                                                       part_method="random",
                                                       return_mapping=True)
    g = tessera.DistGraph("ring", part_config=tmp_path / "ring.json")
    eids, nids = np.arange(5), np.arange(4)
    np.testing.assert_array_equal(g.edata["feat"].gather(eids), edge_attr.numpy()[orig_eids])
    np.testing.assert_array_equal(g.edata["edge_weight"].gather(eids),
                                  edge_weight.numpy()[orig_eids])
    np.testing.assert_array_equal(g.ndata["pos"].gather(nids), pos.numpy()[orig_nids])


def test_from_pyg_as_many_nodes_as_edges_goes_by_the_name():
    """With as many nodes as edges, an array is edge data when its name says "edge" (PyG's
    rule), and a renamed attribute wins its new name over an attribute holding it."""
    data = _PygLikeData(edge_index=torch.tensor([[0, 1, 2], [1, 2, 0]]), num_nodes=3,
                        edge_label=torch.ones(3), score=torch.zeros(3), x=torch.ones(3, 1),
                        feat=torch.zeros(3, 1))
    with pytest.warns(UserWarning, match=r"dropped feat \(its name 'feat' is taken\)"):
        arrays = tessera.convert.from_pyg(data)
    assert sorted(arrays["ndata"]) == ["feat", "score"]
    assert sorted(arrays["edata"]) == ["edge_label"]
    np.testing.assert_array_equal(arrays["ndata"]["feat"], np.ones((3, 1)))


def test_from_dgl_refuses_a_heterograph():
    """A DGL heterograph numbers its nodes per type: merging them into one ID space would turn
    user 0 -> item 0 into a self loop. Several node or edge types are refused; one named type
    (DGL's homogeneous graph under other names) is taken."""
    dgl = pytest.importorskip("dgl")
    bipartite = dgl.heterograph({("user", "click", "item"): ([0, 1, 2], [0, 0, 1])},
                                num_nodes_dict={"user": 3, "item": 2})
    two_etypes = dgl.heterograph({("user", "click", "item"): ([0], [0]),
                                  ("item", "rev", "user"): ([0], [0])})
    for g in (bipartite, two_etypes):
        with pytest.raises(ValueError, match="heterogeneous graphs are not supported; "
                                             "convert with dgl.to_homogeneous"):
            tessera.convert.from_dgl(g)
        with pytest.raises(ValueError, match="heterogeneous graphs are not supported"):
            tessera.convert.to_arrays(g)
    one_type = dgl.heterograph({("user", "follows", "user"): ([0, 1], [1, 2])})
    arrays = tessera.convert.from_dgl(one_type)
    np.testing.assert_array_equal(arrays["edge_index"], [[0, 1], [1, 2]])
    assert arrays["num_nodes"] == 3


def test_from_dgl_refuses_a_block():
    """A DGL block was refused as a heterograph of node types ['_N', '_N'], to be converted
    with dgl.to_homogeneous: the refusal now says what it is."""
    dgl = pytest.importorskip("dgl")
    block = dgl.create_block(([0, 1], [0, 0]), num_src_nodes=3, num_dst_nodes=1)
    for convert in (tessera.convert.from_dgl, tessera.convert.to_arrays):
        with pytest.raises(ValueError, match=r"a DGL block is not a graph to convert \(its 3 "
                                             r"source and 1 destination nodes"):
            convert(block)


def test_from_dgl_leaves_out_a_subgraphs_parent_ids(tmp_path):
    """dgl.node_subgraph stores the nodes' and edges' IDs in the parent graph as ndata / edata
    "_ID"; DGL's partition_graph does not keep them as features, nor does Tessera now (they
    became a node feature named as the blocks' IDs)."""
    dgl = pytest.importorskip("dgl")
    g = dgl.graph(([0, 1, 2, 3], [1, 2, 3, 0]), num_nodes=5)
    g.ndata["feat"] = torch.arange(10.0).view(5, 2)
    sub = dgl.node_subgraph(g, [1, 2, 3])
    assert "_ID" in sub.ndata and "_ID" in sub.edata
    arrays = tessera.convert.from_dgl(sub)
    assert sorted(arrays["ndata"]) == ["feat"] and arrays["edata"] == {}
    np.testing.assert_array_equal(arrays["ndata"]["feat"], [[2, 3], [4, 5], [6, 7]])
    cfg = tessera.partition_graph(sub, "sub", 1, tmp_path)
    assert sorted(tessera.DistGraph("sub", part_config=cfg).ndata) == ["feat"]


def test_from_pyg_refuses_hetero_data():
    """A PyG HeteroData is refused with a ValueError naming its types (it was an
    AttributeError for the missing edge_index)."""
    tg_data = pytest.importorskip("torch_geometric.data")
    h = tg_data.HeteroData()
    h["user"].x, h["item"].x = torch.zeros(3, 2), torch.zeros(2, 2)
    h["user", "click", "item"].edge_index = torch.tensor([[0, 1, 2], [0, 0, 1]])
    for convert in (tessera.convert.from_pyg, tessera.convert.to_arrays):
        with pytest.raises(ValueError, match=r"heterogeneous graphs are not supported; convert "
                                             r"with HeteroData.to_homogeneous\(\) \(this "
                                             r"HeteroData has node types \['user', 'item'\]"):
            convert(h)


@pytest.mark.filterwarnings("ignore:Sparse invariant checks are implicitly disabled")
@pytest.mark.parametrize("kind", ["pyg", "pyg-like"])
def test_from_pyg_refuses_a_data_without_edge_index(tmp_path, kind):
    """A Data whose edges a ToSparseTensor transform moved into adj_t (OGB's examples do) has
    no edge_index: refused naming it, where the sparse adj_t was dropped with a warning and
    partitioning failed on "edge_index: expected shape [2, E], got []"."""
    make = pytest.importorskip("torch_geometric.data").Data if kind == "pyg" else _PygLikeData
    adj_t = torch.sparse_coo_tensor(torch.tensor([[1, 2], [0, 1]]), torch.ones(2), (3, 3))
    data = make(x=torch.zeros(3, 2), adj_t=adj_t, num_nodes=3)
    with pytest.raises(ValueError, match=r"has no edge_index \(its edges are in adj_t"):
        tessera.convert.from_pyg(data)
    with pytest.raises(ValueError, match=r"has no edge_index \(its edges are in adj_t"):
        tessera.partition_graph(data, "g", 1, tmp_path)
    with pytest.raises(ValueError, match=r"has no edge_index$"):
        tessera.convert.from_pyg(make(x=torch.zeros(3, 2), num_nodes=3))


def test_bfloat16_data_is_refused_naming_the_array():
    """A bfloat16 feature was torch's "Got unsupported ScalarType BFloat16", naming no array."""
    dgl = pytest.importorskip("dgl")
    g = dgl.graph(([0, 1], [1, 2]))
    g.ndata["feat"] = torch.ones(3, 2, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match=r"from_dgl: ndata\['feat'\]: dtype torch.bfloat16 is "
                                        "not supported"):
        tessera.convert.from_dgl(g)
    g.ndata["feat"] = torch.ones(3, 2)
    g.edata["w"] = torch.ones(2, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match=r"from_dgl: edata\['w'\]: dtype torch.bfloat16"):
        tessera.convert.from_dgl(g)
    data = _PygLikeData(x=torch.ones(3, 2, dtype=torch.bfloat16), num_nodes=3,
                        edge_index=torch.tensor([[0, 1], [1, 2]]))
    with pytest.raises(TypeError, match=r"from_pyg: x: dtype torch.bfloat16 is not supported"):
        tessera.convert.from_pyg(data)
