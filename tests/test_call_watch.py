"""Calls past the op recorder, and into the reference, seen while the candidate's code runs
(agents/verify/call_watch.py), each written so the static check cannot name it; the names written out
(Python and C++ source) are the static check's. Each candidate here was accepted before (a red-team
review, 2026-11-26)."""

from __future__ import annotations

import pytest
from conftest import hack_candidate, hack_task

from stitchcuda.agents.verify.static_check import check_native_sources, check_source
from stitchcuda.agents.verify.verifier import VerifyOptions, verify

pytestmark = pytest.mark.usefixtures("isolated_cache")

CASES = [
    ("ref_affine", "hack_pop_modes_by_name", "hidden-dispatch", "calls torch.utils._python_dispatch._disable_current_modes"),
    ("ref_affine", "hack_redispatch_by_name", "hidden-dispatch", "calls torch._ops.OpOverload.redispatch"),
    ("ref_affine", "hack_aten_kernel_override", "hidden-dispatch", "calls torch.library.Library"),
    ("ref_linear", "hack_run_reference_forward", "calls-reference", "the reference's own code (forward)"),
    # (named by the guard's watching subclass since 2026-12-01; the key's exclusion seen at the calls
    # after it stays the check for guards made otherwise)
    ("ref_affine", "hack_exclude_python_key", "hidden-dispatch", "makes torch._C._DisableTorchDispatch"),
    # The pops called from C (map: no profile event); the blind check's alone before the switches'
    # watching wrappers (2026-12-01).
    ("ref_affine", "hack_pop_stack_from_c", "hidden-dispatch", "calls torch._C._pop_torch_dispatch_stack"),
    # The guard that drops the Python key, made under a computed name: the blind check's alone before
    # the guards were watched (2026-12-01).
    ("ref_affine", "hack_exclude_key_operators", "hidden-dispatch", "makes torch._C._DisableTorchDispatch"),
    # The pybind method under OpOverload.redispatch, and an operator's kernel for one named key: each
    # ran a forward past the recorder and the witness's profiler (a red-team review, 2026-12-02).
    ("ref_affine", "hack_redispatch_boxed", "hidden-dispatch", "calls torch._C._DispatchOperatorHandle.redispatch_boxed"),
    ("ref_affine", "hack_op_dk", "hidden-dispatch", "calls OpOverload._op_dk"),
    # One backend key's kernel fetched at import (a _SafeKernelFunction) and run with its call_boxed in
    # forward: aten::addmm's CPU kernel, past the recorder and the profiler (a red-team review, 2026-12-05).
    ("ref_linear", "hack_rt5_safe_kernel_call_boxed", "hidden-dispatch",
     "calls torch._C._dispatch_get_computed_kernel_for_dispatch_key"),
]


@pytest.mark.parametrize(("ref", "stem", "code", "named"), CASES, ids=[c[1] for c in CASES])
def test_calls_past_the_recorder_are_seen(tmp_path, ref, stem, code, named):
    v = verify(hack_task(ref), hack_candidate(stem), tmp_path / "c", VerifyOptions(cpu_only=True, time_compile=False))
    assert v.status == "hacked", v.message
    assert any(f.code == code and named in f.message for f in v.hack_findings), [f.message for f in v.hack_findings]


def test_an_honest_candidate_calls_nothing_of_the_kind(tmp_path):
    v = verify(hack_task("ref_affine"), hack_candidate("good_affine"), tmp_path / "c",
               VerifyOptions(cpu_only=True, time_compile=False))
    assert v.status == "ok" and not v.hack_findings, v.message


NATIVE = """
torch::Tensor f(torch::Tensor x) {
  c10::impl::ExcludeDispatchKeyGuard quiet(c10::DispatchKeySet(c10::DispatchKey::Python));
  return at::relu(x);
}
"""


def test_the_names_written_out_are_static_findings():
    py = f"""
import torch.nn as nn
from torch.utils._python_dispatch import _disable_current_modes
from torch.utils.cpp_extension import load_inline
_ext = load_inline(name="q", cpp_sources={NATIVE!r}, functions=["f"])

class ModelNew(nn.Module):
    def forward(self, x):
        with _disable_current_modes():
            return _ext.f(x)
"""
    found = [f for f in check_source(py) if f.code == "hidden-dispatch"]
    assert any("_disable_current_modes" in f.message for f in found), found
    assert any("ExcludeDispatchKeyGuard" in f.message for f in found), found
    (native,) = check_native_sources({"kernels.cu": NATIVE, "notes.txt": NATIVE})
    assert native.file == "kernels.cu" and native.line == 3 and "ExcludeDispatchKeyGuard" in native.message
    assert check_native_sources({"kernels.cu": "__global__ void k(float* y) { y[0] = 1.0f; }"}) == []


def test_values_taken_to_the_host_in_forward_are_static_findings():
    for take in ("x.numpy() * 2", "[v * 2 for v in x.tolist()]"):
        py = f"""
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        return torch.tensor({take})
"""
        assert any(f.code == "torch-compute-in-forward" and take.split("(")[0].split(".")[-1] in f.message
                   for f in check_source(py)), check_source(py)


def test_a_reference_that_ignores_its_inputs_is_said_to(tmp_path):
    """A kernel that skips the work matches a constant reference; the verdict says the check cannot tell."""
    v = verify(hack_task("ref_constant"), hack_candidate("skip_constant"), tmp_path / "c",
               VerifyOptions(cpu_only=True, time_compile=False))
    assert any(f.code == "constant-reference" for f in v.findings), (v.status, v.findings)
    w = verify(hack_task("ref_affine"), hack_candidate("good_affine"), tmp_path / "d",
               VerifyOptions(cpu_only=True, time_compile=False))
    assert not any(f.code == "constant-reference" for f in w.findings)


def test_each_switch_called_from_c_is_named(tmp_path, monkeypatch):
    """The switches reached through map (no profile event for a C function calling one): each is a
    watching wrapper wherever a module holds it, and names itself when the candidate's code calls it,
    in a watched phase only. (The worker keeps one finding a code; here every call is seen.)"""
    import importlib.util
    import sys

    import torch

    from stitchcuda.agents.verify import call_watch

    cand = tmp_path / "cand"
    cand.mkdir()
    (cand / "m.py").write_text(
        "import torch\n"
        "_C = getattr(torch, '_' + 'C')\n"
        "_rf = getattr(getattr(_C, '_auto' + 'grad'), '_enable_record' + '_function')\n"
        "_pop = getattr(_C, '_pop_torch' + '_dispatch_stack')\n"
        "_push = getattr(_C, '_push_on_torch' + '_dispatch_stack')\n"
        "_guard = getattr(_C, '_Disable' + 'TorchDispatch')\n"
        "def go():\n"
        "    with _guard():\n"
        "        pass\n"
        "    list(map(_rf, [False]))\n"
        "    list(map(_rf, [True]))\n"
        "    held = list(map(_pop, [None]))\n"
        "    list(map(_push, held))\n")
    monkeypatch.setattr(call_watch, "_state", call_watch._State())
    call_watch.install(cand, tmp_path / "ref.py")
    spec = importlib.util.spec_from_file_location("sc_switch_cand", cand / "m.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)

    class Mode(torch.utils._python_dispatch.TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    with Mode():
        before = call_watch.seen()
        mod.go()  # outside a watched phase: nothing
        assert call_watch.seen() == before
        with call_watch.watching("forward"):
            mod.go()
        torch.relu(torch.ones(2))  # the mode pushed back still works
    named = {what for code, what, phase in call_watch.seen() if code == "hidden-dispatch" and phase == "forward"}
    for switch in ("torch._C._autograd._enable_record_function", "torch._C._pop_torch_dispatch_stack",
                   "torch._C._push_on_torch_dispatch_stack", "makes torch._C._DisableTorchDispatch"):
        assert any(switch in w for w in named), named
    assert torch._C._autograd._enable_record_function is mod._rf and sys.modules["torch.autograd"]._enable_record_function is mod._rf


def test_kernels_handed_out_below_the_python_key_are_watched(tmp_path, monkeypatch):
    """Each torch._C entry in this torch that hands out or runs one key's kernel is a watching wrapper,
    and a kernel fetched outside a watched phase (however: the getter, torch.library.get_kernel) still
    names its call_boxed in forward, which computes what the kernel does."""
    import importlib.util

    import torch

    from stitchcuda.agents.verify import call_watch

    cand = tmp_path / "cand"
    cand.mkdir()
    (cand / "m.py").write_text(
        "import torch\n"
        "_C = getattr(torch, '_' + 'C')\n"
        "def fetch():\n"
        "    return getattr(torch.library, 'get_' + 'kernel')('aten::' + 'addmm', 'CPU')\n"
        "def go(k, a, b, c):\n"
        "    return list(map(k.call_boxed, [_C._dispatch_keys(b)], [a], [b], [c]))[0]\n")
    monkeypatch.setattr(call_watch, "_state", call_watch._State())
    call_watch.install(cand, tmp_path / "ref.py")
    for owner, attr in [*((torch._C, n) for m, n in call_watch._SWITCHES if m == "torch._C"),
                        *((getattr(torch._C, c), n) for c, n in call_watch._KERNEL_HANDOUTS)]:
        fn = getattr(owner, attr, None)
        assert fn is None or getattr(fn, "_sc_switch", False), attr
    for c, n in (("_SafeKernelFunction", "call_boxed"), ("_DispatchOperatorHandle", "redispatch_boxed")):
        assert getattr(getattr(torch._C, c), n)._sc_switch  # (present in this torch)
    assert torch._C._dispatch_get_computed_kernel_for_dispatch_key._sc_switch
    assert torch._C._dispatch_tls_set_dispatch_key_excluded._sc_switch and torch._C._dispatch_library._sc_switch

    spec = importlib.util.spec_from_file_location("sc_kernel_cand", cand / "m.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    before = call_watch.seen()  # (the record is the process's: earlier tests' entries stay)
    k = mod.fetch()  # outside a watched phase: nothing
    a, b, c = torch.randn(3), torch.randn(2, 4), torch.randn(4, 3)
    assert call_watch.seen() == before
    with call_watch.watching("import"):
        mod.fetch()
    with call_watch.watching("forward"):
        out = mod.go(k, a, b, c)
    assert torch.allclose(out, torch.addmm(a, b, c))
    named = {(what, phase) for code, what, phase in call_watch.seen()[len(before):] if code == "hidden-dispatch"}
    assert any("torch.library.get_kernel" in w and p == "import" for w, p in named), named
    assert any("torch._C._SafeKernelFunction.call_boxed" in w and p == "forward" for w, p in named), named
