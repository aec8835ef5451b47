"""What a run reports while it goes and when it ends, as typed values.

The loop (agents/loop.py) emits these; `stitchcuda optimize --events` writes each as one JSON line
(`to_dict`, with the event type in the "event" field); the language server reads them back with
`from_json` into the same classes and sends their numbers on in `stitchcuda/jobUpdate`; the VS Code
extension mirrors the dictionaries in extension/src/events.ts. The human-readable text (`label`,
`line`) is made from the fields, never parsed back.
"""

from __future__ import annotations

import builtins
import dataclasses
import json
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, get_args

from stitchcuda.types import PRECISIONS, Precision, Verdict

# Where a run is. A round's own steps ("coding", "verifying", ...) carry its number in `round`.
#   planning         tracing, planning and profiling the reference
#   budget           the time budget is spent; no further round
#   coding           the Coder writes the round's candidate
#   verifying        the Verifier works on it; `step` names the Verifier's step (build, correctness, timing, profile...)
#   coder-failed     the Coder raised; `detail` says why, and the rounds end
#   nothing-new      the Coder had nothing new to try (no candidate, or files already verified)
# "profiling": the reference's Nsight Systems timeline, taken after round 1 (not before the first verdict)
Phase = Literal["planning", "budget", "coding", "verifying", "coder-failed", "nothing-new", "profiling"]
PHASES: tuple[Phase, ...] = get_args(Phase)


def _fields(cls: type, d: dict[str, Any]) -> dict[str, Any]:
    """The keys of `d` that are fields of `cls`: a newer writer's extra keys are skipped."""
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in d.items() if k in names}


@dataclass
class ProgressEvent:
    """A step of the run, for progress displays."""

    EVENT: ClassVar[str] = "progress"

    phase: Phase
    detail: str = ""  # for people: what is happening, in a few words
    round: int | None = None  # 1-based; None outside the rounds (planning, budget)
    step: str | None = None  # phase "verifying": the Verifier's step

    def __post_init__(self) -> None:
        if self.phase not in PHASES:
            raise ValueError(f"unknown progress phase {self.phase!r} (one of {', '.join(PHASES)})")

    @property
    def label(self) -> str:
        """The phase as the CLI has always printed it: "planning", "round 2: coding", "round 2: build"."""
        if self.round is None:
            return self.phase
        # "nothing-new" has no word of its own: its detail says it ("round 2: the coder has nothing ...").
        what = {"verifying": self.step or "verifying", "coder-failed": "coder failed", "nothing-new": ""}.get(
            self.phase, self.phase)
        return f"round {self.round}: {what}" if what else f"round {self.round}:"

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.EVENT, **dataclasses.asdict(self)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ProgressEvent:
        return cls(**_fields(cls, d))


@dataclass
class RoundVerdict:
    """The Verifier's verdict on one round's candidate, as numbers and codes."""

    EVENT: ClassVar[str] = "verdict"

    round: int
    candidate: str
    status: str  # the Verifier's status code (Verdict.status): ok, incorrect, build-failed, hacked, ...
    accepted: bool  # correct, hack-free, status ok
    median_ms: float | None = None  # the candidate's timed median, where it was timed
    speedup_eager: float | None = None  # eager median / ours
    speedup_compile: float | None = None  # torch.compile median / ours
    precision: Precision = "tf32"
    # torch.compile under the candidate's own precision policy / ours, where that needed its own
    # timing (the reference has ops whose TF32 switch the policy changes); None where the default
    # figure is already matched, or was not timed.
    speedup_compile_matched: float | None = None
    compile_policy: str = ""  # the policy torch.compile was matched under ("tf32" | "strict"), if known
    replayed: bool = False  # GPU results taken from a recorded run (--replay), not measured here
    device: str = ""  # where it was measured (the recording's GPU when replayed)
    message: str = ""  # the Verifier's reason, for people
    best: bool = False  # the best candidate of the run so far (the one it would propose)
    # Sent as soon as the candidate is checked and timed against eager, before torch.compile's
    # timing and the profilers: the final verdict of the same round follows and replaces it.
    provisional: bool = False
    elapsed_s: float | None = None  # seconds from the start of the run to this verdict

    @classmethod
    def of(cls, round: int, v: Verdict, *, best: bool = False, provisional: bool = False,
           elapsed_s: float | None = None) -> RoundVerdict:
        return cls(round=round, candidate=v.candidate, status=v.status, accepted=v.accepted,
                   median_ms=v.ours.median_ms if v.ours else None, speedup_eager=v.speedup_eager,
                   speedup_compile=v.speedup_compile, precision=v.precision,
                   speedup_compile_matched=v.speedup_compile_matched if v.compiled_matched else None,
                   compile_policy=v.compile_policy,
                   replayed=bool(v.phases.get("replayed")), device=v.device, message=v.message, best=best,
                   provisional=provisional,
                   elapsed_s=builtins.round(elapsed_s, 2) if elapsed_s is not None else None)

    @property
    def line(self) -> str:
        """One line for people: "correct, 0.168 ms, 5.22x vs eager, ..." or "STATUS: message"."""
        if self.accepted and self.median_ms is not None:
            parts = [f"correct, {self.median_ms:.3f} ms"]
            if self.speedup_eager:
                parts.append(f"{self.speedup_eager:.2f}x vs eager")
            if self.speedup_compile:
                parts.append(f"{self.speedup_compile:.2f}x vs torch.compile")
            if self.speedup_compile_matched:
                parts.append(f"{self.speedup_compile_matched:.2f}x vs torch.compile under {self.compile_policy}")
            parts.append(f"precision {self.precision}")
            if self.replayed:
                parts.append(f"REPLAYED from a run recorded on {self.device}, not measured here")
            if self.provisional:
                parts.append("torch.compile's timing and the profiles still to come")
            return ", ".join(parts)
        return f"{self.status}: {self.message}"

    @property
    def label(self) -> str:
        return f"round {self.round}: verdict"

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.EVENT, **dataclasses.asdict(self)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RoundVerdict:
        got = _fields(cls, d)
        if got.get("precision") not in PRECISIONS:
            got["precision"] = "tf32"
        return cls(**got)


@dataclass
class RunEnd:
    """How the run ended: the last event of `optimize --events`."""

    EVENT: ClassVar[str] = "result"

    message: str
    summary: str | None = None  # the run's summary.json (None when cancelled before it was written)
    proposal: str | None = None  # the folder of the proposed files, where there is a proposal
    cancelled: bool = False
    best: RoundVerdict | None = None  # the best round's verdict, proposed or not

    def to_dict(self) -> dict[str, Any]:
        d = {"event": self.EVENT, **dataclasses.asdict(self)}
        d["best"] = self.best.to_dict() if self.best else None
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunEnd:
        got = _fields(cls, d)
        got["best"] = RoundVerdict.from_dict(got["best"]) if got.get("best") else None
        return cls(**got)


Event = ProgressEvent | RoundVerdict | RunEnd
_BY_TYPE: dict[str, type[ProgressEvent] | type[RoundVerdict] | type[RunEnd]] = {
    c.EVENT: c for c in (ProgressEvent, RoundVerdict, RunEnd)}


def from_dict(d: dict[str, Any]) -> Event:
    """The event a dictionary (`to_dict`'s) describes; ValueError for anything else."""
    kind = d.get("event") if isinstance(d, dict) else None
    cls = _BY_TYPE.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ValueError(f"not a StitchCUDA event: {str(d)[:200]}")
    try:
        return cls.from_dict(d)
    except TypeError as e:  # a required field missing
        raise ValueError(f"malformed {d.get('event')} event: {e}") from None


def to_json(event: Event) -> str:
    return json.dumps(event.to_dict(), default=str)


def from_json(line: str | bytes) -> Event:
    """One JSON line of `optimize --events`; ValueError for a line that is not one of ours."""
    return from_dict(json.loads(line))
