# SPDX-License-Identifier: Apache-2.0
"""What verifying checksums adds to loading a partition: load_partition with and without
verify_checksums, read into memory and memory-mapped, as a ratio to reading the files.

Usage: python3 benchmarks/load_checksums.py CONFIG.json [--part P] [--repeat N] [--cold]
  --cold  drop the page cache before every load (needs root: /proc/sys/vm/drop_caches)
Prints one JSON object: seconds per variant (best of N) and the ratios."""
import argparse
import json
import os
import time

import numpy as np

from tessera import _C


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def touch(lp):
    # Reads every page of a mapped partition, as DistGraph's copies and checks do.
    arrays = [lp.indptr, lp.indices, lp.eid, lp.nid, lp.inner_node, lp.inner_edge, lp.orig_nid,
              lp.orig_eid] + list(lp.ndata.values()) + list(lp.edata.values())
    s = 0
    for a in arrays:
        b = np.asarray(a).reshape(-1).view(np.uint8)
        s += int(b[::4096].sum())
    return s


def main():
    p = argparse.ArgumentParser()
    p.add_argument("config")
    p.add_argument("--part", type=int, default=0)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--cold", action="store_true")
    a = p.parse_args()
    cfg = json.load(open(a.config))
    files = cfg["partitions"][a.part]["files"]
    nbytes = sum(f["bytes"] for f in files.values())

    def run(mmap, verify):
        best = float("inf")
        for _ in range(a.repeat):
            if a.cold:
                drop_caches()
            t0 = time.perf_counter()
            lp = _C.load_partition(a.config, a.part, mmap, verify)
            if mmap:
                touch(lp)
            best = min(best, time.perf_counter() - t0)
            del lp
        return best

    out = {"config": a.config, "part": a.part, "bytes": nbytes, "cold": a.cold,
           "threads": _C.num_threads() if hasattr(_C, "num_threads") else os.cpu_count()}
    for name, mmap, verify in [("read", False, False), ("read+verify", False, True),
                               ("mmap+touch", True, False), ("mmap+verify", True, True)]:
        out[name + "_s"] = run(mmap, verify)
    out["read_GBps"] = nbytes / out["read_s"] / 1e9
    out["verify_cost_vs_read"] = (out["read+verify_s"] - out["read_s"]) / out["read_s"]
    out["verify_cost_vs_mmap"] = (out["mmap+verify_s"] - out["mmap+touch_s"]) / out["read_s"]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
