"""A forward of several kernels replays as a CUDA graph once the same buffers come back
(orchestrate._GRAPH); STITCHCUDA_CUDA_GRAPHS=0 writes no replay, so its cost on small modules can be
measured off against on (scripts/probe_ab.py)."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from conftest import assert_builds_clean_for_sm90, builtin_candidate, load_model_new, needs_nvcc
from test_emit_conv import cudnn_include

from stitchcuda.agents.coder import orchestrate


class TwoKernels(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1) * 2 + x.sum(dim=0)


@needs_nvcc
def test_the_replay_builds_for_sm90(tmp_path):
    cand = builtin_candidate(TwoKernels(), [torch.randn(4, 32)], host=False)
    assert "cudaStreamIsCapturing(s, &capturing)" in cand.files["fused_kernels.cu"]
    assert_builds_clean_for_sm90(cand, tmp_path / "k.cu", cudnn_include() or "/usr/local/cuda/include")


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


@pytest.mark.gpu
@needs_nvcc
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_the_gpu_a_users_own_capture_takes_the_kernels_as_they_are(tmp_path):
    # Eager calls until our replay is captured and running, then the user's own CUDA graph around
    # forward: the kernels go into the user's graph (no capture of ours inside it), and its replays
    # compute each new input.
    module = TwoKernels()
    cand = builtin_candidate(module, [torch.randn(4, 32)], host=False)
    assert "stitch_forward_graph" in cand.files["fused_kernels.cu"]
    new, _ = load_model_new(cand, module, tmp_path)
    new = new.cuda()
    x = torch.randn(4, 32, device="cuda")
    side = torch.cuda.Stream()
    with torch.no_grad():
        with torch.cuda.stream(side):
            for _ in range(5):
                torch.testing.assert_close(new(x), module(x.cpu()).cuda(), rtol=1e-5, atol=1e-5)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=side):
            y = new(x)
        for _ in range(3):
            x.copy_(torch.randn(4, 32))
            graph.replay()
            torch.cuda.synchronize()
            torch.testing.assert_close(y, module(x.cpu()).cuda(), rtol=1e-5, atol=1e-5)
