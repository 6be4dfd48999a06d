# SPDX-License-Identifier: Apache-2.0
"""Sampling and loaders: determinism under a seed, DGL block layout, node_split semantics."""
import re

import numpy as np
import pytest

import tessera
from tessera import _C

from conftest import CORA, in_neighbors


def _blocks_equal(a, b):
    return all(np.array_equal(getattr(x, f), getattr(y, f))
               for x, y in zip(a, b) for f in ("src_nodes", "src", "dst", "eids"))


def test_same_seed_same_blocks_other_seed_differs(cora):
    s = _C.NeighborSampler(cora.graph, [10, 5])
    seeds = np.arange(0, 2708, 17, dtype=np.int64)
    a = s.sample_blocks(seeds, seed=3, epoch=1, batch=2)
    b = s.sample_blocks(seeds, seed=3, epoch=1, batch=2)
    c = s.sample_blocks(seeds, seed=4, epoch=1, batch=2)
    assert _blocks_equal(a, b)
    assert not _blocks_equal(a, c)


def test_sample_blocks_without_a_seed_draws_a_fresh_key_from_torch(cora):
    """DGL's ``collate_fn=sampler.sample_blocks`` loop: each key-less call draws new
    neighbourhoods (it used key (0, 0, 0) every time), repeatable under torch.manual_seed; an
    explicit seed keeps its key (epoch and batch 0 unless given), and the loaders leave torch's
    RNG alone."""
    torch = pytest.importorskip("torch")
    ds = tessera.graph_from_arrays((np.arange(1, 101), np.zeros(100, dtype=np.int64)),
                                   num_nodes=101)  # node 0 has 100 in-neighbors
    s = tessera.NeighborSampler([5])

    def eids(**key):
        return tuple(np.asarray(s.sample_blocks(ds, [0], **key)[2][0].eids).tolist())

    torch.manual_seed(11)
    first = [eids() for _ in range(20)]
    assert len(set(first)) == 20
    torch.manual_seed(11)
    assert [eids() for _ in range(20)] == first
    assert len({eids(epoch=4) for _ in range(10)}) == 10  # the seed is drawn still
    raw = _C.NeighborSampler(ds.graph, [5])
    for key in ((0, 0, 0), (3, 0, 0), (3, 2, 0), (3, 2, 9)):
        want = tuple(np.asarray(raw.sample_blocks(np.array([0]), *key)[0].eids).tolist())
        kw = dict(zip(("seed", "epoch", "batch"), key))
        if key[2] == 0:
            kw.pop("batch")
        assert {eids(**kw) for _ in range(3)} == {want}
    assert eids(seed=3) == eids(seed=3, epoch=0, batch=0)
    # The loaders' batches come from their own keys: torch's RNG is neither read nor moved.
    state = torch.random.get_rng_state()
    dl = tessera.NodeDataLoader(cora, np.arange(0, 2708, 9), tessera.NeighborSampler([4, 3]),
                                batch_size=64, seed=7)
    edge_dl = tessera.EdgeDataLoader(cora, np.arange(0, 2000, 9), tessera.dataloading
                                     .as_edge_prediction_sampler(tessera.NeighborSampler([4])),
                                     batch_size=64, seed=7)
    runs = []
    for _ in range(2):
        torch.manual_seed(len(runs))
        runs.append([np.asarray(b[-1][0].eids).tolist() for b in dl] +
                    [np.asarray(b[-1][0].eids).tolist() for b in edge_dl])
        dl.set_epoch(0)
        edge_dl.set_epoch(0)
    assert runs[0] == runs[1]
    torch.random.set_rng_state(state)
    list(dl)
    list(edge_dl)
    assert torch.equal(torch.random.get_rng_state(), state)


def test_block_layout_and_edges_are_real(cora):
    seeds = np.array([5, 17, 1000], dtype=np.int64)
    blocks = _C.NeighborSampler(cora.graph, [4, 3]).sample_blocks(seeds, seed=1)
    last = blocks[-1]
    assert np.array_equal(last.dst_nodes, seeds)
    for b in blocks:
        assert np.array_equal(b.src_nodes[: b.num_dst], b.dst_nodes)
        for s, d in zip(b.src, b.dst):
            u, v = b.src_nodes[s], b.src_nodes[d]
            assert u in in_neighbors(cora.graph, v)
    assert np.array_equal(blocks[0].dst_nodes, blocks[1].src_nodes)
    deg = np.diff(np.asarray(cora.graph.indptr))
    per_dst = np.bincount(last.dst, minlength=3)
    assert np.array_equal(per_dst, np.minimum(deg[seeds], 3))


def test_loader_is_deterministic_across_workers(cora_parts):
    config, _, _ = cora_parts
    g = tessera.DistGraph("cora", part_config=config)
    train = tessera.node_split(g.ndata["train_mask"], g.get_partition_book())
    runs = []
    for workers in (0, 1, 2):
        dl = tessera.NodeDataLoader(g, train, tessera.NeighborSampler([5, 5]), batch_size=32,
                                    num_workers=workers, seed=11)
        runs.append([(np.asarray(i).copy(), np.asarray(s).copy(),
                      [np.asarray(b.src).copy() for b in bl]) for i, s, bl in dl])
    for other in runs[1:]:
        for (i0, s0, b0), (i1, s1, b1) in zip(runs[0], other):
            assert np.array_equal(i0, i1) and np.array_equal(s0, s1)
            assert all(np.array_equal(x, y) for x, y in zip(b0, b1))


def test_epochs_reshuffle_and_resume_position(cora_parts):
    config, _, _ = cora_parts
    g = tessera.DistGraph("cora", part_config=config)
    train = tessera.node_split(g.ndata["train_mask"], g.get_partition_book())
    dl = tessera.NodeDataLoader(g, train, tessera.NeighborSampler([3]), batch_size=40, seed=5)
    e0 = [np.asarray(s).copy() for _, s, _ in dl]
    e1 = [np.asarray(s).copy() for _, s, _ in dl]
    assert len(e0) == len(dl) == 4
    assert sorted(np.concatenate(e0).tolist()) == sorted(np.asarray(train).tolist())
    assert not np.array_equal(e0[0], e1[0])  # epoch 1 has another permutation
    dl2 = tessera.NodeDataLoader(g, train, tessera.NeighborSampler([3]), batch_size=40, seed=5)
    dl2.load_state_dict({"seed": 5, "epoch": 1, "batch": 2})
    rest = [np.asarray(s).copy() for _, s, _ in dl2]
    assert len(rest) == 2 and all(np.array_equal(a, b) for a, b in zip(rest, e1[2:]))
    assert dl2.state_dict() == {"seed": 5, "epoch": 2, "batch": 0, "num_batches": 4}


def test_node_split_semantics(cora_parts):
    config, _, _ = cora_parts
    g = tessera.DistGraph("cora", part_config=config)
    pb = g.get_partition_book()
    mask = g.ndata["train_mask"].numpy()
    everything = np.asarray(tessera.node_split(mask, pb))
    assert np.array_equal(everything, np.nonzero(mask)[0])  # world of one: all of them
    halves = [np.asarray(tessera.node_split(mask, pb, rank=r, world_size=2)) for r in (0, 1)]
    assert abs(len(halves[0]) - len(halves[1])) <= 1
    assert np.array_equal(np.concatenate(halves), everything)
    owned = [np.asarray(tessera.node_split(mask, pb, rank=r, world_size=2, force_even=False))
             for r in (0, 1)]
    for r, ids in enumerate(owned):
        lo, hi = pb.node_range(r)
        assert ((ids >= lo) & (ids < hi)).all()
    assert np.array_equal(np.concatenate(owned), everything)
    # Two trainers a machine (4 ranks over the 2 parts): each machine's share is dealt to its
    # trainers in turn, as the C++ split does (a contiguous cut gave trainer 0 the hubs).
    assert pb.num_partitions() == 2
    quarters = [np.asarray(tessera.node_split(mask, pb, rank=r, world_size=4)) for r in range(4)]
    machine_share = [np.concatenate(np.array_split(everything, 4)[2 * m:2 * m + 2])
                     for m in (0, 1)]
    for r in range(4):
        assert np.array_equal(quarters[r], machine_share[r // 2][r % 2::2])
    local = [np.asarray(tessera.node_split(mask, pb, rank=r, world_size=4, force_even=False))
             for r in range(4)]
    for r in range(4):
        assert np.array_equal(local[r], owned[r // 2][r % 2::2])


def test_edge_loader_with_negatives(cora_parts, cora):
    config, _, _ = cora_parts
    g = tessera.DistGraph("cora", part_config=config)
    eids = np.arange(0, g.num_edges(), 50, dtype=np.int64)
    sampler = tessera.NeighborSampler([5, 5])
    dl = tessera.EdgeDataLoader(g, eids, sampler, batch_size=64, seed=1,
                                negative_sampler=tessera.dataloading.negative_sampler.Uniform(3),
                                exclude="self")
    n = 0
    for input_nodes, pos, neg, blocks in dl:
        assert neg.num_edges() == 3 * pos.num_edges()
        assert pos.num_nodes() == blocks[-1].num_dst_nodes()
        ps, pd = (np.asarray(x) for x in pos.edges())
        seeds = np.asarray(blocks[-1].dstnodes)
        lg = g.local_graph
        ip, ind, ge = np.asarray(lg.indptr), np.asarray(lg.indices), np.asarray(lg.eids)
        for e, s, d in zip(np.asarray(pos.eids), seeds[ps], seeds[pd]):
            at = ip[d] + np.nonzero(ge[ip[d]:ip[d + 1]] == e)[0] if len(ge) else [e]
            assert len(at) == 1 and ip[d] <= at[0] < ip[d + 1] and ind[at[0]] == s
        n += pos.num_edges()
    assert n == len(eids)


def test_philox_permutation_is_keyed(cora):
    a = _C.philox_permutation(100, 1, 0)
    assert sorted(a.tolist()) == list(range(100))
    assert np.array_equal(a, _C.philox_permutation(100, 1, 0))
    assert not np.array_equal(a, _C.philox_permutation(100, 1, 1))
    with pytest.raises(ValueError):
        _C.philox_permutation(10, -1, 0)


_KEEP_AT_EXIT = """
import sys
import numpy as np
import tessera
g = tessera.DistGraph("cora", part_config=sys.argv[1])
dl = tessera.NodeDataLoader(g, np.arange(300), tessera.NeighborSampler([5, 5]), batch_size=64)
batches = list(dl)
views = [np.asarray(blk.srcnodes) for b in batches for blk in b[-1]]  # zero-copy views
print("done", len(views))
"""


@pytest.mark.parametrize("warnings", [False, True])
def test_no_leak_report_when_a_script_keeps_batches_at_exit(cora_one, tmp_path, warnings):
    """Zero-copy views of a batch kept in a script's globals outlive the module at interpreter
    exit; nanobind would call their owners leaked. Silent by default; TESSERA_LEAK_WARNINGS=1
    turns the report back on (for hunting real reference-count bugs)."""
    import os
    import subprocess
    import sys

    script = tmp_path / "keep.py"
    script.write_text(_KEEP_AT_EXIT)
    env = dict(os.environ)
    env.pop("TESSERA_LEAK_WARNINGS", None)
    if warnings:
        env["TESSERA_LEAK_WARNINGS"] = "1"
    r = subprocess.run([sys.executable, str(script), str(cora_one)], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "done" in r.stdout
    assert ("nanobind: leaked" in r.stderr) == warnings, r.stderr[-2000:]


def test_an_iteration_left_early_does_not_leak_into_the_next(cora_parts):
    # Like a torch DataLoader: every iteration is a new epoch from its first batch, however the
    # previous one ended (break, next(iter(dl))); state_dict/load_state_dict resume on purpose.
    config, _, _ = cora_parts
    g = tessera.DistGraph("cora", part_config=config)
    train = tessera.node_split(g.ndata["train_mask"], g.get_partition_book())
    dl = tessera.NodeDataLoader(g, train, tessera.NeighborSampler([3]), batch_size=40, seed=5,
                                num_workers=2)
    ref = tessera.NodeDataLoader(g, train, tessera.NeighborSampler([3]), batch_size=40, seed=5)
    e0 = [np.asarray(s).copy() for _, s, _ in ref]
    e1 = [np.asarray(s).copy() for _, s, _ in ref]
    first = next(iter(dl))
    assert np.array_equal(np.asarray(first[1]), e0[0])
    for _, s, _ in dl:  # epoch 1 from batch 0, left after one batch
        assert np.array_equal(np.asarray(s), e1[0])
        # a checkpoint here resumes
        assert dl.state_dict() == {"seed": 5, "epoch": 1, "batch": 1, "num_batches": len(dl)}
        break
    assert dl.state_dict() == {"seed": 5, "epoch": 2, "batch": 0, "num_batches": len(dl)}
    assert len([s for _, s, _ in dl]) == len(dl)  # epoch 2, whole


def test_an_unfinished_iterator_kept_alive_neither_moves_nor_stops_the_next(cora_parts):
    """An iterator left unfinished but still referenced ends when a newer iteration starts
    (as if left early: the newer one runs the next epoch); resuming it raises, and freeing it
    later neither moves the loader's position nor stops the running iteration."""
    config, _, _ = cora_parts
    g = tessera.DistGraph("cora", part_config=config)
    train = tessera.node_split(g.ndata["train_mask"], g.get_partition_book())
    dl = tessera.NodeDataLoader(g, train, tessera.NeighborSampler([3]), batch_size=20, seed=5,
                                num_workers=2, prefetch=2)
    ref = tessera.NodeDataLoader(g, train, tessera.NeighborSampler([3]), batch_size=20, seed=5)
    epochs = [[np.asarray(s).copy() for _, s, _ in ref] for _ in range(4)]
    assert len(epochs[0]) >= 3
    probe = iter(dl)
    assert np.array_equal(np.asarray(next(probe)[1]), epochs[0][0])
    got = [np.asarray(s).copy() for _, s, _ in dl]  # epoch 1, whole
    assert len(got) == len(dl) and all(np.array_equal(a, b) for a, b in zip(got, epochs[1]))
    with pytest.raises(RuntimeError, match="newer iteration"):
        next(probe)
    del probe
    assert dl.state_dict()["epoch"] == 2 and dl.state_dict()["batch"] == 0
    stale = iter(dl)
    next(stale)  # epoch 2, batch 0
    it = iter(dl)
    first = np.asarray(next(it)[1]).copy()  # epoch 3: `stale` ends here
    del stale  # freed while `it` runs: must not stop it nor move the position
    rest = [np.asarray(s).copy() for _, s, _ in it]
    got = [first] + rest
    assert len(got) == len(dl) and all(np.array_equal(a, b) for a, b in zip(got, epochs[3]))
    assert dl.state_dict()["epoch"] == 4


def test_a_resume_position_of_another_sequence_is_refused(cora_parts):
    config, _, _ = cora_parts
    g = tessera.DistGraph("cora", part_config=config)
    train = tessera.node_split(g.ndata["train_mask"], g.get_partition_book())
    small = tessera.NodeDataLoader(g, train, tessera.NeighborSampler([3]), batch_size=10, seed=5)
    big = tessera.NodeDataLoader(g, train, tessera.NeighborSampler([3]), batch_size=40, seed=5)
    it = iter(small)
    next(it)
    state = small.state_dict()
    with pytest.raises(ValueError, match="batches per epoch"):
        big.load_state_dict(state)
    with pytest.raises(ValueError, match="cannot start epoch 0 at batch"):
        big.set_epoch(0, len(big))
    with pytest.raises(ValueError, match="cannot start epoch -1"):
        big.set_epoch(-1)
    old = {k: v for k, v in state.items() if k != "num_batches"}  # a checkpoint of before
    small.load_state_dict(old)
    assert np.array_equal(np.asarray(next(iter(small))[1]), np.asarray(small.batch_seeds(0, 1)))


def test_edge_prediction_samplers_from_one_base_stay_apart(cora):
    base = tessera.NeighborSampler([2])
    neg = tessera.dataloading.negative_sampler
    rev = tessera.dataloading.symmetrized_reverse_eids(cora.num_input_edges)
    train = tessera.dataloading.as_edge_prediction_sampler(
        base, exclude="reverse_id", reverse_eids=rev, negative_sampler=neg.Uniform(5))
    val = tessera.dataloading.as_edge_prediction_sampler(base, negative_sampler=neg.Uniform(1))
    assert train is not base and val is not train and not hasattr(base, "_edge_pred")
    dl = tessera.EdgeDataLoader(cora, np.arange(0, 400, 3), train, batch_size=50, seed=2)
    for _, pos, negs, blocks in dl:
        assert negs.num_edges() == 5 * pos.num_edges()
        banned = set(np.asarray(pos.eids).tolist()) | set(rev[np.asarray(pos.eids)].tolist())
        for b in blocks:
            assert banned.isdisjoint(np.asarray(b.eids).tolist())
        break


def test_loader_arguments_are_checked(cora):
    s = tessera.NeighborSampler([2])
    with pytest.raises(TypeError, match="unexpected keyword argument 'batchsize'"):
        tessera.NodeDataLoader(cora, np.arange(100), s, batchsize=64)
    with pytest.raises(TypeError, match="unexpected keyword argument 'shufle'"):
        tessera.EdgeDataLoader(cora, np.arange(100), s, shufle=False)
    with pytest.raises(ValueError, match="node_split"):
        tessera.NodeDataLoader(cora, np.arange(100), s, use_ddp=True)
    with pytest.warns(UserWarning, match="pin_memory=True has no effect"):
        dl = tessera.NodeDataLoader(cora, np.arange(100), s, pin_memory=True, use_ddp=False)
    assert len(dl) == 1
    with pytest.raises(ValueError, match=r"seed must be in \[0, 2\^32\)"):
        tessera.NodeDataLoader(cora, np.arange(100), s, seed=2**64)
    with pytest.raises(ValueError, match="seed node set is empty"):
        tessera.NodeDataLoader(cora, [], s)
    mask = np.zeros(cora.num_nodes + 5, bool)
    mask[:3] = True
    with pytest.raises(ValueError, match=f"boolean mask of length {cora.num_nodes + 5} for a "
                                         f"graph of {cora.num_nodes} nodes"):
        tessera.NodeDataLoader(cora, mask, s)
    assert len(tessera.NodeDataLoader(cora, mask[:cora.num_nodes], s, batch_size=2)) == 2
    # A seed set with a repeated ID failed only in the epochs that shuffled both copies into
    # one batch; it is refused up front.
    with pytest.raises(ValueError, match="seed node 5 at position 100 is listed twice"):
        tessera.NodeDataLoader(cora, np.append(np.arange(100), 5), s, batch_size=32)


def test_a_batch_size_that_is_not_an_integer_is_refused(cora):
    """NodeDataLoader(batch_size=2.9) ran batches of 2; every loader now refuses a float or a
    bool (torch's DataLoader refuses 2.0 too) and takes NumPy and 0-d torch integers."""
    torch = pytest.importorskip("torch")
    s = tessera.NeighborSampler([2])
    es = tessera.dataloading.as_edge_prediction_sampler(s)
    for what, make in (("NodeDataLoader", lambda bs: tessera.NodeDataLoader(
                            cora, np.arange(10), s, batch_size=bs)),
                       ("EdgeDataLoader", lambda bs: tessera.EdgeDataLoader(
                            cora, np.arange(10), s, batch_size=bs)),
                       ("DataLoader", lambda bs: tessera.dataloading.DataLoader(
                            cora, np.arange(10), s, batch_size=bs)),
                       ("EdgeDataLoader", lambda bs: tessera.dataloading.DataLoader(
                            cora, np.arange(10), es, batch_size=bs))):
        for bad in (2.9, 2.0, np.float32(3), True, None):
            with pytest.raises(TypeError, match=f"{what}: batch_size must be an integer, got "
                                                f"{re.escape(repr(bad))}"):
                make(bad)
        with pytest.raises(ValueError, match=f"{what}: batch_size must be >= 1, got 0"):
            make(0)
        for good in (3, np.int64(3), torch.tensor(3)):
            assert len(make(good)) == 4
    with pytest.raises(TypeError, match="ClusterGCNSampler: parts_per_batch must be an "
                                        "integer, got 1.5"):
        tessera.ClusterGCNSampler(cora.graph, 4, 1.5)


def test_a_distributed_edge_loader_names_the_gpu_sampler_it_cannot_take(cora_one):
    # Checked before the sampler is bound (binding a GPU sampler places the graph on the GPU).
    g = tessera.DistGraph("cora", part_config=cora_one)
    with pytest.raises(ValueError, match="samples on the CPU; the NeighborSampler has "
                                         "device='cuda'"):
        tessera.EdgeDataLoader(g, np.arange(50), tessera.NeighborSampler([2], device="cuda"),
                               global_order=True)


@pytest.mark.parametrize("global_order", [False, True])
def test_a_distributed_loader_refuses_a_repeated_seed(cora_one, global_order):
    # As the standalone loader: up front, on every rank (the plan's checks agree), not in the
    # epoch that shuffles both copies into one batch on one rank.
    g = tessera.DistGraph("cora", part_config=cora_one)
    assert g.is_distributed
    with pytest.raises(ValueError, match="DistNodeDataLoader on rank 0: seed node 5 at "
                                         "position 100 is listed twice"):
        tessera.NodeDataLoader(g, np.append(np.arange(100), 5), tessera.NeighborSampler([2]),
                               batch_size=32, global_order=global_order)


def test_graph_arrays_are_read_only(cora):
    # The sampler checks the CSC once; an in-place write could make it read out of bounds.
    for name in ("indptr", "indices", "eids"):
        a = getattr(cora.graph, name)
        assert not a.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            a[:1] = 5


def test_in_degrees_follow_the_block_to_its_device(cora):
    torch = pytest.importorskip("torch")
    _, _, blocks = tessera.NeighborSampler([3]).sample_blocks(cora, [1, 2, 3])
    b = blocks[0].to("meta")
    assert b.dst.device.type == "meta" and b.in_degrees().device.type == "meta"
    assert torch.equal(blocks[0].in_degrees(),
                       torch.bincount(blocks[0].dst, minlength=blocks[0].num_dst))


def test_standalone_edge_loader_batch_eids_match_its_batches(cora):
    dl = tessera.EdgeDataLoader(cora, np.arange(0, 600, 2), tessera.NeighborSampler([2]),
                                batch_size=64, seed=3)
    planned = [np.asarray(dl.batch_eids(0, b)) for b in range(len(dl))]
    got = [np.asarray(pos.eids) for _, pos, _ in dl]  # the first iteration runs epoch 0
    assert len(got) == len(planned) == 5
    assert all(np.array_equal(a, b) for a, b in zip(planned, got))


def test_edge_dir_out_samples_out_edges():
    # 0 -> 1, 0 -> 2, 1 -> 2, 2 -> 3 (edge IDs 0..3): node 2's in-edges are 0 and 1 (from nodes
    # 0 and 1), its only out-edge is 3 (to node 3). With "out" a block's edges run from the
    # sampled neighbor to the seed, under the edge ID of the out-edge.
    src, dst = np.array([0, 0, 1, 2]), np.array([1, 2, 2, 3])
    ds = tessera.graph_from_arrays((src, dst), 4)

    def edges(block):
        ids = np.asarray(block.srcnodes)
        return sorted(zip(ids[np.asarray(block.src)].tolist(),
                          ids[np.asarray(block.dst)].tolist(), np.asarray(block.eids).tolist()))

    for edge_dir, want in (("in", [(0, 2, 1), (1, 2, 2)]), ("out", [(3, 2, 3)])):
        _, _, blocks = tessera.NeighborSampler([-1], edge_dir=edge_dir).sample_blocks(ds, [2])
        assert edges(blocks[-1]) == want, edge_dir
    # Node 0 has out-edges 0 and 1 and no in-edge; two layers reach node 3 through 2.
    _, _, blocks = tessera.NeighborSampler([-1, -1], edge_dir="out").sample_blocks(ds, [0])
    assert edges(blocks[-1]) == [(1, 0, 0), (2, 0, 1)]
    assert edges(blocks[0]) == [(1, 0, 0), (2, 0, 1), (2, 1, 2), (3, 2, 3)]
    # Weights stay keyed by edge ID: a weight of 0 on edge 1 leaves node 0 only edge 0.
    w = np.array([1, 0, 1, 1], dtype=np.float32)
    _, _, blocks = tessera.NeighborSampler([2], edge_dir="out", prob=w).sample_blocks(ds, [0])
    assert edges(blocks[-1]) == [(1, 0, 0)]
    # The positive pairs of a link-prediction batch are the edges as stored (source first),
    # and "self" keeps a batch's own out-edges out of its blocks.
    s = tessera.dataloading.as_edge_prediction_sampler(
        tessera.NeighborSampler([-1], edge_dir="out"), exclude="self")
    dl = tessera.EdgeDataLoader(ds, [1, 3], s, batch_size=2, shuffle=False)
    _, pos, blocks = next(iter(dl))
    seeds = np.asarray(blocks[-1].dstnodes)
    ps, pd = (np.asarray(x) for x in pos.edges())
    assert np.asarray(pos.eids).tolist() == [1, 3]
    assert list(zip(seeds[ps].tolist(), seeds[pd].tolist())) == [(0, 2), (2, 3)]
    assert edges(blocks[-1]) == [(1, 0, 0)]  # 0 -> 2 (1) and 2 -> 3 (3) are excluded


def test_split_reads_an_integer_0_1_array_as_a_mask(cora_parts):
    # DGL's node_split / edge_split read their argument as a mask whatever its dtype; IDs are
    # unique, so a 0/1 array with one entry per node (edge) cannot be an ID list.
    torch = pytest.importorskip("torch")
    config, _, _ = cora_parts
    g = tessera.DistGraph("cora", part_config=config)
    pb = g.get_partition_book()
    mask = g.ndata["train_mask"].numpy()
    want = np.nonzero(mask)[0]
    for m in (mask.astype(np.uint8), mask.astype(np.int64), torch.from_numpy(mask).to(torch.uint8)):
        assert np.array_equal(np.asarray(tessera.node_split(m, pb)), want)
        halves = [np.asarray(tessera.node_split(m, pb, rank=r, world_size=2)) for r in (0, 1)]
        assert np.array_equal(np.concatenate(halves), want)
    emask = np.zeros(g.num_edges(), dtype=np.uint8)
    emask[[40, 9]] = 1
    assert np.asarray(tessera.edge_split(emask, pb)).tolist() == [9, 40]
    # ID lists still work (sorted), also one of zeros and ones shorter than the graph.
    assert np.asarray(tessera.node_split(np.array([7, 3, 5]), pb)).tolist() == [3, 5, 7]
    assert np.asarray(tessera.node_split(np.array([1, 0]), pb)).tolist() == [0, 1]
    # On a graph of one or two nodes a 0/1 array can list every node: read as IDs then.
    two = tessera.GraphPartitionBook(tessera.PartitionBook([0, 2], [0, 1]), 0)
    assert np.asarray(tessera.node_split(np.array([1, 0]), two)).tolist() == [0, 1]
    assert np.asarray(tessera.node_split(np.array([0, 1], dtype=np.uint8), two)).tolist() == [0, 1]
    assert np.asarray(tessera.node_split(np.array([1, 1]), two)).tolist() == [0, 1]  # a mask
    assert np.asarray(tessera.node_split(np.array([0, 0]), two)).tolist() == []
    assert np.asarray(tessera.edge_split([40, 9], pb)).tolist() == [9, 40]
    with pytest.raises(ValueError, match="node_split: ID 5 is listed more than once"):
        tessera.node_split([5, 3, 5], pb)
    with pytest.raises(ValueError, match="edge_split: ID 0 is listed more than once; pass "
                                         f"unique IDs, or a mask of {g.num_edges()} entries"):
        tessera.edge_split(np.array([0, 1, 1, 0]), pb)


def test_edge_loader_checks_the_length_of_a_mask(cora, cora_one):
    s = tessera.NeighborSampler([2])
    mask = np.zeros(cora.num_edges + 3, dtype=bool)
    mask[[5, 9]] = True
    # Longer is fine (an edge-ID space may reach past the largest stored ID); a true entry past
    # the edges is an ID of no edge.
    dl = tessera.EdgeDataLoader(cora, mask, s, batch_size=10)
    assert [np.asarray(pos.eids).tolist() for _, pos, _ in dl] == [[5, 9]]
    mask[cora.num_edges + 1] = True
    with pytest.raises(IndexError, match=f"seed edge {cora.num_edges + 1} at position 2 "):
        tessera.EdgeDataLoader(cora, mask, s)
    mask[cora.num_edges + 1] = False
    with pytest.raises(ValueError, match="a boolean mask of length 20 "):
        tessera.EdgeDataLoader(cora, mask[:20], s)  # would drop the edges past 20 silently
    for g in (cora, tessera.DistGraph("cora", part_config=cora_one)):
        dl = tessera.EdgeDataLoader(g, mask[:cora.num_edges], s, batch_size=10)
        assert [np.asarray(pos.eids).tolist() for _, pos, _ in dl] == [[5, 9]]
        with pytest.raises(ValueError, match=f"length {cora.num_edges - 1} for a graph whose "):
            tessera.EdgeDataLoader(g, mask[:cora.num_edges - 1], s)
    # Where symmetrize added no reverse (the input held both directions) IDs are missing below
    # the largest: a mask covers the ID space, not just the stored edges.
    ds = tessera.graph_from_arrays((np.array([0, 1, 1]), np.array([1, 0, 2])), 3,
                                   symmetrize=True)  # IDs 0, 1, 2 and 5 (2's reverse)
    assert ds.num_edges == 4
    mask = np.zeros(6, dtype=bool)
    mask[[1, 5]] = True
    dl = tessera.EdgeDataLoader(ds, mask, s, batch_size=10, shuffle=False)
    assert [np.asarray(pos.eids).tolist() for _, pos, _ in dl] == [[1, 5]]
    with pytest.raises(ValueError, match=r"edge IDs are \[0, 6\)"):
        tessera.EdgeDataLoader(ds, mask[:4], s)


def test_edge_loader_prefetches_the_samplers_node_data(cora, cora_parts):
    torch = pytest.importorskip("torch")
    neg = tessera.dataloading.negative_sampler
    g = tessera.DistGraph("cora", part_config=cora_parts[0])
    for graph in (cora, g):
        s = tessera.dataloading.as_edge_prediction_sampler(
            tessera.NeighborSampler([3, 2], prefetch_node_feats=["feat"],
                                    prefetch_labels=["label"]), negative_sampler=neg.Uniform(2))
        dl = tessera.EdgeDataLoader(graph, np.arange(0, 3000, 7), s, batch_size=100, seed=4)
        feat, label = (torch.as_tensor(np.asarray(graph.ndata[n][np.arange(2708)]))
                       for n in ("feat", "label"))
        n = 0
        for input_nodes, _, _, blocks in dl:
            assert torch.equal(torch.as_tensor(blocks[0].srcdata["feat"]), feat[input_nodes])
            assert torch.equal(torch.as_tensor(blocks[-1].dstdata["label"]),
                               label[blocks[-1].dstnodes])
            n += 1
        assert n == len(dl) == 5
        s = tessera.dataloading.as_edge_prediction_sampler(
            tessera.NeighborSampler([2], prefetch_labels=["labels"]))
        with pytest.raises(KeyError, match="EdgeDataLoader: node data 'labels' to prefetch is "
                                           "not in the graph; it has"):
            tessera.EdgeDataLoader(graph, np.arange(10), s)


@pytest.mark.parametrize("device", [None, "cpu"])
def test_prefetched_rows_are_tensors_on_the_loaders_device(cora, cora_parts, device):
    """Over a Dataset (NumPy node data) as over a DistGraph (DistTensors) the frames hold torch
    tensors where the IDs are: a Dataset's rows were NumPy arrays, which a model refuses."""
    torch = pytest.importorskip("torch")
    g = tessera.DistGraph("cora", part_config=cora_parts[0])
    s = tessera.NeighborSampler([3, 2], prefetch_node_feats=["feat"], prefetch_labels=["label"])
    es = tessera.dataloading.as_edge_prediction_sampler(s)
    for graph in (cora, g):
        feat, label = (torch.as_tensor(np.asarray(graph.ndata[n][np.arange(2708)]))
                       for n in ("feat", "label"))
        for dl in (tessera.NodeDataLoader(graph, np.arange(50), s, batch_size=20, device=device),
                   tessera.EdgeDataLoader(graph, np.arange(50), es, batch_size=20,
                                          device=device)):
            for batch in dl:
                input_nodes, blocks = batch[0], batch[-1]
                x, y = blocks[0].srcdata["feat"], blocks[-1].dstdata["label"]
                for t in (x, y):
                    assert isinstance(t, torch.Tensor)
                    assert t.device == input_nodes.device == torch.device("cpu")
                assert torch.equal(x, feat[input_nodes])
                assert torch.equal(y, label[blocks[-1].dstnodes])


def test_edge_loader_names_the_negative_samplers_and_exclusions_it_takes(cora):
    neg = tessera.dataloading.negative_sampler
    as_edge = tessera.dataloading.as_edge_prediction_sampler
    s = tessera.NeighborSampler([2])

    class MyNegatives:  # DGL accepts a callable (g, eids) -> (src, dst)
        def __call__(self, g, eids):
            return None

    def loader(**kw):
        return tessera.EdgeDataLoader(cora, np.arange(10), s, **kw)

    for what, make in (("EdgeDataLoader", loader),
                       ("as_edge_prediction_sampler", lambda **kw: as_edge(s, **kw))):
        with pytest.raises(TypeError, match=f"{what}: negative_sampler must be tessera"
                                            r"\.dataloading\.negative_sampler\.Uniform\(k\), "
                                            "the negative sampler Tessera implements, got "
                                            "MyNegatives"):
            make(negative_sampler=MyNegatives())
        with pytest.raises(TypeError, match=f"{what}: exclude must be None, 'self' or "
                                            "'reverse_id' .* got function; a callable is not "
                                            "supported"):
            make(exclude=lambda eids: eids)
    with pytest.raises(TypeError, match="EdgeDataLoader: negative_sampler must be"):
        tessera.EdgeDataLoader(cora, np.arange(10), as_edge(s), negative_sampler=MyNegatives())
    with pytest.raises(ValueError, match="exclude must be None, 'self' or 'reverse_id', got "
                                         "'reverse_types'"):
        tessera.EdgeDataLoader(cora, np.arange(10), s, exclude="reverse_types")
    with pytest.raises(TypeError, match=r"Uniform: k must be an integer, got 2\.7"):
        neg.Uniform(2.7)
    with pytest.raises(TypeError, match="k must be an integer"):
        neg.Uniform(2.0)
    assert neg.Uniform(np.int64(3)).k == 3


def test_symmetrized_reverse_eids_of_a_simulated_dist_graph(cora, cora_parts, tmp_path):
    # Two partitions opened in one process: the reverse of each new edge ID, as the distributed
    # graph computes it, usable by the edge loader.
    config, _, orig_eids = cora_parts
    g = tessera.DistGraph("cora", part_config=config)
    assert not g.is_distributed
    rev = np.asarray(tessera.dataloading.symmetrized_reverse_eids(g))
    orig_rev = tessera.dataloading.symmetrized_reverse_eids(cora.num_input_edges)
    new_of = np.empty_like(orig_eids)
    new_of[orig_eids] = np.arange(len(orig_eids))
    assert np.array_equal(rev, new_of[orig_rev[orig_eids]])
    lg = g.local_graph  # the endpoints of every edge ID
    row = np.repeat(np.arange(lg.num_nodes), np.diff(np.asarray(lg.indptr)))
    eids = np.asarray(lg.eids) if len(lg.eids) else np.arange(len(row))
    src, dst = np.empty_like(row), np.empty_like(row)
    src[eids], dst[eids] = np.asarray(lg.indices), row
    assert np.array_equal(src[rev], dst) and np.array_equal(dst[rev], src)
    dl = tessera.EdgeDataLoader(g, np.arange(0, g.num_edges(), 40), tessera.NeighborSampler([-1]),
                                exclude="reverse_id", reverse_eids=rev, batch_size=50)
    for _, pos, blocks in dl:
        banned = set(np.asarray(pos.eids).tolist()) | set(rev[np.asarray(pos.eids)].tolist())
        assert banned.isdisjoint(np.asarray(blocks[0].eids).tolist())
    plain = tessera.DistGraph("cora", part_config=tessera.partition_graph(
        CORA, "cora", 2, tmp_path, symmetrize=False))
    with pytest.raises(ValueError, match="symmetrized_reverse_eids: DistGraph 'cora' was not "
                                         "built with symmetrize"):
        tessera.dataloading.symmetrized_reverse_eids(plain)


def test_sample_blocks_checks_the_length_of_a_mask(cora, cora_one):
    """A seed mask shorter than the graph dropped the nodes past its end without a word."""
    s = tessera.NeighborSampler([2])
    mask = np.zeros(cora.graph.num_nodes, dtype=bool)
    mask[[3, 7]] = True
    for g in (cora, tessera.DistGraph("cora", part_config=cora_one)):
        assert np.asarray(s.sample_blocks(g, mask, seed=1)[1]).tolist() == [3, 7]
        with pytest.raises(ValueError, match="seed_nodes: a boolean mask of length 5 for a "
                                             "graph of 2708 nodes"):
            s.sample_blocks(g, mask[:5], seed=1)
