# SPDX-License-Identifier: Apache-2.0
"""The package's module structure: tessera.distributed is the public name of the distributed
API (DGL's dgl.distributed), the old name tessera.dist still imports, and the modules inside the
package import each other without a cycle (also through imports inside functions)."""
import ast
import pathlib
import subprocess
import sys

import tessera

PKG = pathlib.Path(tessera.__file__).resolve().parent
SRC = pathlib.Path(__file__).resolve().parents[2] / "python" / "tessera"


def internal_imports(path):
    """The package modules `path` imports (relative imports, at any depth of the file)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                names.add(node.module.split(".")[0])
            else:
                names.update(a.name for a in node.names)
    return names


def test_internal_imports_form_no_cycle():
    modules = {p.stem: p for p in SRC.glob("*.py") if p.stem not in ("__init__", "__main__")}
    graph = {m: sorted(internal_imports(p) & set(modules)) for m, p in modules.items()}
    state = {}

    def visit(m, path):
        state[m] = "open"
        for n in graph[m]:
            assert state.get(n) != "open", "import cycle: " + " -> ".join(path + [m, n])
            if n not in state:
                visit(n, path + [m])
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m, [])


def test_distributed_is_the_public_name():
    import tessera.distributed as dist

    for name in ("DistGraph", "DistTensor", "node_split", "edge_split", "initialize",
                 "DistNodeDataLoader", "DistEdgeDataLoader", "DistEmbedding", "all_reduce",
                 "all_reduce_gradients", "gradient_sync_mode", "partition_graph"):
        assert hasattr(dist, name), name
    assert dist.DistGraph is tessera.DistGraph


def test_old_module_name_still_imports():
    import tessera.dist

    assert tessera.dist is tessera._dist
    assert tessera.dist.DistTensor is tessera.distributed.DistTensor


def test_optimizers_import_under_dgls_module_path():
    # dgl.distributed.optim is a package; a fresh interpreter imports through the name alone.
    code = ("from tessera.distributed.optim import SparseAdagrad, SparseAdam\n"
            "import tessera.distributed.optim as o, tessera\n"
            "assert o is tessera.optim and SparseAdam is tessera.optim.SparseAdam\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]


def test_each_public_module_imports_alone():
    # A fresh interpreter per module: an import that works only after another one would fail.
    for mod in ("tessera.distributed", "tessera.dataloading", "tessera.dist", "tessera.embedding",
                "tessera.partition"):
        r = subprocess.run([sys.executable, "-c", f"import {mod}"], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, (mod, r.stderr[-2000:])
