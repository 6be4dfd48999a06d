# SPDX-License-Identifier: Apache-2.0
"""The distributed API under real jobs: every test starts ``python -m tessera launch`` in a
subprocess with a deadline (the scripts in dist_scripts/ dump what each rank saw) and asserts on
every rank's output.

* global-order batches: global batch j has the same seeds and blocks (in original IDs) for
  1, 2 and 4 ranks, METIS and random partitionings;
* DistTensor writes and reads across ranks, and g.ndata against the dataset;
* collectives (all_reduce, all_gather_object, broadcast_parameters, all_reduce_gradients);
* DistEmbedding + SparseAdagrad against a NumPy reference, and save / load;
* train_sage.py end to end on 2 ranks, and on 2 trainers sharing one part; --resume refused
  when the ranks' checkpoints are at different epochs;
* a rank that dies, one that vanishes without exit_client, and a partitioning that does not
  match the world size.
"""
from __future__ import annotations

import importlib.util
import json
import math
import os
import pickle
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

import numpy as np
import pytest

from conftest import CORA, REPO, needs_gpu, requires_torch, tessera

pytestmark = pytest.mark.multiprocess

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dist_scripts")
EXAMPLE = os.path.join(REPO, "python", "examples", "train_sage.py")
# Hang guard for a whole job. Every job here takes seconds; the bound is loose because the
# machine may be shared and a 4-rank job on 2 cores is slow to start.
DEADLINE = 300
BATCH_SIZE, FANOUTS, LOADER_SEED = 32, (10, 5), 7


@dataclass
class Run:
    cmd: list
    rc: int
    out: str  # stdout and stderr of the launcher and every rank ("[rank R] " prefixed)
    seconds: float

    def check(self) -> "Run":
        assert self.rc == 0, f"{' '.join(self.cmd)} exited with {self.rc}:\n{self.out[-6000:]}"
        return self

    def lines(self, rank: int) -> list[str]:
        prefix = f"[rank {rank}] "
        return [ln[len(prefix):] for ln in self.out.splitlines() if ln.startswith(prefix)]


def launch(nproc: int, script: str, *args, deadline: float = DEADLINE, cwd=None) -> Run:
    """Runs ``script args`` on ``nproc`` ranks through ``python -m tessera launch``; fails the
    test (after stopping the job) when it outlives ``deadline`` seconds."""
    env = dict(os.environ)
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(tessera.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_root, env.get("PYTHONPATH")) if p)
    path = script if os.path.isabs(script) else os.path.join(SCRIPTS, script)
    cmd = [sys.executable, "-m", "tessera", "launch", "--nproc-per-node", str(nproc), "--",
           sys.executable, path, *[str(a) for a in args]]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, cwd=cwd)
    try:
        out, _ = proc.communicate(timeout=deadline)
    except subprocess.TimeoutExpired:
        # The launcher forwards SIGTERM to every rank's process group, then SIGKILLs them.
        proc.send_signal(signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        pytest.fail(f"{' '.join(cmd)} did not finish within {deadline}s; output:\n"
                    f"{(out or '')[-6000:]}")
    return Run(cmd, proc.returncode, out, time.monotonic() - t0)


# --- partitionings ----------------------------------------------------------------------------
@dataclass
class Partitioning:
    config: str
    num_parts: int
    orig_nids: np.ndarray  # new node ID -> input node ID
    orig_eids: np.ndarray  # new edge ID -> input edge ID

    def node_range(self, part: int) -> tuple[int, int]:
        return tuple(tessera.PartitionBook.load(self.config).node_range(part))


@pytest.fixture(scope="session")
def partitionings(tmp_path_factory) -> dict:
    """Cora (symmetrized) in 1, 2 and 4 METIS parts and 2 random parts, keyed (method, P)."""
    out = {}
    for method, parts in [("metis", 1), ("metis", 2), ("metis", 4), ("random", 2)]:
        d = tmp_path_factory.mktemp(f"cora-{method}{parts}")
        nids, eids = tessera.partition_graph(CORA, "cora", parts, d, symmetrize=True,
                                             part_method=method, return_mapping=True)
        out[(method, parts)] = Partitioning(str(d / "cora.json"), parts, nids, eids)
    return out


@pytest.fixture(scope="session")
def input_edges() -> tuple[np.ndarray, np.ndarray]:
    """(src, dst) of every input edge ID of symmetrized Cora: edges i and E + i reverse each
    other (tessera.dataloading.symmetrized_reverse_eids)."""
    ei = np.load(os.path.join(CORA, "edge_index.npy"))
    return np.concatenate([ei[0], ei[1]]), np.concatenate([ei[1], ei[0]])


# --- 1. global batches ------------------------------------------------------------------------
@pytest.fixture(scope="session")
def batch_dumps(partitionings, tmp_path_factory):
    """(method, P) -> the ranks' epoch-0 batch dumps (each job runs once per session)."""
    cache = {}

    def get(method: str, parts: int) -> list[dict]:
        if (method, parts) not in cache:
            p = partitionings[(method, parts)]
            out = tmp_path_factory.mktemp(f"batches-{method}{parts}")
            launch(parts, "dump_batches.py", p.config, out, "--batch-size", BATCH_SIZE,
                   "--seed", LOADER_SEED, "--fanouts", ",".join(map(str, FANOUTS))).check()
            cache[(method, parts)] = [json.loads((out / f"rank{r}.json").read_text())
                                      for r in range(parts)]
        return cache[(method, parts)]

    return get


def in_original_ids(batch: dict, p: Partitioning) -> dict:
    """A dumped batch with every node and edge ID mapped to the input graph's."""
    on, oe = p.orig_nids, p.orig_eids
    blocks = []
    for k in batch["blocks"]:
        src_nodes, dst_nodes = on[np.array(k["srcnodes"], dtype=np.int64)], \
            on[np.array(k["dstnodes"], dtype=np.int64)]
        blocks.append({"srcnodes": src_nodes, "dstnodes": dst_nodes,
                       "src": src_nodes[np.array(k["src"], dtype=np.int64)],
                       "dst": dst_nodes[np.array(k["dst"], dtype=np.int64)],
                       "eids": oe[np.array(k["eids"], dtype=np.int64)]})
    return {"j": batch["j"], "seeds": on[np.array(batch["seeds"], dtype=np.int64)],
            "input_nodes": on[np.array(batch["input_nodes"], dtype=np.int64)], "blocks": blocks}


def by_global_index(dumps: list[dict], p: Partitioning) -> dict:
    """j -> [(rank, b, batch in original IDs), ...] over every rank's batches."""
    out = {}
    for d in dumps:
        for b in d["batches"]:
            out.setdefault(b["j"], []).append((d["rank"], b["b"], in_original_ids(b, p)))
    return out


def edge_triples(block: dict) -> list[tuple]:
    return sorted(zip(block["src"].tolist(), block["dst"].tolist(), block["eids"].tolist()))


def assert_same_batch(ref: dict, got: dict, where: str) -> None:
    assert np.array_equal(ref["seeds"], got["seeds"]), f"{where}: seeds differ"
    assert len(ref["blocks"]) == len(got["blocks"]), f"{where}: number of blocks"
    for i, (a, b) in enumerate(zip(ref["blocks"], got["blocks"])):
        assert np.array_equal(a["dstnodes"], b["dstnodes"]), f"{where}: block {i} dst nodes"
        assert sorted(a["srcnodes"].tolist()) == sorted(b["srcnodes"].tolist()), \
            f"{where}: block {i} has other source nodes"
        assert edge_triples(a) == edge_triples(b), \
            f"{where}: block {i} has other edges (src, dst, eid in original IDs)"
        # Same order too, so a model computes bitwise the same on any number of ranks.
        for key in ("srcnodes", "src", "dst", "eids"):
            assert np.array_equal(a[key], b[key]), f"{where}: block {i} {key} in another order"
    assert np.array_equal(ref["input_nodes"], got["input_nodes"]), f"{where}: input nodes"


def test_reference_batches_are_valid_samples(batch_dumps, partitionings, cora, input_edges):
    """The 1-rank batches (the reference of the comparisons below) are a correct epoch of
    2-layer neighbor samples of the training nodes."""
    p = partitionings[("metis", 1)]
    (dump,) = batch_dumps("metis", 1)
    train = np.nonzero(np.asarray(cora.ndata["train_mask"]))[0]
    assert np.array_equal(np.asarray(dump["orig_nids"]), p.orig_nids)
    num_batches = math.ceil(len(train) / BATCH_SIZE)
    assert dump["num_batches"] == num_batches
    assert [b["j"] for b in dump["batches"]] == list(range(num_batches))

    src_of, dst_of = input_edges
    indeg = np.diff(np.asarray(cora.graph.indptr))
    seen = []
    for raw in dump["batches"]:
        b = in_original_ids(raw, p)
        seen.append(b["seeds"])
        assert len(b["seeds"]) == min(BATCH_SIZE, len(train) - BATCH_SIZE * b["j"])
        assert np.array_equal(b["blocks"][-1]["dstnodes"], b["seeds"])
        assert np.array_equal(b["input_nodes"], b["blocks"][0]["srcnodes"])
        for i, (blk, fanout) in enumerate(zip(b["blocks"], FANOUTS)):
            nd = len(blk["dstnodes"])
            assert np.array_equal(blk["srcnodes"][:nd], blk["dstnodes"])  # dst first
            assert len(np.unique(blk["srcnodes"])) == len(blk["srcnodes"])
            if i + 1 < len(b["blocks"]):
                assert np.array_equal(blk["dstnodes"], b["blocks"][i + 1]["srcnodes"])
            # Every edge is the input edge its ID names, sampled at most once.
            e = blk["eids"]
            assert np.array_equal(src_of[e], blk["src"]) and np.array_equal(dst_of[e], blk["dst"])
            assert len(np.unique(e)) == len(e)
            # Without replacement: min(fanout, in-degree) in-edges per destination.
            got = np.array([np.sum(blk["dst"] == v) for v in blk["dstnodes"]])
            assert np.array_equal(got, np.minimum(indeg[blk["dstnodes"]], fanout)), \
                f"batch {b['j']} block {i}: in-degrees differ from min(fanout, degree)"
    seen = np.concatenate(seen)
    assert np.array_equal(np.sort(seen), train), "the epoch does not cover each training node once"
    assert not np.array_equal(seen, train), "shuffle=True kept the input order"


@pytest.mark.parametrize("method,parts", [("metis", 2), ("metis", 4), ("random", 2)])
def test_global_batches_are_identical_across_world_sizes(batch_dumps, partitionings, method,
                                                         parts):
    ref_p, p = partitionings[("metis", 1)], partitionings[(method, parts)]
    ref = {j: v[0][2] for j, v in by_global_index(batch_dumps("metis", 1), ref_p).items()}
    dumps = batch_dumps(method, parts)
    num_global = len(ref)
    steps = math.ceil(num_global / parts)
    for d in dumps:
        r = d["rank"]
        assert d["world"] == parts
        assert np.array_equal(np.asarray(d["orig_nids"]), p.orig_nids), \
            f"rank {r}: g.orig_nids() differs from partition_graph's mapping"
        assert tuple(d["local_node_range"]) == p.node_range(r)
        assert d["num_batches"] == steps == len(d["batches"]), \
            f"rank {r}: {d['num_batches']} batches, expected {steps} on every rank"
        js = [b["j"] for b in d["batches"]]
        # Round-robin: rank r takes r, r + P, ...; past the end it wraps to earlier batches.
        for b, j in enumerate(js):
            expect = r + b * parts
            if expect < num_global:
                assert j == expect, f"rank {r} batch {b}: global index {j}, expected {expect}"
            else:
                assert 0 <= j < num_global, f"rank {r} batch {b}: global index {j}"
    got = by_global_index(dumps, p)
    assert sorted(got) == list(range(num_global))
    for j, copies in got.items():
        for rank, b, batch in copies:  # wrapped copies too
            assert_same_batch(ref[j], batch, f"{method} P={parts} rank {rank} batch {b} (j={j})")


# --- 2. DistTensor ----------------------------------------------------------------------------
@pytest.mark.parametrize("parts", [2, 4])
def test_dist_tensor_rows_written_and_read_by_every_rank(partitionings, cora, tmp_path, parts,
                                                         input_edges):
    p = partitionings[("metis", parts)]
    launch(parts, "dist_tensor.py", p.config, tmp_path).check()
    n = len(p.orig_nids)
    ids = np.arange(n, dtype=np.int64)
    expected = np.stack([ids, 7 * ids + 1, ids % parts], axis=1)
    feat, label = np.asarray(cora.ndata["feat"]), np.asarray(cora.ndata["label"])
    for r in range(parts):
        z = np.load(tmp_path / f"rank{r}.npz")
        lo, hi = p.node_range(r)
        assert tuple(z["local_range"]) == (lo, hi) == tuple(z["node_range"])
        bad = np.nonzero((z["written"] != expected).any(1))[0]
        ends = [p.node_range(q)[1] for q in range(parts)]
        assert bad.size == 0, f"rank {r} reads wrong rows, e.g. {bad[:10]}, owned by " \
            f"partitions {np.searchsorted(ends, bad[:10], 'right')}"
        assert np.array_equal(z["local"], expected[lo:hi])
        assert np.array_equal(z["orig_nids"], p.orig_nids)
        q = z["ids"]
        assert np.array_equal(z["orig_nids_of_ids"], p.orig_nids[q])
        assert np.array_equal(z["feat"], feat[p.orig_nids[q]]), f"rank {r}: features differ"
        assert np.array_equal(z["label"], label[p.orig_nids[q]]), f"rank {r}: labels differ"
        e = p.orig_eids[z["eids"]]
        assert np.array_equal(p.orig_nids[z["src"]], input_edges[0][e]), f"rank {r}: sources"
        assert np.array_equal(p.orig_nids[z["dst"]], input_edges[1][e]), f"rank {r}: dests"
        indeg = np.bincount(input_edges[1], minlength=n)[p.orig_nids]  # by new ID
        assert np.array_equal(z["indeg"], indeg), f"rank {r}: in-degrees"
        if r == 0:
            assert np.array_equal(z["some_indeg"], indeg[q[-500:]]), "rank 0: in-degrees of IDs"
        # DistTensor.count_nonzero reads every owner's rows (the last rank alone called it).
        want = int(np.count_nonzero(expected)) if r == parts - 1 else -1
        assert int(z["nnz"]) == want, f"rank {r}: count_nonzero"
        assert int(z["feat_nnz"]) == int(np.count_nonzero(feat)), f"rank {r}: feat nonzero"
        elo, ehi = tessera.PartitionBook.load(p.config).edge_range(r)
        assert z["policy"].tolist() == [r, hi - lo, ehi - elo], f"rank {r}: part_id, sizes"
        ends = np.array([p.node_range(q)[1] for q in range(parts)])
        assert np.array_equal(z["to_partid"], np.searchsorted(ends, ids, "right"))
        assert np.array_equal(z["to_local"], np.arange(hi - lo))
        assert z["keys"].tolist() == ["node~_N~written-by-all", "edge~_N:_E:_N"]


@pytest.mark.parametrize("key", [("metis", 1), ("metis", 2), ("random", 2)])
def test_find_edges_in_one_process(partitionings, input_edges, key):
    """DGL's DistGraph.find_edges standalone (one part: the runtime's endpoint table) and
    simulated (two parts served by this process: the assembled CSC), and the module-level
    tessera.distributed.find_edges; IDs, masks, range errors."""
    import tessera.distributed as dist

    p = partitionings[key]
    g = tessera.DistGraph("cora", part_config=p.config)
    assert g.is_distributed == (key[1] == 1)
    m = g.num_edges()
    eids = np.concatenate([np.random.default_rng(3).permutation(m), [0, m - 1, 0]])
    src, dst = g.find_edges(eids)
    e = p.orig_eids[eids]
    assert np.array_equal(p.orig_nids[np.asarray(src)], input_edges[0][e])
    assert np.array_equal(p.orig_nids[np.asarray(dst)], input_edges[1][e])
    mask = np.zeros(m, dtype=bool)
    mask[[5, 2, 9]] = True
    s2, d2 = dist.find_edges(g, mask)
    at = np.argsort(eids[:m])[[2, 5, 9]]  # where edges 2, 5 and 9 were asked above
    assert np.array_equal(np.asarray(s2), np.asarray(src)[at])
    assert np.array_equal(np.asarray(d2), np.asarray(dst)[at])
    empty = g.find_edges(np.array([], dtype=np.int64))
    assert [len(x) for x in empty] == [0, 0]
    with pytest.raises(IndexError, match=rf"DistGraph.find_edges: ID {m} outside \[0, {m}\)"):
        g.find_edges([0, m])
    with pytest.raises(IndexError, match="ID -1 outside"):
        g.find_edges([-1])
    with pytest.raises(ValueError, match="edge type 'cites' does not exist"):
        g.find_edges([0], etype="cites")


@pytest.fixture(scope="session")
def directed(tmp_path_factory) -> dict:
    """Cora as stored (each undirected edge once, so directed: out- and in-degrees differ) in
    1, 2 and 4 METIS parts, keyed P."""
    out = {}
    for parts in (1, 2, 4):
        d = tmp_path_factory.mktemp(f"cora-directed{parts}")
        nids, eids = tessera.partition_graph(CORA, "cora", parts, d, symmetrize=False,
                                             return_mapping=True)
        out[parts] = Partitioning(str(d / "cora.json"), parts, nids, eids)
    return out


def directed_degrees(p: Partitioning) -> tuple[np.ndarray, np.ndarray]:
    """(out-degrees, in-degrees) of the input graph, by new node ID."""
    ei = np.load(os.path.join(CORA, "edge_index.npy"))
    n = len(p.orig_nids)
    outdeg, indeg = np.bincount(ei[0], minlength=n), np.bincount(ei[1], minlength=n)
    assert (outdeg != indeg).any()  # the test can tell them apart
    return outdeg[p.orig_nids], indeg[p.orig_nids]


@pytest.mark.parametrize("parts", [1, 2])
def test_degrees_in_one_process(directed, parts):
    """Standalone (one part: the runtime holds it) and simulated (two parts in this process):
    out_degrees against the input graph's, for every node, IDs with repeats, a mask, DGL's
    ALL, one ID; IDs out of range name themselves."""
    p = directed[parts]
    outdeg, indeg = directed_degrees(p)
    g = tessera.DistGraph("cora", part_config=p.config)
    assert g.is_distributed == (parts == 1)
    n = g.num_nodes()
    assert np.array_equal(np.asarray(g.out_degrees()), outdeg)
    assert np.array_equal(np.asarray(g.in_degrees()), indeg)
    assert np.array_equal(np.asarray(g.out_degrees("__ALL__")), outdeg)
    ids = np.random.default_rng(5).integers(0, n, 300)
    assert np.array_equal(np.asarray(g.out_degrees(ids)), outdeg[ids])
    assert np.array_equal(np.asarray(g.out_degrees(ids.tolist())), outdeg[ids])
    mask = np.zeros(n, dtype=bool)
    mask[[3, 7, n - 1]] = True
    assert np.array_equal(np.asarray(g.out_degrees(mask)), outdeg[[3, 7, n - 1]])
    assert np.asarray(g.out_degrees(7)).tolist() == [outdeg[7]]  # DGL 1.1.3: a 1-element tensor
    assert len(g.out_degrees(np.array([], dtype=np.int64))) == 0
    for bad in (-1, n):
        with pytest.raises(IndexError, match=rf"DistGraph.out_degrees: ID {bad} outside"):
            g.out_degrees([0, bad])
    np.asarray(g.out_degrees())[:] = -1  # a copy: the kept counts stay
    assert np.array_equal(np.asarray(g.out_degrees()), outdeg)


@pytest.mark.parametrize("parts", [2, 4])
def test_degrees_of_every_rank(directed, tmp_path, parts):
    """Every rank's in- and out-degrees of every node equal the input graph's; rank 0 alone
    asks for IDs with repeats and a mask after the collective first call, rank 1 for an ID out
    of range (IndexError)."""
    p = directed[parts]
    launch(parts, "degrees.py", p.config, tmp_path).check()
    outdeg, indeg = directed_degrees(p)
    n = len(outdeg)
    for r in range(parts):
        z = np.load(tmp_path / f"rank{r}.npz")
        assert np.array_equal(z["orig_nids"], p.orig_nids)
        assert np.array_equal(z["outdeg"], outdeg), f"rank {r}: out-degrees"
        assert np.array_equal(z["indeg"], indeg), f"rank {r}: in-degrees"
    z = np.load(tmp_path / "rank0.npz")
    assert np.array_equal(z["some"], outdeg[z["ids"]])
    assert np.array_equal(z["masked"], outdeg[np.unique(z["ids"][:20])])
    err = str(np.load(tmp_path / "rank1.npz")["err"])
    assert re.search(rf"DistGraph.out_degrees: ID {n} outside \[0, {n}\)", err), err


# --- 3. collectives ---------------------------------------------------------------------------
@requires_torch
def test_collectives(tmp_path):
    world = 3  # not a power of two; sizes below are not multiples of it
    launch(world, "collectives.py", tmp_path).check()
    seen = [pickle.loads((tmp_path / f"rank{r}.pkl").read_bytes()) for r in range(world)]
    rs = np.arange(world)
    x = np.arange(1001, dtype=np.float64)
    for s in seen:
        assert s["world"] == world
        np.testing.assert_allclose(s["sum_f64"], x * (rs + 1).sum() + 0.1 * rs.sum(), rtol=1e-12)
        assert np.array_equal(s["max_i64"], np.arange(10) * (world - 2))
        assert np.array_equal(s["min_i32"], np.full(3, 10 - (world - 1)))
        assert s["min_i32"].dtype == np.int32
        assert np.array_equal(s["one_f32"], [world * (world + 1) / 2])
        assert s["empty"].shape == (0,)
        assert s["torch_in_place"] is True
        assert np.array_equal(s["sum_torch"], np.arange(7) * world + rs.sum())
        assert s["non_contiguous"].startswith("TypeError"), s["non_contiguous"]
        assert isinstance(s["requires_grad"], tuple), s["requires_grad"]
        leaf, loss = s["requires_grad"]
        assert np.array_equal(leaf, np.full(2, (rs + 1).sum())) and loss == 4 * (rs + 1).sum()
        assert s["gathered"] == [{"rank": r, "payload": "x" * (1000 * r)} for r in range(world)]
    # Every rank gets the same bits (reduced in rank order).
    for key in ("sum_f64", "sum_torch"):
        assert all(s[key].tobytes() == seen[0][key].tobytes() for s in seen), key

    # broadcast_parameters: the modules differed (parameters, running statistics and the int64
    # num_batches_tracked), and now all equal rank 0's, bitwise (-0.0 included).
    assert len({s["before"] for s in seen}) == world, "the ranks' modules did not differ"
    for s in seen:
        assert s["after"] == seen[0]["before"], f"rank {s['rank']}: not rank 0's module"
        for k, v in seen[0]["state_before"].items():
            assert v.tobytes() == s["state_after"][k].tobytes(), f"rank {s['rank']}: {k}"
    assert len({s["before64"] for s in seen}) == world
    assert all(s["after64"] == seen[-1]["before64"] for s in seen), \
        "broadcast_parameters(src=2) left float64 parameters different from rank 2's"
    for s in seen:
        assert s["bad_src"] == [f"ValueError: broadcast_parameters: src must be a rank in "
                                f"[0, {world}), got {src}" for src in (world, -1)], s["bad_src"]
        assert s["after_bad_src"] == s["after64"], "a refused broadcast changed the module"

    # all_reduce_gradients: rank r's gradients were r + 1 (none for parameter 0 on rank 0).
    mean, total = (rs + 1).mean(), (rs + 1).sum()
    for s in seen:
        assert np.allclose(s["grads"][0], (total - 1) / world)
        assert all(np.allclose(g, mean) for g in s["grads"][1:])
        assert all(np.array_equal(g, np.full_like(g, total)) for g in s["grads_sum"])
        unused = s["grads_unused"]
        assert unused[1] is None, "a parameter no rank has a gradient of got one"
        assert all(np.allclose(g, mean) for i, g in enumerate(unused) if i != 1)
        assert all(a.tobytes() == b.tobytes() for a, b in zip(s["grads"], seen[0]["grads"]))


# --- 4. DistEmbedding -------------------------------------------------------------------------
def test_dist_embedding_sparse_adagrad_and_save_load(partitionings, tmp_path):
    torch = pytest.importorskip("torch")
    # The script's rows_of / target / hyperparameters.
    spec = importlib.util.spec_from_file_location("dist_embedding_script",
                                                  os.path.join(SCRIPTS, "embedding.py"))
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    p = partitionings[("metis", 2)]
    launch(2, "embedding.py", p.config, tmp_path).check()
    z = [np.load(tmp_path / f"rank{r}.npz") for r in range(2)]
    n = len(p.orig_nids)

    # Initial rows: rank r's init_func filled the rows of the nodes partition r owns.
    for r in range(2):
        lo, hi = p.node_range(r)
        assert tuple(z[r]["local_range"]) == (lo, hi)
        gen = torch.Generator().manual_seed(7 + r)
        init = (torch.rand((hi - lo, script.DIM), generator=gen) * 2 - 1).numpy()
        assert np.array_equal(z[0]["initial"][lo:hi], init)
    assert np.array_equal(z[0]["initial"], z[1]["initial"])

    # SparseAdagrad against a NumPy reference: the owner sums every rank's gradient rows.
    ids = [script.rows_of(r, n) for r in range(2)]
    assert all(np.array_equal(z[r]["ids"], ids[r]) for r in range(2))
    w = z[0]["initial"].astype(np.float64)
    state = np.zeros_like(w)
    losses = []
    for _ in range(script.STEPS):
        grad = np.zeros_like(w)
        loss = 0.0
        for i in ids:
            diff = w[i] - script.target(i).numpy()
            loss += (diff ** 2).sum()
            np.add.at(grad, i, 2 * diff)
        losses.append(loss)
        state += grad ** 2
        touched = np.unique(np.concatenate(ids))
        w[touched] -= script.LR * grad[touched] / (np.sqrt(state[touched]) + 1e-10)
    for r in range(2):
        np.testing.assert_allclose(z[r]["losses"], losses, rtol=1e-4)
        np.testing.assert_allclose(z[r]["final"], w, rtol=1e-4, atol=1e-5)
    got = z[0]["losses"]
    assert np.all(np.diff(got) < 0), f"the loss did not decrease at every step: {got}"
    assert got[-1] < 0.7 * got[0], got

    # save / overwrite / load: bitwise the saved rows, on both ranks.
    for r in range(2):
        assert np.array_equal(z[r]["saved"], z[r]["final"])
        assert np.all(z[r]["overwritten"] == -5.0), "the overwrite did not reach every row"
        assert z[r]["loaded"].tobytes() == z[r]["saved"].tobytes(), f"rank {r}: load != save"
    assert sorted(os.listdir(tmp_path / "emb")) == \
        ["node-emb.json", "node-emb.part0.npy", "node-emb.part1.npy"]
    # The optimizer's state, through a folder per rank: the sums of the rows read, loaded back.
    for r in range(2):
        lo, hi = p.node_range(r)
        np.testing.assert_allclose(z[r]["opt_saved"], state[lo:hi], rtol=1e-4)
        assert z[r]["opt_loaded"].tobytes() == z[r]["opt_saved"].tobytes(), f"rank {r}"
        assert os.listdir(tmp_path / f"opt-rank{r}") == ["node-emb"]  # no save marker left
    # Saves into a folder rank 1 cannot create: every rank raises, none waits for the others.
    blocked = str(tmp_path / "blocked-rank1")
    for mine, other, what in zip(z[1]["refusals"], z[0]["refusals"],
                                 ("DistEmbedding 'node-emb'", "SparseAdagrad")):
        assert mine == f"FileExistsError: [Errno 17] File exists: '{blocked}'", mine
        assert re.fullmatch(rf"OSError: {what}: save to .*blocked-rank0: rank 1 failed: "
                            rf"\[Errno 17\] File exists: '{re.escape(blocked)}'", other), other
    # Nothing was saved: rank 0 took back its save marker, its folders are empty.
    assert sorted(os.listdir(tmp_path / "blocked-rank0")) == ["node-emb"]
    assert os.listdir(tmp_path / "blocked-rank0" / "node-emb") == []


# --- 5. training end to end -------------------------------------------------------------------
@requires_torch
def test_train_sage_on_two_ranks(tmp_path):
    res = tmp_path / "results.json"
    run = launch(2, EXAMPLE, "--dataset", CORA, "--epochs", 15, "--quiet", "--threads", 1,
                 "--part-dir", tmp_path / "parts", "--results", res, "--device", "cpu",
                 "--plot", tmp_path / "loss.png", cwd=tmp_path).check()
    m = re.search(r"^\[rank 0\] \[train\] test acc \(at best validation\): ([0-9.]+)", run.out,
                  re.M)
    assert m, run.out[-4000:]
    acc = float(m.group(1))
    assert acc >= 70.0, f"test accuracy {acc} after 15 epochs on 2 ranks (80.1 measured)"
    assert "(identical on 2 ranks)" in run.out, run.out[-4000:]
    assert (tmp_path / "parts" / "cora.json").exists()
    r = json.loads(res.read_text())
    assert r["ranks"] == 2 and r["parts"] == 2 and r["batching"] == "global"
    assert abs(r["mean"] - acc) < 0.01
    assert r["splits"]["0"]["epoch"] == 15


@requires_torch
def test_train_sage_resume_refuses_ranks_at_different_epochs(tmp_path):
    """A rank whose last save was lost resumes an epoch behind the other: refused on every
    rank, naming each rank's epoch (before, the ranks trained on mixed parameters until a
    collective did not match)."""
    import shutil

    args = ["--dataset", CORA, "--epochs", 4, "--quiet", "--threads", 1, "--device", "cpu",
            "--part-dir", tmp_path / "parts", "--plot", tmp_path / "loss.png",
            "--checkpoint", tmp_path / "a.ckpt"]
    launch(2, EXAMPLE, *args, "--stop-after", 1, cwd=tmp_path).check()
    shutil.copy(tmp_path / "a.ckpt.rank1", tmp_path / "old1")
    run = launch(2, EXAMPLE, *args, "--resume", "--stop-after", 2, cwd=tmp_path).check()
    assert "[train] split 0: resumed from" in run.out and "at epoch 1" in run.out, run.out[-3000:]
    shutil.copy(tmp_path / "old1", tmp_path / "a.ckpt.rank1")
    run = launch(2, EXAMPLE, *args, "--resume", cwd=tmp_path)
    assert run.rc != 0, run.out[-3000:]
    for rank in (0, 1):
        assert any("--resume: the ranks' checkpoints of split 0 disagree (rank 0: epoch 2, "
                   "rank 1: epoch 1); remove them all to start again" in ln
                   for ln in run.lines(rank)), run.out[-3000:]
    assert not any(ln.startswith("split 0 epoch") for ln in run.lines(0)), run.out[-3000:]


@requires_torch
def test_train_sage_with_two_trainers_per_machine(tmp_path):
    """One part shared by 2 trainers (DGL's num_trainers_per_machine) trains with the same global
    batches as 2 parts on 2 ranks: the same parameters, bit for bit; 3 parts on 2 ranks are
    refused, naming the counts."""
    digests = {}
    for parts in (1, 2):
        res = tmp_path / f"results-{parts}.json"
        run = launch(2, EXAMPLE, "--dataset", CORA, "--epochs", 4, "--quiet", "--threads", 1,
                     "--parts", parts, "--part-dir", tmp_path / f"parts{parts}", "--results",
                     res, "--device", "cpu", "--plot", tmp_path / f"loss{parts}.png",
                     cwd=tmp_path).check()
        assert "(identical on 2 ranks)" in run.out, run.out[-4000:]
        r = json.loads(res.read_text())
        assert r["ranks"] == 2 and r["parts"] == parts, r
        digests[parts] = r["splits"]["0"]["digest"]
    assert digests[1] == digests[2], digests
    run = launch(2, EXAMPLE, "--dataset", CORA, "--epochs", 1, "--parts", 3, "--device", "cpu",
                 "--part-dir", tmp_path / "parts3", cwd=tmp_path)
    assert run.rc != 0 and "--parts 3 under a job of 2 ranks" in run.out, run.out[-2000:]


@requires_torch
def test_train_sage_embed_with_two_trainers_per_machine(tmp_path):
    """--embed: the learned inputs start from their nodes' input IDs, so one part shared by 2
    trainers trains the parameters of 2 parts on 2 ranks, bit for bit, as without them."""
    digests = {}
    for parts in (1, 2):
        res = tmp_path / f"results-{parts}.json"
        launch(2, EXAMPLE, "--dataset", CORA, "--epochs", 2, "--quiet", "--threads", 1,
               "--parts", parts, "--part-dir", tmp_path / f"parts{parts}", "--results", res,
               "--device", "cpu", "--embed", 8, "--plot", tmp_path / f"loss{parts}.png",
               cwd=tmp_path).check()
        digests[parts] = json.loads(res.read_text())["splits"]["0"]["digest"]
    assert digests[1] == digests[2], digests


@requires_torch
@pytest.mark.parametrize("ranks,sync", [(4, "host"), (2, "ddp")])
def test_train_sage_on_cpu_ranks_with_each_gradient_sync(tmp_path, ranks, sync):
    """The training code of the GPU path on CPU ranks: 4 ranks with the host all-reduce, and 2
    with DistributedDataParallel over gloo (the code path NCCL takes on GPUs). Parameters must
    be identical on every rank, the time split recorded, the accuracy sane."""
    res = tmp_path / "results.json"
    run = launch(ranks, EXAMPLE, "--dataset", CORA, "--epochs", 6, "--quiet", "--threads", 1,
                 "--part-dir", tmp_path / "parts", "--results", res, "--device", "cpu",
                 "--grad-sync", sync, "--plot", tmp_path / "loss.png", cwd=tmp_path).check()
    assert f"(identical on {ranks} ranks)" in run.out, run.out[-4000:]
    assert f"gradients: {sync}" in run.out, run.out[-4000:]
    r = json.loads(res.read_text())
    assert r["ranks"] == ranks and r["parts"] == ranks
    hist = r["splits"]["0"]["history"]
    assert len(hist) == 6 and all(h["split"]["forward_backward"] > 0 for h in hist)
    assert all(h["split"]["all_reduce"] > 0 for h in hist), [h["split"] for h in hist]
    assert r["mean"] >= 55.0, r["mean"]  # 6 epochs; chance is about 30 %
    assert (tmp_path / "loss-time.png").exists()


@needs_gpu
def test_train_sage_on_two_ranks_cuda(tmp_path):
    """Both ranks on the GPU(s) (cuda:LOCAL_RANK % devices): gradients all-reduced through
    host memory, parameters identical on the ranks."""
    res = tmp_path / "results.json"
    run = launch(2, EXAMPLE, "--dataset", CORA, "--epochs", 15, "--quiet", "--threads", 1,
                 "--part-dir", tmp_path / "parts", "--results", res, "--device", "cuda",
                 "--plot", tmp_path / "loss.png", cwd=tmp_path).check()
    assert "(identical on 2 ranks)" in run.out, run.out[-4000:]
    assert re.search(r"^\[rank 0\] \[train\] .*2 rank\(s\) on cuda:0;", run.out, re.M), \
        run.out[-4000:]
    r = json.loads(res.read_text())
    assert r["device"].startswith("cuda") and r["ranks"] == 2
    assert r["mean"] >= 70.0, r["mean"]


# --- 6. faults --------------------------------------------------------------------------------
def test_a_rank_that_dies_ends_the_job(tmp_path):
    bound = 60.0
    run = launch(2, "faults.py", "rank-dies", deadline=bound + 30, cwd=tmp_path)
    assert run.rc != 0, run.out
    assert run.seconds < bound, f"the job took {run.seconds:.1f}s to end"
    assert "rank 1 fails on purpose" in run.out
    assert "rank 0 enters all_reduce" in run.out  # rank 0 really was waiting
    assert "rank 0 returned from all_reduce" not in run.out
    rank0 = "\n".join(run.lines(0))
    named = re.search(r"rank 1 (was lost|exited|died)", rank0)
    stopped = "rank 1 exited with code 1; stopping the other ranks" in run.out
    assert named or stopped, run.out


def test_a_rank_that_vanishes_without_exit_client_fails_the_job(tmp_path):
    """Rank 0's exit_client() at interpreter exit fails (rank 1 is gone): that failure was
    printed as "Exception ignored in atexit callback" and the job exited 0."""
    run = launch(2, "faults.py", "vanishes", deadline=120, cwd=tmp_path)
    assert run.rc == 1, run.out
    assert "rank 0 returns from main" in run.out
    rank0 = "\n".join(run.lines(0))
    assert "tessera: exit_client() at interpreter exit failed: RuntimeError: " in rank0, run.out
    assert re.search(r"rank 1 (was lost|exited|died)", rank0), run.out
    assert "Exception ignored" not in run.out
    assert "rank 0 exited with code 1" in run.out


def test_an_init_func_failing_on_one_rank_fails_every_rank(partitionings, tmp_path):
    run = launch(2, "faults.py", "init-shape", partitionings[("metis", 2)].config,
                 cwd=tmp_path).check()
    for r in range(2):
        lines = run.lines(r)
        msg = [ln for ln in lines if ln.startswith("ValueError: ")]
        assert len(msg) == 1 and "no error" not in lines, lines
        assert "DistTensor 'init-shape'" in msg[0] and "returned shape (3,)" in msg[0], msg[0]
        assert r == 1 or "rank 1 failed" in msg[0], msg[0]
        # Still in step: the next tensor was created together and each rank filled its rows.
        assert "rows [1.0, 2.0]" in lines, lines
        # The failed persistent tensor was dropped on both ranks: created again, it is new.
        assert "again [1.0, 2.0]" in lines, lines


def test_ranks_calling_different_collectives_all_fail_naming_each_call(partitionings, tmp_path):
    """The reviewer's reproducers: rank 0 in node_split while rank 1 all-reduces (rank 1 got
    [0, 2] and rank 0 died of bad_alloc), a loader against all_gather_object (an
    UnpicklingError), a DistTensor re-created where only rank 0 dropped it (later collectives
    paired wrongly). Each now raises one ValueError on every rank naming each rank's call, in
    seconds, and the ranks stay in step."""
    run = launch(2, "faults.py", "mismatch", partitionings[("metis", 2)].config, deadline=120,
                 cwd=tmp_path).check()
    assert run.seconds < 60, f"the job took {run.seconds:.1f}s"
    for r in range(2):
        lines = run.lines(r)
        for name in ("split", "loader", "recreate"):
            assert f"{name}: in step 3.0" in lines, lines
        by_step = {ln.split(":", 1)[0]: ln for ln in lines if ": ValueError: " in ln}
        assert set(by_step) == {"split", "loader", "recreate"}, lines
        split = by_step["split"]
        assert "called different collectives at collective #" in split, split
        assert ("rank 0 called node_split (all_gather, 8 bytes per rank); rank 1 called "
                "all_reduce (float64 sum of 2)") in split, split
        loader = by_step["loader"]
        assert re.search(r"rank 0 called \w*NodeDataLoader", loader), loader
        assert "rank 1 called all_gather_object (all_gather, 8 bytes per rank)" in loader, loader
        recreate = by_step["recreate"]
        assert "DistTensor 'b': rank 0 creates it" in recreate, recreate
        assert "while rank 1 attaches to the one that exists there" in recreate, recreate


def test_dist_graph_refuses_a_partitioning_of_another_size(partitionings, tmp_path):
    configs = [partitionings[("metis", 4)].config, partitionings[("metis", 1)].config]
    run = launch(2, "faults.py", "wrong-parts", *configs, cwd=tmp_path).check()
    for r in range(2):
        lines = run.lines(r)
        msg = [ln for ln in lines if configs[0] in ln]
        assert len(msg) == 1 and msg[0].startswith("ValueError: "), lines
        assert "has 4 partitions but the job has 2 ranks" in msg[0], msg[0]
        # 2 ranks over 1 partition: one machine whose 2 trainers share it.
        assert f"no error for {configs[1]}" in lines, lines
