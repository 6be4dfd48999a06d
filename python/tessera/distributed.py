# SPDX-License-Identifier: Apache-2.0
"""``tessera.distributed``: the public API of distributed training, under the names of DGL's
``dgl.distributed`` (``import tessera.distributed as dist`` ports a script), plus the collectives
a data-parallel training loop needs, over Tessera's transport (no torch.distributed process group
is required).

The implementation lives in private modules: ``_dist`` (DistGraph, DistTensor, the partition
book, node_split), ``_collectives``, ``_runtime``, ``dataloading``, ``embedding``.
"""
import sys as _sys

from . import optim
from ._collectives import (CommTimer, all_gather_object, all_reduce,  # noqa: F401
                           all_reduce_gradients, broadcast_parameters, data_parallel,
                           gradient_sync_mode)
from ._dist import (DistGraph, DistTensor, EdgePartitionPolicy,  # noqa: F401
                    GraphPartitionBook, NodePartitionPolicy, PartitionPolicy, edge_split,
                    node_split)
from ._runtime import (barrier, exit_client, get_rank, get_world_size,  # noqa: F401
                       initialize, is_distributed, runtime)
from .dataloading import (DistDataLoader, DistEdgeDataLoader,  # noqa: F401
                          DistNodeDataLoader)
from .embedding import DistEmbedding  # noqa: F401
from .partition import load_partition_config, partition_graph  # noqa: F401


def find_edges(g, edge_ids):
    """``(src, dst)`` of the edges ``edge_ids`` of the DistGraph ``g`` (DGL's
    ``dgl.distributed.find_edges``): ``g.find_edges(edge_ids)``."""
    return g.find_edges(edge_ids)


# DGL's optimizers are dgl.distributed.optim, a subpackage; this is a module, so the name of the
# submodule is registered for `from tessera.distributed.optim import SparseAdam` (tessera.optim).
_sys.modules[__name__ + ".optim"] = optim
