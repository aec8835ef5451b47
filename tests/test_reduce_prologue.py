"""Reductions that compute their pointwise operand as they read it (a prologue), instead of a
pointwise kernel storing it first (issue 16: a convolution's scale before a min over channels was
a stored pass of its own). Whole candidates run on CPU tensors through the host entries, which run
the same per-element code as the GPU's kernels; the plans are checked for what was not stored."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn as nn
from conftest import needs_nvcc, on_the_gpu, plan_of

from stitchcuda.agents import graph
from stitchcuda.agents.coder import builtin as coder_builtin
from stitchcuda.agents.plan import planner
from stitchcuda.task import import_file

pytestmark = pytest.mark.usefixtures("isolated_cache")
_ids = itertools.count()


class ScaleMin(nn.Module):
    """Per-channel scale and shift, then a min over channels (the column layout)."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(6, 1, 1))
        self.shift = nn.Parameter(torch.randn(6, 1, 1))

    def forward(self, x):
        return torch.min(x * self.scale + self.shift, dim=1, keepdim=True)[0]


class RowsLse(nn.Module):
    """Activation and a broadcast bias, then logsumexp over the last dim (rows)."""

    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(37))

    def forward(self, x):
        return torch.logsumexp(torch.relu(x) + self.bias, dim=-1)


class LongRowSum(nn.Module):
    """One long row: the split plan (partial states in scratch, a second kernel merges them)."""

    def forward(self, x):
        return (torch.tanh(x) * 3.0).sum(dim=1)


class MeanOfPermuted(nn.Module):
    """The reduction reads a view of the pointwise node."""

    def forward(self, x):
        return (x * x - 1.0).permute(0, 2, 1).mean(dim=(0, 2))


class ArgmaxAndValue(nn.Module):
    def forward(self, x):
        v, i = torch.max(torch.sigmoid(x) * 2.0, dim=2)
        return v, i


class ChannelSoftmax(nn.Module):
    """A bias, then softmax over channels (columns: each thread a pixel, both passes down C)."""

    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(5, 1, 1))

    def forward(self, x):
        return torch.softmax(x + self.bias, dim=1)


class RowLogSoftmax(nn.Module):
    """An activation, then log_softmax over long rows (a group of threads per row)."""

    def forward(self, x):
        return torch.log_softmax(torch.nn.functional.gelu(x) * 1.5, dim=-1)


class SoftmaxThenPointwise(nn.Module):
    """Softmax read by pointwise ops becomes logsumexp plus exp(x - lse) in the next kernel
    (split_softmax): x's own pointwise ops are then computed in both, never stored."""

    def forward(self, x):
        return torch.sigmoid(torch.softmax(x * 3.0 - 1.0, dim=1) * 2.0)


class GeluGroupNorm(nn.Module):
    """An activation, then GroupNorm (a row in registers)."""

    def __init__(self, groups=2, channels=8):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels)

    def forward(self, x):
        return self.norm(torch.nn.functional.gelu(x + 0.5))


class ScaledLayerNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(48)

    def forward(self, x):
        return self.norm(x * 2.0 - 1.0)


class ReluBatchNorm2d(nn.Module):
    """Training-mode BatchNorm (statistics over N, H, W of each channel) after a ReLU."""

    def __init__(self):
        super().__init__()
        self.norm = nn.BatchNorm2d(6)

    def forward(self, x):
        return self.norm(torch.relu(x) * 3.0)


class ReluBatchNorm1d(nn.Module):
    """BatchNorm over [N, C]: the column shape."""

    def __init__(self):
        super().__init__()
        self.norm = nn.BatchNorm1d(40)

    def forward(self, x):
        return self.norm(torch.tanh(x))


class BiasReluMaxPool(nn.Module):
    """A bias and ReLU, then an overlapping 3x3 max-pool with padding (each window computes what it reads)."""

    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(4, 1, 1))

    def forward(self, x):
        return torch.nn.functional.max_pool2d(torch.relu(x + self.bias), 3, stride=2, padding=1)


class SigmoidAvgPool3d(nn.Module):
    def forward(self, x):
        return torch.nn.functional.avg_pool3d(torch.sigmoid(x) * 2.0, 2)


class TanhAdaptiveAvgPool(nn.Module):
    def forward(self, x):
        return torch.nn.functional.adaptive_avg_pool2d(torch.tanh(x), (3, 2))


class SharedOperand(nn.Module):
    """The pointwise node is also returned: it is stored once, and the reduction reads it."""

    def forward(self, x):
        y = x * 2.0 + 1.0
        return y, y.sum(dim=1)


CASES = [
    (ScaleMin(), [torch.randn(3, 6, 5, 7)]),
    (RowsLse(), [torch.randn(4, 9, 37)]),
    (LongRowSum(), [torch.randn(2, 300_000)]),
    (MeanOfPermuted(), [torch.randn(3, 5, 8)]),
    (ArgmaxAndValue(), [torch.randn(2, 3, 40)]),
    (ChannelSoftmax(), [torch.randn(2, 5, 4, 6)]),
    (RowLogSoftmax(), [torch.randn(3, 3000)]),
    (SoftmaxThenPointwise(), [torch.randn(4, 7, 9)]),
    (GeluGroupNorm(), [torch.randn(3, 8, 5, 6)]),
    (ScaledLayerNorm(), [torch.randn(5, 7, 48)]),
    (ReluBatchNorm2d(), [torch.randn(4, 6, 9, 10)]),
    (ReluBatchNorm1d(), [torch.randn(33, 40)]),
    (BiasReluMaxPool(), [torch.randn(2, 4, 11, 9)]),
    (SigmoidAvgPool3d(), [torch.randn(2, 3, 4, 6, 8)]),
    (TanhAdaptiveAvgPool(), [torch.randn(2, 3, 7, 5)]),
]
IDS = ["scale-min-cols", "lse-rows", "long-row-splits", "mean-of-view", "argmax", "softmax-cols", "log-softmax-rows",
       "softmax-split", "groupnorm-fused", "layernorm", "batchnorm2d", "batchnorm1d-column",
       "maxpool-overlapping", "avgpool3d", "adaptive-avgpool"]


_plan = plan_of


@pytest.mark.parametrize(("module", "inputs"), CASES, ids=IDS)
def test_the_operand_is_computed_where_it_is_read(module, inputs):
    p = _plan(module, inputs)
    nodes = graph.by_name(p.graph)
    reductions = [g for g in p.groups if g.kind == "kernel"]
    assert len(reductions) == 1 and "prologue" in reductions[0].note, [g.note for g in p.groups]
    # Nothing pointwise is stored before the reduction: its inputs are the module's own tensors,
    # and every pointwise kernel writes what forward returns.
    assert all(nodes[n]["op"] == "input" for n in reductions[0].inputs), reductions[0].inputs
    (output,) = [n for n in p.graph if n["op"] == "output"]
    returned = {graph.ref_name(v) for v in output["args"]["values"]}
    writes = {n["name"] for n in p.graph if n["op"] == "copy_"}  # a BatchNorm's step counter
    for g in p.groups:
        if g.kind == "pointwise":
            assert set(g.outputs) <= returned | writes, (g.outputs, returned)


def test_prologues_can_be_turned_off(monkeypatch):
    """STITCHCUDA_PROLOGUES=0: the pointwise node is stored and the reduction reads it, as before."""
    monkeypatch.setenv(planner.PROLOGUES_ENV, "0")
    p = _plan(ScaleMin(), [torch.randn(3, 6, 5, 7)])
    (red,) = [g for g in p.groups if g.kind == "kernel"]
    assert "prologue" not in red.note and not red.detail.get("prologue")
    assert [g.kind for g in p.groups] == ["pointwise", "kernel"]


def test_an_operand_something_else_reads_is_stored_once():
    p = _plan(SharedOperand(), [torch.randn(4, 5)])
    (red,) = [g for g in p.groups if g.kind == "kernel"]
    assert "prologue" not in red.note
    stored = {o for g in p.groups if g.kind == "pointwise" for o in g.outputs}
    assert set(red.inputs) <= stored


# 36,864 elements a row: the split shape. It computes its operand through a vector loader
# (tests/test_vec_prologue.py); with STITCHCUDA_VEC_PROLOGUE=0 it reads the operand stored.
SPLIT_NORM = (GeluGroupNorm(1, 8), [torch.randn(2, 8, 64, 72)])


def test_a_split_norm_reads_its_operand_stored_without_vector_loaders(monkeypatch):
    from stitchcuda.agents.coder import emit_norm

    monkeypatch.setenv(emit_norm.VEC_PROLOGUE_ENV, "0")
    p = _plan(*SPLIT_NORM)
    (norm,) = [g for g in p.groups if g.kind == "kernel"]
    assert "split" in norm.note and "prologue" not in norm.note and not norm.detail.get("prologue")
    stored = {o for g in p.groups if g.kind == "pointwise" for o in g.outputs}
    assert set(norm.inputs) & stored, (norm.inputs, stored)


@needs_nvcc
@pytest.mark.parametrize(("module", "inputs"), [*CASES, (SharedOperand(), [torch.randn(4, 5)]), SPLIT_NORM],
                         ids=[*IDS, "shared", "groupnorm-split"])
def test_candidates_match_the_reference_on_cpu(tmp_path, module, inputs):
    p = _plan(module, inputs)
    cand = coder_builtin.build_candidate(p, type(module), title="test", host=True)
    mod = import_file(cand.write(tmp_path), name=f"_prologue_{next(_ids)}")
    new = mod.ModelNew()
    new.load_state_dict(module.state_dict())
    ours, ref = new(*inputs), module(*inputs)
    ours = ours if isinstance(ours, tuple) else (ours,)
    ref = ref if isinstance(ref, tuple) else (ref,)
    for a, b in zip(ours, ref, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5 * float(b.detach().abs().max()) if b.is_floating_point() else 0)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize(("module", "inputs"), [*CASES, SPLIT_NORM], ids=[*IDS, "groupnorm-split"])
def test_candidates_match_the_reference_on_the_gpu(tmp_path, module, inputs):
    """The same candidates through the real launchers: rows, columns, splits and softmax on the device."""
    ours, ref = on_the_gpu(module, inputs, tmp_path)
    for a, b in zip(ours, ref, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4 * float(b.abs().max()) if b.is_floating_point() else 0)


class ScaleThenHalveBuffer(nn.Module):
    """forward reads a buffer in a pointwise chain, then halves it in place: the chain must see the
    old value, so the reduction may not compute it later (after the write)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.full((16,), 2.0))

    def forward(self, x):
        y = (x * self.scale).sum(1)
        self.scale.mul_(0.5)
        return y


def test_a_chain_reading_a_tensor_forward_writes_is_stored_first(tmp_path):
    import copy

    module, x = ScaleThenHalveBuffer(), torch.randn(5, 16)
    p = _plan(module, [x])
    assert not any(g.detail.get("prologue") for g in p.groups)
    from stitchcuda import runtime

    if runtime.find_nvcc():  # and run it, where nvcc can build it
        cand = coder_builtin.build_candidate(p, type(module), title="test", host=True)
        new = import_file(cand.write(tmp_path), name=f"_prologue_{next(_ids)}").ModelNew()
        new.load_state_dict(module.state_dict())
        ref = copy.deepcopy(module)
        torch.testing.assert_close(new(x), ref(x))
        torch.testing.assert_close(new.scale, ref.scale)


class ConvTwoReductions(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        y = self.conv(x)
        return y.mean((2, 3)) + y.amax((2, 3))


def test_a_conv_read_by_two_reductions_keeps_its_bias():
    """Neither reduction can take the bias as a prologue (each sees the other read the sum), so the
    bias stays in the convolution rather than becoming a pass of its own."""
    p = _plan(ConvTwoReductions(), [torch.randn(2, 3, 8, 8)])
    conv = next(g for g in p.groups if "conv" in g.note)
    assert "+bias" in conv.note, conv.note
    assert not any(g.detail.get("prologue") for g in p.groups)


def test_a_norm_reads_a_prologue_in_vectors_or_with_them_off_one_element_per_thread(monkeypatch):
    from stitchcuda.agents.coder import emit_norm

    p = _plan(GeluGroupNorm(), [torch.randn(3, 8, 16, 16)])
    (norm,) = coder_builtin.make_steps(p)[-1:]
    assert "prologue" in norm.ops[0] and "VMAX = 4;" in norm.source
    monkeypatch.setenv(emit_norm.VEC_PROLOGUE_ENV, "0")
    p = _plan(GeluGroupNorm(), [torch.randn(3, 8, 16, 16)])
    (norm,) = coder_builtin.make_steps(p)[-1:]
    assert "prologue" in norm.ops[0] and "VMAX = 1;" in norm.source


def test_a_pool_whose_windows_overlap_much_reads_the_chain_stored():
    """3x3 windows at stride 1 read each element nine times: the chain is stored once instead."""

    class Dense(nn.Module):
        def forward(self, x):
            return torch.nn.functional.avg_pool2d(torch.tanh(x) * 2.0, 3, stride=1, padding=1)

    p = _plan(Dense(), [torch.randn(2, 3, 9, 9)])
    assert [g.kind for g in p.groups] == ["pointwise", "kernel"]
    assert "prologue" not in p.groups[1].note
