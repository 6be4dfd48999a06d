# SPDX-License-Identifier: Apache-2.0
"""The link-prediction example: held-out edges stay out of the training graph and out of the
batches' blocks, the metrics follow their definitions, and a short run on Cora beats the random
baseline by a clear margin."""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from conftest import CORA, REPO, needs_gpu  # noqa: E402

import tessera  # noqa: E402

EXAMPLE = os.path.join(REPO, "python", "examples", "train_link.py")
sys.path.insert(0, os.path.dirname(EXAMPLE))
import train_link  # noqa: E402


def _run(*argv, timeout=300, device="cpu"):  # a deadline against hangs; ~20 s on 2 cores
    return subprocess.run([sys.executable, EXAMPLE, *argv, "--device", device],
                          capture_output=True, text=True, timeout=timeout, cwd=REPO)


def test_metrics_follow_their_definitions():
    rng = np.random.default_rng(0)
    pos = rng.integers(0, 5, 60).astype(float)  # many ties
    neg = rng.integers(0, 4, 70).astype(float)
    brute = np.mean([(p > n) + 0.5 * (p == n) for p in pos for n in neg])
    assert train_link.roc_auc(pos, neg) == pytest.approx(brute)
    assert train_link.roc_auc(np.array([2.0, 3.0]), np.array([0.0, 1.0])) == 1.0
    # OGB: strictly above the K-th highest negative; the 50th highest of 0..99 is 50.
    neg = np.arange(100.0)
    assert train_link.hits_at_k(np.array([49.0, 50.0, 51.0, 99.5]), neg, 50) == 0.5
    assert train_link.hits_at_k(np.array([0.0]), neg[:10], 50) == 1.0  # fewer than K negatives


def test_held_out_edges_never_reach_the_model(tmp_path):
    args = argparse.Namespace(dataset=CORA, val_frac=0.05, test_frac=0.10, split_seed=3,
                              eval_negatives=1.0, seed=0)
    data = train_link.prepare(args, str(tmp_path))
    g, rev = data["g"], data["reverse_eids"]
    lg = g.local_graph
    ip = np.asarray(lg.indptr)
    dst = np.repeat(np.arange(lg.num_nodes), np.diff(ip))
    src = np.asarray(lg.indices)
    eid = np.asarray(lg.eids) if len(np.asarray(lg.eids)) else np.arange(len(src))
    n = g.num_nodes()
    s = data["split"]
    assert s["train_edges"] + s["val_edges"] + s["test_edges"] == s["undirected_edges"] == 5278
    assert g.num_edges() == 2 * s["train_edges"]
    # The reverse map, carried through the relabelling, pairs u -> v with v -> u.
    by_eid_src, by_eid_dst = np.empty(len(src), np.int64), np.empty(len(src), np.int64)
    by_eid_src[eid], by_eid_dst[eid] = src, dst
    assert np.array_equal(by_eid_src[rev], by_eid_dst)
    assert np.array_equal(by_eid_dst[rev], by_eid_src)
    if getattr(g, "is_distributed", False) and \
            hasattr(tessera._C, "dist_symmetrized_reverse_eids"):
        # The library's own map in new IDs (builds that have it) agrees.
        assert np.array_equal(tessera.dataloading.symmetrized_reverse_eids(g), rev)
    # Held-out pairs (either direction) and evaluation negatives are not training edges.
    train_keys = set((src * n + dst).tolist())
    for which in ("val", "test"):
        pos, neg = data[which]
        assert len(neg) == len(pos)
        for a, b in np.concatenate([pos, neg]).tolist():
            assert a != b and a * n + b not in train_keys and b * n + a not in train_keys
    # exclude="reverse_id": no block of a batch holds the batch's edges or their reverses.
    sampler = tessera.NeighborSampler([10, 10])
    dl = tessera.EdgeDataLoader(g, np.arange(g.num_edges()), sampler, batch_size=1024,
                                negative_sampler=tessera.dataloading.negative_sampler.Uniform(2),
                                exclude="reverse_id", reverse_eids=rev, seed=1)
    for _, pos_graph, neg_graph, blocks in dl:
        batch = np.asarray(pos_graph.eids)
        banned = np.concatenate([batch, rev[batch]])
        for b in blocks:
            assert not np.isin(np.asarray(b.eids), banned).any()
        assert neg_graph.num_edges() == 2 * pos_graph.num_edges()


def test_short_run_beats_the_random_baseline(tmp_path):
    out, png = tmp_path / "link.json", tmp_path / "link.png"
    r = _run("--dataset", CORA, "--epochs", "3", "--quiet", "--threads", "2",
             "--out-json", str(out), "--plot", str(png))
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(out.read_text())
    for key in ("command", "commit", "machine", "split", "best_epoch", "val", "test",
                "test_last_epoch", "random_baseline", "history", "args"):
        assert key in res, key
    for block in (res["val"], res["test"], res["test_last_epoch"], res["random_baseline"]["val"],
                  res["random_baseline"]["test"]):
        assert set(block) == {"roc_auc", "hits@50"}
    assert [h["epoch"] for h in res["history"]] == [0, 1, 2]
    assert all("loss" in h and "val_roc_auc" in h and "val_hits@50" in h for h in res["history"])
    assert res["split"]["test_edges"] == 528 and res["split"]["test_negatives"] == 528
    base = res["random_baseline"]["test"]
    assert 0.4 < base["roc_auc"] < 0.6, base
    assert res["test"]["roc_auc"] > 0.7 and res["test"]["roc_auc"] > base["roc_auc"] + 0.2, res
    assert res["test"]["hits@50"] > base["hits@50"] + 0.2, res
    assert png.stat().st_size > 1000


@needs_gpu
def test_short_run_cuda_beats_the_random_baseline(tmp_path):
    out = tmp_path / "link.json"
    r = _run("--dataset", CORA, "--epochs", "3", "--quiet", "--out-json", str(out), "--plot",
             str(tmp_path / "link.png"), device="cuda")
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(out.read_text())
    assert res["device"].startswith("cuda")
    base = res["random_baseline"]["test"]
    assert res["test"]["roc_auc"] > 0.7 and res["test"]["roc_auc"] > base["roc_auc"] + 0.2, res


def test_unknown_device_is_one_clear_error():
    r = _run("--dataset", CORA, "--epochs", "1", "--quiet", timeout=120, device="tpu")
    assert r.returncode != 0
    errors = [ln for ln in r.stderr.splitlines() if "error:" in ln]
    assert len(errors) == 1 and "--device must be auto, cpu, cuda or cuda:N" in errors[0], \
        r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("argv, message", [
    (["--dataset", "/nonexistent/cora"], "does not exist"),
    (["--val-frac", "0"], "--val-frac must be in (0, 1)"),
    (["--val-frac", "0.5", "--test-frac", "0.6"], "must be < 1"),
    (["--val-frac", "0.00001"], "cannot be split"),
])
def test_bad_inputs_give_one_clear_error(argv, message):
    r = _run("--dataset", CORA, *argv, "--epochs", "1", "--quiet", timeout=120)
    assert r.returncode != 0
    errors = [ln for ln in r.stderr.splitlines() if "error:" in ln]
    assert len(errors) == 1 and message in errors[0], r.stderr
    assert "Traceback" not in r.stderr
