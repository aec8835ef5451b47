"""Softmax (and log_softmax) computing the pointwise chain after it as it stores its result, and
storing the chain's end in its place (planner._take_epilogues, emit_reduce's `ep`): the softmax
is never written for a pointwise pass to read back. Level 2's 38 (softmax, then a scale through a
reshape) had that pass. Whole candidates run on CPU tensors through the host entries, which run
the same templates; the plans are checked for what was stored."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from conftest import (
    assert_builds_clean_for_sm90,
    builtin_candidate,
    load_model_new,
    needs_nvcc,
    on_the_gpu,
    plan_of,
)
from test_emit_conv import cudnn_include

from stitchcuda.agents.coder import builtin as coder_builtin
from stitchcuda.agents.plan import planner

pytestmark = pytest.mark.usefixtures("isolated_cache")


# Where every reader of an fp32 softmax is pointwise, the planner already splits it into a
# logsumexp and a pointwise exp (planner.split_softmax); a reader through a reshape, or a half
# precision softmax, keeps the softmax kernel, which is where the epilogue goes.
class RowsReshapeScale(nn.Module):
    """Softmax over a row of flattened channels and pixels, a per-channel scale after the reshape back."""

    def __init__(self, channels=3):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(channels, 1, 1))

    def forward(self, x):
        b = x.shape[0]
        # x again in the chain: the epilogue reads its own input at every element (batch included).
        return torch.softmax(x.view(b, -1), dim=-1).view(x.shape) * self.scale + 0.5 * x


class ChannelsSigmoid(nn.Module):
    """Softmax over channels of the flattened pixels (a column layout: inner > 1), then a channel
    bias and a sigmoid after the reshape back."""

    def __init__(self, channels=5):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(channels, 1, 1))

    def forward(self, x):
        b, c, h, w = x.shape
        return torch.sigmoid(torch.softmax(x.view(b, c, h * w), dim=1).view(b, c, h, w) + self.bias)


class LogSoftmaxAffine(nn.Module):
    def forward(self, x):
        return torch.log_softmax(x.view(x.shape[0], -1), dim=-1).view(x.shape) * 2.0 - 1.0


class ClampSoftmaxReshapeScale(nn.Module):
    """A prologue (bias, clamp) before a softmax over flattened spatial dims, and a scale after it,
    read through the reshape back (as level 2's 38)."""

    def __init__(self, channels=4):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(channels, 1, 1, 1))
        self.scale = nn.Parameter(torch.randn(1, channels, 1, 1, 1))

    def forward(self, x):
        y = torch.clamp(x + self.bias, 0.0, 1.0)
        b, c, d, h, w = y.shape
        y = torch.softmax(y.view(b, c, -1), dim=2).view(b, c, d, h, w)
        return y * self.scale


class LongRows(nn.Module):
    """Rows longer than registers hold: the two-pass kernel, vector loads."""

    def forward(self, x):
        return torch.tanh(torch.softmax(x.view(3, -1), dim=-1).view(x.shape) * 1000.0)


class HalfSoftmax(nn.Module):
    """fp16: no split into logsumexp (it would round before the exp); the epilogue stores fp16."""

    def forward(self, x):
        return torch.softmax(x, dim=-1) * 4.0 - 0.25


CASES = [
    (RowsReshapeScale(), [torch.randn(2, 3, 5, 8)]),
    (ChannelsSigmoid(), [torch.randn(3, 5, 7, 9)]),
    (LogSoftmaxAffine(), [torch.randn(4, 3, 11)]),
    (ClampSoftmaxReshapeScale(), [torch.rand(2, 4, 3, 5, 6) * 3.0 - 1.0]),
    (LongRows(), [torch.randn(3, 100, 200)]),
    (HalfSoftmax(), [torch.randn(6, 40).half()]),
]
IDS = ["rows-reshape-scale", "channels-sigmoid", "log-softmax", "prologue-reshape-scale", "long-rows", "half"]


_plan = plan_of


@pytest.mark.parametrize(("module", "inputs"), CASES, ids=IDS)
def test_the_softmax_stores_the_chains_end(module, inputs):
    p = _plan(module, inputs)
    (sm,) = [g for g in p.groups if g.kind == "kernel"]
    assert "epilogue" in sm.note, sm.note
    assert not [g for g in p.groups if g.kind == "pointwise"], [g.note for g in p.groups]


@pytest.mark.parametrize(("module", "inputs"), CASES[:2], ids=IDS[:2])
def test_the_epilogue_can_be_turned_off(monkeypatch, module, inputs):
    monkeypatch.setenv(planner.SOFTMAX_EPILOGUE_ENV, "0")
    p = _plan(module, inputs)
    assert [g.kind for g in p.groups] == ["kernel", "pointwise"]
    assert "epilogue" not in p.groups[0].note


class ChannelsBiasSigmoid(nn.Module):
    """Softmax over channels read only by pointwise work (level 2's 91): split into a logsumexp and
    a pointwise pass with SOFTMAX_WHOLE=0; kept whole, with the chain as its epilogue, by default."""

    def __init__(self, channels=6):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(channels, 1, 1))

    def forward(self, x):
        return torch.sigmoid((torch.softmax(x, dim=1) + self.bias) * 2.0)


def test_a_softmax_read_by_pointwise_work_is_kept_whole_unless_split(monkeypatch):
    module, inputs = ChannelsBiasSigmoid(), [torch.randn(2, 6, 5, 7)]
    monkeypatch.setenv(planner.SOFTMAX_WHOLE_ENV, "0")
    split = _plan(module, inputs)
    assert any("logsumexp" in g.note for g in split.groups), [g.note for g in split.groups]
    monkeypatch.delenv(planner.SOFTMAX_WHOLE_ENV)
    whole = _plan(module, inputs)
    (sm,) = [g for g in whole.groups if g.kind == "kernel"]
    assert "logsumexp" not in sm.note and "epilogue" in sm.note, sm.note
    assert not [g for g in whole.groups if g.kind == "pointwise"], [g.note for g in whole.groups]


@needs_nvcc
def test_a_softmax_kept_whole_matches_the_reference_on_cpu(tmp_path):
    module, inputs = ChannelsBiasSigmoid(), [torch.randn(2, 6, 5, 7)]
    new, _ = load_model_new(builtin_candidate(module, inputs), module, tmp_path)
    for x in (inputs[0], inputs[0] * 4.0):
        torch.testing.assert_close(new(x), module(x), rtol=1e-4, atol=1e-4)


class Returned(nn.Module):
    """The softmax is returned too: it is stored, and the chain after it runs on its own."""

    def forward(self, x):
        s = torch.softmax(x, dim=-1)
        return s, s * 3.0


def test_a_softmax_forward_returns_is_stored():
    p = _plan(Returned(), [torch.randn(4, 16).half()])
    assert [g.kind for g in p.groups] == ["kernel", "pointwise"]


@needs_nvcc
@pytest.mark.parametrize(("module", "inputs"), CASES, ids=IDS)
def test_candidates_match_the_reference_on_cpu(tmp_path, module, inputs):
    new, _ = load_model_new(builtin_candidate(module, inputs), module, tmp_path)
    for x in (inputs[0], inputs[0] * 4.0):
        ours, ref = new(x), module(x)
        # fp32: the host entry sums a row of 20000 in another order than torch (the Verifier's fp32
        # tolerance is 1e-4 too); fp16: the result's own rounding.
        tol = 2e-3 if x.dtype == torch.float16 else 1e-4
        torch.testing.assert_close(ours, ref, rtol=tol, atol=tol)


@needs_nvcc
def test_the_epilogues_build_for_sm90_without_warnings(tmp_path):
    include = cudnn_include()
    if include is None:
        pytest.skip("no cudnn.h (set STITCHCUDA_EXTRA_INCLUDE)")
    for k, (module, inputs) in enumerate(CASES):
        cand = coder_builtin.build_candidate(_plan(module, inputs), type(module), title="test", host=False)
        assert_builds_clean_for_sm90(cand, tmp_path / f"k{k}.cu", include)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize(("module", "inputs"), CASES, ids=IDS)
def test_candidates_match_the_reference_on_the_gpu(tmp_path, module, inputs):
    """The device kernels (rows in registers, two passes, columns, through a prologue), which the
    host entries above do not run."""
    (ours,), (ref,) = on_the_gpu(module, inputs, tmp_path)
    tol = 2e-3 if ref.dtype == torch.float16 else 1e-4
    torch.testing.assert_close(ours, ref, rtol=tol, atol=tol)


class SoftmaxOfSlice(nn.Module):
    """A softmax over a slice of a pointwise node's rows (the prologue's operand starts mid-row)."""

    def __init__(self, lo: int, hi: int):
        super().__init__()
        self.lo, self.hi = lo, hi

    def forward(self, x):
        return torch.softmax((torch.tanh(x) * 2 + 1)[:, self.lo:self.hi], -1)


@pytest.mark.parametrize("width,lo,hi,vec", [(134, 3, 131, 1), (130, 0, 128, 1), (136, 4, 132, 4)],
                         ids=["odd-offset", "odd-row-stride", "aligned"])
def test_a_softmax_prologue_reads_vectors_only_where_every_row_starts_aligned(width, lo, hi, vec):
    # The second pass reads the loader's vectors from each row's start: a slice's offset or an odd
    # row stride would misalign every one of them on the GPU (a review, 2026-12-01), which the host
    # entries, reading element by element, never show.
    p = plan_of(SoftmaxOfSlice(lo, hi), [torch.randn(64, width)])
    (note,) = [g.note for g in p.groups if "_softmax" in g.note]
    assert "prologue" in note and f"vec {vec}," in note
