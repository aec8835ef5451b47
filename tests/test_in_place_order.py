"""Reads of a tensor forward writes in place stay on their side of the write.

A training BatchNorm updates its running statistics in place, and a buffer's `mul_` traces as a
`copy_`: data flow alone does not order a read of such a tensor against the write (each read names
the buffer itself). These modules read one before or after its write; every candidate must match the
module, outputs and buffers, and the plan must say why (the order of its groups)."""

from __future__ import annotations

import copy
import itertools

import pytest
import torch
import torch.nn as nn
from conftest import needs_nvcc

from stitchcuda.agents import graph
from stitchcuda.agents.coder import builtin as coder_builtin
from stitchcuda.agents.plan import planner
from stitchcuda.task import import_file

_ids = itertools.count()


class ReadBeforeUpdate(nn.Module):
    """bn2's running_var read before bn2 runs, and the product used after it."""

    def __init__(self):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(4)
        self.bn2 = nn.BatchNorm2d(4)

    def forward(self, x):
        early = self.bn1(x) * self.bn2.running_var.view(1, -1, 1, 1)
        return early + self.bn2(x * 2)


class ReadAfterUpdate(nn.Module):
    """The running mean read after the BatchNorm that updates it."""

    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x):
        return self.bn(x), x * self.bn.running_mean.view(1, -1, 1, 1)


class BufferScaledInPlace(nn.Module):
    """A buffer read after a reduction, then scaled in place (a copy_ the plan could run first)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.full((4, 1, 1), 2.0))

    def forward(self, x):
        y = torch.relu(x.sum(dim=1, keepdim=True)) * self.scale
        self.scale.mul_(0.5)
        return y


MODULES = [ReadBeforeUpdate, ReadAfterUpdate, BufferScaledInPlace]


def _setup(make):
    torch.manual_seed(0)
    module = make()
    for b in module.buffers():  # running statistics away from their 0 and 1, so a stale read shows
        if b.dtype.is_floating_point:
            b.add_(1.5)
    return module, [torch.randn(2, 4, 5, 6)]


def _plan(module, inputs):
    # Trace a copy: tracing runs forward, which updates the buffers.
    p = planner.plan_graph(graph.trace_module(copy.deepcopy(module), inputs))
    assert p.supported, p.unsupported
    return p


def _position(p, pred) -> int:
    return next(i for i, g in enumerate(p.groups) if pred(g))


def test_a_read_before_a_batch_norm_runs_before_it_and_is_read_stored():
    p = _plan(*_setup(ReadBeforeUpdate))
    reader = _position(p, lambda g: "bn2.running_var" in g.inputs and g.kind == "pointwise")
    bn2 = _position(p, lambda g: g.kind == "kernel" and "bn2.running_var" in g.inputs)
    assert reader < bn2, [(g.kind, g.note, g.inputs) for g in p.groups]
    (stored,) = p.groups[reader].outputs
    # What reads the product after bn2 reads it stored, not computed again from the updated buffer.
    later = [g for g in p.groups[bn2:] if stored in g.inputs]
    assert later and not any("bn2.running_var" in g.inputs for g in p.groups[bn2 + 1:]), \
        [(g.kind, g.note, g.inputs) for g in p.groups]


def test_a_read_after_a_batch_norm_runs_after_it():
    p = _plan(*_setup(ReadAfterUpdate))
    bn = _position(p, lambda g: g.kind == "kernel" and "bn.running_mean" in g.inputs)
    reader = _position(p, lambda g: g.kind == "pointwise" and "bn.running_mean" in g.inputs)
    assert bn < reader, [(g.kind, g.note, g.inputs) for g in p.groups]


def test_a_buffer_written_in_place_is_written_after_its_reads():
    p = _plan(*_setup(BufferScaledInPlace))
    reader = _position(p, lambda g: "scale" in g.inputs and "copy_" not in g.note)
    writer = _position(p, lambda g: "copy_" in g.note)
    assert reader < writer, [(g.kind, g.note, g.inputs) for g in p.groups]


@needs_nvcc
@pytest.mark.parametrize("make", MODULES, ids=[m.__name__ for m in MODULES])
def test_candidates_match_the_module_and_its_buffers_on_cpu(tmp_path, make):
    """Failed before (seen 2026-11-26): each read the written value on the wrong side of the write
    (0.33, 0.50 and 12.7 off)."""
    module, inputs = _setup(make)
    cand = coder_builtin.build_candidate(_plan(module, inputs), make, title="test", host=True)
    new = import_file(cand.write(tmp_path), name=f"_in_place_{next(_ids)}").ModelNew()
    new.load_state_dict(module.state_dict())
    with torch.no_grad():
        ours, ref = new(*inputs), module(*inputs)
    ours = ours if isinstance(ours, tuple) else (ours,)
    ref = ref if isinstance(ref, tuple) else (ref,)
    for a, b in zip(ours, ref, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    for (key, a), b in zip(new.state_dict().items(), module.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5, msg=key)
