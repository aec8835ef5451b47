"""`stitchcuda bench`: the pipeline over KernelBench-format files, into a JSON and a Markdown table.

The JSON is written after every problem, so a run that is cut off keeps what it measured and
`--resume` carries on from it.
"""

from __future__ import annotations

import json
import math
import re
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, NamedTuple

from stitchcuda.agents.rounds import BENCH_POLICY, Coder, RoundPolicy, Rounds

from . import provenance
from .task import TaskError, find_task
from .types import Candidate, Verdict


class _Attempt(NamedTuple):
    """One candidate of one problem on its way through the Verifier."""

    path: Path
    task: Any
    rounds: Rounds | None  # the problem's rounds (agents/rounds.py); None without a candidate
    cand: Candidate | None
    note: str
    attempt: int
    verdict: Future[Verdict]


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
        "eager_ms": v.eager.median_ms if v and v.eager else None,
        "compile_ms": v.compiled.median_ms if v and v.compiled else None,
        "ours_ms": v.ours.median_ms if solved and v.ours else None,
        # The host path's cost: one forward's kernels run back to back (the profiler's sum, library
        # kernels included) against the timed forward; the difference is time the GPU waited.
        "kernel_ms": round(sum(v.kernel_us.values()) / 1e3, 4) if solved and v.kernel_us else None,
        "host_gap_ms": (round(v.ours.median_ms - sum(v.kernel_us.values()) / 1e3, 4)
                        if solved and v.ours and v.kernel_us else None),
        "speedup_eager": v.speedup_eager if solved else None,
        "speedup_compile": v.speedup_compile if solved else None,
        # torch.compile under the candidate's own precision policy (the fair ratio; issue 16): its
        # own timing where the policy's TF32 switches change the reference's ops, else the default's.
        "precision": v.precision if v and cand is not None else None,
        "compile_policy": (v.compile_policy or None) if v else None,
        "compile_matched_ms": matched.median_ms if matched else None,
        "speedup_compile_matched": v.speedup_compile_matched if solved else None,
        # KernelBench's current check (allclose at atol = rtol = 1e-4) on the random input sets.
        "correct_at_1e4": v.correct_at_1e4 if v and cand is not None else None,
        "build_s": v.build_s if v else None,
        "compile_first_call_s": v.compile_first_call_s if v else None,
        "tolerance": v.tolerance if v else None,
        "message": (v.message if v and v.message else plan_note)[:500],
        "candidate": cand.name if cand else None,
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
        "geomean_compile_over_eager": geomean([p["eager_ms"] / p["compile_ms"] for p in timed if p.get("compile_ms")]),
    }


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
        f"- host path: median of (timed forward - its kernels run back to back) on solved problems: "
        f"{_fmt(s.get('median_host_gap_ms'), '.4f')} ms",
    ]
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
            f"{_fmt(p['build_s'], '.2f')} | {p['status']}{' (next round not run)' if p.get('retry_pending') else ''} |"
        )
    return "\n".join(lines) + "\n"


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
) -> dict[str, Any]:
    """Every problem's rounds under `policy` (the round engine `optimize` uses too), verified by a
    pool of workers: `jobs` per GPU side by side, the Verifier's GPU lock timing one at a time."""
    from stitchcuda.agents.loop import coder_name, make_coder, plan_task
    from stitchcuda.agents.verify.verifier import VerifierPool, VerifyOptions

    files = expand_paths(paths)
    out.mkdir(parents=True, exist_ok=True)
    json_path = out / "bench.json"
    done: dict[str, dict[str, Any]] = {}
    rerun: set[str] = set()
    earlier: list[dict[str, Any]] = []
    if resume and json_path.exists():
        previous = json.loads(json_path.read_text())
        # An out-of-memory verdict says more about the neighbours sharing the GPU than about the
        # problem: those run again.
        # So does a wrong result whose next round (the Verifier's feedback) never ran because the
        # deadline came first: the problem is not finished until that round has its verdict. Their
        # entries stay in the report until a new verdict replaces them.
        done = {str(Path(p["path"]).resolve()): p for p in previous.get("problems", [])}
        rerun = {path for path, p in done.items() if p.get("status") == "oom" or p.get("retry_pending")}
        prev_meta = dict(previous.get("meta", {}))
        earlier = prev_meta.pop("earlier_runs", []) + [prev_meta]
        # Entries from before carry the run that measured them (its date and commit).
        for entry in done.values():
            entry.setdefault("run", {"date": prev_meta.get("date"), "commit": prev_meta.get("commit")})
    report: dict[str, Any] = {
        "meta": {
            **provenance.record(),
            "coder": coder_name(coder),
            "jobs": jobs,
            "precision": precision,
        },
        "problems": [],
    }
    if earlier:
        report["meta"]["earlier_runs"] = earlier
    this_run = {"date": report["meta"]["date"], "commit": report["meta"]["commit"]}
    code = make_coder(coder)
    opts = verify_opts or VerifyOptions()
    pool = VerifierPool(gpus, jobs_per_gpu=jobs, opts=opts)
    lock = threading.Lock()
    results: dict[str, dict[str, Any]] = dict(done)
    t0 = time.monotonic()

    def save() -> None:
        with lock:
            report["problems"] = [results[str(f)] for f in files if str(f) in results]
            report["summary"] = summarize(report["problems"])
            json_path.write_text(json.dumps(report, indent=2, default=str))
            (out / "bench.md").write_text(markdown(report))

    pending: list[_Attempt] = []
    in_callbacks = [0]  # done-callbacks still running
    def past_deadline() -> bool:
        return bool(deadline_s) and time.monotonic() - t0 > deadline_s

    def launch(f: Path, task: Any, rounds: Rounds | None, cand: Candidate | None, note: str, attempt: int) -> None:
        work = out / "runs" / (f.stem if attempt == 1 else f"{f.stem}-r{attempt}")
        fut = pool.submit(task, cand, work)

        def finished(fut: Future[Verdict]) -> None:
            # A future is done before its callbacks run: count this one as busy until it returns, so
            # the pool is not shut down while it is still deciding on another round.
            with lock:
                in_callbacks[0] += 1
            try:
                _finished(fut)
            finally:
                with lock:
                    in_callbacks[0] -= 1

        def _finished(fut: Future[Verdict]) -> None:
            if fut.cancelled():
                return  # not run: --resume picks it up (a cancelled retry left retry_pending set)
            try:
                v = fut.result()
            except Exception as e:  # noqa: BLE001
                results[str(f)] = entry_for(f, None, cand, f"verifier error: {e}", status="error")
                save()
                return
            # Past the deadline the round is left pending, for --resume.
            retry = None
            wants_retry = False
            if rounds is not None and cand is not None:
                rounds.record(cand, v)
                wants_retry = rounds.wants_another()
                if wants_retry and not past_deadline():
                    retry = rounds.next_candidate()
                    wants_retry = retry is not None  # no further round to wait for: the verdict stands
            with lock:
                report["meta"]["gpu"] = report["meta"]["gpu"] or (v.device if v.device != "cpu" else None)
                results[str(f)] = {**entry_for(f, v, cand, note), "run": this_run, "attempt": attempt}
                if wants_retry:  # until the retry's verdict replaces this entry
                    results[str(f)]["retry_pending"] = True
            e = results[str(f)]
            on_event(f"{f.name}: {'solved' if e['solved'] else e['status']}"
                     + (f", {e['speedup_eager']:.2f}x eager" if e["speedup_eager"] else "")
                     + (f"  ({e['message'][:120]})" if not e["solved"] and e["message"] else "")
                     + (f"; trying {retry.name}" if retry is not None else ""))
            save()
            if retry is not None:
                launch(f, task, rounds, retry, note, attempt + 1)

        fut.add_done_callback(finished)
        with lock:
            pending.append(_Attempt(f, task, rounds, cand, note, attempt, fut))

    for f in files:
        if str(f) in results and str(f) not in rerun:
            continue
        if past_deadline():
            break
        try:
            task = find_task(f)
            task.precision = precision  # type: ignore[assignment]
            plan = plan_task(task)
        except TaskError as e:
            results[str(f)] = entry_for(f, None, None, str(e), status="task-error")
            continue
        except Exception as e:  # noqa: BLE001 - a planner bug on one problem must not end the bench
            launch(f, find_task(f), None, None, f"planner/coder error: {type(e).__name__}: {e}", 1)
            continue
        rounds = Rounds(code, task, plan, policy)
        cand = rounds.next_candidate() if plan.supported else None
        if rounds.coder_error:
            note = f"planner/coder error: {rounds.coder_error}"
        else:
            note = "; ".join(plan.unsupported)[:300] if cand is None else ""
        # Without a candidate only the reference is timed.
        launch(f, task, rounds if cand is not None else None, cand, note, 1)

    def busy() -> bool:
        with lock:
            return in_callbacks[0] > 0 or any(not p.verdict.done() for p in pending)

    def _run_alone(f: Path, task: Any, rounds: Rounds | None, cand: Candidate | None, note: str, attempt: int) -> None:
        while True:
            fut = pool.submit(task, cand, out / "runs" / (f"{f.stem}-alone" + ("" if attempt == 1 else f"-r{attempt}")))
            try:
                v = fut.result()
            except Exception as e:  # noqa: BLE001
                on_event(f"{f.name}: verifier error on the re-run: {e}")
                return
            with lock:
                results[str(f)] = {**entry_for(f, v, cand, note), "run": this_run, "ran_alone": True, "attempt": attempt}
            e = results[str(f)]
            on_event(f"{f.name}: {'solved' if e['solved'] else e['status']} (alone)")
            save()
            if rounds is None or cand is None:
                return
            rounds.record(cand, v)  # the same candidate: its round's verdict is replaced
            if not rounds.wants_another() or past_deadline():
                return
            retry = rounds.next_candidate()
            if retry is None:
                return
            on_event(f"{f.name}: trying {retry.name} (alone)")
            cand, attempt = retry, attempt + 1

    cancelled = 0
    while busy():
        if past_deadline():
            with lock:
                snapshot = list(pending)
            left = [p for p in snapshot if p.verdict.cancel()]
            if left and not cancelled:
                on_event(f"deadline of {deadline_s:.0f} s reached: {len(left)} problem(s) not started (rerun with --resume)")
            cancelled += len(left)
        time.sleep(0.5)
    # Problems that ran out of GPU memory beside other workers get the GPU to themselves, with the
    # rounds a wrong result would have had.
    if jobs > 1:
        last = {str(p.path): p for p in pending}  # the latest attempt of each
        for p in last.values():
            entry = results.get(str(p.path))
            if entry is None or entry.get("status") != "oom" or past_deadline():
                continue
            on_event(f"{p.path.name}: out of memory beside other workers; running it again alone")
            _run_alone(p.path, p.task, p.rounds, p.cand, p.note, p.attempt)

    pool.shutdown()
    report["meta"]["gpu"] = report["meta"]["gpu"] or "none (CPU only)"
    save()
    return report
