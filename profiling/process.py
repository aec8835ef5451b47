"""Running a profiler that runs the candidate or the reference as its own child."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence


def run_in_session(
    argv: Sequence[str], timeout_s: float, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str] | None:
    """argv in a new session, its output captured; None where it ran past timeout_s. Then the whole
    process group is killed: the profiled Python process (the profiler's child) would outlive a kill
    of the profiler alone, holding GPU memory."""
    proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(env) if env is not None else None, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=max(1.0, timeout_s))
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None
    return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)
