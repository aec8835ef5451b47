"""The mixed rung of the built-in coder's precision ladder (TF32, mixed, 3xTF32, fp32): after a
TF32 candidate missed the tolerance, 3xTF32 only for the fp32 matmuls whose results reach the input
of an op that turns absolute error into relative error (exp and the softmax family), TF32 for the
other matmuls and every convolution; the rung after it splits every matmul and takes TF32 from
every convolution. (Convolutions stay out of the mixed rung: a channels-last convolution without
TF32 is a combination no GPU run has checked.)

Why: TF32 keeps 10 mantissa bits, so a product's error grows with its magnitude, and exp(s + e) =
exp(s) * exp(e): an error of 1 in a score is a factor e in its weight. The Verifier's "large" inputs
(x1000) make attention scores large. In a CPU emulation of level3/43 (MinGPT attention, TF32 operand
rounding per matmul, 2026-11-27) TF32 in the qkv projection or in q.kT missed the tolerance on
those inputs, and TF32 in att.v and the output projection met it on every input set; the bench ran
that problem with every matmul split (3xTF32), the attention matrix's split copies included.

On by default (STITCHCUDA_MIXED_PRECISION=0 turns it off). On an H200 at 96cd5d8 (2026-11-28,
bench/results/2026-11-28-h200x2-mixed-precision-96cd5d8.md) it met the tolerance on level3/31 and
level1/97 (1.19x and 1.68x faster than 3xTF32 everywhere) and missed it on level3/43, which then
ran at 3xTF32 as before. The rung is skipped where it would build what another rung builds (no such
matmul, or every one of them is; only what the plan's kernels compute counts). Bench's three rounds
(agents/rounds.py BENCH_POLICY) end at 3xTF32 where the rung applies: full fp32 is not reached."""

from __future__ import annotations

import os

from stitchcuda.agents.graph import ancestors, by_name, iter_refs
from stitchcuda.types import Plan

ENV = "STITCHCUDA_MIXED_PRECISION"
# Ops whose output's relative error is their input's absolute error.
AMPLIFIERS = frozenset({"exp", "exp_", "_softmax", "softmax", "_safe_softmax", "_log_softmax", "log_softmax",
                        "logsumexp"})
# The fp32 library calls whose precision the ladder sets (emit_gemm, emit_conv), and the fused
# attention kernel (emit_attention), whose scores' product feeds its own softmax.
MATMULS = frozenset({"mm", "addmm", "bmm", "baddbmm", "mv"})
ATTENTION = "sc_attention"
LIBRARY_OPS = MATMULS | {"convolution", ATTENTION}


def _live(plan: Plan) -> tuple[set[str], set[str]]:
    """(every node the plan's kernels compute, prologues and epilogues included; the nodes its
    library kernels are emitted from): a traced node no kernel computes is dead and counts for nothing."""
    computed: set[str] = set()
    for g in plan.groups:
        computed.update(g.nodes)
        for part in ("prologue", "epilogue"):
            computed.update((g.detail.get(part) or {}).get("members", []))
        for src in [*g.detail.get("sources", []), *g.detail.get("siblings", [])]:
            computed.update(src["members"])
    return computed, {g.nodes[0] for g in plan.groups if g.kind == "kernel"}


def library_calls(plan: Plan, ops: frozenset[str] = LIBRARY_OPS) -> set[str]:
    """The fp32 matmuls and convolutions (or the ops of `ops`) the plan's kernels call, by name."""
    _, kernels = _live(plan)
    return {n["name"] for n in plan.graph if n["name"] in kernels and n["op"] in ops and n.get("dtype") == "float32"}


def sensitive(plan: Plan) -> set[str]:
    """The fp32 matmuls whose results reach the input of an amplifying op the plan computes, through
    anything, and the fused attention kernels (a softmax of their own scores)."""
    computed, _ = _live(plan)
    amplified = [ref for n in plan.graph if n["op"] in AMPLIFIERS and n["name"] in computed
                 for ref in iter_refs(n.get("args", {}))]
    # A fused attention's softmax reads what its query, key and masks make (not its value).
    amplified += [ref for n in plan.graph if n["op"] == ATTENTION and n["name"] in computed
                  for arg in ("query", "key", "key_t", "masks") for ref in iter_refs(n["args"].get(arg))]
    return ((library_calls(plan, MATMULS) & ancestors(by_name(plan.graph), amplified))
            | library_calls(plan, frozenset({ATTENTION})))


def applies(plan: Plan) -> bool:
    """Whether the mixed rung is on and builds something of its own for this plan: some matmul
    feeds an amplifying op, and some other fp32 library call does not."""
    if os.environ.get(ENV, "1") == "0":
        return False
    some = sensitive(plan)
    return bool(some) and some != library_calls(plan)
