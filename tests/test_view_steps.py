"""A view of a value computed inside a pointwise kernel, valid only on the layout PyTorch traced
(`.reshape` after `.permute` of a result laid out transposed, as Mamba-style scans write it), is
read one view at a time from the value's row-major shape (codegen's _one_view_step): the plan,
and the candidate's CPU entry points against PyTorch."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from conftest import load_model_new, needs_nvcc

from stitchcuda.agents import graph
from stitchcuda.agents.coder import builtin as coder_builtin
from stitchcuda.agents.coder import codegen
from stitchcuda.agents.graph import replay_view
from stitchcuda.agents.plan import planner


class ReshapeAfterPermute(nn.Module):
    """u is computed from a transposed input, so PyTorch lays it out transposed; permuted back it is
    dense there, and the reshape that merges (b, c) is a view only on that layout."""

    def forward(self, x):
        b, c, n = x.shape
        u = torch.sigmoid(x.transpose(1, 2)) * x.transpose(1, 2)
        v = u.unsqueeze(3).permute(0, 2, 1, 3).reshape(b * c, n, 1)
        return v * 2 + 1


class SliceOfMergedView(nn.Module):
    """The same with a slice and an expand after the merge, and the value read twice: once through
    the views, once directly."""

    def forward(self, x):
        b, c, n = x.shape
        u = torch.tanh(x.transpose(1, 2))
        v = u.permute(0, 2, 1).reshape(b * c, n)[:, 1:].unsqueeze(0).expand(2, b * c, n - 1)
        return v + u.permute(0, 2, 1).reshape(b * c, n)[:, :-1]


CASES = [(ReshapeAfterPermute, (2, 8, 12)), (SliceOfMergedView, (3, 5, 7))]


def test_the_reshape_is_no_view_of_a_row_major_value():
    """The layout question this exists for: replayed on u's row-major layout, the reshape fails,
    and on u's logical (row-major) shape each view step has strides."""
    traced = graph.trace_module(ReshapeAfterPermute(), [torch.randn(2, 8, 12)])
    nodes = graph.by_name(traced)
    (reshape,) = [n for n in traced if n.get("target") == "aten.view.default" and len(n["shape"]) == 3]
    permute = nodes[graph.ref_name(reshape["args"]["self"])]
    assert replay_view(reshape, permute["name"], permute["shape"], permute["stride"]) is not None
    root = nodes[graph.ref_name(nodes[graph.ref_name(permute["args"]["self"])]["args"]["self"])]
    assert not graph.is_contiguous(root)
    row_major_permute = replay_view(permute, graph.ref_name(permute["args"]["self"]),
                                    [*root["shape"], 1], graph.contiguous_strides([*root["shape"], 1]))
    assert row_major_permute is not None
    assert replay_view(reshape, permute["name"], permute["shape"], row_major_permute[0]) is None


@pytest.mark.parametrize("make,shape", CASES, ids=[c[0].__name__ for c in CASES])
def test_it_plans_only_with_the_step(make, shape, monkeypatch):
    traced = graph.trace_module(make(), [torch.randn(shape)])
    assert planner.plan_graph(traced).supported

    def refuse(self, view, idx):
        raise codegen.NotFusable(f"{view['name']}: stepped")

    monkeypatch.setattr(codegen._Lowering, "_one_view_step", refuse)
    plan = planner.plan_graph(graph.trace_module(make(), [torch.randn(shape)]))
    assert not plan.supported and any("stepped" in u for u in plan.unsupported), plan.unsupported


@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.parametrize("make,shape", CASES, ids=[c[0].__name__ for c in CASES])
def test_it_matches_pytorch_on_the_cpu(tmp_path, make, shape):
    from conftest import planned_on_the_cpu

    torch.manual_seed(0)
    module = make()
    x = torch.randn(shape)
    _, new = planned_on_the_cpu(module, [x], tmp_path)
    with torch.no_grad():
        for given in (x, torch.randn(shape) * 3 - 1):
            torch.testing.assert_close(new(given), module(given), rtol=1e-5, atol=1e-6)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("make,shape", CASES, ids=[c[0].__name__ for c in CASES])
def test_on_the_gpu_it_matches_pytorch(tmp_path, monkeypatch, make, shape):
    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    torch.manual_seed(0)
    module, x = make(), torch.randn(shape)
    cand = coder_builtin.build_candidate(planner.plan_graph(graph.trace_module(module, [x])), type(module),
                                         title="t", host=False)
    new, _ = load_model_new(cand, module, tmp_path)
    with torch.no_grad():
        for given in (x, torch.randn(shape) * 3 - 1):
            given = given.cuda()
            torch.testing.assert_close(new.cuda()(given), module.cuda()(given), rtol=1e-5, atol=1e-6)
