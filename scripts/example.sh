#!/usr/bin/env bash
# Sets up .venv and optimises the shipped example module end to end.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/stitchcuda optimize examples/gated_block.py "$@"
