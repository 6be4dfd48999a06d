#!/usr/bin/env bash
# The main job, end to end on the small real dataset shipped in data/cora: set up, build,
# partition Cora into 2 parts with METIS (train/val/test balanced, 1-hop halo), validate the
# partitions and print the summary.
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
