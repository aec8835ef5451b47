"""The generated forward's host path: what it allocates per call, what it reuses, and that reuse never
shows in results (issue 16, host overhead). Run on the CPU through the candidate's host entry points,
compiled with nvcc."""

from __future__ import annotations

import contextlib
import gc
import itertools
import weakref
from pathlib import Path

import pytest
import torch
import torch.nn as nn
from conftest import Staged, builtin_candidate, load_model_new, needs_nvcc
from torch.utils._python_dispatch import TorchDispatchMode

from stitchcuda.agents.verify.static_check import check_source

pytestmark = pytest.mark.usefixtures("isolated_cache")
_ids = itertools.count()




class TwoLinears(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(64, 48)
        self.b = nn.Linear(48, 32)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def build(module: nn.Module, inputs: list, *, host: bool = True):
    return builtin_candidate(module, inputs, host=host)


def load(cand, module: nn.Module, folder: Path) -> nn.Module:
    new, mod = load_model_new(cand, module, folder)
    new.buffers_of_module = mod._BUFFERS  # type: ignore[attr-defined]  # reused buffers, per device and stream
    return new


@pytest.mark.nvcc
@needs_nvcc
def test_intermediates_are_reused_and_outputs_are_fresh(tmp_path):
    module = Staged()
    x1, x2 = torch.randn(2, 6, 9, 11), torch.randn(2, 6, 9, 11)
    cand = build(module, [x1])
    assert not check_source(cand.files[cand.module])
    new = load(cand, module, tmp_path)
    out1 = new(x1)
    kept = out1.clone()
    (key, bufs), = new.buffers_of_module.items()  # one device and stream: one set
    ptrs = [b.data_ptr() for b in bufs]
    assert len(bufs) >= 2  # the two intermediates between the three kernels
    out2 = new(x2)
    torch.testing.assert_close(out1, module(x1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out2, module(x2), rtol=1e-5, atol=1e-5)
    # The second call reused the buffers, and did not write into what the first call returned.
    assert [b.data_ptr() for b in new.buffers_of_module[key]] == ptrs
    assert out1.data_ptr() != out2.data_ptr()
    assert torch.equal(out1, kept)
    assert all(out1.data_ptr() != p for p in ptrs)


@pytest.mark.nvcc
@needs_nvcc
def test_a_replaced_parameter_is_read_on_the_next_call(tmp_path):
    # State is read from the module's registries on every call, not cached: a user who assigns a new
    # Parameter gets results with it.
    module = Staged()
    x = torch.randn(2, 6, 9, 11)
    new = load(build(module, [x]), module, tmp_path)
    new(x)
    fresh = torch.randn(6, 1, 1)
    new.w = nn.Parameter(fresh.clone())
    module.w = nn.Parameter(fresh.clone())
    torch.testing.assert_close(new(x), module(x), rtol=1e-5, atol=1e-5)
    new.w = nn.Parameter(torch.randn(6, 2, 1))
    with pytest.raises(ValueError, match="generated for w of shape"):
        new(x)


def test_library_workspaces_are_one_buffer_per_slot(tmp_path):
    # Two GEMMs each ask for a cuBLAS workspace; they run one after the other on one stream, so the
    # generated module makes one buffer, as large as the larger, and hands it to both.
    module = TwoLinears()
    cand = build(module, [torch.randn(16, 64)], host=False)
    text = cand.files[cand.module]
    buffers = text[text.index("def _buffers"):text.index("class ModelNew")]
    assert buffers.count("dtype=torch.uint8") == 1, buffers
    call = text[text.index("_lib.call_all("):text.index("_FAST = ")]
    assert call.count("workspace0_uint8") == 2, call
    fast = text[text.index("rc = f.fn("):text.index("def _arm")]  # the fast path passes the same buffer
    assert fast.count("workspace0_uint8") == 2, fast


def _staged(tmp_path: Path):
    """Staged, an input, and its loaded CPU candidate (ModelNew and its module)."""
    module = Staged()
    x = torch.randn(2, 6, 9, 11)
    new, mod = load_model_new(build(module, [x]), module, tmp_path)
    return module, x, new, mod


def _on_the_fast_path(tmp_path: Path):
    """_staged's, called three times without grad: the fast path armed, the next call's outputs made."""
    module, x, new, mod = _staged(tmp_path)
    with torch.no_grad():
        for _ in range(3):
            new(x)
    assert mod._FAST.ahead
    return module, x, new, mod


class Passing(TorchDispatchMode):
    """A dispatch mode that changes nothing: its dispatch keys are what the guard sees."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def _spied(mod) -> dict[str, int]:
    """Counts of the generated module's two paths: _kernels (forward's own) and _fast's lean call."""
    calls = {"kernels": 0, "fast": 0}
    kernels, fast = mod._kernels, mod._fast

    def kernels_spy(*a, **k):
        calls["kernels"] += 1
        return kernels(*a, **k)

    def fast_spy(*lists):
        got = fast(*lists)
        calls["fast"] += got is not None
        return got

    mod._kernels, mod._fast = kernels_spy, fast_spy
    return calls


@pytest.mark.nvcc
@needs_nvcc
def test_the_fast_path_takes_over_after_one_checked_call_and_steps_aside_otherwise(tmp_path):
    module = Staged()
    x = torch.randn(2, 6, 9, 11)
    cand = build(module, [x])
    assert not check_source(cand.files[cand.module])
    # Where no result is shaped by the batch, only forward's own path reads it.
    forward = cand.files[cand.module].split("    def forward", 1)[1]
    assert forward.index("_fast(") < forward.index("batch = x.shape[0]")
    new, mod = load_model_new(cand, module, tmp_path)
    calls = _spied(mod)
    with torch.no_grad():
        out1 = new(x)  # forward's own checks and path; it arms the guard
        assert calls == {"kernels": 1, "fast": 0} and mod._FAST.guard is not None
        kept = out1.clone()
        x2 = torch.randn(2, 6, 9, 11)
        out2 = new(x2)
        assert calls == {"kernels": 1, "fast": 1}
        torch.testing.assert_close(out2, module(x2), rtol=1e-5, atol=1e-5)
        assert out2.data_ptr() != out1.data_ptr() and torch.equal(out1, kept)  # a fresh output each call
        # Not contiguous, another batch, another dtype: forward's own path, with its own answers.
        strided = torch.randn(2, 6, 11, 9).transpose(-1, -2)
        torch.testing.assert_close(new(strided), module(strided), rtol=1e-5, atol=1e-5)
        assert calls["fast"] == 1 and calls["kernels"] == 2
        other = torch.randn(3, 6, 9, 11)
        torch.testing.assert_close(new(other), module(other), rtol=1e-5, atol=1e-5)
        assert calls["fast"] == 1
        with pytest.raises(ValueError, match="generated for x"):
            new(x.double())
        torch.testing.assert_close(new(x), module(x), rtol=1e-5, atol=1e-5)
        assert calls["fast"] == 2
    # With autograd recording (w requires grad): the op, whose backward works; never the fast path.
    out = new(x)
    assert out.requires_grad and calls["fast"] == 2
    out.sum().backward()
    ref = module(x)
    ref.sum().backward()
    torch.testing.assert_close(new.w.grad, module.w.grad, rtol=1e-4, atol=1e-4)


@pytest.mark.nvcc
@needs_nvcc
def test_without_torch_s_tensor_guard_forward_keeps_its_own_path(tmp_path, monkeypatch):
    import torch._C._dynamo.guards as guards

    module, x, new, mod = _staged(tmp_path)
    monkeypatch.delattr(guards, "TensorGuards")  # a torch without it: arming fails once, quietly
    calls = _spied(mod)
    with torch.no_grad():
        for _ in range(3):
            torch.testing.assert_close(new(x), module(x), rtol=1e-5, atol=1e-5)
    assert mod._FAST.off and calls == {"kernels": 3, "fast": 0}


class Flattened(nn.Module):
    def forward(self, x):
        return (torch.relu(x) * 2.0).reshape(x.shape[0], -1)


@pytest.mark.nvcc
@needs_nvcc
def test_a_result_shaped_by_the_batch_comes_back_the_same_on_the_fast_path(tmp_path):
    # The returned view is shaped with the batch size: forward reads it before the fast path's test,
    # so both paths have it (a batch read only on forward's own path failed on the second call).
    module = Flattened()
    x = torch.randn(4, 3, 5)
    cand = build(module, [x])
    forward = cand.files[cand.module].split("    def forward", 1)[1]
    assert forward.index("batch = x.shape[0]") < forward.index("_fast(")
    new, mod = load_model_new(cand, module, tmp_path)
    calls = _spied(mod)
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(4, 3, 5)
            got = new(x)
            assert got.shape == (4, 15)
            torch.testing.assert_close(got, module(x))
        other = torch.randn(7, 3, 5)
        torch.testing.assert_close(new(other), module(other))
    assert calls["fast"] == 2


class Normed(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(12)

    def forward(self, x):
        return torch.relu(self.bn(x)) * 2.0


@pytest.mark.nvcc
@needs_nvcc
def test_the_fast_path_updates_module_state_as_forward_does(tmp_path):
    # Training mode: each call updates BatchNorm's running statistics and its counter in place; the
    # fast path guards those tensors too and its kernels write them, call after call.
    module = Normed().train()
    x = torch.randn(16, 12)
    cand = build(module, [x])
    assert not check_source(cand.files[cand.module])
    new, mod = load_model_new(cand, module, tmp_path)
    new.train()
    calls = _spied(mod)
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(16, 12)
            torch.testing.assert_close(new(x), module(x), rtol=1e-5, atol=1e-5)
    assert calls == {"kernels": 1, "fast": 2}
    for name, ref in module.bn.state_dict().items():
        torch.testing.assert_close(new.bn.state_dict()[name], ref, rtol=1e-5, atol=1e-6, msg=name)
    assert int(new.bn.num_batches_tracked) == 3


@pytest.mark.nvcc
@needs_nvcc
def test_a_guard_armed_under_a_dispatch_mode_is_armed_again_outside_it(tmp_path):
    # The Verifier checks a candidate under its op recorder (a TorchDispatchMode) before it times
    # it: a guard built there holds that mode's dispatch keys and fails every call outside it, so
    # forward builds it again the first time its own checks pass where the guard does not.
    module, x, new, mod = _staged(tmp_path)
    calls = _spied(mod)
    with torch.no_grad():
        with Passing():
            for _ in range(2):
                torch.testing.assert_close(new(x), module(x), rtol=1e-5, atol=1e-5)
        assert calls == {"kernels": 1, "fast": 1}  # armed inside, fast inside
        for _ in range(3):
            torch.testing.assert_close(new(x), module(x), rtol=1e-5, atol=1e-5)
        assert calls == {"kernels": 2, "fast": 3}  # one call outside re-arms it, then fast again
        with torch.inference_mode():
            xi = torch.randn(2, 6, 9, 11)
            for _ in range(2):
                torch.testing.assert_close(new(xi), module(xi), rtol=1e-5, atol=1e-5)
        assert calls == {"kernels": 3, "fast": 4}


@pytest.mark.nvcc
@needs_nvcc
def test_calls_alternating_between_two_states_stop_building_guards(tmp_path):
    # Inside a dispatch mode and outside it, call after call: each call fails the other's guard; after
    # FastPath.BUILDS guards forward keeps the last one and takes its own path for the other state.
    module, x, new, mod = _staged(tmp_path)
    with torch.no_grad():
        for k in range(2 * mod.FastPath.BUILDS + 6):
            with Passing() if k % 2 else contextlib.nullcontext():
                torch.testing.assert_close(new(x), module(x), rtol=1e-5, atol=1e-5)
    assert mod._FAST.builds == mod.FastPath.BUILDS


@pytest.mark.nvcc
@needs_nvcc
def test_the_fast_path_returns_outputs_made_by_the_call_before_each_its_own(tmp_path):
    # The fast path's outputs are allocated by the previous call, after its launch (FastPath.ahead):
    # each result is still memory of its own, never written again by a later call.
    module, x, new, mod = _staged(tmp_path)
    calls = _spied(mod)
    with torch.no_grad():
        new(x)  # forward's own path arms the guard
        results, inputs = [], []
        for _ in range(4):
            made = dict(mod._FAST.ahead)
            xi = torch.randn(2, 6, 9, 11)
            out = new(xi)
            if made:  # the tensor the call before made is the one handed out
                (ahead,), = made.values()
                assert out is ahead
            (nxt,), = mod._FAST.ahead.values()
            assert nxt.data_ptr() != out.data_ptr()
            results.append((out, out.clone()))
            inputs.append(xi)
        assert calls["fast"] == 4
        for (out, kept), xi in zip(results, inputs, strict=True):
            assert torch.equal(out, kept)
            torch.testing.assert_close(out, module(xi), rtol=1e-5, atol=1e-5)
        assert len({out.data_ptr() for out, _ in results}) == 4


@pytest.mark.nvcc
@needs_nvcc
def test_outputs_made_ahead_never_cross_into_another_guard_s_state(tmp_path):
    # An output made outside inference mode is not handed out inside it, nor the other way round:
    # the guard is built again there, and that drops what the old one's calls made.
    module, x, new, mod = _staged(tmp_path)
    with torch.no_grad():
        for _ in range(3):
            assert not new(x).is_inference()
    assert mod._FAST.ahead
    with torch.inference_mode():
        for _ in range(3):
            got = new(x)
            assert got.is_inference()
    for _ in range(3):
        got = new(x)
        assert not got.is_inference()
        got.add_(1.0)  # an inference tensor would refuse this outside inference mode


def _call_with_empty_like(monkeypatch, instead, new, *args):
    """new(*args) with torch.empty_like (what makes the next call's outputs, after the launch)
    replaced by instead(the real one, its arguments...)."""
    real = torch.empty_like
    monkeypatch.setattr(torch, "empty_like", lambda *a, **k: instead(real, *a, **k))
    try:
        return new(*args)
    finally:
        monkeypatch.setattr(torch, "empty_like", real)


@pytest.mark.nvcc
@needs_nvcc
def test_outputs_made_ahead_for_a_guard_built_again_meanwhile_are_dropped(tmp_path, monkeypatch):
    # Another thread may build the guard again (a new dict of outputs made ahead) while this call
    # allocates the next call's outputs: those go into this call's dict, never the new one, so an
    # output made under the old guard's state is never handed out under the new one's.
    module, x, new, mod = _on_the_fast_path(tmp_path)
    with torch.no_grad():

        def meanwhile(real, *args, **kwargs):
            mod._FAST.ahead = {}  # what FastPath.arm does when another thread builds the guard again
            return real(*args, **kwargs)

        got = _call_with_empty_like(monkeypatch, meanwhile, new, x)
        assert mod._FAST.ahead == {}
        torch.testing.assert_close(got, module(x), rtol=1e-5, atol=1e-5)


@pytest.mark.nvcc
@needs_nvcc
def test_no_room_for_the_next_call_s_outputs_costs_this_call_nothing(tmp_path, monkeypatch):
    module, x, new, mod = _on_the_fast_path(tmp_path)
    with torch.no_grad():

        def full(real, *args, **kwargs):
            raise torch.OutOfMemoryError("no memory")

        got = _call_with_empty_like(monkeypatch, full, new, x)  # its output was made ahead; the refill fails
        torch.testing.assert_close(got, module(x), rtol=1e-5, atol=1e-5)
        assert not mod._FAST.ahead_ok and not mod._FAST.ahead
        torch.testing.assert_close(new(x), module(x), rtol=1e-5, atol=1e-5)


@pytest.mark.nvcc
@needs_nvcc
def test_outputs_made_ahead_go_when_the_module_is_moved_or_collected(tmp_path):
    module, x, new, mod = _on_the_fast_path(tmp_path)
    (held,), = mod._FAST.ahead.values()
    new.double()  # any move (.to, .cuda, .cpu, a dtype) lets them go
    assert not mod._FAST.ahead
    new.float()
    with torch.no_grad():
        for _ in range(3):
            new(x)
    (held,), = mod._FAST.ahead.values()
    gone = weakref.ref(held)
    del held, new
    gc.collect()
    assert not mod._FAST.ahead and gone() is None


@pytest.mark.nvcc
@needs_nvcc
def test_outputs_are_made_ahead_only_where_they_are_a_small_share_of_memory(tmp_path, monkeypatch):
    module, x, new, mod = _staged(tmp_path)
    per_call = mod._FAST.ahead_bytes
    assert per_call == module(x).numel() * 4
    monkeypatch.setattr(mod, "memory_of", lambda device: per_call * mod.FastPath.AHEAD_SHARE - 1)
    calls = _spied(mod)
    with torch.no_grad():
        for _ in range(3):
            torch.testing.assert_close(new(x), module(x), rtol=1e-5, atol=1e-5)
    assert calls["fast"] == 2 and not mod._FAST.ahead_ok and not mod._FAST.ahead


@pytest.mark.nvcc
@needs_nvcc
def test_the_setting_leaves_outputs_made_ahead_out_of_the_module(tmp_path, monkeypatch):
    module = Staged()
    x = torch.randn(2, 6, 9, 11)
    monkeypatch.setenv("STITCHCUDA_OUTPUTS_AHEAD", "0")
    cand = build(module, [x])
    assert "f.ahead.pop(" not in cand.files[cand.module]
    new, mod = load_model_new(cand, module, tmp_path)
    with torch.no_grad():
        for _ in range(3):
            torch.testing.assert_close(new(x), module(x), rtol=1e-5, atol=1e-5)
    assert not mod._FAST.ahead


@pytest.mark.gpu
@needs_nvcc
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_the_gpu_outputs_made_ahead_stay_with_their_stream_and_mode(tmp_path):
    # On CUDA: calls on two streams, each with its own outputs made ahead (allocated on that stream),
    # every result correct and its own memory; then inference mode, whose results are inference
    # tensors and whose outputs made ahead are not handed out after it.
    module = Staged()
    cand = build(module, [torch.randn(2, 6, 9, 11)], host=False)
    module = module.cuda()
    x = torch.randn(2, 6, 9, 11, device="cuda")
    new, mod = load_model_new(cand, module, tmp_path)
    new = new.cuda()
    side = torch.cuda.Stream()
    kept = []
    with torch.no_grad():
        for k in range(6):
            stream = side if k % 2 else torch.cuda.current_stream()
            with torch.cuda.stream(stream):
                xi = torch.randn(2, 6, 9, 11, device="cuda")
                out = new(xi)
                want = module(xi)
            torch.cuda.synchronize()
            torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-4)
            kept.append((out, out.clone()))
        assert len(mod._FAST.ahead) == 2  # one set per stream
        # A third stream: its calls are right, and no third set of outputs is held.
        third = torch.cuda.Stream()
        with torch.cuda.stream(third):
            for _ in range(3):
                xi = torch.randn(2, 6, 9, 11, device="cuda")
                out = new(xi)
                torch.testing.assert_close(out, module(xi), rtol=1e-4, atol=1e-4)
                kept.append((out, out.clone()))
        torch.cuda.synchronize()
        assert len(mod._FAST.ahead) == mod.FastPath.AHEAD_STREAMS == 2
    assert all(torch.equal(out, copy) for out, copy in kept)
    assert len({out.data_ptr() for out, _ in kept}) == len(kept)
    with torch.inference_mode():
        for _ in range(3):
            assert new(x).is_inference()
    for _ in range(3):
        got = new(x)
        assert not got.is_inference()
        torch.testing.assert_close(got, module(x), rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
@needs_nvcc
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_the_gpu_a_capture_on_a_warm_stream_writes_memory_of_its_own(tmp_path):
    # Calls on a stream, then a CUDA graph captured on that very stream: the captured call must not
    # take the fast path, whose outputs were made before the capture, outside the graph's pool.
    module = Staged()
    cand = build(module, [torch.randn(2, 6, 9, 11)], host=False)
    module = module.cuda()
    new, mod = load_model_new(cand, module, tmp_path)
    new = new.cuda()
    stream = torch.cuda.Stream()
    x = torch.randn(2, 6, 9, 11, device="cuda")
    with torch.no_grad():
        with torch.cuda.stream(stream):
            for _ in range(4):
                new(x)
        torch.cuda.synchronize()
        made = [t.data_ptr() for ts in mod._FAST.ahead.values() for t in ts]
        assert made
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            y = new(x)
        assert y.data_ptr() not in made
        x.copy_(torch.randn_like(x))
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(y, module(x), rtol=1e-4, atol=1e-4)
