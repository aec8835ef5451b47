"""Nsight Compute's profiled process runs the candidate's code again (profiling/ncu_target.py), so
it runs in the worker's sandbox: a candidate that waits for ncu's injection in its environment
would otherwise act outside the sandbox after its verdict. The profiler here is a stand-in for
NVIDIA's `ncu` (none on this machine): a script on PATH that, like ncu, runs the process it is given
to profile, and first tries to write beside the run folder as that process could."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from stitchcuda.agents.verify import sandbox
from stitchcuda.profiling import ncu

needs_bwrap = pytest.mark.skipif(not sandbox.available().ok, reason=sandbox.available().why)

STAND_IN = """#!{python}
import sys
from pathlib import Path
run = Path({run!r})
outside = Path({outside!r})
try:
    outside.write_text("written by the profiled process")
    said = "outside written"
except OSError as e:
    said = f"outside refused: {{type(e).__name__}}"
(run / "stand_in.txt").write_text(said)
print("==PROF== no kernels were profiled")
"""


def _profile(tmp_path: Path, monkeypatch, *, wrapped: bool) -> str:
    # (The stand-in lies in the run folder: the sandbox hides /tmp but binds that folder back, as a
    # real ncu's installation under /usr or /opt is seen through its read-only root.)
    run = tmp_path / "run"
    tools = run / "tools"
    tools.mkdir(parents=True)
    outside = tmp_path / "outside.txt"
    box = sandbox.Box.for_run(run, dict(os.environ))
    stand_in = tools / "ncu"
    stand_in.write_text(STAND_IN.format(python=sys.executable, run=str(run), outside=str(outside)))
    stand_in.chmod(stand_in.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    prof = ncu.profile_candidate(run / "request.json", {"kernels.cu": "__global__ void k(float* y) { y[0] = 1.f; }"},
                                 env=box.env, timeout_s=60, keep_report=run / "ncu.ncu-rep",
                                 wrap=box.wrap if wrapped else None)
    assert any("no kernel rows" in n for n in prof.notes), prof.notes  # a timing-only note, no crash
    return (run / "stand_in.txt").read_text()


@needs_bwrap
def test_the_profiled_process_runs_in_the_workers_sandbox(tmp_path, monkeypatch):
    """It ran (its word is in the run folder, which it may write), and what it wrote beside the run
    folder never reached this machine's files (inside, /tmp is the sandbox's own)."""
    _profile(tmp_path, monkeypatch, wrapped=True)
    assert not (tmp_path / "outside.txt").exists()


def test_unwrapped_the_same_process_writes_anywhere(tmp_path, monkeypatch):
    """What the sandbox takes away: without it the same stand-in writes outside the run folder
    (so the test above can fail)."""
    assert _profile(tmp_path, monkeypatch, wrapped=False) == "outside written"
    assert (tmp_path / "outside.txt").read_text() == "written by the profiled process"
