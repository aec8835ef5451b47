"""One exchange with the model, kept for the run's trajectory (fine-tuning data for both skills)."""

from __future__ import annotations

from dataclasses import dataclass, field

from stitchcuda.types import Candidate


@dataclass
class Turn:
    skill: str  # plan_to_code | code_and_feedback | alternative (another candidate of the same round)
    task: str
    messages: list[dict[str, str]]
    response: str
    candidate: Candidate | None = None
    parse_errors: list[str] = field(default_factory=list)
