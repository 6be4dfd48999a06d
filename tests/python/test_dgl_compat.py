# SPDX-License-Identifier: Apache-2.0
"""DGL idioms a ported script uses: each either does what DGL's does or fails with one clear
error (python/README.md, "Differences from DGL")."""
import numpy as np
import pytest

import tessera
from tessera import dataloading

from conftest import in_neighbors

torch = pytest.importorskip("torch")


@pytest.fixture
def node_policy(cora_one):
    g = tessera.DistGraph("cora", part_config=cora_one)
    return g.num_nodes(), g.get_node_partition_policy()


def test_writes_keep_their_values_or_are_refused(node_policy):
    n, policy = node_policy
    u = tessera.DistTensor((n, 2), torch.uint8, "compat_u8", part_policy=policy)
    u[torch.tensor([0])] = torch.tensor([[7, 255]])  # int64 values that fit
    assert u[torch.tensor([0])].tolist() == [[7, 255]]
    with pytest.raises(TypeError, match="float32 values into a uint8 tensor"):
        u[torch.tensor([1])] = torch.tensor([[-1.0, 300.0]])
    with pytest.raises(ValueError, match="value 300 is outside the range"):
        u[torch.tensor([1])] = torch.tensor([[1, 300]])
    with pytest.raises(ValueError, match="value -1 is outside"):
        u[torch.tensor([1])] = np.array([[-1, 2]])
    assert u[torch.tensor([1])].tolist() == [[0, 0]]  # nothing written by a refused write

    b = tessera.DistTensor((n,), torch.bool, "compat_bool", part_policy=policy)
    b[torch.tensor([0, 1])] = torch.tensor([1, 0])
    b[torch.tensor([2])] = True
    assert b[torch.arange(4)].tolist() == [True, False, True, False]
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        b[torch.tensor([3])] = torch.tensor([2])
    with pytest.raises(TypeError, match="float64 values into a bool tensor"):
        b[torch.tensor([3])] = 0.2

    f = tessera.DistTensor((n, 1), torch.float32, "compat_f32", part_policy=policy)
    f[torch.tensor([0, 1])] = torch.tensor([[3], [4]])  # integers into floats: as torch's copy
    f[torch.tensor([2])] = np.array([[0.5]], dtype=np.float64)
    assert f[torch.tensor([0, 1, 2])].reshape(-1).tolist() == [3.0, 4.0, 0.5]


def test_slices_select_rows_as_in_dgl(node_policy):
    n, policy = node_policy
    t = tessera.DistTensor((n, 2), torch.int64, "compat_slices", part_policy=policy)
    rows = torch.arange(2 * n).reshape(n, 2)
    t[torch.arange(n)] = rows
    assert torch.equal(t[0:3], rows[0:3])
    assert torch.equal(t[::7], rows[::7])
    assert torch.equal(t[-2:], rows[-2:])
    t[n - 4:] = torch.zeros(4, 2, dtype=torch.int64)
    assert t[torch.arange(n)][n - 4:].abs().sum().item() == 0


def test_a_persistent_tensor_needs_a_name(node_policy):
    n, policy = node_policy
    with pytest.raises(ValueError, match="persistent tensor needs a name"):
        tessera.DistTensor((n, 2), torch.float32, part_policy=policy, persistent=True)


def test_bfloat16_is_refused_by_name(node_policy):
    n, policy = node_policy
    with pytest.raises(TypeError, match="bfloat16 is not supported"):
        tessera.DistTensor((n, 2), torch.bfloat16, "compat_bf16", part_policy=policy)
    edge_index = torch.tensor([[0, 1], [1, 0]])
    with pytest.raises(TypeError, match=r"ndata\['x'\]: dtype torch.bfloat16"):
        tessera.graph_from_arrays(edge_index, 2, ndata={"x": torch.ones(2, 2, dtype=torch.bfloat16)})


def test_fanouts_and_edge_dir_are_checked():
    with pytest.raises(TypeError, match="fanouts must be integers"):
        tessera.NeighborSampler([10, 2.5])
    s = tessera.NeighborSampler([np.int64(10), 2.0, torch.tensor(3)])
    assert s.fanouts == [10, 2, 3] and all(type(f) is int for f in s.fanouts)
    # NeighborSampler([2**31], replace=True) asked for 48 GiB per seed and was killed.
    for replace in (False, True):
        with pytest.raises(ValueError, match=r"NeighborSampler: fanout 2147483648 of layer 1 is "
                                             r"above 2147483647 \(2\^31 - 1\), the largest "
                                             "fanout; use -1 for all neighbors"):
            tessera.NeighborSampler([5, 2**31], replace=replace)
    assert tessera.NeighborSampler([2**31 - 1, -1]).fanouts == [2**31 - 1, -1]
    with pytest.raises(ValueError, match="edge_dir must be 'in' or 'out', got 'both'"):
        tessera.NeighborSampler([5], edge_dir="both")


def test_dgls_multi_layer_sampler_names(cora_one):
    """MultiLayerFullNeighborSampler(L) takes every in-edge of every seed at each of L layers
    (DGL's), whatever the seed; MultiLayerNeighborSampler is NeighborSampler, as in DGL."""
    assert dataloading.MultiLayerNeighborSampler is tessera.NeighborSampler
    g = tessera.DistGraph("cora", part_config=cora_one)
    seeds = torch.tensor([0, 5, 633, 2707])
    full = tessera.MultiLayerFullNeighborSampler(2)
    assert isinstance(full, tessera.NeighborSampler) and full.fanouts == [-1, -1]
    _, _, blocks = full.sample_blocks(g, seeds, seed=1)
    _, _, again = full.sample_blocks(g, seeds, seed=2)
    for block, other in zip(blocks, again):
        src, dst = block.edges()
        u, v = block.srcnodes[src], block.dstnodes[dst]
        for s in block.dstnodes.tolist():
            assert sorted(u[v == s].tolist()) == sorted(in_neighbors(g.local_graph, s).tolist())
        assert torch.equal(block.srcnodes, other.srcnodes)
    assert torch.equal(blocks[-1].dstnodes, seeds)
    assert blocks[0].dstnodes.shape[0] == blocks[1].srcnodes.shape[0]
    with pytest.raises(ValueError, match="num_layers must be >= 1, got 0"):
        tessera.MultiLayerFullNeighborSampler(0)
    with pytest.raises(TypeError, match="num_layers must be an integer"):
        tessera.MultiLayerFullNeighborSampler(2.0)
    with pytest.raises(TypeError, match="replace does not apply"):
        tessera.MultiLayerFullNeighborSampler(2, replace=True)


def test_dist_data_loader_batches_as_dgls(cora_one):
    """dgl.distributed.DistDataLoader: the batches, as lists of ints, in DGL's order for one
    torch seed (shuffled or not, with and without drop_last), and a sampler as collate_fn."""
    import functools

    from tessera.distributed import DistDataLoader

    ds = torch.arange(100, 123)
    dgl_dist = None
    try:
        import dgl.distributed as dgl_dist
    except ImportError:
        pass
    for shuffle in (False, True):
        for drop in (False, True):
            torch.manual_seed(5)
            loader = DistDataLoader(ds, 5, shuffle=shuffle, drop_last=drop)
            got = list(loader)
            assert len(got) == len(loader) == (4 if drop else 5)
            assert all(type(i) is int for b in got for i in b)
            items = [i for b in got for i in b]
            assert len(set(items)) == len(items) == (20 if drop else 23)
            assert set(items) <= set(range(100, 123))
            assert shuffle or items == list(range(100, 100 + len(items)))
            assert list(loader) != got if shuffle else list(loader) == got  # a new epoch
            if dgl_dist is not None:
                torch.manual_seed(5)
                want = list(dgl_dist.DistDataLoader(ds, 5, shuffle=shuffle, drop_last=drop,
                                                    collate_fn=lambda x: x))
                assert got == want, (shuffle, drop)
    assert list(DistDataLoader(np.array([3, 1, 2]), 2)) == [[3, 1], [2]]
    assert list(DistDataLoader([np.int64(4), torch.tensor(7)], 5)) == [[4, 7]]
    assert list(DistDataLoader(torch.arange(0), 5)) == []
    g = tessera.DistGraph("cora", part_config=cora_one)
    sampler = tessera.NeighborSampler([5, 3])
    loader = DistDataLoader(torch.arange(10), 4, collate_fn=functools.partial(
        sampler.sample_blocks, g))
    seeds = [out for _, out, _ in loader]
    assert [s.tolist() for s in seeds] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    with pytest.raises(TypeError, match="DistDataLoader: batch_size must be an integer"):
        DistDataLoader(ds, 2.5)
    with pytest.raises(ValueError, match="DistDataLoader: batch_size must be >= 1"):
        DistDataLoader(ds, 0)
    with pytest.raises(TypeError, match="collate_fn must be callable"):
        DistDataLoader(ds, 2, collate_fn="sample")
    with pytest.raises(ValueError, match=r"dataset must be 1-D IDs, got shape \(2, 3\)"):
        DistDataLoader(torch.zeros(2, 3, dtype=torch.int64), 2)
    with pytest.raises(TypeError, match="dataset must be a sequence of IDs"):
        DistDataLoader(5, 2)


def test_the_type_helpers_and_id_attributes_of_a_homogeneous_distgraph(cora_one):
    """DGL's heterograph-aware helpers answer for the one type, as on a DGL DistGraph of a
    homogeneous graph; another type name is refused."""
    g = tessera.DistGraph("cora", part_config=cora_one)
    assert g.canonical_etypes == [("_N", "_E", "_N")]
    assert g.to_canonical_etype("_E") == g.to_canonical_etype(None) == ("_N", "_E", "_N")
    assert g.get_ntype_id("_N") == g.get_etype_id("_E") == 0
    assert g.idtype == torch.int64 and g.device == torch.device("cpu") and not g.is_pinned()
    with pytest.raises(ValueError, match="edge type 'cites' does not exist"):
        g.get_etype_id("cites")
    with pytest.raises(ValueError, match="node type 'paper' does not exist"):
        g.get_ntype_id("paper")


def test_the_partition_book_takes_dgls_type_arguments(cora_parts):
    """A script written over g.ntypes passes the type to the book's queries
    (pb.partid2nids(pb.partid, ntype), DGL's rgcn example) and maps IDs between per-type and
    homogeneous ones: for the one type the IDs stay as they are, as DGL's book answers for a
    homogeneous graph (checked against DGL 1.1.3)."""
    pb = tessera.DistGraph("cora", part_config=cora_parts[0]).get_partition_book()
    n, m = pb.num_nodes, pb.num_edges
    lo, hi = pb.node_range(1)
    elo, ehi = pb.edge_range(1)
    assert torch.equal(pb.partid2nids(1, "_N"), pb.partid2nids(1))
    assert torch.equal(pb.partid2nids(1, "_N"), torch.arange(lo, hi))
    assert torch.equal(pb.partid2eids(1, ("_N", "_E", "_N")), torch.arange(elo, ehi))
    ids, eids = torch.tensor([n - 1, 0, lo]), torch.tensor([m - 1, 0, elo])
    assert pb.nid2partid(ids, "_N").tolist() == [1, 0, 1]
    assert pb.eid2partid(eids, "_E").tolist() == [1, 0, 1]
    assert pb.nid2localnid(torch.tensor([lo, hi - 1]), 1, "_N").tolist() == [0, hi - 1 - lo]
    assert pb.eid2localeid(torch.tensor([elo, ehi - 1]), 1, "_E").tolist() == \
        [0, ehi - 1 - elo]
    with pytest.raises(IndexError, match="eid2localeid: some IDs are not owned by partition 1"):
        pb.eid2localeid(torch.tensor([0]), 1)
    assert pb.ntypes == ["_N"] and pb.etypes == ["_E"] and pb.is_homogeneous
    assert pb.canonical_etypes == [("_N", "_E", "_N")]
    assert pb.to_canonical_etype("_E") == ("_N", "_E", "_N")
    assert torch.equal(pb.map_to_homo_nid(ids, "_N"), ids)
    assert torch.equal(pb.map_to_homo_eid(eids, ("_N", "_E", "_N")), eids)
    types, per_type = pb.map_to_per_ntype(ids)
    assert types.tolist() == [0, 0, 0] and torch.equal(per_type, ids)
    types, per_type = pb.map_to_per_etype(np.array([3, 1]))
    assert types.tolist() == [0, 0] and per_type.tolist() == [3, 1]
    with pytest.raises(IndexError, match=rf"map_to_homo_nid: ID {n} outside \[0, {n}\)"):
        pb.map_to_homo_nid([0, n], "_N")
    for call in (lambda: pb.partid2nids(0, "paper"), lambda: pb.nid2partid(ids, "paper"),
                 lambda: pb.map_to_homo_nid(ids, "paper")):
        with pytest.raises(ValueError, match="node type 'paper' does not exist"):
            call()
    with pytest.raises(ValueError, match="edge type 'cites' does not exist"):
        pb.eid2partid(eids, "cites")


@pytest.mark.parametrize("parts", ["one-part", "simulated"])
def test_per_type_data_views_are_ndata_and_edata(cora_one, cora_parts, parts):
    """g.nodes[ntype].data / g.edges[etype].data (DGL's rgcn example reads features so, over
    g.ntypes) are g.ndata / g.edata: reads, and assignments and deletions through them."""
    g = tessera.DistGraph("cora", part_config=cora_one if parts == "one-part" else cora_parts[0])
    view = g.nodes["_N"].data
    assert view is g.ndata and g.nodes[None].data is g.ndata
    assert "feat" in view and "trainer_id" not in view
    assert torch.equal(view["label"][torch.tensor([4, 1])], g.ndata["label"][torch.tensor([4, 1])])
    t = tessera.DistTensor((g.num_nodes(), 2), torch.float32, f"nodes-view-{parts}",
                           part_policy=g.get_node_partition_policy())
    g.nodes["_N"].data["h"] = t
    assert g.ndata["h"] is t
    del g.nodes["_N"].data["h"]
    assert "h" not in g.ndata
    assert g.edges["_E"].data is g.edata is g.edges[("_N", "_E", "_N")].data
    with pytest.raises(ValueError, match=r"DistGraph.nodes\[...\]: node type 'paper' does not"):
        g.nodes["paper"]
    with pytest.raises(ValueError, match="edge type 'cites' does not exist"):
        g.edges["cites"]


def test_out_edges_of_a_one_part_distgraph(cora_one):
    g = tessera.DistGraph("cora", part_config=cora_one)
    seeds = torch.tensor([0, 5, 633])
    _, _, (block,) = tessera.NeighborSampler([-1], edge_dir="out").sample_blocks(g, seeds)
    src, dst = block.edges()
    u, v = block.srcnodes[src], block.dstnodes[dst]
    transposed = g.local_graph.transpose()  # rows of out-edges, the same edge IDs
    for i, s in enumerate(seeds.tolist()):
        got = sorted(u[v == s].tolist())
        assert got == sorted(in_neighbors(transposed, s).tolist()), s
    assert len(src) == sum(len(in_neighbors(transposed, s)) for s in seeds.tolist())


def test_type_names_other_than_the_default_are_refused(cora_parts):
    config = cora_parts[0]
    g = tessera.DistGraph("cora", part_config=config)
    assert g.num_nodes("_N") == g.num_nodes() and g.num_edges(("_N", "_E", "_N")) == g.num_edges()
    with pytest.raises(ValueError, match="node type 'paper' does not exist"):
        g.num_nodes("paper")
    with pytest.raises(ValueError, match="edge type 'cites' does not exist"):
        g.get_edge_partition_policy("cites")
    mask = np.zeros(g.num_nodes(), dtype=bool)
    with pytest.raises(ValueError, match="node_split: node type 'paper'"):
        tessera.node_split(mask, g.get_partition_book(), ntype="paper")
    with pytest.raises(ValueError, match="edge_split: edge type 'cites'"):
        tessera.edge_split(np.zeros(g.num_edges(), dtype=bool), g.get_partition_book(),
                           etype="cites")


def test_misspelled_initialize_arguments_are_refused():
    with pytest.raises(TypeError, match="unexpected keyword argument 'num_server'"):
        tessera.initialize(num_server=2)


def test_reverse_id_exclusion_needs_its_map():
    with pytest.raises(ValueError, match="exclude='reverse_id' needs reverse_eids"):
        dataloading.as_edge_prediction_sampler(tessera.NeighborSampler([5]), exclude="reverse_id")


def test_dataloader_over_an_edge_prediction_sampler_loads_edges(cora):
    """DGL 1.x's link prediction: ``DataLoader(g, train_eids, as_edge_prediction_sampler(...))``
    iterates edge batches, ``(input_nodes, pair_graph, neg_pair_graph, blocks)``, as the
    EdgeDataLoader of the same arguments does (it iterated node batches over edge IDs)."""
    eids = np.arange(0, 600, 3)
    base = tessera.NeighborSampler([3, 2])
    s = dataloading.as_edge_prediction_sampler(base, exclude="self",
                                               negative_sampler=dataloading.negative_sampler
                                               .Uniform(2))
    dl = dataloading.DataLoader(cora, eids, s, 64, shuffle=True, seed=5, prefetch=2)
    want = tessera.EdgeDataLoader(cora, eids, s, batch_size=64, seed=5)
    assert isinstance(dl, tessera.EdgeDataLoader) and len(dl) == len(want) == 4
    assert isinstance(dl, dataloading.DataLoader)  # as DGL's DataLoader is
    assert not isinstance(want, dataloading.DataLoader)
    assert not isinstance(dataloading.DataLoader(cora, np.arange(10), base),
                          tessera.EdgeDataLoader)
    for got, ref in zip(dl, want):
        assert len(got) == 4
        (inp, pos, neg, blocks), (inp2, pos2, neg2, blocks2) = got, ref
        assert np.array_equal(np.asarray(inp), np.asarray(inp2))
        assert np.array_equal(np.asarray(pos.eids), np.asarray(pos2.eids))
        assert set(np.asarray(pos.eids).tolist()) <= set(eids.tolist())
        assert np.array_equal(np.asarray(neg.dst), np.asarray(neg2.dst))
        assert neg.num_edges() == 2 * pos.num_edges()
        assert np.array_equal(np.asarray(blocks[0].eids), np.asarray(blocks2[0].eids))
    # Without negatives: (input_nodes, pair_graph, blocks), as DGL's.
    plain = dataloading.as_edge_prediction_sampler(base)
    assert len(next(iter(dataloading.DataLoader(cora, eids, graph_sampler=plain)))) == 3
    # Any other sampler: node batches, as before.
    nodes = dataloading.DataLoader(cora, np.arange(100), base, batch_size=50, shuffle=False)
    assert isinstance(nodes, dataloading.DataLoader)
    assert isinstance(nodes, tessera.NodeDataLoader)
    _, seeds, _ = next(iter(nodes))
    assert np.asarray(seeds).tolist() == list(range(50))
    # NodeDataLoader does not take an edge-prediction sampler silently.
    with pytest.raises(ValueError, match="NodeDataLoader: graph_sampler comes from "
                                         r"as_edge_prediction_sampler .*use EdgeDataLoader"):
        tessera.NodeDataLoader(cora, eids, s)
    with pytest.raises(TypeError, match="unexpected keyword argument 'batchsize'"):
        dataloading.DataLoader(cora, eids, s, batchsize=64)


def test_ids_per_type_are_refused_as_heterogeneous_input(cora):
    """DGL's heterograph inputs, a dict of IDs per node or edge type, are refused saying so
    (the error was "expected integer IDs, got object")."""
    s = tessera.NeighborSampler([2])
    msg = r"a dict per type \(keys \[{}\]\) is for heterogeneous graphs, which are not supported"
    for what, keys, call in (
            ("nids", "'_N'", lambda: tessera.NodeDataLoader(cora, {"_N": np.arange(4)}, s)),
            ("nids", "'_N'", lambda: dataloading.DataLoader(cora, {"_N": np.arange(4)}, s)),
            ("eids", r"\"\('paper', 'cites', 'paper'\)\"", lambda: tessera.EdgeDataLoader(
                cora, {("paper", "cites", "paper"): np.arange(4)}, s)),
            ("reverse_eids", "'_E'", lambda: tessera.EdgeDataLoader(
                cora, np.arange(4), s, exclude="reverse_id", reverse_eids={"_E": [0]})),
            ("seed_nodes", "'author', 'paper'", lambda: s.sample_blocks(
                cora, {"paper": [0], "author": [1]}))):
        with pytest.raises(TypeError, match=f"{what}: " + msg.format(keys)):
            call()


# DGL 1.1.3 standalone (one process, a 1-part partitioning) over a graph of n nodes and m edges:
# its partition policies, DistTensor keys and count_nonzero, as JSON on stdout.
_DGL_STANDALONE = r"""
import json, os, sys
os.environ["DGL_DIST_MODE"] = "standalone"
import numpy as np, torch, dgl, dgl.distributed as dd
out, n, m = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
e = torch.arange(m)
g = dgl.graph((e % n, (e + 1) % n), num_nodes=n)
g.ndata["feat"] = torch.from_numpy(np.load(os.path.join(out, "feat.npy")))
dd.partition_graph(g, "tiny", 1, out)
open(os.path.join(out, "ip.txt"), "w").write("127.0.0.1\n")
dd.initialize(os.path.join(out, "ip.txt"))
dg = dd.DistGraph("tiny", part_config=os.path.join(out, "tiny.json"))
pb = dg.get_partition_book()
def policy(p):
    ids = torch.tensor([1, 0, 2])
    return [p.policy_str, p.type_name, p.part_id, p.get_part_size(), p.get_size(), p.is_node,
            str(p.get_data_name("f")), p.to_local(ids).tolist(), p.to_partid(ids).tolist()]
def tensor(t):
    return [t.name, t.tensor_name, t.kvstore_key, int(t.count_nonzero())]
npol, epol = dg.get_node_partition_policy("_N"), dg.get_edge_partition_policy("_E")
rows = torch.arange(3 * n).reshape(n, 3) % 4
t = dd.DistTensor((n, 3), torch.int64, "cnt", part_policy=npol, attach=False)
t[torch.arange(n)] = rows
w = dd.DistTensor((m,), torch.float32, "w", part_policy=epol, attach=False)
w[torch.tensor([0, m - 1])] = torch.tensor([1.0, 2.0])
emb = dd.DistEmbedding(n, 2, "emb", part_policy=npol)
print(json.dumps({
    "node": policy(npol), "edge": policy(epol),
    "by_str": [policy(dd.PartitionPolicy(s, pb)) for s in ("node", "node~_N", "edge~_N:_E:_N")],
    "feat": tensor(dg.ndata["feat"]), "cnt": tensor(t), "w": tensor(w),
    "emb_policy": emb.part_policy.policy_str,
    "emb_default_policy": dd.DistEmbedding(n, 2, "emb2").part_policy,
    "local_partition_is_property": isinstance(type(dg).local_partition, property)}))
"""


def _dgl_standalone(tmp_path, n, m, feat):
    """DGL 1.1.3's answers (the JSON of _DGL_STANDALONE), or None without DGL."""
    import importlib.util
    import json
    import subprocess
    import sys
    if importlib.util.find_spec("dgl") is None:
        return None
    np.save(tmp_path / "feat.npy", feat)
    res = subprocess.run([sys.executable, "-c", _DGL_STANDALONE, str(tmp_path), str(n), str(m)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def _policy_facts(p):
    ids = torch.tensor([1, 0, 2])
    tn = p.type_name
    return [p.policy_str, list(tn) if isinstance(tn, tuple) else tn, p.part_id,
            p.get_part_size(), p.get_size(), p.is_node, str(p.get_data_name("f")),
            p.to_local(ids).tolist(), p.to_partid(ids).tolist()]


def test_partition_policies_and_tensor_keys_as_dgls(cora_one, tmp_path):
    """Policies (get_*_partition_policy, PartitionPolicy(policy_str, book)), DistTensor's
    tensor_name / kvstore_key / count_nonzero and DistEmbedding.part_policy on a 1-part
    DistGraph, against DGL 1.1.3 standalone over a graph of as many nodes and edges."""
    from tessera.distributed import DistEmbedding, PartitionPolicy

    g = tessera.DistGraph("cora", part_config=cora_one)
    n, m = g.num_nodes(), g.num_edges()
    npol, epol = g.get_node_partition_policy("_N"), g.get_edge_partition_policy("_E")
    pb = g.get_partition_book()
    node = ["node~_N", "_N", 0, n, n, True, "node~_N~f", [1, 0, 2], [0, 0, 0]]
    edge = ["edge~_N:_E:_N", ["_N", "_E", "_N"], 0, m, m, False, "edge~_N:_E:_N~f",
            [1, 0, 2], [0, 0, 0]]
    assert _policy_facts(npol) == node and _policy_facts(epol) == edge
    by_str = [_policy_facts(PartitionPolicy(s, pb)) for s in ("node", "node~_N", "edge~_N:_E:_N")]
    assert by_str == [node, node, edge]
    assert npol.type_name == "_N" and epol.type_name == ("_N", "_E", "_N")

    feat = g.ndata["feat"]
    rows = torch.arange(3 * n).reshape(n, 3) % 4
    t = tessera.DistTensor((n, 3), torch.int64, "cnt", part_policy=npol)
    t[torch.arange(n)] = rows
    w = tessera.DistTensor((m,), torch.float32, "w", part_policy=epol)
    w[torch.tensor([0, m - 1])] = torch.tensor([1.0, 2.0])
    feat_nnz = int(np.count_nonzero(feat.numpy()))
    assert 0 < feat_nnz < feat.shape[0] * feat.shape[1]
    assert [feat.tensor_name, feat.kvstore_key, feat.count_nonzero()] == \
        ["feat", "node~_N~feat", feat_nnz]
    assert [t.tensor_name, t.kvstore_key, t.count_nonzero()] == \
        ["cnt", "node~_N~cnt", int((rows != 0).sum())]
    assert [w.tensor_name, w.kvstore_key, w.count_nonzero()] == ["w", "edge~_N:_E:_N~w", 2]
    assert type(t.count_nonzero()) is int
    emb = DistEmbedding(n, 2, "compat-emb", part_policy=npol)
    assert emb.part_policy is npol and DistEmbedding(n, 2, "compat-emb2").part_policy is None

    want = _dgl_standalone(tmp_path, n, m, feat.numpy())
    if want is not None:
        assert want["node"] == node and want["edge"] == edge and want["by_str"] == by_str
        # DGL's name is the key; its key of an attach=False tensor has no group suffix.
        for key, tt in (("feat", feat), ("cnt", t), ("w", w)):
            assert want[key] == [tt.kvstore_key, tt.tensor_name, tt.kvstore_key,
                                 tt.count_nonzero()], key
        assert want["emb_policy"] == emb.part_policy.policy_str
        assert want["emb_default_policy"] is None
        assert want["local_partition_is_property"]


def test_partition_policies_of_a_simulated_distgraph(cora_parts):
    """Two partitions served by one process: part_id is the book's (0), to_partid and
    to_local follow the ranges, and count_nonzero counts the rows of both partitions."""
    g = tessera.DistGraph("cora", part_config=cora_parts[0])
    pb = g.get_partition_book()
    (lo0, hi0), (lo1, hi1) = pb.node_range(0), pb.node_range(1)
    (elo0, ehi0), (elo1, _) = pb.edge_range(0), pb.edge_range(1)
    npol, epol = g.get_node_partition_policy(), g.get_edge_partition_policy()
    assert npol.part_id == epol.part_id == pb.partid == 0
    assert npol.get_part_size() == hi0 - lo0 and epol.get_part_size() == ehi0 - elo0
    assert npol.get_size() == g.num_nodes() and epol.get_size() == g.num_edges()
    assert npol.to_partid(torch.tensor([hi1 - 1, 0, lo1])).tolist() == [1, 0, 1]
    assert epol.to_partid(torch.tensor([elo1, 0])).tolist() == [1, 0]
    assert npol.to_local(torch.tensor([hi0 - 1, 0])).tolist() == [hi0 - 1, 0]
    with pytest.raises(IndexError, match="not owned by partition 0"):
        npol.to_local(torch.tensor([lo1]))
    assert tessera.PartitionPolicy("edge", pb).policy_str == "edge~_N:_E:_N"
    with pytest.raises(ValueError, match="must start with 'node' or 'edge'"):
        tessera.PartitionPolicy("foo~_N", pb)
    with pytest.raises(ValueError, match="canonical"):
        tessera.PartitionPolicy("edge~_E", pb)
    with pytest.raises(ValueError, match="node type 'paper' does not exist"):
        tessera.PartitionPolicy("node~paper", pb)
    with pytest.raises(ValueError, match="edge type 'cites' does not exist"):
        tessera.EdgePartitionPolicy(pb, "cites")
    with pytest.raises(TypeError, match="GraphPartitionBook"):
        tessera.PartitionPolicy("node~_N", None)
    # A tensor whose nonzero rows lie in both partitions (rows [lo1, hi1) are partition 1's).
    t = tessera.DistTensor((g.num_nodes(), 2), torch.int64, "sim-cnt", part_policy=npol)
    t[torch.tensor([0, lo1, hi1 - 1])] = torch.tensor([[1, 0], [2, 3], [0, 4]])
    assert t.count_nonzero() == 4 and t.kvstore_key == "node~_N~sim-cnt"
    feat = g.ndata["feat"]
    assert feat.count_nonzero() == int(np.count_nonzero(feat.numpy()))


@pytest.mark.parametrize("parts", ["one-part", "simulated"])
def test_local_partition_is_a_property_and_callable(cora_one, cora_parts, parts):
    """DGL's g.local_partition is a property; Tessera's callers call it (part optional)."""
    g = tessera.DistGraph("cora", part_config=cora_one if parts == "one-part" else cora_parts[0])
    lp = g.local_partition()
    assert isinstance(lp, tessera._C.LocalPartition)
    assert np.array_equal(np.asarray(g.local_partition.nid), np.asarray(lp.nid))
    assert g.local_partition.num_inner_nodes == lp.num_inner_nodes
    assert "nid" in dir(g.local_partition)
    if parts == "simulated":
        lp1 = g.local_partition(1)
        assert int(lp1.num_inner_nodes) == np.subtract(*g.get_partition_book().node_range(1)) * -1
        assert not np.array_equal(np.asarray(lp1.nid), np.asarray(lp.nid))
    with pytest.raises(AttributeError):
        g.local_partition.no_such_attribute
