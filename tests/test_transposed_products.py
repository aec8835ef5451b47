"""A bmm read only through a transpose of its last two dims, computed as B^T A^T and stored as read
(agents/plan/transposed_products.py; STITCHCUDA_GEMM_TRANSPOSED=0 turns it off): the planned graph computes what
the module does (rendered as PyTorch and run on the CPU), the reductions after it read contiguous
rows, and the candidate builds for sm_90."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import assert_builds_clean_for_sm90, cudnn_include_or_skip, needs_nvcc, plan_of, planned_math

from stitchcuda.agents.coder import builtin as coder_builtin
from stitchcuda.agents.plan import transposed_products

pytestmark = pytest.mark.usefixtures("isolated_cache")


class VladLike(nn.Module):
    """NetVLAD's aggregation: soft assignments, (assignment^T x)^T minus the centres, normalised
    over the features, then as one vector."""

    def __init__(self, d: int = 24, k: int = 8):
        super().__init__()
        self.clusters = nn.Parameter(torch.randn(d, k))
        self.centres = nn.Parameter(torch.randn(1, d, k))

    def forward(self, x):
        b, n, d = x.shape
        assign = F.softmax(x.reshape(-1, d) @ self.clusters, dim=1).view(b, n, -1)
        vlad = torch.matmul(assign.transpose(1, 2), x).transpose(1, 2)
        vlad = vlad - assign.sum(1, keepdim=True) * self.centres
        return F.normalize(F.normalize(vlad, dim=1).reshape(b, -1), dim=1)


class ReadTwice(nn.Module):
    """The product is also read as it is: no rewrite."""

    def forward(self, x):
        p = torch.bmm(x, x.transpose(1, 2))
        return p.transpose(1, 2).sum(-1) + p.sum(-1)


def _x():
    return torch.randn(3, 10, 24)


def _transposed_bmms(p):
    return [n for n in p.graph if n["op"] == "bmm" and n.get("folded", "").endswith("stored as read")]


def test_on_by_default_and_off_with_the_switch(monkeypatch):
    assert _transposed_bmms(plan_of(VladLike(), [_x()]))
    monkeypatch.setenv(transposed_products.TRANSPOSED_ENV, "0")
    assert not _transposed_bmms(plan_of(VladLike(), [_x()]))


def test_the_product_is_computed_transposed_and_the_norms_read_rows():
    module, x = VladLike(), _x()
    p = plan_of(module, [x])
    (bmm,) = _transposed_bmms(p)
    assert list(bmm["shape"]) == [3, 24, 8]
    assert not any(n["op"] == "transpose" and n["args"]["self"] == {"ref": bmm["name"]} for n in p.graph)
    # The rewrite computes what the module does (the planned graph rendered as PyTorch).
    (got,) = planned_math(p, module)(x)
    torch.testing.assert_close(got, module(x), rtol=1e-5, atol=1e-6)
    # The whole-vector norm's loader now reads its operand at the element itself: 16-byte vectors.
    (norm,) = [g for g in p.groups if g.kind == "kernel" and "[3, 192]" in g.note]
    assert "vec 4" in norm.note, norm.note


@pytest.mark.parametrize("module", [ReadTwice()], ids=["read-twice"])
def test_a_product_read_otherwise_is_left(module):
    p = plan_of(module, [_x()])
    assert not _transposed_bmms(p)
    (got,) = planned_math(p, module)(_x_fixed := _x())
    torch.testing.assert_close(got, module(_x_fixed), rtol=1e-5, atol=1e-5)


@needs_nvcc
def test_the_candidate_builds_for_sm90_without_warnings(tmp_path):
    include = cudnn_include_or_skip()
    module = VladLike()
    cand = coder_builtin.build_candidate(plan_of(module, [_x()]), type(module), title="test", host=False)
    assert_builds_clean_for_sm90(cand, tmp_path / "k.cu", include)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_the_gpu_the_candidate_matches(tmp_path):
    from conftest import on_the_gpu

    ours, ref = on_the_gpu(VladLike(), [torch.randn(16, 100, 24)], tmp_path)
    for a, b in zip(ours, ref, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-2, atol=1e-3)  # (TF32 products)
