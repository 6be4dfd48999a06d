#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The main job, end to end on the small real dataset shipped in data/cora (Cora, Planetoid split):
#  1. set up and build the `tessera` tool;
#  2. partition Cora into 2 METIS parts (train/val/test balanced, 1-hop halo) and validate every
#     partition contract and checksum against the source dataset;
#  3. build the Python package and train GraphSAGE on those 2 partitions with 2 ranks under
#     `tessera launch` (rank r loads partition r, remote neighborhoods and features come from
#     the other rank over UCX, gradients are averaged every step), printing per-epoch
#     loss/validation accuracy and the final test accuracy (published GCN: 81.5%), with a
#     loss-curve plot in out/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
[ -x /usr/local/cuda/bin/nvcc ] && export PATH=/usr/local/cuda/bin:$PATH
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >build.configure.log 2>&1 \
  || { cat build.configure.log; exit 1; }
cmake --build build -j"$(nproc)" --target tessera
./build/bin/tessera partition --input data/cora --symmetrize --parts 2 --method metis \
  --balance-mask train_mask --balance-mask val_mask --balance-mask test_mask --halo-hops 1 \
  --out out/cora-2 --name cora --overwrite
./build/bin/tessera validate out/cora-2/cora.json --dataset data/cora

bash scripts/setup-python.sh
echo "[example] building the Python package ..." >&2
python3 -m pip install . --no-build-isolation -q
# The config written above is reused by the training script (--part-dir): rank r loads part r.
./build/bin/tessera launch --nproc-per-node 2 -- \
  python3 python/examples/train_sage.py --dataset data/cora --part-dir out/cora-2 \
  --plot out/cora-2-loss.png --results out/cora-2-results.json
