"""A tensor reachable under several names: a language model's output head tied to its embedding
(`head.weight = emb.weight`), a submodule used twice, one buffer shared by two submodules. The trace
takes each tensor once (graph._tied_names), and ModelNew ties its own tensors as the module does, so
the two state dicts have the same keys and the Verifier loads the reference's weights. The plan, and
the candidate's CPU entry points against PyTorch, before and after a step that changes the tied
tensor in place."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from conftest import needs_nvcc

from stitchcuda.agents import graph
from stitchcuda.agents.plan import planner


class TiedHead(nn.Module):
    def __init__(self, vocab: int = 50, d: int = 16):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.block = nn.Linear(d, d)
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.emb.weight
        self.shared = self.block  # the same layer under a second name, called twice
        table = torch.linspace(0.5, 1.5, d)
        self.a, self.b = Scale(table), Scale(table)

    def forward(self, idx):
        h = self.emb(idx)
        h = self.a(torch.relu(self.block(h))) + self.b(self.shared(h))
        return self.head(self.ln(h))


class Scale(nn.Module):
    def __init__(self, table: torch.Tensor):
        super().__init__()
        self.register_buffer("table", table)

    def forward(self, x):
        return x * self.table


def _inputs():
    return [torch.randint(0, 50, (3, 7))]


def test_each_tensor_is_traced_once_with_its_other_names():
    module = TiedHead()
    traced = graph.trace_module(module, _inputs())
    # The module keeps its own tensors (functional_call would leave traced ones on a shared layer).
    assert all(type(v) is nn.Parameter for v in module.parameters())
    assert all(type(v) is torch.Tensor for v in module.buffers())
    state = {n["key"]: n for n in traced if n["op"] == "input" and n.get("kind") in ("param", "buffer")}
    assert set(state) == {"emb.weight", "block.weight", "block.bias", "ln.weight", "ln.bias", "a.table"}
    assert state["emb.weight"]["aliases"] == ["head.weight"]
    assert state["block.weight"]["aliases"] == ["shared.weight"] and state["a.table"]["aliases"] == ["b.table"]
    plan = planner.plan_graph(traced)
    assert plan.supported, plan.unsupported


class TiedPointwise(nn.Module):
    """The same ties read by kernels with CPU entry points (cuBLAS's GEMMs have none): the head's
    weight is the embedding's, read through a reduction; a gate module used under two names."""

    def __init__(self, vocab: int = 50, d: int = 16):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.head = nn.Module()
        self.head.weight = self.emb.weight
        self.gate = Scale(torch.linspace(0.5, 1.5, d))
        self.gate.weight = nn.Parameter(torch.randn(d))
        self.again = self.gate
        self.b = Scale(self.gate.table)
        self.c = nn.Module()  # the same tensor again, kept out of the state dict under this name
        self.c.register_buffer("table", self.gate.table, persistent=False)

    def forward(self, idx):
        h = self.emb(idx)
        h = torch.relu(h * self.gate.weight) + self.b(self.again(h))
        return h * self.head.weight.amax(0) - self.c.table


@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.nvcc
@needs_nvcc
def test_the_candidate_ties_them_too_and_matches_pytorch_on_the_cpu(tmp_path):
    from conftest import planned_on_the_cpu

    torch.manual_seed(0)
    module = TiedPointwise().eval()
    _, new = planned_on_the_cpu(module, _inputs(), tmp_path)  # (loads the module's state dict, strict)
    assert new.state_dict().keys() == module.state_dict().keys()
    assert new.head.weight is new.emb.weight and new.again.weight is new.gate.weight
    assert new.b.table is new.gate.table and new.again.table is new.gate.table and new.c.table is new.gate.table
    assert "c.table" not in new.state_dict()
    with torch.no_grad():
        for _ in range(2):
            idx = torch.randint(0, 50, (3, 7))
            torch.testing.assert_close(new(idx), module(idx), rtol=1e-5, atol=1e-5)
            # A step that changes the tied tensors through their second names, in both modules.
            for m in (module, new):
                m.head.weight.mul_(1.5)
                m.b.table.add_(0.25)
                m.again.weight.neg_()
