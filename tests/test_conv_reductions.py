"""A sum or mean over spatial dims of a convolution's result is computed from its input's sums
(agents/plan/conv_reductions.py): per tap, the input over the positions the tap reaches, by inclusion
and exclusion of the border positions padding crops. Checked on the plan (what folds and what must
not) and through the planned graph as PyTorch runs it, against the module, over many geometries."""

from __future__ import annotations

import copy
import random

import pytest
import torch
import torch.nn as nn
from conftest import assert_planned_math_matches, builtin_candidate, needs_nvcc, plan_of, planned_math

from stitchcuda.agents.plan import planner


class Reduced(nn.Module):
    """conv, a scalar scale, then a sum or mean over `dims`."""

    def __init__(self, conv: nn.Module, dims, mean: bool = True, keepdim: bool = True, scale: float = 1.0):
        super().__init__()
        self.conv, self.dims, self.mean, self.keepdim, self.scale = conv, dims, mean, keepdim, scale

    def forward(self, x):
        y = self.conv(x)
        if self.scale != 1.0:
            y = y * self.scale
        return y.mean(self.dims, keepdim=self.keepdim) if self.mean else y.sum(self.dims, keepdim=self.keepdim)


def _t(cls, *a, **k):
    return cls(*a, **k)


FOLDED = {
    # a 3-d transposed convolution averaged over depth: 2-d ones over the depth-summed input
    "convT3d over depth, padded": (lambda: Reduced(nn.ConvTranspose3d(3, 5, 3, padding=1), [2]), (2, 3, 6, 5, 5)),
    "convT2d global mean": (lambda: Reduced(nn.ConvTranspose2d(4, 6, 3), [2, 3]), (2, 4, 7, 7)),
    "convT2d strided, cropped, scaled": (
        lambda: Reduced(nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1), [2, 3], scale=0.5),
        (2, 4, 8, 8)),
    "conv2d padded, summed": (lambda: Reduced(nn.Conv2d(3, 4, 3, padding=1), [2, 3], mean=False, keepdim=False),
                              (2, 3, 9, 9)),
    "conv1d dilated": (lambda: Reduced(nn.Conv1d(3, 4, 3, padding=2, dilation=2), [2]), (2, 3, 11)),
    "convT2d grouped, one dim kept": (lambda: Reduced(nn.ConvTranspose2d(4, 6, 3, padding=1, groups=2), [3]),
                                      (2, 4, 6, 7)),
    "convT2d stride 3, dilation 2": (lambda: Reduced(nn.ConvTranspose2d(2, 3, 3, stride=3, padding=2, dilation=2),
                                                     [2], mean=False), (2, 2, 5, 6)),
}


class Activated(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return torch.relu(self.conv(x)).mean([2, 3])


class ReadTwice(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        y = self.conv(x)
        return y.mean([2, 3]), y


KEPT = {
    "strided plain convolution": (lambda: Reduced(nn.Conv2d(3, 4, 3, stride=2), [2, 3]), (2, 3, 9, 9)),
    "over the channels": (lambda: Reduced(nn.Conv2d(3, 4, 3), [1]), (2, 3, 9, 9)),
    "an activation between": (Activated, (2, 3, 9, 9)),
    "result read twice": (ReadTwice, (2, 3, 9, 9)),
}


def _folded(plan) -> list[str]:
    return [n["folded"] for n in plan.graph if "folded" in n]


def _check(module: nn.Module, shape) -> None:
    x = torch.randn(*shape)
    plan = plan_of(module, [x])
    assert len(_folded(plan)) == 1, (_folded(plan), plan.unsupported)
    assert_planned_math_matches(plan, module, (x, torch.randn(*shape)), 1e-4)


@pytest.mark.parametrize("make,shape", FOLDED.values(), ids=FOLDED.keys())
def test_reductions_of_convolutions_fold_and_the_math_holds(make, shape):
    torch.manual_seed(0)
    _check(make(), shape)


def test_random_geometries():
    """Transposed and plain convolutions of random kernels, strides, paddings, dilations and output
    paddings, reduced over random spatial dims: where they fold, the math holds."""
    rng = random.Random(5)
    folded = 0
    for _ in range(40):
        nd = rng.choice([1, 2, 3])
        transposed = rng.random() < 0.6
        k, dil = rng.choice([1, 2, 3]), rng.choice([1, 2])
        s = rng.choice([1, 2, 3]) if transposed else 1
        p = rng.randint(0, (dil * (k - 1)) // 2 + (1 if transposed else 0))
        op = rng.randint(0, max(0, min(s, dil) - 1)) if transposed else 0
        cls = [nn.Conv1d, nn.Conv2d, nn.Conv3d][nd - 1] if not transposed else \
            [nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d][nd - 1]
        kw = {"stride": s, "padding": p, "dilation": dil, "bias": rng.random() < 0.7}
        if transposed:
            kw["output_padding"] = op
        conv = cls(2, 3, k, **kw)
        sizes = [rng.randint(4, 7) for _ in range(nd)]
        dims = sorted(rng.sample(range(2, 2 + nd), rng.randint(1, nd)))
        module = Reduced(conv, dims, mean=rng.random() < 0.5, keepdim=rng.random() < 0.5)
        x = torch.randn(2, 2, *sizes)
        try:
            module(x)
        except RuntimeError:  # a geometry PyTorch refuses (a kernel wider than the padded input)
            continue
        plan = plan_of(module, [x])
        if not _folded(plan):
            continue
        folded += 1
        (got,) = planned_math(plan, module)(x)
        with torch.no_grad():
            torch.testing.assert_close(got, module(x), rtol=1e-4, atol=1e-4)
    assert folded >= 20


@pytest.mark.parametrize("make,shape", KEPT.values(), ids=KEPT.keys())
def test_what_does_not_fold_stays(make, shape):
    assert _folded(plan_of(make(), [torch.randn(*shape)])) == []


def test_off_switch(monkeypatch):
    monkeypatch.setenv(planner.FOLD_REDUCTIONS_ENV, "0")
    make, shape = FOLDED["convT2d global mean"]
    assert _folded(plan_of(make(), [torch.randn(*shape)])) == []


@needs_nvcc
@pytest.mark.usefixtures("isolated_cache")
def test_a_folded_convolution_builds_clean_for_sm90(tmp_path):
    from conftest import assert_builds_clean_for_sm90, cudnn_include_or_skip

    include = cudnn_include_or_skip()
    for key in ("convT3d over depth, padded", "convT2d strided, cropped, scaled"):
        make, shape = FOLDED[key]
        cand = builtin_candidate(make(), [torch.randn(*shape)], host=False)
        assert "computed from its input's sums" in cand.files["model_new.py"]
        assert_builds_clean_for_sm90(cand, tmp_path / f"{len(key)}.cu", include)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.parametrize("make,shape", FOLDED.values(), ids=FOLDED.keys())
def test_on_the_gpu_folded_convolutions_match(tmp_path, monkeypatch, make, shape):
    from conftest import assert_matches_on_the_gpu

    torch.manual_seed(4)
    module = make()
    # ModelNew is built from the class's own arguments, as KernelBench's get_init_inputs gives them
    init = (copy.deepcopy(module.conv), module.dims, module.mean, module.keepdim, module.scale)
    assert_matches_on_the_gpu(module, [torch.randn(*shape)], tmp_path, monkeypatch, init)
