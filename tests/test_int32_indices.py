"""int32 index tensors (token ids from numpy or a tokenizer's int32 arrays) read by embedding,
gather, index_select and advanced indexing: the layout kernels take them as they are (emit_layout's
INDEX_DTYPES). The plan, and the candidate's CPU entry points against PyTorch."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from conftest import needs_nvcc

from stitchcuda.agents import graph
from stitchcuda.agents.plan import planner


class Picks(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 8)

    def forward(self, ids, rows, x):
        e = self.emb(ids)  # [B, T, 8]
        g = torch.gather(x, 1, rows)  # [B, 3]
        s = torch.index_select(x, 1, rows[0])  # [B, 3]
        return torch.relu(e).sum(-1), g * 2 + s, x[:, rows[1]]


def _inputs():
    return [torch.randint(-50, 50, (4, 6), dtype=torch.int32).remainder(50).to(torch.int32),
            torch.randint(0, 10, (4, 3), dtype=torch.int32), torch.randn(4, 10)]


def test_it_plans_with_int32_indices():
    plan = planner.plan_graph(graph.trace_module(Picks(), _inputs()))
    assert plan.supported, plan.unsupported


@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.nvcc
@needs_nvcc
def test_it_matches_pytorch_on_the_cpu(tmp_path):
    from conftest import planned_on_the_cpu

    torch.manual_seed(0)
    module, args = Picks(), _inputs()
    _, new = planned_on_the_cpu(module, args, tmp_path)
    with torch.no_grad():
        for given in (args, _inputs()):
            for g, w in zip(new(*given), module(*given), strict=True):
                torch.testing.assert_close(g, w, rtol=1e-6, atol=1e-6)
