"""Plan -> Code -> Verify -> refine, for N rounds or until a time budget ends.

Every candidate's sources, build log and verdict land in the run folder; the best correct,
hack-free candidate that beats the reference is the proposal, and when none does the result says so.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from stitchcuda import provenance
from stitchcuda.agents import rubric
from stitchcuda.agents.rounds import Coder, RoundPolicy, Rounds
from stitchcuda.agents.verify import blind
from stitchcuda.agents.verify.replay import file_digests, files_digest
from stitchcuda.agents.verify.verifier import (
    BLIND_PASSED,
    TIMED,
    VerifierPool,
    VerifyOptions,
    cuda_available,
    verify,
)
from stitchcuda.events import Phase, ProgressEvent, RoundVerdict, RunEnd
from stitchcuda.task import UsageError
from stitchcuda.types import Candidate, Plan, Task, Verdict

# Receives each ProgressEvent and RoundVerdict as the run goes (the CLI prints or serialises them).
Progress = Callable[[ProgressEvent | RoundVerdict], None]


TIMELINE_TIMEOUT_S = 90.0  # for the Nsight Systems run and its export together, per job


@dataclass
class LoopOptions:
    coder: str | Coder = "builtin"  # "builtin", "llm", or a Coder object
    rounds: int = 1
    time_budget_s: float | None = None
    verify: VerifyOptions = field(default_factory=VerifyOptions)
    profile_reference: bool = True  # on a GPU: rank the reference's ops by kernel time first
    profile_timeline: bool = True  # ... and, where Nsight Systems is installed, see its timeline too
    # Several GPUs: a round's candidates are verified at once, one worker and lock per GPU (None:
    # the one GPU of `verify.gpu`). The Coder writes `per_round` candidates a round where it can
    # (the LLM coder; the built-in one has one); None: one per GPU.
    gpus: list[int] | None = None
    per_round: int | None = None


@dataclass
class RunResult:
    task: Task
    run_dir: Path
    plan: Plan | None
    attempts: list[tuple[Candidate, Verdict]]
    best: tuple[Candidate, Verdict] | None
    message: str
    reference: Verdict | None = None
    meta: dict = field(default_factory=dict)  # provenance: command, commit, gpu, torch, date
    best_round: RoundVerdict | None = None  # the best candidate's verdict, proposed or not
    # Seconds from the start of the run to the first candidate checked and timed (provisional or
    # final verdict): issue 16's "first verdict" figure.
    first_verdict_s: float | None = None

    @property
    def proposal(self) -> Candidate | None:
        return self.best[0] if self.best else None

    def summary(self) -> dict:
        return {
            "meta": self.meta,
            "task": self.task.name,
            "run_dir": str(self.run_dir),
            "message": self.message,
            "plan": asdict(self.plan) if self.plan else None,
            "attempts": [
                {"candidate": c.name, "files_sha256": files_digest(c.files), "files_sha256_each": file_digests(c.files),
                 "verdict": v.to_dict()}
                for c, v in self.attempts
            ],
            "best": self.best[0].name if self.best else None,
            "first_verdict_s": self.first_verdict_s,
        }

    def end(self, proposal_dir: Path | None, cancelled: bool = False) -> RunEnd:
        """The run's last event: `proposal_dir` where the proposal's files were written."""
        return RunEnd(self.message, summary=str(self.run_dir / "summary.json"),
                      proposal=str(proposal_dir) if proposal_dir is not None and self.best else None,
                      cancelled=cancelled, best=self.best_round)


def make_coder(coder: str | Coder, cancel: threading.Event | None = None) -> Coder:
    """The Coder by name ("builtin" or "llm"); a Coder object (tests, scripts) is used as it is."""
    if not isinstance(coder, str):
        return coder
    if coder == "builtin":
        from stitchcuda.agents.coder import builtin as coder_builtin

        return coder_builtin.code
    if coder == "llm":
        from stitchcuda.agents.llm.client import LLMError
        from stitchcuda.agents.llm.coder import LLMCoder

        try:
            return LLMCoder(cancel=cancel)
        except (LLMError, ImportError) as e:
            raise UsageError(f"the LLM coder cannot start: {e}") from e
    raise UsageError(f"unknown coder {coder!r} (builtin or llm)")


def coder_name(coder: str | Coder) -> str:
    return coder if isinstance(coder, str) else getattr(coder, "name", type(coder).__name__)


class _FirstVerdict:
    """A round's verdict as the Verifier read it once the candidate's worker exited with it checked
    and timed against eager (handed over by verify's `timed`; never read back from the run folder,
    which the candidate's blind-check witness can write by the time it is sent), sent once as a
    provisional RoundVerdict."""

    def __init__(self, round: int, t0: float, emit: Progress, best: Verdict | None):
        self.round, self.t0, self.emit, self.best = round, t0, emit, best
        self.verdict: Verdict | None = None
        self.sent = False

    def timed(self, v: Verdict) -> None:
        self.verdict = v

    def send(self) -> None:
        if self.sent:
            return
        self.sent = True
        v = self.verdict
        if v is not None and v.accepted and v.ours is not None:
            self.emit(RoundVerdict.of(self.round, v, best=_better(v, self.best), provisional=True,
                                      elapsed_s=time.monotonic() - self.t0))


def first_verdict_due(phases: set[str]) -> bool:
    """Whether a candidate's verifier phases so far make its first verdict worth showing: checked and
    timed against eager (its worker has exited) and, where the blind check is on, passed by it.
    torch.compile's timing (beside the blind check) and the profiles come after."""
    return TIMED in phases and (BLIND_PASSED in phases or not blind.enabled())


def _reference_profile(task: Task, plan: Plan, opts: LoopOptions, say: Callable[..., None]) -> None:
    from stitchcuda.profiling.reference import format_table, profile_in_subprocess

    say("profiling", "profiling the reference (torch.profiler, in a child process)")
    profile = profile_in_subprocess(task, device=f"cuda:{opts.verify.gpu or 0}")
    plan.profile = profile.to_dict()
    plan.notes.append(format_table(profile, top=8))


def _reference_timeline(task: Task, plan: Plan, opts: LoopOptions, say: Callable[..., None]) -> None:
    from stitchcuda.profiling import nsys
    from stitchcuda.profiling.reference import format_table

    if not nsys.find_nsys():
        return
    say("profiling", "the reference's timeline (Nsight Systems, in a child process)")
    timeline = nsys.profile_in_subprocess(task, device=f"cuda:{opts.verify.gpu or 0}", iterations=3,
                                          timeout_s=TIMELINE_TIMEOUT_S)
    if plan.profile is not None:
        plan.profile["nsys"] = timeline.to_dict()
    plan.notes.append(format_table(timeline, top=5))


def plan_task(task: Task) -> Plan:
    from stitchcuda.agents.plan.planner import plan

    return plan(task)


def optimize(
    task: Task,
    run_dir: Path,
    opts: LoopOptions | None = None,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
) -> RunResult:
    """Plan, then rounds of code and verify; `progress` gets every ProgressEvent and RoundVerdict."""
    opts = opts or LoopOptions()
    sink = progress or (lambda event: None)
    first_ok: list[float] = []
    emitting = threading.Lock()  # a round's candidates report from their own verifying threads

    def emit(event: ProgressEvent | RoundVerdict) -> None:
        with emitting:
            if isinstance(event, RoundVerdict) and event.accepted and event.elapsed_s is not None and not first_ok:
                first_ok.append(event.elapsed_s)
            sink(event)

    def say(phase: Phase, detail: str = "", round: int | None = None, step: str | None = None) -> None:
        emit(ProgressEvent(phase, detail, round, step))

    run_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    # An interrupt (Ctrl-C lands in a wait on the pool) must stop the round's workers too, not wait them out.
    cancel = cancel if cancel is not None else threading.Event()
    code = make_coder(opts.coder, cancel)
    name = coder_name(opts.coder)
    gpus = opts.gpus or ([opts.verify.gpu] if opts.verify.gpu is not None else None)
    if gpus and opts.verify.gpu is None:  # what runs outside the pool (one candidate, the profiles) uses the first
        opts = dataclasses.replace(opts, verify=dataclasses.replace(opts.verify, gpu=gpus[0]))
    # Several candidates a round only from a coder that writes alternatives (the built-in one has one).
    per_round = max(1, opts.per_round or len(gpus or [None])) if hasattr(code, "alternative") else 1
    pool = VerifierPool(gpus, 1, opts.verify) if per_round > 1 else None
    try:
        return _optimize(task, run_dir, opts, code, name, per_round, pool, t0, emit, say, first_ok, cancel)
    except BaseException:
        cancel.set()
        raise
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)


def _optimize(task, run_dir, opts, code, name, per_round, pool, t0, emit, say, first_ok, cancel) -> RunResult:
    say("planning", f"tracing {task.name}")
    plan = plan_task(task)
    # The reference's torch.profiler run (a child process: ~15 s the first time, cached after) is
    # taken before round 1 only for a coder that reads it (the LLM's prompt); the built-in coder's
    # first candidate does not wait for it (issue 16: the first verdict sooner).
    profile_pending = bool(opts.profile_reference and cuda_available())
    if profile_pending and getattr(code, "reads_profile", True):
        _reference_profile(task, plan, opts, say)
        profile_pending = False
    elif opts.verify.replay and not cuda_available():
        from stitchcuda.agents.verify import replay

        plan.profile = replay.profile_for(replay.load(Path(opts.verify.replay)), task.path)
        if plan.profile:
            plan.notes.append(f"reference profile replayed from {opts.verify.replay}")
    (run_dir / "plan.json").write_text(json.dumps(asdict(plan), indent=2, default=str))
    # The reference's Nsight Systems timeline (up to 90 s) is for the findings and the later rounds'
    # coders, not for the first candidate: it runs after round 1, so the first verdict comes sooner.
    timeline_pending = bool(opts.profile_reference and opts.profile_timeline and cuda_available())
    rounds = Rounds(code, task, plan, RoundPolicy(opts.rounds), number_names=True)
    best: tuple[Candidate, Verdict] | None = None
    best_round: RoundVerdict | None = None
    while rounds.wants_another():
        k = rounds.round
        if cancel is not None and cancel.is_set():
            break
        if opts.time_budget_s and time.monotonic() - t0 > opts.time_budget_s:
            say("budget", f"time budget of {opts.time_budget_s:.0f} s spent after {k - 1} round(s)")
            break
        say("coding", name if per_round == 1 else f"{name}, up to {per_round} candidates", k)
        cands = rounds.next_candidates(per_round)
        for why in rounds.short_rounds:
            say("coding", why, k)
        rounds.short_rounds.clear()
        if not cands:
            if rounds.stopped == "coder-failed":
                say("coder-failed", rounds.coder_error, k)
            elif rounds.stopped == "nothing-new":
                say("nothing-new", "the coder has nothing new to try", k)
            break
        judged = _verify_round(task, cands, k, run_dir, opts, pool, t0, emit, say, best[1] if best else None, cancel)
        if profile_pending and not (cancel is not None and cancel.is_set()):
            profile_pending = False  # now, before the rubric's coverage reads it
            _reference_profile(task, plan, opts, say)
            (run_dir / "plan.json").write_text(json.dumps(asdict(plan), indent=2, default=str))
        round_best: Verdict | None = None
        # What this round answered (for the rubric's compliance): the verdict the Coder was given.
        answered = next(((c, v) for c, v in reversed(rounds.attempts) if v is rounds.feedback), None)
        for cand, verdict in judged:
            verdict.rubric = rubric.score(cand, verdict, plan, answered)
            (run_dir / cand.name / "verdict.json").write_text(verdict.to_json())
            event = RoundVerdict.of(k, verdict, best=_better(verdict, best[1] if best else None),
                                    elapsed_s=time.monotonic() - t0)
            if event.best:
                best, best_round = (cand, verdict), event
            if _better(verdict, round_best):
                round_best = verdict
            emit(event)
        # The next round answers the round's best; none timed (a CPU): its first correct one, or its first.
        fallback = next((v for _, v in judged if v.status == "ok"), judged[0][1])
        rounds.record_round(judged, round_best or fallback)
        _write_trajectory(code, rounds.attempts, run_dir)
        if timeline_pending and plan.profile is not None and not (cancel is not None and cancel.is_set()):
            timeline_pending = False
            _reference_timeline(task, plan, opts, say)
            (run_dir / "plan.json").write_text(json.dumps(asdict(plan), indent=2, default=str))

    attempts = rounds.attempts
    message, proposal = _conclude(plan, attempts, best, rounds.coder_error)
    gpu = next((v.device for _, v in attempts if v.device and v.device != "cpu"), None)
    result = RunResult(task, run_dir, plan, attempts, proposal, message, meta=provenance.record(gpu),
                       best_round=best_round, first_verdict_s=first_ok[0] if first_ok else None)
    (run_dir / "summary.json").write_text(json.dumps(result.summary(), indent=2, default=str))
    return result


def _verify_round(task: Task, cands: list[Candidate], k: int, run_dir: Path, opts: LoopOptions,
                  pool: VerifierPool | None, t0: float, emit, say, best: Verdict | None,
                  cancel: threading.Event | None) -> list[tuple[Candidate, Verdict]]:
    """The round's candidates verified (several at once on the pool's GPUs, each GPU's lock held
    for its correctness and timing), each streaming its provisional verdict as the first does."""
    def on_step_for(cand: Candidate):
        first = _FirstVerdict(k, t0, emit, best)
        seen: set[str] = set()

        def on_step(step: str, detail: str) -> None:
            say("verifying", detail if len(cands) == 1 else f"{cand.name}: {detail}", k, step)
            seen.add(step)
            if first_verdict_due(seen):
                first.send()
        return on_step, first.timed

    steps = {c.name: on_step_for(c) for c in cands}
    if pool is None:
        return [(c, verify(task, c, run_dir / c.name, opts.verify, progress=steps[c.name][0], cancel=cancel,
                           timed=steps[c.name][1])) for c in cands]
    futures = [pool.submit(task, c, run_dir / c.name, progress=steps[c.name][0], cancel=cancel,
                           timed=steps[c.name][1]) for c in cands]
    return [(c, f.result()) for c, f in zip(cands, futures, strict=True)]


def _verdict_line(v: Verdict) -> str:
    return RoundVerdict.of(0, v).line


# Candidates within this fraction of each other's time are "of similar speed": the rubric decides.
SIMILAR_SPEED = 0.03


def _better(v: Verdict, best: Verdict | None) -> bool:
    if not (v.accepted and v.ours):
        return False
    if best is None or best.ours is None:
        return True
    a, b = v.ours.median_ms, best.ours.median_ms
    if abs(a - b) <= SIMILAR_SPEED * min(a, b):
        return v.rubric.get("total", 0.0) > best.rubric.get("total", 0.0)
    return a < b


def _write_trajectory(code, attempts: list[tuple[Candidate, Verdict]], run_dir: Path) -> None:
    """The LLM coder's exchanges as JSONL, each with the verdict and rubric of what it produced."""
    turns = getattr(code, "trajectory", None)
    if not turns:
        return
    verdicts = {id(c): v for c, v in attempts}
    lines = []
    for t in turns:
        v = verdicts.get(id(t.candidate)) if t.candidate is not None else None
        lines.append(json.dumps({
            "skill": t.skill, "task": t.task, "messages": t.messages, "response": t.response,
            "parse_errors": t.parse_errors, "candidate": t.candidate.name if t.candidate else None,
            "files": t.candidate.files if t.candidate else None,
            "verdict": {"status": v.status, "message": v.message, "speedup_eager": v.speedup_eager,
                        "speedup_compile": v.speedup_compile} if v else None,
            "rubric": v.rubric if v else None,
        }))
    (run_dir / "trajectory.jsonl").write_text("\n".join(lines) + "\n")
    usage = getattr(code, "usage", None)
    if callable(usage):
        (run_dir / "llm_usage.json").write_text(json.dumps(usage(), indent=2))


def _conclude(plan: Plan, attempts, best, coder_error: str = "") -> tuple[str, tuple[Candidate, Verdict] | None]:
    if not attempts:
        why = coder_error or "; ".join(plan.unsupported) or "the coder produced no candidate"
        return f"no candidate: {why}", None
    if best is None:
        untimed = [v for _, v in attempts if v.accepted and v.ours is None]
        if untimed and not cuda_available():
            return (f"{untimed[-1].candidate} is correct on the CPU (host code), but nothing was timed: "
                    "no CUDA GPU on this machine"), None
        unverified = [v for _, v in attempts if v.status == "unverified"]
        if unverified:
            return ("built with nvcc but not verified or timed: no CUDA GPU on this machine"
                    if not cuda_available() else unverified[0].message), None
        last = attempts[-1][1]
        tail = f"; then the coder failed: {coder_error}" if coder_error else ""
        return f"no correct, hack-free candidate ({last.status}: {last.message}){tail}", None
    v = best[1]
    if v.speedup_eager is not None and v.speedup_eager <= 1.0:
        return (f"no proposal: the best correct candidate ({v.ours.median_ms:.3f} ms) is not faster than "
                f"the reference ({v.eager.median_ms:.3f} ms eager)"), None
    return f"proposal {best[0].name}: {_verdict_line(v)}", best
