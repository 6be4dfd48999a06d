#!/usr/bin/env bash
# Installs the Python dependencies of the tessera package and its tests (idempotent; quiet when
# everything is present). torch is needed only for training and the torch tests, which skip
# without it.
# Usage: scripts/setup-python.sh            (build deps, numpy, pytest, matplotlib, torch)
#        TESSERA_SKIP_TORCH=1 scripts/setup-python.sh   (everything but torch)
# PyPI's torch 2.11.0 wheel for Linux is the CUDA 13 build: a 530 MB wheel plus ~2.7 GB of
# nvidia-* wheels (about 4.5 GB installed, 1.5 minutes here); it also runs on CPU-only machines.
set -euo pipefail
py=${PYTHON:-python3}
need=()
have() { "$py" -c "import $1" 2>/dev/null; }
have nanobind || need+=("nanobind>=2.0")
have scikit_build_core || need+=("scikit-build-core>=0.10")
have numpy || need+=(numpy)
have pytest || need+=(pytest)
have matplotlib || need+=(matplotlib)
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
fi
exit 0
