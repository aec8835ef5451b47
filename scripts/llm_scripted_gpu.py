"""The LLM loop on a GPU, driven by a scripted OpenAI-compatible server (tests/openai_server.py):
three KernelBench problems (tests/llm_scripts.py), planner turn + two coder rounds each, every
candidate built, verified, timed and profiled for real. Writes $OUT/llm/<problem>/ (summary.json,
trajectory.jsonl, llm_usage.json) and $OUT/llm/results.json with provenance.

Run by `scripts/gpu_run.sh llm` (KERNELBENCH names the problems' folder).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from llm_scripts import CONVERSATIONS, FIRST_VERDICT, plan_answer  # noqa: E402
from openai_server import ScriptedOpenAI  # noqa: E402

from stitchcuda import provenance  # noqa: E402
from stitchcuda.agents.loop import LoopOptions, optimize  # noqa: E402
from stitchcuda.agents.plan.planner import plan  # noqa: E402
from stitchcuda.agents.verify.verifier import VerifyOptions  # noqa: E402
from stitchcuda.types import Task  # noqa: E402


def main(out: Path) -> int:
    kb = Path(os.environ.get("KERNELBENCH", ROOT / ".carry" / "kernelbench")).resolve()
    os.environ.setdefault("STITCHCUDA_LLM_MODEL", "scripted")
    os.environ.setdefault("STITCHCUDA_LLM_API_KEY", "sk-scripted-not-a-real-key")
    os.environ["XDG_CACHE_HOME"] = str(out / "xdg")  # no cached answers from an earlier run
    results = {"meta": provenance.record(), "problems": {}}
    for rel, answers in CONVERSATIONS.items():
        task = Task(path=kb / rel)
        nodes = [n["name"] for n in plan(task).graph if n.get("op") not in {"input", "output"}]
        script = [{"content": plan_answer(nodes, "one pass over memory")}] + [{"content": a} for a in answers]
        with ScriptedOpenAI(script) as srv:
            os.environ["STITCHCUDA_LLM_ENDPOINT"] = srv.url
            opts = LoopOptions(coder="llm", rounds=len(answers), verify=VerifyOptions())
            res = optimize(task, out / Path(rel).stem, opts)
        entry = {
            "message": res.message,
            "expected_first": FIRST_VERDICT[rel],
            "attempts": [{"candidate": c.name, "status": v.status, "message": v.message[:300],
                          "speedup_eager": v.speedup_eager, "speedup_compile": v.speedup_compile,
                          "ours_ms": v.ours.median_ms if v.ours else None, "rubric": v.rubric,
                          "findings": [f.message for f in v.findings][:4]}
                         for c, v in res.attempts],
        }
        results["problems"][rel] = entry
        results["meta"]["gpu"] = results["meta"]["gpu"] or next(
            (v.device for _, v in res.attempts if v.device and v.device != "cpu"), None)
        print(rel, json.dumps(entry, indent=1), flush=True)
    (out / "results.json").write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(os.environ.get("OUT", "/tmp/stitchcuda-out")) / "llm"))
