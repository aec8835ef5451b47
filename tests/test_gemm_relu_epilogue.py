"""A ReLU after nn.Linear is cuBLASLt's RELU_BIAS epilogue (planner._gemm_epilogue, emit_gemm._relu_epilogue):
the planner drops the ReLU's own pointwise kernel, the product's launcher stores relu(x @ W.T + b) in
its place, and every path that is not cuBLASLt's (misaligned pointers, the exact rungs without the
epilogue) applies the ReLU in place after the product. Any other chain after the product stays a
pointwise kernel of its own."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import (
    Fn,
    assert_builds_clean_for_sm90,
    builtin_candidate,
    load_model_new,
    needs_nvcc,
    outputs_on_the_gpu,
)
from test_emit_gemm import cublas_include

from stitchcuda.agents import graph
from stitchcuda.agents.coder import emit_gemm, kernels
from stitchcuda.agents.plan import planner


class MLP(nn.Module):
    def __init__(self, sizes: tuple[int, ...] = (64, 96, 80, 32), act=F.relu):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:], strict=True))
        self.act = act

    def forward(self, x):
        for layer in self.layers[:-1]:
            x = self.act(layer(x))
        return self.layers[-1](x)


def _plan(module: nn.Module, inputs: list[torch.Tensor]):
    plan = planner.plan_graph(graph.trace_module(module, inputs))
    assert plan.supported, plan.unsupported
    return plan


def test_a_relu_after_a_linear_is_the_products_epilogue():
    plan = _plan(MLP(), [torch.randn(16, 64)])
    kinds = [g.kind for g in plan.groups]
    assert kinds == ["kernel"] * 3, [(g.kind, g.note) for g in plan.groups]
    hidden, last = plan.groups[:2], plan.groups[2]
    for g in hidden:
        assert "+bias -> relu (cublasLt epilogue)" in g.note, g.note
        assert g.detail["epilogue"]["members"] == [g.outputs[0]]
    assert "relu" not in last.note and "epilogue" not in last.detail


@pytest.mark.parametrize("module, why", [
    (MLP(act=F.gelu), "a GELU: cuBLASLt's is the tanh form"),
    (MLP(act=lambda x: F.relu(x) ** 2), "a chain longer than one ReLU (squared ReLU)"),
    (Fn(lambda x: F.relu(x @ x.t())), "no bias: the product is not cuBLASLt's"),
])
def test_other_chains_keep_their_own_kernel(module, why):
    plan = _plan(module, [torch.randn(16, 64)])
    assert any(g.kind == "pointwise" for g in plan.groups), why
    assert not any(g.detail.get("epilogue") for g in plan.groups if g.kind == "kernel"), why


def test_the_switch_turns_it_off(monkeypatch):
    monkeypatch.setenv(planner.GEMM_EPILOGUE_ENV, "0")
    plan = _plan(MLP(), [torch.randn(16, 64)])
    assert [g.kind for g in plan.groups].count("pointwise") == 2


def _epilogue_kernel(precise: int) -> kernels.Kernel:
    """The first layer's launcher at rung `precise`, its epilogue as the plan has it."""
    from stitchcuda.agents.coder import codegen

    module, x = MLP(), torch.randn(16, 64)
    plan = _plan(module, [x]).for_level(precise >= kernels.PRECISE_SPLIT)
    g = next(g for g in plan.groups if g.detail.get("epilogue"))
    epi = g.detail["epilogue"]
    return kernels.emit(plan.graph, g.nodes[0], "k0", precise=precise, nodes=graph.by_name(plan.graph),
                        epilogue=codegen.epilogue(plan.graph, epi["members"], epi["node"], epi["value"]))


@pytest.mark.parametrize("precise", [kernels.PRECISE_TF32, kernels.PRECISE_SPLIT, kernels.PRECISE_FP32],
                         ids=["tf32", "3xtf32", "fp32"])
def test_every_rung_stores_the_relu(precise, monkeypatch):
    monkeypatch.setattr(emit_gemm, "SMALL_PRODUCT", 0)  # the split even for this small product
    k = _epilogue_kernel(precise)
    assert [a.name for a in k.outputs] == ["relu"]
    # The fallback (and any rung cuBLASLt does not run) applies the ReLU after the product.
    assert "return k0_relu(c, stream);" in k.source
    if "cublasLt epilogue" in k.ops[0]:
        assert "CUBLASLT_EPILOGUE_RELU_BIAS" in k.source and "CUBLASLT_EPILOGUE_BIAS;" not in k.source


@needs_nvcc
@pytest.mark.parametrize("precise", [kernels.PRECISE_TF32, kernels.PRECISE_SPLIT, kernels.PRECISE_FP32],
                         ids=["tf32", "3xtf32", "fp32"])
def test_the_candidate_builds_without_warnings(tmp_path, precise):
    include = cublas_include()
    if include is None:
        pytest.skip("no cublas_v2.h: set STITCHCUDA_EXTRA_INCLUDE to a folder with cuBLAS's headers")
    cand = builtin_candidate(MLP(), [torch.randn(16, 64)], host=False, precise=precise)
    assert_builds_clean_for_sm90(cand, tmp_path / "k.cu", include)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("precise", [kernels.PRECISE_TF32, kernels.PRECISE_FP32], ids=["tf32", "fp32"])
def test_gpu_matches_torch(tmp_path, precise):
    torch.manual_seed(0)
    module, x = MLP((128, 256, 192, 64)), torch.randn(96, 128)
    cand = builtin_candidate(module, [x], host=False, precise=precise)
    got, want = outputs_on_the_gpu(cand, module, [x], tmp_path)
    torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2)
    # An input 4 bytes off 16-byte alignment: cuBLASLt refuses it, so the product runs without the
    # epilogue and the ReLU pass after it.
    new, _ = load_model_new(cand, module, tmp_path / "misaligned")
    new = new.cuda()
    buf = torch.empty(x.numel() + 1, device="cuda")
    buf[1:] = x.reshape(-1).cuda()
    with torch.no_grad():
        got = new(buf[1:].view(x.shape))
    torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2)
