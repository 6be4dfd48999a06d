# SPDX-License-Identifier: Apache-2.0
"""Former name of the module behind ``tessera.distributed``'s DistGraph, DistTensor and
node_split, kept so that ``import tessera.dist`` still works: it is ``tessera._dist`` itself.
New code imports ``tessera.distributed`` (DGL's ``dgl.distributed``).
"""
import sys

from . import _dist

sys.modules[__name__] = _dist
