"""`stitchcuda bench`: the pipeline over KernelBench-format files, into a JSON and a Markdown table.

The JSON is written after every problem, so a run that is cut off keeps what it measured and
`--resume` carries on from it.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stitchcuda import timing_cpus
from stitchcuda.agents.rounds import BENCH_POLICY, Coder, RoundPolicy, Rounds
from stitchcuda.agents.verify.locks import BESIDE_ENV
from stitchcuda.gpu_memory import (
    GIB,
    UNKNOWN_CAPACITY,
    WORKER_OVERHEAD,
    MemoryShares,
    device_memory_bytes,
    expected_bytes,
)
from stitchcuda.host_load import HostLoad

from . import provenance
from .task import TaskError, find_task
from .types import Candidate, Plan, Task, Verdict

VerifyFn = Callable[[Task, "Candidate | None", Path], Verdict]
"""Verifies one candidate (None: times the reference only) in the given run folder: the local
bench's submits it to a VerifierPool, a Ray task's runs the Verifier on the GPU Ray gave it."""

# The planner imports each problem's module and traces it under torch's fake-tensor dispatch mode:
# one problem at a time, as the bench always planned them.
_PLAN_LOCK = threading.Lock()

# Statuses --resume runs again: out of memory beside other workers says more about the neighbours
# than the problem; "lost" (the Ray backend: the node or worker running it died every time) was
# never measured.
RERUN_STATUSES = frozenset({"oom", "lost"})
# A verdict's note where the bench ran it again with the GPU to itself after it ran out of memory
# beside other workers (run_bench): the verdict from alone replaces the one from beside them.
RAN_ALONE = "ran again with the GPU to itself, after running out of GPU memory beside other workers"


def problem_level(path: Path) -> int | None:
    m = re.search(r"level(\d+)", str(path.parent.name))
    return int(m.group(1)) if m else None


def expand_paths(paths: list[str]) -> list[Path]:
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out += sorted(p.glob("*.py"), key=lambda q: (int(m.group(1)) if (m := re.match(r"(\d+)_", q.name)) else 10**9, q.name))
        else:
            out.append(p)
    # Each problem once, however it was named.
    return list({p.resolve(): p.resolve() for p in out}.values())


def geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


TOP_KERNELS = 6  # kernels per solved problem kept in bench.json (top_kernels_us)


def _top_kernels(kernel_us: dict[str, float]) -> dict[str, float] | None:
    return {k[:100]: round(us, 1) for k, us in sorted(kernel_us.items(), key=lambda kv: -kv[1])[:TOP_KERNELS]} or None


def entry_for(path: Path, verdict: Verdict | None, cand: Candidate | None, plan_note: str, status: str | None = None) -> dict[str, Any]:
    v = verdict
    solved = bool(v and cand is not None and v.accepted)
    matched = (v.compiled_matched or (v.compiled if v.compile_policy else None)) if v else None
    return {
        "path": str(path),
        "name": path.name,
        "level": problem_level(path),
        "solved": solved,
        "status": status or (v.status if v else "error"),
        "hack_findings": [{"code": f.code, "message": f.message} for f in (v.hack_findings if v else [])],
        "gpu_peak_mb": v.gpu_peak_mb if v else None,  # the worker's (stitchcuda/gpu_memory.py's yardstick)
        "eager_ms": v.eager.median_ms if v and v.eager else None,
        "compile_ms": v.compiled.median_ms if v and v.compiled else None,
        "ours_ms": v.ours.median_ms if solved and v.ours else None,
        # Each call's host time inside its timed window (timing.time_cuda), median: ours_ms less
        # the GPU's own time is mostly this plus the launch latency (host_us.timed_one_launch).
        "ours_host_ms": v.ours.host_ms if solved and v.ours else None,
        "compile_host_ms": v.compiled.host_ms if v and v.compiled else None,
        # The host path's cost: one forward's kernels run back to back (the profiler's sum, library
        # kernels included) against the timed forward; the difference is time the GPU waited.
        "kernel_ms": round(sum(v.kernel_us.values()) / 1e3, 4) if solved and v.kernel_us else None,
        # Where that time goes: the longest kernels of one forward (profiler, warm L2), names cut to
        # 100 characters; what a problem that loses spends its time on, without its run folder.
        "top_kernels_us": _top_kernels(v.kernel_us) if solved else None,
        # torch.compile's, the same way (its default settings, one forward, after every timing).
        "compile_top_kernels_us": _top_kernels(v.compile_kernel_us) if solved else None,
        # ...and all of them: its GPU time set beside kernel_ms, for small modules whose timed ratio
        # is mostly the two host paths (default settings: under the tf32 policy its products may be
        # fp32 where ours are TF32; compare with `precision`).
        "compile_kernel_ms": round(sum(v.compile_kernel_us.values()) / 1e3, 4) if solved and v.compile_kernel_us else None,
        # The same kernels' busy time (overlaps counted once): the floor the timed forward is held to.
        "kernel_busy_ms": round(v.kernel_busy_us / 1e3, 4) if v and v.kernel_busy_us else None,
        # The forward's GPU time alone, timed as ours_ms is but with every launch queued before the
        # GPU gets to it (timing.time_gpu_ahead); host_gap_ms is ours_ms less it: the time the GPU
        # waited for the host path, under the same L2 flush, inputs and clocks. The profiler's sum
        # (kernel_ms) comes from another call, warm L2 and all, so ours_ms less it
        # (profiler_gap_ms) mixes the host path with the kernels' own time differences.
        "gpu_ms": round(v.ours_gpu.median_ms, 4) if solved and v.ours_gpu else None,
        "host_gap_ms": (round(v.ours.median_ms - v.ours_gpu.median_ms, 4)
                        if solved and v.ours and v.ours_gpu else None),
        # The forward's host time until it returns (its work queued), and a one-element CUDA
        # allocation's in the same process: how fast that process ran host code at all.
        "host_us": dict(v.host_us) if solved and v.host_us else None,
        "profiler_gap_ms": (round(v.ours.median_ms - sum(v.kernel_us.values()) / 1e3, 4)
                            if solved and v.ours and v.kernel_us else None),
        "speedup_eager": v.speedup_eager if solved else None,
        "speedup_compile": v.speedup_compile if solved else None,
        # torch.compile under the candidate's own precision policy (the fair ratio; issue 16): its
        # own timing where the policy's TF32 switches change the reference's ops, else the default's.
        "precision": v.precision if v and cand is not None else None,
        "compile_policy": (v.compile_policy or None) if v else None,
        "compile_matched_ms": matched.median_ms if matched else None,
        # torch.compile under the candidate's policy where it missed the tolerance the candidate met.
        "compile_rejected": v.compile_rejected if v else None,
        "speedup_compile_matched": v.speedup_compile_matched if solved else None,
        # KernelBench's current check (allclose at atol = rtol = 1e-4) on the random input sets.
        "correct_at_1e4": v.correct_at_1e4 if v and cand is not None else None,
        # The traced batch where the candidate takes any batch size, and the others it was checked at.
        "batch": cand.batch if cand is not None else None,
        "batch_sizes_checked": list(v.batch_sizes) if v else [],
        "build_s": v.build_s if v else None,
        "compile_first_call_s": v.compile_first_call_s if v else None,
        "compile_error": (v.compile_error or None) if v else None,
        "tolerance": v.tolerance if v else None,
        "message": (v.message if v and v.message else plan_note)[:500],
        "candidate": cand.name if cand else None,
        # Seconds in each of the worker's phases (and waiting for the GPU lock): what a problem's
        # wall time is made of, and so what more GPUs or more workers per GPU can buy.
        "phases": dict(v.phases) if v else {},
        # Whether the worker ran under the OS sandbox (bubblewrap), and if not, why (issue 22).
        "sandboxed": v.sandboxed if v else None,
        "sandbox": (v.sandbox or None) if v and not v.sandboxed else None,
    }


def summarize(problems: list[dict[str, Any]]) -> dict[str, Any]:
    solved = [p for p in problems if p["solved"]]
    builds = [p["build_s"] for p in problems if p.get("build_s") is not None and p.get("candidate")]
    timed = [p for p in problems if p.get("eager_ms")]
    return {
        "problems": len(problems),
        "solved": len(solved),
        "hacked": sum(1 for p in problems if p["hack_findings"]),
        "geomean_speedup_eager": geomean([p["speedup_eager"] for p in solved]),
        "geomean_speedup_compile": geomean([p["speedup_compile"] for p in solved]),
        "geomean_speedup_compile_matched": geomean([p.get("speedup_compile_matched") for p in solved]),
        # KernelBench's fast_1: correct and faster than the baseline, over all problems.
        "fast_1_eager": sum(1 for p in solved if (p["speedup_eager"] or 0) > 1) / len(problems) if problems else None,
        "fast_1_compile": sum(1 for p in solved if (p["speedup_compile"] or 0) > 1) / len(problems) if problems else None,
        "fast_1_compile_matched": sum(1 for p in solved if (p.get("speedup_compile_matched") or 0) > 1) / len(problems)
        if problems else None,
        "solved_matched_faster": sum(1 for p in solved if (p.get("speedup_compile_matched") or 0) > 1),
        "correct_at_1e4": sum(1 for p in solved if p.get("correct_at_1e4")),
        "median_build_s": statistics.median(builds) if builds else None,
        "median_host_gap_ms": statistics.median(gaps) if (gaps := [p["host_gap_ms"] for p in solved
                                                                    if p.get("host_gap_ms") is not None]) else None,
        "host_gap_measured": len(gaps),
        "median_profiler_gap_ms": statistics.median(pg) if (pg := [p["profiler_gap_ms"] for p in solved
                                                                   if p.get("profiler_gap_ms") is not None]) else None,
        # The worker's host yardsticks (Verdict.host_us), median over the solved problems: the forward's
        # host time, the one-element allocation at the worker's start and at timing, and one minimal
        # launch timed as a forward. Where the allocation grows between the two, or the launch is far
        # above a few microseconds, the host gap is the worker's rather than the candidates'. The loop
        # figures (timing.loop_us): the forward called back to back, per call, against its kernels run
        # back to back; loop_gap is what the host path costs a forward in a loop.
        "median_host_us": {k: statistics.median(xs) for k in HOST_KEYS
                           if (xs := [p["host_us"][k] for p in solved if (p.get("host_us") or {}).get(k) is not None])},
        # Issue 16's bar: a forward costs at most 10 us more than its kernels' GPU time back to back.
        "loop_gap_measured": len(lg := [p["host_us"]["loop_gap"] for p in solved
                                        if (p.get("host_us") or {}).get("loop_gap") is not None]),
        "loop_gap_at_most_10us": sum(1 for g in lg if g <= 10.0),
        "geomean_compile_over_eager": geomean([p["eager_ms"] / p["compile_ms"] for p in timed if p.get("compile_ms")]),
        # GPU time alone: default torch.compile's kernels of one forward over ours (host paths left out).
        "geomean_kernel_speedup_compile": geomean(ks := [p["compile_kernel_ms"] / p["kernel_ms"] for p in solved
                                                         if p.get("compile_kernel_ms") and p.get("kernel_ms")]),
        "kernels_faster_than_compile": sum(1 for k in ks if k > 1),
        "kernels_compared_with_compile": len(ks),
        "sandboxed": sum(1 for p in problems if p.get("sandboxed")),
        # How the memory a problem was admitted by (read off its trace) compares with what its worker
        # held: the figure that calibrates stitchcuda/gpu_memory.expected_bytes (over 1: it held more).
        **_memory_fit(problems),
    }


def _memory_fit(problems: list[dict[str, Any]]) -> dict[str, Any]:
    ratios = [p["gpu_peak_mb"] / p["gpu_expected_mb"] for p in problems if p.get("gpu_peak_mb") and p.get("gpu_expected_mb")]
    if not ratios:
        return {}
    return {"gpu_peak_over_expected": {"measured": len(ratios), "median": round(statistics.median(ratios), 3),
                                       "max": round(max(ratios), 3), "over_1": sum(1 for r in ratios if r > 1)},
            "oom_after_alone": sum(1 for p in problems if p.get("status") == "oom" and p.get("ran_alone"))}


HOST_KEYS = ("forward", "empty_at_start", "empty_after_checks", "empty", "timed_one_launch", "compile_timed_one_launch",
             "loop_forward", "loop_gpu", "loop_gap")


def _fmt(x: Any, spec: str = ".3f") -> str:
    return "–" if x is None else format(x, spec)


def markdown(report: dict[str, Any]) -> str:
    m, s = report["meta"], report["summary"]
    lines = [
        "# StitchCUDA bench",
        "",
        f"- command: `{m['command']}`",
        f"- commit: `{m['commit']}`  date: {m['date']}",
        f"- GPU: {m['gpu']}  torch: {m['torch']}  coder: {m['coder']}",
        f"- solved {s['solved']} of {s['problems']}; hack findings on {s['hacked']}; "
        f"fast_1 vs eager {_fmt(s['fast_1_eager'], '.2f')}, vs torch.compile {_fmt(s['fast_1_compile'], '.2f')}",
        f"- geomean speedup on solved problems: {_fmt(s['geomean_speedup_eager'], '.2f')}x vs eager, "
        f"{_fmt(s['geomean_speedup_compile'], '.2f')}x vs torch.compile; median build {_fmt(s['median_build_s'], '.2f')} s",
        f"- torch.compile over eager (all timed problems, geomean): {_fmt(s['geomean_compile_over_eager'], '.2f')}x",
        f"- precision policy: {m.get('precision', 'tf32')}; vs torch.compile under each candidate's own policy: "
        f"geomean {_fmt(s.get('geomean_speedup_compile_matched'), '.2f')}x, faster on "
        f"{s.get('solved_matched_faster', '–')} of {s['solved']} solved; solved and within KernelBench's 1e-4: "
        f"{s.get('correct_at_1e4', '–')}",
        f"- host path: median of (timed forward - the same forward's GPU time with its launches queued "
        f"ahead) on {s.get('host_gap_measured', '–')} solved problems: {_fmt(s.get('median_host_gap_ms'), '.4f')} ms; "
        f"against the profiler's kernel sum (another call, warm L2): {_fmt(s.get('median_profiler_gap_ms'), '.4f')} ms",
        "- the worker's host yardsticks, median us: "
        + (", ".join(f"{k} {_fmt(v, '.1f')}" for k, v in s["median_host_us"].items()) if s.get("median_host_us") else "–"),
        f"- GPU time alone (one forward's kernels, the profiler): default torch.compile's over ours, geomean "
        f"{_fmt(s.get('geomean_kernel_speedup_compile'), '.2f')}x, ours less on {s.get('kernels_faster_than_compile', '–')} "
        f"of {s.get('kernels_compared_with_compile', '–')}",
        f"- the forward in a loop (back to back, no synchronise between calls): host path at most 10 us beyond its "
        f"kernels' GPU time on {s.get('loop_gap_at_most_10us', '–')} of {s.get('loop_gap_measured', '–')} measured",
        f"- sandbox: {s.get('sandboxed', '–')} of {s['problems']} problem(s) verified under bubblewrap"
        + (f" (otherwise: {why})" if (why := next((p['sandbox'] for p in report['problems'] if p.get('sandbox')), None))
           else ""),
    ]
    if fit := s.get("gpu_peak_over_expected"):
        lines.append(f"- GPU memory: the worker's peak over what its trace led the bench to expect, median "
                     f"{fit['median']:.2f}, at most {fit['max']:.2f} ({fit['over_1']} of {fit['measured']} over 1); "
                     f"out of memory even alone: {s.get('oom_after_alone', 0)}")
    if m.get("wall_s") is not None:
        lines.append(f"- this run: {m['finished_this_run']} problem(s) in {m['wall_s']:.0f} s on GPUs "
                     f"{m.get('gpus') or 'default'} with {m.get('jobs')} worker(s) each: "
                     f"{_fmt(m.get('problems_per_hour'), '.0f')} problems per hour")
    if host := m.get("host"):
        lines.append(f"- host while it ran: CPU clock {_fmt(host.get('cpu_mhz_mean'), '.0f')} MHz mean "
                     f"({_fmt(host.get('cpu_mhz_min'), '.0f')}-{_fmt(host.get('cpu_mhz_max'), '.0f')}, "
                     f"{host.get('clock_source') or 'not read'}), 1-minute load {_fmt(host.get('load1_mean'), '.1f')} mean, "
                     f"{_fmt(host.get('load1_max'), '.1f')} at most, of {host.get('cpus')} CPUs")
        if host.get("core_ms_median") is not None:
            lines.append(f"- one core's speed (4 MiB hashed): {_fmt(host.get('core_ms_first'), '.2f')} ms at the start, "
                         f"{_fmt(host.get('core_ms_median'), '.2f')} median, {_fmt(host.get('core_ms_max'), '.2f')} at most; "
                         f"the bench process's GIL (a short Python loop): {_fmt(host.get('gil_ms_first'), '.2f')} ms at "
                         f"the start, {_fmt(host.get('gil_ms_median'), '.2f')} median, {_fmt(host.get('gil_ms_max'), '.2f')} at most")
    if "timing_cpus" in m:
        kept = m["timing_cpus"]
        lines.append("- CPUs kept for each GPU lock's holder (checks and timing; the bench's other work off them): "
                     + ("; ".join(f"GPU {g}: {', '.join(map(str, c))}" for g, c in kept.items()) if kept
                        else "none (too few CPUs, no GPU, or STITCHCUDA_RESERVE_TIMING_CPUS=0)"))
    for run in m.get("earlier_runs", []):
        note = f" ({run['commit_note']})" if run.get("commit_note") else ""
        lines.append(f"- resumed from an earlier run: `{run.get('command')}`, commit `{run.get('commit')}`{note}, {run.get('date')}")
    lines += [
        "",
        "| problem | solved | hack findings | eager ms | compile ms | ours ms | vs eager | vs compile | vs matched compile "
        "| precision | 1e-4 | build s | status |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: | --- |",
    ]
    for p in report["problems"]:
        hacks = ", ".join(sorted({h["code"] for h in p["hack_findings"]})) or ""
        lines.append(
            f"| {p['name']} | {'yes' if p['solved'] else 'no'} | {hacks} | {_fmt(p['eager_ms'])} | {_fmt(p['compile_ms'])} | "
            f"{_fmt(p['ours_ms'])} | {_fmt(p['speedup_eager'], '.2f')} | {_fmt(p['speedup_compile'], '.2f')} | "
            f"{_fmt(p.get('speedup_compile_matched'), '.2f')} | {p.get('precision') or '–'} | "
            f"{ {True: 'yes', False: 'no'}.get(p.get('correct_at_1e4'), '–')} | "
            f"{_fmt(p['build_s'], '.2f')} | {p['status']}{' (next round not run)' if p.get('retry_pending') else ''}"
            f"{'; torch.compile failed: ' + p['compile_error'].splitlines()[0][:80] if p.get('compile_error') else ''} |"
        )
    return "\n".join(lines) + "\n"


@dataclass
class ProblemRun:
    """One problem's rounds as far as they have gone: its bench.json entry, and what verifying its
    last candidate again needs (the out-of-memory re-run alone)."""

    path: Path
    entry: dict[str, Any]
    task: Task | None = None  # None: the file is not a problem (its entry says why)
    rounds: Rounds | None = None  # None without a candidate: only the reference is timed
    cand: Candidate | None = None
    note: str = ""
    attempt: int = 1
    device: str | None = None  # the GPU the last verdict was measured on; None on the CPU
    # The rounds before the last, in brief (round_brief): why a problem left a rung (39's TF32 miss on
    # the H200 at 43a5367 was known only as "ran at 3xTF32").
    earlier: list[dict[str, Any]] = field(default_factory=list)


def round_brief(attempt: int, cand: Candidate | None, v: Verdict) -> dict[str, Any]:
    """A round's verdict as kept beside a later round's entry: its status and the checks it missed
    (set, message, relative L2 error, the fp64 referee's word)."""
    missed = []
    for c in v.checks:
        if c.get("ok") is not False:
            continue
        rel = c.get("rel_norm")
        # (inf where the reference is all zeros, 0.0 where a miss has no L2 figure: NaN placement,
        # integers; neither is a distance, and inf is not JSON)
        m: dict[str, Any] = {"set": c.get("set"), "message": str(c.get("message", ""))[:300],
                             "rel_norm": rel if isinstance(rel, int | float) and math.isfinite(rel) and rel > 0 else None}
        if isinstance(c.get("referee"), dict):
            m["referee"] = {"ok": c["referee"].get("ok"), "message": str(c["referee"].get("message", ""))[:300]}
        missed.append(m)
    return {"attempt": attempt, "candidate": cand.name if cand is not None else None, "precision": v.precision,
            "status": v.status, "message": (v.message or "")[:300], "missed": missed[:6],
            "hack_findings": [f.code for f in v.hack_findings]}


def _line(run: ProblemRun, retry: Candidate | None, alone: bool) -> str:
    e = run.entry
    return (f"{run.path.name}: {'solved' if e['solved'] else e['status']}" + (" (alone)" if alone else "")
            + (f", {e['speedup_eager']:.2f}x eager" if e.get("speedup_eager") else "")
            + (f"  ({e['message'][:120]})" if not e["solved"] and e.get("message") else "")
            + (f"; trying {retry.name}" if retry is not None else ""))


def bench_problem(
    path: Path,
    runs: Path,
    *,
    code: Coder,
    policy: RoundPolicy,
    precision: str,
    verify: VerifyFn,
    mode: str = "as-built",
    past_deadline: Callable[[], bool] = lambda: False,
    on_entry: Callable[[ProblemRun], None] = lambda run: None,
    on_event: Callable[[str], None] = print,
    on_plan: Callable[[Task, Plan], None] = lambda task, plan: None,
) -> ProblemRun:
    """One problem: plan it, then its rounds (the Coder writes, `verify` judges, the verdict is the
    next round's feedback) under `policy`, each round's entry handed to `on_entry` as it comes. Run
    folders go in `runs`. The local bench runs this on threads, the Ray backend in a task per problem."""
    from stitchcuda.agents.loop import plan_task

    task = None
    try:
        task = find_task(path)
        task.precision = precision  # type: ignore[assignment]
        task.mode = mode  # type: ignore[assignment]
        with _PLAN_LOCK:
            plan = plan_task(task)
    except TaskError as e:
        run = ProblemRun(path, entry_for(path, None, None, str(e), status="task-error"))
        on_event(f"{path.name}: task-error  ({str(e)[:120]})")
        on_entry(run)
        return run
    except Exception as e:  # noqa: BLE001 - a planner bug on one problem must not end the bench
        run = ProblemRun(path, {}, task=task or find_task(path), note=f"planner/coder error: {type(e).__name__}: {e}")
        return verify_rounds(run, runs, verify=verify, past_deadline=past_deadline, on_entry=on_entry, on_event=on_event)
    on_plan(task, plan)
    rounds = Rounds(code, task, plan, policy)
    cand = rounds.next_candidate() if plan.supported else None
    if rounds.coder_error:
        note = f"planner/coder error: {rounds.coder_error}"
    else:
        note = "; ".join(plan.unsupported)[:300] if cand is None else ""
    # Without a candidate only the reference is timed.
    run = ProblemRun(path, {}, task=task, rounds=rounds if cand is not None else None, cand=cand, note=note)
    return verify_rounds(run, runs, verify=verify, past_deadline=past_deadline, on_entry=on_entry, on_event=on_event)


@contextlib.contextmanager
def _env(name: str, value: str):
    """`name` set to `value` in this process's environment for the block (the Verifier's processes
    started in it inherit it), as it was after."""
    was = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if was is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = was


def verify_rounds(
    run: ProblemRun,
    runs: Path,
    *,
    verify: VerifyFn,
    past_deadline: Callable[[], bool],
    on_entry: Callable[[ProblemRun], None],
    on_event: Callable[[str], None],
    alone: bool = False,
) -> ProblemRun:
    """Verifies `run.cand` and the rounds after it while the policy asks for them. `alone`: the same
    candidate again (its verdict replaces its round's), in folders of their own."""
    f = run.path
    assert run.task is not None
    while True:
        name = f.stem + ("-alone" if alone else "") + ("" if run.attempt == 1 else f"-r{run.attempt}")
        try:
            v = verify(run.task, run.cand, runs / name)
        except Exception as e:  # noqa: BLE001
            if alone:  # the verdict from beside the others stands
                on_event(f"{f.name}: verifier error on the re-run: {e}")
                return run
            run.entry = {**entry_for(f, None, run.cand, f"verifier error: {e}", status="error"), "attempt": run.attempt}
            if run.earlier:
                run.entry["earlier_rounds"] = list(run.earlier)
            on_entry(run)
            return run
        retry = None
        wants_retry = False
        if run.rounds is not None and run.cand is not None:
            run.rounds.record(run.cand, v)
            wants_retry = run.rounds.wants_another()
            # Past the deadline the round is left pending, for --resume.
            if wants_retry and not past_deadline():
                retry = run.rounds.next_candidate()
                wants_retry = retry is not None  # no further round to wait for: the verdict stands
        run.device = v.device if v.device and v.device != "cpu" else None
        run.entry = {**entry_for(f, v, run.cand, run.note), "attempt": run.attempt}
        brief = round_brief(run.attempt, run.cand, v)
        if run.earlier:
            run.entry["earlier_rounds"] = list(run.earlier)
        if brief["missed"]:
            run.entry["missed"] = brief["missed"]  # (the sets this verdict missed, and the referee's word on each)
        ran_alone = alone or RAN_ALONE in v.notes
        if ran_alone:
            run.entry["ran_alone"] = True
        if wants_retry:  # until the retry's verdict replaces this entry
            run.entry["retry_pending"] = True
        on_event(_line(run, retry, ran_alone))
        on_entry(run)
        if retry is None:
            return run
        run.earlier.append(brief)
        run.cand, run.attempt = retry, run.attempt + 1


class BenchReport:
    """bench.json and bench.md in `out`: what an earlier run left there (with --resume) and this run's
    entries as they come, written after every one, so a run cut off keeps what it measured."""

    def __init__(self, files: list[Path], out: Path, *, resume: bool, meta: dict[str, Any]):
        self.files, self.out = files, out
        out.mkdir(parents=True, exist_ok=True)
        self.json_path = out / "bench.json"
        done: dict[str, dict[str, Any]] = {}
        self.rerun: set[str] = set()
        earlier: list[dict[str, Any]] = []
        if resume and self.json_path.exists():
            previous = json.loads(self.json_path.read_text())
            # RERUN_STATUSES run again; so does a wrong result whose next round (the Verifier's
            # feedback) never ran because the deadline came first: the problem is not finished until
            # that round has its verdict. Their entries stay in the report until a new one replaces them.
            done = {str(Path(p["path"]).resolve()): p for p in previous.get("problems", [])}
            self.rerun = {path for path, p in done.items() if p.get("status") in RERUN_STATUSES or p.get("retry_pending")}
            prev_meta = dict(previous.get("meta", {}))
            earlier = prev_meta.pop("earlier_runs", []) + [prev_meta]
            # Entries from before carry the run that measured them (its date and commit).
            for entry in done.values():
                entry.setdefault("run", {"date": prev_meta.get("date"), "commit": prev_meta.get("commit")})
        self.report: dict[str, Any] = {"meta": {**provenance.record(), **meta}, "problems": []}
        if earlier:
            self.report["meta"]["earlier_runs"] = earlier
        self.this_run = {"date": self.report["meta"]["date"], "commit": self.report["meta"]["commit"]}
        self.results: dict[str, dict[str, Any]] = dict(done)
        self._lock = threading.Lock()

    def todo(self) -> list[Path]:
        """The problems this run has to do, in order."""
        return [f for f in self.files if str(f) not in self.results or str(f) in self.rerun]

    def put(self, path: Path, entry: dict[str, Any], device: str | None = None) -> None:
        """A problem's entry from this run (replacing any before it), written out at once."""
        with self._lock:
            self.report["meta"]["gpu"] = self.report["meta"]["gpu"] or device
            self.results[str(path)] = {**entry, "run": self.this_run}
        self.save()

    def save(self) -> None:
        with self._lock:
            self.report["problems"] = [self.results[str(f)] for f in self.files if str(f) in self.results]
            self.report["summary"] = summarize(self.report["problems"])
            self.json_path.write_text(json.dumps(self.report, indent=2, default=str))
            (self.out / "bench.md").write_text(markdown(self.report))

    def finish(self) -> dict[str, Any]:
        self.report["meta"]["gpu"] = self.report["meta"]["gpu"] or "none (CPU only)"
        self.save()
        return self.report


def longest_first(files: list[Path], earlier: Path) -> list[Path]:
    """`files` in the order that ends a pool's run soonest: longest first, by the wall time
    (`problem_s`) each took in an earlier bench.json (or a bench/results file of runs); problems it does not know (or did not time) go
    first, as they might be the longest. With many workers the run's tail is its last problems: the
    longest ones started last leave workers idle while they finish."""
    from .task import UsageError

    try:
        previous = json.loads(earlier.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise UsageError(f"--longest-first {earlier}: not a bench.json ({e})") from None
    # A bench/results file holds several runs' bench.json under "runs": each problem's time from the
    # last run that has it (so a committed result orders the next run with nothing to carry).
    if not isinstance(previous, dict):
        raise UsageError(f"--longest-first {earlier}: not a bench.json (no object at its top)")
    runs = previous.get("runs")
    runs = [r for r in runs.values() if isinstance(r, dict)] if isinstance(runs, dict) else []
    problems = [p for r in [previous, *runs] if isinstance(r.get("problems"), list) for p in r["problems"]
                if isinstance(p, dict)]
    took = {Path(p["path"]).name: p["problem_s"] for p in problems
            if isinstance(p.get("path"), str) and isinstance(p.get("problem_s"), int | float)}
    # sorted() is stable: equal keys keep the given order.
    return sorted(files, key=lambda f: -took.get(f.name, float("inf")))


def parse_gpus(spec: str, on_event: Callable[[str], None] = print) -> list[int] | None:
    """--gpus: "all" (every GPU torch sees) or indices such as "0,1". None: no GPU here, the CPU path."""
    import torch

    from .task import UsageError

    count = torch.cuda.device_count()
    if spec.strip().lower() == "all":
        if count == 0:
            on_event("--gpus all: no CUDA GPU here (torch.cuda.device_count() is 0): the CPU path, "
                     "candidates are built but nothing is checked on a GPU, timed or solved")
            return None
        return list(range(count))
    try:
        gpus = sorted({int(x) for x in spec.split(",") if x.strip()})
    except ValueError:
        raise UsageError(f"--gpus {spec}: expected 'all' or GPU indices such as 0,1") from None
    if not gpus or any(g < 0 or g >= count for g in gpus):
        raise UsageError(f"--gpus {spec}: this machine has {count} CUDA GPU(s)"
                         + (f" (indices 0-{count - 1})" if count else "; --gpus all runs on the CPU"))
    return gpus


def _physical_gpus(gpus: list[int] | None) -> list[str]:
    """The physical ids of the GPUs a bench's workers lock ([] on the CPU): the Verifier's choice
    where none is given (its first GPU)."""
    from stitchcuda.agents.verify.verifier import cuda_available, physical_gpu

    if gpus:
        return [physical_gpu(g) for g in gpus]
    return [physical_gpu(0)] if cuda_available() else []


def _memory_shares(gpus: list[int] | None) -> dict[int | None, MemoryShares]:
    """Each GPU's memory shares (None: the first GPU, as VerifierPool reads it); a GPU whose memory
    cannot be read gets a share without a size: nothing limits by bytes, and a run alone still drains it."""
    from stitchcuda.agents.verify.verifier import cuda_available, physical_gpu

    if not gpus and not cuda_available():  # CPU workers: no size, but a run alone still has the machine to itself
        return {None: MemoryShares(UNKNOWN_CAPACITY)}
    shares: dict[int | None, MemoryShares] = {}
    for g in gpus or [None]:
        shares[g] = MemoryShares(device_memory_bytes(physical_gpu(g or 0)) or UNKNOWN_CAPACITY)
    return shares


def run_bench(
    paths: list[str],
    out: Path,
    *,
    coder: str | Coder = "builtin",
    jobs: int = 1,
    gpus: list[int] | None = None,
    verify_opts=None,
    resume: bool = False,
    deadline_s: float | None = None,
    on_event: Callable[[str], None] = print,
    policy: RoundPolicy = BENCH_POLICY,
    precision: str = "tf32",
    mode: str = "as-built",
    order_from: Path | None = None,
) -> dict[str, Any]:
    """Every problem's rounds under `policy` (the round engine `optimize` uses too), problems side by
    side on a pool of Verifier workers: `jobs` per GPU of `gpus` (None: the first GPU, or the CPU),
    each GPU's lock timing one candidate at a time. A candidate goes to whichever worker is free.
    `order_from`: an earlier bench.json whose problem times set the order (longest first)."""
    from stitchcuda.agents.loop import coder_name, make_coder
    from stitchcuda.agents.verify.verifier import VerifierPool, VerifyOptions

    book = BenchReport(expand_paths(paths), out, resume=resume,
                       meta={"coder": coder_name(coder), "jobs": jobs, "gpus": gpus, "precision": precision,
                             "mode": mode})
    todo = longest_first(book.todo(), order_from) if order_from else book.todo()
    code = make_coder(coder)
    # A slot per worker, the GPUs in turn (0, 1, 0, 1 rather than 0, 0, 1, 1): the pool hands out its
    # first free slot, so the first problems spread over every GPU before any GPU gets a second.
    slots: list[int | None] = [g for _ in range(max(1, jobs)) for g in (gpus or [None])]
    # Several workers on a GPU share its memory: each verification is admitted by what it is expected
    # to hold (stitchcuda/gpu_memory.py), and one out of memory beside others runs again alone at once.
    memory = _memory_shares(gpus) if jobs > 1 else {}
    book.report["meta"]["gpu_memory_gib"] = {str(g): round(m.capacity / GIB, 1) if m.capacity < UNKNOWN_CAPACITY
                                             else None for g, m in memory.items()} or None
    pool = VerifierPool(slots, jobs_per_gpu=1, opts=verify_opts or VerifyOptions(),  # type: ignore[arg-type]
                        memory=memory)
    t0 = time.monotonic()
    needs: dict[int, int] = {}  # id(task) -> the bytes its verifications are admitted by
    expected: dict[int, int] = {}  # id(task) -> gpu_memory.expected_bytes of its trace

    def past_deadline() -> bool:
        return bool(deadline_s) and time.monotonic() - t0 > deadline_s  # type: ignore[operator]

    def on_plan(task: Task, plan: Plan) -> None:
        # (the smallest card's size: where the worker checks a batch three times the traced one, on
        # any of them; an unknown card's, none)
        cards = [m.capacity for m in memory.values() if m.capacity < UNKNOWN_CAPACITY]
        needs[id(task)] = expected[id(task)] = expected_bytes(plan.graph, min(cards, default=None))

    def verify(task: Task, cand: Candidate | None, work: Path) -> Verdict:
        need = needs.get(id(task), min((m.capacity for m in memory.values()), default=0) // max(1, jobs))
        v = pool.submit(task, cand, work, need_bytes=need).result()
        if v.gpu_peak_mb:  # what it held, for its next rounds
            needs[id(task)] = max(need, int(v.gpu_peak_mb * (1 << 20)) + WORKER_OVERHEAD)
        # Past the deadline it stays out of memory (--resume runs it again): a run alone first waits
        # for every running verification, which the deadline's margin does not cover.
        if v.status != "oom" or not memory or past_deadline():
            return v
        on_event(f"{task.path.name}: out of memory beside other workers; "
                 "running it again alone")
        again = pool.submit(task, cand, work.with_name(work.name + "-alone"), alone=True).result()
        again.notes.append(RAN_ALONE)
        return again

    started: dict[Path, float] = {}

    def on_entry(run: ProblemRun) -> None:
        # Wall time from the problem's start to this entry (its last entry: to its last verdict).
        run.entry["problem_s"] = round(time.monotonic() - started.get(run.path, t0), 2)
        if run.task is not None and id(run.task) in expected:  # read off its trace, beside its measured peak
            run.entry["gpu_expected_mb"] = round(expected[id(run.task)] / (1 << 20), 1)
        book.put(run.path, run.entry, run.device)

    def one(f: Path) -> ProblemRun | None:
        if past_deadline():
            return None  # not started: --resume picks it up
        started[f] = time.monotonic()
        try:
            return bench_problem(f, out / "runs", code=code, policy=policy, precision=precision, verify=verify,
                                 mode=mode, past_deadline=past_deadline, on_entry=on_entry, on_event=on_event,
                                 on_plan=on_plan)
        except Exception as e:  # noqa: BLE001 - a bug of ours on one problem must not end the bench
            run = ProblemRun(f, entry_for(f, None, None, f"bench error: {type(e).__name__}: {e}", status="error"))
            on_entry(run)
            return run

    # As many problems at once as there are workers: each waits on its own verdicts in turn. Each
    # GPU's lock holder times on CPUs the rest of the bench stays off (stitchcuda/timing_cpus.py).
    with timing_cpus.reserved(_physical_gpus(gpus)) as kept, HostLoad() as host, \
            _env(BESIDE_ENV, "1" if jobs > 1 else "0"), ThreadPoolExecutor(max_workers=len(slots)) as problems:
        book.report["meta"]["timing_cpus"] = kept or None
        runs = list(problems.map(one, todo))
    if left := sum(r is None for r in runs):
        on_event(f"deadline of {deadline_s:.0f} s reached: {left} problem(s) not started (rerun with --resume)")
    pool.shutdown()
    # Throughput of this run alone (a resumed run counts what it finished itself): the figure that
    # says whether more GPUs, or more workers per GPU, paid off.
    wall = time.monotonic() - t0
    done = sum(r is not None for r in runs)
    book.report["meta"].update(wall_s=round(wall, 1), finished_this_run=done,
                               problems_per_hour=round(done * 3600 / wall, 1) if wall > 0 else None,
                               host=host.summary())
    return book.finish()
