"""One code-generation switch off against on, side by side: the built-in candidate of each task built
both ways, timed as the Verifier times (events, L2 flushed, median of 50), its kernels' GPU time
from the profiler, and the two outputs compared with each other and with eager's.

Usage (on the GPU machine, after scripts/gpu_run.sh has assembled the package):
    python3 scripts/probe_ab.py OUT.json VAR=OFF,ON TASK.py [TASK.py ...]
e.g. `STITCHCUDA_RED_BATCH=0,1`. The environment variable is set before each candidate is written
(the emitters read it then). Every build runs first, in parallel; then each task is timed alone.
"""

from __future__ import annotations

import os
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch
from probe_records import Records

from stitchcuda import runtime
from stitchcuda.agents.coder import builtin
from stitchcuda.agents.loop import plan_task
from stitchcuda.agents.verify.timing import L2Flusher, time_cuda
from stitchcuda.inputs import make_inputs
from stitchcuda.task import build_model, find_task, import_file, load_task_module

DEV = torch.device("cuda", 0)


def kernels_us(fn, args) -> float:
    from torch.profiler import ProfilerActivity, profile

    fn(*args)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(*args)
        torch.cuda.synchronize()
    return sum(e.device_time for e in prof.events() if e.device_type.name == "CUDA")


def timed_us(fn, args) -> float:
    t, _ = time_cuda(lambda a: fn(*a), [args], trials=50, flusher=L2Flusher(DEV))
    return t.median_ms * 1e3


def max_diff(a: Any, b: Any) -> float:
    xs = a if isinstance(a, list | tuple) else [a]
    ys = b if isinstance(b, list | tuple) else [b]
    return max(float((x.float() - y.float()).abs().max()) for x, y in zip(xs, ys, strict=True))


def main() -> None:
    out_path = Path(sys.argv[1])
    var, values = sys.argv[2].split("=", 1)
    settings = values.split(",")
    torch.set_grad_enabled(False)
    written: list[tuple[str, str, Path, list[str]]] = []  # task, setting, model_new.py, libraries
    for f in sys.argv[3:]:
        task = find_task(Path(f))
        for value in settings:
            os.environ[var] = value
            # Planned under the setting too: some switches are read by the planner (a depthwise
            # convolution's batch-norm prologue is planned only where our depthwise kernel takes it),
            # and code from a plan made with the other setting failed (2026-12-01,
            # STITCHCUDA_CONV_DEPTHWISE=0: "hardtanh has no value in the generated forward").
            plan = plan_task(task)
            cand = builtin.code(task, plan)
            if cand is not None:
                folder = Path(tempfile.mkdtemp(prefix="probe-ab-"))
                written.append((f, value, cand.write(folder), list(cand.libraries)))
    os.environ.pop(var, None)

    def build(item: tuple[str, str, Path, list[str]]) -> str | None:
        try:
            runtime.build([item[2].with_name("fused_kernels.cu")], libraries=item[3])
            return None
        except Exception as e:  # noqa: BLE001 - a failed build is that variant's record
            return f"{type(e).__name__}: {e}"[:300]

    with ThreadPoolExecutor(max_workers=max(1, (os.cpu_count() or 2) - 2)) as pool:
        errors = list(pool.map(build, written))
    records = Records(out_path)
    for f in dict.fromkeys(w[0] for w in written):
        with records.task(task=f, var=var) as rec:
            _, cls = load_task_module(find_task(Path(f)))
            ref_mod = import_file(Path(f))
            ref = build_model(cls, list(ref_mod.get_init_inputs()), 42, DEV)
            args = make_inputs(ref_mod.get_inputs, 1, DEV)
            want = ref(*args)
            outs = {}
            for (task, value, path, _), err in zip(written, errors, strict=True):
                if task != f:
                    continue
                if err:
                    rec[value] = {"error": err}
                    continue
                model = build_model(import_file(path).ModelNew, list(ref_mod.get_init_inputs()), 42, DEV)
                model.load_state_dict(ref.state_dict())
                got = model(*args)
                outs[value] = got
                rec[value] = {"timed_us": round(timed_us(model, args), 2),
                              "kernels_us": round(kernels_us(model, args), 2),
                              "max_diff_vs_eager": max_diff(got, want)}
            if len(outs) == 2:
                a, b = outs.values()
                rec["max_diff_between"] = max_diff(a, b)
                off, on = (rec[s].get("timed_us") for s in settings)
                if off and on:
                    rec["on_over_off"] = round(off / on, 4)


if __name__ == "__main__":
    main()
