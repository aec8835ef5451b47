"""The round engine (agents/rounds.py): its policy on its own, and `optimize` and `bench` running a
problem's rounds through it with the same Coder, on this CPU (host-code candidates built by nvcc and
checked by the real Verifier)."""

from __future__ import annotations

import inspect
import shutil
from pathlib import Path

from conftest import HACKS, hack_task, needs_nvcc

from stitchcuda import bench
from stitchcuda.agents.coder import builtin as coder_builtin
from stitchcuda.agents.llm.coder import LLMCoder
from stitchcuda.agents.loop import LoopOptions, optimize
from stitchcuda.agents.rounds import BENCH_POLICY, Coder, RoundPolicy, Rounds
from stitchcuda.agents.verify.verifier import VerifyOptions
from stitchcuda.events import ProgressEvent, RoundVerdict
from stitchcuda.types import Candidate, Plan, Task, Verdict

# The hack suite's affine candidate with its kernel as host code in a .cu (nvcc builds it; the
# Verifier runs it on the CPU), right and wrong (no ReLU).
MODEL_NEW = (HACKS / "good_affine.py").read_text().replace("kernels.cpp", "kernels.cu")
GOOD_CU = (HACKS / "kernels.cpp").read_text()
WRONG_CU = GOOD_CU.replace("out[i] = v > 0.f ? v : 0.f;", "out[i] = v;")


def cand(name: str, cu: str = GOOD_CU) -> Candidate:
    return Candidate(name, {"model_new.py": MODEL_NEW, "kernels.cu": cu}, origin="test")


class Scripted:
    """A Coder that answers with the candidates it was given, in order, then None; it keeps the
    feedback of every call."""

    name = "scripted"

    def __init__(self, *answers: Candidate | Exception | None) -> None:
        self.answers = list(answers)
        self.feedback: list[Verdict | None] = []

    def __call__(self, task: Task, plan: Plan, feedback: Verdict | None = None) -> Candidate | None:
        self.feedback.append(feedback)
        if not self.answers:
            return None
        a = self.answers.pop(0)
        if isinstance(a, Exception):
            raise a
        return Candidate(a.name, dict(a.files), a.module, a.origin) if a is not None else None


def test_both_coders_take_the_protocols_call():
    task, plan = Task(Path("m.py")), Plan("m", [])
    for fn in (coder_builtin.code, LLMCoder.__call__):
        sig = inspect.signature(fn)
        lead = (None,) if "self" in sig.parameters else ()
        sig.bind(*lead, task, plan)
        sig.bind(*lead, task, plan, None)
        sig.bind(*lead, task, plan, feedback=None)
    proto = inspect.signature(Coder.__call__)
    assert list(proto.parameters) == ["self", "task", "plan", "feedback"]
    assert list(inspect.signature(coder_builtin.code).parameters) == ["task", "plan", "feedback"]


def _run(rounds: Rounds, statuses: list[str]) -> list[str]:
    """Drives `rounds` as a caller would, the Verifier's statuses given; the names it verified."""
    names = []
    for status in statuses:
        c = rounds.next_candidate()
        if c is None:
            break
        names.append(c.name)
        rounds.record(c, Verdict(c.name, status))
        if not rounds.wants_another():
            break
    return names


def test_policy_when_another_round_runs():
    task, plan = Task(Path("m.py")), Plan("m", [])
    a, b, c = cand("a", "// a"), cand("b", "// b"), cand("c", "// c")
    # optimize's policy: after any verdict, up to its round count; names carry the round.
    r = Rounds(Scripted(a, b, c), task, plan, RoundPolicy(rounds=2), number_names=True)
    assert _run(r, ["ok", "ok", "ok"]) == ["r1-a", "r2-b"] and not r.wants_another()
    # bench's: only after a wrong result, at most four (the built-in coder's whole precision ladder).
    r = Rounds(Scripted(a, b, c), task, plan, BENCH_POLICY)
    assert _run(r, ["incorrect", "ok", "incorrect"]) == ["a", "b"] and r.stopped is None
    r = Rounds(Scripted(a, b, c, cand("d", "// d"), cand("e", "// e")), task, plan, BENCH_POLICY)
    assert _run(r, ["incorrect"] * 5) == ["a", "b", "c", "d"]
    assert r.next_candidate() is None and r.stopped == "policy"


def test_the_rounds_stop_on_known_files_a_failing_coder_and_no_candidate():
    task, plan = Task(Path("m.py")), Plan("m", [])
    a, b = cand("a", "// a"), cand("b", "// b")
    # Files already verified, even two rounds back, end the rounds.
    coder = Scripted(a, b, cand("a-again", "// a"))
    r = Rounds(coder, task, plan, RoundPolicy(rounds=5))
    assert _run(r, ["incorrect"] * 5) == ["a", "b"] and r.stopped == "nothing-new"
    # Each call after the first got the last verdict as feedback.
    assert [f.candidate if f else None for f in coder.feedback] == [None, "a", "b"]
    r = Rounds(Scripted(a, RuntimeError("the model is down")), task, plan, RoundPolicy(rounds=5))
    assert _run(r, ["incorrect"] * 5) == ["a"]
    assert r.stopped == "coder-failed" and r.coder_error == "RuntimeError: the model is down"
    r = Rounds(Scripted(None), task, plan, RoundPolicy(rounds=5))
    assert r.next_candidate() is None and r.stopped == "no-candidate" and r.attempts == []


def test_a_candidate_verified_again_replaces_its_rounds_verdict():
    """bench's re-run of an out-of-memory verdict alone: the same round, with the new verdict,
    which the policy then reads (a wrong result gets its next round)."""
    r = Rounds(Scripted(cand("a", "// a"), cand("b", "// b")), Task(Path("m.py")), Plan("m", []), BENCH_POLICY)
    a = r.next_candidate()
    r.record(a, Verdict("a", "oom"))
    assert not r.wants_another()
    r.record(a, Verdict("a", "incorrect"))
    assert len(r.attempts) == 1 and r.wants_another() and r.next_candidate().name == "b"


class Sampling(Scripted):
    """A Scripted coder with `alternative` (agents/rounds.SamplingCoder): the same answers, in order."""

    def __init__(self, *answers: Candidate | Exception | None) -> None:
        super().__init__(*answers)
        self.samples: list[int] = []

    def alternative(self, task: Task, plan: Plan, feedback: Verdict | None, sample: int) -> Candidate | None:
        self.samples.append(sample)
        return self(task, plan, feedback)


def test_a_round_of_several_candidates_answers_one_feedback():
    task, plan = Task(Path("m.py")), Plan("m", [])
    a, b, c, d = (cand(n, f"// {n}") for n in "abcd")
    coder = Sampling(a, b, c, cand("b-again", "// b"), d)
    r = Rounds(coder, task, plan, RoundPolicy(rounds=3), number_names=True)
    first = r.next_candidates(2)
    assert [x.name for x in first] == ["r1-a", "r1.2-b"] and coder.samples == [2] and r.round == 2
    # The round's verdicts in order; the caller names the one the next round answers (its best).
    wrong, right = Verdict(first[0].name, "incorrect"), Verdict(first[1].name, "ok")
    r.record_round([(first[0], wrong), (first[1], right)], feedback=right)
    assert [v.candidate for _, v in r.attempts] == ["r1-a", "r1.2-b"] and r.feedback.candidate == "r1.2-b"
    # Round 2: both calls get round 1's chosen verdict; the alternative repeats verified files, so
    # the round has one candidate and says why, and the rounds go on.
    second = r.next_candidates(3)
    assert [x.name for x in second] == ["r2-c"] and [f.candidate if f else None for f in coder.feedback] == \
        [None, None, "r1.2-b", "r1.2-b"]
    assert r.short_rounds == ["round 2: alternative 2 repeated files already verified"] and r.stopped is None
    r.record(second[0], Verdict(second[0].name, "ok"))
    assert [x.name for x in r.next_candidates(2)] == ["r3-d"] and not r.wants_another()
    # A coder without `alternative` (the built-in one is deterministic) writes one a round.
    r = Rounds(Scripted(a, b), task, plan, RoundPolicy(rounds=2), number_names=True)
    assert [x.name for x in r.next_candidates(4)] == ["r1-a"] and r.short_rounds == []
    assert not hasattr(coder_builtin.code, "alternative")
    # An alternative that fails leaves the round its first candidate.
    r = Rounds(Sampling(a, RuntimeError("rate limited")), task, plan, RoundPolicy(rounds=2))
    assert [x.name for x in r.next_candidates(2)] == ["a"] and r.stopped is None
    assert r.short_rounds == ["round 1: alternative 2 failed: RuntimeError: rate limited"]


@needs_nvcc
def test_optimize_and_bench_share_the_rounds(tmp_path, monkeypatch):
    """One Coder, two paths: a wrong first candidate, then a right one. Both ask the Coder again with
    the Verifier's verdict on the wrong one; optimize goes on after the right one (its policy runs
    every round it has), bench does not (only a wrong result gets another round)."""
    monkeypatch.setenv("STITCHCUDA_CACHE", str(tmp_path / "build"))
    monkeypatch.setenv("STITCHCUDA_ARCH", "sm_90")
    verify_opts = VerifyOptions(cpu_only=True, random_sets=2, adversarial=("mixed-sign",), timeout_s=300)

    coder = Scripted(cand("wrong", WRONG_CU), cand("right"))
    events: list[ProgressEvent | RoundVerdict] = []
    result = optimize(hack_task("ref_affine"), tmp_path / "run",
                      LoopOptions(coder=coder, rounds=3, verify=verify_opts), progress=events.append)
    assert [(c.name, v.status) for c, v in result.attempts] == [("r1-wrong", "incorrect"), ("r2-right", "ok")]
    assert [f.status if f else None for f in coder.feedback] == [None, "incorrect", "ok"]
    verdicts = [e for e in events if isinstance(e, RoundVerdict)]
    assert [(e.round, e.status, e.accepted) for e in verdicts] == [(1, "incorrect", False), (2, "ok", True)]
    assert [e.round for e in events if isinstance(e, ProgressEvent) and e.phase == "coding"] == [1, 2, 3]

    level = tmp_path / "level1"
    level.mkdir()
    shutil.copy(HACKS / "ref_affine.py", level / "1_Affine.py")
    coder = Scripted(cand("wrong", WRONG_CU), cand("right"), cand("never-asked", "// x"))
    report = bench.run_bench([str(level)], tmp_path / "bench", coder=coder, verify_opts=verify_opts,
                             on_event=lambda m: None)
    (entry,) = report["problems"]
    assert (entry["candidate"], entry["status"], entry["attempt"]) == ("right", "ok", 2)
    assert [f.status if f else None for f in coder.feedback] == [None, "incorrect"]
    # The first round's miss stays beside the entry: which sets, and how far.
    (first,) = entry["earlier_rounds"]
    assert (first["attempt"], first["candidate"], first["status"]) == (1, "wrong", "incorrect"), first
    assert first["missed"] and all(m["set"] and m["message"] and m["rel_norm"] > 0 for m in first["missed"]), first
    assert "missed" not in entry  # (the accepted round missed none)
    # A problem left wrong keeps the sets its last verdict missed.
    report = bench.run_bench([str(level)], tmp_path / "bench-wrong", coder=Scripted(cand("wrong", WRONG_CU)),
                             verify_opts=verify_opts, on_event=lambda m: None)
    (entry,) = report["problems"]
    assert entry["status"] == "incorrect" and "earlier_rounds" not in entry, entry
    assert {m["set"] for m in entry["missed"]} and all(m["rel_norm"] > 0 for m in entry["missed"]), entry["missed"]
    assert report["meta"]["coder"] == "scripted"


