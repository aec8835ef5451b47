"""Issue 17, items 2 and 3: the generated kernels as one PyTorch custom op, with the reference's own
math (`_reference`, rendered from the trace) as its fake implementation and its backward.

On the CPU the candidate targets the host (`host=True`: the .cu's `<kernel>_host` entry points,
compiled with nvcc, run the very chunk functions the GPU kernels run), so a training step,
torch.compile(fullgraph=True) and torch.export run the real generated code here; the GPU test does
the same on CUDA."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import Staged, builtin_candidate, load_model_new, needs_nvcc

from stitchcuda.agents import graph
from stitchcuda.agents.coder import builtin as coder_builtin
from stitchcuda.agents.coder.reference_math import Unrenderable, render_reference
from stitchcuda.agents.plan import planner
from stitchcuda.agents.verify import dynamic_check as dyn
from stitchcuda.agents.verify.static_check import check_source

pytestmark = pytest.mark.usefixtures("isolated_cache")
_ids = itertools.count()




class NormBlock(nn.Module):
    """Training-mode BatchNorm (it writes its step counter) and a LayerNorm, two outputs."""

    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(6)
        self.ln = nn.LayerNorm(7)

    def forward(self, x):
        y = self.ln(self.bn(x) * 2.0)
        return torch.relu(y), torch.sigmoid(y).sum(dim=-1)


def build(module: nn.Module, inputs: list, *, host: bool = True):
    return builtin_candidate(module, inputs, host=host)


def load(cand, module: nn.Module, folder: Path) -> nn.Module:
    return load_model_new(cand, module, folder)[0]


def _outputs(out) -> list[torch.Tensor]:
    return list(out) if isinstance(out, tuple | list) else [out]


def _loss(out) -> torch.Tensor:
    return sum((o.float() ** 2).mean() for o in _outputs(out))


@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.parametrize("make", [Staged, NormBlock], ids=["scan", "norms"])
def test_a_training_step_gives_the_references_gradients(tmp_path, make):
    torch.manual_seed(0)
    module = make()
    x = torch.randn(2, 6, 5, 7)
    cand = build(module, [x])
    assert not [f for f in check_source(cand.files["model_new.py"], filename="model_new.py") if f.severity == "error"]
    new = load(cand, module, tmp_path)
    xr, xn = x.clone().requires_grad_(), x.clone().requires_grad_()
    ref_out, new_out = module(xr), new(xn)
    for a, b in zip(_outputs(new_out), _outputs(ref_out), strict=True):
        assert a.grad_fn is not None
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    _loss(ref_out).backward()
    _loss(new_out).backward()
    torch.testing.assert_close(xn.grad, xr.grad, rtol=1e-4, atol=1e-5)
    named = dict(module.named_parameters())
    for name, p in new.named_parameters():
        assert p.grad is not None, name
        torch.testing.assert_close(p.grad, named[name].grad, rtol=1e-4, atol=1e-5, msg=name)
    # One optimiser step on each: the parameters stay equal, and module state moved the same way.
    for m in (module, new):
        torch.optim.SGD(m.parameters(), lr=0.1).step()
    for (name, a), b in zip(new.state_dict().items(), module.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=name)  # running statistics included


@pytest.mark.nvcc
@needs_nvcc
def test_no_grad_calls_the_kernels_directly_and_grad_mode_records_the_op(tmp_path):
    module = Staged()
    x = torch.randn(2, 6, 9, 11)
    new = load(build(module, [x]), module, tmp_path)
    with torch.no_grad():
        _, ops, _ = dyn.trace_ops(lambda: new(x))
    # No op on the no-grad path (the Verifier times this one): the kernels' allocations only.
    assert not any("stitchcuda_gen" in k for k in ops) and dyn.torch_compute_finding(ops) is None
    # Parameters require grad: the op runs (the recorder looks inside it), with an autograd node.
    out, ops, _ = dyn.trace_ops(lambda: new(x))
    assert out.grad_fn is not None and dyn.torch_compute_finding(ops) is None
    assert ops["empty"] + ops["empty_like"] >= 1


@pytest.mark.nvcc
@needs_nvcc
def test_fullgraph_compile_and_export_see_one_op(tmp_path):
    torch.manual_seed(1)
    module = NormBlock().eval()
    x = torch.randn(2, 6, 5, 7)
    new = load(build(module, [x]), module, tmp_path).eval()
    with torch.no_grad():
        want = module(x)
        compiled = torch.compile(new, fullgraph=True, backend="aot_eager")  # a graph break raises
        for a, b in zip(_outputs(compiled(x)), _outputs(want), strict=True):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    exported = torch.export.export(new, (x,))
    called = [str(n.target) for n in exported.graph.nodes if n.op == "call_function"]
    ours = [c for c in called if c.startswith("stitchcuda_gen.")]
    assert len(ours) == 1, called
    # Nothing else computes: the graph is the op and the picking of its results.
    assert all(c in ours or "getitem" in c for c in called), called
    for a, b in zip(_outputs(exported.module()(x)), _outputs(want), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    # Gradients under torch.compile: the op's backward is traced too.
    xn, xr = x.clone().requires_grad_(), x.clone().requires_grad_()
    _loss(torch.compile(new, fullgraph=True, backend="aot_eager")(xn)).backward()
    _loss(module(xr)).backward()
    torch.testing.assert_close(xn.grad, xr.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.nvcc
@needs_nvcc
def test_training_under_compile_updates_the_running_statistics(tmp_path):
    # The kernels write BatchNorm's running statistics in place; through the (functional) op they come
    # back as outputs and forward copies them into the buffers, compiled or not.
    torch.manual_seed(4)
    module = NormBlock()
    x = torch.randn(2, 6, 5, 7)
    new = load(build(module, [x]), module, tmp_path)
    compiled = torch.compile(new, fullgraph=True, backend="aot_eager")
    for step in range(2):
        xs = torch.randn(2, 6, 5, 7)
        _loss(compiled(xs.clone().requires_grad_())).backward()
        _loss(module(xs.clone().requires_grad_())).backward()
        for (name, a), b in zip(new.named_buffers(), module.buffers(), strict=True):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=f"step {step}: {name}")


@pytest.mark.nvcc
@needs_nvcc
def test_without_reference_math_backward_refuses_clearly(tmp_path):
    # A graph node the reference math cannot render (here: an overload that does not exist) leaves the
    # op without a backward: asking for a gradient raises, never a silent detach.
    module = Staged()
    x = torch.randn(2, 6, 9, 11)
    traced = graph.trace_module(module, [x])
    for node in traced:
        if node.get("op") == "tanh":
            node["target"] = "aten.tanh.no_such_overload"
    plan = planner.plan_graph(traced)
    cand = coder_builtin.build_candidate(plan, Staged, title="test", host=True)
    assert "They have no backward (" in cand.files["model_new.py"]
    new = load(cand, module, tmp_path)
    with torch.no_grad():
        torch.testing.assert_close(new(x), module(x), rtol=1e-5, atol=1e-5)
    out = new(x)
    with pytest.raises(RuntimeError, match="no gradient can flow through it"):
        out.sum().backward()


class _Mixed(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4).eval()
        self.lin = nn.Linear(8, 5)

    def forward(self, x, y):
        h = torch.relu(self.bn(self.conv(x)))
        h = h.flatten(2)[..., :8]
        z = self.lin(h) * torch.tensor(2.5)
        idx = torch.arange(5, dtype=torch.float32, device=x.device)
        a, b = torch.split(z + idx, [2, 3], dim=-1)
        s = F.scaled_dot_product_attention(y, y, y, is_causal=True)
        return torch.cat([a.softmax(-1), b.logsumexp(-1, keepdim=True)], dim=-1), s.mean(), torch.zeros_like(y)


def test_reference_math_is_the_modules_forward_with_its_gradients():
    """`_reference` run as Python on real tensors: the module's outputs and, through autograd, its
    gradients (dtype, device and list arguments decoded by schema; views, getitems, constants)."""
    torch.manual_seed(2)
    module = _Mixed()
    x, y = torch.randn(2, 3, 4, 4), torch.randn(2, 3, 6, 8)
    traced = graph.trace_module(module, [x, y])
    inputs = [n for n in traced if n["op"] == "input" and "shape" in n]
    output = next(n for n in traced if n["op"] == "output")
    returns = [graph.ref_name(v) for v in output["args"]["values"]]
    ref = render_reference(traced, [n["name"] for n in inputs], [], returns)
    space: dict = {"torch": torch}
    exec(compile(ref.text, "<reference>", "exec"), space)  # noqa: S102 - the rendered module text
    state = dict(module.named_parameters()) | dict(module.named_buffers())
    values = [state[n["key"]] if n.get("kind") != "arg" else [x, y][n["index"]] for n in inputs]
    leaves = [v.detach().clone().requires_grad_(v.is_floating_point() and n.get("kind") != "buffer")
              for v, n in zip(values, inputs, strict=True)]
    got = space["_reference"](leaves, [])
    want = module(x, y)
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    sum(o.sum() for o in got[:2]).backward()
    sum(o.sum() for o in want[:2]).backward()
    named = dict(module.named_parameters())
    for leaf, n in zip(leaves, inputs, strict=True):
        if n.get("kind") == "param":
            torch.testing.assert_close(leaf.grad, named[n["key"]].grad, rtol=1e-4, atol=1e-5, msg=n["key"])


def test_random_ops_have_no_reference_math():
    class Drop(nn.Module):
        def forward(self, x):
            return F.dropout(x, 0.5, training=True) * 2

    traced = graph.trace_module(Drop(), [torch.randn(4, 4)])
    output = next(n for n in traced if n["op"] == "output")
    with pytest.raises(Unrenderable, match="random"):
        render_reference(traced, ["x"], [], [graph.ref_name(output["args"]["values"][0])])


def test_the_recorder_sees_inside_custom_ops():
    """A custom op's implementation runs below the dispatch recorder; the recorder runs a Python one
    under itself (PyTorch's matmul behind a custom op is found), and counts an op it cannot look
    into as compute."""
    tag = next(_ids)

    @torch.library.custom_op(f"sctest_hidden::mm{tag}", mutates_args=())
    def hidden(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.mm(a, b)

    @torch.library.custom_op(f"sctest_hidden::alloc{tag}", mutates_args=())
    def alloc(a: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(a)

    a = torch.randn(3, 3)
    _, ops, _ = dyn.trace_ops(lambda: hidden(a, a))
    finding = dyn.torch_compute_finding(ops)
    assert finding is not None and "aten.mm" in finding.message
    _, ops, _ = dyn.trace_ops(lambda: alloc(a))
    assert dyn.torch_compute_finding(ops) is None and ops["empty_like"] == 1
    lib = torch.library.Library(f"sctest_opaque{tag}", "DEF")
    lib.define("relu(Tensor a) -> Tensor")
    lib.impl("relu", lambda t: torch.relu(t), "CPU")
    _, ops, _ = dyn.trace_ops(lambda: getattr(torch.ops, f"sctest_opaque{tag}").relu(a))
    finding = dyn.torch_compute_finding(ops)
    assert finding is not None and f"sctest_opaque{tag}::relu" in finding.message


@pytest.mark.gpu
def test_on_the_gpu_training_and_compile_match_the_reference(tmp_path):
    torch.manual_seed(3)
    module = NormBlock().cuda()
    x = torch.randn(4, 6, 16, 7, device="cuda")
    new = load(build(module, [x], host=False), module, tmp_path).cuda()
    xn, xr = x.clone().requires_grad_(), x.clone().requires_grad_()
    _loss(new(xn)).backward()
    _loss(module(xr)).backward()
    torch.testing.assert_close(xn.grad, xr.grad, rtol=1e-3, atol=1e-4)
    for (name, p), q in zip(new.named_parameters(), module.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-3, atol=1e-4, msg=name)
    new.eval()
    module.eval()
    with torch.no_grad():
        compiled = torch.compile(new, fullgraph=True)
        for a, b in zip(_outputs(compiled(x)), _outputs(module(x)), strict=True):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
        # Inside a CUDA graph the direct path runs on the capturing stream.
        static = x.clone()
        new(static)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            captured = new(static)
        static.copy_(torch.randn_like(static))
        g.replay()
        for a, b in zip(_outputs(captured), _outputs(module(static)), strict=True):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
