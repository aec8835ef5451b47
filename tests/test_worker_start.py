"""The worker starts while the Verifier prebuilds the candidate's kernels (verifier._start_worker,
_go): it loads torch meanwhile and imports the candidate's module only once told, so the module
finds the prebuilt library and builds nothing itself. Real processes and a real nvcc build."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from conftest import hack_candidate, hack_task

from stitchcuda.agents.verify import verifier
from stitchcuda.agents.verify.verifier import VerifyOptions, verify


def test_a_waiting_worker_runs_nothing_until_told(tmp_path):
    run = tmp_path / "run"
    module = hack_candidate("good_affine").write(run)
    req = {"reference": str(hack_task("ref_affine").path), "class_name": "Model", "candidate": str(module),
           "device": "cpu", "trials": 3, "random_sets": 2, "adversarial": [], "run_dir": str(run),
           "gpu_state": str(run / "gpu_state.json"), "wait_for_go": True}
    (run / "request.json").write_text(json.dumps(req))
    worker = verifier._start_worker(req, run, dict(os.environ), None)
    try:
        time.sleep(4.0)
        assert worker.proc.poll() is None and worker.report.records == 0  # waiting: nothing reported
        verifier._go(worker.proc)
        outcome = verifier._watch_worker(worker, req, VerifyOptions(cpu_only=True, timeout_s=300), None, None, None)
    finally:
        if worker.proc.poll() is None:
            worker.proc.kill()
    assert outcome.returncode == 0 and not outcome.killed_for
    result, last = outcome.report.merged("c")
    assert last == "done" and result.status == "ok" and result.built, result.message


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed here")
def test_the_candidate_imports_the_library_prebuilt_beside_it(tmp_path):
    """A built-in candidate with sources never built before: the worker, started before the build,
    imports the very library the Verifier built (the proposal's), and builds none of its own."""
    from stitchcuda.agents.coder import builtin
    from stitchcuda.agents.plan import planner
    from stitchcuda.task import find_task

    task = find_task(Path(__file__).parents[1] / "examples" / "gated_block.py")
    cand = builtin.code(task, planner.plan(task))
    assert cand is not None and cand.kernels_source
    cand.files[cand.kernels_source] += f"\n// {time.time_ns()}\n"  # (sources no cache has seen)
    v = verify(task, cand, tmp_path / "v", VerifyOptions(cpu_only=True, time_compile=False))
    assert v.built, (v.status, v.message, v.log_tail[-1500:])
    assert json.loads((tmp_path / "v" / "request.json").read_text())["wait_for_go"] is True
    assert any(n.startswith("kernels: fused_kernels.") for n in v.notes), v.notes
    assert not (tmp_path / "v" / "build").exists()  # (the worker's own builds would land there)
