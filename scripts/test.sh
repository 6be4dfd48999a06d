#!/usr/bin/env bash
# Sets up, builds (CUDA compiled when nvcc exists, sm_90) and runs every test.
# Usage: scripts/test.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
bash scripts/setup.sh --python
[ -x /usr/local/cuda/bin/nvcc ] && export PATH=/usr/local/cuda/bin:$PATH
cuda=OFF
command -v nvcc >/dev/null && cuda=ON
jobs=$(nproc)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_WITH_CUDA=$cuda \
  -DTESSERA_CUDA_ARCHITECTURES=90 >"$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
echo "[test] building (TESSERA_WITH_CUDA=$cuda) ..." >&2
cmake --build "$build" -j"$jobs"
echo "[test] running ctest ..." >&2
cd "$build"
ctest --output-on-failure -j"$jobs" --timeout 600
# --- Python package (nanobind module built by scikit-build-core) and its pytest suite ---------
cd "$OLDPWD"
bash scripts/setup-python.sh
echo "[test] building and installing the Python package ..." >&2
python3 -m pip install . --no-build-isolation -q
echo "[test] running pytest ..." >&2
pytest_rc=0
python3 -m pytest tests/python -q || pytest_rc=$?
# pytest exits 5 when it collected no test: not a failure.
[ "$pytest_rc" -eq 0 ] || [ "$pytest_rc" -eq 5 ] || exit "$pytest_rc"
