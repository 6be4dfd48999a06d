#!/usr/bin/env python3
"""Writes a graph as a METIS .graph file for Debian's gpmetis: symmetrized, self loops dropped,
duplicates removed, adjacency sorted -- the same adjacency Tessera hands to libmetis.

Usage: to_metis_graph.py INPUT OUT.graph   (INPUT: SNAP edge list [.gz] or npy dataset folder)
"""
import gzip
import os
import sys

import numpy as np


def read_edges(path):
    if os.path.isdir(path):
        ei = np.load(os.path.join(path, "edge_index.npy"))
        return ei[0].astype(np.int64), ei[1].astype(np.int64)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        data = np.loadtxt(f, comments="#", dtype=np.int64)
    return data[:, 0], data[:, 1]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, dst = read_edges(sys.argv[1])
    ids = np.unique(np.concatenate([src, dst]))
    if ids[0] != 0 or ids[-1] != len(ids) - 1:
        sys.exit("IDs are not 0..N-1; remap them first")
    n = len(ids)
    s = np.concatenate([src, dst])
    d = np.concatenate([dst, src])
    keep = s != d
    key = np.unique(s[keep] * n + d[keep])
    s, d = key // n, key % n
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.add.at(indptr, s + 1, 1)
    indptr = np.cumsum(indptr)
    with open(sys.argv[2], "w") as f:
        f.write(f"{n} {len(key) // 2}\n")
        for v in range(n):
            f.write(" ".join(map(str, (d[indptr[v]:indptr[v + 1]] + 1).tolist())) + "\n")


if __name__ == "__main__":
    main()
