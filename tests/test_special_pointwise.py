"""Pointwise ops a fourth sweep of user-style modules found missing: torch.logit (RealNVP's
dequantisation, with and without eps), lgamma and digamma (a Dirichlet evidential loss, Beta and
Gamma log-densities), erfinv (Gaussian-copula and probit layers), sinc (SIREN-style filters), and the
int64 shifts of a hash embedding. The plan, and the candidate's CPU entry points against PyTorch,
special values included (poles, the ends of erfinv's domain, sinc at 0, shifts past 63)."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from conftest import needs_nvcc

from stitchcuda.agents import graph
from stitchcuda.agents.plan import planner


class Special(nn.Module):
    def forward(self, x, p, ids, counts):
        a = torch.logit(p) + torch.logit(p * 1.2 - 0.1, eps=1e-3)
        g = torch.lgamma(x) + torch.digamma(x) * 0.5
        e = torch.erfinv(torch.tanh(x) * 1.0001)  # (past 1 at the ends: NaN, as PyTorch)
        s = torch.special.sinc(x * 0.5)
        h = ((ids << 7) ^ (ids >> 2)) + torch.bitwise_left_shift(ids, counts) + torch.bitwise_right_shift(-ids, counts)
        return a, g, e, s, h % 1000003


def _inputs(seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(6, 33, generator=gen) * 3
    x[0, :6] = torch.tensor([0.0, -1.0, -2.5, 1.0, 10.0, -0.5])  # a pole, non-integer negatives, digamma's 10
    p = torch.rand(6, 33, generator=gen)
    p[1, :3] = torch.tensor([0.0, 1.0, 0.5])
    ids = torch.randint(-10**9, 10**9, (6, 33), generator=gen)
    counts = torch.randint(0, 70, (6, 33), generator=gen)  # some past 63
    return [x, p, ids, counts]


def test_they_plan():
    traced = graph.trace_module(Special(), _inputs())
    ops = {n["op"] for n in traced}
    assert {"logit", "lgamma", "digamma", "erfinv", "sinc", "__lshift__", "__rshift__", "bitwise_left_shift",
            "bitwise_right_shift"} <= ops, ops
    plan = planner.plan_graph(traced)
    assert plan.supported, plan.unsupported


@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.nvcc
@needs_nvcc
def test_they_match_pytorch_on_the_cpu(tmp_path):
    from conftest import planned_on_the_cpu

    module = Special()
    _, new = planned_on_the_cpu(module, _inputs(), tmp_path)
    with torch.no_grad():
        for seed in (0, 1):
            given = _inputs(seed)
            for k, (g, w) in enumerate(zip(new(*given), module(*given), strict=True)):
                if w.dtype == torch.int64:
                    assert g.dtype == torch.int64 and torch.equal(g, w), k
                else:
                    torch.testing.assert_close(g, w, rtol=2e-5, atol=2e-5, equal_nan=True,
                                               msg=lambda m, k=k: f"result {k}: {m}")
