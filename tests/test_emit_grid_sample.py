"""F.affine_grid and F.grid_sample (rows of agents/coder/emit_layout.py's data-movement table): on the
CPU the candidate's host entry runs the kernel's own coordinate, padding and weighting code against
PyTorch, for bilinear and nearest sampling, the three padding modes and both align_corners, with grid
points outside [-1, 1]; a spatial transformer's warp; what stays unsupported."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import needs_nvcc

from stitchcuda.agents import graph
from stitchcuda.agents.coder import builtin as coder_builtin
from stitchcuda.agents.plan import planner
from stitchcuda.task import import_file

pytestmark = [pytest.mark.usefixtures("isolated_cache"), pytest.mark.nvcc, needs_nvcc]
_ids = itertools.count()
MODES = list(itertools.product(("bilinear", "nearest"), ("zeros", "border", "reflection"), (False, True)))


def _warp(mode: str, padding: str, align: bool) -> type[nn.Module]:
    class Warp(nn.Module):
        """An optical-flow style warp: the image sampled at a grid given with it."""

        def forward(self, x, grid):
            return F.grid_sample(x * 2, grid, mode=mode, padding_mode=padding, align_corners=align) + 1

    return Warp


class SpatialTransformer(nn.Module):
    """The sampling half of a spatial transformer network: theta from its inputs, then the warp."""

    def forward(self, x, t):
        theta = torch.tanh(t) * 0.8
        grid = F.affine_grid(theta, list(x.shape), align_corners=False)
        return F.grid_sample(x, grid, align_corners=False)


def _run(module: nn.Module, make_inputs, tmp_path, ops: set[str]) -> None:
    args = make_inputs()
    plan = planner.plan_graph(graph.trace_module(module, args))
    assert plan.supported, plan.unsupported
    assert ops <= {n["op"] for n in plan.graph}
    cand = coder_builtin.build_candidate(plan, type(module), title="t", host=True)
    new = import_file(cand.write(tmp_path), name=f"_grid_{next(_ids)}").ModelNew()
    with torch.no_grad():
        for given in (args, make_inputs()):
            torch.testing.assert_close(new(*given), module(*given), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode,padding,align", MODES, ids=[f"{m}-{p}-{'align' if a else 'centres'}" for m, p, a in MODES])
def test_grid_sample_matches_pytorch(tmp_path, mode, padding, align):
    torch.manual_seed(0)
    # Grid points reach past [-1, 1] so every padding mode decides some of them.
    _run(_warp(mode, padding, align)(), lambda: [torch.randn(2, 3, 7, 9), torch.rand(2, 5, 6, 2) * 2.6 - 1.3],
         tmp_path, {"grid_sampler_2d"})


def test_a_spatial_transformers_warp_matches_pytorch(tmp_path):
    torch.manual_seed(1)
    _run(SpatialTransformer(), lambda: [torch.randn(2, 3, 8, 10), torch.randn(2, 2, 3)], tmp_path,
         {"affine_grid_generator", "grid_sampler_2d"})


def test_bicubic_stays_unsupported():
    class Bicubic(nn.Module):
        def forward(self, x, grid):
            return F.grid_sample(x, grid, mode="bicubic", align_corners=False)

    plan = planner.plan_graph(graph.trace_module(Bicubic(), [torch.randn(1, 2, 5, 5), torch.rand(1, 3, 3, 2)]))
    assert not plan.supported and any("grid_sampler_2d" in r for r in plan.unsupported), plan.unsupported


def test_the_warp_builds_clean_for_sm90(tmp_path):
    from conftest import assert_builds_clean_for_sm90, cudnn_include_or_skip

    include = cudnn_include_or_skip()
    args = [torch.randn(2, 3, 8, 10), torch.randn(2, 2, 3)]
    plan = planner.plan_graph(graph.trace_module(SpatialTransformer(), args))
    cand = coder_builtin.build_candidate(plan, SpatialTransformer, title="t", host=False)
    assert_builds_clean_for_sm90(cand, tmp_path / "warp.cu", include)
