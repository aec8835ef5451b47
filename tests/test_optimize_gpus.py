"""`optimize` over several GPUs (issue 19): a round's candidates verified at once, one worker and
lock per GPU. The LLM coder (the real client against tests/openai_server.py's scripted server)
writes a round of two; on a machine with two GPUs both are checked and timed at the same time,
which one GPU's lock would not allow."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import KERNELBENCH
from llm_scripts import RELU_VEC4, UNARY_MODEL, answer, plan_answer
from openai_server import ScriptedOpenAI

from stitchcuda.agents.loop import LoopOptions, optimize
from stitchcuda.agents.verify.verifier import VerifyOptions
from stitchcuda.types import Task

RELU = KERNELBENCH / "level1" / "19_ReLU.py"


def _locked_window(workdir: Path) -> tuple[float, float]:
    """When the worker entered its correctness phase (the GPU lock's first phase) and its last event."""
    events = [json.loads(ln) for ln in (workdir / "events.jsonl").read_text().splitlines()]
    start = next(e["t"] for e in events if e["phase"] == "correctness")
    return start, events[-1]["t"]


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
@pytest.mark.skipif(not RELU.exists(), reason=f"no KernelBench at {KERNELBENCH} (set KERNELBENCH_DIR)")
def test_a_round_of_two_is_verified_on_two_gpus_at_once(tmp_path, monkeypatch):
    monkeypatch.setenv("STITCHCUDA_LLM_MODEL", "scripted")
    monkeypatch.setenv("STITCHCUDA_LLM_API_KEY", "sk-scripted-not-a-real-key")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    model = UNARY_MODEL.replace("NAME", "relu")
    other = RELU_VEC4.replace("#include <cuda_runtime.h>", "#include <cuda_runtime.h>\n// the second approach")
    script = [{"content": plan_answer(["relu"], "one pass over memory")},
              {"content": answer(model, RELU_VEC4, "16-byte loads.")},
              {"content": answer(model, other, "Another approach.")}]
    with ScriptedOpenAI(script) as srv:
        monkeypatch.setenv("STITCHCUDA_LLM_ENDPOINT", srv.url)
        opts = LoopOptions(coder="llm", rounds=1, gpus=[0, 1], verify=VerifyOptions(profile=False),
                           profile_reference=False)
        result = optimize(Task(path=RELU), tmp_path / "run", opts)
    assert [(c.name, v.status) for c, v in result.attempts] == [("r1-llm-1", "ok"), ("r1.2-llm-2", "ok")], \
        [v.message for _, v in result.attempts]
    assert all(v.ours is not None and v.compiled is not None for _, v in result.attempts)
    (a0, a1), (b0, b1) = (_locked_window(tmp_path / "run" / c.name) for c, _ in result.attempts)
    # Each GPU's lock is held from correctness to the last timing: on one GPU these could not overlap.
    assert max(a0, b0) < min(a1, b1), ((a0, a1), (b0, b1))
    # The better of the two is the run's best (ReLU is not proposed: nothing beats torch.compile's copy by much).
    assert result.best_round is not None and result.best_round.candidate in {c.name for c, _ in result.attempts}
