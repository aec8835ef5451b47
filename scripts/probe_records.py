"""What the probe scripts share: one JSON record per task, written after each (a probe cut short by
its time limit keeps every task finished so far), and the built-in candidate of a task, built.

Imported by the probes beside it (scripts/probe_*.py run as `python3 scripts/NAME.py`)."""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class Records:
    def __init__(self, out_path: Path):
        self.out_path = out_path
        self.records: list[dict[str, Any]] = []

    @contextlib.contextmanager
    def task(self, **fields: Any) -> Iterator[dict[str, Any]]:
        """A record that starts with `fields`; one task's failure is its record's `error`, not the end
        of the probe."""
        rec: dict[str, Any] = dict(fields)
        try:
            yield rec
        except Exception as e:  # noqa: BLE001
            rec["error"] = f"{type(e).__name__}: {e}"[:500]
        self.records.append(rec)
        print(json.dumps(rec), flush=True)
        self.out_path.write_text(json.dumps(self.records, indent=2))


def built_candidate(task_file: Path, prefix: str) -> tuple[Any, Any, Path]:
    """(task, the built-in coder's candidate, its model_new.py) with its kernels built."""
    from stitchcuda import runtime
    from stitchcuda.agents.coder import builtin
    from stitchcuda.agents.loop import plan_task
    from stitchcuda.task import find_task

    task = find_task(task_file)
    cand = builtin.code(task, plan_task(task))
    if cand is None:
        raise RuntimeError("the built-in coder wrote no candidate")
    path = cand.write(Path(tempfile.mkdtemp(prefix=prefix)))
    runtime.build([path.with_name("fused_kernels.cu")], libraries=list(cand.libraries))
    return task, cand, path


def timed_call(fn: Any, start: Any, end: Any) -> tuple[float, float]:
    """One call timed as timing.time_cuda times a trial, after whatever the caller ran between
    trials and a synchronise: (microseconds between CUDA events around it, microseconds of host time
    until it returned). Its output is dropped before the next trial."""
    import time

    import torch

    torch.cuda.synchronize()
    start.record()
    h0 = time.perf_counter()
    out = fn()
    h1 = time.perf_counter()
    end.record()
    torch.cuda.synchronize()
    del out
    return start.elapsed_time(end) * 1e3, (h1 - h0) * 1e6


def reference_and_candidate(task_file: Path, class_name: str, candidate: Path, device: Any,
                            name: str | None = None) -> tuple[Any, Any, list[Any]]:
    """(the task file's reference model, the candidate's ModelNew with the reference's
    weights, one input set from get_inputs), built as the Verifier builds them (seed 42), on `device`.
    `name`: the module name the candidate's file is imported under (two candidates of one task)."""
    from stitchcuda.inputs import make_inputs
    from stitchcuda.task import build_model, import_file

    ref_mod = import_file(task_file)
    init = list(ref_mod.get_init_inputs())
    ref = build_model(getattr(ref_mod, class_name), init, 42, device)
    ours = build_model(import_file(candidate, name=name).ModelNew, init, 42, device)
    ours.load_state_dict(ref.state_dict())
    return ref, ours, make_inputs(ref_mod.get_inputs, 1, device)
