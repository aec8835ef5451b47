"""The Verifier: each candidate in its own worker process, under a wall clock and a memory limit.

The parent never imports candidate code. It runs the static check (pure AST), starts the worker,
watches it (progress events, memory, time, cancellation), and turns whatever happened (a verdict
on disk, a signal, a hang) into a Verdict.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from stitchcuda import keep, runtime, timing_cpus
from stitchcuda.agents.verify import blind, native_symbols, native_threads, proc_tree, report
from stitchcuda.agents.verify.locks import LockState, beside_others, file_lock, held, lock_files
from stitchcuda.agents.verify.sandbox import Box
from stitchcuda.agents.verify.static_check import check_candidate_sources
from stitchcuda.agents.verify.witness_home import WitnessHome
from stitchcuda.gpu_memory import MemoryShares
from stitchcuda.python_argv import module_argv
from stitchcuda.types import Candidate, Finding, Task, Verdict

Progress = Callable[[str, str], None]  # (phase, detail)


@dataclass
class VerifyOptions:
    gpu: int | None = None  # None: the first GPU if there is one, else CPU
    cpu_only: bool = False  # run on the CPU even where a GPU is present (host-code candidates, tests)
    timeout_s: float = 900.0
    max_host_memory_gb: float = 48.0
    gpu_memory_fraction: float | None = None
    trials: int = 50
    random_sets: int = 5  # fresh random input sets (at least 2 are needed to see cached outputs)
    adversarial: tuple[str, ...] | None = None  # kinds from inputs.ADVERSARIAL and ACROSS_INPUTS; None: all that apply
    time_compile: bool = True
    # torch.compile's baseline process (compile_baseline.py) compiles the reference up to three times
    # (default settings, the candidate's precision, eager's random draws): None gives it twice
    # timeout_s. (With one limit for both, DenseNet121's two compiles under level 3's load ran past
    # 150 s and its matched figure was lost, on the H200 at 9747415.)
    compile_timeout_s: float | None = None
    profile: bool = True  # Nsight Compute findings for an accepted candidate's kernels (GPU, ncu present)
    profile_timeout_s: float = 30.0
    replay: str | None = None  # a recorded GPU run (agents/verify/replay.py) for machines without a GPU
    # The lock file that serialises checks and timing: by default one per GPU in the temp folder,
    # none on the CPU (tests give one to CPU runs).
    lock: str | None = None
    # The longest one candidate may hold its GPU's lock in one stretch (correctness runs, or timing).
    gpu_phase_timeout_s: float = float(os.environ.get("STITCHCUDA_GPU_PHASE_TIMEOUT", "300"))
    # GPU arches of the kernels' prebuilt library (stitchcuda.keep); empty: this machine's GPU.
    arches: tuple[str, ...] = ()
    extra_env: dict[str, str] = field(default_factory=dict)
    # Threads one worker may use for CPU work (PyTorch's intra-op pool, OpenMP, Inductor's compile
    # workers); None: their own defaults, each the machine's core count. A pool sets its share.
    cpu_threads: int | None = None
    # False: the static `environment-probe` finding is left out (the audit hook's refusal of /proc
    # reads stays). For the tests of the blind check's own defences, whose candidates find the
    # witness by its command line: read by this process, out of every candidate's reach.
    environment_probes: bool = True
    # False: the static `call-count` finding is left out. For the tests of the dynamic checks, whose
    # candidates count their calls to misbehave on the ones those checks watch.
    call_counts: bool = True
    # False: the static findings on reaching other modules' objects by a name (`introspection`,
    # `computed-lookup`: getattr(print.__self__, "__imp" + "ort__")) are left out, and a getattr with a
    # written name is not read as its attribute. For the tests of the dynamic defences, whose
    # candidates reach torch._C or __import__ so to test what runs.
    name_lookups: bool = True
    # Whether other verifications share this GPU's memory (locks.beside_others: a check out of memory
    # then ends the run as `oom`, for the bench to run again alone); None: the environment's word.
    beside_others: bool | None = None


# Each of these defaults to the machine's core count per process: 16 workers on 64 cores then ran
# 16 x 64 CPU threads (and Inductor's compile pools), and every phase of a problem, GPU phases
# included, took 28% longer than with 4 workers (H200 x4, level 2).
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TORCHINDUCTOR_COMPILE_THREADS")


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def thread_env(env: dict[str, str], threads: int | None) -> dict[str, str]:
    """`env` with each thread-count variable set to `threads`, where the user has not set it."""
    if not threads:
        return env
    return {**{var: str(threads) for var in THREAD_VARS}, **env}


_GPU_CODE = re.compile(r"__global__|<<<|#include\s*<(cublas|cublasLt|cudnn|cuda_runtime)")


def needs_gpu(files: dict[str, str]) -> bool:
    """Whether the candidate's sources run device code: host-only C++ in a .cu (nvcc builds it too)
    runs, and is checked, on the CPU."""
    return any(n.endswith((".cu", ".cuh")) and _GPU_CODE.search(t) for n, t in files.items())


def cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001
        return False


def _signal_name(rc: int) -> str:
    try:
        return signal.Signals(-rc).name
    except ValueError:
        return f"signal {-rc}"


def verify(
    task: Task,
    candidate: Candidate | None,
    workdir: Path,
    opts: VerifyOptions | None = None,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
    timed: Callable[[Verdict], None] | None = None,
) -> Verdict:
    """Verify one candidate (or, with candidate=None, only time the reference). `timed` is handed a
    copy of the verdict as this process read it once the worker exited with the candidate checked
    and timed against eager, before the blind check and torch.compile's baseline: the provisional
    verdict, as data (what the worker reported: report.py)."""
    opts = opts or VerifyOptions()
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    static: list[Finding] = []
    module_path = None
    kept = None
    if candidate is not None:
        module_path = candidate.write(workdir)
        static = check_candidate_sources(candidate.files, candidate.module,
                                         reference_classes=(task.class_name, "Model"),
                                         reference_module=task.path.stem, named_lookups=opts.name_lookups)
        if not opts.environment_probes:
            static = [f for f in static if f.code != "environment-probe"]
        if not opts.call_counts:
            static = [f for f in static if f.code != "call-count"]
        if not opts.name_lookups:
            static = [f for f in static if f.code not in ("introspection", "computed-lookup")]
        unloadable = [f for f in static if f.code in UNLOADABLE]
        if unloadable:  # a build failure, not a hack: nothing to run, and no traceback to show
            return _unloadable_verdict(candidate, unloadable, workdir)
    prebuild = candidate is not None and bool(candidate.kernels_source)
    gpu = None if opts.cpu_only else opts.gpu
    if gpu is None and not opts.cpu_only and cuda_available():
        gpu = 0
    req = {
        "reference": str(task.path),
        "class_name": task.class_name,
        # Both modules switched to the task's mode once built (Task.mode), in every process that builds them.
        "module_mode": task.mode,
        "candidate": str(module_path) if module_path else None,
        "candidate_name": candidate.name if candidate else "reference",
        # What torch.compile's matched figure is timed under (types.policy_of)
        "precision": candidate.precision if candidate else "tf32",
        # The run's own policy: a strict run judges every candidate strictly (types.judging_policy).
        "policy": task.precision,
        "needs_cuda": bool(candidate and needs_gpu(candidate.files)),
        "batch": candidate.batch if candidate else None,
        "device": "cuda" if gpu is not None else "cpu",
        "trials": opts.trials,
        "random_sets": opts.random_sets,
        "adversarial": list(opts.adversarial) if opts.adversarial is not None else None,
        # A candidate's torch.compile baseline is timed in a process of its own (_compile_baseline).
        "time_compile": opts.time_compile and candidate is None,
        "gpu_memory_fraction": opts.gpu_memory_fraction,
        "beside_others": beside_others() if opts.beside_others is None else opts.beside_others,
        "gpu_lock": opts.lock or (gpu_lock_path(physical_gpu(gpu)) if gpu is not None else None),
        "run_dir": str(workdir),
        "gpu_state": str(workdir / "gpu_state.json"),
        # The worker starts while the kernels are prebuilt, and waits for the word before the
        # candidate's module is imported (_start_worker).
        "wait_for_go": prebuild,
    }
    (workdir / "request.json").write_text(json.dumps(req, indent=2))
    # The reference's weights are drawn under a secret seed (worker.reference_seed): the worker gets
    # it on stdin with its key, the blind check's processes in their requests (stdin too), the
    # baseline's process in a folder the candidate cannot see; never the run folder's request.json.
    if req.get("init_seed") is None:
        req["init_seed"] = secrets.randbelow(1 << 31) + 1
    for stale in ("result.json", "events.jsonl", "gpu_state.json"):
        (workdir / stale).unlink(missing_ok=True)
    env = thread_env(dict(os.environ, PYTHONUNBUFFERED="1", **opts.extra_env), opts.cpu_threads)
    if env.get("STITCHCUDA_NATIVE_THREAD_WATCH", "1") != "0":
        native_threads.preload(env, native_threads.library(runtime.cache_dir()))
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = physical_gpu(gpu)
        timing_cpus.assign(env, physical_gpu(gpu))
    box = Box.for_run(workdir, env, reference=task.path, locks=lock_files(req["gpu_lock"]))
    plain_env, env = env, box.env  # (box.env: a private temp folder and build folders in the run folder)
    # On a GPU the blind check's processes load torch while the worker runs (blind.Started says why
    # that is safe): the first verdict waits for them. On the CPU nothing is timed, no first verdict
    # waits, and they start once the worker has accepted the candidate (most candidates a CPU run
    # judges are rejected: loading torch twice more for each would only slow it).
    blind_wanted = candidate is not None and not static and blind.enabled()
    # The witness's own folder, made before the worker runs anything (witness_home says why).
    home = WitnessHome(candidate, workdir, plain_env, reference=task.path, locks=lock_files(req["gpu_lock"])) \
        if blind_wanted and candidate is not None else None
    started = _start_blind(req, workdir, env, home) if home is not None and gpu is not None else None
    try:
        worker = _start_worker(req, workdir, env, box)
        if prebuild:
            assert candidate is not None
            # The library the proposal would ship, built beside the module while the worker loads
            # torch, and before it imports the module: what is checked and timed is that very
            # binary. A failure here leaves the build to the worker, whose verdict then says why.
            try:
                # In the candidate's sandbox: its sources are untrusted, and nvcc reads whatever
                # they include (a red-team candidate's .incbin took a hidden file into its library).
                kept = keep.prebuild_proposal(candidate, workdir, opts.arches, wrap=box.wrap, env=box.env)
                if home is not None:
                    home.stage(kept.library)
            finally:
                _go(worker.proc)
        outcome = _watch_worker(worker, req, opts, progress, cancel, box)
        verdict = _after_worker(candidate, req, workdir, env, opts, progress, cancel, static, box, outcome, started,
                                timed, home)
    finally:
        if started is not None:
            started.close()
        if home is not None:
            home.close()
    if opts.replay and candidate is not None and gpu is None and verdict.status == "unverified":
        from stitchcuda.agents.verify import replay

        verdict = replay.overlay(verdict, replay.load(Path(opts.replay)), candidate, opts.replay)
    if candidate is not None:
        verdict.precision = candidate.precision  # what the next round's Coder reads back (feedback)
        verdict.batch = candidate.batch
    if candidate is not None and kept is not None and kept.library is not None:
        verdict.build_s = round((verdict.build_s or 0.0) + kept.seconds, 3)
        verdict.notes.append(f"kernels: {kept.library.name}, built for {', '.join(kept.arches)} (the library the "
                             "proposal ships)")
    profiled = gpu is not None and opts.profile and verdict.accepted and verdict.ours is not None
    if candidate is not None and profiled and not static:
        if not (cancel is not None and cancel.is_set()):
            _profile(verdict, candidate, workdir, env, opts, req["gpu_lock"], progress, box)
    if static:
        verdict.hack_findings = static + verdict.hack_findings
        if verdict.status in {"ok", "incorrect", "unverified"}:
            verdict.status = "hacked"
            verdict.message = "; ".join(f.message for f in verdict.hack_findings[:3])
    (workdir / "verdict.json").write_text(verdict.to_json())
    return verdict


def _after_worker(candidate: Candidate | None, req: dict, workdir: Path, env: dict[str, str],
                  opts: VerifyOptions, progress, cancel, static: list[Finding], box: Box, outcome: _Outcome,
                  started: blind.Started | None, on_timed: Callable[[Verdict], None] | None = None,
                  home: WitnessHome | None = None) -> Verdict:
    """The worker's verdict, then (for a candidate it accepted and timed) the blind check, with
    torch.compile's baseline beside it."""
    verdict = _read_verdict(workdir, candidate, outcome)
    verdict.sandboxed, verdict.sandbox = box.active, box.why
    if candidate is not None:
        _native_symbols_check(verdict, workdir, probes=opts.environment_probes)
    cancelled = cancel is not None and cancel.is_set()
    timed = candidate is not None and verdict.accepted and verdict.ours is not None and not static and not cancelled
    if timed and on_timed is not None:
        on_timed(copy.deepcopy(verdict))
    if timed and progress:
        progress(TIMED, "checked and timed against eager; torch.compile's baseline in a process of its own")
    if candidate is not None and not static and blind.enabled() and verdict.accepted and not cancelled:
        own = started is None  # (not started beside the worker: on the CPU)
        checking = started if started is not None else _start_blind(req, workdir, env, home)
        try:
            _blind_check(verdict, checking, opts, progress)
        finally:
            if own:
                checking.close()
    # After the blind check, not beside it: Inductor's compile keeps every core busy for seconds,
    # and the first verdict waits for the blind check (its processes slowed 2-3x beside it on the
    # H200). Its baseline then follows the first verdict.
    if timed and opts.time_compile and verdict.accepted and not (cancel is not None and cancel.is_set()):
        _compile_baseline(verdict, req, env, opts, progress, cancel)
    return verdict


def _start_blind(req: dict, workdir: Path, env: dict[str, str], home: WitnessHome | None) -> blind.Started:
    """The blind check's processes: the witness in its own folder and sandbox, the referee with `env`."""
    if home is None:  # (verify makes one wherever the blind check is wanted: never the run folder)
        raise ValueError("the blind check's witness needs its own folder (WitnessHome)")
    return blind.Started(home.request(req), workdir, env, home.box.wrap, home.folder, home.box.env)


def _native_symbols_check(verdict: Verdict, workdir: Path, *, probes: bool = True) -> None:
    found, note = native_symbols.findings(workdir, probes=probes)
    if note:
        verdict.notes.append(note)
    if found:
        verdict.hack_findings += found
        if verdict.status in {"ok", "incorrect", "unverified"}:
            verdict.status = "hacked"
            verdict.message = "; ".join(f.message for f in found[:3])


def _blind_check(verdict: Verdict, started: blind.Started, opts: VerifyOptions, progress) -> None:
    """After the worker has exited: no process that ran the candidate beside the reference is left to
    help the witness (a worker alive beside it could compute the reference's outputs for it)."""
    if progress:
        progress("blind", "the candidate alone on fresh inputs, judged outside its process")
    t0 = time.monotonic()
    try:
        # (On a GPU its processes take the GPU's lock while they compute there, not while they start.)
        found, note = started.check(opts.timeout_s, verdict.local_base)
    except Exception as e:  # noqa: BLE001 - what the witness left may break the judging: fail closed
        found, note = [Finding("blind-witness-failed", f"the blind check could not judge the witness's outputs: "
                               f"{type(e).__name__}: {str(e)[:300]}")], ""
    verdict.phases["blind"] = round(time.monotonic() - t0, 2)
    verdict.phases.update(started.seconds)
    if started.restarted:
        verdict.notes.append(started.restarted)
    if note:
        verdict.notes.append(note)
    missed = [f for f in found if f.code == blind.BLIND_MISS]
    found = [f for f in found if f.code != blind.BLIND_MISS]
    if found:
        verdict.hack_findings += found
        verdict.status = "hacked"
        verdict.message = "; ".join(f.message for f in found[:3])
    elif missed:
        verdict.findings += missed
        verdict.status, verdict.correct = "incorrect", False
        verdict.message = missed[0].message
    elif note.startswith(blind.OUT_OF_MEMORY):
        # Beside other checks on a shared GPU: the bench runs it again alone (RERUN_STATUSES).
        verdict.status = "oom"
        verdict.message = note
    elif not note.startswith(blind.MADE):
        # Not made (the reference alone failed): not blind-checked, so not accepted.
        verdict.status = "unverified"
        verdict.message = note
    elif progress:
        progress(BLIND_PASSED, note)


BLIND_PASSED = "blind-passed"  # the progress phase once the blind check passed (the loop's first verdict waits for it)
TIMED = "timed"  # the progress phase once the worker exited with the candidate checked and timed against eager


def _compile_baseline(verdict: Verdict, req: dict, env: dict[str, str], opts: VerifyOptions, progress,
                      cancel: threading.Event | None) -> None:
    """torch.compile's baseline for this candidate (compile_baseline.py), timed in a process of its
    own once the candidate's processes have exited, into `verdict`.

    That process never imports the candidate, so nothing the candidate set in its own process
    (Inductor's and Dynamo's configuration, patched functions) reaches the baseline; its request,
    result and caches are in a private folder of ours, not in the run folder the candidate could
    write, and it runs outside the sandbox."""
    from stitchcuda.agents.verify import compile_baseline
    from stitchcuda.agents.verify.sandbox import private_env
    from stitchcuda.inputs import fresh_seeds

    private = Path(tempfile.mkdtemp(prefix="stitchcuda-compile-"))
    try:
        creq = compile_baseline.request(req, verdict.checks, verdict.tolerance, fresh_seeds(2), str(private))
        (private / "request.json").write_text(json.dumps(creq, indent=2))
        limit = opts.compile_timeout_s if opts.compile_timeout_s is not None else 2 * opts.timeout_s
        outcome = _run_worker(creq, private, private_env(env, private), dataclasses.replace(opts, timeout_s=limit),
                              progress, cancel, None)
        _merge_compile(verdict, outcome)
    finally:
        with contextlib.suppress(OSError):  # (its log kept where people look)
            (Path(req["run_dir"]) / "compile.log").write_text(blind.tail(private / "worker.log", 20000))
        shutil.rmtree(private, ignore_errors=True)


# The verdict's fields torch.compile's process gives it.
COMPILE_FIELDS = ("compiled", "compiled_matched", "compile_policy", "compile_rejected", "compile_first_call_s",
                  "compile_kernel_us", "compile_error")


def _merge_compile(verdict: Verdict, outcome: _Outcome) -> None:
    """torch.compile's figures into the candidate's verdict: what its process reported, where it was
    cut short (time, memory, a crash) without the figure it was taking then."""
    from stitchcuda.agents.verify.compile_baseline import PHASES

    got, last = outcome.report.merged("reference") if outcome.report is not None else (None, "start")
    if got is not None:
        for name in COMPILE_FIELDS:
            setattr(verdict, name, getattr(got, name))
        if "timed_one_launch" in got.host_us:  # that process's timing floor, beside the worker's own
            verdict.host_us = {**verdict.host_us, "compile_timed_one_launch": got.host_us["timed_one_launch"]}
        verdict.notes += [n for n in got.notes if n not in verdict.notes]
        verdict.phases.update({k: t for k, t in got.phases.items() if k in PHASES})
        if got.status == "error":
            verdict.compile_error = verdict.compile_error or got.message[:300]
            verdict.notes.append(f"torch.compile's baseline failed: {got.message}"[:400])
    if last == "done" and not outcome.killed_for:
        return
    rc = outcome.returncode or 0
    how = {"timeout": f"the {outcome.seconds:.0f} s limit ended its process",
           "gpu-timeout": f"its process held the GPU for more than {outcome.gpu_limit_s:.0f} s in one stretch",
           "memory": f"its process used {outcome.peak_rss_gb:.1f} GiB of host memory",
           "cancelled": "the run was cancelled"}.get(
        outcome.killed_for or "", f"its process died ({_signal_name(rc) if rc < 0 else f'exit code {rc}'})")
    _compile_cut_short(verdict, last, how)


def _compile_cut_short(verdict: Verdict, last_phase: str, how: str) -> None:
    """The figure torch.compile's timing was taking when `how` ended it, dropped and said; those
    saved before it began stand."""
    if last_phase == "compile-profile":  # every figure was saved before it began
        verdict.notes.append(f"the profile of torch.compile's kernels was still running when {how}: no "
                             "compile_kernel_us")
    elif last_phase.startswith("compile-matched"):  # the default figure was saved before it began
        verdict.compiled_matched = None
        verdict.notes.append(f"torch.compile of the reference under the candidate's precision was still running "
                             f"when {how}: no matched figure")
    else:
        verdict.compiled = None
        verdict.compile_error = verdict.compile_error or f"still running when {how}"
        verdict.notes.append(f"torch.compile of the reference was still running when {how}: no torch.compile "
                             "timing")


# Static findings that mean the candidate's module cannot be loaded at all: its build verdict.
UNLOADABLE = {"syntax-error", "no-modelnew"}


def _unloadable_verdict(candidate: Candidate, found: list[Finding], workdir: Path) -> Verdict:
    f = found[0]
    where = f"{f.file}:{f.line}: " if f.line else f"{f.file}: "
    v = Verdict(candidate=candidate.name, status="build-failed", findings=list(found),
                message=where + f.message, build_log=where + f.message, precision=candidate.precision)
    (workdir / "verdict.json").write_text(v.to_json())
    return v


def _profile(verdict: Verdict, candidate: Candidate, workdir: Path, env, opts: VerifyOptions, lock, progress,
             box: Box) -> None:
    from stitchcuda.profiling import ncu

    if progress:
        progress("profile", "Nsight Compute on the candidate's kernels")
    # Counters from a kernel sharing the GPU with another worker's timing would describe neither.
    try:
        with file_lock(lock):
            # The report stays beside the verdict, for the user to open in Nsight Compute.
            # In the worker's sandbox: the profiled process runs the candidate's code again, and one
            # that waited for ncu (its injection is in the environment) to act would otherwise act
            # outside it (found 2026-12-01; the profile had run unsandboxed since the sandbox landed).
            prof = ncu.profile_candidate(workdir / "request.json", candidate.files, env=native_threads.without(env),
                                         timeout_s=opts.profile_timeout_s, keep_report=workdir / "ncu.ncu-rep",
                                         kernel_us=verdict.kernel_us, kernel_launches=verdict.kernel_launches,
                                         wrap=box.wrap)
    except Exception as e:  # noqa: BLE001 - the profile is extra; the verdict stands without it
        verdict.notes.append(f"profiling failed ({type(e).__name__}: {e}); timing-only verdict")
        return
    verdict.findings += prof.findings
    verdict.notes += prof.notes
    verdict.phases["ncu"] = round(prof.seconds, 2)
    if prof.csv:
        (workdir / "ncu.csv").write_text(prof.csv)


@dataclass
class _Outcome:
    returncode: int | None
    killed_for: str | None  # "timeout" | "gpu-timeout" | "memory" | "cancelled" | None
    seconds: float
    peak_rss_gb: float
    limit_gb: float
    waited_s: float = 0.0  # waiting for the GPU lock held by another candidate (not counted)
    gpu_limit_s: float = 0.0  # the limit on holding the GPU in one stretch
    report: report.Reader | None = None  # what the worker reported (drained, closed)


@dataclass
class _Worker:
    proc: subprocess.Popen
    log: IO[str]  # its open log file
    report: report.Reader  # the report pipe's read end, drained by a thread


def physical_gpu(gpu: int) -> str:
    """The device a logical index names, as the worker's CUDA_VISIBLE_DEVICES must say it: under a
    parent restricted to CUDA_VISIBLE_DEVICES=2,3, index 0 is device 2 (an index, a UUID or a MIG
    name), not the machine's first GPU."""
    visible = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    if "CUDA_VISIBLE_DEVICES" not in os.environ:
        return str(gpu)
    if gpu >= len(visible):
        raise ValueError(f"GPU {gpu}: CUDA_VISIBLE_DEVICES={os.environ['CUDA_VISIBLE_DEVICES']!r} shows "
                         f"{len(visible)} device(s)")
    return visible[gpu]


def gpu_lock_path(device: str) -> str:
    """One lock per physical device, whichever logical index a process knows it by: two benches
    started under different CUDA_VISIBLE_DEVICES share a GPU's lock only when they share the GPU."""
    return str(Path(tempfile.gettempdir()) / f"stitchcuda-gpu{re.sub(r'[^A-Za-z0-9_.-]', '_', device)}.lock")


def _run_worker(req, workdir: Path, env, opts: VerifyOptions, progress, cancel, box: Box | None) -> _Outcome:
    """Runs the worker on `workdir`'s request.json (in `box`, the candidate's sandbox, where given)
    and watches it to its end."""
    return _watch_worker(_start_worker(req, workdir, env, box), req, opts, progress, cancel, box)


def _start_worker(req, workdir: Path, env, box: Box | None) -> _Worker:
    """The worker's process on `workdir`'s request.json, its open log, and the read end of the pipe
    it reports on (report.py; the write end's number is its second argument). Where the request
    says wait_for_go, it reads one line of its stdin (`_go`) before the candidate's code is imported."""
    log = (workdir / "worker.log").open("w")
    module = "stitchcuda.agents.verify." + ("compile_baseline" if req.get("mode") == "compile-baseline" else "worker")
    read_end, write_end = report.open_pipe()
    key = report.new_key()
    cmd = module_argv(module, str(workdir / "request.json"), str(write_end))
    try:
        proc = subprocess.Popen(
            box.wrap(cmd) if box is not None else cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.PIPE,
            env=env,
            pass_fds=(write_end,),
            start_new_session=True,  # its own process group: killing it takes any children with it
        )
    except BaseException:
        os.close(read_end)
        raise
    finally:
        os.close(write_end)  # (the worker's now: its exit is the pipe's end)
    # The key its records are signed with, on stdin (not argv or the environment: the candidate
    # reads those), read before anything of the candidate's is imported.
    assert proc.stdin is not None
    with contextlib.suppress(OSError):
        seed = f" {int(req['init_seed'])}" if req.get("init_seed") is not None else ""
        proc.stdin.write(key.hex().encode() + seed.encode() + b"\n")
        proc.stdin.flush()
        if not req.get("wait_for_go"):
            proc.stdin.close()
    return _Worker(proc, log, report.Reader(read_end, key).start())


def _go(proc: subprocess.Popen) -> None:
    """The word a waiting worker starts on; its stdin then closes (the candidate reads nothing there)."""
    with contextlib.suppress(OSError, ValueError):
        assert proc.stdin is not None
        proc.stdin.write(b"go\n")
        proc.stdin.close()


def _watch_worker(worker: _Worker, req, opts: VerifyOptions, progress, cancel, box: Box | None) -> _Outcome:
    """Watches a started worker to its end: progress events, time (the GPU lock's waits left out),
    memory, cancellation; kills its process group where any limit is passed. Its report is read to
    the end and closed by the time this returns."""
    proc, log = worker.proc, worker.log
    t0 = time.monotonic()
    killed_for = None
    peak = 0.0

    def events() -> None:
        got = worker.report.events()
        if got:
            # (A log of what the worker reported, for people: nothing reads it back.)
            with (Path(req["run_dir"]) / "events.jsonl").open("a") as f:
                f.writelines(json.dumps(e) + "\n" for e in got)
        for e in got:
            if progress:
                progress(e["phase"], e["detail"])
    # Time spent waiting for the GPU lock (another candidate holds it) is not this candidate's: the
    # limit counts the rest. Holding it is limited on its own, so a hang frees the GPU soon.
    gpu_state = Path(req["gpu_state"])
    waited = 0.0
    last = t0
    try:
        while proc.poll() is None:
            time.sleep(0.1)
            events()
            rss = proc_tree.TABLE.tree_rss(proc.pid)
            peak = max(peak, rss / 2**30)
            now = time.monotonic()
            lock = LockState.read(gpu_state)
            if lock is not None and lock.state == "waiting" and held(req.get("gpu_lock")):
                waited += now - max(last, lock.since)
            last = now
            if cancel is not None and cancel.is_set():
                killed_for = "cancelled"
            elif now - t0 - waited > opts.timeout_s or now - t0 > HARD_CAP * opts.timeout_s:
                # (The cap: a candidate holding the lock file itself, its state saying "waiting", made
                # every second a wait; a review, 2026-12-01. The witness's clock has the same cap.)
                killed_for = "timeout"
            elif lock is not None and lock.state == "holding" and now - lock.since > opts.gpu_phase_timeout_s:
                killed_for = "gpu-timeout"
            elif rss / 2**30 > opts.max_host_memory_gb:
                killed_for = "memory"
            if killed_for:
                _kill_group(proc)
                break
    finally:
        if proc.poll() is None:
            _kill_group(proc)
        log.close()
        worker.report.close()  # (the worker is gone: what it wrote is all there is)
    events()  # what the worker said between the last poll and its exit
    return _Outcome(box.returncode(proc.returncode) if box is not None else proc.returncode, killed_for,
                    time.monotonic() - t0 - waited, peak, opts.max_host_memory_gb, waited, opts.gpu_phase_timeout_s,
                    worker.report)


HARD_CAP = blind.HARD_CAP  # times the time limit a worker may take in all, waits for the GPU included


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
    # Inside a sandbox the worker is a grandchild (bwrap, then the PID namespace's own init): it
    # dies with them, a moment later. Return only once no process of the group is left.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.05)


# A reference-only worker's last phases, after its verdict is saved: torch.compile of the reference.
COMPILE_PHASES = ("compile", "compile-timing")


def _read_verdict(workdir: Path, candidate: Candidate | None, outcome: _Outcome) -> Verdict:
    """The worker's verdict as its report said it (report.Reader.merged), and what ended it."""
    name = candidate.name if candidate else "reference"
    got, last_phase = outcome.report.merged(name) if outcome.report is not None else (None, "start")
    verdict = got or Verdict(candidate=name, status="error")
    log_tail = (
        (workdir / "worker.log").read_text(errors="replace")[-4000:]
        if (workdir / "worker.log").exists()
        else ""
    )
    # A worker that wrote its final verdict ("done") and was killed on its way out keeps it; so does
    # one that ran out of time in torch.compile, which comes after the candidate's verdict and
    # timing are saved: that verdict stands, without a torch.compile figure.
    if outcome.killed_for == "timeout" and last_phase in COMPILE_PHASES and verdict.status in ("ok", "reference-only"):
        _compile_cut_short(verdict, last_phase, f"the {outcome.seconds:.0f} s limit ended the worker")
    elif outcome.killed_for and last_phase != "done":
        status, code, message = {
            "timeout": (
                "timeout",
                "timeout",
                f"no verdict after {outcome.seconds:.0f} s: killed during {last_phase} (hang?)"
                + (f"; {outcome.waited_s:.0f} s waiting for the GPU not counted" if outcome.waited_s >= 1 else ""),
            ),
            "gpu-timeout": (
                "timeout",
                "timeout",
                f"held the GPU for more than {outcome.gpu_limit_s:.0f} s in one stretch: killed during "
                f"{last_phase} (hang?), so that other candidates get the GPU",
            ),
            "memory": (
                "oom",
                "host-oom",
                f"host memory {outcome.peak_rss_gb:.1f} GiB, above the limit of {outcome.limit_gb:g} GiB, "
                f"during {last_phase}: killed",
            ),
            "cancelled": ("cancelled", "cancelled", f"cancelled during {last_phase}"),
        }[outcome.killed_for]
        verdict.status, verdict.message, verdict.correct = status, message, False
        verdict.findings.append(Finding(code, message, data={"phase": last_phase}))
    elif last_phase != "done":
        rc = outcome.returncode or 0
        how = _signal_name(rc) if rc < 0 else f"exit code {rc}"
        verdict.status = "crashed"
        verdict.message = f"worker died ({how}) during {last_phase}"
        verdict.findings.append(
            Finding("crash", verdict.message, data={"returncode": rc, "phase": last_phase})
        )
        verdict.correct = False
    if outcome.waited_s > 0:  # beside the worker's own phases: where a problem's wall time went
        verdict.phases["gpu-wait"] = round(outcome.waited_s, 2)
    if outcome.waited_s >= 1 and verdict.status != "timeout":
        verdict.notes.append(f"waited {outcome.waited_s:.0f} s for the GPU (another candidate held it): not "
                             "counted against the time limit")
    verdict.log_tail = verdict.log_tail or log_tail
    return verdict


class VerifierPool:
    """Verifies many candidates at once: `jobs_per_gpu` workers per GPU. Workers on one GPU build
    and compile in parallel and take turns (a file lock) for the correctness and timing phases."""

    def __init__(self, gpus: list[int] | None, jobs_per_gpu: int = 1, opts: VerifyOptions | None = None,
                 memory: dict[int | None, MemoryShares] | None = None):
        """`memory`: each GPU's bytes, shared by the verifications on it (stitchcuda/gpu_memory.py);
        a GPU not in it admits by worker count alone."""
        self.gpus = gpus if gpus else [None]  # type: ignore[list-item]
        self.memory = memory or {}
        self._slots: list[int | None] = [g for g in self.gpus for _ in range(jobs_per_gpu)]
        self.opts = opts or VerifyOptions()
        if self.opts.cpu_threads is None:  # the machine's cores shared among the workers
            self.opts = dataclasses.replace(self.opts, cpu_threads=max(1, usable_cpus() // len(self._slots)))
        self._free = threading.Semaphore(len(self._slots))
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=len(self._slots))

    def submit(
        self,
        task: Task,
        candidate: Candidate | None,
        workdir: Path,
        progress: Progress | None = None,
        cancel: threading.Event | None = None,
        timed: Callable[[Verdict], None] | None = None,
        need_bytes: int = 0,
        alone: bool = False,
    ) -> Future[Verdict]:
        """`need_bytes`: the GPU memory it is expected to hold (its GPU's `memory` share); `alone`: the
        GPU to itself, and judged as nothing beside it (a check out of memory is then its own)."""
        return self._pool.submit(self._run, task, candidate, workdir, progress, cancel, timed, need_bytes, alone)

    def _run(self, task, candidate, workdir, progress, cancel, timed=None, need_bytes=0, alone=False) -> Verdict:
        with self._free:
            with self._lock:
                gpu = self._slots.pop(0)
            try:
                opts = VerifyOptions(**{**self.opts.__dict__, "gpu": gpu})
                if alone:
                    opts.beside_others = False
                shares = self.memory.get(gpu)
                if shares is None:
                    return verify(task, candidate, workdir, opts, progress, cancel, timed)
                with shares.alone() if alone else shares.held(need_bytes):
                    return verify(task, candidate, workdir, opts, progress, cancel, timed)
            finally:
                with self._lock:
                    self._slots.append(gpu)

    def shutdown(self, cancel_futures: bool = False) -> None:
        """Waits for the verifications running; `cancel_futures`: those not yet started never start."""
        self._pool.shutdown(wait=True, cancel_futures=cancel_futures)
