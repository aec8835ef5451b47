"""A training batch norm read (through pointwise work) only by a softmax, a reduction or a pool keeps
its statistics, and that kernel normalises as it reads (agents/plan/train_bn_prologue.py with
STITCHCUDA_BN_PROLOGUE_KERNELS=1): the normalised tensor is never written and read back. Candidates
run on CPU tensors through the host entries: outputs, running statistics and gradients against the
module's."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn
from conftest import builtin_candidate, load_model_new, needs_nvcc, plan_of

from stitchcuda.agents.plan import planner

pytestmark = pytest.mark.usefixtures("isolated_cache")


class NormSoftmax(nn.Module):
    """UNetSoftmax's pattern without its convolution: batch norm, then a softmax over the width."""

    def __init__(self, c: int = 6):
        super().__init__()
        self.bn = nn.BatchNorm2d(c)
        with torch.no_grad():
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return torch.softmax(self.bn(x), dim=-1)


class NormReluPool(nn.Module):
    """A ResNet stem's tail: batch norm, ReLU, max pool."""

    def __init__(self, c: int = 5):
        super().__init__()
        self.bn = nn.BatchNorm2d(c)
        with torch.no_grad():  # (a softmax over the width cancels the shift: the pool does not)
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return nn.functional.max_pool2d(torch.relu(self.bn(x)), 3, 2, 1)


class NormMean(nn.Module):
    """Batch norm, SiLU, then a global average over the spatial dims."""

    def __init__(self, c: int = 7):
        super().__init__()
        self.bn = nn.BatchNorm2d(c, affine=False)

    def forward(self, x):
        return nn.functional.silu(self.bn(x)).mean((2, 3))


class ReadTwice(nn.Module):
    """The normalised tensor is returned as well: it must be stored, and the norm stays whole."""

    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x):
        y = self.bn(x)
        return y, y.amax(-1)


CASES = [(NormSoftmax, (3, 6, 10, 40)), (NormReluPool, (2, 5, 17, 23)), (NormMean, (4, 7, 9, 11))]
IDS = ["softmax", "relu-pool", "silu-mean"]


def _norm_note(plan) -> str:
    (norm,) = [g.note for g in plan.groups if g.kind == "kernel" and "batch_norm" in g.note]
    return norm


@pytest.mark.parametrize(("cls", "shape"), CASES, ids=IDS)
def test_off_by_default_and_on_the_kernel_normalises(cls, shape, monkeypatch):
    x = torch.randn(shape)
    assert "statistics only" not in _norm_note(plan_of(cls(), [x]))
    monkeypatch.setenv(planner.BN_PROLOGUE_KERNELS_ENV, "1")
    plan = plan_of(cls(), [x])
    assert "statistics only" in _norm_note(plan)
    # The reader's note names the chain it computes as it reads: the norm's subtract and scale.
    (reader,) = [g.note for g in plan.groups if g.kind == "kernel" and "batch_norm" not in g.note]
    assert "prologue sub -> mul" in reader, reader


def test_a_normalised_tensor_read_elsewhere_is_stored(monkeypatch):
    monkeypatch.setenv(planner.BN_PROLOGUE_KERNELS_ENV, "1")
    assert "statistics only" not in _norm_note(plan_of(ReadTwice(), [torch.randn(2, 4, 5, 6)]))


class ScaledAlongWidth(nn.Module):
    """A chain operand as small as the channels but laid along the width: not per-channel."""

    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(6)
        self.p = nn.Parameter(torch.randn(5))

    def forward(self, x):
        return (self.bn(x) * self.p).amax(-1)


class ScaledPerChannel(ScaledAlongWidth):
    def __init__(self):
        super().__init__()
        self.p = nn.Parameter(torch.randn(6, 1, 1))


def test_only_per_channel_operands_join_the_chain(monkeypatch):
    monkeypatch.setenv(planner.BN_PROLOGUE_KERNELS_ENV, "1")
    x = torch.randn(3, 6, 4, 5)
    assert "statistics only" not in _norm_note(plan_of(ScaledAlongWidth(), [x]))
    assert "statistics only" in _norm_note(plan_of(ScaledPerChannel(), [x]))


@needs_nvcc
@pytest.mark.parametrize(("cls", "shape"), CASES, ids=IDS)
def test_candidates_match_the_module_on_the_cpu(cls, shape, tmp_path, monkeypatch):
    monkeypatch.setenv(planner.BN_PROLOGUE_KERNELS_ENV, "1")
    torch.manual_seed(3)
    module = cls()
    before = copy.deepcopy(module)
    x = torch.randn(shape) * 2 + 0.5
    cand = builtin_candidate(module, [x], host=True)
    new, _ = load_model_new(cand, before, tmp_path)
    new.train()
    fresh = torch.randn(shape) * 2 + 0.5
    reference = copy.deepcopy(before)
    with torch.no_grad():
        got, want = new(fresh), reference(fresh)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    # The running statistics the norm updates, as the module's own.
    state = new.state_dict()
    torch.testing.assert_close(state["bn.running_mean"], reference.bn.running_mean, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(state["bn.running_var"], reference.bn.running_var, rtol=1e-5, atol=1e-6)
    # Gradients through the candidate's backward (the reference math) against the module's.
    xa, xb = fresh.clone().requires_grad_(), fresh.clone().requires_grad_()
    grad = torch.randn_like(want)
    new(xa).backward(grad)
    copy.deepcopy(before)(xb).backward(grad)
    torch.testing.assert_close(xa.grad, xb.grad, rtol=1e-4, atol=1e-4)


class ConvNormSoftmax(nn.Module):
    """A convolution's channels-last tail: its norm's channels are the last dim of what it reads."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 16, 3, padding=1)
        self.bn = nn.BatchNorm2d(16)

    def forward(self, x):
        return torch.softmax(self.bn(self.conv(x)), dim=-1)


class ConvNormPool(nn.Module):
    """The same with a ReLU and a max pool after the norm (which, unlike a softmax, sees its shift)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 16, 3, padding=1)
        self.bn = nn.BatchNorm2d(16)
        with torch.no_grad():
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return nn.functional.max_pool2d(torch.relu(self.bn(self.conv(x))), 2)


@pytest.mark.parametrize("cls", [ConvNormSoftmax, ConvNormPool], ids=["softmax", "relu-pool"])
def test_a_channels_last_tails_norm_is_split_too(cls, monkeypatch):
    from conftest import planned_math

    monkeypatch.setenv(planner.BN_PROLOGUE_KERNELS_ENV, "1")
    x = torch.randn(2, 4, 16, 64)
    module = cls()
    plan = plan_of(module, [x])
    note = _norm_note(plan)
    assert "channels-last" in note and "statistics only" in note, note
    # The planned graph, rendered as PyTorch on the CPU, computes what the module does.
    (got,) = planned_math(plan, module)(x)
    torch.testing.assert_close(got, module(x), rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize(("cls", "shape"), [*CASES, (ConvNormSoftmax, (2, 4, 16, 64)), (ConvNormPool, (2, 4, 16, 64))],
                         ids=[*IDS, "conv-softmax-channels-last", "conv-pool-channels-last"])
def test_on_the_gpu_candidates_match(cls, shape, tmp_path, monkeypatch):
    from conftest import outputs_on_the_gpu

    monkeypatch.setenv(planner.BN_PROLOGUE_KERNELS_ENV, "1")
    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    torch.manual_seed(5)
    module = cls()
    x = torch.randn(shape)
    cand = builtin_candidate(module, [x], host=False)
    got, want = outputs_on_the_gpu(cand, copy.deepcopy(module), [x], tmp_path, calls=1)
    torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-4)  # (TF32 convolution in the last case)


@needs_nvcc
@pytest.mark.parametrize(("cls", "shape"), [CASES[0], CASES[1], (NormSoftmax, (2, 6, 33, 64)),
                                             (ConvNormSoftmax, (2, 4, 16, 64)), (ConvNormPool, (2, 4, 16, 64))],
                         ids=["softmax", "relu-pool", "softmax-split-norm", "conv-softmax-channels-last",
                              "conv-pool-channels-last"])
def test_the_device_kernels_build_for_sm90_without_warnings(cls, shape, tmp_path, monkeypatch):
    """The device code (a split column softmax's loader, a pool's staged windows) is not the host
    entries' code: nvcc must take it for the GPU too."""
    from conftest import assert_builds_clean_for_sm90, cudnn_include_or_skip

    include = cudnn_include_or_skip()
    monkeypatch.setenv(planner.BN_PROLOGUE_KERNELS_ENV, "1")
    cand = builtin_candidate(cls(), [torch.randn(shape)], host=False)
    assert_builds_clean_for_sm90(cand, tmp_path / "k.cu", include)
