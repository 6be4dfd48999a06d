#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Plot GPU sampling results (`tessera bench sample --device cuda --sweep ...`): sampled edges/s
against batch size, one stream and the best configuration, next to the limit measured in the
same run.

    python benchmarks/plot_sample_gpu.py benchmarks/results/sample-cuda-*/DATE-*.json --out g.png

One panel per result file (placement, weighted or not). Each panel draws the sweep's two lines
(one stream with a call per batch; the best configuration the run found) and a dashed line at
the limit: sampled edges per second when a plain kernel reads, for the frontier visits of
batches of that size, only what the sampler must read of the placed graph (docs/sampling.md,
"The GPU benchmark's limit"). Files written before each size had its own limit draw the main
run's as a flat line; files written before that limit existed carry a single-entry random-read
rate instead, drawn as such. A table of the figures is printed as well.
"""
import argparse
import json
import sys


def read_json(path):
    """The JSON in `path`; exits with one line naming the file when it is missing or not JSON."""
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        sys.exit(f"plot_sample_gpu: cannot read {path}: {e.strerror}")
    except json.JSONDecodeError as e:
        sys.exit(f"plot_sample_gpu: {path} is not JSON ({e.msg} at line {e.lineno})")


def load(paths):
    runs = []
    for p in paths:
        j = read_json(p)
        if not isinstance(j, dict) or j.get("benchmark") != "sample" or "sweep" not in j:
            print(f"{p}: not a GPU sampling result with a batch-size sweep, skipped",
                  file=sys.stderr)
            continue
        prm = j.get("params", {})
        label = (f"{j['graph'].get('spec')} {j['graph'].get('placement')}"
                 + (" weighted" if prm.get("weighted") else "")
                 + f", [{','.join(str(f) for f in prm.get('fanouts', []))}]")
        runs.append((label, j))
    if not runs:
        sys.exit("plot_sample_gpu: no results with a batch-size sweep among the files given")
    return runs


def config_name(m):
    s = f"{m['batches_per_call']}/call, {m['streams']} stream{'s' if m['streams'] > 1 else ''}"
    return s + (", 2 in flight" if m.get("pipelined") else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", help="bench sample --device cuda JSON files")
    ap.add_argument("--out", required=True, help="PNG to write")
    a = ap.parse_args()
    runs = load(a.results)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(runs), figsize=(5.5 * len(runs), 4.2), squeeze=False)
    for ax, (label, j) in zip(axes[0], runs):
        sweep = sorted(j["sweep"], key=lambda s: s["batch_size"])
        bs = [s["batch_size"] for s in sweep]
        one = [s["one_stream"]["edges_per_s"] / 1e9 for s in sweep]
        best = [s["best"]["edges_per_s"] / 1e9 for s in sweep]
        lim = j["limit"]
        row_reads = "edges_per_s" in lim
        limit = (lim["edges_per_s"] if row_reads else lim["random_reads_per_s"]) / 1e9
        limit_name = "limit (row reads)" if row_reads else "random-read rate"
        # Each batch size's own limit where the run measured one; else the main run's.
        limits = [s.get("limit_edges_per_s", limit * 1e9) / 1e9 for s in sweep]
        ax.plot(bs, one, "o-", label="one stream, a call per batch")
        ax.plot(bs, best, "s-", label="best: " + config_name(sweep[0]["best"]))
        if any("limit_edges_per_s" in s for s in sweep):
            ax.plot(bs, limits, "--", color="grey", label="limit of each batch size (row reads)")
        else:
            ax.axhline(limit, color="grey", ls="--",
                       label=f"{limit_name} {limit:.2f} G/s")
        tgt = (j.get("target") or {}).get("edges_per_s")  # null: no target (weighted UVA)
        if tgt:
            ax.axhline(tgt / 1e9, color="tab:red", ls=":", label=f"target {tgt / 1e9:g} G/s")
        ax.set_xscale("log", base=2)
        ax.set_xticks(bs)
        ax.set_xticklabels([str(b) for b in bs])
        ax.set_xlabel("seeds per batch")
        ax.set_ylabel("sampled edges/s (G)")
        ax.set_ylim(bottom=0)
        ax.set_title(label, fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        print(f"{label} ({j.get('device', '')}; commit {j.get('commit')}):")
        print(f"  {limit_name} {limit:.3f} G/s, memcpy {lim['memcpy_gbps']:.1f} GB/s")
        for s, o, b, li in zip(bs, one, best, limits):
            print(f"  {s:>6} seeds: one stream {o:.3f} G/s ({o / li:.2f} of the limit), "
                  f"best {b:.3f} G/s ({b / li:.2f})")
    fig.tight_layout()
    fig.savefig(a.out, dpi=120)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
