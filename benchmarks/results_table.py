#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes benchmarks/results/README.md, the current figures, from the result JSON files.

    python3 benchmarks/results_table.py           # rewrite benchmarks/results/README.md
    python3 benchmarks/results_table.py --check   # exit 1 if the README is not what it writes,
                                                  # or a result breaks the layout rules

Layout: benchmarks/results/<bench>/<date>-<commit>-<machine>.json, one folder per benchmark and
configuration (the name `tessera bench ... --results DIR` and scripts/gpu-check give it), the
plots beside their JSON under the same name with .png. A run of several seeds adds
`.seed<N>` before `.json`. A folder holds the current run of its configuration only (one per
machine); a new run replaces the old one in the same commit, and git keeps the history.

The README is a function of the JSON files alone (no clock, no machine state), so CI can
compare the committed README with a fresh one.
"""
import argparse
import difflib
import json
import math
import os
import re
import statistics
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
NAME = re.compile(r"^(?P<date>\d{4}-\d{2}-\d{2})-(?P<commit>[0-9a-f]{7,40}(?:-dirty)?|unknown)-"
                  r"(?P<machine>[A-Za-z0-9-]+?)(?:\.(?P<variant>[A-Za-z0-9-]+))?\.(?P<ext>json|png)$")
DASH = "–"


# ---- reading the results ------------------------------------------------------------------------

class Run:
    """One run of one configuration: its JSON files (several for a run of several seeds) and
    its plots, named <date>-<commit>-<machine>[.<variant>].<ext>."""

    def __init__(self, bench, date, commit, machine):
        self.bench, self.date, self.commit, self.machine = bench, date, commit, machine
        self.files = {}  # variant ("" for none) -> parsed JSON
        self.plots = []  # file names

    @property
    def stem(self):
        return f"{self.date}-{self.commit}-{self.machine}"

    @property
    def data(self):
        """The JSON of a single-file run (the first variant of a multi-file one)."""
        return self.files[sorted(self.files)[0]]

    def link(self, variant=""):
        name = self.stem + (f".{variant}" if variant else "") + ".json"
        return f"[{self.date} · {self.commit} · {self.machine}]({self.bench}/{name})"

    def links(self):
        """Every JSON of the run: one link, or the run's name and a link per variant."""
        if list(self.files) == [""]:
            return self.link()
        return f"{self.date} · {self.commit} · {self.machine}: " + ", ".join(
            f"[{v}]({self.bench}/{self.stem}.{v}.json)" for v in sorted(self.files))


def scan(root=RESULTS):
    """{bench: [Run, newest first per machine]}, and the layout problems found."""
    problems, runs = [], {}
    for entry in sorted(os.listdir(root)):
        path = os.path.join(root, entry)
        if not os.path.isdir(path):
            if entry != "README.md":
                problems.append(f"{entry}: results go in a folder per benchmark, "
                                f"<bench>/<date>-<commit>-<machine>.json")
            continue
        by_stem = {}
        for name in sorted(os.listdir(path)):
            m = NAME.match(name)
            if not m:
                problems.append(f"{entry}/{name}: not named <date>-<commit>-<machine>.json "
                                f"(or .png, or .seed<N>.json)")
                continue
            key = (m["date"], m["commit"], m["machine"])
            run = by_stem.setdefault(key, Run(entry, *key))
            if m["ext"] == "png":
                run.plots.append(name)
                continue
            try:
                with open(os.path.join(path, name)) as f:
                    run.files[m["variant"] or ""] = json.load(f)
            except (OSError, ValueError) as e:
                problems.append(f"{entry}/{name}: unreadable ({e})")
        current = {}
        for key in sorted(by_stem, reverse=True):  # newest date first
            run = by_stem[key]
            if not run.files:
                problems.append(f"{entry}/{run.stem}.png: a plot without its JSON")
            elif run.machine in current:
                problems.append(f"{entry}/{run.stem}: superseded by {current[run.machine].stem} "
                                f"(keep the current run only; git keeps the history)")
            else:
                current[run.machine] = run
        if current:
            runs[entry] = [current[m] for m in sorted(current)]
    return runs, problems


#: Per benchmark (folder prefix): the fields the current harness writes that the table's figures
#: depend on, as dotted paths into the JSON, and what their absence means. A run whose files lack
#: one was made by an older harness: its figures were not measured the way the table's are, so
#: it is listed apart under *Older harness*, not as a current figure, until a rerun replaces it.
CURRENT_FIELDS = {
    "sample-cpu-": (("reference.round_ratios", "reference.repeats", "graph.node_order"),
                    "`tessera bench sample` on the CPU now times the reference and Tessera in "
                    "alternating rounds (the ratio: the median of the rounds') and records them "
                    "(`reference.round_ratios`, `reference.repeats`) and the node order "
                    "(`graph.node_order`). The runs below lack them: an older harness made "
                    "them, comparing the two sides batch by batch, and their figures were not "
                    "measured as the table's are, so the table leaves them out (a rerun of the "
                    "configuration replaces them)."),
}


def field(d, path):
    """The value at a dotted `path` of a JSON object, or None."""
    for key in path.split("."):
        if not isinstance(d, dict):
            return None
        d = d.get(key)
    return d


def older_harness(runs):
    """Splits `runs` into ({bench: [Run]} made by the current harness, {bench: [(Run, the
    CURRENT_FIELDS it lacks)]}): a run lacks a field when one of its files does."""
    current, older = {}, {}
    for bench, rs in runs.items():
        needed = next((f for p, (f, _) in CURRENT_FIELDS.items() if bench.startswith(p)), ())
        for r in rs:
            missing = [f for f in needed if any(field(d, f) is None for d in r.files.values())]
            if missing:
                older.setdefault(bench, []).append((r, missing))
            else:
                current.setdefault(bench, []).append(r)
    return current, older


def older_note(prefix, older):
    """The *Older harness* listing of the benchmarks named `prefix`, or ""."""
    rows = [[f"`{b}`", ", ".join(f"`{f}`" for f in missing), r.link()]
            for b in sorted(older) if b.startswith(prefix) for r, missing in older[b]]
    if not rows:
        return ""
    return (wrap("**Older harness.** " + CURRENT_FIELDS[prefix][1]) + "\n\n"
            + table(["configuration", "lacks", "run"], rows))


def machines(runs):
    """{machine tag: description} from the JSON of its runs (the fullest record wins)."""
    desc = {}
    for bench in sorted(runs):
        for run in runs[bench]:
            for variant in sorted(run.files):
                d = run.files[variant]
                m = d.get("machine") if isinstance(d, dict) else None
                text = ""
                if isinstance(m, dict):
                    cpu = m.get("cpu") if m.get("cpu") not in (None, "x86_64") else None
                    threads = m.get("hardware_threads") or m.get("cpus")
                    mem = m.get("memory_bytes")
                    parts = [cpu, f"{threads} hardware threads" if threads else None,
                             f"{mem / 2**30:.0f} GiB" if mem else None]
                    cuda = m.get("cuda")
                    if cuda and "[0]" in cuda:
                        parts.append(cuda.split("; ", 1)[-1])
                    text = ", ".join(p for p in parts if p)
                elif isinstance(d, dict) and d.get("gpu"):
                    text = d["gpu"]
                if len(text) > len(desc.get(run.machine, "")):
                    desc[run.machine] = text
    return desc


# ---- formatting ---------------------------------------------------------------------------------

def num(x, unit=""):
    """A rate or size with a metric prefix: 47.07M, 6.07G, 812K."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return DASH
    for scale, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(x) >= scale:
            return f"{x / scale:.2f}{prefix}{unit}"
    return f"{x:.3g}{unit}"


def fixed(x, digits=2):
    """A figure with `digits` decimals, or a dash when it is missing."""
    return DASH if x is None else f"{x:.{digits}f}"


def gbps(x):
    if x is None:
        return DASH
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    if x >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def ratio(x, suffix=""):
    return DASH if x is None else f"{x:.2f}{suffix}"


def ratio_range(x):
    """A peer benchmark's per-round ratios ({"median", "min", "max"}) as "1.23x (1.01–1.40)"."""
    return f"{x['median']:.2f}x ({x['min']:.2f}–{x['max']:.2f})" if x else DASH


def secs(x, unit=" s"):
    if x is None:
        return DASH
    return f"{x:.3f}{unit}" if x < 1 else f"{x:.2f}{unit}" if x < 100 else f"{x:.0f}{unit}"


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def plots_line(runs):
    links = [f"[{r.bench}/{p}]({r.bench}/{p})" for r in runs for p in sorted(r.plots)]
    return "Plots: " + ", ".join(links) + "." if links else ""


def recorded(d, field):
    """Whether a result JSON records `field` (command, commit or machine): at its top level, or
    in every entry of its `runs` list (a file that gathers several runs)."""
    if not isinstance(d, dict):
        return False
    if d.get(field) not in (None, "", "unknown"):
        return True
    sub = d.get("runs")
    return (isinstance(sub, list) and bool(sub) and
            all(isinstance(x, dict) and x.get(field) not in (None, "", "unknown") for x in sub))


def provenance(runs):
    """The runs whose JSON files do not all record the command, the commit and the machine,
    grouped by what they lack; empty when every file records all three."""
    fields = ("command", "commit", "machine")
    groups = {}
    for bench in sorted(runs):
        for run in runs[bench]:
            missing = tuple(f for f in fields
                            if not all(recorded(d, f) for d in run.files.values()))
            if missing:
                n = len(run.files)
                name = f"`{bench}/{run.stem}`" + (f" ({n} files)" if n > 1 else "")
                groups.setdefault(missing, []).append(name)
    if not groups:
        return ""
    lines = [wrap("**Provenance.** Every JSON should record the command, the commit and the "
                  "machine that produced it (the file name gives the date, and the commit and "
                  "machine where known). These runs lack some of that, in some or all of their "
                  "files:"), ""]
    for missing in sorted(groups, key=lambda m: (-len(m), m)):
        what = (", ".join(missing[:-1]) + " or " + missing[-1]) if len(missing) > 1 \
            else missing[0]
        lines.append(textwrap.fill(f"- no {what}: " + ", ".join(groups[missing]) + ".", 96,
                                   subsequent_indent="  ", break_on_hyphens=False,
                                   break_long_words=False))
    return "\n".join(lines)


def commands(runs):
    lines = []
    for r in runs:
        for variant in sorted(r.files):
            cmd = r.files[variant].get("command") if isinstance(r.files[variant], dict) else None
            if cmd:
                lines.append(f"- {r.link(variant)}: `{cmd}`")
    return "Commands:\n\n" + "\n".join(lines) if lines else ""


def wrap(text):
    """A paragraph of prose wrapped at 96 columns (never inside a word or at a hyphen)."""
    return textwrap.fill(" ".join(text.split()), 96, break_on_hyphens=False,
                         break_long_words=False)


def section(title, intro, body, runs):
    intro = wrap(intro)
    parts = [f"## {title}", intro, body.strip(), plots_line(runs), commands(runs)]
    return "\n\n".join(p for p in parts if p)


def select(runs, prefix, exclude=()):
    return [r for b in sorted(runs) if b.startswith(prefix)
            and not any(b.startswith(x) for x in exclude) for r in runs[b]]


# ---- one table per benchmark --------------------------------------------------------------------

def partition_section(runs):
    rs = select(runs, "partition")
    rows, cuts, gp = [], [], []
    for r in rs:
        d = r.data
        for key in sorted(d.get("pipeline", {})):
            p = d["pipeline"][key]
            m = re.match(r"^(.*)-metis-(\d+)(-low-memory)?$", key)
            case = f"{m[1]}, {m[2]} parts{', `--low-memory`' if m[3] else ''}" if m else key
            # Everything else: the run's wall time less the METIS call. Runs summarized before
            # partition_bench.py did so recorded the sum of the phases less METIS as
            # overhead_seconds, and their wall time beside the phases (stats.wall_seconds).
            metis = p.get("metis_seconds")
            wall = p.get("wall_seconds") or p.get("stats", {}).get("wall_seconds")
            other = wall - metis if wall is not None and metis is not None else None
            rows.append([case, secs(metis), secs(other),
                         ratio(other / metis if other is not None and metis else None, "x"),
                         ratio(p.get("floor", {}).get("over_metis"), "x"),
                         ratio(p.get("peak_over_csr_plus_features"), "x"),
                         f"{num(p.get('peak_rss_bytes'), 'B')}", r.link()])
        for c in d.get("metis_vs_random", []):
            cuts.append([c["graph"], c["parts"],
                         f"{c['metis_edge_cut']:,} ({100 * c['metis_cut_fraction']:.1f}%)",
                         f"{c['random_edge_cut']:,} ({100 * c['random_cut_fraction']:.1f}%)",
                         ratio(c["metis_balance"]["node_balance"]),
                         ratio(c["random_balance"]["node_balance"])])
        for c in d.get("gpmetis_comparison", []) + ([d["gpmetis_rmat"]] if d.get("gpmetis_rmat")
                                                     else []):
            diff = c.get("relative_difference")
            if diff is None and c.get("gpmetis_edge_cut"):
                diff = c["tessera_edge_cut"] / c["gpmetis_edge_cut"] - 1
            gp.append([c["case"], f"{c['tessera_edge_cut']:,}", f"{c['gpmetis_edge_cut']:,}",
                       f"{100 * diff:+.1f}%", ratio(c.get("tessera_peak_over_csr"), "x"),
                       ratio(c.get("gpmetis_peak_over_csr"), "x")])
    body = table(["input", "METIS call", "everything else", "everything else / METIS",
                  "floor / METIS", "peak RSS / (CSR + features)", "peak RSS", "run"], rows)
    body += "\n\nEdge cut (undirected pairs cut) and node balance, METIS against random:\n\n"
    body += table(["graph", "parts", "METIS cut", "random cut", "METIS node balance",
                   "random node balance"], cuts)
    body += "\n\n" + wrap("Tessera's METIS against Debian's `gpmetis` on the same graph with "
                          "default settings, in the same run (peak memory over the CSR size):")
    body += "\n\n"
    body += table(["case", "Tessera cut", "gpmetis cut", "difference", "Tessera peak / CSR",
                   "gpmetis peak / CSR"], gp)
    intro = """
`benchmarks/partition_bench.py`: `tessera partition` with a 1-hop halo on inputs symmetrized,
deduplicated and without self loops, METIS as it is and with `--low-memory`. *Everything else*
is the run's time outside the METIS call: the wall time of the `tessera partition` process, start
to exit, less the METIS call (a dash where the run did not record its wall time); the *floor* is what no partitioner of that input
avoids, measured in the same run (a streaming inflate of the gzip input plus writing the
output's bytes). Peak memory is the process's peak RSS over the size of the CSR and features.
"""
    return section("Partitioning", intro, body, rs)


def sample_config(d):
    g, p = d.get("graph", {}), d.get("params", {})
    mode = ("weighted" if p.get("weighted") else "uniform") + (
        ", with replacement" if p.get("replace") else "")
    order = g.get("node_order") or "stored"
    return [g.get("spec") or g.get("path") or DASH,
            "[" + ",".join(str(f) for f in p.get("fanouts", [])) + "]", mode,
            order, str(p.get("threads", DASH))]


def sample_cpu_section(runs):
    rs = select(runs, "sample-cpu-")
    rows = []
    for r in rs:
        d = r.data
        t, ref = d.get("tessera", {}), d.get("reference", {})
        rounds = [x for x in ref.get("round_ratios") or [] if x is not None]
        spread = f" ({min(rounds):.2f}–{max(rounds):.2f})" if rounds else ""
        # The median of the paired rounds (what ratio_per_core is since the bench reports it;
        # earlier runs recorded the ratio of each side's fastest round there).
        rows.append(sample_config(d) + [
            num(t.get("edges_per_s")), num(t.get("edges_per_cpu_second")),
            num(ref.get("tessera_edges_per_s")), num(ref.get("edges_per_s")),
            ratio(statistics.median(rounds) if rounds else d.get("ratio_per_core"), "x") + spread,
            num(d.get("limit", {}).get("random_reads_per_s")), r.link()])
    body = table(["graph", "fanouts", "mode", "node order", "threads", "edges/s (wall)",
                  "edges per CPU-second", "Tessera in the ratio rounds", "reference edges/s",
                  "ratio to the reference per core: median (single rounds)",
                  "random reads/s (limit)",
                  "run"], rows)
    intro = """
`tessera bench sample` on the CPU: multi-layer neighbor sampling with compaction into blocks,
batch 1024, on the symmetrized graph of the first column. *Edges/s* and *edges per CPU-second* are the timed run's; the *ratio per core*
compares Tessera with a plain single-threaded reference (std::mt19937, hash sets,
`std::unordered_map` compaction) on the same batches in alternating rounds timed in thread CPU
time: the median of the rounds' ratios (the range of the single rounds in parentheses); the
Tessera side is the sampler called in one thread, at the rate of its fastest round.
The *limit* is the random 8-byte reads per second the machine
served from the graph's memory in the same run, with the same threads (docs/sampling.md).
"""
    return section("Sampling on the CPU", intro, body, rs)


def sample_dgl_section(runs):
    rs = select(runs, "sample-peer-")
    rows = []
    for r in rs:
        d = r.data
        v = d.get("versions", {})
        for c in d.get("cases", []):
            if c.get("busy"):  # other processes had the machine: the rates are theirs
                continue
            rt = c.get("ratios", {})

            def cellr(key):
                return ratio_range(rt.get(key))

            g = c.get("graph", {})
            roof = c.get("roofline") or {}
            per_read = roof.get("tessera_edges_per_read")
            rows.append([g.get("spec", DASH), c.get("threads"),
                         f"DGL {v.get('dgl')}, torch {v.get('torch')}",
                         num(c.get("peers", {}).get("tessera", {}).get("edges_per_s_median")),
                         (f"{per_read:.2f} of {num(roof['random_reads_per_s_median'])}"
                          if per_read is not None else DASH),
                         cellr("tessera/dgl"), cellr("tessera/dgl-unfused"),
                         cellr("tessera/graphbolt"), cellr("tessera/tessera-cli"), r.link()])
    body = table(["graph", "threads", "peer versions", "Tessera edges/s (median round)",
                  "Tessera edges per random read (limit: reads/s, same run)",
                  "Tessera / DGL fused", "Tessera / DGL unfused", "Tessera / GraphBolt",
                  "Python call / CLI loader", "run"], rows)
    intro = """
`benchmarks/dgl_sample_peer.py`: what each library's user calls, on the same graph and seed
batches, [15,10,5], batch 1024, in alternating rounds: Tessera's plain Python
`NeighborSampler.sample_blocks`, DGL's `MultiLayerNeighborSampler.sample_blocks` (fused, and
unfused), GraphBolt's sampling pipeline (DGL 2.x), and `tessera bench sample`'s loader; each
figure is the median of the per-round ratios with their range (docs/sampling.md, "The DGL and
GraphBolt peers"). A case run while other processes or the hypervisor took more of the machine
than its run's `--max-busy` allowed (a tenth by default; `"busy": true` in its JSON) is left out.
"""
    return section("Sampling against DGL and GraphBolt", intro, body, rs)


def sample_cuda_section(runs):
    rs = select(runs, "sample-cuda-")
    rows, sweep_rows = [], {}
    for r in rs:
        d = r.data
        # No target (null) for weighted sampling through UVA.
        one, best, lim, tgt = d["one_stream"], d["best"], d["limit"], d.get("target") or {}
        placement = d["graph"].get("placement", DASH)
        rows.append([placement, sample_config(d)[2],
                     f"{num(one['edges_per_s'])} ({ratio(one['fraction_of_limit'])})",
                     f"{num(best['edges_per_s'])} ({ratio(best['fraction_of_limit'])})",
                     f"{best['batches_per_call']} per call, {best['streams']} stream(s)",
                     num(lim.get("edges_per_s")), num(tgt.get("edges_per_s")),
                     ratio(tgt.get("ratio_best"), "x"),
                     "yes" if d.get("check", {}).get("bit_identical_to_cpu") else "no",
                     r.link()])
        for s in d.get("sweep", []):
            sweep_rows.setdefault(s["batch_size"], {})[r.bench] = (
                f"{num(s['one_stream']['edges_per_s'])} / {num(s['best']['edges_per_s'])}")
    body = table(["graph in", "mode", "one stream, edges/s (of the limit)",
                  "best, edges/s (of the limit)", "best configuration", "limit, edges/s",
                  "target", "best / target", "bit-identical to the CPU twin", "run"], rows)
    if sweep_rows:
        benches = [r.bench for r in rs]
        body += "\n\nBy batch size (seeds per batch), one stream / best configuration:\n\n"
        body += table(["batch"] + benches,
                      [[str(b)] + [sweep_rows[b].get(x, DASH) for x in benches]
                       for b in sorted(sweep_rows)])
    intro = """
`tessera bench sample --device cuda` (scripts/gpu-check): the GPU sampler on `rmat:21,25`
symmetrized, [15,10,5], batch 1024, the graph in HBM (`gpu`) or in pinned host memory read
through UVA (`uva`). *One stream* is one blocking call per batch; *best* is the fastest of a
search over batches per call and streams. The *limit* is a plain kernel in the same run that
reads only what the sampler must for the same batches' frontier (indptr, then the row whole or the
drawn entries; weighted: after a prefix-sum search), as sampled edges/s; the fraction of it is
given in parentheses; the target is the one the bench prints. Every run first checks its first
batches against the CPU sampler bit for bit (docs/cuda.md).
"""
    return section("Sampling on the GPU", intro, body, rs)


def ncu_section(runs):
    rs = select(runs, "ncu-")
    rows = []
    for r in rs:
        for k in r.data.get("kernels", []):
            rows.append([r.bench, k.get("kernel"), k.get("launches"), f"{k.get('mean_us', 0):.1f}",
                         f"{k.get('achieved_occupancy_pct', 0):.0f}%",
                         f"{k.get('theoretical_occupancy_pct', 0):.0f}%",
                         f"{k.get('dram_throughput_pct', 0):.0f}%",
                         ", ".join(str(x) for x in k.get("registers", [])), r.link()])
    body = table(["profile", "kernel", "launches", "mean us", "achieved occupancy",
                  "theoretical occupancy", "DRAM throughput (of peak)", "registers/thread",
                  "run"], rows)
    intro = """
`ncu --clock-control none` over a short `tessera bench sample --device cuda` run from HBM
(`rmat:21,25`, [15,10,5], batch 1024, 4 batches, one stream; scripts/gpu-check, summarized by
scripts/ncu_summary.py): per sampling kernel, achieved occupancy against the theoretical, and
DRAM throughput as a share of the peak, each weighted by duration.
"""
    return section("GPU sampling kernels under ncu", intro, body, rs)


def gather_section(runs):
    rs = select(runs, "gather-")
    rows, probes = [], []
    for r in rs:
        d = r.data
        where = f"{d.get('device')}, {d.get('placement')}"
        for x in d.get("results", []):
            rows.append([where, x["row_bytes"], gbps(x["gather_gbps"]), d.get("bound", DASH),
                         gbps(x["bound_gbps"]), ratio(x["fraction_of_bound"]), r.link()])
        for p in d.get("probes", []):
            # The sort alone moves no rows: its time, and its share of the sorted gather's.
            alone = not p.get("gather_gbps") and p.get("share_of_sorted_gather")
            probes.append([where, p["name"], p["row_bytes"], f"{p['source_bytes'] / 2**20:.0f} MiB",
                           f"{p['ms']:.3f} ms" if alone else gbps(p["gather_gbps"]),
                           f"{p['share_of_sorted_gather']:.2f} of the sorted gather's time"
                           if alone else ratio(p["fraction_of_bound"])])
    body = table(["device, placement", "row bytes", "gather GB/s", "bound", "bound GB/s",
                  "fraction of the bound", "run"], rows)
    if probes:
        body += ("\n\nProbes (`--probe`): variants of the small-row gathers, each against the "
                 "same bound:\n\n")
        body += table(["device, placement", "variant", "row bytes", "source", "GB/s (or time)",
                       "fraction of the bound"], probes)
    intro = """
`tessera bench gather`: random rows of a table gathered into a batch (uniform random int64
indices; payload = batch × row bytes; 1 GB = 1e9 bytes), next to the bound measured in the
same process on the same payload: a parallel memcpy on the CPU, a device-to-device
`cudaMemcpy` for rows in HBM, a pinned host-to-device `cudaMemcpy` for rows read through UVA.
"""
    return section("Feature gather", intro, body, rs)


def dist_gather_section(runs):
    rs = select(runs, "dist-gather-")
    rows = []
    for r in rs:
        d = r.data
        by = {}
        for x in d.get("results", []):
            by.setdefault(x["row_bytes"], {})[x["path"]] = x
        for size in sorted(by):
            get, req = by[size].get("get", {}), by[size].get("request", {})
            rows.append([d.get("ucx_tls", DASH), d.get("world_size", DASH), size,
                         gbps(get.get("one_reader", {}).get("gb_per_s")),
                         gbps(get.get("perftest_ucp_get_gb_per_s")),
                         ratio(get.get("ratio_one_reader_vs_perftest")),
                         gbps(req.get("one_reader", {}).get("gb_per_s")),
                         gbps(get.get("all_readers", {}).get("gb_per_s")),
                         gbps(get.get("local_gather_gb_per_s")), r.link()])
    body = table(["UCX_TLS", "ranks", "row bytes", "get, one reader GB/s",
                  "ucx_perftest ucp_get GB/s", "get / perftest", "request, one reader GB/s",
                  "get, all readers GB/s", "local gather GB/s", "run"], rows)
    intro = """
`tessera bench dist-gather` under `tessera launch` (`benchmarks/dist_gather.sh`): batches of
10,000 random rows owned by other ranks read through a `DistTensor`, by one-sided gets or by
one request per owner; *one reader* is rank 0 reading from rank 1 while the others idle, *all
readers* every rank at once (sum). Next to it, in the same run: `ucx_perftest -t ucp_get` on the
same `UCX_TLS` with as many gets in flight as a batch has rows, and a local gather of the same
batch (the memory-copy bound; over shared memory the fair one, as perftest re-reads one
cache-resident buffer).
"""
    return section("Distributed gather", intro, body, rs)


#: The epoch split of train_sage.py's StepClock (and tessera train's), in the order of a step.
SPLIT_ORDER = ("wait", "forward_backward", "all_reduce", "optimizer", "other")


def train_peer_section(runs):
    rs = select(runs, "train-peer-")
    rows = []
    for r in rs:
        d = r.data
        v = d.get("versions", {})
        for c in d.get("cases", []):
            if c.get("busy"):  # other processes had the machine: the times are theirs
                continue
            med, rt = c["median"], c["ratios"]

            def cellr(key):
                return ratio_range(rt.get(key))

            rows.append([c["dataset"], c["trainers"], f"DGL {v.get('dgl')}, torch {v.get('torch')}",
                         f"{secs(med['dgl']['epoch_s'])} / {secs(med['tessera']['epoch_s'])}",
                         cellr("epoch_s"),
                         f"{secs(med['dgl']['inference_s'])} / "
                         f"{secs(med['tessera']['inference_s'])}",
                         cellr("inference_s"), cellr("wall_s"),
                         f"{med['dgl']['test_acc']:.3f} / {med['tessera']['test_acc']:.3f}",
                         len(c["rounds"]), r.link()])
    body = table(["dataset", "trainers", "peer versions", "epoch DGL / Tessera", "epoch ratio",
                  "inference DGL / Tessera", "inference ratio", "whole-run ratio",
                  "test accuracy DGL / Tessera", "rounds", "run"], rows)
    intro = """
`benchmarks/dgl_train_peer.py`: DGL's own distributed GraphSAGE script
(python/examples/dgl_style_sage.py, rewritten back to `dgl` for DGL's run) on one machine, under
DGL's runtime (a server and T trainer processes, as its launch.py starts them, over DGL's
partitioning) and under `tessera launch` (over Tessera's partitioning of the same graph), in
alternating rounds: the mean epoch after the first, the final layer-wise inference over all
nodes, the whole run with start-up, and the test accuracy, each the script's own printout. A
ratio above 1 means Tessera is faster: the median of the per-round ratios, with their range.
`rmat:S,EF` is a products-like graph with random labels (accuracy is chance). A case run while
other processes took more of the machine than `--max-busy` allowed is left out.
"""
    return section("Training against DGL (CPU)", intro, body, rs)


def train_gpu_section(runs):
    rs = select(runs, "train-", exclude=("train-cpu-", "train-cpp", "train-peer-"))
    rows, split_rows = [], []
    for r in rs:
        d = r.data
        sp = d["splits"][sorted(d["splits"])[0]]
        hist = sp.get("history", [])
        later = [h["seconds"] for h in hist[1:]]
        epoch = (f"{secs(hist[0]['seconds'])}; then {secs(min(later), '')}–{secs(max(later))}"
                 if later else secs(hist[0]["seconds"]) if hist else DASH)
        load = d.get("load", {})
        rows.append([r.bench, os.path.basename(os.path.normpath(d.get("dataset", ""))),
                     d.get("ranks"), d.get("gpu", DASH), f"{d.get('metric')} {d.get('mean'):.2f}",
                     hist[0].get("steps", DASH) if hist else DASH, epoch,
                     secs(sp.get("inference_seconds")),
                     f"{secs(load.get('seconds'))} ({secs(load.get('files_seconds'))})",
                     gbps(d.get("copy_bound_gbps")), sp.get("grad_sync", DASH), r.link()])
        if later:
            # One column order for every run (tessera train writes its split keys sorted).
            keys = [k for k in SPLIT_ORDER if k in hist[1]["split"]] + sorted(
                k for k in hist[1]["split"] if k not in SPLIT_ORDER)
            mean = {k: statistics.fmean(h["split"][k] for h in hist[1:]) for k in keys}
            split_rows.append([r.bench] + [secs(mean[k]) for k in keys] + [
                secs(statistics.fmean(h.get("loader_sampling", 0) for h in hist[1:])),
                secs(statistics.fmean(h.get("loader_gathering", 0) for h in hist[1:]))])
            split_keys = keys
    body = table(["run", "dataset", "ranks", "GPU", "test metric", "steps per epoch",
                  "epoch time (first; later epochs)", "inference", "load (its files)",
                  "D2D copy GB/s (read + written)", "gradient sync", "file"], rows)
    if split_rows:
        body += "\n\n" + wrap("Where an epoch's time went after the first epoch (mean per epoch; "
                              "the loader's sampling and gathering run on its own threads and "
                              "streams, overlapped with training):")
        body += "\n\n"
        body += table(["run"] + [k.replace("_", " ") for k in split_keys]
                      + ["loader sampling", "loader gathering"], split_rows)
    intro = """
`python/examples/train_sage.py --device cuda` (scripts/gpu-check, phase `train`): GraphSAGE
with every step on the GPU (docs/gpu-training.md). `products` is the products-like R-MAT graph
the phase generates (`tessera generate rmat --scale 21 --edge-factor 25 --feat-dim 100
--num-classes 47`) trained as in its `args` (3 layers, hidden 256, [15,10,5], batch 1024);
`products-cpp` is the same training by `tessera train` (C++ on libtorch, the same loader and
batches). Cora and Tolokers use the presets of `train_sage.py`, and Cora also
runs on 2 ranks sharing the GPU. The test metric is accuracy (%) or ROC-AUC (×100) at the best
validation epoch; *load* is loading and placing the partition, next to reading its files. The
*D2D copy* is the GPU's device-to-device copy of 1 GiB in the same run, counted as the bytes read
plus the bytes written (the feature gather's D2D bound counts each byte copied once, so the
same copy reads as half as many GB/s there).
"""
    return section("Training on the GPU", intro, body, rs)


def train_cpu_section(runs):
    rs = select(runs, "train-cpu-", exclude=("train-cpu-summary",))
    rows = []
    for r in rs:
        tests, metric, ranks, epochs, name = [], None, None, None, None
        for variant in sorted(r.files):
            d = r.files[variant]
            metric, ranks = d["metric"], d.get("ranks", 1)
            name = os.path.basename(os.path.normpath(d["dataset"]))
            epochs = d.get("args", {}).get("epochs")
            tests += [float(s["test_at_best"]) for s in d["splits"].values()]
        std = statistics.pstdev(tests) if len(tests) > 1 else 0.0
        rows.append([name, ranks, metric, f"{statistics.fmean(tests):.2f} ± {std:.2f}",
                     len(tests), epochs, r.links()])
    body = table(["dataset", "ranks", "metric", "test, mean ± std", "runs × splits", "epochs",
                  "runs"], rows)
    intro = """
`python -m tessera launch --nproc-per-node P -- python3 python/examples/train_sage.py --dataset D
--seed S` on CPU ranks (UCX over shared memory): P ranks train GraphSAGE on a P-part METIS
partitioning, each sampling remote neighborhoods and reading remote features through the other
ranks, gradients averaged after every step; `--batch-size` is the global batch. Cora: Planetoid
split, test accuracy (%) at the best validation epoch over 5 seeds; Tolokers: ROC-AUC (×100)
over its 10 splits. These runs recorded neither the commit nor the machine.
"""
    return section("Distributed training on CPU ranks", intro, body,
                   rs + select(runs, "train-cpu-summary"))


def link_section(runs):
    rs = select(runs, "link-")
    rows = []
    for r in rs:
        d = r.data
        t, last, rnd = d["test"], d["test_last_epoch"], d["random_baseline"]["test"]
        sp = d.get("split", {})
        split = f"{sp.get('train_edges')} / {sp.get('val_edges')} / {sp.get('test_edges')}"
        rows.append([d.get("ranks", 1), split, f"{t['roc_auc']:.3f}", f"{t['hits@50']:.3f}",
                     d.get("best_epoch"), f"{last['roc_auc']:.3f} / {last['hits@50']:.3f}",
                     f"{rnd['roc_auc']:.3f} / {rnd['hits@50']:.3f}",
                     f"{statistics.fmean(h['seconds'] for h in d['history']):.2f} s", r.link()])
    body = table(["ranks", "edges train / val / test", "test ROC-AUC", "test Hits@50", "best epoch",
                  "last epoch, ROC-AUC / Hits@50", "random scores, ROC-AUC / Hits@50",
                  "epoch time", "run"], rows)
    intro = """
`python/examples/train_link.py --dataset data/cora --epochs 40 --threads 1`: GraphSAGE (2
layers, 128, fanouts 10,10) with an MLP scorer on held-out Cora edges (split by seed 0; only
the training edges form the graph), against as many sampled non-edges; Hits@50 is OGB's. Test figures are those of the epoch with the best
validation ROC-AUC; the random baseline scores the same pairs.
"""
    return section("Link prediction", intro, body, rs)


def scalars(d, skip=("command", "commit", "machine", "date", "git", "dataset_path")):
    """The top-level numbers, booleans and short strings of a result JSON, in its order."""
    out = {}
    for k, v in d.items() if isinstance(d, dict) else ():
        if k in skip or isinstance(v, (dict, list)):
            continue
        if isinstance(v, str) and (len(v) > 40 or "/" in v):
            continue
        out[k] = v
    return out


def cell(v):
    if isinstance(v, bool) or v is None:
        return DASH if v is None else str(v).lower()
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def generic_section(title, prefix, intro, columns=None, max_columns=10):
    """A table of the scalar figures of every JSON of the benchmarks named `prefix`: one row
    per file; the `columns` named (top-level keys), else the scalars the files hold (up to
    max_columns). For benchmarks whose figures are flat."""

    def render(runs):
        rs = select(runs, prefix)
        rows, keys = [], []
        for r in rs:
            for variant in sorted(r.files):
                sc = scalars(r.files[variant])
                for k in sc:
                    if k not in keys:
                        keys.append(k)
                rows.append((r, variant, sc))
        keys = list(columns) if columns else keys[:max_columns]
        body = table(["benchmark"] + [k.replace("_", " ") for k in keys] + ["run"],
                     [[r.bench] + [cell(sc.get(k)) for k in keys] + [r.link(v)]
                      for r, v, sc in rows])
        return section(title, intro, body, rs)

    return prefix, render


def deepgcn_section(runs):
    rs = select(runs, "deepgcn")
    rows = []
    for r in rs:
        summary = r.files.get("", {})
        for x in summary.get("runs", []):
            # A run that never reached the target records null epochs and seconds to it.
            reached = x.get("epochs_to_target") is not None
            test, std = x.get("test_at_best_mean"), x.get("test_at_best_std")
            rows.append([cell(x.get("ranks")), cell(x.get("mode")),
                         fixed(x.get("best_mean_val")), cell(x.get("best_mean_val_epoch")),
                         fixed(test) + (f" ± {std:.2f}" if test is not None and std is not None
                                        else ""),
                         cell(x["epochs_to_target"]) if reached else "not reached",
                         secs(x.get("seconds_to_target")), secs(x.get("seconds_per_epoch")),
                         cell(x.get("lr")), r.link()])
    body = table(["ranks", "mode", "best mean val ROC-AUC", "at epoch",
                  "test ROC-AUC at best val", "epochs to the 1-rank best", "seconds to it",
                  "s/epoch", "lr", "summary"], rows)
    intro = """
`benchmarks/deepgcn.sh`: DeepGCN (7 ResGCN+ layers of GENConv, hidden 64) on Tolokers, splits
0-4, 10 random Cluster-GCN clusters per epoch, at 1, 2 and 4 ranks with parallel epochs (each
rank its own clustering, gradients averaged every step, lr scaled by the square root of the
ranks); ROC-AUC ×100; the target is the 1-rank best (docs/deepgcn.md).
"""
    return section("DeepGCN, parallel epochs", intro, body, rs)


def trainer_memory_section(runs):
    rs = select(runs, "trainer_memory")
    rows = []
    for r in rs:
        d = r.data
        by_t = {}
        for x in d.get("rows", []):
            if x.get("machine") == 0:
                by_t[x["trainers_per_machine"]] = x
        one = by_t.get(1, {}).get("gain_kib", {}).get("Pss")
        for t in sorted(by_t):
            g = by_t[t]["gain_kib"]
            rows.append([t, f"{g['Pss'] / 1024:.1f} MiB",
                         ratio(g["Pss"] / one if one else None),
                         f"{g.get('Pss_Shmem', 0) / 1024:.1f} MiB",
                         f"{g.get('Pss_File', 0) / 1024:.1f} MiB",
                         f"{g.get('Pss_Anon', 0) / 1024:.1f} MiB",
                         f"{by_t[t].get('shared_segment_bytes', 0) / 2**20:.1f} MiB", r.link()])
    body = table(["trainers per machine", "machine 0 memory (PSS, all its trainers)",
                  "against 1 trainer", "shared memory", "partition files", "private",
                  "shared segment", "run"], rows)
    intro = """
`benchmarks/trainer_memory.py`: a random graph in 2 parts (2 machines on loopback), T trainers
per machine; the memory machine 0 gains by loading, summed over its trainers as proportional
set size (a page shared by T processes counts 1/T to each). One copy of the partition per
machine: the total stays flat as T grows (docs/dist.md, "Several trainers per machine").
"""
    return section("Several trainers per machine: memory", intro, body, rs)


def full_graph_section(runs):
    rs = select(runs, "full-graph")
    rows = []
    for r in rs:
        d = r.data
        pub = d.get("published", {})
        for x in d.get("runs", []):
            rows.append([x.get("dataset"), x.get("model"), x.get("world_size"),
                         x.get("part_method"), f"{x.get('test_acc', 0):.1f}",
                         pub.get(x.get("model"), {}).get(x.get("dataset"), DASH),
                         f"{x['torch_test_acc']:.1f}" if "torch_test_acc" in x else DASH,
                         r.link()])
    body = table(["dataset", "model", "ranks", "partitioning", "test accuracy %", "published",
                  "PyTorch on the whole graph", "run"], rows)
    intro = """
`python/examples/full_graph.py` under `tessera launch`: SGC (K=2) and full-graph GCN inference,
each aggregation a distributed `update_all` over the partitions (docs/dist.md, "update_all");
the same accuracy at 1 and 2 ranks and on either partitioning.
"""
    return section("Full-graph models over update_all", intro, body, rs)


def train_cpp_section(runs):
    rs = select(runs, "train-cpp")
    rows = []
    for r in rs:
        d = r.data
        for x in d.get("rows", []):
            py, cpp = x["runs"].get("python", []), x["runs"].get("cpp", [])

            def best(rr):
                return min(v["ms_per_step"] for v in rr) if rr else None

            def outside(rr):  # time per step outside forward + backward, best run
                if not rr:
                    return None
                v = min(rr, key=lambda v: v["ms_per_step"])
                return v["ms_per_step"] - v["parts_ms_per_step"].get("forward_backward", 0)

            bp, bc, op, oc = best(py), best(cpp), outside(py), outside(cpp)
            rows.append([x["dataset"], d.get("device", "cpu"), x["ranks"], secs(bp, " ms"),
                         secs(bc, " ms"), ratio(bc / bp if bp and bc else None),
                         secs(op, " ms"), secs(oc, " ms"),
                         ratio(oc / op if op and oc else None), r.link()])
    body = table(["dataset", "device", "ranks", "Python ms/step", "C++ ms/step", "C++ / Python",
                  "Python outside fwd+bwd", "C++ outside fwd+bwd", "C++ / Python outside",
                  "run"], rows)
    intro = """
`benchmarks/train_cpp_vs_python.py`: `tessera train` (C++, libtorch) against
`python/examples/train_sage.py` on the same partitions, presets and seed in the same run (on the
CPU one thread per rank: the same losses and test metrics; on the GPU with `--device cuda`, as
`scripts/gpu-check examples` runs it); the best of the repeats, and the part of a step outside
the model's forward and backward (the target: C++ at most half of Python's). train_sage.py
normalizes the input features and casts the labels inside its forward (counted as forward and
backward). On the GPU `tessera train` does the same in its forward segment, so on both sides
they count as forward and backward (the H200 run listed, of bab9d3d, includes that). On the CPU it normalizes on its batch
thread, ahead of the step (counted as waiting whenever that thread is behind, as at each epoch's
first batch: Cora's epochs have 3).
"""
    return section("C++ trainer against the Python example", intro, body, rs)


def vrgcn_section(runs):
    rs = select(runs, "vrgcn")
    rows = []
    for r in rs:
        d = r.data
        config = r.machine.split("-", 2)[2] if r.machine.count("-") >= 2 else DASH
        for x in d.get("runs", []):
            std = f" ± {x['test_std']:.2f}" if x.get("test_std") is not None else ""
            rows.append([config, d.get("dataset"), d.get("ranks"), x.get("estimator"),
                         x.get("fanout"), f"{x['test']:.2f}{std}",
                         num(x.get("sampled_edges_per_epoch")), len(x.get("seeds", []) or [1]),
                         r.link()])
    body = table(["run", "dataset", "ranks", "estimator", "fanout", "test metric",
                  "sampled edges per epoch", "seeds", "file"], rows)
    intro = """
`python/examples/train_vrgcn.py`: a 2-layer GCN trained with control variates (`cv`, VR-GCN:
histories of every layer in DistTensors) or plain neighbor sampling (`ns`) at fanout D, against
full-neighbor training (fanout -1); test accuracy % (Cora, Citeseer) or ROC-AUC ×100
(Tolokers, `auc`), mean ± std over seeds; the run name is the configuration (docs/vrgcn.md).
"""
    return section("VR-GCN (control variates)", intro, body, rs)


SECTIONS = [  # (folder prefix, renderer), in README order
    ("partition", partition_section),
    ("sample-cpu-", sample_cpu_section),
    ("sample-peer-", sample_dgl_section),
    ("sample-cuda-", sample_cuda_section),
    ("ncu-", ncu_section),
    ("gather-", gather_section),
    ("dist-gather-", dist_gather_section),
    ("train-cpu-", train_cpu_section),
    ("train-cpp", train_cpp_section),
    ("train-peer-", train_peer_section),
    ("train-", train_gpu_section),
    ("link-", link_section),
    generic_section("Distributed update_all", "update-all", """
`tessera bench update-all` under `tessera launch --nproc-per-node 2` (UCX shared memory): one
full aggregation (copy_src, sum) of 100-dim float32 features over a 2-part random partitioning
of `rmat:21,25`, next to the local SpMM (the CPU twin) on the same rows in the same run; a GPU
run (its device column) is one rank over one part, against cuSPARSE. The ratio is the local
SpMM's time over update_all's: the fraction of the local bound that update_all reaches.
""", columns=["graph", "device", "world_size", "features", "update_all_median_seconds",
              "local_spmm_median_seconds", "ratio_update_all_vs_local_spmm",
              "max_remote_rows_per_rank", "plan_seconds"]),
    ("full-graph", full_graph_section),
    generic_section("Partition load", "load-partition", """
`benchmarks/load_partition.py CONFIG`: one rank reads every file of partition 0 (the floor of
loading it, in the same process just before) and then constructs the `DistGraph`, in a fresh
process per repeat; medians of the repeats. The target is a load no longer than the file reads.
""", columns=["graph", "num_nodes", "num_edges", "repeats", "files_median_seconds",
              "load_median_seconds", "ratio_load_vs_files"]),
    generic_section("Host time of the mean aggregation", "aggregate-host", """
`benchmarks/aggregate_host_time.py --device DEVICE`: host microseconds per forward + backward of
`tessera.nn`'s mean aggregation on a tiny block (the work itself negligible), net of the
autograd floor (`h.sum().backward()`, `floor us`), median of alternating rounds: the torch
operator `torch.ops.tessera.mean_aggregate` (C++ autograd), `tessera.ops.spmm` in a Python
`autograd.Function`, and `index_select` + `index_add_`; and of a whole SAGEConv layer, by
`torch.ops.tessera.sage_layer` (one call) and by its operators issued from Python. A GPU
training step in Python is bound by this host time (docs/gpu-training.md).
""", columns=["device", "edges", "feat", "torch_op_us", "tessera_ops_us", "index_us",
              "layer_op_us", "layer_python_us", "floor_us", "ratio_torch_op_vs_tessera_ops",
              "ratio_layer_op_vs_python"]),
    ("deepgcn", deepgcn_section),
    ("vrgcn", vrgcn_section),
    ("trainer_memory", trainer_memory_section),
    generic_section("Graph classification (GIN)", "gin", """
`python/examples/train_gin.py` on the shipped solubility set (data/solubility, 3 classes):
GIN with sum readout, global batch 32, at 1 and 2 ranks (`r1`, `r2`; `tessera launch`, gradients
averaged every step) and a bag-of-atoms linear model (`layers0`); test accuracy at the last
epoch and the mean of the last 10 (docs/graph-level.md).
""", columns=["dataset", "ranks", "final_test_acc", "last10_test_acc", "seconds",
              "params_in_sync"]),
]

PREFACE = """\
# Benchmark results

<!-- Generated by benchmarks/results_table.py from the JSON files in this folder; edit that
     script, not this file. CI fails when the two differ. -->

The current figures of every benchmark, one table per benchmark, each figure read from the
result JSON linked in its row, and each figure next to the limit or peer it is measured against
in the same run. The JSON files record the command, the commit and the machine that produced
them, but for the runs listed under *Provenance* below.

**Layout.** `<bench>/<date>-<commit>-<machine>.json`: one folder per benchmark and
configuration, the current run only (history is in git), plots beside their JSON under the same
name. `tessera bench sample|gather|update-all ... --results benchmarks/results` and
`scripts/gpu-check` write there (`tessera bench dist-gather` takes only `--json FILE`;
`benchmarks/dist_gather.sh` writes its folders); other scripts say where in their usage. A
commit ending in `-dirty` ran with modified tracked files; where a JSON did not record its date,
the name carries the day the result was committed, and where it did not record the commit or
the machine, `unknown`. After adding or replacing a result:

```sh
python3 benchmarks/results_table.py          # rewrites this file
python3 benchmarks/results_table.py --check  # what CI runs (tests/python/test_results_table.py)
```
"""


def render(root=RESULTS):
    runs, problems = scan(root)
    known = [prefix for prefix, _ in SECTIONS]
    for bench in sorted(runs):
        if not any(bench.startswith(p) for p in known):
            problems.append(f"{bench}: no table for this benchmark in benchmarks/results_table.py")
    parts = [PREFACE.rstrip()]
    desc = machines(runs)
    if desc:
        parts.append(wrap("**Machines.** " + "; ".join(
            f"`{tag}`: {desc[tag] or 'not recorded'}" for tag in sorted(desc)) + "."))
    prov = provenance(runs)
    if prov:
        parts.append(prov)
    current, older = older_harness(runs)
    for bench in sorted(older):
        for r, missing in older[bench]:
            print(f"results_table: note: {bench}/{r.stem}: made by an older harness (no "
                  f"{', '.join(missing)}); listed under Older harness, not as a current figure",
                  file=sys.stderr)
    done = set()
    for prefix, renderer in SECTIONS:
        benches = [b for b in runs if b.startswith(prefix) and b not in done]
        if prefix == "train-":
            benches = [b for b in benches if not b.startswith(("train-cpu-", "train-cpp"))]
        if not benches:
            continue
        done.update(benches)
        if any(b in current for b in benches):
            parts.append(renderer(current))
        else:
            parts.append(f"## {prefix.rstrip('-')}")
        note = older_note(prefix, older) if prefix in CURRENT_FIELDS else ""
        if note:
            parts.append(note)
    return "\n\n".join(parts) + "\n", problems


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="compare with the committed README and check the layout; write nothing")
    ap.add_argument("--results", default=RESULTS, help="the results folder (default: %(default)s)")
    a = ap.parse_args(argv)
    readme = os.path.join(a.results, "README.md")
    text, problems = render(a.results)
    for p in problems:
        print(f"results_table: {p}", file=sys.stderr)
    if a.check:
        try:
            with open(readme) as f:
                old = f.read()
        except OSError:
            old = ""
        if old != text:
            diff = difflib.unified_diff(old.splitlines(), text.splitlines(), "README.md (committed)",
                                        "README.md (generated)", lineterm="", n=1)
            print("\n".join(list(diff)[:60]), file=sys.stderr)
            print(f"results_table: {readme} is out of date: run python3 "
                  "benchmarks/results_table.py", file=sys.stderr)
            return 1
        return 1 if problems else 0
    tmp = readme + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, readme)
    print(f"wrote {os.path.relpath(readme)}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
