# SPDX-License-Identifier: Apache-2.0
"""Weighted neighbor sampling from Python: ``tessera.NeighborSampler(fanouts, prob=...)``.

* the sampler's blocks equal the C++ op (``_C.sample_neighbors`` with weights, which re-adds
  each row's weights instead of the sampler's cached prefix sums) and, with replacement, a
  NumPy reimplementation of the documented contract (docs/sampling.md: Philox-4x32-10 keys,
  inverse CDF over storage-order prefix sums);
* an edge of weight 0 is never drawn (by a loader over many batches, both modes);
* draws are proportional to the weights (1 : 9 with and without replacement; successive
  sampling's pair probabilities for 1 : 2 : 7 without replacement);
* prob as a feature name (Dataset, simulated and 1-part DistGraph), an array or a tensor;
  clear errors for an unknown name, a bad value, a wrong length or dtype;
* over a distributed DistGraph of several partitions (a 2-rank job) prob by name samples
  weighted through every entry point and the blocks equal the standalone weighted sampler's
  after ID mapping; prob as an array raises ValueError there;
* NodeDataLoader / EdgeDataLoader over a weighted sampler sample weighted.
"""
import os

import numpy as np
import pytest

from conftest import CORA, needs_cuda_build, tessera
from test_distributed import launch

from tessera import _C  # noqa: E402
from tessera._tensor import HAVE_TORCH, torch  # noqa: E402

EI = np.load(os.path.join(CORA, "edge_index.npy"))  # Cora's 5278 input edges
E_IN = EI.shape[1]


def _np(x):
    return np.asarray(x.cpu() if hasattr(x, "cpu") else x)


def cora_weighted(w_in, name="w"):
    """Symmetrized Cora with edge feature ``name`` (one row per input edge)."""
    return tessera.graph_from_arrays(EI, 2708, edata={name: w_in}, symmetrize=True)


def by_edge_id(ds, w_in):
    """Per-edge-ID weights of a symmetrized dataset from per-input-edge ones (eid mod E)."""
    return np.tile(np.asarray(w_in, dtype=np.float32), 2)[: ds.num_edges]


def rand_weights(n, seed=0, zero_frac=0.0):
    rng = np.random.default_rng(seed)
    w = rng.random(n).astype(np.float32) * 10
    w[rng.random(n) < zero_frac] = 0
    return w


# --- a NumPy reimplementation of the weighted-with-replacement contract ----------------------
M32 = np.uint64(0xFFFFFFFF)


def philox4x32_10(c0, c1, c2, c3, k0, k1):
    """Random123's philox4x32_R(10, ctr, key), vectorized over uint64 arrays of 32-bit words."""
    c = [np.asarray(x, dtype=np.uint64) & M32 for x in (c0, c1, c2, c3)]
    k0, k1 = np.uint64(k0), np.uint64(k1)
    m0, m1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
    w0, w1 = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)
    for r in range(10):
        if r:
            k0, k1 = (k0 + w0) & M32, (k1 + w1) & M32
        p0, p1 = m0 * c[0], m1 * c[2]  # < 2^64: exact in uint64
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ k0, p1 & M32, (p0 >> np.uint64(32)) ^ c[3] ^ k1,
             p0 & M32]
    return c


def test_numpy_philox_matches_random123_known_answers():
    kat = [((0, 0, 0, 0), (0, 0), (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)),
           ((0xffffffff,) * 4, (0xffffffff,) * 2,
            (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)),
           ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xa4093822, 0x299f31d0),
            (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1))]
    for ctr, key, want in kat:
        assert [int(x) for x in philox4x32_10(*ctr, *key)] == list(want)


def weighted_replace_oracle(graph, w_store, seeds, fanout, seed, epoch, batch, layer=0):
    """Edge IDs docs/sampling.md prescribes for weighted sampling with replacement, grouped by
    seed in input order, draws in order."""
    indptr, eids = np.asarray(graph.indptr), np.asarray(graph.eids)
    out = []
    t = np.arange(fanout, dtype=np.uint64)
    for v in seeds:
        b, e = int(indptr[v]), int(indptr[v + 1])
        ws = w_store[b:e]
        if not (ws > 0).any():
            continue
        c2 = ((v >> 32) & 0xFFFF) | (layer << 16)  # stream 0 (kNeighbor)
        r = philox4x32_10(t, np.full_like(t, v & 0xFFFFFFFF), np.full_like(t, c2),
                          np.full_like(t, batch), seed, epoch)
        r64 = r[0] | (r[1] << np.uint64(32))
        u = (r64 >> np.uint64(11)).astype(np.float64) * 2.0**-53
        cdf = np.cumsum(ws.astype(np.float64))  # sequential, in storage order
        pos = np.searchsorted(cdf, u * cdf[-1], side="right")
        pos = np.minimum(pos, np.flatnonzero(ws > 0)[-1])
        out.append(eids[b + pos])
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def storage_order(graph, w_by_id):
    return np.asarray(w_by_id, dtype=np.float32)[np.asarray(graph.eids)]


# --- (a) the same blocks as the C++ op and the NumPy oracle ----------------------------------
@pytest.mark.parametrize("replace", [False, True])
def test_weighted_blocks_equal_the_op_for_every_hop(replace):
    w_in = rand_weights(E_IN, seed=1, zero_frac=0.2)
    ds = cora_weighted(w_in)
    w = by_edge_id(ds, w_in)
    sampler = tessera.NeighborSampler([4, 3, 2], prob="w", replace=replace)
    seeds = np.random.default_rng(2).permutation(2708)[:200]
    _, _, blocks = sampler.sample_blocks(ds, seeds, seed=5, epoch=3, batch=7)
    frontier = seeds
    for hop, (block, fanout) in enumerate(zip(blocks[::-1], [2, 3, 4])):
        assert np.array_equal(_np(block.dstnodes), frontier)
        _, _, eid = _C.sample_neighbors(ds.graph, frontier, fanout, replace, 5, 3, 7, hop,
                                        weights=w)
        assert np.array_equal(_np(block.eids), eid)
        frontier = _np(block.srcnodes)


def test_weighted_with_replacement_follows_the_documented_contract():
    w_in = rand_weights(E_IN, seed=3, zero_frac=0.3)
    ds = cora_weighted(w_in)
    seeds = np.random.default_rng(4).permutation(2708)[:300]
    sampler = tessera.NeighborSampler([6], prob="w", replace=True)
    for seed, epoch, batch in [(0, 0, 0), (11, 2, 9), (2**32 - 1, 5, 3)]:
        _, _, (block,) = sampler.sample_blocks(ds, seeds, seed=seed, epoch=epoch, batch=batch)
        want = weighted_replace_oracle(ds.graph, storage_order(ds.graph, by_edge_id(ds, w_in)),
                                       seeds, 6, seed, epoch, batch)
        assert np.array_equal(_np(block.eids), want)


def test_weighted_is_deterministic_and_differs_from_uniform():
    ds = cora_weighted(rand_weights(E_IN, seed=5))
    seeds = np.arange(0, 2708, 5)
    weighted = tessera.NeighborSampler([5, 5], prob="w")
    a = weighted.sample_blocks(ds, seeds, seed=1, batch=2)[2]
    b = tessera.NeighborSampler([5, 5], prob="w").sample_blocks(ds, seeds, seed=1, batch=2)[2]
    c = tessera.NeighborSampler([5, 5]).sample_blocks(ds, seeds, seed=1, batch=2)[2]
    d = weighted.sample_blocks(ds, seeds, seed=2, batch=2)[2]
    assert all(np.array_equal(_np(x.eids), _np(y.eids)) for x, y in zip(a, b))
    assert not np.array_equal(_np(a[1].eids), _np(c[1].eids))  # weighted is not uniform
    assert not np.array_equal(_np(a[1].eids), _np(d[1].eids))  # and depends on the key
    # The same weights given as an array by edge ID, a torch tensor, float64: the same blocks.
    w = by_edge_id(ds, ds.edata["w"])
    alternatives = [w, w.astype(np.float64), w.reshape(-1, 1)]
    if HAVE_TORCH:
        alternatives += [torch.from_numpy(w), torch.from_numpy(w).double()]
    for prob in alternatives:
        e = tessera.NeighborSampler([5, 5], prob=prob).sample_blocks(ds, seeds, seed=1,
                                                                    batch=2)[2]
        assert all(np.array_equal(_np(x.eids), _np(y.eids)) for x, y in zip(a, e))


# --- (b) weight 0 is never drawn -------------------------------------------------------------
@pytest.mark.parametrize("replace", [False, True])
def test_zero_weight_edges_are_never_sampled(replace):
    rng = np.random.default_rng(7)
    w_in = np.ones(E_IN, dtype=np.float32)
    zero_in = rng.random(E_IN) < 0.6  # 60 % of the input edges, both directions
    w_in[zero_in] = 0
    ds = cora_weighted(w_in)
    zero_ids = np.flatnonzero(np.tile(zero_in, 2))
    seen = {"weighted": set(), "uniform": set()}
    for kind, prob in (("weighted", "w"), ("uniform", None)):
        sampler = tessera.NeighborSampler([4, 4], prob=prob, replace=replace)
        loader = tessera.NodeDataLoader(ds, np.arange(2708), sampler, batch_size=64,
                                        shuffle=True, seed=3, num_workers=2)
        for epoch in range(3):
            for _, _, blocks in loader:
                for b in blocks:
                    seen[kind].update(_np(b.eids).tolist())
    assert len(seen["weighted"]) > 1000
    assert not seen["weighted"] & set(zero_ids.tolist())
    # Not vacuous: the uniform sampler does draw those edges.
    assert len(seen["uniform"] & set(zero_ids.tolist())) > 1000


def test_all_zero_rows_give_no_edges_and_without_replacement_keeps_small_rows():
    ds = cora_weighted(np.zeros(E_IN, dtype=np.float32))
    _, _, blocks = tessera.NeighborSampler([3, 3], prob="w").sample_blocks(ds, np.arange(50))
    assert all(b.num_edges() == 0 for b in blocks)
    # A node with at most `fanout` positive-weight neighbors keeps exactly those.
    w_in = rand_weights(E_IN, seed=8, zero_frac=0.5)
    ds = cora_weighted(w_in)
    w_store = storage_order(ds.graph, by_edge_id(ds, w_in))
    indptr = np.asarray(ds.graph.indptr)
    seeds = np.arange(2708)
    _, _, (block,) = tessera.NeighborSampler([3], prob="w").sample_blocks(ds, seeds)
    per_dst = np.bincount(_np(block.dst), minlength=2708)
    positive = np.add.reduceat(w_store > 0, indptr[:-1]) * (np.diff(indptr) > 0)
    assert np.array_equal(per_dst, np.minimum(positive, 3))


# --- (c) proportionality ---------------------------------------------------------------------
def star_pairs(weights, copies):
    """`copies` target nodes 0..copies-1, each with in-neighbors from its own sources weighted
    `weights` (in storage order: source IDs increase with the weight's position)."""
    k = len(weights)
    dst = np.repeat(np.arange(copies), k)
    src = copies + np.arange(copies * k)
    w = np.tile(np.asarray(weights, dtype=np.float32), copies)
    ds = tessera.graph_from_arrays((src, dst), copies * (k + 1), edata={"w": w})
    return ds, src


@pytest.mark.parametrize("replace", [False, True])
def test_draws_are_proportional_to_the_weights(replace):
    copies = 4000
    ds, src = star_pairs([1.0, 9.0], copies)
    sampler = tessera.NeighborSampler([1], prob="w", replace=replace)
    heavy = n = 0
    for batch in range(5):  # 20000 independent draws (one per target and batch)
        _, _, (b,) = sampler.sample_blocks(ds, np.arange(copies), seed=9, batch=batch)
        chosen = _np(b.srcnodes)[_np(b.src)]
        assert b.num_edges() == copies
        heavy += int(((chosen - copies) % 2 == 1).sum())
        n += copies
    sigma = np.sqrt(n * 0.9 * 0.1)
    assert abs(heavy - 0.9 * n) < 5 * sigma, (heavy, n)


def test_without_replacement_is_successive_sampling():
    """Fanout 2 of weights 1 : 2 : 7: the left-out neighbor has the probabilities of drawing
    one at a time proportionally among those not yet taken (DGL's and torch.multinomial's)."""
    copies, w = 6000, np.array([1.0, 2.0, 7.0])
    ds, _ = star_pairs(w, copies)
    _, _, (b,) = tessera.NeighborSampler([2], prob="w").sample_blocks(ds, np.arange(copies),
                                                                      seed=4)
    assert b.num_edges() == 2 * copies
    chosen = (_np(b.srcnodes)[_np(b.src)] - copies) % 3
    left_out = 3 - np.add.reduceat(chosen, np.arange(0, 2 * copies, 2))  # 0 + 1 + 2 = 3
    p = np.array([sum(w[i] / w.sum() * w[j] / (w.sum() - w[i])
                      for i in range(3) for j in range(3) if len({i, j, k}) == 3)
                  for k in range(3)])
    assert abs(p.sum() - 1) < 1e-12
    counts = np.bincount(left_out, minlength=3)
    chi2 = float((((counts - copies * p) ** 2) / (copies * p)).sum())
    assert chi2 < 20, (counts, copies * p)  # 2 dof: p < 5e-5 by chance


# --- prob sources ----------------------------------------------------------------------------
def test_prob_by_name_on_a_simulated_and_a_one_part_distgraph(tmp_path):
    w_in = rand_weights(E_IN, seed=10, zero_frac=0.5)
    ds = cora_weighted(w_in)
    zero_orig = set(np.flatnonzero(by_edge_id(ds, w_in) == 0).tolist())
    for parts in (1, 2):
        out = tmp_path / f"p{parts}"
        _, orig_eids = tessera.partition_graph(ds, "cora", parts, out, return_mapping=True)
        g = tessera.DistGraph("cora", part_config=str(out / "cora.json"))
        assert g.is_distributed == (parts == 1)
        sampler = tessera.NeighborSampler([5, 5], prob="w")
        loader = tessera.NodeDataLoader(g, np.arange(g.num_nodes()), sampler, batch_size=256)
        seen = set()
        for _, _, blocks in loader:
            for b in blocks:
                seen.update(_np(b.eids).tolist())
        assert len(seen) > 1000
        assert not {int(orig_eids[e]) for e in seen} & zero_orig
        # A DistTensor as prob: the same sampler input as the name.
        _, _, a = sampler.sample_blocks(g, np.arange(100), seed=2)
        _, _, b = tessera.NeighborSampler([5, 5], prob=g.edata["w"]).sample_blocks(
            g, np.arange(100), seed=2)
        assert all(np.array_equal(_np(x.eids), _np(y.eids)) for x, y in zip(a, b))


def test_one_part_distgraph_samples_weighted_locally_but_not_in_global_order(cora_one):
    g = tessera.DistGraph("cora", part_config=cora_one)
    assert g.is_distributed and "w" not in g.edata
    w = np.ones(g.num_edges(), dtype=np.float32)
    w[::2] = 0
    sampler = tessera.NeighborSampler([4], prob=w)
    assert isinstance(sampler.bind(g), _C.NeighborSampler)  # not the distributed sampler
    loader = tessera.NodeDataLoader(g, np.arange(500), sampler, batch_size=100)
    eids = np.concatenate([_np(b.eids) for _, _, (b,) in loader])
    assert len(eids) > 500 and (eids % 2 == 1).all()
    with pytest.raises(ValueError, match="global_order=True.*needs .*distributed sampler"):
        tessera.NodeDataLoader(g, np.arange(500), sampler, global_order=True)
    with pytest.raises(ValueError, match="global_order=True.*needs .*distributed sampler"):
        tessera.EdgeDataLoader(g, np.arange(500), sampler, global_order=True)
    with pytest.raises(KeyError, match="prob='w' is not an edge feature"):
        tessera.NeighborSampler([4], prob="w").bind(g)


def test_bound_samplers_are_cached_per_graph_and_weights():
    ds1 = cora_weighted(rand_weights(E_IN, seed=11), name="w")
    ds2 = tessera.graph_from_arrays(EI, 2708, edata={"w": rand_weights(E_IN, seed=12),
                                                     "v": rand_weights(E_IN, seed=13)},
                                    symmetrize=True)
    s = tessera.NeighborSampler([5], prob="w")
    assert s.bind(ds1) is s.bind(ds1)
    assert s.bind(ds1) is not s.bind(ds2)
    seeds = np.arange(0, 2708, 3)
    e1 = _np(s.sample_blocks(ds1, seeds, seed=1)[2][0].eids)
    e2 = _np(s.sample_blocks(ds2, seeds, seed=1)[2][0].eids)
    assert not np.array_equal(e1, e2)  # the second graph's weights, not the first's
    s.prob = "v"
    e3 = _np(s.sample_blocks(ds2, seeds, seed=1)[2][0].eids)
    assert not np.array_equal(e2, e3)
    assert len(s._bound) == 3
    # The weights are read once, at the first bind: later writes to the feature are not seen
    # (and a cache hit does not read the feature again).
    ds1.edata["w"][:] = 0
    s.prob = "w"
    assert np.array_equal(_np(s.sample_blocks(ds1, seeds, seed=1)[2][0].eids), e1)
    fresh = tessera.NeighborSampler([5], prob="w").sample_blocks(ds1, seeds, seed=1)[2][0]
    assert fresh.num_edges() == 0


# --- (d) errors ------------------------------------------------------------------------------
def test_errors():
    ds = cora_weighted(rand_weights(E_IN), name="w")
    seeds = np.arange(5)
    with pytest.raises(KeyError, match=r"prob='nope' is not an edge feature.*\['w'\]"):
        tessera.NeighborSampler([3], prob="nope").sample_blocks(ds, seeds)
    with pytest.raises(ValueError, match="Graph has no edge features"):
        tessera.NeighborSampler([3], prob="w").sample_blocks(ds.graph, seeds)
    w = by_edge_id(ds, ds.edata["w"])
    bad = w.copy()
    bad[17] = -1
    with pytest.raises(ValueError, match="weight -1 of edge ID 17 is negative or not finite"):
        tessera.NeighborSampler([3], prob=bad).sample_blocks(ds, seeds)
    bad[17] = np.nan
    with pytest.raises(ValueError, match="weight nan of edge ID 17 is negative or not finite"):
        tessera.NeighborSampler([3], prob=bad).sample_blocks(ds, seeds)
    with pytest.raises(ValueError, match="overflows float32"):
        tessera.NeighborSampler([3], prob=np.full(len(w), 1e300)).sample_blocks(ds, seeds)
    # Positive float64 weights that float32 holds as zero (or subnormal) were never drawn.
    tiny = w.astype(np.float64) * 1e-45
    with pytest.raises(ValueError, match=r"weight [0-9.e-]+ of edge ID \d+ is below float32's "
                                         "smallest normal number.*rescale the weights"):
        tessera.NeighborSampler([3], prob=tiny).sample_blocks(ds, seeds)
    # float32 weights are drawn by their exact values, subnormal ones too.
    sub = np.full(len(w), np.float32(1e-39), dtype=np.float32)
    assert tessera.NeighborSampler([3], prob=sub).sample_blocks(ds, seeds, seed=1)[2][0] \
        .num_edges() > 0
    with pytest.raises(ValueError, match="10 weights for a graph with 10556 edge IDs"):
        tessera.NeighborSampler([3], prob=w[:10]).sample_blocks(ds, seeds)
    with pytest.raises(TypeError, match="floating point, got int64"):
        tessera.NeighborSampler([3], prob=np.ones(len(w), dtype=np.int64)).sample_blocks(
            ds, seeds)
    with pytest.raises(ValueError, match=r"shape \[E\] or \[E, 1\]"):
        tessera.NeighborSampler([3], prob=np.ones((len(w), 2), np.float32)).sample_blocks(
            ds, seeds)
    # A bad feature by name: the message names the edge ID.
    w_in = np.ones(E_IN, dtype=np.float32)
    w_in[3] = -2
    with pytest.raises(ValueError, match="weight -2 of edge ID 3 is negative"):
        tessera.NeighborSampler([3], prob="w").sample_blocks(cora_weighted(w_in), seeds)
    # The bindings check dtypes themselves too.
    with pytest.raises(TypeError, match="float32 or float64, got int32"):
        _C.NeighborSampler(ds.graph, [3], weights=np.ones(len(w), dtype=np.int32))
    with pytest.raises(TypeError, match="float32 or float64, got float16"):
        _C.sample_neighbors(ds.graph, seeds, 3, weights=np.ones(len(w), dtype=np.float16))


@pytest.mark.multiprocess
def test_weighted_over_a_distributed_distgraph_of_two_parts_equals_standalone(tmp_path):
    """prob="w" over a 2-part DistGraph in a 2-rank job: every owner samples its nodes with its
    own rows of "w"; after ID mapping the blocks equal the standalone weighted sampler's on the
    unpartitioned graph for the same keys. prob as an array raises there."""
    w_in = rand_weights(E_IN, seed=21, zero_frac=0.3)
    ds = cora_weighted(w_in)
    orig_nids, orig_eids = tessera.partition_graph(ds, "cora", 2, tmp_path / "parts",
                                                   return_mapping=True)
    orig_nids, orig_eids = np.asarray(orig_nids), np.asarray(orig_eids)
    out = tmp_path / "out"
    out.mkdir()
    res = launch(2, "weighted_sampler.py", tmp_path / "parts" / "cora.json", out).check()
    zero = by_edge_id(ds, w_in) == 0
    for rank in range(2):
        lines = res.lines(rank)
        raised = [ln for ln in lines if ln.startswith("raised ")]
        ok = [ln for ln in lines if ln.startswith("ok ")]
        assert len(raised) == 3 and len(ok) == 3, lines
        assert all("prob must be the name of an edge feature" in ln and "2 partitions" in ln
                   for ln in raised), raised
        assert all(int(ln.split()[2]) > 0 for ln in ok), ok
        unweighted = [int(ln.split()[1]) for ln in lines if ln.startswith("unweighted ")]
        assert len(unweighted) == 1 and unweighted[0] > 0, lines
        assert any(ln.startswith("unknown name:") and "prob='nope' is not an edge feature" in ln
                   and "['w']" in ln for ln in lines), lines
        z = np.load(out / f"rank{rank}.npz")
        seeds = orig_nids[z["seeds"]]
        drawn = 0
        for replace in (False, True):
            _, _, want = tessera.NeighborSampler([4, 3], prob="w", replace=replace) \
                .sample_blocks(ds, seeds, seed=5, epoch=1, batch=rank)
            for i, b in enumerate(want):
                tag = f"r{int(replace)}_b{i}"
                assert np.array_equal(orig_nids[z[tag + "_srcnodes"]], _np(b.srcnodes)), tag
                assert np.array_equal(orig_nids[z[tag + "_dstnodes"]], _np(b.dstnodes)), tag
                assert np.array_equal(z[tag + "_src"], _np(b.src)), tag
                assert np.array_equal(z[tag + "_dst"], _np(b.dst)), tag
                eids = orig_eids[z[tag + "_eids"]]
                assert np.array_equal(eids, _np(b.eids)), tag
                assert not zero[eids].any(), f"{tag}: a zero-weight edge was drawn"
                drawn += len(eids)
        assert drawn > 1000, drawn


@needs_cuda_build
@pytest.mark.parametrize("use_uva", [False, True])
@pytest.mark.parametrize("replace", [False, True])
def test_weighted_on_cuda_equals_the_cpu_sampler(use_uva, replace):
    ds = cora_weighted(rand_weights(E_IN, seed=16, zero_frac=0.3))
    cpu = tessera.NeighborSampler([10, 5], prob="w", replace=replace)
    gpu = tessera.NeighborSampler([10, 5], prob="w", replace=replace, device="cuda",
                                  use_uva=use_uva)
    seeds = np.random.default_rng(0).permutation(2708)[:300]
    for batch in range(3):
        a = cpu.sample_blocks(ds, seeds, seed=7, epoch=1, batch=batch)[2]
        b = gpu.sample_blocks(ds, seeds, seed=7, epoch=1, batch=batch)[2]
        for x, y in zip(a, b):
            for f in ("src", "dst", "eids", "srcnodes"):
                assert np.array_equal(_np(getattr(x, f)), _np(getattr(y, f)))


# --- (e) loaders -----------------------------------------------------------------------------
def test_node_loader_epoch_over_a_weighted_sampler_matches_sample_blocks():
    ds = cora_weighted(rand_weights(E_IN, seed=14, zero_frac=0.3))
    sampler = tessera.NeighborSampler([5, 3], prob="w")
    loader = tessera.NodeDataLoader(ds, np.arange(0, 2708, 4), sampler, batch_size=32, seed=6,
                                    num_workers=2)
    batches = 0
    for j, (inputs, seeds, blocks) in enumerate(loader):
        _, _, want = sampler.sample_blocks(ds, _np(seeds), seed=6, epoch=0, batch=j)
        for x, y in zip(blocks, want):
            assert np.array_equal(_np(x.eids), _np(y.eids))
        assert np.array_equal(_np(inputs), _np(blocks[0].srcnodes))
        batches += 1
    assert batches == len(loader) > 1


def test_edge_loader_over_a_weighted_sampler_never_draws_zero_weight_edges():
    rng = np.random.default_rng(15)
    w_in = np.ones(E_IN, dtype=np.float32)
    zero_in = rng.random(E_IN) < 0.5
    w_in[zero_in] = 0
    ds = cora_weighted(w_in)
    zero_ids = set(np.flatnonzero(np.tile(zero_in, 2)).tolist())
    sampler = tessera.NeighborSampler([4, 4], prob="w")
    loader = tessera.EdgeDataLoader(
        ds, np.arange(ds.num_edges), sampler, batch_size=512, seed=2,
        negative_sampler=tessera.dataloading.negative_sampler.Uniform(1), exclude="reverse_id",
        reverse_eids=tessera.dataloading.symmetrized_reverse_eids(E_IN))
    seen = set()
    for _, pos, _, blocks in loader:
        batch = set(_np(pos.eids).tolist())
        for b in blocks:
            eids = set(_np(b.eids).tolist())
            assert not eids & batch  # exclusion still applies
            seen |= eids
    assert len(seen) > 1000 and not seen & zero_ids

