"""A cat (or stack) of rows picked from a table reads them through the index as it copies them
(planner._take_gathered_sources, emit_layout._gather_of): message passing's cat([h[row], h[col], e])
writes the concatenation once, and no kernel gathers the rows first. Checked on the CPU through the
candidate's host entry points against PyTorch (other indices on a second set: read, not baked in),
and on a GPU where one is present."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from conftest import builtin_candidate, load_model_new, needs_nvcc

from stitchcuda.agents import graph
from stitchcuda.agents.plan import planner


class EdgeCat(nn.Module):
    """Message passing's input to its edge MLP: both ends' features and the edge's own."""

    def forward(self, h, edge_index, e):
        return torch.relu(torch.cat([h[edge_index[0]], h[edge_index[1]], e * 2], dim=1))


class SelectedColumns(nn.Module):
    """index_select of a transposed table's rows, cat along dim 0 with a plain tensor."""

    def forward(self, x, idx, y):
        return torch.cat([torch.index_select(x.t(), 0, idx), y], dim=0) - 1


class PickedColumns(nn.Module):
    """x[:, idx] (the gather along dim 1), stacked with a second pick of the same table."""

    def forward(self, x, a, b):
        return torch.stack([x[:, a], x[:, b]], dim=1) * 2


class SharedRows(nn.Module):
    """The gathered rows are also returned: their kernel stays, and the cat reads them stored."""

    def forward(self, h, idx, e):
        rows = h[idx]
        return torch.cat([rows, e], dim=1), rows


class HalfRows(nn.Module):
    """fp16 rows into an fp16 cat."""

    def forward(self, h, idx, e):
        return torch.cat([h[idx], e], dim=1) * 3


N, E = 10, 37


def _edges(nodes: int = N, edges: int = E) -> torch.Tensor:
    index = torch.randint(0, nodes, (2, edges))
    index[0, :3] = torch.tensor([-1, -nodes, nodes - 1])  # negative indices count from the end, as torch's
    return index


CASES = [
    (EdgeCat, lambda: [torch.randn(N, 8), _edges(), torch.randn(E, 3)], 2),
    (SelectedColumns, lambda: [torch.randn(5, N), torch.randint(0, N, (E,)), torch.randn(4, 5)], 1),
    (PickedColumns, lambda: [torch.randn(6, N), torch.randint(0, N, (E,)), torch.randint(0, N, (E,))], 2),
    (SharedRows, lambda: [torch.randn(N, 8), torch.randint(0, N, (E,)), torch.randn(E, 3)], 0),
    (HalfRows, lambda: [torch.randn(N, 8).half(), torch.randint(0, N, (E,)), torch.randn(E, 2).half()], 1),
]
IDS = [c[0].__name__ for c in CASES]


def _cats(plan) -> list:
    return [g for g in plan.groups if g.kind == "kernel" and g.note.startswith(("cat of", "stack of"))]


def _gather_kernels(plan) -> list:
    return [g for g in plan.groups if g.kind == "kernel" and g.note.startswith(("index along", "index_select"))]


@pytest.mark.parametrize("make,inputs,picked", CASES, ids=IDS)
def test_the_rows_are_read_through_their_index(make, inputs, picked, monkeypatch):
    torch.manual_seed(0)
    plan = planner.plan_graph(graph.trace_module(make(), inputs()))
    assert plan.supported, plan.unsupported
    (cat,) = _cats(plan)
    assert len(cat.detail.get("gathers", [])) == picked, cat.detail
    assert cat.note.count("picked as read") == picked, cat.note
    # What the cat reads through an index is gathered by no kernel; what something else reads too is.
    assert len(_gather_kernels(plan)) == (1 if make is SharedRows else 0)
    monkeypatch.setenv(planner.GATHERED_SOURCES_ENV, "0")
    plan = planner.plan_graph(graph.trace_module(make(), inputs()))
    assert not any(g.detail.get("gathers") for g in plan.groups)
    assert len(_gather_kernels(plan)) == max(picked, 1 if make is SharedRows else 0)


@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.parametrize("make,inputs,picked", CASES, ids=IDS)
def test_matches_pytorch_on_the_host(tmp_path, make, inputs, picked):
    torch.manual_seed(0)
    module, args = make(), inputs()
    cand = builtin_candidate(module, args)
    new, _ = load_model_new(cand, module, tmp_path)
    with torch.no_grad():
        for given in (args, inputs()):  # then other indices: read, not baked in
            got, want = new(*given), module(*given)
            for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,),
                            strict=True):
                torch.testing.assert_close(g, w, rtol=0, atol=0)  # copies: bit for bit


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("make,inputs,picked", CASES, ids=IDS)
def test_on_the_gpu_matches_pytorch(tmp_path, monkeypatch, make, inputs, picked):
    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    torch.manual_seed(1)
    module, args = make(), inputs()
    cand = builtin_candidate(module, args, host=False)
    new, _ = load_model_new(cand, module.cuda(), tmp_path)
    new = new.cuda()
    with torch.no_grad():
        for given in (args, inputs()):
            given = [a.cuda() for a in given]
            got, want = new(*given), module(*given)
            for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,),
                            strict=True):
                torch.testing.assert_close(g, w, rtol=0, atol=0)
