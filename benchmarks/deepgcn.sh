#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# DeepGCN (ResGCN+, GENConv) with parallel epochs on Tolokers at 1, 2 and 4 ranks over UCX on
# loopback (tessera launch), then the plot of validation ROC-AUC against epochs and wall time.
# Usage: benchmarks/deepgcn.sh [MACHINE] [extra train_deepgcn.py arguments...]
# Writes benchmarks/results/deepgcn/<date>-<commit>-<machine>.p<P>.json, the plot (.png) and the
# summary (.json) of the runs. Later arguments win (`--device cuda` trains on the GPU; ranks
# then share it).
# Env: DEEPGCN_RANKS     rank counts to run (default "1 2 4")
#      TESSERA_RESULTS   results folder (default benchmarks/results)
#      TESSERA_COMMIT    the commit in the file names (default git's HEAD)
set -euo pipefail
cd "$(dirname "$0")/.."
machine=${1:-cpu-2core}
shift || true
py=${PYTHON:-python3}
out=${TESSERA_RESULTS:-benchmarks/results}/deepgcn
mkdir -p "$out"
commit=${TESSERA_COMMIT:-$(git rev-parse --short HEAD)}
stem="$out/$(date -u +%Y-%m-%d)-$commit-$machine"
runs=()
for p in ${DEEPGCN_RANKS:-1 2 4}; do
  echo "[deepgcn] $p rank(s) ..." >&2
  "$py" -m tessera launch --nproc-per-node "$p" -- "$py" python/examples/train_deepgcn.py \
    --dataset data/tolokers --parallel-epochs --split 0,1,2,3,4 --layers 7 --hidden 64 \
    --clusters 10 --epochs 8 --eval-every 2 --threads 1 --device cpu --quiet \
    --results "$stem.p$p.json" "$@"
  runs+=("$stem.p$p.json")
done
"$py" benchmarks/plot_deepgcn.py "${runs[@]}" --out "$stem"
