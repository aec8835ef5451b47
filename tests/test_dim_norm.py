"""A norm written by hand over one dim that is not the last (NAFNet's and SAM's LayerNorm2d, ConvNeXt's
channels_first LayerNorm) becomes one sc_dim_norm kernel (agents/plan/dim_norm.py, emit_norm's fused
shape a thread a column): its forms are recognised, it holds back where the pieces are read elsewhere,
and the candidate matches the module on the CPU through its host entries, with nvcc."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from conftest import builtin_candidate, load_model_new, needs_nvcc

from stitchcuda.agents import graph
from stitchcuda.agents.coder.batch import analyse
from stitchcuda.agents.plan import dim_norm, planner


class LayerNorm2d(nn.Module):
    """As NAFNet, SAM and ConvNeXt write it: the mean over channels, the biased variance, the affine."""

    def __init__(self, c: int, form: str = "pow", eps: float = 1e-6):
        super().__init__()
        self.weight, self.bias = nn.Parameter(torch.randn(c)), nn.Parameter(torch.randn(c))
        self.form, self.eps = form, eps

    def forward(self, x):
        mu = x.mean(1, keepdim=True)
        if self.form == "pow":  # NAFNet's: x - mu written twice
            var = (x - mu).pow(2).mean(1, keepdim=True)
            y = (x - mu) / (var + self.eps).sqrt()
        elif self.form == "square":  # one deviation, squared by a product, scaled by rsqrt
            d = x - mu
            var = (d * d).mean(1, keepdim=True)
            y = d * torch.rsqrt(var + self.eps)
        else:  # "rsqrt-first": the rsqrt on the left of the product
            d = x - mu
            y = torch.rsqrt(d.pow(2).mean(1, keepdim=True) + self.eps) * d
        return self.weight[:, None, None] * y + self.bias[:, None, None]


class MiddleDim(nn.Module):
    """The same norm over dim 2 of a 4-D tensor, no affine, then a GELU."""

    def forward(self, x):
        mu = x.mean(2, keepdim=True)
        var = (x - mu).pow(2).mean(2, keepdim=True)
        return torch.nn.functional.gelu((x - mu) / (var + 1e-5).sqrt())


class MeanReturned(nn.Module):
    """The mean is also returned: the chain stays as written."""

    def forward(self, x):
        mu = x.mean(1, keepdim=True)
        var = (x - mu).pow(2).mean(1, keepdim=True)
        return (x - mu) / (var + 1e-6).sqrt(), mu


class LastDim(nn.Module):
    """Over the last dim: not this rewrite's (a row norm reads its row contiguous already)."""

    def forward(self, x):
        mu = x.mean(-1, keepdim=True)
        var = (x - mu).pow(2).mean(-1, keepdim=True)
        return (x - mu) / (var + 1e-6).sqrt()


def _plan(module: nn.Module, x: torch.Tensor):
    return planner.plan_graph(graph.trace_module(module, [x]))


def _norms(plan) -> list:
    return [g for g in plan.groups if g.kind == "kernel" and g.note.startswith(dim_norm.OP)]


FUSED = [
    ("pow", lambda: LayerNorm2d(16, "pow"), (2, 16, 9, 11)),
    ("square", lambda: LayerNorm2d(16, "square"), (2, 16, 9, 11)),
    ("rsqrt-first", lambda: LayerNorm2d(24, "rsqrt-first"), (3, 24, 5, 7)),
    ("middle dim", MiddleDim, (2, 5, 12, 13)),
]


@pytest.mark.parametrize("case", FUSED, ids=[c[0] for c in FUSED])
def test_the_norm_is_one_kernel_with_its_affine_as_epilogue(case):
    _, make, shape = case
    plan = _plan(make(), torch.randn(shape))
    assert plan.supported, plan.unsupported
    (norm,) = _norms(plan)
    assert "a thread a column" in norm.note and "epilogue" in norm.note, norm.note
    # Nothing else is left: no reductions, and the affine (or the GELU) is the norm's epilogue.
    assert [g.kind for g in plan.groups] == ["kernel"], [g.note for g in plan.groups]


def test_it_holds_back_where_the_pieces_are_read_or_the_dim_is_last(monkeypatch):
    for module, shape in ((MeanReturned(), (2, 8, 4, 4)), (LastDim(), (4, 8, 32)),
                          (LayerNorm2d(dim_norm.COLUMN_ITEMS + 1), (1, dim_norm.COLUMN_ITEMS + 1, 4, 4))):
        plan = _plan(module, torch.randn(shape))
        assert plan.supported and not _norms(plan), [g.note for g in plan.groups]
    monkeypatch.setenv(dim_norm.DIM_NORM_ENV, "0")
    assert not _norms(_plan(LayerNorm2d(16), torch.randn(2, 16, 4, 4)))


def test_samples_stay_apart_unless_the_batch_is_the_normalised_dim():
    plan = _plan(LayerNorm2d(16), torch.randn(2, 16, 4, 4))
    assert analyse(plan.graph).dynamic


@needs_nvcc
@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.parametrize("case", FUSED, ids=[c[0] for c in FUSED])
def test_matches_the_module_on_the_host(tmp_path, case):
    _, make, shape = case
    torch.manual_seed(0)
    module, x = make(), torch.randn(shape)
    cand = builtin_candidate(module, [x])
    assert "a thread a column" in " ".join(cand.notes) or "sc_dim_norm" in cand.files["fused_kernels.cu"]
    new, _ = load_model_new(cand, module, tmp_path)
    with torch.no_grad():
        for given in (x, torch.randn(shape) * 3 + 5):  # a second set, off-centre: the shift's rounding
            torch.testing.assert_close(new(given), module(given), rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("case", FUSED, ids=[c[0] for c in FUSED])
def test_on_the_gpu_matches_the_module(tmp_path, monkeypatch, case):
    """The device build: a thread a column, its loads neighbouring columns' (NAFNet's 64 channels of
    128 x 128 pixels as well as the small cases)."""
    from conftest import outputs_on_the_gpu

    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    _, make, shape = case
    torch.manual_seed(1)
    for size in (shape, (*shape[:2], 128, 128) if len(shape) == 4 else shape):
        module, x = make(), torch.randn(size) * 2 + 1
        got, want = outputs_on_the_gpu(builtin_candidate(module, [x], host=False), module, [x], tmp_path / str(size[-1]))
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
