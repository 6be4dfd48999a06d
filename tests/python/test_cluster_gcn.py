# SPDX-License-Identifier: Apache-2.0
"""Cluster-GCN from Python and the DeepGCN example.

* a batch is exactly the induced subgraph of its clusters' nodes (every edge with both ends in
  the chosen clusters, no other), against a brute-force scan of the CSC;
* the random clustering is balanced, a function of (seed, epoch, rank), and differs per epoch
  and per rank; METIS clusters are fixed and every cluster comes once per epoch;
* on a DistGraph of a real 2-rank job each rank clusters exactly its own nodes;
* GENConv's softmax aggregation against a per-node loop; DeepGCN learns Tolokers (ROC-AUC well
  above chance); a 2-rank parallel-epochs run over UCX and a 2-rank partitioned run; the plot
  of the committed results.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from conftest import CORA, REPO, needs_gpu, requires_torch, tessera
from tessera.cluster import ClusterGCNLoader, ClusterGCNSampler

TOLOKERS = os.path.join(REPO, "data", "tolokers")
EXAMPLE = os.path.join(REPO, "python", "examples", "train_deepgcn.py")


def edge_set(graph, nodes: np.ndarray) -> set:
    """(src, dst, eid) of every stored edge with both ends in ``nodes``, by brute force."""
    ip, ix = np.asarray(graph.indptr), np.asarray(graph.indices)
    eids = np.asarray(graph.eids)
    inside = np.zeros(graph.num_nodes, dtype=bool)
    inside[nodes] = True
    out = set()
    for v in nodes:
        for p in range(ip[v], ip[v + 1]):
            if inside[ix[p]]:
                out.add((int(ix[p]), int(v), int(eids[p]) if len(eids) else p))
    return out


def batch_edge_set(b) -> set:
    nodes = np.asarray(b.nodes)
    return {(int(nodes[s]), int(nodes[d]), int(e))
            for s, d, e in zip(np.asarray(b.src), np.asarray(b.dst), np.asarray(b.eids))}


@pytest.mark.parametrize("method", ["random", "metis"])
def test_batches_are_the_induced_subgraphs_of_their_clusters(cora, method):
    g = cora.graph
    s = ClusterGCNSampler(g, 12, 3, method=method, seed=5, rank=0)
    assert s.num_batches == 4
    for epoch in range(2):
        clusters = s.clustering(epoch)
        seen = []
        for b in range(s.num_batches):
            batch = s.sample(epoch, b)
            parts = np.asarray(batch.parts)
            seen += parts.tolist()
            want_nodes = np.nonzero(np.isin(clusters, parts))[0]
            nodes = np.asarray(batch.nodes)
            assert sorted(nodes.tolist()) == want_nodes.tolist()
            got = batch_edge_set(batch)
            want = edge_set(g, want_nodes)
            assert got == want and len(want) > 0
            assert len(got) == batch.num_edges  # no edge twice
        assert sorted(seen) == list(range(s.num_parts))  # every cluster once per epoch


def test_random_clustering_is_keyed_by_seed_epoch_and_rank(cora):
    g = cora.graph
    n = g.num_nodes
    a = ClusterGCNSampler(g, 10, 2, seed=3, rank=0)
    again = ClusterGCNSampler(g, 10, 2, seed=3, rank=0)
    other_rank = ClusterGCNSampler(g, 10, 2, seed=3, rank=1)
    other_seed = ClusterGCNSampler(g, 10, 2, seed=4, rank=0)
    c0 = a.clustering(0)
    sizes = np.bincount(c0, minlength=10)
    assert sizes.min() >= n // 10 and sizes.max() <= n // 10 + 1  # balanced
    assert np.array_equal(c0, again.clustering(0))
    assert not np.array_equal(c0, a.clustering(1))
    assert not np.array_equal(c0, other_rank.clustering(0))
    assert not np.array_equal(c0, other_seed.clustering(0))
    b1, b2 = a.sample(1, 2), again.sample(1, 2)
    assert np.array_equal(b1.nodes, b2.nodes) and np.array_equal(b1.src, b2.src)
    assert not np.array_equal(np.sort(b1.nodes), np.sort(other_rank.sample(1, 2).nodes))
    # METIS: the clusters stay, the order is keyed by (seed, epoch, rank).
    m0 = ClusterGCNSampler(g, 8, 1, method="metis", seed=3, rank=0)
    m1 = ClusterGCNSampler(g, 8, 1, method="metis", seed=3, rank=1)
    assert np.array_equal(m0.clustering(0), m0.clustering(5))
    order = [int(m0.batch_parts(0, b)[0]) for b in range(m0.num_batches)]
    assert order != [int(m0.batch_parts(1, b)[0]) for b in range(m0.num_batches)]
    assert order != [int(m1.batch_parts(0, b)[0]) for b in range(m1.num_batches)]


def test_bad_arguments_name_what_was_wrong(cora):
    g = cora.graph
    with pytest.raises(ValueError, match="num_parts 0 outside"):
        ClusterGCNSampler(g, 0)
    with pytest.raises(ValueError, match="method must be"):
        ClusterGCNSampler(g, 4, method="louvain")
    with pytest.raises(ValueError, match="parts_per_batch 0"):
        ClusterGCNSampler(g, 4, 0)
    with pytest.raises(ValueError, match="part_of_node has shape"):
        ClusterGCNSampler(g, part_of_node=np.zeros(3, dtype=np.int64))
    # A bad clustering is refused when the sampler is made, not at its first sample(); the
    # message named the node count as the bound of a part ("part -1 outside [0, 2708)").
    with pytest.raises(ValueError, match=r"part 1 has no nodes \(part_of_node numbers its "
                                         r"parts 0\.\.2, none empty\)"):
        ClusterGCNSampler(g, part_of_node=np.where(np.arange(g.num_nodes) < 5, 0, 2))
    with pytest.raises(ValueError, match=r"part 0 has no nodes"):
        ClusterGCNSampler(g, part_of_node=np.full(g.num_nodes, 3))
    with pytest.raises(ValueError, match=r"part 4 has no nodes \(part_of_node numbers its "
                                         r"parts 0\.\.1000000000000, none empty\)"):
        ClusterGCNSampler(g, part_of_node=np.r_[np.arange(g.num_nodes - 1) % 4, 10**12])
    with pytest.raises(ValueError, match=r"part_of_node\[5\] is -1; parts are numbered from 0"):
        ClusterGCNSampler(g, part_of_node=np.where(np.arange(g.num_nodes) < 5, 0, -1))
    with pytest.raises(IndexError, match="batch 9 outside"):
        ClusterGCNSampler(g, 4).sample(0, 9)


def test_integer_arguments_are_never_truncated(cora):
    """num_parts=2708 / 1500 (1.8) made 1 cluster and seed=1.5 drew seed 1's clusters, without a
    word: floats, bools and strings are refused as parts_per_batch's are."""
    g = cora.graph
    for name, value in (("num_parts", g.num_nodes / 1500), ("num_parts", "10"),
                        ("num_parts", True), ("seed", 1.5), ("rank", 0.5),
                        ("num_threads", 2.0)):
        kwargs = {"num_parts": 4, name: value}
        with pytest.raises(TypeError, match=rf"ClusterGCNSampler: {name} must be an integer, "
                                            rf"got {value!r}"):
            ClusterGCNSampler(g, **kwargs)
    s = ClusterGCNSampler(g, np.int64(4), seed=np.uint32(7), rank=np.int32(1), num_threads=2)
    assert (s.num_parts, s.seed, s.rank, s.num_threads) == (4, 7, 1, 2)


def test_a_clustering_of_floats_is_refused(cora):
    # 0.5, 1.5, ... used to be truncated into parts 0, 1, ... without a word.
    g = cora.graph
    p = np.arange(g.num_nodes) % 4
    for bad in (p + 0.5, p.astype(np.float32), p.astype(bool)):
        with pytest.raises(TypeError, match=f"part_of_node must hold integers, got dtype "
                                            f"{bad.dtype}"):
            ClusterGCNSampler(g, part_of_node=bad)
    for good in (p, p.astype(np.int32), p.astype(np.uint8), p.tolist()):
        assert ClusterGCNSampler(g, part_of_node=good).num_parts == 4


@requires_torch
def test_loader_gathers_the_rows_of_each_batch(cora):
    import torch

    g = cora.graph
    feat = np.asarray(cora.ndata["feat"])
    label = np.asarray(cora.ndata["label"])
    s = ClusterGCNSampler(g, 6, 2, seed=1)
    loader = ClusterGCNLoader(s, {"feat": feat, "label": torch.from_numpy(label)}, prefetch=2)
    for epoch in range(2):
        got = list(loader)
        assert len(got) == 3 and all(b.epoch == epoch for b in got)
        for b in got:
            idx = b.nodes.numpy()
            assert torch.equal(b.ndata["feat"], torch.from_numpy(feat[idx]))
            assert torch.equal(b.ndata["label"], torch.from_numpy(label[idx]))
        covered = np.sort(np.concatenate([b.nodes.numpy() for b in got]))
        assert np.array_equal(covered, np.arange(g.num_nodes))  # each node once per epoch


def test_loader_refuses_node_data_without_one_row_per_node(cora):
    """Rows are picked by node ID: too few rows failed only when a batch named a node past
    them (a NumPy IndexError naming no array; a device assert on a GPU), and too many, e.g. an
    edge array, gave other rows without a word."""
    g = cora.graph
    s = ClusterGCNSampler(g, 6, 2, seed=1)
    feat = np.asarray(cora.ndata["feat"])
    for bad in (feat[:5], np.zeros((g.num_edges, 2)), np.float32(1)):
        with pytest.raises(ValueError, match=r"node_data\['x'\] has shape .* one row per node of "
                                             rf"the graph \({g.num_nodes}\)"):
            ClusterGCNLoader(s, {"feat": feat, "x": bad})
    assert ClusterGCNLoader(s, {"feat": feat}).node_data["feat"] is not None


@requires_torch
def test_softmax_aggregation_against_a_loop():
    import torch

    from tessera.nn import softmax_aggregate

    gen = torch.Generator().manual_seed(0)
    n, e, h = 7, 30, 4
    src = torch.randint(0, n, (e,), generator=gen)
    dst = torch.randint(0, n - 1, (e,), generator=gen)  # node n-1 has no in-edge
    msg = torch.rand(e, h, generator=gen, dtype=torch.float64) * 3
    for t in (0.0, 1.0, 7.5):
        out = softmax_aggregate(msg, dst, n, torch.tensor(t, dtype=torch.float64))
        for v in range(n):
            m = msg[dst == v]
            if len(m) == 0:
                assert torch.all(out[v] == 0)
                continue
            w = torch.softmax(t * m, 0)
            assert torch.allclose(out[v], (w * m).sum(0))
    big = softmax_aggregate(msg, dst, n, torch.tensor(1e4, dtype=torch.float64))
    v = int(dst[0])
    assert torch.allclose(big[v], msg[dst == v].max(0).values)  # t -> inf: the max


@requires_torch
def test_deepgcn_learns_tolokers(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("train_deepgcn", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "r.json"
    assert mod.main(["--dataset", TOLOKERS, "--layers", "3", "--hidden", "32", "--epochs", "4",
                     "--clusters", "8", "--quiet", "--threads", "1", "--device", "cpu",
                     "--results", str(out)]) == 0
    r = json.loads(out.read_text())
    split = r["splits"]["0"]
    assert r["metric"] == "rocauc" and len(split["history"]) == 4
    assert split["best_val"] > 65.0  # chance is 50
    assert split["test_at_best"] > 65.0
    assert all(h["steps"] == 8 for h in split["history"])


@requires_torch
def test_deepgcn_refuses_rocauc_of_more_than_two_classes(tmp_path):
    # Class 1 against class 0 used to drop Cora's classes 2-6 from the metric silently.
    import importlib.util

    spec = importlib.util.spec_from_file_location("train_deepgcn", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with pytest.raises(SystemExit, match=r"--metric rocauc scores two classes; .*cora has 7 "
                                         r"\(use --metric acc\)"):
        mod.main(["--dataset", CORA, "--metric", "rocauc", "--epochs", "1", "--quiet",
                  "--threads", "1", "--device", "cpu", "--results", str(tmp_path / "r.json")])
    assert not (tmp_path / "r.json").exists()


@requires_torch
@pytest.mark.multiprocess
def test_parallel_epochs_on_two_ranks(tmp_path):
    from test_distributed import launch

    out = tmp_path / "r.json"
    run = launch(2, EXAMPLE, "--dataset", TOLOKERS, "--parallel-epochs", "--layers", "2",
                 "--hidden", "16", "--epochs", "2", "--clusters", "6", "--quiet",
                 "--threads", "1", "--device", "cpu", "--results", out, cwd=tmp_path).check()
    r = json.loads(out.read_text())
    assert r["ranks"] == 2 and r["mode"] == "parallel epochs"
    s = r["splits"]["0"]
    assert s["grad_sync"] == "host" and abs(s["lr"] - 0.01 * 2 ** 0.5) < 1e-12
    assert all(h["steps"] == 6 for h in s["history"])
    assert s["best_val"] > 55.0
    assert "parameters differ" not in run.out


@requires_torch
@pytest.mark.multiprocess
def test_partitioned_deepgcn_on_two_ranks(tmp_path):
    from test_distributed import launch

    out = tmp_path / "r.json"
    launch(2, EXAMPLE, "--dataset", TOLOKERS, "--layers", "2", "--hidden", "16", "--epochs", "2",
           "--clusters", "4", "--quiet", "--threads", "1", "--device", "cpu", "--results", out,
           cwd=tmp_path).check()
    r = json.loads(out.read_text())
    assert r["ranks"] == 2 and r["mode"] == "partitioned"
    s = r["splits"]["0"]
    # Each rank clusters its ~half of the nodes into 4: 4 steps per epoch on either rank.
    assert all(h["steps"] == 4 for h in s["history"])
    assert s["best_val"] > 55.0


@requires_torch
@pytest.mark.multiprocess
@pytest.mark.parametrize("num_parts,ranks", [(2, 2), (1, 2)])
def test_each_rank_clusters_its_own_partition(tmp_path, num_parts, ranks):
    """One trainer per partition, or two trainers sharing one (each clusters its own range)."""
    from test_distributed import launch

    parts = tmp_path / "parts"
    tessera.partition_graph(CORA, "cora", num_parts, parts, symmetrize=True)
    config = parts / "cora.json"
    launch(ranks, "cluster_gcn.py", config, tmp_path).check()
    whole = tessera.DistGraph("cora", part_config=str(config)).local_graph  # simulated
    seen = []
    for r in range(ranks):
        d = np.load(tmp_path / f"rank{r}.npz")
        lo, hi = int(d["lo"]), int(d["hi"])
        nodes = d["nodes"]
        assert nodes.min() >= lo and nodes.max() < hi  # only its own nodes
        got = {(int(nodes[s]), int(nodes[t]), int(e))
               for s, t, e in zip(d["src"], d["dst"], d["eids"])}
        assert got == edge_set(whole, nodes) and got
        seen.append(np.sort(d["all_nodes"]))
        assert np.array_equal(seen[-1], np.arange(lo, hi))  # an epoch covers its nodes once


@needs_gpu
@requires_torch
def test_loader_on_cuda(cora):
    import torch

    from tessera.nn import DeepGCN

    dev = torch.device("cuda")
    feat = np.asarray(cora.ndata["feat"], dtype=np.float32)
    s = ClusterGCNSampler(cora.graph, 4, 1, seed=2)
    loader = ClusterGCNLoader(s, {"feat": feat}, device=dev)
    assert loader.node_data["feat"].device.type == "cuda"  # resident: uploaded once
    net = DeepGCN(feat.shape[1], 16, 7, num_layers=3).to(dev)
    for b in loader:
        assert b.src.device.type == "cuda" and b.ndata["feat"].device.type == "cuda"
        assert torch.equal(b.ndata["feat"].cpu(), torch.from_numpy(feat[b.nodes.cpu().numpy()]))
        net(b.ndata["feat"], b.src, b.dst).sum().backward()


def test_plot_deepgcn_on_committed_results(tmp_path):
    import glob
    import subprocess
    import sys

    found = glob.glob(os.path.join(REPO, "benchmarks", "results", "deepgcn", "*.p[0-9].json"))
    latest = max(f.rsplit(".p", 1)[0] for f in found)  # the newest run of the three counts
    runs = sorted(f for f in found if f.rsplit(".p", 1)[0] == latest)
    assert len(runs) == 3
    script = os.path.join(REPO, "benchmarks", "plot_deepgcn.py")
    out = tmp_path / "d"
    r = subprocess.run([sys.executable, script, *runs, "--out", str(out)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    summary = json.loads((tmp_path / "d.json").read_text())
    assert [s["ranks"] for s in summary["runs"]] == [1, 2, 4]
    ref = summary["runs"][0]["best_mean_val"]
    assert summary["target_val"] == ref
    for s in summary["runs"]:
        assert s["best_mean_val"] >= ref  # every rank count reaches the 1-rank figure
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    r = subprocess.run([sys.executable, script, str(bad), "--out", str(tmp_path / "x")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "not a train_deepgcn.py result" in r.stderr
    assert not (tmp_path / "x.json").exists()
