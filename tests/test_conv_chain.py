"""A convolution that reads an earlier convolution's channels-last tail takes it as it is stored
(planner.channels_last_convs, `input_channels_last`; emit_conv's x_nhwc; conv.cuh: cuDNN's NHWC
plan reads the caller's buffer, else each run copies it back to NCHW): which graphs chain, that the
rewritten graph still computes the module (its reference math on CPU tensors), that the candidates
build for sm_90 with cuDNN, and on a GPU that they match the module with the NHWC plan and with
the copy back."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import assert_builds_clean_for_sm90, builtin_candidate, load_model_new, needs_nvcc
from test_conv_channels_last import logged_conv_plans, planned_reference
from test_emit_conv import cudnn_include

from stitchcuda.agents import graph
from stitchcuda.agents.plan import planner

pytestmark = pytest.mark.usefixtures("isolated_cache")


class Chain2d(nn.Module):
    """VGG-like: conv, relu, conv, relu, pool, conv, relu, then a view and a linear layer."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1)
        self.c3 = nn.Conv2d(8, 16, 3)
        self.fc = nn.Linear(16 * 3 * 3, 5)

    def forward(self, x):
        x = torch.relu(self.c2(torch.relu(self.c1(x))))
        x = torch.relu(self.c3(F.max_pool2d(x, 2)))
        return self.fc(torch.flatten(x, 1))


class Chain3d(nn.Module):
    """Conv3d, batch norm, relu, then a strided Conv3d whose result is returned."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv3d(4, 6, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm3d(6)
        self.c2 = nn.Conv3d(6, 5, 3, stride=2)

    def forward(self, x):
        return self.c2(torch.relu(self.bn(self.c1(x))))


class Branches(nn.Module):
    """One tail read by two convolutions and a scaled copy of it, all three summed after (a
    SqueezeNet-like fan-out): the sum reads the second convolutions' results NCHW."""

    def __init__(self) -> None:
        super().__init__()
        self.squeeze = nn.Conv2d(6, 4, 1)
        self.a = nn.Conv2d(4, 6, 1)
        self.b = nn.Conv2d(4, 6, 3, padding=1)

    def forward(self, x):
        s = torch.relu(self.squeeze(x))
        return torch.cat([self.a(s), self.b(s)], 1)


class UpChain(nn.Module):
    """A U-Net decoder's shape: a convolution's tail read by a transposed convolution (cuDNN's
    backward-data reads it as dy, channels-last), whose own tail a second, padded one reads."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.up1 = nn.ConvTranspose2d(8, 6, 3, stride=2, padding=1, output_padding=1)
        self.up2 = nn.ConvTranspose2d(6, 4, 2, stride=2)

    def forward(self, x):
        return self.up2(torch.relu(self.up1(torch.relu(self.c1(x)))))


CHAINS = [
    (Chain2d, [torch.randn(2, 3, 10, 10)], ["c1", "c2", "c3"]),
    (Chain3d, [torch.randn(2, 4, 5, 6, 7)], ["c1", "c2"]),
    (Branches, [torch.randn(2, 6, 7, 9)], ["squeeze", "a", "b"]),
    (UpChain, [torch.randn(2, 3, 5, 7)], ["c1", "up1", "up2"]),
]


def _convs(plan) -> list[dict]:
    return [n for n in plan.graph if n["op"] == "convolution"]


@pytest.mark.parametrize(("make", "inputs", "names"), CHAINS, ids=[m.__name__ for m, _, _ in CHAINS])
def test_a_convolution_reading_a_channels_last_tail_takes_it_channels_last(make, inputs, names):
    plan = planner.plan_graph(graph.trace_module(make(), inputs))
    assert plan.supported, plan.unsupported
    convs = _convs(plan)
    assert len(convs) == len(names)
    first, *after = convs
    assert first["args"].get("channels_last") and not first["args"].get("input_channels_last")
    assert all(c["args"].get("input_channels_last") for c in after), [c["args"] for c in after]
    notes = [g.note for g in plan.groups if g.note.startswith("conv")]
    assert sum("(channels-last input)" in n for n in notes) == len(after), notes


def test_chain2d_keeps_the_layout_to_the_last_convolution_and_no_further():
    plan = planner.plan_graph(graph.trace_module(Chain2d(), [torch.randn(2, 3, 10, 10)]))
    c1, c2, c3 = _convs(plan)
    # c2's result goes on channels-last (relu, pool, into c3); c3's is read through a view: NCHW.
    assert c2["args"].get("channels_last") and not c3["args"].get("channels_last")
    assert c3["shape"] == [2, 16, 3, 3]


def test_a_depthwise_convolution_after_a_tail_ends_the_layout_before_it():
    """Our depthwise kernel reads NCHW: the convolution before it keeps its result NCHW."""

    class ThenDepthwise(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c1 = nn.Conv2d(3, 8, 1)
            self.dw = nn.Conv2d(8, 8, 3, groups=8)

        def forward(self, x):
            return self.dw(torch.relu(self.c1(x)))

    plan = planner.plan_graph(graph.trace_module(ThenDepthwise(), [torch.randn(2, 3, 40, 70)]))
    c1, dw = _convs(plan)
    assert not c1["args"].get("channels_last") and not dw["args"].get("input_channels_last")


@pytest.mark.parametrize("groups", [(1, 2), (2, 1)], ids=["grouped reader", "grouped producer"])
def test_grouped_convolutions_stay_out_of_chains(groups):
    """A chain link joins dense convolutions only: with grouped ones in, MobileNetV1 and
    EfficientNetB1 ran slower (planner._reads_channels_last)."""

    class Pair(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c1 = nn.Conv2d(4, 8, 3, groups=groups[0])
            self.c2 = nn.Conv2d(8, 8, 3, groups=groups[1])

        def forward(self, x):
            return self.c2(torch.relu(self.c1(x)))

    plan = planner.plan_graph(graph.trace_module(Pair(), [torch.randn(2, 4, 12, 12)]))
    c1, c2 = _convs(plan)
    assert not c2["args"].get("input_channels_last")


def test_a_convolution_reading_two_tail_values_stays_out_of_the_chain():
    """One tail value as the input, another as the weight (a dynamic weight): the weight would be
    stored channels-last while the convolution reads it NCHW, so the tail ends: all NCHW."""

    class DynamicWeight(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c1 = nn.Conv2d(3, 4, 3, padding=1, bias=False)

        def forward(self, x):
            y = self.c1(x)
            w2 = y * 2.0
            return F.conv2d(torch.relu(y), w2)

    torch.manual_seed(0)
    module, inputs = DynamicWeight(), [torch.randn(2, 3, 4, 4)]
    plan = planner.plan_graph(graph.trace_module(module, inputs))
    assert not any(c["args"].get("input_channels_last") for c in _convs(plan))
    assert not _convs(plan)[0]["args"].get("channels_last")
    (stored,), (view,) = planned_reference(module, inputs)
    got = stored if view is None else stored.permute(*view["args"]["dims"])
    with torch.no_grad():
        torch.testing.assert_close(got, module(*inputs), rtol=1e-5, atol=1e-5)


def test_a_reader_past_int32_elements_ends_the_tail_instead_of_failing_the_plan():
    """The reading convolution's sample (16 x 8192 x 16384) is past int32 element counts, its
    producer's (8 channels) is not: the plan says which convolution it cannot take, no exception."""

    class Pair(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c1 = nn.Conv2d(3, 8, 1, bias=False)
            self.c2 = nn.Conv2d(8, 16, 1, bias=False)

        def forward(self, x):
            return self.c2(torch.relu(self.c1(x)))

    traced = graph.trace_module(Pair(), [torch.randn(1, 3, 4, 4)])
    for n in traced:  # the same graph over 8192 x 16384 pixels (tracing that would take 12 GB)
        shape = n.get("shape")
        if shape and len(shape) == 4 and shape[2] == 4:
            n["shape"], n["stride"] = [shape[0], shape[1], 8192, 16384], graph.contiguous_strides(
                [shape[0], shape[1], 8192, 16384])
    convs = [n for n in planner.channels_last_convs([dict(n) for n in traced]) if n["op"] == "convolution"]
    assert not any(c["args"].get("input_channels_last") for c in convs)


def test_the_chain_can_be_turned_off(monkeypatch):
    monkeypatch.setenv(planner.CONV_CHAIN_ENV, "0")
    plan = planner.plan_graph(graph.trace_module(Chain2d(), [torch.randn(2, 3, 10, 10)]))
    assert not any(c["args"].get("input_channels_last") for c in _convs(plan))
    # c1's tail ends at c2 then: c1 stays NCHW; only c2's own tail (relu, pool, into c3) is none either.
    assert not any(c["args"].get("channels_last") for c in _convs(plan))


@pytest.mark.parametrize(("make", "inputs", "names"), CHAINS, ids=[m.__name__ for m, _, _ in CHAINS])
def test_the_rewritten_graph_still_computes_the_module(make, inputs, names):
    """The plan's graph rendered as aten calls (a channels-last input moved back for the reference's
    convolution) and run on CPU tensors gives the module's output."""
    torch.manual_seed(1)
    module = make()
    (stored,), (view,) = planned_reference(module, inputs)
    got = stored if view is None else stored.permute(*view["args"]["dims"])
    with torch.no_grad():
        want = module(*inputs)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.skipif(cudnn_include() is None, reason="no cudnn.h (set STITCHCUDA_EXTRA_INCLUDE to a folder with it)")
def test_chained_candidates_build_for_sm90(tmp_path):
    for k, (make, inputs, _) in enumerate(CHAINS):
        cand = builtin_candidate(make(), inputs, host=False)
        assert "x_nhwc" in cand.files["fused_kernels.cu"]
        assert_builds_clean_for_sm90(cand, tmp_path / f"c{k}.cu", cudnn_include())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("nhwc_plan", ["auto", "0"])
@pytest.mark.parametrize(("make", "inputs", "names"), CHAINS, ids=[m.__name__ for m, _, _ in CHAINS])
def test_on_the_gpu_chained_candidates_match_the_module(make, inputs, names, nhwc_plan, tmp_path, monkeypatch, capfd):
    """With the faster of cuDNN's NHWC plan and the copy back to NCHW per convolution (auto) and
    without NHWC plans (=0: the input copied back to NCHW on each run), the candidate matches the
    module, and each convolution after the first says which it runs."""
    logged_conv_plans(monkeypatch, nhwc_plan)
    torch.manual_seed(2)
    module = make().eval() if make is not Chain3d else make()
    big = [torch.randn(t.shape[0] * 4, *t.shape[1:]) for t in inputs]
    cand = builtin_candidate(module, big, host=False)
    module = module.cuda()
    new, _ = load_model_new(cand, module, tmp_path / f"{make.__name__}{nhwc_plan}")
    new = new.cuda()
    args = [t.cuda() for t in big]
    with torch.no_grad():
        for _ in range(3):  # the first call sets the plans up; the later ones run them
            got = new(*args)
        want = module(*args)
    torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2 * want.abs().max().item())
    said = [ln for ln in capfd.readouterr().err.splitlines() if ": channels-last input " in ln]
    assert len(said) == len(names) - 1, said  # one line per convolution after the first
    if nhwc_plan == "0":
        assert all("copied back to NCHW" in ln for ln in said), said
