#!/usr/bin/env bash
# Remote DistTensor read throughput (tessera bench dist-gather) over UCX tcp and shared memory at
# 2 and 4 ranks on this machine, each next to ucx_perftest on the same transport in the same run.
# Writes benchmarks/results/dist_gather_<tcp|shm>_<N>ranks.json and their plot dist_gather.png.
# Usage: benchmarks/dist_gather.sh [path/to/tessera] [extra bench args...]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tessera="${1:-$here/../build/bin/tessera}"
shift || true
out="$here/results"
mkdir -p "$out"
for fabric in tcp shm; do
  if [ "$fabric" = tcp ]; then tls=tcp; else tls=posix,sysv,cma; fi
  for n in 2 4; do
    json="$out/dist_gather_${fabric}_${n}ranks.json"
    echo "== UCX_TLS=$tls, $n ranks -> $json"
    UCX_TLS="$tls" TESSERA_TRANSPORT=ucx "$tessera" launch --nproc-per-node "$n" -- \
      "$tessera" bench dist-gather --row-bytes 128..4096 --batch 10000 --json "$json" "$@"
  done
done
# The figure: both read paths against ucx_perftest and the local gather, per transport and ranks.
python3 "$here/plot_dist_gather.py" "$out"/dist_gather_tcp_{2,4}ranks.json \
  "$out"/dist_gather_shm_{2,4}ranks.json --out "$out/dist_gather.png" ||
  echo "dist_gather.sh: no plot (matplotlib missing?)" >&2
