"""A cat computes its pointwise sources as it copies them (planner._take_cat_sources): the chain
before each source is read through a loader of its own inputs instead of being stored by a
pointwise kernel and read back. Checked through the candidate's host entries against PyTorch, and
what is left stored: a source another op reads, one forward returns, one seen through a view."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from conftest import builtin_candidate, load_model_new, needs_nvcc, plan_of

from stitchcuda.agents.plan import planner


class Branches(nn.Module):
    """Two activations of different inputs, and an input as it is, concatenated along channels."""

    def forward(self, x, y, z):
        return torch.cat([torch.relu(x + 1.0), torch.tanh(y) * 2.0, z], dim=1)


class SharedSource(nn.Module):
    """The first source is also summed: it stays stored (the sum reads it too)."""

    def forward(self, x, y):
        a = torch.relu(x - 0.5)
        return torch.cat([a, torch.sigmoid(y)], dim=2), a.sum()


class ReturnedSource(nn.Module):
    def forward(self, x, y):
        a = torch.exp(x * 0.1)
        return torch.cat([a, y.abs()], dim=0), a


class SameInput(nn.Module):
    """Two chains of one input and the input itself: the kernel reads x three times over."""

    def forward(self, x, y):
        return torch.cat([torch.relu(x), torch.sigmoid(x) * y, x], 1)


class Stacked(nn.Module):
    """stack takes its sources as cat does."""

    def forward(self, x, y):
        return torch.stack([x * 2.0 + 1.0, torch.tanh(y)], dim=1)


def _cat_group(plan):
    (group,) = [g for g in plan.groups if g.kind == "kernel" and ("cat of" in g.note or "stack of" in g.note)]
    return group


def _inputs(*shapes):
    return [torch.randn(*s) for s in shapes]


CASES = [
    (Branches, [(2, 3, 4, 5), (2, 6, 4, 5), (2, 1, 4, 5)], 2),
    (SharedSource, [(3, 4, 5), (3, 4, 7)], 1),
    (ReturnedSource, [(4, 6), (5, 6)], 1),
    (SameInput, [(2, 3, 4), (2, 3, 4)], 2),
    (Stacked, [(3, 5), (3, 5)], 2),
]


@pytest.mark.parametrize("make,shapes,computed", CASES, ids=[c[0].__name__ for c in CASES])
def test_which_sources_are_computed_as_read(make, shapes, computed):
    torch.manual_seed(0)
    plan = plan_of(make(), _inputs(*shapes))
    taken = _cat_group(plan).detail.get("sources", [])
    assert len(taken) == computed, taken
    # A source taken is never stored: no pointwise kernel writes it.
    stored = {o for g in plan.groups if g.kind == "pointwise" for o in g.outputs}
    assert not stored & {s["node"] for s in taken}


def test_off_switch_stores_them(monkeypatch):
    monkeypatch.setenv(planner.CAT_SOURCES_ENV, "0")
    plan = plan_of(Branches(), _inputs((2, 3, 4, 5), (2, 6, 4, 5), (2, 1, 4, 5)))
    assert "sources" not in _cat_group(plan).detail
    assert any(g.kind == "pointwise" for g in plan.groups)


@needs_nvcc
@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.parametrize("make,shapes,computed", CASES, ids=[c[0].__name__ for c in CASES])
def test_candidates_match_pytorch(tmp_path, make, shapes, computed):
    torch.manual_seed(1)
    module = make()
    args = _inputs(*shapes)
    cand = builtin_candidate(module, args)
    assert cand.files["fused_kernels.cu"].count("computed as read") >= computed
    new, _ = load_model_new(cand, module, tmp_path)
    with torch.no_grad():
        for given in (args, _inputs(*shapes)):
            got, want = new(*given), module(*given)
            for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,),
                            strict=True):
                torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)


class Fire(nn.Module):
    """SqueezeNet's fire module in small: two convolutions' biases and ReLUs computed by the cat."""

    def __init__(self):
        super().__init__()
        self.squeeze = nn.Conv2d(3, 6, 1)
        self.e1 = nn.Conv2d(6, 16, 1)
        self.e3 = nn.Conv2d(6, 16, 3, padding=1)

    def forward(self, x):
        x = torch.relu(self.squeeze(x))
        return torch.cat([torch.relu(self.e1(x)), torch.relu(self.e3(x))], 1)


@needs_nvcc
@pytest.mark.usefixtures("isolated_cache")
def test_a_fire_module_builds_clean_for_sm90(tmp_path):
    """The device build (loaders passed by value to the cat's kernel) compiles for sm_90 without a
    warning."""
    from conftest import assert_builds_clean_for_sm90
    from test_emit_conv import cudnn_include

    include = cudnn_include()
    if include is None:
        pytest.skip("no cudnn.h: set STITCHCUDA_EXTRA_INCLUDE to a folder with cuDNN's headers")
    cand = builtin_candidate(Fire(), [torch.randn(2, 3, 16, 16)], host=False)
    assert "computed as read" in cand.files["fused_kernels.cu"]
    assert_builds_clean_for_sm90(cand, tmp_path / "fire.cu", include)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.usefixtures("isolated_cache")
def test_on_the_gpu_a_fire_module_matches(tmp_path, monkeypatch):
    """SqueezeNet's fire module in small: two convolutions' biases and ReLUs computed by the cat."""
    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    torch.manual_seed(2)
    module = Fire()
    x = torch.randn(4, 3, 32, 32)
    cand = builtin_candidate(module, [x], host=False)
    assert "computed as read" in cand.files["fused_kernels.cu"]
    module = module.cuda()
    new, _ = load_model_new(cand, module, tmp_path)
    new = new.cuda()
    with torch.no_grad():
        x = x.cuda()
        want = module(x)
        for _ in range(2):  # (the first call plans the convolutions)
            got = new(x)
    torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2 * want.abs().max().item())
