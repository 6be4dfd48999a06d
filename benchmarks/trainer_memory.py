#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Memory of a machine's partition against the number of trainers per machine.

    PYTHONPATH=python python3 benchmarks/trainer_memory.py [--nodes N --edges E --dim F]
        [--trainers 1,2,4] [--machines 2] [--out benchmarks/results/trainer_memory]
    python3 benchmarks/trainer_memory.py --plot RESULT.json     (redraws the figure)

A random graph with float32 features [N, F] is partitioned into M parts (random method); for
each T the job runs as M "machines" of T trainers on this host (one ``tessera launch --nnodes M
--node-rank m --nproc-per-node T`` each, over UCX). Every trainer records its
/proc/self/smaps_rollup just before and just after ``DistGraph(...)`` (after a barrier) and its
mappings of the machine's shared segment. Per machine the bench reports the PSS the machine's
trainers gained by loading (summed: pages shared by k processes count 1/k in each, so shared
pages count once in the sum), the shared segment's size, and the private memory they gained. One
copy per machine means the PSS gain stays about flat as T grows instead of growing T-fold.
Writes <out>/<date>-<commit>-<machine>.json and the plot beside it (.png)."""
from __future__ import annotations

import argparse
import datetime
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def smaps() -> dict:
    out = {}
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            p = line.split()
            if len(p) == 3 and p[2] == "kB":
                out[p[0].rstrip(":")] = int(p[1])
    return out


def worker(config: str, out_dir: str) -> int:
    sys.modules["torch"] = None
    import tessera

    tessera.initialize()
    tessera.distributed.barrier()
    before = smaps()
    g = tessera.DistGraph("", part_config=config)
    g.barrier()
    after = smaps()
    rec = {"rank": tessera.get_rank(), "machine": g.machine, "shared_bytes": g.shared_bytes,
           "trainers_per_machine": g.trainers_per_machine, "before": before, "after": after}
    with open(os.path.join(out_dir, f"rank{rec['rank']}.json"), "w") as f:
        json.dump(rec, f)
    tessera.exit_client()
    return 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_job(config: str, machines: int, trainers: int) -> list[dict]:
    env = dict(os.environ)
    env["TESSERA_JOB_TOKEN"] = secrets.token_hex(16)
    env["TESSERA_TRANSPORT"] = "ucx"
    port = free_port()
    with tempfile.TemporaryDirectory() as out:
        procs = [subprocess.Popen(
            [sys.executable, "-m", "tessera", "launch", "--nnodes", str(machines), "--node-rank",
             str(m), "--nproc-per-node", str(trainers), "--master-port", str(port), "--",
             sys.executable, os.path.abspath(__file__), "--worker", config, out],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for m in range(machines)]
        for p in procs:
            text, _ = p.communicate(timeout=900)
            if p.returncode != 0:
                raise SystemExit(f"job M={machines} T={trainers} failed:\n{text[-4000:]}")
        return [json.load(open(os.path.join(out, f"rank{r}.json")))
                for r in range(machines * trainers)]


def plot(res: dict, png: str) -> None:
    """Machine 0's PSS gain against T, split by kind, beside T times the T = 1 gain (what
    loading the partition once per trainer would cost)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    m0 = [r for r in res["rows"] if r["machine"] == 0]
    ts = [r["trainers_per_machine"] for r in m0]
    mib = {k: [r["gain_kib"][k] / 1024 for r in m0] for k in ("Pss", "Pss_Shmem", "Pss_File",
                                                             "Pss_Anon")}
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.plot(ts, mib["Pss"], "o-", label="PSS gained by loading (all the machine's trainers)")
    ax.plot(ts, mib["Pss_Shmem"], "s-", label="  of which shared memory (node/edge data)")
    ax.plot(ts, mib["Pss_File"], "^-", label="  of which partition files (page cache)")
    ax.plot(ts, mib["Pss_Anon"], "v-", label="  of which private (per-trainer structures)")
    if ts and ts[0] == 1:
        ax.plot(ts, [mib["Pss"][0] * t for t in ts], "--", color="gray",
                label="T x the T = 1 gain (a copy per trainer)")
    g = res["graph"]
    ax.set_xlabel("trainers per machine T")
    ax.set_ylabel("MiB, machine 0")
    ax.set_xticks(ts)
    ax.set_title(f"{res['rows'][0]['machines']} machines; {g['nodes']} nodes, {g['edges']} "
                 f"edges, {g['dim']}-d float32 features", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    print(f"[trainer_memory] wrote {png}", file=sys.stderr)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        return worker(sys.argv[2], sys.argv[3])
    if len(sys.argv) > 1 and sys.argv[1] == "--plot":  # --plot RESULT.json: redraw the figure
        with open(sys.argv[2]) as f:
            res = json.load(f)
        plot(res, os.path.splitext(os.path.abspath(sys.argv[2]))[0] + ".png")
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=200_000)
    ap.add_argument("--edges", type=int, default=2_000_000)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--machines", type=int, default=2)
    ap.add_argument("--trainers", default="1,2,4")
    ap.add_argument("--machine-name", default="cpu-2core")
    ap.add_argument("--out", default=os.path.join(REPO, "benchmarks", "results",
                                                  "trainer_memory"))
    a = ap.parse_args()
    trainers = [int(t) for t in a.trainers.split(",")]
    if a.nodes < 1 or a.edges < 1 or a.dim < 1 or a.machines < 1 or min(trainers) < 1:
        ap.error("--nodes, --edges, --dim, --machines and --trainers must be >= 1")
    import numpy as np

    import tessera

    rng = np.random.default_rng(0)
    src = rng.integers(0, a.nodes, a.edges, dtype=np.int64)
    dst = rng.integers(0, a.nodes, a.edges, dtype=np.int64)
    feat = rng.standard_normal((a.nodes, a.dim), dtype=np.float32)
    train = rng.random(a.nodes) < 0.1
    print(f"[trainer_memory] partitioning {a.nodes} nodes, {a.edges} edges, features "
          f"[{a.nodes}, {a.dim}] into {a.machines} parts", file=sys.stderr, flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        config = tessera.partition_graph(
            {"edge_index": (src, dst), "num_nodes": a.nodes,
             "ndata": {"feat": feat, "train_mask": train}}, "bench", a.machines, d,
            part_method="random", seed=1)
        del src, dst, feat
        for t in trainers:
            t0 = time.monotonic()
            recs = run_job(config, a.machines, t)
            for m in range(a.machines):
                mine = [r for r in recs if r["machine"] == m]
                gain = {k: sum(r["after"].get(k, 0) - r["before"].get(k, 0) for r in mine)
                        for k in ("Pss", "Rss", "Private_Dirty", "Pss_Shmem", "Pss_File",
                                  "Pss_Anon")}
                rows.append({"machines": a.machines, "trainers_per_machine": t, "machine": m,
                             "shared_segment_bytes": mine[0]["shared_bytes"],
                             "gain_kib": gain})
            print(f"[trainer_memory] T={t}: machine 0 PSS gain "
                  f"{rows[-a.machines]['gain_kib']['Pss'] / 1024:.1f} MiB "
                  f"({time.monotonic() - t0:.0f} s)", file=sys.stderr, flush=True)
    try:
        commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    date = datetime.date.today().isoformat()
    res = {"bench": "trainer_memory", "date": date, "commit": commit,
           "machine": a.machine_name, "command": " ".join(sys.argv),
           "graph": {"nodes": a.nodes, "edges": a.edges, "dim": a.dim,
                     "feature_bytes": a.nodes * a.dim * 4},
           "rows": rows}
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, f"{date}-{commit}-{a.machine_name}.json")
    with open(path, "w") as f:
        json.dump(res, f, indent=1)
    print(f"[trainer_memory] wrote {path}", file=sys.stderr)
    plot(res, os.path.splitext(path)[0] + ".png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
