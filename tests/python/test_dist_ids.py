# SPDX-License-Identifier: Apache-2.0
"""IDs and masks handed to the distributed API in one process: DistTensor reads and writes,
DistGraph.in_degrees / out_degrees / orig_nids, node_split / edge_split and the loaders' seeds,
over a 1-part partitioning (the runtime holds the rows, as in a job) and a 2-part one
(simulated).

A boolean mask is 1-D and as long as what it indexes, a DistTensor of IDs is read whole, IDs
are range-checked with an IndexError naming the ID, and written rows fit the tensor's rows."""
import re

import numpy as np
import pytest

from conftest import tessera

torch = pytest.importorskip("torch")

N = 2708  # Cora's nodes


@pytest.fixture(params=["one-part", "simulated"])
def g(request, cora_one, cora_parts):
    config = cora_one if request.param == "one-part" else cora_parts[0]
    return tessera.DistGraph("cora", part_config=config)


def _filled(g, name):
    t = tessera.DistTensor((N, 2), torch.float32, name, part_policy=g.get_node_partition_policy())
    t[torch.arange(N)] = torch.arange(2.0 * N).reshape(N, 2)
    return t


# --- boolean masks ----------------------------------------------------------------------------
@pytest.mark.parametrize("length", [3, N + 1])
def test_a_mask_of_another_length_than_the_rows_is_refused(g, length):
    """A 3-entry mask read rows 0-2 of the 2708 and overwrote them on a write."""
    t = _filled(g, f"mask-len-{length}")
    mask = torch.ones(length, dtype=torch.bool)
    msg = f"mask-len-{length} IDs: a boolean mask of length {length} for {N} rows"
    with pytest.raises(ValueError, match=msg):
        t[mask]
    with pytest.raises(ValueError, match=msg):
        t[mask] = torch.zeros(length, 2)
    assert torch.equal(t[torch.arange(3)], torch.tensor([[0.0, 1], [2, 3], [4, 5]]))


def test_a_mask_over_every_row_selects_its_true_rows(g):
    t = _filled(g, "mask-full")
    mask = torch.zeros(N, dtype=torch.bool)
    mask[[5, 2700]] = True
    assert torch.equal(t[mask], t[torch.tensor([5, 2700])])
    t[mask] = torch.zeros(2, 2)
    assert float(t[torch.tensor([5, 2700])].abs().sum()) == 0.0


@pytest.mark.parametrize("shape", [(2, 3), (N, 2), (N, 1)])
def test_a_mask_of_more_dimensions_is_refused_naming_its_shape(g, shape):
    """A 2-D mask read rows with repeats (a row per true entry of each column)."""
    t = _filled(g, f"mask-2d-{shape[0]}-{shape[1]}")
    mask = torch.ones(shape, dtype=torch.bool)
    msg = (r"a mask must be 1-D \(one entry per node or edge\), got shape "
           f"{re.escape(str(shape))}; .*pick one")
    with pytest.raises(ValueError, match=msg):
        t[mask]
    with pytest.raises(ValueError, match=msg):
        g.orig_nids(mask)
    if g.get_partition_book().num_owners() == 1:
        with pytest.raises(ValueError, match=msg):
            g.in_degrees(mask)


def test_graph_queries_take_a_mask_over_every_node(g):
    mask = np.zeros(N, dtype=bool)
    mask[[3, 7]] = True
    assert np.array_equal(g.orig_nids(mask), g.orig_nids()[[3, 7]])
    assert np.array_equal(np.asarray(g.in_degrees(mask)), np.asarray(g.in_degrees())[[3, 7]])
    assert np.array_equal(np.asarray(g.out_degrees(mask)), np.asarray(g.out_degrees())[[3, 7]])
    with pytest.raises(ValueError, match=f"boolean mask of length 5 for a graph of {N} nodes"):
        g.orig_nids(np.ones(5, dtype=bool))
    book = g.get_partition_book()
    assert np.array_equal(np.asarray(book.nid2partid(mask)),
                          np.asarray(book.nid2partid(np.array([3, 7]))))
    with pytest.raises(ValueError, match=f"boolean mask of length 5 for a graph of {N} nodes"):
        book.nid2partid(np.ones(5, dtype=bool))


@pytest.mark.parametrize("kind", ["numpy", "torch", "DistTensor"])
def test_node_split_refuses_a_mask_of_several_columns(g, kind):
    """An [N, 2] mask listed each node selected in both columns twice (and the runtime's split
    of a DistTensor read only the first column)."""
    m2 = np.zeros((N, 2), dtype=bool)
    m2[:10, 0] = m2[:10, 1] = m2[20:25, 1] = True
    if kind == "DistTensor":
        mask = tessera.DistTensor((N, 2), torch.bool, "split-2d",
                                  part_policy=g.get_node_partition_policy())
        mask[torch.arange(N)] = torch.from_numpy(m2)
    else:
        mask = torch.from_numpy(m2) if kind == "torch" else m2
    msg = rf"node_split.*a mask must be 1-D .*got shape \({N}, 2\); .*pick one, e.g. mask\[:, 0\]"
    with pytest.raises(ValueError, match=msg):
        tessera.node_split(mask, g.get_partition_book())
    with pytest.raises(ValueError, match=msg.replace("node_split", "edge_split")):
        tessera.edge_split(mask, g.get_partition_book())
    assert tessera.node_split(m2[:, 1], g.get_partition_book()).tolist() == \
        list(range(10)) + list(range(20, 25))


def test_loader_seeds_of_a_mask_of_several_columns_are_refused():
    """A dataset's [N, S] train mask (S fixed splits) trained on the union of the splits, or
    failed with "seed node 0 is listed twice"."""
    n = 30
    ds = tessera.graph_from_arrays((np.arange(n), (np.arange(n) + 1) % n), num_nodes=n)
    m2 = np.zeros((n, 2), dtype=bool)
    m2[:10, 0] = m2[10:20, 1] = True
    sampler = tessera.dataloading.NeighborSampler([2])
    for mask in (m2, m2[:, :1], np.ones((n, 2), dtype=bool)):
        with pytest.raises(ValueError, match=rf"nids: a mask must be 1-D .*got shape "
                                             rf"\({n}, {mask.shape[1]}\); .*pick one"):
            tessera.dataloading.NodeDataLoader(ds, mask, sampler, batch_size=64)
    loader = tessera.dataloading.NodeDataLoader(ds, m2[:, 1], sampler, batch_size=64,
                                                shuffle=False)
    assert np.array_equal(np.concatenate([np.asarray(s) for _, s, _ in loader]),
                          np.arange(10, 20))


# --- a DistTensor as IDs ----------------------------------------------------------------------
def test_a_dist_tensor_of_ids_or_a_mask_is_read_whole(g, monkeypatch):
    """NumPy read a DistTensor row by row (one gather per row), and a 1-D int64 one of IDs was
    refused as "shape (2708, 1)"."""
    t = _filled(g, "ids-source")
    ids = tessera.DistTensor((N,), torch.int64, "ids-as-tensor",
                             part_policy=g.get_node_partition_policy())
    ids[torch.arange(N)] = torch.arange(N).flip(0)
    mask = g.ndata["train_mask"]
    per_row = []
    real = tessera.DistTensor.__getitem__
    monkeypatch.setattr(tessera.DistTensor, "__getitem__",
                        lambda self, i: per_row.append(self.name) or real(self, i))
    assert np.array_equal(t.gather(ids), t.gather(np.arange(N)[::-1].copy()))
    train = np.nonzero(mask.numpy())[0]
    assert np.array_equal(t.gather(mask), t.gather(train))
    assert np.array_equal(g.orig_nids(mask), g.orig_nids()[train])
    loader = tessera.dataloading.NodeDataLoader(g, mask, tessera.dataloading.NeighborSampler([2]),
                                                batch_size=64)
    assert np.array_equal(loader.nids, train)
    assert per_row == []


# --- dicts per type, IDs beyond int64 ---------------------------------------------------------
def test_a_dict_per_type_is_refused_as_heterogeneous(g):
    ids = {"_N": torch.tensor([0, 1])}
    t = _filled(g, "dict-ids")
    with pytest.raises(TypeError, match=r"dict-ids IDs: a dict per type \(keys \['_N'\]\) is "
                                        "for heterogeneous graphs, which are not supported"):
        t[ids]
    with pytest.raises(TypeError, match="node_split: a dict per type .* heterogeneous"):
        tessera.node_split(ids, g.get_partition_book())
    with pytest.raises(TypeError, match="nids: a dict per type .* heterogeneous"):
        tessera.dataloading.NodeDataLoader(g, ids, tessera.dataloading.NeighborSampler([2]))


def test_a_uint64_id_beyond_int64_is_named_with_its_value(g):
    """It was cast to int64 and reported as ID -1."""
    t = _filled(g, "uint64-ids")
    with pytest.raises(IndexError, match="ID 18446744073709551615 is beyond the largest ID"):
        t[np.array([1, 2 ** 64 - 1], dtype=np.uint64)]
    assert torch.equal(t[np.array([1, 2], dtype=np.uint64)], t[torch.tensor([1, 2])])


# --- IDs out of range -------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [-1, -N, N])
def test_graph_queries_refuse_ids_out_of_range(g, bad):
    """A negative ID wrapped to a node from the end; ID N raised NumPy's IndexError."""
    msg = rf"DistGraph.{{}}: ID {bad} outside \[0, {N}\)"
    with pytest.raises(IndexError, match=msg.format("orig_nids")):
        g.orig_nids(torch.tensor([0, bad]))
    if g.get_partition_book().num_owners() == 1:
        with pytest.raises(IndexError, match=msg.format("in_degrees")):
            g.in_degrees(torch.tensor([bad]))
        with pytest.raises(IndexError, match=msg.format("in_degrees")):
            g.in_degrees(bad)
        with pytest.raises(IndexError, match=msg.format("out_degrees")):
            g.out_degrees(torch.tensor([bad]))


# --- node_split's partition book --------------------------------------------------------------
def test_split_takes_the_book_of_a_dist_tensor_mask(g):
    """As DGL does; "node_split needs the partition book" was raised instead."""
    book = g.get_partition_book()
    mask = g.ndata["train_mask"]
    train = np.nonzero(mask.numpy())[0]
    for rank in (None, 0):
        assert np.array_equal(tessera.node_split(mask, rank=rank), train)
    half = tessera.node_split(mask, rank=1, world_size=2)
    assert np.array_equal(half, tessera.node_split(mask, book, rank=1, world_size=2))
    emask = tessera.DistTensor((g.num_edges(),), torch.bool, "edge-mask",
                               part_policy=g.get_edge_partition_policy())
    emask[torch.tensor([4, 9])] = torch.tensor([True, True])
    assert tessera.edge_split(emask, rank=0).tolist() == [4, 9]
    with pytest.raises(ValueError, match="node_split needs the partition book"):
        tessera.node_split(mask.numpy())


# --- written rows -----------------------------------------------------------------------------
@pytest.mark.parametrize("shape,rows,values", [((N, 4), "(4,)", (2, 3)), ((N,), "()", (2, 1))])
def test_written_rows_of_another_shape_are_refused_naming_both(g, shape, rows, values):
    """NumPy's broadcast error surfaced instead ("operands could not be broadcast ...")."""
    t = tessera.DistTensor(shape, torch.float32, f"write-{len(shape)}",
                           part_policy=g.get_node_partition_policy())
    with pytest.raises(ValueError, match=re.escape(
            f"DistTensor 'write-{len(shape)}': writing values of shape {values} to 2 rows of "
            f"shape {rows} needs values of shape {(2,) + shape[1:]}")):
        t[torch.tensor([0, 1])] = torch.ones(values)
    t[torch.tensor([0, 1])] = 2.0  # a scalar and one row still broadcast
    t[torch.tensor([2])] = torch.full(shape[1:], 3.0)
    assert t[torch.arange(3)].flatten().tolist() == [2.0] * 2 * (shape[1:] or (1,))[0] \
        + [3.0] * (shape[1:] or (1,))[0]


def test_np_array_of_a_dist_tensor_is_a_copy_of_its_rows(g):
    """np.asarray read the tensor row by row (an [N] tensor came back [N, 1]); np.array gave a
    single part's storage itself, so writing to the copy wrote to the tensor."""
    t = _filled(g, "as-array")
    a = np.array(t)
    assert a.shape == (N, 2) and np.array_equal(a, t.numpy())
    a[0] = -1
    assert t[torch.tensor([0])].tolist() == [[0.0, 1.0]]
    b = np.asarray(t, dtype=np.float64)
    assert b.dtype == np.float64 and np.array_equal(b, t.numpy())
    b[1] = -1
    assert t[torch.tensor([1])].tolist() == [[2.0, 3.0]]
    labels = g.ndata["label"]
    assert np.asarray(labels).shape == tuple(labels.shape)
