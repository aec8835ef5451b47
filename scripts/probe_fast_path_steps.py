"""Where a timed call's host time goes, step by step along the generated forward's fast path.

Usage (on the GPU machine, after scripts/gpu_run.sh has assembled the package):
    python3 scripts/probe_fast_path_steps.py OUT.json TASK.py [TASK.py ...]
For each task the built-in candidate's model_new.py is rewritten (ast) with a clock read at the
entry of ModelNew.forward and of `_fast`, and after each of their top-level statements; the line
that launches (`rc = f.fn(f.pack(...), stream)`) is split into reading the pointers, packing them,
and the foreign call. Each trial is timing.time_cuda's (the Verifier's L2 flush, a synchronise,
events around the call); `warm` trials call again at once, with no flush and no synchronise before.
Records, per condition, the median microseconds of each step, named by its statement.
"""

from __future__ import annotations

import ast
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
from probe_records import Records, built_candidate, reference_and_candidate

from stitchcuda.agents.verify.timing import L2Flusher

DEV = torch.device("cuda", 0)
TRIALS = 60


def _stamp(label: str) -> ast.stmt:
    return ast.parse(f"_STAMPS.append(({label!r}, _CLOCK()))").body[0]


def _split_launch(stmt: ast.stmt) -> list[ast.stmt] | None:
    """`rc = f.fn(f.pack(A, B, ...), stream)` as three statements with stamps between, else None."""
    if not (isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call)
            and ast.unparse(stmt.value.func) == "f.fn" and stmt.value.args
            and isinstance(stmt.value.args[0], ast.Call) and ast.unparse(stmt.value.args[0].func) == "f.pack"):
        return None
    ptrs = ", ".join(ast.unparse(a) for a in stmt.value.args[0].args)
    rest = ", ".join(ast.unparse(a) for a in stmt.value.args[1:])
    return [
        *ast.parse(f"_ptrs = ({ptrs},)").body, _stamp("data_ptr()s"),
        *ast.parse("_packed = f.pack(*_ptrs)").body, _stamp("pack"),
        *ast.parse(f"rc = f.fn(_packed, {rest})").body, _stamp("foreign call (launch)"),
    ]


def _stamped(body: list[ast.stmt], where: str) -> list[ast.stmt]:
    out: list[ast.stmt] = [_stamp(f"{where}: entry")]
    for stmt in body:
        split = _split_launch(stmt)
        if split is not None:
            out += split
            continue
        out.append(stmt)
        if not isinstance(stmt, ast.Return):
            out.append(_stamp(f"{where}: {ast.unparse(stmt).splitlines()[0][:70]}"))
    return out


def stamped_source(text: str) -> str:
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "_fast":
            node.body = _stamped(node.body, "_fast")
        if isinstance(node, ast.ClassDef) and node.name == "ModelNew":
            for fn in node.body:
                if isinstance(fn, ast.FunctionDef) and fn.name == "forward":
                    fn.body = _stamped(fn.body, "forward")
    tree.body[:0] = ast.parse("import time as _time\n_STAMPS = []\n_CLOCK = _time.perf_counter_ns").body
    return ast.unparse(ast.fix_missing_locations(tree))


def steps(mod: Any, fn: Any, flusher: L2Flusher, *, cold: bool) -> dict[str, float]:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    per: dict[str, list[float]] = {}
    timed: list[float] = []
    for _ in range(TRIALS):
        if cold:
            flusher()
            torch.cuda.synchronize()
        else:
            fn()  # the call before, at once: this one runs warm
        start.record()
        mod._STAMPS.clear()
        h0 = time.perf_counter_ns()
        out = fn()
        h1 = time.perf_counter_ns()
        end.record()
        torch.cuda.synchronize()
        del out
        marks = [("call -> forward entry", h0)] + list(mod._STAMPS) + [("return to the caller", h1)]
        prev = h0
        for label, t in marks[1:]:
            per.setdefault(label, []).append((t - prev) / 1e3)
            prev = t
        per.setdefault("whole call", []).append((h1 - h0) / 1e3)
        timed.append(start.elapsed_time(end) * 1e3)
    res = {label: round(statistics.median(v), 2) for label, v in per.items()}
    res["timed window"] = round(statistics.median(timed), 2)
    return res


def main() -> None:
    out_path = Path(sys.argv[1])
    torch.set_grad_enabled(False)
    records = Records(out_path)
    flusher = L2Flusher(DEV)
    for f in sys.argv[2:]:
        with records.task(task=f) as rec:
            task, _, path = built_candidate(Path(f), "fast-steps-")
            stamped = path.with_name("model_new_stamped.py")
            stamped.write_text(stamped_source(path.read_text()))
            name = f"_steps_{Path(f).stem}"
            ref, ours, args = reference_and_candidate(Path(f), task.class_name, stamped, DEV, name)
            mod = sys.modules[name]
            torch.testing.assert_close(ours(*args), ref(*args), rtol=1e-3, atol=1e-3)
            for _ in range(5):
                ours(*args)  # arms the fast path
            torch.cuda.synchronize()
            if not any(label.startswith("_fast") for label, _ in mod._STAMPS):
                raise RuntimeError("the fast path did not run")
            fn = lambda m=ours, a=args: m(*a)  # noqa: E731
            rec["cold"] = steps(mod, fn, flusher, cold=True)
            rec["warm"] = steps(mod, fn, flusher, cold=False)


if __name__ == "__main__":
    main()
