"""A sum, mean or average pool over a linear layer's output features is folded into its weights
(agents/plan/linear_reductions.py): the GEMM narrows by the group size and W is reduced in the
forward. Checked on the plan (which reductions fold, and which must not) and through the candidate's
host entries against PyTorch, including after the weights change."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import builtin_candidate, load_model_new, needs_nvcc, plan_of, planned_math

from stitchcuda.agents.plan import planner

K, N = 24, 40


class DivSumScale(nn.Module):
    """x @ W.T / 2, summed over the features, scaled: a matrix-vector product."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(N, K))

    def forward(self, x):
        return torch.matmul(x, self.weight.T).div(2).sum(dim=1, keepdim=True) * 1.5


class SubMeanResidual(nn.Module):
    """A linear layer less a parameter vector, averaged over its features, then a GELU and a residual."""

    def __init__(self):
        super().__init__()
        self.gemm = nn.Linear(K, K)
        self.subtract = nn.Parameter(torch.randn(K))

    def forward(self, x):
        y = torch.mean(self.gemm(x) - self.subtract, dim=1, keepdim=True)
        return F.gelu(y) + x


class PoolGelu(nn.Module):
    """An average pool of 4 over the features of a linear layer, then GELU."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(K, N)
        self.pool = nn.AvgPool1d(4)

    def forward(self, x):
        return F.gelu(self.pool(self.lin(x).unsqueeze(1)).squeeze(1))


class ShiftedSum(nn.Module):
    """Scalar and vector shifts on both sides, a negation, a 3-d input: sum(a + c) = sum(a) + k*c."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(K, N)
        self.v = nn.Parameter(torch.randn(N))

    def forward(self, x):
        return (self.v + (-(self.lin(x) + 0.5))).sum(-1)


class RowMajorWeight(nn.Module):
    """A (K, N) weight used as it is: its columns reduced in groups of 5 (a mean pool)."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(K, N))

    def forward(self, x):
        return F.avg_pool1d((x @ self.w).unsqueeze(1), 5).squeeze(1)


class Activated(nn.Module):
    """A ReLU between the GEMM and the sum: not linear, not folded."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(K, N)

    def forward(self, x):
        return torch.relu(self.lin(x)).sum(1)


class ReadTwice(nn.Module):
    """The GEMM's result is returned as well: it must be computed in full, so nothing folds."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(K, N)

    def forward(self, x):
        y = self.lin(x)
        return y.sum(1), y


class OverTheBatch(nn.Module):
    """A sum over the batch, not the features."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(K, N)

    def forward(self, x):
        return self.lin(x).sum(0)


FOLDED = [
    (DivSumScale, (96, K)),
    (SubMeanResidual, (96, K)),
    (PoolGelu, (96, K)),
    (ShiftedSum, (4, 32, K)),
    (RowMajorWeight, (96, K)),
]
KEPT = [Activated, ReadTwice, OverTheBatch]


def _folded(plan) -> list[str]:
    return [n["folded"] for n in plan.graph if "folded" in n]


def _gemms(plan) -> list[list[int]]:
    return [n["shape"] for n in plan.graph if n["op"] in ("addmm", "mm")]


@pytest.mark.parametrize("make,shape", FOLDED, ids=[c[0].__name__ for c in FOLDED])
def test_reductions_over_the_features_fold(make, shape):
    torch.manual_seed(0)
    plan = plan_of(make(), [torch.randn(*shape)])
    assert len(_folded(plan)) == 1, _folded(plan)
    (gemm,) = _gemms(plan)
    assert gemm[1] < N and gemm[1] < K or gemm[1] == 1  # the GEMM narrowed to the groups


@pytest.mark.parametrize("make", KEPT, ids=[c.__name__ for c in KEPT])
def test_what_is_not_linear_in_the_gemm_stays(make):
    plan = plan_of(make(), [torch.randn(96, K)])
    assert _folded(plan) == []
    assert _gemms(plan) == [[96, N]]


def test_a_batch_of_one_reads_the_weight_once_so_it_stays():
    """A matrix-vector product already reads W once; folding would read it twice."""
    plan = plan_of(DivSumScale(), [torch.randn(1, K)])
    assert _folded(plan) == []


def test_off_switch(monkeypatch):
    monkeypatch.setenv(planner.FOLD_REDUCTIONS_ENV, "0")
    plan = plan_of(DivSumScale(), [torch.randn(96, K)])
    assert _folded(plan) == [] and _gemms(plan) == [[96, N]]


@pytest.mark.parametrize("make,shape", FOLDED, ids=[c[0].__name__ for c in FOLDED])
def test_the_folded_math_matches_pytorch_and_follows_the_weights(make, shape):
    torch.manual_seed(1)
    module = make()
    x = torch.randn(*shape)
    plan = plan_of(module, [x])
    assert len(_folded(plan)) == 1
    run = planned_math(plan, module)
    with torch.no_grad():
        for given in (x, torch.randn(*shape)):
            (got,) = run(given)
            torch.testing.assert_close(got, module(given), rtol=1e-4, atol=1e-4)
        # The weights are reduced in every forward: a change in place is followed.
        for p in module.parameters():
            p.mul_(-0.5).add_(0.25)
        (got,) = run(x)
        torch.testing.assert_close(got, module(x), rtol=1e-4, atol=1e-4)


@needs_nvcc
@pytest.mark.usefixtures("isolated_cache")
def test_a_folded_candidate_builds_clean_for_sm90(tmp_path):
    """The weight's reduction, the narrow GEMM and the reduction's view compile for sm_90."""
    from conftest import assert_builds_clean_for_sm90, cudnn_include_or_skip

    include = cudnn_include_or_skip()
    cand = builtin_candidate(SubMeanResidual(), [torch.randn(96, K)], host=False)
    assert "folded into" in cand.files["model_new.py"]
    assert_builds_clean_for_sm90(cand, tmp_path / "folded.cu", include)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.parametrize("make,shape", FOLDED, ids=[c[0].__name__ for c in FOLDED])
def test_on_the_gpu_folded_candidates_match(tmp_path, monkeypatch, make, shape):
    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    torch.manual_seed(2)
    module = make()
    x = torch.randn(*shape)
    cand = builtin_candidate(module, [x], host=False)
    module = module.cuda()
    new, _ = load_model_new(cand, module, tmp_path)
    new = new.cuda()
    with torch.no_grad():
        x = x.cuda()
        for _ in range(2):
            got = new(x)
        want = module(x)
        torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2 * want.abs().max().item())
        for p, q in zip(module.parameters(), new.parameters(), strict=True):
            p.mul_(-0.5)
            q.copy_(p)
        want = module(x)
        torch.testing.assert_close(new(x), want, rtol=1e-2, atol=1e-2 * want.abs().max().item())
