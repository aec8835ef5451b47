#!/usr/bin/env bash
# Sets up .venv and runs the linters and the test suite (GPU tests skip, with a reason, without one).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
# Where nvcc is installed, the generated cuBLAS/cuDNN sources are compiled too: their headers come
# from the libraries' wheels (scripts/cuda_headers.sh); without them those two tests skip, saying so.
if [ -z "${STITCHCUDA_EXTRA_INCLUDE:-}" ] && { command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; }; then
  if headers=$(bash scripts/cuda_headers.sh); then
    export STITCHCUDA_EXTRA_INCLUDE="$headers"
  else
    echo "cuBLAS/cuDNN headers could not be fetched: their compile tests will skip" >&2
  fi
fi
.venv/bin/ruff check .
.venv/bin/python -m pytest -q -rs "$@"
