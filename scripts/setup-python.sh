#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the Python dependencies of the tessera package, its examples and its tests
# (idempotent; quiet when everything is present).
# Usage: scripts/setup-python.sh            (build deps, numpy, pytest, matplotlib, tqdm, torch,
#                                            DGL and PyG for the interop tests)
#        TESSERA_SKIP_TORCH=1 scripts/setup-python.sh   (no torch, DGL or PyG: the tests that
#                                            need them skip, which CI does not accept)
# PyPI's torch 2.11.0 wheel for Linux is the CUDA 13 build: a 530 MB wheel plus ~2.7 GB of
# nvidia-* wheels (about 4.5 GB installed, 1.5 minutes here); it also runs on CPU-only machines.
# DGL: 1.1.3, the newest release on PyPI that imports with torch 2.11 (CPU). DGL 2.1.0, the only
# 2.x on PyPI, loads a graphbolt library built for one torch version, 2.0.0 to 2.2.1, and fails
# to import with any other; later DGL wheels are not on PyPI. PyG: torch_geometric 2.8.1 is pure
# Python (its SAGEConv needs no compiled extension).
set -euo pipefail
py=${PYTHON:-python3}
need=()
have() { "$py" -c "import $1" 2>/dev/null; }
have nanobind || need+=("nanobind>=2.0")
have scikit_build_core || need+=("scikit-build-core>=0.10")
have numpy || need+=(numpy)
have pytest || need+=(pytest)
have matplotlib || need+=(matplotlib)
have tqdm || need+=(tqdm)  # python/examples/dgl_style_sage.py
if ((${#need[@]})); then
  echo "[setup-python] installing: ${need[*]}" >&2
  "$py" -m pip install -q "${need[@]}"
fi
if [ "${TESSERA_SKIP_TORCH:-0}" != "1" ]; then
  if ! "$py" -c 'import torch, sys; sys.exit(0 if torch.__version__.startswith("2.11.0") else 1)' \
      2>/dev/null; then
    echo "[setup-python] installing torch==2.11.0 (large: CUDA libraries included)" >&2
    "$py" -m pip install -q torch==2.11.0
  fi
  interop=()
  "$py" -c 'import dgl, sys; sys.exit(dgl.__version__ != "1.1.3")' 2>/dev/null || interop+=(dgl==1.1.3)
  "$py" -c 'import torch_geometric, sys; sys.exit(torch_geometric.__version__ != "2.8.1")' \
    2>/dev/null || interop+=(torch_geometric==2.8.1)
  if ((${#interop[@]})); then
    echo "[setup-python] installing for the interop tests: ${interop[*]}" >&2
    "$py" -m pip install -q "${interop[@]}"
  fi
fi
exit 0
