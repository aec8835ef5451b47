"""The layout copy for a short side of 9 to 64 (cuda/layout_short.cuh): a convolution's 3x3, 5x5 and
7x7 weights to channels-last and back, which the 32x32-tile kernel moved with most of each tile
idle. Its two phases, run on the host block by block as the kernel runs them, against torch's
transpose on sizes that leave partial spans both ways; the switch (STITCHCUDA_CONV_COPY_SHORT, off
until timed on a GPU) as a constant in the source; a candidate built for sm_90 with it on; and, on a
GPU, the channels-last plan with it on matching each module."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest
import torch
from conftest import assert_builds_clean_for_sm90, builtin_candidate, load_model_new
from test_conv_layout_copies import _flat
from test_emit_conv import cudnn_include

from stitchcuda.agents.coder import cuda_text

# (rows, cols, batches, bias): a weight's C x RS per output channel (few columns), and the copy back
# (few rows); spans of 352 (9 wide), 128 (25), 64 (49) and 32 (64) long positions, partial at the end.
SHAPES = [(64, 9, 3, False), (512, 9, 2, True), (700, 25, 2, False), (33, 49, 4, True), (1000, 64, 1, True),
          (9, 70, 2, True), (25, 500, 3, False), (64, 129, 2, True), (40, 40, 2, False)]

_HARNESS = r"""
#include <cstdio>
#include <cstdlib>
#include <cuda_fp16.h>
__PRELUDE__
__SHORT__
template <class T> static int run(long r, long c, long n, bool bias, const char* path) {
  const long total = r * c * n;
  T* x = (T*)malloc(total * sizeof(T)); T* y = (T*)malloc(total * sizeof(T)); T* b = (T*)malloc(r * c * sizeof(T));
  for (long i = 0; i < total; ++i) x[i] = sc_from_f<T>((float)(i % 1000) * 0.25f - 7.f);
  for (long i = 0; i < r * c; ++i) b[i] = sc_from_f<T>((float)(i % 64) * 0.5f);
  sc_conv_transpose_short_host<T>(x, y, bias ? b : nullptr, r, c, n);
  FILE* f = fopen(path, "wb");
  for (long i = 0; i < total; ++i) { float v = sc_to_f(y[i]); fwrite(&v, 4, 1, f); }
  fclose(f);
  return 0;
}
int main(int argc, char** argv) {
  const long r = atol(argv[1]), c = atol(argv[2]), n = atol(argv[3]);
  const bool bias = argv[4][0] == '1', half = argv[5][0] == 'h';
  return half ? run<__half>(r, c, n, bias, argv[6]) : run<float>(r, c, n, bias, argv[6]);
}
"""


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    if shutil.which("nvcc") is None:
        pytest.skip("needs nvcc (the kernel's phases are compiled as CUDA and run on the host)")
    folder = tmp_path_factory.mktemp("short")
    src = folder / "short.cu"
    prelude = cuda_text.fill("prelude.cuh", THREADS=256, BLOCKS_PER_SM=4)
    src.write_text(_HARNESS.replace("__PRELUDE__", prelude)
                   .replace("__SHORT__", cuda_text.load("layout_short.cuh")))
    exe = folder / "short"
    subprocess.run(["nvcc", "-O1", "-std=c++17", "-arch=sm_90", str(src), "-o", str(exe)], check=True,
                   capture_output=True, text=True)
    return exe


@pytest.mark.parametrize("dtype", ["f", "h"])
@pytest.mark.parametrize(("rows", "cols", "batches", "bias"), SHAPES)
def test_the_short_copy_is_a_transpose(harness, tmp_path, rows, cols, batches, bias, dtype):
    out = tmp_path / "y.bin"
    subprocess.run([str(harness), str(rows), str(cols), str(batches), "1" if bias else "0", dtype, str(out)],
                   check=True)
    got = np.fromfile(out, dtype=np.float32).reshape(batches, cols, rows)
    x = ((torch.arange(rows * cols * batches) % 1000).float() * 0.25 - 7).reshape(batches, rows, cols)
    want = x.transpose(1, 2).clone()
    if bias:  # out[n][c][r] = in[n][r][c] + bias[c], in fp32 and rounded once
        want += ((torch.arange(cols) % 64).float() * 0.5)[None, :, None]
    if dtype == "h":
        want = want.half().float()
    np.testing.assert_array_equal(got, want.numpy())


def test_the_switch_is_a_constant_off_by_default(monkeypatch):
    from stitchcuda.agents.coder.emit_conv import conv_switches

    monkeypatch.delenv("STITCHCUDA_CONV_COPY_SHORT", raising=False)
    assert conv_switches()["COPY_SHORT"] == "false"
    monkeypatch.setenv("STITCHCUDA_CONV_COPY_SHORT", "1")
    assert conv_switches()["COPY_SHORT"] == "true"
    text = cuda_text.fill("conv.cuh", THREADS=256, **conv_switches())
    assert "SC_CONV_COPY_SHORT = true" in text and "sc_trs_applies(rows, cols)" in text


@pytest.mark.skipif(cudnn_include() is None, reason="no cudnn.h (set STITCHCUDA_EXTRA_INCLUDE to a folder with it)")
def test_a_candidate_with_the_short_copy_builds_for_sm90(tmp_path, monkeypatch):
    monkeypatch.setenv("STITCHCUDA_CONV_COPY_SHORT", "1")
    torch.manual_seed(0)
    cand = builtin_candidate(_flat(20, 12, 3)(), [torch.randn(2, 20, 14, 15)], host=False)
    source = "".join(cand.files.values())
    assert "SC_CONV_COPY_SHORT = true" in source and "sc_conv_transpose_short<" in source
    assert_builds_clean_for_sm90(cand, tmp_path / "c.cu", cudnn_include())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_the_gpu_the_short_copy_matches_each_module(tmp_path, monkeypatch):
    """3x3, 5x5 and 7x7 weights (9, 25, 49 wide) and a 1-D window of 64, channels-last forced."""
    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    monkeypatch.setenv("STITCHCUDA_CONV_NHWC", "1")
    monkeypatch.setenv("STITCHCUDA_CONV_COPY_SHORT", "1")
    cases = [(_flat(70, 130, 3), torch.randn(2, 70, 19, 23)), (_flat(33, 16, 5), torch.randn(2, 33, 21, 20)),
             (_flat(12, 40, 7), torch.randn(1, 12, 30, 31)), (_flat(64, 64, 3), torch.randn(2, 64, 28, 28))]
    for k, (make, x) in enumerate(cases):
        torch.manual_seed(3)
        module = make()
        cand = builtin_candidate(module, [x], host=False)
        module = module.cuda()
        new, _ = load_model_new(cand, module, tmp_path / f"m{k}")
        new = new.cuda()
        with torch.no_grad():
            want = module(x.cuda())
            for _ in range(2):
                got = new(x.cuda())
        torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2 * want.abs().max().item())
