#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Summarize an `ncu --csv --page raw` report of the sampling kernels (scripts/gpu-check).

    python3 scripts/ncu_summary.py ncu.csv [--json OUT]

Groups the profiled launches by kernel (name without namespaces and arguments) and prints, per
kernel: launches, total and mean duration, achieved occupancy (sm__warps_active as a share of
the peak sustained, weighted by duration) next to the theoretical occupancy, and DRAM throughput
as a share of the peak (weighted by duration), plus grid size and registers per thread.
"""
import argparse
import csv
import json
import os
import re
import sys

METRICS = {
    "time": "gpu__time_duration.sum",
    "occupancy": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "theoretical": "sm__maximum_warps_per_active_cycle_pct",
    "dram": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram_read": "dram__bytes_read.sum",
    "grid": "launch__grid_size",
    "regs": "launch__registers_per_thread",
}
TIME_SCALE = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}
BYTES_SCALE = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "KB": 1e3, "MB": 1e6,
               "GB": 1e9, "B": 1}


def short_name(name):
    """tessera::<unnamed>::sample_group_kernel<0>(tessera::HopArgs, ...) -> sample_group_kernel<0>."""
    # An anonymous namespace reads "(anonymous namespace)" (c++filt) or "<unnamed>" (ncu 2025).
    name = name.replace("(anonymous namespace)::", "").replace("<unnamed>::", "")
    name = re.sub(r"^void ", "", re.sub(r"\(.*", "", name))
    base = name.split("<", 1)
    head = base[0].split("::")[-1].strip()
    if len(base) > 1 and "cub" not in name:
        return head + "<" + base[1].split(">", 1)[0].split("::")[-1] + ">"
    return head


def number(s):
    try:
        return float(str(s).replace(",", ""))
    except ValueError:
        return 0.0


def read_rows(path):
    try:
        lines = open(path, errors="replace").read().splitlines()
    except OSError as e:
        sys.exit(f"ncu_summary: cannot read {path}: {e.strerror}")
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        sys.exit(f"ncu_summary: {path} has no CSV table (did ncu profile any kernel?)")
    rows = list(csv.reader(lines[start:]))
    header, rest = rows[0], rows[1:]
    units = {}
    if rest and not rest[0][0].strip():  # the units row
        units = dict(zip(header, rest[0]))
        rest = rest[1:]
    return header, units, [dict(zip(header, r)) for r in rest if len(r) == len(header)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--json", help="write the summary here")
    ap.add_argument("--meta", action="append", default=[], metavar="KEY=VALUE",
                    help="recorded in the JSON (commit, machine, command: what the results "
                         "table expects of a result); repeatable")
    a = ap.parse_args()
    header, units, rows = read_rows(a.csv)
    tscale = TIME_SCALE.get(units.get(METRICS["time"], "ns"), 1e-3)
    bscale = BYTES_SCALE.get(units.get(METRICS["dram_read"], "byte"), 1)
    kernels = {}
    for r in rows:
        k = kernels.setdefault(short_name(r.get("Kernel Name", "?")), {
            "launches": 0, "time_us": 0.0, "occ_t": 0.0, "theo_t": 0.0, "dram_t": 0.0,
            "dram_read_bytes": 0.0, "grid": set(), "regs": set()})
        t = number(r.get(METRICS["time"], 0)) * tscale
        k["launches"] += 1
        k["time_us"] += t
        k["occ_t"] += t * number(r.get(METRICS["occupancy"], 0))
        k["theo_t"] += t * number(r.get(METRICS["theoretical"], 0))
        k["dram_t"] += t * number(r.get(METRICS["dram"], 0))
        k["dram_read_bytes"] += number(r.get(METRICS["dram_read"], 0)) * bscale
        k["grid"].add(int(number(r.get(METRICS["grid"], 0))))
        k["regs"].add(int(number(r.get(METRICS["regs"], 0))))
    out = []
    for name, k in sorted(kernels.items(), key=lambda kv: -kv[1]["time_us"]):
        t = max(k["time_us"], 1e-9)
        out.append({"kernel": name, "launches": k["launches"], "time_us": k["time_us"],
                    "mean_us": k["time_us"] / k["launches"],
                    "achieved_occupancy_pct": k["occ_t"] / t,
                    "theoretical_occupancy_pct": k["theo_t"] / t,
                    "dram_throughput_pct": k["dram_t"] / t,
                    "dram_read_bytes": k["dram_read_bytes"],
                    "grid_sizes": sorted(k["grid"]), "registers": sorted(k["regs"])})
    print(f"ncu: {len(rows)} launches profiled ({a.csv})")
    print(f"  {'kernel':<28} {'n':>4} {'total us':>10} {'mean us':>9} {'occ %':>6} {'theo %':>7} "
          f"{'DRAM %':>7} {'regs':>5}")
    for k in out:
        print(f"  {k['kernel']:<28} {k['launches']:>4} {k['time_us']:>10.1f} {k['mean_us']:>9.1f} "
              f"{k['achieved_occupancy_pct']:>6.1f} {k['theoretical_occupancy_pct']:>7.1f} "
              f"{k['dram_throughput_pct']:>7.1f} {','.join(map(str, k['registers'])):>5}")
    if a.json:
        meta = {}
        for kv in a.meta:
            key, sep, value = kv.partition("=")
            if not sep or not key:
                sys.exit(f"ncu_summary: --meta {kv!r} is not KEY=VALUE")
            meta[key] = value
        with open(a.json + ".tmp", "w") as f:
            json.dump({**meta, "source": a.csv, "launches": len(rows), "kernels": out}, f,
                      indent=2)
        os.replace(a.json + ".tmp", a.json)
        print(f"wrote {a.json}")


if __name__ == "__main__":
    main()
