#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs what Tessera needs on Debian 12 (idempotent; quiet when everything is present).
# Usage: scripts/setup.sh [--python]   (--python also installs numpy and pytest)
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config zlib1g-dev libdeflate-dev libmetis-dev metis libgtest-dev
      libbenchmark-dev nlohmann-json3-dev libcli11-dev libfmt-dev libucx-dev ucx-utils
      clang-format clang-tidy python3-pip)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "[setup] installing: ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ "${1:-}" = "--python" ]; then
  python3 -c 'import numpy, pytest' 2>/dev/null || python3 -m pip install -q numpy pytest
fi
if [ ! -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc >/dev/null; then
  echo "[setup] note: no CUDA toolkit found; Tessera builds CPU-only (TESSERA_WITH_CUDA=OFF)" >&2
fi
exit 0
