"""An average pool after a 1x1 convolution moves before it (agents/plan/pool_first.py): the two
commute, so the convolution runs on the pooled pixels. Checked on the plan (what moves and what must
not) and through the planned graph as PyTorch runs it, against the module."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from conftest import assert_planned_math_matches, builtin_candidate, needs_nvcc, plan_of

from stitchcuda.agents.plan import planner


def _block(conv: nn.Module, pool: nn.Module) -> nn.Module:
    return nn.Sequential(nn.ReLU(), conv, pool)


MOVED = {
    "transition 2d": (lambda: _block(nn.Conv2d(6, 8, 1, bias=False), nn.AvgPool2d(2)), (2, 6, 8, 8)),
    "with bias, ceil mode": (lambda: _block(nn.Conv2d(4, 6, 1), nn.AvgPool2d(3, ceil_mode=True)), (2, 4, 10, 10)),
    "3d with bias": (lambda: _block(nn.Conv3d(3, 5, 1), nn.AvgPool3d(2)), (2, 3, 4, 6, 6)),
    "grouped, strided pool": (lambda: _block(nn.Conv2d(4, 8, 1, groups=2), nn.AvgPool2d(3, stride=2)), (2, 4, 9, 9)),
}


class ReadTwice(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 1)

    def forward(self, x):
        y = self.conv(x)
        return nn.functional.avg_pool2d(y, 2), y


KEPT = {
    "3x3 convolution": (lambda: _block(nn.Conv2d(4, 4, 3, padding=1), nn.AvgPool2d(2)), (2, 4, 8, 8)),
    "strided convolution": (lambda: _block(nn.Conv2d(4, 4, 1, stride=2), nn.AvgPool2d(2)), (2, 4, 8, 8)),
    "padded pool": (lambda: _block(nn.Conv2d(4, 4, 1), nn.AvgPool2d(3, stride=2, padding=1)), (2, 4, 8, 8)),
    "pool that keeps the size": (lambda: _block(nn.Conv2d(4, 4, 1), nn.AvgPool2d(1)), (2, 4, 8, 8)),
    "result read twice": (ReadTwice, (2, 4, 8, 8)),
}


def _moved(plan) -> list[str]:
    return [n["folded"] for n in plan.graph if "taken before it" in n.get("folded", "")]


@pytest.mark.parametrize("make,shape", MOVED.values(), ids=MOVED.keys())
def test_the_pool_moves_before_the_convolution_and_the_math_holds(make, shape):
    torch.manual_seed(0)
    module = make()
    x = torch.randn(*shape)
    plan = plan_of(module, [x])
    assert len(_moved(plan)) == 1, _moved(plan)
    (conv,) = [n for n in plan.graph if n["op"] == "convolution"]
    (pool,) = [n for n in plan.graph if n["op"].startswith("avg_pool")]
    # The pool reads the convolution's input, and the convolution reads the pool: it sees the pooled
    # pixels (as many values as the pool wrote, in its input's channels).
    assert conv["args"]["input"] == {"ref": pool["name"]}
    assert not any(n["op"] == "convolution" and n["name"] == pool["args"]["self"]["ref"] for n in plan.graph)
    assert_planned_math_matches(plan, module, (x, torch.randn(*shape)), 1e-5)


@pytest.mark.parametrize("make,shape", KEPT.values(), ids=KEPT.keys())
def test_what_does_not_commute_or_pay_stays(make, shape):
    plan = plan_of(make(), [torch.randn(*shape)])
    assert _moved(plan) == []


def test_off_switch(monkeypatch):
    monkeypatch.setenv(planner.POOL_FIRST_ENV, "0")
    make, shape = MOVED["transition 2d"]
    assert _moved(plan_of(make(), [torch.randn(*shape)])) == []


@needs_nvcc
@pytest.mark.usefixtures("isolated_cache")
def test_the_moved_pool_builds_clean_for_sm90(tmp_path):
    from conftest import assert_builds_clean_for_sm90, cudnn_include_or_skip

    include = cudnn_include_or_skip()
    make, shape = MOVED["transition 2d"]
    cand = builtin_candidate(make(), [torch.randn(*shape)], host=False)
    assert "taken before it" in cand.files["model_new.py"]
    assert_builds_clean_for_sm90(cand, tmp_path / "pool_first.cu", include)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.parametrize("make,shape", MOVED.values(), ids=MOVED.keys())
def test_on_the_gpu_moved_pools_match(tmp_path, monkeypatch, make, shape):
    from conftest import assert_matches_on_the_gpu

    torch.manual_seed(3)
    assert_matches_on_the_gpu(make(), [torch.randn(*shape)], tmp_path, monkeypatch)
