#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Sets up, builds (CUDA compiled when nvcc exists, sm_90) and runs every test; CI runs exactly
# this (.ci/run). It fails on a failing test, and also when tests vanish or do not run: pytest
# collecting nothing or not importing tessera, and any skipped test (GoogleTest or pytest) whose
# reason is not the absence of a GPU (scripts/check-skips.py lists every skip with its reason).
# clang-format and clang-tidy check the C++ files changed since the merge base with main
# (scripts/lint.py); every source file carries its SPDX license line (scripts/spdx.py). The
# build treats warnings as errors (TESSERA_WERROR; nvcc's own warnings and those of the CUDA
# headers stay warnings). A second build, BUILD-asan (CPU only, AddressSanitizer +
# UndefinedBehaviorSanitizer, any report fails), runs the sanitize-labelled GoogleTest binaries,
# which cover every library; --sanitize runs the whole C++ suite there instead (not the
# gpu-labelled tests).
# Usage: scripts/test.sh [--sanitize] [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
full_sanitize=0
if [ "${1:-}" = --sanitize ]; then
  full_sanitize=1
  shift
fi
build=${1:-build}
t0=$(date +%s)
stage() { echo "[test] $1 ($(($(date +%s) - t0)) s so far) ..." >&2; }
bash scripts/setup.sh --python
[ -x /usr/local/cuda/bin/nvcc ] && export PATH=/usr/local/cuda/bin:$PATH
cuda=OFF
command -v nvcc >/dev/null && cuda=ON
jobs=$(nproc)
# The Python dependencies come first: the torch wheel also carries the libtorch that
# `tessera train` (TESSERA_WITH_TORCH) builds against; without torch (TESSERA_SKIP_TORCH=1) the
# trainer is left out and its tests fail.
bash scripts/setup-python.sh
torch=OFF
python3 -c 'import torch' 2>/dev/null && torch=ON
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_WITH_CUDA=$cuda \
  -DTESSERA_CUDA_ARCHITECTURES=90 -DTESSERA_WITH_TORCH=$torch -DTESSERA_WERROR=ON \
  >"$build.configure.log" 2>&1 \
  || { cat "$build.configure.log"; exit 1; }
stage "SPDX license lines, clang-format and clang-tidy on the changed files"
python3 scripts/spdx.py
python3 scripts/lint.py "$build"
stage "building (TESSERA_WITH_CUDA=$cuda, TESSERA_WITH_TORCH=$torch)"
cmake --build "$build" -j"$jobs"
stage "running ctest"
# The output of passing and skipped tests is kept whole in the JUnit file: a skip's reason is in it.
(cd "$build" && ctest --output-on-failure -j"$jobs" --timeout 600 --test-output-size-passed 65536 \
  --output-junit "$PWD/ctest-junit.xml")
# --- the C++ tests under ASan+UBSan ------------------------------------------------------------
san="$build-asan"
stage "building the sanitizer build $san (address,undefined)"
cmake -S . -B "$san" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_WITH_CUDA=OFF \
  -DTESSERA_SANITIZE=address,undefined -DTESSERA_BUILD_BENCHMARKS=ON -DTESSERA_BUILD_PYTHON=OFF \
  >"$san.configure.log" 2>&1 || { cat "$san.configure.log"; exit 1; }
if [ $full_sanitize = 1 ]; then
  cmake --build "$san" -j"$jobs"
  san_select=(-LE gpu)
else
  cmake --build "$san" -j"$jobs" --target tessera_sanitize_tests
  san_select=(-L sanitize)
fi
stage "running ctest ${san_select[*]} under ASan+UBSan"
# Any report aborts its test (UBSan included: -fno-sanitize-recover); leaks are reported too.
# Not here: two tests of the process's own limits, which ASan changes (its shadow memory needs
# more address space than OrderedPrefetcher's RLIMIT_AS test grants, and it inflates the memory
# the store's flood test bounds); they run in the main build.
san_select+=(-E 'OrderedPrefetcher.OutOfThreadsIsAnErrorNotATerminate|Store.FloodWhileAJobTrains')
(cd "$san" && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest "${san_select[@]}" --output-on-failure -j"$jobs" --timeout 900 \
  --test-output-size-passed 65536 --output-junit "$PWD/ctest-junit.xml")
# --- Python package (nanobind module built by scikit-build-core) and its pytest suite ---------
stage "building and installing the Python package"
# pyproject builds the package CPU-only unless TESSERA_WITH_CUDA=ON: with a GPU to run them, its
# CUDA twins are built too, so its GPU tests run instead of skipping.
py_cuda=OFF
[ "$cuda" = ON ] && nvidia-smi -L >/dev/null 2>&1 && py_cuda=ON
TESSERA_WITH_CUDA=$py_cuda python3 -m pip install . --no-build-isolation -q
stage "running pytest"
# Any non-zero exit fails, 5 (nothing collected) included.
# tests/python/test_train_cpp.py runs this build's `tessera train` against the Python example.
TESSERA_TOOL="$PWD/$build/bin/tessera" python3 -m pytest tests/python -q \
  --junitxml "$build/pytest-junit.xml"
stage "checking the skipped tests"
python3 scripts/check-skips.py "$build/ctest-junit.xml" "$san/ctest-junit.xml" \
  "$build/pytest-junit.xml"
echo "[test] all passed in $(($(date +%s) - t0)) s" >&2
