"""Issue 18 points 1-2: work off the calling thread, and timing the candidate cannot rebind. The timing binds its primitives before the
candidate is imported, and the worker reports any rebinding of what timing and checks read."""

from __future__ import annotations

import time

import pytest
import torch
from conftest import hack_candidate, hack_task

from stitchcuda.agents.verify import tamper, timing
from stitchcuda.agents.verify.verifier import VerifyOptions, verify

pytestmark = pytest.mark.usefixtures("isolated_cache")


def test_a_candidate_that_rebinds_the_timing_is_a_hack(tmp_path):
    v = verify(hack_task("ref_affine"), hack_candidate("hack_timing_rebind"), tmp_path / "c",
               VerifyOptions(cpu_only=True, time_compile=False))
    assert v.correct and v.status == "hacked", v.message  # right results, and still refused
    (f,) = [f for f in v.hack_findings if f.code == "timing-tamper"]
    assert f.data["names"] == ["time.perf_counter", "torch.cuda.Event.elapsed_time"]


def test_an_honest_candidate_leaves_them_alone(tmp_path):
    v = verify(hack_task("ref_affine"), hack_candidate("good_affine"), tmp_path / "c",
               VerifyOptions(cpu_only=True, time_compile=False))
    assert v.status == "ok" and not v.hack_findings, v.message


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
                                        ("hack_process_forward", "os.system during forward")])
def test_work_started_off_the_calling_thread_is_a_hack(tmp_path, stem, event):
    """Issue 18 point 1: a thread or process started from forward (however it was reached) is seen by
    Python's audit events, and refused even where the results are right."""
    v = verify(hack_task("ref_affine"), hack_candidate(stem), tmp_path / "c",
               VerifyOptions(cpu_only=True, time_compile=False))
    assert v.correct and v.status == "hacked", v.message
    (f,) = [f for f in v.hack_findings if f.code == "off-thread-work"]
    assert event in f.message
