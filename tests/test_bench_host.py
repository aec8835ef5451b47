"""bench.json's host-path figures (issue 16): the timed forward against the same forward's GPU time
with its launches queued ahead (timing.time_gpu_ahead), and against the profiler's kernel sum."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from stitchcuda.agents.verify import timing
from stitchcuda.bench import entry_for, markdown, summarize
from stitchcuda.types import Candidate, Timing, Verdict


def verdict(ours_ms: float, kernel_us: dict[str, float], gpu_ms: float | None = None) -> Verdict:
    return Verdict("c", "ok", built=True, correct=True, eager=Timing(2.0, 2.0, 2.0, 50),
                   ours=Timing(ours_ms, ours_ms, ours_ms, 50), kernel_us=kernel_us,
                   ours_gpu=Timing(gpu_ms, gpu_ms, gpu_ms, 20) if gpu_ms is not None else None)


def test_entry_holds_gpu_time_kernel_time_and_both_gaps():
    cand = Candidate("c", {"model_new.py": ""})
    e = entry_for(Path("level2/1_X.py"), verdict(0.5, {"k0": 300.0, "cudnn_kernel": 150.0}, 0.48), cand, "")
    assert e["kernel_ms"] == 0.45 and e["profiler_gap_ms"] == 0.05
    assert e["top_kernels_us"] == {"k0": 300.0, "cudnn_kernel": 150.0}  # longest first
    assert e["compile_top_kernels_us"] is None  # no profile of torch.compile's kernels in this verdict
    with_compile = verdict(0.5, {"k0": 300.0})
    with_compile.compile_kernel_us = {"triton_poi_fused_0": 80.0, "cudnn_conv": 400.0}
    assert entry_for(Path("level2/6_C.py"), with_compile, cand, "")["compile_top_kernels_us"] == {
        "cudnn_conv": 400.0, "triton_poi_fused_0": 80.0}
    many = entry_for(Path("level2/5_M.py"), verdict(1.0, {f"k{i}" * 40: float(i) for i in range(10)}), cand, "")
    assert list(many["top_kernels_us"].values()) == [9.0, 8.0, 7.0, 6.0, 5.0, 4.0]
    assert all(len(k) <= 100 for k in many["top_kernels_us"])
    assert e["gpu_ms"] == 0.48 and e["host_gap_ms"] == 0.02
    other = entry_for(Path("level2/2_Y.py"), verdict(1.0, {"k0": 700.0}, 0.9), cand, "")
    # No GPU-only figure (a forward that waits for the GPU): no host gap, the profiler's gap stays.
    waits = entry_for(Path("level2/4_W.py"), verdict(1.0, {"k0": 900.0}), cand, "")
    assert waits["gpu_ms"] is None and waits["host_gap_ms"] is None and waits["profiler_gap_ms"] == 0.1
    unsolved = entry_for(Path("level2/3_Z.py"), Verdict("c", "incorrect", kernel_us={"k0": 1.0}), cand, "")
    assert unsolved["kernel_ms"] is None and unsolved["host_gap_ms"] is None and unsolved["gpu_ms"] is None
    e["host_us"] = {"forward": 14.0, "empty_at_start": 3.0, "empty": 8.0, "timed_one_launch": 40.0,
                    "loop_forward": 120.0, "loop_gpu": 118.5, "loop_gap": 1.5}
    other["host_us"] = {"forward": 20.0, "empty_at_start": 5.0, "empty": 6.0, "loop_forward": 60.0, "loop_gpu": 30.0,
                        "loop_gap": 30.0}
    waits["host_us"] = {"forward": 900.0, "loop_forward": 950.0}  # no GPU-only loop: not counted for the bar
    s = summarize([e, other, waits, unsolved])
    assert s["median_host_us"] == {"forward": 20.0, "empty_at_start": 4.0, "empty": 7.0, "timed_one_launch": 40.0,
                                   "loop_forward": 120.0, "loop_gpu": 74.25, "loop_gap": 15.75}
    assert s["loop_gap_measured"] == 2 and s["loop_gap_at_most_10us"] == 1
    md = markdown({"meta": {"command": "c", "commit": "x", "date": "d", "gpu": "g", "torch": "t", "coder": "b"},
                   "summary": s, "problems": [e, other, waits, unsolved]})
    assert "forward 20.0, empty_at_start 4.0, empty 7.0, timed_one_launch 40.0" in md
    assert "host path at most 10 us beyond its kernels' GPU time on 1 of 2 measured" in md
    assert s["median_host_gap_ms"] == pytest.approx((0.02 + 0.1) / 2)
    assert s["host_gap_measured"] == 2
    assert s["median_profiler_gap_ms"] == pytest.approx(0.1)


def test_verdict_round_trips_the_gpu_only_timing_and_the_host_figures():
    v = verdict(0.5, {}, 0.4)
    v.host_us = {"forward": 14.2, "empty": 3.1}
    back = Verdict.from_dict(v.to_dict())
    assert back.ours_gpu == Timing(0.4, 0.4, 0.4, 20) and back.host_us == {"forward": 14.2, "empty": 3.1}
    e = entry_for(Path("level2/1_X.py"), back, Candidate("c", {"model_new.py": ""}), "")
    assert e["host_us"] == {"forward": 14.2, "empty": 3.1}
    assert e["ours_host_ms"] is None and e["compile_host_ms"] is None  # timed before host_ms was kept
    # Each side's host time inside its timed window travels from the verdict to bench.json.
    v.ours = Timing(0.5, 0.45, 0.6, 50, host_ms=0.012)
    v.compiled = Timing(0.7, 0.65, 0.8, 50, host_ms=0.041)
    e = entry_for(Path("level2/1_X.py"), Verdict.from_dict(v.to_dict()), Candidate("c", {"model_new.py": ""}), "")
    assert e["ours_host_ms"] == 0.012 and e["compile_host_ms"] == 0.041


def test_host_state_counts_what_slows_every_op():
    """The worker records these beside its host figures: a dispatch mode left on the stack, or a
    profile function, makes every op's host path slower, and must show as a count, not as a guess."""
    import sys

    from stitchcuda.agents.verify.dynamic_check import OpRecorder

    quiet = timing.host_state()
    assert quiet["dispatch_modes"] == 0 and quiet["profile_fn"] == 0 and quiet["profiler_on"] == 0
    with OpRecorder():
        assert timing.host_state()["dispatch_modes"] == 1
    sys.setprofile(lambda *a: None)
    try:
        assert timing.host_state()["profile_fn"] == 1
    finally:
        sys.setprofile(None)
    with torch.autograd.profiler.profile():
        assert timing.host_state()["profiler_on"] == 1
    assert timing.host_state() == quiet


def test_gpu_ahead_says_nothing_without_a_spin_kernel(monkeypatch):
    monkeypatch.setattr(timing, "_gpu_sleep", None)
    assert timing.time_gpu_ahead(lambda a: a, [], trials=5) is None
    assert timing.one_launch_us(None) is None  # type: ignore[arg-type]


needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.gpu
@needs_gpu
def test_on_the_gpu_gpu_ahead_removes_the_host_path_and_refuses_a_waiting_call():
    x = torch.randn(1 << 20, device="cuda")

    def slow_host(a):
        time.sleep(0.002)  # 2 ms of host work before the launch: time_cuda sees it, the GPU-only figure not
        return a[0] * 2

    with_host, _ = timing.time_cuda(slow_host, [[x]], trials=10)
    alone = timing.time_gpu_ahead(slow_host, [x], trials=10)
    quick, _ = timing.time_cuda(lambda a: a[0] * 2, [[x]], trials=10)
    assert with_host.median_ms > 2.0
    # Each trial's host time in its window: the 2 ms sleep, and a quick call's far less.
    assert with_host.host_ms is not None and 2.0 <= with_host.host_ms <= with_host.median_ms + 0.5
    assert quick.host_ms is not None and quick.host_ms < 1.0
    assert alone is not None and alone.median_ms < 0.5 and alone.median_ms <= quick.median_ms * 1.5

    def waits(a):
        return (a[0] * 2).sum().item()  # the host waits for the GPU: no lead can hide that

    assert timing.time_gpu_ahead(waits, [x], trials=5) is None
    host = timing.host_us(slow_host, [x], calls=5)
    assert host["forward"] >= 2000 and 0 < host["empty"] < 2000
    # One minimal launch, timed as a forward: far below the 2 ms forward, above nothing.
    launch = timing.one_launch_us(timing.L2Flusher(x.device))
    assert launch is not None and 0 < launch < 1000
    # In a loop: the 2 ms of host work per call is the loop's figure and its gap; the GPU-only loop
    # would need a 160 ms lead, past MAX_LEAD_MS, so it is left out. A quick forward's gap is small
    # beside the slow one's.
    slow = timing.loop_us(slow_host, [x], calls=8, rounds=2)
    assert slow["loop_forward"] >= 2000 and "loop_gpu" not in slow
    fast = timing.loop_us(lambda a: a[0] * 2, [x], calls=20, rounds=3)
    assert 0 < fast["loop_gpu"] <= fast["loop_forward"] + 5 and fast["loop_gap"] < 1000
