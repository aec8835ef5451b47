"""A convolution's bias where every reader normalises it over its own rows (an instance norm, a
batch norm without running statistics): the mean subtracted takes the bias with it, so the planner
drops it (planner.drop_normalised_conv_bias) instead of spending a pass adding it. Kept wherever
a running mean would record it or another reader sees the biased values."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from conftest import assert_builds_clean_for_sm90, builtin_candidate, load_model_new
from test_emit_conv import cudnn_include

from stitchcuda.agents.graph import trace_module
from stitchcuda.agents.plan.planner import plan_graph

pytestmark = pytest.mark.usefixtures("isolated_cache")


def _module(norm: nn.Module, residual: bool = False) -> type[nn.Module]:
    class ConvNorm(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(4, 8, 3)
            self.norm = norm

        def forward(self, x):
            y = self.conv(x)
            z = self.norm(y) / 2.0
            return z + y if residual else z

    return ConvNorm


DROPPED = {"instance norm": _module(nn.InstanceNorm2d(8)),
           "batch norm without running statistics": _module(nn.BatchNorm2d(8, track_running_stats=False))}
KEPT = {"batch norm (its running mean records the bias)": _module(nn.BatchNorm2d(8)),
        "group norm (a group's channels have different biases)": _module(nn.GroupNorm(2, 8)),
        "instance norm and a residual reading the biased result": _module(nn.InstanceNorm2d(8), residual=True)}
X = [torch.randn(2, 4, 10, 10)]


def _conv_bias(make: type[nn.Module]):
    plan = plan_graph(trace_module(make(), X))
    (conv,) = [n for n in plan.graph if n["op"] == "convolution"]
    biased = [n["name"] for n in plan.graph if n["op"] == "add" and n["name"].startswith("convolution_bias")]
    return conv["args"].get("bias"), biased


@pytest.mark.parametrize("what", DROPPED)
def test_the_bias_is_dropped_where_the_norm_cancels_it(what):
    torch.manual_seed(0)
    module = DROPPED[what]()
    with torch.no_grad():
        without = module.norm(nn.functional.conv2d(X[0], module.conv.weight)) / 2.0
        assert torch.allclose(module(*X), without, atol=1e-5)  # the rule itself, in fp32
    assert _conv_bias(DROPPED[what]) == (None, [])


@pytest.mark.parametrize("what", KEPT)
def test_the_bias_is_kept_where_anything_sees_it(what):
    bias, biased = _conv_bias(KEPT[what])
    assert bias is not None or biased, what  # on the convolution, or split into an add that follows it


@pytest.mark.skipif(cudnn_include() is None, reason="no cudnn.h (set STITCHCUDA_EXTRA_INCLUDE to a folder with it)")
def test_the_candidate_without_the_bias_builds_and_keeps_the_parameter(tmp_path):
    torch.manual_seed(0)
    module = DROPPED["instance norm"]()
    cand = builtin_candidate(module, X, host=False)
    assert_builds_clean_for_sm90(cand, tmp_path / "c.cu", cudnn_include())
    new, _ = load_model_new(cand, module, tmp_path / "m")  # the reference's state_dict, conv.bias included
    assert set(new.state_dict()) == set(module.state_dict())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("what", DROPPED)
def test_on_the_gpu_the_candidate_matches_its_module(what, tmp_path, monkeypatch):
    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    torch.manual_seed(3)
    module = DROPPED[what]()
    cand = builtin_candidate(module, X, host=False)
    module = module.cuda()
    new, _ = load_model_new(cand, module, tmp_path / "m")
    new = new.cuda()
    with torch.no_grad():
        module.conv.bias.add_(5.0)  # a large bias, so a candidate that mishandled it would show
        new.conv.bias.copy_(module.conv.bias)
        x = torch.randn(2, 4, 10, 10, device="cuda")
        want = module(x)
        for _ in range(2):  # the first call plans the convolution
            got = new(x)
    torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2 * want.abs().max().item())
