# SPDX-License-Identifier: Apache-2.0
"""tessera.update_all against a whole-graph NumPy reference: Cora (symmetrized) in 1, 2 and 4
METIS parts and 2 random parts under ``python -m tessera launch`` (dist_scripts/update_all.py),
with one trainer per part and with two (several trainers per machine),
every message and reduce, within the float32 summation bound of the SpMM tests (max: exactly);
the simulated mode (one process, 2 parts); argument errors; and the full-graph example (SGC at 1
and 2 ranks gives the same accuracy; GCN inference over the partitions equals PyTorch's)."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import sys

import numpy as np
import pytest

from conftest import CORA, REPO, requires_torch, tessera
from test_distributed import input_edges, launch, partitionings  # noqa: F401 (fixtures)

SCRIPT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dist_scripts")
spec = importlib.util.spec_from_file_location("ua_script", os.path.join(SCRIPT_DIR,
                                                                        "update_all.py"))
ua = importlib.util.module_from_spec(spec)
# The script hides torch from its own ranks (sys.modules["torch"] = None); imported here for its
# helpers, it must not hide torch from every test collected after this module.
_torch_entry = sys.modules.get("torch", False)
spec.loader.exec_module(ua)
if _torch_entry is False:
    sys.modules.pop("torch", None)
else:
    sys.modules["torch"] = _torch_entry


def reference(p, edges, message: str, reduce: str):
    """Whole-graph result in float64 (rows in original node order) and its float32 bound."""
    src_all, dst_all = edges
    oe = np.asarray(p.orig_eids)
    src, dst = src_all[oe], dst_all[oe]
    n = len(p.orig_nids)
    x = ua.feature(np.arange(n)).astype(np.float64)
    m = x[src]
    if message == "u_mul_e":
        m = (ua.weight(oe)[:, None] * ua.feature(src)).astype(np.float32).astype(np.float64)
    deg = np.bincount(dst, minlength=n)
    order = np.argsort(dst, kind="stable")
    starts = np.concatenate([[0], np.cumsum(deg)[:-1]])
    has = deg > 0
    ref = np.zeros((n, ua.F))
    mag = np.zeros((n, ua.F))
    if reduce == "max":
        ref[has] = np.maximum.reduceat(m[order], starts[has], axis=0)
        return ref, np.zeros_like(ref)
    ref[has] = np.add.reduceat(m[order], starts[has], axis=0)
    mag[has] = np.add.reduceat(np.abs(m[order]), starts[has], axis=0)
    if reduce == "mean":
        ref[has] /= deg[has, None]
        mag[has] /= deg[has, None]
    bound = (deg[:, None] + 2) * 2.0 ** -23 * mag + 1e-30
    return ref, bound


def check(p, edges, got: dict, orig_nid: np.ndarray) -> None:
    for message in ("copy_u", "u_mul_e"):
        for reduce in ("sum", "mean", "max"):
            ref, bound = reference(p, edges, message, reduce)
            have = np.asarray(got[f"{message}-{reduce}"], dtype=np.float64)
            err = np.abs(have - ref[orig_nid])
            worst = np.unravel_index(np.argmax(err - bound[orig_nid]), err.shape)
            assert (err <= bound[orig_nid]).all(), (
                f"{message}/{reduce}: node {worst[0]} feature {worst[1]}: "
                f"{have[worst]} vs {ref[orig_nid][worst]} (bound {bound[orig_nid][worst]})")


@pytest.mark.parametrize("method,parts,ranks", [("metis", 1, 1), ("metis", 2, 2), ("random", 2, 2),
                                                ("metis", 4, 4), ("metis", 1, 2),
                                                ("random", 2, 4)])
def test_update_all_equals_whole_graph(partitionings, input_edges, tmp_path,  # noqa: F811
                                       method, parts, ranks):
    """ranks > parts: several trainers per machine, each aggregating its own share of its
    machine's partition."""
    p = partitionings[(method, parts)]
    eid_file = tmp_path / "orig_eid.npy"
    np.save(eid_file, np.asarray(p.orig_eids, dtype=np.int64))
    launch(ranks, "update_all.py", p.config, tmp_path / "out", eid_file).check()
    got = np.load(tmp_path / "out" / "result.npz")
    check(p, input_edges, got, got["orig_nid"])


def test_update_all_simulated_mode(partitionings, input_edges):  # noqa: F811
    """One process serving a 2-part partitioning: the NumPy path over the assembled graph."""
    p = partitionings[("random", 2)]
    g = tessera.DistGraph("cora", part_config=p.config)
    assert not g.is_distributed
    n = g.num_nodes()
    orig_nid = np.asarray(g.orig_nids())
    x = tessera.DistTensor((n, ua.F), np.float32, "ua-sim-x",
                           part_policy=g.get_node_partition_policy(),
                           init_func=lambda shape, dtype: np.zeros(shape, np.float32))
    x[np.arange(n)] = ua.feature(orig_nid)
    w = tessera.DistTensor((g.num_edges(),), np.float32, "ua-sim-w",
                           part_policy=g.get_edge_partition_policy())
    w[np.arange(g.num_edges())] = ua.weight(np.asarray(p.orig_eids))
    got = {}
    for message in ("copy_u", "u_mul_e"):
        for reduce in ("sum", "mean", "max"):
            y = tessera.update_all(g, x, message, reduce,
                                   edge_weight=w if message == "u_mul_e" else None)
            got[f"{message}-{reduce}"] = np.asarray(y.gather(np.arange(n)))
    check(p, input_edges, got, orig_nid)
    # DGL's name before 0.8 (and the default) is the same message.
    for reduce in ("sum", "mean", "max"):
        for y in (tessera.update_all(g, x, "copy_src", reduce),
                  tessera.update_all(g, x, reduce=reduce)):
            np.testing.assert_array_equal(np.asarray(y.gather(np.arange(n))),
                                          got[f"copy_u-{reduce}"])


def test_update_all_errors(partitionings):  # noqa: F811
    g = tessera.DistGraph("cora", part_config=partitionings[("metis", 2)].config)
    x = tessera.DistTensor((g.num_nodes(), 2), np.float32, "ua-err-x",
                           part_policy=g.get_node_partition_policy())
    with pytest.raises(ValueError, match="reduce 'min' is not one of"):
        tessera.update_all(g, x, reduce="min")
    with pytest.raises(ValueError, match="message 'e_add_u' is not one of 'copy_u'"):
        tessera.update_all(g, x, message="e_add_u")
    w = tessera.DistTensor((g.num_edges(),), np.float32, "ua-err-w",
                           part_policy=g.get_edge_partition_policy())
    with pytest.raises(ValueError, match="message is 'copy_src' \\(use 'u_mul_e'\\)"):
        tessera.update_all(g, x, message="copy_src", edge_weight=w)
    with pytest.raises(ValueError, match="needs edge_weight"):
        tessera.update_all(g, x, message="u_mul_e")
    with pytest.raises(ValueError, match="is not an edge feature"):
        tessera.update_all(g, x, message="u_mul_e", edge_weight="nope")
    # A node feature name is checked as an edge feature name is (it was a bare KeyError).
    with pytest.raises(ValueError, match=r"x 'nope' is not a node feature of graph 'cora' "
                                         r"\(it has \[.*'feat'"):
        tessera.update_all(g, "nope")
    with pytest.raises(TypeError, match="edge_weight must be"):
        tessera.update_all(g, x, message="u_mul_e", edge_weight=3)
    # A dtype is a TypeError in simulated mode as in distributed mode (it was a ValueError here
    # and a TypeError there).
    with pytest.raises(TypeError, match=r"x '.*label' must be float32, got int64"):
        tessera.update_all(g, "label")


def test_update_all_simulated_mode_checks_edge_weights_as_distributed(partitionings):  # noqa: F811
    # The distributed mode's UpdateAllPlan refuses these; the simulated mode cast a float64
    # weight silently, read a node tensor as edges (IndexError) and reported only a size.
    g = tessera.DistGraph("cora", part_config=partitionings[("metis", 2)].config)
    assert not g.is_distributed
    n, e = g.num_nodes(), g.num_edges()
    x = tessera.DistTensor((n, 2), np.float32, "ua-sim-wcheck-x",
                           part_policy=g.get_node_partition_policy())

    def weight(shape, dtype, policy, name):
        return tessera.DistTensor(shape, dtype, name, part_policy=policy)

    edges, nodes = g.get_edge_partition_policy(), g.get_node_partition_policy()
    with pytest.raises(TypeError, match=r"edge_weight 'w64' must be float32, got float64 of "
                                        rf"shape \({e},\) over the edge policy"):
        tessera.update_all(g, x, "u_mul_e", edge_weight=weight((e,), np.float64, edges, "w64"))
    with pytest.raises(ValueError, match=rf"\[num_edges, 1\] over the edge policy of graph "
                                         rf"'cora' \({e} edges\), got float32 of shape "
                                         rf"\({e}, 2\) over the edge policy"):
        tessera.update_all(g, x, "u_mul_e", edge_weight=weight((e, 2), np.float32, edges, "w2"))
    with pytest.raises(ValueError, match=rf"got float32 of shape \({n},\) over the node "
                                         "policy"):
        tessera.update_all(g, x, "u_mul_e", edge_weight=weight((n,), np.float32, nodes, "wn"))
    for shape in ((e,), (e, 1)):
        w = weight(shape, np.float32, edges, f"w-ok{len(shape)}")
        assert tessera.update_all(g, x, "u_mul_e", edge_weight=w).shape == (n, 2)


EXAMPLE = os.path.join(REPO, "python", "examples", "full_graph.py")


@requires_torch
def test_sgc_same_accuracy_at_one_and_two_ranks(tmp_path):
    """SGC (K=2) on Cora: the same validation-picked test accuracy at 1 and 2 ranks."""
    res = []
    for parts in (1, 2):
        out = tmp_path / f"sgc{parts}.json"
        launch(parts, EXAMPLE, "--dataset", CORA, "--model", "sgc", "--weight-decays", "5e-6",
               "5e-5", "--part-dir", tmp_path / f"parts{parts}", "--results", out).check()
        res.append(json.loads(out.read_text()))
    assert res[0]["test_acc"] == res[1]["test_acc"], res
    assert res[0]["weight_decay"] == res[1]["weight_decay"], res
    assert res[0]["world_size"] == 1 and res[1]["world_size"] == 2


@requires_torch
def test_gcn_inference_over_partitions_equals_torch(tmp_path):
    out = tmp_path / "gcn.json"
    run = launch(2, EXAMPLE, "--dataset", CORA, "--model", "gcn", "--gcn-epochs", "30",
                 "--part-dir", tmp_path / "parts", "--results", out).check()
    r = json.loads(out.read_text())
    assert r["max_abs_diff_to_torch"] < 1e-4, r
    assert r["test_acc"] == r["torch_test_acc"], r
    # Progress on rank 0 only: every tenth of the training epochs and every inference layer,
    # each with its time.
    lines = run.lines(0)
    epochs = [ln for ln in lines if re.match(r"\[gcn\] epoch \d+/30: loss [\d.]+, val .*s$", ln)]
    assert [ln.split()[2] for ln in epochs] == [f"{e}/30:" for e in range(3, 31, 3)], lines
    for layer in (1, 2):
        assert any(re.match(rf"\[gcn\] inference layer {layer}/2 over the partitions: "
                            r"[\d.]+s$", ln) for ln in lines), lines
    assert not [ln for ln in run.lines(1) if ln.startswith(("[gcn]", "[full-graph]"))], run.out
