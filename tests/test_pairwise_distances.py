"""torch.cdist (agents/plan/pairwise_distances.py): few features or p other than 2 as a reduction
over differences formed as read; more features at p = 2 as ATen's norms-plus-GEMM form. The plans,
and the candidate's CPU entry points (the direct forms; the GEMM runs on the GPU only) against
PyTorch."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from conftest import load_model_new, needs_nvcc

from stitchcuda.agents import graph
from stitchcuda.agents.coder import builtin as coder_builtin
from stitchcuda.agents.plan import planner
from stitchcuda.agents.plan.pairwise_distances import DIRECT_FEATURES


class Direct(nn.Module):
    """Strided centres against their own cloud (ATen's GEMM form at p = 2, over 25 rows), p = 1,
    inf, 3, unbatched, and few rows (ATen's direct kernel)."""

    def forward(self, a, b):
        centres = a[:, ::4, :]
        return (torch.cdist(centres, a), torch.cdist(a, b, p=1.0), torch.cdist(a, b, p=float("inf")),
                torch.cdist(a, b, p=3.0), torch.cdist(a[0], b[1]), torch.cdist(a[:, :5], b[:, :7]))


class Wide(nn.Module):
    """p = 2 over more features than the direct form takes: batched and unbatched."""

    def forward(self, a, b):
        return torch.cdist(a, b), torch.cdist(a[1], b[0])


def _direct_inputs():
    return [torch.randn(4, 40, 3), torch.randn(4, 30, 3)]


def _wide_inputs():
    return [torch.randn(2, 50, DIRECT_FEATURES + 8), torch.randn(2, 60, DIRECT_FEATURES + 8)]


def test_few_features_are_a_reduction_over_differences_never_stored():
    plan = planner.plan_graph(graph.trace_module(Direct(), _direct_inputs()))
    assert plan.supported, plan.unsupported
    kernels = [g for g in plan.groups if g.kind == "kernel"]
    assert len(kernels) == 6 and all("prologue" in g.note and "sub" in g.note and "not stored" in g.note
                                     for g in kernels), [g.note for g in kernels]
    assert sum("amax" in g.note for g in kernels) == 1
    assert not any(op in g.note for g in plan.groups for op in ("mm ", "bmm "))


def test_more_features_at_p2_are_a_gemm_with_norms():
    plan = planner.plan_graph(graph.trace_module(Wide(), _wide_inputs()))
    assert plan.supported, plan.unsupported
    notes = " | ".join(g.note for g in plan.groups)
    assert "bmm 2x50x" in notes and "mm 50x" in notes, notes
    assert "clamp_min -> sqrt" in notes


class OtherP(nn.Module):
    def forward(self, a, b):
        return torch.cdist(a, b, p=0.0)


def test_p0_is_left_unsupported():
    plan = planner.plan_graph(graph.trace_module(OtherP(), _direct_inputs()))
    assert not plan.supported and any("_cdist_forward" in u for u in plan.unsupported), plan.unsupported


@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.nvcc
@needs_nvcc
def test_the_direct_forms_match_pytorch_on_the_cpu(tmp_path):
    from conftest import planned_on_the_cpu

    torch.manual_seed(0)
    module, args = Direct(), _direct_inputs()
    _, new = planned_on_the_cpu(module, args, tmp_path)
    with torch.no_grad():
        for given in (args, [t * 10 for t in _direct_inputs()]):
            got = new(*given)
            # Exact (no cancellation): against ATen's direct kernel, which computes so too; the
            # default p = 2 form on many rows is ATen's GEMM form, off by its cancellation near 0.
            exact = [torch.cdist(given[0][:, ::4], given[0], compute_mode="donot_use_mm_for_euclid_dist"),
                     *module(*given)[1:]]
            for g, w in zip(got, exact, strict=True):
                torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(got[0], module(*given)[0], rtol=1e-4, atol=5e-3 * given[0].abs().max().item())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("make,inputs", [(Direct, _direct_inputs), (Wide, _wide_inputs)], ids=["direct", "wide"])
def test_on_the_gpu_they_match_pytorch(tmp_path, monkeypatch, make, inputs):
    """fp32 everywhere (the candidate built at the exact rung is not asked for here: the GEMM form's
    TF32 rung is held to the Verifier's TF32 tolerance, 1e-2)."""
    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    torch.manual_seed(0)
    module, args = make(), inputs()
    cand = coder_builtin.build_candidate(planner.plan_graph(graph.trace_module(module, args)), type(module),
                                         title="t", host=False)
    new, _ = load_model_new(cand, module, tmp_path)
    with torch.no_grad():
        for given in (args, inputs()):
            given = [a.cuda() for a in given]
            for g, w in zip(new.cuda()(*given), module.cuda()(*given), strict=True):
                torch.testing.assert_close(g, w, rtol=1e-2, atol=1e-2)
