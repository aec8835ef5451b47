"""Counts and tests of booleans as user modules write them (a fourth sweep of user-style modules):
a masked loss's token count read as an int64 (`mask.sum(1)`, `correct.sum()`), a CRF's lengths
from `mask.long().sum(0)`, torch.count_nonzero, and torch.any / torch.all (with and without dims,
of floats, NaN included, of bools and of int64). agents/plan/aten_forms.py counts them in float32
(exact below 2**24 elements) and casts back. The plan, and the candidate's CPU entry points against
PyTorch."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from conftest import needs_nvcc

from stitchcuda.agents import graph
from stitchcuda.agents.plan import planner


class Counts(nn.Module):
    def forward(self, logits, targets, x, ids):
        mask = targets != -100
        correct = (logits.argmax(-1) == targets) & mask
        lengths = mask.long().sum(0) + mask.float().long().sum(0)  # (pytorch-crf's sequence ends)
        return (mask.sum(1), correct.sum(), lengths, torch.count_nonzero(x, dim=1), torch.count_nonzero(ids),
                torch.any(mask), x.isfinite().all(), torch.any(x > 1.5, dim=0), torch.all(ids, dim=1, keepdim=True),
                x.any(1), (lengths * 2 + mask.sum()) // 3)


def _inputs(seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    targets = torch.randint(0, 7, (5, 9), generator=gen)
    targets[torch.rand(5, 9, generator=gen) < 0.3] = -100
    x = torch.randn(5, 9, generator=gen)
    x[x.abs() < 0.4] = 0.0
    x[1, 2] = float("nan")
    ids = torch.randint(0, 3, (5, 9), generator=gen)
    return [torch.randn(5, 9, 7, generator=gen), targets, x, ids]


def test_they_plan():
    traced = graph.trace_module(Counts(), _inputs())
    assert {"count_nonzero", "any", "all"} <= {n["op"] for n in traced}
    plan = planner.plan_graph(traced)
    assert plan.supported, plan.unsupported


@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.nvcc
@needs_nvcc
def test_they_match_pytorch_on_the_cpu(tmp_path):
    from conftest import planned_on_the_cpu

    module = Counts()
    _, new = planned_on_the_cpu(module, _inputs(), tmp_path)
    with torch.no_grad():
        for seed in (0, 1, 2):
            given = _inputs(seed)
            for k, (g, w) in enumerate(zip(new(*given), module(*given), strict=True)):
                assert g.dtype == w.dtype and g.shape == w.shape and torch.equal(g, w), (k, g, w)
