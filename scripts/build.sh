#!/usr/bin/env bash
# Configures (once) and builds Cleave in build/ with Ninja and ccache.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ! -f build/build.ninja ]]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
ninja -C build
