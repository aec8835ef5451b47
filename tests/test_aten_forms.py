"""Ops traced in forms the emitters do not know are rewritten into forms they do
(agents/plan/aten_forms.py): an in-place op on a fresh intermediate (F.cosine_similarity's clamp_min_),
log_sigmoid_forward (F.logsigmoid), empty_like then fill or fill_ (F.binary_cross_entropy_with_logits,
F.cosine_embedding_loss), a count of bools read as a float (label-smoothed cross entropy) and booleans
cast to int64 then float (F.one_hot(i).float()). Checked on the plan and through the built
candidate's CPU entry points against PyTorch, and that an in-place write others can see is left
alone."""

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


class BCEWithLogits(nn.Module):
    """Soft targets from the other half of the input; its 1 - target is traced as empty_like, fill."""

    def forward(self, x):
        return nn.functional.binary_cross_entropy_with_logits(x[:, :4], torch.sigmoid(x[:, 4:]), reduction="none")


class CosineEmbeddingLoss(nn.Module):
    """Its 1 - cos is ATen's C++ scalar - tensor: empty_like, fill_, sub_."""

    def forward(self, x):
        target = torch.where(x[:, 0] > 0, 1.0, -1.0)
        return nn.functional.cosine_embedding_loss(x[:, 1:5], x[:, 5:], target, margin=0.1, reduction="none")


class MinMaxScale(nn.Module):
    """Min-max scaling by aminmax along a dim (keepdim), and the whole tensor's range."""

    def forward(self, x):
        lo, hi = torch.aminmax(x, dim=1, keepdim=True)
        whole = torch.aminmax(x)
        return (x - lo) / (hi - lo), whole.max - whole.min


class MaxOfAminmax(nn.Module):
    """Only one of the two results read."""

    def forward(self, x):
        return torch.aminmax(x, dim=0).max * 2


class IqrScale(nn.Module):
    """Robust scaling by torch.quantile's interquartile range (its C++ body: sort, then ceil_, lerp_
    and in-place views on its fresh intermediates) and the median."""

    def forward(self, x):
        q = torch.quantile(x, torch.tensor([0.25, 0.75]), dim=1, keepdim=True)
        med = torch.quantile(x, 0.5, dim=1, keepdim=True, interpolation="lower")
        return (x - med) / (q[1] - q[0])


class PoolUnpool(nn.Module):
    """SegNet's encoder-decoder step: max pooling with indices, work on the pooled map, max unpooling
    to the input's size (an odd width: the last column is never a maximum, so stays zero)."""

    def forward(self, x):
        y, i = nn.functional.max_pool2d(x, 2, return_indices=True)
        return nn.functional.max_unpool2d(torch.relu(y) * 2, i, 2, output_size=x.shape[-2:])


class MaxNormAndDistances(nn.Module):
    """A max-norm constraint on columns (some over it, some not) and two distances between halves."""

    def forward(self, x):
        a, b = x[:, :4], x[:, 4:]
        return torch.renorm(x * 2, p=2, dim=1, maxnorm=3.0) + torch.dist(a, b, p=1) + torch.dist(a, b)


CASES = {"cosine similarity": (CosineSimilarity, "clamp_min_", (3, 8)), "logsigmoid": (LogSigmoid, "log_sigmoid_forward", (4, 9)),
         "bce with logits": (BCEWithLogits, "empty_like", (3, 8)), "cosine embedding loss": (CosineEmbeddingLoss, "fill_", (6, 9)),
         "aminmax": (MinMaxScale, "aminmax", (5, 7)), "one result of aminmax": (MaxOfAminmax, "aminmax", (6, 4)),
         "quantiles": (IqrScale, "lerp_", (6, 37)), "max unpooling": (PoolUnpool, "max_unpool2d", (2, 3, 8, 9)),
         "renorm and dist": (MaxNormAndDistances, "renorm", (3, 8))}


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


def _split_graph(whole_reader: bool) -> list[dict]:
    """nn.LSTMCell's form as its C++ body leaves it (user code's in-place ops are functionalised into
    slice_scatters by the trace): a fresh [3, 8] matrix, split in two, sigmoid_ on one piece and
    tanh_ on the other, their product. whole_reader: the matrix is also returned."""
    from stitchcuda.agents.graph import new_node, ref

    def node(name, op, args, shape, stride, view=False, offset=0):
        return new_node(name, op, args, shape or [], stride or [], "float32", view=view, offset=offset)

    g = [{"name": "x", "op": "input", "kind": "arg", "shape": [3, 8], "dtype": "float32", "stride": [8, 1], "offset": 0},
         node("m", "mul", {"self": ref("x"), "other": 2.0}, [3, 8], [8, 1]),
         node("parts", "split", {"self": ref("m"), "split_size": 4, "dim": 1}, None, None, view=True),
         node("p0", "getitem", {"self": ref("m"), "index": 0}, [3, 4], [8, 1], view=True),
         node("p1", "getitem", {"self": ref("m"), "index": 1}, [3, 4], [8, 1], view=True, offset=4),
         node("s", "sigmoid_", {"self": ref("p0")}, [3, 4], [8, 1]),
         node("t", "tanh_", {"self": ref("p1")}, [3, 4], [8, 1], offset=4),
         node("y", "mul", {"self": ref("s"), "other": ref("t")}, [3, 4], [4, 1])]
    g.append({"name": "output", "op": "output",
              "args": {"values": [ref("y"), *([ref("m")] if whole_reader else [])]}})
    return g


def test_in_place_ops_on_split_pieces_become_out_of_place_unless_the_whole_is_read():
    from stitchcuda.agents.plan.aten_forms import rewrite_aten_forms

    done = {n["name"]: n for n in rewrite_aten_forms(_split_graph(False))}
    assert (done["s"]["op"], done["t"]["op"]) == ("sigmoid", "tanh")
    assert done["t"]["target"] == "aten.tanh.default"
    # A new tensor now, not the piece's place in the matrix.
    assert (done["t"]["stride"], done["t"]["offset"], done["t"]["view"]) == ([4, 1], 0, False)
    kept = {n["name"]: n for n in rewrite_aten_forms(_split_graph(True))}
    assert (kept["s"]["op"], kept["t"]["op"]) == ("sigmoid_", "tanh_")


def test_lstm_cell_plans():
    """nn.LSTMCell: its gates' in-place activations on the chunks of one matrix become out of place,
    and the cell plans whole (two GEMMs and one pointwise kernel)."""
    traced = graph.trace_module(nn.LSTMCell(8, 16), [torch.randn(4, 8)])
    assert {"sigmoid_", "tanh_"} <= {n["op"] for n in traced}
    plan = planner.plan_graph(traced)
    assert plan.supported, plan.unsupported
    assert not {"sigmoid_", "tanh_"} & {n["op"] for n in plan.graph}
    assert [g.kind for g in plan.groups].count("pointwise") >= 1


def test_a_tuple_of_tensors_as_one_argument_is_refused_plainly():
    with pytest.raises(graph.TraceError, match="argument 1 is a tuple of tensors"):
        graph.trace_module(nn.LSTMCell(8, 16), [torch.randn(4, 8), (torch.randn(4, 16), torch.randn(4, 16))])


class CellWithState(nn.Module):
    """nn.LSTMCell with its state passed as two tensors, as a user would wrap it."""

    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.LSTMCell(24, 32)

    def forward(self, x, h, c):
        return self.cell(x, (h, c))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_the_gpu_an_lstm_cell_matches(tmp_path, monkeypatch):
    from conftest import builtin_candidate, outputs_on_the_gpu

    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    torch.manual_seed(1)
    cell = CellWithState()
    shapes = [(8, 24), (8, 32), (8, 32)]
    cand = builtin_candidate(cell, [torch.randn(s) for s in shapes], host=False)
    got, want = outputs_on_the_gpu(cand, cell, [torch.randn(s) for s in shapes], tmp_path)
    for g, w in zip(got, want, strict=True):  # TF32 matmuls: KernelBench's 1e-2
        torch.testing.assert_close(g, w, rtol=1e-2, atol=1e-2)


class SmoothedCrossEntropy(nn.Module):
    """nn.CrossEntropyLoss(label_smoothing=...) counts the targets it does not ignore: a sum of bools."""

    def __init__(self):
        super().__init__()
        self.loss = nn.CrossEntropyLoss(label_smoothing=0.1, ignore_index=-100)

    def forward(self, logits, target):
        return self.loss(logits, target)


@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.nvcc
@needs_nvcc
def test_a_count_of_bools_is_summed_in_float_and_matches_pytorch(tmp_path):
    torch.manual_seed(0)
    module = SmoothedCrossEntropy()

    def inputs() -> list[torch.Tensor]:
        target = torch.randint(0, 7, (12,))
        target[torch.rand(12) < 0.3] = -100  # some ignored: the count is not the batch
        return [torch.randn(12, 7) * 3, target]

    args = inputs()
    traced = graph.trace_module(module, args)
    assert any(n["op"] == "sum" and n.get("dtype") == "int64" for n in traced)  # the form this rewrite exists for
    plan = planner.plan_graph(traced)
    assert plan.supported, plan.unsupported
    assert not any(n["op"] == "sum" and n.get("dtype") == "int64" for n in plan.graph)
    cand = coder_builtin.build_candidate(plan, SmoothedCrossEntropy, title="t", host=True)
    new = import_file(cand.write(tmp_path), name=f"_forms_{next(_ids)}").ModelNew()
    with torch.no_grad():
        for given in (args, inputs()):
            torch.testing.assert_close(new(*given), module(*given), rtol=1e-5, atol=1e-5)


def test_a_count_read_as_an_integer_stays_an_integer():
    """Where the count is returned (or read by integer arithmetic), it is summed in float32 and cast
    back to the same int64 (tests/test_counts.py runs it)."""

    class Count(nn.Module):
        def forward(self, x):
            return (x > 0).sum(), x * 2

    traced = graph.trace_module(Count(), [torch.randn(4, 5)])
    plan = planner.plan_graph(traced)
    assert plan.supported, plan.unsupported
    nodes = {n["name"]: n for n in plan.graph}
    out = nodes[[n for n in plan.graph if n["op"] == "output"][0]["args"]["values"][0]["ref"]]
    assert out["op"] == "_to_copy" and out["dtype"] == "int64"
    assert nodes[out["args"]["self"]["ref"]]["op"] == "sum" and nodes[out["args"]["self"]["ref"]]["dtype"] == "float32"


class OneHot(nn.Module):
    """F.one_hot's int64 result made float, through a permute (a Dice loss's target)."""

    def forward(self, x):
        return nn.functional.one_hot(x.argmax(-1), x.shape[-1]).permute(0, 2, 1).float() * 2 + 1


@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.nvcc
@needs_nvcc
def test_a_one_hot_made_float_is_cast_once_and_matches_pytorch(tmp_path):
    from conftest import planned_on_the_cpu

    torch.manual_seed(0)
    module, x = OneHot(), torch.randn(3, 5, 6)
    traced = graph.trace_module(module, [x])
    assert any(n["op"] == "_to_copy" and n.get("dtype") == "int64" for n in traced)  # the form this exists for
    plan, new = planned_on_the_cpu(module, [x], tmp_path)
    assert not any(n.get("dtype") == "int64" and n["op"] == "_to_copy" for n in plan.graph)
    with torch.no_grad():
        for given in (x, torch.randn(3, 5, 6)):
            torch.testing.assert_close(new(given), module(given))


def test_an_int64_cast_read_as_an_integer_stays():
    class Both(nn.Module):
        def forward(self, x):
            i = (x > 0).long()
            return i.float() * 2, i + 1

    plan = planner.plan_graph(graph.trace_module(Both(), [torch.randn(4, 5)]))
    assert any(n["op"] == "_to_copy" and n.get("dtype") == "int64" for n in plan.graph)


class BilinearHead(nn.Module):
    """nn.Bilinear on a sequence's features (a view of [B, T, I] as rows), then a ReLU."""

    def __init__(self):
        super().__init__()
        self.bil = nn.Bilinear(6, 9, 4)

    def forward(self, a, b):
        return torch.relu(self.bil(a, b))


def test_bilinear_is_one_gemm_then_a_product_summed_and_means_the_same():
    """F.bilinear's _trilinear becomes a GEMM of x1 with the weight laid out [I, O * J], then the
    product with x2 summed over J: the rewritten graph, run as PyTorch code, gives nn.Bilinear's
    result."""
    import math

    from stitchcuda.agents.coder.reference_math import render_reference
    from stitchcuda.agents.graph import ref_name

    torch.manual_seed(0)
    module, a, b = BilinearHead(), torch.randn(2, 5, 6), torch.randn(2, 5, 9)
    plan = planner.plan_graph(graph.trace_module(module, [a, b]))
    assert plan.supported, plan.unsupported
    ops = [n["op"] for n in plan.graph]
    assert "_trilinear" not in ops and "mm" in ops
    assert any(g.kind == "kernel" and g.note.startswith("mm ") for g in plan.groups), [g.note for g in plan.groups]
    out = next(n for n in plan.graph if n["op"] == "output")
    math_ = render_reference(plan.graph, ["a", "b"], ["bil.weight", "bil.bias"],
                             [ref_name(v) for v in out["args"]["values"]])
    space: dict = {"torch": torch, "math": math}
    exec(math_.text, space)
    with torch.no_grad():
        for x, y in ((a, b), (torch.randn(2, 5, 6) * 3, torch.randn(2, 5, 9))):
            got = space["_reference"]([x, y], [module.bil.weight, module.bil.bias])[0]
            torch.testing.assert_close(got, module(x, y), rtol=1e-5, atol=1e-5)


@needs_nvcc
@pytest.mark.usefixtures("isolated_cache")
def test_bilinear_builds_clean_for_sm90(tmp_path):
    from conftest import assert_builds_clean_for_sm90, builtin_candidate, cudnn_include_or_skip

    cand = builtin_candidate(BilinearHead(), [torch.randn(2, 5, 6), torch.randn(2, 5, 9)], host=False)
    assert_builds_clean_for_sm90(cand, tmp_path / "bilinear.cu", cudnn_include_or_skip())


@needs_nvcc
@pytest.mark.usefixtures("isolated_cache")
def test_max_unpooling_builds_clean_for_sm90(tmp_path):
    from conftest import assert_builds_clean_for_sm90, builtin_candidate, cudnn_include_or_skip

    cand = builtin_candidate(PoolUnpool(), [torch.randn(2, 3, 8, 9)], host=False)
    assert_builds_clean_for_sm90(cand, tmp_path / "unpool.cu", cudnn_include_or_skip())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("make,shapes,tol", [
    (BilinearHead, [(2, 5, 6), (2, 5, 9)], 1e-2),  # a TF32 matmul: KernelBench's 1e-2
    (PoolUnpool, [(4, 16, 32, 33)], 1e-5),
], ids=["bilinear", "max unpooling"])
def test_on_the_gpu_rewritten_forms_match(tmp_path, monkeypatch, make, shapes, tol):
    from conftest import builtin_candidate, outputs_on_the_gpu

    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    torch.manual_seed(1)
    module, args = make(), [torch.randn(s) for s in shapes]
    got, want = outputs_on_the_gpu(builtin_candidate(module, args, host=False), module, args, tmp_path)
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)
