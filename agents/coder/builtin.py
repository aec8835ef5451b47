"""The built-in Coder: a Plan -> fused_kernels.cu + model_new.py.

No model in the loop: pointwise groups come from codegen's table and walker, every other op from its
family's emitter (agents/coder/kernels.py), and ModelNew is written from the traced graph alone.
ModelNew keeps the reference's constructor signature and state_dict
(same keys, shapes, dtypes) so the Verifier can load the reference's weights into it; its forward
only checks its inputs, allocates outputs and calls the kernels.
"""

from __future__ import annotations

from stitchcuda.agents.coder import batch, codegen, kernels, precision_mix
from stitchcuda.agents.coder.emit_reduce import emit_siblings
from stitchcuda.agents.coder.model_new import CU_FILE, PY_FILE, render_model
from stitchcuda.agents.coder.orchestrate import Step, describe, libraries, orchestrator
from stitchcuda.agents.graph import by_name, picks
from stitchcuda.types import FINITE_MISS, Candidate, Plan, Precision, Task, Verdict


def code(task: Task, plan: Plan, feedback: Verdict | None = None) -> Candidate | None:
    """Candidate for a plan the built-in coder covers entirely, else None (a `Coder`, agents/rounds.py).

    The coder is deterministic. Feedback changes one thing: after each candidate that failed the
    comparison, the next one's fp32 library calls are one step more exact (`precision_after`: with
    first, where it applies, 3xTF32 for the matmuls that feed exp or a softmax
    (precision_mix.py), then convolution without TF32 and every matmul as 3xTF32, then matmul in
    full fp32; slower, closer to the reference). Otherwise a further round yields the same files, which the rounds recognise and stop on."""
    if not plan.supported or any(g.kind not in ("pointwise", "kernel") for g in plan.groups):
        return None
    from stitchcuda.task import load_task_module

    _, cls = load_task_module(task)
    # Under the strict policy no rung may use TF32: the ladder starts (and stays) at full fp32.
    floor = kernels.PRECISE_FP32 if task.precision == "strict" else kernels.PRECISE_TF32
    if wrong_only_at_other_batches(feedback):
        # The batch analysis let through a module whose samples are not independent: the same
        # kernels and precision again, with every shape fixed (and fixed for the rounds after).
        level = max(floor, LEVEL_OF[feedback.precision])
        return build_candidate(plan.for_level(level >= kernels.PRECISE_SPLIT), cls, title=task.name, precise=level,
                               dynamic=False)
    level = max(floor, precision_after(feedback))
    if level == kernels.PRECISE_MIXED and not precision_mix.applies(plan):
        level = kernels.PRECISE_SPLIT  # (off, or it would build what TF32 or 3xTF32 builds)
    dynamic = feedback is None or feedback.batch is not None or not batch.analyse(plan.graph).dynamic
    return build_candidate(plan.for_level(level >= kernels.PRECISE_SPLIT), cls, title=task.name, precise=level,
                           dynamic=dynamic)


def wrong_only_at_other_batches(feedback: Verdict | None) -> bool:
    """The verdict of a dynamic-batch candidate that was right at the traced batch and wrong at
    another (its checks' sets named batch-N)."""
    if feedback is None or feedback.batch is None or feedback.status != "incorrect":
        return False
    failed = [c["set"] for c in feedback.checks if c.get("ok") is False]
    return bool(failed) and all(s.startswith("batch-") for s in failed)


# The built-in coder works from the traced graph and the plan's groups only: the loop need not
# profile the reference before its first candidate (agents/loop.py).
code.reads_profile = False  # type: ignore[attr-defined]


# Candidate.precision for each of the emitters' levels (kernels.PRECISE_*), and back.
PRECISION_OF: dict[int, Precision] = {kernels.PRECISE_TF32: "tf32", kernels.PRECISE_MIXED: "mixed",
                                      kernels.PRECISE_SPLIT: "3xtf32", kernels.PRECISE_FP32: "fp32"}
LEVEL_OF: dict[Precision, int] = {p: lvl for lvl, p in PRECISION_OF.items()}
# The name's suffix per level, for people reading a run folder; the ladder reads Verdict.precision.
_SUFFIX = {kernels.PRECISE_MIXED: "-mixed", kernels.PRECISE_SPLIT: "-fp32", kernels.PRECISE_FP32: "-fp32full"}


def precision_after(feedback: Verdict | None) -> int:
    """The precision level for the round after `feedback`: up one step from the level of the
    candidate it judged (Verdict.precision) when that one missed the tolerance on finite values
    (an output-mismatch Finding marked FINITE_MISS); the same level when it was wrong otherwise
    (NaN where the reference has none, an input written over: more precision would not help, and
    the same files end the rounds); else the default (TF32)."""
    if feedback is None or feedback.status != "incorrect":
        return kernels.PRECISE_TF32
    failed = LEVEL_OF.get(feedback.precision, kernels.PRECISE_TF32)
    codes = {f.code for f in feedback.findings}
    finite_miss = any(f.code == "output-mismatch" and f.data.get(FINITE_MISS) for f in feedback.findings)
    if not finite_miss or "mutates-input" in codes:
        return failed
    return min(failed + 1, kernels.PRECISE_FP32)


def build_candidate(
    plan: Plan, cls: type, *, title: str = "", host: bool = False, precise: int = kernels.PRECISE_TF32,
    dynamic: bool = True,
) -> Candidate:
    """The files for a supported plan. `cls` (the reference class) lends its signatures only.

    host=True targets the CPU: the .cu also gets `<kernel>_host` entry points that run the same
    chunk code serially, and ModelNew calls those on CPU tensors. Tests use it to run the whole
    candidate against PyTorch on a machine without a GPU."""
    steps = make_steps(plan, precise=precise)
    # The batch dimension stays free where every sample is computed on its own (agents/coder/batch.py).
    info = batch.analyse(plan.graph) if dynamic else batch.BatchInfo(None, "fixed after a wrong result at another batch size")
    writes_state = any(n["op"] == "copy_" for n in plan.graph)
    if info.dynamic and writes_state:
        info = batch.BatchInfo(None, "forward writes module state")
    if host:
        lacking = [s.name for s in steps if isinstance(s, kernels.Kernel) and not s.host]
        if lacking:
            raise ValueError(f"no CPU entry point for {', '.join(lacking)} (library kernels run on the GPU only)")
    pointwise = [s for s in steps if isinstance(s, codegen.PointwiseKernel)]
    sources = [s.source for s in steps if isinstance(s, kernels.Kernel)]
    files = {
        CU_FILE: "\n".join([codegen.render(pointwise, host_entry=host, after=sources), *sources, orchestrator(steps, host=host)]),
        PY_FILE: render_model(plan.graph, steps, cls, title=title, host=host, batch=info),
    }
    notes = [f"{s.name}: {describe(s)}" for s in steps]
    name = "builtin-pointwise" if len(pointwise) == len(steps) else "builtin"
    level = min(int(precise), kernels.PRECISE_FP32)
    # A level that changed no library call (no fp32 matmul or convolution) builds the default's files.
    if not any("no TF32" in describe(s) or "3xTF32" in describe(s) for s in steps):
        level = kernels.PRECISE_TF32
    name += _SUFFIX.get(level, "")
    return Candidate(name=name, files=files, module=PY_FILE, origin="builtin", notes=notes, precision=PRECISION_OF[level],
                     kernels_source=CU_FILE, libraries=libraries(steps), batch=info.size)


def make_steps(plan: Plan, *, precise: int = kernels.PRECISE_TF32) -> list[Step]:
    """The plan's groups as kernels, in the order forward launches them."""
    steps: list[Step] = []
    # The mixed level is per kernel: 3xTF32 for the calls that feed exp or a softmax, TF32 elsewhere.
    split = precision_mix.sensitive(plan) if precise == kernels.PRECISE_MIXED else set()
    live = {n for g in plan.groups for n in g.outputs}
    # A result an epilogue reads is computed, though never stored: its kernel must see it used.
    live |= {g.detail["epilogue"]["value"] for g in plan.groups if g.detail.get("epilogue")}
    nodes = by_name(plan.graph)
    getitems = picks(plan.graph)  # multi-result node -> the getitems that pick its results
    for k, group in enumerate(plan.groups):
        if group.kind == "pointwise":
            steps.append(codegen.lower(plan.graph, group, f"stitch_pw{k}", nodes=nodes))
        elif group.detail.get("siblings"):  # two reductions in one pass (planner's take_siblings)
            steps.append(emit_siblings(plan.graph, group.nodes, f"stitch_k{k}",
                                       [(o["members"], o["node"]) for o in group.detail["siblings"]],
                                       live=live, getitems=getitems, nodes=nodes))
        else:
            roots = group.detail.get("roots", {})
            # The planner's prologue: the pointwise node this kernel computes as it reads it.
            pro = group.detail.get("prologue")
            # ...and its epilogue: the pointwise ops after it, computed as it stores its result.
            epi = group.detail.get("epilogue")
            # ...and a cat's sources computed as it reads them.
            srcs = {s["node"]: codegen.prologue(plan.graph, s["members"], s["node"], nodes=nodes)
                    for s in group.detail.get("sources", [])}
            steps.append(
                kernels.emit(
                    plan.graph, group.nodes[0], f"stitch_k{k}",
                    roots=roots, live=live, getitems=getitems, nodes=nodes,
                    precise=precise if precise != kernels.PRECISE_MIXED
                    else kernels.PRECISE_SPLIT if group.nodes[0] in split else kernels.PRECISE_TF32,
                    prologue=codegen.prologue(plan.graph, pro["members"], pro["node"], nodes=nodes) if pro else None,
                    epilogue=codegen.epilogue(plan.graph, epi["members"], epi["node"], epi["value"], nodes=nodes)
                    if epi else None,
                    sources=srcs,
                    gathered=group.detail.get("gathers", ()),
                )
            )  # fmt: skip
    return steps
