#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""DGL's CPU neighbor sampler on the same graph and batches shape as `tessera bench sample`.

Export the graph once with Tessera, then run this script with DGL installed:

    tessera generate rmat --scale 21 --edge-factor 25 --out /tmp/rmat21
    python benchmarks/dgl_sample_peer.py --graph /tmp/rmat21 --fanouts 15,10,5 \
        --batch-size 1024 --threads 1 --batches 20 --json out.json

The graph is symmetrized the way Tessera's BuildOptions::symmetrize does (edge E+i is the
reverse of input edge i, added unless the input already holds that reversed pair), and not at
all when its meta.json says "symmetrized": true (both directions stored), as `tessera bench`
reads it. Each batch runs DGL's multi-layer sampling the way
dgl.dataloading.NeighborSampler.sample_blocks does: dgl.sampling.sample_neighbors on the frontier
(output layer first), then dgl.to_block, and the block's source nodes become the next frontier.
"""
import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import time

import numpy as np


def symmetrize(src, dst, num_nodes):
    """Tessera's BuildOptions::symmetrize: the input edges, then the reverse of every input
    edge whose reversed pair the input lacks, in input order."""
    import torch
    if src.numel() == 0:
        return src, dst
    keys = torch.sort(src * num_nodes + dst).values
    rev = dst * num_nodes + src
    pos = torch.searchsorted(keys, rev).clamp_(max=keys.numel() - 1)
    lacking = keys[pos] != rev
    return torch.cat([src, dst[lacking]]), torch.cat([dst, src[lacking]])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--graph", required=True, help="npy dataset folder with edge_index.npy")
    p.add_argument("--fanouts", default="15,10,5", help="input layer first, as in DGL")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batches", type=int, default=20)
    p.add_argument("--replace", action="store_true")
    p.add_argument("--no-symmetrize", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="write results here")
    a = p.parse_args()

    import torch
    torch.set_num_threads(a.threads)
    os.environ.setdefault("OMP_NUM_THREADS", str(a.threads))
    import dgl

    fanouts = [int(x) for x in a.fanouts.split(",")]
    t0 = time.perf_counter()
    ei = np.load(os.path.join(a.graph, "edge_index.npy"), mmap_mode="r")
    src = torch.from_numpy(np.ascontiguousarray(ei[0]))
    dst = torch.from_numpy(np.ascontiguousarray(ei[1]))
    num_nodes = int(max(src.max(), dst.max())) + 1
    meta_path = os.path.join(a.graph, "meta.json")
    meta = {}
    if os.path.exists(meta_path):
        with open(meta_path) as f:
            meta = json.load(f)
        num_nodes = max(num_nodes, int(meta.get("num_nodes", num_nodes)))
    symmetrized = not a.no_symmetrize and meta.get("symmetrized") is not True
    if symmetrized:
        src, dst = symmetrize(src, dst, num_nodes)
    g = dgl.graph((src, dst), num_nodes=num_nodes)
    del src, dst
    g.create_formats_()
    load_s = time.perf_counter() - t0
    print(f"graph: {a.graph} ({g.num_nodes()} nodes, {g.num_edges()} edges) loaded in {load_s:.1f} s",
          flush=True)

    gen = torch.Generator().manual_seed(a.seed)
    perm = torch.randperm(g.num_nodes(), generator=gen)
    batches = [perm[i * a.batch_size:(i + 1) * a.batch_size] for i in range(a.batches + 1)]
    dgl.seed(a.seed)

    def sample(seeds, stats):
        blocks = []
        for fanout in reversed(fanouts):
            t = time.perf_counter()
            frontier = dgl.sampling.sample_neighbors(g, seeds, fanout, replace=a.replace)
            t2 = time.perf_counter()
            block = dgl.to_block(frontier, seeds)
            stats["compaction"] += time.perf_counter() - t2
            stats["sampling"] += t2 - t
            stats["edges"] += block.num_edges()
            seeds = block.srcdata[dgl.NID]
            blocks.insert(0, block)
        return blocks

    sample(batches[-1], {"sampling": 0.0, "compaction": 0.0, "edges": 0})  # warm-up
    stats = {"sampling": 0.0, "compaction": 0.0, "edges": 0}
    c0, t0 = time.process_time(), time.perf_counter()
    for b in range(a.batches):
        sample(batches[b], stats)
        if (b + 1) % 5 == 0:
            print(f"[dgl] sampling: {b + 1} / {a.batches} batches", file=sys.stderr, flush=True)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    seeds = a.batches * a.batch_size
    res = {
        "benchmark": "sample (DGL peer)",
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
        "dgl_version": dgl.__version__,
        "torch_version": torch.__version__,
        "machine": {"hostname": socket.gethostname(), "hardware_threads": os.cpu_count(),
                    "cpu": platform.processor() or platform.machine()},
        "graph": {"path": a.graph, "num_nodes": g.num_nodes(), "num_edges": g.num_edges(),
                  "symmetrized": symmetrized},
        "params": {"fanouts": fanouts, "batch_size": a.batch_size, "threads": a.threads,
                   "replace": a.replace, "batches": a.batches, "seed": a.seed},
        "dgl": {"seconds": wall, "cpu_seconds": cpu, "seeds": seeds, "sampled_edges": stats["edges"],
                "seeds_per_s": seeds / wall, "edges_per_s": stats["edges"] / wall,
                "edges_per_cpu_second": stats["edges"] / cpu,
                "stage_seconds": {"sampling": stats["sampling"], "compaction": stats["compaction"]}},
    }
    try:
        res["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                       text=True, cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    except OSError:
        res["commit"] = "unknown"
    d = res["dgl"]
    print(f"dgl {dgl.__version__}: {a.batches} batches x {a.batch_size} seeds, fanouts {fanouts}, "
          f"{a.threads} thread(s)")
    print(f"  {d['seeds_per_s']:.0f} seeds/s, {d['edges_per_s'] / 1e6:.2f}M sampled edges/s, "
          f"{d['edges_per_cpu_second'] / 1e6:.2f}M edges per CPU-second, "
          f"{stats['edges'] / seeds:.1f} edges/seed")
    print(f"  stages: sampling {stats['sampling']:.3f} s, compaction {stats['compaction']:.3f} s")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=2)
        print(f"wrote {a.json}")


if __name__ == "__main__":
    main()
