#!/usr/bin/env bash
# Prepares .carry/ (git-ignored) for a device call: the KernelBench problems and the wheels the GPU
# machine lacks (it has torch but no network). Run here, then name .carry/kernelbench and
# .carry/wheels in the device call's `carry`; scripts/gpu_run.sh unpacks the wheels there.
set -eu
cd "$(dirname "$0")/.."
mkdir -p .carry/wheels
[ -d .carry/kernelbench ] || cp -r ../shared/kernelbench .carry/
pip=${PIP:-.venv/bin/pip}
# einops: some KernelBench level-3 problems; tree-sitter(-cuda): kernel-to-source mapping of NCU
# findings; pygls and the rest: the language server and its pytest-lsp tests, run live on the GPU;
# openai and its dependencies: the LLM coder's scripted GPU run.
$pip download -q --no-deps --python-version 3.12 --only-binary=:all: \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
  -d .carry/wheels einops tree-sitter tree-sitter-cuda tree-sitter-python \
  pygls lsprotocol cattrs attrs pytest-lsp pytest-asyncio \
  openai httpx2 httpcore2 h11 truststore jiter pydantic pydantic-core annotated-types typing-inspection sniffio distro \
  typing-extensions
# Nsight Systems there is the copy inside Nsight Compute, whose QDSTRM importer needs elfutils'
# libdw, which that machine lacks: without it `nsys profile` writes no report. This machine's copy
# (and its libelf) travel in .carry/libs; gpu_run.sh puts them on LD_LIBRARY_PATH.
mkdir -p .carry/libs
for lib in libdw.so.1 libelf.so.1; do
  src=$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ {print $NF; exit}')
  if [ -n "$src" ]; then cp -L "$src" .carry/libs/; else echo "carry: $lib not found here; nsys on the GPU machine will write no report"; fi
done
ls .carry/wheels .carry/libs
# bubblewrap, for the sandbox's GPU tests (that machine has none): the binary and the libraries it
# links, behind a wrapper that passes them to the dynamic loader for bwrap alone.
if command -v bwrap >/dev/null; then
  mkdir -p .carry/bwrap/bin
  cp -L "$(command -v bwrap)" .carry/bwrap/bwrap
  for lib in $(ldd "$(command -v bwrap)" | awk '/=> \// {print $3}' | grep -v -e '/libc\.so' -e 'ld-linux'); do cp -L "$lib" .carry/bwrap/; done
  cat >.carry/bwrap/bin/bwrap <<'WRAP'
#!/bin/sh
d=$(dirname "$(dirname "$(readlink -f "$0")")")
exec "$(ls /lib64/ld-linux-x86-64.so.2 /lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 2>/dev/null | head -1)" --library-path "$d" "$d/bwrap" "$@"
WRAP
  chmod +x .carry/bwrap/bin/bwrap
else
  echo "carry: bubblewrap not found here; the sandbox's GPU tests will say it is missing there"
fi
