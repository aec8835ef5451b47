#!/usr/bin/env bash
# Creates .venv (if missing) and installs StitchCUDA into it, with the extras named in $1.
# torch is installed first and pinned: an unpinned requirement would pull the newest CUDA build
# (several GB); 2.13.0 is the CPU build on machines without a GPU's index and the CUDA build on PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  .venv/bin/python -m pip install -q "torch==${STITCHCUDA_TORCH:-2.13.0}"
fi
.venv/bin/python -m pip install -q -e ".${extras:+[$extras]}"
