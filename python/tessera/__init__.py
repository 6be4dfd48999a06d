"""Tessera: a GPU-first distributed GNN engine with DGL's distributed API."""
from . import _C  # noqa: F401
