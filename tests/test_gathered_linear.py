"""A linear layer over concatenated gathered rows projects the rows' table before the gather
(agents/plan/gathered_linear.py): the rewritten graph computes the module, and the rewrite holds
back where it would not pay or does not apply."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn as nn
from test_conv_channels_last import planned_reference

from stitchcuda.agents import graph
from stitchcuda.agents.plan import gathered_linear, planner


@pytest.fixture(autouse=True)
def projecting(monkeypatch):
    """The rewrite is off by default (gathered_linear.PROJECT_GATHERS_ENV): these tests turn it on."""
    monkeypatch.setenv(gathered_linear.PROJECT_GATHERS_ENV, "1")


class EdgeMLP(nn.Module):
    """Message passing as PyG users write it: Linear(cat([h[row], h[col], d, e]))."""

    def __init__(self, hidden: int = 16, out: int = 16, bias: bool = True, order: str = "gathers-first"):
        super().__init__()
        self.order = order
        self.lin = nn.Linear(2 * hidden + 1 + 3, out, bias=bias)

    def forward(self, h, edge_index, e):
        row, col = edge_index[0], edge_index[1]
        d = (h[row] - h[col]).pow(2).sum(1, keepdim=True)
        if self.order == "gathers-first":
            parts = [h[row], h[col], d, e]
        else:  # the gathered blocks between the others: two runs of plain blocks
            parts = [e, h[row], d, h[col]]
        return torch.nn.functional.silu(self.lin(torch.cat(parts, dim=1)))


def _inputs(nodes: int = 12, edges: int = 60, hidden: int = 16):
    gen = torch.Generator().manual_seed(0)
    return [torch.randn(nodes, hidden, generator=gen), torch.randint(0, nodes, (2, edges), generator=gen),
            torch.randn(edges, 3, generator=gen)]


def _plan(module: nn.Module, inputs: list):
    plan = planner.plan_graph(graph.trace_module(module, inputs))
    assert plan.supported, plan.unsupported
    return plan


def _projected(plan) -> list[dict]:
    return [n for n in plan.graph if "gathered rows' blocks" in n.get("folded", "")]


CASES = [
    (lambda: EdgeMLP(), "bias, gathers first"),
    (lambda: EdgeMLP(order="interleaved"), "bias, blocks interleaved"),
    (lambda: EdgeMLP(bias=False), "no bias"),
    (lambda: EdgeMLP(bias=False, order="interleaved"), "no bias, interleaved"),
]


@pytest.mark.parametrize("make", [m for m, _ in CASES], ids=[i for _, i in CASES])
def test_the_gathered_blocks_are_projected_and_the_module_computed(make):
    torch.manual_seed(1)
    module = make()
    inputs = _inputs()
    plan = _plan(module, inputs)
    (done,) = _projected(plan)
    nodes = graph.by_name(plan.graph)
    # No concatenation as wide as the layer's input is left, and two products over the 12-row table.
    assert not [n for n in plan.graph if n["op"] == "cat" and n["shape"][1] >= 32]
    tables = [n for n in plan.graph if n["op"] in ("mm", "addmm") and n["shape"][0] == 12]
    assert len(tables) == 2, [(n["op"], n["shape"]) for n in plan.graph]
    assert nodes[done["name"]]["shape"] == [60, 16]
    (got,), (view,) = planned_reference(module, inputs)
    got = got if view is None else got.view(view["shape"])
    with torch.no_grad():
        torch.testing.assert_close(got, module(*inputs), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("nodes", "edges", "hidden", "out"), [
    (40, 60, 16, 16),  # fewer than GATHER_RATIO gathered rows a table row: the table's product is not smaller
    (12, 60, 16, 64),  # outputs wider than the gathered rows: gathering projected rows moves more bytes
], ids=["few gathered rows", "wider outputs"])
def test_it_holds_back_where_it_would_not_pay(nodes, edges, hidden, out):
    module = EdgeMLP(hidden=hidden, out=out)
    plan = _plan(module, _inputs(nodes, edges, hidden))
    assert not _projected(plan)
    assert any(n["op"] == "cat" and n["shape"][1] == 2 * hidden + 4 for n in plan.graph)


def test_the_rewrite_is_off_unless_asked_for(monkeypatch):
    """Off by default until it is measured faster (gathered_linear.PROJECT_GATHERS_ENV says why)."""
    monkeypatch.delenv(gathered_linear.PROJECT_GATHERS_ENV)
    assert not _projected(_plan(EdgeMLP(), _inputs()))
    monkeypatch.setenv(gathered_linear.PROJECT_GATHERS_ENV, "0")
    assert not _projected(_plan(EdgeMLP(), _inputs()))


class SharedGather(nn.Module):
    """The gathered rows read by another op too: the gather stays for it, the product still shrinks."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(32, 16)

    def forward(self, h, edge_index):
        hr = h[edge_index[0]]
        return self.lin(torch.cat([hr, h[edge_index[1]]], dim=1)) + hr


def test_a_gather_with_other_readers_is_kept_for_them():
    torch.manual_seed(2)
    module = SharedGather()
    inputs = _inputs()[:2]
    plan = _plan(module, inputs)
    assert _projected(plan)
    (got,), (view,) = planned_reference(module, inputs)
    got = got if view is None else got.view(view["shape"])
    with torch.no_grad():
        torch.testing.assert_close(got, module(*inputs), rtol=1e-5, atol=1e-5)


def test_the_egnn_layer_plans_with_it():
    """bench/networks2's EGNN layer, where it was found: its edge MLP's first layer projected."""
    from stitchcuda.task import import_file

    mod = import_file(Path(__file__).resolve().parent.parent / "bench" / "networks2" / "egnn_layer.py",
                      name="_egnn_gathered")
    plan = _plan(mod.Model(*mod.get_init_inputs()), mod.get_inputs())
    assert len(_projected(plan)) == 1


@pytest.mark.nvcc
def test_the_candidate_builds_for_sm90(tmp_path):
    from conftest import assert_builds_clean_for_sm90, builtin_candidate, cudnn_include_or_skip

    include = cudnn_include_or_skip()
    for k, (make, _) in enumerate(CASES):
        cand = builtin_candidate(make(), _inputs(), host=False)
        assert "projected before the gather" in cand.files["model_new.py"]
        assert_builds_clean_for_sm90(cand, tmp_path / f"c{k}.cu", include)
