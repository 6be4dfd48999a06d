# SPDX-License-Identifier: Apache-2.0
"""DistTensor across ranks: every rank writes disjoint (interleaved, so mostly remote) rows of a
new tensor, then reads every row back; reads g.ndata["feat"] / ["label"] for all nodes and the
endpoints of every edge (find_edges) and the in-degrees of every node; counts the nonzero
elements of both tensors (the written one on the last rank alone: not collective) and records
what the partition policies say on each rank.

    python -m tessera launch --nproc-per-node P -- python dist_tensor.py CONFIG OUT

Writes <OUT>/rank<r>.npz; the test checks it against the dataset."""
import os
import sys

sys.modules["torch"] = None  # NumPy is enough here (DistTensor reads return NumPy arrays)
import numpy as np  # noqa: E402

import tessera  # noqa: E402


def expected_rows(ids: np.ndarray, world: int) -> np.ndarray:
    """Row v holds (v, 7 v + 1, the rank that wrote it)."""
    return np.stack([ids, 7 * ids + 1, ids % world], axis=1).astype(np.int64)


def main() -> int:
    config, out = sys.argv[1], sys.argv[2]
    tessera.initialize()
    rank, world = tessera.get_rank(), tessera.get_world_size()
    g = tessera.DistGraph("cora", part_config=config)
    assert g.is_distributed, g
    n = g.num_nodes()
    t = tessera.DistTensor((n, 3), np.int64, "written-by-all",
                           part_policy=g.get_node_partition_policy())
    mine = np.arange(rank, n, world, dtype=np.int64)  # rows of every owner
    rng = np.random.default_rng(rank)
    mine = rng.permutation(mine)
    for chunk in np.array_split(mine, 3):  # several writes, each spanning owners
        t[chunk] = expected_rows(chunk, world)
    g.barrier()  # every rank's writes are done before anyone reads
    written = np.asarray(t[np.arange(n, dtype=np.int64)])
    lo, hi = t.local_range()
    local = np.array(t.local_partition())
    # Features and labels of every node, asked in a shuffled order with repeats.
    ids = np.concatenate([rng.permutation(n), rng.integers(0, n, 500)]).astype(np.int64)
    feat = np.asarray(g.ndata["feat"][ids])
    label = np.asarray(g.ndata["label"][ids])
    # Endpoints of edges of every owner, shuffled with repeats.
    eids = np.concatenate([rng.permutation(g.num_edges()),
                           rng.integers(0, g.num_edges(), 300)]).astype(np.int64)
    src, dst = g.find_edges(eids)
    # In-degrees of every node, and (rank 0 alone: not collective) of some IDs with repeats.
    indeg = np.asarray(g.in_degrees())
    some = np.asarray(g.in_degrees(ids[-500:])) if rank == 0 else np.zeros(0, np.int64)
    nnz = t.count_nonzero() if rank == world - 1 else -1
    feat_nnz = g.ndata["feat"].count_nonzero()
    npol, epol = g.get_node_partition_policy(), g.get_edge_partition_policy()
    policy = np.array([npol.part_id, npol.get_part_size(), epol.get_part_size()])
    to_partid = np.asarray(npol.to_partid(np.arange(n, dtype=np.int64)))
    to_local = np.asarray(npol.to_local(np.arange(lo, hi, dtype=np.int64)))
    os.makedirs(out, exist_ok=True)
    tmp = os.path.join(out, f".rank{rank}.npz")
    np.savez(tmp, written=written, local=local, local_range=np.array([lo, hi]), ids=ids,
             feat=feat, label=label, orig_nids=np.asarray(g.orig_nids()),
             orig_nids_of_ids=np.asarray(g.orig_nids(ids)), eids=eids,
             src=np.asarray(src), dst=np.asarray(dst), indeg=indeg, some_indeg=some,
             node_range=np.array(g.local_node_range()), nnz=nnz, feat_nnz=feat_nnz,
             policy=policy, to_partid=to_partid, to_local=to_local,
             keys=np.array([t.kvstore_key, epol.policy_str]))
    os.replace(tmp, os.path.join(out, f"rank{rank}.npz"))
    tessera.exit_client()
    return 0


if __name__ == "__main__":
    sys.exit(main())
