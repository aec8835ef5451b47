"""The language server driven by a second, independent client: headless Neovim (Debian's 0.7.2 or
later) running tests/nvim_client.lua. It lists the code actions on `class Block`, optimises Block,
polls the job and reads the diagnostics Neovim stored for the buffer.

As in test_server_lsp.py, the GPU results are replayed from the recorded H100 run, and the
candidate is still built here with nvcc.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import needs_nvcc

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tests" / "nvim_client.lua"
RECORDED = ROOT / "bench" / "results" / "2026-11-23-h100-example-gated_block.json"
EXAMPLE = ROOT / "examples" / "gated_block.py"
NVIM = shutil.which("nvim")


def _tail(path: Path, n: int = 4000) -> str:
    return path.read_text(errors="replace")[-n:] if path.is_file() else f"({path} not written)"


@needs_nvcc
@pytest.mark.skipif(NVIM is None, reason="nvim is not installed (apt-get install -y --no-install-recommends neovim)")
@pytest.mark.parametrize("settings_via", ["configuration", "init"])
def test_neovim_code_actions_job_and_diagnostics(tmp_path: Path, settings_via: str) -> None:
    work = tmp_path / "ws"
    work.mkdir()
    path = work / "gated_block.py"
    shutil.copyfile(EXAMPLE, path)
    result = tmp_path / "result.json"
    env = dict(os.environ)
    env.update({
        "STITCHCUDA_NVIM_PYTHON": sys.executable,
        "STITCHCUDA_NVIM_WORKSPACE": str(work),
        "STITCHCUDA_NVIM_FILE": str(path),
        "STITCHCUDA_NVIM_RESULT": str(result),
        "STITCHCUDA_NVIM_REPLAY": str(RECORDED),
        "STITCHCUDA_NVIM_RUNS": str(tmp_path / "runs"),
        "STITCHCUDA_NVIM_CLASS": "Block",
        "STITCHCUDA_NVIM_TIMEOUT": "200",
        "STITCHCUDA_NVIM_SETTINGS": settings_via,
        "STITCHCUDA_CACHE": str(tmp_path / "cache"),
        # Neovim's lsp.log (and nothing else of Neovim's) lands here, not in the home folder.
        "XDG_CACHE_HOME": str(tmp_path / "xdg-cache"),
    })
    if not torch.cuda.is_available():
        env["STITCHCUDA_ARCH"] = "sm_90"  # nvcc targets the H100 the run was recorded on

    t0 = time.monotonic()
    proc = subprocess.run([NVIM, "--headless", "--clean", "-c", f"luafile {SCRIPT}"], cwd=ROOT, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    took = time.monotonic() - t0
    log = tmp_path / "xdg-cache" / "nvim" / "lsp.log"
    context = f"rc={proc.returncode}\nstdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}\nlsp.log:\n{_tail(log)}"
    assert result.is_file(), context
    got = json.loads(result.read_text())
    assert proc.returncode == 0 and got["error"] is None, f"{got['error']}\n{context}"
    print(f"\nneovim client: {took:.1f} s end to end")

    assert "Optimise Block end-to-end with StitchCUDA" in got["code_actions"], got["code_actions"]
    # Neovim answered the server's workspace/configuration from its settings, or (not advertising
    # it) was never asked and sent them as initializationOptions: either way the replay was used.
    assert got["config_requests"] == (["stitchcuda"] if settings_via == "configuration" else []), got
    job = got["job"]
    assert job["state"] == "done" and job["hasProposal"], job
    assert "5.22x vs eager" in job["message"], job  # the recorded H100 figures, replayed

    # window/workDoneProgress/create and $/progress were accepted: begin, reports, end.
    kinds = [p["kind"] for p in got["progress"] if p["token"] == got["started"]["token"]]
    assert kinds[0] == "begin" and kinds[-1] == "end" and "report" in kinds, kinds
    assert got["progress_state"]["done"] is True

    # The reference's hottest op, from the recorded H100 profile, on the user's line (0-based 18).
    diags = got["diagnostics"]
    assert diags and all(d["code"] == "hot-op" for d in diags), diags
    assert any(d["line"] == 18 and d["message"].startswith("mul: 17% of GPU time") for d in diags), diags
