"""The round policy, in one place for `optimize` (agents/loop.py) and `bench` (stitchcuda/bench.py).

A problem's rounds: the Coder writes a candidate, the Verifier judges it, and the verdict goes back
to the Coder as feedback for the next one. `Rounds` decides when another round is run, asks the
Coder for it, and stops where the Coder fails, has no candidate, or writes files already verified
(how a deterministic coder says it has nothing new). The precision climb after a wrong result is
the built-in Coder's answer to that feedback (`precision_after`); what runs the Verifier (one at a
time, or a pool with deadlines and re-runs) stays with the caller.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

from stitchcuda.agents.verify.replay import files_digest
from stitchcuda.types import Candidate, Plan, Task, Verdict


class Coder(Protocol):
    """Writes a candidate for a plan; `feedback` is the Verifier's verdict on its last candidate for
    this task (None for the first). None: it has no candidate. The built-in coder
    (agents/coder/builtin.code) and the LLM coder (agents/llm/coder.LLMCoder) are both one."""

    def __call__(self, task: Task, plan: Plan, feedback: Verdict | None = None) -> Candidate | None: ...


class SamplingCoder(Coder, Protocol):
    """A Coder that can write more than one candidate for the same feedback (the LLM coder: another
    sample, told how its first answer went). A round of several candidates is verified at once, a
    GPU each (`optimize` with several GPUs). The built-in coder is deterministic: it has one."""

    def alternative(self, task: Task, plan: Plan, feedback: Verdict | None, sample: int) -> Candidate | None: ...


@dataclass(frozen=True)
class RoundPolicy:
    """When another round is run."""

    rounds: int  # at most this many rounds for a problem (a round is one candidate unless asked for more)
    # The verdict statuses after which another round is run; None: after any verdict (optimize: the
    # LLM coder improves on right answers too, and the built-in one's same files end the rounds).
    again_after: frozenset[str] | None = None


# `bench`: the first candidate and at most three answers to wrong results: the built-in coder's
# whole precision ladder (mixed where it applies (precision_mix.py), 3xTF32, full fp32), as
# `optimize` climbs it. At three rounds full fp32 was never reached where the mixed rung applied:
# on the H200 (2026-11-30) bench/coverage's decoder_handwritten was "incorrect" in the bench and
# solved by optimize's fourth round.
BENCH_POLICY = RoundPolicy(rounds=4, again_after=frozenset({"incorrect"}))

# Why the rounds ended, once they have: the policy's round limit or the verdict's status
# ("policy"), the Coder raising ("coder-failed", with `Rounds.coder_error`), no candidate
# ("no-candidate"), or files already verified ("nothing-new").
Stop = Literal["policy", "coder-failed", "no-candidate", "nothing-new"]


@dataclass
class Rounds:
    """One problem's rounds under a policy. Not thread-safe: one problem's rounds run one at a time."""

    coder: Coder
    task: Task
    plan: Plan
    policy: RoundPolicy
    number_names: bool = False  # name candidates "r{round}-{name}" (optimize's run folder has one per round)
    attempts: list[tuple[Candidate, Verdict]] = field(default_factory=list)
    stopped: Stop | None = None
    coder_error: str = ""
    # What the next round answers: the last verdict, or the one `record_round` names for a round of several.
    feedback: Verdict | None = None
    # Why a round got fewer candidates than asked for (an alternative that failed); the rounds go on.
    short_rounds: list[str] = field(default_factory=list)
    _begun: int = 0
    _seen: set[str] = field(default_factory=set)

    @property
    def round(self) -> int:
        """The number of the round that `next_candidate` would run (1-based)."""
        return self._begun + 1

    @property
    def last(self) -> tuple[Candidate, Verdict] | None:
        return self.attempts[-1] if self.attempts else None

    def wants_another(self) -> bool:
        """Whether the policy runs another round after the verdicts so far (the first always)."""
        if self.stopped is not None:
            return False
        if self._begun >= self.policy.rounds:
            return False
        fb = self.feedback
        return fb is None or self.policy.again_after is None or fb.status in self.policy.again_after

    def next_candidate(self) -> Candidate | None:
        """The Coder's candidate for the next round, given the last verdict as feedback; None when
        the rounds end here (`stopped` says why). The caller verifies it and calls `record`."""
        if not self.wants_another():
            self.stopped = self.stopped or "policy"
            return None
        try:
            cand = self.coder(self.task, self.plan, feedback=self.feedback)
        except Exception as e:  # noqa: BLE001 - a coder that fails ends the rounds, with its reason
            self.coder_error = f"{type(e).__name__}: {e}"
            self.stopped = "coder-failed"
            return None
        if cand is None:
            self.stopped = "no-candidate"
            return None
        if not self._new(cand, f"r{self.round}"):
            self.stopped = "nothing-new"
            return None
        self._begun += 1
        return cand

    def _new(self, cand: Candidate, prefix: str) -> bool:
        """Whether `cand`'s files were never verified for this problem; if so they count as seen now,
        and the candidate is named `{prefix}-{name}` where names carry the round."""
        digest = files_digest(cand.files)
        if digest in self._seen:
            return False
        self._seen.add(digest)
        if self.number_names:
            cand.name = f"{prefix}-{cand.name}"
        return True

    def next_candidates(self, n: int) -> list[Candidate]:
        """Up to `n` candidates for the next round, all answering the same feedback, for the caller
        to verify at once: the first from `next_candidate`, the others from the Coder's `alternative`
        where it has one (a deterministic coder has not: its round is one candidate). Files already
        verified, or an alternative that fails, end the round there (`short_rounds` says why), not
        the rounds. Empty when the rounds end here (`stopped` says why)."""
        first = self.next_candidate()
        if first is None:
            return []
        out = [first]
        alternative = getattr(self.coder, "alternative", None)
        k = self._begun
        for sample in range(2, n + 1 if alternative else 2):
            try:
                cand = alternative(self.task, self.plan, self.feedback, sample)  # type: ignore[misc]
            except Exception as e:  # noqa: BLE001 - the round goes on with the candidates it has
                self.short_rounds.append(f"round {k}: alternative {sample} failed: {type(e).__name__}: {e}")
                break
            if cand is None:
                break
            if not self._new(cand, f"r{k}.{sample}"):
                self.short_rounds.append(f"round {k}: alternative {sample} repeated files already verified")
                break
            out.append(cand)
        return out

    def record(self, cand: Candidate, verdict: Verdict) -> None:
        """The Verifier's verdict on `cand`. The same candidate verified again (bench's re-run of an
        out-of-memory verdict) replaces its round's verdict instead of adding a round."""
        if self.attempts and self.attempts[-1][0] is cand:
            self.attempts[-1] = (cand, verdict)
        else:
            self.attempts.append((cand, verdict))
        self.feedback = verdict

    def record_round(self, judged: list[tuple[Candidate, Verdict]], feedback: Verdict) -> None:
        """A round of several candidates' verdicts, in the order they were written; `feedback` (the
        round's best, the caller's choice) is what the next round answers."""
        for cand, verdict in judged:
            self.attempts.append((cand, verdict))
        self.feedback = feedback
