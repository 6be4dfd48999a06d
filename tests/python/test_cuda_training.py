# SPDX-License-Identifier: Apache-2.0
"""The GPU training path (needs a GPU and a CUDA build; every case skips with "no CUDA device"
otherwise).

* ``DistGraph.place_on_device`` at several budgets (all in HBM; only the structure's per-row
  arrays on the GPU, the rest in UVA; a budget that leaves a hot-row cache in front of UVA
  features) and DistTensor reads with IDs on the device equal the host rows; a sampler placing
  a structure the plan did not reserve is charged to what its budget left;
* the GPU loader's batches equal the CPU loader's bit for bit (seeds, blocks, prefetched
  features and labels), on one rank here and on two ranks sharing the GPU (UCX between them);
* the batch memory outlives the loader's next batches while its tensors are alive;
* train_sage.py --device cuda learns on Cora and records the time split (the full-length accuracy
  runs are scripts/gpu-check's train phase).
"""
import gc
import json
import os
import sys

import numpy as np
import pytest

from conftest import CORA, REPO, needs_cuda_build, tessera

torch = pytest.importorskip("torch")

pytestmark = needs_cuda_build

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def placed_cora(cora_one):
    """A 1-part Cora DistGraph; the device mirrors are dropped afterwards (the tensors are
    shared by every DistGraph of the partitioning in this process)."""
    g = tessera.DistGraph("cora", part_config=cora_one)
    yield g
    for t in g.ndata.values():
        t._dist.drop_mirror()


def bits(t):
    return t.detach().cpu().contiguous().numpy().tobytes()


def per_row_bytes(g):
    """The structure's per-row arrays (offsets and keys), in device memory whatever the plan."""
    return (2 * g.num_nodes() + 1) * 8


@pytest.mark.parametrize("budget", [None, "rows", 300_000])
def test_placement_and_device_id_reads(placed_cora, budget):
    g = placed_cora
    if budget == "rows":
        budget = per_row_bytes(g)
        with pytest.raises(ValueError, match="less than the"):
            g.place_on_device(["label", "feat"], gpu_budget=budget - 1)
    p = g.place_on_device(["label", "feat"], gpu_budget=budget)
    assert g.device_placement is p
    assert p["gpu_bytes"] <= p["gpu_budget_bytes"]
    assert p["gpu_bytes_left"] == p["gpu_budget_bytes"] - p["gpu_bytes"]
    where = {t["name"]: t for t in p["tensors"]}
    if budget is None:
        assert p["structure"] == "gpu" and where["feat"]["placement"] == "gpu"
    elif budget == per_row_bytes(g):
        assert p["structure"] == "uva" and where["feat"]["placement"] == "uva"
        assert where["feat"]["cache_rows"] == 0 and p["gpu_bytes"] == budget
    else:  # structure and labels fit; features go to UVA behind a cache of the hottest rows
        assert p["structure"] == "gpu" and where["label"]["placement"] == "gpu"
        assert where["feat"]["placement"] == "uva" and where["feat"]["cache_rows"] > 0
        assert g.ndata["feat"]._dist.mirror["cache_rows"] == where["feat"]["cache_rows"]
    ids = torch.from_numpy(np.random.default_rng(1).integers(0, g.num_nodes(), 5000)).cuda()
    for name in ("feat", "label"):
        got = g.ndata[name][ids]
        assert got.device.type == "cuda"
        assert bits(got) == bits(g.ndata[name][ids.cpu()])
    with pytest.raises(IndexError, match="outside"):
        g.ndata["feat"][torch.tensor([0, g.num_nodes()], device="cuda")]
    with pytest.raises(ValueError, match="mirror"):  # a mirrored tensor is read-only
        g.ndata["label"][torch.tensor([0])] = torch.tensor([1])


def test_a_structure_the_plan_did_not_reserve_is_charged_to_what_it_left(placed_cora):
    g = placed_cora
    # A "gpu" structure that an earlier test's loader (held in a reference cycle) still keeps
    # placed would be found, not charged: collect such loaders first.
    gc.collect()
    p = g.place_on_device(["label", "feat"], gpu_budget=per_row_bytes(g))
    assert p["structure"] == "uva" and p["gpu_bytes_left"] == 0 and not p["weighted"]
    uva = tessera._C.DistDeviceSampler(g.runtime_graph, [5], False, "uva", "")  # reserved
    with pytest.raises(ValueError, match="place_on_device's plan"):
        tessera._C.DistDeviceSampler(g.runtime_graph, [5], False, "gpu", "")
    del uva
    p = g.place_on_device(["label", "feat"])  # a new plan with room to spare
    assert p["structure"] == "gpu" and p["gpu_bytes_left"] > 0
    tessera._C.DistDeviceSampler(g.runtime_graph, [5], False, "uva", "")


@pytest.mark.parametrize("budget", [None, "rows"])
def test_gpu_loader_equals_the_cpu_loader(placed_cora, budget):
    g = placed_cora
    g.place_on_device(["label", "feat"],
                      gpu_budget=per_row_bytes(g) if budget == "rows" else budget)
    nids = np.nonzero(g.ndata["train_mask"].numpy())[0]
    nids = np.concatenate([nids, np.nonzero(g.ndata["test_mask"].numpy())[0]])

    def loader(device):
        s = tessera.NeighborSampler([4, 6, 3], device=device, prefetch_node_feats=["feat"],
                                    prefetch_labels=["label"])
        return tessera.DistNodeDataLoader(g, nids, s, batch_size=100, seed=5, num_workers=2,
                                          prefetch=3, device="cuda" if device == "cuda" else None)

    cpu, gpu = loader("cpu"), loader("cuda")
    for epoch in range(2):
        n = 0
        for (ia, sa, ba), (ib, sb, bb) in zip(cpu, gpu):
            assert ib.is_cuda and torch.equal(ia, ib.cpu()) and torch.equal(sa, sb.cpu())
            for x, y in zip(ba, bb):
                assert (x.num_src_nodes(), x.num_dst_nodes(), x.num_edges()) == \
                    (y.num_src_nodes(), y.num_dst_nodes(), y.num_edges())
                for u, v in zip(x.edges() + (x.eids, x.srcnodes),
                                y.edges() + (y.eids, y.srcnodes)):
                    assert torch.equal(u, v.cpu())
                assert torch.equal(x.in_degrees(), y.in_degrees().cpu())
            assert bits(ba[0].srcdata["feat"]) == bits(bb[0].srcdata["feat"])
            assert bits(ba[-1].dstdata["label"]) == bits(bb[-1].dstdata["label"])
            n += 1
        assert n == len(cpu) == len(gpu) > 3, epoch


def test_batches_stay_valid_while_held(placed_cora):
    """Tensors of earlier batches keep their memory while the loader makes new batches."""
    g = placed_cora
    g.place_on_device(["label", "feat"])
    nids = np.arange(g.num_nodes())
    s = tessera.NeighborSampler([10, 10], device="cuda", prefetch_node_feats=["feat"])
    dl = tessera.DistNodeDataLoader(g, nids, s, batch_size=256, seed=1, num_workers=2)
    held = [(ids, blocks[0].srcdata["feat"], blocks[0].src.clone()) for ids, _, blocks in dl]
    torch.cuda.synchronize()
    for ids, x, src in held:
        assert bits(x) == bits(g.ndata["feat"][ids.cpu()])
    ref = tessera.DistNodeDataLoader(g, nids, s, batch_size=256, seed=1, num_workers=0)
    for (ids, _, blocks), (ids0, _, src0) in zip(ref, held):
        assert torch.equal(ids, ids0) and torch.equal(blocks[0].src, src0)


def test_gpu_loader_on_two_ranks_sharing_the_gpu(cora_parts, tmp_path):
    from test_distributed import launch

    config, _, _ = cora_parts
    launch(2, "gpu_loader.py", config, tmp_path, cwd=tmp_path).check()
    seen = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert all(s["batches"] > 0 and s["edges"] > 0 for s in seen), seen


def test_weighted_gpu_loader_on_two_ranks_sharing_the_gpu(tmp_path):
    """prob="w" over two METIS parts with halo: each owner's rows are placed on the GPU keyed by
    original ID with its own weights (zeros among them), and the GPU loader's batches equal the
    CPU distributed loader's bit for bit."""
    from test_distributed import launch

    ei = np.load(os.path.join(CORA, "edge_index.npy"))
    w = np.random.default_rng(3).random(ei.shape[1]).astype(np.float32)
    w[::4] = 0
    ndata = {k: np.load(os.path.join(CORA, f"{k}.npy"))
             for k in ("feat", "label", "train_mask", "val_mask", "test_mask")}
    ds = tessera.graph_from_arrays(ei, 2708, ndata=ndata, edata={"w": w}, symmetrize=True)
    tessera.partition_graph(ds, "cora", 2, tmp_path / "parts")
    launch(2, "gpu_loader.py", tmp_path / "parts" / "cora.json", tmp_path, "w",
           cwd=tmp_path).check()
    seen = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert all(s["batches"] > 0 and s["edges"] > 0 and s["prob"] == "w" for s in seen), seen


def _train(tmp_path, *extra):
    sys.path.insert(0, os.path.join(REPO, "python", "examples"))
    import train_sage

    res = tmp_path / "res.json"
    argv = ["--dataset", CORA, "--part-dir", str(tmp_path / "parts"), "--quiet",
            "--plot", str(tmp_path / "loss.png"), "--results", str(res), "--device", "cuda",
            *[str(a) for a in extra]]
    assert train_sage.main(argv) == 0
    return json.loads(res.read_text())


def test_train_sage_cuda_cora_records_the_time_split(tmp_path):
    """A short run of the GPU path (the full-length accuracy runs are gpu-check's train phase:
    Cora at 1 and 2 ranks, Tolokers): placed in HBM, learning, the split and plot recorded."""
    r = _train(tmp_path, "--epochs", 8, "--eval-every", 4)
    assert r["device"].startswith("cuda") and r["load"]["placement"]["structure"] == "gpu"
    assert r["mean"] >= 60.0, r["mean"]  # 8 epochs; chance is about 30 %
    hist = r["splits"]["0"]["history"]
    assert len(hist) == 8 and all(h["split"]["forward_backward"] > 0 for h in hist)
    assert all(h["loader_sampling"] > 0 for h in hist)
    assert r["copy_bound_gbps"] > 100
    assert (tmp_path / "loss-time.png").exists()
