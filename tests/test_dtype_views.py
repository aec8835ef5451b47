"""Views that reinterpret a tensor's bits as another dtype (`x.view(torch.float16)` of a bfloat16 x).
The pointwise walk holds values as fp32 numbers, never bits, so it would read the root as its own
dtype: such a view is refused there (the plan says so) rather than computed wrong, and two
reductions that read one through a sibling pair's loader stay apart (each kernel reads its operand
as the view's dtype)."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn as nn
from conftest import needs_nvcc, plan_of

from stitchcuda.agents import graph
from stitchcuda.agents.coder import builtin as coder_builtin
from stitchcuda.agents.plan import planner
from stitchcuda.task import import_file

pytestmark = pytest.mark.usefixtures("isolated_cache")
_ids = itertools.count()


class TwoOfAView(nn.Module):
    def forward(self, x):
        h = x.view(torch.float16)
        return h.sum(-1), h.amax(-1)


class ChainOfAView(nn.Module):
    def forward(self, x, y):
        return (x.view(torch.float16) * y).amax(-1)


def _x():
    return (torch.rand(4, 64) + 0.5).bfloat16()


def test_reductions_of_a_dtype_view_are_no_sibling_pair():
    p = plan_of(TwoOfAView(), [_x()])
    assert p.supported, p.unsupported
    kernels = [g for g in p.groups if g.kind == "kernel"]
    assert len(kernels) == 2 and not any(g.detail.get("siblings") for g in kernels)


def test_a_pointwise_chain_over_a_dtype_view_is_refused_with_the_reason():
    p = planner.plan_graph(graph.trace_module(ChainOfAView(), [_x(), torch.rand(4, 64).half()]))
    assert not p.supported
    assert any("reinterprets" in r for r in p.unsupported), p.unsupported


@needs_nvcc
def test_reductions_of_a_dtype_view_match_the_reference_on_cpu(tmp_path):
    x = _x()
    module = TwoOfAView()
    cand = coder_builtin.build_candidate(plan_of(module, [x]), type(module), title="test", host=True)
    new = import_file(cand.write(tmp_path), name=f"_dtype_view_{next(_ids)}").ModelNew()
    for a, b in zip(new(x), module(x), strict=True):
        torch.testing.assert_close(a.float(), b.float(), rtol=1e-3, atol=1e-3)
