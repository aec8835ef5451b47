#!/usr/bin/env bash
# Prints a folder with the cuBLAS and cuDNN headers that the generated GEMM and convolution sources
# include, so nvcc can compile them where the CUDA toolkit has only the compiler (CI, this kind of
# machine; a GPU machine's toolkit has them). They ship in the libraries' wheels on PyPI: fetched
# once (about 1 GB of wheels, 12 s here), and only the headers (2 MB) are kept.
# The versions are those the sources were written against (cuBLAS 13.10, cuDNN 9.28).
set -euo pipefail
cd "$(dirname "$0")/.."
# Into the user cache, where builds look for them (stitchcuda.cuda_libs.user_headers): the CLI and the
# editor find them too, not only the tests.
py=.venv/bin/python; [ -x "$py" ] || py=python3
dest=$("$py" -c 'from stitchcuda.cuda_libs import user_headers; print(user_headers())' 2>/dev/null) || dest=.cache/cuda-headers
if [ ! -f "$dest/cublas_v2.h" ] || [ ! -f "$dest/cudnn.h" ]; then
  echo "setup: fetching the cuBLAS 13.10 and cuDNN 9.28 headers from their wheels (about 1 GB to download once; 2 MB of headers kept in $dest)" >&2
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download -q --no-deps --only-binary=:all: -d "$tmp" \
    nvidia-cublas==13.10.0.20 nvidia-cudnn-cu13==9.28.1.4 >&2
  mkdir -p "$dest"
  python3 - "$tmp" "$dest" <<'PY'
import sys, zipfile
from pathlib import Path

src, dest = Path(sys.argv[1]), Path(sys.argv[2])
for wheel in src.glob("*.whl"):
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if "/include/" in name and name.endswith(".h"):
                (dest / Path(name).name).write_bytes(z.read(name))
PY
fi
case "$dest" in /*) echo "$dest" ;; *) echo "$(pwd)/$dest" ;; esac
