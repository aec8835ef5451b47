"""Assignments and small forms user modules write that a fourth sweep found unplanned: `x[:, 0] = v`
(select_scatter), `canvas[:, idx] = feats` and `index_put_(..., accumulate=True)` (PointPillars'
pseudo-image, a sparse accumulation), `scores[mask] = -inf`, dot and vdot (spectral norm's sigma),
and nn.BCELoss / F.binary_cross_entropy (no reduction, mean, sum, weighted). The plan, and the
candidate's CPU entry points against PyTorch."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import needs_nvcc

from stitchcuda.agents import graph
from stitchcuda.agents.plan import planner


class Assignments(nn.Module):
    def forward(self, x, y, idx, acc, mask, u, v, p, t, w):
        a = x.clone()
        a[:, 0] = y[:, 1] * 2  # select_scatter
        a[-1] = 0.5  # select_scatter of a constant row
        canvas = torch.zeros(3, 10)
        canvas[:, idx] = x.t()[:, :4]  # index_put, stored (distinct indices)
        total = torch.zeros(5, 6)
        total.index_put_((acc,), y, accumulate=True)  # index_put, added (repeated indices)
        s = x * 1.5
        s[mask] = float("-inf")  # index_put of a boolean mask
        sigma = torch.dot(u, v) + torch.vdot(v, u) * 0.5
        return (a, canvas, total, s, sigma, F.binary_cross_entropy(p, t), F.binary_cross_entropy(p, t, reduction="sum"),
                F.binary_cross_entropy(p, t, weight=w, reduction="none"), nn.BCELoss(weight=w)(p, t))


def _inputs(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(6, 3, generator=g)
    p = torch.rand(6, 3, generator=g).clamp(1e-4, 1 - 1e-4)
    p[0, 0], p[0, 1] = 0.0, 1.0  # (logs clamped at -100)
    return [x, torch.randn(6, 6, generator=g), torch.randperm(10, generator=g)[:4],
            torch.randint(0, 5, (6,), generator=g), torch.rand(6, 3, generator=g) > 0.5, torch.randn(7, generator=g),
            torch.randn(7, generator=g), p, torch.rand(6, 3, generator=g).round(), torch.rand(3, generator=g)]


def test_they_plan():
    traced = graph.trace_module(Assignments(), _inputs())
    assert {"select_scatter", "index_put", "dot", "vdot", "binary_cross_entropy"} <= {n["op"] for n in traced}
    plan = planner.plan_graph(traced)
    assert plan.supported, plan.unsupported


@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.nvcc
@needs_nvcc
def test_they_match_pytorch_on_the_cpu(tmp_path):
    from conftest import planned_on_the_cpu

    module = Assignments()
    _, new = planned_on_the_cpu(module, _inputs(), tmp_path)
    with torch.no_grad():
        for seed in (0, 1):
            given = _inputs(seed)
            for k, (g, w) in enumerate(zip(new(*given), module(*given), strict=True)):
                torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5, msg=lambda m, k=k: f"result {k}: {m}")
