#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/): small valid inputs
of every form each reader accepts, so fuzzing starts from deep inside the parsers. Rerun after
changing a format; the fuzzers add what they find only to their own working copy.
Usage: python3 tests/fuzz/make_seeds.py [--partition-config CONFIG.json ...]"""
import argparse
import gzip
import io
import json
import os
import struct

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def put(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def gz(data):
    if isinstance(data, str):
        data = data.encode()
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as f:
        f.write(data)
    return buf.getvalue()


def npy_bytes(a, version=None):
    buf = io.BytesIO()
    if version is None:
        np.save(buf, a)
    else:
        np.lib.format.write_array(buf, a, version=version)
    return buf.getvalue()


def npy():
    put("npy", "int64_1d.npy", npy_bytes(np.arange(5, dtype=np.int64)))
    put("npy", "float32_2d.npy", npy_bytes(np.ones((3, 4), dtype=np.float32)))
    put("npy", "bool.npy", npy_bytes(np.array([True, False, True])))
    put("npy", "uint8_3d.npy", npy_bytes(np.zeros((2, 2, 2), dtype=np.uint8)))
    put("npy", "float16.npy", npy_bytes(np.array([1.5, -2], dtype=np.float16)))
    put("npy", "empty.npy", npy_bytes(np.zeros((0, 3), dtype=np.int32)))
    put("npy", "scalar.npy", npy_bytes(np.array(7, dtype=np.int64)))
    put("npy", "v2.npy", npy_bytes(np.arange(4, dtype=np.int16), version=(2, 0)))
    put("npy", "fortran.npy", npy_bytes(np.asfortranarray(np.ones((2, 3)))))
    put("npy", "bigendian.npy", npy_bytes(np.arange(3, dtype=">i4")))


def snap():
    body = "0\t1\n0\t2\n1\t2\n2\t3\n"
    put("snap", "plain.txt", body)
    put("snap", "header.txt", "# Undirected graph: toy\n# Nodes: 4 Edges: 4\n# FromNodeId\tToNodeId\n"
        + body)
    put("snap", "directed.txt", "# Directed graph: toy\n0 1\n1 0\n3 3\n10 2\r\n")
    put("snap", "gzip.txt.gz", gz("# Nodes: 4 Edges: 4\n" + body))
    put("snap", "comments_only.txt", "# nothing here\n# Nodes: 0 Edges: 0\n")


def metis():
    put("metis", "plain.graph", "4 4\n2 3\n1 3\n1 2 4\n3\n")
    put("metis", "edge_weights.graph", "3 2 001\n2 5\n1 5 3 7\n2 7\n")
    put("metis", "vertex_weights.graph", "3 2 010\n4 2\n6 1 3\n1 2\n")
    put("metis", "both_weights.graph", "3 2 011 2\n1 2 2 9\n3 4 1 9 3 8\n5 6 2 8\n")
    put("metis", "comments.graph", "% a comment\n4 4\n2 3\n% inside\n1 3\n1 2 4\n3\n")
    put("metis", "isolated.graph", "3 1\n2\n1\n\n")
    put("metis", "gzip.graph.gz", gz("4 4\n2 3\n1 3\n1 2 4\n3\n"))


def mtx():
    put("mtx", "general.mtx",
        "%%MatrixMarket matrix coordinate real general\n% c\n4 4 4\n1 2 0.5\n2 3 1\n3 4 2\n4 1 -1\n")
    put("mtx", "symmetric.mtx",
        "%%MatrixMarket matrix coordinate pattern symmetric\n3 3 3\n2 1\n3 2\n3 3\n")
    put("mtx", "integer.mtx", "%%MatrixMarket matrix coordinate integer general\n2 3 2\n1 3 7\n2 1 9\n")
    put("mtx", "skew.mtx", "%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 1\n2 1 3\n")
    put("mtx", "gzip.mtx.gz",
        gz("%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 2\n2 3\n"))


OGB_FILES = ["raw/num-node-list.csv", "raw/num-edge-list.csv", "raw/edge.csv",
             "raw/node-feat.csv", "raw/node-label.csv", "raw/edge-feat.csv", "raw/node_year.csv",
             "split/s/train.csv", "split/s/valid.csv", "split/s/test.csv"]
OGB_VALID = ["4\n", "3\n", "0,1\n1,2\n2,3\n", "0.5,1\n-1,2e3\n0,0\n1.5,nan\n", "0\n1\n\n2\n",
             "1\n2\n3\n", "2001\n2002\n2003\n2004\n", "0\n1\n", "2\n", "3\n"]


def ogb():
    for i, (name, body) in enumerate(zip(OGB_FILES, OGB_VALID)):
        stem = name.replace("/", "_").replace(".csv", "")
        put("ogb", f"{i}_{stem}", bytes([i]) + body.encode())
        put("ogb", f"{i}_{stem}_gz", bytes([i]) + gz(body))


def meta_json():
    put("meta_json", "cora.json", open(os.path.join(HERE, "..", "..", "data", "cora",
                                                    "meta.json"), "rb").read())
    put("meta_json", "directed.json", json.dumps({"num_nodes": 4, "directed": True}))
    put("meta_json", "symmetrized.json", json.dumps({"num_nodes": 4, "symmetrized": True}))
    put("meta_json", "undirected.json", json.dumps({"name": "g", "undirected": True}))
    put("meta_json", "empty.json", "{}")


def partition_config(configs):
    for c in configs:
        put("partition_config", os.path.basename(os.path.dirname(c)) + "-" + os.path.basename(c),
            open(c, "rb").read())


def store():
    magic = struct.pack("<IBB", 0x54535356, 2, 1)
    hello = magic + bytes([0, 0]) + struct.pack("<iI", 0, 4) + bytes(64)
    put("store", "0_hello_forged", b"\x00" + hello)
    put("store", "0_http", b"\x00GET / HTTP/1.1\r\nHost: x\r\n\r\n")

    def frame(op, rank, key, value):
        return struct.pack("<IBBHiIQ", 0x54535356, 2, op, 0, rank, len(key), len(value)) + key + value
    set_ = frame(2, 0, b"ucx/addr/0", b"worker-address")
    get_ = frame(3, 0, b"ucx/addr/0", struct.pack("<Q", 10))
    get_missing = frame(3, 0, b"nothing", struct.pack("<Q", 50))
    put("store", "1_set_get", b"\x01" + set_ + get_)
    put("store", "1_get_missing", b"\x01" + get_missing)
    put("store", "1_huge_value", b"\x01" + struct.pack("<IBBHiIQ", 0x54535356, 2, 2, 0, 0, 1, 1 << 40))
    put("store", "2_watch_bye", b"\x02" + bytes([1]) + struct.pack("<iI", 2, 4) + frame(7, 2, b"", b""))
    put("store", "2_bad_world", b"\x02" + bytes([0]) + struct.pack("<iI", 1, 9))
    challenge = struct.pack("<IB3x", 0x54535356, 2) + bytes(range(32))
    accept = struct.pack("<IBB2x", 0x54535356, 2, 0) + bytes(32)
    put("store", "3_client", b"\x03" + challenge + accept + frame(4, -1, b"", b""))


def transport_framing():
    put("transport_framing", "0_tag", b"\x00" + struct.pack("<Q", (2 << 60) | (1 << 40) | 5))
    put("transport_framing", "1_request_echo", b"\x01" + struct.pack("<I", 7) + b"body")
    put("transport_framing", "1_request_throws", b"\x01" + struct.pack("<I", 8))
    put("transport_framing", "1_request_unknown", b"\x01" + struct.pack("<I", 99) + b"x")
    put("transport_framing", "2_response_ok", b"\x02\x00payload")
    put("transport_framing", "2_response_error", b"\x02\x01remote message")
    key = struct.pack("<IiQQQ", 0x54524b59, 2, 4096, 128, 3) + b"abc"
    put("transport_framing", "3_region_key", b"\x03" + key)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--partition-config", nargs="*", default=[])
    a = p.parse_args()
    npy()
    snap()
    metis()
    mtx()
    ogb()
    meta_json()
    partition_config(a.partition_config)
    store()
    transport_framing()


if __name__ == "__main__":
    main()
