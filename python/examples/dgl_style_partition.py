#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Partitions a node-classification dataset for dgl_style_sage.py, the way DGL's
examples/distributed/graphsage/partition_graph.py prepares one for its node_classification.py:
the features are stored as ``features`` and the labels as ``labels``, with ``train_mask`` /
``val_mask`` / ``test_mask`` beside them.

    python3 python/examples/dgl_style_partition.py --dataset data/cora --num_parts 2 \\
        --undirected --balance_train --balance_edges --output out/dgl_style/cora-p2

Differences from DGL's partition_graph.py:
  * ``--dataset`` is a dataset folder Tessera reads (``tessera.load_dataset``: npy, OGB, ...)
    instead of the name of a DGL / OGB dataset class that downloads it; the graph name is the
    folder's name. ``load_npy`` below replaces ``load_reddit`` / ``load_ogb``.
  * The shipped Cora stores its 0/1 features as uint8 and unnormalized; ``load_npy`` casts
    them to float32 and row-normalizes them, which is what DGL's ``CoraGraphDataset`` gives
    (its ``_preprocess_features``). Other datasets are only cast to float32 (``--no_row_norm``
    skips the normalization).
  * ``--undirected``: ``dgl.to_bidirected`` becomes ``partition_graph(..., symmetrize=True)``
    (the same graph when the input repeats no edge: every pair once in each direction; node
    data is kept). Without it the edges stay as the dataset stores them.
  * ``--graphbolt`` is not offered (Tessera has one partition format).
"""
import argparse
import os
import time

import numpy as np

import tessera


def load_npy(path, row_norm=True):
    """A Tessera dataset folder as (graph, number of classes): the graph is the mapping
    ``tessera.partition_graph`` takes ({"edge_index", "num_nodes", "ndata"})."""
    ds = tessera.load_dataset(path, symmetrize=False)  # as stored: --undirected symmetrizes
    ndata = dict(ds.ndata)
    feat = np.asarray(ndata.pop("feat"), dtype=np.float32)
    if row_norm:
        rowsum = feat.sum(1, keepdims=True)
        feat = feat / np.where(rowsum == 0, 1.0, rowsum)
    labels = np.asarray(ndata.pop("label"), dtype=np.int64)
    graph = ds.graph  # CSC: the in-edges of node v are indices[indptr[v]:indptr[v + 1]]
    dst = np.repeat(np.arange(graph.num_nodes, dtype=np.int64), np.diff(graph.indptr))
    src = np.asarray(graph.indices, dtype=np.int64)
    ndata = {"features": feat, "labels": labels,
             **{k: v for k, v in ndata.items() if k in ("train_mask", "val_mask", "test_mask")}}
    g = {"edge_index": (src, dst), "num_nodes": ds.num_nodes, "ndata": ndata}
    return g, int(labels.max()) + 1


if __name__ == "__main__":
    argparser = argparse.ArgumentParser("Partition graph")
    argparser.add_argument("--dataset", type=str, default="data/cora",
                           help="dataset folder (npy layout, OGB, ...)")
    argparser.add_argument("--num_parts", type=int, default=4, help="number of partitions")
    argparser.add_argument("--part_method", type=str, default="metis",
                           help="the partition method")
    argparser.add_argument("--balance_train", action="store_true",
                           help="balance the training size in each partition.")
    argparser.add_argument("--undirected", action="store_true",
                           help="turn the graph into an undirected graph.")
    argparser.add_argument("--balance_edges", action="store_true",
                           help="balance the number of edges in each partition.")
    argparser.add_argument("--num_trainers_per_machine", type=int, default=1,
                           help="the number of trainers per machine: the machine's T "
                                "trainers share its partition (launch --nproc-per-node T "
                                "on each of the num_parts machines)")
    argparser.add_argument("--no_row_norm", action="store_true",
                           help="keep the features as stored (cast to float32)")
    argparser.add_argument("--output", type=str, default="data",
                           help="Output path of partitioned graph.")
    args = argparser.parse_args()

    start = time.time()
    name = os.path.basename(os.path.normpath(args.dataset))
    g, _ = load_npy(args.dataset, row_norm=not args.no_row_norm)
    print(f"Load {name} takes {time.time() - start:.3f} seconds")
    print(f"|V|={g['num_nodes']}, |E|={len(g['edge_index'][0])}")
    nd = g["ndata"]
    print(f"train: {int(nd['train_mask'].sum())}, valid: {int(nd['val_mask'].sum())}, "
          f"test: {int(nd['test_mask'].sum())}")
    balance_ntypes = nd["train_mask"] if args.balance_train else None

    tessera.partition_graph(
        g,
        name,
        args.num_parts,
        args.output,
        part_method=args.part_method,
        balance_ntypes=balance_ntypes,
        balance_edges=args.balance_edges,
        num_trainers_per_machine=args.num_trainers_per_machine,
        symmetrize=args.undirected,
    )
