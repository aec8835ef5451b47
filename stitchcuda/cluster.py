"""`stitchcuda bench --ray ADDRESS`: a Ray task per problem, over a cluster's GPUs.

Each task runs `bench.bench_problem` (the local bench's rounds: plan, code, verify) on the one GPU
Ray gave it (`num_gpus=1`; 0 on a cluster without GPUs, the CPU path), in run folders on its own
node, and returns the problem's entry. The driver writes bench.json as the entries arrive, so
--resume carries on from there. A task whose worker or node dies (its result lost with it) is run
again, at most `retries` times, on whichever node Ray picks; then the problem's entry says "lost".

Imported only for --ray: ray is an optional extra (`pip install 'stitchcuda[ray]'`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stitchcuda.agents.rounds import BENCH_POLICY, Coder, RoundPolicy
from stitchcuda.agents.verify.verifier import VerifyOptions

from .bench import BenchReport, bench_problem, entry_for, expand_paths
from .task import UsageError


@dataclass(frozen=True)
class ProblemSpec:
    """What a task needs to bench one problem on any node. The problem file's text travels with it:
    the driver's paths need not exist there (a KernelBench problem is one self-contained file)."""

    name: str  # the file's name
    level_dir: str  # the folder it sits in ("level2"): the entry's level is read from it
    source: str
    coder: str | Coder
    policy: RoundPolicy
    precision: str
    verify_opts: VerifyOptions
    deadline_at: float | None  # epoch seconds after which no round starts (None: no deadline)
    runs_dir: str | None  # the folder for run folders on each node (None: the node's temp folder)
    run_id: str
    attempt: int  # 1 for the first try, 2 for the first retry, ...
    mode: str = "as-built"  # Task.mode


@dataclass(frozen=True)
class ProblemResult:
    """A task's answer: the problem's entry and where it was measured."""

    entry: dict[str, Any] | None  # None: not started, the deadline had passed
    lines: list[str]  # progress lines, shown by the driver as the result arrives
    device: str | None  # the GPU the verdict was measured on; None on the CPU
    node_ip: str
    node_id: str
    run_dir: str  # its run folders, on that node


def problem_dir(spec: ProblemSpec) -> Path:
    """Where one try of one problem works on its node: each try has its own, so a retry never
    shares files with what a dead try's processes may still be writing."""
    root = Path(spec.runs_dir) if spec.runs_dir else Path(tempfile.gettempdir()) / "stitchcuda-ray"
    return root / spec.run_id / f"{Path(spec.name).stem}-try{spec.attempt}"


def bench_task(spec: ProblemSpec) -> ProblemResult:
    """The body of a Ray task: one problem's rounds on this node."""
    import ray

    from stitchcuda.agents.loop import make_coder
    from stitchcuda.agents.verify.verifier import verify

    ctx = ray.get_runtime_context()
    node_ip, node_id = ray.util.get_node_ip_address(), ctx.get_node_id()
    work = problem_dir(spec)
    problem = work / spec.level_dir / spec.name
    problem.parent.mkdir(parents=True, exist_ok=True)
    problem.write_text(spec.source)
    # Which node and process run this try: for a person looking at the run folders (and the fault test).
    (work / "node.json").write_text(json.dumps({"node_ip": node_ip, "node_id": node_id, "pid": os.getpid()}))

    def past_deadline() -> bool:
        return spec.deadline_at is not None and time.time() > spec.deadline_at

    if past_deadline():
        return ProblemResult(None, [], None, node_ip, node_id, str(work))
    # Ray shows the task its GPU alone (CUDA_VISIBLE_DEVICES): index 0 here, which the Verifier maps
    # back to the node's device for its worker and for that GPU's lock, shared with anything else
    # on the node.
    opts = dataclasses.replace(spec.verify_opts, gpu=0 if ray.get_gpu_ids() else None)
    lines: list[str] = []
    run = bench_problem(problem, work / "runs", code=make_coder(spec.coder), policy=spec.policy,
                        precision=spec.precision, mode=spec.mode,
                        verify=lambda task, cand, path: verify(task, cand, path, opts),
                        past_deadline=past_deadline, on_event=lines.append)
    return ProblemResult(run.entry, lines, run.device, node_ip, node_id, str(work))


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"[:300]


def run_bench_ray(
    paths: list[str],
    out: Path,
    *,
    address: str,
    retries: int = 2,
    coder: str | Coder = "builtin",
    verify_opts: VerifyOptions | None = None,
    resume: bool = False,
    deadline_s: float | None = None,
    on_event: Callable[[str], None] = print,
    policy: RoundPolicy = BENCH_POLICY,
    precision: str = "tf32",
    mode: str = "as-built",
    runs_dir: str | None = None,
) -> dict[str, Any]:
    """The bench with a Ray task per problem on the cluster at `address` ("local": start one on this
    machine). bench.json is written in `out` on this machine as each problem's entry arrives."""
    try:
        import ray
        from ray.exceptions import RayError, RayTaskError
    except ImportError as e:
        raise UsageError(f"--ray needs Ray on this machine and on the cluster: pip install 'stitchcuda[ray]' ({e})") from e
    from stitchcuda.agents.loop import coder_name

    if retries < 0:
        raise UsageError("--ray-retries: 0 or more")
    book = BenchReport(expand_paths(paths), out, resume=resume,
                       meta={"coder": coder_name(coder), "precision": precision, "mode": mode, "backend": "ray",
                             "ray_address": address, "ray_retries": retries})
    started = not ray.is_initialized()
    if started:
        ray.init(address=None if address == "local" else address, logging_level="WARNING",
                 **({"include_dashboard": False} if address == "local" else {}))
    pending: dict[Any, tuple[Path, int]] = {}
    try:
        cluster_gpus = int(ray.cluster_resources().get("GPU", 0))
        book.report["meta"]["cluster_gpus"] = cluster_gpus
        if not cluster_gpus:
            on_event(f"the Ray cluster ({address}) has no GPUs: every problem runs on the CPU path "
                     "(candidates are built, nothing is checked on a GPU, timed or solved)")
        # The LLM coder reads its endpoint, model and key from the environment: the driver's go with
        # each task (the nodes' own environments may lack them).
        llm_env = {k: v for k, v in os.environ.items() if k.startswith("STITCHCUDA_LLM_")} if coder == "llm" else {}
        task = ray.remote(bench_task).options(
            num_gpus=1 if cluster_gpus else 0, num_cpus=1,
            max_retries=0,  # retried here instead, counted, and reported when they run out
            **({"runtime_env": {"env_vars": llm_env}} if llm_env else {}),
        )
        run_id = f"{dt.datetime.now():%Y%m%d-%H%M%S}-{os.getpid()}"
        deadline_at = time.time() + deadline_s if deadline_s else None

        def submit(f: Path, attempt: int) -> None:
            spec = ProblemSpec(f.name, f.parent.name, f.read_text(), coder, policy, precision,
                               verify_opts or VerifyOptions(), deadline_at, runs_dir, run_id, attempt, mode)
            pending[task.remote(spec)] = (f, attempt)

        for f in book.todo():
            submit(f, 1)
        not_started = 0
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=5.0)
            for ref in ready:
                f, attempt = pending.pop(ref)
                try:
                    res: ProblemResult = ray.get(ref)
                except RayTaskError as e:  # our code raised in the task: a bug, the same on any node
                    on_event(f"{f.name}: error in its Ray task: {_first_line(e.cause or e)}")
                    entry = entry_for(f, None, None, f"ray task error: {_first_line(e.cause or e)}", status="error")
                    book.put(f, {**entry, "tries": attempt})
                    continue
                except RayError as e:  # its worker or node died, or its result was lost with the node
                    if attempt <= retries:
                        on_event(f"{f.name}: {_first_line(e)}; running it again (retry {attempt} of {retries})")
                        submit(f, attempt + 1)
                    else:
                        on_event(f"{f.name}: lost: {_first_line(e)} (tried {attempt} time(s))")
                        entry = entry_for(f, None, None, f"lost: its Ray worker or node died on each of "
                                          f"{attempt} tries; last: {_first_line(e)}", status="lost")
                        book.put(f, {**entry, "tries": attempt})
                    continue
                if res.entry is None:
                    not_started += 1
                    continue
                for line in res.lines:
                    on_event(line)
                # The task's entry names its copy of the file: the driver's path is the problem's.
                book.put(f, {**res.entry, "path": str(f), "tries": attempt, "node_ip": res.node_ip,
                             "node_id": res.node_id, "run_dir": res.run_dir}, res.device)
        if not_started:
            on_event(f"deadline of {deadline_s:.0f} s reached: {not_started} problem(s) not started (rerun with --resume)")
    finally:
        for ref in pending:  # cut off (Ctrl-C): bench.json keeps what arrived; --resume does the rest
            ray.cancel(ref, force=True)
        if started:
            ray.shutdown()
    return book.finish()
