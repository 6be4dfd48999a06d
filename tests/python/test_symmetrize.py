# SPDX-License-Identifier: Apache-2.0
"""Symmetrizing stores every pair once per direction, and follows what a dataset says of its
edges (meta.json): load_dataset and partition_graph apply the library's rule, as the CLI does."""
import json

import numpy as np
import pytest

import tessera

from conftest import CORA


def _write_npy(folder, src, dst, num_nodes, **meta):
    """An npy dataset folder (edge_index.npy, meta.json)."""
    folder.mkdir()
    np.save(folder / "edge_index.npy", np.stack([src, dst]).astype(np.int64))
    (folder / "meta.json").write_text(json.dumps({"num_nodes": num_nodes, **meta}))
    return folder


def _rmat_like(tmp_path):
    """What `tessera generate rmat --symmetrize` writes: E/2 directed edges (a repeated pair, a
    pair drawn in both directions, a self loop among them), then their reverses (edge i and
    edge E/2 + i reverse each other), and "symmetrized": true."""
    rng = np.random.default_rng(7)
    src = rng.integers(0, 50, 400)
    dst = rng.integers(0, 50, 400)
    src[:4], dst[:4] = [3, 3, 4, 5], [4, 4, 3, 5]
    return _write_npy(tmp_path / "rmat", np.concatenate([src, dst]), np.concatenate([dst, src]),
                      50, symmetrized=True), 800


def _pairs(ds):
    """Sorted (src, dst, eid) of every stored edge of a dataset's CSC."""
    g = ds.graph
    dst = np.repeat(np.arange(g.num_nodes), np.diff(np.asarray(g.indptr)))
    return sorted(zip(np.asarray(g.indices).tolist(), dst.tolist(), np.asarray(g.eids).tolist()))


@pytest.mark.parametrize("symmetrize", [None, True, False])
def test_a_symmetrized_dataset_is_stored_once(tmp_path, symmetrize):
    path, stored = _rmat_like(tmp_path)
    ds = tessera.load_dataset(path, symmetrize=symmetrize)
    assert ds.edge_storage == "both directions stored"
    assert ds.num_edges == stored
    assert not ds.build_options["symmetrize"]
    assert sorted(np.asarray(ds.graph.eids).tolist()) == list(range(stored))  # the stored rows
    config = tessera.partition_graph(path, "rmat", 2, tmp_path / "parts", part_method="random",
                                     symmetrize=symmetrize)
    c = tessera.load_partition_config(config)
    assert c["num_edges"] == stored
    assert not c["build"]["symmetrize"]
    assert tessera.validate_partitions(config, original=ds)["ok"]


def test_symmetrize_stores_a_pair_once_per_direction(tmp_path):
    # 0->1 and 1->0 both listed, 1->2 one way, a self loop, 0->1 repeated.
    src, dst = np.array([0, 1, 1, 2, 0]), np.array([1, 0, 2, 2, 1])
    weight = np.arange(5, dtype=np.float32)
    ds = tessera.graph_from_arrays((src, dst), 3, edata={"w": weight}, symmetrize=True)
    # Input edges keep their IDs (and rows of w); only 2->1, the reverse of edge 2, is added
    # (ID E + 2 = 7, reading row 2). The repeat stays: deduplicate is what merges repeats.
    assert _pairs(ds) == [(0, 1, 0), (0, 1, 4), (1, 0, 1), (1, 2, 2), (2, 1, 7), (2, 2, 3)]
    assert ds.num_edges == 6
    # Edges i and E + i reverse each other where both are stored; where E + i was not added,
    # the input holds the reversed pair itself.
    rev = tessera.dataloading.symmetrized_reverse_eids(ds.num_input_edges)
    by_id = {e: (s, d) for s, d, e in _pairs(ds)}
    for e, (s, d) in by_id.items():
        if int(rev[e]) in by_id:
            assert by_id[int(rev[e])] == (d, s)
        else:
            assert (d, s) in by_id.values()
    dedup = tessera.graph_from_arrays((src, dst), 3, symmetrize=True, deduplicate=True)
    assert _pairs(dedup) == [(0, 1, 0), (1, 0, 1), (1, 2, 2), (2, 1, 7), (2, 2, 3)]

    # The same through a dataset folder that says it is directed, via partition_graph.
    path = _write_npy(tmp_path / "directed", src, dst, 3, directed=True)
    assert tessera.load_dataset(path).num_edges == 5  # directed: kept as stored by default
    config = tessera.partition_graph(path, "d", 2, tmp_path / "parts", part_method="random",
                                     symmetrize=True)
    assert tessera.load_partition_config(config)["num_edges"] == 6
    assert tessera.validate_partitions(config, original=tessera.load_dataset(
        path, symmetrize=True))["ok"]


def test_an_edge_loader_takes_the_reverse_ids_recipe_of_such_a_graph():
    # symmetrized_reverse_eids(E) names E + i for every i; this graph lacks E + 0, E + 1, E + 3
    # and E + 4 (the input held those pairs itself, or they are self loops), and its edge IDs
    # end at 7: those entries mean "no stored reverse", not a wrong array.
    src, dst = np.array([0, 1, 1, 2, 0]), np.array([1, 0, 2, 2, 1])
    ds = tessera.graph_from_arrays((src, dst), 3, symmetrize=True)
    rev = tessera.dataloading.symmetrized_reverse_eids(ds.num_input_edges)
    s = tessera.dataloading.as_edge_prediction_sampler(
        tessera.NeighborSampler([-1]), exclude="reverse_id", reverse_eids=rev)
    dl = tessera.EdgeDataLoader(ds, [0, 1, 2, 7], s, batch_size=4, shuffle=False)
    (_, pos, blocks), = list(dl)
    # Edge 2 (1 -> 2) and its stored reverse 7 (2 -> 1) are both seeds: neither is sampled.
    assert set(np.asarray(blocks[0].eids).tolist()).isdisjoint({0, 1, 2, 7})
    with pytest.raises(ValueError, match="reverse_eids has 4 entries for an edge-ID space of 8"):
        tessera.EdgeDataLoader(ds, [0], tessera.dataloading.as_edge_prediction_sampler(
            tessera.NeighborSampler([1]), exclude="reverse_id", reverse_eids=rev[:4]))
    with pytest.raises(IndexError, match=r"reverse_eids\[3\] = 10 outside \[-1, 10\)"):
        bad = rev.copy()
        bad[3] = 10
        tessera.EdgeDataLoader(ds, [0], tessera.dataloading.as_edge_prediction_sampler(
            tessera.NeighborSampler([1]), exclude="reverse_id", reverse_eids=bad))


def test_default_follows_what_the_dataset_says(tmp_path):
    # Cora's meta.json: each undirected edge stored once, to be symmetrized before use.
    cora = tessera.load_dataset(CORA)
    assert cora.edge_storage == "undirected, each pair stored once"
    assert (cora.num_input_edges, cora.num_edges) == (5278, 10556)
    assert tessera.load_dataset(CORA, symmetrize=False).num_edges == 5278
    config = tessera.partition_graph(CORA, "cora", 2, tmp_path / "dflt", part_method="random")
    assert tessera.load_partition_config(config)["num_edges"] == 10556
    config = tessera.partition_graph(CORA, "cora", 2, tmp_path / "no", part_method="random",
                                     symmetrize=False)
    assert tessera.load_partition_config(config)["num_edges"] == 5278
    # Arrays say nothing of their edges: kept as they are unless symmetrize=True.
    ring = {"edge_index": np.array([[0, 1, 2], [1, 2, 0]]), "num_nodes": 3}
    config = tessera.partition_graph(ring, "ring", 1, tmp_path / "ring", part_method="random")
    assert tessera.load_partition_config(config)["num_edges"] == 3
