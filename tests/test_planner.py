"""Tracing to a node list, and grouping pointwise ops into fusion groups (on graphs, not strings)."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import KERNELBENCH

from stitchcuda.agents import graph
from stitchcuda.agents.graph import ref
from stitchcuda.agents.plan import planner
from stitchcuda.task import find_task


def plan_module(module: nn.Module, *inputs):
    return planner.plan_graph(graph.trace_module(module, list(inputs)))


def ops_of(p, group) -> list[str]:
    nodes = graph.by_name(p.graph)
    return [nodes[n]["op"] for n in group.nodes if not nodes[n].get("view")]


class Chain(nn.Module):
    def forward(self, x):
        return torch.tanh(F.gelu(torch.relu(x) * 2.0 - 1.0)) + torch.sigmoid(x)


class BiasChain(nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(8, 1, 1))

    def forward(self, x):
        return F.hardswish(x + self.bias) * 0.5


class ConvRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.bias = nn.Parameter(torch.randn(8, 1, 1))

    def forward(self, x):
        return torch.relu(self.conv(x * 2) + self.bias)


class Branchy(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x


def test_trace_gives_a_serialisable_graph_with_named_inputs():
    nodes = graph.trace_module(BiasChain(), [torch.randn(2, 8, 4, 4)])
    json.dumps(nodes)  # plain data, fit for plan.json
    first = graph.by_name(nodes)
    assert first["bias"] == {
        "name": "bias", "op": "input", "kind": "param", "key": "bias", "persistent": True,
        "shape": [8, 1, 1], "dtype": "float32", "stride": [1, 1, 1], "offset": 0,
    }  # fmt: skip
    assert first["x"]["kind"] == "arg" and first["x"]["index"] == 0
    add = next(n for n in nodes if n["op"] == "add")
    assert add["target"] == "aten.add.Tensor"
    assert add["args"] == {"self": ref("x"), "other": ref("bias"), "alpha": 1}  # defaults filled in
    assert add["shape"] == [2, 8, 4, 4] and add["dtype"] == "float32" and add["stride"] == [128, 16, 4, 1]
    assert nodes[-1]["op"] == "output" and nodes[-1]["structure"] == "single"


def test_trace_uses_fake_tensors_so_huge_inputs_cost_nothing():
    x = torch.empty(()).expand(4096, 393216)  # 6 GiB if it were materialised
    nodes = graph.trace_module(Chain(), [x])
    assert graph.by_name(nodes)["x"]["stride"] == [393216, 1]  # traced as contiguous


def test_pure_pointwise_chain_is_one_group():
    p = plan_module(Chain(), torch.randn(4, 16))
    assert p.supported, p.unsupported
    (group,) = p.groups
    assert group.kind == "pointwise"
    assert ops_of(p, group) == ["relu", "mul", "sub", "gelu", "tanh", "sigmoid", "add"]
    assert group.inputs == ["x"] and len(group.outputs) == 1


def test_broadcast_bias_joins_the_chain():
    p = plan_module(BiasChain(), torch.randn(2, 8, 4, 4))
    assert p.supported, p.unsupported
    (group,) = p.groups
    assert set(group.inputs) == {"x", "bias"}
    assert ops_of(p, group) == ["add", "hardswish", "mul"]


def test_convolution_is_a_library_kernel_between_pointwise_groups(monkeypatch):
    monkeypatch.setenv("STITCHCUDA_CONV_FUSE", "0")
    p = plan_module(ConvRelu(), torch.randn(1, 3, 10, 10))
    assert p.supported, p.unsupported
    # x * 2 before; the conv (its bias moved out); conv bias + bias + relu after, in one kernel.
    assert [g.kind for g in p.groups] == ["pointwise", "kernel", "pointwise"]
    assert [ops_of(p, g) for g in p.groups if g.kind == "pointwise"] == [["mul"], ["add", "add", "relu"]]
    # By default the channels-last convolution takes that chain as its epilogue (cuDNN runtime fusion).
    monkeypatch.delenv("STITCHCUDA_CONV_FUSE")
    fused = plan_module(ConvRelu(), torch.randn(1, 3, 10, 10))
    assert [g.kind for g in fused.groups] == ["pointwise", "kernel"]
    (conv,) = [g for g in fused.groups if g.kind == "kernel"]
    assert conv.detail.get("epilogue"), conv.detail


def test_an_op_without_an_emitter_is_unsupported_with_a_reason():
    class PairwiseDistances(nn.Module):
        def forward(self, x):
            return torch.relu(torch.nn.functional.pdist(x * 2))

    p = plan_module(PairwiseDistances(), torch.randn(4, 6))
    assert not p.supported
    assert p.unsupported == ["aten._pdist_forward.default: not supported by the built-in coder yet"]
    # The pointwise parts around it are still grouped: x * 2 before, relu after.
    assert [ops_of(p, g) for g in p.groups] == [["mul"], ["relu"]]


def test_data_dependent_control_flow_is_a_clear_error(tmp_path):
    with pytest.raises(graph.TraceError, match="depends on tensor values"):
        graph.trace_module(Branchy(), [torch.randn(4)])
    src = tmp_path / "branchy.py"
    src.write_text(
        "import torch\nimport torch.nn as nn\n"
        "class Model(nn.Module):\n"
        "    def forward(self, x):\n        return x * 2 if x.sum() > 0 else x\n"
        "def get_inputs():\n    return [torch.randn(8)]\n"
        "def get_init_inputs():\n    return []\n"
    )
    p = planner.plan(find_task(src))
    assert not p.supported and p.graph == []
    assert p.unsupported[0].startswith("trace: forward depends on tensor values")


def test_masking_with_a_data_dependent_shape_is_a_clear_error():
    class Masked(nn.Module):
        def forward(self, x):
            return x[x > 0]

    with pytest.raises(graph.TraceError, match="output shape depends on tensor values"):
        graph.trace_module(Masked(), [torch.randn(4)])


def test_outputs_of_one_shape_share_a_kernel_and_other_shapes_get_their_own():
    class Multi(nn.Module):
        def forward(self, x, b):
            y = torch.relu(x + b)
            return y, y * 2, b.exp(), y.t()

    p = plan_module(Multi(), torch.randn(4, 3), torch.randn(3))
    assert p.supported, p.unsupported
    assert [(g.outputs, ops_of(p, g)) for g in p.groups] == [
        (["relu", "mul"], ["add", "relu", "mul"]),
        (["exp"], ["exp"]),
    ]  # y.t() is returned as a view of relu's buffer


def test_groups_never_wait_on_an_op_that_waits_on_them():
    class Around(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(6, 6)

        def forward(self, x):
            a = torch.sigmoid(x)
            return a + self.lin(a)  # same shape as a, but needs the linear of a first

    p = plan_module(Around(), torch.randn(2, 6))
    assert p.supported, p.unsupported
    assert [g.kind for g in p.groups] == ["pointwise", "kernel", "pointwise"]
    assert [ops_of(p, g) for g in p.groups] == [["sigmoid"], ["addmm"], ["sigmoid", "add"]]


def test_in_place_ops_on_intermediates_are_fine_but_not_on_inputs():
    class InPlace(nn.Module):
        def forward(self, x):
            y = x * 2
            y.relu_()
            return y

    class MutatesInput(nn.Module):
        def forward(self, x):
            x.mul_(2)
            return x + 1

    assert plan_module(InPlace(), torch.randn(5)).supported
    p = plan_module(MutatesInput(), torch.randn(5))
    assert not p.supported
    assert any("modifies x in place" in r for r in p.unsupported)


def test_views_of_inputs_and_intermediates_are_index_maps():
    class Views(nn.Module):
        def forward(self, x, w):
            return (x.transpose(0, 1) * w.unsqueeze(0))[1:].reshape(-1) + 1

    p = plan_module(Views(), torch.randn(3, 4), torch.randn(3))
    assert p.supported, p.unsupported
    (group,) = p.groups
    # x.t() * w is traced with x.t()'s strides; the slice and reshape of it become index arithmetic.
    assert ops_of(p, group) == ["mul", "clone", "add"]
    assert group.inputs == ["x", "w"] and group.outputs == ["add"]


def test_hand_written_graph():
    """The planner needs no torch objects: a graph written by hand (e.g. from plan.json) works."""
    nodes = [
        {"name": "x", "op": "input", "kind": "arg", "index": 0, "shape": [4], "dtype": "float32", "stride": [1], "offset": 0},
        {"name": "s", "op": "sigmoid", "target": "aten.sigmoid.default", "args": {"self": ref("x")},
         "view": False, "shape": [4], "dtype": "float32", "stride": [1], "offset": 0},
        {"name": "srt", "op": "mode", "target": "aten.mode.default", "args": {"self": ref("s")},
         "view": False, "shape": None, "outputs": []},
        {"name": "v", "op": "getitem", "args": {"self": ref("srt"), "index": 0},
         "view": False, "shape": [4], "dtype": "float32", "stride": [1], "offset": 0},
        {"name": "h", "op": "half_op", "target": "aten.mul.Tensor", "args": {"self": ref("x"), "other": 2},
         "view": False, "shape": [4], "dtype": "int64", "stride": [1], "offset": 0},
        {"name": "output", "op": "output", "args": {"values": [ref("v"), ref("s")]}, "structure": "tuple"},
    ]  # fmt: skip
    p = planner.plan_graph(nodes, task="hand")
    assert p.unsupported == ["aten.mode.default: not supported by the built-in coder yet"]
    assert [g.outputs for g in p.groups] == [["s"]]
    assert any("never used" in n and "h" in n for n in p.notes)


def test_large_non_persistent_buffers_cannot_reach_model_new():
    # Up to 64 KiB the trace keeps a non-persistent buffer's values (tests/test_unsaved_buffers.py).
    class Buf(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("scale", torch.ones(64, 257), persistent=False)

        def forward(self, x):
            return x * self.scale

    p = plan_module(Buf(), torch.randn(2, 64, 257))
    assert not p.supported
    assert p.unsupported == ["buffer scale is not in the state_dict (persistent=False) and larger than 64 KiB, "
                             "the most the trace keeps: its values cannot reach ModelNew"]


def test_unsupported_dtypes_are_reported():
    class Ints(nn.Module):
        def forward(self, x):
            return x * 3

    # (int16, int8 and uint8 are read since 0234cae; uint16 is not)
    p = plan_module(Ints(), torch.arange(6).to(torch.uint16))
    assert not p.supported
    assert p.unsupported == ["aten.mul.Tensor: dtype uint16 is not supported by the pointwise emitter yet"]

    class IntPow(nn.Module):  # an int64 result of an op the int64 table has no entry for
        def forward(self, x):
            return torch.pow(x * 2, 3)

    p = plan_module(IntPow(), torch.arange(6))
    assert p.unsupported == ["aten.pow.Tensor_Scalar: dtype int64 is not supported by the pointwise emitter yet"]
    assert plan_module(Ints(), torch.arange(6)).supported  # (int64 products are: INT64_POINTWISE)


ACTIVATIONS = [
    "19_ReLU", "20_LeakyReLU", "21_Sigmoid", "22_Tanh", "25_Swish", "26_GELU_", "27_SELU_",
    "28_HardSigmoid", "29_Softplus", "30_Softsign", "31_ELU", "32_HardTanh",
]  # fmt: skip


@pytest.mark.skipif(not (KERNELBENCH / "level1").is_dir(), reason="KernelBench is not available (KERNELBENCH_DIR)")
@pytest.mark.parametrize("name", ACTIVATIONS)
def test_kernelbench_activations_are_supported(name):
    p = planner.plan(find_task(KERNELBENCH / "level1" / f"{name}.py"))
    assert p.supported, p.unsupported
    assert len(p.groups) == 1


@pytest.mark.skipif(not (KERNELBENCH / "level1").is_dir(), reason="KernelBench is not available (KERNELBENCH_DIR)")
@pytest.mark.parametrize("name, op", [("23_Softmax", "_softmax"), ("24_LogSoftmax", "_log_softmax")])
def test_kernelbench_softmax_is_one_kernel(name, op):
    p = planner.plan(find_task(KERNELBENCH / "level1" / f"{name}.py"))
    assert p.supported, p.unsupported
    assert [(g.kind, ops_of(p, g)) for g in p.groups] == [("kernel", [op])]


def test_a_trace_that_runs_too_long_is_a_trace_error(monkeypatch):
    class Slow(nn.Module):
        def forward(self, x):
            import time

            time.sleep(5)
            return x * 2

    monkeypatch.setattr(graph, "TRACE_TIMEOUT_S", 0.5)
    with pytest.raises(graph.TraceError, match="longer than"):
        graph.trace_module(Slow(), [torch.randn(3)])


def test_plan_command_reports_coverage_and_reasons(tmp_path, capsys):
    from stitchcuda import cli

    good = tmp_path / "1_good.py"
    good.write_text(
        "import torch\nimport torch.nn as nn\n"
        "class Model(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(8, 4)\n"
        "    def forward(self, x):\n        return torch.softmax(torch.relu(self.fc(x)), dim=-1)\n"
        "def get_inputs():\n    return [torch.randn(3, 8)]\n"
        "def get_init_inputs():\n    return []\n"
    )
    bad = tmp_path / "2_bad.py"
    bad.write_text(good.read_text().replace("torch.softmax(torch.relu(self.fc(x)), dim=-1)", "torch.nn.functional.pdist(x)"))
    missing = tmp_path / "3_missing.py"
    missing.write_text("import torch\nclass Model(torch.nn.Module):\n    pass\n")
    (tmp_path / "4_imports.py").write_text("import no_such_module_here\n" + good.read_text())
    # Two files cannot be loaded (no get_inputs; an import that fails): the exit code says so (1).
    assert cli.main(["plan", str(tmp_path), "--json"]) == 1
    rows = json.loads(capsys.readouterr().out)
    assert [r["supported"] for r in rows] == [True, False, False, False]
    assert "no_such_module_here" in rows[3]["unsupported"][0]
    # The linear layer, then softmax computing its bias and ReLU as it reads them (a prologue).
    assert [g["kind"] for g in rows[0]["groups"]] == ["kernel", "kernel"]
    assert "prologue" in rows[0]["groups"][1]["note"]
    assert rows[1]["unsupported"] == ["aten._pdist_forward.default: not supported by the built-in coder yet"]
    assert "get_inputs" in rows[2]["unsupported"][0]


def test_plan_command_lists_a_few_reasons_per_file_unless_asked(tmp_path, capsys):
    """An unrolled recurrent network repeats one reason thousands of times: the listing shows the
    first few and how many more there are; -v lists them all."""
    from stitchcuda import cli

    (tmp_path / "many.py").write_text(
        "import torch\nimport torch.nn as nn\n"
        "class Model(nn.Module):\n"
        "    def forward(self, x):\n"
        "        return (torch.linalg.slogdet(x[:, :3]).logabsdet.sum() + torch.block_diag(x, x).sum()\n"
        "                + torch.mode(x, dim=-1).values.sum() + torch.nn.functional.pdist(x).sum()\n"
        "                + torch.linalg.inv(x[:, :3]).sum() + torch.linalg.det(x[:, :3]).sum())\n"
        "def get_inputs():\n    return [torch.randn(3, 8)]\n"
        "def get_init_inputs():\n    return []\n"
    )
    assert cli.main(["plan", str(tmp_path), "--json"]) == 0
    reasons = json.loads(capsys.readouterr().out)[0]["unsupported"]
    assert len(reasons) == cli.PLAN_REASONS + 2
    assert cli.main(["plan", str(tmp_path)]) == 0
    short = " ".join(capsys.readouterr().err.split())
    assert short.count("not supported") == cli.PLAN_REASONS and "and 2 more (-v or --json lists them all)" in short
    assert cli.main(["plan", str(tmp_path), "-v"]) == 0
    full = " ".join(capsys.readouterr().err.split())
    assert full.count("not supported") == len(reasons) and "more (-v" not in full


class Attention(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def test_scaled_dot_product_attention_plans_as_its_math_decomposition(monkeypatch):
    """The fused attention ops are opaque; traced through the math backend the same module is two
    batched GEMMs around a _safe_softmax kernel, which the emitters cover (with the fused attention
    pass off; on, the chain becomes its one node)."""
    monkeypatch.setenv(planner.FUSED_ATTENTION_ENV, "0")
    q = torch.randn(2, 4, 64, 32)
    p = plan_module(Attention(), q, q, q)
    assert p.supported, p.unsupported
    kernel_ops = [ops_of(p, g) for g in p.groups if g.kind == "kernel"]
    assert ["bmm"] in kernel_ops and ["_safe_softmax"] in kernel_ops
    assert sum(o == ["bmm"] for o in kernel_ops) == 2
    assert not any("attention" in n.get("op", "") for n in p.graph)


class ScaledProduct(nn.Module):
    def forward(self, q, k):
        return torch.bmm(q * 0.25, k.transpose(1, 2) / 4.0)


def _gemm_from_plan(p, node_name: str, storages: dict[str, torch.Tensor]) -> torch.Tensor:
    """What the emitted cuBLAS call computes for a planned GEMM node, simulated on the inputs'
    storages: the operands as the kernel sees them (kernels.context), times the node's alpha."""
    from test_emit_gemm import simulate

    from stitchcuda.agents.coder import kernels
    from stitchcuda.agents.coder.emit_gemm import plan_gemm

    ctx = kernels.context(p.graph, node_name, "k")
    mat1, mat2 = ctx.args["self"], ctx.args["mat2"]
    gp = plan_gemm(mat1, mat2)
    node = graph.by_name(p.graph)[node_name]
    out = torch.full(node["shape"], float("nan"), dtype=torch.float64)
    simulate(gp, storages[mat2.name].reshape(-1), storages[mat1.name].reshape(-1), out.view(-1),
             alpha=ctx.args.get("alpha", 1))
    return out


def test_scalar_factors_fold_into_the_product():
    """(q * 0.25) @ (k^T / 4): no scaling pass; the product reads q and k in place with alpha 1/16."""
    torch.manual_seed(0)
    q, k = torch.randn(3, 5, 8, dtype=torch.float64), torch.randn(3, 6, 8, dtype=torch.float64)
    p = plan_module(ScaledProduct(), q.float(), k.float())
    assert p.supported, p.unsupported
    assert [g.kind for g in p.groups] == ["kernel"]  # the two scalings are gone
    bmm = next(n for n in p.graph if n["op"] == "bmm")
    assert bmm["args"]["alpha"] == pytest.approx(1 / 16)
    got = _gemm_from_plan(p, bmm["name"], {"q": q, "k": k})
    torch.testing.assert_close(got, ScaledProduct()(q, k), rtol=1e-12, atol=1e-12)
    # What the LLM coder reads: bmm has no alpha in aten, so the fold is said in words.
    from stitchcuda.agents.llm import prompts

    line = next(ln for ln in prompts.graph_text(p).splitlines() if ln.startswith(bmm["name"] + " = "))
    assert "alpha=" not in line and "times 0.0625 (a scalar factor of an operand, folded in)" in line, line


def test_the_reference_math_keeps_a_folded_factor():
    """ModelNew's `_reference` (the math its backward differentiates, its fake implementation's
    shapes) renders bmm, which has no alpha in aten, times the folded factor: it was left out."""
    from stitchcuda.agents.coder.reference_math import render_reference

    torch.manual_seed(0)
    module, q, k = ScaledProduct(), torch.randn(3, 5, 8), torch.randn(3, 6, 8)
    p = plan_module(module, q, k)
    bmm = next(n for n in p.graph if n["op"] == "bmm")
    assert bmm["args"]["alpha"] == pytest.approx(1 / 16)
    scope: dict = {"torch": torch}
    exec(render_reference(p.graph, ["q", "k"], [], [bmm["name"]]).text, scope)  # noqa: S102 - our rendering
    torch.testing.assert_close(scope["_reference"]([q, k], [])[0], module(q, k))


def test_attention_scaling_folds_into_the_scores_product(monkeypatch):
    monkeypatch.setenv(planner.FUSED_ATTENTION_ENV, "0")  # (what the fused pass then reads as its scale)
    q = torch.randn(2, 4, 64, 32)
    p = plan_module(Attention(), q, q.clone(), q.clone())
    assert p.supported, p.unsupported
    assert not any(g.kind == "pointwise" and ops_of(p, g) == ["mul"] for g in p.groups)
    scores = next(n for n in p.graph if n["op"] == "bmm")
    assert scores["args"]["alpha"] == pytest.approx(1 / 32**0.5)


class SelfProduct(nn.Module):
    def forward(self, x):
        y = (x * 2.0).view(4, 4)
        return y @ y


class FloorScaled(nn.Module):
    def forward(self, x, w):
        return torch.div(x, 2, rounding_mode="floor") @ w


class RestridedScaled(nn.Module):
    def forward(self, a, w):
        x = a[1:]
        return (x * 2.0).as_strided((2, 4), (8, 1), 0) @ w


@pytest.mark.parametrize(("module", "inputs"), [
    (SelfProduct(), [torch.randn(16)]),  # one view read by both operands: c^2, not c
    (FloorScaled(), [torch.randn(4, 5) * 10, torch.randn(5, 3)]),  # floor division is not a scaling
    (RestridedScaled(), [torch.randn(3, 4), torch.randn(4, 3)]),  # as_strided means other elements of x
])
def test_what_must_not_fold(module, inputs):
    p = plan_module(module, *inputs)
    g = next(n for n in p.graph if n["op"] in ("mm", "bmm"))
    assert "alpha" not in g["args"]


def test_a_scaled_operand_read_elsewhere_is_not_folded():
    class Shared(nn.Module):
        def forward(self, x, y):
            s = x * 3.0
            return torch.mm(s, y) + s.sum()

    p = plan_module(Shared(), torch.randn(4, 5), torch.randn(5, 6))
    mm = next(n for n in p.graph if n["op"] == "mm")
    assert "alpha" not in mm["args"]


class Restrided(nn.Module):
    """A [N, C, 1, 1] mean given channels-last strides in place, as adaptive average pooling does on
    the CPU: no element moves."""

    def __init__(self, meaningful: bool = False):
        super().__init__()
        self.meaningful = meaningful

    def forward(self, x):
        y = x.mean(dim=(2, 3), keepdim=True)
        c = y.shape[1]
        if self.meaningful:  # a real reinterpretation: the channels read with stride 2
            y.as_strided_((y.shape[0], c // 2, 1, 1), (c, 2, c, c))
        else:
            y.as_strided_(y.shape, (c, 1, c, c))
        return y.squeeze(-1).squeeze(-1) * 2.0


def test_a_restride_that_changes_nothing_is_dropped(tmp_path):
    from test_mixed_plans import run_candidate

    x = torch.randn(3, 8, 5, 6)
    assert any(n["op"].startswith("as_strided") for n in graph.trace_module(Restrided(), [x]))
    p = plan_module(Restrided(), x)
    assert p.supported, p.unsupported
    assert not any(n["op"].startswith("as_strided") for n in p.graph)
    ours, _, _ = run_candidate(Restrided(), [x], tmp_path, host=True)
    torch.testing.assert_close(ours, Restrided()(x))
    real = plan_module(Restrided(meaningful=True), x)  # kept: the strides say which channels
    assert any(n["op"] in ("as_strided", "as_strided_") for n in real.graph)
    if real.supported:
        ours, _, _ = run_candidate(Restrided(meaningful=True), [x], tmp_path / "real", host=True)
        torch.testing.assert_close(ours, Restrided(meaningful=True)(x))


def test_the_fused_attention_pass_is_on_unless_turned_off(monkeypatch):
    """On by default (planner.FUSED_ATTENTION_ENV): one attention node; turned off, the plan keeps
    the bmm/softmax/bmm kernels."""
    q = torch.randn(2, 4, 64, 32)
    monkeypatch.delenv(planner.FUSED_ATTENTION_ENV, raising=False)
    on = plan_module(Attention(), q, q, q)
    assert [ops_of(on, g) for g in on.groups if g.kind == "kernel"] == [["sc_attention"]]
    monkeypatch.setenv(planner.FUSED_ATTENTION_ENV, "0")
    off = plan_module(Attention(), q, q, q)
    assert not any(n["op"] == "sc_attention" for n in off.graph)


def test_a_refused_kernel_leaves_no_copies_behind():
    """The GEMM emitter refuses float64 even with its transposed weight copied contiguous: the plan
    says so instead of crashing on the copy nobody classified."""
    module = nn.Sequential(nn.Linear(8, 6)).double()
    plan = planner.plan_graph(graph.trace_module(module, [torch.randn(4, 8, dtype=torch.float64)]))
    assert not plan.supported
    assert any("addmm" in u or "float64" in u for u in plan.unsupported), plan.unsupported
    assert not any(n["name"].endswith("_contig") for n in plan.graph)


def test_a_pick_of_an_output_the_node_does_not_have_is_not_supported():
    """A hand-written graph (or another tracer's) whose getitem picks past a node's outputs: the
    built-in coder declines it (NotSupported), it does not crash on an index."""
    from stitchcuda.agents.coder.kernels import NotSupported, context

    graph = [
        {"name": "x", "op": "input", "kind": "arg", "shape": [4, 8], "dtype": "float32"},
        {"name": "split", "op": "split", "target": "aten.split.Tensor", "outputs": [],
         "args": {"self": {"ref": "x"}, "split_size": 4, "dim": 0}, "shape": None, "dtype": None},
        {"name": "first", "op": "getitem", "args": {"self": {"ref": "split"}, "index": 0}, "shape": [4, 8],
         "dtype": "float32"},
        {"name": "out", "op": "output", "args": {"result": {"ref": "first"}}},
    ]
    with pytest.raises(NotSupported, match="picks output 0 of split, which has 0"):
        context(graph, "split", "k")
