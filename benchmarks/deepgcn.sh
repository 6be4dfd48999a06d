#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# DeepGCN (ResGCN+, GENConv) with parallel epochs on Tolokers at 1, 2 and 4 ranks over UCX on
# loopback (tessera launch), then the plot of validation ROC-AUC against epochs and wall time.
# Usage: benchmarks/deepgcn.sh [MACHINE] [extra train_deepgcn.py arguments...]
# Writes benchmarks/results/deepgcn/<date>-<commit>-<machine>.p<P>.json, the plot (.png) and the
# summary (.json) of the three runs.
set -euo pipefail
cd "$(dirname "$0")/.."
machine=${1:-cpu-2core}
shift || true
py=${PYTHON:-python3}
out=benchmarks/results/deepgcn
mkdir -p "$out"
stem="$out/$(date -u +%Y-%m-%d)-$(git rev-parse --short HEAD)-$machine"
runs=()
for p in 1 2 4; do
  echo "[deepgcn] $p rank(s) ..." >&2
  "$py" -m tessera launch --nproc-per-node "$p" -- "$py" python/examples/train_deepgcn.py \
    --dataset data/tolokers --parallel-epochs --split 0,1,2,3,4 --layers 7 --hidden 64 \
    --clusters 10 --epochs 8 --eval-every 2 --threads 1 --device cpu --quiet \
    --results "$stem.p$p.json" "$@"
  runs+=("$stem.p$p.json")
done
"$py" benchmarks/plot_deepgcn.py "${runs[@]}" --out "$stem"
