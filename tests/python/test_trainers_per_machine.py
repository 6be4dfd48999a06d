# SPDX-License-Identifier: Apache-2.0
"""Several trainers per machine (DGL's num_trainers_per_machine): M = 2 machines x T = 2
trainers over a 2-part partitioning of Cora, each machine a ``tessera launch --nnodes 2
--node-rank R --nproc-per-node 2`` group on loopback, over UCX.

* the rank contract: global rank = machine * T + local rank, one partition per machine;
* node_split, force_even or not, gives disjoint shares that cover the training nodes (over
  the graph's mask and over a mask DistTensor of the user's);
* every trainer reads every node's features and out-degree correctly (its machine's features
  from shared memory);
* the global-order batches equal those of one process over a 1-part partitioning;
* one copy of a machine's partition: the shared segment holds the machine's data once, its
  memory is counted once across the machine's trainers (PSS), and no segment is left in
  /dev/shm after the job, nor after its trainers are killed with SIGKILL.
"""
from __future__ import annotations

import json
import math
import os
import secrets
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import CORA, tessera
from test_distributed import assert_same_batch, by_global_index, in_original_ids

pytestmark = pytest.mark.multiprocess

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dist_scripts",
                      "trainers_per_machine.py")
DEADLINE = 300
M, T = 2, 2
BATCH_SIZE, FANOUTS, SEED = 32, (10, 5), 7


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env() -> dict:
    env = dict(os.environ)
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(tessera.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_root, env.get("PYTHONPATH")) if p)
    env["TESSERA_JOB_TOKEN"] = secrets.token_hex(16)
    env["TESSERA_TRANSPORT"] = "ucx"
    return env


def start_machines(machines: int, trainers: int, *args) -> list[subprocess.Popen]:
    """One launcher per simulated machine, all on this host."""
    env, port = _env(), _free_port()
    procs = []
    for m in range(machines):
        cmd = [sys.executable, "-m", "tessera", "launch", "--nnodes", str(machines),
               "--node-rank", str(m), "--nproc-per-node", str(trainers), "--master-addr",
               "127.0.0.1", "--master-port", str(port), "--", sys.executable, SCRIPT,
               *[str(a) for a in args]]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True, env=env, start_new_session=True))
    return procs


def wait_all(procs: list[subprocess.Popen], deadline: float = DEADLINE) -> list[str]:
    outs, t_end = [], time.monotonic() + deadline
    try:
        for p in procs:
            out, _ = p.communicate(timeout=max(1.0, t_end - time.monotonic()))
            outs.append(out)
    except subprocess.TimeoutExpired:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        rest = [p.communicate(timeout=30)[0] or "" for p in procs]
        pytest.fail("the machines did not finish in time:\n" + "\n".join(rest)[-6000:])
    for p, out in zip(procs, outs):
        assert p.returncode == 0, f"{p.args} exited with {p.returncode}:\n{out[-6000:]}"
    return outs


def segments() -> set[str]:
    return {f for f in os.listdir("/dev/shm") if f.startswith("tessera-")} \
        if os.path.isdir("/dev/shm") else set()


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    """Cora (symmetrized) in 1 and 2 METIS parts: (config, orig_nids, orig_eids) by parts."""
    out = {}
    for n in (1, 2):
        d = tmp_path_factory.mktemp(f"cora-tpm{n}")
        nids, eids = tessera.partition_graph(CORA, "cora", n, d, symmetrize=True,
                                             num_trainers_per_machine=T, return_mapping=True)
        out[n] = (str(d / "cora.json"), nids, eids)
    return out


@pytest.fixture(scope="module")
def dumps(parts, tmp_path_factory):
    """Every rank's dump of the M x T job and of the one-process reference."""
    res = {}
    before = segments()
    for machines, trainers in ((1, 1), (M, T)):
        out = tmp_path_factory.mktemp(f"tpm-{machines}x{trainers}")
        wait_all(start_machines(machines, trainers, parts[machines][0], out, "--batch-size",
                                BATCH_SIZE, "--seed", SEED, "--fanouts",
                                ",".join(map(str, FANOUTS))))
        res[(machines, trainers)] = [json.loads((out / f"rank{r}.json").read_text())
                                     for r in range(machines * trainers)]
    res["segments_left"] = segments() - before
    return res


class _P:  # what test_distributed's helpers read of a partitioning
    def __init__(self, nids, eids):
        self.orig_nids, self.orig_eids = nids, eids


def test_rank_contract(dumps):
    for d in dumps[(M, T)]:
        r = d["rank"]
        assert d["world"] == M * T
        assert d["env"]["RANK"] == str(r) and d["env"]["WORLD_SIZE"] == str(M * T)
        assert d["env"]["LOCAL_RANK"] == str(r % T) and d["env"]["LOCAL_WORLD_SIZE"] == str(T)
        assert d["env"]["NODE_RANK"] == str(r // T)
        assert d["machine"] == r // T and d["partid"] == r // T
        assert d["trainers_per_machine"] == T and d["num_partitions"] == M
    # The trainers' node ranges tile the machines' ranges in rank order.
    ranges = [tuple(d["local_node_range"]) for d in dumps[(M, T)]]
    assert ranges[0][0] == 0 and all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))


def test_node_split_is_disjoint_and_complete(dumps, cora):
    train_new = None
    for key in ("split_even", "split_local", "host_split_even", "host_split_local"):
        shares = [np.asarray(d[key], dtype=np.int64) for d in dumps[(M, T)]]
        allids = np.concatenate(shares)
        assert len(np.unique(allids)) == len(allids), f"{key}: shares overlap"
        if train_new is None:
            train_new = np.sort(allids)
        assert np.array_equal(np.sort(allids), train_new), f"{key}: shares differ in coverage"
        sizes = [len(s) for s in shares]
        if "even" in key:
            assert max(sizes) - min(sizes) <= 1, f"{key}: uneven shares {sizes}"
    # Coverage: exactly Cora's training nodes (in new IDs).
    orig = np.asarray(dumps[(M, T)][0]["feat_orig"], dtype=np.int64)
    assert np.array_equal(np.sort(orig[train_new]),
                          np.nonzero(np.asarray(cora.ndata["train_mask"]))[0])
    # Device and host splits agree; force_even=False keeps each trainer on its machine's nodes,
    # also over a mask DistTensor of the user's, whose trainers do not share its rows (it cut
    # each trainer's own range before: 95 / 45 where the machine's 140 give 70 / 70).
    for d in dumps[(M, T)]:
        assert d["split_even"] == d["host_split_even"]
        assert d["split_local"] == d["host_split_local"] == d["user_split_local"]
    machine_of = {}
    for d in dumps[(M, T)]:
        for v in d["split_local"]:
            machine_of[v] = d["machine"]
    lo_hi = {}
    for d in dumps[(M, T)]:
        lo, hi = d["local_node_range"]
        m = d["machine"]
        lo_hi[m] = (min(lo, lo_hi.get(m, (lo, hi))[0]), max(hi, lo_hi.get(m, (lo, hi))[1]))
    for v, m in machine_of.items():
        assert lo_hi[m][0] <= v < lo_hi[m][1]


def test_every_trainer_reads_every_feature(dumps, cora):
    feat = np.asarray(cora.ndata["feat"]).astype(np.float64).sum(axis=1)
    for d in dumps[(M, T)]:
        orig = np.asarray(d["feat_orig"], dtype=np.int64)
        assert np.allclose(np.asarray(d["feat_sum"]), feat[orig]), f"rank {d['rank']}"


def test_every_trainer_reads_every_out_degree(dumps, cora):
    """The trainers of a machine share its edges: each counts only the sources of its own."""
    outdeg = np.bincount(np.asarray(cora.graph.indices), minlength=cora.num_nodes)
    for d in dumps[(M, T)]:
        orig = np.asarray(d["feat_orig"], dtype=np.int64)
        assert np.array_equal(np.asarray(d["out_degrees"]), outdeg[orig]), f"rank {d['rank']}"


def test_global_batches_match_one_process(dumps, parts, cora):
    ref_p, p = _P(*parts[1][1:]), _P(*parts[M][1:])
    ref = {j: v[0][2] for j, v in by_global_index(dumps[(1, 1)], ref_p).items()}
    feat = np.asarray(cora.ndata["feat"]).astype(np.float64).sum(axis=1)
    seen = set()
    for d in dumps[(M, T)]:
        assert d["num_batches"] == math.ceil(len(ref) / (M * T))
        for raw in d["batches"]:
            b = in_original_ids(raw, p)
            assert_same_batch(ref[b["j"]], b, f"rank {d['rank']} batch {b['j']}")
            assert np.allclose(np.asarray(raw["input_feat_sum"]), feat[b["input_nodes"]])
            seen.add(b["j"])
    assert seen == set(ref)


def test_one_copy_of_the_partition_per_machine(dumps, cora):
    """The machine's node and edge data sit in one shared segment that every trainer of the
    machine maps: sized for the machine's partition once, and its pages counted once across the
    machine's trainers (their Pss_Shmem sums to at most the segment, each maps all of it)."""
    feat_row = np.asarray(cora.ndata["feat"])[0].nbytes
    for m in range(M):
        trainers = [d for d in dumps[(M, T)] if d["machine"] == m]
        assert len(trainers) == T
        seg = {d["shared_bytes"] for d in trainers}
        assert len(seg) == 1, seg
        seg = seg.pop()
        machine_nodes = trainers[-1]["local_node_range"][1] - trainers[0]["local_node_range"][0]
        assert seg >= machine_nodes * feat_row
        # After every trainer read every row: each maps and touched the whole machine's
        # features (Rss), and the segment's pages are counted once across them (Pss).
        for d in trainers:
            assert d["segment_end"]["Size"] * 1024 >= seg
            assert d["segment_end"]["Rss"] * 1024 >= machine_nodes * feat_row
        pss = sum(d["segment_end"]["Pss"] for d in trainers) * 1024
        assert pss <= seg, (pss, seg)
    assert dumps["segments_left"] == set(), "segments of the finished job are left in /dev/shm"


def test_no_segment_left_after_kill(parts, tmp_path):
    """SIGKILL every trainer right after loading: no /dev/shm segment of the job survives. A
    segment whose creator died before unlinking it (made up here) is removed by the next job."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = f"/dev/shm/tessera-{dead.pid}-00000000-00000000-m0"
    with open(stale, "wb") as f:
        f.write(b"x")
    before = segments()
    procs = start_machines(M, T, parts[M][0], tmp_path, "--hold", "--no-batches")
    pids = []
    try:
        t_end = time.monotonic() + DEADLINE
        while time.monotonic() < t_end and any(p.poll() is None for p in procs):
            done = [tmp_path / f"loaded{r}" for r in range(M * T)]
            if all(f.exists() for f in done):
                pids = [int(f.read_text()) for f in done]
                break
            time.sleep(0.2)
        assert len(pids) == M * T, "the trainers did not all load:\n" + "\n".join(
            (p.communicate(timeout=60)[0] or "")[-3000:] for p in procs if p.poll() is not None)
        for pid in pids:  # each maps its machine's segment, whose name is already gone
            with open(f"/proc/{pid}/maps") as f:
                assert "/tessera-" in f.read(), f"trainer {pid} maps no shared segment"
        assert not os.path.exists(stale), "the stale segment of a dead creator was not removed"
        assert segments() - before == set(), "a live job's segment is still named in /dev/shm"
    finally:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for p in procs:
            try:
                p.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.communicate()
        if os.path.exists(stale):
            os.unlink(stale)
    assert segments() - before == set(), "a segment of the killed job is left in /dev/shm"
