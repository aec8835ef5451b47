"""Broadcast operands whose index runs with the element index (a bias over the last dimension) are
loaded once a chunk as a vector (codegen.HoistedLoad, STITCHCUDA_PW_VEC_BROADCAST=1): the run
arithmetic, what is hoisted and what is not, and the results, run on the CPU through the generated
host entry points (the same chunk code the kernels run), aligned and not."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn as nn
from conftest import builtin_candidate, load_model_new, needs_nvcc

from stitchcuda.agents.coder.codegen import _lane_run

pytestmark = pytest.mark.usefixtures("isolated_cache")


@pytest.mark.parametrize(
    "shape, strides, offset, run",
    [
        ((8, 64), (0, 1), 0, 16),  # a bias over 64 features: runs of 16 (the cap)
        ((8, 6), (0, 1), 0, 2),  # 6 features: runs of 2
        ((8, 7), (0, 1), 0, 1),  # 7: none
        ((2, 6, 5, 7), (0, 1, 0, 0), 0, 1),  # a channel bias in NCHW: constant along the last dim
        ((2, 3, 8), (0, 8, 1), 0, 8),  # a [3, 8] operand: its rows start every 8 elements
        ((2, 3, 8), (0, 12, 1), 0, 4),  # rows 12 apart: a run of 8 would start misaligned
        ((4, 64), (0, 1), 2, 2),  # an offset of 2 elements
        ((4, 1, 64), (0, 0, 1), 0, 16),  # size-1 dimensions do not count
    ],
)
def test_lane_run(shape, strides, offset, run):
    assert _lane_run(shape, strides, offset) == run


class Affine(nn.Module):
    def __init__(self, features: int = 64, dtype=torch.float32):
        super().__init__()
        self.w = nn.Parameter(torch.randn(features, dtype=dtype))
        self.b = nn.Parameter(torch.randn(features, dtype=dtype))

    def forward(self, x):
        return torch.tanh(x * self.w + self.b) - self.b


class Grid(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(3, 8))

    def forward(self, x):
        return torch.relu(x * self.w) + 1.0


class ChannelBias(nn.Module):
    def __init__(self):
        super().__init__()
        self.b = nn.Parameter(torch.randn(6, 1, 1))

    def forward(self, x):
        return torch.sigmoid(x + self.b)


# A hoisted load's fill (codegen._hoisted_fill): a vector where its run covers the chunk. (The
# Triton-like shape's tail test, `stitch_pw0_n % VEC != 0`, is another `if constexpr`.)
HOISTED = re.compile(r"if constexpr \(\d+ % VEC == 0\)")

CASES = {
    "features-64": (lambda: Affine(64), lambda: [torch.randn(8, 64)], True),
    "features-6": (lambda: Affine(6), lambda: [torch.randn(8, 6)], True),
    "features-7": (lambda: Affine(7), lambda: [torch.randn(8, 7)], False),
    "grid-3x8": (Grid, lambda: [torch.randn(2, 3, 8)], True),
    "nchw-channel": (ChannelBias, lambda: [torch.randn(2, 6, 5, 7)], False),
    "half-64": (lambda: Affine(64, torch.float16), lambda: [torch.randn(4, 64, dtype=torch.float16)], True),
}


@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.parametrize("case", list(CASES))
def test_hoisted_loads_compute_what_the_module_does(tmp_path, monkeypatch, case):
    make, inputs, hoisted = CASES[case]
    module = make()
    args = inputs()
    monkeypatch.setenv("STITCHCUDA_PW_VEC_BROADCAST", "1")
    cand = builtin_candidate(module, args)
    source = cand.files["fused_kernels.cu"]
    assert bool(HOISTED.search(source)) == hoisted, source[-3000:]
    new, _ = load_model_new(cand, module, tmp_path)
    with torch.no_grad():
        for _ in range(2):  # forward's own path, then the fast path
            args = inputs()
            torch.testing.assert_close(new(*args), module(*args), rtol=1e-3, atol=1e-3)


@pytest.mark.nvcc
@needs_nvcc
def test_a_misaligned_hoisted_operand_takes_the_scalar_path(tmp_path, monkeypatch):
    # A parameter one element into its storage: not 16-byte aligned, so the launcher (and the host
    # entry) run element by element, reading it as stored.
    monkeypatch.setenv("STITCHCUDA_PW_VEC_BROADCAST", "1")
    module = Affine(64)
    x = torch.randn(8, 64)
    cand = builtin_candidate(module, [x])
    assert "sc_aligned(in1, 4)" in cand.files["fused_kernels.cu"]
    new, _ = load_model_new(cand, module, tmp_path)
    new.w = nn.Parameter(torch.cat([torch.zeros(1), module.w.detach().clone()])[1:])
    assert new.w.data_ptr() % 16
    with torch.no_grad():
        torch.testing.assert_close(new(x), module(x), rtol=1e-5, atol=1e-5)


def test_off_by_default_in_the_grid_stride_shape_the_source_is_unchanged(monkeypatch):
    # The Triton-like shape (the default) brings them (tests/test_pointwise_shape.py); the grid-stride
    # one keeps its scalar broadcast loads unless asked.
    module, x = Affine(64), torch.randn(8, 64)
    monkeypatch.delenv("STITCHCUDA_PW_VEC_BROADCAST", raising=False)
    monkeypatch.setenv("STITCHCUDA_PW_SHAPE", "grid-stride")
    plain = builtin_candidate(module, [x], host=False).files["fused_kernels.cu"]
    assert not HOISTED.search(plain) and "in1[j" in plain




@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.parametrize("case", ["features-64", "half-64", "features-6"])
def test_hoisted_kernels_build_for_sm90_without_warnings(tmp_path, monkeypatch, case):
    from stitchcuda import runtime

    make, inputs, _ = CASES[case]
    monkeypatch.setenv("STITCHCUDA_PW_VEC_BROADCAST", "1")
    cand = builtin_candidate(make(), inputs(), host=False)
    src = tmp_path / "k.cu"
    src.write_text(cand.files["fused_kernels.cu"])
    result = runtime.build([src], arch="sm_90")
    assert result.library.exists() and "warning" not in result.log.lower(), result.log
