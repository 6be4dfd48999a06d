#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Partition pipeline benchmark.

Runs `tessera partition` on snap/ego-Twitter (symmetrized) and an R-MAT graph (scale 22, edge
factor 16) and records time and peak memory per phase (read, build CSR, METIS, relabel, write),
edge cut and balance of METIS versus random partitions, and compares Tessera's METIS edge cut
with Debian's `gpmetis` on the same graph and settings (metis/mdual.graph.gz and ego-Twitter,
4 and 8 parts) measured in the same run. METIS runs twice, as it is and with --low-memory.
Beside each run it measures, on this machine and in the same run, the work no partitioner of
that input avoids (inflating a gzip input, writing the output's bytes) and, with
--gpmetis-rmat, Debian's gpmetis's own peak memory on the R-MAT graph. Writes one JSON file and
a plot.

The JSON goes to benchmarks/results/partition/<date>-<commit>-<machine>.json unless --out says
otherwise (the commit is $TESSERA_COMMIT when set, else git's HEAD), the plot beside it.

Usage: benchmarks/partition_bench.py [--tessera build/bin/tessera] [--datasets data]
                                     [--out FILE.json] [--rmat-scale 22]
                                     [--rmat-parts 4,8] [--gpmetis-rmat]
"""
import argparse
import datetime
import gzip
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def log(msg):
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def run_tessera(tool, args, workdir, tag):
    stats = os.path.join(workdir, f"{tag}.stats.json")
    out = os.path.join(workdir, tag)
    cmd = [tool, "partition", *args, "--out", out, "--name", tag, "--overwrite", "--quiet",
           "--stats-json", stats]
    log(" ".join(cmd))
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.time() - t0
    if p.returncode != 0:
        sys.exit(f"tessera partition failed ({p.returncode}):\n{p.stderr}")
    with open(stats) as f:
        s = json.load(f)
    s["command"] = " ".join(cmd)
    s["wall_seconds"] = wall
    s["output_bytes"] = folder_bytes(out)
    subprocess.run(["rm", "-rf", out])
    return s


def folder_bytes(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def run_measured(cmd, cwd=None):
    """Runs cmd to completion; returns (rc, stdout, stderr, peak RSS of that command in bytes).

    The peak comes from GNU time, whose child is forked from a small process: a child forked
    from this Python process would carry this process's own peak RSS across exec into its
    ru_maxrss (26 MiB here), which would overstate small commands."""
    gnu_time = "/usr/bin/time"
    with tempfile.TemporaryDirectory(prefix="tessera-measured-") as d:
        rss_file = os.path.join(d, "rss")
        full = [gnu_time, "-f", "%M", "-o", rss_file, *cmd] if os.path.exists(gnu_time) else cmd
        with open(os.path.join(d, "out"), "w+") as out, open(os.path.join(d, "err"), "w+") as err:
            p = subprocess.Popen(full, stdout=out, stderr=err, text=True, cwd=cwd)
            _, status, ru = os.wait4(p.pid, 0)
            p.returncode = os.waitstatus_to_exitcode(status)
            out.seek(0)
            err.seek(0)
            o, e = out.read(), err.read()
        if full is cmd:
            rss = ru.ru_maxrss * 1024  # KiB; includes this process's peak (see above)
        else:
            with open(rss_file) as f:
                rss = int(f.read().split()[-1]) * 1024  # %M: KiB
        return p.returncode, o, e, rss


def run_gpmetis(graph, k):
    cmd = ["gpmetis", graph, str(k)]
    log(" ".join(cmd))
    rc, out, err, rss = run_measured(cmd, cwd=os.path.dirname(graph))
    if rc != 0:
        sys.exit(f"gpmetis failed:\n{out}\n{err}")
    cut = int(re.search(r"Edgecut:\s*(\d+)", out).group(1))
    t = float(re.search(r"Partitioning:\s*([\d.]+) sec", out).group(1))
    part_file = f"{graph}.part.{k}"
    if os.path.exists(part_file):
        os.remove(part_file)
    return {"command": " ".join(cmd), "edge_cut": cut, "metis_seconds": t,
            "peak_rss_bytes": rss}


def inflate_seconds(path, repeats=3):
    """Fastest of `repeats` streaming inflates of a gzip file (zlib, 1 MiB chunks, output
    dropped): the time any reader of that file spends before it has the text."""
    best = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        d = zlib.decompressobj(wbits=31)
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                d.decompress(chunk)
        d.flush()
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    return best


def write_seconds(nbytes, folder, repeats=3):
    """Fastest of `repeats` plain writes of nbytes (8 MiB blocks) to one file in folder, without
    fsync, the way the partitioner writes: the cost of putting its output on this filesystem."""
    block = os.urandom(8 << 20)
    path = os.path.join(folder, "write-floor.bin")
    best = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        with open(path, "wb") as f:
            left = nbytes
            while left > 0:
                n = min(left, len(block))
                f.write(block[:n] if n < len(block) else block)
                left -= n
        dt = time.perf_counter() - t0
        os.remove(path)
        best = dt if best is None else min(best, dt)
    return best


def phase(s, name):
    return sum(p["seconds"] for p in s["phases"] if p["name"] == name)


def pipeline_summary(s):
    """Overhead = the run's time outside the METIS call: its wall time (the process, start to
    exit) less METIS; memory against CSR + features. `total_seconds` is the sum of the timed
    phases, which leaves out the process's start, exit and the time between phases."""
    metis = phase(s, "METIS")
    total = sum(p["seconds"] for p in s["phases"])
    overhead = s.get("wall_seconds", total) - metis
    n, e = s["num_nodes"], s["num_edges"]
    csr_bytes = 8 * (n + 1) + 16 * e  # indptr + indices + eids, int64
    feat_bytes = s.get("feature_bytes", 0)
    return {
        "metis_seconds": metis,
        "total_seconds": total,
        "wall_seconds": s.get("wall_seconds"),
        "overhead_seconds": overhead,
        "overhead_over_metis": overhead / metis if metis > 0 else None,
        "csr_bytes": csr_bytes,
        "feature_bytes": feat_bytes,
        "peak_rss_bytes": s["peak_rss_bytes"],
        "peak_over_csr_plus_features": s["peak_rss_bytes"] / (csr_bytes + feat_bytes),
        # What the METIS call added to the process's high-water mark: libmetis's own working
        # memory (its copies of the graph, the coarsening levels), less whatever was free below
        # the earlier peak.
        "metis_rss_increase_bytes": metis_increase(s),
        "metis_rss_increase_over_csr": metis_increase(s) / csr_bytes,
    }


def metis_increase(s):
    before = 0
    for p in s["phases"]:
        if p["name"] == "METIS":
            return max(0, p["peak_rss_bytes"] - before)
        before = max(before, p["peak_rss_bytes"])
    return 0


_INFLATE = {}  # input path -> inflate_seconds
_WRITE = {}  # output bytes -> write_seconds


def floors(s, inp, tmp):
    """Work no partitioner of this input avoids, measured now on this machine: inflating the
    input when it is gzip (zlib, streaming: the readers may not buffer the whole text) and writing
    the output's bytes. Their sum against METIS bounds how low overhead_over_metis can go."""
    # Each floor depends only on the input (inflate) or on the output's size (write), which the
    # -low-memory run shares with the plain one: measured once per value, not once per run.
    if inp not in _INFLATE:
        _INFLATE[inp] = inflate_seconds(inp) if inp.endswith(".gz") else 0.0
    if s["output_bytes"] not in _WRITE:
        _WRITE[s["output_bytes"]] = write_seconds(s["output_bytes"], tmp)
    inflate, write = _INFLATE[inp], _WRITE[s["output_bytes"]]
    metis = phase(s, "METIS")
    return {"floor": {"inflate_seconds": inflate, "write_seconds": write,
                      "output_bytes": s["output_bytes"], "seconds": inflate + write,
                      "over_metis": (inflate + write) / metis if metis > 0 else None}}


def gpmetis_memory(s, g):
    """gpmetis's peak RSS (reading the .graph and partitioning) against the CSR size of the same
    graph in Tessera (int64 indptr, indices and edge IDs)."""
    csr = 8 * (s["num_nodes"] + 1) + 16 * s["num_edges"]
    return {"gpmetis_peak_rss_bytes": g["peak_rss_bytes"],
            "gpmetis_peak_over_csr": g["peak_rss_bytes"] / csr,
            "tessera_peak_rss_bytes": s["peak_rss_bytes"],
            "tessera_peak_over_csr": s["peak_rss_bytes"] / csr}


def balance(s):
    nodes = [p["inner_nodes"] for p in s["parts"]]
    edges = [p["inner_edges"] for p in s["parts"]]
    mean = lambda v: sum(v) / len(v)
    return {"node_balance": max(nodes) / mean(nodes), "edge_balance": max(edges) / mean(edges)}


def plot(result, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib not installed: no plot (pip install matplotlib)")
        return
    fig, axes = plt.subplots(1, 3, figsize=(19, 5))
    runs = result["pipeline"]
    names = list(runs)
    labels = [n.replace("-low-memory", "\nlow-memory") for n in names]
    phases = []
    for r in runs.values():
        for p in r["stats"]["phases"]:
            if p["name"] not in phases:
                phases.append(p["name"])
    bottom = [0.0] * len(names)
    # Each phase in units of the run's own METIS time, so graphs of any size share one axis and
    # the targets (overhead < 0.3x METIS on ego-Twitter, < 2x on R-MAT) can be read off.
    for ph in phases:
        vals = [phase(runs[n]["stats"], ph) / max(runs[n]["metis_seconds"], 1e-9) for n in names]
        axes[0].bar(labels, vals, bottom=bottom, label=ph)
        bottom = [b + v for b, v in zip(bottom, vals)]
    floor = [1 + runs[n]["floor"]["over_metis"] if "floor" in runs[n] else None for n in names]
    if any(f is not None for f in floor):
        axes[0].plot([lb for lb, f in zip(labels, floor) if f is not None],
                     [f for f in floor if f is not None], "kv", ls="none",
                     label="METIS + floor (inflate + write)")
    axes[0].axhline(1.3, color="k", ls="--", lw=0.8)
    axes[0].text(-0.4, 1.33, "METIS + 0.3x overhead (ego-Twitter target)", fontsize=7)
    axes[0].set_ylabel("time / METIS time of the same run")
    axes[0].set_title("Partition pipeline time per phase (relative to METIS)")
    axes[0].legend(fontsize=7)
    axes[0].tick_params(axis="x", labelsize=6, rotation=20)
    # Peak memory against CSR + features, beside gpmetis's own peak on the same graph.
    peaks = [runs[n]["peak_over_csr_plus_features"] for n in names]
    axes[1].bar(labels, peaks, color=["tab:orange" if "low-memory" in n else "tab:blue"
                                      for n in names])
    gp = {}
    for c in result.get("gpmetis_comparison", []):
        if c["case"].startswith("ego-Twitter"):
            gp.setdefault("ego-Twitter", c["gpmetis_peak_over_csr"])
    if "gpmetis_rmat" in result:
        gp["rmat"] = result["gpmetis_rmat"]["gpmetis_peak_over_csr"]
    xs, ys = [], []
    for lb, n in zip(labels, names):
        key = "ego-Twitter" if n.startswith("ego-Twitter") else "rmat"
        if key in gp:
            xs.append(lb)
            ys.append(gp[key])
    if xs:
        axes[1].plot(xs, ys, "k_", ms=28, mew=2, ls="none", label="gpmetis alone (same graph)")
    axes[1].axhline(2.5, color="k", ls="--", lw=0.8, label="target 2.5x")
    axes[1].set_ylabel("peak RSS / (CSR + features)")
    axes[1].set_title("Peak memory (orange: --low-memory)")
    axes[1].legend(fontsize=7)
    axes[1].tick_params(axis="x", labelsize=6, rotation=20)
    cmp = result["gpmetis_comparison"]
    clabels = [c["case"] for c in cmp]
    x = range(len(clabels))
    axes[2].bar([i - 0.2 for i in x], [c["tessera_edge_cut"] for c in cmp], 0.4, label="Tessera")
    axes[2].bar([i + 0.2 for i in x], [c["gpmetis_edge_cut"] for c in cmp], 0.4, label="gpmetis")
    axes[2].set_xticks(list(x))
    axes[2].set_xticklabels(clabels, fontsize=7, rotation=15)
    axes[2].set_ylabel("edge cut")
    axes[2].set_title("METIS edge cut: Tessera vs gpmetis")
    axes[2].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    log(f"plot: {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--tessera", default=os.path.join(ROOT, "build", "bin", "tessera"))
    ap.add_argument("--datasets", default=os.path.join(ROOT, "data"))
    ap.add_argument("--out", default=None,
                    help="results JSON (default results/partition/<date>-<commit>-<machine>.json)")
    ap.add_argument("--rmat-scale", type=int, default=22)
    ap.add_argument("--rmat-edge-factor", type=int, default=16)
    ap.add_argument("--rmat-parts", default="4,8", help="part counts for the R-MAT graph")
    ap.add_argument("--gpmetis-rmat", action="store_true",
                    help="also run gpmetis on the R-MAT graph (its peak memory; minutes, ~12 GiB)")
    ap.add_argument("--plot-only", metavar="JSON", help="only redraw the plot of a results file")
    a = ap.parse_args()
    if a.plot_only:
        with open(a.plot_only) as f:
            plot(json.load(f), os.path.splitext(a.plot_only)[0] + ".png")
        return
    ego = os.path.join(a.datasets, "snap", "ego-Twitter.txt.gz")
    mdual = os.path.join(a.datasets, "metis", "mdual.graph.gz")
    for p in (a.tessera, ego, mdual):
        if not os.path.exists(p):
            sys.exit(f"missing: {p}")
    commit = os.environ.get("TESSERA_COMMIT") or subprocess.run(
        ["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
        text=True).stdout.strip() or "unknown"
    if a.out is None:
        day = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
        host = re.sub(r"[^A-Za-z0-9]+", "-", platform.node()).strip("-") or "unknown"
        a.out = os.path.join(HERE, "results", "partition",
                             f"{day}-{commit.replace('+', '-')}-{host}.json")
    result = {
        "benchmark": "partition pipeline",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "commit": commit,
        "machine": {"host": platform.node(), "cpus": os.cpu_count(), "platform": platform.platform()},
        "command": " ".join(sys.argv),
        "pipeline": {},
        "metis_vs_random": [],
        "gpmetis_comparison": [],
    }
    sym = ["--symmetrize", "--drop-self-loops", "--dedup"]
    with tempfile.TemporaryDirectory(prefix="tessera-bench-") as tmp:
        # 1. Pipeline time/memory per phase, METIS vs random cut and balance.
        rmat = f"rmat:{a.rmat_scale},{a.rmat_edge_factor}"
        rmat_parts = [int(x) for x in a.rmat_parts.split(",")]
        for gname, inp, ks in (("ego-Twitter", ego, [4, 8]),
                               (f"rmat-{a.rmat_scale}-{a.rmat_edge_factor}", rmat, rmat_parts)):
            for k in ks:
                runs = {}
                # METIS twice: as it is, and with --low-memory (the CSR parked on disk while
                # METIS runs and from relabel on: lower peak, one more write and read).
                for method, extra in (("metis", []), ("metis", ["--low-memory"]),
                                      ("random", [])):
                    tag = f"{gname}-{method}-{k}" + ("-low-memory" if extra else "")
                    s = run_tessera(a.tessera, ["--input", inp, *sym, "--parts", str(k),
                                                "--method", method, "--halo-hops", "1", *extra],
                                    tmp, tag)
                    if not extra:
                        runs[method] = s
                    if method == "metis":
                        result["pipeline"][tag] = {"stats": s, **pipeline_summary(s),
                                                   **floors(s, inp, tmp)}
                result["metis_vs_random"].append({
                    "graph": gname, "parts": k,
                    "metis_edge_cut": runs["metis"]["edge_cut"],
                    "random_edge_cut": runs["random"]["edge_cut"],
                    "metis_cut_fraction": runs["metis"]["edge_cut_fraction"],
                    "random_cut_fraction": runs["random"]["edge_cut_fraction"],
                    "metis_balance": balance(runs["metis"]),
                    "random_balance": balance(runs["random"]),
                })
        # 2. Edge cut against Debian's gpmetis on the same graph and default settings.
        ego_graph = os.path.join(tmp, "ego-Twitter.graph")
        log("writing ego-Twitter (symmetrized) as a METIS .graph for gpmetis")
        subprocess.run([sys.executable, os.path.join(HERE, "to_metis_graph.py"), ego, ego_graph],
                       check=True)
        mdual_copy = os.path.join(tmp, "mdual.graph")
        with gzip.open(mdual, "rb") as src, open(mdual_copy, "wb") as dst:  # gpmetis: plain only
            shutil.copyfileobj(src, dst)
        for case, inp, gpath, extra in (("mdual", mdual, mdual_copy, []),
                                        ("ego-Twitter", ego, ego_graph, sym)):
            for k in (4, 8):
                s = run_tessera(a.tessera, ["--input", inp, *extra, "--parts", str(k),
                                            "--method", "metis", "--halo-hops", "0"], tmp,
                                f"cmp-{case}-{k}")
                g = run_gpmetis(gpath, k)
                diff = (s["edge_cut"] - g["edge_cut"]) / g["edge_cut"]
                result["gpmetis_comparison"].append({
                    "case": f"{case} k={k}", "parts": k,
                    "tessera_edge_cut": s["edge_cut"], "gpmetis_edge_cut": g["edge_cut"],
                    "relative_difference": diff, "within_3_percent": abs(diff) <= 0.03,
                    "tessera_metis_seconds": phase(s, "METIS"),
                    "gpmetis_metis_seconds": g["metis_seconds"],
                    **gpmetis_memory(s, g),
                    "tessera_command": s["command"], "gpmetis_command": g["command"],
                })
        # 3. Optionally gpmetis's own peak memory on the R-MAT graph: whether METIS alone, outside
        #    Tessera, already needs more than the 2.5x (CSR + features) budget.
        if a.gpmetis_rmat:
            k = rmat_parts[0]
            rdir = os.path.join(tmp, "rmat-npy")
            log(f"writing {rmat} as an npy dataset, then as a METIS .graph for gpmetis")
            subprocess.run([a.tessera, "generate", "rmat", "--scale", str(a.rmat_scale),
                            "--edge-factor", str(a.rmat_edge_factor), "--out", rdir], check=True,
                           stdout=subprocess.DEVNULL)
            rgraph = os.path.join(tmp, "rmat.graph")
            subprocess.run([sys.executable, os.path.join(HERE, "to_metis_graph.py"), rdir, rgraph],
                           check=True)
            subprocess.run(["rm", "-rf", rdir], check=True)
            s = result["pipeline"][f"rmat-{a.rmat_scale}-{a.rmat_edge_factor}-metis-{k}"]["stats"]
            g = run_gpmetis(rgraph, k)
            result["gpmetis_rmat"] = {"case": f"{rmat} k={k}", "gpmetis_edge_cut": g["edge_cut"],
                                      "tessera_edge_cut": s["edge_cut"],
                                      "gpmetis_metis_seconds": g["metis_seconds"],
                                      "gpmetis_command": g["command"], **gpmetis_memory(s, g)}
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=2)
    log(f"results: {a.out}")
    plot(result, os.path.splitext(a.out)[0] + ".png")

    print("\nPipeline (everything except the METIS call, against METIS's own time):")
    for tag, r in result["pipeline"].items():
        print(f"  {tag:31s} METIS {r['metis_seconds']:7.2f} s  overhead {r['overhead_seconds']:7.2f} s"
              f"  = {r['overhead_over_metis']:.2f}x METIS   peak {r['peak_rss_bytes'] / 2**30:.2f} GiB"
              f" = {r['peak_over_csr_plus_features']:.2f}x (CSR + features)")
        f = r["floor"]
        line = (f"  {'':31s} floor: inflate {f['inflate_seconds']:.3f} s + write "
                f"{f['output_bytes'] / 2**20:.0f} MiB {f['write_seconds']:.3f} s = "
                f"{f['over_metis']:.2f}x METIS")
        if not tag.endswith("-low-memory"):  # there the CSR left before METIS came in
            line += (f";  METIS added {r['metis_rss_increase_bytes'] / 2**30:.2f} GiB ="
                     f" {r['metis_rss_increase_over_csr']:.2f}x CSR")
        print(line)
    print("\nMETIS vs random (undirected edge cut, node balance max/mean):")
    for r in result["metis_vs_random"]:
        print(f"  {r['graph']:18s} k={r['parts']}  METIS {r['metis_edge_cut']:>10d}"
              f" ({100 * r['metis_cut_fraction']:.1f}%, bal {r['metis_balance']['node_balance']:.3f})"
              f"  random {r['random_edge_cut']:>10d} ({100 * r['random_cut_fraction']:.1f}%,"
              f" bal {r['random_balance']['node_balance']:.3f})")
    print("\nEdge cut vs gpmetis (same graph, default METIS options):")
    for c in result["gpmetis_comparison"]:
        print(f"  {c['case']:16s} Tessera {c['tessera_edge_cut']:>8d}  gpmetis {c['gpmetis_edge_cut']:>8d}"
              f"  diff {100 * c['relative_difference']:+.2f}%  {'OK' if c['within_3_percent'] else 'OFF'}"
              f"   peak RSS / CSR: gpmetis {c['gpmetis_peak_over_csr']:.2f}x,"
              f" tessera partition {c['tessera_peak_over_csr']:.2f}x")
    if "gpmetis_rmat" in result:
        c = result["gpmetis_rmat"]
        print(f"\ngpmetis on {c['case']}: edge cut {c['gpmetis_edge_cut']} (Tessera"
              f" {c['tessera_edge_cut']}), peak RSS {c['gpmetis_peak_rss_bytes'] / 2**30:.2f} GiB ="
              f" {c['gpmetis_peak_over_csr']:.2f}x CSR; tessera partition"
              f" {c['tessera_peak_over_csr']:.2f}x")


if __name__ == "__main__":
    main()
