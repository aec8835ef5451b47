"""Values traced twice are computed once (agents/plan/common_values.py): kernels with the same op,
operands and arguments are shared, through views of their operands; draws, in-place writes and
returned values never are. Candidates run on CPU tensors through the host entries."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import needs_nvcc, plan_of

from stitchcuda.agents import graph as graph_mod
from stitchcuda.agents.coder import builtin as coder_builtin
from stitchcuda.agents.plan import common_values
from stitchcuda.task import import_file

pytestmark = pytest.mark.usefixtures("isolated_cache")
_ids = itertools.count()


class TwoLogSoftmaxTerms(nn.Module):
    """A loss that takes log_softmax of the logits in two of its terms."""

    def forward(self, logits, target):
        nll = F.nll_loss(F.log_softmax(logits, -1), target)
        entropy = -(F.log_softmax(logits, -1).exp() * F.log_softmax(logits, -1)).sum(-1).mean()
        return nll + 0.1 * entropy


class CovarianceTwice(nn.Module):
    """`x.t() @ x` formed twice, each through a transpose of its own."""

    def forward(self, x):
        c1 = x.t() @ x
        c2 = x.t() @ x
        return (c1 - c1.diagonal().diag()).pow(2).sum() + c2.diagonal().sum()


class SharedNorm(nn.Module):
    """One weight-normalised layer applied to two inputs (a discriminator over real and fake)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.utils.parametrizations.weight_norm(nn.Conv1d(4, 8, 5, padding=2))

    def forward(self, real, fake):
        return self.conv(real).mean() - self.conv(fake).mean()


class ReturnsItTwice(nn.Module):
    def forward(self, x):
        return x.sum(-1), x.sum(-1)


class TwoDraws(nn.Module):
    def forward(self, x):
        return x + torch.rand_like(x).sum(-1, keepdim=True) - torch.rand_like(x).sum(-1, keepdim=True)


def _count(graph, op):
    return sum(1 for n in graph if n["op"] == op)


def _shared(module, inputs, op):
    traced = graph_mod.trace_module(module, inputs)
    return _count(traced, op), _count(common_values.share_common_values(traced), op)


def test_a_repeated_log_softmax_is_computed_once():
    logits, target = torch.randn(8, 50), torch.randint(0, 50, (8,))
    assert _shared(TwoLogSoftmaxTerms(), [logits, target], "_log_softmax") == (3, 1)


def test_products_over_views_of_their_own_are_compared_through_the_views():
    traced, shared = _shared(CovarianceTwice(), [torch.randn(16, 6)], "mm")
    assert (traced, shared) == (2, 1)


def test_a_layer_called_twice_normalises_its_weight_once():
    inputs = [torch.randn(2, 4, 32), torch.randn(2, 4, 32)]
    traced, shared = _shared(SharedNorm(), inputs, "_weight_norm_interface")
    assert traced == 2 and shared == 1


def test_what_forward_returns_stays_two_tensors():
    assert _shared(ReturnsItTwice(), [torch.randn(4, 9)], "sum") == (2, 2)


def test_random_draws_are_never_shared():
    traced = graph_mod.trace_module(TwoDraws(), [torch.randn(4, 9)])
    draws = [n for n in traced if n["op"] == "rand_like"]
    assert len(draws) == 2
    kept = common_values.share_common_values(traced)
    assert _count(kept, "rand_like") == 2
    # The sums of the two draws read different values: neither is shared either.
    assert _count(kept, "sum") == 2


def test_a_value_an_in_place_op_writes_is_not_shared():
    x = {"name": "x", "op": "input", "shape": [4], "stride": [1], "offset": 0, "dtype": "float32"}
    a = {"name": "a", "op": "sum", "target": "aten.sum.dim_IntList", "args": {"self": {"ref": "x"}, "dim": [0]},
         "view": False, "shape": [], "stride": [], "offset": 0, "dtype": "float32"}
    b = {**a, "name": "b"}
    w = {"name": "w", "op": "add_", "target": "aten.add_.Tensor", "args": {"self": {"ref": "b"}, "other": 1.0},
         "view": False, "shape": [], "stride": [], "offset": 0, "dtype": "float32"}
    out = {"name": "output", "op": "output", "args": {"values": [{"ref": "a"}, {"ref": "w"}]}}
    kept = common_values.share_common_values([x, a, b, w, out])
    assert [n["name"] for n in kept] == ["x", "a", "b", "w", "output"]


def test_a_draw_known_only_by_atens_tags_is_not_shared():
    """binomial is in no list of ours: ATen tags it nondeterministic_seeded."""
    x = {"name": "x", "op": "input", "shape": [4], "stride": [1], "offset": 0, "dtype": "float32"}
    a = {"name": "a", "op": "binomial", "target": "aten.binomial.default",
         "args": {"count": {"ref": "x"}, "prob": {"ref": "x"}}, "view": False, "shape": [4], "stride": [1],
         "offset": 0, "dtype": "float32"}
    b = {**a, "name": "b"}
    # Read by sums (not returned), so only the draw's own tags can keep the two apart.
    sums = [{**a, "name": f"s{k}", "op": "sum", "target": "aten.sum.default", "args": {"self": {"ref": r}},
             "shape": [], "stride": []} for k, r in enumerate("ab")]
    out = {"name": "output", "op": "output", "args": {"values": [{"ref": "s0"}, {"ref": "s1"}]}}
    kept = common_values.share_common_values([x, a, b, *sums, out])
    assert [n["name"] for n in kept] == ["x", "a", "b", "s0", "s1", "output"]


class SignedZeros(nn.Module):
    """x * 0.0 and x * -0.0 are equal in Python's eyes and not in their maxima's signs."""

    def forward(self, x):
        return 1.0 / (x * 0.0).amax(-1) - 1.0 / (x * -0.0).amax(-1)


def test_arguments_that_python_calls_equal_but_are_not_keep_their_kernels_apart():
    x = torch.rand(3, 5) + 0.5
    assert _shared(SignedZeros(), [x], "amax") == (2, 2)
    # (The module's value: 1/+0 - 1/-0 = +inf, which one shared maximum would make nan.)
    assert torch.isinf(SignedZeros()(x)).all()


class NormTwice(nn.Module):
    """A training batch norm called twice on one input: the running statistics move twice."""

    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x):
        return self.bn(x).sum(-1) + self.bn(x).sum(-1)


class StatsAroundTheNorm(nn.Module):
    """The same read of a running statistic before and after the norm updates it."""

    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x):
        a = self.bn.running_mean.cumsum(0)
        y = self.bn(x)
        return y * a, self.bn.running_mean.cumsum(0) * 1


def test_training_norms_and_reads_around_their_updates_are_not_shared():
    (norm,) = {n["op"] for n in graph_mod.trace_module(NormTwice(), [torch.randn(8, 4)]) if "batch_norm" in n["op"]}
    assert _shared(NormTwice(), [torch.randn(8, 4)], norm) == (2, 2)
    assert _shared(StatsAroundTheNorm(), [torch.randn(8, 4)], "cumsum") == (2, 2)


def test_reads_around_an_op_whose_schema_writes_an_operand_are_not_shared():
    """_native_batch_norm_legit's schema marks its running statistics written (even out of training):
    the two reads of running_mean, before and after it, are not one."""
    def node(name, op, target, args, shape):
        return {"name": name, "op": op, "target": target, "args": args, "view": False, "shape": shape,
                "stride": [1] * len(shape), "offset": 0, "dtype": "float32"}

    x = {"name": "x", "op": "input", "shape": [8, 4], "stride": [4, 1], "offset": 0, "dtype": "float32"}
    rm = {"name": "rm", "op": "input", "shape": [4], "stride": [1], "offset": 0, "dtype": "float32"}
    rv = {**rm, "name": "rv"}
    c0 = node("c0", "cumsum", "aten.cumsum.default", {"self": {"ref": "rm"}, "dim": 0}, [4])
    bn = {**node("bn", "_native_batch_norm_legit", "aten._native_batch_norm_legit.default",
                 {"input": {"ref": "x"}, "weight": None, "bias": None, "running_mean": {"ref": "rm"},
                  "running_var": {"ref": "rv"}, "training": False, "momentum": 0.1, "eps": 1e-5}, [8, 4]),
          "shape": None, "outputs": [{"shape": [8, 4], "dtype": "float32"}, None, None]}
    y = node("y", "getitem", None, {"self": {"ref": "bn"}, "index": 0}, [8, 4])
    c1 = {**c0, "name": "c1"}
    out = {"name": "output", "op": "output", "args": {"values": [{"ref": "y"}, {"ref": "s"}]}}
    s = node("s", "add", "aten.add.Tensor", {"self": {"ref": "c0"}, "other": {"ref": "c1"}}, [4])
    kept = common_values.share_common_values([x, rm, rv, c0, bn, y, c1, s, out])
    assert [n["name"] for n in kept] == ["x", "rm", "rv", "c0", "bn", "y", "c1", "s", "output"]


@needs_nvcc
@pytest.mark.parametrize("cls", [NormTwice, StatsAroundTheNorm], ids=["norm-twice", "stats-around"])
def test_candidates_with_running_statistics_match_the_module_on_cpu(cls, tmp_path):
    import copy

    module = cls()
    x = torch.randn(8, 4) * 2 + 1
    p = plan_of(copy.deepcopy(module), [x])
    cand = coder_builtin.build_candidate(p, cls, title="test", host=True)
    new = import_file(cand.write(tmp_path), name=f"_shared_{next(_ids)}").ModelNew()
    new.load_state_dict(module.state_dict())
    new.train()
    fresh = torch.randn(8, 4) * 2 + 1
    with torch.no_grad():
        got, want = new(fresh), module(fresh)
    for a, b in zip(got if isinstance(got, tuple) else [got], want if isinstance(want, tuple) else [want], strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(new.state_dict()["bn.running_mean"], module.bn.running_mean, rtol=1e-5, atol=1e-7)


def test_sharing_can_be_turned_off(monkeypatch):
    monkeypatch.setenv(common_values.SHARE_ENV, "0")
    logits, target = torch.randn(8, 50), torch.randint(0, 50, (8,))
    assert _shared(TwoLogSoftmaxTerms(), [logits, target], "_log_softmax") == (3, 3)


def test_the_plan_has_fewer_kernels():
    logits, target = torch.randn(8, 50), torch.randint(0, 50, (8,))
    on = plan_of(TwoLogSoftmaxTerms(), [logits, target])
    kernels_on = sum(1 for g in on.groups if g.kind == "kernel")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(common_values.SHARE_ENV, "0")
        off = plan_of(TwoLogSoftmaxTerms(), [logits, target])
    assert kernels_on < sum(1 for g in off.groups if g.kind == "kernel")


@needs_nvcc
def test_a_candidate_with_a_shared_softmax_matches_the_reference_on_cpu(tmp_path):
    """Every reader of the dropped log_softmax reads the kept one (host entries: reductions and
    pointwise kernels run on the CPU; library kernels do not, hence the GPU test below)."""
    module, inputs = TwoLogSoftmaxTerms(), [torch.randn(8, 50), torch.randint(0, 50, (8,))]
    p = plan_of(module, inputs)
    cand = coder_builtin.build_candidate(p, type(module), title="test", host=True)
    new = import_file(cand.write(tmp_path), name=f"_shared_{next(_ids)}").ModelNew()
    torch.testing.assert_close(new(*inputs), module(*inputs), rtol=1e-5, atol=1e-6)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize(("module", "inputs"), [
    (CovarianceTwice(), [torch.randn(16, 6)]),
    (SharedNorm(), [torch.randn(2, 4, 32), torch.randn(2, 4, 32)]),
], ids=["covariance", "weight-norm"])
def test_candidates_with_shared_library_calls_match_on_the_gpu(tmp_path, module, inputs):
    from conftest import on_the_gpu

    ours, ref = on_the_gpu(module, inputs, tmp_path)
    for a, b in zip(ours, ref, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-2, atol=1e-2 * float(b.abs().max()))  # (TF32 products)


# bench/coverage modules whose plans lose the most kernels to sharing (a CRF's repeated transitions,
# DLRM's interactions, a flow warp's grid built twice): the planned graph, rendered as PyTorch and
# run on the CPU, gives the module's outputs.
COVERAGE = Path(__file__).resolve().parent.parent / "bench" / "coverage"


@pytest.mark.parametrize("name", ["crf_nll", "dlrm_interaction", "flow_warp_grid_sample"])
def test_plans_with_shared_values_keep_the_modules_values(name):
    from stitchcuda.agents.coder.reference_math import render_reference
    from stitchcuda.agents.plan import planner
    from stitchcuda.inputs import make_inputs
    from stitchcuda.task import build_model, find_task, load_task_module

    task = find_task(COVERAGE / f"{name}.py")
    mod, cls = load_task_module(task)
    module = build_model(cls, list(getattr(mod, task.init_inputs_fn)()), 0, "cpu")
    inputs = make_inputs(getattr(mod, task.inputs_fn), 1, torch.device("cpu"))
    with torch.no_grad():
        traced = graph_mod.trace_module(module, inputs)
        assert len(common_values.share_common_values(traced)) < len(traced)
        p = planner.plan_graph(traced)
        given = [n for n in p.graph if n["op"] == "input"]
        (out,) = [n for n in p.graph if n["op"] == "output"]
        math = render_reference(p.graph, [n["name"] for n in given], [], [v["ref"] for v in out["args"]["values"]])
        scope: dict = {"torch": torch, "math": __import__("math")}
        exec(math.text, scope)  # noqa: S102 - our own rendering of the plan, as ModelNew runs it
        state = {**dict(module.named_parameters()), **dict(module.named_buffers())}
        got = scope["_reference"]([inputs[n["index"]] if n.get("kind") == "arg" else state[n["key"]] for n in given], [])
        want = module(*inputs)
    for a, b in zip(got if isinstance(got, tuple | list) else [got], want if isinstance(want, tuple) else [want],
                    strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
