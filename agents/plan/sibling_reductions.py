"""Sibling reductions as one kernel: two reductions of one stage over rows of one layout that read
a tensor in common (a triplet loss's two distances, each a norm of `anchor - other`, both read the
anchor) are emitted as one pass whose loader computes both operands (emit_reduce.emit_siblings), so
the shared tensor is read once instead of twice: on the H100 level 1's TripletMarginLoss took
674 + 665 us in two kernels where torch.compile's one pass took 998 us
(bench/results/2026-12-07-h100-networks3-l1-l3-b217036.md).

Kernels of one stage never read each other's results (a kernel's stage is one past its inputs'),
so the pair can run at either's place."""

from __future__ import annotations

from typing import Any

from stitchcuda.agents.coder import codegen, kernels
from stitchcuda.agents.coder.emit_reduce import REDUCTION_KINDS, emit_siblings, prologue_operand, siblings_on
from stitchcuda.agents.graph import Node, ref_name, view_root
from stitchcuda.target import Target


def take_siblings(
    graph: list[Node], nodes: dict[str, Node], kernel_plans: dict[str, tuple[kernels.Kernel, dict[str, str]]],
    prologues: dict[str, dict[str, Any]], busy: set[str], stage: dict[str, int], live: list[str],
    getitems: dict[str, list[Node]], target: Target,
) -> dict[str, dict[str, Any]]:
    """Pairs of reductions taken as one kernel (kernel_plans[first] becomes the pair's kernel):
    {first: {"second": name, "operands": [{"node", "members"}, {"node", "members"}]}}, what the
    Coder rebuilds the pair from. `busy`: kernels that took an epilogue, sources or gathers (left
    alone). Greedy in graph order; a pair is taken only where the emitter takes it and its kernel
    reads fewer tensors than the two did."""
    taken: dict[str, dict[str, Any]] = {}
    if not siblings_on():
        return taken
    cands = [n for n in kernel_plans if nodes[n]["op"] in REDUCTION_KINDS and not kernel_plans[n][1] and n not in busy]
    used: set[str] = set()
    for i, a in enumerate(cands):
        if a in used:
            continue
        reads_a = {x.name for x in kernel_plans[a][0].inputs}
        for b in cands[i + 1:]:
            # (Disjoint reads: nothing to read once, so no emitter call either; a stage of many
            # independent reductions, a network's weight norms, costs set intersections only.)
            if b in used or stage[a] != stage[b] or not reads_a & {x.name for x in kernel_plans[b][0].inputs}:
                continue
            operands = [_operand(nodes, n, prologues) for n in (a, b)]
            if None in operands:
                continue
            kernel_a, kernel_b = kernel_plans[a][0], kernel_plans[b][0]
            try:
                pair = emit_siblings(graph, (a, b), kernel_a.name,
                                     [(o["members"], o["node"]) for o in operands if o is not None],
                                     live=set(live), getitems=getitems, nodes=nodes, target=target)
            except (codegen.NotFusable, kernels.NotSupported):
                continue
            if len({x.name for x in pair.inputs}) >= len(kernel_a.inputs) + len(kernel_b.inputs):
                continue  # nothing read in common: two kernels cost no more traffic
            kernel_plans[a] = (pair, {})
            taken[a] = {"second": b, "operands": operands}
            used |= {a, b}
            break
    return taken


def _operand(nodes: dict[str, Node], name: str, prologues: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """What reduction `name` reads: its prologue ({"node", "members"}), or its stored operand's root
    with no members."""
    if name in prologues:
        return {"node": prologues[name]["node"], "members": list(prologues[name]["members"])}
    src = ref_name(nodes[name]["args"].get(prologue_operand(nodes[name])))
    return None if src is None else {"node": view_root(nodes, src)["name"], "members": []}
