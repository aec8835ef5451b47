"""torch.topk, torch.sort and torch.argsort (agents/coder/emit_topk.py, cuda/topk.cuh, cuda/row_sort.cuh):
on the CPU the candidate's host entry runs the kernel's own ordering and addressing against PyTorch
(largest and smallest, any dim, strided views, values or indices alone, ties and NaN); what it
refuses; on a GPU, the warp merge and the block's bitonic sort against PyTorch."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn as nn
from conftest import load_model_new, needs_nvcc

from stitchcuda.agents import graph
from stitchcuda.agents.coder import builtin as coder_builtin
from stitchcuda.agents.plan import planner

_ids = itertools.count()


class Router(nn.Module):
    """A mixture of experts' gate: the top 2 of 8 experts' logits (computed before it), softmaxed,
    and which ones."""

    def forward(self, x):
        w, idx = torch.topk(torch.tanh(x[..., :8]) * 3, 2, dim=-1)
        return torch.softmax(w, dim=-1), idx


class Knn(nn.Module):
    """DGCNN's k nearest neighbours: indices alone, along the last dim of a distance matrix."""

    def forward(self, x):
        inner = -2 * (x.unsqueeze(-1) * x.unsqueeze(-2)).sum(1)  # x^T x, as the CPU entries compute it
        xx = torch.sum(x**2, dim=1, keepdim=True)
        return (-xx - inner - xx.transpose(2, 1)).topk(k=5, dim=-1)[1]


class SmallestAlongMiddle(nn.Module):
    """The 3 smallest along dim 1 of a transposed view (a strided read), values alone."""

    def forward(self, x):
        return torch.topk(x.transpose(1, 2), 3, dim=1, largest=False).values * 2


class TiesAndNaN(nn.Module):
    def forward(self, x):
        v, i = torch.topk(torch.round(x * 2) / 2, 4, dim=-1)  # many equal values
        return v, i


class PruneTokens(nn.Module):
    """EViT's token pruning: the top half of 196 tokens' scores (past what a warp keeps), then their rows."""

    def forward(self, x):
        score, idx = torch.topk(x.mean(-1).softmax(-1), x.shape[1] // 2, dim=1)
        return torch.gather(x, 1, idx.unsqueeze(-1).expand(-1, -1, x.shape[2])) * score.unsqueeze(-1)


class SortBoth(nn.Module):
    """sort ascending along a middle dim of a transposed view, values and indices."""

    def forward(self, x):
        return torch.sort(x.transpose(1, 2), dim=1)


class ArgsortDescending(nn.Module):
    """Cox's risk set: the order of descending times (argsort: indices alone), stable."""

    def forward(self, t, risk):
        order = torch.argsort(t, dim=-1, descending=True, stable=True)
        return risk.gather(-1, order).cumsum(-1)


class MedianAlongMiddle(nn.Module):
    """Robust scaling's median over time (dim 1 of a transposed view), values and indices."""

    def forward(self, x):
        med, idx = x.transpose(1, 2).median(dim=1)
        return med * 2, idx


class MedianOfAll(nn.Module):
    """median() of every element: one value, no index."""

    def forward(self, x):
        return x - (x * 2).median()


class NanMedianKeep(nn.Module):
    def forward(self, x):
        return torch.nanmedian(x, dim=-1, keepdim=True).values + x


class KthSmallest(nn.Module):
    """A trimmed error's cut: the 3rd smallest along dim 0, values and indices."""

    def forward(self, x):
        return torch.kthvalue(x.abs(), 3, dim=0)


class BucketOrder(nn.Module):
    """Reformer's LSH order: argsort of an int64 key (bucket * T + position), then its inverse."""

    def forward(self, x):
        buckets = torch.argmax(x, dim=-1)
        pos = torch.arange(x.shape[1], device=x.device).expand(x.shape[0], -1)
        order = torch.argsort(buckets * x.shape[1] + pos, dim=-1)
        return order, torch.argsort(order, dim=-1)


class IntegerPicks(nn.Module):
    """Sorted int64 values (descending, stable: with their indices), the 3 largest of int32 counts,
    and the median and 2nd smallest of int64 votes. Ties everywhere: where PyTorch leaves their order
    open (topk, median, kthvalue), the indices are checked by what they pick (zero differences)."""

    def forward(self, x):
        votes = (x * 2).round().long()
        counts = votes.int()
        tv, ti = torch.topk(counts, 3, dim=-1)
        mv, mi = votes.median(dim=-1)
        kv, ki = torch.kthvalue(votes, 2, dim=-1)
        return (*torch.sort(votes, dim=-1, descending=True, stable=True), tv, votes.gather(-1, ti) - tv,
                mv, votes.gather(-1, mi[:, None])[:, 0] - mv, kv, votes.gather(-1, ki[:, None])[:, 0] - kv)


CASES = {
    "router": (Router, lambda: [torch.randn(3, 5, 16)]),
    "knn indices": (Knn, lambda: [torch.randn(2, 3, 40)]),
    "smallest along a middle dim": (SmallestAlongMiddle, lambda: [torch.randn(2, 6, 9)]),
    "prune half the tokens": (PruneTokens, lambda: [torch.randn(2, 196, 8)]),
    "sort along a middle dim": (SortBoth, lambda: [torch.randn(2, 7, 37)]),
    "argsort descending": (ArgsortDescending, lambda: [torch.rand(3, 300) * 100, torch.randn(3, 300)]),
    "median along a middle dim": (MedianAlongMiddle, lambda: [torch.randn(3, 8, 25)]),
    "median of every element": (MedianOfAll, lambda: [torch.randn(6, 10)]),
    "nanmedian keepdim": (NanMedianKeep, lambda: [torch.randn(4, 30)]),
    "kthvalue along dim 0": (KthSmallest, lambda: [torch.randn(7, 5)]),
    "argsort of int64 keys": (BucketOrder, lambda: [torch.randn(2, 64, 8)]),
    "integer sort, topk, median, kthvalue": (IntegerPicks, lambda: [torch.randn(3, 40)]),
}


def _candidate(module, inputs, host=True):
    plan = planner.plan_graph(graph.trace_module(module, inputs))
    assert plan.supported, plan.unsupported
    assert {"topk", "sort", "median", "nanmedian", "kthvalue"} & {n["op"] for n in plan.graph}
    return coder_builtin.build_candidate(plan, type(module), title="t", host=host)


@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.parametrize("make,inputs", CASES.values(), ids=CASES.keys())
def test_topk_matches_pytorch_on_the_cpu(tmp_path, make, inputs):
    torch.manual_seed(0)
    module = make()
    args = inputs()
    cand = _candidate(module, args)
    new, _ = load_model_new(cand, module, tmp_path)
    with torch.no_grad():
        for given in (args, inputs()):
            got, want = new(*given), module(*given)
            got, want = (got if isinstance(got, tuple) else (got,)), (want if isinstance(want, tuple) else (want,))
            for g, w in zip(got, want, strict=True):
                torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.nvcc
@needs_nvcc
def test_ties_go_to_the_lower_index_and_nan_is_largest(tmp_path):
    module = TiesAndNaN()
    x = torch.randn(4, 12)
    x[1, 3] = float("nan")
    x[2, :] = 0.5  # a row of one value: the first four indices, in order
    cand = _candidate(module, [x])
    new, _ = load_model_new(cand, module, tmp_path)
    with torch.no_grad():
        v, i = new(x)
        want_v, _ = module(x)
    torch.testing.assert_close(v, want_v, equal_nan=True)
    assert torch.isnan(v[1, 0]) and i[1, 0] == 3
    assert i[2].tolist() == [0, 1, 2, 3]
    # Where values tie, the lower index first; the values at the indices are the values returned.
    rounded = torch.round(x * 2) / 2
    assert torch.equal(torch.gather(rounded, 1, i)[~torch.isnan(v)], v[~torch.isnan(v)])
    for row_v, row_i in zip(v.tolist(), i.tolist(), strict=True):
        for a, b, ia, ib in zip(row_v, row_v[1:], row_i, row_i[1:], strict=False):
            assert a != b or ia < ib


@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.parametrize("descending", [False, True])
def test_a_sorted_row_keeps_equal_values_in_order_and_nan_where_pytorch_puts_it(tmp_path, descending):
    """A stable sort's order: equal values by index both ways; NaN last ascending, first descending."""

    class Sort(nn.Module):
        def forward(self, x):
            return torch.sort(torch.round(x * 2) / 2, dim=-1, descending=descending, stable=True)

    x = torch.randn(5, 60)
    x[1, 7] = float("nan")
    module = Sort()
    new, _ = load_model_new(_candidate(module, [x]), module, tmp_path)
    with torch.no_grad():
        (v, i), (want_v, want_i) = new(x), module(x)
    torch.testing.assert_close(v, want_v, equal_nan=True)
    assert torch.equal(i, want_i)


@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.nvcc
@needs_nvcc
def test_a_median_of_a_row_with_nan_is_nan_and_nanmedian_skips_it(tmp_path):
    """torch.median: NaN where the row holds one, at its first NaN; torch.nanmedian: the lower median
    of the rest, NaN only where every entry is; kthvalue counts NaN as the largest."""

    class Picks(nn.Module):
        def forward(self, x):
            m, mi = x.median(dim=-1)
            nm, nmi = x.nanmedian(dim=-1)
            return m, mi, nm, nmi, torch.kthvalue(x, 6, dim=-1).values

    x = torch.randn(4, 6)
    x[1, 2] = x[1, 4] = float("nan")
    x[2, :] = float("nan")
    x[3, 0] = float("nan")
    module = Picks()
    new, _ = load_model_new(_candidate(module, [x]), module, tmp_path)
    with torch.no_grad():
        got, want = new(x), module(x)
    for g, w in zip(got[::2], want[::2], strict=True):  # the values
        torch.testing.assert_close(g, w, equal_nan=True)
    m, mi, nm, nmi, _ = got
    assert torch.isnan(m[1]) and mi[1] == 2 and torch.isnan(m[3]) and mi[3] == 0
    assert torch.isnan(nm[2]) and not torch.isnan(nm[1]) and nm[1] == x[1, nmi[1]]
    torch.testing.assert_close(mi[[0]], want[1][[0]])
    torch.testing.assert_close(nmi[[0, 1, 3]], want[3][[0, 1, 3]])


@needs_nvcc
@pytest.mark.usefixtures("isolated_cache")
def test_topk_builds_clean_for_sm90(tmp_path):
    from conftest import assert_builds_clean_for_sm90, cudnn_include_or_skip

    include = cudnn_include_or_skip()
    for key in CASES:
        make, inputs = CASES[key]
        assert_builds_clean_for_sm90(_candidate(make(), inputs(), host=False), tmp_path / f"{len(key)}.cu", include)


def test_what_it_refuses():
    class Unsorted(nn.Module):
        def forward(self, x):
            return torch.topk(x, 2, sorted=False).values

    class TooMany(nn.Module):  # past a warp's registers, in a row past what a block sorts
        def forward(self, x):
            return torch.topk(x, 40).values

    class LongRows(nn.Module):
        def forward(self, x):
            return torch.sort(x).values

    for cls, shape in ((Unsorted, (3, 8)), (TooMany, (3, 5000)), (LongRows, (2, 5000))):
        plan = planner.plan_graph(graph.trace_module(cls(), [torch.randn(*shape)]))
        op = "sort" if cls is LongRows else "topk"
        assert not plan.supported and any(op in r for r in plan.unsupported), plan.unsupported


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.parametrize("make,inputs", CASES.values(), ids=CASES.keys())
def test_on_the_gpu_topk_matches(tmp_path, monkeypatch, make, inputs):
    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    torch.manual_seed(1)
    module = make()
    args = inputs()
    cand = _candidate(module, args, host=False)
    new, _ = load_model_new(cand, module, tmp_path)
    new, module = new.cuda(), module.cuda()
    with torch.no_grad():
        given = [a.cuda() for a in args]
        got, want = new(*given), module(*given)
    got, want = (got if isinstance(got, tuple) else (got,)), (want if isinstance(want, tuple) else (want,))
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)
