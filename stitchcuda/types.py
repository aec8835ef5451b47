"""The plain data passed between the agents.

Every contract between Planner, Coder and Verifier is one of these dataclasses, so a run can be
followed (and serialised) step by step: Task -> Plan -> Candidate -> Verdict (with Findings).
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

# How exactly a candidate's fp32 library calls (matmul, convolution) compute, lowest first: the
# built-in Coder's precision ladder climbs it one step after each wrong result.
#   tf32:   TF32 tensor cores (the Verifier's matmul/conv tolerance allows it), the default; also
#           what a candidate without such calls is built at
#   mixed:  matmul as 3xTF32 where its result feeds exp or a softmax, the other matmuls and every
#           convolution TF32 (agents/coder/precision_mix.py; STITCHCUDA_MIXED_PRECISION=0 skips it)
#   3xtf32: matmul as 3xTF32 (split operands, still tensor cores) and convolution without TF32
#   fp32:   matmul in full fp32 on the FMA units too, as PyTorch's own default runs it
Precision = Literal["tf32", "mixed", "3xtf32", "fp32"]
PRECISIONS: tuple[Precision, ...] = ("tf32", "mixed", "3xtf32", "fp32")

# The user's precision policy for a run (the `precision` setting and flag; agents/verify/precision.py):
#   tf32:   fp32 matmuls and convolutions may run on TF32 tensor cores (the default)
#   strict: no TF32 anywhere: every candidate is built at "fp32"
Policy = Literal["tf32", "strict"]
# The mode a task's module is optimised in: as its constructor leaves it (KernelBench's modules: training),
# or switched with .train() / .eval() after construction, wherever the module is built (trace, Verifier,
# torch.compile's baseline, profiles).
Mode = Literal["as-built", "train", "eval"]
MODES: tuple[str, ...] = ("as-built", "train", "eval")
MODE_NAMES = {True: "training", False: "eval"}  # a module's .training, as messages say it
POLICIES: tuple[Policy, ...] = ("tf32", "strict")


def policy_of(precision: Precision) -> Policy:
    """The policy a candidate built at `precision` ran under: what torch.compile is matched to. 3xTF32
    still runs on TF32 tensor cores, so it is matched with TF32 (a baseline at least as fast as the
    candidate's own precision would give it, never a slower one)."""
    return "strict" if precision == "fp32" else "tf32"


def judging_policy(run_policy: str | None, precision: Precision) -> Policy:
    """The policy a candidate is judged (the fp64 referee's TF32 allowance) and torch.compile matched
    under: strict wherever the run's is, whatever the candidate says of itself (a hand-written file
    given to `verify --precision strict` said tf32 by default and got the allowance, a red-team
    review, 2026-12-01), else the candidate's own (policy_of)."""
    return "strict" if run_policy == "strict" else policy_of(precision)


@dataclass
class Task:
    """A module class in a Python file, with how to build it and its inputs."""

    path: Path
    class_name: str = "Model"
    # Names of the functions in the file that make the constructor arguments and the inputs.
    init_inputs_fn: str = "get_init_inputs"
    inputs_fn: str = "get_inputs"
    precision: Policy = "tf32"  # the run's precision policy: what the coders may use, how it is judged
    mode: Mode = "as-built"

    @property
    def name(self) -> str:
        return f"{self.path.stem}:{self.class_name}"


@dataclass
class FusionGroup:
    """Nodes of the traced graph that the Coder emits as one kernel (or one library call)."""

    kind: str  # "pointwise" (fused by codegen) or "kernel" (one op, from its family's emitter)
    nodes: list[str]
    inputs: list[str]
    outputs: list[str]
    note: str = ""
    # kind "kernel": "roots" maps operands to the contiguous copies the planner made of them.
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass
class Plan:
    task: str
    graph: list[dict[str, Any]]  # the traced graph, one dict per node (op, args, shape, dtype)
    groups: list[FusionGroup] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)  # why parts of the graph cannot be covered
    notes: list[str] = field(default_factory=list)
    # The reference's time per op, submodule and source line (profiling.reference), where measured.
    profile: dict[str, Any] | None = None
    # The plan for the Coder's exact rungs (convolutions without TF32), where it differs: channels-last
    # results gain on tensor-core convolutions only, and cost a copy on cuDNN's FMA ones.
    exact: Plan | None = None

    @property
    def supported(self) -> bool:
        return not self.unsupported and bool(self.groups)

    def for_level(self, exact: bool) -> Plan:
        """This plan, or for an exact rung its `exact` plan where there is a supported one."""
        return self.exact if exact and self.exact is not None and self.exact.supported else self


@dataclass
class Candidate:
    """Source files of one attempt. `files` maps file name -> text; `module` names the Python file
    defining ModelNew. Everything else (.cu, .cpp, .h) is compiled by the runtime or by the module."""

    name: str
    files: dict[str, str]
    module: str = "model_new.py"
    origin: str = "builtin"  # builtin | llm | user
    notes: list[str] = field(default_factory=list)
    precision: Precision = "tf32"  # the level its fp32 library calls were built at (PRECISIONS)
    # Set where the module loads its kernels with stitchcuda.kernel_loader: the .cu to prebuild for
    # the proposal and the CUDA libraries it links.
    kernels_source: str = ""
    libraries: list[str] = field(default_factory=list)
    # The traced batch where forward takes any size of its arguments' first dimension (the Verifier
    # then checks other sizes too); None: every shape fixed.
    batch: int | None = None

    def write(self, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        for fname, text in self.files.items():
            (folder / fname).write_text(text)
        return folder / self.module

    @classmethod
    def from_file(cls, path: Path) -> Candidate:
        """A candidate someone else wrote: the module, the sources beside it that the module names
        (and those sources' #include of sources beside them, in turn), and every header beside it.
        Not every source in the folder: one the module never builds is not the candidate's, and
        the Verifier reads every file it is given for hacks."""
        files = {path.name: path.read_text()}
        beside = {p.name: p for p in path.parent.iterdir() if p.is_file()}
        for name, sib in beside.items():
            if sib.suffix in {".cuh", ".h", ".hpp"}:
                files[name] = sib.read_text()
        todo = [n for n in beside if Path(n).suffix in {".cu", ".cpp", ".cc", ".c"} and n in files[path.name]]
        while todo:
            name = todo.pop()
            if name in files:
                continue
            files[name] = beside[name].read_text()
            todo += [n for n in re.findall(r'#\s*include\s*"([^"]+)"', files[name]) if n in beside and n not in files]
        return cls(name=path.stem, files=files, module=path.name, origin="user")


@dataclass
class Finding:
    """One observation about a candidate: a hack, a failure, or (later) a profile result."""

    code: str  # e.g. "torch-compute-in-forward", "cached-output", "memory-bound"
    message: str  # one line, fit for an editor diagnostic
    severity: str = "error"  # error | warning | info
    kernel: str | None = None
    line: int | None = None  # 1-based line in `file`
    file: str | None = None
    # Typed details by code. "output-mismatch": data["set"] (the input set) and data[FINITE_MISS]
    # (True where finite values missed the tolerance, the one miss more precision can mend).
    data: dict[str, Any] = field(default_factory=dict)


FINITE_MISS = "finite_miss"


@dataclass
class Timing:
    median_ms: float
    min_ms: float
    max_ms: float
    trials: int
    # The call's host time inside the timed window (until it returned, its work queued), median over
    # the same trials: what of median_ms the GPU spent waiting for the host to launch, where the
    # host path was cold from the flush and checks between trials (not a loop's warm figure).
    host_ms: float | None = None


@dataclass
class Verdict:
    candidate: str
    status: str  # ok | build-failed | incorrect | hacked | crashed | timeout | oom | error | unverified
    built: bool = False
    correct: bool = False
    hack_findings: list[Finding] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    build_s: float | None = None
    build_log: str = ""
    tolerance: dict[str, Any] = field(default_factory=dict)
    checks: list[dict[str, Any]] = field(default_factory=list)  # one per input set
    eager: Timing | None = None
    compiled: Timing | None = None  # torch.compile with PyTorch's default settings
    ours: Timing | None = None
    # The candidate's GPU time alone, timed as `ours` but with every launch queued before the GPU
    # reaches it (timing.time_gpu_ahead): ours less this is what its host path costs a forward.
    ours_gpu: Timing | None = None
    # Host microseconds of one forward until it returns, and of a one-element CUDA allocation in the
    # same process (timing.host_us): what the host path costs where the Verifier timed it.
    host_us: dict[str, float] = field(default_factory=dict)
    # torch.compile under the candidate's own precision policy (compile_policy): timed where the
    # reference has TF32-sensitive ops and that policy's switches differ from PyTorch's defaults;
    # elsewhere the default figure is already matched and this is None.
    compiled_matched: Timing | None = None
    compile_policy: str = ""  # the policy the matched figure was taken under ("tf32" | "strict")
    # torch.compile under the candidate's policy where it missed the tolerance the candidate met on
    # the sets it passed: {"policy", "median_ms", "why"}; the matched figure is then the strict one.
    compile_rejected: dict[str, Any] | None = None
    compile_first_call_s: float | None = None
    # Why torch.compile gave no figure, where it failed on the reference ("": it did not fail).
    compile_error: str = ""
    device: str = ""
    message: str = ""
    notes: list[str] = field(default_factory=list)
    log_tail: str = ""
    phases: dict[str, float] = field(default_factory=dict)  # seconds spent in each worker phase
    # The worker's local-change bases, kept for the blind check's pairs (local_change.keep_base): their
    # seeds and their kept outputs' file digest; the Verifier's own, dropped once the blind check ran.
    local_base: dict[str, Any] | None = None
    # One forward of the candidate, per kernel (the profiler's name, library kernels too): its GPU
    # microseconds and its launches. Nsight Compute profiles the hottest, and stops after them.
    kernel_us: dict[str, float] = field(default_factory=dict)
    kernel_launches: dict[str, int] = field(default_factory=dict)
    # The same for one forward of torch.compile's module (default settings), profiled after every
    # timing: where the baseline's time goes, kernel by kernel, beside the candidate's.
    compile_kernel_us: dict[str, float] = field(default_factory=dict)
    rubric: dict[str, Any] = field(default_factory=dict)  # agents/rubric.py, filled in by the loop
    # The candidate's precision level (Candidate.precision), so feedback on this verdict says which
    # level was judged; recordings from before the field read as the default.
    precision: Precision = "tf32"
    # The policy its outputs were judged under (judging_policy: the fp64 referee's TF32 allowance).
    judged_policy: str = ""
    # Candidate.batch: the traced batch where the candidate took any batch size (its checks then
    # include the sets named batch-N), None where its shapes were fixed.
    batch: int | None = None
    batch_sizes: list[int] = field(default_factory=list)  # the other batch sizes it was checked at
    # Microseconds in which one profiled forward's kernels ran (their union): the floor of its time.
    kernel_busy_us: float | None = None
    # Whether the worker ran inside the OS sandbox (agents/verify/sandbox.py), and what it was, or
    # why not (bubblewrap missing, user namespaces off). The audit hook protects either way.
    sandboxed: bool = False
    sandbox: str = ""
    # The worker's peak of GPU memory (its allocator's reserved bytes, MiB): what the bench admits the
    # problem's next rounds by (stitchcuda/gpu_memory.py). The candidate's process reports it, so it
    # schedules and never judges.
    gpu_peak_mb: float | None = None

    @property
    def accepted(self) -> bool:
        return self.built and self.correct and not self.hack_findings and self.status == "ok"

    @property
    def speedup_eager(self) -> float | None:
        if self.eager and self.ours and self.ours.median_ms > 0:
            return self.eager.median_ms / self.ours.median_ms
        return None

    @property
    def speedup_compile(self) -> float | None:
        if self.compiled and self.ours and self.ours.median_ms > 0:
            return self.compiled.median_ms / self.ours.median_ms
        return None

    @property
    def speedup_compile_matched(self) -> float | None:
        """Against torch.compile under the candidate's precision policy: the fair ratio. Where no
        separate matched timing was needed, the default figure is the matched one."""
        base = self.compiled_matched or (self.compiled if self.compile_policy else None)
        if base and self.ours and self.ours.median_ms > 0:
            return base.median_ms / self.ours.median_ms
        return None

    @property
    def correct_at_1e4(self) -> bool | None:
        """KernelBench's current criterion (torch.allclose at atol = rtol = 1e-4) on every random input
        set that recorded it; None where none did."""
        marks = [c["at_1e-4"] for c in self.checks if c.get("at_1e-4") is not None]
        return all(marks) if marks else None

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["accepted"] = self.accepted
        d["speedup_eager"] = self.speedup_eager
        d["speedup_compile"] = self.speedup_compile
        d["speedup_compile_matched"] = self.speedup_compile_matched
        d["correct_at_1e4"] = self.correct_at_1e4
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Verdict:
        d = {k: v for k, v in d.items() if k in {f.name for f in dataclasses.fields(cls)}}
        d["hack_findings"] = [Finding(**f) for f in d.get("hack_findings", [])]
        d["findings"] = [Finding(**f) for f in d.get("findings", [])]
        for key in ("eager", "compiled", "ours", "compiled_matched", "ours_gpu"):
            if d.get(key):
                d[key] = Timing(**d[key])
        return cls(**d)
