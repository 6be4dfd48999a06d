#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Loading a partition (``tessera.DistGraph``) against reading its files, in the same run.

    python3 benchmarks/load_partition.py CONFIG.json [--repeat 5] [--machine-name cpu-2core]
        [--out benchmarks/results/load-partition]

Each repeat is a fresh process of one rank that first reads every file of partition 0 with
plain reads (the floor of loading it, with the files then in the page cache as a load finds
them) and then constructs the DistGraph, as ``train_sage.py`` does before training. Reports
both times per repeat, their medians and the ratio load / files (the target is at most 1).
Writes <out>/<date>-<commit>-<machine>.json and the plot beside it (.png)."""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def worker(config: str) -> int:
    import tessera
    from tessera.utils import read_partition_files

    with open(config) as f:
        name = json.load(f)["graph_name"]
    files = read_partition_files(config, 0)
    t0 = time.time()
    g = tessera.DistGraph(name, part_config=config)
    load = time.time() - t0
    print(json.dumps({"files_seconds": files, "load_seconds": load, "num_nodes": g.num_nodes(),
                      "num_edges": g.num_edges()}))
    return 0


def plot(res: dict, path: str) -> None:
    from tessera.utils import pyplot

    plt = pyplot("load_partition")
    if plt is None:
        return
    runs = res["runs"]
    x = range(len(runs))
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.bar([i - 0.2 for i in x], [r["files_seconds"] for r in runs], 0.4,
           label="reading the files (the floor)")
    ax.bar([i + 0.2 for i in x], [r["load_seconds"] for r in runs], 0.4,
           label="DistGraph load")
    ax.set_xticks(list(x), [f"run {i + 1}" for i in x])
    ax.set_ylabel("seconds")
    ax.set_title(f"{res['graph']}: {res['num_nodes']:,} nodes, {res['num_edges']:,} edges; "
                 f"load / files {res['ratio_load_vs_files']:.2f}", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def median(xs):
    s = sorted(xs)
    return s[len(s) // 2] if len(s) % 2 else 0.5 * (s[len(s) // 2 - 1] + s[len(s) // 2])


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        return worker(sys.argv[2])
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("config", help="a partition config (<out>/<name>.json of tessera partition)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--machine-name", default="cpu-2core")
    ap.add_argument("--out", default=os.path.join(REPO, "benchmarks", "results",
                                                  "load-partition"))
    a = ap.parse_args()
    if a.repeat < 1:
        ap.error("--repeat must be >= 1")
    if not os.path.isfile(a.config):
        ap.error(f"{a.config}: no such partition config")
    from tessera.utils import commit_id

    runs = []
    for i in range(a.repeat):
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", a.config],
                           capture_output=True, text=True)
        if p.returncode != 0:
            print(p.stderr[-4000:], file=sys.stderr)
            raise SystemExit(f"load_partition: repeat {i + 1} failed (exit {p.returncode})")
        runs.append(json.loads(p.stdout.strip().splitlines()[-1]))
        print(f"[load_partition] run {i + 1}/{a.repeat}: load {runs[-1]['load_seconds']:.2f} s, "
              f"files {runs[-1]['files_seconds']:.2f} s", file=sys.stderr, flush=True)
    with open(a.config) as f:
        graph = json.load(f)["graph_name"]
    files = median([r["files_seconds"] for r in runs])
    load = median([r["load_seconds"] for r in runs])
    commit = commit_id(os.path.abspath(__file__))
    date = datetime.date.today().isoformat()
    res = {"benchmark": "load-partition",
           "command": " ".join(["benchmarks/load_partition.py"] + sys.argv[1:]),
           "commit": commit, "date": date, "machine": a.machine_name,
           "host": {"cpu": platform.processor() or platform.machine(),
                    "hardware_threads": os.cpu_count()},
           "graph": graph, "num_nodes": runs[0]["num_nodes"], "num_edges": runs[0]["num_edges"],
           "repeats": a.repeat, "files_median_seconds": files, "load_median_seconds": load,
           "ratio_load_vs_files": load / files if files > 0 else None, "runs": runs}
    os.makedirs(a.out, exist_ok=True)
    out = os.path.join(a.out, f"{date}-{commit}-{a.machine_name}.json")
    with open(out, "w") as f:
        json.dump(res, f, indent=1)
        f.write("\n")
    plot(res, os.path.splitext(out)[0] + ".png")
    print(f"load {load:.2f} s against {files:.2f} s of file reads (median of {a.repeat}): "
          f"{res['ratio_load_vs_files']:.2f}; wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
