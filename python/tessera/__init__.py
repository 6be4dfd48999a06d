# SPDX-License-Identifier: Apache-2.0
"""Tessera: a GPU-first distributed GNN engine with DGL's distributed API.

Importing tessera needs only NumPy; ``tessera.nn`` and tensors from the loaders need PyTorch.
"""
# PyTorch, where it is installed, is loaded before tessera._C and its libraries: on a GPU
# machine (Ubuntu's glibc 2.39) loading torch after them aborted in free(). tessera imports
# torch anyway (tensors from the loaders), so this only fixes the order.
try:
    import torch as _torch  # noqa: F401
except ImportError:  # torch is optional: only training needs it
    pass
import os as _os

from . import _C
from ._C import NotCompiledError, PartitionBook, set_num_threads, num_threads
from ._runtime import exit_client, get_rank, get_world_size, initialize, is_initialized
from ._dist import (DistGraph, DistTensor, EdgePartitionPolicy, GraphPartitionBook,
                    NodePartitionPolicy, PartitionPolicy, edge_split, node_split)
from .partition import (graph_from_arrays, load_dataset, load_partition_config,
                        partition_graph, validate_partitions)
from . import dataloading, distributed, ops
from .dataloading import (EID, NID, Block, DistEdgeDataLoader, DistNodeDataLoader,
                          EdgeDataLoader, MultiLayerFullNeighborSampler,
                          MultiLayerNeighborSampler, NeighborSampler, NodeDataLoader)
from .embedding import DistEmbedding
from . import cluster
from .cluster import ClusterGCNLoader, ClusterGCNSampler
from .message_passing import update_all
from . import optim
from . import graphs
from .graphs import (DistributedGraphSampler, GraphDataLoader, GraphDataset,
                     read_graph_dataset, write_graph_dataset)

__version__ = _C.__version__

__all__ = ["initialize", "is_initialized", "get_rank", "get_world_size", "exit_client",
           "partition_graph", "load_dataset", "graph_from_arrays", "validate_partitions",
           "load_partition_config", "DistGraph", "DistTensor", "GraphPartitionBook",
           "PartitionPolicy", "NodePartitionPolicy", "EdgePartitionPolicy", "node_split",
           "edge_split",
           "NeighborSampler", "MultiLayerNeighborSampler", "MultiLayerFullNeighborSampler",
           "NodeDataLoader", "DistNodeDataLoader", "EdgeDataLoader",
           "DistEdgeDataLoader", "Block", "PartitionBook", "NotCompiledError",
           "set_num_threads", "num_threads", "dataloading", "distributed", "nn", "convert",
           "DistEmbedding", "optim", "launch", "ops", "NID", "EID"]
__all__ += ["graphs", "GraphDataset", "read_graph_dataset", "write_graph_dataset",
            "GraphDataLoader", "DistributedGraphSampler"]
__all__ += ["cluster", "ClusterGCNSampler", "ClusterGCNLoader"]
__all__ += ["update_all"]


def launch(command, nproc_per_node: int = 1, nnodes: int = 1, node_rank: int = 0,
           master_addr: str = "127.0.0.1", master_port: int = 0,
           prefix_output: bool = True, token_file=None, grace=None) -> int:
    """Runs ``command`` (a list of strings) once per local rank with the job's environment
    set (``tessera launch``; DGL's launch.py); returns 0, or the exit code of the first rank
    that failed, after stopping the others (SIGTERM, then SIGKILL ``grace`` seconds later;
    default 5). ``token_file``: a file only you can read holding the job token, which every
    node of a job of several nodes needs (default: TESSERA_JOB_TOKEN or TESSERA_JOB_TOKEN_FILE,
    else a random token on a single node). The ranks get PYTHONUNBUFFERED=1 unless it is set
    (the C++ launcher's rule): their output goes to the launcher through pipes, and a Python
    rank would otherwise hold what it printed in an 8 KiB buffer, shown late and lost when the
    rank is stopped."""
    if isinstance(command, (str, bytes, _os.PathLike)):
        # A string would be run one character per argument ("cannot run 'e'" for "echo hi").
        raise TypeError(f"launch: command must be a list of arguments, not a string: "
                        f"{command!r} (e.g. shlex.split({command!r}))")
    kwargs = {} if grace is None else {"grace_s": float(grace)}
    if token_file is not None:
        kwargs["token_file"] = _os.fspath(token_file)
    restore = _catch_ignored_signals()
    try:
        return _C.launch([str(c) for c in command], int(nproc_per_node), int(nnodes),
                         int(node_rank), str(master_addr), int(master_port), bool(prefix_output),
                         **kwargs)
    finally:
        restore()


def _catch_ignored_signals():
    """Python ignores SIGPIPE and SIGXFSZ, and an ignored signal stays ignored across exec: the
    ranks would start with them ignored (a rank's `producer | head` then runs on with write
    errors instead of ending), where torchrun's (subprocess's restore_signals) and the C++
    launcher's start with the default action. While the ranks start they are caught by a
    handler that does nothing instead (a caught signal is reset to its default at exec; this
    process still gets EPIPE, as when ignored); the returned function ignores them again."""
    import signal

    caught = []
    for name in ("SIGPIPE", "SIGXFSZ"):
        sig = getattr(signal, name, None)
        try:
            if sig is not None and signal.getsignal(sig) == signal.SIG_IGN:
                signal.signal(sig, _ignore_signal)
                caught.append(sig)
        except ValueError:  # not the main thread: the ranks inherit what this process has
            break

    def restore():
        for sig in caught:
            signal.signal(sig, signal.SIG_IGN)

    return restore


def _ignore_signal(signum, frame):
    pass


def __getattr__(name):
    # tessera.nn needs torch: import it only when asked for.
    if name in ("nn", "convert"):
        import importlib

        mod = importlib.import_module(f".{name}", __name__)
        globals()[name] = mod
        return mod
    raise AttributeError(f"module 'tessera' has no attribute {name!r}")
