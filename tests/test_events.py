"""The typed events of a run (stitchcuda/events.py): every type through JSON and back, and the
language server's job reading them from a real `stitchcuda optimize --events` child process."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shutil
from pathlib import Path

import pytest
from conftest import needs_nvcc

from stitchcuda import events
from stitchcuda.events import PHASES, ProgressEvent, RoundVerdict, RunEnd
from stitchcuda.server.jobs import Job
from stitchcuda.settings import Settings
from stitchcuda.types import Timing, Verdict

ROOT = Path(__file__).resolve().parent.parent
# Recorded before files_sha256: replay matches it by candidate name (the ladder keeps the names).
RECORDED = ROOT / "bench" / "results" / "2026-11-23-h100-example-gated_block.json"

VERDICT = RoundVerdict(round=2, candidate="r2-builtin-fp32", status="ok", accepted=True, median_ms=0.168,
                       speedup_eager=5.22, speedup_compile=1.17, precision="3xtf32", replayed=True,
                       device="NVIDIA H100 80GB HBM3", message="", best=True)
SAMPLES = [
    ProgressEvent("planning", "tracing gated_block:Block"),
    ProgressEvent("budget", "time budget of 60 s spent after 2 round(s)"),
    *[ProgressEvent(p, "something", 3) for p in PHASES if p not in ("planning", "budget", "verifying")],
    ProgressEvent("verifying", "importing the candidate", 1, "build"),
    VERDICT,
    RoundVerdict(round=1, candidate="r1-builtin", status="incorrect", accepted=False, message="output 0: ..."),
    RunEnd("proposal r2-builtin-fp32: ...", "/runs/x/summary.json", "/runs/x/proposal", False, VERDICT),
    RunEnd("cancelled", cancelled=True),
]


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: f"{type(e).__name__}-{getattr(e, 'phase', '')}")
def test_every_event_survives_json(event):
    line = events.to_json(event)
    d = json.loads(line)
    assert d["event"] == type(event).EVENT
    back = events.from_json(line)
    assert type(back) is type(event) and back == event


def test_labels_are_the_clis_phase_text():
    assert ProgressEvent("planning").label == "planning"
    assert ProgressEvent("coding", "builtin", 2).label == "round 2: coding"
    assert ProgressEvent("verifying", "", 2, "correctness").label == "round 2: correctness"
    assert ProgressEvent("coder-failed", "boom", 1).label == "round 1: coder failed"
    assert ProgressEvent("nothing-new", "the coder has nothing new to try", 3).label == "round 3:"
    assert VERDICT.label == "round 2: verdict"
    assert VERDICT.line == ("correct, 0.168 ms, 5.22x vs eager, 1.17x vs torch.compile, precision 3xtf32, "
                            "REPLAYED from a run recorded on NVIDIA H100 80GB HBM3, not measured here")
    # A separate torch.compile timing under the candidate's policy is said beside the default one.
    matched = dataclasses.replace(VERDICT, speedup_compile_matched=0.91, compile_policy="tf32", replayed=False)
    assert matched.line == ("correct, 0.168 ms, 5.22x vs eager, 1.17x vs torch.compile, "
                            "0.91x vs torch.compile under tf32, precision 3xtf32")
    wrong = RoundVerdict(1, "r1-x", "incorrect", False, message="output 0: 3 of 8 elements beyond tolerance")
    assert wrong.line == "incorrect: output 0: 3 of 8 elements beyond tolerance"


def test_round_verdict_of_a_verdict_has_its_numbers():
    v = Verdict("r1-builtin", "ok", built=True, correct=True, eager=Timing(2.0, 2.0, 2.0, 50),
                compiled=Timing(1.0, 1.0, 1.0, 50), ours=Timing(0.5, 0.5, 0.5, 50), precision="fp32",
                phases={"replayed": 1.0}, device="H100")
    r = RoundVerdict.of(1, v, best=True)
    assert (r.accepted, r.median_ms, r.speedup_eager, r.speedup_compile) == (True, 0.5, 4.0, 2.0)
    assert (r.precision, r.replayed, r.best, r.status) == ("fp32", True, True, "ok")


def test_what_is_not_an_event_is_refused():
    for line in ('{"hello": 1}', '[1, 2]', '{"event": "nope"}', '{"event": [1]}', '{"event": "verdict", "round": 1}', "not json"):
        with pytest.raises(ValueError):
            events.from_json(line)
    with pytest.raises(ValueError, match="unknown progress phase"):
        ProgressEvent("round 2: verdict")  # type: ignore[arg-type]
    # A newer writer's extra keys are skipped; an older one's missing optional fields default.
    got = events.from_dict({"event": "verdict", "round": 1, "candidate": "c", "status": "ok", "accepted": True,
                            "later_field": 1, "precision": "fp64?"})
    assert got == RoundVerdict(1, "c", "ok", True)


def test_old_recorded_verdicts_load_without_the_new_fields():
    rec = json.loads(RECORDED.read_text())
    raw = rec["attempts"][0]["verdict"]
    assert "precision" not in raw
    v = Verdict.from_dict(raw)
    assert v.precision == "tf32" and v.accepted


@needs_nvcc
def test_the_servers_job_reads_typed_events_from_a_real_optimize(tmp_path):
    """`stitchcuda optimize --events` in a child process (the recorded H100 run stands in for the
    GPU), read by the language server's Job: typed events with the round as a number and the
    speedups as numbers, and a RunEnd whose best verdict is the proposal's."""
    work = tmp_path / "ws"
    work.mkdir()
    shutil.copy(ROOT / "examples" / "gated_block.py", work / "gated_block.py")
    settings = Settings(rounds=2, replay=str(RECORDED), runs_folder=str(tmp_path / "runs"))
    job = Job.new(work / "gated_block.py", "Block", settings)
    seen: list[ProgressEvent | RoundVerdict] = []
    asyncio.run(job.run(seen.append))

    assert job.state == "done", job.message
    assert all(isinstance(e, ProgressEvent | RoundVerdict | RunEnd) for e in job.events)
    assert isinstance(job.events[-1], RunEnd) and job.result is job.events[-1]
    assert seen == job.events[:-1]
    coding = [e.round for e in seen if isinstance(e, ProgressEvent) and e.phase == "coding"]
    assert coding == [1, 2]
    steps = [e.step for e in seen if isinstance(e, ProgressEvent) and e.phase == "verifying" and e.round == 1]
    assert "build" in steps and "done" not in steps  # the worker's end marker is not sent on
    (verdict,) = [e for e in seen if isinstance(e, RoundVerdict)]
    assert verdict.round == 1 and verdict.accepted and verdict.best and verdict.replayed
    assert verdict.speedup_eager == pytest.approx(5.22, abs=0.01) and verdict.precision == "tf32"
    # Round 2: the built-in coder's answer to a right result is the same files.
    assert any(e.phase == "nothing-new" and e.round == 2 for e in seen if isinstance(e, ProgressEvent))
    end = job.result
    assert end.best == verdict and end.proposal and Path(end.summary).is_file() and not end.cancelled
    assert job.summary["best"] == "r1-builtin-pointwise" and sorted(job.proposal) == ["fused_kernels.cu", "model_new.py"]


def test_a_checked_and_timed_candidate_is_sent_before_torch_compile_s_timing(tmp_path):
    """The loop's first-verdict event: the verdict the Verifier handed over once the worker exited
    with the candidate timed (verify's `timed`), sent once, only for a candidate that is correct and
    timed, and marked provisional; none handed over sends nothing. A result.json in the run folder
    (the blind check's witness can rewrite it by then) is not what is sent."""
    from stitchcuda.agents.loop import _FirstVerdict
    from stitchcuda.types import Timing, Verdict

    sent: list[RoundVerdict] = []
    first = _FirstVerdict(1, 0.0, sent.append, None)
    first.send()  # nothing handed over
    assert sent == []

    timed = Verdict("r1-builtin", "ok", built=True, correct=True, eager=Timing(0.68, 0.66, 0.74, 50),
                    ours=Timing(0.154, 0.14, 0.17, 50))
    forged = Verdict("r1-builtin", "ok", built=True, correct=True, eager=Timing(0.68, 0.66, 0.74, 50),
                     ours=Timing(0.0001, 0.0001, 0.0001, 50))
    (tmp_path / "result.json").write_text(json.dumps({**forged.to_dict(), "last_phase": "done"}))
    first = _FirstVerdict(2, 0.0, sent.append, None)
    first.timed(timed)
    first.send()
    first.send()
    (e,) = sent
    assert (e.round, e.provisional, e.best, e.accepted, e.speedup_compile) == (2, True, True, True, None)
    assert e.speedup_eager == pytest.approx(0.68 / 0.154) and e.elapsed_s is not None and e.elapsed_s > 0
    assert e.line.endswith("torch.compile's timing and the profiles still to come")

    wrong = Verdict("r1-builtin", "incorrect", built=True, correct=False, ours=Timing(0.1, 0.1, 0.1, 50))
    first = _FirstVerdict(3, 0.0, sent.append, None)
    first.timed(wrong)
    first.send()
    assert len(sent) == 1


def test_the_first_verdict_waits_for_the_blind_check(monkeypatch):
    """Sent once the worker exited with the candidate timed and the blind check passed; never for a
    candidate the blind check did not pass, and never on torch.compile's progress (its own process,
    beside the blind check); without the check, once timed."""
    from stitchcuda.agents.loop import first_verdict_due
    from stitchcuda.agents.verify import blind
    from stitchcuda.agents.verify.verifier import BLIND_PASSED, TIMED

    monkeypatch.delenv(blind.BLIND_ENV, raising=False)
    assert not first_verdict_due({"correctness", "timing", TIMED, "blind", "compile", "compile-timing"})
    assert not first_verdict_due({"timing", "blind", BLIND_PASSED})
    assert first_verdict_due({"timing", TIMED, "blind", BLIND_PASSED})
    monkeypatch.setenv(blind.BLIND_ENV, "0")
    assert first_verdict_due({"timing", TIMED}) and not first_verdict_due({"timing", "compile"})
