# SPDX-License-Identifier: Apache-2.0
"""Graph-level training: the graph dataset folder (reader, writer, errors), the distributed
graph sampler's partition of the graphs, block-diagonal batching, per-graph readout, GINConv,
and GIN learning on the shipped data/solubility at 1 rank and over 2 ranks (tessera launch)."""
from __future__ import annotations

import json
import re
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO, requires_torch, tessera

from tessera.graphs import (DistributedGraphSampler, GraphDataLoader, GraphDataset,
                            batch_graphs, graphs_to_arrays, read_graph_dataset,
                            shuffled_order, write_graph_dataset)

SOLUBILITY = os.path.join(REPO, "data", "solubility")
EXAMPLE = os.path.join(REPO, "python", "examples", "train_gin.py")


def random_graphs(num: int, seed: int = 0, feat: int = 3, empty_every: int = 0):
    """``num`` random graphs (1-7 nodes, some with no edges; every ``empty_every``-th with no
    nodes at all) with random features and labels."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(num):
        n = 0 if empty_every and i % empty_every == empty_every - 1 else int(rng.integers(1, 8))
        m = int(rng.integers(0, 3 * n + 1)) if n else 0
        out.append({"edge_index": rng.integers(0, max(n, 1), size=(2, m)),
                    "node_feat": rng.standard_normal((n, feat)).astype(np.float32),
                    "edge_feat": rng.integers(0, 5, size=m).astype(np.uint8),
                    "label": np.int64(rng.integers(0, 3)), "num_nodes": n})
    return out


@pytest.fixture
def arrays():
    return graphs_to_arrays(random_graphs(20, seed=1, empty_every=7))


# --- the folder ---------------------------------------------------------------------------
def test_write_read_round_trip(tmp_path, arrays):
    masks = {"train_mask": np.arange(20) < 15, "test_mask": np.arange(20) >= 15}
    ds = write_graph_dataset(tmp_path / "g", masks=masks, meta={"name": "rand"}, **arrays)
    back = read_graph_dataset(tmp_path / "g")
    for k, v in arrays.items():
        np.testing.assert_array_equal(np.asarray(getattr(back, k)), v)
    assert back.num_graphs == 20 and back.num_nodes == arrays["node_offsets"][-1]
    np.testing.assert_array_equal(back.split("train"), np.arange(15))
    np.testing.assert_array_equal(back.split("test"), np.arange(15, 20))
    meta = json.load(open(tmp_path / "g" / "meta.json"))
    assert meta["format"] == "tessera-graphs" and meta["num_graphs"] == 20
    assert meta["name"] == "rand" and ds.num_classes == int(arrays["graph_label"].max()) + 1
    # graph 3 as given
    g = back[3]
    no, eo = arrays["node_offsets"], arrays["edge_offsets"]
    np.testing.assert_array_equal(g["edge_index"], arrays["edge_index"][:, eo[3]:eo[4]])
    np.testing.assert_array_equal(g["node_feat"], arrays["node_feat"][no[3]:no[4]])
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".")]  # no temporary left


def _broken(arrays, what):
    a = {k: np.array(v) for k, v in arrays.items()}
    if what == "offsets not monotone":
        a["node_offsets"][5], a["node_offsets"][6] = a["node_offsets"][6], a["node_offsets"][5]
        if a["node_offsets"][5] == a["node_offsets"][6]:
            a["node_offsets"][5] += 1
        return a, "node_offsets is not monotone"
    if what == "offsets start":
        a["edge_offsets"] = a["edge_offsets"] + 1
        return a, "edge_offsets[0] is 1"
    if what == "edge out of range":
        g = int(np.argmax(np.diff(a["edge_offsets"]) > 0))
        a["edge_index"][1, a["edge_offsets"][g]] = np.diff(a["node_offsets"])[g]
        return a, "destination"
    if what == "negative source":
        a["edge_index"][0, -1] = -1
        return a, "source -1 out of range"
    if what == "feature rows":
        a["node_feat"] = a["node_feat"][:-1]
        return a, "node_feat has"
    if what == "label rows":
        a["graph_label"] = a["graph_label"][:-2]
        return a, "graph_label has"
    if what == "label below -1":  # the readers of node data refuse it too
        a["graph_label"] = a["graph_label"].astype(np.int64)
        a["graph_label"][2] = -7
        return a, "graph_label holds -7 for graph 2"
    if what == "edge count":
        a["edge_index"] = a["edge_index"][:, :-1]
        return a, "edge_index has"
    if what == "graph count":
        a["edge_offsets"] = a["edge_offsets"][:-1]
        return a, "edge_offsets"
    if what == "edge_feat rows":
        a["edge_feat"] = a["edge_feat"][1:]
        return a, "edge_feat has"
    raise AssertionError(what)


BROKEN = ["offsets not monotone", "offsets start", "edge out of range", "negative source",
          "feature rows", "label rows", "label below -1", "edge count", "graph count",
          "edge_feat rows"]


@pytest.mark.parametrize("num_classes", [None, 3.0, "3"])
def test_writer_refuses_a_meta_the_reader_would_refuse_and_writes_nothing(tmp_path, arrays,
                                                                         num_classes):
    """It wrote the folder (replacing one with overwrite=True), then failed reading it back."""
    with pytest.raises(ValueError, match=f"write_graph_dataset: meta: num_classes is "
                                         f"{re.escape(repr(num_classes))}, expected an integer"):
        write_graph_dataset(tmp_path / "g", meta={"num_classes": num_classes}, **arrays)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("what", BROKEN)
def test_writer_refuses_bad_arrays_and_writes_nothing(tmp_path, arrays, what):
    bad, message = _broken(arrays, what)
    with pytest.raises(ValueError, match=re.escape(message)):
        write_graph_dataset(tmp_path / "g", **bad)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("field", ["node_feat", "graph_label", "edge_feat"])
def test_writer_refuses_object_arrays_and_keeps_the_old_folder(tmp_path, arrays, field):
    """An object array was pickled into the new folder, which replaced the old one before the
    read-back refused it (allow_pickle=False): overwrite=True left an unreadable dataset."""
    write_graph_dataset(tmp_path / "g", **arrays)
    bad = dict(arrays)
    bad[field] = np.asarray(arrays[field]).astype(object)
    with pytest.raises(ValueError, match=f"write_graph_dataset: {field} has dtype object"):
        write_graph_dataset(tmp_path / "g", overwrite=True, **bad)
    assert os.listdir(tmp_path) == ["g"]
    back = read_graph_dataset(tmp_path / "g")
    np.testing.assert_array_equal(np.asarray(getattr(back, field)), arrays[field])


@pytest.mark.parametrize("what", BROKEN)
def test_reader_refuses_bad_folders(tmp_path, arrays, what):
    write_graph_dataset(tmp_path / "g", **arrays)
    bad, message = _broken(arrays, what)
    for k, v in bad.items():
        np.save(tmp_path / "g" / f"{k}.npy", v)
    meta = json.load(open(tmp_path / "g" / "meta.json"))
    for k in ("num_graphs", "num_nodes", "num_edges"):
        meta.pop(k)
    json.dump(meta, open(tmp_path / "g" / "meta.json", "w"))
    with pytest.raises(ValueError, match=re.escape(message)) as e:
        read_graph_dataset(tmp_path / "g")
    assert str(tmp_path / "g") in str(e.value)  # the error names the folder


def test_reader_errors_on_missing_file_and_foreign_folder(tmp_path, arrays):
    write_graph_dataset(tmp_path / "g", **arrays)
    os.remove(tmp_path / "g" / "node_offsets.npy")
    with pytest.raises(FileNotFoundError, match="node_offsets.npy is missing"):
        read_graph_dataset(tmp_path / "g")
    with pytest.raises(ValueError, match="format is None"):
        read_graph_dataset(os.path.join(REPO, "data", "cora"))
    with pytest.raises(FileNotFoundError, match="no such graph dataset folder"):
        read_graph_dataset(tmp_path / "absent")


def test_reader_checks_meta_counts(tmp_path, arrays):
    write_graph_dataset(tmp_path / "g", **arrays)
    meta = json.load(open(tmp_path / "g" / "meta.json"))
    meta["num_edges"] += 1
    json.dump(meta, open(tmp_path / "g" / "meta.json", "w"))
    with pytest.raises(ValueError, match="num_edges is"):
        read_graph_dataset(tmp_path / "g")


@pytest.mark.parametrize("text,message", [
    ('[1]', "meta.json: expected a JSON object of fields (format, format_version, ...), got a "
            "list"),
    ('{"format": "tessera-graphs", "format_version": "v1"}',
     "meta.json: format_version 'v1', this reader reads 1"),
    ('{"format": "tessera-graphs", "format_version": "1"}',
     "meta.json: format_version '1', this reader reads 1"),
    ('{"format": "tessera-graphs", "format_version": 1, "num_graphs": "many"}',
     "meta.json: num_graphs is 'many', expected an integer >= 0"),
    ('{"format": "tessera-graphs", "format_version": 1, "num_classes": 2.5}',
     "meta.json: num_classes is 2.5, expected an integer >= 0"),
    ('\xff\xfe', "meta.json: not valid JSON"),
])
def test_reader_refuses_a_bad_meta_json_naming_file_and_field(tmp_path, arrays, text, message):
    """A meta.json of a list, or of a version or count that is no integer, was an
    AttributeError or int()'s ValueError naming neither the file nor the field."""
    write_graph_dataset(tmp_path / "g", **arrays)
    with open(tmp_path / "g" / "meta.json", "w", encoding="latin-1") as f:
        f.write(text)
    with pytest.raises(ValueError, match=re.escape(str(tmp_path / "g" / message))):
        read_graph_dataset(tmp_path / "g")


def test_reader_refuses_an_empty_npy_file_naming_it(tmp_path, arrays):
    """An empty graph_label.npy was numpy's EOFError, naming no file."""
    write_graph_dataset(tmp_path / "g", **arrays)
    open(tmp_path / "g" / "graph_label.npy", "w").close()
    with pytest.raises(ValueError, match=re.escape(f"{tmp_path / 'g' / 'graph_label.npy'}: "
                                                   "not a readable .npy file")):
        read_graph_dataset(tmp_path / "g")


def test_writer_keeps_existing_folder_unless_overwrite(tmp_path, arrays):
    write_graph_dataset(tmp_path / "g", **arrays)
    with pytest.raises(FileExistsError):
        write_graph_dataset(tmp_path / "g", **arrays)
    bad, _ = _broken(arrays, "label rows")
    with pytest.raises(ValueError):
        write_graph_dataset(tmp_path / "g", overwrite=True, **bad)
    assert read_graph_dataset(tmp_path / "g").num_graphs == 20  # untouched
    small = graphs_to_arrays(random_graphs(4, seed=9))
    assert write_graph_dataset(tmp_path / "g", overwrite=True, **small).num_graphs == 4
    assert sorted(os.listdir(tmp_path)) == ["g"]


def test_writer_keeps_the_old_folder_when_the_final_rename_fails(tmp_path, arrays,
                                                                 monkeypatch):
    """With overwrite=True the old folder was moved aside before the new one was renamed onto
    its path; when that rename failed, the path was left without a dataset (the old one hidden
    under .g.old-<pid>)."""
    write_graph_dataset(tmp_path / "g", **arrays)
    real = os.replace

    def replace(src, dst):
        if os.path.basename(str(src)).startswith(".g.tmp-") and not str(src).endswith(".old"):
            raise OSError(28, "No space left on device")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    bad = dict(arrays, graph_label=np.zeros_like(arrays["graph_label"]))
    with pytest.raises(OSError, match="No space left"):
        write_graph_dataset(tmp_path / "g", overwrite=True, **bad)
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["g"]
    np.testing.assert_array_equal(read_graph_dataset(tmp_path / "g").graph_label,
                                  arrays["graph_label"])


def test_labels_at_or_above_num_classes_are_refused(tmp_path, arrays):
    """A meta num_classes below a label was written and read: a model sized by num_classes then
    failed in the loss (CPU: "IndexError: Target 2 is out of bounds"; CUDA: a device-side
    assert that ends the process)."""
    top = int(arrays["graph_label"].max())
    g = int(np.argmax(arrays["graph_label"] == top))
    message = (f"graph_label holds {top} for graph {g}, but num_classes is {top} (labels are "
               f"class indices 0..{top - 1}, or -1)")
    with pytest.raises(ValueError, match=re.escape(f"write_graph_dataset: {message}")):
        write_graph_dataset(tmp_path / "g", meta={"num_classes": top}, **arrays)
    assert os.listdir(tmp_path) == []
    write_graph_dataset(tmp_path / "g", **arrays)
    meta = json.load(open(tmp_path / "g" / "meta.json"))
    meta["num_classes"] = top
    json.dump(meta, open(tmp_path / "g" / "meta.json", "w"))
    with pytest.raises(ValueError, match=re.escape(f"{tmp_path / 'g'}: {message}")):
        read_graph_dataset(tmp_path / "g")
    # More classes than the labels use, and unlabelled graphs (-1), are fine.
    labels = np.array(arrays["graph_label"])
    labels[0] = -1
    ds = write_graph_dataset(tmp_path / "h", meta={"num_classes": top + 2},
                             **dict(arrays, graph_label=labels))
    assert ds.num_classes == top + 2


def test_graphs_to_arrays_refuses_edges_it_would_misread():
    """edge_index went through reshape(2, -1): an [E, 2] list of pairs was silently re-paired
    ([[0, 1], [1, 2], [2, 0]] became sources 0, 1, 1 and destinations 2, 2, 0) and float IDs
    truncated. edge_feat was compared with the edges only in total, so graphs of 2 and 3 edges
    with 3 and 2 feature rows shifted graph 1's first edge feature onto graph 0."""
    def graph(ei, **kw):
        return dict({"edge_index": ei, "node_feat": np.ones((3, 1)), "label": 0}, **kw)

    ok = graph([[0, 1], [1, 0]])
    for graphs, message in (
            ([ok, graph([[0, 1], [1, 2], [2, 0]])], "graph 1: edge_index must have shape [2, E] "
                                                    "(sources, destinations), got (3, 2)"),
            ([ok, graph([[0.7], [1.2]])], "graph 1: edge_index must hold integer node IDs, got "
                                          "float64"),
            ([graph([[0, 1], [1, 0]], edge_feat=[1, 2, 3]),
              graph([[0, 1, 1], [1, 0, 0]], edge_feat=[4, 5])],
             "graph 0 has 2 edges and edge_feat of shape (3,), not one row per edge"),
            ([ok, graph([[0], [1]], edge_feat=[1])], "graph 1 has edge_feat, graph 0 does not")):
        with pytest.raises(ValueError, match=re.escape(f"graphs_to_arrays: {message}")):
            graphs_to_arrays(graphs)
    with pytest.raises(ValueError, match=re.escape("graph 1 lacks edge_feat, graph 0 has it")):
        graphs_to_arrays([graph([[0], [1]], edge_feat=[1]), graph([[0], [1]])])
    arr = graphs_to_arrays([graph([]), graph(np.array([[2], [0]], dtype=np.int32))])
    np.testing.assert_array_equal(arr["edge_index"], [[2], [0]])
    np.testing.assert_array_equal(arr["edge_offsets"], [0, 0, 1])


def test_num_classes_of_labels_that_are_not_classes(tmp_path, capsys):
    """num_classes was 1 + int(max(label)) for any label: regression targets 3.2 and 1e6 gave
    "1000001 classes" (and -3.2, -1.5, -7.0 gave 0), which the repr showed and a classifier
    would be sized by. Class indices stored as floats or bools still count."""
    def ds_of(labels):
        return GraphDataset(**graphs_to_arrays([
            {"edge_index": np.zeros((2, 0), dtype=np.int64), "node_feat": np.ones((1, 1)),
             "label": np.asarray(v)} for v in labels]))

    for labels, bad in (((3.2, 1e6), "3.2"), ((-3.2, -1.5), "-3.2"), ((0.0, np.nan), "nan")):
        ds = ds_of(labels)
        with pytest.raises(ValueError, match=re.escape(
                f"num_classes: graph_label holds {bad}, not a class index")):
            ds.num_classes
        assert repr(ds).endswith("0 edges, labels not class indices)")
    assert ds_of((0.0, 2.0, 1.0)).num_classes == 3
    assert ds_of((True, False)).num_classes == 2
    assert ds_of((0, 4)).num_classes == 5
    # The GIN example refuses such a set with one line.
    import importlib.util

    arrays = graphs_to_arrays(random_graphs(6, seed=2))
    arrays["graph_label"] = np.linspace(-1.5, 2.5, 6)
    write_graph_dataset(tmp_path / "r", masks={"train_mask": np.ones(6, bool),
                                                "test_mask": np.ones(6, bool)}, **arrays)
    spec = importlib.util.spec_from_file_location("train_gin", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--dataset", str(tmp_path / "r"), "--epochs", "1", "--device", "cpu"]) == 2
    assert "train_gin.py: error: num_classes: graph_label holds -1.5, not a class index" in \
        capsys.readouterr().err


def test_shipped_solubility():
    ds = read_graph_dataset(SOLUBILITY)
    assert (ds.num_graphs, ds.num_classes) == (1282, 3)
    train, test = ds.split("train"), ds.split("test")
    assert len(train) == 1025 and len(test) == 257 and not np.intersect1d(train, test).size
    assert ds.node_feat.shape == (ds.num_nodes, 12)
    # each bond in both directions, and each atom one element
    np.testing.assert_array_equal(np.asarray(ds.node_feat[:, :11]).sum(1), 1)
    assert ds.num_edges % 2 == 0 and ds.meta["license"]


# --- the sampler ----------------------------------------------------------------------------
@pytest.mark.parametrize("n", [0, 1, 2, 5, 17, 64])
@pytest.mark.parametrize("world", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("drop_last", [False, True])
def test_sampler_partitions_graphs(n, world, drop_last):
    ids = np.arange(100, 100 + n)
    shares = [DistributedGraphSampler(indices=ids, num_replicas=world, rank=r, seed=3,
                                      drop_last=drop_last) for r in range(world)]
    for epoch in (0, 1):
        got = []
        for s in shares:
            s.set_epoch(epoch)
            got.append(np.array(list(s)))
        sizes = {len(g) for g in got}
        assert len(sizes) == 1 and sizes.pop() == len(shares[0])  # equal shares
        allg = np.concatenate(got) if got else np.array([])
        if drop_last:
            assert len(allg) == n - n % world
            assert len(np.unique(allg)) == len(allg)  # disjoint
        else:
            assert len(allg) == -(-n // world) * world
            assert set(allg.tolist()) == set(ids.tolist())  # complete
            _, counts = np.unique(allg, return_counts=True)
            assert counts.sum() - len(counts) == len(allg) - n  # only the padding repeats
            # Fewer than P twice; with fewer graphs than ranks, up to ceil(P / n) times.
            assert (counts > 1).sum() < world
            assert counts.max(initial=1) <= (2 if n >= world else -(-world // max(n, 1)))
        assert set(allg.tolist()) <= set(ids.tolist())


def test_sampler_order_by_seed_and_epoch():
    def share(seed, epoch, rank=0):
        s = DistributedGraphSampler(indices=np.arange(50), num_replicas=2, rank=rank,
                                    seed=seed)
        s.set_epoch(epoch)
        return list(s)

    assert share(1, 4) == share(1, 4)  # deterministic per (seed, epoch), new instances
    assert share(1, 4) != share(1, 5)  # different across epochs
    assert share(1, 4) != share(2, 4)  # and seeds
    assert sorted(share(1, 4) + share(1, 4, 1)) == list(range(50))
    assert share(1, 0) != list(range(0, 50, 2))  # shuffled
    np.testing.assert_array_equal(np.sort(shuffled_order(1000, 7, 3)), np.arange(1000))


@requires_torch
@pytest.mark.parametrize("n,world,drop_last", [(10, 3, False), (10, 3, True), (2, 4, False),
                                               (9, 2, False), (8, 4, True)])
def test_sampler_matches_torch_unshuffled(n, world, drop_last):
    from torch.utils.data.distributed import DistributedSampler

    for r in range(world):
        ours = DistributedGraphSampler(indices=np.arange(n), num_replicas=world, rank=r,
                                       shuffle=False, drop_last=drop_last)
        theirs = DistributedSampler(range(n), num_replicas=world, rank=r, shuffle=False,
                                    drop_last=drop_last)
        assert list(ours) == list(theirs) and len(ours) == len(theirs)


def test_sampler_refuses_bad_arguments():
    with pytest.raises(ValueError, match="rank 2 out of range"):
        DistributedGraphSampler(indices=np.arange(4), num_replicas=2, rank=2)
    with pytest.raises(ValueError, match="graph IDs outside"):
        DistributedGraphSampler(list(range(3)), indices=[0, 5], num_replicas=1, rank=0)
    # A fraction was truncated (rank 1.5 took rank 1's share; num_replicas 2.5 made len() a
    # float) and a string, e.g. os.environ["RANK"], failed comparing str with int.
    for kw, name, bad in (({"rank": 1.5}, "rank", 1.5), ({"rank": "1"}, "rank", "1"),
                          ({"num_replicas": 2.5}, "num_replicas", 2.5),
                          ({"num_replicas": "2"}, "num_replicas", "2"),
                          ({"seed": 0.5}, "seed", 0.5)):
        args = dict({"num_replicas": 2, "rank": 0}, **kw)
        with pytest.raises(TypeError, match=re.escape(
                f"DistributedGraphSampler: {name} must be an integer, got {bad!r}")):
            DistributedGraphSampler(indices=np.arange(4), **args)
    with pytest.raises(ValueError, match="num_replicas must be >= 1, got 0"):
        DistributedGraphSampler(indices=np.arange(4), num_replicas=0, rank=0)
    with pytest.raises(TypeError, match=re.escape("GraphDataLoader: seed must be an integer")):
        GraphDataLoader(list(range(3)), shuffle=True, seed=0.5)
    # The order keys by the seed's low 32 bits: 2^32 shuffled as 0 did, -1 as 2^32 - 1.
    for seed, error in ((2**32, "seed must be below 2^32, got 4294967296"),
                        (-1, "seed must be >= 0, got -1")):
        with pytest.raises(ValueError, match=re.escape(f"DistributedGraphSampler: {error}")):
            DistributedGraphSampler(indices=np.arange(4), num_replicas=1, rank=0, seed=seed)
        with pytest.raises(ValueError, match=re.escape(f"GraphDataLoader: {error}")):
            GraphDataLoader(list(range(3)), shuffle=True, seed=seed)
    assert DistributedGraphSampler(indices=np.arange(4), num_replicas=1, rank=0,
                                   seed=2**32 - 1).seed == 2**32 - 1
    s = DistributedGraphSampler(indices=np.arange(5), num_replicas=np.int64(2), rank=np.int32(1),
                                shuffle=False)
    assert list(s) == [1, 3, 0] and len(s) == 3



def test_graph_ids_and_batch_sizes_that_are_not_integers_are_refused():
    """Float graph IDs were truncated by GraphDataLoader (indices [0.9, 1.7] loaded graphs 0
    and 1) and a float batch size was cut down; both are refused, as DistributedGraphSampler
    refused float IDs. Masks and integer IDs of any width are taken."""
    ds = GraphDataset(**graphs_to_arrays(random_graphs(5, seed=1)))
    for name, make in (
            ("GraphDataLoader", lambda ids: GraphDataLoader(ds, batch_size=2, indices=ids)),
            ("DistributedGraphSampler",
             lambda ids: DistributedGraphSampler(ds, num_replicas=1, rank=0, indices=ids))):
        for bad, shape in ((np.array([0.9, 1.7]), "float64 of shape (2,)"),
                           ([0.0, 1.0], "float64 of shape (2,)"),
                           (np.array([[0, 1]]), "int64 of shape (1, 2)")):
            with pytest.raises(ValueError, match=re.escape(
                    f"{name}: indices must be a 1-D array of graph IDs or a boolean mask, got "
                    f"{shape}")):
                make(bad)
        assert np.asarray(make(np.array([3, 1], dtype=np.uint8)).indices).tolist() == [3, 1]
        assert np.asarray(make(np.arange(5) % 2 == 1).indices).tolist() == [1, 3]
        assert np.asarray(make([]).indices).tolist() == []
    # A mask of another length than the dataset's was taken: a shorter one silently left out
    # the last graphs (5 of 10 here).
    for name, make in (
            ("GraphDataLoader", lambda ids: GraphDataLoader(ds, batch_size=2, indices=ids)),
            ("DistributedGraphSampler",
             lambda ids: DistributedGraphSampler(ds, num_replicas=1, rank=0, indices=ids))):
        for bad in (np.ones(3, dtype=bool), np.ones(6, dtype=bool), np.ones((5, 1), dtype=bool)):
            with pytest.raises(ValueError, match=re.escape(
                    f"{name}: a boolean mask must have one entry per graph, [5], got shape "
                    f"{bad.shape}")):
                make(bad)
    for bad in (2.9, 2.0, True, "2"):
        with pytest.raises(TypeError, match=re.escape(
                f"GraphDataLoader: batch_size must be an integer, got {bad!r}")):
            GraphDataLoader(ds, batch_size=bad)
    with pytest.raises(ValueError, match="GraphDataLoader: batch_size must be >= 1, got 0"):
        GraphDataLoader(ds, batch_size=0)
    assert len(GraphDataLoader(ds, batch_size=np.int32(2))) == 3


def test_graph_ids_of_a_sampler_or_batch_outside_the_dataset_are_refused():
    """A custom sampler's IDs went to batch_graphs unchecked: -1 failed deep in NumPy
    ("repeats may not contain negative values"), one past the end with an IndexError, and a
    float (0.9) was truncated to graph 0 by np.fromiter."""
    ds = GraphDataset(**graphs_to_arrays(random_graphs(5, seed=1)))
    for ids, message in (([0, -1], "graph IDs outside [0, 5): -1"),
                         ([4, 5], "graph IDs outside [0, 5): 5"),
                         ([0.9, 1.0], "indices must be a 1-D array of graph IDs")):
        with pytest.raises(ValueError, match=re.escape(f"GraphDataLoader: sampler: {message}")):
            list(GraphDataLoader(ds, batch_size=2, sampler=ids))
        with pytest.raises(ValueError, match=re.escape(f"batch_graphs: {message}")):
            batch_graphs(ds, np.asarray(ids))
    assert [np.asarray(b.index).tolist() for b in GraphDataLoader(
        ds, batch_size=2, sampler=[np.int64(4), 0, 3])] == [[4, 0], [3]]
    assert list(GraphDataLoader(ds, batch_size=2, sampler=[])) == []
    assert np.asarray(batch_graphs(ds, 3).index).tolist() == [3]


# --- batching -------------------------------------------------------------------------------
def _dense(ei, n):
    a = np.zeros((n, n), dtype=np.int64)
    np.add.at(a, (ei[0], ei[1]), 1)
    return a


@pytest.mark.parametrize("kind", ["list", "torch"])
def test_dataset_of_lists_or_tensors_batches_as_one_of_arrays(kind):
    """GraphDataset took lists and torch tensors (its checks read them through np.asarray) but
    kept them as given: batching a dataset of lists failed ("only integer scalar arrays can be
    converted to a scalar index") and repr of one of tensors called np.max on a tensor."""
    arrays = graphs_to_arrays(random_graphs(6, seed=4, empty_every=3))
    if kind == "torch":
        torch = pytest.importorskip("torch")
        given = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in arrays.items()}
    else:
        given = {k: np.asarray(v).tolist() for k, v in arrays.items()}
    ds, ref = GraphDataset(**given), GraphDataset(**arrays)
    assert repr(ds) == repr(ref) and ds.num_classes == ref.num_classes
    got, want = batch_graphs(ds, [4, 0, 2]), batch_graphs(ref, [4, 0, 2])
    for k in ("src", "dst", "graph_ids", "feat", "label", "edge_feat", "index"):
        np.testing.assert_array_equal(np.asarray(getattr(got, k)), np.asarray(getattr(want, k)))
    np.testing.assert_array_equal(ds[2]["node_feat"], ref[2]["node_feat"])


def test_batch_is_block_diagonal():
    graphs = random_graphs(30, seed=2, empty_every=6)
    ds = GraphDataset(**graphs_to_arrays(graphs))
    ids = np.array([7, 0, 29, 5, 5, 12, 17])  # any order, repeats (padding) allowed
    b = batch_graphs(ds, ids)
    sizes = [graphs[i]["num_nodes"] for i in ids]
    assert b.num_graphs == len(ids) and b.num_nodes == sum(sizes)
    np.testing.assert_array_equal(np.asarray(b.node_offsets), np.concatenate([[0],
                                                                              np.cumsum(sizes)]))
    np.testing.assert_array_equal(np.asarray(b.graph_ids), np.repeat(np.arange(len(ids)), sizes))
    expect = np.zeros((b.num_nodes, b.num_nodes), dtype=np.int64)
    off = 0
    for i, n in zip(ids, sizes):
        expect[off:off + n, off:off + n] = _dense(graphs[i]["edge_index"], n)
        off += n
    got = _dense(np.stack([np.asarray(b.src), np.asarray(b.dst)]), b.num_nodes)
    np.testing.assert_array_equal(got, expect)
    np.testing.assert_array_equal(np.asarray(b.feat),
                                  np.concatenate([graphs[i]["node_feat"] for i in ids]))
    np.testing.assert_array_equal(np.asarray(b.edge_feat),
                                  np.concatenate([graphs[i]["edge_feat"] for i in ids]))
    np.testing.assert_array_equal(np.asarray(b.label), [graphs[i]["label"] for i in ids])
    np.testing.assert_array_equal(np.asarray(b.index), ids)


def test_loader_batches_cover_the_sampler_share():
    ds = GraphDataset(**graphs_to_arrays(random_graphs(23, seed=4)))
    s = DistributedGraphSampler(ds, num_replicas=2, rank=1, seed=5)
    loader = GraphDataLoader(ds, batch_size=5, sampler=s)
    for epoch in (0, 1):
        loader.set_epoch(epoch)
        seen = np.concatenate([np.asarray(b.index) for b in loader])
        np.testing.assert_array_equal(seen, s.rank_indices(epoch))
        assert len(loader) == 3 and s.epoch == epoch
    assert len(GraphDataLoader(ds, batch_size=5, drop_last=True)) == 4
    shuffled = GraphDataLoader(ds, batch_size=23, shuffle=True, seed=1)
    first, second = (np.asarray(next(iter(shuffled)).index) for _ in range(2))
    assert sorted(first) == list(range(23)) and list(first) != list(second)
    with pytest.raises(ValueError, match="not both"):
        GraphDataLoader(ds, sampler=s, shuffle=True)


def test_loader_batches_what_its_sampler_gives():
    """The batches cover what the sampler yields, whatever its __len__ says, and a sampler
    without one (an iterable, as torch's DataLoader takes) works too."""
    ds = GraphDataset(**graphs_to_arrays(random_graphs(12, seed=4)))

    class Miscounted:
        def __iter__(self):
            return iter([7, 1, 4, 0, 9])

        def __len__(self):
            return 3

    class Lengthless:
        def __iter__(self):
            return iter(range(10, 3, -1))

    seen = [list(np.asarray(b.index)) for b in GraphDataLoader(ds, 2, sampler=Miscounted())]
    assert seen == [[7, 1], [4, 0], [9]]
    seen = [list(np.asarray(b.index)) for b in GraphDataLoader(ds, 3, sampler=Lengthless(),
                                                                 drop_last=True)]
    assert seen == [[10, 9, 8], [7, 6, 5]]


def test_loader_takes_an_epoch_set_on_its_sampler():
    """torch's idiom sets the epoch on the sampler (sampler.set_epoch(e) before iterating the
    loader). The loader overwrote it with its own counter: resuming at epoch 5 ran epoch 0's
    order, then 1's, ... The loader now takes an epoch set on the sampler since it last set it,
    and counts on from it; loader.set_epoch(e) and the loader's own counter work as before."""
    ds = GraphDataset(**graphs_to_arrays(random_graphs(23, seed=4)))
    s = DistributedGraphSampler(ds, num_replicas=2, rank=1, seed=5)
    loader = GraphDataLoader(ds, batch_size=5, sampler=s)

    def epoch():
        return np.concatenate([np.asarray(b.index) for b in loader])

    for e in (5, 6, 7):  # torch's idiom, resumed at epoch 5
        s.set_epoch(e)
        np.testing.assert_array_equal(epoch(), s.rank_indices(e))
    np.testing.assert_array_equal(epoch(), s.rank_indices(8))  # the loader counts on
    s.set_epoch(2)
    loader.set_epoch(11)  # the later call wins, either way round
    np.testing.assert_array_equal(epoch(), s.rank_indices(11))
    loader.set_epoch(3)
    s.set_epoch(9)
    np.testing.assert_array_equal(epoch(), s.rank_indices(9))
    assert s.epoch == 9 and loader.epoch == 10
    # A sampler set before the loader is made: the loader starts at its epoch.
    s2 = DistributedGraphSampler(ds, num_replicas=2, rank=0, seed=5)
    s2.set_epoch(4)
    loader = GraphDataLoader(ds, batch_size=5, sampler=s2)
    np.testing.assert_array_equal(np.concatenate([np.asarray(b.index) for b in loader]),
                                  s2.rank_indices(4))


@pytest.mark.parametrize("world", [2, 4])
def test_step_of_all_ranks_is_the_one_rank_step(world):
    """With P dividing the global batch, step j of the P ranks together trains on the graphs of
    step j at one rank (the last step may differ by the padding)."""
    ds = GraphDataset(**graphs_to_arrays(random_graphs(37, seed=10)))
    one = GraphDataLoader(ds, batch_size=8, sampler=DistributedGraphSampler(
        ds, num_replicas=1, rank=0, seed=2))
    ranks = [GraphDataLoader(ds, batch_size=8 // world, sampler=DistributedGraphSampler(
        ds, num_replicas=world, rank=r, seed=2)) for r in range(world)]
    for epoch in (0, 3):
        for loader in [one] + ranks:
            loader.set_epoch(epoch)
        steps = [[set(np.asarray(b.index).tolist()) for b in loader] for loader in ranks]
        for j, b in enumerate(one):
            union = set().union(*(s[j] for s in steps))
            if j < len(one) - 1:
                assert union == set(np.asarray(b.index).tolist())
            else:
                assert set(np.asarray(b.index).tolist()) <= union


# --- readout and GIN ------------------------------------------------------------------------
@requires_torch
@pytest.mark.parametrize("op", ["sum", "mean", "max"])
def test_readout_per_graph(op):
    import torch

    from tessera.nn import AvgPooling, MaxPooling, SumPooling, readout_nodes

    graphs = random_graphs(12, seed=6, feat=4, empty_every=5)
    ds = GraphDataset(**graphs_to_arrays(graphs))
    b = batch_graphs(ds, np.arange(12))
    h = b.feat.clone().requires_grad_(True)
    out = readout_nodes(h, b.graph_ids, b.num_graphs, op)
    pool = {"sum": SumPooling, "mean": AvgPooling, "max": MaxPooling}[op]()
    torch.testing.assert_close(pool(b, h), out)
    for k, g in enumerate(graphs):
        x = torch.from_numpy(g["node_feat"])
        if len(x) == 0:
            ref = torch.zeros(4)
        else:
            ref = {"sum": x.sum(0), "mean": x.mean(0), "max": x.max(0).values}[op]
        torch.testing.assert_close(out[k], ref, rtol=1e-6, atol=1e-6)
    out.sum().backward()  # the readout is differentiable
    assert h.grad is not None and torch.isfinite(h.grad).all()


@requires_torch
def test_max_readout_gives_a_tied_maximum_s_gradient_to_its_first_node():
    """As DGL's segment max (its first maximum takes the whole gradient); amax's backward
    shared it among ties: [[0.5, 1], [0.5, 0], [1, 1]] where DGL gives [[1, 1], [0, 0], [1, 1]].
    A graph without nodes reads out zeros, NaN stays NaN."""
    import torch

    from tessera.nn import readout_nodes

    h = torch.tensor([[1., 2.], [1., .5], [3., .5]], requires_grad=True)
    out = readout_nodes(h, torch.tensor([0, 0, 2]), 3, "max")
    torch.testing.assert_close(out, torch.tensor([[1., 2.], [0., 0.], [3., .5]]))
    out.sum().backward()
    torch.testing.assert_close(h.grad, torch.tensor([[1., 1.], [0., 0.], [1., 1.]]))
    nan = readout_nodes(torch.tensor([[1.], [float("nan")]]), torch.tensor([0, 0]), 1, "max")
    assert torch.isnan(nan).all()
    assert readout_nodes(torch.zeros(0, 2), torch.zeros(0, dtype=torch.int64), 2, "max").shape \
        == (2, 2)


@requires_torch
def test_gin_conv_against_dense():
    import torch

    from tessera.nn import GINConv

    ds = GraphDataset(**graphs_to_arrays(random_graphs(6, seed=8)))
    b = batch_graphs(ds, np.arange(6))
    conv = GINConv(None, init_eps=0.25, learn_eps=True)
    a = torch.from_numpy(_dense(np.stack([b.src.numpy(), b.dst.numpy()]), b.num_nodes)).float()
    torch.testing.assert_close(conv(b, b.feat), a.T @ b.feat + 1.25 * b.feat)


@requires_torch
def test_gin_conv_aggregators_against_dense():
    """Mean and max (DGL's other aggregators), edge weights, and a block whose destinations
    are its first sources, against a dense reference; a node without in-edges aggregates 0."""
    import torch

    from tessera.nn import GINConv

    ei = torch.tensor([[0, 1, 2, 3, 4, 0, 1, 5], [1, 0, 1, 2, 2, 3, 3, 0]])
    x = torch.randn(6, 3, generator=torch.Generator().manual_seed(1))
    w = torch.rand(8, generator=torch.Generator().manual_seed(2))
    msgs = {v: [(x[u] * w[e]) for e, (u, d) in enumerate(ei.T.tolist()) if d == v]
            for v in range(6)}
    for agg, reduce in (("sum", lambda m: torch.stack(m).sum(0)),
                        ("mean", lambda m: torch.stack(m).mean(0)),
                        ("max", lambda m: torch.stack(m).amax(0))):
        want = torch.stack([reduce(msgs[v]) if msgs[v] else torch.zeros(3) for v in range(6)])
        got = GINConv(None, agg, init_eps=0.5)((ei, (6, 6)), x, w)
        torch.testing.assert_close(got, 1.5 * x + want, msg=agg)
        block = GINConv(None, agg, init_eps=0.5)((ei, (6, 4)), x, w)
        torch.testing.assert_close(block, (1.5 * x + want)[:4], msg=agg)
    # A tied maximum: its gradient goes to the last in-edge that holds it (by edge order), as
    # DGL's update_all max does on the CPU.
    h = torch.tensor([[1.0], [2.0], [2.0], [2.0]], requires_grad=True)
    edges = torch.tensor([[2, 1, 3, 2], [0, 0, 1, 1]])
    GINConv(None, "max")((edges, (4, 4)), h).sum().backward()
    assert h.grad.view(-1).tolist() == [1.0, 2.0, 2.0, 1.0]


@requires_torch
def test_gin_conv_refuses_what_dgl_would_not_compute():
    import torch

    from tessera.nn import GINConv

    ei = torch.tensor([[0, 1], [1, 0]])
    with pytest.raises(ValueError, match="aggregator_type must be 'sum', 'mean' or 'max', got "
                       "0.25 .init_eps is the third argument"):
        GINConv(None, 0.25)  # the older signature took init_eps second
    with pytest.raises(ValueError, match="aggregator_type"):
        GINConv(None, "lstm")
    conv = GINConv(None, "sum")
    with pytest.raises(ValueError, match="3 edge weights for a graph of 2 edges"):
        conv((ei, (2, 2)), torch.ones(2, 1), torch.ones(3))
    with pytest.raises(ValueError, match="1 destination features for a graph of 2"):
        conv((ei, (2, 2)), (torch.ones(2, 1), torch.ones(1, 1)))
    with pytest.raises(ValueError, match="2 source and 3 destination nodes takes a pair"):
        conv((ei, (2, 3)), torch.ones(2, 1))
    with pytest.raises(ValueError, match="3 source features for a graph of 2 source nodes"):
        conv((ei, (2, 2)), torch.ones(3, 1))


# --- training -------------------------------------------------------------------------------
def _run(cmd, timeout=600):
    env = dict(os.environ)
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(tessera.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_root, env.get("PYTHONPATH")) if p)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       env=env, timeout=timeout)
    assert p.returncode == 0, f"{' '.join(cmd)} exited with {p.returncode}:\n{p.stdout[-6000:]}"
    return p.stdout


# Majority class of the test split: 115 of 257 graphs (0.447). A model that learns nothing
# about the molecules stays near it; GIN passes 0.6 within a few epochs (0.66-0.72 after 60).
LEARNED = 0.58


@requires_torch
@pytest.mark.parametrize("ranks", [1, 2])
def test_gin_learns_solubility(tmp_path, ranks):
    res = tmp_path / "gin.json"
    args = [EXAMPLE, "--epochs", "8", "--threads", "1", "--results", str(res)]
    if ranks == 1:
        out = _run([sys.executable] + args)
    else:
        out = _run([sys.executable, "-m", "tessera", "launch", "--nproc-per-node", "2", "--",
                    sys.executable] + args)
        assert "2 rank(s)" in out
    r = json.load(open(res))
    assert r["ranks"] == ranks and len(r["epochs"]) == 8 and r["params_in_sync"]
    assert r["graphs_per_rank_epoch"] == -(-1025 // ranks)
    best = max(e["test_acc"] for e in r["epochs"])
    assert best >= LEARNED, out[-3000:]
    assert r["epochs"][-1]["loss"] < r["epochs"][0]["loss"]


# --- the TU text layout ---------------------------------------------------------------------
def _write_tu(folder, a, indicator, labels, node_labels=None, edge_labels=None):
    os.makedirs(folder, exist_ok=True)
    name = os.path.basename(folder)

    def put(suffix, rows):
        with open(os.path.join(folder, f"{name}_{suffix}.txt"), "w") as f:
            f.write("".join(", ".join(str(x) for x in np.atleast_1d(r)) + "\n" for r in rows))

    put("A", a)
    put("graph_indicator", indicator)
    put("graph_labels", labels)
    if node_labels is not None:
        put("node_labels", node_labels)
    if edge_labels is not None:
        put("edge_labels", edge_labels)


def test_read_tu_dataset(tmp_path):
    from tessera.graphs import read_tu_dataset

    # graph 1: nodes 1-3 (a path), graph 2: nodes 4-5, graph 3: node 6 (no edges); the edges of
    # graph 2 come first in the file.
    a = [(4, 5), (5, 4), (1, 2), (2, 1), (2, 3), (3, 2)]
    _write_tu(tmp_path / "T", a, [1, 1, 1, 2, 2, 3], [-1, 1, -1], node_labels=[0, 2, 0, 2, 2, 5],
              edge_labels=[7, 7, 1, 1, 2, 2])
    arr = read_tu_dataset(tmp_path / "T")
    np.testing.assert_array_equal(arr["node_offsets"], [0, 3, 5, 6])
    np.testing.assert_array_equal(arr["edge_offsets"], [0, 4, 6, 6])
    np.testing.assert_array_equal(arr["edge_index"], [[0, 1, 1, 2, 0, 1], [1, 0, 2, 1, 1, 0]])
    np.testing.assert_array_equal(arr["edge_feat"], [1, 1, 2, 2, 7, 7])
    np.testing.assert_array_equal(arr["graph_label"], [0, 1, 0])
    assert arr["meta"]["classes"] == [-1, 1]
    np.testing.assert_array_equal(arr["node_feat"].argmax(1), [0, 1, 0, 1, 1, 2])
    meta = arr.pop("meta")
    ds = write_graph_dataset(tmp_path / "out", meta=meta, **arr)
    assert ds.num_graphs == 3 and ds.num_classes == 2

    _write_tu(tmp_path / "X", [(1, 4)], [1, 1, 2, 2], [0, 1])
    with pytest.raises(ValueError, match="line 1 joins graph 1 to graph 2"):
        read_tu_dataset(tmp_path / "X")
    _write_tu(tmp_path / "Y", [(1, 2)], [1, 2, 1], [0, 1])
    with pytest.raises(ValueError, match="must be contiguous"):
        read_tu_dataset(tmp_path / "Y")
    _write_tu(tmp_path / "Z", [(1, 9)], [1, 1], [0])
    with pytest.raises(ValueError, match=r"node IDs must be in \[1, 2\]"):
        read_tu_dataset(tmp_path / "Z")
    with pytest.raises(FileNotFoundError, match="Q_A.txt is missing"):
        read_tu_dataset(tmp_path / "Q")


def test_read_tu_dataset_keeps_or_refuses_extra_columns(tmp_path):
    """Only the first column of every table was read: a second column of node or edge labels
    was dropped without a word, and so was one of graph_indicator or graph_labels (files the
    layout gives one value per line)."""
    from tessera.graphs import read_tu_dataset

    a = [(1, 2), (2, 1), (3, 3)]
    _write_tu(tmp_path / "T", a, [1, 1, 2], [0, 1], node_labels=[(0, 5), (1, 5), (1, 6)],
              edge_labels=[(3, 9), (3, 8), (4, 7)])
    arr = read_tu_dataset(tmp_path / "T")
    # One-hot of column 0 (values 0, 1), then of column 1 (values 5, 6).
    np.testing.assert_array_equal(arr["node_feat"], [[1, 0, 1, 0], [0, 1, 1, 0], [0, 1, 0, 1]])
    np.testing.assert_array_equal(arr["edge_feat"], [[3, 9], [3, 8], [4, 7]])
    for table, rows, message in (
            ("graph_indicator", [(1, 1), (1, 1), (2, 1)], "expected 1 column (the graph of a "
                                                          "node), got 2"),
            ("graph_labels", [(0, 7), (1, 7)], "expected 1 column (the label of a graph), "
                                               "got 2"),
            ("A", [(1, 2, 1)], "expected 2 columns (row, col), got 3")):
        cols = {"a": a, "indicator": [1, 1, 2], "labels": [0, 1]}
        cols[{"A": "a", "graph_indicator": "indicator", "graph_labels": "labels"}[table]] = rows
        _write_tu(tmp_path / "B", cols["a"], cols["indicator"], cols["labels"])
        with pytest.raises(ValueError, match=re.escape(
                f"{tmp_path / 'B' / f'B_{table}.txt'}: {message}")):
            read_tu_dataset(tmp_path / "B")


def test_read_tu_dataset_keeps_edge_attributes(tmp_path):
    """DS_edge_attributes.txt (bond lengths, distances; PyG reads it as edge_attr) was not
    read: the attributes were dropped without a word. They follow the edge labels in
    edge_feat, in the edges' order (graph 2's edges come first in the file)."""
    from tessera.graphs import read_tu_dataset

    a = [(3, 4), (1, 2), (2, 1)]
    _write_tu(tmp_path / "T", a, [1, 1, 2, 2], [0, 1], edge_labels=[5, 6, 6])
    with open(tmp_path / "T" / "T_edge_attributes.txt", "w") as f:
        f.write("0.5, 1.5\n2.5, 3.5\n4.5, 5.5\n")
    arr = read_tu_dataset(tmp_path / "T")
    np.testing.assert_array_equal(arr["edge_offsets"], [0, 2, 3])
    assert arr["edge_feat"].dtype == np.float32
    np.testing.assert_array_equal(arr["edge_feat"], [[6, 2.5, 3.5], [6, 4.5, 5.5],
                                                     [5, 0.5, 1.5]])
    os.remove(tmp_path / "T" / "T_edge_labels.txt")
    np.testing.assert_array_equal(read_tu_dataset(tmp_path / "T")["edge_feat"],
                                  [[2.5, 3.5], [4.5, 5.5], [0.5, 1.5]])
    with open(tmp_path / "T" / "T_edge_attributes.txt", "w") as f:
        f.write("0.5\n")
    with pytest.raises(ValueError, match=re.escape(
            f"{tmp_path / 'T' / 'T_edge_attributes.txt'}: 1 lines, expected 3")):
        read_tu_dataset(tmp_path / "T")


def test_read_tu_dataset_without_edges(tmp_path):
    """A set whose graphs have no edges has an empty A.txt; it was refused with "expected 2
    columns (row, col), got 1"."""
    from tessera.graphs import read_tu_dataset

    _write_tu(tmp_path / "E", [], [1, 1, 2], [3, 4])
    arr = read_tu_dataset(tmp_path / "E")
    assert arr["edge_index"].shape == (2, 0)
    np.testing.assert_array_equal(arr["edge_offsets"], [0, 0, 0])
    np.testing.assert_array_equal(arr["node_offsets"], [0, 2, 3])
    np.testing.assert_array_equal(arr["graph_label"], [0, 1])


def test_read_tu_dataset_refuses_a_graph_label_that_is_not_a_number(tmp_path):
    """A "nan" graph label was read as a float and failed in the class list with "ValueError:
    cannot convert float NaN to integer", naming neither file nor line."""
    from tessera.graphs import read_tu_dataset

    _write_tu(tmp_path / "N", [(1, 2)], [1, 1, 2], ["1", "nan"])
    with pytest.raises(ValueError, match=re.escape(
            f"{tmp_path / 'N' / 'N_graph_labels.txt'}: line 2 is nan, not a class label")):
        read_tu_dataset(tmp_path / "N")


def test_plot_gin_on_committed_results(tmp_path):
    pytest.importorskip("matplotlib")
    import glob

    script = os.path.join(REPO, "benchmarks", "plot_gin.py")
    runs = sorted(glob.glob(os.path.join(REPO, "benchmarks", "results", "gin", "*.json")))
    assert len(runs) >= 2
    out = tmp_path / "acc.png"
    r = subprocess.run([sys.executable, script, *runs, "--majority", "0.447", "--out",
                        str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    r = subprocess.run([sys.executable, script, str(bad), "--out", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 1 and "not a train_gin.py results file" in r.stderr
    assert "Traceback" not in r.stderr


@requires_torch
def test_gin_example_refuses_a_batch_below_one(capsys):
    import importlib.util

    spec = importlib.util.spec_from_file_location("train_gin", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with pytest.raises(SystemExit) as e:
        mod.parse_args(["--batch-size", "0"])
    assert e.value.code == 2
    assert "error: --batch-size must be >= 1, got 0" in capsys.readouterr().err


@pytest.mark.parametrize("masks", [{}, {"train_mask": np.ones(20, bool)},
                                   {"train_mask": np.ones(20, bool),
                                    "test_mask": np.zeros(20, bool)}])
def test_gin_example_refuses_a_dataset_without_a_split(tmp_path, capsys, arrays, masks):
    """A folder without train_mask.npy or test_mask.npy (write_graph_dataset(out,
    **read_tu_dataset(folder)) writes none) ended in a KeyError traceback from ds.split, and
    an empty test split in a ZeroDivisionError after the first epoch."""
    import importlib.util

    write_graph_dataset(tmp_path / "g", masks=masks, **arrays)
    spec = importlib.util.spec_from_file_location("train_gin", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--dataset", str(tmp_path / "g"), "--epochs", "1", "--device", "cpu"]) == 2
    split = "test" if masks else "train"
    why = "holds none" if f"{split}_mask" in masks else "missing"
    assert (f"train_gin.py: error: {tmp_path / 'g'}: no {split} graphs ({split}_mask.npy "
            f"{why})") in capsys.readouterr().err


# --- SD files -------------------------------------------------------------------------------
def _sdf_script():
    import importlib.util

    path = os.path.join(REPO, "scripts", "sdf_to_graphs.py")
    saved = list(sys.path)  # the script puts the source tree's python/ first
    try:
        spec = importlib.util.spec_from_file_location("sdf_to_graphs", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path[:] = saved
    return mod


_MOL = """{name}
     RDKit          2D

  3  2  0  0  0  0  0  0  0  0999 V2000
    0.0000    0.0000    0.0000 C   0  0  0  0  0  0  0  0  0  0  0  0
    1.2990    0.7500    0.0000 O   0  0  0  0  0  0  0  0  0  0  0  0
   -1.2990    0.7500    0.0000 N   0  0  0  0  0  0  0  0  0  0  0  0
  1  2  1  0
  1  3  2  0
M  END
>  <CLS>
{label}

$$$$
"""


def test_sdf_records_with_an_empty_name_line(tmp_path):
    """The first header line (the molecule's name) may be empty, as RDKit writes a molecule
    without a name. The reader stripped the newlines after "$$$$", the empty name line with
    them, and refused the record ("record 2: no V2000 counts line")."""
    sdf = tmp_path / "m.sdf"
    sdf.write_text(_MOL.format(name="", label="a") + _MOL.format(name="x", label="b")
                   + _MOL.format(name="", label="a"))
    mols = _sdf_script().read_sdf(str(sdf), "CLS")
    assert [m["label"] for m in mols] == ["a", "b", "a"]
    assert all(m["atoms"] == ["C", "O", "N"] for m in mols)
    assert all(m["bonds"] == [(0, 1, 1), (0, 2, 2)] for m in mols)
    out = tmp_path / "out"
    assert _sdf_script().main(["--sdf", f"{sdf}:train", "--label-field", "CLS",
                               "--out", str(out)]) == 0
    ds = read_graph_dataset(out)
    assert ds.num_graphs == 3 and ds.num_edges == 12
    np.testing.assert_array_equal(np.asarray(ds.graph_label), [0, 1, 0])


@pytest.mark.parametrize("cut, message", [
    (lambda t: "\n".join(t.split("\n")[:6]) + "\n$$$$\n", "record 2: ends after 6 lines, "
                                                          "before atom 3 of 3"),
    (lambda t: t.replace("  1  3  2  0", "  1  x  2  0"),
     "record 2: bond 2: line '1  x  2  0' is not 3 integers"),
    (lambda t: t.replace("  3  2  0  0", "  ?  2  0  0"), "record 2: counts line"),
])
def test_sdf_record_that_does_not_parse_names_file_and_record(tmp_path, cut, message):
    """A truncated record raised an IndexError traceback and a bad bond line a ValueError
    without the file or record ("invalid literal for int() with base 10: '  x'")."""
    sdf = tmp_path / "m.sdf"
    sdf.write_text(_MOL.format(name="ok", label="a") + cut(_MOL.format(name="bad", label="b")))
    with pytest.raises(ValueError, match=re.escape(f"{sdf}: {message}")):
        _sdf_script().read_sdf(str(sdf), "CLS")


@pytest.mark.parametrize("text, message", [("[1, 2]", "expected a JSON object of fields"),
                                           ("{bad", "not valid JSON")])
def test_sdf_meta_file_that_is_not_an_object_names_the_file(tmp_path, text, message):
    """--meta of a JSON list ended in "AttributeError: 'list' object has no attribute 'update'"
    (a traceback), and invalid JSON in a message without the file's name."""
    sdf, meta = tmp_path / "m.sdf", tmp_path / "meta.json"
    sdf.write_text(_MOL.format(name="x", label="a"))
    meta.write_text(text)
    with pytest.raises(ValueError, match=re.escape(f"{meta}: {message}")):
        _sdf_script().main(["--sdf", str(sdf), "--label-field", "CLS", "--meta", str(meta),
                            "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()
