"""Scatter-adds (agents/coder/emit_scatter.py): index_add, a graph network's messages summed at their
target nodes, scatter_add, PyG's scatter, and scatter, which stores. Checked on the CPU through the
candidate's host entry points against PyTorch, with repeated targets (the adds must accumulate, not overwrite), alpha and
views; what the emitter refuses."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from conftest import builtin_candidate, load_model_new, needs_nvcc

from stitchcuda.agents import graph
from stitchcuda.agents.plan import planner
from stitchcuda.agents.verify.static_check import check_source


class GraphConv(nn.Module):
    """Messages from each edge's source node, summed at its target, plus a self term. (A scale where
    a network has a Linear: the host entries cover kernels of our own, not cuBLAS.)"""

    def __init__(self, dim: int = 8):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(dim))

    def forward(self, x, src, dst):
        msg = (x * self.scale)[src]
        return torch.relu(torch.zeros_like(x).index_add_(0, dst, msg) + x)


class AddColumns(nn.Module):
    """index_add along dim 1 with alpha, into a non-zero tensor, from a transposed view."""

    def forward(self, x, cols, y):
        return x.index_add(1, cols, y.t(), alpha=-0.5) * 2


class Scatter(nn.Module):
    def forward(self, x, index, src):
        return torch.scatter_add(x, 1, index, src).tanh()


class SelectedMessages(nn.Module):
    """index_select's rows of a transposed table as the messages (the gather reads through strides)."""

    def forward(self, x, src, dst):
        return torch.zeros(x.shape[1], x.shape[0]).index_add(0, dst, torch.index_select(x.t(), 0, src)) - 1


class SharedMessages(nn.Module):
    """The gathered messages are also returned: they stay a kernel of their own."""

    def forward(self, x, src, dst):
        msg = x[src]
        return torch.zeros_like(x).index_add_(0, dst, msg), msg


N, E = 12, 40
CASES = [
    ("index_add", GraphConv, lambda: [torch.randn(N, 8), torch.randint(0, N, (E,)), torch.randint(0, N, (E,))]),
    ("index_add", AddColumns, lambda: [torch.randn(3, 6), torch.tensor([0, 5, 5, 2, 0, 0, 3]), torch.randn(7, 3)]),
    ("scatter_add", Scatter, lambda: [torch.randn(4, 5), torch.randint(0, 5, (4, 9)), torch.randn(4, 9)]),
    ("index_add", SelectedMessages, lambda: [torch.randn(6, N), torch.randint(0, N, (E,)), torch.randint(0, 6, (E,))]),
    ("index_add", SharedMessages, lambda: [torch.randn(N, 8), torch.randint(0, N, (E,)), torch.randint(0, N, (E,))]),
]


@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.parametrize("name,make,inputs", CASES, ids=[c[1].__name__ for c in CASES])
def test_scatter_adds_match_pytorch(tmp_path, name, make, inputs):
    torch.manual_seed(0)
    module, args = make(), inputs()
    assert name in {n["op"] for n in planner.plan_graph(graph.trace_module(module, args)).graph}
    cand = builtin_candidate(module, args)
    assert not [f for f in check_source(cand.files["model_new.py"]) if f.severity == "error"]
    assert "atomicAdd(" in cand.files["fused_kernels.cu"]
    new, _ = load_model_new(cand, module, tmp_path)
    with torch.no_grad():
        for given in (args, inputs()):  # then other indices: read, not baked in
            torch.testing.assert_close(new(*given), module(*given), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("make,inputs,gathered,kept", [
    (GraphConv, CASES[0][2], True, False), (SelectedMessages, CASES[3][2], True, False),
    (SharedMessages, CASES[4][2], False, True), (Scatter, CASES[2][2], False, False)],
    ids=["x[src]", "index_select", "returned too", "no gather"])
def test_messages_are_read_through_their_index(make, inputs, gathered, kept, monkeypatch):
    """A scatter-add whose source is rows picked from a table, read by nothing else, reads each
    message through the index (planner._take_gathered_sources): no kernel gathers them first."""
    torch.manual_seed(0)
    plan = planner.plan_graph(graph.trace_module(make(), inputs()))
    (scatter,) = [g for g in plan.groups if g.kind == "kernel" and "atomic adds" in g.note]
    gathers = {g.nodes[0] for g in plan.groups if g.kind == "kernel" and g.note.startswith(("index along", "index_select"))}
    assert bool(scatter.detail.get("gathers")) == gathered and bool(gathers) == kept, (scatter.detail, gathers)
    monkeypatch.setenv(planner.GATHERED_SOURCES_ENV, "0")
    plan = planner.plan_graph(graph.trace_module(make(), inputs()))
    assert not any(g.detail.get("gathers") for g in plan.groups)


def test_repeated_targets_are_in_the_cases():
    """The GraphConv case has more edges than nodes, so targets repeat: an overwrite would fail above."""
    torch.manual_seed(0)
    dst = CASES[0][2]()[2]
    assert dst.unique().numel() < dst.numel()


class ScatterOnly(nn.Module):
    def forward(self, x, index, src):
        return torch.scatter_add(x, 1, index, src)


@pytest.mark.parametrize("inputs, why", [
    ([torch.randn(4, 5).half(), torch.randint(0, 5, (4, 9)), torch.randn(4, 9).half()], "fp32 values"),

])
def test_what_it_refuses(inputs, why):
    plan = planner.plan_graph(graph.trace_module(ScatterOnly(), inputs))
    assert not plan.supported
    assert any(why in u for u in plan.unsupported), plan.unsupported


class ScatterMultiply(nn.Module):
    def forward(self, x, index, src):
        return torch.scatter(x, 1, index, src, reduce="multiply")


class ScatterMean(nn.Module):
    def forward(self, x, index, src):
        return x.scatter_reduce(0, index, src, reduce="mean")


def test_a_scatter_that_averages_is_refused():
    """A mean needs each target's count: not planned (the other reductions are, below)."""
    inputs = [torch.randn(4, 5), torch.randint(0, 4, (6, 5)), torch.randn(6, 5)]
    plan = planner.plan_graph(graph.trace_module(ScatterMean(), inputs))
    assert not plan.supported
    assert any("mean" in u for u in plan.unsupported), plan.unsupported


class ScatterReduce(nn.Module):
    def __init__(self, reduce: str, include_self: bool, dim: int = 0):
        super().__init__()
        self.reduce, self.include_self, self.dim = reduce, include_self, dim

    def forward(self, x, index, src):
        return x.scatter_reduce(self.dim, index, src, reduce=self.reduce, include_self=self.include_self) + 1


class EdgeSoftmax(nn.Module):
    """A graph attention layer's edge softmax: each node's largest incoming score (amax into -inf,
    `self` computed as copied), then exp and the sum of each node's (scatter_add)."""

    def forward(self, scores, dst):
        idx = dst.unsqueeze(-1).expand_as(scores)
        top = torch.full((N, scores.shape[1]), float("-inf")).scatter_reduce(0, idx, scores, reduce="amax")
        e = (scores - top[dst]).exp()
        return e / torch.zeros(N, scores.shape[1]).scatter_add(0, idx, e)[dst]


def _reduce_inputs(dim: int = 0):
    # Repeated targets (14 sources onto 5 rows), and rows no source names (kept as `self`).
    def make():
        index = torch.randint(0, 3, (14, 4)) if dim == 0 else torch.randint(0, 3, (5, 9))
        src = torch.randn(14, 4) if dim == 0 else torch.randn(5, 9)
        return [torch.randn(5, 4), index, src]
    return make


REDUCES = [
    *[(ScatterReduce(r, inc), _reduce_inputs()) for r in ("sum", "prod", "amax", "amin") for inc in (True, False)],
    (ScatterReduce("amax", False, dim=1), _reduce_inputs(1)),
    (ScatterMultiply(), lambda: [torch.randn(4, 5), torch.randint(0, 5, (4, 7)), torch.randn(4, 7)]),
    (EdgeSoftmax(), lambda: [torch.randn(40, 3), torch.randint(0, N, (40,))]),
]
REDUCE_IDS = [f"{type(m).__name__}-{getattr(m, 'reduce', '')}-{getattr(m, 'include_self', '')}-{getattr(m, 'dim', '')}"
              for m, _ in REDUCES]


@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.parametrize("module,inputs", REDUCES, ids=REDUCE_IDS)
def test_scatters_that_reduce_match_pytorch(tmp_path, module, inputs):
    """Each reduction combined by its own atomic, with and without `self` at the targets; the rows no
    source names keep `self` either way. Then other indices: read each call, not baked in."""
    torch.manual_seed(0)
    args = inputs()
    plan = planner.plan_graph(graph.trace_module(module, args))
    assert plan.supported, plan.unsupported
    cand = builtin_candidate(module, args)
    new, _ = load_model_new(cand, module, tmp_path)
    with torch.no_grad():
        for given in (args, inputs()):
            torch.testing.assert_close(new(*given), module(*given), rtol=1e-5, atol=1e-5)


@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.usefixtures("isolated_cache")
def test_a_nan_sent_to_a_maximum_stays(tmp_path):
    """torch's amax keeps a NaN wherever one is sent, and so do the compare-and-swap loops."""
    module = ScatterReduce("amax", True)
    x, index, src = _reduce_inputs()()
    src[3, 1] = float("nan")
    cand = builtin_candidate(module, [x, index, src])
    new, _ = load_model_new(cand, module, tmp_path)
    with torch.no_grad():
        got, want = new(x, index, src), module(x, index, src)
    assert want.isnan().any()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, equal_nan=True)


GPU_CASES = [
    # More edges than nodes many times over, so thousands of atomic adds land on each target.
    ("index_add", GraphConv, lambda: [torch.randn(300, 8), torch.randint(0, 300, (20000,)),
                                      torch.randint(0, 300, (20000,))]),
    ("index_add", AddColumns, lambda: [torch.randn(64, 40), torch.randint(0, 40, (500,)), torch.randn(500, 64)]),
    ("scatter_add", Scatter, lambda: [torch.randn(16, 50), torch.randint(0, 50, (16, 3000)), torch.randn(16, 3000)]),
]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("name,make,inputs", GPU_CASES, ids=[c[1].__name__ for c in GPU_CASES])
def test_on_the_gpu_scatter_adds_match_pytorch(tmp_path, monkeypatch, name, make, inputs):
    """The device build (no host entries) on the GPU: fp32 atomics in any order, so within
    accumulation-order rounding of PyTorch's own, on two input sets (indices read each call)."""
    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    torch.manual_seed(1)
    module, args = make(), inputs()
    cand = builtin_candidate(module, args, host=False)
    assert "atomicAdd(" in cand.files["fused_kernels.cu"]
    module = module.cuda()
    new, _ = load_model_new(cand, module, tmp_path)
    new = new.cuda()
    with torch.no_grad():
        for given in (args, inputs()):
            given = [a.cuda() for a in given]
            want = module(*given)
            torch.testing.assert_close(new(*given), want, rtol=1e-4, atol=1e-4 * want.abs().max().item())


def test_the_zeros_summed_into_are_computed_as_copied():
    """`torch.zeros_like(x).index_add_(...)`: the scatter writes the zeros as it copies `self` (the
    planner's prologue), so no pointwise kernel writes them for it to read back."""
    torch.manual_seed(0)
    plan = planner.plan_graph(graph.trace_module(GraphConv(), CASES[0][2]()))
    (scatter,) = [g for g in plan.groups if g.kind == "kernel" and "atomic adds" in g.note]
    assert scatter.detail.get("prologue", {}).get("node") == "zeros_like", scatter.detail
    assert "self computed as copied" in scatter.note
    assert not [g for g in plan.groups if g.kind == "pointwise" and "zeros_like" in g.outputs]


@needs_nvcc
@pytest.mark.usefixtures("isolated_cache")
def test_a_graph_convolution_builds_clean_for_sm90(tmp_path):
    """The device build of a message-passing layer (gathered messages, zeros computed as copied, a
    cuBLAS Linear) compiles for sm_90 without a warning."""
    from conftest import assert_builds_clean_for_sm90
    from test_emit_gemm import cublas_include

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.message = nn.Linear(16, 16)

        def forward(self, x, src, dst):
            return torch.relu(torch.zeros_like(x).index_add_(0, dst, self.message(x)[src]) + x)

    include = cublas_include()
    if include is None:
        pytest.skip("no cublas_v2.h: set STITCHCUDA_EXTRA_INCLUDE to a folder with cuBLAS's headers")
    cand = builtin_candidate(Layer(), [torch.randn(N, 16), torch.randint(0, N, (E,)), torch.randint(0, N, (E,))],
                             host=False)
    assert "sc_wrap_index(gx[" in cand.files["fused_kernels.cu"] and " ld(o);" in cand.files["fused_kernels.cu"]
    assert_builds_clean_for_sm90(cand, tmp_path / "layer.cu", include)


class ExpertWeights(nn.Module):
    """A mixture of experts' combine weights: the router's top-2 softmax written at its experts."""

    def forward(self, logits):
        v, i = logits.topk(2, -1)
        return torch.zeros_like(logits).scatter(-1, i, v.softmax(-1)) * 3


class OneHot(nn.Module):
    """A one-hot built by hand: one number stored at each row's index (scatter.value)."""

    def forward(self, x, index):
        return x + torch.zeros_like(x).scatter(1, index.unsqueeze(1), 2.5)


class PartOfTheSource(nn.Module):
    """An index smaller than the source: PyTorch sends only the elements the index covers."""

    def forward(self, x, index, src):
        return torch.scatter(x, 1, index, src)


def _distinct(rows: int, n: int, k: int) -> torch.Tensor:
    """k distinct indices below n per row: where two name one target PyTorch leaves the result undefined."""
    return torch.rand(rows, n).argsort(1)[:, :k]


class MaskBackInOrder(nn.Module):
    """Top-p sampling's mask: decided in sorted order, put back in vocabulary order (bool values
    stored, as any dtype is where nothing is reduced)."""

    def forward(self, x):
        s, idx = torch.sort(x, dim=-1)
        remove = s.softmax(-1).cumsum(-1) <= 0.3
        return x.masked_fill(remove.scatter(1, idx, remove), -1e4)


SCATTERS = [
    (ExpertWeights, lambda: [torch.randn(64, 8)]),
    (OneHot, lambda: [torch.randn(16, 7), torch.randint(0, 7, (16,))]),
    (PartOfTheSource, lambda: [torch.randn(4, 6), _distinct(4, 6, 2), torch.randn(4, 5)]),
    (MaskBackInOrder, lambda: [torch.randn(8, 100) * 3]),
]


@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.parametrize("make,inputs", SCATTERS, ids=[c[0].__name__ for c in SCATTERS])
def test_scatters_store_and_match_pytorch(tmp_path, make, inputs):
    torch.manual_seed(0)
    module, args = make(), inputs()
    assert "scatter" in {n["op"] for n in planner.plan_graph(graph.trace_module(module, args)).graph}
    cand = builtin_candidate(module, args)
    assert "sc_scatter_add(&" not in cand.files["fused_kernels.cu"]  # stored, not added
    new, _ = load_model_new(cand, module, tmp_path)
    with torch.no_grad():
        for given in (args, inputs()):  # then other indices: read, not baked in
            torch.testing.assert_close(new(*given), module(*given), rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("reduce", ["prod", "amax", "amin"])
def test_on_the_gpu_contended_compare_and_swap_matches_pytorch(tmp_path, monkeypatch, reduce):
    """Thousands of sources onto each of 50 targets: the retry loops under contention."""
    from conftest import on_the_gpu

    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    torch.manual_seed(1)
    # (a product of 3000 values is 0 or inf in fp32: sources near 1 keep it finite)
    src = 1 + 0.001 * torch.randn(3000, 16) if reduce == "prod" else torch.randn(3000, 16)
    got, want = on_the_gpu(ScatterReduce(reduce, False), [torch.randn(50, 16), torch.randint(0, 50, (3000, 16)), src],
                           tmp_path)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("make,inputs", SCATTERS, ids=[c[0].__name__ for c in SCATTERS])
def test_on_the_gpu_scatters_match_pytorch(tmp_path, monkeypatch, make, inputs):
    from conftest import on_the_gpu

    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    torch.manual_seed(1)
    got, want = on_the_gpu(make(), inputs(), tmp_path)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@needs_nvcc
@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.parametrize("reduce", ["prod", "amax", "amin"])
def test_compare_and_swap_reductions_build_clean_for_sm90(tmp_path, reduce):
    """The device side of the retry loops (the CPU entries above take the host branch of the macro)."""
    from conftest import assert_builds_clean_for_sm90, cudnn_include_or_skip

    cand = builtin_candidate(ScatterReduce(reduce, False), _reduce_inputs()(), host=False)
    assert "atomicCAS(" in cand.files["fused_kernels.cu"]
    assert_builds_clean_for_sm90(cand, tmp_path / f"{reduce}.cu", cudnn_include_or_skip())


class Histogram(nn.Module):
    """Per-feature value histograms over a fixed range, of a strided view, normalised."""

    def forward(self, x):
        h = torch.histc(x.t() * 2, bins=16, min=-3.0, max=3.0)
        return h / h.sum().clamp(min=1)


def _histogram_input() -> torch.Tensor:
    x = torch.randn(40, 30)
    x[0, :4] = torch.tensor([1.5, -1.5, float("nan"), 4.0])  # the top and bottom edges, NaN, outside
    return x


@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.usefixtures("isolated_cache")
def test_a_histogram_over_a_fixed_range_matches_pytorch(tmp_path):
    """Counts per bin, the top edge in the last bin, NaN and values outside the range left out; a new
    input set read each call."""
    torch.manual_seed(0)
    module, x = Histogram(), _histogram_input()
    cand = builtin_candidate(module, [x])
    new, _ = load_model_new(cand, module, tmp_path)
    with torch.no_grad():
        for given in (x, torch.randn(40, 30) * 3):
            torch.testing.assert_close(new(given), module(given), rtol=0, atol=1e-7)
    raw = torch.histc(x.t() * 2, bins=16, min=-3.0, max=3.0)  # (the case holds what it is there for)
    assert raw[0] >= 1 and raw[-1] >= 1 and raw.sum() < x.numel() - 1


def test_a_histogram_of_the_datas_own_range_is_refused():
    class DataRange(nn.Module):
        def forward(self, x):
            return torch.histc(x, bins=8)  # min = max = 0: the range is the data's

    plan = planner.plan_graph(graph.trace_module(DataRange(), [torch.randn(5, 6)]))
    assert not plan.supported and any("histc's range" in r for r in plan.unsupported), plan.unsupported


@needs_nvcc
@pytest.mark.usefixtures("isolated_cache")
def test_a_histogram_builds_clean_for_sm90(tmp_path):
    from conftest import assert_builds_clean_for_sm90, cudnn_include_or_skip

    cand = builtin_candidate(Histogram(), [_histogram_input()], host=False)
    assert "atomicAdd(" in cand.files["fused_kernels.cu"]
    assert_builds_clean_for_sm90(cand, tmp_path / "histc.cu", cudnn_include_or_skip())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_the_gpu_a_histogram_matches_pytorch_exactly(tmp_path, monkeypatch):
    """Binned as PyTorch's CUDA kernel bins, in fp32: the same counts, bin for bin."""
    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    torch.manual_seed(2)
    module, x = Histogram(), _histogram_input()
    new, _ = load_model_new(builtin_candidate(module, [x], host=False), module, tmp_path)
    new = new.cuda()
    with torch.no_grad():
        for given in (x, torch.randn_like(x) * 3):
            given = given.cuda()
            torch.testing.assert_close(new(given), module(given), rtol=0, atol=0)
