"""A forward of several kernels replays as a CUDA graph once the same buffers come back
(orchestrate._GRAPH); STITCHCUDA_CUDA_GRAPHS=0 writes no replay, so its cost on small modules can be
measured off against on (scripts/probe_ab.py)."""

from __future__ import annotations

import torch
import torch.nn as nn
from conftest import builtin_candidate

from stitchcuda.agents.coder import orchestrate


class TwoKernels(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1) * 2 + x.sum(dim=0)


def test_several_kernels_replay_as_a_graph_unless_switched_off(monkeypatch):
    on = builtin_candidate(TwoKernels(), [torch.randn(4, 32)], host=False)
    assert "stitch_forward_graph" in on.files["fused_kernels.cu"]
    assert "'stitch_forward_graph'" in on.files["model_new.py"]
    monkeypatch.setenv(orchestrate.GRAPHS_ENV, "0")
    off = builtin_candidate(TwoKernels(), [torch.randn(4, 32)], host=False)
    assert "stitch_forward_graph" not in off.files["fused_kernels.cu"]
    assert "'stitch_forward_graph'" not in off.files["model_new.py"] and "'stitch_forward'" in off.files["model_new.py"]


class OneKernel(nn.Module):
    def forward(self, x):
        return torch.sigmoid(x) * x + 1.0


def test_one_kernel_launches_directly_unless_asked_to_replay(monkeypatch):
    monkeypatch.delenv(orchestrate.GRAPH_ONE_ENV, raising=False)
    direct = builtin_candidate(OneKernel(), [torch.randn(4, 32)], host=False)
    assert "stitch_forward_graph" not in direct.files["fused_kernels.cu"]
    assert "'stitch_forward'" in direct.files["model_new.py"]
    monkeypatch.setenv(orchestrate.GRAPH_ONE_ENV, "1")
    replayed = builtin_candidate(OneKernel(), [torch.randn(4, 32)], host=False)
    assert "stitch_forward_graph" in replayed.files["fused_kernels.cu"]
    assert "'stitch_forward_graph'" in replayed.files["model_new.py"]
