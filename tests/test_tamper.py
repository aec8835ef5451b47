"""Issue 18: work off the calling thread, timing the candidate cannot rebind, and one candidate's
hold on the GPU not counted against another's limit. The timing binds its primitives before the
candidate is imported, and the worker reports any rebinding of what timing and checks read."""

from __future__ import annotations

import ctypes
import fcntl
import threading
import time
from pathlib import Path

import pytest
import torch
from conftest import hack_candidate, hack_task, static_codes

from stitchcuda.agents.verify import dynamic_check as dyn
from stitchcuda.agents.verify import tamper, timing
from stitchcuda.agents.verify.verifier import VerifyOptions, verify

pytestmark = pytest.mark.usefixtures("isolated_cache")


def test_a_candidate_that_rebinds_the_timing_is_a_hack(tmp_path):
    v = verify(hack_task("ref_affine"), hack_candidate("hack_timing_rebind"), tmp_path / "c",
               VerifyOptions(cpu_only=True, time_compile=False))
    assert v.correct and v.status == "hacked", v.message  # right results, and still refused
    (f,) = [f for f in v.hack_findings if f.code == "timing-tamper"]
    assert f.data["names"] == ["time.perf_counter", "torch.cuda.Event.elapsed_time"]


def test_rebinding_at_the_first_call_through_computed_names_is_a_hack(tmp_path):
    """Nothing at import, no attribute named in the source: the check after the timed calls sees it."""
    v = verify(hack_task("ref_affine"), hack_candidate("hack_timing_setattr_first_call"), tmp_path / "c",
               VerifyOptions(cpu_only=True, time_compile=False))
    assert v.status == "hacked", v.message
    (f,) = [f for f in v.hack_findings if f.code == "timing-tamper"]
    assert f.data["names"] == ["torch.cuda.Event.elapsed_time"]


@pytest.mark.parametrize(("stem", "names"), [
    ("hack_rebind_worker_compare", ["__main__._follow_inputs_findings", "__main__.compare_outputs"]),
    ("hack_patch_reference_forward", [".Model.forward"]),
    ("hack_widen_allowed_ops", ["stitchcuda.agents.verify.torch_ops.ALLOWED_ATEN"]),
    ("hack_tensor_method_rebind", ["torch.Tensor.double"]),
])
def test_a_candidate_that_rebinds_the_checks_or_the_reference_is_a_hack(tmp_path, stem, names):
    """The worker's own functions, the Verifier's tables (changed in place too), the tensor methods the
    comparison calls, the reference's class: each was accepted before (a red-team review, 2026-11-26)."""
    v = verify(hack_task("ref_affine"), hack_candidate(stem), tmp_path / "c",
               VerifyOptions(cpu_only=True, time_compile=False))
    assert v.status == "hacked", v.message
    (f,) = [f for f in v.hack_findings if f.code == "timing-tamper"]
    # The reference's module has a fresh name each run: its part is matched by its end.
    assert len(f.data["names"]) == len(names) and all(
        got == want or (want.startswith(".") and got.endswith(want)) for got, want in zip(f.data["names"], names, strict=True)
    ), f.data["names"]


def test_a_table_changed_in_place_is_seen_and_one_left_alone_is_not():
    from stitchcuda.agents.verify import torch_ops

    before = tamper.snapshot()
    assert tamper.changed(before) == []
    torch_ops.ALLOWED_ATEN.add("not_an_op")
    try:
        assert tamper.changed(before) == ["stitchcuda.agents.verify.torch_ops.ALLOWED_ATEN"]
    finally:
        torch_ops.ALLOWED_ATEN.discard("not_an_op")
    assert tamper.changed(before) == []


def test_a_module_watched_for_rebinding_alone_may_fill_its_own_tables():
    """The blind check's witness watches torch's profiler modules, which keep run state in tables
    (torch 2.11 adds to profiler._WARNINGS_SHOWN as the witness profiles on a GPU: every candidate's
    blind check was a timing-tamper). Filling such a table is not a finding; rebinding a name is.
    The same table in a module watched in full still counts by its contents."""
    import types

    def fresh(name: str) -> types.ModuleType:
        mod = types.ModuleType(name)
        mod._WARNINGS_SHOWN = set()
        mod.events = lambda: []
        return mod

    state, full = fresh("profiler_like"), fresh("watched_in_full")
    before = tamper.snapshot(extra=(full,), rebound_only=(state,))
    state._WARNINGS_SHOWN.add("Profiler clears events at the end of each cycle")
    assert tamper.changed(before) == []
    full._WARNINGS_SHOWN.add("a warning")
    assert tamper.changed(before) == ["watched_in_full._WARNINGS_SHOWN"]
    full._WARNINGS_SHOWN.clear()
    state.events = lambda: ["aten::mm"]
    state._WARNINGS_SHOWN = set()
    assert tamper.changed(before) == ["profiler_like._WARNINGS_SHOWN", "profiler_like.events"]


def test_an_honest_candidate_leaves_them_alone(tmp_path):
    v = verify(hack_task("ref_affine"), hack_candidate("good_affine"), tmp_path / "c",
               VerifyOptions(cpu_only=True, time_compile=False))
    assert v.status == "ok" and not v.hack_findings, v.message
    assert not any("not watched" in n for n in v.notes), v.notes  # the native watch was on


def test_a_thread_started_by_the_candidates_own_cpp_is_a_hack(tmp_path):
    """std::thread in the candidate's library: seen by the preloaded pthread_create watch and
    attributed to that library; threads PyTorch starts for itself (its CPU pool) are not."""
    v = verify(hack_task("ref_affine"), hack_candidate("hack_native_thread", "kernels_thread.cpp"), tmp_path / "c",
               VerifyOptions(cpu_only=True, time_compile=False))
    assert v.correct and v.status == "hacked", v.message
    (f,) = [f for f in v.hack_findings if f.code == "off-thread-work"]
    assert "a native thread started by" in f.message and "during forward" in f.message, f.message


def test_a_thread_behind_a_flood_of_threads_is_still_the_candidates(tmp_path):
    """An OpenMP team of 300 first (libgomp's threads, not the candidate's), then the library's own
    std::thread: the watch's ring keeps the last 256 starts, and more than it keeps in one window
    count as the candidate's. (The record kept the first 64 before, and this was accepted.)"""
    v = verify(hack_task("ref_affine"), hack_candidate("hack_native_thread_flood", "kernels_flood.cpp"),
               tmp_path / "c", VerifyOptions(cpu_only=True, time_compile=False))
    assert v.correct and v.status == "hacked", v.message
    (f,) = [f for f in v.hack_findings if f.code == "off-thread-work"]
    assert "native thread" in f.message or "more threads than" in f.message, f.message


def test_a_library_that_removes_its_own_file_is_a_finding(tmp_path):
    """Its file gone once loaded: the native watch recorded it as dlopen found it, and the worker
    compares. An honest library is still there, the same file (test_an_honest... above)."""
    v = verify(hack_task("ref_affine"), hack_candidate("hack_library_vanishes", "kernels_vanish.cpp"),
               tmp_path / "c", VerifyOptions(cpu_only=True, time_compile=False))
    assert v.status == "hacked", v.message
    (f,) = [f for f in v.hack_findings if f.code == "library-changed"]
    assert "removed or replaced" in f.message, f.message


def test_threads_a_library_starts_inside_the_candidates_call_are_the_librarys(tmp_path):
    """OpenMP in the candidate's own loop: libgomp starts its team's threads, so the requester is
    libgomp, not the candidate's library (as for threads cuBLAS or cuDNN start inside a call): no
    finding. Only threads the candidate's own code asks for are its own."""
    v = verify(hack_task("ref_affine"), hack_candidate("good_affine_omp", "kernels_omp.cpp"), tmp_path / "c",
               VerifyOptions(cpu_only=True, time_compile=False))
    assert v.status == "ok" and not v.hack_findings, (v.message, v.hack_findings)


def test_rebinding_is_seen_and_the_timing_keeps_its_own(monkeypatch):
    before = tamper.snapshot()
    monkeypatch.setattr(torch.cuda.Event, "elapsed_time", lambda self, end: 0.001)
    monkeypatch.setattr(time, "monotonic", lambda: 0.0)
    assert tamper.changed(before) == ["time.monotonic", "torch.cuda.Event.elapsed_time"]
    # The timing calls what was bound when it was imported, not what is there now.
    assert timing._elapsed is not torch.cuda.Event.elapsed_time
    # Objects PyTorch itself put there (torch.compile may patch torch) are not the candidate's doing.
    monkeypatch.setattr(torch.cuda, "synchronize", torch.cuda.is_available)
    assert "torch.cuda.synchronize" not in tamper.changed(before, except_from=("torch",))


@pytest.mark.gpu
def test_on_the_gpu_a_rebound_event_does_not_change_the_measured_time(monkeypatch):
    x = torch.randn(4096, 4096, device="cuda")
    honest, _ = timing.time_cuda(lambda a: a[0] @ a[0], [[x]], trials=5)
    monkeypatch.setattr(torch.cuda.Event, "elapsed_time", lambda self, end: 0.001)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    rebound, _ = timing.time_cuda(lambda a: a[0] @ a[0], [[x]], trials=5)
    assert rebound.median_ms > 10 * 0.001 and rebound.median_ms == pytest.approx(honest.median_ms, rel=0.5)


@pytest.mark.parametrize("stem,event", [("hack_thread_forward", "_thread.start_new_thread during forward"),
                                        ("hack_thread_init", "_thread.start_new_thread during construction"),
                                        ("hack_thread_executor", "during forward"),
                                        ("hack_thread_asyncio", "during forward")])
def test_work_started_off_the_calling_thread_is_a_hack(tmp_path, stem, event):
    """Issue 18 point 1: a thread started from forward (however it was reached) is seen by Python's
    thread hooks, and refused even where the results are right. (A process: the sandbox's test below.)"""
    v = verify(hack_task("ref_affine"), hack_candidate(stem), tmp_path / "c",
               VerifyOptions(cpu_only=True, time_compile=False))
    assert v.correct and v.status == "hacked", v.message
    (f,) = [f for f in v.hack_findings if f.code == "off-thread-work"]
    assert event in f.message


def test_the_verifiers_own_state_is_out_of_reach(tmp_path):
    """A candidate that imports the Verifier's modules (to empty offthread's record of its thread)
    is a static finding, verifier-internals, beside the off-thread work it tried to hide."""
    v = verify(hack_task("ref_affine"), hack_candidate("hack_erase_offthread_record"), tmp_path / "c",
               VerifyOptions(cpu_only=True, time_compile=False))
    assert v.status == "hacked" and not v.accepted, v.message
    assert "verifier-internals" in static_codes(v), v.hack_findings


def test_a_process_started_from_forward_is_one_sandbox_finding(tmp_path):
    """A process started from forward (os.system) is refused by the sandbox's audit hook (issue 22)
    and never starts: one finding for the attempt, sandbox-process (the static check names the
    line too, under the same code), not also offthread's off-thread-work."""
    v = verify(hack_task("ref_affine"), hack_candidate("hack_process_forward"), tmp_path / "c",
               VerifyOptions(cpu_only=True, time_compile=False))
    assert v.status == "hacked" and not v.accepted, v.message
    assert "off-thread-work" not in {f.code for f in v.hack_findings}, v.hack_findings
    (f,) = [f for f in v.hack_findings if f.code == "sandbox-process" and not f.file]
    assert "os.system" in f.message


def _hold(lock: Path, seconds: float) -> threading.Thread:
    """Another candidate holding the GPU's lock (an flock from this process) for `seconds`."""
    ready = threading.Event()

    def hold() -> None:
        with open(lock, "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            ready.set()
            time.sleep(seconds)
            fcntl.flock(f, fcntl.LOCK_UN)

    t = threading.Thread(target=hold, daemon=True)
    t.start()
    ready.wait(10)
    return t


def test_waiting_for_the_gpu_does_not_count_against_the_limit(tmp_path):
    """Issue 18 point 3: a candidate waiting while another holds the GPU is not killed for the wait."""
    lock = tmp_path / "gpu.lock"
    holder = _hold(lock, 15.0)
    t0 = time.monotonic()
    v = verify(hack_task("ref_affine"), hack_candidate("good_affine"), tmp_path / "c",
               VerifyOptions(cpu_only=True, time_compile=False, lock=str(lock), timeout_s=12.0))
    holder.join()
    assert time.monotonic() - t0 > 12.0  # longer than its limit, in all
    assert v.status == "ok", v.message
    assert any(n.startswith("waited ") and "not counted against the time limit" in n for n in v.notes), v.notes


def test_a_hang_holding_the_gpu_is_killed_at_the_gpu_limit(tmp_path):
    v = verify(hack_task("ref_affine"), hack_candidate("crash_hang"), tmp_path / "c",
               VerifyOptions(cpu_only=True, time_compile=False, lock=str(tmp_path / "gpu.lock"),
                             gpu_phase_timeout_s=3.0, timeout_s=120.0))
    assert v.status == "timeout" and "held the GPU for more than 3 s" in v.message, v.message


def test_the_timing_floor_is_the_kernels_busy_time():
    """Issue 18: a forward cannot take less wall time than its kernels' GPU time run back to back."""
    kernels = [{"name": "a", "start": 0.0, "end": 10.0}, {"name": "b", "start": 5.0, "end": 20.0},  # overlap
               {"name": "c", "start": 30.0, "end": 40.0},
               {"name": dyn.MARKER, "start": 40.0, "end": 90.0}]  # the marker is not the forward's
    assert dyn.busy_us(kernels) == 30.0
    assert dyn.timing_floor_finding(0.030, 30.0) is None  # as long as its kernels
    assert dyn.timing_floor_finding(0.017, 30.0) is None  # within the margin (0.7 x 30 - 5 = 16 us)
    f = dyn.timing_floor_finding(0.010, 30.0)
    assert f is not None and f.code == "timing-tamper" and f.data == {"median_us": 10.0, "busy_us": 30.0}


def test_a_timing_floor_miss_is_believed_only_when_profiling_again_confirms_it():
    """A neighbour's work stretching one profiled forward (13.9 ms busy for 6.3 ms of kernels, seen
    on level 2's 100_ConvTranspose3d) is no hack; a tamper misses the floor on every profile."""
    calls: list[int] = []
    waited: list[float] = []

    def profiles(*busy: float):
        it = iter(busy)
        return lambda: calls.append(1) or next(it)

    def confirmed(median_ms: float, busy: float, reprofile):
        return dyn.confirmed_timing_floor(median_ms, busy, reprofile, pause=waited.append)

    # Contended first profile: the second one is the steady state, and the timed median is above it.
    f, busy = confirmed(6.46, 13_903.6, profiles(6_296.5))
    assert f is None and busy == 6_296.5 and len(calls) == 1 and waited == [dyn.FLOOR_PAUSES_S[0]]
    # A neighbour's burst over the first two profiles again (level 3's GRUBidirectional: 31.6 ms busy
    # three times back to back, 16.6 ms otherwise): the later, longer pauses outlast it.
    calls.clear(), waited.clear()
    f, busy = confirmed(16.88, 31_624.8, profiles(31_610.0, 31_590.0, 16_640.0))
    assert f is None and busy == 16_640.0 and len(calls) == 3
    assert waited == list(dyn.FLOOR_PAUSES_S) and waited == sorted(waited)
    # A tampered timing: every profile says the kernels take longer than the timed forward.
    calls.clear(), waited.clear()
    f, busy = confirmed(1.17, 4_550.0, profiles(4_548.0, 4_552.0, 4_549.0))
    assert f is not None and f.code == "timing-tamper" and busy == 4_548.0 and len(calls) == dyn.FLOOR_REPROFILES
    # Above the floor at once: no profile taken again, no pause.
    calls.clear(), waited.clear()
    assert confirmed(6.4, 6_300.0, profiles()) == (None, 6_300.0) and not calls and not waited


# Names as the profiler gives them (H100/H200 timelines of level 2 and the probes in bench/results).
ATEN_MUL = ("void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, float, "
            "at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul> >(int, ...)")
ATEN_COPY = ("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::"
             "direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda(float)#1}> >(int, ...)")
ATEN_FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >(int, ...)"
ATEN_DRAW = ("void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float, 4, "
             "at::native::templates::cuda::normal_and_transform<float, float, ...> >(long, ...)")


def test_kernels_pytorch_launched_for_compute_are_told_from_the_candidates_own():
    own_and_libraries = [
        "void stitch_pw1_kernel<4>(float const*, float const*, float*, long)",
        "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x32_warpgroupsize1x1x1",
        "void cudnn::engines_precompiled::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>(...)",
        "nvjet_tst_128x64_64x8_2x1_v_bz_coopA_TNN",
        "void native_kernel(float*)",  # a candidate's own kernel may say "native"
        ATEN_COPY, ATEN_FILL, ATEN_DRAW,  # what ModelNew's allowed calls (.contiguous(), zeros, randn) launch
    ]
    assert dyn.torch_launched(own_and_libraries) == []
    inductor = "triton_poi_fused_convolution_relu_1"
    clamp = "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::clamp_kernel_cuda(...)"
    assert dyn.torch_launched([*own_and_libraries, ATEN_MUL, inductor, clamp]) == [ATEN_MUL, inductor, clamp]


ATEN_DROPOUT = ("void at::native::(anonymous namespace)::fused_dropout_kernel_vec<float, float, unsigned int, 1, 4, bool>"
                "(at::cuda::detail::TensorInfo<float const, unsigned int>, ..., at::PhiloxCudaState)")


def test_aten_dropout_kernels_pass_only_as_the_mask_draws_the_same_forward_made():
    """On CUDA a mask drawn as eager dropout draws it (native_dropout over ones) is ATen's dropout
    kernel: one launch per mask the op recorder saw drawn is that draw; any more (the kernel applied
    to computed data, a graph replayed) is PyTorch's compute."""
    own = "void stitch_k1_kernel<4>(float const*, bool const*, float*, long)"
    assert dyn.torch_launched([own, ATEN_DROPOUT], {own: 1, ATEN_DROPOUT: 1}, mask_draws=1) == []
    assert dyn.torch_launched([own, ATEN_DROPOUT], {own: 1, ATEN_DROPOUT: 2}, mask_draws=2) == []
    assert dyn.torch_launched([own, ATEN_DROPOUT], {own: 1, ATEN_DROPOUT: 1}) == [ATEN_DROPOUT]
    assert dyn.torch_launched([own, ATEN_DROPOUT], {own: 1, ATEN_DROPOUT: 2}, mask_draws=1) == [ATEN_DROPOUT]
    # The allowance is for dropout kernels only: a mask drawn does not excuse other ATen compute.
    assert dyn.torch_launched([ATEN_DROPOUT, ATEN_MUL], mask_draws=1) == [ATEN_MUL]


@pytest.mark.gpu
def test_on_the_gpu_pytorch_ops_replayed_from_a_cuda_graph_are_a_hack(tmp_path):
    """Forward dispatches only copies; the graph it replays runs ATen's mul, add and relu kernels."""
    v = verify(hack_task("ref_affine_large"), hack_candidate("gpu_hack_graph_replay", "kernels.cu"), tmp_path / "c",
               VerifyOptions(timeout_s=300, trials=10, time_compile=False))
    assert v.status == "hacked" and not v.accepted, (v.status, v.message)
    (f,) = [f for f in v.hack_findings if f.code == "torch-kernels-in-forward"]
    assert all("at::native" in k for k in f.data["kernels"]), f.data


def test_without_a_cuda_runtime_there_is_no_persisting_l2_reset():
    """A CPU build of torch loads no CUDA runtime: the flusher then only flushes (nothing to reset)."""
    loaded = any("libcudart.so" in line for line in Path("/proc/self/maps").read_text().splitlines())
    assert (timing.persisting_l2_reset() is None) == (not loaded)


@pytest.mark.gpu
def test_on_the_gpu_the_flush_takes_back_a_persisting_l2_carve_out():
    """Issue 18's public pattern: data a candidate pinned in L2 (a persisting carve-out and an access
    policy window) would survive the flush. Before each trial the carve-out goes back to 0 and the
    persisting lines to normal; PyTorch's own launches keep working after it (no stray error)."""
    x = torch.randn(1 << 20, device="cuda")
    flusher = timing.L2Flusher(x.device)
    assert flusher.reset_persisting is not None
    cudart = next(ctypes.CDLL(line.split()[-1]) for line in Path("/proc/self/maps").read_text().splitlines()
                  if "libcudart.so" in line)
    cudart.cudaDeviceSetLimit.argtypes = [ctypes.c_int, ctypes.c_size_t]
    assert cudart.cudaDeviceSetLimit(0x06, 4 << 20) == 0
    limit = ctypes.c_size_t(0)
    cudart.cudaDeviceGetLimit(ctypes.byref(limit), 0x06)
    assert limit.value > 0
    flusher()
    cudart.cudaDeviceGetLimit(ctypes.byref(limit), 0x06)
    assert limit.value == 0
    assert torch.allclose((x * 2).sum(), x.sum() * 2, rtol=1e-4)  # no error left for torch to trip on


def test_a_replacement_named_as_torch_s_own_is_still_seen(monkeypatch):
    """The check after timing leaves out what PyTorch put there itself; a replacement is PyTorch's only
    if its code lies in PyTorch's files, not because its __module__ says "torch.cuda" (a candidate's
    current_stream, pointing the timing's events at a stream of its own, went unseen that way)."""
    import torch

    before = tamper.snapshot()

    def current_stream(device=None):
        return torch.cuda.Stream()

    current_stream.__module__ = "torch.cuda"
    monkeypatch.setattr(torch.cuda, "current_stream", current_stream)
    assert "torch.cuda.current_stream" in tamper.changed(before, except_from=("torch", "triton"))
    # PyTorch's own function put back under another name is PyTorch's: not a change the candidate made.
    monkeypatch.setattr(torch.cuda, "current_stream", torch.cuda.default_stream)
    assert "torch.cuda.current_stream" not in tamper.changed(before, except_from=("torch", "triton"))
