# SPDX-License-Identifier: Apache-2.0
"""Sparse optimizers of DistEmbedding (DGL's ``dgl.distributed.optim``)."""
from .embedding import SparseAdagrad, SparseAdam  # noqa: F401

__all__ = ["SparseAdagrad", "SparseAdam"]
