"""STITCHCUDA_GEMM_TUNE=1 (emit_gemm.TUNE_ENV): the bias-epilogue matmul times cuBLASLt's first few
heuristic algorithms on its first call and keeps the fastest. Off by default until timed on a GPU.
Here: the switch is fixed in the source as it is written, the source builds for sm_90, and on a GPU
the tuned candidate matches torch (its algorithm may differ from the first pick's, its result must
not by more than the tolerance)."""

from __future__ import annotations

import subprocess

import pytest
import torch
import torch.nn as nn
from conftest import needs_nvcc
from test_emit_gemm import cublas_include, emitted, r

from stitchcuda import runtime
from stitchcuda.agents.coder import emit_gemm
from stitchcuda.agents.coder.codegen import render


def test_the_switch_is_written_into_the_source(monkeypatch):
    monkeypatch.delenv(emit_gemm.TUNE_ENV, raising=False)
    off = emitted(nn.Linear(64, 32), [r(8, 64)]).source
    assert "cublasLtMatmulAlgo_t algos[1];" in off and ", 1, found, &count)" in off
    monkeypatch.setenv(emit_gemm.TUNE_ENV, "1")
    on = emitted(nn.Linear(64, 32), [r(8, 64)]).source
    n = emit_gemm.TUNE_ALGOS
    assert f"cublasLtMatmulAlgo_t algos[{n}];" in on and f", {n}, found, &count)" in on
    assert "k0_lt_tune(lt, st, a, b, c, alpha, workspace, stream)" in on and "cudaStreamIsCapturing" in on


@needs_nvcc
def test_the_tuned_source_compiles(tmp_path, monkeypatch):
    include = cublas_include()
    if include is None:
        pytest.skip("no cublas_v2.h: set STITCHCUDA_EXTRA_INCLUDE to a folder with cuBLAS's headers")
    monkeypatch.setenv(emit_gemm.TUNE_ENV, "1")
    sources = [emitted(nn.Linear(64, 32), [r(8, 64)], "k0").source,
               emitted(nn.Sequential(nn.Linear(48, 40), nn.ReLU()), [r(5, 48)], "k1").source]
    path = tmp_path / "gemm.cu"
    path.write_text(render([], after=sources) + "\n" + "\n".join(sources))
    proc = subprocess.run([runtime.find_nvcc(), "-c", "-std=c++17", "-arch=sm_90", "-I", include, str(path), "-o",
                           str(tmp_path / "g.o")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "warning" not in proc.stderr.lower(), proc.stderr[-4000:]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_the_gpu_the_tuned_matmul_matches_torch(tmp_path, monkeypatch):
    from conftest import builtin_candidate, outputs_on_the_gpu

    monkeypatch.setenv(emit_gemm.TUNE_ENV, "1")
    for k, (module, x) in enumerate([(nn.Linear(1024, 2048), r(512, 1024)), (nn.Linear(129, 67), r(33, 129) * 100)]):
        cand = builtin_candidate(module, [x], host=False)
        assert "_lt_tune" in "".join(cand.files.values())
        got, want = outputs_on_the_gpu(cand, module, [x], tmp_path / f"m{k}")
        torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2 * want.abs().max().item())
