"""An average pool after a convolution is composed with it into one convolution
(agents/plan/pooled_convs.py): a plain one of a wider kernel at the pool's stride, or a transposed one
at stride 1 whose taps are windows of the original's. Checked on the plan (what composes and what
must not) and through the planned graph as PyTorch runs it, against the module, over many
geometries; on the GPU, the built candidate against the module."""

from __future__ import annotations

import copy
import random

import pytest
import torch
import torch.nn as nn
from conftest import assert_planned_math_matches, builtin_candidate, needs_nvcc, plan_of, planned_math

from stitchcuda.agents.plan import planner

_POOL = {1: nn.AvgPool1d, 2: nn.AvgPool2d, 3: nn.AvgPool3d}


class Pooled(nn.Module):
    """conv, then pointwise steps that act alike over a plane (`steps`), then an average pool."""

    def __init__(self, conv: nn.Module, pool: nn.Module, steps: tuple[str, ...] = ()):
        super().__init__()
        self.conv, self.pool, self.steps = conv, pool, steps
        nd = conv.weight.dim() - 2
        channels = conv.out_channels
        self.scale = nn.Parameter(torch.tensor(0.7))
        self.shift = nn.Parameter(torch.randn(channels, *[1] * nd))

    def forward(self, x):
        y = self.conv(x)
        for step in self.steps:
            if step == "scale":
                y = y * self.scale
            elif step == "shift":
                y = y + self.shift
            elif step == "halve":
                y = y / 2.0
            elif step == "neg":
                y = -y
            elif step == "sub":
                y = y - 0.25
        return self.pool(y)

    def init_args(self) -> tuple:
        return copy.deepcopy(self.conv), copy.deepcopy(self.pool), self.steps


COMPOSED = {
    "conv2d 3x3 then 4x4 pool (odd size: the pool drops a row)": (
        lambda: Pooled(nn.Conv2d(3, 5, 3), nn.AvgPool2d(4)), (2, 3, 14, 13)),
    "conv2d padded, grouped, overlapping pool": (
        lambda: Pooled(nn.Conv2d(4, 6, 3, padding=1, groups=2), nn.AvgPool2d(3, stride=2)), (2, 4, 9, 10)),
    "conv1d with steps between": (
        lambda: Pooled(nn.Conv1d(2, 3, 5, padding=2), nn.AvgPool1d(2), ("scale", "shift", "neg")), (2, 2, 11)),
    "conv3d no bias": (lambda: Pooled(nn.Conv3d(2, 3, 2, bias=False), nn.AvgPool3d(2)), (2, 2, 5, 6, 6)),
    "convT3d stride 2 then 2x2x2 pool, scaled": (
        lambda: Pooled(nn.ConvTranspose3d(3, 4, 3, stride=2, padding=1), nn.AvgPool3d(2), ("scale",)),
        (2, 3, 4, 5, 5)),
    "convT2d kernel 4 stride 2 (negative input offsets)": (
        lambda: Pooled(nn.ConvTranspose2d(3, 4, 4, stride=2, padding=1), nn.AvgPool2d(2), ("halve", "sub")),
        (2, 3, 6, 5)),
    "convT2d grouped": (
        lambda: Pooled(nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, groups=2), nn.AvgPool2d(2)), (2, 4, 5, 6)),
    "convT1d stride 3": (lambda: Pooled(nn.ConvTranspose1d(2, 3, 5, stride=3, padding=2), nn.AvgPool1d(3)),
                         (2, 2, 7)),
}


class ReadTwice(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        y = self.conv(x)
        return nn.functional.avg_pool2d(y, 2), y


class Activated(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return nn.functional.avg_pool2d(torch.relu(self.conv(x)), 2)


class SpatialShift(nn.Module):
    """A scale that varies along a pooled dim does not commute with the average."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.ramp = nn.Parameter(torch.randn(1, 1, 1, 6))

    def forward(self, x):
        return nn.functional.avg_pool2d(self.conv(x) * self.ramp, 2)


KEPT = {
    "strided plain convolution": (lambda: Pooled(nn.Conv2d(3, 4, 3, stride=2), nn.AvgPool2d(2)), (2, 3, 9, 9)),
    "dilated convolution": (lambda: Pooled(nn.Conv2d(3, 4, 3, dilation=2), nn.AvgPool2d(2)), (2, 3, 9, 9)),
    "padded pool": (lambda: Pooled(nn.Conv2d(3, 4, 3), nn.AvgPool2d(3, stride=2, padding=1)), (2, 3, 9, 9)),
    "ceil mode's partial window": (lambda: Pooled(nn.Conv2d(3, 4, 3), nn.AvgPool2d(2, ceil_mode=True)),
                                   (2, 3, 9, 9)),
    # The output padding's last row is pooled from inputs past the end: a stride-1 transposed
    # convolution cannot make it without padding the input.
    "transposed with output padding the pool keeps": (
        lambda: Pooled(nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1), nn.AvgPool2d(2)),
        (2, 3, 5, 5)),
    "transposed stride unlike the pool": (
        lambda: Pooled(nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1), nn.AvgPool2d(3)), (2, 3, 5, 5)),
    "transposed, padding beyond its taps": (
        lambda: Pooled(nn.ConvTranspose2d(3, 4, 3, stride=2, padding=3), nn.AvgPool2d(2)), (2, 3, 7, 7)),
    "an activation between": (Activated, (2, 3, 8, 8)),
    "a step that varies over a pooled dim": (SpatialShift, (2, 3, 8, 8)),
    "result read twice": (ReadTwice, (2, 3, 8, 8)),
    "1x1 convolution (pool_first's)": (lambda: Pooled(nn.Conv2d(3, 4, 1), nn.AvgPool2d(2)), (2, 3, 8, 8)),
}


def _composed(plan) -> list[str]:
    return [n["folded"] for n in plan.graph if "composed into it" in n.get("folded", "")]


def _check(module: nn.Module, shape) -> None:
    x = torch.randn(*shape)
    plan = plan_of(module, [x])
    assert len(_composed(plan)) == 1, (_composed(plan), plan.unsupported)
    # The full-size result is gone: no convolution in the plan writes more values than the pool's.
    convs = [n for n in plan.graph if n["op"] == "convolution"]
    assert len(convs) == 1
    with torch.no_grad():
        want_shape = module(x).shape
    assert sorted(convs[0]["shape"]) == sorted(want_shape)
    assert_planned_math_matches(plan, module, (x, torch.randn(*shape)), 1e-4)


@pytest.mark.parametrize("make,shape", COMPOSED.values(), ids=COMPOSED.keys())
def test_pools_compose_into_convolutions_and_the_math_holds(make, shape):
    torch.manual_seed(0)
    _check(make(), shape)


def test_the_weights_are_composed_in_every_forward():
    """Changed weights after planning change the planned math's result as they change the module's."""
    torch.manual_seed(1)
    make, shape = COMPOSED["convT3d stride 2 then 2x2x2 pool, scaled"]
    module = make()
    x = torch.randn(*shape)
    run = planned_math(plan_of(module, [x]), module)
    with torch.no_grad():
        module.conv.weight.mul_(-3.0).add_(0.5)
        module.scale.fill_(1.9)
        (got,) = run(x)
        torch.testing.assert_close(got, module(x), rtol=1e-4, atol=1e-4)


def test_random_geometries():
    """Plain and transposed convolutions of random kernels, paddings, groups and output paddings,
    pooled by random windows: where they compose, the math holds; most do."""
    rng = random.Random(11)
    composed = tried = 0
    for _ in range(40):
        nd = rng.choice([1, 2, 3])
        transposed = rng.random() < 0.5
        k = rng.choice([2, 3, 4])
        groups = rng.choice([1, 2])
        if transposed:
            s = rng.choice([2, 3])
            p = rng.randint(0, k - 1)
            op = rng.randint(0, s - 1)
            cls = [nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d][nd - 1]
            conv = cls(2 * groups, 3 * groups, k, stride=s, padding=p, output_padding=op, groups=groups,
                       bias=rng.random() < 0.7)
            pool = _POOL[nd](s)
        else:
            window = rng.choice([2, 3])
            cls = [nn.Conv1d, nn.Conv2d, nn.Conv3d][nd - 1]
            conv = cls(2 * groups, 3 * groups, k, padding=rng.randint(0, k // 2), groups=groups,
                       bias=rng.random() < 0.7)
            pool = _POOL[nd](window, stride=rng.choice([1, window]))
        steps = tuple(rng.sample(["scale", "shift", "halve", "neg", "sub"], rng.randint(0, 2)))
        module = Pooled(conv, pool, steps)
        x = torch.randn(2, 2 * groups, *[rng.randint(5, 9) for _ in range(nd)])
        try:
            with torch.no_grad():
                module(x)
        except RuntimeError:  # a geometry PyTorch refuses (output padding, a window wider than the result)
            continue
        tried += 1
        plan = plan_of(module, [x])
        if not _composed(plan):
            continue
        composed += 1
        (got,) = planned_math(plan, module)(x)
        with torch.no_grad():
            torch.testing.assert_close(got, module(x), rtol=1e-4, atol=1e-4)
    assert composed >= 20 and composed >= tried * 2 // 3, (composed, tried)


@pytest.mark.parametrize("make,shape", KEPT.values(), ids=KEPT.keys())
def test_what_does_not_compose_stays(make, shape):
    assert _composed(plan_of(make(), [torch.randn(*shape)])) == []


def test_off_switch(monkeypatch):
    monkeypatch.setenv(planner.POOL_FIRST_ENV, "0")
    make, shape = COMPOSED["conv2d 3x3 then 4x4 pool (odd size: the pool drops a row)"]
    assert _composed(plan_of(make(), [torch.randn(*shape)])) == []


@needs_nvcc
@pytest.mark.usefixtures("isolated_cache")
def test_a_composed_convolution_builds_clean_for_sm90(tmp_path):
    from conftest import assert_builds_clean_for_sm90, cudnn_include_or_skip

    include = cudnn_include_or_skip()
    for key in ("conv2d 3x3 then 4x4 pool (odd size: the pool drops a row)", "convT3d stride 2 then 2x2x2 pool, scaled"):
        make, shape = COMPOSED[key]
        cand = builtin_candidate(make(), [torch.randn(*shape)], host=False)
        assert "composed into it" in cand.files["model_new.py"]
        assert_builds_clean_for_sm90(cand, tmp_path / f"{len(key)}.cu", include)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.parametrize("make,shape", COMPOSED.values(), ids=COMPOSED.keys())
def test_on_the_gpu_composed_convolutions_match(tmp_path, monkeypatch, make, shape):
    from conftest import assert_matches_on_the_gpu

    torch.manual_seed(4)
    module = make()
    assert_matches_on_the_gpu(module, [torch.randn(*shape)], tmp_path, monkeypatch, module.init_args())
