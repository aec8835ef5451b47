"""The LLM path end to end: the real `openai` client against a real local HTTP server speaking the
chat-completions API (tests/openai_server.py), scripted conversations, and the real loop: each
scripted candidate is built with nvcc (host C++ in a .cu, so the Verifier can run and check it on
this CPU) and verified; the next round's request must carry the Verifier's feedback."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from conftest import HACKS, hack_task, needs_nvcc
from openai_server import ScriptedOpenAI

from stitchcuda.agents import rubric
from stitchcuda.agents.llm import parse as llm_parse
from stitchcuda.agents.llm.client import LLMClient, LLMConfig, LLMError
from stitchcuda.agents.llm.coder import CoderError, LLMCoder
from stitchcuda.agents.loop import LoopOptions, optimize
from stitchcuda.agents.verify.verifier import VerifyOptions
from stitchcuda.events import ProgressEvent, RoundVerdict
from stitchcuda.types import Candidate, Finding, Verdict

KEY = "sk-test-SECRET-0123456789abcdef"

# The hack suite's correct affine candidate, loading a .cu (host code) instead of a .cpp.
MODEL_NEW = (HACKS / "good_affine.py").read_text().replace("kernels.cpp", "kernels.cu")
GOOD_CU = '''// Host code (no device kernels): runs where the Verifier runs, here the CPU.
#include <cstdint>

extern "C" int affine_relu(const float* x, const float* y, float* out, int64_t n, double scale, void*) {
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i] * (float)scale + y[i];
    out[i] = v > 0.f ? v : 0.f;
  }
  return 0;
}
'''
BROKEN_CU = GOOD_CU.replace("float v = x[i] * (float)scale + y[i];", "float v = x[i] * (float)scale + y[i]")
WRONG_CU = GOOD_CU.replace("out[i] = v > 0.f ? v : 0.f;", "out[i] = v;")
HACK_MODEL = MODEL_NEW.replace(
    '        out = torch.empty_like(x)\n        _lib.call("affine_relu", x, y, out, x.numel(), float(self.scale))\n        return out',
    "        return torch.relu(x * self.scale + y)")


PLAN = json.dumps({"groups": [{"kind": "fused", "nodes": ["mul", "add", "relu"], "library": None,
                                "layout": "contiguous", "why": "one pass over memory"}],
                    "host": {"cuda_graph": False, "streams": 1}, "notes": ["memory-bound"]})
P = {"content": PLAN}  # the planner's turn, first in every run


def answer(model: str = MODEL_NEW, cu: str = GOOD_CU, lead: str = "Here is the candidate.") -> str:
    return f"{lead}\n\n```python model_new.py\n{model}```\n\n```cuda kernels.cu\n{cu}```\n"


@pytest.fixture
def llm_env(tmp_path, monkeypatch):
    monkeypatch.setenv("STITCHCUDA_CACHE", str(tmp_path / "build"))
    monkeypatch.setenv("STITCHCUDA_ARCH", "sm_90")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("STITCHCUDA_LLM_MODEL", "scripted-coder")
    monkeypatch.setenv("STITCHCUDA_LLM_API_KEY", KEY)
    monkeypatch.setenv("STITCHCUDA_LLM_BACKOFF", "0.05")
    return tmp_path


def run(script, tmp_path: Path, monkeypatch, rounds: int = 3, cancel=None, **env):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with ScriptedOpenAI(script) as srv:
        monkeypatch.setenv("STITCHCUDA_LLM_ENDPOINT", srv.url)
        opts = LoopOptions(coder="llm", rounds=rounds, verify=VerifyOptions(
            cpu_only=True, random_sets=2, adversarial=("mixed-sign",), timeout_s=300))
        result = optimize(hack_task("ref_affine"), tmp_path / "run", opts, cancel=cancel)
        return result, srv.requests


def run_rounds(script, tmp_path: Path, monkeypatch, **loop):
    """`run` with LoopOptions of the test's own (per_round, gpus) and the progress events."""
    events: list = []
    with ScriptedOpenAI(script) as srv:
        monkeypatch.setenv("STITCHCUDA_LLM_ENDPOINT", srv.url)
        opts = LoopOptions(coder="llm", verify=VerifyOptions(
            cpu_only=True, random_sets=2, adversarial=("mixed-sign",), timeout_s=300), **loop)
        result = optimize(hack_task("ref_affine"), tmp_path / "run", opts, progress=events.append)
        return result, srv.requests, events


def statuses(result) -> list[str]:
    return [v.status for _, v in result.attempts]


def assert_no_key(tmp_path: Path, *texts: str) -> None:
    for t in texts:
        assert KEY not in t
    for p in tmp_path.rglob("*"):
        if p.is_file() and p.stat().st_size < 5_000_000:
            assert KEY.encode() not in p.read_bytes(), p


pytestmark = [needs_nvcc, pytest.mark.usefixtures("llm_env")]


def test_build_failure_fixed_from_the_build_log(tmp_path, monkeypatch):
    result, reqs = run([P, {"content": answer(cu=BROKEN_CU)}, {"content": answer()}], tmp_path, monkeypatch, rounds=2)
    assert statuses(result) == ["build-failed", "ok"]
    second = reqs[2]["body"]["messages"][-1]["content"]
    assert "Build errors:" in second and "error" in second and "kernels.cu" in second
    assert reqs[0]["body"]["stream"] is True  # streamed where the server can
    # Every request authenticated with the key; nothing written anywhere holds it.
    assert all(r["headers"]["authorization"] == f"Bearer {KEY}" for r in reqs)
    traj = [json.loads(ln) for ln in (tmp_path / "run" / "trajectory.jsonl").read_text().splitlines()]
    assert [t["skill"] for t in traj] == ["plan", "plan_to_code", "code_and_feedback"]
    assert traj[1]["verdict"]["status"] == "build-failed" and traj[2]["verdict"]["status"] == "ok"
    assert traj[2]["rubric"]["compliance"] == 1.0 and traj[2]["rubric"]["anti_hacking"] == 1.0
    assert "one pass over memory" in traj[1]["messages"][-1]["content"]  # the plan reached the coder
    usage = json.loads((tmp_path / "run" / "llm_usage.json").read_text())
    assert usage["calls"] == 3 and usage["completion_tokens"] > 0 and usage["retries"] == 0
    assert_no_key(tmp_path, result.message)


def test_wrong_result_fixed_from_the_mismatch_summary(tmp_path, monkeypatch):
    result, reqs = run([P, {"content": answer(cu=WRONG_CU)}, {"content": answer()}], tmp_path, monkeypatch, rounds=2)
    assert statuses(result) == ["incorrect", "ok"]
    second = reqs[2]["body"]["messages"][-1]["content"]
    assert "Wrong results on" in second and "max |diff|" in second and "out[i] = v;" in second
    assert result.attempts[1][1].rubric["compliance"] == 1.0
    assert "correct on the CPU" in result.message  # no GPU here: nothing timed, nothing proposed


def test_a_round_of_two_candidates_then_one_answering_the_better(tmp_path, monkeypatch):
    """--per-round 2 (what several GPUs get by default): round 1 is the model's first answer and an
    alternative (its first answer shown, a different approach asked for), verified through the
    pool; round 2 answers the round's better candidate, not the last written; a repeated
    alternative is said, and ends that round only."""
    renamed = GOOD_CU.replace("// Host code", "// The same host code, reworded")
    script = [P, {"content": answer(cu=WRONG_CU)}, {"content": answer(cu=GOOD_CU, lead="Another approach.")},
              {"content": answer(cu=renamed)}, {"content": answer(cu=WRONG_CU)}]
    result, reqs, events = run_rounds(script, tmp_path, monkeypatch, rounds=2, per_round=2)
    assert [(c.name, v.status) for c, v in result.attempts] == [
        ("r1-llm-1", "incorrect"), ("r1.2-llm-2", "ok"), ("r2-llm-3", "ok")]
    alt = reqs[2]["body"]["messages"]
    assert alt[-2] == {"role": "assistant", "content": answer(cu=WRONG_CU)} and "candidate 2 of this round" in alt[-1]["content"]
    # Round 2 was shown round 1's correct candidate with its verdict (on a GPU: the faster accepted
    # one), not the wrong one the round began with.
    shown = reqs[3]["body"]["messages"][-1]["content"]
    assert "out[i] = v > 0.f ? v : 0.f;" in shown and "Your last candidate" in shown
    assert "out[i] = v;" not in shown
    # Round 2's alternative repeated round 1's first files: said, and the run went on to its end.
    assert any(isinstance(e, ProgressEvent) and "alternative 2 repeated files already verified" in e.detail
               for e in events)
    verdicts = [e for e in events if isinstance(e, RoundVerdict) and not e.provisional]
    assert [e.round for e in verdicts] == [1, 1, 2]
    traj = [json.loads(ln) for ln in (tmp_path / "run" / "trajectory.jsonl").read_text().splitlines()]
    assert [t["skill"] for t in traj] == ["plan", "plan_to_code", "alternative", "code_and_feedback", "alternative"]


def test_three_candidates_a_round_over_two_gpus(tmp_path, monkeypatch):
    """--gpus 0,1 --per-round 3: the third candidate is asked for having seen the first two (each
    after the request that asked for it); two of the round's candidates are verified at once, a
    worker per GPU (here on the CPU: the GPU tests check the locks)."""
    renamed = GOOD_CU.replace("// Host code", "// The same host code, reworded")
    script = [P, {"content": answer(cu=GOOD_CU)}, {"content": answer(cu=WRONG_CU, lead="Second.")},
              {"content": answer(cu=renamed, lead="Third.")}]
    result, reqs, events = run_rounds(script, tmp_path, monkeypatch, rounds=1, gpus=[0, 1], per_round=3)
    assert [(c.name, v.status) for c, v in result.attempts] == [
        ("r1-llm-1", "ok"), ("r1.2-llm-2", "incorrect"), ("r1.3-llm-3", "ok")]
    third = reqs[3]["body"]["messages"]
    assert [m["role"] for m in third[-5:]] == ["user", "assistant", "user", "assistant", "user"]
    assert third[-4]["content"] == answer(cu=GOOD_CU) and third[-2]["content"] == answer(cu=WRONG_CU, lead="Second.")
    assert "candidate 2 of this round" in third[-3]["content"] and "candidate 3 of this round" in third[-1]["content"]
    # Two workers (one a GPU) ran at once: the second candidate's verification began (its request
    # written, before its build) while the first's worker was still reporting. Not the two workers'
    # event spans: on two busy cores the second's nvcc build can outlast the first's whole worker run
    # (CI, 2026-11-30), so only a pool that ran them one after the other fails this.
    first, second = (tmp_path / "run" / c.name for c, _ in result.attempts[:2])
    first_events = [json.loads(ln)["t"] for ln in (first / "events.jsonl").read_text().splitlines()]
    began = (second / "request.json").stat().st_mtime
    assert began < max(first_events), (began, min(first_events), max(first_events))
    assert any(isinstance(e, ProgressEvent) and "up to 3 candidates" in e.detail for e in events)


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="host-code candidates: a GPU would get device tensors")
def test_the_gpu_asked_for_is_the_one_verified_on(tmp_path, monkeypatch):
    """--gpus 1 (one GPU, one candidate: no pool) and --gpu 1 --per-round 2 (a pool on that one GPU):
    every worker takes GPU 1's lock, not the default device's (without a GPU it runs on the CPU)."""
    for k, (gpus, gpu, per_round) in enumerate((([1], None, None), (None, 1, 2))):
        script = [P, {"content": answer(cu=GOOD_CU)}, {"content": answer(cu=WRONG_CU)}]
        with ScriptedOpenAI(script) as srv:
            monkeypatch.setenv("STITCHCUDA_LLM_ENDPOINT", srv.url)
            opts = LoopOptions(coder="llm", rounds=1, gpus=gpus, per_round=per_round,
                               verify=VerifyOptions(gpu=gpu, random_sets=1, adversarial=(), timeout_s=300))
            result = optimize(hack_task("ref_affine"), tmp_path / f"run{k}", opts)
        assert len(result.attempts) == (per_round or 1)
        locks = {Path(json.loads(r.read_text())["gpu_lock"]).name for r in (tmp_path / f"run{k}").glob("*/request.json")}
        assert locks == {"stitchcuda-gpu1.lock"}, (k, locks)


def test_hacked_candidate_rejected_then_replaced(tmp_path, monkeypatch):
    result, reqs = run([P, {"content": answer(model=HACK_MODEL)}, {"content": answer()}], tmp_path, monkeypatch, rounds=2)
    assert statuses(result) == ["hacked", "ok"]
    first = result.attempts[0][1]
    assert first.rubric["anti_hacking"] == 0.0 and first.rubric["total"] == 0.0
    assert "Rejected as reward hacking" in reqs[2]["body"]["messages"][-1]["content"]


def test_malformed_answer_is_sent_back_with_the_reason(tmp_path, monkeypatch):
    script = [P, {"content": "I would fuse the affine and the ReLU into one kernel."}, {"content": answer()}]
    result, reqs = run(script, tmp_path, monkeypatch, rounds=1)
    assert statuses(result) == ["ok"]
    retry = reqs[2]["body"]["messages"]
    assert retry[-2] == {"role": "assistant", "content": "I would fuse the affine and the ReLU into one kernel."}
    assert "could not be used: no files found" in retry[-1]["content"]


def test_rate_limited_then_answered(tmp_path, monkeypatch):
    script = [P, {"status": 429, "retry_after": 0, "content": "slow down"}, {"content": answer()}]
    result, reqs = run(script, tmp_path, monkeypatch, rounds=1)
    assert statuses(result) == ["ok"] and len(reqs) == 3
    assert json.loads((tmp_path / "run" / "llm_usage.json").read_text())["retries"] == 1


def test_timeout_ends_the_run_with_a_clear_message(tmp_path, monkeypatch):
    script = [{"sleep": 3, "content": answer()}, {"sleep": 3, "content": answer()}]
    t0 = time.monotonic()
    result, reqs = run(script, tmp_path, monkeypatch, rounds=1,
                       STITCHCUDA_LLM_TIMEOUT="0.5", STITCHCUDA_LLM_MAX_RETRIES="1")
    assert result.attempts == [] and len(reqs) == 2
    assert "failed after 2 attempt(s): no answer within 0.5 s" in result.message
    assert time.monotonic() - t0 < 30
    assert_no_key(tmp_path, result.message)


def test_cancelled_while_streaming(tmp_path, monkeypatch):
    cancel = threading.Event()
    threading.Timer(1.0, cancel.set).start()
    t0 = time.monotonic()
    result, _ = run([{"chunk_delay": 0.5, "content": answer()}], tmp_path, monkeypatch, rounds=1, cancel=cancel)
    assert result.attempts == [] and "cancelled" in result.message
    assert time.monotonic() - t0 < 10  # the stream has ~10 pieces at 0.5 s: it stopped early


def test_response_cache_makes_a_rerun_free(tmp_path, monkeypatch):
    opts = LoopOptions(coder="llm", rounds=1, verify=VerifyOptions(cpu_only=True, random_sets=2, adversarial=()))
    with ScriptedOpenAI([P, {"content": answer()}]) as srv:  # one plan, one answer, no more
        monkeypatch.setenv("STITCHCUDA_LLM_ENDPOINT", srv.url)
        first = optimize(hack_task("ref_affine"), tmp_path / "a", opts)
        again = optimize(hack_task("ref_affine"), tmp_path / "b", opts)
        assert len(srv.requests) == 2  # the rerun asked nothing
    assert statuses(first) == statuses(again) == ["ok"]
    usage = json.loads((tmp_path / "b" / "llm_usage.json").read_text())
    assert usage["cached_calls"] == 2 and usage["prompt_tokens"] == 0


def test_server_without_streaming_is_used_without_it(tmp_path, monkeypatch):
    cfg = LLMConfig(base_url="", model="m", cache_dir=None, max_retries=0)
    with ScriptedOpenAI([{"status": 400, "content": "stream not supported"}, {"content": "plain"}]) as srv:
        cfg.base_url = srv.url
        client = LLMClient(cfg)
        assert client.complete([{"role": "user", "content": "hi"}]) == "plain"
        assert [r["body"].get("stream", False) for r in srv.requests] == [True, False]


def test_refused_request_error_hides_the_key(tmp_path, monkeypatch):
    cfg = LLMConfig(base_url="", model="m", cache_dir=None, max_retries=0)
    with ScriptedOpenAI([{"status": 401, "content": f"bad key {KEY}"}]) as srv:
        cfg.base_url = srv.url
        with pytest.raises(LLMError) as e:
            LLMClient(cfg).complete([{"role": "user", "content": "hi"}])
    assert "refused" in str(e.value) and KEY not in str(e.value) and "[api key]" in str(e.value)


# --- parsing and rubric, no server -----------------------------------------------------------


@pytest.mark.parametrize("text", [
    answer(),
    json.dumps({"files": {"model_new.py": MODEL_NEW, "kernels.cu": GOOD_CU}}),
    "```json\n" + json.dumps({"files": [{"path": "model_new.py", "content": MODEL_NEW},
                                        {"path": "kernels.cu", "content": GOOD_CU}]}) + "\n```",
    f"### model_new.py\n```python\n{MODEL_NEW}```\n**kernels.cu**\n```cpp\n{GOOD_CU}```",
    f"```python\n# file: model_new.py\n{MODEL_NEW}```\n```cuda\n// kernels.cu\n{GOOD_CU}```",
])
def test_parse_shapes(text):
    files = llm_parse.parse_files(text)
    assert set(files) == {"model_new.py", "kernels.cu"} and "extern \"C\" int affine_relu" in files["kernels.cu"]


@pytest.mark.parametrize(("text", "reason"), [
    ("no code at all", "no files found"),
    ("```python model_new.py\nx = 1\n```\n```cuda k.cu\nint f();\n```", "no Python file defines `class ModelNew"),
    (f"```python model_new.py\n{MODEL_NEW}```", "no .cu source"),
    (f"```python model_new.py\n{MODEL_NEW}```\n```cuda other.cu\nint f();\n```", "loads kernels.cu, which the answer does not contain"),
    (f"```python ../evil.py\n{MODEL_NEW}```", "leaves the candidate's folder"),
    ('{"files": 3}', '"files"'),
    ("{not json", "does not parse"),
])
def test_parse_errors_say_why(text, reason):
    with pytest.raises(llm_parse.ParseError, match=reason.replace("(", r"\(").replace("`", "`")):
        llm_parse.parse_files(text)


def test_rubric_dimensions():
    good = Candidate("a", {"model_new.py": MODEL_NEW, "k.cu": "__global__ void k(float4* p) { __shared__ float s[32]; }"})
    ok = Verdict("a", "ok", built=True, correct=True)
    s = rubric.score(good, ok, None)
    assert s["anti_hacking"] == 1.0 and s["engineering"] == pytest.approx(2 / 3, abs=1e-3) and s["compliance"] is None
    assert set(s["evidence"]["engineering"]) == {"shared-memory tiling", "vectorised access"}
    # Compliance with an NCU finding: the kernel it named changed, or did not.
    prev = Candidate("p", {"k.cu": "__global__ void k(float* p) { p[0] = 1; }\n"})
    flagged = Verdict("p", "ok", built=True, correct=True, findings=[
        Finding("memory-bound", "k: slow", kernel="void k(float*)", data={"gain_total_s": 1e-3})])
    same = Candidate("s", dict(prev.files))
    assert rubric.score(same, ok, None, (prev, flagged))["compliance"] == 0.0
    assert rubric.score(good, ok, None, (prev, flagged))["compliance"] == 1.0
    hacked = Verdict("h", "hacked", built=True, hack_findings=[Finding("torch-compute-in-forward", "x")])
    assert rubric.score(good, hacked, None)["total"] == 0.0


def test_coder_gives_up_after_bounded_reasks(tmp_path, monkeypatch):
    with ScriptedOpenAI([{"content": "nothing"}] * 3) as srv:
        coder = LLMCoder(LLMClient(LLMConfig(base_url=srv.url, model="m", cache_dir=None)), max_reasks=2,
                         plan_first=False)
        with pytest.raises(CoderError, match="could not be used after 3 tries: no files found"):
            coder(hack_task("ref_affine"), _plan_of("ref_affine"))
        assert len(srv.requests) == 3 and len(coder.trajectory) == 3


def _plan_of(ref: str):
    from stitchcuda.agents.plan.planner import plan

    return plan(hack_task(ref))


def test_invalid_plan_goes_back_with_the_reason(tmp_path, monkeypatch):
    bad = json.dumps({"groups": [{"kind": "fused", "nodes": ["mul", "add"]}]})
    result, reqs = run([{"content": bad}, P, {"content": answer()}], tmp_path, monkeypatch, rounds=1)
    assert statuses(result) == ["ok"]
    assert "The plan is invalid: nodes in no group: relu" in reqs[1]["body"]["messages"][-1]["content"]


@pytest.mark.parametrize(("groups", "reason"), [
    ([{"kind": "fused", "nodes": ["mul", "add", "relu", "ghost"]}], "'ghost' is not a compute node"),
    ([{"kind": "fused", "nodes": ["mul", "add"]}, {"kind": "fused", "nodes": ["add", "relu"]}], "'add' is in groups 1 and 2"),
    ([{"kind": "fused", "nodes": ["add", "relu"]}, {"kind": "fused", "nodes": ["mul"]}], "uses 'mul', which group 2 only computes later"),
    ([{"kind": "library", "library": "cublas", "nodes": ["mul", "add", "relu"]}], "holds exactly one op cublas implements"),
    ([{"kind": "magic", "nodes": ["mul"]}], "needs \"kind\""),
])
def test_plan_validation(groups, reason):
    from stitchcuda.agents.llm.planner import PlanError, validate

    with pytest.raises(PlanError, match=reason.replace("(", r"\(")):
        validate({"groups": groups}, _plan_of("ref_affine"))
    ok = validate(json.loads(PLAN), _plan_of("ref_affine"))
    assert "fused: mul, add, relu (one pass over memory)" in ok.text()


def test_gpu_scripts_parse_and_build_with_nvcc(tmp_path):
    """The scripted conversations the GPU run uses: every answer parses; every .cu builds with
    nvcc except the one meant to fail, which fails where it was broken."""
    from llm_scripts import CONVERSATIONS, FIRST_VERDICT

    from stitchcuda import runtime

    for rel, answers in CONVERSATIONS.items():
        for k, text in enumerate(answers):
            files = llm_parse.parse_files(text)
            (tmp_path / rel).mkdir(parents=True, exist_ok=True)
            src = tmp_path / rel / f"r{k}.cu"
            src.write_text(files["kernels.cu"])
            if k == 0 and FIRST_VERDICT[rel] == "build-failed":
                with pytest.raises(runtime.BuildError) as e:
                    runtime.build([src])
                assert "expected a \";\"" in e.value.log
            else:
                assert runtime.build([src]).library.exists()
