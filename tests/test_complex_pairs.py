"""complex64 as float32 pairs (agents/plan/complex_pairs.py): Meta-LLaMA's rotary embedding (q
viewed as complex times `freqs_cis` from torch.polar), a complex parameter read through
torch.view_as_real, conj, abs, sums and products with reals. The plan, and the candidate's CPU entry
points against PyTorch."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from conftest import load_model_new, needs_nvcc

from stitchcuda.agents import graph
from stitchcuda.agents.coder import builtin as coder_builtin
from stitchcuda.agents.plan import planner
from stitchcuda.agents.plan.complex_pairs import rewrite_complex_as_pairs
from stitchcuda.agents.verify.static_check import check_source


def _freqs(dim: int, end: int) -> torch.Tensor:
    f = 1.0 / (10000 ** (torch.arange(0, dim, 2)[: dim // 2].float() / dim))
    return torch.polar(torch.ones(end, dim // 2), torch.outer(torch.arange(end).float(), f))


class Rotary(nn.Module):
    def __init__(self, dim: int = 16, end: int = 12):
        super().__init__()
        self.register_buffer("freqs_cis", _freqs(dim, end), persistent=False)  # (kept by the trace)
        self.w = nn.Parameter(torch.randn(dim // 2, dtype=torch.complex64))  # (in the state dict)

    def forward(self, q, g):
        b, t, h, d = q.shape
        fc = self.freqs_cis[:t].view(1, t, 1, d // 2)
        q_ = torch.view_as_complex(q.float().reshape(b, t, h, -1, 2))
        r = q_ * fc
        s = (r + q_ * self.w).conj_physical() * g.unsqueeze(-1) * 0.5 - r
        return torch.view_as_real(s).flatten(3), torch.view_as_real(r).flatten(3) + 1, s.abs()


def _inputs():
    return [torch.randn(2, 10, 3, 16), torch.randn(2, 10, 3)]


def test_no_complex_node_is_left_and_one_kernel_a_result():
    traced = graph.trace_module(Rotary(), _inputs())
    assert any(n.get("dtype") == "complex64" for n in traced)
    done = rewrite_complex_as_pairs(traced)
    assert not any(n.get("dtype") == "complex64" for n in done)
    (w,) = [n for n in done if n.get("key") == "w"]
    assert w["shape"] == [8, 2] and w["dtype"] == "float32" and w["as_real"] == {"dtype": "complex64", "shape": [8]}
    plan = planner.plan_graph(traced)
    assert plan.supported, plan.unsupported
    assert [g.kind for g in plan.groups] == ["pointwise"] * len(plan.groups) and len(plan.groups) <= 3
    # ModelNew reads the parameter through torch.view_as_real, a view the Verifier's static check allows.
    cand = coder_builtin.build_candidate(plan, Rotary, title="t", host=True)
    assert "torch.view_as_real(" in cand.files["model_new.py"]
    assert check_source(cand.files["model_new.py"]) == []


class ComplexArgument(nn.Module):
    def forward(self, z, x):
        return torch.view_as_real(z * 2) + x


class ComplexDivision(nn.Module):
    def forward(self, x):
        z = torch.view_as_complex(x)
        return torch.view_as_real(z / (z + 1))


@pytest.mark.parametrize("make,inputs", [
    (ComplexArgument, lambda: [torch.randn(4, 3, dtype=torch.complex64), torch.randn(4, 3, 2)]),
    (ComplexDivision, lambda: [torch.randn(4, 3, 2)]),
], ids=["argument", "division"])
def test_what_is_not_written_is_left_as_traced(make, inputs):
    traced = graph.trace_module(make(), inputs())
    assert rewrite_complex_as_pairs(traced) is traced
    plan = planner.plan_graph(traced)
    assert not plan.supported and any("complex64" in u for u in plan.unsupported), plan.unsupported


@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.nvcc
@needs_nvcc
def test_it_matches_pytorch_on_the_cpu(tmp_path):
    from conftest import planned_on_the_cpu

    torch.manual_seed(0)
    module, args = Rotary(), _inputs()
    _, new = planned_on_the_cpu(module, args, tmp_path)
    assert new.w.dtype == torch.complex64 and new.freqs_cis.dtype == torch.complex64
    with torch.no_grad():
        for given in (args, [t * 3 for t in _inputs()]):
            for g, w in zip(new(*given), module(*given), strict=True):
                torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_the_gpu_it_matches_pytorch(tmp_path, monkeypatch):
    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    torch.manual_seed(0)
    module, args = Rotary(), _inputs()
    cand = coder_builtin.build_candidate(planner.plan_graph(graph.trace_module(module, args)), type(module),
                                         title="t", host=False)
    new, _ = load_model_new(cand, module, tmp_path)
    new, module = new.cuda(), module.cuda()
    with torch.no_grad():
        for given in (args, _inputs(), _inputs()):  # (the third call takes the fast path)
            given = [a.cuda() for a in given]
            for g, w in zip(new(*given), module(*given), strict=True):
                torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
