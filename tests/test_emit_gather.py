"""Reads through an index, rolls, repeats, slice assignments, fills and edge padding (issue 17 item 5: what sent unseen networks
back; reflection and replication padding, as style-transfer and vocoder networks pad): each a row
of the data-movement table (agents/coder/emit_layout.py), checked on the CPU through the candidate's
host entry points against PyTorch."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn as nn
from conftest import needs_nvcc

from stitchcuda.agents import graph
from stitchcuda.agents.coder import builtin as coder_builtin
from stitchcuda.agents.plan import planner
from stitchcuda.agents.verify.static_check import check_source
from stitchcuda.task import import_file

pytestmark = [pytest.mark.usefixtures("isolated_cache"), pytest.mark.nvcc, needs_nvcc]
_ids = itertools.count()


class Roll(nn.Module):
    def forward(self, x):
        return torch.relu(torch.roll(x, shifts=(2, -3), dims=(1, 2))) + 1


class SelectColumns(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("cols", torch.tensor([4, 0, 3, 2, 0]))

    def forward(self, x):
        return x.index_select(1, self.cols) * 2


class Gather(nn.Module):
    def forward(self, x, index):
        return torch.gather(x, 2, index).sigmoid()


class Embed(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 6)

    def forward(self, ids):
        return torch.tanh(self.emb(ids))


class RelativeBias(nn.Module):
    """Swin's relative position bias: a table indexed by a buffer, then added to scores."""

    def __init__(self, n: int = 4, heads: int = 3):
        super().__init__()
        self.table = nn.Parameter(torch.randn((2 * n - 1) ** 2, heads))
        coords = torch.stack(torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")).flatten(1)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (n - 1)
        self.register_buffer("index", (rel[..., 0] * (2 * n - 1) + rel[..., 1]).flatten())
        self.n, self.heads = n * n, heads

    def forward(self, scores):
        bias = self.table[self.index].view(self.n, self.n, self.heads).permute(2, 0, 1)
        return torch.softmax(scores + bias, dim=-1)


class PickColumns(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("cols", torch.tensor([-1, 0, 2, -2]))  # advanced indexing counts from the end

    def forward(self, x):
        return x[:, self.cols] - 1


class InlineConstants(nn.Module):
    """Small tensors made in forward: an index and a scale vector (with an inf), kept by value."""

    def forward(self, x):
        picked = x[:, torch.tensor([3, 0, 2])]
        return picked * torch.tensor([1.0, float("inf"), -0.5]) + 1


class GatherFirst(nn.Module):
    """An index made in forward: int64 zeros (exact in the pointwise emitter's arithmetic)."""

    def forward(self, x):
        return torch.gather(x, 1, torch.zeros(x.shape[0], 3, dtype=torch.long)) * 2


class ZerosLike(nn.Module):
    def forward(self, x):
        return x.new_zeros(x.shape) + torch.relu(x)


class ReflectPad2d(nn.Module):
    """A style-transfer block's padding (nn.ReflectionPad2d), unequal on every side."""

    def __init__(self):
        super().__init__()
        self.pad = nn.ReflectionPad2d((1, 3, 2, 1))

    def forward(self, x):
        return torch.relu(self.pad(x))


class ReflectPad1d(nn.Module):
    def forward(self, x):
        return torch.tanh(nn.functional.pad(x, (4, 2), mode="reflect"))


class ReplicatePad3d(nn.Module):
    def forward(self, x):
        return nn.functional.pad(x, (1, 2, 0, 3, 2, 1), mode="replicate") * 2


class ReplicatePad1dStrided(nn.Module):
    """Replication padding of a transposed view: the source is read through its strides."""

    def forward(self, x):
        return nn.functional.pad(x.transpose(1, 2), (3, 3), mode="replicate") + 1


class Unfold(nn.Module):
    """F.unfold (im2col) with padding, stride and dilation, then a patch embedding's transpose."""

    def forward(self, x):
        return nn.functional.unfold(x, (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)).transpose(1, 2) * 2


CASES = [
    ("im2col", Unfold, lambda: [torch.randn(2, 3, 6, 7)]),
    ("reflection_pad2d", ReflectPad2d, lambda: [torch.randn(2, 3, 6, 7)]),
    ("reflection_pad1d", ReflectPad1d, lambda: [torch.randn(2, 3, 5)]),
    ("replication_pad3d", ReplicatePad3d, lambda: [torch.randn(2, 2, 3, 4, 5)]),
    ("replication_pad1d", ReplicatePad1dStrided, lambda: [torch.randn(2, 6, 3)]),
    ("roll", Roll, lambda: [torch.randn(2, 5, 7)]),
    ("index_select", SelectColumns, lambda: [torch.randn(3, 5, 2)]),
    ("gather", Gather, lambda: [torch.randn(2, 3, 6), torch.randint(0, 6, (2, 3, 4))]),
    ("embedding", Embed, lambda: [torch.randint(0, 10, (3, 5))]),
    ("index", RelativeBias, lambda: [torch.randn(2, 3, 16, 16)]),
    ("new_zeros", ZerosLike, lambda: [torch.randn(4, 5)]),
    ("index", PickColumns, lambda: [torch.randn(3, 6, 2)]),
    ("index", InlineConstants, lambda: [torch.randn(2, 4, 3)]),
    ("gather", GatherFirst, lambda: [torch.randn(3, 5)]),
]


@pytest.mark.parametrize("name,make,inputs", CASES, ids=[f"{c[0]}-{c[1].__name__}" for c in CASES])
def test_index_reads_rolls_and_fills_match_pytorch(tmp_path, name, make, inputs):
    torch.manual_seed(0)
    module = make()
    args = inputs()
    plan = planner.plan_graph(graph.trace_module(module, args))
    assert plan.supported, plan.unsupported
    cand = coder_builtin.build_candidate(plan, make, title="t", host=True)
    assert not [f for f in check_source(cand.files["model_new.py"]) if f.severity == "error"]
    ops = {n["op"] for n in plan.graph}
    assert name in ops, ops  # the op itself, not something it was decomposed into
    new = import_file(cand.write(tmp_path), name=f"_gather_{next(_ids)}").ModelNew()
    new.load_state_dict(module.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(new(*args), module(*args), rtol=1e-5, atol=1e-6, equal_nan=True)
        fresh = inputs()  # other values, same shapes: the indices are read, not baked in
        torch.testing.assert_close(new(*fresh), module(*fresh), rtol=1e-5, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize("name,make,inputs", CASES, ids=[f"{c[0]}-{c[1].__name__}" for c in CASES])
def test_the_batch_survives_reads_along_other_dims(name, make, inputs):
    """Each of these reads along a dimension other than the first, so the batch stays dynamic, and
    the module's rows at a sub-batch are those of the whole batch."""
    from stitchcuda.agents.coder.batch import analyse

    torch.manual_seed(0)
    module, args = make(), inputs()
    info = analyse(graph.trace_module(module, args))
    assert info.dynamic, info.reason
    with torch.no_grad():
        torch.testing.assert_close(module(*[a[1:2] for a in args]), module(*args)[1:2])


def test_a_constant_too_large_to_keep_says_so():
    class Big(nn.Module):
        def forward(self, x):
            return x + torch.arange(65.0).reshape(65, 1).expand(65, 2).contiguous().sum(1).new_tensor(list(range(65)))

    plan = planner.plan_graph(graph.trace_module(Big(), [torch.randn(65)]))
    assert not plan.supported
    assert any("only constants of up to 64 elements are" in u for u in plan.unsupported), plan.unsupported



class Tiled(nn.Module):
    """Tensor.repeat with more repeats than the source has dims: a table tiled, then added."""

    def __init__(self):
        super().__init__()
        self.table = nn.Parameter(torch.randn(3, 4))

    def forward(self, x):
        return x + self.table.repeat(2, 2, 2)


class AffineInstanceNorm(nn.Module):
    """InstanceNorm2d(affine=True) traces its weight and bias repeated once a sample (aten.repeat)
    into a batch norm over [1, N * C, H, W]: style-transfer and image-to-image generators."""

    def __init__(self, c: int = 5):
        super().__init__()
        self.norm = nn.InstanceNorm2d(c, affine=True)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return torch.relu(self.norm(x))


@pytest.mark.parametrize("make,shape", [(Tiled, (2, 6, 8)), (AffineInstanceNorm, (3, 5, 6, 7))])
def test_repeat_tiles_and_matches_pytorch(tmp_path, make, shape):
    from conftest import planned_on_the_cpu

    torch.manual_seed(0)
    module = make()
    x = torch.randn(shape)
    plan, new = planned_on_the_cpu(module, [x], tmp_path)
    assert "repeat" in {n["op"] for n in plan.graph}
    with torch.no_grad():
        for given in (x, torch.randn(shape) * 3 + 1):
            torch.testing.assert_close(new(given), module(given), rtol=1e-5, atol=1e-5)


class TemporalShift(nn.Module):
    """TSM's shift as its reference code writes it: slices of the frames assigned into zeros (traced
    as slice_scatter), a fold of channels a step back in time, one forward, the rest in place."""

    def __init__(self, segments: int = 4, fold_div: int = 4):
        super().__init__()
        self.segments, self.fold_div = segments, fold_div

    def forward(self, x):
        nt, c, h, w = x.shape
        x5 = x.view(nt // self.segments, self.segments, c, h, w)
        fold = c // self.fold_div
        out = torch.zeros_like(x5)
        out[:, :-1, :fold] = x5[:, 1:, :fold]
        out[:, 1:, fold: 2 * fold] = x5[:, :-1, fold: 2 * fold]
        out[:, :, 2 * fold:] = x5[:, :, 2 * fold:]
        return out.view(nt, c, h, w) * 2 + 1


class StridedWrite(nn.Module):
    """Every other row of a copy overwritten (a step of 2), then read whole."""

    def forward(self, x, y):
        buf = x * 1.5
        buf[:, 1::2] = torch.tanh(y)
        return buf - 0.5


@pytest.mark.parametrize("make,inputs", [
    (TemporalShift, lambda: [torch.randn(8, 8, 3, 5)]),
    (StridedWrite, lambda: [torch.randn(3, 9, 4), torch.randn(3, 4, 4)]),
])
def test_slice_assignment_matches_pytorch(tmp_path, make, inputs):
    from conftest import planned_on_the_cpu

    torch.manual_seed(0)
    module, args = make(), inputs()
    plan, new = planned_on_the_cpu(module, args, tmp_path)
    assert "slice_scatter" in {n["op"] for n in plan.graph}
    with torch.no_grad():
        for given in (args, inputs()):
            torch.testing.assert_close(new(*given), module(*given), rtol=1e-5, atol=1e-5)


class PairwisePick(nn.Module):
    """DLRM's feature interaction: the pairwise products' upper triangle picked as z[:, li, lj]."""

    def forward(self, x, li, lj):
        z = x * 2  # (in place of DLRM's bmm: the CPU entries cover our own kernels, not cuBLAS)
        return z[:, li, lj] + 1


class ApartPick(nn.Module):
    """Index tensors at dims that are not adjacent: their shape comes first in the result."""

    def forward(self, x, i, j):
        return x[i, :, j] * 3


class BroadcastPick(nn.Module):
    """Index tensors that broadcast to a grid: x[:, rows[:, None], cols[None, :]]."""

    def forward(self, x, rows, cols):
        return x[:, rows.unsqueeze(1), cols.unsqueeze(0)] - 1


@pytest.mark.parametrize("make,inputs", [
    (PairwisePick, lambda: [torch.randn(3, 5, 5), *torch.triu_indices(5, 5, 1)]),
    (ApartPick, lambda: [torch.randn(4, 3, 6), torch.randint(0, 4, (7,)), torch.randint(-6, 6, (7,))]),
    (BroadcastPick, lambda: [torch.randn(2, 6, 7), torch.randint(0, 6, (3,)), torch.randint(0, 7, (4,))]),
])
def test_several_index_tensors_match_pytorch(tmp_path, make, inputs):
    from conftest import planned_on_the_cpu

    torch.manual_seed(0)
    module, args = make(), inputs()
    plan, new = planned_on_the_cpu(module, args, tmp_path)
    assert any(n["op"] == "index" and sum(i is not None for i in n["args"]["indices"]) >= 2 for n in plan.graph)
    with torch.no_grad():
        for given in (args, inputs()):
            torch.testing.assert_close(new(*given), module(*given), rtol=1e-5, atol=1e-6)


def test_the_batch_moves_where_several_index_tensors_put_it():
    """Index tensors before the batch become their shape there (x[i, j] with the batch at dim 2 of
    [4, 5, B, 3] and i, j of shape [7]: [7, B, 3]); apart, their shape comes first: fixed size."""
    from stitchcuda.agents.coder.batch import analyse

    class Before(nn.Module):
        def __init__(self):
            super().__init__()
            self.i = torch.randint(0, 4, (7,))
            self.j = torch.randint(0, 5, (7,))

        def forward(self, x):
            return x.permute(1, 2, 0, 3)[self.i, self.j].permute(1, 0, 2) * 2

    module, x = Before(), torch.randn(6, 4, 5, 3)
    info = analyse(graph.trace_module(module, [x]))
    assert info.dynamic, info.reason
    torch.testing.assert_close(module(x[2:4]), module(x)[2:4])  # the rows are the samples'

    class Apart(Before):
        def forward(self, x):
            return x[:, self.i, :, self.j]  # [7, B, 5]: the batch no longer first

    info = analyse(graph.trace_module(Apart(), [torch.randn(6, 4, 5, 5)]))
    assert not info.dynamic and "apart" in info.reason, info.reason


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("make,inputs", [
    (AffineInstanceNorm, lambda: [torch.randn(4, 5, 30, 40)]),
    (TemporalShift, lambda: [torch.randn(8, 16, 14, 14)]),
    (StridedWrite, lambda: [torch.randn(3, 9, 40), torch.randn(3, 4, 40)]),
    (PairwisePick, lambda: [torch.randn(64, 27, 27), *torch.triu_indices(27, 27, 1)]),
    (BroadcastPick, lambda: [torch.randn(8, 60, 70), torch.randint(0, 60, (30,)), torch.randint(0, 70, (40,))]),
])
def test_on_the_gpu_repeats_slice_writes_and_picks_match(tmp_path, monkeypatch, make, inputs):
    from conftest import on_the_gpu

    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    torch.manual_seed(3)
    got, want = on_the_gpu(make(), inputs(), tmp_path)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
