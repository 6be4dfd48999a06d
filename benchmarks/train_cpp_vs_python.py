#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Time per training step: `tessera train` (C++, libtorch) against python/examples/train_sage.py
on the same partitions, the same batches and the same hyper-parameters, in the same run.

    python3 benchmarks/train_cpp_vs_python.py --tool build/bin/tessera \
        --datasets data/cora,data/tolokers --ranks 1,2 --epochs 6 --machine cpu-2core

For every (dataset, ranks) both trainers run `--repeats` times, alternating which goes first
(Python then C++ in the first repeat, C++ then Python in the second, and so on; each run records
its place as `ran_first`), under `tessera launch` when ranks > 1. A step's time is the epochs' training seconds
(evaluation excluded) divided by their steps, over every epoch but the first (warm-up), taken
from each trainer's --results JSON; the split into loader wait / forward+backward / all-reduce /
optimizer / other comes from the same JSON. The final test metric of each run is recorded too.
Writes benchmarks/results/train-cpp/<date>-<commit>-<machine>.json and a .png beside it (the
commit ends in -dirty when tracked files were modified).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
PARTS = ("wait", "forward_backward", "all_reduce", "optimizer", "other")


def commit() -> str:
    """TESSERA_COMMIT when set (a copied tree, as on a GPU machine), else git's HEAD (+dirty)."""
    from tessera.utils import commit_id

    return commit_id(__file__, dirty=True)


def result_name(day: str, commit_id: str, machine: str) -> str:
    """<date>-<commit>-<machine>.json, a dirty commit's "+dirty" written "-dirty" (the results
    layout, benchmarks/results_table.py)."""
    return f"{day}-{commit_id.replace('+dirty', '-dirty')}-{machine}.json"


def order(rep: int) -> tuple:
    """Which trainer runs first in repeat `rep`: Python in the even repeats, C++ in the odd, so
    neither always runs on a machine the other has just warmed (or heated)."""
    return ("python", "cpp") if rep % 2 == 0 else ("cpp", "python")


def run(argv, what):
    t = datetime.datetime.now()
    out = subprocess.run(argv, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{what} failed ({out.returncode}):\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    print(f"  {what}: {(datetime.datetime.now() - t).total_seconds():.1f}s", file=sys.stderr,
          flush=True)


def summarize(path: str) -> dict:
    r = json.load(open(path))
    split = r["splits"]["0"]
    hist = split["history"][1:] or split["history"]  # the first epoch warms up
    steps = sum(e["steps"] for e in hist)
    train_s = sum(e["seconds"] for e in hist)
    parts = {k: 1e3 * sum(e["split"].get(k, 0.0) for e in hist) / steps for k in PARTS}
    out = {"ms_per_step": 1e3 * train_s / steps, "parts_ms_per_step": parts, "steps": steps,
           "test": split["test_at_best"], "final_test": split["final_test"],
           "losses": [e["loss"] for e in split["history"]], "metric": r["metric"]}
    ops = [e.get("op_seconds") for e in hist]
    if all(isinstance(o, (int, float)) for o in ops):
        out["op_ms_per_step"] = 1e3 * sum(ops) / steps
    return out


def plot(doc: dict, png: str) -> None:
    """Stacked bars of each row's best run: Python left, C++ right (hatched)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("[bench] matplotlib missing: no plot", file=sys.stderr)
        return
    rows = doc["rows"]
    fig, ax = plt.subplots(figsize=(2.2 + 1.6 * len(rows), 4.2))
    labels = []
    for x, row in enumerate(rows):
        for k, off, hatch in (("python", -0.2, ""), ("cpp", 0.2, "//")):
            parts = min(row["runs"][k], key=lambda s: s["ms_per_step"])["parts_ms_per_step"]
            bottom = 0.0
            for i, part in enumerate(PARTS):
                ax.bar(x + off, parts[part], 0.38, bottom=bottom, color=f"C{i}", hatch=hatch,
                       label=part if x == 0 and k == "python" else None)
                bottom += parts[part]
        labels.append(f"{row['dataset']}\nP={row['ranks']}\n{row['speedup']:.2f}x")
    ax.set_xticks(range(len(rows)), labels)
    ax.set_ylabel("ms per training step")
    ax.set_title(f"train_sage.py (left) vs tessera train (right, hatched)\n{doc['device']}, "
                 f"{doc['threads']} thread(s) per rank, {doc['machine']}", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=120)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tool", default=os.path.join(REPO, "build", "bin", "tessera"),
                   help="the tessera tool built with -DTESSERA_WITH_TORCH=ON")
    p.add_argument("--datasets", default="data/cora,data/tolokers")
    p.add_argument("--ranks", default="1,2")
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    p.add_argument("--device", default="cpu")
    p.add_argument("--machine", default="cpu-2core")
    p.add_argument("--out", default=None, help="results JSON (default under "
                   "benchmarks/results/train-cpp/)")
    p.add_argument("--replot", default=None, metavar="JSON",
                   help="only redraw the plot of an earlier results JSON (beside it)")
    a = p.parse_args(argv)
    if a.replot:
        plot(json.load(open(a.replot)), a.replot[:-5] + ".png")
        return 0
    if not os.access(a.tool, os.X_OK):
        sys.exit(f"--tool {a.tool}: not an executable (build it with -DTESSERA_WITH_TORCH=ON)")
    info = subprocess.run([a.tool, "info"], capture_output=True, text=True).stdout
    if "libtorch trainer" not in info:
        sys.exit(f"--tool {a.tool}: built without the trainer (-DTESSERA_WITH_TORCH=ON)")
    datasets = [d for d in a.datasets.split(",") if d]
    for d in datasets:
        if not os.path.isdir(d):
            sys.exit(f"--datasets: {d} is not a dataset folder")
    ranks = [int(r) for r in a.ranks.split(",")]
    example = os.path.join(REPO, "python", "examples", "train_sage.py")
    rows = []
    with tempfile.TemporaryDirectory(prefix="train-cpp-bench-") as tmp:
        for d in datasets:
            name = os.path.basename(os.path.normpath(d))
            for P in ranks:
                part_dir = os.path.join(tmp, f"{name}-p{P}")
                common = ["--dataset", d, "--part-dir", part_dir, "--epochs", str(a.epochs),
                          "--threads", str(a.threads), "--device", a.device, "--quiet"]
                launch = [a.tool, "launch", "--nproc-per-node", str(P), "--"] if P > 1 else []
                runs = {"python": [], "cpp": []}
                for rep in range(a.repeats):
                    print(f"[bench] {name} at {P} rank(s), repeat {rep + 1}/{a.repeats}",
                          file=sys.stderr, flush=True)
                    for who in order(rep):
                        res = os.path.join(tmp, f"{who}-{name}-{P}-{rep}.json")
                        if who == "python":
                            run(launch + [sys.executable, example, *common, "--results", res,
                                          "--plot", os.path.join(tmp, "py.png")],
                                "python train_sage.py")
                        else:
                            run(launch + [a.tool, "train", *common, "--results", res,
                                          "--loss-curve", os.path.join(tmp, "cpp.csv")],
                                "tessera train")
                        runs[who].append(dict(summarize(res), ran_first=who == order(rep)[0]))
                best = {k: min(v, key=lambda s: s["ms_per_step"]) for k, v in runs.items()}
                row = {"dataset": name, "ranks": P, "runs": runs,
                       "python_ms_per_step": best["python"]["ms_per_step"],
                       "cpp_ms_per_step": best["cpp"]["ms_per_step"]}
                row["speedup"] = row["python_ms_per_step"] / row["cpp_ms_per_step"]
                rows.append(row)
                print(f"[bench] {name} P={P}: python {row['python_ms_per_step']:.2f} ms/step, "
                      f"C++ {row['cpp_ms_per_step']:.2f} ms/step ({row['speedup']:.2f}x)",
                      file=sys.stderr, flush=True)
    day, head = datetime.date.today().isoformat(), commit()
    out = a.out or os.path.join(REPO, "benchmarks", "results", "train-cpp",
                                result_name(day, head, a.machine))
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    doc = {"command": " ".join([os.path.relpath(sys.argv[0], REPO)] + (argv or sys.argv[1:])),
           "machine": a.machine, "commit": head, "date": day, "threads": a.threads,
           "device": a.device, "epochs": a.epochs, "repeats": a.repeats, "rows": rows}
    with open(out + ".tmp", "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(out + ".tmp", out)
    plot(doc, out[:-5] + ".png")
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
