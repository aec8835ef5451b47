"""Weight normalisation is rewritten into what it computes (agents/plan/weight_norm.py): checked on the
plan (the interface op is gone, the weight recomputed from v and g), through the planned graph as
PyTorch runs it against the module (after v and g change too), as a candidate built for sm_90, and on
the GPU."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from conftest import builtin_candidate, needs_nvcc, plan_of, planned_math

from stitchcuda.agents import graph

_wn = nn.utils.parametrizations.weight_norm


class VocoderBlock(nn.Module):
    """A HiFi-GAN / WaveNet style residual block: weight-normed dilated convolutions, leaky ReLU."""

    def __init__(self):
        super().__init__()
        self.c1 = _wn(nn.Conv1d(4, 4, 3, dilation=2, padding=2))
        self.c2 = _wn(nn.Conv1d(4, 4, 1))

    def forward(self, x):
        return x + self.c2(nn.functional.leaky_relu(self.c1(nn.functional.leaky_relu(x, 0.1)), 0.1))


class OldStyleLinear(nn.Module):
    """torch.nn.utils.weight_norm (the hook form) on a linear layer."""

    def __init__(self):
        super().__init__()
        self.fc = nn.utils.weight_norm(nn.Linear(5, 6))

    def forward(self, x):
        return torch.tanh(self.fc(x))


CASES = {
    "vocoder block (parametrization, conv1d)": (VocoderBlock, (2, 4, 16)),
    "linear (hook form)": (OldStyleLinear, (3, 5)),
}


@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.parametrize("make,shape", CASES.values(), ids=CASES.keys())
def test_weight_norm_is_decomposed_and_the_math_holds(make, shape):
    torch.manual_seed(0)
    module = make()
    x = torch.randn(*shape)
    assert any(n["op"] == "_weight_norm_interface" for n in graph.trace_module(module, [x]))
    plan = plan_of(module, [x])
    ops = [n["op"] for n in plan.graph]
    assert "_weight_norm_interface" not in ops and "sqrt" in ops, ops
    run = planned_math(plan, module)
    with torch.no_grad():
        (got,) = run(x)
        torch.testing.assert_close(got, module(x), rtol=1e-5, atol=1e-5)
        # v and g are read at every call, not folded into a weight at planning time
        for p in module.parameters():
            p.mul_(1.5).add_(0.1)
        (got,) = run(x)
        torch.testing.assert_close(got, module(x), rtol=1e-5, atol=1e-5)


@needs_nvcc
@pytest.mark.usefixtures("isolated_cache")
def test_a_weight_normed_block_builds_clean_for_sm90(tmp_path):
    from conftest import assert_builds_clean_for_sm90, cudnn_include_or_skip

    include = cudnn_include_or_skip()
    make, shape = CASES["vocoder block (parametrization, conv1d)"]
    cand = builtin_candidate(make(), [torch.randn(*shape)], host=False)
    assert_builds_clean_for_sm90(cand, tmp_path / "wn.cu", include)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.usefixtures("isolated_cache")
def test_on_the_gpu_a_weight_normed_block_matches(tmp_path, monkeypatch):
    from conftest import assert_matches_on_the_gpu

    torch.manual_seed(4)
    make, shape = CASES["vocoder block (parametrization, conv1d)"]
    assert_matches_on_the_gpu(make(), [torch.randn(*shape)], tmp_path, monkeypatch)
