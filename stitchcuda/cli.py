"""The `stitchcuda` command: optimize, verify, plan, bench, serve."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import signal
import sys
import threading
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from . import events, keep, paths
from .events import Event, ProgressEvent, RoundVerdict, RunEnd
from .task import TaskError, UsageError, find_task
from .types import MODES, Candidate, Verdict

console = Console(stderr=True, highlight=False, soft_wrap=True)

# One scheme for every command (README, "Exit codes"): 0 it did what was asked (a proposal made, the
# candidate accepted, every file planned, every problem run, every doctor check passed); 1 it ran
# but that did not come about; 2 the input or the command line was wrong (argparse's own code);
# 130 cancelled.
EXIT_OK, EXIT_NONE, EXIT_USAGE, EXIT_CANCELLED = 0, 1, 2, 130


def _progress_printer(prefix: str = ""):
    """Progress for people: a phase ("round 2: build") and what happens in it, one line each."""
    last = {"phase": None}

    def show(phase: str, detail: str) -> None:
        if phase == "done" or (phase == last["phase"] and not detail):
            return
        last["phase"] = phase
        tail = f" {escape(detail)}" if detail else ""
        console.print(f"[dim]{dt.datetime.now():%H:%M:%S}[/] {escape(prefix)}[bold]{escape(phase)}[/]{tail}")

    return show


def _event_shower(show):
    """The loop's typed events, for `show(phase, detail)` as the CLI has always printed them."""

    def on_event(event: ProgressEvent | RoundVerdict) -> None:
        if isinstance(event, RoundVerdict):
            show(event.label, event.line)
        elif not (event.step == "done" and not event.detail):  # the worker's end marker: the verdict follows
            show(event.label, event.detail)

    return on_event


def _cancel_handler(cancel: threading.Event):
    def handle(signum, frame) -> None:
        # Like Ctrl-C: unwinds whatever runs now (tracing, a build); a running worker is killed on
        # the way out (the Verifier's finally), and the run folder keeps what was done.
        cancel.set()
        raise KeyboardInterrupt

    return handle


def _emit(event: Event) -> None:
    sys.stdout.write(events.to_json(event) + "\n")
    sys.stdout.flush()


def _event_printer():
    """The loop's events as JSON lines on stdout, for a program driving the run (the language server)."""

    def show(event: ProgressEvent | RoundVerdict) -> None:
        if isinstance(event, ProgressEvent) and event.step == "done" and not event.detail:
            return  # the worker's own end marker; the verdict follows
        _emit(event)

    return show


def _verify_options(args):
    from stitchcuda.agents.verify.verifier import VerifyOptions

    return VerifyOptions(
        gpu=args.gpu, timeout_s=args.timeout, trials=args.trials, time_compile=not args.no_compile,
        profile=not args.no_profile, replay=getattr(args, "replay", None),
        arches=keep.parse_arches(getattr(args, "arch", None)),
    )


def _print_verdict(v: Verdict) -> None:
    colour = "green" if v.accepted else ("yellow" if v.status == "unverified" else "red")
    console.print(f"[{colour}][bold]{v.status}[/bold][/{colour}] {escape(v.candidate)}"
                  + (f": {escape(v.message)}" if v.message else ""))
    if v.build_s is not None:
        console.print(f"  build {v.build_s:.2f} s")
    if v.tolerance:
        console.print(f"  tolerance rtol {v.tolerance.get('rtol')} ({v.tolerance.get('why')})")
    failed = [c for c in v.checks if c.get("ok") is False]
    passed = [c for c in v.checks if c.get("ok")]
    if v.checks:
        console.print(f"  input sets: {len(passed)} passed, {len(failed)} failed"
                      + (f"; first failure {failed[0]['set']}: {escape(failed[0]['message'])}" if failed else ""))
    for f in v.hack_findings:
        where = f" ({f.file}:{f.line})" if f.line else ""
        console.print(f"  [red]hack[/] {f.code}: {escape(f.message)}{where}")
    for f in v.findings:
        where = f" ({f.file}:{f.line})" if f.line else ""
        console.print(f"  [yellow]{f.code}[/]: {escape(f.message)}{where}")
    matched = f"torch.compile ({v.compile_policy})"
    for label, t in (("eager", v.eager), ("torch.compile", v.compiled), (matched, v.compiled_matched),
                     ("candidate", v.ours)):
        if t:
            console.print(f"  {label:>13}: median {t.median_ms:.4f} ms over {t.trials} trials")
    console.print(f"  precision: {v.precision}" + (f" (torch.compile matched under {v.compile_policy})"
                                                   if v.compile_policy else ""))
    if v.compile_rejected:
        r = v.compile_rejected
        took = f"median {r['median_ms']:.4f} ms, " if r.get("median_ms") else ""
        console.print(f"  torch.compile under {r['policy']}: {took}missed the tolerance this candidate met "
                      f"({escape(str(r['why']))}): not taken as the baseline")
    if v.batch is not None:
        also = f"; also checked at {', '.join(map(str, v.batch_sizes))}" if v.batch_sizes else ""
        console.print(f"  batch: any size (kernels for {v.batch}{also})")
    if v.correct_at_1e4 is not None:
        console.print(f"  KernelBench's check (allclose, atol = rtol = 1e-4) on the random sets: "
                      f"{'passed' if v.correct_at_1e4 else 'failed'}")
    if v.speedup_eager:
        console.print(f"  speedup: {v.speedup_eager:.2f}x vs eager"
                      + (f", {v.speedup_compile:.2f}x vs torch.compile" if v.speedup_compile else "")
                      + (f", {v.speedup_compile_matched:.2f}x vs torch.compile under {v.compile_policy}"
                         if v.compiled_matched and v.speedup_compile_matched else ""))
    if v.rubric:
        r = v.rubric
        console.print(f"  rubric: total {r.get('total')} (anti-hacking {r.get('anti_hacking')}, engineering "
                      f"{r.get('engineering')}, coverage {r.get('coverage')}, compliance {r.get('compliance')})")
    for n in v.notes:
        console.print(f"  [dim]note: {escape(n)}[/]")
    if v.status in {"build-failed"} and v.build_log:
        console.print("  build log (tail):\n" + "\n".join("    " + ln for ln in v.build_log.splitlines()[-25:]), markup=False)


def cmd_optimize(args) -> int:
    from stitchcuda.agents.loop import LoopOptions, optimize

    task = find_task(Path(args.file), args.class_name)
    task.precision = args.precision
    task.mode = args.mode
    arches = keep.parse_arches(args.arch)
    out = Path(args.out or paths.runs_dir() / f"{task.path.stem}-{dt.datetime.now():%Y%m%d-%H%M%S}")
    gpus = _gpus(args, lambda line: console.print(f"[yellow]{escape(line)}[/]"))
    if args.per_round is not None and args.per_round < 1:
        raise UsageError(f"--per-round {args.per_round}: at least 1")
    opts = LoopOptions(coder=args.coder, rounds=args.rounds, time_budget_s=args.budget, verify=_verify_options(args),
                       profile_timeline=not args.no_timeline, gpus=gpus, per_round=args.per_round)
    console.print(f"optimising [bold]{task.class_name}[/] from {task.path} -> {out}")
    cancel = threading.Event()
    # SIGTERM (how the language server stops a job) cancels like Ctrl-C: the running candidate's
    # worker is killed and the run ends with what it has.
    signal.signal(signal.SIGTERM, _cancel_handler(cancel))
    progress = _event_printer() if args.events else _event_shower(_progress_printer())
    try:
        result = optimize(task, out, opts, progress=progress, cancel=cancel)
    except KeyboardInterrupt:
        cancel.set()
        console.print("[red]cancelled[/]")
        if args.events:
            _emit(RunEnd("cancelled", cancelled=True))
        return EXIT_CANCELLED
    proposal_dir = out / "proposal"
    kept = None
    if result.proposal is not None:
        result.proposal.write(proposal_dir)
        kept = keep.prebuild_proposal(result.proposal, proposal_dir, arches)
    if args.events:
        _emit(result.end(proposal_dir, cancelled=cancel.is_set()))
    for _cand, v in result.attempts:
        _print_verdict(v)
    if result.proposal is not None:
        console.print(f"[green bold]{escape(result.message)}[/]")
        console.print(f"proposed files (nothing in your project was changed): {proposal_dir}")
        for name in result.proposal.files:
            console.print(f"  {proposal_dir / name}")
        if kept is not None and kept.library is not None:
            console.print(f"  {kept.library} (the kernels for {', '.join(kept.arches)}: the module runs without "
                          "StitchCUDA or nvcc where it is beside it)")
        elif kept is not None:
            console.print(f"[yellow]no prebuilt library in the proposal ({escape(kept.reason)}): the module "
                          "needs StitchCUDA and nvcc where it runs[/]")
    else:
        console.print(f"[yellow bold]{escape(result.message)}[/]")
    if result.first_verdict_s is not None:
        console.print(f"first candidate checked and timed {result.first_verdict_s:.1f} s after the start")
    console.print(f"artifacts: {out}")
    return EXIT_OK if result.proposal is not None else EXIT_NONE


def cmd_doctor(args) -> int:
    from stitchcuda import doctor

    return doctor.main(as_json=args.json)


def cmd_serve(args) -> int:
    try:
        from stitchcuda.server.server import main as serve
    except ImportError as e:
        raise UsageError(f"the language server needs pygls and lsprotocol: pip install 'stitchcuda[server]' ({e})") from e
    serve()
    return 0


def cmd_verify(args) -> int:
    from stitchcuda.agents.verify.verifier import verify

    task = find_task(Path(args.reference), args.class_name)
    task.precision = args.precision
    task.mode = args.mode
    cand_path = Path(args.candidate)
    if not cand_path.is_file():
        raise TaskError(f"{cand_path}: no such file")
    cand = Candidate.from_file(cand_path)
    out = Path(args.out or paths.runs_dir() / f"verify-{cand_path.stem}-{dt.datetime.now():%Y%m%d-%H%M%S}")
    verdict = verify(task, cand, out, _verify_options(args), progress=_progress_printer())
    if args.json:
        print(verdict.to_json())
    else:
        _print_verdict(verdict)
        console.print(f"verdict: {out / 'verdict.json'}")
    return EXIT_OK if verdict.accepted else EXIT_NONE


def _gpus(args, say) -> list[int] | None:
    """--gpus (bench and optimize) as GPU indices; None: not given, or no GPU here (said)."""
    if args.gpus and args.gpu is not None:
        raise UsageError("--gpu or --gpus, not both")
    if not args.gpus:
        return None
    from stitchcuda.bench import parse_gpus

    return parse_gpus(args.gpus, say)


def _existing(paths: list[str]) -> None:
    missing = [p for p in paths if not Path(p).exists()]
    if missing:
        raise UsageError(f"no such file or folder: {', '.join(missing)}")


def cmd_bench(args) -> int:
    from stitchcuda.bench import expand_paths, run_bench

    _existing(args.paths)
    wanted = len(expand_paths(args.paths))

    say = lambda m: console.print(m, markup=False)  # noqa: E731
    both = dict(coder=args.coder, verify_opts=_verify_options(args), resume=args.resume, deadline_s=args.deadline,
                precision=args.precision, mode=args.mode, on_event=say)
    if args.ray:  # ray is imported only here: it stays an optional extra
        if args.gpus or args.gpu is not None or args.jobs != 1 or args.longest_first:
            raise UsageError("--ray places each problem on a GPU of the cluster itself: drop --gpu, --gpus, --jobs "
                             "and --longest-first")
        from stitchcuda.cluster import run_bench_ray

        report = run_bench_ray(args.paths, Path(args.out), address=args.ray, retries=args.ray_retries, **both)
    else:
        gpus = _gpus(args, say) or ([args.gpu] if args.gpu is not None else None)
        report = run_bench(args.paths, Path(args.out), jobs=args.jobs, gpus=gpus, **both,
                           order_from=Path(args.longest_first) if args.longest_first else None)
    s = report["summary"]
    console.print(json.dumps(s, indent=2))
    console.print(f"results: {Path(args.out) / 'bench.json'} and bench.md")
    if s["problems"] < wanted:
        console.print(f"[yellow]{wanted - s['problems']} of {wanted} problem(s) not run[/] (--resume carries on)")
        return EXIT_NONE
    return EXIT_OK


def cmd_plan(args) -> int:
    """What the built-in coder would do with each file, without building or running anything."""
    from stitchcuda.agents.plan.planner import plan
    from stitchcuda.bench import expand_paths

    _existing(args.paths)
    rows = []
    for f in expand_paths(args.paths):
        try:
            task = find_task(f, args.class_name)
            task.mode = args.mode
            p = plan(task)
        except TaskError as e:
            rows.append({"path": str(f), "supported": False, "unsupported": [str(e)], "groups": [], "load_error": True})
            continue
        except Exception as e:  # noqa: BLE001 - the user's file failing to import is a row, not the end
            reason = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            rows.append({"path": str(f), "supported": False, "unsupported": [reason], "groups": [], "load_error": True})
            continue
        rows.append(
            {
                "path": str(f),
                "supported": p.supported,
                "unsupported": p.unsupported,
                "groups": [{"kind": g.kind, "note": g.note} for g in p.groups],
                "notes": p.notes,
            }
        )
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for r in rows:
            name = Path(r["path"]).name
            if r["supported"]:
                kinds = [g["kind"] for g in r["groups"]]
                console.print(
                    f"[green]covered[/] {escape(name)}: {kinds.count('pointwise')} pointwise, "
                    f"{kinds.count('kernel')} library/reduction kernel(s)"
                )
                if args.verbose:
                    for g in r["groups"]:
                        console.print(f"    {g['kind']}: {escape(g['note'])}", markup=True)
            else:
                # A recurrent network unrolled over its steps repeats one reason thousands of times.
                reasons = r["unsupported"] if args.verbose else r["unsupported"][:PLAN_REASONS]
                more = len(r["unsupported"]) - len(reasons)
                tail = f"; and {more} more (-v or --json lists them all)" if more else ""
                console.print(f"[red]not covered[/] {escape(name)}: {escape('; '.join(reasons) + tail)}")
        covered = sum(r["supported"] for r in rows)
        console.print(f"{covered} of {len(rows)} covered by the built-in coder")
    # Not covered by the built-in coder is an answer; a file that could not be loaded or traced is not.
    failed = [r for r in rows if r.get("load_error") or any(u.startswith("trace:") for u in r["unsupported"])]
    return EXIT_NONE if failed else EXIT_OK


PLAN_REASONS = 4  # reasons shown per file not covered, without -v


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="stitchcuda", description="Verified, faster CUDA for PyTorch modules.")
    sub = p.add_subparsers(dest="command", required=True)

    def llm_flags(sp):
        sp.add_argument("--llm-endpoint", help="OpenAI-compatible base URL (default $STITCHCUDA_LLM_ENDPOINT)")
        sp.add_argument("--llm-model", help="model name (default $STITCHCUDA_LLM_MODEL); key: $STITCHCUDA_LLM_API_KEY")

    def common(sp):
        sp.add_argument("--gpu", type=int, default=None, help="GPU index (default: the first GPU, if any)")
        sp.add_argument("--timeout", type=float, default=900.0, help="wall-clock limit per candidate, seconds")
        sp.add_argument("--trials", type=int, default=50, help="timed trials per measurement (median)")
        sp.add_argument("--no-compile", action="store_true", help="skip timing torch.compile")
        sp.add_argument("--precision", choices=["tf32", "strict"], default="tf32",
                        help="tf32: fp32 matmuls and convolutions may run on TF32 tensor cores (default); "
                             "strict: no TF32 anywhere. torch.compile is also timed under the same policy")
        sp.add_argument("--mode", choices=list(MODES), default="as-built",
                        help="the module's mode while it is optimised: as its constructor leaves it (default; "
                             "KernelBench's modules: training), or after .train() / .eval() (inference: BatchNorm's "
                             "running statistics, no dropout). ModelNew refuses the other mode where forward depends on it")
        sp.add_argument("--no-profile", action="store_true",
                        help="skip Nsight Compute on accepted candidates (about 10-30 s each)")
        sp.add_argument("--out", help="output folder")

    o = sub.add_parser("optimize", help="plan, code and verify a faster module")
    o.add_argument("file")
    o.add_argument("--class", dest="class_name", help="module class (default: Model, or the only nn.Module)")
    o.add_argument("--coder", choices=["builtin", "llm"], default="builtin")
    llm_flags(o)
    o.add_argument("--rounds", type=int, default=3)
    o.add_argument("--arch", default=None,
                   help="GPU arches the proposal's prebuilt kernel library is built for, e.g. sm_80,sm_90 "
                        "(default: this machine's GPU)")
    o.add_argument("--budget", type=float, default=None, help="time budget for the whole run, seconds")
    o.add_argument("--events", action="store_true", help="progress and result as JSON lines on stdout")
    o.add_argument("--replay", help="without a GPU: take GPU results from this recorded run's summary.json")
    o.add_argument("--no-timeline", action="store_true",
                   help="skip Nsight Systems on the reference (where nsys is installed; up to 90 s)")
    o.add_argument("--gpus", help="verify each round's candidates at once on these GPUs: 'all' or indices such as 0,1")
    o.add_argument("--per-round", type=int, default=None,
                   help="candidates a round (default: one per GPU); the LLM coder writes alternatives, "
                        "the built-in coder has one")
    common(o)
    o.set_defaults(fn=cmd_optimize)

    v = sub.add_parser("verify", help="verify a candidate ModelNew against a reference")
    v.add_argument("reference")
    v.add_argument("candidate")
    v.add_argument("--class", dest="class_name")
    v.add_argument("--json", action="store_true", help="print the verdict as JSON")
    common(v)
    v.set_defaults(fn=cmd_verify)

    pl = sub.add_parser("plan", help="trace and plan files: what the built-in coder covers, and why not")
    pl.add_argument("paths", nargs="+", help="files or folders of problems")
    pl.add_argument("--class", dest="class_name")
    pl.add_argument("--json", action="store_true")
    pl.add_argument("-v", "--verbose", action="store_true", help="list every kernel")
    pl.add_argument("--mode", choices=list(MODES), default="as-built", help="the module's mode while traced")
    pl.set_defaults(fn=cmd_plan)

    b = sub.add_parser("bench", help="run the pipeline over KernelBench-format files")
    b.add_argument("paths", nargs="+", help="files or folders of problems")
    b.add_argument("--coder", choices=["builtin", "llm"], default="builtin")
    llm_flags(b)
    b.add_argument("--jobs", type=int, default=1, help="workers per GPU (they take turns for timing)")
    b.add_argument("--resume", action="store_true", help="keep problems already in OUT/bench.json")
    b.add_argument("--deadline", type=float, default=None, help="start no new problem after this many seconds")
    b.add_argument("--longest-first", metavar="BENCH_JSON", help="start the problems that took longest in this "
                   "earlier bench.json first (unknown ones before them), so the run's tail is short")
    b.add_argument("--gpus", help="spread the problems over these GPUs: 'all' or indices such as 0,1 (--jobs workers each)")
    b.add_argument("--ray", metavar="ADDRESS", help="a Ray task per problem on this cluster ('local': start one here; "
                   "needs stitchcuda[ray])")
    b.add_argument("--ray-retries", type=int, default=2, help="times a problem whose Ray node or worker died is run "
                   "again before it is reported as lost")
    common(b)
    b.set_defaults(fn=cmd_bench, out="bench-out")

    sv = sub.add_parser("serve", help="run the language server on stdio (needs the [server] extra)")
    sv.set_defaults(fn=cmd_serve)

    dr = sub.add_parser("doctor", help="what this machine can do (GPU, nvcc, ncu, extras) and what to install")
    dr.add_argument("--json", action="store_true", help="the checks as JSON")
    dr.set_defaults(fn=cmd_doctor)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # The LLM coder reads its endpoint and model from the environment (so do the jobs the editor
    # starts); flags are a shorthand. The API key is only ever taken from the environment.
    for flag, env in (("llm_endpoint", "STITCHCUDA_LLM_ENDPOINT"), ("llm_model", "STITCHCUDA_LLM_MODEL")):
        if getattr(args, flag, None):
            os.environ[env] = getattr(args, flag)
    try:
        return args.fn(args)
    except UsageError as e:
        console.print(f"[red]error:[/] {escape(str(e))}")
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
