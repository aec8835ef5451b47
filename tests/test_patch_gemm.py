"""Convolutions over non-overlapping patches (stride = kernel, no padding, one group) as one GEMM of
the patches laid out as rows (agents/plan/patch_gemm.py): the rewritten graph, run as PyTorch code,
gives the convolution's result, in 1, 2 and 3 dimensions, with and without a bias; overlapping,
padded, grouped or remainder-dropping convolutions stay convolutions; and the candidate builds."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn
from conftest import needs_nvcc

from stitchcuda.agents import graph
from stitchcuda.agents.graph import ref_name
from stitchcuda.agents.plan import planner
from stitchcuda.agents.plan.patch_gemm import PATCH_GEMM_ENV


class Stem(nn.Module):
    """A ViT-style stem: patchify, flatten, transpose, then a pointwise op."""

    def __init__(self, conv: nn.Module):
        super().__init__()
        self.conv = conv

    def forward(self, x):
        return torch.relu(self.conv(x).flatten(2).transpose(1, 2)) * 2.0


class SlicedStem(Stem):
    """The stem on all but the first sample: the input a view at an offset, contiguous past it."""

    def forward(self, x):
        return super().forward(x[1:])


CASES = {
    "2d 4x4 with bias": (nn.Conv2d(3, 8, 4, stride=4), (2, 3, 16, 12)),
    "2d 2x3 without bias": (nn.Conv2d(5, 6, (2, 3), stride=(2, 3), bias=False), (3, 5, 8, 9)),
    "1d 4": (nn.Conv1d(4, 7, 4, stride=4), (2, 4, 20)),
    "3d 2x2x2": (nn.Conv3d(2, 5, 2, stride=2), (2, 2, 4, 6, 8)),
    "2d 4x4 at an offset": (nn.Conv2d(3, 8, 4, stride=4), (3, 3, 8, 8)),
}


def _plan(module: nn.Module, x: torch.Tensor):
    return planner.plan_graph(graph.trace_module(module, [x]))


@pytest.mark.parametrize("case", list(CASES))
def test_a_patch_convolution_is_one_gemm_and_means_the_same(case):
    from stitchcuda.agents.coder.reference_math import render_reference

    torch.manual_seed(0)
    conv, shape = CASES[case]
    module, x = (SlicedStem if "offset" in case else Stem)(conv), torch.randn(*shape)
    plan = _plan(module, x)
    assert plan.supported, plan.unsupported
    ops = [n["op"] for n in plan.graph]
    assert "convolution" not in ops and ("addmm" in ops or "mm" in ops)
    assert any(g.kind == "kernel" and g.note.startswith(("addmm ", "mm ")) for g in plan.groups), [g.note for g in plan.groups]
    assert any("as one GEMM" in n.get("folded", "") for n in plan.graph)
    out = next(n for n in plan.graph if n["op"] == "output")
    names = [k for k, _ in module.named_parameters()]
    math_ = render_reference(plan.graph, ["x"], names, [ref_name(v) for v in out["args"]["values"]])
    space: dict = {"torch": torch, "math": math}
    exec(math_.text, space)
    params = [p for _, p in module.named_parameters()]
    with torch.no_grad():
        for inp in (x, torch.randn(*shape) * 3):
            got = space["_reference"]([inp], params)[0]
            torch.testing.assert_close(got, module(inp), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("conv", [
    nn.Conv2d(3, 8, 4, stride=2),  # overlapping
    nn.Conv2d(3, 8, 4, stride=4, padding=1),
    nn.Conv2d(4, 8, 4, stride=4, groups=2),
    nn.Conv2d(3, 8, 1, stride=1),  # a 1x1: not a patch this takes
], ids=["overlapping", "padded", "grouped", "1x1"])
def test_other_convolutions_stay_convolutions(conv):
    plan = _plan(Stem(conv), torch.randn(2, conv.in_channels, 16, 16))
    assert any(n["op"] == "convolution" for n in plan.graph)


def test_a_remainder_the_convolution_drops_leaves_it_a_convolution():
    plan = _plan(Stem(nn.Conv2d(3, 8, 4, stride=4)), torch.randn(2, 3, 18, 16))
    assert any(n["op"] == "convolution" for n in plan.graph)


def test_the_switch_leaves_it_a_convolution(monkeypatch):
    monkeypatch.setenv(PATCH_GEMM_ENV, "0")
    plan = _plan(Stem(nn.Conv2d(3, 8, 4, stride=4)), torch.randn(2, 3, 16, 16))
    assert any(n["op"] == "convolution" for n in plan.graph)


@needs_nvcc
@pytest.mark.usefixtures("isolated_cache")
def test_a_vit_stem_builds_clean_for_sm90(tmp_path):
    from conftest import assert_builds_clean_for_sm90, builtin_candidate, cudnn_include_or_skip

    cand = builtin_candidate(Stem(nn.Conv2d(3, 16, 16, stride=16)), [torch.randn(2, 3, 64, 64)], host=False)
    assert "addmm" in cand.files["fused_kernels.cu"] or "cublasLt" in cand.files["fused_kernels.cu"]
    assert_builds_clean_for_sm90(cand, tmp_path / "stem.cu", cudnn_include_or_skip())
