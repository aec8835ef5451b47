"""Tensors a module keeps as plain attributes (not parameters or buffers) and writes in forward,
as level3/33_VanillaRNN does with its hidden state: traced again with them as buffers, planned when
forward overwrites them before reading, refused with the reason when it reads the old value."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from conftest import builtin_candidate, load_model_new, needs_nvcc

from stitchcuda.agents import graph
from stitchcuda.agents.plan import planner


class Overwritten(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = torch.randn(4, 6)  # a plain attribute, as in KernelBench's VanillaRNN

    def forward(self, x, h):
        self.hidden.copy_(h)
        self.hidden = self.hidden.to(x.device)
        return torch.tanh(x + self.hidden) * 2.0


class ReadFirst(nn.Module):
    def __init__(self):
        super().__init__()
        self.total = torch.zeros(4, 6)

    def forward(self, x):
        self.total.add_(x)
        return x * self.total


def test_an_overwritten_attribute_plans_and_the_module_is_left_as_it_was():
    m = Overwritten()
    before = m.hidden
    nodes = graph.trace_module(m, [torch.randn(4, 6), torch.randn(4, 6)])
    assert m.hidden is before and "hidden" not in m._buffers  # put back as a plain attribute
    hidden = next(n for n in nodes if n["op"] == "input" and n.get("key") == "hidden")
    assert hidden["kind"] == "buffer" and hidden["persistent"] is False
    assert "data" not in hidden  # an attribute's values are not a buffer's to carry into ModelNew
    plan = planner.plan_graph(nodes)
    assert plan.supported, plan.unsupported


def test_an_attribute_read_before_it_is_written_is_refused_with_the_reason():
    with pytest.raises(graph.TraceError, match="reads the tensor attribute 'total'.*register_buffer"):
        graph.trace_module(ReadFirst(), [torch.randn(4, 6)])


@needs_nvcc
def test_the_candidate_matches_and_writes_its_own_copy_of_the_state(tmp_path, isolated_cache):
    torch.manual_seed(0)
    m = Overwritten()
    ins = [torch.randn(4, 6), torch.randn(4, 6)]
    new, _ = load_model_new(builtin_candidate(m, ins), m, tmp_path)
    for _ in range(2):
        ins = [torch.randn(4, 6), torch.randn(4, 6)]
        torch.testing.assert_close(new(*ins), m(*ins), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(new.hidden, ins[1])  # the state forward wrote
