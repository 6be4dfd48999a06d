# SPDX-License-Identifier: Apache-2.0
"""Importing tessera, before or after torch, in a fresh process.

On a GPU machine (glibc 2.39, Debian 12's UCX 1.13) ``import tessera`` followed by ``import torch``
aborted in ``free()``: tessera._C linked UCX, and loading libucs installs UCX's memory hooks,
which rewrite libc's mmap, munmap, brk, sbrk, madvise... before torch was loaded. Now the UCX
backend is a module loaded when the first UCX transport is created, so importing tessera maps no
UCX library, and every import order must exit 0 (an abort is exit code -6 here).
"""
import os
import subprocess
import sys

import pytest

from conftest import requires_torch

UCX_LIBRARIES = ("/libucs.", "/libucm.", "/libucp.", "/libuct.", "/libtessera_transport_ucx.")

MAPPED_UCX = (
    "fields = [line.split(None, 5) for line in open('/proc/self/maps')]\n"
    "libs = sorted({f[5].strip() for f in fields if len(f) > 5})\n"
    f"print('ucx-mapped:', [p for p in libs if any(n in p for n in {UCX_LIBRARIES!r})])\n"
)


def run_python(code, tmp_path):
    # A scratch folder as the working directory: the installed package, not a source folder.
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, timeout=600)


def describe(r):
    return f"exit code {r.returncode}\nstdout: {r.stdout[-2000:]}\nstderr: {r.stderr[-4000:]}"


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs /proc/self/maps (Linux)")
@pytest.mark.parametrize("module", ["tessera._C", "tessera"])
def test_importing_tessera_loads_no_ucx_library(module, tmp_path):
    r = run_python(f"import {module}\n" + MAPPED_UCX, tmp_path)
    assert r.returncode == 0, describe(r)
    assert "ucx-mapped: []" in r.stdout, describe(r)


@requires_torch
@pytest.mark.parametrize("first,second", [("tessera", "torch"), ("torch", "tessera"),
                                          ("tessera._C", "torch"), ("torch", "tessera._C")])
def test_either_import_order_works(first, second, tmp_path):
    r = run_python(f"import {first}\nimport {second}\nimport torch\n"
                   "x = torch.arange(1 << 20, dtype=torch.int64)\n"
                   "print('sum', int(x.sum().item()))\n", tmp_path)
    assert r.returncode == 0, describe(r)
    assert f"sum {sum(range(1 << 20))}" in r.stdout, describe(r)


def test_launcher_help_exits_zero(tmp_path):
    # `python -m tessera launch` imports tessera (and torch, where installed) before anything else.
    r = subprocess.run([sys.executable, "-m", "tessera", "launch", "--help"], capture_output=True,
                       text=True, cwd=tmp_path, timeout=600)
    assert r.returncode == 0, describe(r)
    assert "--nproc-per-node" in r.stdout, describe(r)
