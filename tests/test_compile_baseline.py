"""torch.compile's baseline in a process of its own, once the candidate's worker and the blind check
have exited (verifier._compile_baseline, compile_baseline.py): a real process, torch.compile on the
CPU (no figure is timed there; its first call is)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from conftest import hack_task

from stitchcuda.agents.verify import compile_baseline, verifier
from stitchcuda.agents.verify.verifier import VerifyOptions
from stitchcuda.types import Verdict


def _verdict() -> Verdict:
    """A candidate's verdict as its worker left it: checked on random, adversarial and batch sets."""
    return Verdict(candidate="c", status="ok", correct=True, checks=[
        {"set": "random-0", "seed": 11, "ok": True}, {"set": "random-1", "seed": 12, "ok": True, "mix": [21, 22]},
        {"set": "adversarial-large", "seed": 13, "ok": False}, {"set": "batch-4", "seed": 14, "ok": True},
        {"set": "weights-changed", "seed": 15, "ok": True},
    ], tolerance={"rtol": 1e-2, "why": "matmul in reference"})


def _request(tmp_path: Path) -> dict:
    run = tmp_path / "run"
    run.mkdir()
    return {"reference": str(hack_task("ref_linear").path), "class_name": "Model", "init_seed": 42,
            "device": "cpu", "trials": 3, "gpu_lock": None, "precision": "tf32", "run_dir": str(run)}


@pytest.fixture
def private_root(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


def test_the_request_names_the_sets_the_candidate_was_checked_and_passed_on(tmp_path):
    v = _verdict()
    req = compile_baseline.request(_request(tmp_path), v.checks, v.tolerance, [5, 6], str(tmp_path / "p"))
    # The random and adversarial sets (the adversarial ones transform random-0's inputs), not the
    # other batch sizes (torch.compile would recompile for them) nor the reweighted set.
    # (random-1 mixed from two draws, as the worker made it: the blind check's anchors)
    assert req["checked"] == [["random-0", 11, None], ["random-1", 12, [21, 22]], ["adversarial-large", 13, None]]
    assert req["passed"] == ["random-0", "random-1"]
    assert req["tolerance"] == {"rtol": 1e-2, "why": "matmul in reference"}
    assert req["mode"] == compile_baseline.MODE and req["time_seeds"] == [5, 6]
    assert req["run_dir"] == str(tmp_path / "p") and req["gpu_state"].startswith(str(tmp_path / "p"))
    named = [(n, s, compile_baseline._kind(n), mix) for n, s, mix in req["checked"]]
    assert [k for _, _, k, _ in named] == [None, None, "large"]


def test_compile_runs_in_its_own_process_and_its_figures_join_the_verdict(tmp_path, private_root, monkeypatch):
    req = _request(tmp_path)
    v = _verdict()
    seen: list[str] = []
    sent: list[dict] = []
    run_worker = verifier._run_worker

    def watched(creq, private, *args):
        sent.append(json.loads((private / "request.json").read_text()))
        return run_worker(creq, private, *args)

    monkeypatch.setattr(verifier, "_run_worker", watched)
    verifier._compile_baseline(v, req, dict(os.environ), VerifyOptions(cpu_only=True, timeout_s=600),
                               lambda phase, detail: seen.append(phase), None)
    assert sent[0]["passed"] == ["random-0", "random-1"] and len(set(sent[0]["time_seeds"])) == 2
    assert v.compile_first_call_s is not None and v.compile_first_call_s > 0, (v.notes, v.phases)
    assert "compile" in v.phases and "compile" in seen
    assert v.status == "ok" and v.correct  # the candidate's verdict otherwise as it was
    assert not list(private_root.glob("stitchcuda-compile-*"))  # its folder (caches included) removed
    assert (tmp_path / "run" / "compile.log").is_file()  # its log kept where people look


def test_a_compile_process_cut_short_leaves_the_verdict_without_its_figure(tmp_path, private_root):
    v = _verdict()
    # Its own limit (by default twice the candidate's: it compiles the reference up to three times).
    opts = VerifyOptions(cpu_only=True, timeout_s=600, compile_timeout_s=0.5)
    verifier._compile_baseline(v, _request(tmp_path), dict(os.environ), opts, None, None)
    assert v.compiled is None and v.compile_first_call_s is None
    assert any("limit ended its process" in n and "no torch.compile timing" in n for n in v.notes), v.notes
    assert v.compile_error.startswith("still running when the ") and "limit ended its process" in v.compile_error
    assert v.status == "ok"  # the candidate's own verdict stands
    assert not list(private_root.glob("stitchcuda-compile-*"))


def test_a_cancelled_run_ends_the_compile_process(tmp_path, private_root):
    import threading

    v = _verdict()
    cancel = threading.Event()
    cancel.set()
    verifier._compile_baseline(v, _request(tmp_path), dict(os.environ), VerifyOptions(cpu_only=True, timeout_s=600),
                               None, cancel)
    assert v.compile_first_call_s is None
    assert any("cancelled" in n for n in v.notes), v.notes



def test_where_torch_compile_fails_the_verdict_says_why(tmp_path, private_root):
    """torch.compile failing on the reference (here: no C++ compiler where $CXX names one, as on a
    machine without a toolchain): no figure, and the verdict (so bench.json's compile_error) says
    what failed."""
    v = _verdict()
    env = {**os.environ, "CXX": str(tmp_path / "no-such-c++")}
    verifier._compile_baseline(v, _request(tmp_path), env, VerifyOptions(cpu_only=True, timeout_s=600), None, None)
    assert v.compiled is None and v.compile_first_call_s is None
    assert "InvalidCxxCompiler" in v.compile_error and "no-such-c++" in v.compile_error, (v.compile_error, v.notes)
    assert v.status == "ok" and v.correct  # the candidate's verdict stands
