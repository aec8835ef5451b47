"""Values an unrolled recurrence carries from step to step (planner._carried_values): a loop over time
steps with a kernel between them (a reduction here; an LSTM's products on a GPU) made every step's
kernel compute every earlier step's state again, code and work growing with the square of the steps
(bench/coverage's lstm_bidir_proj: a 14 MB source). Now a long chain read by a later stage is stored
where it is computed, and no kernel computes more than about CARRY_OPS ops of earlier stages."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from conftest import builtin_candidate, load_model_new

from stitchcuda.agents.plan import planner

pytestmark = pytest.mark.usefixtures("isolated_cache")


class Unrolled(nn.Module):
    """A gated state updated over the steps, each step's gate reading a mean of the state before it."""

    def forward(self, x):
        c = torch.zeros_like(x[0])
        for t in range(x.shape[0]):
            h = torch.tanh(c) * 0.5
            g = torch.sigmoid(x[t] + h.mean(-1, keepdim=True))
            c = g * c + (1 - g) * torch.tanh(x[t] * 1.5)
        return c


class Short(nn.Module):
    """Short chains across a kernel: computed again where read, as before (nothing carried)."""

    def forward(self, x):
        y = torch.relu(x * 2.0 + 1.0)
        return y - y.mean(-1, keepdim=True)


def _plan(module: nn.Module, x: torch.Tensor):
    from stitchcuda.agents import graph

    return planner.plan_graph(graph.trace_module(module, [x]))


def _largest(plan) -> tuple[int, int]:
    """(the most nodes of a pointwise group, the most members of a kernel's prologue) of the plan."""
    groups = plan.groups
    pointwise = max((len(g.nodes) for g in groups if g.kind == "pointwise"), default=0)
    prologue = max((len(g.detail.get("prologue", {}).get("members", [])) for g in groups if g.kind == "kernel"), default=0)
    return pointwise, prologue


def test_a_recurrence_stores_its_state_and_computes_what_the_loop_does(tmp_path):
    x = torch.randn(24, 8, 64)
    pointwise, prologue = _largest(_plan(Unrolled(), x))
    assert pointwise <= planner.CARRY_OPS + 16 and prologue <= planner.CARRY_OPS + 16, (pointwise, prologue)
    new, _ = load_model_new(builtin_candidate(Unrolled(), [x]), Unrolled(), tmp_path)
    torch.testing.assert_close(new(x), Unrolled()(x), rtol=1e-5, atol=1e-5)


def test_without_carrying_the_chains_grow_with_the_steps(monkeypatch):
    """The bound above is the change's: with nothing carried, the last steps' chains hold every step."""
    bound = planner.CARRY_OPS
    monkeypatch.setattr(planner, "CARRY_OPS", 1 << 30)
    pointwise, prologue = _largest(_plan(Unrolled(), torch.randn(40, 8, 64)))
    assert max(pointwise, prologue) > 4 * bound


def test_short_chains_are_still_computed_where_read(tmp_path):
    x = torch.randn(16, 128)
    plan = _plan(Short(), x)
    assert sum(g.kind == "pointwise" for g in plan.groups) == 1  # relu's chain is not stored
    new, _ = load_model_new(builtin_candidate(Short(), [x]), Short(), tmp_path)
    torch.testing.assert_close(new(x), Short()(x), rtol=1e-5, atol=1e-5)
