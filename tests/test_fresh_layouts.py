"""A kernel's result traced non-contiguous (its input was permuted, not made contiguous) is stored
row-major, and the views of it replayed on that layout (agents/plan/fresh_layouts.py): the plan,
and the candidate's CPU entry points against PyTorch."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from conftest import needs_nvcc

from stitchcuda.agents import graph
from stitchcuda.agents.graph import is_contiguous
from stitchcuda.agents.plan import planner
from stitchcuda.agents.plan.fresh_layouts import store_kernel_results_contiguous


class PermutedNorm(nn.Module):
    """An [N, H, W, C] input permuted to NCHW into a training batch norm, whose result PyTorch lays
    out channels-last; then flattened and transposed back to tokens (views of it)."""

    def __init__(self, c: int = 6):
        super().__init__()
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x):
        y = self.bn(x.permute(0, 3, 1, 2))
        return torch.relu(y.flatten(2).transpose(1, 2)) * 2


class PermutedDepthwise(nn.Module):
    """SegFormer's Mix-FFN middle: tokens viewed as an image without .contiguous(), a depthwise
    convolution, and back to tokens."""

    def __init__(self, c: int = 8, hw: int = 32):
        super().__init__()
        self.hw = hw
        self.dw = nn.Conv2d(c, c, 3, padding=1, groups=c)

    def forward(self, x):
        n, t, c = x.shape
        y = self.dw(x.transpose(1, 2).view(n, c, self.hw, self.hw))
        return nn.functional.gelu(y.flatten(2).transpose(1, 2))


CASES = [(PermutedNorm, (2, 5, 7, 6)), (PermutedDepthwise, (2, 1024, 8))]


@pytest.mark.parametrize("make,shape", CASES, ids=[c[0].__name__ for c in CASES])
def test_the_kernel_result_is_stored_row_major_and_its_views_follow(make, shape):
    torch.manual_seed(0)
    traced = graph.trace_module(make(), [torch.randn(shape)])
    kernels_ = [n for n in traced if n["op"] in ("getitem", "convolution") and not n.get("view") and n.get("shape")
                and len(n["shape"]) == 4]
    assert any(not is_contiguous(n) for n in kernels_)  # the layout this exists for
    done = {n["name"]: n for n in store_kernel_results_contiguous(traced)}
    assert all(is_contiguous(done[n["name"]]) for n in kernels_)
    # A view keeps its shape; its strides are those of the same view of a row-major tensor.
    for n in traced:
        if n.get("view") and n["op"] == "transpose":
            assert done[n["name"]]["shape"] == n["shape"]
    assert planner.plan_graph(traced).supported


@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.parametrize("make,shape", CASES, ids=[c[0].__name__ for c in CASES])
def test_it_matches_pytorch_on_the_cpu(tmp_path, make, shape):
    from conftest import planned_on_the_cpu

    torch.manual_seed(0)
    module = make()
    x = torch.randn(shape)
    _, new = planned_on_the_cpu(module, [x], tmp_path)
    with torch.no_grad():
        for given in (x, torch.randn(shape) * 2 + 1):
            torch.testing.assert_close(new(given), module(given), rtol=1e-4, atol=1e-5)


def test_a_result_that_is_written_into_keeps_its_layout():
    """A write into the result through a view (copy_ into a slice) lands where the trace put it."""
    from stitchcuda.agents.graph import new_node, ref

    shape, cl = [2, 3, 4, 5], [60, 1, 15, 3]  # channels-last strides
    g = [{"name": "x", "op": "input", "kind": "arg", "shape": shape, "dtype": "float32", "stride": cl, "offset": 0},
         new_node("sm", "_softmax", {"self": ref("x"), "dim": 1, "half_to_float": False}, shape, cl, "float32",
                  view=False),
         new_node("row", "select", {"self": ref("sm"), "dim": 2, "index": 0}, [2, 3, 5], [60, 1, 3], "float32",
                  view=True, target="aten.select.int"),
         new_node("w", "copy_", {"self": ref("row"), "src": 1.0}, [2, 3, 5], [60, 1, 3], "float32", view=False)]
    assert store_kernel_results_contiguous(g)[1]["stride"] == cl
    # Without the write, the softmax is stored row-major and the select's strides follow it.
    done = store_kernel_results_contiguous(g[:3])
    assert done[1]["stride"] == [60, 20, 5, 1] and done[2]["stride"] == [60, 20, 1]


class PermutedConv(nn.Module):
    """The dense case, with cuDNN: a linear layer's tokens viewed as an image without .contiguous(),
    a 3x3 convolution, and back to tokens (SegFormer's Mix-FFN with a dense convolution)."""

    def __init__(self, c: int = 16, hw: int = 12):
        super().__init__()
        self.hw = hw
        self.fc = nn.Linear(c, c)
        self.conv = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x):
        n, t, c = x.shape
        y = self.conv(self.fc(x).transpose(1, 2).view(n, c, self.hw, self.hw))
        return torch.relu(y.flatten(2).transpose(1, 2))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("make,shape", [*CASES, (PermutedConv, (2, 144, 16))],
                         ids=[*(c[0].__name__ for c in CASES), "PermutedConv"])
def test_on_the_gpu_it_matches_pytorch(tmp_path, monkeypatch, make, shape):
    """Full fp32 on both sides (the exact rung's plan; no TF32 in the module's cuDNN or matmul)."""
    from conftest import builtin_candidate, outputs_on_the_gpu

    from stitchcuda.agents.coder import kernels

    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    torch.manual_seed(2)
    module = make()
    x = torch.randn(shape)
    cand = builtin_candidate(module, [x], host=False, precise=kernels.PRECISE_SPLIT)
    with torch.backends.cudnn.flags(allow_tf32=False):
        got, want = outputs_on_the_gpu(cand, module, [x], tmp_path)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
