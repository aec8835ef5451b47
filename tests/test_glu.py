"""F.glu rewritten into two slices, a sigmoid and a product (agents/plan/glu.py): planned with no glu
left and one fused pointwise kernel, built and run through the host entries against PyTorch."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import builtin_candidate, load_model_new, needs_nvcc

from stitchcuda.agents import graph
from stitchcuda.agents.plan import planner

pytestmark = pytest.mark.usefixtures("isolated_cache")


def _module(fn) -> nn.Module:
    """A module of one function whose ModelNew takes no arguments (load_model_new builds it so)."""
    return type("OneFn", (nn.Module,), {"forward": lambda self, x: fn(x)})()


CASES = [
    (lambda x: F.glu(x, dim=1), (2, 8, 5)),  # a Conformer's channel dim
    (lambda x: F.glu(x) * 2.0, (3, 4, 6)),  # the last dim (the default)
    (lambda x: F.glu(x.transpose(1, 2), dim=-1), (2, 6, 4)),  # a strided input
    (lambda x: F.glu(x.half(), dim=0).float(), (4, 3)),
]


@needs_nvcc
@pytest.mark.parametrize(("fn", "shape"), CASES, ids=[str(i) for i in range(len(CASES))])
def test_glu_matches_torch_through_the_host_entries(tmp_path, fn, shape):
    module = _module(fn)
    cand = builtin_candidate(module, [torch.randn(shape)])
    new, _ = load_model_new(cand, module, tmp_path)
    for scale in (1.0, -4.0):
        x = torch.randn(shape) * scale
        tol = 1e-3 if "float16" in cand.files["model_new.py"] else 1e-6
        torch.testing.assert_close(new(x), fn(x), rtol=tol, atol=tol)


def test_no_glu_is_left_and_its_parts_fuse_with_the_work_around_them():
    plan = planner.plan_graph(graph.trace_module(_module(lambda x: torch.tanh(F.glu(x, dim=1)) + 1.0),
                                                 [torch.randn(2, 8, 5)]))
    assert plan.supported and "glu" not in {n["op"] for n in plan.graph}
    assert [g.kind for g in plan.groups] == ["pointwise"], [(g.kind, g.note) for g in plan.groups]
