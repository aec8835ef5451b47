"""`stitchcuda doctor` reports this machine as it is (run as a real subprocess)."""

import json
import os
import subprocess
import sys

import torch

from stitchcuda import runtime
from stitchcuda.target import Target


def test_doctor_json_matches_the_machine():
    run = subprocess.run([sys.executable, "-m", "stitchcuda.cli", "doctor", "--json"],
                         capture_output=True, text=True, timeout=120)
    rows = json.loads(run.stdout)
    found = {c["name"]: c for c in rows}
    # The exit code scheme: 0 when every check passes, 1 when one does not; each failure says what to do.
    assert run.returncode == (0 if all(c["ok"] for c in rows if c["required"]) else 1)
    assert not found["openai"]["required"] and found["pygls"]["required"]
    assert all(c["hint"] for c in rows if not c["ok"]), [c for c in rows if not c["ok"] and not c["hint"]]
    # A CPU-only PyTorch is not "ok" for GPU work.
    assert found["torch"]["ok"] is (torch.version.cuda is not None)
    if torch.version.cuda is None:
        assert "a CPU-only build" in found["torch"]["detail"] and "download.pytorch.org" in found["torch"]["hint"]
    # The libraries' headers, found where builds find them (stitchcuda.cuda_libs).
    from stitchcuda import cuda_libs

    for lib in ("cublas", "cudnn"):
        header = cuda_libs.LIBRARIES[lib][0]
        assert found[header]["ok"] is not bool(cuda_libs.locate([lib], runtime.find_nvcc()).missing_headers)
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
                         text=True, timeout=120, env=env).stdout
    row = next(c for c in json.loads(out) if c["name"] == "target")
    assert row["ok"] and row["detail"].startswith("H200 SXM (sm_90, 132 SMs")
    assert "named target 'h200'" in row["detail"] and "H200 Tensor Core GPU datasheet" in row["detail"]


def test_doctor_table_is_printed_whole():
    """On an 80-column terminal nothing is cut to "…": long paths fold onto more lines."""
    out = subprocess.run([sys.executable, "-m", "stitchcuda.cli", "doctor"], capture_output=True, text=True,
                         timeout=120, env={"COLUMNS": "80", "PATH": "/usr/bin:/bin"}).stdout
    assert "stitchcuda doctor" in out and "nvcc" in out and "needed for" in out
    assert "…" not in out and f"({sys.executable})" in out  # the whole interpreter path
    assert "to fix:" in out or "all required checks passed" in out
