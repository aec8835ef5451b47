"""One exit-code scheme for every command (README, "Exit codes"), each run as a real subprocess:
0 it did what was asked, 1 it ran but that did not come about, 2 the input or command line was wrong.
And the progress lines people read: no trailing blank, a colon after the round."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import needs_nvcc

ROOT = Path(__file__).resolve().parent.parent
HACKS = ROOT / "tests" / "hacks"
EXAMPLE = ROOT / "examples" / "gated_block.py"
RECORDED = ROOT / "bench" / "results" / "2026-12-04-h200-example-gated_block-d5354d9.json"

BAD_INPUTS = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(64, 32)

    def forward(self, x):
        return torch.relu(self.lin(x))


def get_inputs():
    return [torch.randn(8, 48)]  # 48 features where the layer takes 64


def get_init_inputs():
    return []
'''


def sc(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    # Run from outside the checkout, as a user would: `python -m` puts the working directory first on
    # sys.path, where the bare stitchcuda/ folder would shadow an installed or assembled package.
    return subprocess.run([sys.executable, "-m", "stitchcuda.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=tempfile.gettempdir())


def test_usage_errors_exit_2_and_say_what_is_wrong(tmp_path):
    missing = str(tmp_path / "nope.py")
    for cmd in (["optimize", missing], ["verify", missing, missing], ["plan", missing],
                ["bench", missing, "--out", str(tmp_path / "b")]):
        r = sc(*cmd)
        assert r.returncode == 2, (cmd, r.stderr[-800:])
        assert "no such file" in r.stderr and "Traceback" not in r.stderr, (cmd, r.stderr[-800:])
    r = sc("optimize", str(tmp_path))
    assert r.returncode == 2 and "is a folder: give one .py file" in r.stderr, r.stderr[-800:]
    assert sc("optimize").returncode == 2  # argparse: a missing argument
    assert sc("frobnicate").returncode == 2


def test_plan_exits_0_when_every_file_is_planned_and_1_when_one_cannot_be_traced(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(BAD_INPUTS)
    good = sc("plan", str(HACKS / "ref_affine.py"))
    assert good.returncode == 0, good.stderr[-800:]
    r = sc("plan", str(HACKS / "ref_affine.py"), str(bad))
    assert r.returncode == 1, r.stderr[-800:]
    # The trace error names the inputs function and the file, and the shapes it got, uncut.
    assert "(tracing Model.forward on get_inputs() of bad.py: (8, 48) float32)" in r.stderr
    assert "[8, 48] X [64, 32]" in r.stderr


@needs_nvcc
def test_verify_exits_1_for_anything_not_accepted(tmp_path):
    # Device code (good_affine's kernels as a .cu, and a kernel), but with no GPU here nothing was checked: not accepted.
    cand = tmp_path / "cand"
    cand.mkdir()
    (cand / "good_affine.py").write_text((HACKS / "good_affine.py").read_text().replace('"kernels.cpp"', '"kernels.cu"'))
    (cand / "kernels.cu").write_text((HACKS / "kernels.cpp").read_text() + "\n__global__ void device_code() {}\n")
    built = sc("verify", str(HACKS / "ref_affine.py"), str(cand / "good_affine.py"), "--out", str(tmp_path / "a"))
    assert built.returncode == 1 and "unverified good_affine" in built.stderr, built.stderr[-1500:]
    bad = sc("verify", str(HACKS / "ref_affine.py"), str(HACKS / "crash_raises.py"), "--out", str(tmp_path / "b"))
    assert bad.returncode == 1, bad.stderr[-1500:]


@pytest.mark.gpu
def test_verify_exits_0_when_accepted(tmp_path):
    ok = sc("verify", str(HACKS / "ref_matmul_relu.py"), str(HACKS / "gpu_good_cublas.py"), "--out",
            str(tmp_path / "a"), "--no-profile", "--no-compile", "--trials", "5")
    assert ok.returncode == 0, ok.stderr[-1500:]


@needs_nvcc
def test_optimize_exits_0_with_a_proposal_and_1_without(tmp_path):
    work = tmp_path / "ws"
    work.mkdir()
    (work / "gated_block.py").write_text(EXAMPLE.read_text())
    # A recorded GPU run stands in for the GPU: the proposal is made.
    r = sc("optimize", str(work / "gated_block.py"), "--replay", str(RECORDED), "--rounds", "2",
           "--out", str(tmp_path / "run"))
    assert r.returncode == 0, r.stderr[-1500:]
    lines = r.stderr.splitlines()
    assert not [ln for ln in lines if ln.endswith(" ")], [ln for ln in lines if ln.endswith(" ")]
    assert any(ln.endswith("round 2: the coder has nothing new to try") for ln in lines), r.stderr[-1500:]
    # Without a GPU and without a recording the candidate is built but nothing is verified: no proposal.
    r = sc("optimize", str(work / "gated_block.py"), "--rounds", "1", "--out", str(tmp_path / "run2"))
    assert r.returncode == 1, r.stderr[-1500:]
    assert "built with nvcc but not verified or timed: no CUDA GPU on this machine" in r.stderr


def test_optimize_puts_its_run_folder_in_the_user_cache_not_the_project(tmp_path):
    """No --out: the run folder goes under the cache (STITCHCUDA_CACHE here, set by conftest for the
    session), the path is printed, and nothing is written beside the module or in the repository."""
    import os

    work = tmp_path / "ws"
    work.mkdir()
    mod = work / "bad.py"
    mod.write_text(BAD_INPUTS)
    r = subprocess.run([sys.executable, "-m", "stitchcuda.cli", "optimize", str(mod)], capture_output=True,
                       text=True, timeout=300, cwd=work)
    cache = Path(os.environ["STITCHCUDA_CACHE"]) / "runs"
    assert f"-> {cache}" in r.stderr.replace("\n", ""), r.stderr[-800:]
    assert sorted(p.name for p in work.iterdir()) == ["bad.py"]
    assert not (ROOT / "stitchcuda-runs").exists()
    assert r.returncode == 1  # nothing could be traced: no proposal


@pytest.mark.parametrize("flag", [[], ["--json"]])
def test_doctor_exit_code_says_whether_every_check_passed(flag):
    import json

    r = sc("doctor", "--json")
    rows = json.loads(r.stdout)
    assert sc("doctor", *flag).returncode == r.returncode == (0 if all(c["ok"] for c in rows if c["required"]) else 1)


def test_a_user_candidate_is_its_module_and_the_sources_it_names():
    """`stitchcuda verify REF CAND` takes CAND, the sources it names and their #include of sources
    beside them, and the headers beside it; not every source in the folder (tests/hacks holds dozens,
    some of them hacks the Verifier would name in a candidate that never builds them)."""
    from stitchcuda.types import Candidate

    cand = Candidate.from_file(HACKS / "good_affine.py")
    assert set(cand.files) == {"good_affine.py", "kernels.cpp"} | {p.name for p in HACKS.glob("*.h")}
    assert cand.module == "good_affine.py"
