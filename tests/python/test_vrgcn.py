# SPDX-License-Identifier: Apache-2.0
"""VR-GCN (tessera.vrgcn): the control-variate and neighbor-sampling estimators against a dense
reference on a small graph, the history write-back, and training on 1 and 2 ranks."""
import json
import os
import re
import signal
import subprocess
import sys

import numpy as np
import pytest

from conftest import CORA, REPO, requires_torch, tessera

EXAMPLE = os.path.join(REPO, "python", "examples", "train_vrgcn.py")

torch = pytest.importorskip("torch", reason="torch is not installed (needed for training)")
from tessera import vrgcn  # noqa: E402


# --- a small graph and its dense reference ------------------------------------------------------
N, F, HIDDEN, CLASSES = 40, 6, 5, 3


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A random undirected graph (degrees 0 to ~12, one isolated node) partitioned into one
    part, its DistGraph, and the dense adjacency in the partition's IDs."""
    rng = np.random.default_rng(3)
    pairs = set()
    while len(pairs) < 150:
        u, v = (int(x) for x in rng.integers(0, N - 1, 2))  # node N-1 stays isolated
        if u != v:
            pairs.add((min(u, v), max(u, v)))
    edges = np.array(sorted(pairs), dtype=np.int64).T
    d = tmp_path_factory.mktemp("tiny")
    data = d / "tiny"
    data.mkdir()
    np.save(data / "edge_index.npy", np.ascontiguousarray(edges))
    np.save(data / "feat.npy", rng.normal(size=(N, F)).astype(np.float32))
    np.save(data / "label.npy", rng.integers(0, CLASSES, N).astype(np.int64))
    for name, lo, hi in (("train", 0, 20), ("val", 20, 30), ("test", 30, 40)):
        m = np.zeros(N, dtype=bool)
        m[lo:hi] = True
        np.save(data / f"{name}_mask.npy", m)
    orig, _ = tessera.partition_graph(str(data), "tiny", 1, d / "parts", symmetrize=True,
                                      return_mapping=True)
    g = tessera.DistGraph("tiny", part_config=str(d / "parts" / "tiny.json"))
    new = np.empty(N, dtype=np.int64)
    new[np.asarray(orig)] = np.arange(N)
    adj = np.zeros((N, N))
    adj[new[edges[0]], new[edges[1]]] = 1
    adj[new[edges[1]], new[edges[0]]] = 1
    x = np.load(data / "feat.npy").astype(np.float64)[np.asarray(orig)]
    deg, px = vrgcn.precompute(g, norm="none")
    return {"g": g, "adj": adj, "x": x, "deg": deg, "px": px}


def reference_px(t):
    a, x = t["adj"], t["x"]
    return (x + a @ x) / (a.sum(1, keepdims=True) + 1)


def model_for(t, layers=2):
    torch.manual_seed(5)
    m = vrgcn.GCN(F, HIDDEN, CLASSES, layers, dropout=0.0)
    m.eval()
    return m


def params(m):
    return [(lin.weight.detach().double().numpy(), lin.bias.detach().double().numpy())
            for lin in m.linears]


def exact_logits(t, m):
    a = t["adj"]
    deg1 = a.sum(1, keepdims=True) + 1
    (w0, b0), (w1, b1) = params(m)
    h1 = np.maximum(reference_px(t) @ w0.T + b0, 0)
    return h1, ((h1 + a @ h1) / deg1) @ w1.T + b1


def sampled_edges(sampler, t, seeds, key):
    """The (src, dst) global IDs the sampler draws for ``seeds`` with ``key``."""
    _, _, (b,) = sampler.sampler.sample_blocks(t["g"], seeds, *key)
    src_nodes, dst_nodes = np.asarray(b._b.src_nodes), np.asarray(b._b.dst_nodes)
    return src_nodes[np.asarray(b._b.src)], dst_nodes[np.asarray(b._b.dst)], src_nodes


def test_precompute_is_the_exact_first_aggregation(tiny):
    ids = np.arange(N)
    np.testing.assert_allclose(tiny["deg"].gather(ids), tiny["adj"].sum(1), atol=0)
    np.testing.assert_allclose(tiny["px"].gather(ids), reference_px(tiny), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("estimator", ["cv", "ns"])
def test_full_fanout_is_exact(tiny, estimator):
    m = model_for(tiny)
    s = vrgcn.VRGCNSampler(tiny["g"], tiny["deg"], tiny["px"], 2, HIDDEN, -1, estimator,
                           tag=f"full-{estimator}")
    if estimator == "cv":  # any history: with every neighbor sampled the correction cancels
        s.histories[0][np.arange(N)] = np.random.default_rng(1).normal(size=(N, HIDDEN))
    seeds = np.arange(0, N, 3)
    got = s.forward(m, seeds).detach().double().numpy()
    np.testing.assert_allclose(got, exact_logits(tiny, m)[1][seeds], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("fanout", [1, 2])
def test_cv_estimate_equals_dense_formula(tiny, fanout):
    """cv logits of a sampled batch equal the VR-GCN formula evaluated densely with the same
    sampled edges, random histories, and the full adjacency for the history term; the
    histories of the computed nodes then hold their fresh activations, the others unchanged."""
    t, m = tiny, model_for(tiny)
    s = vrgcn.VRGCNSampler(t["g"], t["deg"], t["px"], 2, HIDDEN, fanout, "cv",
                           tag=f"formula{fanout}")
    hbar = np.random.default_rng(2).normal(size=(N, HIDDEN)).astype(np.float32)
    s.histories[0][np.arange(N)] = hbar
    seeds = np.array([0, 4, 7, 11, 19, N - 1], dtype=np.int64)
    key = (11, 3, 5)
    src, dst, computed = sampled_edges(s, t, seeds, key)
    assert len(src) > 0 and len(src) < t["adj"][seeds].sum()  # really sampled
    got = s.forward(m, seeds, *key).detach().double().numpy()
    a = t["adj"]
    d = a.sum(1)
    h1, _ = exact_logits(t, m)
    hb = hbar.astype(np.float64)
    (w1, b1) = params(m)[1]
    want = np.zeros((len(seeds), HIDDEN))
    for k, u in enumerate(seeds):
        agg = h1[u] / (d[u] + 1) + a[u] @ hb / (d[u] + 1)
        mine = src[dst == u]
        if len(mine):
            agg += d[u] / len(mine) * (h1[mine] - hb[mine]).sum(0) / (d[u] + 1)
        want[k] = agg
    np.testing.assert_allclose(got, want @ w1.T + b1, rtol=1e-4, atol=1e-5)
    after = s.histories[0].gather(np.arange(N))
    np.testing.assert_allclose(after[computed], h1[computed], rtol=1e-5, atol=1e-6)
    others = np.setdiff1d(np.arange(N), computed)
    np.testing.assert_array_equal(after[others], hbar[others])


def test_ns_estimate_equals_dense_formula(tiny):
    t, m = tiny, model_for(tiny)
    s = vrgcn.VRGCNSampler(t["g"], t["deg"], t["px"], 2, HIDDEN, 2, "ns", tag="ns2")
    seeds = np.arange(1, N, 4)
    key = (4, 0, 9)
    src, dst, _ = sampled_edges(s, t, seeds, key)
    got = s.forward(m, seeds, *key).detach().double().numpy()
    d = t["adj"].sum(1)
    h1, _ = exact_logits(t, m)
    (w1, b1) = params(m)[1]
    want = np.zeros((len(seeds), HIDDEN))
    for k, u in enumerate(seeds):
        mine = src[dst == u]
        want[k] = h1[u] / (d[u] + 1) + (d[u] / len(mine) * h1[mine].sum(0) / (d[u] + 1)
                                        if len(mine) else 0)
    np.testing.assert_allclose(got, want @ w1.T + b1, rtol=1e-4, atol=1e-5)


def test_cv_with_exact_histories_has_no_sampling_error(tiny):
    """The control variate's point: once the histories equal the activations, fanout 1 gives
    the exact result for every key (neighbor sampling does not)."""
    t, m = tiny, model_for(tiny)
    h1, exact = exact_logits(t, m)
    cv = vrgcn.VRGCNSampler(t["g"], t["deg"], t["px"], 2, HIDDEN, 1, "cv", tag="exact-hist")
    ns = vrgcn.VRGCNSampler(t["g"], t["deg"], t["px"], 2, HIDDEN, 1, "ns", tag="exact-ns")
    seeds = np.arange(N)
    ns_err = 0.0
    for batch in range(3):
        cv.histories[0][np.arange(N)] = h1.astype(np.float32)
        got = cv.forward(m, seeds, 0, 0, batch).detach().double().numpy()
        np.testing.assert_allclose(got, exact, rtol=1e-4, atol=1e-5)
        ns_err = max(ns_err, np.abs(ns.forward(m, seeds, 0, 0, batch).detach().double().numpy()
                                    - exact).max())
    assert ns_err > 1e-3  # the check above could fail: sampling does change the estimate


def test_evaluate_matches_the_dense_model(tiny):
    t, m = tiny, model_for(tiny)
    _, logits = exact_logits(t, m)
    labels = np.asarray(t["g"].ndata["label"].numpy(), dtype=np.int64)
    masks = [np.arange(N) < 20, np.arange(N) >= 20]
    got = vrgcn.evaluate(t["g"], m, t["px"], t["deg"], masks, labels)
    pred = logits.argmax(1)
    want = [100.0 * (pred[k] == labels[k]).mean() for k in masks]
    assert got == pytest.approx(want)


def test_evaluate_gives_nan_for_an_empty_mask(tiny):
    # An empty mask used to score 0.0% accuracy, a figure no model earned.
    t, m = tiny, model_for(tiny)
    labels = np.asarray(t["g"].ndata["label"].numpy(), dtype=np.int64)
    empty, some = np.zeros(N, dtype=bool), np.arange(N) < 20
    acc = vrgcn.evaluate(t["g"], m, t["px"], t["deg"], [empty, some], labels)
    assert np.isnan(acc[0]) and 0.0 <= acc[1] <= 100.0
    binary = (np.arange(N) % 3 == 0).astype(np.int64)
    auc = vrgcn.evaluate(t["g"], vrgcn.GCN(F, HIDDEN, 2, 2), t["px"], t["deg"], [empty],
                         binary, metric="roc_auc")
    assert np.isnan(auc[0])


def test_evaluate_roc_auc_matches_the_dense_model(tiny):
    from tessera.metrics import roc_auc
    t = tiny
    torch.manual_seed(6)
    m = vrgcn.GCN(F, HIDDEN, 2, 2, dropout=0.0)
    a = t["adj"]
    (w0, b0), (w1, b1) = params(m)
    h1 = np.maximum(reference_px(t) @ w0.T + b0, 0)
    z = ((h1 + a @ h1) / (a.sum(1, keepdims=True) + 1)) @ w1.T + b1
    labels = (np.arange(N) % 3 == 0).astype(np.int64)
    mask = np.arange(N) >= 4
    got = vrgcn.evaluate(t["g"], m, t["px"], t["deg"], [mask], labels, metric="roc_auc")
    sc, y = (z[:, 1] - z[:, 0])[mask], labels[mask]
    assert got[0] == pytest.approx(100.0 * roc_auc(sc[y == 1], sc[y == 0]), abs=1e-6)
    with pytest.raises(ValueError, match="metric"):
        vrgcn.evaluate(t["g"], m, t["px"], t["deg"], [mask], labels, metric="f1")


def test_evaluate_refuses_roc_auc_of_more_than_two_classes(tiny):
    # Scores of class 1 against class 0 used to drop the nodes of classes 2.. silently.
    t = tiny
    labels = np.arange(N, dtype=np.int64) % CLASSES
    m = vrgcn.GCN(F, HIDDEN, CLASSES, 2)
    with pytest.raises(ValueError, match=r"roc_auc scores two classes .* up to 2 \(3 classes\)"):
        vrgcn.evaluate(t["g"], m, t["px"], t["deg"], [np.ones(N, bool)], labels,
                       metric="roc_auc")


def test_bad_arguments_are_refused(tiny):
    t = tiny
    with pytest.raises(ValueError, match="estimator"):
        vrgcn.VRGCNSampler(t["g"], t["deg"], t["px"], 2, HIDDEN, 2, "xyz")
    with pytest.raises(ValueError, match="fanout"):
        vrgcn.VRGCNSampler(t["g"], t["deg"], t["px"], 2, HIDDEN, 0, "cv")
    with pytest.raises(ValueError, match="layers"):
        vrgcn.GCN(F, HIDDEN, CLASSES, 1)


# --- training: 1 and 2 ranks --------------------------------------------------------------------
def run_example(nproc: int, tmp_path, *args, deadline: float = 600):
    env = dict(os.environ)
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(tessera.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_root, env.get("PYTHONPATH")) if p)
    cmd = [sys.executable, EXAMPLE, *[str(a) for a in args]]
    if nproc > 1:
        cmd = [sys.executable, "-m", "tessera", "launch", "--nproc-per-node", str(nproc),
               "--"] + cmd
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, cwd=tmp_path)
    try:
        out, _ = proc.communicate(timeout=deadline)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
        pytest.fail(f"{' '.join(cmd)} did not finish in {deadline}s:\n{out[-4000:]}")
    assert proc.returncode == 0, f"{' '.join(cmd)} exited {proc.returncode}:\n{out[-6000:]}"
    return out


@requires_torch
@pytest.mark.multiprocess
def test_cv_training_on_one_and_two_ranks(tmp_path):
    """Cora, fanout 2, 40 epochs: cv reaches GCN accuracy on 1 rank and on 2 ranks (histories
    written by both ranks at once), within a few points of each other."""
    acc = {}
    for nproc in (1, 2):
        res = tmp_path / f"r{nproc}.json"
        out = run_example(nproc, tmp_path, "--dataset", CORA, "--estimator", "cv", "--fanout", 2,
                          "--epochs", 40, "--no-full", "--threads", 1, "--part-dir",
                          tmp_path / f"parts{nproc}", "--results", res)
        assert re.search(r"result cv fanout 2: test [0-9.]+%", out), out[-3000:]
        r = json.loads(res.read_text())
        assert r["ranks"] == nproc
        run = r["runs"][0]
        assert run["estimator"] == "cv" and run["fanout"] == 2
        assert 0 < run["sampled_edges_per_epoch"] < run["history_edges_per_epoch"]
        acc[nproc] = run["test"]
    assert min(acc.values()) >= 75.0, acc  # GCN on Cora: ~81
    assert abs(acc[1] - acc[2]) <= 3.0, acc


def test_plot_script_draws_results_and_refuses_other_files(tmp_path):
    runs = [{"estimator": e, "fanout": f, "test": t, "test_std": 0.5,
             "sampled_edges_per_epoch": x} for e, f, t, x in
            (("cv", 2, 80.0, 100), ("ns", 2, 78.0, 100), ("full", -1, 80.5, 400))]
    res = tmp_path / "r.json"
    res.write_text(json.dumps({"dataset": "d", "metric": "accuracy", "ranks": 1, "epochs": 3,
                               "seeds": 2, "runs": runs}))
    script = os.path.join(REPO, "benchmarks", "plot_vrgcn.py")
    out = tmp_path / "p.png"
    ok = subprocess.run([sys.executable, script, str(out), str(res)], capture_output=True,
                        text=True)
    assert ok.returncode == 0 and out.stat().st_size > 0, ok.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    r = subprocess.run([sys.executable, script, str(tmp_path / "q.png"), str(bad)],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "bad.json: not a train_vrgcn.py results file" in r.stderr
    assert not (tmp_path / "q.png").exists()


@requires_torch
def test_example_refuses_roc_auc_of_more_than_two_classes(tmp_path, capsys):
    sys.path.insert(0, os.path.dirname(EXAMPLE))
    import train_vrgcn

    with pytest.raises(SystemExit) as e:
        train_vrgcn.main(["--dataset", CORA, "--metric", "roc_auc", "--epochs", "1",
                          "--no-full", "--device", "cpu", "--part-dir", str(tmp_path / "p")])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "error: --metric roc_auc scores two classes; cora has 7" in err


@requires_torch
def test_example_draws_plot_without_results(tmp_path):
    # --plot without --results used to be ignored: no plot, exit 0.
    pytest.importorskip("matplotlib")
    sys.path.insert(0, os.path.dirname(EXAMPLE))
    import train_vrgcn

    png = tmp_path / "plots" / "vrgcn.png"
    assert train_vrgcn.main(["--dataset", CORA, "--epochs", "1", "--no-full", "--device", "cpu",
                             "--threads", "1", "--part-dir", str(tmp_path / "p"),
                             "--plot", str(png)]) == 0
    assert png.stat().st_size > 1000
    assert not list(tmp_path.glob("*.json"))


def test_evaluate_refuses_labels_and_masks_of_another_shape(tiny):
    """[N, 1] labels with [N] predictions broadcast to [N, N]: accuracies of 6100% came back."""
    t = tiny
    m = vrgcn.GCN(F, HIDDEN, 3, 2)
    labels = np.asarray(t["g"].ndata["label"].numpy(), dtype=np.int64).reshape(-1)
    mask = np.arange(N) < 20
    want = vrgcn.evaluate(t["g"], m, t["px"], t["deg"], [mask], labels)
    assert vrgcn.evaluate(t["g"], m, t["px"], t["deg"], [mask], labels[:, None]) == want
    # a DistTensor reads whole through np.asarray, as the [N] it is
    assert np.asarray(t["g"].ndata["label"]).shape == t["g"].ndata["label"].shape
    with pytest.raises(ValueError, match=rf"labels must be \[N\] = \[{N}\] .*got shape \(5,\)"):
        vrgcn.evaluate(t["g"], m, t["px"], t["deg"], [mask], labels[:5])
    with pytest.raises(ValueError, match=r"masks\[0\] must be a boolean \[N\]"):
        vrgcn.evaluate(t["g"], m, t["px"], t["deg"], [mask.astype(np.int64)], labels)
