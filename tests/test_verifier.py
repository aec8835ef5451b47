"""The Verifier's isolation: a candidate that crashes, hangs, eats memory or is cancelled yields a
verdict naming what happened and where, and the next candidate verifies as if nothing had."""

from __future__ import annotations

import threading
import time

import psutil
import pytest
from conftest import LOCAL_CHANGE_SETS, hack_candidate, hack_task, reported

from stitchcuda.agents.verify.verifier import VerifierPool, VerifyOptions, verify
from stitchcuda.types import Candidate


@pytest.fixture()
def opts(build_cache):
    def make(**kw) -> VerifyOptions:
        kw.setdefault("cpu_only", True)
        kw.setdefault("timeout_s", 120.0)
        return VerifyOptions(extra_env={"STITCHCUDA_CACHE": str(build_cache)}, **kw)

    return make


def _assert_next_candidate_ok(tmp_path, opts) -> None:
    v = verify(hack_task("ref_affine"), hack_candidate("good_affine"), tmp_path / "next", opts())
    assert v.status == "ok" and v.accepted, (v.status, v.message, v.log_tail[-2000:])


def _no_worker_left(workdir) -> bool:
    """No process is still running on this verification's request."""
    needle = str(workdir / "request.json")
    for p in psutil.process_iter(["cmdline"]):
        try:
            if needle in (p.info["cmdline"] or []):
                return False
        except psutil.Error:
            pass
    return True


def test_segfault_yields_crashed_verdict_and_next_candidate_runs(tmp_path, opts):
    work = tmp_path / "segv"
    v = verify(hack_task("ref_affine"), hack_candidate("crash_segfault"), work, opts())
    assert v.status == "crashed" and not v.accepted
    assert v.message == "worker died (SIGSEGV) during correctness"
    crash = next(f for f in v.findings if f.code == "crash")
    assert crash.data == {"returncode": -11, "phase": "correctness"}
    assert v.built and v.build_s is not None  # the partial verdict from before the crash survives
    assert "Segmentation fault" in v.log_tail  # faulthandler's Python stack, for the Coder
    _assert_next_candidate_ok(tmp_path, opts)


def test_hang_times_out_and_next_candidate_runs(tmp_path, opts):
    work = tmp_path / "hang"
    t0 = time.monotonic()
    v = verify(hack_task("ref_affine"), hack_candidate("crash_hang"), work, opts(timeout_s=10.0))
    assert time.monotonic() - t0 < 30
    assert v.status == "timeout" and not v.accepted
    assert "killed during correctness" in v.message
    assert [f.code for f in v.findings] == ["timeout"]
    assert _no_worker_left(work)
    _assert_next_candidate_ok(tmp_path, opts)


def test_host_memory_limit_kills_the_worker(tmp_path, opts):
    work = tmp_path / "oom"
    v = verify(hack_task("ref_affine"), hack_candidate("crash_host_oom"), work, opts(max_host_memory_gb=1.0))
    assert v.status == "oom" and not v.accepted
    assert "above the limit of 1 GiB" in v.message and "during correctness" in v.message
    assert [f.code for f in v.findings] == ["host-oom"]
    assert _no_worker_left(work)


def test_cancellation_stops_the_worker(tmp_path, opts):
    work = tmp_path / "cancel"
    cancel = threading.Event()
    phases: list[str] = []

    def progress(phase: str, detail: str) -> None:
        phases.append(phase)
        if phase == "correctness":
            cancel.set()  # the candidate hangs from here on: only cancelling ends it

    t0 = time.monotonic()
    v = verify(
        hack_task("ref_affine"), hack_candidate("crash_hang"), work, opts(timeout_s=300.0), progress, cancel
    )
    assert time.monotonic() - t0 < 60
    assert v.status == "cancelled" and v.message == "cancelled during correctness"
    assert phases[:3] == ["reference", "build", "correctness"]
    assert _no_worker_left(work)


def test_exception_in_forward_names_the_phase(tmp_path, opts):
    v = verify(hack_task("ref_affine"), hack_candidate("crash_raises"), tmp_path, opts())
    assert v.status == "error" and not v.accepted
    assert v.message.startswith("correctness: ValueError: shape mismatch in my launcher")
    assert [f.code for f in v.findings] == ["exception"]
    assert "model_new.py" in v.log_tail  # the traceback reaches into the candidate


def test_build_failure_keeps_the_compiler_log(tmp_path, opts):
    cand = hack_candidate("crash_build", **{"broken.cpp": 'extern "C" int k( { return 0; }\n'})
    v = verify(hack_task("ref_affine"), cand, tmp_path, opts())
    assert v.status == "build-failed" and not v.built
    assert v.message.startswith("BuildError: build failed")
    assert "broken.cpp" in v.build_log and "error" in v.build_log


def test_progress_sees_every_phase_up_to_done(tmp_path, opts):
    phases: list[str] = []
    v = verify(
        hack_task("ref_affine"),
        hack_candidate("good_affine"),
        tmp_path,
        opts(),
        lambda p, d: phases.append(p),
    )
    assert v.status == "ok"
    # "done" is written as the worker exits: the parent reads what is left after the exit too; the
    # blind check (agents/verify/blind.py) follows an accepted verdict, and says it passed. (On the
    # CPU the worker has no timing phase, which starts the blind check beside it on a GPU.)
    assert phases == ["reference", "build", "correctness", "local-change", "grad-enabled", "eval-mode", "done",
                      "blind", "blind-passed"]


def test_pool_runs_candidates_side_by_side(tmp_path, opts):
    pool = VerifierPool(None, jobs_per_gpu=2, opts=opts())
    try:
        crash = pool.submit(hack_task("ref_affine"), hack_candidate("crash_raises"), tmp_path / "a")
        good = pool.submit(hack_task("ref_affine"), hack_candidate("good_affine"), tmp_path / "b")
        assert crash.result().status == "error"
        assert good.result().status == "ok"
    finally:
        pool.shutdown()


def test_fewer_random_sets_and_adversarial_kinds_when_asked(tmp_path, opts):
    v = verify(
        hack_task("ref_affine"),
        hack_candidate("good_affine"),
        tmp_path,
        opts(random_sets=2, adversarial=("near-kinks",)),
    )
    assert v.status == "ok"
    names = [c["set"] for c in v.checks]
    # random-0 first, the other sets in a secret order, then the further sets and one unpoisoned set.
    assert names[0] == "random-0" and sorted(names[1:3]) == ["adversarial-near-kinks", "random-1"]
    assert names[3:] == [*LOCAL_CHANGE_SETS, "grad-enabled", "eval-mode", "after-checks"]
    assert v.checks[-1]["kind"] == "near-kinks"
    assert VerifyOptions().random_sets >= 5 and VerifyOptions().adversarial is None  # defaults stay full


# --- GPU only ------------------------------------------------------------------------------------


@pytest.fixture()
def gpu_opts(build_cache):
    return VerifyOptions(
        timeout_s=300, trials=10, time_compile=False, extra_env={"STITCHCUDA_CACHE": str(build_cache)}
    )


@pytest.mark.gpu
def test_cublas_candidate_is_accepted(tmp_path, gpu_opts):
    handed = []
    v = verify(
        hack_task("ref_matmul_relu"), hack_candidate("gpu_good_cublas", "kernels.cu"), tmp_path, gpu_opts,
        timed=handed.append,
    )
    assert v.status == "ok" and v.accepted, (v.status, v.message, v.build_log[-2000:], v.log_tail[-2000:])
    # The provisional verdict handed over once the worker exited: timed against eager, before the
    # blind check and torch.compile's baseline (their notes and figures are not in it).
    (first,) = handed
    assert first.ours == v.ours and first.compiled is None and "blind" not in first.phases
    assert v.tolerance["rtol"] == 1e-2  # a matmul reference
    assert v.ours is not None and v.eager is not None and v.speedup_eager is not None
    assert all(c["ok"] for c in v.checks) and v.checks[-1]["set"] == "after-timing"
    # The host figures beside the timing: the forward's, and the allocation yardstick after each step.
    steps = ("empty_at_start", "empty_after_build", "empty_after_checks", "empty_after_streams", "empty")
    assert all(v.host_us[k] > 0 for k in (*steps, "forward", "timed_one_launch")), v.host_us
    assert v.host_us["dispatch_modes"] == 0 and v.host_us["profile_fn"] == 0, v.host_us


@pytest.mark.gpu
def test_illegal_memory_access_yields_verdict_and_next_candidate_runs(tmp_path, gpu_opts):
    v = verify(
        hack_task("ref_affine"),
        hack_candidate("gpu_illegal_access", "kernels.cu"),
        tmp_path / "bad",
        gpu_opts,
    )
    assert v.status == "crashed" and not v.accepted, (v.status, v.message)
    assert "correctness" in v.message
    assert "illegal-memory-access" in {f.code for f in v.findings}
    good = verify(
        hack_task("ref_affine"), hack_candidate("gpu_good_affine", "kernels.cu"), tmp_path / "good", gpu_opts
    )
    assert good.status == "ok" and good.accepted, (good.status, good.message, good.log_tail[-2000:])


def test_candidate_files_are_what_the_worker_runs(tmp_path, opts):
    """A stale kernel left in a reused workdir must not be what gets loaded."""
    work = tmp_path / "reuse"
    good = hack_candidate("good_affine")
    bad = Candidate(
        name="bad",
        files={**good.files, "kernels.cpp": good.files["kernels.cpp"].replace("v > 0.f ? v : 0.f", "v")},
    )
    assert (
        verify(hack_task("ref_affine"), bad, work, opts(random_sets=2, adversarial=("negated",))).status
        == "incorrect"
    )
    assert (
        verify(hack_task("ref_affine"), good, work, opts(random_sets=2, adversarial=("negated",))).status
        == "ok"
    )


@pytest.mark.parametrize(("phase", "kept"), [("compile", True), ("compile-timing", True), ("timing", False)])
def test_running_out_of_time_in_torch_compile_keeps_the_verdict(tmp_path, phase, kept):
    """A reference timed alone gets torch.compile's default figure in its worker, after its verdict
    and timing are saved: killed there, the verdict stands without a compile figure; killed while
    it is timed, it is a timeout."""

    from stitchcuda.agents.verify.verifier import _Outcome, _read_verdict
    from stitchcuda.types import Timing, Verdict

    saved = Verdict(candidate="reference", status="reference-only", eager=Timing(2.0, 1.9, 2.2, 50),
                    compiled=Timing(1.5, 1.4, 1.6, 50))
    v = _read_verdict(tmp_path, None, _Outcome(None, "timeout", 300.0, 1.0, 32.0, report=reported((saved, phase))))
    if kept:
        assert v.status == "reference-only" and v.eager.median_ms == 2.0
        assert v.compiled is None and any("torch.compile of the reference was still running" in n for n in v.notes)
    else:
        assert v.status == "timeout"


@pytest.mark.parametrize("phase", ["start", "compile", "compile-timing", "compile-matched", "compile-matched-timing",
                                   "compile-matched-check", "compile-profile"])
def test_torch_compile_s_process_cut_short_keeps_the_candidate_s_verdict(tmp_path, phase):
    """A candidate's torch.compile baseline is timed in a process of its own once its verdict stands
    (its first call took DenseNet121 past the bench's limit): cut short in any phase, the candidate's
    verdict stands, with the figures saved before that phase and without the one it was taking."""

    from stitchcuda.agents.verify.verifier import _merge_compile, _Outcome
    from stitchcuda.types import Timing, Verdict

    cand = Verdict(candidate="c", status="ok", built=True, correct=True, eager=Timing(2.0, 1.9, 2.2, 50),
                   ours=Timing(1.0, 0.9, 1.1, 50))
    saved = Verdict(candidate="reference", status="reference-only", compiled=Timing(1.5, 1.4, 1.6, 50),
                    compiled_matched=Timing(1.4, 1.3, 1.5, 50) if phase == "compile-profile" else None,
                    compile_policy="tf32")
    _merge_compile(cand, _Outcome(None, "timeout", 600.0, 1.0, 32.0, report=reported((saved, phase))))
    assert cand.status == "ok" and cand.accepted and cand.ours.median_ms == 1.0
    if phase == "compile-profile":  # every figure was saved before the profile of compile's kernels
        assert cand.compiled.median_ms == 1.5 and cand.compiled_matched.median_ms == 1.4
        assert any("profile of torch.compile's kernels" in n for n in cand.notes)
    elif phase.startswith("compile-matched"):  # DenseNet121 on the H200: the default figure stays
        assert cand.compiled.median_ms == 1.5 and cand.compiled_matched is None
        assert any("under the candidate's precision was still running" in n for n in cand.notes)
    else:
        assert cand.compiled is None
        assert any("torch.compile of the reference was still running when the 600 s limit ended its process" in n
                   for n in cand.notes), cand.notes


def test_torch_compile_s_timing_floor_sits_beside_the_worker_s():
    """torch.compile's process times one minimal launch as it timed the baseline; the candidate's
    verdict carries it as compile_timed_one_launch beside the worker's own timed_one_launch, so a
    launch-bound ratio says how much of it is the two processes' floors."""
    from stitchcuda.agents.verify.verifier import _merge_compile, _Outcome
    from stitchcuda.types import Timing, Verdict

    cand = Verdict(candidate="c", status="ok", built=True, correct=True, ours=Timing(1.0, 0.9, 1.1, 50),
                   host_us={"timed_one_launch": 21.0})
    saved = Verdict(candidate="reference", status="reference-only", compiled=Timing(1.5, 1.4, 1.6, 50),
                    host_us={"timed_one_launch": 6.5})
    _merge_compile(cand, _Outcome(0, None, 10.0, 1.0, 32.0, report=reported((saved, "done"))))
    assert cand.host_us == {"timed_one_launch": 21.0, "compile_timed_one_launch": 6.5}
    assert cand.compiled.median_ms == 1.5


@pytest.mark.parametrize(("body", "finite"), [("v", True), ("v > 0.f ? v : NAN", False)],
                         ids=["values-off", "nan-placed"])
def test_a_wrong_result_says_whether_finite_values_missed(tmp_path, opts, body, finite):
    """The output-mismatch Finding carries a typed marker the Coder's precision ladder reads: finite
    values beyond tolerance (more precision may mend it) or not (NaN where the reference is finite).
    The verdict also carries the candidate's precision level."""
    from stitchcuda.types import FINITE_MISS

    good = hack_candidate("good_affine")
    bad = Candidate(name="bad", precision="3xtf32",
                    files={**good.files, "kernels.cpp": good.files["kernels.cpp"].replace("v > 0.f ? v : 0.f", body)})
    v = verify(hack_task("ref_affine"), bad, tmp_path / "w", opts(random_sets=1, adversarial=("negated",)))
    assert v.status == "incorrect", (v.status, v.message)
    (miss,) = [f for f in v.findings if f.code == "output-mismatch"]
    assert miss.data[FINITE_MISS] is finite
    assert v.precision == "3xtf32"


def test_finite_miss_reads_the_comparison_not_its_words():
    import torch

    from stitchcuda.agents.verify.compare import Tolerance, compare_outputs
    from stitchcuda.agents.verify.worker import finite_miss

    ref = torch.ones(64)
    tol = Tolerance(1e-4, "test")
    assert finite_miss(compare_outputs([ref], [ref + 0.5], tol))
    assert not finite_miss(compare_outputs([ref], [ref.clone().fill_(float("nan"))], tol))
    assert not finite_miss(compare_outputs([ref], [torch.ones(8)], tol))  # shape
    assert not finite_miss(compare_outputs([ref], [ref.clone()], tol))  # a match is no miss


@pytest.mark.parametrize("source, want", [
    ("import torch\n\nclass Other(torch.nn.Module):\n    def forward(self, x, y):\n        return x\n",
     "model_new.py: candidate defines no class ModelNew"),
    ("import torch\n\nclass ModelNew(torch.nn.Module)\n    def forward(self, x, y):\n        return x\n",
     "model_new.py:3: candidate does not parse: expected ':'"),
])
def test_a_candidate_that_cannot_load_is_a_build_failure_not_a_hack(tmp_path, opts, source, want):
    """No ModelNew, or Python that does not parse: the verdict is build-failed, with the file and line
    and no internal module name or traceback; there is no hack finding, and no worker is started."""
    cand = Candidate(name="broken", files={"model_new.py": source}, origin="user")
    v = verify(hack_task("ref_affine"), cand, tmp_path / "v", opts())
    assert (v.status, v.hack_findings, v.built) == ("build-failed", [], False)
    assert v.message == want and v.build_log == want
    assert "Traceback" not in v.build_log and "_stitch_" not in v.message
    assert not (tmp_path / "v" / "request.json").exists()  # decided before any worker
