"""`stitchcuda doctor` reports this machine as it is (run as a real subprocess)."""

import json
import os
import subprocess
import sys

import torch

from stitchcuda import runtime
from stitchcuda.target import Target


def test_doctor_json_matches_the_machine():
    out = subprocess.run([sys.executable, "-m", "stitchcuda.cli", "doctor", "--json"],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    found = {c["name"]: c for c in json.loads(out)}
    assert found["GPU"]["ok"] is torch.cuda.is_available()
    assert found["nvcc"]["ok"] is (runtime.find_nvcc() is not None)
    assert found["torch"]["detail"].startswith(torch.__version__)
    assert found["target arch"]["detail"] == runtime.default_arch()
    assert found["target"]["detail"].startswith(Target.current().describe())
    assert found["pygls"]["ok"]  # the test extra installs the server's dependencies
    assert {"ncu", "openai", "tree_sitter_cuda", "tree_sitter_python"} <= set(found)


def test_doctor_names_the_target_gpu():
    """STITCHCUDA_TARGET names a GPU that is not here; the row says which and from where."""
    env = dict(os.environ, STITCHCUDA_TARGET="h200")
    out = subprocess.run([sys.executable, "-m", "stitchcuda.cli", "doctor", "--json"], capture_output=True,
                         text=True, timeout=120, check=True, env=env).stdout
    row = next(c for c in json.loads(out) if c["name"] == "target")
    assert row["ok"] and row["detail"].startswith("H200 SXM (sm_90, 132 SMs")
    assert "named target 'h200'" in row["detail"] and "H200 Tensor Core GPU datasheet" in row["detail"]


def test_doctor_table_is_printed():
    out = subprocess.run([sys.executable, "-m", "stitchcuda.cli", "doctor"], capture_output=True, text=True,
                         timeout=120, check=True, env={"COLUMNS": "160", "PATH": "/usr/bin:/bin"}).stdout
    assert "stitchcuda doctor" in out and "nvcc" in out and "needed for" in out
