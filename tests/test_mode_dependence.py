"""A module's mode (training or eval) is a Python value its forward reads: make_fx bakes it into
the graph as it bakes other constants. The trace says the mode and whether forward depends on it
(traced again in the other mode, the graph differs); ModelNew then refuses the other mode instead of
running the traced mode's math there (a BatchNorm's batch statistics after .eval()), and the
Verifier checks one set in the other mode, where a refusal is noted and a wrong answer fails."""

from __future__ import annotations

import inspect

import pytest
import torch
import torch.nn as nn
from conftest import builtin_candidate, load_model_new, needs_nvcc

from stitchcuda.agents import graph
from stitchcuda.agents.verify.verifier import VerifyOptions, verify
from stitchcuda.types import Task


class Norm(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(8)

    def forward(self, x):
        return torch.relu(self.bn(x)) * 2


class Dropped(nn.Module):
    def __init__(self, p: float):
        super().__init__()
        self.drop = nn.Dropout(p)

    def forward(self, x):
        return self.drop(x) + 1


class Branch(nn.Module):
    def forward(self, x):
        return x * 2 if self.training else x * 3


class Plain(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(8))

    def forward(self, x):
        return torch.relu(x * self.scale + 1)


class FrozenInside(nn.Module):
    """A teacher kept in eval mode inside a module in training mode."""

    def __init__(self):
        super().__init__()
        self.teacher = nn.BatchNorm1d(8).eval()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        return self.lin(self.teacher(x))


class FrozenNorm(nn.Module):
    """FrozenInside with pointwise work after the teacher (every kernel has a CPU entry point)."""

    def __init__(self):
        super().__init__()
        self.teacher = nn.BatchNorm1d(8).eval()
        self.scale = nn.Parameter(torch.randn(8))

    def forward(self, x):
        return torch.relu(self.teacher(x)) * self.scale


def _output(module: nn.Module) -> dict:
    nodes = graph.trace_module(module, [torch.randn(16, 8)])
    return next(n for n in nodes if n["op"] == "output")


@pytest.mark.parametrize(("make", "training", "dependent"), [
    (Norm, True, True),
    (lambda: Norm().eval(), False, True),
    (lambda: Dropped(0.3), True, True),
    (lambda: Dropped(0.0), True, False),  # p = 0: the same graph in both modes
    (Branch, True, True),
    (lambda: Branch().eval(), False, True),
    (Plain, True, False),
    (lambda: Plain().eval(), False, False),
    # .eval() leaves its one BatchNorm as it was traced, but .train() would not: every submodule in
    # training mode gives its teacher batch statistics.
    (FrozenInside, True, True),
])
def test_the_trace_says_the_mode_and_whether_forward_depends_on_it(make, training, dependent):
    out = _output(make())
    assert (out["training"], out["mode_dependent"]) == (training, dependent)


@pytest.mark.parametrize(("make", "modes"), [
    (Norm, {"bn": True}),
    (lambda: Dropped(0.3).eval(), {"drop": False}),
    (Branch, {"": True}),  # its own forward reads self.training
    (FrozenInside, {"teacher": False}),
])
def test_the_trace_names_the_submodules_whose_mode_forward_reads(make, modes):
    assert _output(make())["modes"] == modes
    assert "modes" not in _output(Plain())


def test_each_submodules_mode_is_put_back_after_the_second_trace():
    module = FrozenInside()
    _output(module)
    assert module.training and module.lin.training and not module.teacher.training


@pytest.mark.nvcc
@needs_nvcc
def test_the_candidate_refuses_the_mode_it_was_not_traced_in(tmp_path, isolated_cache):
    torch.manual_seed(0)
    module = Norm()
    cand = builtin_candidate(module, [torch.randn(16, 8)])
    assert "forward raises in the other mode" in cand.files["model_new.py"]
    new, _ = load_model_new(cand, module, tmp_path)
    x = torch.randn(16, 8)
    with torch.no_grad():
        torch.testing.assert_close(new(x), module(x), rtol=1e-5, atol=1e-5)
        new.eval()
        with pytest.raises(RuntimeError, match="generated from the module in training mode.*this call is in eval mode"):
            new(x)
        new.train()
        torch.testing.assert_close(new(x), module(x), rtol=1e-5, atol=1e-5)


@pytest.mark.nvcc
@needs_nvcc
def test_under_torch_compile_mode_switches_refuse_without_compiling_again(tmp_path, isolated_cache):
    # A training loop that evaluates between epochs switches modes again and again: compiled, the
    # candidate still refuses the other mode and computes the traced one, and the counter of
    # switches that forward's check reads does not compile it again at every switch (dynamo makes
    # the int dynamic after one recompile). (After a refusal, dynamo runs part of forward eagerly:
    # its fast path, the same kernels.)
    from torch._dynamo.utils import counters

    torch.manual_seed(0)
    module = Norm()
    cand = builtin_candidate(module, [torch.randn(16, 8)])
    new, _ = load_model_new(cand, module, tmp_path)
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(new, backend="aot_eager")
    x = torch.randn(16, 8)
    seen = []
    with torch.no_grad():
        for _ in range(8):
            torch.testing.assert_close(compiled(x), module(x), rtol=1e-5, atol=1e-5)
            new.eval()
            with pytest.raises(RuntimeError, match="this call is in eval mode"):
                compiled(x)
            new.train()
            seen.append((counters["stats"]["unique_graphs"], counters["stats"]["calls_captured"]))
    assert seen[2] == seen[-1], seen  # nothing compiled again after the first switches


@pytest.mark.nvcc
@needs_nvcc
def test_a_candidate_of_a_module_built_in_eval_mode_is_built_in_it_too(tmp_path, isolated_cache):
    """A module whose __init__ ends in self.eval() (an inference block) is traced in eval mode;
    ModelNew's constructor leaves it in that mode too, so it runs as the module does, and refuses
    training mode."""
    torch.manual_seed(0)
    module = Norm().eval()
    module.bn.running_mean.uniform_(-1, 1)
    module.bn.running_var.uniform_(0.5, 2)
    cand = builtin_candidate(module, [torch.randn(16, 8)])
    new, _ = load_model_new(cand, module, tmp_path)
    assert not new.training
    x = torch.randn(16, 8)
    with torch.no_grad():
        torch.testing.assert_close(new(x), module(x), rtol=1e-5, atol=1e-5)
        new.train()
        with pytest.raises(RuntimeError, match="generated from the module in eval mode.*this call is in training mode"):
            new(x)


@pytest.mark.nvcc
@needs_nvcc
def test_a_candidate_of_a_forward_without_modes_runs_in_either(tmp_path, isolated_cache):
    torch.manual_seed(0)
    module = Plain()
    cand = builtin_candidate(module, [torch.randn(16, 8)])
    assert "_wrong_mode" not in cand.files["model_new.py"]
    new, _ = load_model_new(cand, module, tmp_path)
    x = torch.randn(16, 8)
    with torch.no_grad():
        new.eval()
        module.eval()
        torch.testing.assert_close(new(x), module(x), rtol=1e-5, atol=1e-5)


@pytest.mark.nvcc
@needs_nvcc
def test_a_candidate_of_a_module_with_a_frozen_part_refuses_when_the_part_changes_mode(tmp_path, isolated_cache):
    """A teacher BatchNorm kept in eval mode inside a training module (frozen batch norm while
    fine-tuning): the module's .train() switches the teacher to batch statistics though the module's
    own flag does not change. ModelNew follows each watched part's mode, not its own flag alone."""
    torch.manual_seed(0)
    module = FrozenNorm()
    module.teacher.running_mean.uniform_(-1, 1)
    module.teacher.running_var.uniform_(0.5, 2)
    cand = builtin_candidate(module, [torch.randn(16, 8)])
    new, _ = load_model_new(cand, module, tmp_path)
    assert new.training and not new.teacher.training  # built as the module was traced
    x = torch.randn(16, 8)
    with torch.no_grad():
        torch.testing.assert_close(new(x), module(x), rtol=1e-5, atol=1e-5)
        new.train()
        with pytest.raises(RuntimeError, match="`teacher` was in eval mode and is in training mode now"):
            new(x)
        new.teacher.eval()
        torch.testing.assert_close(new(x), module(x), rtol=1e-5, atol=1e-5)
        new.eval()  # the teacher stays in eval mode, and nothing else reads its mode: the same math
        torch.testing.assert_close(new(x), module.eval()(x), rtol=1e-5, atol=1e-5)


# Norm as a task file (the Verifier and the trace import the reference from a file).
REF = ("import torch\nimport torch.nn as nn\n\n\n" + inspect.getsource(Norm).replace("class Norm", "class Model")
       + "\n\ndef get_inputs():\n    return [torch.randn(16, 8)]\n\n\ndef get_init_inputs():\n    return []\n")


@pytest.mark.gpu
def test_on_the_gpu_the_verifier_notes_the_built_in_candidates_refusal(tmp_path, isolated_cache):
    """Through the worker (the built-in candidate's kernels run on the GPU only; the refusal path on
    the CPU is test_hacks' good_bn_eval): the candidate of a training-mode BatchNorm passes every
    checked set, refuses eval mode with its own message, and is accepted with that said."""
    ref = tmp_path / "bn_ref.py"
    ref.write_text(REF)
    cand = builtin_candidate(Norm(), [torch.randn(16, 8)], host=False)
    v = verify(Task(path=ref), cand, tmp_path / "v", VerifyOptions(timeout_s=300, trials=10, time_compile=False))
    assert v.status == "ok" and v.accepted, (v.status, v.message, v.log_tail[-1500:])
    assert not any(c["set"] == "eval-mode" for c in v.checks)
    assert any(n.startswith("in eval mode the candidate refuses to run: RuntimeError: ModelNew was generated")
               for n in v.notes), v.notes


def test_a_task_in_eval_mode_is_traced_in_it(tmp_path):
    """Task.mode ("eval", from --mode or the stitchcuda.mode setting): the module is switched after
    its constructor, wherever it is built; the trace is the first."""
    from stitchcuda.agents.graph import trace_task

    ref = tmp_path / "bn_ref.py"
    ref.write_text(REF)
    as_built = next(n for n in trace_task(Task(path=ref)) if n["op"] == "output")
    in_eval = next(n for n in trace_task(Task(path=ref, mode="eval")) if n["op"] == "output")
    assert (as_built["training"], as_built["mode_dependent"]) == (True, True)
    assert (in_eval["training"], in_eval["mode_dependent"]) == (False, True)


def test_the_verifier_builds_both_modules_in_the_tasks_mode(tmp_path, build_cache):
    """On the CPU, worker and blind check: a training-mode BatchNorm reference optimised in eval mode.
    A candidate built for eval mode alone (it refuses training mode) is accepted only where every
    process that builds the reference switched it to eval; one that ignores the mode fails."""
    from conftest import hack_candidate, hack_task

    opts = VerifyOptions(cpu_only=True, time_compile=False, extra_env={"STITCHCUDA_CACHE": str(build_cache)})
    task = hack_task("ref_bn_train")
    task.mode = "eval"
    v = verify(task, hack_candidate("good_bn_eval"), tmp_path / "eval", opts)
    assert v.status == "ok" and v.accepted, (v.status, v.message, v.log_tail[-1500:])
    assert any(n.startswith("blind check:") for n in v.notes), v.notes
    assert any(n.startswith("in training mode the candidate refuses to run") for n in v.notes), v.notes
    ignores = verify(task, hack_candidate("hack_bn_ignores_eval"), tmp_path / "ignores", opts)
    assert ignores.status == "incorrect" and not ignores.accepted, (ignores.status, ignores.message)
