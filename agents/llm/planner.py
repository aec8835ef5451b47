"""The LLM Planner: module source, traced graph, reference profile and GPU -> a structured plan
(fusion groups, library choices, layouts, host orchestration), checked against the traced graph.
An invalid plan goes back to the model with the reason, a bounded number of times.

The plan is JSON:
  {"groups": [{"kind": "fused" | "library", "nodes": ["mul", "add", ...],
               "library": "cublas" | "cublasLt" | "cudnn" | null, "layout": "...", "why": "..."}],
   "host": {"cuda_graph": false, "streams": 1}, "notes": ["..."]}
Every compute node of the graph must be in exactly one group, in an order that respects the
graph's dependencies; library groups may only hold ops a library implements.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from stitchcuda.agents.llm import prompts
from stitchcuda.agents.llm.client import LLMClient
from stitchcuda.agents.llm.trajectory import Turn
from stitchcuda.types import Plan, Task

LIBRARIES = {"cublas": {"mm", "addmm", "bmm", "baddbmm", "matmul", "linear"},
             "cudnn": {"convolution", "_convolution", "conv2d", "conv1d", "conv3d"}}
LIBRARIES["cublasLt"] = LIBRARIES["cublas"]
KINDS = {"fused", "library"}

SYSTEM = """You plan how to turn a PyTorch module into as few, as fast CUDA kernels as possible.
Answer with one JSON object only (a ```json fence is fine):
{"groups": [{"kind": "fused" | "library", "nodes": [node names], "library": "cublas" | "cublasLt" | "cudnn" | null,
             "layout": "e.g. row-major, NHWC", "why": "one line"}],
 "host": {"cuda_graph": true | false, "streams": 1},
 "notes": ["..."]}
Rules: every compute node of the traced graph appears in exactly one group; groups are listed in
an order where each node's inputs come from the module's inputs or from earlier groups; a library
group holds one matmul (cublas/cublasLt, epilogue ops may join it) or one convolution (cudnn).
Put the GPU time where the profile says it is."""


class PlanError(ValueError):
    pass


@dataclass
class LLMPlan:
    groups: list[dict[str, Any]]
    host: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def text(self) -> str:
        lines = [f"{k + 1}. {g['kind']}"
                 + (f" via {g['library']}" if g.get("library") else "")
                 + f": {', '.join(g['nodes'])}" + (f" ({g['why']})" if g.get("why") else "")
                 for k, g in enumerate(self.groups)]
        lines.append(f"host: {json.dumps(self.host)}")
        return "\n".join(lines + [f"note: {n}" for n in self.notes])


def _compute_nodes(plan: Plan) -> dict[str, dict[str, Any]]:
    return {n["name"]: n for n in plan.graph if n.get("op") not in {"input", "output"}}


def _refs(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [value["ref"]] if "ref" in value else [r for v in value.values() for r in _refs(v)]
    if isinstance(value, list):
        return [r for v in value for r in _refs(v)]
    return []


def validate(data: Any, plan: Plan) -> LLMPlan:
    if not isinstance(data, dict) or not isinstance(data.get("groups"), list) or not data["groups"]:
        raise PlanError('the plan needs a non-empty "groups" list')
    nodes = _compute_nodes(plan)
    seen: dict[str, int] = {}
    for k, g in enumerate(data["groups"]):
        if not isinstance(g, dict) or g.get("kind") not in KINDS or not isinstance(g.get("nodes"), list):
            raise PlanError(f'group {k + 1}: needs "kind" (fused or library) and a "nodes" list')
        for name in g["nodes"]:
            if name not in nodes:
                raise PlanError(f"group {k + 1}: {name!r} is not a compute node of the traced graph")
            if name in seen:
                raise PlanError(f"{name!r} is in groups {seen[name] + 1} and {k + 1}: each node goes in one group")
            seen[name] = k
        if g["kind"] == "library":
            lib = g.get("library")
            if lib not in LIBRARIES:
                raise PlanError(f"group {k + 1}: library must be one of {', '.join(sorted(LIBRARIES))}")
            core = [n for n in g["nodes"] if nodes[n].get("op") in LIBRARIES[lib]]
            if len(core) != 1:
                raise PlanError(f"group {k + 1}: a {lib} group holds exactly one op {lib} implements, "
                                f"found {len(core)}")
    missing = [n for n in nodes if n not in seen]
    if missing:
        raise PlanError(f"nodes in no group: {', '.join(missing[:12])}")
    for name, k in seen.items():
        for dep in _refs(nodes[name].get("args")):
            if dep in seen and seen[dep] > k:
                raise PlanError(f"group {k + 1} uses {dep!r}, which group {seen[dep] + 1} only computes later")
    return LLMPlan(data["groups"], data.get("host") or {}, [str(n) for n in data.get("notes") or []])


def _json(text: str) -> Any:
    m = re.search(r"```(?:json)?\s*\n(.*?)\n```", text, re.S)
    body = m.group(1) if m else text[text.find("{"): text.rfind("}") + 1]
    try:
        return json.loads(body)
    except json.JSONDecodeError as e:
        raise PlanError(f"the plan is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None


def plan_with_llm(client: LLMClient, task: Task, plan: Plan, gpu: str, max_reasks: int = 2,
                  turns: list | None = None) -> LLMPlan:
    user = "\n\n".join([
        f"Module `{task.class_name}`:\n```python\n{task.path.read_text().rstrip()}\n```",
        f"Traced aten graph:\n{prompts.graph_text(plan)}",
        f"Reference GPU time by op: {prompts.profile_text(plan)}",
        f"GPU: {gpu}",
    ])
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
    last = ""
    for _ in range(max_reasks + 1):
        answer = client.complete(messages)
        if turns is not None:
            turns.append(Turn("plan", task.name, list(messages), answer, parse_errors=[last] if last else []))
        try:
            return validate(_json(answer), plan)
        except PlanError as e:
            last = str(e)
            messages = messages + [{"role": "assistant", "content": answer},
                                   {"role": "user", "content": f"The plan is invalid: {e}. Send the corrected JSON plan."}]
    raise PlanError(f"no valid plan after {max_reasks + 1} tries: {last}")
