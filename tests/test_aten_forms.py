"""Ops traced in forms the emitters do not know are rewritten into forms they do
(agents/plan/aten_forms.py): an in-place op on a fresh intermediate (F.cosine_similarity's clamp_min_)
and log_sigmoid_forward (F.logsigmoid). Checked on the plan and through the built candidate's CPU
entry points against PyTorch, and that an in-place write others can see is left alone."""

from __future__ import annotations

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


class CosineSimilarity(nn.Module):
    def forward(self, x):
        return nn.functional.cosine_similarity(x[:, :4], x[:, 4:], dim=1)


class LogSigmoid(nn.Module):
    def forward(self, x):
        return nn.functional.logsigmoid(x * 30.0) + 1.0  # far into both tails


CASES = {"cosine similarity": (CosineSimilarity, "clamp_min_", (3, 8)), "logsigmoid": (LogSigmoid, "log_sigmoid_forward", (4, 9))}


@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.parametrize("make,traced_op,shape", CASES.values(), ids=CASES.keys())
def test_rewritten_forms_plan_and_match_pytorch(tmp_path, make, traced_op, shape):
    torch.manual_seed(0)
    module, x = make(), torch.randn(*shape)
    traced = graph.trace_module(module, [x])
    assert traced_op in {n["op"] for n in traced}  # the form this rewrite exists for
    plan = planner.plan_graph(traced)
    assert plan.supported, plan.unsupported
    assert traced_op not in {n["op"] for n in plan.graph}
    cand = coder_builtin.build_candidate(plan, make, title="t", host=True)
    new = import_file(cand.write(tmp_path), name=f"_forms_{next(_ids)}").ModelNew()
    with torch.no_grad():
        for given in (x, torch.randn(*shape) * 10):
            torch.testing.assert_close(new(given), module(given), rtol=1e-5, atol=1e-5)


def _graph(extra_reader: bool) -> list[dict]:
    from stitchcuda.agents.graph import contiguous_strides, new_node, ref

    shape = [3, 4]

    def node(name: str, op: str, args: dict, target: str | None = None) -> dict:
        return new_node(name, op, args, shape, contiguous_strides(shape), "float32", view=False, target=target)

    g = [{"name": "x", "op": "input", "kind": "arg", "shape": shape, "dtype": "float32", "stride": [4, 1], "offset": 0},
         node("y", "mul", {"self": ref("x"), "other": 2.0}, "aten.mul.Tensor"),
         node("w", "clamp_min_", {"self": ref("y"), "min": 0.5}, "aten.clamp_min_.default")]
    if extra_reader:  # y read again: the write is seen there, so the op must stay in place
        g.append(node("z", "add", {"self": ref("y"), "other": ref("w"), "alpha": 1}, "aten.add.Tensor"))
    return g


def test_only_a_private_in_place_write_becomes_out_of_place():
    from stitchcuda.agents.plan.aten_forms import rewrite_aten_forms

    private = {n["name"]: n for n in rewrite_aten_forms(_graph(False))}
    assert private["w"]["op"] == "clamp_min" and private["w"]["target"] == "aten.clamp_min.default"
    seen = {n["name"]: n for n in rewrite_aten_forms(_graph(True))}
    assert seen["w"]["op"] == "clamp_min_"
