#!/usr/bin/env bash
# Runs extension/e2e/vscode.e2e.mjs from an unpacked bundle (scripts/e2e_bundle.sh): its Node,
# code-server, chromium and playwright-core, on a machine that has none of them and no network.
#   E2E_DIR=/path/to/e2e STITCHCUDA_PYTHON=python3 [E2E_LIVE=1] bash scripts/e2e_run_bundled.sh
set -euo pipefail
cd "$(dirname "$0")/.."
E="${E2E_DIR:?set E2E_DIR to the unpacked bundle}"
cat "$E/VERSIONS"
# The test imports playwright-core from the repository's node_modules (ESM ignores NODE_PATH).
[ -e node_modules/playwright-core ] || { mkdir -p node_modules && ln -sfn "$E/node_modules/playwright-core" node_modules/playwright-core; }
export PATH="$E/bin:$PATH"
CODE_SERVER="$E/bin/code-server" CHROMIUM="$E/bin/chromium" STITCHCUDA_VSIX="$E/stitchcuda.vsix" \
  "$E/bin/node" extension/e2e/vscode.e2e.mjs
