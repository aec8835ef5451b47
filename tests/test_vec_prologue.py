"""Norms that read their operand's pointwise chain through a vector loader (codegen.Prologue.vec):
the inputs read at the element itself come as one vector load per VEC elements, so a norm keeps
its VEC with a prologue, and the split shape (rows too long for registers: two passes over chunks)
takes one too, instead of a pointwise kernel writing the chain for it to read back (issue 16: the
bias of a convolution stored as a pass of its own before GroupNorm in level 2's 85 and 92).

Whole candidates run on CPU tensors through the host entries, which run the same templates (the
vector path included where the pointers are aligned); the plans and sources are checked for what
was stored and how it was read."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn as nn
from conftest import (
    assert_builds_clean_for_sm90,
    builtin_candidate,
    load_model_new,
    needs_nvcc,
    on_the_gpu,
    plan_of,
)
from test_emit_conv import cudnn_include

from stitchcuda.agents import graph
from stitchcuda.agents.coder import builtin as coder_builtin
from stitchcuda.agents.coder import emit_norm

pytestmark = pytest.mark.usefixtures("isolated_cache")


class BiasGroupNorm(nn.Module):
    """A per-channel bias (a convolution's, as the planner splits it off), then GroupNorm: the
    channel changes inside a row, and inside a vector where H*W is odd."""

    def __init__(self, channels=8, groups=2):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(channels, 1, 1))
        self.norm = nn.GroupNorm(groups, channels)

    def forward(self, x):
        return self.norm(x + self.bias)


class ReluBatchNorm(nn.Module):
    def __init__(self, channels=3):
        super().__init__()
        self.shift = nn.Parameter(torch.randn(channels, 1, 1))
        self.norm = nn.BatchNorm2d(channels)

    def forward(self, x):
        return self.norm(torch.relu(x - self.shift)) * 2.0


class HalfSiluLayerNorm(nn.Module):
    def __init__(self, n=20000):
        super().__init__()
        self.norm = nn.LayerNorm(n)

    def forward(self, x):
        return self.norm(torch.nn.functional.silu(x))


class BroadcastOnly(nn.Module):
    """The chain reads no input at the element itself (a row's value broadcast over the row): no
    vector loader, so the split shape stores it as before."""

    def forward(self, x):
        return torch.nn.functional.group_norm(x.expand(2, 4, 150, 70) * 2.0, 1)


# (module, inputs, kernel shape, VEC the norm keeps): rows long enough for the split shape except
# the fused one; odd H*W keeps VEC 1 (a vector would leave a channel's run).
CASES = [
    (BiasGroupNorm(), [torch.randn(2, 8, 48, 100)], "split", 4),
    (BiasGroupNorm(6, 3), [torch.randn(3, 6, 97, 101)], "split", 1),
    (BiasGroupNorm(), [torch.randn(2, 8, 6, 10)], "fused", 4),
    (ReluBatchNorm(), [torch.randn(8, 3, 48, 48)], "split", 4),
    (ReluBatchNorm(), [torch.randn(8, 3, 45, 47)], "split", 1),
    (HalfSiluLayerNorm(), [torch.randn(3, 20000)], "split", 4),
]
IDS = ["gn-bias-split", "gn-bias-split-odd", "gn-bias-fused", "bn-relu-split", "bn-relu-split-odd", "ln-silu-split"]


_plan = plan_of


def _norm(p):
    (norm,) = [g for g in p.groups if g.kind == "kernel"]
    return norm


@pytest.mark.parametrize(("module", "inputs", "shape", "vec"), CASES, ids=IDS)
def test_the_norm_reads_the_chain_through_vectors(module, inputs, shape, vec):
    p = _plan(module, inputs)
    norm = _norm(p)
    assert shape in norm.note and "prologue" in norm.note, norm.note
    nodes = graph.by_name(p.graph)
    # Nothing pointwise stored before it: the norm reads the module's own tensors.
    assert all(nodes[n]["op"] == "input" for n in norm.inputs), norm.inputs
    cand = coder_builtin.build_candidate(p, type(module), title="test", host=True)
    source = cand.files["fused_kernels.cu"]
    assert re.search(rf"VMAX = {vec}\b", source), re.findall(r"VMAX = \d+", source)
    # The loader's vector path loads the element's own input as one vector.
    assert "template <int VEC> SC_INLINE sc_vec<float, VEC> vec(int64_t base) const" in source
    assert re.search(r"const sc_vec<float, VEC> in\d+_v = sc_load<VEC>\(in\d+ \+ base\);", source)


@pytest.mark.parametrize(("module", "inputs", "shape", "vec"), CASES[:2], ids=IDS[:2])
def test_without_vector_loaders_the_split_norm_reads_the_chain_stored(monkeypatch, module, inputs, shape, vec):
    monkeypatch.setenv(emit_norm.VEC_PROLOGUE_ENV, "0")
    p = _plan(module, inputs)
    norm = _norm(p)
    assert "split" in norm.note and "prologue" not in norm.note
    assert [g.kind for g in p.groups] == ["pointwise", "kernel"]


def test_a_chain_with_no_input_at_the_element_has_no_vector_loader():
    p = _plan(BroadcastOnly(), [torch.randn(1, 4, 150, 70)])
    norm = _norm(p)
    assert "split" in norm.note and "prologue" not in norm.note


@needs_nvcc
@pytest.mark.parametrize(("module", "inputs", "shape", "vec"), CASES, ids=IDS)
def test_candidates_match_the_reference_on_cpu(tmp_path, module, inputs, shape, vec):
    new, _ = load_model_new(builtin_candidate(module, inputs), module, tmp_path)
    for x in (inputs[0], inputs[0] * 3.0 - 1.0):
        ours, ref = new(x), module(x)
        torch.testing.assert_close(ours, ref, rtol=1e-4, atol=1e-4 * float(ref.detach().abs().max()))
    # Training-mode statistics went the same way (BatchNorm's running ones).
    for a, b in zip(new.buffers(), module.buffers(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    # A misaligned operand takes the element-by-element path and gives the same result.
    if vec > 1:
        odd = torch.empty(inputs[0].numel() + 1)[1:].view_as(inputs[0]).copy_(inputs[0])
        torch.testing.assert_close(new(odd), module(odd), rtol=1e-4, atol=1e-4 * float(module(odd).detach().abs().max()))


@needs_nvcc
def test_the_vector_loaders_build_for_sm90_without_warnings(tmp_path):
    include = cudnn_include()
    if include is None:
        pytest.skip("no cudnn.h (set STITCHCUDA_EXTRA_INCLUDE)")
    for k, (module, inputs, _, _) in enumerate(CASES):
        cand = coder_builtin.build_candidate(_plan(module, inputs), type(module), title="test", host=False)
        assert_builds_clean_for_sm90(cand, tmp_path / f"k{k}.cu", include)


class BiasLse(nn.Module):
    """A bias and an activation before a logsumexp over contiguous rows (odd length: heads and tails)."""

    def __init__(self, n=37):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(n))

    def forward(self, x):
        return torch.logsumexp(torch.relu(x) + self.bias, dim=-1)


class ScaledSoftmaxRows(nn.Module):
    """A scale before a softmax whose result is read through a reshape: the softmax kernel keeps its
    prologue and reads it in vectors in both passes."""

    def forward(self, x):
        return torch.softmax(x.view(x.shape[0], -1) * 0.5, dim=-1).view(x.shape) * 2.0


ROWS = [(BiasLse(), [torch.randn(6, 37)], "rows tpr"), (ScaledSoftmaxRows(), [torch.randn(3, 8, 64)], "rows two passes")]


@pytest.mark.parametrize(("module", "inputs", "what"), ROWS, ids=["lse", "softmax"])
def test_row_reductions_and_softmax_read_the_loaders_vectors(monkeypatch, tmp_path, module, inputs, what):
    norm = _norm(_plan(module, inputs))
    assert what in norm.note and "vec 4" in norm.note and "prologue" in norm.note, norm.note
    monkeypatch.setenv(emit_norm.VEC_PROLOGUE_ENV, "0")
    assert "vec 1" in _norm(_plan(module, inputs)).note
    monkeypatch.delenv(emit_norm.VEC_PROLOGUE_ENV)
    include = cudnn_include()
    if include is None:
        pytest.skip("no cudnn.h (set STITCHCUDA_EXTRA_INCLUDE)")
    cand = coder_builtin.build_candidate(_plan(module, inputs), type(module), title="test", host=False)
    assert_builds_clean_for_sm90(cand, tmp_path / "k.cu", include)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize(("module", "inputs"), [c[:2] for c in CASES] + [r[:2] for r in ROWS],
                         ids=[*IDS, "lse", "softmax"])
def test_candidates_match_the_reference_on_the_gpu(tmp_path, module, inputs):
    """The device kernels' vector reads (fused, split, column norms; row reductions; the softmax's
    two passes), which the host entries run only in part."""
    (ours,), (ref,) = on_the_gpu(module, inputs, tmp_path)
    torch.testing.assert_close(ours, ref, rtol=1e-4, atol=1e-4 * float(ref.abs().max()))
