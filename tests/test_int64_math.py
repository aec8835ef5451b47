"""Integer arithmetic in the pointwise kernels (codegen.INT64_POINTWISE): T5's relative-position
buckets and index arithmetic computed in int64_t as PyTorch does, exact at magnitudes a float or a
double would round, with comparisons of int64 tensors made on the integers; int32 results wrapped
to 32 bits as PyTorch's wrap; HF RoBERTa's position ids from a running count of the non-padding
mask (aten_forms' cumsum of booleans)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn
from conftest import load_model_new, needs_nvcc

from stitchcuda.agents import graph
from stitchcuda.agents.coder import builtin as coder_builtin
from stitchcuda.agents.coder import codegen
from stitchcuda.agents.plan import planner


class Buckets(nn.Module):
    """T5's bucketing of relative positions (int64 compare, cast, abs, min, where), positions given
    as an input, and hash-like index arithmetic whose products pass 2^53."""

    def forward(self, pos, x):
        t = x.shape[1]
        rel = torch.arange(t, device=x.device)[None, :] - pos[:, None]
        nb = 16
        ret = (rel > 0).to(torch.long) * nb
        n = torch.abs(rel)
        small = n < 8
        large = 8 + (torch.log(n.float() / 8) / math.log(128 / 8) * 8).to(torch.long)
        large = torch.min(large, torch.full_like(large, nb - 1))
        bucket = ret + torch.where(small, n, large)
        h = (pos * 1000003 + 7) % 4093 - torch.div(pos, 3, rounding_mode="floor") + pos // -5
        h = h + torch.remainder(-pos, 7) * torch.sign(pos) + torch.clamp(pos, min=-3, max=5)
        later = (pos + 1) > pos  # true at every magnitude; in fp32 not above 2^24
        return x * bucket.float() + h[:, None].float(), bucket, h, later


def _inputs():
    return [torch.randint(-(2**40), 2**40, (6,)), torch.randn(6, 40)]


def test_the_chain_is_planned_in_int64():
    plan = planner.plan_graph(graph.trace_module(Buckets(), _inputs()))
    assert plan.supported, plan.unsupported
    ops = " ".join(g.note for g in plan.groups if g.kind == "pointwise")
    for op in ("remainder", "floor_divide", "abs", "minimum", "where", "_to_copy"):
        assert op in ops, ops


def test_int64_entries_are_integer_expressions():
    traced = graph.trace_module(Buckets(), _inputs())
    nodes = graph.by_name(traced)
    ints = [n for n in traced if n.get("dtype") == "int64" and n["op"] in codegen.INT64_POINTWISE]
    assert {"mul", "add", "remainder", "abs", "minimum", "where", "_to_copy"} <= {n["op"] for n in ints}
    assert all(codegen.pointwise_support(n) is None for n in ints)
    # A comparison of int64 tensors is integer math; of an int64 tensor with a float scalar, not.
    gts = [n for n in traced if n["op"] == "gt"]
    assert gts and all(codegen.int_math(n, lambda s: nodes[s].get("dtype")) for n in gts)
    fake = {**gts[0], "args": {"self": gts[0]["args"]["self"], "other": 0.5}}
    assert not codegen.int_math(fake, lambda s: nodes[s].get("dtype"))
    assert codegen.c_int(-3) == "(-3LL)" and codegen.c_int(2.0) == "2LL"
    with pytest.raises(codegen.NotFusable):
        codegen.c_int(2.5)


def test_a_true_division_of_int64_is_not_an_int64_entry():
    """`a / b` of int64 tensors has a float result; the int64 table's div takes rounding modes only."""
    node = {"name": "d", "op": "div", "target": "aten.div.Tensor_mode", "dtype": "int64", "shape": [3],
            "args": {"self": {"ref": "a"}, "other": {"ref": "b"}, "rounding_mode": None}}
    assert "true division" in (codegen.pointwise_support(node) or "")


@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.nvcc
@needs_nvcc
def test_it_matches_pytorch_exactly_on_the_cpu(tmp_path):
    from conftest import planned_on_the_cpu

    torch.manual_seed(0)
    module, args = Buckets(), _inputs()
    _, new = planned_on_the_cpu(module, args, tmp_path)
    with torch.no_grad():
        for given in (args, _inputs()):
            want, got = module(*given), new(*given)
            for w, g in zip(want, got, strict=True):
                assert g.dtype == w.dtype
                if w.dtype == torch.float32:
                    torch.testing.assert_close(g, w, rtol=1e-6, atol=1e-6)
                else:
                    assert torch.equal(g, w)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_the_gpu_it_matches_pytorch_exactly(tmp_path, monkeypatch):
    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    torch.manual_seed(0)
    module, args = Buckets(), _inputs()
    cand = coder_builtin.build_candidate(planner.plan_graph(graph.trace_module(module, args)), type(module),
                                         title="t", host=False)
    new, _ = load_model_new(cand, module, tmp_path)
    with torch.no_grad():
        for given in (args, _inputs()):
            given = [a.cuda() for a in given]
            want, got = module(*given), new.cuda()(*given)
            for w, g in zip(want, got, strict=True):
                if w.dtype == torch.float32:
                    torch.testing.assert_close(g, w, rtol=1e-6, atol=1e-6)
                else:
                    assert torch.equal(g, w)


def roberta_position_ids(input_ids, padding_idx, past_key_values_length=0):
    """As HF transformers writes it (create_position_ids_from_input_ids)."""
    mask = input_ids.ne(padding_idx).int()
    incremental_indices = (torch.cumsum(mask, dim=1).type_as(mask) + past_key_values_length) * mask
    return incremental_indices.long() + padding_idx


class Positions(nn.Module):
    def __init__(self):
        super().__init__()
        self.pos = nn.Embedding(70, 8, padding_idx=1)

    def forward(self, ids, small):
        wraps = small * 100003 + 7  # int32 products past 2^31 wrap in PyTorch
        return self.pos(roberta_position_ids(ids, 1, 2)), wraps, (wraps > small).to(torch.int32) - small // 3


def _position_inputs():
    ids = torch.randint(2, 1000, (4, 50))
    ids[0, 30:] = 1
    ids[2, 5:9] = 1
    return [ids, torch.randint(-(2**20), 2**20, (4, 50), dtype=torch.int32)]


def test_the_running_count_is_a_float_scan():
    plan = planner.plan_graph(graph.trace_module(Positions(), _position_inputs()))
    assert plan.supported, plan.unsupported
    (scan,) = [g for g in plan.groups if g.kind == "kernel" and "cumsum" in g.note]
    assert "float32" in str(plan.groups) or scan.outputs[0].endswith("_scan")


@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.nvcc
@needs_nvcc
def test_positions_and_int32_match_pytorch_exactly_on_the_cpu(tmp_path):
    from conftest import planned_on_the_cpu

    torch.manual_seed(0)
    module, args = Positions(), _position_inputs()
    _, new = planned_on_the_cpu(module, args, tmp_path)
    with torch.no_grad():
        for given in (args, _position_inputs()):
            want, got = module(*given), new(*given)
            assert got[1].dtype == torch.int32 and torch.equal(got[1], want[1])
            assert torch.equal(got[2], want[2])
            torch.testing.assert_close(got[0], want[0], rtol=0, atol=0)
