# SPDX-License-Identifier: Apache-2.0
"""The distributed EdgeDataLoader (DGL's DistEdgeDataLoader) under real jobs (python -m tessera
launch, dist_scripts/edge_batches.py): with global_order, global batch j (positives, negatives,
blocks, in original IDs) is the same at 1 and 2 ranks, METIS and random; with edge_split shares
every edge is a positive exactly once per epoch across ranks, its endpoints are the dataset's,
and no block holds a batch edge or its reverse."""
from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import requires_torch
from test_distributed import input_edges, launch, partitionings  # noqa: F401 (fixtures)

pytestmark = pytest.mark.multiprocess


def dumps(p, tmp_path, *flags) -> list[dict]:
    out = tmp_path / ("global" if flags else "local") / str(p.num_parts)
    launch(p.num_parts, "edge_batches.py", p.config, out, *flags).check()
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(p.num_parts)]


def in_original_ids(batch: dict, d: dict) -> dict:
    on, oe = np.asarray(d["orig_nids"]), np.asarray(d["orig_eids"])
    out = {"eids": oe[batch["eids"]], "pos": on[np.asarray(batch["pos"])],
           "neg": on[np.asarray(batch["neg"])], "input_nodes": on[batch["input_nodes"]],
           "blocks": []}
    for k in batch["blocks"]:
        src_nodes = on[k["srcnodes"]]
        out["blocks"].append({"srcnodes": src_nodes, "src": src_nodes[k["src"]],
                              "dst": src_nodes[k["dst"]], "eids": oe[k["eids"]]})
    return out


def check_batch(b: dict, num_input_edges: int, src_of, dst_of) -> None:
    """Endpoints are the dataset's; negatives share the source; no batch edge nor its reverse
    (original IDs i and E + i) is in any block."""
    e = b["eids"]
    assert np.array_equal(b["pos"][0], src_of[e]) and np.array_equal(b["pos"][1], dst_of[e])
    k = len(b["neg"][0]) // len(e)
    assert k == 2 and np.array_equal(b["neg"][0], np.repeat(b["pos"][0], k))
    excluded = set(e.tolist()) | set(((e + num_input_edges) % (2 * num_input_edges)).tolist())
    for blk in b["blocks"]:
        assert not excluded & set(blk["eids"].tolist()), "an excluded edge is in a block"


@pytest.mark.parametrize("method,parts", [("metis", 2), ("random", 2)])
def test_global_order_edge_batches_equal_one_rank(partitionings, input_edges, tmp_path,  # noqa: F811
                                                  method, parts):
    ref_p, p = partitionings[("metis", 1)], partitionings[(method, parts)]
    (ref,) = dumps(ref_p, tmp_path / "ref", "--global-order")
    got = dumps(p, tmp_path, "--global-order")
    src_of, dst_of = input_edges
    ne = len(src_of) // 2
    want = {b["j"]: in_original_ids(b, ref) for b in ref["batches"]}
    assert len(want) == ref["num_batches"] > 10
    seen = {}
    for d in got:
        assert d["num_batches"] == -(-len(want) // parts)
        for b in d["batches"]:
            seen[b["j"]] = in_original_ids(b, d)
    assert sorted(seen) == sorted(want)
    for j, w in want.items():
        g = seen[j]
        check_batch(g, ne, src_of, dst_of)
        for key in ("eids", "pos", "neg", "input_nodes"):
            assert np.array_equal(w[key], g[key]), f"global batch {j}: {key} differ"
        for i, (a, b) in enumerate(zip(w["blocks"], g["blocks"])):
            for key in ("srcnodes", "src", "dst", "eids"):
                assert np.array_equal(a[key], b[key]), f"global batch {j}: block {i} {key}"


def test_edge_split_shares_cover_every_edge_once(partitionings, input_edges, tmp_path):  # noqa: F811
    p = partitionings[("metis", 2)]
    got = dumps(p, tmp_path)
    src_of, dst_of = input_edges
    ne = len(src_of) // 2
    assert len({d["num_batches"] for d in got}) == 1, "ranks ran different step counts"
    positives = []
    for d in got:
        first = {}
        for b in d["batches"]:
            first.setdefault(b["j"], b)  # a short share wraps around: count its batches once
        for b in first.values():
            ob = in_original_ids(b, d)
            check_batch(ob, ne, src_of, dst_of)
            positives.extend(ob["eids"].tolist())
        # The DistGraph's reverse map pairs i with E + i in original IDs.
        oe, rev = np.asarray(d["orig_eids"]), np.asarray(d["reverse_eids"])
        assert np.array_equal(oe[rev], (oe + ne) % (2 * ne))
    assert sorted(positives) == sorted(np.asarray(got[0]["orig_eids"]).tolist())


@requires_torch
def test_train_link_on_two_ranks(tmp_path):
    """python/examples/train_link.py end to end under tessera launch: 2 partitions, the
    distributed edge loader, averaged gradients, DistTensor inference; 3 epochs beat the random
    baseline clearly and both ranks agree on the figures (only rank 0 writes them)."""
    from conftest import CORA, REPO

    out = tmp_path / "link_p2.json"
    example = f"{REPO}/python/examples/train_link.py"
    run = launch(2, example, "--dataset", CORA, "--epochs", "3", "--quiet", "--threads", "1",
                 "--out-json", out, "--plot", tmp_path / "link_p2.png").check()
    res = json.loads(out.read_text())
    assert res["ranks"] == 2 and res["batch_per_rank"] == 256
    assert res["command"].startswith("python -m tessera launch --nproc-per-node 2 --")
    assert [h["epoch"] for h in res["history"]] == [0, 1, 2]
    base = res["random_baseline"]["test"]
    assert res["test"]["roc_auc"] > 0.7 and res["test"]["roc_auc"] > base["roc_auc"] + 0.2, res
    assert res["test"]["hits@50"] > base["hits@50"] + 0.2, res
    assert "DistGraph(name='cora'" in run.out and "num_parts=2" in run.out
