#!/usr/bin/env bash
# End-to-end test of the extension in a real VS Code: code-server (VS Code for the browser, from the
# npm registry) with stitchcuda.vsix installed, driven by Playwright (playwright-core) through
# Debian's chromium, on 127.0.0.1 only. Without a GPU the job replays the recorded H100 run; the
# candidate is still built with nvcc (STITCHCUDA_ARCH=sm_90).
#
#   bash scripts/e2e_vscode.sh
#
# Idempotent: each step skips what is already there. Needs root (apt-get) on Debian, Node 20 and
# the npm, PyPI and Debian registries. Environment:
#   STITCHCUDA_E2E_CACHE  where code-server is installed (default ~/.cache/stitchcuda-e2e, outside the repo)
#   E2E_ARTIFACTS         screenshots and logs (default build/e2e-artifacts, git-ignored)
#   E2E_SKIP_APT=1        skip the apt-get step (packages installed otherwise)
#   E2E_KEEP=1            keep the temporary workspace and VS Code user data
# Exits non-zero when a step or the test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"

CODE_SERVER_VERSION=4.100.3   # the last code-server whose engines allow Node 20
RIPGREP_NPM_VERSION=1.15.11   # @vscode/ripgrep in code-server 4.100.3's lib/vscode
RIPGREP_ASSET=ripgrep-v13.0.0-10-x86_64-unknown-linux-musl.tar.gz
CACHE="${STITCHCUDA_E2E_CACHE:-$HOME/.cache/stitchcuda-e2e}"
export E2E_ARTIFACTS="${E2E_ARTIFACTS:-$ROOT/build/e2e-artifacts}"

T_ALL=$(date +%s)
step_start=0
step() { step_start=$(date +%s); echo; echo "=== $* ==="; }
step_done() { echo "--- took $(( $(date +%s) - step_start )) s"; }

step "apt packages (chromium, ripgrep, headers for code-server's native modules)"
APT_PKGS=(chromium ripgrep libkrb5-dev libsecret-1-dev libxkbfile-dev pkg-config build-essential python3
          fonts-dejavu-core ca-certificates)
if [ "${E2E_SKIP_APT:-}" = 1 ]; then
  echo "skipped (E2E_SKIP_APT=1)"
else
  missing=()
  for p in "${APT_PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}"
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
  else
    echo "all installed"
  fi
fi
step_done

step "Python environment (.venv with stitchcuda[server], torch) and nvcc"
if ! .venv/bin/python -c "import stitchcuda.server.server, torch" 2>/dev/null; then
  bash scripts/setup.sh server
fi
.venv/bin/python -c "import stitchcuda.server.server, torch; print('stitchcuda server importable, torch', torch.__version__)"
export PATH="/usr/local/cuda/bin:$PATH"
command -v nvcc >/dev/null || { echo "nvcc not found (the job builds the candidate with it; /usr/local/cuda/bin is on PATH)"; exit 1; }
nvcc --version | tail -1
step_done

step "npm ci, build and package the extension (stitchcuda.vsix)"
lock_sum=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ ! -f node_modules/.e2e-lock-sum ] || [ "$(cat node_modules/.e2e-lock-sum)" != "$lock_sum" ] \
   || [ ! -f node_modules/playwright-core/package.json ]; then
  npm ci --no-audit --no-fund
  echo "$lock_sum" > node_modules/.e2e-lock-sum
fi
npm run build
npm run package
ls -l stitchcuda.vsix
step_done

step "code-server@$CODE_SERVER_VERSION in $CACHE/code-server"
CS_DIR="$CACHE/code-server"
CODE_SERVER="$CS_DIR/node_modules/.bin/code-server"
if [ -x "$CODE_SERVER" ] && [ -f "$CS_DIR/.installed-$CODE_SERVER_VERSION" ]; then
  echo "already installed"
else
  mkdir -p "$CS_DIR" "$CACHE/tmp"
  [ -f "$CS_DIR/package.json" ] || echo '{"private": true}' > "$CS_DIR/package.json"
  # @vscode/ripgrep's postinstall downloads rg from GitHub (not reachable here): it first looks in
  # $TMPDIR/vscode-ripgrep-cache-<version>/, so put Debian's rg there as that asset.
  rg_cache="$CACHE/tmp/vscode-ripgrep-cache-$RIPGREP_NPM_VERSION"
  if [ ! -f "$rg_cache/$RIPGREP_ASSET" ]; then
    mkdir -p "$rg_cache" "$CACHE/rg"
    cp "$(command -v rg)" "$CACHE/rg/rg"
    tar czf "$rg_cache/$RIPGREP_ASSET" -C "$CACHE/rg" rg
  fi
  # Native modules build against the installed Node's headers where Debian's nodejs ships them
  # (node-gyp would download them from nodejs.org otherwise).
  if [ -z "${npm_config_nodedir:-}" ] && [ -f /usr/include/node/node.h ]; then
    export npm_config_nodedir=/usr
  fi
  (cd "$CS_DIR" && TMPDIR="$CACHE/tmp" npm_config_unsafe_perm=true npm_config_yes=true \
     npm install --no-save --no-audit --no-fund --no-package-lock "code-server@$CODE_SERVER_VERSION")
  touch "$CS_DIR/.installed-$CODE_SERVER_VERSION"
fi
printf "auth: none\ncert: false\n" > "$CACHE/code-server.yaml"
"$CODE_SERVER" --config "$CACHE/code-server.yaml" --version
step_done

step "end-to-end test (extension/e2e/vscode.e2e.mjs)"
rc=0
CODE_SERVER="$CODE_SERVER" STITCHCUDA_VSIX="$ROOT/stitchcuda.vsix" STITCHCUDA_PYTHON="$ROOT/.venv/bin/python" \
  STITCHCUDA_ARCH="${STITCHCUDA_ARCH:-sm_90}" \
  node extension/e2e/vscode.e2e.mjs || rc=$?
step_done

echo
echo "total: $(( $(date +%s) - T_ALL )) s; e2e exit code $rc; artifacts: $E2E_ARTIFACTS"
if [ "$rc" = 0 ]; then echo "e2e: 1 passed, 0 failed"; else echo "e2e: 0 passed, 1 failed"; fi
exit "$rc"
