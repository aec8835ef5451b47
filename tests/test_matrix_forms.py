"""Ops a third sweep of user-style modules found unplanned, each now a layout kernel or a rewrite:
torch.eye and torch.linspace made in forward, diagonal_scatter (an in-place write through
.diagonal(): Barlow Twins), torch.linalg.cross, torch.trace (VICReg), nn.RReLU in eval, and
torch.searchsorted / torch.bucketize (NeRF's sampling, piecewise-linear encodings) and F.fold
(col2im: overlapping patches put back). The plan, and the candidate's CPU entry points against
PyTorch."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import needs_nvcc

from stitchcuda.agents import graph
from stitchcuda.agents.plan import planner


class Forms(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.RReLU(0.1, 0.3)

    def forward(self, a, v, w, x):
        n = a.shape[0]
        eye = torch.eye(n)
        c = a * 3
        c.diagonal().add_(-1)  # (functionalised: diagonal_scatter)
        d = a.clone()
        d.diagonal(offset=-1).mul_(0.5)  # (below the diagonal)
        grid = torch.linspace(-1.0, 2.0, 7)
        return (a + eye, a * (1 - eye), c.pow(2), d, torch.trace(a) * 2, torch.linalg.cross(v, w, dim=1),
                x[:, :7] * grid, self.act(x))


def _inputs():
    return [torch.randn(6, 6), torch.randn(4, 3, 5), torch.randn(4, 3, 5), torch.randn(5, 9)]


@pytest.fixture
def module():
    return Forms().eval()


def test_every_form_plans(module):
    traced = graph.trace_module(module, _inputs())
    ops = {n["op"] for n in traced}
    assert {"eye", "linspace", "diagonal_scatter", "linalg_cross", "trace", "rrelu_with_noise"} <= ops, ops
    plan = planner.plan_graph(traced)
    assert plan.supported, plan.unsupported
    notes = " | ".join(g.note for g in plan.groups)
    for what in ("eye", "linspace", "diagonal_scatter", "cross along dim 1", "leaky_relu"):
        assert what in notes, notes


def test_rrelu_in_training_is_left_as_traced():
    plan = planner.plan_graph(graph.trace_module(nn.RReLU(0.1, 0.3).train(), [torch.randn(4, 5)]))
    assert not plan.supported and any("rrelu" in u for u in plan.unsupported), plan.unsupported


@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.nvcc
@needs_nvcc
def test_they_match_pytorch_on_the_cpu(tmp_path, module):
    from conftest import planned_on_the_cpu

    torch.manual_seed(0)
    args = _inputs()
    _, new = planned_on_the_cpu(module, args, tmp_path)
    with torch.no_grad():
        for given in (args, [t * 3 - 1 for t in _inputs()]):
            for k, (g, w) in enumerate(zip(new(*given), module(*given), strict=True)):
                torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5, msg=lambda m, k=k: f"result {k}: {m}")


class Searches(nn.Module):
    """bucketize against fixed boundaries (a piecewise-linear encoding) and searchsorted in each row
    of a CDF made in forward (NeRF's importance sampling), left and right, NaN included."""

    def __init__(self):
        super().__init__()
        self.register_buffer("edges", torch.linspace(-2.0, 2.0, 9))

    def forward(self, x, w, u):
        cdf = torch.cumsum(torch.softmax(w, -1), -1)
        return (torch.bucketize(x, self.edges), torch.bucketize(x, self.edges, right=True),
                torch.searchsorted(cdf, u), torch.searchsorted(cdf, u, right=True),
                torch.searchsorted(self.edges, x.flatten()))


def _search_inputs():
    x = torch.randn(4, 7) * 2
    x[0, 0], x[1, 1] = float("nan"), 0.5  # (0.5 is a boundary: left and right differ there)
    return [x, torch.randn(4, 12), torch.rand(4, 5)]


def test_the_searches_plan():
    plan = planner.plan_graph(graph.trace_module(Searches(), _search_inputs()))
    assert plan.supported, plan.unsupported
    notes = " | ".join(g.note for g in plan.groups)
    assert "bucketize in 9" in notes and "searchsorted in 12 (right)" in notes, notes


@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.nvcc
@needs_nvcc
def test_the_searches_match_pytorch_on_the_cpu(tmp_path):
    from conftest import planned_on_the_cpu

    torch.manual_seed(0)
    module, args = Searches(), _search_inputs()
    _, new = planned_on_the_cpu(module, args, tmp_path)
    with torch.no_grad():
        for given in (args, _search_inputs()):
            for k, (g, w) in enumerate(zip(new(*given), module(*given), strict=True)):
                assert g.dtype == torch.int64 and torch.equal(g, w), (k, g, w)


class Folds(nn.Module):
    """F.fold of overlapping patches (col2im), with padding, stride and dilation, and its usual
    normaliser fold(unfold(ones)); an unbatched fold too."""

    def forward(self, x, cols):
        args = {"kernel_size": (3, 2), "dilation": (1, 2), "padding": (1, 0), "stride": (2, 1)}
        patches = F.unfold(x, **args) * 1.5
        back = F.fold(patches, x.shape[-2:], **args)
        norm = F.fold(F.unfold(torch.ones_like(x), **args), x.shape[-2:], **args)
        return back / norm, F.fold(cols, (5, 6), kernel_size=2, stride=1)


def _fold_inputs():
    return [torch.randn(2, 3, 9, 8), torch.randn(4 * 4, 4 * 5)]


def test_the_folds_plan():
    plan = planner.plan_graph(graph.trace_module(Folds(), _fold_inputs()))
    assert plan.supported, plan.unsupported
    assert sum("col2im" in g.note for g in plan.groups) == 3


@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.nvcc
@needs_nvcc
def test_the_folds_match_pytorch_on_the_cpu(tmp_path):
    from conftest import planned_on_the_cpu

    torch.manual_seed(0)
    module, args = Folds(), _fold_inputs()
    _, new = planned_on_the_cpu(module, args, tmp_path)
    with torch.no_grad():
        for given in (args, _fold_inputs()):
            for g, w in zip(new(*given), module(*given), strict=True):
                torch.testing.assert_close(g, w, rtol=1e-6, atol=1e-6)


class PairIndices(nn.Module):
    """Pair indices made in forward (PNN's and FM's inner products over the lower triangle of a Gram
    matrix, here given), and triangles of rectangles at both signs of offset, returned as made."""

    def forward(self, gram):
        e = gram
        li, lj = torch.tril_indices(e.size(1), e.size(1), offset=-1, device=e.device)
        return (gram[:, li, lj] * 2, torch.tril_indices(5, 9, 3, device=e.device),
                torch.triu_indices(9, 5, -2, device=e.device), torch.triu_indices(6, 6, 1, device=e.device),
                torch.tril_indices(7, 4, -5, device=e.device))


def test_the_pair_indices_plan():
    plan = planner.plan_graph(graph.trace_module(PairIndices(), [torch.randn(3, 8, 8)]))
    assert plan.supported, plan.unsupported
    notes = " ".join(g.note for g in plan.groups)
    assert "tril_indices 8, 8, -1" in notes and "triu_indices 9, 5, -2" in notes, notes


@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.nvcc
@needs_nvcc
def test_the_pair_indices_match_pytorch_on_the_cpu(tmp_path):
    from conftest import planned_on_the_cpu

    module = PairIndices()
    x = torch.randn(3, 8, 8)
    _, new = planned_on_the_cpu(module, [x], tmp_path)
    with torch.no_grad():
        got, want = new(x), module(x)
    torch.testing.assert_close(got[0], want[0], rtol=0, atol=0)
    for k, (g, w) in enumerate(zip(got[1:], want[1:], strict=True)):
        assert g.dtype == torch.int64 and torch.equal(g, w), (k, g, w)
