"""bench.json's host-path figures: one forward's kernel time against its timed median (issue 16)."""

from __future__ import annotations

from pathlib import Path

from stitchcuda.bench import entry_for, summarize
from stitchcuda.types import Candidate, Timing, Verdict


def verdict(ours_ms: float, kernel_us: dict[str, float]) -> Verdict:
    return Verdict("c", "ok", built=True, correct=True, eager=Timing(2.0, 2.0, 2.0, 50),
                   ours=Timing(ours_ms, ours_ms, ours_ms, 50), kernel_us=kernel_us)


def test_entry_holds_kernel_time_and_the_gap():
    cand = Candidate("c", {"model_new.py": ""})
    e = entry_for(Path("level2/1_X.py"), verdict(0.5, {"k0": 300.0, "cudnn_kernel": 150.0}), cand, "")
    assert e["kernel_ms"] == 0.45 and e["host_gap_ms"] == 0.05
    other = entry_for(Path("level2/2_Y.py"), verdict(1.0, {"k0": 700.0}), cand, "")
    unsolved = entry_for(Path("level2/3_Z.py"), Verdict("c", "incorrect", kernel_us={"k0": 1.0}), cand, "")
    assert unsolved["kernel_ms"] is None and unsolved["host_gap_ms"] is None
    s = summarize([e, other, unsolved])
    assert s["median_host_gap_ms"] == (0.05 + 0.3) / 2
