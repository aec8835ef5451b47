"""pixel_shuffle, pixel_unshuffle and nearest upsampling by whole factors, rewritten into views and
one copy (agents/plan/resampling.py): planned, built and run through the host entries against
PyTorch; what the rewrite must leave alone stays unsupported."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import Fn, builtin_candidate, load_model_new, needs_nvcc

from stitchcuda.agents import graph
from stitchcuda.agents.plan import planner

pytestmark = pytest.mark.usefixtures("isolated_cache")


class Decoder(nn.Module):
    """A super-resolution head's shape: a per-channel scale, pixel shuffle, an activation; then
    nearest upsampling of a second path added in (the work after each copy fuses with it)."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.randn(8, 1, 1))

    def forward(self, x, skip):
        y = torch.sigmoid(F.pixel_shuffle(x * self.scale, 2))
        return y + F.interpolate(skip, scale_factor=2)


def _module(fn) -> nn.Module:
    """A module of one function whose ModelNew takes no arguments (load_model_new builds it so)."""
    return type("OneFn", (nn.Module,), {"forward": lambda self, x: fn(x)})()


CASES = [
    (_module(lambda x: torch.tanh(F.pixel_shuffle(x, 2))), [torch.randn(2, 8, 3, 5)]),
    (_module(lambda x: F.pixel_shuffle(x, 3) * 2.0), [torch.randn(2, 3, 18, 2, 4)]),  # two leading dims
    (_module(lambda x: F.pixel_unshuffle(x, 2) - 1.0), [torch.randn(2, 3, 4, 6)]),
    (_module(lambda x: F.interpolate(x, scale_factor=2) + 1.0), [torch.randn(2, 3, 4, 5)]),
    (_module(lambda x: F.interpolate(x, size=(8, 15))), [torch.randn(2, 3, 4, 5)]),
    (_module(lambda x: F.interpolate(x, scale_factor=3, mode="nearest")), [torch.randn(2, 3, 7)]),
    (_module(lambda x: F.interpolate(x, scale_factor=(2, 3, 1), mode="nearest-exact")), [torch.randn(2, 3, 4, 5, 3)]),
    (_module(lambda x: F.interpolate(x.half(), scale_factor=2).float()), [torch.randn(2, 3, 4, 5)]),
    (Decoder(), [torch.randn(2, 8, 3, 5), torch.randn(2, 2, 3, 5)]),
]


@needs_nvcc
@pytest.mark.parametrize(("module", "inputs"), CASES, ids=[str(i) for i in range(len(CASES))])
def test_the_rewritten_ops_match_torch_through_the_host_entries(tmp_path, module, inputs):
    new, _ = load_model_new(builtin_candidate(module, inputs), module, tmp_path)
    for scale in (1.0, -3.0):
        xs = [x * scale for x in inputs]
        # The copies are exact; tanh and sigmoid differ from torch's in the last bits.
        torch.testing.assert_close(new(*xs), module(*xs), rtol=1e-6, atol=1e-6)
    # Another batch size: the views' batch dim follows the input.
    more = [torch.cat([x, x[:1] * 2.0]) for x in inputs]
    torch.testing.assert_close(new(*more), module(*more), rtol=1e-6, atol=1e-6)


def test_no_op_of_theirs_is_left_and_each_copy_fuses_with_the_work_after_it():
    plan = planner.plan_graph(graph.trace_module(Decoder(), [torch.randn(2, 8, 3, 5), torch.randn(2, 2, 3, 5)]))
    ops = {n["op"] for n in plan.graph}
    assert plan.supported and not ops & {"pixel_shuffle", "upsample_nearest2d"}, ops
    assert all(g.kind == "pointwise" for g in plan.groups), [(g.kind, g.note) for g in plan.groups]


@pytest.mark.parametrize("fn", [
    lambda x: F.interpolate(x, scale_factor=1.5),  # fractional: rows picked unevenly
    lambda x: F.interpolate(x, size=(6, 7)),
    lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"),
    lambda x: F.pixel_shuffle(x[:, :, ::2], 2),  # a strided input: the views need a contiguous one
], ids=["fractional", "size-not-a-multiple", "bilinear", "strided-input"])
def test_what_the_rewrite_cannot_express_is_left_alone(fn):
    plan = planner.plan_graph(graph.trace_module(Fn(fn), [torch.randn(2, 4, 4, 6)]))
    assert any(n["op"] in ("upsample_nearest2d", "upsample_bilinear2d", "pixel_shuffle") for n in plan.graph)


# Resampling the rewrite leaves: emit_layout's rows (PyTorch's source-index formulas), one kernel each.
KERNELS = [
    (_module(lambda x: F.interpolate(x, scale_factor=1.5)), [torch.randn(2, 3, 4, 6)]),
    (_module(lambda x: F.interpolate(x, size=(6, 7)) * 2.0), [torch.randn(2, 3, 4, 5)]),
    (_module(lambda x: F.interpolate(x, scale_factor=1.7, mode="nearest-exact")), [torch.randn(2, 3, 5, 6)]),
    (_module(lambda x: F.interpolate(x, scale_factor=2, mode="bilinear")), [torch.randn(2, 3, 4, 5)]),
    (_module(lambda x: F.interpolate(x, size=(7, 9), mode="bilinear", align_corners=True)), [torch.randn(2, 3, 4, 5)]),
    (_module(lambda x: F.interpolate(x, scale_factor=0.5, mode="bilinear")), [torch.randn(2, 3, 8, 6)]),  # down
    (_module(lambda x: F.interpolate(x, scale_factor=2.5, mode="linear")), [torch.randn(2, 3, 7)]),
    (_module(lambda x: F.interpolate(x, scale_factor=(1.5, 2, 2), mode="trilinear")), [torch.randn(1, 2, 3, 4, 5)]),
    (_module(lambda x: F.interpolate(x.half(), scale_factor=2, mode="bilinear").float()), [torch.randn(2, 3, 4, 5)]),
    (_module(lambda x: F.interpolate(x, scale_factor=2, mode="bicubic")), [torch.randn(2, 3, 4, 5)]),
    (_module(lambda x: F.interpolate(x, size=(9, 7), mode="bicubic", align_corners=True) - 1.0), [torch.randn(2, 3, 4, 5)]),
    (_module(lambda x: F.interpolate(x, scale_factor=0.6, mode="bicubic")), [torch.randn(1, 2, 10, 9)]),  # down: taps past both edges
    (_module(lambda x: F.interpolate(x, scale_factor=(1.5, 3), mode="bicubic")), [torch.randn(2, 2, 6, 3)]),
    (_module(lambda x: F.interpolate(x, scale_factor=1, mode="bicubic")), [torch.randn(1, 2, 5, 4)]),  # same size: a copy
]


@needs_nvcc
@pytest.mark.parametrize(("module", "inputs"), KERNELS, ids=[str(i) for i in range(len(KERNELS))])
def test_resampling_kernels_match_torch_through_the_host_entries(tmp_path, module, inputs):
    cand = builtin_candidate(module, inputs)
    new, _ = load_model_new(cand, module, tmp_path)
    for scale in (1.0, -3.0):
        xs = [x * scale for x in inputs]
        want = module(*xs)
        tol = 2e-3 if "half" in cand.files["model_new.py"] else 1e-5
        torch.testing.assert_close(new(*xs), want, rtol=tol, atol=tol * want.abs().max().item())
