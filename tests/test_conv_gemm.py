"""1x1 convolutions kept NCHW as one cuBLAS batched GEMM (emit_conv.pointwise_gemm, CONV_GEMM_ENV):
which convolutions take it, that the GEMM it plans is the convolution (simulated as cuBLAS runs it),
that its source builds, and on a GPU that it matches torch."""

from __future__ import annotations

import copy
import subprocess

import pytest
import torch
import torch.nn as nn
from conftest import needs_nvcc
from test_emit_gemm import build_kernel, cublas_include, simulate

from stitchcuda import runtime
from stitchcuda.agents import graph
from stitchcuda.agents.coder import emit_conv, emit_gemm, kernels
from stitchcuda.agents.coder.codegen import render


@pytest.fixture(autouse=True)
def _gemm_on(monkeypatch):
    monkeypatch.setenv(emit_conv.CONV_GEMM_ENV, "1")


def _emit(module: nn.Module, x: torch.Tensor, precise: int = kernels.PRECISE_TF32, name: str = "k") -> kernels.Kernel:
    g = graph.trace_module(module, [x])
    node = next(n["name"] for n in g if n["op"] == "convolution")
    return kernels.emit(g, node, name, precise=precise)


TAKEN = [  # (module, input)
    (nn.Conv2d(6, 10, 1), torch.randn(3, 6, 5, 7)),
    (nn.Conv2d(6, 10, 1, bias=False), torch.randn(2, 6, 4, 4)),
    (nn.Conv1d(5, 3, 1), torch.randn(2, 5, 9)),
    (nn.Conv3d(4, 6, 1), torch.randn(2, 4, 3, 5, 2)),
    (nn.Conv2d(6, 10, 1, dilation=2), torch.randn(1, 6, 5, 7)),  # dilation of a 1x1 tap is moot
]
LEFT = [
    (nn.Conv2d(6, 10, 3), torch.randn(2, 6, 5, 7)),
    (nn.Conv2d(6, 10, 1, stride=2), torch.randn(2, 6, 5, 7)),
    (nn.Conv2d(6, 10, 1, padding=1), torch.randn(2, 6, 5, 7)),
    (nn.Conv2d(6, 10, 1, groups=2), torch.randn(2, 6, 5, 7)),
    (nn.ConvTranspose2d(6, 10, 1), torch.randn(2, 6, 5, 7)),
]


@pytest.mark.parametrize(("module", "x"), TAKEN, ids=lambda v: str(v)[:40] if isinstance(v, nn.Module) else "")
def test_a_1x1_convolution_is_the_gemm_it_plans(module, x):
    """The GEMM's operands, read in place as cuBLAS reads them, give the convolution (bias added
    into the result first, then the product with beta 1, as emit_gemm does for addmm)."""
    k = _emit(module, x)
    assert k.libraries == ["cublas"] and "convolution 1x1 as GEMM" in k.ops[0], k.ops
    g = graph.trace_module(module, [x])
    ctx = kernels.context(g, next(n["name"] for n in g if n["op"] == "convolution"), "k")
    a = ctx.args
    p = emit_conv.conv_params(a["input"].shape, a["weight"].shape, a.get("stride"), a.get("padding"),
                              a.get("dilation"), False, [0], a.get("groups", 1))
    mat1, mat2, bias, full = emit_conv.gemm_operands(p, a["input"], a["weight"], a.get("bias"))
    plan = emit_gemm.plan_gemm(mat1, mat2)
    want = copy.deepcopy(module).double()(x.double())
    out = torch.zeros(full, dtype=torch.float64)
    if bias is not None:
        out += module.bias.detach().double().view(1, -1, 1)
    # (simulate takes cuBLAS's A, the op's second operand x, then its B, the weight.)
    simulate(plan, x.double().reshape(-1), module.weight.detach().double().reshape(-1), out.view(-1),
             beta=1.0 if bias is not None else 0.0)
    torch.testing.assert_close(out.view(want.shape), want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize(("module", "x"), LEFT, ids=lambda v: str(v)[:40] if isinstance(v, nn.Module) else "")
def test_other_convolutions_stay_with_cudnn(module, x):
    assert _emit(module, x).libraries == ["cudnn"]


def test_off_without_the_flag_and_exact_after_a_wrong_result(monkeypatch):
    k = _emit(nn.Conv2d(6, 10, 1), torch.randn(2, 6, 5, 7), precise=kernels.PRECISE_SPLIT)
    assert "CUBLAS_COMPUTE_32F," in k.source and "FAST_TF32" not in k.source  # as cuDNN without TF32
    assert "FAST_TF32" in _emit(nn.Conv2d(6, 10, 1), torch.randn(2, 6, 5, 7)).source
    monkeypatch.delenv(emit_conv.CONV_GEMM_ENV)
    assert _emit(nn.Conv2d(6, 10, 1), torch.randn(2, 6, 5, 7)).libraries == ["cudnn"]


@needs_nvcc
def test_the_gemm_sources_build(tmp_path):
    include = cublas_include()
    if include is None:
        pytest.skip("no cublas_v2.h: set STITCHCUDA_EXTRA_INCLUDE to a folder with cuBLAS's headers")
    sources = [_emit(m, x, name=f"k{i}").source for i, (m, x) in enumerate(TAKEN)]
    sources.append(_emit(nn.Conv2d(6, 10, 1).half(), torch.randn(2, 6, 5, 7).half(), name="h").source)
    path = tmp_path / "g.cu"
    path.write_text(render([], after=sources) + "\n" + "\n".join(sources))
    cmd = [runtime.find_nvcc(), "-c", "-std=c++17", "-arch=sm_90", "-I", include, str(path), "-o", str(tmp_path / "g.o")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]


GPU = [*TAKEN, (nn.Conv2d(64, 96, 1), torch.randn(4, 64, 28, 28)), (nn.Conv2d(32, 64, 1).half(),
                                                                     torch.randn(2, 32, 16, 16).half())]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("precise", [kernels.PRECISE_TF32, kernels.PRECISE_SPLIT])
def test_on_the_gpu_the_gemm_matches_torch(tmp_path, precise):
    for i, (module, x) in enumerate(GPU):
        k = _emit(module, x, precise=precise, name="k")
        folder = tmp_path / f"c{i}"
        folder.mkdir()
        lib = build_kernel(k, folder)
        m = copy.deepcopy(module).cuda()
        values = {"input": x.cuda(), **{n: v.detach() for n, v in m.state_dict().items()}}
        args = [values[a.name] for a in k.inputs]
        # The exact rung against torch's convolution without TF32 (cuDNN allows it by default).
        with torch.no_grad(), torch.backends.cudnn.flags(allow_tf32=precise == kernels.PRECISE_TF32):
            want = m(x.cuda())
        out = torch.full_like(want, float("nan"))
        scratch = [torch.empty(n, dtype=getattr(torch, d), device="cuda") for d, n in k.scratch]
        lib.call("k", *args, out, *scratch)
        torch.cuda.synchronize()
        tol = 2e-2 if x.dtype == torch.float16 else (1e-2 if precise == kernels.PRECISE_TF32 else 1e-4)
        torch.testing.assert_close(out.float(), want.float(), rtol=tol, atol=tol * want.float().abs().max().item())
