"""`stitchcuda doctor` reports this machine as it is (run as a real subprocess)."""

import json
import subprocess
import sys

import torch

from stitchcuda import runtime


def test_doctor_json_matches_the_machine():
    out = subprocess.run([sys.executable, "-m", "stitchcuda.cli", "doctor", "--json"],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    found = {c["name"]: c for c in json.loads(out)}
    assert found["GPU"]["ok"] is torch.cuda.is_available()
    assert found["nvcc"]["ok"] is (runtime.find_nvcc() is not None)
    assert found["torch"]["detail"].startswith(torch.__version__)
    assert found["target arch"]["detail"] == runtime.default_arch()
    assert found["pygls"]["ok"]  # the test extra installs the server's dependencies
    assert {"ncu", "openai", "tree_sitter_cuda", "tree_sitter_python"} <= set(found)


def test_doctor_table_is_printed():
    out = subprocess.run([sys.executable, "-m", "stitchcuda.cli", "doctor"], capture_output=True, text=True,
                         timeout=120, check=True, env={"COLUMNS": "160", "PATH": "/usr/bin:/bin"}).stdout
    assert "stitchcuda doctor" in out and "nvcc" in out and "needed for" in out
