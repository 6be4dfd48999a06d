# SPDX-License-Identifier: Apache-2.0
"""A DGL user's script on Tessera: DGL's names that the port of DGL's distributed GraphSAGE
example (python/examples/dgl_style_sage.py) relies on, and that example end to end.

* ``Block.number_of_*`` and ``srcdata`` / ``dstdata`` / ``edata`` with ``tessera.NID`` / ``EID``;
* ``DistTensor`` without ``part_policy`` (DGL's default: the DistGraph's node or edge policy);
* ``torch.distributed.init_process_group`` after ``tessera.initialize()`` (standalone and
  2 ranks: torch's store no longer collides with Tessera's rendezvous port);
* dgl_style_partition.py + dgl_style_sage.py standalone and on 2 ranks, accuracy on Cora.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest

import tessera._dist
from conftest import CORA, REPO, requires_torch, tessera
from test_distributed import SCRIPTS, launch

torch = pytest.importorskip("torch")

EXAMPLES = os.path.join(REPO, "python", "examples")
SAGE = os.path.join(EXAMPLES, "dgl_style_sage.py")
PARTITION = os.path.join(EXAMPLES, "dgl_style_partition.py")
# Cora settings (DGL's arguments): ~80% test accuracy at 1 and 2 ranks, ~5 s / ~10 s here.
# --batch_size is per trainer, as in DGL: 16 per rank at 2 ranks is the 32 of one trainer.
SAGE_ARGS = ["--graph_name", "cora", "--num_epochs", "30", "--num_hidden", "64", "--lr", "0.01",
             "--dropout", "0.8", "--eval_every", "10"]


def _env() -> dict:
    """The test's environment for a child Python: tessera importable, no job variables."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
                        "TESSERA_RENDEZVOUS_PORT", "TORCHELASTIC_RUN_ID")}
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(tessera.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_root, env.get("PYTHONPATH")) if p)
    return env


def test_dgl_id_keys():
    assert tessera.NID == tessera.EID == "_ID"
    assert tessera.dataloading.NID == tessera.NID


def test_block_answers_to_dgl_names(cora):
    sampler = tessera.NeighborSampler([5, 5])
    seeds = np.array([0, 7, 100, 2000], dtype=np.int64)
    input_nodes, _, blocks = sampler.sample_blocks(cora, seeds, seed=3)
    for b in blocks:
        assert b.number_of_src_nodes() == b.num_src_nodes() == len(b.srcnodes)
        assert b.number_of_dst_nodes() == b.num_dst_nodes() == len(b.dstnodes)
        assert b.number_of_edges() == b.num_edges() == len(b.eids)
        assert tessera.NID in b.srcdata and tessera.NID in b.dstdata and tessera.EID in b.edata
        assert torch.equal(b.srcdata[tessera.NID], b.srcnodes)
        assert torch.equal(b.dstdata[tessera.NID], b.dstnodes)
        assert torch.equal(b.edata[tessera.EID], b.eids)
    assert torch.equal(blocks[0].srcdata[tessera.NID], input_nodes)
    assert torch.equal(blocks[-1].dstdata[tessera.NID], torch.from_numpy(seeds))
    # The frames keep the caller's tensors, and .to() carries them over.
    b = blocks[0]
    b.srcdata["h"] = torch.ones(b.num_src_nodes(), 2)
    assert b.srcdata["h"].shape == (b.num_src_nodes(), 2)
    moved = b.to("cpu")
    assert torch.equal(moved.srcdata["h"], b.srcdata["h"])
    assert torch.equal(moved.srcdata[tessera.NID], b.srcnodes)
    assert sorted(moved.dstdata) == [tessera.NID]


def test_dist_tensor_takes_the_graphs_partition_policy(cora_one):
    g = tessera.DistGraph("cora", part_config=cora_one)
    n, e = g.num_nodes(), g.num_edges()
    x = tessera.DistTensor((n, 3), torch.float32, "dgl-style-x")
    assert isinstance(x.part_policy, tessera.NodePartitionPolicy)
    w = tessera.DistTensor((e,), torch.float32, "dgl-style-w")
    assert isinstance(w.part_policy, tessera.EdgePartitionPolicy)
    x[torch.arange(4)] = torch.ones(4, 3)
    # DGL: constructing a tensor under an existing name attaches to it (persistent or not).
    again = tessera.DistTensor((n, 3), torch.float32, "dgl-style-x", persistent=True)
    assert torch.equal(again[torch.arange(5)][:, 0], torch.tensor([1.0, 1, 1, 1, 0]))
    with pytest.raises(ValueError, match="neither the DistGraph's number of nodes"):
        tessera.DistTensor((n + 1, 3), torch.float32, "dgl-style-bad")


def test_dist_tensor_default_policy_errors(tmp_path, monkeypatch):
    # A ring of 4 nodes and 4 edges: both policies cover 4 rows, so DGL's rule cannot pick.
    ring = {"edge_index": (np.arange(4), (np.arange(4) + 1) % 4), "num_nodes": 4,
            "ndata": {"y": np.zeros(4, np.float32)}}
    cfg = tessera.partition_graph(ring, "ring", 2, tmp_path, part_method="random")
    g = tessera.DistGraph("ring", part_config=cfg)  # simulated: 2 parts in this process
    assert g.num_nodes() == g.num_edges() == 4
    with pytest.raises(ValueError, match="both the node and the edge partition policy"):
        tessera.DistTensor((4, 2), torch.float32, "ring-t")
    t = tessera.DistTensor((4, 2), torch.float32, "ring-t",
                           part_policy=g.get_node_partition_policy())
    assert t.shape == (4, 2)
    monkeypatch.setattr(tessera._dist, "_default_book", None)
    with pytest.raises(ValueError, match="no DistGraph was created"):
        tessera.DistTensor((4, 2), torch.float32, "ring-u")


@pytest.mark.parametrize("parts", [1, 2])  # runtime rows (C++), simulated rows (NumPy)
def test_dist_tensor_init_func_of_another_shape_is_refused(tmp_path, parts):
    ring = {"edge_index": (np.arange(4), (np.arange(4) + 1) % 4), "num_nodes": 4}
    cfg = tessera.partition_graph(ring, "ring", parts, tmp_path, part_method="random")
    g = tessera.DistGraph("ring", part_config=cfg)
    policy = g.get_node_partition_policy()
    with pytest.raises(ValueError, match=r"DistTensor 'ring-init': init_func\(shape, dtype\) "
                       r"returned shape \(2,\), expected \(\d, 2\)"):
        # One row: NumPy would broadcast it into every row.
        tessera.DistTensor((4, 2), torch.float32, "ring-init", lambda s, d: torch.ones(2),
                           policy)
    t = tessera.DistTensor((4, 2), torch.float32, "ring-init", lambda s, d: torch.ones(s),
                           policy)
    assert torch.equal(t[torch.arange(4)], torch.ones(4, 2))


@requires_torch
@pytest.mark.parametrize("libuv", ["1", "0"])
def test_torch_process_group_after_initialize_standalone(tmp_path, libuv):
    env = dict(_env(), USE_LIBUV=libuv)
    r = subprocess.run([sys.executable, os.path.join(SCRIPTS, "torch_pg.py")], env=env,
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "torch all_reduce [1.0, 1.0, 1.0] tessera all_reduce [1.0, 1.0, 1.0]" in r.stdout
    # The port initialize() picked was held for torch's store, which bound it all the same.
    store = "libuv" if libuv == "1" else "classic"
    assert f"torch port held before init, {store} store" in r.stdout, r.stdout


PORT_PROBE = """
import errno, os, socket, struct, sys
import tessera

def bind(port, any_port):
    # any_port: bind to port 0 with `port` as the only one the kernel may choose
    # (IP_LOCAL_PORT_RANGE, Linux 6.3); else a bind to `port` without SO_REUSEADDR.
    with socket.socket() as s:
        if any_port:
            try:
                s.setsockopt(socket.IPPROTO_IP, 51, struct.pack("I", port << 16 | port))
            except OSError:
                return "unsupported"
        try:
            s.bind(("127.0.0.1", 0 if any_port else port))
            return "got" if s.getsockname()[1] == port else "other"
        except OSError as e:
            return errno.errorcode[e.errno]

tessera.initialize()
port = int(os.environ["MASTER_PORT"])
print("initialized", bind(port, False), bind(port, True), flush=True)
tessera.exit_client()
print("exited", bind(port, False), bind(port, True), flush=True)
"""


def test_initialize_reserves_the_torch_port_until_exit_client(tmp_path):
    # The MASTER_PORT initialize() exports for torch.distributed stays bound (not listening)
    # until exit_client(): no bind to port 0 nor connect() of any process may take it before
    # torch's store binds it. It used to be free once picked.
    r = subprocess.run([sys.executable, "-c", PORT_PROBE], env=_env(), capture_output=True,
                       text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    held, released = r.stdout.splitlines()
    assert held in ("initialized EADDRINUSE EADDRINUSE",
                    "initialized EADDRINUSE unsupported"), r.stdout
    assert released in ("exited got got", "exited got unsupported"), r.stdout


@requires_torch
@pytest.mark.multiprocess
@pytest.mark.parametrize("libuv", ["1", "0"])
def test_torch_process_group_after_initialize_two_ranks(tmp_path, monkeypatch, libuv):
    monkeypatch.setenv("USE_LIBUV", libuv)
    run = launch(2, "torch_pg.py", deadline=120, cwd=tmp_path).check()
    ports = set()
    store = "libuv" if libuv == "1" else "classic"
    for rank in (0, 1):
        line = next(ln for ln in run.lines(rank) if ln.startswith("torch all_reduce"))
        assert "torch all_reduce [3.0, 3.0, 3.0] tessera all_reduce [3.0, 3.0, 3.0]" in line
        m = re.search(r"MASTER_PORT (\d+) rendezvous (\d+)", line)
        assert m and m.group(1) != m.group(2), line  # torch got a port of its own
        ports.add(m.groups())
        # Rank 0's runtime held torch's port until init_process_group, which bound it anyway.
        assert f"torch port held before init, {store} store" in line, line
    assert len(ports) == 1, ports  # the same on both ranks


def _partition(tmp_path, parts: int) -> str:
    out = tmp_path / f"cora-p{parts}"
    r = subprocess.run([sys.executable, PARTITION, "--dataset", CORA, "--num_parts", str(parts),
                        "--undirected", "--balance_train", "--balance_edges", "--output", out],
                       env=_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "|V|=2708, |E|=5278" in r.stdout and "train: 140, valid: 500, test: 1000" in r.stdout
    return str(out / "cora.json")


def _accuracies(lines) -> list[float]:
    return [float(m.group(1)) for ln in lines
            if (m := re.search(r"Summary of node classification\(GraphSAGE\).*"
                               r"TestAccuracy ([0-9.]+)", ln))]


@requires_torch
def test_dgl_style_sage_standalone(tmp_path):
    config = _partition(tmp_path, 1)
    r = subprocess.run([sys.executable, SAGE, "--part_config", config, "--batch_size", "32",
                        *SAGE_ARGS], env=_env(), capture_output=True, text=True, timeout=120,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = r.stdout.splitlines()
    assert "part 0, train: 140 (local: 140), val: 500 (local: 500), test: 1000 " \
           "(local: 1000)" in out
    assert "Number of classes: 7" in out
    assert sum("#seeds: 140" in ln for ln in out) == 30  # every training node, every epoch
    acc = _accuracies(out)
    assert len(acc) == 1 and acc[0] >= 0.75, r.stdout[-3000:]  # measured 0.794-0.807


@requires_torch
@pytest.mark.multiprocess
def test_dgl_style_sage_on_two_ranks(tmp_path):
    config = _partition(tmp_path, 2)
    run = launch(2, SAGE, "--part_config", config, "--batch_size", 16, *SAGE_ARGS,
                 deadline=120, cwd=tmp_path).check()
    acc = []
    for rank in (0, 1):
        lines = run.lines(rank)
        assert f"Rank of {os.uname().nodename}: {rank}" in lines, "\n".join(lines[:20])
        assert any(ln.startswith(f"part {rank}, train: 70 (local: ") for ln in lines)
        # The loader gives both ranks the same number of batches; node_split, 70 seeds each.
        assert sum(f"Part {rank}, Epoch Time(s)" in ln and "#seeds: 70," in ln
                   for ln in lines) == 30, "\n".join(lines[-40:])
        acc += _accuracies(lines)
    # Each rank reports the accuracy of its half of the 1000 test nodes (500 each), as DGL's
    # script does: their mean is the accuracy over all test nodes.
    assert len(acc) == 2, run.out[-4000:]
    assert np.mean(acc) >= 0.75, (acc, run.out[-4000:])  # measured 0.800-0.815
