"""Modules whose __init__ copies layers (copy.deepcopy: nn.TransformerEncoder's clones) trace on the
fake tensors they are built on, and nn.TransformerEncoder's check of a mask against a causal one
(a value the trace cannot know) is taken as given (agents/graph.py). Checked through trace_task, as
`plan` and `optimize` build modules, and on the plan's math against the module."""

from __future__ import annotations

import textwrap
from pathlib import Path

import torch
from conftest import assert_planned_math_matches

from stitchcuda.agents.plan import planner
from stitchcuda.task import import_file
from stitchcuda.types import Task

_ENCODER = '''
import copy
import torch
import torch.nn as nn


class Model(nn.Module):
    """A small causal encoder as a user writes one: layer clones, a mask made in forward."""

    def __init__(self, d: int = 32, heads: int = 4, layers: int = 2):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d, heads, dim_feedforward=64, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = copy.deepcopy(nn.Linear(d, d))

    def forward(self, x):
        mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1])
        return self.head(self.encoder(x, mask=mask))


def get_inputs():
    return [torch.randn(2, 10, 32)]


def get_init_inputs():
    return []
'''


def _task(tmp_path: Path) -> Task:
    path = tmp_path / "encoder.py"
    path.write_text(textwrap.dedent(_ENCODER))
    return Task(path)


def test_layer_clones_and_a_causal_mask_plan(tmp_path):
    plan = planner.plan(_task(tmp_path))
    assert plan.supported, plan.unsupported
    assert any(n["op"] == "input" and n.get("key", "").startswith("encoder.layers.1.") for n in plan.graph)


def test_the_planned_math_is_the_module_s(tmp_path, monkeypatch):
    # (the fused attention node has no PyTorch form to render: the attention's chain as traced)
    monkeypatch.setenv(planner.FUSED_ATTENTION_ENV, "0")
    task = _task(tmp_path)
    plan = planner.plan(task)
    torch.manual_seed(0)
    module = import_file(task.path, name="_clones_encoder").Model()
    assert_planned_math_matches(plan, module, [torch.randn(2, 10, 32), torch.randn(2, 10, 32) * 3], tol=1e-4)
