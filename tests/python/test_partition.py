# SPDX-License-Identifier: Apache-2.0
"""partition_graph writes what the C++ validator accepts; DistGraph reads it back."""
import json
import os
import re

import numpy as np
import pytest

import tessera

from conftest import CORA, in_neighbors


def test_round_trip_passes_the_cpp_validator(cora_parts, cora):
    config, _, _ = cora_parts
    rep = tessera.validate_partitions(config, original=cora)
    assert rep["ok"], rep["errors"]
    assert rep["num_errors"] == 0
    assert "part" in rep["summary"]


def test_validator_catches_a_corrupted_partition(cora_parts, tmp_path):
    import shutil

    config, _, _ = cora_parts
    copy = tmp_path / "copy"
    shutil.copytree(os.path.dirname(config), copy)
    nid = np.load(copy / "part1" / "nid.npy")
    nid[0] = nid[1]  # a node owned twice, another not at all
    np.save(copy / "part1" / "nid.npy", nid)
    rep = tessera.validate_partitions(copy / "cora.json")
    assert not rep["ok"] and rep["num_errors"] > 0
    assert any("nid" in e for e in rep["errors"])


@pytest.mark.parametrize("file,value", [("indices.npy", 10**9), ("indices.npy", -3),
                                        ("indptr.npy", -1), ("eid.npy", 10**9),
                                        ("nid.npy", 10**9), ("nid.npy", -1)])
def test_loading_a_corrupted_partition_is_an_error_naming_the_file(cora_one, tmp_path, file,
                                                                    value):
    """A bad ID in a partition file is a ValueError naming the file, never a crash, also when
    the checksums (which would catch it first) are not verified."""
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(os.path.dirname(cora_one), copy)
    a = np.load(copy / "part0" / file)
    a[len(a) // 2] = value
    np.save(copy / "part0" / file, a)
    with pytest.raises(ValueError) as e:
        tessera.DistGraph("cora", part_config=str(copy / "cora.json"), verify_checksums=False)
    stem = file.split(".")[0]
    assert stem in str(e.value) or "edge ID" in str(e.value), str(e.value)


@pytest.mark.parametrize("mmap", [True, False])
def test_a_flipped_byte_in_the_features_is_caught_on_load_by_default(cora_one, tmp_path, mmap):
    """Features have no range to check: only the checksum, on by default, catches a flipped byte
    in node_feat.npy. verify_checksums=False loads it as it is."""
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(os.path.dirname(cora_one), copy)
    f = copy / "part0" / "node_feat.npy"
    raw = bytearray(f.read_bytes())
    raw[len(raw) // 2] ^= 0x10
    f.write_bytes(bytes(raw))
    config = str(copy / "cora.json")
    with pytest.raises(ValueError, match=r"node_feat\.npy has checksum"):
        tessera.DistGraph("cora", part_config=config, mmap=mmap)
    with pytest.raises(ValueError, match=r"node_feat\.npy has checksum"):
        tessera._C.load_partition(config, 0, mmap)
    g = tessera.DistGraph("cora", part_config=config, mmap=mmap, verify_checksums=False)
    assert g.num_nodes() > 0


def test_mapping_is_a_bijection(cora_parts, cora):
    _, orig_nids, orig_eids = cora_parts
    assert sorted(orig_nids.tolist()) == list(range(cora.num_nodes))
    assert sorted(orig_eids.tolist()) == list(range(cora.num_edges))


def test_distgraph_structure_equals_the_relabelled_input(cora_parts, cora):
    config, orig_nids, _ = cora_parts
    g = tessera.DistGraph("cora", part_config=config)
    assert g.num_nodes() == cora.num_nodes and g.num_edges() == cora.num_edges
    assert np.array_equal(g.orig_nids(), orig_nids)
    for v in range(0, g.num_nodes(), 97):
        got = sorted(orig_nids[in_neighbors(g.local_graph, v)].tolist())
        want = sorted(in_neighbors(cora.graph, orig_nids[v]).tolist())
        assert got == want, v


def test_features_and_labels_move_with_their_nodes(cora_parts, cora):
    config, orig_nids, _ = cora_parts
    g = tessera.DistGraph("cora", part_config=config)
    ids = np.array([0, 5, 1355, 1356, 2000, g.num_nodes() - 1])
    feat = g.ndata["feat"].gather(ids)
    assert np.array_equal(feat, cora.ndata["feat"][orig_nids[ids]])
    assert np.array_equal(g.ndata["label"].gather(ids), cora.ndata["label"][orig_nids[ids]])
    with pytest.raises(IndexError):
        g.ndata["label"].gather([g.num_nodes()])


def test_partition_book(cora_parts):
    config, _, _ = cora_parts
    g = tessera.DistGraph("cora", part_config=config)
    pb = g.get_partition_book()
    assert pb.num_partitions() == 2
    lo, hi = pb.node_range(1)
    assert lo > 0 and hi == g.num_nodes()
    owners = np.asarray(pb.nid2partid(np.array([0, lo - 1, lo, hi - 1])))
    assert owners.tolist() == [0, 0, 1, 1]
    cfg = tessera.load_partition_config(config)
    assert cfg["num_parts"] == 2 and cfg["graph_name"] == "cora"


def test_disttensor_write_is_local_copy_on_write(cora_parts):
    config, _, _ = cora_parts
    g = tessera.DistGraph("cora", part_config=config)
    t = g.ndata["label"]
    orig = t.gather([0, 2000]).tolist()
    before = os.path.getmtime(os.path.join(os.path.dirname(config), "part0", "node_label.npy"))
    t[np.array([0, 2000])] = np.array([6, 5])
    assert t.gather([0, 2000]).tolist() == [6, 5]
    assert os.path.getmtime(os.path.join(os.path.dirname(config), "part0",
                                          "node_label.npy")) == before
    fresh = tessera.DistGraph("cora", part_config=config)  # the files are untouched
    assert fresh.ndata["label"].gather([0, 2000]).tolist() == orig
    if orig != [6, 5]:
        assert fresh.ndata["label"].gather([0, 2000]).tolist() != [6, 5]
    new = tessera.DistTensor((g.num_nodes(), 3), np.float32, "h",
                             part_policy=g.get_node_partition_policy())
    new[np.array([1, 2500])] = np.ones((2, 3), np.float32)
    assert new.gather([1, 2, 2500]).sum() == 6


def test_graph_name_must_match(cora_parts):
    with pytest.raises(ValueError, match="citeseer"):
        tessera.DistGraph("citeseer", part_config=cora_parts[0])


@pytest.mark.parametrize("balance", [["train_mask"], "train_mask", {"tr": "train_mask"}])
def test_balance_ntypes_forms(tmp_path, cora, balance):
    if isinstance(balance, dict):
        balance = {"tr": cora.ndata["train_mask"]}
    config = tessera.partition_graph(CORA, "cora", 2, tmp_path, symmetrize=True,
                                     balance_ntypes=balance, balance_edges=True)
    g = tessera.DistGraph("cora", part_config=config)
    pb = g.get_partition_book()
    train = np.nonzero(g.ndata["train_mask"].numpy())[0]
    per_part = np.bincount(np.asarray(pb.nid2partid(train)), minlength=2)
    assert abs(int(per_part[0]) - int(per_part[1])) <= 0.1 * len(train)
    opts = tessera.load_partition_config(config)["partition_options"]
    assert opts["balance_edges"] and opts["constraints"]


def _graph_with_edge_data(num_nodes=40, num_edges=120):
    """A random directed multigraph as arrays: feat[v] = v, w[e] = e (each row names its node or
    edge), and a train_mask over the first quarter of the nodes."""
    rng = np.random.default_rng(0)
    train = np.zeros(num_nodes, bool)
    train[: num_nodes // 4] = True
    return {"edge_index": rng.integers(0, num_nodes, (2, num_edges)), "num_nodes": num_nodes,
            "ndata": {"feat": np.arange(num_nodes, dtype=np.float32)[:, None],
                      "train_mask": train},
            "edata": {"w": np.arange(num_edges, dtype=np.float32)}}


def _assert_edges_keep_their_input_ids(config, g, orig_nids, orig_eids):
    """Every stored edge joins the input endpoints of the input edge orig_eids names, and
    carries that edge's row of edge data."""
    src, dst = g["edge_index"]
    for p in range(tessera.load_partition_config(config)["num_parts"]):
        lp = tessera._C.load_partition(config, p)
        k = int(lp.num_inner_nodes)
        ip, nid = np.asarray(lp.indptr), np.asarray(lp.nid)
        e = orig_eids[np.asarray(lp.eid)[: ip[k]]]
        assert np.array_equal(src[e], orig_nids[nid[np.asarray(lp.indices)[: ip[k]]]])
        assert np.array_equal(dst[e], orig_nids[np.repeat(nid[:k], np.diff(ip[: k + 1]))])
    w = tessera.DistGraph("g", part_config=config).edata["w"]
    assert np.array_equal(w.gather(np.arange(len(orig_eids))), g["edata"]["w"][orig_eids])


@pytest.mark.parametrize("form", ["int64", "torch", "dict"])
def test_balance_ntypes_array_of_a_node_mask_partitions_as_its_name(tmp_path, form):
    """DGL's balance_ntypes=g.ndata["train_mask"] is the train_mask constraint: the same
    partitions, config and mapping as balance_ntypes=["train_mask"], edge data included."""
    g = _graph_with_edge_data()
    train = g["ndata"]["train_mask"]
    if form == "torch":
        balance = pytest.importorskip("torch").from_numpy(train)
    else:
        balance = {"tr": train} if form == "dict" else train.astype(np.int64)
    named = tessera.partition_graph(g, "g", 2, tmp_path / "named", balance_ntypes=["train_mask"],
                                    return_mapping=True)
    got = tessera.partition_graph(g, "g", 2, tmp_path / "array", balance_ntypes=balance,
                                  return_mapping=True)
    config = str(tmp_path / "array" / "g.json")
    assert tessera.load_partition_config(config) == \
        tessera.load_partition_config(tmp_path / "named" / "g.json")
    assert all(np.array_equal(a, b) for a, b in zip(got, named))
    _assert_edges_keep_their_input_ids(config, g, *got)


def test_balance_ntypes_array_of_a_dataset_path_keeps_its_build(tmp_path):
    """A path read with symmetrize keeps it: the same config as the mask's name (no rebuild
    from the CSC recording symmetrize: false and doubled input edges)."""
    train = np.load(os.path.join(CORA, "train_mask.npy"))
    named = tessera.partition_graph(CORA, "cora", 2, tmp_path / "named", symmetrize=True,
                                    balance_ntypes=["train_mask"], return_mapping=True)
    got = tessera.partition_graph(CORA, "cora", 2, tmp_path / "array", symmetrize=True,
                                  balance_ntypes=train, return_mapping=True)
    config = tessera.load_partition_config(tmp_path / "array" / "cora.json")
    assert config["build"]["symmetrize"] and config["num_input_edges"] == 5278
    assert config["partition_options"]["constraints"] == ["train_mask", "(no mask)"]
    assert config == tessera.load_partition_config(tmp_path / "named" / "cora.json")
    assert all(np.array_equal(a, b) for a, b in zip(got, named))


def test_balance_ntypes_of_no_node_array(tmp_path):
    """Node types no node array holds: each non-zero type is one constraint, not written with
    the partitions, and the edges keep their data and input IDs."""
    g = _graph_with_edge_data()
    types = np.arange(40) % 3  # types 1 and 2 are constraints, 0 the "in none" one
    got = tessera.partition_graph(g, "g", 2, tmp_path / "t", balance_ntypes=types,
                                  return_mapping=True)
    config = str(tmp_path / "t" / "g.json")
    cfg = tessera.load_partition_config(config)
    assert cfg["partition_options"]["constraints"] == ["balance_ntype1", "balance_ntype2",
                                                       "(no mask)"]
    assert list(cfg["edata_schema"]) == ["w"] and cfg["num_input_edges"] == 120
    assert sorted(cfg["ndata_schema"]) == ["feat", "train_mask"]
    _assert_edges_keep_their_input_ids(config, g, *got)


def test_balance_ntypes_of_no_node_array_of_a_dataset_path(tmp_path):
    """A path (or a loaded dataset) takes node types too, without being rebuilt."""
    types = np.arange(2708) % 3
    tessera.partition_graph(CORA, "cora", 2, tmp_path / "plain", symmetrize=True)
    tessera.partition_graph(CORA, "cora", 2, tmp_path / "t", symmetrize=True, balance_ntypes=types)
    plain = tessera.load_partition_config(tmp_path / "plain" / "cora.json")
    cfg = tessera.load_partition_config(tmp_path / "t" / "cora.json")
    assert cfg["partition_options"]["constraints"] == ["balance_ntype1", "balance_ntype2",
                                                       "(no mask)"]
    for key in ("build", "num_input_edges", "num_edges", "ndata_schema", "edata_schema"):
        assert cfg[key] == plain[key], key
    assert tessera.validate_partitions(tmp_path / "t" / "cora.json",
                                       original=tessera.load_dataset(CORA, symmetrize=True))["ok"]


def test_summary_is_printed_and_its_warnings_raised(tmp_path, capsys):
    """partition_graph prints what `tessera partition` prints, and warns of what it warns of."""
    g = _graph_with_edge_data()
    tessera.partition_graph(g, "g", 2, tmp_path / "two", balance_ntypes=["train_mask"])
    out = capsys.readouterr().out
    assert "partitioned g: 40 nodes, 120 edges into 2 parts (metis, halo 1)" in out
    assert "edge cut: " in out and "balance (max/mean): nodes " in out and "train_mask" in out
    ring = {"edge_index": np.array([[0, 1, 2], [1, 2, 0]]), "num_nodes": 4}
    with pytest.warns(UserWarning, match=r"2 of 6 partitions are empty \(4 nodes\)"):
        tessera.partition_graph(ring, "ring", 6, tmp_path / "six", part_method="random",
                                allow_empty=True)
    assert "warning:" not in capsys.readouterr().out  # raised, not printed


@pytest.mark.filterwarnings("ignore:.*(partitions are empty|METIS skipped)")
@pytest.mark.parametrize("method", ["metis", "random"])
def test_more_partitions_than_nodes_needs_allow_empty(tmp_path, method):
    ring = {"edge_index": np.array([[0, 1, 2], [1, 2, 0]]), "num_nodes": 4}
    with pytest.raises(ValueError, match="num_parts 6 is more than the 4 nodes of graph 'ring'"):
        tessera.partition_graph(ring, "ring", 6, tmp_path / "six", part_method=method)
    assert not (tmp_path / "six").exists()
    with pytest.warns(UserWarning, match="partitions are empty"):
        config = tessera.partition_graph(ring, "ring", 6, tmp_path / "six", part_method=method,
                                         allow_empty=True)
    assert tessera.load_partition_config(config)["num_parts"] == 6
    empty = {"edge_index": np.zeros((2, 0), np.int64), "num_nodes": 0}
    with pytest.raises(ValueError, match="graph 'e': the graph has no nodes; pass allow_empty"):
        tessera.partition_graph(empty, "e", 1, tmp_path / "e", part_method=method)
    tessera.partition_graph(empty, "e", 1, tmp_path / "e", part_method=method, allow_empty=True)
    assert tessera.load_partition_config(tmp_path / "e" / "e.json")["num_nodes"] == 0


@pytest.mark.parametrize("balance", [dict(balance_ntypes=["train_mask"]),
                                     dict(balance_ntypes=np.ones(40, bool)),
                                     dict(balance_edges=True)])
def test_balance_constraints_need_metis(tmp_path, balance):
    """DGL ignores balance options with the random method: so does Tessera, with a warning, and
    the config records no constraint it did not apply."""
    with pytest.warns(UserWarning, match="apply to part_method='metis' only: ignored"):
        tessera.partition_graph(_graph_with_edge_data(), "g", 2, tmp_path / "r",
                                part_method="random", **balance)
    c = tessera.load_partition_config(tmp_path / "r" / "g.json")
    assert c["partition_options"]["balance_masks"] == []
    assert c["partition_options"]["balance_edges"] is False


@pytest.mark.parametrize("kwargs,error,message", [
    (dict(num_parts=0), ValueError, r"num_parts must be an integer in \[1, 2147483647\], got 0"),
    (dict(num_parts=2.5), ValueError, r"num_parts must be an integer .*got 2.5"),
    (dict(num_hops=-1), ValueError, r"num_hops must be an integer in \[0, .*got -1"),
    (dict(seed=-2), ValueError, r"seed must be an integer in \[-1, 2147483647\], got -2"),
    # METIS's seed is 32 bits: 2**32 + 7 gave seed 7's partitioning.
    (dict(seed=2**32 + 7), ValueError, r"seed must be an integer in \[-1, 2147483647\], got "
                                       r"4294967303"),
    (dict(seed=2**63, part_method="random"), ValueError,
     r"seed must be an integer in \[-1, 9223372036854775807\], got 9223372036854775808"),
    (dict(graph_name="a/b"), ValueError, r"graph_name 'a/b': use letters, digits"),
    (dict(part_method="kway"), ValueError, r"part_method must be 'metis' or 'random', got 'kway'"),
    (dict(balance_ntypes=["train_mask:x"]), ValueError,
     r"balance_ntypes 'train_mask:x': expected NAME or NAME:COLUMN"),
    (dict(balance_ntypes=["nope"]), ValueError,
     r"balance_ntypes 'nope': the dataset has no node array 'nope' \(it has: feat, train_mask\)"),
    (dict(balance_ntypes=["feat"]), TypeError,
     r"balance_ntypes 'feat': node array 'feat' must be bool or integer, got float32"),
    (dict(balance_ntypes=["train_mask:1"]), IndexError,
     r"balance_ntypes 'train_mask:1': column 1 outside \[0, 1\)"),
    (dict(overwrite=False), ValueError, r"out_path .* already exists \(pass overwrite=True"),
])
def test_argument_errors_name_the_python_argument(tmp_path, kwargs, error, message):
    """partition_graph's errors name its own arguments, never the command line's flags."""
    args = dict(graph_name="g", num_parts=2, out_path=tmp_path)
    args.update(kwargs)
    with pytest.raises(error, match=message) as e:
        tessera.partition_graph(_graph_with_edge_data(), **args)
    assert "--" not in str(e.value)
    assert not (tmp_path / "g.json").exists()


def test_out_path_errors_name_out_path_before_reading(tmp_path):
    """The partitioner refuses these in the words of `tessera partition` (--out): checked first
    in Python, before the dataset (here a path that does not exist) is read."""
    missing = str(tmp_path / "missing")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match=f"^out_path {re.escape(str(tmp_path / 'file'))}: exists "
                                         "and is not a folder; refusing to replace it$"):
        tessera.partition_graph(missing, "g", 2, tmp_path / "file")
    mine = tmp_path / "mine"
    (mine / "part0").mkdir(parents=True)
    (mine / "notes.txt").write_text("x")
    with pytest.raises(ValueError, match=f"^out_path {re.escape(str(mine))}: refusing to "
                                         "overwrite a folder that holds 'notes.txt', which "
                                         "partition_graph did not write"):
        tessera.partition_graph(missing, "g", 2, mine)
    assert (tmp_path / "file").read_text() == "x" and (mine / "notes.txt").exists()
    g = _graph_with_edge_data()
    for _ in range(2):  # a folder of its own output is replaced
        tessera.partition_graph(g, "g", 2, tmp_path / "out", part_method="random")
    assert sorted(os.listdir(tmp_path / "out")) == ["g.json", "part0", "part1"]
    # A user's JSON beside the config, or a file of theirs in a part<N>/ folder, is not output.
    for path in (tmp_path / "out" / "settings.json", tmp_path / "out" / "part1" / "notes.txt"):
        path.write_text('{"lr": 0.01}')
        with pytest.raises(ValueError, match=f"refusing to overwrite a folder that holds "
                                             f"'{path.relative_to(tmp_path / 'out').parts[0]}'"):
            tessera.partition_graph(g, "g", 2, tmp_path / "out", part_method="random")
        assert path.exists()
        path.unlink()


def test_balance_mask_of_other_values_than_0_and_1_names_balance_ntypes(tmp_path):
    """Cora's label as a mask was refused as "--balance-mask 'label': ..."."""
    with pytest.raises(ValueError, match=r"^balance_ntypes 'label': node 0 holds 3 in 'label'; a "
                                         r"mask holds 0 or 1 \(to balance each class"):
        tessera.partition_graph(CORA, "cora", 2, tmp_path / "p", balance_ntypes="label")
    g = _graph_with_edge_data()
    g["ndata"]["two"] = np.stack([g["ndata"]["train_mask"], np.arange(40) % 3], axis=1)
    with pytest.raises(ValueError, match=r"^balance_ntypes 'two:1': node 2 holds 2 in 'two'"):
        tessera.partition_graph(g, "g", 2, tmp_path / "p", balance_ntypes=["two:1"])
    assert not (tmp_path / "p").exists()
    tessera.partition_graph(g, "g", 2, tmp_path / "p", balance_ntypes=["two:0"])


_FLAGS = [("symmetrize", "false"), ("symmetrize", 0), ("balance_edges", "False"),
          ("overwrite", "False"), ("low_memory", "no"), ("return_mapping", 1),
          ("use_graphbolt", "no"), ("allow_empty", None)]


@pytest.mark.parametrize("flag,value", _FLAGS)
@pytest.mark.parametrize("graph", ["path", "arrays"])
def test_flags_that_are_not_bools_are_refused_before_reading(tmp_path, flag, value, graph):
    """symmetrize='false' symmetrized arrays and balance_edges='False' balanced (truth values);
    through a path some were a nanobind signature dump, overwrite after reading the dataset.
    The path here does not exist: the flag's error comes first."""
    g = str(tmp_path / "missing") if graph == "path" else _graph_with_edge_data()
    expected = "None, True or False" if flag == "symmetrize" else "True or False"
    with pytest.raises(TypeError, match=f"^{flag} must be {expected}, got {value!r}$"):
        tessera.partition_graph(g, "g", 2, tmp_path / "out", **{flag: value})
    assert not (tmp_path / "out").exists()


def test_flags_of_numpy_bools_are_taken(tmp_path):
    got = tessera.partition_graph(_graph_with_edge_data(), "g", 2, tmp_path, part_method="random",
                                  symmetrize=np.True_, overwrite=np.bool_(True),
                                  return_mapping=np.True_)
    assert len(got) == 2 and tessera.load_partition_config(tmp_path / "g.json")["num_edges"] > 120


@pytest.mark.parametrize("kwargs,message", [
    (dict(symmetrize="no"), "symmetrize must be None, True or False, got 'no'"),
    (dict(drop_self_loops=0), "drop_self_loops must be True or False, got 0"),
    (dict(deduplicate="yes"), "deduplicate must be True or False, got 'yes'"),
    (dict(format=None), "format must be a str, got None"),
])
def test_load_dataset_flags_that_are_not_bools_are_refused(tmp_path, kwargs, message):
    with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
        tessera.load_dataset(tmp_path / "missing", **kwargs)
    if "format" not in kwargs:
        with pytest.raises(TypeError, match=f"^{re.escape(message.replace('None, ', ''))}$"):
            tessera.graph_from_arrays(np.array([[0], [1]]), 2,
                                      **{k: v for k, v in kwargs.items()})


def test_dgl_arguments_are_accepted(tmp_path):
    """DGL's partition_graph call runs as it is, positional arguments included; what Tessera
    does not honour is warned of, and a misspelt keyword is still an error."""
    import warnings

    g = _graph_with_edge_data()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tessera.partition_graph(g, "g", 2, tmp_path / "a", 1, "metis", None, False, False, 1,
                                "cut", None, False)
        tessera.partition_graph(g, "g", 2, tmp_path / "b", objtype="cut", graph_formats=["csc"],
                                use_graphbolt=False)
    for kwargs, message in [(dict(objtype="vol"), "objtype='vol' is ignored"),
                            (dict(graph_formats=["csc", "coo"]), "graph_formats=.* is ignored"),
                            (dict(use_graphbolt=True, store_eids=False),
                             "use_graphbolt=True, store_eids ignored")]:
        with pytest.warns(UserWarning, match=message):
            tessera.partition_graph(g, "g", 2, tmp_path / "c", **kwargs)
    with pytest.raises(ValueError, match="objtype must be 'cut' or 'vol', got 'volume'"):
        tessera.partition_graph(g, "g", 2, tmp_path / "d", objtype="volume")
    with pytest.raises(TypeError, match="unexpected keyword argument 'num_hop'"):
        tessera.partition_graph(g, "g", 2, tmp_path / "d", num_hop=2)
    assert not (tmp_path / "d").exists()


def test_random_method_and_no_halo(tmp_path):
    config = tessera.partition_graph(CORA, "cora", 3, tmp_path, symmetrize=True,
                                     part_method="random", num_hops=0, seed=7)
    assert tessera.validate_partitions(config)["ok"]
    g = tessera.DistGraph("cora", part_config=config)
    assert g.get_partition_book().num_partitions() == 3
    assert g.local_graph.num_edges == 10556


def test_assembled_graph_keeps_the_graph_row_order(tmp_path):
    # A version 2 partitioning stores rows in the original graph's order; the whole graph a
    # simulated DistGraph assembles from it sorts them by (source, edge ID), as every Graph is
    # (METIS clustering merges rows on that rule), and keeps each edge's ID.
    config = tessera.partition_graph(CORA, "cora", 3, tmp_path, symmetrize=True,
                                     node_order="degree")
    g = tessera.DistGraph("cora", part_config=config)
    lg = g.local_graph
    ip, ind, eids = (np.asarray(x) for x in (lg.indptr, lg.indices, lg.eids))
    assert len(eids) == len(ind) == 10556, "rows needed sorting: the edge IDs travel"
    row = np.repeat(np.arange(lg.num_nodes), np.diff(ip))
    assert np.array_equal(np.lexsort((eids, ind, row)), np.arange(len(ind)))
    assert np.array_equal(np.sort(eids), np.arange(len(ind)))
    # Edge e joins the endpoints its partition stores for it.
    src_of = np.empty(len(ind), dtype=np.int64)
    dst_of = np.empty(len(ind), dtype=np.int64)
    for p in range(3):
        lp = g.local_partition(p)
        k = int(lp.num_inner_nodes)
        lip, nid = np.asarray(lp.indptr), np.asarray(lp.nid)
        e = np.asarray(lp.eid)[: lip[k]]
        src_of[e] = nid[np.asarray(lp.indices)[: lip[k]]]
        dst_of[e] = np.repeat(nid[:k], np.diff(lip[: k + 1]))
    assert np.array_equal(src_of[eids], ind) and np.array_equal(dst_of[eids], row)


def test_degree_node_order(tmp_path, cora):
    orig_nids, _ = tessera.partition_graph(CORA, "cora", 2, tmp_path, symmetrize=True,
                                           node_order="degree", return_mapping=True)
    config = tmp_path / "cora.json"
    assert tessera.validate_partitions(config, original=cora)["ok"]
    assert tessera.load_partition_config(config)["node_order"] == "degree"
    deg = np.diff(np.asarray(cora.graph.indptr))
    g = tessera.DistGraph("cora", part_config=config)
    pb = g.get_partition_book()
    for part in range(pb.num_partitions()):
        lo, hi = pb.node_range(part)
        d = deg[orig_nids[lo:hi]]
        assert (np.diff(d) <= 0).all()  # highest in-degree first within each part
    feat = g.ndata["feat"].gather(np.arange(10))
    assert np.array_equal(feat, cora.ndata["feat"][orig_nids[:10]])
    # Degree order is the default; "original" keeps the input's order within each part.
    tessera.partition_graph(CORA, "cora", 2, tmp_path / "dflt", symmetrize=True)
    assert tessera.load_partition_config(tmp_path / "dflt" / "cora.json")["node_order"] == "degree"
    kept, _ = tessera.partition_graph(CORA, "cora", 2, tmp_path / "orig", symmetrize=True,
                                      node_order="original", return_mapping=True)
    assert tessera.load_partition_config(tmp_path / "orig" / "cora.json")["node_order"] == \
        "original"
    pb = tessera.DistGraph("cora", part_config=tmp_path / "orig" / "cora.json") \
        .get_partition_book()
    for part in range(pb.num_partitions()):
        lo, hi = pb.node_range(part)
        assert (np.diff(kept[lo:hi]) > 0).all()  # input IDs increasing within each part
    with pytest.raises(ValueError, match="unknown node order 'rcmk'"):
        tessera.partition_graph(CORA, "cora", 2, tmp_path / "bad", symmetrize=True,
                                node_order="rcmk")


def test_low_memory_writes_the_same_partitions(tmp_path):
    plain = tessera.partition_graph(CORA, "cora", 3, tmp_path / "plain", symmetrize=True)
    low = tessera.partition_graph(CORA, "cora", 3, tmp_path / "low", symmetrize=True,
                                  low_memory=True)
    assert tessera.validate_partitions(low)["ok"]
    a, b = tessera.load_partition_config(plain), tessera.load_partition_config(low)
    assert a["num_edges"] == b["num_edges"] == 10556
    assert len(a["partitions"]) == len(b["partitions"]) == 3
    for pa, pb in zip(a["partitions"], b["partitions"]):
        assert pa["files"] and pa["files"] == pb["files"]  # names, sizes, checksums
    # The option reaches the C++ side: the CSR was parked (its phases), and the dataset handed
    # over is left empty.
    ds = tessera.load_dataset(CORA, symmetrize=True)
    stats, _ = tessera._C.partition_dataset(ds, os.fspath(tmp_path / "c"), "cora", 3,
                                            low_memory=True)
    phases = [p["name"] for p in json.loads(stats)["phases"]]
    assert "spill CSR" in phases and "reload CSR" in phases, phases
    assert ds.num_edges == 0
    # A loaded dataset may be viewed by the caller: refused, and so is the random method.
    with pytest.raises(ValueError, match="low_memory releases"):
        tessera.partition_graph(tessera.load_dataset(CORA), "cora", 2, tmp_path / "x",
                                low_memory=True)
    with pytest.raises(ValueError, match="part_method='metis'"):
        tessera.partition_graph(CORA, "cora", 2, tmp_path / "y", part_method="random",
                                low_memory=True)
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_graph_from_arrays(tmp_path):
    edge_index = np.array([[0, 1, 2, 3], [1, 2, 3, 0]])
    feat = np.arange(8, dtype=np.float32).reshape(4, 2)
    config = tessera.partition_graph({"edge_index": edge_index, "num_nodes": 4,
                                      "ndata": {"feat": feat}}, "ring", 2, tmp_path,
                                     part_method="random")
    g = tessera.DistGraph("ring", part_config=config)
    orig = g.orig_nids()
    assert np.array_equal(g.ndata["feat"].gather(np.arange(4)), feat[orig])
    assert tessera.validate_partitions(config)["ok"]


@pytest.mark.parametrize("num_nodes,error,message", [
    (2708.7, TypeError, "num_nodes must be an integer, got 2708.7"),
    (2708.0, TypeError, "num_nodes must be an integer, got 2708.0"),
    ("2708", TypeError, "num_nodes must be an integer, got '2708'"),
    (True, TypeError, "num_nodes must be an integer, got True"),
    (-1, ValueError, "num_nodes must be >= 0, got -1"),
])
def test_num_nodes_that_is_no_integer_is_refused(tmp_path, num_nodes, error, message):
    """num_nodes=2708.7 was truncated to 2708 by int()."""
    ei = np.array([[0, 1], [1, 0]])
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        tessera.graph_from_arrays(ei, num_nodes)
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        tessera.partition_graph({"edge_index": ei, "num_nodes": num_nodes}, "g", 1, tmp_path / "p")
    assert not (tmp_path / "p").exists()
    assert tessera.graph_from_arrays(ei, np.int32(3)).num_nodes == 3


def test_omitted_num_nodes_with_node_arrays_that_disagree(tmp_path):
    """Without num_nodes, the node arrays give it: rows short of the edges' largest ID were
    reported as an edge "outside [0, rows)", and arrays of different rows took the first's."""
    ei = np.array([[0, 1, 2], [1, 2, 4]])
    with pytest.raises(ValueError, match=re.escape(
            "num_nodes is omitted and ndata['feat'] has 4 rows, but the edges name node 4, so "
            "the graph has at least 5 nodes")):
        tessera.graph_from_arrays(ei, ndata={"feat": np.zeros((4, 2))})
    with pytest.raises(ValueError, match=re.escape(
            "num_nodes is omitted and the node arrays disagree in rows: ndata['feat'] has 6, "
            "ndata['label'] has 5")):
        tessera.partition_graph({"edge_index": ei, "ndata": {"feat": np.zeros((6, 2)),
                                                             "label": np.zeros(5)}},
                                "g", 1, tmp_path / "p")
    assert not (tmp_path / "p").exists()
    # Rows beyond the edges' largest ID are nodes without edges.
    assert tessera.graph_from_arrays(ei, ndata={"feat": np.zeros((7, 2))}).num_nodes == 7
    assert tessera.graph_from_arrays(ei).num_nodes == 5


@pytest.mark.parametrize("value,dtype", [(np.array([None, None], dtype=object), "object"),
                                         (np.array(["a", "b"]), "<U1"),
                                         (np.zeros(2, np.complex64), "complex64")])
@pytest.mark.parametrize("where", ["ndata", "edata"])
def test_node_and_edge_arrays_of_other_types_are_refused(tmp_path, value, dtype, where):
    """An object array was "expected a C-contiguous CPU array", though it is one."""
    ei = np.array([[0, 1], [1, 0]])
    message = f"^{where}\\['x'\\]: dtype {dtype} is not supported; store bool, integers or float"
    with pytest.raises(TypeError, match=message):
        tessera.graph_from_arrays(ei, 2, **{where: {"x": value}})
    with pytest.raises(TypeError, match=message):
        tessera.partition_graph({"edge_index": ei, where: {"x": value}}, "g", 1, tmp_path / "p")
    assert not (tmp_path / "p").exists()


def test_node_arrays_not_a_dict_of_named_arrays_are_refused():
    ei = np.array([[0, 1], [1, 0]])
    with pytest.raises(TypeError, match="^ndata must be a dict of name -> array, got list$"):
        tessera.graph_from_arrays(ei, 2, ndata=[np.zeros(2)])
    with pytest.raises(TypeError, match="^edata: names must be str, got 0$"):
        tessera.graph_from_arrays(ei, 2, edata={0: np.zeros(2)})


@pytest.mark.parametrize("g,message", [
    ({"num_nodes": 4}, "g: no 'edge_index' (a dict graph holds 'edge_index' ([2, E] or (src, "
                       "dst)) and optionally 'num_nodes', 'ndata', 'edata' and 'name'; this one "
                       "has 'num_nodes')"),
    ({}, "g: no 'edge_index' (a dict graph holds"),
    ({"edge_index": np.array([[0], [1]]), "node_data": {}}, "g: unknown key 'node_data' (a dict "
                                                            "graph holds 'edge_index'"),
])
def test_a_dict_graph_needs_edge_index_and_no_other_keys(tmp_path, g, message):
    """A dict without edge_index was a bare KeyError; a misspelt key was ignored."""
    with pytest.raises(ValueError, match=f"^{re.escape(message)}"):
        tessera.partition_graph(g, "g", 1, tmp_path / "p")
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize("edge_index", [np.array([[0.0, 1.5], [1.0, 0.0]]),
                                        (np.array([0, 1]), np.array([1.0, 0.0])),
                                        np.array([[True, False], [False, True]])])
def test_edge_index_of_non_integers_is_refused(tmp_path, edge_index):
    """A float ID is not truncated to another node's."""
    with pytest.raises(TypeError, match="edge_index: node IDs must be integers, got (float|bool)"):
        tessera.graph_from_arrays(edge_index, 2)
    with pytest.raises(TypeError, match="edge_index: node IDs must be integers"):
        tessera.partition_graph({"edge_index": edge_index, "num_nodes": 2}, "g", 1, tmp_path)
    empty = tessera.graph_from_arrays(np.zeros((2, 0)), 2)  # no ID to truncate
    assert empty.num_edges == 0


def test_dgl_style_namespace_and_torch_edge_index(tmp_path):
    import tessera.distributed as dist

    assert dist.DistGraph is tessera.DistGraph and dist.node_split is tessera.node_split
    torch = pytest.importorskip("torch")
    edge_index = torch.tensor([[0, 1, 2], [1, 2, 0]])  # PyG layout
    config = dist.partition_graph({"edge_index": edge_index, "num_nodes": 3,
                                   "ndata": {"x": torch.eye(3)}}, "tri", 1, tmp_path,
                                  symmetrize=True)
    g = dist.DistGraph("tri", part_config=config)
    assert g.num_edges() == 6
    assert torch.equal(g.ndata["x"][torch.arange(3)], torch.eye(3)[torch.from_numpy(g.orig_nids())])


def test_balance_ntypes_of_a_type_array_that_a_node_array_holds(tmp_path):
    """A DGL type array (values 0 and 2) equal to a node array of the graph: balanced as its
    type's node set. It was mapped to that array's name, which the partitioner balances only as
    a 0/1 mask, and refused with a message about --balance-mask."""
    n = 40
    t = np.zeros(n, dtype=np.int64)
    t[::3] = 2
    g = {"edge_index": np.stack([np.arange(n), (np.arange(n) + 1) % n]), "num_nodes": n,
         "ndata": {"kind": t.copy()}}
    for i, bal in enumerate([t, {"x": t}]):
        tessera.partition_graph(g, "g", 2, str(tmp_path / f"p{i}"), balance_ntypes=bal)
        assert (tmp_path / f"p{i}" / "g.json").exists()
