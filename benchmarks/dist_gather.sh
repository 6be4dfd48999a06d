#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Remote DistTensor read throughput (tessera bench dist-gather) over UCX tcp and shared memory at
# 2 and 4 ranks on this machine, each next to ucx_perftest on the same transport in the same run.
# Writes benchmarks/results/dist-gather-<tcp|shm>-<N>ranks/<date>-<commit>-<machine>.json and
# the plot of all four beside the tcp, 2-rank one. The commit is $TESSERA_COMMIT when set, else
# git's HEAD (with -dirty when tracked files are modified).
# Usage: benchmarks/dist_gather.sh [path/to/tessera] [extra bench args...]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tessera="${1:-$here/../build/bin/tessera}"
shift || true
out="$here/results"
commit=${TESSERA_COMMIT:-$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)}
if [ -z "${TESSERA_COMMIT:-}" ] && [ -n "$(git -C "$here" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  commit="$commit-dirty"
fi
machine=$(hostname | tr -c 'A-Za-z0-9\n' '-' | tr -s '-' | sed 's/^-//;s/-$//')
name="$(date -u +%Y-%m-%d)-${commit//+/-}-${machine:-unknown}"
jsons=()
for fabric in tcp shm; do
  if [ "$fabric" = tcp ]; then tls=tcp; else tls=posix,sysv,cma; fi
  for n in 2 4; do
    mkdir -p "$out/dist-gather-$fabric-${n}ranks"
    json="$out/dist-gather-$fabric-${n}ranks/$name.json"
    echo "== UCX_TLS=$tls, $n ranks -> $json"
    UCX_TLS="$tls" TESSERA_TRANSPORT=ucx "$tessera" launch --nproc-per-node "$n" -- \
      "$tessera" bench dist-gather --row-bytes 128..4096 --batch 10000 --json "$json" "$@"
    jsons+=("$json")
  done
done
# The figure: both read paths against ucx_perftest and the local gather, per transport and ranks.
python3 "$here/plot_dist_gather.py" "${jsons[@]}" --out "$out/dist-gather-tcp-2ranks/$name.png" ||
  echo "dist_gather.sh: no plot (matplotlib missing?)" >&2
