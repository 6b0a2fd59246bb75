#!/usr/bin/env bash
# Installs every system and Python package Cleave needs, idempotently, on a fresh
# Debian bookworm machine. Safe to run repeatedly: it skips what is already there.
set -euo pipefail

APT_PACKAGES=(
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools clang-22 lld-22
  protobuf-compiler libprotobuf-dev
  mpich libmpich-dev
  libopenblas-dev libomp-22-dev
  ninja-build ccache cmake
  iproute2 util-linux
)
PIP_PACKAGES=(onnx onnxruntime numpy pyyaml)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! python3 -c "import onnx, onnxruntime, numpy, yaml" 2>/dev/null; then
  echo "setup: installing python packages ${PIP_PACKAGES[*]}"
  python3 -m pip install -q "${PIP_PACKAGES[@]}"
fi
echo "setup: ok"
