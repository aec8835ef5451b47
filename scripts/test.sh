#!/usr/bin/env bash
# Sets up .venv and runs the linters and the test suite (GPU tests skip, with a reason, without one).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
.venv/bin/ruff check .
.venv/bin/python -m pytest -q -rs "$@"
