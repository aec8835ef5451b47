#!/usr/bin/env bash
# Creates .venv (if missing) and installs StitchCUDA into it, with the extras named in $1.
# torch is installed first and pinned: an unpinned requirement would pull the newest CUDA build
# (several GB); 2.13.0 is the CPU build on machines without a GPU's index and the CUDA build on PyPI.
# One line per step, saying what is fetched and about how big: pip itself stays quiet (-q), so a
# step that takes minutes is never silent about what it is doing.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
step() { printf 'setup: %s\n' "$*" >&2; }
if [ ! -x .venv/bin/python ]; then
  step "creating .venv with $(python3 --version 2>&1)"
  python3 -m venv .venv
fi
step "updating pip in .venv"
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  step "installing torch==${STITCHCUDA_TORCH:-2.13.0} (about 200 MB for the CPU build, 2-3 GB with CUDA; a few minutes)"
  .venv/bin/python -m pip install -q "torch==${STITCHCUDA_TORCH:-2.13.0}"
else
  step "torch $(.venv/bin/python -c 'import torch; print(torch.__version__)') is already in .venv"
fi
step "installing stitchcuda${extras:+[$extras]} (editable) and its dependencies (tens of MB)"
.venv/bin/python -m pip install -q -e ".${extras:+[$extras]}"
if ! command -v bwrap >/dev/null; then
  step "optional: install bubblewrap (apt-get install bubblewrap) to run candidates in an OS sandbox; without it only the audit hook protects"
fi
step "done: stitchcuda $(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("stitchcuda"))') in .venv"
