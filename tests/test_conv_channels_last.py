"""A convolution read only by pointwise work keeps its result channels-last (planner.channels_last_convs):
which graphs take it and which do not, that the rewritten graph still computes the module (its
reference math run on CPU tensors), that the candidate builds for sm_90 with cuDNN, and on a GPU
that the candidate matches the module and returns channels-last strides."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn as nn
from conftest import assert_builds_clean_for_sm90, builtin_candidate, load_model_new, needs_nvcc
from test_emit_conv import cudnn_include

from stitchcuda.agents import graph
from stitchcuda.agents.coder import emit_norm
from stitchcuda.agents.coder.reference_math import render_reference
from stitchcuda.agents.plan import planner

pytestmark = pytest.mark.usefixtures("isolated_cache")


@pytest.fixture(autouse=True)
def _group_norm_in_tails(monkeypatch):
    """Group norm joins a tail by default, instance norms (as group norms) only on request (they
    measured slower so): these tests keep both paths planned, rendered, built and run;
    test_tails_take_group_norm_and_not_instance_norm_by_default checks the defaults."""
    monkeypatch.setenv(planner._TAIL_GROUP_NORM_ENV, "1")
    monkeypatch.setenv(planner._TAIL_INSTANCE_NORM_ENV, "1")


class BiasReluShift(nn.Module):
    """Conv2d with bias, ReLU, a per-channel parameter [C, 1, 1] and a scalar."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.shift = nn.Parameter(torch.randn(8, 1, 1))

    def forward(self, x):
        return torch.relu(self.conv(x)) + self.shift * 0.5


class TransposedTanh(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.ConvTranspose3d(4, 6, 3, stride=2, padding=1, output_padding=1)

    def forward(self, x):
        return torch.tanh(self.conv(x) - 0.25)


class TwoOutputs(nn.Module):
    """The convolution's result and a pointwise function of it, both returned."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 1, bias=False)

    def forward(self, x):
        y = self.conv(x)
        return y, torch.sigmoid(y) * y


class MinOverChannels(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)

    def forward(self, x):
        values, where = torch.min(self.conv(x) * 2.0, dim=1, keepdim=True)
        return torch.tanh(values), where


class SoftmaxOverChannels(nn.Module):
    """softmax(dim=1) (split into logsumexp kept over the channels and exp(x - lse)), then more."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.ConvTranspose2d(3, 8, 3, stride=2)

    def forward(self, x):
        return torch.sigmoid(torch.softmax(self.conv(x), dim=1) * 2.0)


class SpatialMean(nn.Module):
    """A mean over every spatial dimension, kept: [N, C, 1, 1]."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv3d(3, 6, 3)

    def forward(self, x):
        return torch.relu(self.conv(x)).mean(dim=[2, 3, 4], keepdim=True) + 1.0


class BatchNormScale(nn.Module):
    """Training-mode BatchNorm after the conv (statistics per channel: columns of the storage)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.bn = nn.BatchNorm2d(8)

    def forward(self, x):
        return self.bn(self.conv(x)) * 2.0


class GroupNormSigmoid(nn.Module):
    """GroupNorm of 4 adjacent channels per group, between pointwise work, on a 3-D conv."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.ConvTranspose3d(3, 8, 3, stride=2)
        self.gn = nn.GroupNorm(2, 8)

    def forward(self, x):
        return torch.sigmoid(self.gn(torch.relu(self.conv(x)) * 1.5))


class NarrowGroups(nn.Module):
    """GroupNorm of 2 channels per group: 8-byte runs, most of each sector unread."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.gn = nn.GroupNorm(4, 8)

    def forward(self, x):
        return self.gn(self.conv(x))


class InstanceNormed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.norm = nn.InstanceNorm2d(8)

    def forward(self, x):
        return self.norm(self.conv(x))


class MaxPoolTail(nn.Module):
    """Pointwise work, a 2x2 max-pool, more pointwise work on the pooled (smaller) result."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)

    def forward(self, x):
        y = nn.functional.max_pool2d(nn.functional.hardswish(self.conv(x) - 0.5), 2)
        return nn.functional.mish(y)


class AvgPool3dTail(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.ConvTranspose3d(3, 6, 3, stride=2)

    def forward(self, x):
        return torch.clamp(nn.functional.avg_pool3d(self.conv(x) * 2.0, 2), -0.5, 0.5)


class PooledTimesUnpooled(nn.Module):
    """A global max-pool read with the conv's result: whichever forward computes first, the tail
    holds both (the pooled [N, C, 1, 1] broadcasts over the full shape, channels-last as well)."""

    pool_first = False

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)

    def forward(self, x):
        y = self.conv(x)
        if self.pool_first:
            p = nn.functional.adaptive_max_pool2d(y, 1)
            r = torch.relu(y)
        else:
            r = torch.relu(y)
            p = nn.functional.adaptive_max_pool2d(y, 1)
        return r * p


class PooledFirstTimesUnpooled(PooledTimesUnpooled):
    pool_first = True


class PoolIndicesReturned(nn.Module):
    """The max-pool's indices are returned (positions in an NCHW plane): the layout stays."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return nn.functional.max_pool2d(self.conv(x), 2, return_indices=True)


class MinOverWidth(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)

    def forward(self, x):
        return torch.min(self.conv(x), dim=3)[0]  # over one spatial dim: another order in NHWC


class Residual(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x)) + x  # an operand of the full shape, stored NCHW


class Flattened(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return torch.relu(self.conv(x)).flatten(1)


TAKEN = [
    (BiasReluShift, [torch.randn(2, 3, 10, 12)]),
    (TransposedTanh, [torch.randn(2, 4, 3, 4, 5)]),
    (TwoOutputs, [torch.randn(3, 4, 5, 6)]),
    (MinOverChannels, [torch.randn(2, 3, 10, 12)]),
    (SoftmaxOverChannels, [torch.randn(2, 3, 5, 7)]),
    (SpatialMean, [torch.randn(2, 3, 5, 6, 7)]),
    (BatchNormScale, [torch.randn(3, 3, 9, 10)]),
    (GroupNormSigmoid, [torch.randn(2, 3, 3, 4, 5)]),
    (MaxPoolTail, [torch.randn(2, 3, 11, 12)]),
    (AvgPool3dTail, [torch.randn(2, 3, 3, 4, 3)]),
    (PooledTimesUnpooled, [torch.randn(2, 3, 9, 10)]),
    (PooledFirstTimesUnpooled, [torch.randn(2, 3, 9, 10)]),
    # The grouped norm shape reads whole rows of channels: short groups, and an instance norm (one
    # channel a group, planner.instance_norm_as_group_norm), join the tail.
    (NarrowGroups, [torch.randn(2, 3, 10, 12)]),
    (InstanceNormed, [torch.randn(2, 3, 10, 12)]),
]
REDUCED = (MinOverChannels, SpatialMean)  # the result leaves the channels-last storage reduced
LEFT = [
    (MinOverWidth, [torch.randn(2, 3, 10, 12)]),
    (Residual, [torch.randn(2, 4, 6, 6)]),
    (Flattened, [torch.randn(2, 3, 10, 12)]),
    (PoolIndicesReturned, [torch.randn(2, 3, 10, 12)]),
]
_ids = itertools.count()


def _conv(plan):
    return next(n for n in plan.graph if n["op"] == "convolution")


@pytest.mark.parametrize(("make", "inputs"), TAKEN, ids=[m.__name__ for m, _ in TAKEN])
def test_a_conv_read_by_pointwise_work_keeps_its_result_channels_last(make, inputs):
    torch.manual_seed(0)
    module = make()
    plan = planner.plan_graph(graph.trace_module(module, inputs))
    assert plan.supported, plan.unsupported
    conv = _conv(plan)
    x = inputs[0]
    nchw = list(module.conv(x).shape)
    assert conv["args"]["channels_last"] and conv["shape"] == [nchw[0], *nchw[2:], nchw[1]]
    assert any("(channels-last result)" in g.note for g in plan.groups)
    if make in REDUCED:  # the reduction reads the channels-last storage, its dims renumbered
        assert any(g.kind == "kernel" and f"{conv['shape']} dims" in g.note for g in plan.groups), plan.groups
        return
    pointwise = [g for g in plan.groups if g.kind == "pointwise" and not g.note.endswith(" over []")]
    # over the conv's channels-last shape, or a pool's (the channels last there too)
    assert all(g.note.endswith(f", {conv['shape'][-1]}]") for g in pointwise), [g.note for g in pointwise]
    pools = [g for g in plan.groups if g.kind == "kernel" and "pool" in g.note]
    assert all("channels-last" in g.note for g in pools), [g.note for g in pools]
    norms = [g for g in plan.groups if g.kind == "kernel" and "norm" in g.note]
    assert all("channels-last" in g.note for g in norms), [g.note for g in norms]
    # forward returns a permuted view of the channels-last storage
    output = next(n for n in plan.graph if n["op"] == "output")
    returned = [plan.graph[[n["name"] for n in plan.graph].index(graph.ref_name(v))] for v in output["args"]["values"]]
    want = module(*inputs)
    want = list(want) if isinstance(want, tuple) else [want]
    assert all(n["op"] == "permute" for n in returned) and [n["shape"] for n in returned] == [list(w.shape) for w in want]


@pytest.mark.parametrize(("make", "inputs"), LEFT, ids=[m.__name__ for m, _ in LEFT])
def test_a_conv_with_any_other_reader_stays_nchw(make, inputs):
    plan = planner.plan_graph(graph.trace_module(make(), inputs))
    assert plan.supported, plan.unsupported
    assert not _conv(plan)["args"].get("channels_last")
    assert not any("channels-last result" in g.note for g in plan.groups)


@pytest.mark.parametrize("make", [NarrowGroups, InstanceNormed])
def test_without_the_grouped_shape_short_groups_and_instance_norms_stay_nchw(monkeypatch, make):
    monkeypatch.setenv(emit_norm.GROUPED_ENV, "0")
    plan = planner.plan_graph(graph.trace_module(make(), [torch.randn(2, 3, 10, 12)]))
    assert plan.supported, plan.unsupported
    assert not _conv(plan)["args"].get("channels_last")
    if make is InstanceNormed:  # and the instance norm stays the traced batch norm of a view
        assert not any(n["op"] == "native_group_norm" for n in plan.graph)


def test_an_instance_norm_becomes_a_group_norm_of_one_channel_a_group():
    plan = planner.plan_graph(graph.trace_module(InstanceNormed(), [torch.randn(2, 3, 10, 12)]))
    (gn,) = [n for n in plan.graph if n["op"] == "native_group_norm"]
    assert gn["args"]["group"] == gn["args"]["C"] == 8 and gn["args"]["HxW"] == 8 * 10
    assert not any(n["op"] == "native_batch_norm" for n in plan.graph)
    (norm,) = [g for g in plan.groups if g.kind == "kernel" and "norm" in g.note]
    assert "(grouped" in norm.note and "channels-last" in norm.note, norm.note


def test_planning_leaves_the_traced_graph_as_traced():
    traced = graph.trace_module(MaxPoolTail(), [torch.randn(2, 3, 11, 12)])
    pool = next(n for n in traced if n["op"].startswith("max_pool"))
    before = [dict(r) for r in pool["outputs"]]
    planner.plan_graph(traced)
    planner.plan_graph(traced)
    assert pool["outputs"] == before


def test_pools_can_be_left_out_of_tails(monkeypatch):
    monkeypatch.setenv(planner._TAIL_POOLS_ENV, "0")
    plan = planner.plan_graph(graph.trace_module(MaxPoolTail(), [torch.randn(2, 3, 11, 12)]))
    assert plan.supported and not _conv(plan)["args"].get("channels_last")


def test_the_exact_rungs_build_from_the_nchw_plan(tmp_path):
    """cuDNN's FMA convolutions (the Coder's exact rungs) gain nothing channels-last and would pay a
    copy (level 2's 48 and 90 on the H200: 2.0 -> 2.5 ms, 6.1 -> 7.5 ms): their candidates come
    from the plan without the layout, which the plan carries as `exact`."""
    from stitchcuda.agents.coder import builtin as coder_builtin
    from stitchcuda.agents.coder import kernels
    from stitchcuda.types import FINITE_MISS, Finding, Task, Verdict

    module, inputs = TransposedTanh(), [torch.randn(2, 4, 3, 4, 5)]
    plan = planner.plan_graph(graph.trace_module(module, inputs))
    assert _conv(plan)["args"]["channels_last"]
    assert plan.exact is not None and plan.exact.supported and not _conv(plan.exact)["args"].get("channels_last")
    assert plan.for_level(False) is plan and plan.for_level(True) is plan.exact
    # Through the Coder's ladder: a wrong TF32 result moves the next candidate to the exact rung.
    src = tmp_path / "m.py"
    src.write_text("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
                   "    def __init__(self):\n        super().__init__()\n"
                   "        self.conv = nn.ConvTranspose3d(4, 6, 3, stride=2, padding=1, output_padding=1)\n\n"
                   "    def forward(self, x):\n        return torch.tanh(self.conv(x) - 0.25)\n\n\n"
                   "def get_inputs():\n    return [torch.randn(2, 4, 3, 4, 5)]\n\n\n"
                   "def get_init_inputs():\n    return []\n")
    task = Task(path=src)
    plan = planner.plan(task)
    first = coder_builtin.code(task, plan, None)

    def y_nhwc(cand) -> str:  # sc_conv_spec's last field
        (spec,) = [ln for ln in cand.files["fused_kernels.cu"].splitlines() if "static const sc_conv_spec spec" in ln]
        return spec.rstrip().rstrip("};").split(",")[-1].strip()

    assert first.precision == "tf32" and y_nhwc(first) == "1"
    wrong = Verdict(candidate=first.name, status="incorrect", precision="tf32",
                    findings=[Finding("output-mismatch", "m", data={FINITE_MISS: True})])
    assert coder_builtin.precision_after(wrong) == kernels.PRECISE_MIXED  # (no matmul: passed over)
    second = coder_builtin.code(task, plan, wrong)
    assert second.precision == "3xtf32" and y_nhwc(second) == "0"
    # Without any convolution kept channels-last there is no second plan.
    assert planner.plan_graph(graph.trace_module(Residual(), [torch.randn(2, 4, 6, 6)])).exact is None


def test_tails_take_group_norm_and_not_instance_norm_by_default(monkeypatch):
    monkeypatch.delenv(planner._TAIL_GROUP_NORM_ENV)
    monkeypatch.delenv(planner._TAIL_INSTANCE_NORM_ENV)
    plan = planner.plan_graph(graph.trace_module(GroupNormSigmoid(), [torch.randn(2, 3, 3, 4, 5)]))
    assert plan.supported and _conv(plan)["args"]["channels_last"]
    plan = planner.plan_graph(graph.trace_module(BatchNormScale(), [torch.randn(3, 3, 9, 10)]))
    assert _conv(plan)["args"]["channels_last"]
    plan = planner.plan_graph(graph.trace_module(InstanceNormed(), [torch.randn(2, 3, 10, 12)]))
    assert plan.supported and not _conv(plan)["args"].get("channels_last")
    monkeypatch.setenv(planner._TAIL_GROUP_NORM_ENV, "0")
    plan = planner.plan_graph(graph.trace_module(GroupNormSigmoid(), [torch.randn(2, 3, 3, 4, 5)]))
    assert plan.supported and not _conv(plan)["args"].get("channels_last")


def test_the_rewrite_can_be_turned_off(monkeypatch):
    monkeypatch.setenv(planner.CONV_TAIL_ENV, "0")
    plan = planner.plan_graph(graph.trace_module(BiasReluShift(), [torch.randn(2, 3, 10, 12)]))
    assert not _conv(plan)["args"].get("channels_last")


def planned_reference(module: nn.Module, inputs: list) -> tuple[list[torch.Tensor], list[dict | None]]:
    """The module's plan rendered as aten calls and run on CPU tensors: what each returned kernel
    output stores, and the view forward returns of it (None: the output itself)."""
    g = planner.plan_graph(graph.trace_module(module, inputs)).graph
    ins = [n for n in g if n["op"] == "input" and "shape" in n]
    output = next(n for n in g if n["op"] == "output")
    nodes = graph.by_name(g)
    returns, views = [], []
    for v in output["args"]["values"]:  # the kernels' outputs, and the views forward returns of them
        view = nodes[graph.ref_name(v)]
        if view.get("view"):
            returns.append(graph.ref_name(view["args"]["self"]))
            views.append(view)
        else:
            returns.append(view["name"])
            views.append(None)
    ref = render_reference(g, [n["name"] for n in ins], [], returns)
    space: dict = {"torch": torch}
    exec(compile(ref.text, "<reference>", "exec"), space)  # noqa: S102 - the rendered module text
    state = dict(module.named_parameters()) | dict(module.named_buffers())
    values = [state[n["key"]] if n.get("kind") != "arg" else inputs[n["index"]] for n in ins]
    return space["_reference"](values, []), views


@pytest.mark.parametrize(("make", "inputs"), TAKEN, ids=[m.__name__ for m, _ in TAKEN])
def test_the_rewritten_graph_still_computes_the_module(make, inputs):
    """The plan's graph (per-channel operands as [C] over the last dimension, the permuted view
    returned) rendered as aten calls and run on CPU tensors gives the module's outputs, in
    channels-last strides."""
    torch.manual_seed(1)
    module = make()
    stored, views = planned_reference(module, inputs)
    want = module(*inputs)
    want = list(want) if isinstance(want, tuple) else [want]
    for s, view, w in zip(stored, views, want, strict=True):
        if view is None:
            got = s
        elif view["op"] == "permute":
            got = s.permute(*view["args"]["dims"])
            assert got.is_contiguous(memory_format=torch.channels_last if s.dim() == 4 else torch.channels_last_3d)
        else:  # a kept reduction: [N, spatial..., 1] is [N, 1, spatial...] element for element
            assert view["op"] == "view" and s.is_contiguous()
            got = s.view(view["args"]["size"])
        torch.testing.assert_close(got, w.detach(), rtol=1e-5, atol=1e-5)


@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.skipif(cudnn_include() is None, reason="no cudnn.h (set STITCHCUDA_EXTRA_INCLUDE to a folder with it)")
def test_channels_last_candidates_build_for_sm90(tmp_path):
    for k, (make, inputs) in enumerate(TAKEN):
        cand = builtin_candidate(make(), inputs, host=False)
        assert_builds_clean_for_sm90(cand, tmp_path / f"c{k}.cu", cudnn_include())


def logged_conv_plans(monkeypatch, nhwc_plan: str) -> None:
    """For a GPU test: kernels for this machine's GPU, conv.cuh saying which plans it keeps, and
    STITCHCUDA_CONV_NHWC as asked ("auto": unset, conv.cuh times the two)."""
    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    monkeypatch.setenv("STITCHCUDA_CONV_LOG", "1")
    if nhwc_plan == "auto":
        monkeypatch.delenv("STITCHCUDA_CONV_NHWC", raising=False)
    else:
        monkeypatch.setenv("STITCHCUDA_CONV_NHWC", nhwc_plan)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("nhwc_plan", ["1", "0", "auto"])
def test_on_the_gpu_channels_last_candidates_match_the_module(tmp_path, monkeypatch, capfd, nhwc_plan):
    """cuDNN's NHWC plan writing the result (=1), the NCHW plan with a copy (=0: what a conv runs
    where that is faster, or where cuDNN has no NHWC kernel), and the faster of the two (auto): each
    matches the module, channels-last, and says which it kept."""
    logged_conv_plans(monkeypatch, nhwc_plan)
    sources = set()
    for make, inputs in TAKEN:
        torch.manual_seed(2)
        module = make().cuda()
        cand = builtin_candidate(module.cpu(), inputs, host=False)
        sources.add("".join(v for k, v in sorted(cand.files.items()) if k.endswith(".cu")))
        module = module.cuda()
        new, _ = load_model_new(cand, module, tmp_path / f"{make.__name__}{next(_ids)}")
        new = new.cuda()
        args = [t.cuda() for t in inputs]
        with torch.no_grad():
            want = module(*args)
            for _ in range(2):
                got = new(*args)
        want = list(want) if isinstance(want, tuple) else [want]
        got = list(got) if isinstance(got, tuple | list) else [got]
        for g, w in zip(got, want, strict=True):
            torch.testing.assert_close(g, w, rtol=1e-2, atol=1e-2 * w.abs().max().item())
            assert g.dim() == 4 and g.is_contiguous(memory_format=torch.channels_last) or \
                g.dim() == 5 and g.is_contiguous(memory_format=torch.channels_last_3d)
    kept = [ln for ln in capfd.readouterr().err.splitlines() if ": channels-last result, " in ln]
    # One line per library: candidates whose kernels are byte-identical (the two read orders of
    # PooledTimesUnpooled plan the same kernels) load one library, its conv set up by the first.
    assert len(kept) == len(sources), kept
    if nhwc_plan == "0":
        assert all("result, NCHW plan and a copy" in ln for ln in kept), kept
    elif nhwc_plan == "1":
        assert all("result, cuDNN NHWC plan" in ln for ln in kept), kept


class SoftmaxOverWidth(nn.Module):
    """conv -> BN -> softmax over W -> conv (UNetSoftmax's DoubleConv): the softmax over W held every
    convolution NCHW, and cuDNN turned each one's operands to NHWC and back (0.78 of 3.79 ms on the
    H100, 2026-12-05)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 32, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(32)
        self.conv2 = nn.Conv2d(32, 8, 3, padding=1, bias=False)

    def forward(self, x):
        return self.conv2(torch.softmax(self.bn(self.conv(x)), dim=-1))


def test_a_softmax_over_width_joins_the_tail(monkeypatch):
    """By default the softmax over W reads and writes channels-last storage (its dim renumbered: W
    is dim 2 of N, H, W, C), the next convolution reads it as it is, and the softmax's kernel is the
    column one split over warps (C = 32 neighbouring outputs). With STITCHCUDA_LAYOUT_SOFTMAX=0 the
    plan is as before: every convolution NCHW."""
    from stitchcuda.agents.coder import emit_reduce

    inputs = [torch.randn(2, 3, 10, 40)]
    monkeypatch.setenv(emit_reduce.LAYOUT_SOFTMAX_ENV, "0")
    off = planner.plan_graph(graph.trace_module(SoftmaxOverWidth().eval(), inputs))
    assert not _conv(off)["args"].get("channels_last")  # (the last one's result is returned: channels-last)
    monkeypatch.delenv(emit_reduce.LAYOUT_SOFTMAX_ENV)
    plan = planner.plan_graph(graph.trace_module(SoftmaxOverWidth().eval(), inputs))
    assert plan.supported, plan.unsupported
    first, second = [n for n in plan.graph if n["op"] == "convolution"]
    assert first["args"]["channels_last"] and second["args"].get("input_channels_last"), (first["args"], second["args"])
    softmax = next(n for n in plan.graph if n["op"] == "_softmax")
    assert softmax["args"]["dim"] == 2 and softmax["shape"] == [2, 10, 40, 32], softmax
    assert any("cols split over 8 warps" in g.note for g in plan.groups), [g.note for g in plan.groups]


def test_the_softmax_over_width_plan_still_computes_the_module(monkeypatch):
    from stitchcuda.agents.coder import emit_reduce

    monkeypatch.delenv(emit_reduce.LAYOUT_SOFTMAX_ENV, raising=False)  # (the default)
    torch.manual_seed(2)
    module = SoftmaxOverWidth().eval()
    inputs = [torch.randn(2, 3, 10, 40)]
    stored, views = planned_reference(module, inputs)
    got = stored[0] if views[0] is None else stored[0].permute(*views[0]["args"]["dims"]) \
        if views[0]["op"] == "permute" else stored[0].view(views[0]["args"]["size"])
    torch.testing.assert_close(got, module(*inputs).detach(), rtol=1e-5, atol=1e-5)


@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.skipif(cudnn_include() is None, reason="no cudnn.h (set STITCHCUDA_EXTRA_INCLUDE to a folder with it)")
def test_the_softmax_over_width_candidate_builds_for_sm90(tmp_path, monkeypatch):
    from stitchcuda.agents.coder import emit_reduce

    monkeypatch.delenv(emit_reduce.LAYOUT_SOFTMAX_ENV, raising=False)  # (the default)
    cand = builtin_candidate(SoftmaxOverWidth().eval(), [torch.randn(2, 3, 10, 40)], host=False)
    assert "sc_softmax_cols_split" in cand.files[next(k for k in cand.files if k.endswith(".cu"))]
    assert_builds_clean_for_sm90(cand, tmp_path / "softmax_w.cu", cudnn_include())
