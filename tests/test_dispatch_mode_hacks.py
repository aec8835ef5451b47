"""Candidates that behave otherwise while the op recorder (a TorchDispatchMode) watches, or hide
PyTorch's work below it, and dropout draws that launch nothing (a red-team review, 2026-11-28: each
was accepted before)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from conftest import HACKS, hack_candidate, hack_task

from stitchcuda.agents.verify import dynamic_check as dyn
from stitchcuda.agents.verify.static_check import check_source
from stitchcuda.agents.verify.verifier import VerifyOptions, verify

pytestmark = pytest.mark.usefixtures("isolated_cache")
CPU = VerifyOptions(cpu_only=True, time_compile=False)


def test_a_subclass_with_an_assigned_dispatch_hook_is_a_hack_both_ways(tmp_path):
    v = verify(hack_task("ref_affine"), hack_candidate("hack_subclass_assigned"), tmp_path / "c", CPU)
    assert v.status == "hacked" and not v.accepted, v.message
    codes = {(f.code, bool(f.file)) for f in v.hack_findings}
    assert ("tensor-subclass", True) in codes, codes  # the static check: the hook assigned, the maker
    # The op recorder on its own: the op whose arguments carry the subclass counts as compute.
    assert any(f.code == "torch-compute-in-forward" and "tensor_subclass::" in f.message
               for f in v.hack_findings if not f.file), [f.message for f in v.hack_findings]


def test_the_recorder_counts_an_op_on_a_dispatching_subclass_as_compute():
    spec = importlib.util.spec_from_file_location("_subclass_hack", HACKS / "hack_subclass_assigned.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["_subclass_hack"] = mod
    spec.loader.exec_module(mod)
    x, y = torch.randn(4, 5), torch.randn(4, 5)
    with dyn.OpRecorder() as rec:
        out = mod.ModelNew(2.0)(x, y)
    torch.testing.assert_close(out, torch.relu(x * 2.0 + y))  # it does compute the answer, with ATen
    assert rec.ops["tensor_subclass::clone"] == 1 and dyn.torch_compute_finding(rec.ops) is not None, rec.ops
    with dyn.OpRecorder() as plain:
        (x * 2.0 + y).clone()
    assert not any(k.startswith("tensor_subclass::") for k in plain.ops), plain.ops


def test_a_forward_that_probes_for_a_dispatch_mode_is_a_static_finding(tmp_path):
    v = verify(hack_task("ref_affine"), hack_candidate("hack_mode_switch"), tmp_path / "c", CPU)
    assert v.status == "hacked" and not v.accepted, v.message
    assert any(f.code == "mode-probe" and f.file for f in v.hack_findings), [f.code for f in v.hack_findings]
    assert not [f for f in check_source((HACKS / "good_affine.py").read_text()) if f.code == "mode-probe"]


@pytest.mark.gpu
def test_on_the_gpu_a_forward_that_cheats_without_a_mode_shows_in_the_profiles(tmp_path):
    """The probe is by computed names (no static finding): the profiled forwards run under no mode, as
    the timed ones do, and show ATen's mul, add and relu."""
    v = verify(hack_task("ref_affine_large"), hack_candidate("gpu_hack_mode_switch", "kernels.cu"), tmp_path / "c",
               VerifyOptions(timeout_s=300, trials=10, time_compile=False))
    assert v.status == "hacked" and not v.accepted, (v.status, v.message)
    assert any(f.code == "torch-kernels-in-forward" for f in v.hack_findings), [f.code for f in v.hack_findings]


def _draw(device: str, numel: int = 6) -> SimpleNamespace:
    """What _launches_dropout reads of a tensor: its device and its size (no GPU here)."""
    return SimpleNamespace(device=torch.device(device) if device != "cuda" else SimpleNamespace(type="cuda"),
                           numel=lambda: numel)


def test_only_draws_that_launch_the_dropout_kernel_make_room_for_one():
    assert dyn._launches_dropout(_draw("cuda"), (None, 0.2, True), {}) == 1
    assert dyn._launches_dropout(_draw("cuda"), (None,), {"p": 0.2, "train": True}) == 1
    for args in ((None, 0.2, False), (None, 1.0, True), (None, 0.0, True), (None, 0.2, None)):
        assert dyn._launches_dropout(_draw("cuda"), args, {}) == 0, args  # a clone, a fill, or nothing
    assert dyn._launches_dropout(_draw("cuda", numel=0), (None, 0.2, True), {}) == 0  # no elements
    assert dyn._launches_dropout(_draw("cpu"), (None, 0.2, True), {}) == 0  # no GPU kernel
    with dyn.OpRecorder() as rec:  # CPU ones: a draw, but none that launches a GPU kernel
        torch.ops.aten.native_dropout(torch.ones(4), 0.5, True)
    assert rec.ops["native_dropout(ones)"] == 1 and rec.dropout_launches == 0


@pytest.mark.parametrize("call", [
    "torch.ops.aten.native_dropout(torch.ones((4, 8)), 0.2, False)",
    "torch.ops.aten.native_dropout(torch.ones((4, 8)), 1.0, True)",
    "torch.ops.aten.native_dropout(torch.ones((4, 8)), 0.0, True)",
    "torch.ops.aten.native_dropout(torch.ones((4, 8)), self.p, True)",
    "torch.ops.aten.native_dropout(torch.ones((4, 8)), 0.2, self.train_flag)",
    "torch.ops.aten.native_dropout(torch.ones((4, 8)), 0.2)",
])
def test_the_static_check_takes_only_a_literal_draw(call):
    head = "import torch\nimport torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
    assert "torch-compute-in-forward" in {f.code for f in check_source(head + f"        return {call}[1]\n")}
    good = "torch.ops.aten.native_dropout(torch.ones((4, 8)), 0.2, True)"
    assert not check_source(head + f"        return {good}[1]\n")
    kw = "torch.ops.aten.native_dropout(torch.ones((4, 8)), p=0.2, train=True)"
    assert not check_source(head + f"        return {kw}[1]\n")


def test_assigned_hooks_and_subclass_makers_are_static_findings():
    src = Path(HACKS / "hack_subclass_assigned.py").read_text()
    found = [f.message for f in check_source(src) if f.code == "tensor-subclass"]
    assert any("__torch_dispatch__" in m for m in found) and any("_make_wrapper_subclass" in m for m in found), found


# Left behind for the reference (a second red-team review, 2026-11-28): each was accepted before.
LEFT_BEHIND = [
    ("ref_affine", "hack_global_hook", "global-intercept", "hooks._global_forward_hooks"),
    ("ref_affine", "hack_function_mode", "global-intercept", "torch_function_modes"),
    ("ref_linear", "hack_slow_baseline", "numerics-flags", "cudnn.enabled"),
]


@pytest.mark.parametrize(("ref", "stem", "code", "named"), LEFT_BEHIND, ids=[c[1] for c in LEFT_BEHIND])
def test_what_a_candidate_leaves_for_the_reference_is_a_hack_and_is_undone(tmp_path, ref, stem, code, named):
    import torch.nn.modules.module as registries

    before = (torch.backends.cudnn.enabled, len(registries._global_forward_hooks), torch._C._len_torch_function_stack())
    v = verify(hack_task(ref), hack_candidate(stem), tmp_path / "c", CPU)
    assert v.status == "hacked" and not v.accepted, (v.status, v.message)
    assert any(f.code == code and named in f.message for f in v.hack_findings), [f.message for f in v.hack_findings]
    # (The worker is another process: this one's switches are untouched either way.)
    assert before == (torch.backends.cudnn.enabled, len(registries._global_forward_hooks),
                      torch._C._len_torch_function_stack())


def test_the_guard_removes_what_was_added_and_keeps_what_was_there():
    """The worker's guard in this process: a hook and a mode added after the snapshot go, with a
    finding; the switches go back."""
    import torch.nn as nn
    from torch.overrides import TorchFunctionMode

    from stitchcuda.agents.verify import worker
    from stitchcuda.types import Verdict

    want = worker._numerics_flags()
    v = Verdict(candidate="c", status="ok")
    handle = nn.modules.module.register_module_forward_hook(lambda m, i, o: None)
    mode = TorchFunctionMode()
    mode.__enter__()
    enabled = torch.backends.mkldnn.enabled
    torch.backends.mkldnn.enabled = not enabled
    try:
        worker._guard_numerics(v, want)
        assert {f.code for f in v.hack_findings} == {"global-intercept", "numerics-flags"}, v.hack_findings
        assert torch._C._len_torch_function_stack() == want["torch_function_modes"]
        assert len(nn.modules.module._global_forward_hooks) == len(want["hooks._global_forward_hooks"])
        assert torch.backends.mkldnn.enabled == enabled
        assert worker._numerics_flags() == want
        quiet = Verdict(candidate="c", status="ok")
        worker._guard_numerics(quiet, want)
        assert not quiet.hack_findings
    finally:
        handle.remove()
        torch.backends.mkldnn.enabled = enabled
        while torch._C._len_torch_function_stack() > want["torch_function_modes"]:
            torch._C._pop_torch_function_stack()


@pytest.mark.parametrize("probe", [
    "import torch.autograd.profiler as _ap\n", "from torch.autograd import profiler\n",
    "_on = torch.autograd.profiler._is_profiler_enabled\n", "_n = torch._C._len_torch_function_stack()\n",
])
def test_asking_whether_the_profiler_or_a_mode_is_on_is_a_static_finding(probe):
    """The Verifier profiles some forwards and times others: a forward that tells them apart can
    work only when watched (a red-team review, 2026-11-28, returned an empty tensor when profiled)."""
    src = "import torch\nimport torch.nn as nn\n" + probe + "class ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n"
    assert "mode-probe" in {f.code for f in check_source(src)}, check_source(src)


# What the reference's own code calls through, rebound at import (a second red-team review,
# 2026-11-28): each made the reference compute zeros, and a candidate returning zeros passed.
REBOUND = [
    ("ref_affine", "hack_torch_namespace", "torch.relu"),
    ("ref_linear", "hack_nn_module_global", "torch.nn.modules.linear.F"),
    ("ref_linear", "hack_nn_class_forward", "torch.nn.modules.linear.Linear.forward"),
]


@pytest.mark.parametrize(("ref", "stem", "named"), REBOUND, ids=[c[1] for c in REBOUND])
def test_rebinding_what_the_reference_calls_is_a_hack(tmp_path, ref, stem, named):
    v = verify(hack_task(ref), hack_candidate(stem), tmp_path / "c", CPU)
    assert v.status == "hacked" and not v.accepted, (v.status, v.message)
    assert any(f.code == "timing-tamper" and named in f.message for f in v.hack_findings), \
        [f.message[:300] for f in v.hack_findings]
