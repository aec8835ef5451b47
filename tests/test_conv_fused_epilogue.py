"""A convolution's pointwise chain handed to cuDNN's runtime fusion (on unless STITCHCUDA_CONV_FUSE=0):
the planner gives the channels-last convolution the chain as its epilogue, cudnn_epilogue translates
the chain into cuDNN pointwise steps (one table, one walker), and the launcher (conv.cuh
sc_conv_fused_run) keeps the fused graph only where it agrees with the unfused pair and beats it.

Here: the translation, op by op and for what it refuses; the plans with and without the variable;
each candidate built for sm_90. On a GPU: each candidate matches its module, fused or not."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import assert_builds_clean_for_sm90, builtin_candidate, load_model_new
from test_emit_conv import cudnn_include

from stitchcuda.agents.coder import cudnn_epilogue
from stitchcuda.agents.coder.codegen import KernelArg
from stitchcuda.agents.coder.kernels import NotSupported
from stitchcuda.agents.coder.model_new import CU_FILE

pytestmark = pytest.mark.usefixtures("isolated_cache")


def Chain(tail, cin: int = 8, cout: int = 16, transposed: bool = False) -> nn.Module:
    """A convolution, then `tail` over its result (a function of the result and the module); its
    class takes no constructor arguments, as the candidate's ModelNew mirrors them."""

    class Tail(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = (nn.ConvTranspose2d if transposed else nn.Conv2d)(cin, cout, 3)
            self.scale = nn.Parameter(torch.randn(cout, 1, 1))

        def forward(self, x):
            return tail(self.conv(x), self)

    return Tail()


# name -> (tail, the cuDNN modes its steps use, in order)
TAILS = {
    "bias relu bias": (lambda y, m: torch.relu(y) + m.scale, ["ADD", "RELU_FWD", "ADD"]),
    "scale leaky gelu": (lambda y, m: F.gelu(F.leaky_relu(y * 2.0, 0.1)), ["ADD", "MUL", "RELU_FWD", "GELU_FWD"]),
    "sigmoid times channel": (lambda y, m: torch.sigmoid(y) * m.scale, ["ADD", "SIGMOID_FWD", "MUL"]),
    "clamp tanh": (lambda y, m: torch.tanh(torch.clamp(y - 0.5, -1.0, 1.0)), ["ADD", "SUB", "MAX", "MIN", "TANH_FWD"]),
    "silu divided": (lambda y, m: F.silu(y) / 3.0, ["ADD", "SWISH_FWD", "DIV"]),
    "mish": (lambda y, m: F.mish(y - m.scale), ["ADD", "SUB", "SOFTPLUS_FWD", "TANH_FWD", "MUL"]),
    "hardswish relu": (lambda y, m: torch.relu(F.hardswish(y)), ["ADD", "ADD", "MAX", "MIN", "MUL", "MUL", "RELU_FWD"]),
    # torch.tensor(0.25) in forward: a constant tensor read through lift_fresh_copy and detach
    "min with a constant tensor": (lambda y, m: torch.min(y, torch.tensor(0.25)) * 2.0, ["ADD", "MIN", "MUL"]),
}
# Cases run with a transposed convolution too (cuDNN's backward-data in the fused graph).
TRANSPOSED = ["bias relu bias", "mish"]


def _conv_kernel_source(cand) -> str:
    return cand.files[CU_FILE]


CASES = [(c, False) for c in TAILS] + [(c, True) for c in TRANSPOSED]


@pytest.mark.parametrize("case,transposed", CASES)
def test_the_planner_hands_the_chain_to_the_convolution_unless_turned_off(case, transposed, monkeypatch):
    tail, modes = TAILS[case]
    torch.manual_seed(0)
    x = [torch.randn(2, 8, 10, 12)]
    monkeypatch.setenv("STITCHCUDA_CONV_FUSE", "0")
    apart = builtin_candidate(Chain(tail, transposed=transposed), x, host=False)
    assert "return sc_conv_fused_run(spec" not in _conv_kernel_source(apart)
    assert any("stitch_pw" in n for n in apart.notes), apart.notes
    monkeypatch.delenv("STITCHCUDA_CONV_FUSE", raising=False)  # on by default
    fused = builtin_candidate(Chain(tail, transposed=transposed), x, host=False)
    src = _conv_kernel_source(fused)
    # One launcher for the convolution and the whole chain: no pointwise kernel is left.
    assert "return sc_conv_fused_run(spec" in src and not any("stitch_pw" in n for n in fused.notes), fused.notes
    table = src[src.index("_steps[] = {"):]
    table = table[: table.index("};")]
    assert [row.split(",")[0].split("CUDNN_POINTWISE_")[1] for row in table.splitlines()[1:] if row.strip()] == modes


def test_translation_reads_numbers_channels_and_earlier_steps():
    # y = relu(conv + b[c]) * 2.5 - b2[c] over channels-last [N, H, W, 4]
    nodes = {
        "conv": {"name": "conv", "op": "convolution", "shape": [2, 3, 3, 4], "dtype": "float32"},
        "b": {"name": "b", "op": "input", "shape": [4, 1, 1], "stride": [1, 1, 1], "dtype": "float32"},
        "b_c": {"name": "b_c", "op": "view", "view": True, "args": {"self": {"ref": "b"}}, "shape": [4],
                "stride": [1], "dtype": "float32"},
        "b2": {"name": "b2", "op": "input", "shape": [4], "stride": [1], "dtype": "float32"},
        "s1": {"name": "s1", "op": "add", "args": {"self": {"ref": "conv"}, "other": {"ref": "b_c"}, "alpha": 1},
               "shape": [2, 3, 3, 4], "dtype": "float32"},
        "s2": {"name": "s2", "op": "relu", "args": {"self": {"ref": "s1"}}, "shape": [2, 3, 3, 4], "dtype": "float32"},
        "s3": {"name": "s3", "op": "mul", "args": {"self": {"ref": "s2"}, "other": 2.5}, "shape": [2, 3, 3, 4],
               "dtype": "float32"},
        "s4": {"name": "s4", "op": "sub", "args": {"self": {"ref": "s3"}, "other": {"ref": "b2"}, "alpha": 1},
               "shape": [2, 3, 3, 4], "dtype": "float32"},
    }
    inputs = [KernelArg("b", "float32"), KernelArg("b2", "float32")]
    prog = cudnn_epilogue.translate(nodes, ["b_c", "s1", "s2", "s3", "s4"], "s4", "conv", inputs, 4)
    S = cudnn_epilogue.Source
    assert [(s.mode, s.a, s.b) for s in prog.steps] == [
        ("ADD", S(cudnn_epilogue.CONV), S(cudnn_epilogue.CHANNEL, 0)),
        ("RELU_FWD", S(cudnn_epilogue.STEP, 0), None),
        ("MUL", S(cudnn_epilogue.STEP, 1), S(cudnn_epilogue.SCALAR, value=2.5)),
        ("SUB", S(cudnn_epilogue.STEP, 2), S(cudnn_epilogue.CHANNEL, 1)),
    ]
    assert "{SC_EPI_SCALAR, 0, 2.5f}" in prog.c_table("t")
    # A subtraction with alpha folds it into its number; with a tensor it is refused.
    nodes["s4"]["args"] = {"self": {"ref": "s3"}, "other": 0.5, "alpha": 3}
    prog = cudnn_epilogue.translate(nodes, ["b_c", "s1", "s2", "s3", "s4"], "s4", "conv", inputs, 4)
    assert prog.steps[-1].b == S(cudnn_epilogue.SCALAR, value=1.5)
    nodes["s4"]["args"] = {"self": {"ref": "s3"}, "other": {"ref": "b2"}, "alpha": 3}
    with pytest.raises(NotSupported, match="alpha"):
        cudnn_epilogue.translate(nodes, ["b_c", "s1", "s2", "s3", "s4"], "s4", "conv", inputs, 4)


def test_translation_refuses_what_cudnn_has_no_step_for():
    nodes = {
        "conv": {"name": "conv", "op": "convolution", "shape": [2, 3, 3, 4], "dtype": "float32"},
        "h": {"name": "h", "op": "selu", "args": {"self": {"ref": "conv"}}, "shape": [2, 3, 3, 4], "dtype": "float32"},
        "full": {"name": "full", "op": "input", "shape": [2, 3, 3, 4], "stride": [36, 12, 4, 1], "dtype": "float32"},
        "a": {"name": "a", "op": "add", "args": {"self": {"ref": "conv"}, "other": {"ref": "full"}, "alpha": 1},
              "shape": [2, 3, 3, 4], "dtype": "float32"},
    }
    nodes["h"]["op"] = "selu"
    with pytest.raises(NotSupported, match="selu"):
        cudnn_epilogue.translate(nodes, ["h"], "h", "conv", [], 4)
    # An operand of the result's own shape (a residual) is not a per-channel one.
    with pytest.raises(NotSupported, match="per-channel"):
        cudnn_epilogue.translate(nodes, ["a"], "a", "conv", [KernelArg("full", "float32")], 4)
    # A [C] operand read through a view that may reorder its input (a strided one, here) is refused.
    nodes["w"] = {"name": "w", "op": "input", "shape": [8], "stride": [1], "dtype": "float32"}
    nodes["w_c"] = {"name": "w_c", "op": "as_strided", "view": True, "args": {"self": {"ref": "w"}}, "shape": [4],
                    "stride": [1], "dtype": "float32"}
    nodes["m"] = {"name": "m", "op": "mul", "args": {"self": {"ref": "conv"}, "other": {"ref": "w_c"}},
                  "shape": [2, 3, 3, 4], "dtype": "float32"}
    with pytest.raises(NotSupported, match="as_strided"):
        cudnn_epilogue.translate(nodes, ["w_c", "m"], "m", "conv", [KernelArg("w", "float32")], 4)


# Chains cuDNN's pointwise steps cannot express: a SELU, and batch norm in eval mode (its per-channel
# rsqrt(var + eps) is a step on operands, not on the convolution's values).
class ConvEvalBatchNorm(nn.Module):
    def __init__(self, cin: int = 8, cout: int = 16):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, bias=False)
        self.bn = nn.BatchNorm2d(cout)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)
        self.eval()

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


NO_CUDNN_FORM = {"selu": lambda: Chain(lambda y, m: F.selu(y) + m.scale), "eval batch norm": ConvEvalBatchNorm}


@pytest.mark.parametrize("case", list(NO_CUDNN_FORM))
def test_a_chain_cudnn_cannot_take_runs_in_the_launcher_without_a_fused_graph(case, monkeypatch):
    """No cuDNN steps (an empty table): the launcher runs the chain apart after cuDNN's convolution,
    or in the implicit GEMM's epilogue where that wins, instead of a pointwise pass of its own."""
    monkeypatch.setenv("STITCHCUDA_CONV_FUSE", "1")
    torch.manual_seed(0)
    cand = builtin_candidate(NO_CUDNN_FORM[case](), [torch.randn(2, 8, 10, 12)], host=False)
    src = cand.files[CU_FILE]
    assert "return sc_conv_fused_run(spec" in src and "sc_conv_epi_step* const stitch_k0_steps = nullptr" in src
    assert not any("stitch_pw" in n for n in cand.notes) and any("apart after cuDNN" in n for n in cand.notes), cand.notes


# cuDNN's pointwise modes as its documentation defines them: what the steps ask cuDNN to compute.
MODES = {
    "ADD": lambda a, b, t: a + b, "SUB": lambda a, b, t: a - b, "MUL": lambda a, b, t: a * b,
    "DIV": lambda a, b, t: a / b, "MAX": lambda a, b, t: torch.maximum(a, b), "MIN": lambda a, b, t: torch.minimum(a, b),
    "RELU_FWD": lambda a, b, t: torch.where(a > 0, a, a * (t or 0.0)),
    "SIGMOID_FWD": lambda a, b, t: torch.sigmoid(a), "TANH_FWD": lambda a, b, t: torch.tanh(a),
    "GELU_FWD": lambda a, b, t: F.gelu(a), "GELU_APPROX_TANH_FWD": lambda a, b, t: F.gelu(a, approximate="tanh"),
    "SWISH_FWD": lambda a, b, t: a * torch.sigmoid(t * a), "ELU_FWD": lambda a, b, t: F.elu(a, t),
    "SOFTPLUS_FWD": lambda a, b, t: torch.log1p(torch.exp(t * a)) / t,
    "EXP": lambda a, b, t: torch.exp(a), "LOG": lambda a, b, t: torch.log(a), "NEG": lambda a, b, t: -a,
    "ABS": lambda a, b, t: a.abs(), "SQRT": lambda a, b, t: a.sqrt(), "RSQRT": lambda a, b, t: a.rsqrt(),
    "ERF": lambda a, b, t: torch.erf(a),
}


def _run_steps(prog, conv_nhwc, inputs):
    """The steps evaluated in PyTorch on the channels-last convolution result (no bias) and the
    epilogue's inputs, each a [C] operand over the last dimension."""
    outs = []

    def value(src):
        if src is None:
            return None
        return {cudnn_epilogue.CONV: lambda: conv_nhwc, cudnn_epilogue.STEP: lambda: outs[src.index],
                cudnn_epilogue.CHANNEL: lambda: inputs[src.index].reshape(-1),
                cudnn_epilogue.SCALAR: lambda: torch.tensor(src.value)}[src.kind]()

    for step in prog.steps:
        outs.append(MODES[step.mode](value(step.a), value(step.b), step.attr[1] if step.attr else None))
    return outs[-1]


@pytest.mark.parametrize("case,transposed", CASES)
def test_the_steps_compute_what_the_module_does(case, transposed, monkeypatch):
    """Each chain's steps, evaluated by cuDNN's definitions of its modes, give the module's output:
    operands, numbers, attributes and the order of the steps as the fused graph will get them."""
    from stitchcuda.agents import graph
    from stitchcuda.agents.coder import codegen
    from stitchcuda.agents.plan import planner

    monkeypatch.setenv("STITCHCUDA_CONV_FUSE", "1")
    torch.manual_seed(1)
    module = Chain(TAILS[case][0], transposed=transposed)
    x = torch.randn(2, 8, 10, 12)
    plan = planner.plan_graph(graph.trace_module(module, [x]))
    nodes = graph.by_name(plan.graph)
    (epi,) = [g.detail["epilogue"] for g in plan.groups if g.detail.get("epilogue")]
    ep = codegen.epilogue(plan.graph, epi["members"], epi["node"], epi["value"], nodes=nodes)
    prog = cudnn_epilogue.translate(nodes, ep.members, ep.node, ep.value, ep.inputs, 16)
    params = dict(module.named_parameters())
    inputs = [params[a.name] for a in ep.inputs]
    with torch.no_grad():
        conv = (F.conv_transpose2d if transposed else F.conv2d)(x, module.conv.weight).permute(0, 2, 3, 1)
        got = _run_steps(prog, conv, inputs)
        want = module(x).permute(0, 2, 3, 1)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(cudnn_include() is None, reason="no cudnn.h (set STITCHCUDA_EXTRA_INCLUDE to a folder with it)")
def test_fused_candidates_build_for_sm90(tmp_path, monkeypatch):
    monkeypatch.setenv("STITCHCUDA_CONV_FUSE", "1")
    for k, (case, transposed) in enumerate([("bias relu bias", False), ("clamp tanh", False), ("mish", True)]):
        torch.manual_seed(0)
        cand = builtin_candidate(Chain(TAILS[case][0], transposed=transposed), [torch.randn(2, 8, 10, 12)], host=False)
        assert "return sc_conv_fused_run(spec" in cand.files[CU_FILE]
        assert_builds_clean_for_sm90(cand, tmp_path / f"c{k}.cu", cudnn_include())
    for k, make in enumerate(NO_CUDNN_FORM.values()):  # an empty step table
        cand = builtin_candidate(make(), [torch.randn(2, 8, 10, 12)], host=False)
        assert_builds_clean_for_sm90(cand, tmp_path / f"n{k}.cu", cudnn_include())


def _on_the_gpu(cand, module: nn.Module, inputs: list, folder) -> tuple[torch.Tensor, torch.Tensor]:
    """(the candidate's output, the module's) on the GPU, after five calls: the first decides fused
    or apart; the third captures the forward as a CUDA graph (one library call is graphed too), the
    later ones replay it."""
    module = module.cuda()
    new, _ = load_model_new(cand, module, folder / "m")
    new = new.cuda()
    args = [t.cuda() for t in inputs]
    with torch.no_grad():
        want = module(*args)
        for _ in range(5):
            got = new(*args)
    return got, want


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("case", list(NO_CUDNN_FORM))
def test_on_the_gpu_a_chain_without_a_cudnn_form_matches(case, tmp_path, monkeypatch, capfd):
    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    monkeypatch.setenv("STITCHCUDA_CONV_LOG", "1")
    torch.manual_seed(4)
    make = NO_CUDNN_FORM[case]
    inputs = [torch.randn(8, 8, 40, 40)]
    cand = builtin_candidate(make(), inputs, host=False)
    assert "stitch_k0_steps = nullptr" in cand.files[CU_FILE]
    got, want = _on_the_gpu(cand, make(), inputs, tmp_path)
    torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2 * want.abs().mean().item())
    assert "the chain has no cuDNN form" in capfd.readouterr().err


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("case,transposed", CASES)
def test_on_the_gpu_each_fused_candidate_matches_its_module(case, transposed, tmp_path, monkeypatch, capfd):
    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    monkeypatch.setenv("STITCHCUDA_CONV_FUSE", "1")
    monkeypatch.setenv("STITCHCUDA_CONV_NHWC", "1")
    monkeypatch.setenv("STITCHCUDA_CONV_LOG", "1")
    torch.manual_seed(3)
    module = Chain(TAILS[case][0], cin=32, cout=64, transposed=transposed)
    inputs = [torch.randn(8, 32, 40, 40)]
    cand = builtin_candidate(module, inputs, host=False)
    assert "return sc_conv_fused_run(spec" in cand.files[CU_FILE]
    got, want = _on_the_gpu(cand, module, inputs, tmp_path)
    torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2 * want.abs().mean().item())
    log = capfd.readouterr().err
    assert "epilogue fused into the convolution" in log or "epilogue apart" in log, log[-3000:]
