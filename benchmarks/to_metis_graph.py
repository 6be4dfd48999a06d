#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes a graph as a METIS .graph file for Debian's gpmetis: symmetrized, self loops dropped,
duplicates removed, adjacency sorted -- the same adjacency Tessera hands to libmetis.

Usage: to_metis_graph.py INPUT OUT.graph   (INPUT: SNAP edge list [.gz] or npy dataset folder)
"""
import gzip
import json
import os
import sys

import numpy as np


def read_edges(path):
    """(src, dst, n): n from meta.json for an npy folder (isolated nodes count), else None."""
    if os.path.isdir(path):
        ei = np.load(os.path.join(path, "edge_index.npy"), mmap_mode="r")
        src, dst = ei[0].astype(np.int64), ei[1].astype(np.int64)
        hi = int(max(src.max(initial=-1), dst.max(initial=-1))) + 1
        n = None
        meta = os.path.join(path, "meta.json")
        if os.path.exists(meta):
            with open(meta) as f:
                n = json.load(f).get("num_nodes")
        n = hi if n is None else int(n)
        if hi > n or (len(src) and min(src.min(), dst.min()) < 0):
            sys.exit(f"{path}: edge IDs outside [0, {n}) (num_nodes from meta.json)")
        return src, dst, n
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        data = np.loadtxt(f, comments="#", dtype=np.int64)
    return data[:, 0], data[:, 1], None


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, dst, n = read_edges(sys.argv[1])
    if n is None:  # an edge list: its IDs must already be 0..N-1, every one used
        ids = np.unique(np.concatenate([src, dst]))
        if ids[0] != 0 or ids[-1] != len(ids) - 1:
            sys.exit("IDs are not 0..N-1; remap them first")
        n = len(ids)
    s = np.concatenate([src, dst])
    d = np.concatenate([dst, src])
    del src, dst
    keep = s != d
    key = np.unique(s[keep] * n + d[keep])  # sorted by (source, neighbor), duplicates gone
    del s, d, keep
    m = len(key) // 2
    indptr = np.zeros(n + 1, dtype=np.int64)
    indptr[1:] = np.cumsum(np.bincount(key // n, minlength=n))
    d = key % n
    del key
    with open(sys.argv[2], "w") as f:
        f.write(f"{n} {m}\n")
        for v in range(n):
            f.write(" ".join(map(str, (d[indptr[v]:indptr[v + 1]] + 1).tolist())) + "\n")


if __name__ == "__main__":
    main()
