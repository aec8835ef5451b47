"""nn.EmbeddingBag (aten._embedding_bag, a row of agents/coder/emit_layout.py's data-movement table): on
the CPU the candidate's host entry reads the bags as the kernel does, against PyTorch: sum, mean and
max, 1-d indices with offsets (the text-classification tutorial's model) and 2-d input, per-sample
weights, padding_idx, empty bags, include_last_offset; what it refuses."""

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

pytestmark = [pytest.mark.usefixtures("isolated_cache"), pytest.mark.nvcc, needs_nvcc]
_ids = itertools.count()


def _bags(mode: str, **kw) -> type[nn.Module]:
    class Bags(nn.Module):
        def __init__(self):
            super().__init__()
            self.bag = nn.EmbeddingBag(30, 6, mode=mode, **kw)

        def forward(self, text, offsets):
            return torch.tanh(self.bag(text, offsets)) + 1

    return Bags


class Weighted(nn.Module):
    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(30, 6, mode="sum")

    def forward(self, text, offsets, weights):
        return self.bag(text, offsets, per_sample_weights=weights)


class Fixed2d(nn.Module):
    """2-d input: every row a bag of the same length; index 0 pads."""

    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(20, 4, mode="max", padding_idx=0)

    def forward(self, x):
        return self.bag(x)


def _text():
    # Bag 2 is empty (offsets 5, 5); index 0 appears, to meet padding_idx where it is set.
    text = torch.randint(0, 30, (12,))
    text[3] = 0
    return [text, torch.tensor([0, 3, 5, 5, 9])]


CASES = {
    "sum": (_bags("sum"), _text),
    "mean, padding_idx": (_bags("mean", padding_idx=0), _text),
    "max": (_bags("max"), _text),
    "mean, include_last_offset": (_bags("mean", include_last_offset=True), lambda: [torch.randint(0, 30, (12,)), torch.tensor([0, 3, 5, 9, 12])]),
    "per-sample weights": (Weighted, lambda: [*_text(), torch.rand(12)]),
    "2-d input, max, padding_idx": (Fixed2d, lambda: [torch.randint(0, 20, (3, 5))]),
}


@pytest.mark.parametrize("make,inputs", CASES.values(), ids=CASES.keys())
def test_embedding_bags_match_pytorch(tmp_path, make, inputs):
    torch.manual_seed(0)
    module = make()
    args = inputs()
    plan = planner.plan_graph(graph.trace_module(module, args))
    assert plan.supported, plan.unsupported
    assert "_embedding_bag" in {n["op"] for n in plan.graph}
    cand = coder_builtin.build_candidate(plan, make, title="t", host=True)
    new = import_file(cand.write(tmp_path), name=f"_bag_{next(_ids)}").ModelNew()
    new.load_state_dict(module.state_dict())
    with torch.no_grad():
        for given in (args, inputs()):  # other indices, same shapes: they are read, not baked in
            torch.testing.assert_close(new(*given), module(*given), rtol=1e-5, atol=1e-6)


def test_the_bookkeeping_results_read_are_refused():
    class ReadsSizes(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(10, 3))

        def forward(self, text, offsets):
            out, _, sizes, _ = torch.ops.aten._embedding_bag(self.w, text, offsets, False, 1)
            return out * sizes[:, None]

    plan = planner.plan_graph(graph.trace_module(ReadsSizes(), [torch.randint(0, 10, (6,)), torch.tensor([0, 2, 4])]))
    assert not plan.supported and any("bookkeeping" in r for r in plan.unsupported), plan.unsupported


def test_the_tutorial_text_classifier_builds_clean_for_sm90(tmp_path):
    """The PyTorch text-classification tutorial's model: an embedding bag over 1-d text and offsets,
    then a linear layer."""
    from conftest import assert_builds_clean_for_sm90, cudnn_include_or_skip

    class TextClassifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.EmbeddingBag(50, 8)
            self.fc = nn.Linear(8, 4)

        def forward(self, text, offsets):
            return self.fc(self.embedding(text, offsets))

    include = cudnn_include_or_skip()
    args = [torch.randint(0, 50, (17,)), torch.tensor([0, 3, 9, 12])]
    plan = planner.plan_graph(graph.trace_module(TextClassifier(), args))
    assert plan.supported, plan.unsupported
    cand = coder_builtin.build_candidate(plan, TextClassifier, title="t", host=False)
    assert_builds_clean_for_sm90(cand, tmp_path / "bag.cu", include)
