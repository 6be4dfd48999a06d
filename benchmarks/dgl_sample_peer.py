#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Tessera's CPU sampler against what a DGL user gets, on the same graph and the same batches.

    python benchmarks/dgl_sample_peer.py --graph data/tolokers --graph rmat:19,25 \\
        --threads 1,2 --batches 20 --rounds 15 --machine cpu-2core --results benchmarks/results

Every case (graph x thread count) times, in alternating rounds over the same seed batches:

* ``tessera``: the plain Python call, ``tessera.dataloading.NeighborSampler(fanouts,
  num_threads=T).sample_blocks(dataset, seeds)``;
* ``dgl``: ``dgl.dataloading.MultiLayerNeighborSampler(fanouts).sample_blocks(g, seeds)``, what a
  DGL user gets (DGL 1.1's fused CPU path, ``sample_neighbors_fused``);
* ``dgl-unfused``: the same sampler with ``fused=False`` (``sample_neighbors`` then ``to_block``
  per hop);
* ``graphbolt`` (DGL 2.x): GraphBolt's pipeline as its examples build it,
  ``ItemSampler(ItemSet(seeds), batch_size).sample_neighbor(graph, fanouts)`` through
  ``graphbolt.DataLoader(num_workers=0)``, over a ``fused_csc_sampling_graph`` of the same CSC;
  a round iterates it once over the same batches, in order;
* ``tessera-cli`` (with ``--cli PATH``): ``tessera bench sample`` on the same graph and batches,
  one process per round, its loader's rate by wall time (T loader threads). Its rounds also
  measure the roofline, random 8-byte reads of the graph per second with T threads
  (``roofline`` in the JSON: their median, and Tessera's sampled edges per such read).

Round r runs every peer over all batches ``--passes`` times, the order rotating from round to
round, so each pair of peers is compared on the same minutes of a shared machine: the figure is
the median of the per-round ratios. Right before its timed passes, each peer samples the first
batch untimed: the peer before it leaves the caches, the allocator and the idle cores in its own
state, and a pass of a few milliseconds would otherwise time that hand-over rather than the
sampler (a 2-thread pass right after DGL's ran about 0.6x its steady rate on a 2-core VM).

A busy machine makes every figure here meaningless (another process on a 2-core machine slowed
DGL's 2-thread rounds 20-50 fold), so each case reads ``/proc/stat`` around its rounds: the CPU
time of other processes and the time stolen by the hypervisor, as shares of the machine. Above
``--max-busy`` (default 0.1) the case is marked ``"busy": true`` with a warning (``null`` where
``/proc/stat`` cannot be read); ``results_table.py`` leaves such cases out of the table.

Both sides sample the graph Tessera builds (``load_dataset(path, symmetrize=True)``, as
``tessera bench sample`` reads it), DGL from the same CSC arrays; the
batches are the Tessera loader's first epoch (shuffled with the Philox permutation of ``--seed``,
``drop_last``), and Tessera samples batch b with the key (seed, 0, b) as the loader and the CLI
do, so its edge counts match the CLI's. Torch and DGL get T threads (``torch.set_num_threads``,
``dgl.utils.set_num_threads`` and ``OMP_NUM_THREADS``, set before DGL is imported).

DGL versions: the project's environment (scripts/setup-python.sh, torch 2.11) has DGL 1.1.3, the
newest release on PyPI that imports with torch 2.11; it has no GraphBolt. GraphBolt ships with
DGL 2.x, whose one PyPI release (2.1.0) loads a library built for torch 2.0-2.2.1 and fails to
import with torch 2.11. So DGL 2.1.0 and GraphBolt are measured from a separate virtual
environment with PyPI's torch 2.2.1 (``pip install torch==2.2.1 dgl==2.1.0 "numpy<2"
torchdata==0.7.1 pandas pydantic pyyaml`` and the Tessera wheel): run this script there too.
The peers are those the imported DGL has (``--peers`` picks among them).

Writes one JSON (``--json PATH``, or ``--results DIR``:
DIR/sample-peer-dgl<MAJOR.MINOR>/<date>-<commit>-<machine>.json) with every round of every
peer, and ``--plot`` draws it (benchmarks/plot_sample_peer.py).
"""
import argparse
import datetime
import json
import os
import platform
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def commit_id():
    """Short HEAD of the repository holding this script, '+dirty' when its files differ."""
    def git(*args):
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=HERE).stdout.strip()
    try:
        head = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except OSError:
        return "unknown"
    return (head or "unknown") + ("+dirty" if dirty else "")


def machine_record(name):
    """The "machine" record of a result JSON: the name given, the host and what it has."""
    return {"name": name, "hostname": socket.gethostname(), "hardware_threads": os.cpu_count(),
            "cpu": platform.processor() or platform.machine(),
            "load_average": list(os.getloadavg())}


def write_result(out, json_path, results, bench, dgl_version, machine):
    """Writes ``out`` to ``json_path``, or with ``results`` to
    results/<bench>-dgl<MAJOR.MINOR>/<date>-<commit>-<machine>.json (through a temporary file);
    returns the path written, or None."""
    path = json_path
    if results:
        machine = "".join(c if c.isalnum() else "-" for c in machine).strip("-")
        major_minor = ".".join(dgl_version.split(".")[:2])
        folder = os.path.join(results, f"{bench}-dgl{major_minor}")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, f"{out['date']}-{out['commit'].replace('+', '-')}-{machine}.json")
    if path:
        with open(path + ".tmp", "w") as f:
            json.dump(out, f, indent=1)
        os.replace(path + ".tmp", path)
        print(f"wrote {path}")
    return path


def parse_args():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--graph", action="append", required=True,
                   help="dataset path or rmat:SCALE,EF (repeat for several graphs)")
    p.add_argument("--fanouts", default="15,10,5", help="input layer first, as in DGL")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--threads", default="1", help="thread counts, e.g. 1,2")
    p.add_argument("--batches", type=int, default=20,
                   help="batches per round (at most the graph's nodes / batch size)")
    p.add_argument("--rounds", type=int, default=15, help="timed rounds (one warm-up before)")
    p.add_argument("--passes", type=int, default=3,
                   help="passes over the batches per peer and round (one timing)")
    p.add_argument("--max-busy", type=float, default=0.1,
                   help="share of the machine other processes and the hypervisor may take "
                        "before a case is marked busy")
    p.add_argument("--replace", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--peers", default="",
                   help="in-process peers among tessera, dgl, dgl-unfused, graphbolt (default: "
                        "all that the imported DGL has)")
    p.add_argument("--cli", help="a `tessera` binary: time `tessera bench sample` as a peer too")
    p.add_argument("--cli-rounds", type=int, default=0,
                   help="rounds that also run the CLI (0: every round)")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--results", help="write DIR/sample-peer-dgl<MAJOR.MINOR>/"
                                      "<date>-<commit>-<machine>.json")
    p.add_argument("--machine", default=socket.gethostname(),
                   help="machine name in the results file name (default: the host name)")
    p.add_argument("--plot", action="store_true", help="also draw the JSON (same name, .png)")
    return p.parse_args()


class Case:
    """One graph: Tessera's dataset, the DGL graph over the same CSC, the batches."""

    def __init__(self, spec, batch_size, batches, seed):
        import numpy as np
        import torch
        import dgl
        import tessera
        from tessera import _C
        t0 = time.perf_counter()
        self.spec = spec
        self.ds = tessera.load_dataset(spec, symmetrize=True)
        csc = self.ds.graph
        n = int(csc.num_nodes)
        indptr = torch.from_numpy(np.array(csc.indptr, dtype=np.int64))
        indices = torch.from_numpy(np.array(csc.indices, dtype=np.int64))
        # Edge IDs: storage positions (DGL wants a permutation of 0..E-1; the samplers' speed
        # does not depend on the IDs).
        self.g = dgl.graph(("csc", (indptr, indices, [])), num_nodes=n)
        self.g.create_formats_()
        self.indptr, self.indices = indptr, indices
        perm = np.asarray(_C.philox_permutation(n, seed, 0))
        count = min(batches, n // batch_size)
        if count < 1:
            sys.exit(f"dgl_sample_peer: {spec} has {n} nodes, fewer than --batch-size {batch_size}")
        self.batches = [torch.from_numpy(perm[b * batch_size:(b + 1) * batch_size].copy())
                        for b in range(count)]
        self.num_nodes, self.num_edges = n, int(csc.num_edges)
        self.load_seconds = time.perf_counter() - t0


def tessera_version():
    from importlib import metadata
    try:
        return metadata.version("tessera")
    except metadata.PackageNotFoundError:  # the package from the source tree (PYTHONPATH=python)
        return "source tree"


def has_graphbolt():
    try:
        import dgl.graphbolt  # noqa: F401  (DGL 2.x)
    except ImportError:
        return False
    return True


def make_peer(name, case, fanouts, threads, replace, seed):
    """(run, prime) of a peer over `case`: run(passes) samples every batch in order `passes`
    times and returns the sampled edges; prime() samples the first batch (untimed)."""
    import dgl
    import tessera
    count = len(case.batches)
    if name == "tessera":
        s = tessera.dataloading.NeighborSampler(fanouts, replace=replace, num_threads=threads)

        def one(b):
            _, _, blocks = s.sample_blocks(case.ds, case.batches[b], seed=seed, epoch=0, batch=b)
            return sum(blk.num_edges() for blk in blocks)
    elif name in ("dgl", "dgl-unfused"):
        s = dgl.dataloading.MultiLayerNeighborSampler(fanouts, replace=replace,
                                                      fused=name == "dgl")

        def one(b):
            _, _, blocks = s.sample_blocks(case.g, case.batches[b])
            return sum(blk.num_edges() for blk in blocks)
    elif name == "graphbolt":
        import torch
        import dgl.graphbolt as gb
        if not hasattr(case, "gb_graph"):
            case.gb_graph = gb.fused_csc_sampling_graph(case.indptr, case.indices)

        def loader_of(batches):
            items = gb.ItemSet(torch.cat(batches), names="seed_nodes")
            pipe = gb.ItemSampler(items, batch_size=len(case.batches[0]), shuffle=False,
                                  drop_last=True)
            return gb.DataLoader(pipe.sample_neighbor(case.gb_graph, fanouts, replace=replace),
                                 num_workers=0)

        loaders = {"all": loader_of(case.batches), "first": loader_of(case.batches[:1])}

        def over(which):
            return sum(int(sg.sampled_csc.indices.numel()) for mb in loaders[which]
                       for sg in mb.sampled_subgraphs)

        return (lambda passes: sum(over("all") for _ in range(passes))), (lambda: over("first"))
    else:
        sys.exit(f"dgl_sample_peer: unknown peer '{name}' (tessera, dgl, dgl-unfused, graphbolt)")

    def run(passes):
        return sum(one(b) for _ in range(passes) for b in range(count))
    return run, lambda: one(0)


def time_round(run, passes):
    c0, t0 = time.process_time(), time.perf_counter()
    edges = run(passes)
    return {"seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0,
            "edges": edges}


def cpu_ticks():
    """(busy, steal, total) jiffies of the whole machine from /proc/stat, or None."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = v[3] + (v[4] if len(v) > 4 else 0)  # idle + iowait
    steal = v[7] if len(v) > 7 else 0
    total = sum(v[:8])
    return total - idle - steal, steal, total


def machine_load(before, after, own_cpu_seconds):
    """Shares of the machine's CPU time between two cpu_ticks() readings taken by other
    processes (busy time less this process's `own_cpu_seconds`) and stolen by the hypervisor."""
    if before is None or after is None or after[2] <= before[2]:
        return None
    hz = os.sysconf("SC_CLK_TCK")
    total = after[2] - before[2]
    others = max(0.0, (after[0] - before[0]) - own_cpu_seconds * hz)
    return {"others": others / total, "steal": (after[1] - before[1]) / total}


def run_cli(cli, spec, fanouts, batch_size, threads, batches, replace, seed):
    """One `tessera bench sample` process: its loader's round over the same batches."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        cmd = [cli, "bench", "sample", "--graph", spec, "--fanouts", fanouts,
               "--batch-size", str(batch_size), "--threads", str(threads),
               "--batches", str(batches), "--ref-repeats", "1", "--ref-batches", "1",
               "--digest-batches", "0", "--seed", str(seed), "--json", out]
        if replace:
            cmd.append("--replace")
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"dgl_sample_peer: {' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
        with open(out) as f:
            j = json.load(f)
    t = j["tessera"]
    return {"seconds": t["seconds"], "cpu_seconds": t["cpu_seconds"],
            "edges": t["sampled_edges"], "command": j["command"],
            "limit_random_reads_per_s": j.get("limit", {}).get("random_reads_per_s")}


def summarize(rounds):
    rates = [r["edges"] / r["seconds"] for r in rounds]
    cpu = [r["edges"] / r["cpu_seconds"] for r in rounds if r["cpu_seconds"] > 0]
    return {"edges_per_s_median": statistics.median(rates), "edges_per_s_max": max(rates),
            "edges_per_cpu_second_median": statistics.median(cpu) if cpu else None}


def ratio(peers, a, b):
    """Per-round ratio of a's rate to b's over the rounds both ran."""
    ra = {r["round"]: r["edges"] / r["seconds"] for r in peers[a]["rounds"]}
    rb = {r["round"]: r["edges"] / r["seconds"] for r in peers[b]["rounds"]}
    per = [ra[k] / rb[k] for k in sorted(ra) if k in rb]
    if not per:
        return None
    return {"median": statistics.median(per), "min": min(per), "max": max(per), "per_round": per}


def own_cpu_seconds():
    """CPU seconds of this process and of its waited-for children (the CLI rounds)."""
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + ch.ru_utime + ch.ru_stime


def run_case(case, a, fanouts, threads, names):
    peers_fns = {n: make_peer(n, case, fanouts, threads, a.replace, a.seed) for n in names}
    count = len(case.batches)
    for n in names:  # warm-up: first touch of every array, thread pools, workspaces
        time_round(peers_fns[n][0], 1)
    peers = {n: {"rounds": []} for n in names}
    if a.cli:
        peers["tessera-cli"] = {"rounds": []}
    ticks0, cpu0 = cpu_ticks(), own_cpu_seconds()
    for r in range(a.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        if r % 2:
            order = order[::-1]
        for n in order:
            run, prime = peers_fns[n]
            prime()
            res = time_round(run, a.passes)
            res["round"] = r
            peers[n]["rounds"].append(res)
        if a.cli and (a.cli_rounds == 0 or r < a.cli_rounds):
            res = run_cli(a.cli, case.spec, a.fanouts, a.batch_size, threads, count, a.replace,
                          a.seed)
            res["round"] = r
            peers["tessera-cli"]["rounds"].append(res)
        line = ", ".join(f"{n} {peers[n]['rounds'][-1]['edges'] / peers[n]['rounds'][-1]['seconds'] / 1e6:.2f}M"
                         for n in peers if peers[n]["rounds"] and peers[n]["rounds"][-1]["round"] == r)
        print(f"  round {r + 1}/{a.rounds}: {line} edges/s", file=sys.stderr, flush=True)
    load = machine_load(ticks0, cpu_ticks(), own_cpu_seconds() - cpu0)
    busy = None if load is None else load["others"] + load["steal"] > a.max_busy
    if busy:
        print(f"  WARNING: other processes took {load['others']:.0%} of the machine and the "
              f"hypervisor {load['steal']:.0%} during these rounds (over --max-busy "
              f"{a.max_busy:.0%}): the figures of this case are not the samplers'",
              file=sys.stderr, flush=True)
    # Edges of one pass over the batches (the CLI makes one pass a round). Every pass of a round
    # samples the same batches with the same keys, so a round's edges are passes x one pass's.
    for n, p in peers.items():
        if n == "tessera":  # keyed: the same edges every pass (the others draw anew)
            for rr in p["rounds"]:
                if rr["edges"] % a.passes:
                    sys.exit(f"dgl_sample_peer: {case.spec}: {n} sampled {rr['edges']} edges in "
                             f"{a.passes} passes over the same batches: the passes differ")
    edges = {n: {rr["edges"] // (1 if n == "tessera-cli" else a.passes) for rr in p["rounds"]}
             for n, p in peers.items()}
    for n, p in peers.items():
        p.update(summarize(p["rounds"]))
        p["edges_per_batch"] = sorted(edges[n])[0] / count
    if "tessera" in peers and "tessera-cli" in peers:
        # The same batches and keys: the CLI samples exactly the edges the Python call does.
        if edges["tessera"] != edges["tessera-cli"]:
            sys.exit(f"dgl_sample_peer: {case.spec}: the Python call sampled {edges['tessera']} "
                     f"edges, the CLI {edges['tessera-cli']}: not the same batches")
    # The roofline: random 8-byte reads of the graph per second with T threads, which the CLI
    # measures in each of its rounds (a sampled edge costs at least one such read).
    reads = [r["limit_random_reads_per_s"] for r in peers.get("tessera-cli", {}).get("rounds", [])
             if r.get("limit_random_reads_per_s")]
    roofline = None
    if reads:
        roofline = {"random_reads_per_s_median": statistics.median(reads),
                    "tessera_edges_per_read": peers["tessera"]["edges_per_s_median"] /
                    statistics.median(reads) if "tessera" in peers else None}
    ratios = {}
    for x, y in (("tessera", "dgl"), ("tessera", "dgl-unfused"), ("tessera", "graphbolt"),
                 ("dgl", "dgl-unfused"), ("tessera", "tessera-cli")):
        if x in peers and y in peers:
            ratios[f"{x}/{y}"] = ratio(peers, x, y)
    return {"graph": {"spec": case.spec, "num_nodes": case.num_nodes, "num_edges": case.num_edges,
                      "symmetrized": True, "load_seconds": case.load_seconds},
            "threads": threads, "batches": count, "passes": a.passes, "peers": peers,
            "ratios": ratios, "roofline": roofline, "machine_load": load, "busy": busy}


def main():
    a = parse_args()
    try:
        threads_list = [int(t) for t in a.threads.split(",")]
        fanouts = [int(x) for x in a.fanouts.split(",")]
    except ValueError:
        sys.exit(f"dgl_sample_peer: --threads '{a.threads}' and --fanouts '{a.fanouts}' must be "
                 "comma-separated integers")
    if min(threads_list) < 1 or min(a.batch_size, a.batches, a.rounds, a.passes) < 1:
        sys.exit("dgl_sample_peer: --threads, --batch-size, --batches, --rounds and --passes "
                 "must be >= 1")
    if a.cli and not os.access(a.cli, os.X_OK):
        sys.exit(f"dgl_sample_peer: --cli {a.cli} is not an executable")
    # Thread counts for torch's and DGL's OpenMP pools, before either is imported.
    os.environ["OMP_NUM_THREADS"] = str(threads_list[0])
    import dgl
    import torch
    import tessera
    available = ["tessera", "dgl", "dgl-unfused"] + (["graphbolt"] if has_graphbolt() else [])
    names = [n for n in a.peers.split(",") if n] or available
    for n in names:
        if n not in available:
            sys.exit(f"dgl_sample_peer: peer '{n}' is not available with DGL {dgl.__version__} "
                     f"(available: {', '.join(available)})")
    cases = []
    for spec in a.graph:
        case = Case(spec, a.batch_size, a.batches, a.seed)
        print(f"graph {spec}: {case.num_nodes} nodes, {case.num_edges} edges, "
              f"{len(case.batches)} batches (loaded in {case.load_seconds:.1f} s)", file=sys.stderr)
        for t in threads_list:
            torch.set_num_threads(t)
            dgl.utils.set_num_threads(t)
            res = run_case(case, a, fanouts, t, names)
            cases.append(res)
            line = ", ".join(f"{k} {v['median']:.2f}x ({v['min']:.2f}-{v['max']:.2f})"
                             for k, v in res["ratios"].items() if v)
            rates = ", ".join(f"{n} {p['edges_per_s_median'] / 1e6:.2f}M"
                              for n, p in res["peers"].items())
            roof = res["roofline"]
            if roof and roof["tessera_edges_per_read"] is not None:
                line += (f"; limit {roof['random_reads_per_s_median'] / 1e6:.2f}M random reads/s "
                         f"(tessera {roof['tessera_edges_per_read']:.2f} edges per read)")
            print(f"{spec}, {t} thread(s): {rates} edges/s (medians); {line}", flush=True)
        del case
    out = {
        "benchmark": "sample-peer",
        "command": " ".join(["python"] + sys.argv),
        "commit": commit_id(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        "machine": machine_record(a.machine),
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "dgl": dgl.__version__, "tessera": tessera_version()},
        "params": {"fanouts": fanouts, "batch_size": a.batch_size, "replace": a.replace,
                   "batches": a.batches, "rounds": a.rounds, "passes": a.passes,
                   "seed": a.seed,
                   "peers": names + (["tessera-cli"] if a.cli else [])},
        "cases": cases,
    }
    path = write_result(out, a.json, a.results, "sample-peer", dgl.__version__, a.machine)
    if path:
        if a.plot:
            subprocess.run([sys.executable, os.path.join(HERE, "plot_sample_peer.py"), path,
                            "--out", os.path.splitext(path)[0] + ".png"], check=True)


if __name__ == "__main__":
    main()
