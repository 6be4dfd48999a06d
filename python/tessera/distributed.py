"""DGL's ``dgl.distributed`` names, so ``import tessera.distributed as dist`` ports a script."""
from ._runtime import exit_client, get_rank, get_world_size, initialize  # noqa: F401
from .dist import (DistGraph, DistTensor, EdgePartitionPolicy, GraphPartitionBook,  # noqa: F401
                   NodePartitionPolicy, edge_split, node_split)
from .partition import load_partition_config, partition_graph  # noqa: F401
from .dataloading import DistEdgeDataLoader, DistNodeDataLoader  # noqa: F401
