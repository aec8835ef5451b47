#!/usr/bin/env bash
# Packs the VS Code end-to-end test for a machine with no network (the lent GPU machine): Node,
# code-server, Debian's chromium with the shared libraries it links (glibc's own excepted), fonts,
# playwright-core and stitchcuda.vsix, as one xz stream split into 60 MiB parts under
# .carry/e2e-parts/ (the device tool carries at most 64 MiB per call). scripts/gpu_run.sh's
# `e2e-part` stage stores one part per call on the warm machine; its `e2e` stage joins them, checks
# the sha256 and runs extension/e2e/vscode.e2e.mjs live (E2E_LIVE=1).
#
#   bash scripts/e2e_vscode.sh      # once: installs code-server, builds the .vsix
#   bash scripts/e2e_bundle.sh      # then: .carry/e2e-parts/part-00 ...
#   E2E_BUNDLE_CHECK=1 bash scripts/e2e_bundle.sh   # also unpack and run the e2e from the bundle here
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
CACHE="${STITCHCUDA_E2E_CACHE:-$HOME/.cache/stitchcuda-e2e}"
CS="$CACHE/code-server"
for need in "$CS/node_modules/.bin/code-server" stitchcuda.vsix node_modules/playwright-core/package.json \
            /usr/lib/chromium/chromium /usr/bin/node; do
  [ -e "$need" ] || { echo "missing $need: run scripts/e2e_vscode.sh here first"; exit 1; }
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
B="$work/e2e"
mkdir -p "$B"/{bin,chromium-lib,cs-lib,fonts,node_modules,etc}

cp /usr/bin/node "$B/bin/node"
# chromium without its translations (en-US is all the test needs).
cp -a /usr/lib/chromium "$B/chromium"
find "$B/chromium/locales" -type f ! -name 'en-US*' -delete
# code-server without build intermediates and Windows-only binaries.
cp -a "$CS" "$B/code-server"
find "$B/code-server" -type d -name obj.target -prune -exec rm -rf {} +
find "$B/code-server" \( -name '*win32*' -o -name '*.pdb' \) -prune -exec rm -rf {} +
cp -a node_modules/playwright-core "$B/node_modules/"
cp stitchcuda.vsix "$B/"
cp -a /usr/share/fonts/truetype/dejavu "$B/fonts/"

# Shared libraries, resolved here. glibc's own stay the target's. chromium gets all the others
# (its wrapper alone sets LD_LIBRARY_PATH); code-server's native modules only what is not the C++
# runtime, because its environment reaches the Python language server and torch needs the
# target's newer libstdc++.
glibc='^(libc|libm|libdl|librt|libpthread|libresolv|libutil|libanl|ld-linux-x86-64)\.so'
libs_of() { ldd "$@" 2>/dev/null | awk '/=> \//{print $3}' | sort -u; }
for lib in $(libs_of /usr/lib/chromium/chromium /usr/lib/chromium/*.so); do
  base=$(basename "$lib"); [[ "$base" =~ $glibc ]] || cp -L "$lib" "$B/chromium-lib/$base"
done
# NSS loads its crypto modules by name at run time.
for lib in libsoftokn3.so libfreebl3.so libfreeblpriv3.so libnssckbi.so libnssdbm3.so; do
  for d in /usr/lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu/nss; do
    [ -e "$d/$lib" ] && cp -L "$d/$lib" "$B/chromium-lib/" && break
  done
done
mapfile -t natives < <(find "$B/code-server" -name '*.node' -type f)
for lib in $(libs_of "${natives[@]}"); do
  base=$(basename "$lib")
  [[ "$base" =~ $glibc || "$base" =~ ^(libstdc\+\+|libgcc_s)\.so ]] || cp -L "$lib" "$B/cs-lib/$base"
done

cat >"$B/etc/fonts.conf" <<'EOF'
<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "fonts.dtd">
<fontconfig><dir prefix="relative">../fonts</dir><cachedir>/tmp/stitchcuda-e2e-fontcache</cachedir></fontconfig>
EOF
cat >"$B/bin/chromium" <<'EOF'
#!/bin/sh
# Debian's chromium with the libraries it was built against; fonts from the bundle.
here=$(cd "$(dirname "$0")/.." && pwd)
export LD_LIBRARY_PATH="$here/chromium-lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export FONTCONFIG_FILE="$here/etc/fonts.conf"
exec "$here/chromium/chromium" "$@"
EOF
chmod +x "$B/bin/chromium"
cat >"$B/bin/code-server" <<'EOF'
#!/bin/sh
# code-server on the bundled Node; its native modules' libraries (not the C++ runtime) from the bundle.
here=$(cd "$(dirname "$0")/.." && pwd)
export LD_LIBRARY_PATH="$here/cs-lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$here/bin:$PATH"
exec "$here/bin/node" "$here/code-server/node_modules/code-server/out/node/entry.js" "$@"
EOF
chmod +x "$B/bin/code-server"
# Which build of what went in, for the record.
{
  echo "node $(/usr/bin/node --version)"
  echo "code-server $("$CS/node_modules/.bin/code-server" --config "$CACHE/code-server.yaml" --version 2>/dev/null | grep -m1 -E '^[0-9]')"
  echo "chromium $(/usr/lib/chromium/chromium --version 2>/dev/null || true)"
  echo "glibc needed by chromium: $(objdump -T /usr/lib/chromium/chromium | grep -o 'GLIBC_2\.[0-9]*' | sort -t. -k2 -n -u | tail -1)"
  echo "vsix sha256 $(sha256sum stitchcuda.vsix | cut -d' ' -f1)"
} >"$B/VERSIONS"
cat "$B/VERSIONS"
du -sh "$B"

out="$ROOT/.carry/e2e-parts"
rm -rf "$out" && mkdir -p "$out"
tar -C "$work" -cf - e2e | xz -T0 -6 | split -b 60M -d -a 2 - "$out/part-"
(cd "$out" && cat part-* | sha256sum | cut -d' ' -f1 >SHA256 && ls -l)

if [ "${E2E_BUNDLE_CHECK:-}" = 1 ]; then
  check=$(mktemp -d)
  cat "$out"/part-* | xz -d | tar -x -C "$check"
  E2E_DIR="$check/e2e" STITCHCUDA_PYTHON="$ROOT/.venv/bin/python" bash scripts/e2e_run_bundled.sh
  rm -rf "$check"
fi
