"""Buffers registered with persistent=False (a rotary embedding's inv_freq, a permutation, a mask):
no state dict carries them, so the trace keeps their values up to graph.UNSAVED_BUFFER_BYTES and
ModelNew's __init__ makes them; larger ones stay unsupported, saying why. And torch.arange made in
forward (emit_layout's arange row), which rotary embeddings use for positions.

Each module is planned, built and run through the host entries against itself, on fresh inputs."""

from __future__ import annotations

import base64

import pytest
import torch
import torch.nn as nn
from conftest import builtin_candidate, load_model_new, needs_nvcc

from stitchcuda.agents import graph
from stitchcuda.agents.coder.model_new import PY_FILE
from stitchcuda.agents.plan import planner
from stitchcuda.task import find_task

pytestmark = pytest.mark.usefixtures("isolated_cache")


class Scale(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("scale", torch.linspace(0.5, 1.5, 16), persistent=False)

    def forward(self, x):
        return torch.tanh(x * self.scale)


class Rotary(nn.Module):
    """Rotary position embedding as transformer code writes it: inv_freq unsaved, positions by arange."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, 8, 2).float() / 8)), persistent=False)

    def forward(self, x):
        pos = torch.arange(x.shape[1], dtype=torch.float32)
        emb = torch.cat([torch.outer(pos, self.inv_freq)] * 2, dim=-1)
        rot = torch.cat([-x[..., 4:], x[..., :4]], dim=-1)
        return x * emb.cos() + rot * emb.sin()


class Perm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("perm", torch.tensor([3, 1, 0, 2]), persistent=False)

    def forward(self, x):
        return x.index_select(1, self.perm) * 2.0


class Mask(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("mask", torch.tensor([True, False, False, True] * 4), persistent=False)

    def forward(self, x):
        return x.masked_fill(self.mask, 0.0) + 1.0


class Stepped(nn.Module):
    """arange with start and step, float and int64 (an index)."""

    def forward(self, x):
        return x.index_select(1, torch.arange(1, 6, 2)) + torch.arange(2.5, 4.0, 0.5)


class Big(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("table", torch.randn(128, 256), persistent=False)

    def forward(self, x):
        return x + self.table


CASES = [(Scale, (4, 16)), (Rotary, (2, 6, 8)), (Perm, (2, 4, 5)), (Mask, (3, 16)), (Stepped, (2, 6, 3))]


@needs_nvcc
@pytest.mark.parametrize(("cls", "shape"), CASES, ids=[c.__name__ for c, _ in CASES])
def test_the_module_matches_itself_through_the_host_entries(tmp_path, cls, shape):
    torch.manual_seed(0)
    module = cls()
    cand = builtin_candidate(module, [torch.randn(shape)])
    new, _ = load_model_new(cand, module, tmp_path)
    # The buffers came from ModelNew's own __init__ (the weights loaded carry none of them), and
    # stay out of its state dict as they are out of the reference's.
    assert set(new.state_dict()) == set(module.state_dict())
    for name, buf in module.named_buffers():
        torch.testing.assert_close(dict(new.named_buffers())[name], buf, rtol=0, atol=0)
    for scale in (1.0, -2.0):
        x = torch.randn(shape) * scale
        torch.testing.assert_close(new(x), module(x), rtol=1e-6, atol=1e-6)


def test_the_values_travel_in_the_plan_and_the_module_source():
    nodes = graph.trace_module(Perm(), [torch.randn(2, 4, 5)])
    (buf,) = [n for n in nodes if n.get("kind") == "buffer"]
    assert buf["persistent"] is False and buf["data"]
    cand = builtin_candidate(Perm(), [torch.randn(2, 4, 5)], host=False)
    assert "_unsaved(" in cand.files[PY_FILE] and "persistent=False" in cand.files[PY_FILE]


_TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim)), persistent=False)

    def forward(self, x):
        return self.proj(x) * torch.cat([self.inv_freq, self.inv_freq]).cos()


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return [16]
'''


def test_a_task_built_on_fake_tensors_gets_the_values_from_a_real_build(tmp_path):
    # trace_task builds the module on fake tensors (no values); the unsaved buffer's come from one
    # real build on the CPU, and match the real module's.
    path = tmp_path / "rotary_task.py"
    path.write_text(_TASK)
    nodes = graph.trace_task(find_task(path))
    (buf,) = [n for n in nodes if n.get("kind") == "buffer"]
    raw = base64.b64decode(buf["data"])
    want = 1.0 / (10000 ** (torch.arange(0, 16, 2).float() / 16))
    torch.testing.assert_close(torch.frombuffer(bytearray(raw), dtype=torch.float32), want, rtol=0, atol=0)
    assert planner.plan_graph(nodes).supported


def test_a_buffer_larger_than_the_trace_keeps_stays_unsupported():
    plan = planner.plan_graph(graph.trace_module(Big(), [torch.randn(2, 128, 256)]))
    assert not plan.supported
    assert any("persistent=False" in u and "64 KiB" in u for u in plan.unsupported), plan.unsupported
