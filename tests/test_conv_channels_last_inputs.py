"""A convolution whose input is a channels-last view of a result of forward keeps that layout, in
and out (agents/plan/channels_last_inputs.py): which graphs take it (the plan), that the rewritten
graph still computes the module (its reference math run on CPU tensors), that the candidate builds
for sm_90 with cuDNN where its headers are, and on a GPU that the candidate matches the module."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from conftest import (
    assert_builds_clean_for_sm90,
    builtin_candidate,
    needs_nvcc,
    outputs_on_the_gpu,
    planned_on_the_cpu,
)
from test_conv_channels_last import planned_reference
from test_emit_conv import cudnn_include

from stitchcuda.agents import graph
from stitchcuda.agents.coder import kernels
from stitchcuda.agents.plan import channels_last_inputs, planner

pytestmark = pytest.mark.usefixtures("isolated_cache")


class MixFFN(nn.Module):
    """PVTv2's and SegFormer's Mix-FFN: fc1's tokens viewed as an image without .contiguous(), a 3x3
    convolution (depthwise by default), GELU on the tokens it gives back, fc2."""

    def __init__(self, c: int = 8, hidden: int = 16, hw: int = 6, groups: int | None = None, bias: bool = True):
        super().__init__()
        self.hw = hw
        self.fc1 = nn.Linear(c, hidden)
        self.conv = nn.Conv2d(hidden, hidden, 3, 1, 1, groups=groups or hidden, bias=bias)
        self.fc2 = nn.Linear(hidden, c)

    def forward(self, x):
        n, t, c = x.shape
        y = self.conv(self.fc1(x).transpose(1, 2).view(n, -1, self.hw, self.hw))
        return self.fc2(nn.functional.gelu(y.flatten(2).transpose(1, 2)))


class ReducedKeys(nn.Module):
    """PVT's spatial reduction: the tokens permuted and reshaped to an image, a strided 3x3
    convolution, back to tokens and layer-normed (an overlapping window: no patch GEMM takes it)."""

    def __init__(self, c: int = 8, hw: int = 8):
        super().__init__()
        self.hw = hw
        self.q = nn.Linear(c, c)
        self.sr = nn.Conv2d(c, c, 3, 2, 1)
        self.norm = nn.LayerNorm(c)

    def forward(self, x):
        n, t, c = x.shape
        y = self.q(x).permute(0, 2, 1).reshape(n, c, self.hw, self.hw)
        return self.norm(self.sr(y).reshape(n, c, -1).permute(0, 2, 1))


class OnTheInput(nn.Module):
    """The convolution reads forward's own input, permuted: that layout is the caller's."""

    def __init__(self, c: int = 8):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1, groups=c)

    def forward(self, x):
        return torch.relu(self.conv(x.permute(0, 3, 1, 2)))


class ScaledDepthwise(nn.Module):
    """Every kernel with a CPU entry: an [N, H, W, C] result of forward (a scaling) viewed as NCHW, a
    depthwise convolution (depthwise_nhwc.cuh), its result read back as [N, H, W, C] by a ReLU."""

    def __init__(self, c: int = 8, k: int = 3, stride: int = 1, padding: int = 1, dilation: int = 1,
                 tokens: bool = False):
        super().__init__()
        self.conv = nn.Conv2d(c, c, k, stride, padding, dilation, groups=c)
        self.tokens = tokens

    def forward(self, x):
        y = self.conv((x * 2.0).permute(0, 3, 1, 2))
        # As tokens ([N, H*W, C], another view of the same elements) or as [N, H, W, C].
        return torch.relu(y.flatten(2).transpose(1, 2) if self.tokens else y.permute(0, 2, 3, 1))


class NormedAfter(nn.Module):
    """PointNet++'s SA: a 1x1 convolution on a permuted result, read by a training batch norm as NCHW."""

    def __init__(self, c: int = 8):
        super().__init__()
        self.fc = nn.Linear(c, c)
        self.conv = nn.Conv2d(c, 16, 1)
        self.bn = nn.BatchNorm2d(16)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(self.fc(x).permute(0, 3, 1, 2))))


TAKEN = [(MixFFN, (2, 36, 8)), (lambda: MixFFN(groups=1, bias=False), (2, 36, 8)), (ReducedKeys, (2, 64, 8)),
         (ScaledDepthwise, (2, 7, 9, 8))]
IDS = ["depthwise", "dense-no-bias", "strided", "depthwise-alone"]
# The depthwise kernel's shapes: padding, stride, dilation, channels no multiple of 4 (one a thread), a
# 7x7 filter over more channels than one block's 128 (a partial second block of channels).
DEPTHWISE = [((8, 3, 1, 1, 1), (2, 7, 9, 8)), ((12, 5, 2, 2, 1), (1, 11, 10, 12)), ((6, 3, 1, 2, 2), (2, 8, 8, 6)),
             ((5, 3, 2, 0, 1), (3, 9, 7, 5)), ((8, 3, 1, 1, 1, True), (2, 6, 5, 8)), ((132, 7, 1, 3, 1), (1, 9, 11, 132))]


def _convs(plan) -> list[dict]:
    return [n for n in plan.graph if n["op"] == "convolution"]


@pytest.mark.parametrize(("make", "shape"), TAKEN, ids=IDS)
def test_the_convolution_reads_and_writes_the_tokens_storage_as_it_is(make, shape):
    plan = planner.plan_graph(graph.trace_module(make(), [torch.randn(shape)]))
    assert plan.supported, plan.unsupported
    (conv,) = _convs(plan)
    assert conv["args"]["channels_last"] and conv["args"]["input_channels_last"] and conv["args"]["bias"] is None
    # Nothing is planned to lay the tokens out as NCHW, or the result back as tokens: no copy of a
    # 4-D view, and no kernel given a contiguous copy of an operand.
    nodes = graph.by_name(plan.graph)
    assert not [n for g in plan.groups for n in g.nodes if nodes[n]["op"] == "clone" and len(nodes[n]["shape"]) == 4]
    assert not [g.detail["roots"] for g in plan.groups if g.detail.get("roots")]
    # The exact rungs keep the NCHW plan.
    assert not any(n["args"].get("input_channels_last") for n in _convs(plan.exact))


@pytest.mark.parametrize(("make", "shape"), TAKEN, ids=IDS)
def test_the_rewritten_graph_still_computes_the_module(make, shape):
    torch.manual_seed(1)
    module = make()
    x = torch.randn(shape)
    (stored,), (view,) = planned_reference(module, [x])
    got = stored if view is None else stored.view(view["shape"])
    torch.testing.assert_close(got, module(x).detach(), rtol=1e-5, atol=1e-5)


def test_a_result_a_kernel_reads_as_nchw_is_left_as_it_was():
    traced = graph.trace_module(NormedAfter(), [torch.randn(2, 5, 6, 8)])
    assert not channels_last_inputs.kept_layout_convs(traced)


@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.parametrize(("args", "shape"), DEPTHWISE, ids=[f"c{a[0]}k{a[1]}s{a[2]}p{a[3]}d{a[4]}{'-tokens' if a[5:] else ''}" for a, _ in DEPTHWISE])
def test_the_channels_last_depthwise_kernel_matches_pytorch_on_the_cpu(tmp_path, args, shape):
    torch.manual_seed(3)
    module = ScaledDepthwise(*args)
    x = torch.randn(shape)
    plan, new = planned_on_the_cpu(module, [x], tmp_path)
    notes = " ".join(g.note for g in plan.groups)
    # The bias and ReLU computed as it stores, whichever view of its elements they read.
    assert "direct over channels-last storage" in notes and "epilogue add -> relu" in notes, notes
    with torch.no_grad():
        for given in (x, torch.randn(shape) * 3 - 1):
            torch.testing.assert_close(new(given), module(given), rtol=1e-5, atol=1e-5)


def test_a_convolution_on_forwards_own_input_is_left_as_it_was():
    traced = graph.trace_module(OnTheInput(), [torch.randn(2, 6, 6, 8)])
    assert not channels_last_inputs.kept_layout_convs(traced)
    assert not any(n["args"].get("input_channels_last") for n in _convs(planner.plan_graph(traced)))


@pytest.mark.parametrize("switch", [channels_last_inputs.CHANNELS_LAST_INPUTS_ENV, planner.CONV_TAIL_ENV])
def test_the_rewrite_can_be_turned_off(monkeypatch, switch):
    monkeypatch.setenv(switch, "0")
    plan = planner.plan_graph(graph.trace_module(MixFFN(), [torch.randn(2, 36, 8)]))
    assert plan.supported and not any(n["args"].get("input_channels_last") for n in _convs(plan))


@pytest.mark.nvcc
@pytest.mark.skipif(cudnn_include() is None, reason="no cudnn.h (set STITCHCUDA_EXTRA_INCLUDE to a folder with it)")
def test_the_candidates_build_for_sm90(tmp_path):
    for k, (make, shape) in enumerate(TAKEN):
        cand = builtin_candidate(make(), [torch.randn(shape)], host=False)
        assert_builds_clean_for_sm90(cand, tmp_path / f"c{k}.cu", cudnn_include())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("precise", [kernels.PRECISE_TF32, kernels.PRECISE_SPLIT], ids=["tf32", "exact"])
@pytest.mark.parametrize(("make", "shape"), TAKEN, ids=IDS)
def test_on_the_gpu_the_candidate_matches_the_module(tmp_path, monkeypatch, make, shape, precise):
    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    torch.manual_seed(2)
    module = make()
    x = torch.randn(shape)
    cand = builtin_candidate(module, [x], host=False, precise=precise)
    exact = precise >= kernels.PRECISE_SPLIT
    # The module in full fp32 (cuDNN without TF32 too); the TF32 candidate within TF32's tolerance of it.
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        got, want = outputs_on_the_gpu(cand, module, [x], tmp_path)
    tol = 1e-4 if exact else 1e-2
    torch.testing.assert_close(got, want, rtol=tol, atol=tol * want.abs().max().item())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize(("args", "shape"), DEPTHWISE, ids=[f"c{a[0]}k{a[1]}s{a[2]}p{a[3]}d{a[4]}{'-tokens' if a[5:] else ''}" for a, _ in DEPTHWISE])
def test_on_the_gpu_the_channels_last_depthwise_kernel_matches_pytorch(tmp_path, monkeypatch, args, shape):
    """The device kernel's float4 and one-channel paths, partial blocks of channels, 7x7 taps (fp32 FMA
    on both sides: no TF32 in a depthwise convolution)."""
    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    torch.manual_seed(4)
    module = ScaledDepthwise(*args)
    x = torch.randn(shape)
    cand = builtin_candidate(module, [x], host=False)
    assert "sc_dwn_run<" in cand.files["fused_kernels.cu"]
    got, want = outputs_on_the_gpu(cand, module, [x], tmp_path)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
