"""The LLM Coder: a `Coder` (agents/rounds.py) like the built-in one, `code(task, plan, feedback=None)`,
over any OpenAI-compatible server. The first call is skill 1 (plan -> code, seeded with the built-in
coder's candidate when it has one); each later call is skill 2 (the code the feedback is about plus
the Verifier's feedback -> better code); `alternative` writes another candidate for the same round
(a different approach, for a round verified on several GPUs at once). An answer that cannot be
parsed into files is sent back with the reason, a bounded number of times. Every exchange is kept as a trajectory turn.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from stitchcuda.agents.llm import prompts
from stitchcuda.agents.llm.client import LLMClient, LLMConfig, LLMError
from stitchcuda.agents.llm.feedback import feedback_text
from stitchcuda.agents.llm.parse import ParseError, parse_files
from stitchcuda.agents.llm.trajectory import Turn
from stitchcuda.types import Candidate, Plan, Task, Verdict


class CoderError(RuntimeError):
    """The coder could not produce a candidate; the message says why (and never holds the key)."""


@dataclass
class _State:
    messages: list[dict[str, str]]
    last: Candidate | None = None
    round: int = 0  # candidates written (names them)
    written: list[Candidate] = field(default_factory=list)
    # The round's first request and its answers so far, for its alternatives.
    round_first: tuple[list[dict[str, str]], list[str]] | None = None


class LLMCoder:
    def __init__(self, client: LLMClient | None = None, *, seed_with_builtin: bool = True, max_reasks: int = 2,
                 plan_first: bool = True, cancel: threading.Event | None = None) -> None:
        self.client = client or LLMClient(LLMConfig.from_env(), cancel=cancel)
        self.seed_with_builtin = seed_with_builtin
        self.plan_first = plan_first
        self.plan_notes: list[str] = []
        self.max_reasks = max_reasks
        self.trajectory: list[Turn] = []
        self._states: dict[str, _State] = {}

    def __call__(self, task: Task, plan: Plan, feedback: Verdict | None = None) -> Candidate | None:
        key = task.name
        state = self._states.get(key)
        if state is None or feedback is None:
            seed = self._seed(task, plan)
            gpu = prompts.gpu_line()
            llm_plan = self._plan(task, plan, gpu) if self.plan_first else None
            state = self._states[key] = _State(prompts.plan_to_code(task, plan, seed, gpu, llm_plan))
        request = self._request(state, feedback)
        if request is None:
            return None
        skill = "plan_to_code" if feedback is None else "code_and_feedback"
        files, turn = self._ask(task, skill, request)
        state.round_first = (request, [turn.response])
        return self._candidate(task, state, files, turn)

    def alternative(self, task: Task, plan: Plan, feedback: Verdict | None, sample: int) -> Candidate | None:
        """Candidate `sample` (2, 3, ...) of the round whose first this coder just wrote, answering the
        same feedback: the same request, its first answer, and a request for a different approach
        (agents/rounds.SamplingCoder). None before any first."""
        state = self._states.get(task.name)
        if state is None or state.round_first is None:
            return None
        request, answers = state.round_first
        # The round's answers so far, each after the request that asked for it: a third candidate is
        # told what the first two were, so it does not write the second again.
        messages = list(request)
        for k, answer in enumerate(answers):
            messages += ([prompts.another_sample(k + 1)] if k else []) + [{"role": "assistant", "content": answer}]
        files, turn = self._ask(task, "alternative", [*messages, prompts.another_sample(sample)])
        answers.append(turn.response)
        return self._candidate(task, state, files, turn)

    def _request(self, state: _State, feedback: Verdict | None) -> list[dict[str, str]] | None:
        if feedback is None:
            return list(state.messages)
        # The candidate the feedback is about (a round of several answers its best, not its last).
        shown = next((c for c in reversed(state.written) if c.name == feedback.candidate), state.last)
        if shown is None:
            return None
        # Keep the task and the last exchange only: older rounds are in the feedback already.
        return state.messages[:2] + [prompts.code_and_feedback(shown, feedback_text(feedback))]

    def _candidate(self, task: Task, state: _State, files: dict[str, str], turn: Turn) -> Candidate:
        state.round += 1
        # What it was asked for (prompts.precision_line): the matched torch.compile follows it.
        cand = Candidate(name=f"llm-{state.round}", files=files, origin="llm",
                         precision="fp32" if task.precision == "strict" else "tf32",
                         notes=[f"{self.client.config.model} via {self.client.config.base_url}"])
        turn.candidate = cand
        state.last = cand
        state.written.append(cand)
        return cand

    def _plan(self, task: Task, plan: Plan, gpu: str) -> str | None:
        from stitchcuda.agents.llm.planner import PlanError, plan_with_llm

        try:
            return plan_with_llm(self.client, task, plan, gpu, self.max_reasks, self.trajectory).text()
        except PlanError as e:
            # The coder still has the graph and profile; the run says the plan step failed.
            self.plan_notes.append(f"LLM plan rejected: {e}")
            return None
        except LLMError as e:
            raise CoderError(self.client.scrub(str(e))) from None

    def _seed(self, task: Task, plan: Plan) -> Candidate | None:
        if not (self.seed_with_builtin and plan.supported):
            return None
        from stitchcuda.agents.coder import builtin as coder_builtin

        try:
            return coder_builtin.code(task, plan)
        except Exception:  # noqa: BLE001 - no seed; the model starts from the graph
            return None

    def _ask(self, task: Task, skill: str, request: list[dict[str, str]]) -> tuple[dict[str, str], Turn]:
        messages = list(request)
        errors: list[str] = []
        for _ in range(self.max_reasks + 1):
            try:
                answer = self.client.complete(messages)
            except LLMError as e:
                raise CoderError(self.client.scrub(str(e))) from None
            turn = Turn(skill, task.name, list(messages), answer, parse_errors=list(errors))
            self.trajectory.append(turn)
            try:
                return parse_files(answer), turn
            except ParseError as e:
                errors.append(str(e))
                messages = messages + [{"role": "assistant", "content": answer}, prompts.malformed(str(e))]
        raise CoderError(f"the model's answers could not be used after {self.max_reasks + 1} tries: {errors[-1]}")

    def usage(self) -> dict[str, Any]:
        return self.client.usage.as_dict()
