"""Our processes that run a candidate's code start in its run folder: a file it ships (or writes
there) named for a module they import must not be imported in that module's place."""

from __future__ import annotations

import subprocess

import pytest
from conftest import HACKS, hack_candidate, hack_task

from stitchcuda.agents.verify import sandbox
from stitchcuda.agents.verify.verifier import VerifyOptions, verify
from stitchcuda.python_argv import module_argv


def test_the_start_folder_is_not_on_the_import_path(tmp_path):
    (tmp_path / "json.py").write_text("raise SystemExit('the start folder was imported from')\n")
    (tmp_path / "probe.py").write_text("")
    out = subprocess.run(module_argv("json.tool", "--help"), cwd=tmp_path, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and "usage" in out.stdout, (out.returncode, out.stdout[-300:], out.stderr[-300:])
    # (as `python -m json.tool` would: its argv, run as __main__)
    plain = subprocess.run(["python", "-m", "json.tool", "--help"], cwd=tmp_path, capture_output=True, text=True,
                           timeout=60)
    assert "start folder was imported" in plain.stderr  # the hazard is real for `-m`


@pytest.mark.skipif(not sandbox.available().ok, reason="no sandbox tool here: the worker starts in this process's "
                    "folder, not the run folder")
def test_a_candidate_file_named_torch_runs_nowhere(tmp_path, build_cache):
    opts = VerifyOptions(extra_env={"STITCHCUDA_CACHE": str(build_cache)}, cpu_only=True, timeout_s=180.0,
                         time_compile=False)
    cand = hack_candidate("good_affine", **{"torch.py": (HACKS / "shadow_torch.py").read_text()})
    run = tmp_path / "run"
    v = verify(hack_task("ref_affine"), cand, run, opts)
    assert not (run / "shadow_ran").exists(), (run / "shadow_ran").read_text()
    assert v.accepted and v.sandboxed and "blind" in v.phases, (v.status, v.message, v.sandbox)
