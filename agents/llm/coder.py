"""The LLM Coder: a `Coder` (agents/rounds.py) like the built-in one, `code(task, plan, feedback=None)`,
over any OpenAI-compatible server. The first call is skill 1 (plan -> code, seeded with the built-in
coder's candidate when it has one); each later call is skill 2 (the last candidate's code plus the
Verifier's feedback -> better code). An answer that cannot be parsed into files is sent back with
the reason, a bounded number of times. Every exchange is kept as a trajectory turn.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
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
    round: int = 0


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
            skill, request = "plan_to_code", list(state.messages)
        else:
            if state.last is None:
                return None
            # Keep the task and the last exchange only: older rounds are in the feedback already.
            skill = "code_and_feedback"
            request = state.messages[:2] + [prompts.code_and_feedback(state.last, feedback_text(feedback))]
        state.round += 1
        files, turn = self._ask(task, skill, request)
        # What it was asked for (prompts.precision_line): the matched torch.compile follows it.
        cand = Candidate(name=f"llm-{state.round}", files=files, origin="llm",
                         precision="fp32" if task.precision == "strict" else "tf32",
                         notes=[f"{self.client.config.model} via {self.client.config.base_url}"])
        turn.candidate = cand
        state.last = cand
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
