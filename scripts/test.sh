#!/usr/bin/env bash
# Runs every Cleave test on a fresh machine: installs what is missing, builds,
# then runs the lit suite (importer, diagnostics, PyTorch exports, conformance).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
LIT="$(llvm-config-22 --bindir)/lit"
"$LIT" -sv build/test
