"""Where a measurement came from: the command, commit, torch and date every result file records."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def git_commit() -> str:
    # A copy of the tree on another machine may carry a stale .git: the sender names the commit.
    if os.environ.get("STITCHCUDA_COMMIT"):
        return os.environ["STITCHCUDA_COMMIT"]
    root = Path(__file__).resolve().parent.parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return (sha or "unknown") + ("-dirty" if dirty else "")
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def record(gpu: str | None = None) -> dict[str, Any]:
    """command, commit, gpu, torch and UTC date of this process's run."""
    import torch

    return {
        "command": "stitchcuda " + " ".join(sys.argv[1:]),
        "commit": git_commit(),
        "gpu": gpu,
        "torch": torch.__version__,
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }
