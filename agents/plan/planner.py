"""The Planner: which parts of a traced forward become which kernels.

Pointwise ops are never stored unless something needs them stored ("materialised"): a graph output,
or an op the pointwise emitter cannot absorb (a convolution, a reduction). Every other pointwise op
is recomputed inside the kernel that needs it, at that kernel's index, so a chain or DAG of
elementwise ops with broadcast operands costs one pass over memory.

Every other op is one kernel from its family's emitter (agents/coder/kernels.py: matmul through cuBLAS,
convolution through cuDNN, reductions, norms, pooling); its results are stored contiguous, and the
pointwise ops after it read them.

Materialised nodes are grouped into one kernel when they have the same shape and the same stage:
a stage counts the non-pointwise ops on the longest path from the inputs, so a group never waits
for an op that itself waits for the group. Groups run stage by stage, library kernels of a stage
before its pointwise groups.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

from stitchcuda.agents.coder import codegen, kernels
from stitchcuda.agents.coder.emit_reduce import layout_softmax
from stitchcuda.agents.graph import (
    LOGICAL_VIEWS,
    UNSAVED_BUFFER_BYTES,
    Node,
    TraceError,
    ancestors,
    by_name,
    contiguous_strides,
    is_contiguous,
    iter_refs,
    node_inputs,
    picks,
    readers_of,
    ref,
    ref_name,
    restride,
    trace_task,
)
from stitchcuda.agents.graph import (
    fresh_name as _fresh,
)
from stitchcuda.agents.graph import (
    rename_refs as _rename_refs,
)
from stitchcuda.agents.graph import (
    view_root as _view_root,
)
from stitchcuda.agents.plan.assembled import assemble_slice_copies
from stitchcuda.agents.plan.aten_forms import rewrite_aten_forms
from stitchcuda.agents.plan.channels_last_inputs import convs_on_channels_last_inputs, kept_layout_convs
from stitchcuda.agents.plan.common_values import share_common_values
from stitchcuda.agents.plan.complex_pairs import rewrite_complex_as_pairs
from stitchcuda.agents.plan.conv_reductions import fold_conv_reductions
from stitchcuda.agents.plan.dim_norm import OP as DIM_NORM_OP
from stitchcuda.agents.plan.dim_norm import fuse_dim_norms
from stitchcuda.agents.plan.fresh_layouts import store_kernel_results_contiguous
from stitchcuda.agents.plan.gathered_linear import project_gathered_linears
from stitchcuda.agents.plan.glu import decompose_glu
from stitchcuda.agents.plan.linear_reductions import fold_linear_reductions
from stitchcuda.agents.plan.pairwise_distances import rewrite_pairwise_distances
from stitchcuda.agents.plan.patch_gemm import patch_convs_as_gemms
from stitchcuda.agents.plan.picked_products import PICKED_PRODUCTS_ENV, pick_product_rows
from stitchcuda.agents.plan.pool_first import pool_before_pointwise_convs
from stitchcuda.agents.plan.pooled_convs import compose_pools_into_convs
from stitchcuda.agents.plan.resampling import decompose_resampling
from stitchcuda.agents.plan.sibling_reductions import take_siblings
from stitchcuda.agents.plan.train_bn_prologue import split_train_batch_norms
from stitchcuda.agents.plan.transposed_products import compute_transposed_products
from stitchcuda.agents.plan.weight_norm import decompose_weight_norm
from stitchcuda.agents.random_draws import draws_as_inputs
from stitchcuda.target import Target
from stitchcuda.types import FusionGroup, Plan, Task

_LITERAL = (type(None), bool, int, float, str)


def plan(task: Task, *, target: Target | None = None) -> Plan:
    """Trace the task and group its ops. A forward that cannot be traced gives a Plan whose
    `unsupported` says why (a coder that does not need the graph may still try). `target`: the GPU
    the kernels are emitted for (plan_graph's)."""
    try:
        graph = trace_task(task)
    except TraceError as e:
        return Plan(task=task.name, graph=[], unsupported=[f"trace: {e}"])
    return plan_graph(graph, task=task.name, target=target)


# The fused attention pass (fuse_attention, emit_attention) is on unless this is "0". On the H200 at
# c8fc70e (bench/results/2026-11-29-h200-attention-mma-c8fc70e.md) its tensor-core kernel passed its
# GPU tests and took level 3's VisionAttention from 9.62 to 6.06 ms (2.34x matched torch.compile)
# and MinGPT from 7.54 to 6.05-6.64 ms; at 30035e5 its first (WMMA) kernel had been off.
FUSED_ATTENTION_ENV = "STITCHCUDA_FUSED_ATTENTION"
# "0" leaves reductions over a linear layer's outputs or a convolution's spatial dims unfolded
# (agents/plan/linear_reductions.py, conv_reductions.py), for A/B runs.
FOLD_REDUCTIONS_ENV = "STITCHCUDA_FOLD_REDUCTIONS"
# "0" leaves average pools after convolutions where they are: neither taken before a 1x1 convolution
# (agents/plan/pool_first.py) nor composed into another (agents/plan/pooled_convs.py).
POOL_FIRST_ENV = "STITCHCUDA_POOL_FIRST"


def plan_graph(graph: Sequence[Node], task: str = "", *, target: Target | None = None,
               channels_last: bool = True) -> Plan:
    """Group a traced graph's pointwise ops into FusionGroups; list what the built-in coder lacks.

    Kernels are emitted here to learn whether their emitters cover them (and their notes), sized
    for `target` (by default this process's: Target.current()). Where a convolution keeps its
    result channels-last, the plan without that (channels_last=False) comes along as `exact`.

    A softmax read only by pointwise work is kept whole where it takes that work as its epilogue;
    where it did not (the work reads other kernels' results too, say), it would be stored and read
    back, so the graph is planned again with those softmaxes split (split_softmax)."""
    target = target or Target.current()
    plan = _plan_graph(graph, task, target, channels_last, None)
    if not plan.supported and any("folded" in n for n in plan.graph):
        # A rewritten form the emitters do not cover leaves the module as it was traced, not unplanned.
        algebra = _plan_graph(graph, task, target, channels_last, None, algebra=False)
        if algebra.supported:
            algebra.notes.append("the planner's algebraic rewrites were left out: their form is not covered "
                                 f"({'; '.join(plan.unsupported)[:300]})")
            plan = algebra
    algebra_on = any("folded" in n for n in plan.graph)
    attention = True
    if not plan.supported and any(n["op"] == "sc_attention" for n in plan.graph):
        # A fused attention chain its kernel refuses leaves the chain as written, not the module unplanned.
        unfused = _plan_graph(graph, task, target, channels_last, None, algebra=algebra_on, attention=False)
        if unfused.supported:
            unfused.notes.append("attention left unfused: its fused kernel does not cover this chain "
                                 f"({'; '.join(plan.unsupported)[:300]})")
            plan, attention = unfused, False
    if softmax_whole() and (stored := _softmaxes_without_epilogue(plan)):
        return _plan_graph(graph, task, target, channels_last, stored, algebra=algebra_on, attention=attention)
    return plan


def _softmaxes_without_epilogue(plan: Plan) -> frozenset[str]:
    readers = readers_of(plan.graph)
    nodes = by_name(plan.graph)
    return frozenset(g.nodes[0] for g in plan.groups if g.kind == "kernel" and len(g.nodes) == 1
                     and g.nodes[0] in nodes and _splittable_softmax(nodes[g.nodes[0]], readers)
                     and "epilogue" not in g.detail)


def _algebra(graph: list[Node], target: Target) -> list[Node]:
    """The rewrites that change the math's form but not its value: reductions folded into the linear
    map before them, pools taken before 1x1 convolutions or composed into other convolutions,
    convolutions over non-overlapping patches as GEMMs (each said in the proposal); matrix products
    computed only where they are read (picked_products); a linear layer over concatenated gathered rows
    projects the rows' table before the gather (gathered_linear)."""
    if os.environ.get(FOLD_REDUCTIONS_ENV, "1") != "0":
        graph = fold_conv_reductions(fold_linear_reductions(graph, target))
    if os.environ.get(POOL_FIRST_ENV, "1") != "0":
        graph = compose_pools_into_convs(pool_before_pointwise_convs(graph))
    graph = patch_convs_as_gemms(graph)  # (after the pools: a pool composed into a convolution may make one)
    if os.environ.get(PICKED_PRODUCTS_ENV, "1") != "0":
        graph = pick_product_rows(graph)
    # (After the picks: a product read at one row is cut to it first, and its cut cat is left alone.)
    graph = project_gathered_linears(graph)
    return fuse_dim_norms(graph)


def _plan_graph(graph: Sequence[Node], task: str, target: Target, channels_last: bool,
                split: frozenset[str] | None, algebra: bool = True, whole_bns: frozenset[str] = frozenset(),
                attention: bool = True) -> Plan:
    traced = graph
    graph = drop_noop_restrides([dict(n) for n in graph])
    # (STITCHCUDA_CONV_CHANNELS_LAST=0 keeps every convolution's result NCHW, these too.)
    kept = kept_layout_convs(graph) if channels_last and os.environ.get(CONV_TAIL_ENV, "1") != "0" else frozenset()
    graph = store_kernel_results_contiguous(graph, keep=kept)
    graph = assemble_slice_copies(rewrite_aten_forms(decompose_weight_norm(decompose_glu(decompose_resampling(
        rewrite_pairwise_distances(rewrite_complex_as_pairs(decompose_eval_batch_norm(share_common_values(draws_as_inputs(graph))))))))))
    if algebra:
        graph = _algebra(graph, target)
    if attention and os.environ.get(FUSED_ATTENTION_ENV, "1") != "0":
        graph = fuse_attention(fold_gemm_scalars(graph), target)
    graph = compute_transposed_products(
        fold_gemm_scalars(split_conv_bias(drop_normalised_conv_bias(split_softmax(graph, split)))))
    if channels_last:
        graph = channels_last_convs(instance_norm_as_group_norm(graph))
        # (A kept convolution an earlier pass changed is stored contiguous after all.)
        graph = convs_on_channels_last_inputs(graph, kept)
        graph = store_kernel_results_contiguous(graph, only=kept)
    split_bns: dict[str, str] = {}  # training batch norm -> the kernel to normalise its input as it reads
    if prologues_on() and os.environ.get(TRAIN_BN_PROLOGUE_ENV, "1") != "0":
        graph, split_bns = split_train_batch_norms(graph, whole_bns, convs=conv_prologues_on(),
                                                   kernels=bn_prologue_kernels_on())
    nodes = by_name(graph)
    result = Plan(task=task, graph=graph)
    outputs = [n for n in graph if n["op"] == "output"]
    if len(outputs) != 1:
        result.unsupported.append("the graph has no single output node")
        return result
    output = outputs[0]
    if output.get("structure") == "other":
        result.unsupported.append("forward returns a nested structure; only a tensor or a flat tuple/list is supported")

    table = kernels.emitters()
    kinds = {n["name"]: _kind(n, nodes, table) for n in graph}
    getitems = picks(graph)  # multi-result node -> the getitems that pick its results
    live = _live(graph, output)
    reasons: dict[str, int] = {}

    def unsupported(reason: str) -> None:
        reasons[reason] = reasons.get(reason, 0) + 1

    # Library kernels first: an emitter that refuses a strided view of an operand gets a contiguous
    # copy of it (a pointwise node added to the graph), and the copy is materialised like any other.
    kernel_plans: dict[str, tuple[kernels.Kernel, dict[str, str]]] = {}
    refused: dict[str, str] = {}  # kernel nodes whose emitter said no, with its reason
    live_set = set(live)
    for name in list(live):
        if kinds[name] != "kernel":
            continue
        try:
            kernel, roots = _emit_with_copies(graph, nodes, getitems, name, live_set, target)
        except kernels.NotSupported as e:
            kinds[name] = "other"
            for other in getitems.get(name, []):
                kinds[other["name"]] = "other"
            refused[name] = str(e)
            continue
        kernel_plans[name] = (kernel, roots)
        for copy in roots.values():
            kinds[copy] = "pointwise"
            live_set.add(copy)
    live = [n["name"] for n in graph if n["name"] in live_set]
    order = {n["name"]: i for i, n in enumerate(graph)}
    # (Stages before in-place writes order them: those only move readers later, never across a value.)
    carried = _carried_values(graph, order, nodes, kinds, live, _stages(graph, kinds))
    prologues = _take_prologues(graph, nodes, kinds, kernel_plans, getitems, live, output, target, carried)
    if missed := frozenset(bn for bn, conv in split_bns.items() if conv not in prologues):
        # Their chains would be passes of their own: those norms normalise as they did.
        return _plan_graph(traced, task, target, channels_last, split, algebra, whole_bns | missed, attention)
    # (After the replan above, which plans its own: the plan without channels-last results is a
    # whole plan of its own, worth computing once.)
    if any(n["op"] == "convolution" and n["args"].get("channels_last") for n in graph):
        result.exact = plan_graph(traced, task, target=target, channels_last=False)
    sources = _take_cat_sources(graph, nodes, kinds, kernel_plans, getitems, live, output, target, carried)
    gathers = _take_gathered_sources(graph, nodes, kinds, kernel_plans, prologues, getitems, live, output, target,
                                     sources)

    materialise: set[str] = set()
    for value in output["args"]["values"]:
        src = ref_name(value)
        if src is None:
            if not isinstance(value, _LITERAL):
                unsupported(f"forward returns {value!r}, which is not a tensor or a Python literal")
            continue
        root = _view_root(nodes, src)
        if kinds[root["name"]] == "pointwise":
            materialise.add(root["name"])
        elif root["op"] == "constant":
            unsupported(f"forward returns the tensor constant {root['name']}")
        view = nodes[src]
        if view is not root and restride(view["shape"], view["stride"], view.get("offset", 0), root["shape"], root["stride"]) is None:
            unsupported(f"forward returns {src}, a view that cannot be taken of a row-major {root['name']}")
    for name in live:
        node = nodes[name]
        kind = kinds[name]
        if kind == "kernel":
            materialise |= {a.name for a in kernel_plans[name][0].inputs if kinds.get(a.name) == "pointwise"}
        elif kind == "copy":
            materialise.add(name)
        elif kind == "other":
            src = ref_name(node["args"].get("self")) if node["op"] == "getitem" else None
            if src is None or kinds.get(src) != "other":  # a getitem is reported with its source
                unsupported(refused.get(name) or _other_reason(node, nodes))
            for src in node_inputs(node):
                root = _view_root(nodes, src)
                if kinds[root["name"]] == "pointwise":
                    materialise.add(root["name"])
        elif kind == "input" and node.get("kind") == "buffer" and not node.get("persistent", True) \
                and "data" not in node and _value_read(graph, name):
            unsupported(
                f"buffer {node['key']} is not in the state_dict (persistent=False) and larger than "
                f"{UNSAVED_BUFFER_BYTES >> 10} KiB, the most the trace keeps: its values cannot reach ModelNew"
            )
        elif kind == "constant" and node.get("shape") is not None and "value" not in node:
            # Up to 64 elements the trace keeps the values, which ModelNew makes on the device.
            unsupported(f"tensor constant {name} of shape {node['shape']}: its values were not kept by the trace "
                        "(only constants of up to 64 elements are)")

    # A tensor forward writes in place (running statistics, a buffer's copy_) is read by each node at
    # its own place in forward: the stages keep every read on its side of the write.
    after, store = _in_place_order(graph, nodes, kinds, kernel_plans, live)
    materialise |= store
    stage = _stages(graph, kinds, after)
    materialise |= carried
    groups: dict[tuple[int, tuple[int, ...]], list[str]] = {}
    for node in graph:
        if node["name"] in materialise:
            groups.setdefault((stage[node["name"]], tuple(node["shape"])), []).append(node["name"])
    ordered: list[tuple[int, int, FusionGroup]] = []
    for k, ((st, shape), outs) in enumerate(sorted(groups.items(), key=lambda kv: kv[0][0])):
        members = _closure(order, nodes, kinds, outs, stored=store | {c for c in carried if stage[c] < st})
        group = FusionGroup(kind="pointwise", nodes=members, inputs=[], outputs=outs)
        try:
            kernel = codegen.lower(graph, group, f"group{k}", nodes=nodes)
        except codegen.NotFusable as e:
            unsupported(f"pointwise group {k}: {e}")
            continue
        group.inputs = [a.name for a in kernel.inputs]
        group.note = f"{' -> '.join(kernel.ops) or 'copy'} over {list(shape)}"
        ordered.append((st, 1, group))
    epilogues = _take_epilogues(graph, nodes, kinds, kernel_plans, prologues, getitems, live, output, stage,
                                [g for _, _, g in ordered], target)
    dropped = {id(d["group"]) for d in epilogues.values()}
    ordered = [t for t in ordered if id(t[2]) not in dropped]
    siblings = take_siblings(graph, nodes, kernel_plans, prologues, set(epilogues) | set(sources) | set(gathers),
                             stage, live, getitems, target)
    seconds = {s["second"] for s in siblings.values()}
    for name, (kernel, roots) in kernel_plans.items():
        if name in seconds:  # (computed by its sibling's kernel)
            continue
        group = FusionGroup(
            kind="kernel",
            nodes=[name, siblings[name]["second"]] if name in siblings else [name],
            inputs=[a.name for a in kernel.inputs],
            outputs=[a.name for a in kernel.outputs],
            note="; ".join(kernel.ops) or nodes[name]["op"],
            detail={"roots": roots, "libraries": list(kernel.libraries),
                    **({"siblings": siblings[name]["operands"]} if name in siblings else
                       {"prologue": prologues[name]} if name in prologues else {}),
                    **({"sources": sources[name]} if name in sources else {}),
                    **({"gathers": gathers[name]} if name in gathers else {}),
                    **({"epilogue": {k: v for k, v in epilogues[name].items() if k != "group"}}
                       if name in epilogues else {})},
        )
        ordered.append((stage[name], 0, group))
    result.groups = [g for _, _, g in sorted(ordered, key=lambda t: (t[0], t[1]))]

    result.unsupported += [r if n == 1 else f"{r} ({n} nodes)" for r, n in reasons.items()]
    if not result.groups and not result.unsupported:
        result.unsupported.append("forward computes nothing: it only returns inputs, views or constants")
    counted = ("pointwise", "other", "kernel", "copy")
    dead = [n["name"] for n in graph if kinds[n["name"]] in counted and n["name"] not in live_set]
    ops = sum(1 for n in live if kinds[n] in counted)
    n_pw = sum(1 for g in result.groups if g.kind == "pointwise")
    result.notes.append(
        f"traced {ops} op(s); {n_pw} pointwise kernel(s), {len(result.groups) - n_pw} library/reduction kernel(s)"
    )
    if dead:
        result.notes.append(f"{len(dead)} op(s) whose results are never used are skipped: {', '.join(dead[:8])}")
    return result


_EVAL_BN = {"native_batch_norm", "_native_batch_norm_legit_no_training"}


def decompose_eval_batch_norm(graph: list[Node]) -> list[Node]:
    """Inference-mode BatchNorm as pointwise ops, (x - mean) * rsqrt(var + eps) * weight + bias with
    per-channel views, as PyTorch computes it: it then fuses with the conv bias and activation
    around it into one pass over memory instead of a normalisation pass of its own. Training mode
    (batch statistics, running-stat updates) stays with the norm emitter."""
    readers = readers_of(graph)
    taken = {n["name"] for n in graph}
    out: list[Node] = []
    renamed: dict[str, str] = {}
    dropped: set[str] = set()
    for node in graph:
        if node["name"] in dropped:
            continue
        if renamed:
            node["args"] = _rename_refs(node.get("args", {}), renamed)
        out.append(node)
        a = node.get("args", {})
        if node["op"] not in _EVAL_BN or (node["op"] == "native_batch_norm" and a.get("training") is not False):
            continue
        picks_ = [u for u in readers.get(node["name"], []) if u["op"] == "getitem"]
        result = next((u for u in picks_ if u["args"].get("index") == 0), None)
        x = ref_name(a.get("input"))
        mean, var = ref_name(a.get("running_mean")), ref_name(a.get("running_var"))
        unused = all(not readers.get(u["name"]) for u in picks_ if u is not result)
        if result is None or not unused or None in (x, mean, var) or len(result.get("shape") or []) < 2:
            continue
        if len(picks_) != len(readers.get(node["name"], [])) or result["dtype"] not in codegen.C_TYPES:
            continue
        out.pop()
        dropped |= {u["name"] for u in picks_}
        dtypes = {n["name"]: n.get("dtype") for n in graph}
        new_nodes, value = _eval_bn_nodes(node, result, x, mean, var, dtypes, taken)
        out += new_nodes
        renamed[result["name"]] = value
    return out


def _eval_bn_nodes(
    bn: Node, result: Node, x: str, mean: str, var: str, dtypes: dict[str, Any], taken: set[str]
) -> tuple[list[Node], str]:
    """The pointwise nodes of one inference-mode BatchNorm, and the name of the last."""
    a = bn["args"]
    shape = list(result["shape"])
    per_channel = [shape[1]] + [1] * (len(shape) - 2)
    nodes: list[Node] = []

    def emit(base: str, op: str, args: dict[str, Any], like: list[int], dtype: Any, view: bool = False) -> str:
        name = _fresh(taken, f"{bn['name']}_{base}")
        target = f"aten.{op}.default" if op in {"rsqrt", "view"} else f"aten.{op}.Tensor"
        nodes.append({"name": name, "op": op, "target": target, "args": args, "shape": like,
                      "stride": contiguous_strides(like), "dtype": dtype, "offset": 0, "view": view})
        return name

    def channels(src: str) -> str:
        return emit("c", "view", {"self": ref(src), "size": per_channel}, per_channel, dtypes[src], view=True)

    dtype = result["dtype"]
    centred = emit("centred", "sub", {"self": ref(x), "other": ref(channels(mean)), "alpha": 1}, shape, dtype)
    var_eps = emit("var_eps", "add", {"self": ref(channels(var)), "other": float(a.get("eps", 1e-5)), "alpha": 1},
                   per_channel, dtypes[var])
    inv = emit("invstd", "rsqrt", {"self": ref(var_eps)}, per_channel, dtypes[var])
    value = emit("normed", "mul", {"self": ref(centred), "other": ref(inv)}, shape, dtype)
    if ref_name(a.get("weight")) is not None:
        value = emit("scaled", "mul", {"self": ref(value), "other": ref(channels(ref_name(a["weight"])))}, shape, dtype)
    if ref_name(a.get("bias")) is not None:
        value = emit("shifted", "add", {"self": ref(value), "other": ref(channels(ref_name(a["bias"]))), "alpha": 1},
                     shape, dtype)
    return nodes, value


# The ops that pass a tensor's values on unchanged (a reshape of its batch dims, a copy, an alias):
# the attention chain may run through them anywhere.
def _value_read(graph: Sequence[Node], name: str) -> bool:
    """Whether any node reads tensor `name`'s values: copy/copy_ into it take only its shape."""
    for node in graph:
        for arg, value in (node.get("args") or {}).items():
            if name in iter_refs(value) and not (node["op"] in ("copy", "copy_") and arg == "self"):
                return True
    return False


_SAME_VALUES = {"view", "_unsafe_view", "reshape", "alias", "clone", "expand"}
_SOFTMAXES = {"aten._softmax.default", "aten._safe_softmax.default"}


def fuse_attention(graph: list[Node], target: Target) -> list[Node]:
    """q·kᵀ → (scale, masks, causal) → softmax → ·v as one `sc_attention` node (emit_attention.py's
    docstring says what it holds), in place of the second product, so the scores and probabilities
    are never stored: two bmm and a softmax over [B·H, Sq, Sk] become one pass over q, k and v.

    Recognised from the graph alone: the two bmm (however q, kᵀ and v were viewed), scalings by a
    number (also those fold_gemm_scalars moved into the first product's alpha), masked_fill with a
    boolean mask, an added mask (a causal one, tril of ones built in the forward, is known as such
    and lets the kernel skip key tiles), _softmax or _safe_softmax along the last dim. Every
    intermediate must have no reader but the chain's next op: a score or probability that is also
    returned or used elsewhere keeps the chain as it is. So does a head size the kernel refuses on
    `target`. Runs before split_softmax, which would take the softmax apart."""
    from stitchcuda.agents.coder import emit_attention

    nodes = by_name(graph)
    outputs = [n for n in graph if n["op"] == "output"]
    if len(outputs) != 1:
        return graph
    # Only live readers count: the attention weights scaled_dot_product_attention's math path also
    # makes (and drops) read the probabilities too.
    live = set(_live(graph, outputs[0]))
    readers = readers_of([n for n in graph if n["name"] in live or n is outputs[0]])
    replaced: dict[str, Node] = {}
    consumed: set[str] = set()
    loose: set[str] = set()  # walked through; dropped below if nothing reads them any more
    for b2 in graph:
        if b2.get("target") != "aten.bmm.default" or b2["name"] in consumed:
            continue
        found = _match_attention(b2, nodes, readers)
        if found is None:
            continue
        node, used, walked = found
        q, v = nodes[ref_name(node["args"]["query"])], nodes[ref_name(node["args"]["value"])]
        if emit_attention.refusal(q["dtype"], q["shape"][-1], v["shape"][-1], target) is not None:
            continue
        replaced[b2["name"]] = node
        consumed |= used
        loose |= walked
    if not replaced:
        return graph
    out = [replaced.get(n["name"], n) for n in graph if n["name"] not in consumed]
    while True:  # the copies and views the operands were read through, and causal masks' builders
        read = {src for n in out for src in node_inputs(n)}
        dead = {n["name"] for n in out if n["name"] in loose and n["name"] not in read}
        if not dead:
            return out
        out = [n for n in out if n["name"] not in dead]


def _match_attention(
    b2: Node, nodes: dict[str, Node], readers: dict[str, list[Node]]
) -> tuple[Node, set[str], set[str]] | None:
    """The sc_attention node replacing bmm `b2`, the chain's nodes it makes unused, and the nodes
    walked through to reach the operands; None where b2 is not the end of an attention chain."""
    dtype = b2.get("dtype")

    def only_reader(name: str | None, reader: str) -> Node | None:
        node = nodes.get(name or "")
        users = readers.get(name or "", [])
        return node if node is not None and len(users) == 1 and users[0]["name"] == reader else None

    used: set[str] = set()
    p = only_reader(ref_name(b2["args"].get("self")), b2["name"])
    while p is not None and p.get("target") not in _SOFTMAXES and _same_values(p, nodes):
        used.add(p["name"])
        p = only_reader(ref_name(p["args"].get("self")), p["name"])
    if p is None or p.get("target") not in _SOFTMAXES or p.get("dtype") != dtype:
        return None
    rank = len(p.get("shape") or [])
    dim = p["args"].get("dim")
    if type(dim) is not int or rank < 3 or dim % rank != rank - 1:
        return None
    if p["args"].get("half_to_float") or p["args"].get("dtype") not in (None, dtype):
        return None
    used.add(p["name"])
    scores = _attention_scores(ref_name(p["args"].get("self")), p["name"], dtype, nodes, only_reader, p["shape"])
    if scores is None:
        return None
    b1, steps, chain, walked = scores
    # Through a regrouping view the softmax's rows must still be the products' rows of keys.
    if list(b1["shape"][-1:]) != list(p["shape"][-1:]):
        return None
    used |= chain
    alpha = b1["args"].get("alpha", 1)
    if alpha != 1:
        steps.insert(0, ["scale", float(alpha)])
    walked = set(walked)
    operands = []
    for src, what in ((b1, "self"), (b1, "mat2"), (b2, "mat2")):
        name, through = _logical_operand(ref_name(src["args"].get(what)), nodes)
        if nodes[name].get("dtype") != dtype:
            return None
        operands.append(name)
        walked |= through
    # kᵀ as a transpose of k's last two dims (as attention is written): k itself is the operand,
    # so that what k is a reshape, copy or upcast of can be found like q's and v's.
    key = "key_t"
    kt = nodes[operands[1]]
    if kt.get("target") == "aten.transpose.int" and len(kt["shape"]) >= 3:
        rank = len(kt["shape"])
        dims = {kt["args"].get("dim0"), kt["args"].get("dim1")}
        if all(type(d) is int for d in dims) and {d % rank for d in dims} == {rank - 2, rank - 1}:
            walked.add(operands[1])
            operands[1], through = _logical_operand(ref_name(kt["args"].get("self")), nodes)
            walked |= through
            key = "key"
    # fp16/bf16 operands upcast to fp32 for the products (scaled_dot_product_attention's math path
    # does so): read in their own dtype on tensor cores, fp32 accumulation, the fp32 result kept.
    low = [_upcast_source(nodes[n], nodes) for n in operands]
    if all(low) and len({nodes[n]["dtype"] for n in low}) == 1:
        for i, n in enumerate(low):
            walked.add(operands[i])
            operands[i], through = _logical_operand(n, nodes)
            walked |= through
    q, k, v = (nodes[n] for n in operands)
    d_k, s_k = (k["shape"][-1], k["shape"][-2]) if key == "key" else (k["shape"][-2], k["shape"][-1])
    batches = {math.prod(t["shape"][:-2]) for t in (q, k, v, b2)}
    if len(batches) != 1 or q["shape"][-1] != d_k or s_k != v["shape"][-2]:
        return None
    masks: list[str] = []
    for step in steps:  # mask names -> indices into `masks`
        if step[0] in ("fill", "add"):
            masks.append(step[1])
            step[1] = len(masks) - 1
    node: Node = {
        "name": b2["name"], "op": "sc_attention", "target": "stitchcuda.sc_attention", "view": False,
        "args": {"query": ref(q["name"]), key: ref(k["name"]), "value": ref(v["name"]),
                 "masks": [ref(m) for m in masks], "steps": steps,
                 "out_scale": float(b2["args"].get("alpha", 1)),
                 "safe": p.get("target") == "aten._safe_softmax.default"},
        "shape": list(b2["shape"]), "stride": list(b2["stride"]), "dtype": dtype, "offset": 0,
    }  # fmt: skip
    return node, used, walked


def _attention_scores(
    name: str | None, reader: str, dtype: str, nodes: dict[str, Node], only_reader: Any,
    scores: Sequence[int],
) -> tuple[Node, list[list[Any]], set[str], list[str]] | None:
    """From the softmax's input back to the first bmm: (that bmm, the steps applied to its result in
    order, the nodes of the chain, mask builders that only a causal step read); None where an op
    on the way is not one the kernel applies, or has another reader. `scores`: the softmax's shape.

    A step may be taken over a regrouping view of the scores (SAM's decomposed relative positions
    add a [.., q_h, q_w, k_h, 1] and a [.., q_h, q_w, 1, k_w] term to the scores viewed as
    [B·H, q_h, q_w, k_h, k_w]): a view keeps the elements' row-major order, so each step keeps its
    own shape and the kernel finds a mask's element from the score's flat index."""
    node = only_reader(name, reader)
    if node is None or node.get("dtype") != dtype or node.get("shape") is None:
        return None
    # Every value on the way is the scores' elements, seen as some shape of rank 2 or more: a step
    # that broadcasts them up to more (an add of a mask with a dim the scores lack) or a view to 1-D
    # is no step the kernel applies.
    if len(node["shape"]) < 2 or math.prod(node["shape"]) != math.prod(scores):
        return None
    a, target = node.get("args", {}), node.get("target")
    if target == "aten.bmm.default":
        return node, [], {node["name"]}, []

    def inner(src: str | None, step: list[Any] | None, builders: Sequence[str] = ()) -> Any:
        found = _attention_scores(src, node["name"], dtype, nodes, only_reader, scores)
        if found is None:
            return None
        b1, steps, chain, walked = found
        return b1, steps + ([step] if step else []), chain | {node["name"]}, walked + list(builders)

    if _same_values(node, nodes) or _regroups(node, nodes):
        return inner(ref_name(a.get("self")), None)
    # A causal step means key j > query i, so only where the scores are seen as [*, Sq, Sk] here.
    plain = list(node["shape"][-2:]) == list(scores[-2:]) and math.prod(node["shape"][:-2]) == math.prod(scores[:-2])
    if target in _SCALINGS:
        c = a.get("other")
        if isinstance(c, bool) or not isinstance(c, int | float) or not math.isfinite(c) or c == 0:
            return None
        return inner(ref_name(a.get("self")), ["scale", float(c) if node["op"] == "mul" else 1.0 / c])
    if target == "aten.masked_fill.Scalar":
        value, mask = a.get("value"), ref_name(a.get("mask"))
        if isinstance(value, bool) or not isinstance(value, int | float) or mask is None:
            return None
        diag = _causal_mask(mask, nodes, negated=True, shape=node["shape"]) if plain else None
        if diag is not None and value == -math.inf:
            return inner(ref_name(a.get("self")), ["causal", diag], _builders(mask, nodes))
        return inner(ref_name(a.get("self")), ["fill", mask, float(value), list(node["shape"])])
    if target == "aten.add.Tensor" and a.get("alpha", 1) == 1:
        for chain_arg, mask_arg in (("self", "other"), ("other", "self")):
            mask = ref_name(a.get(mask_arg))
            if mask is None:
                continue
            diag = _causal_mask(mask, nodes, negated=False, shape=node["shape"]) if plain else None
            step = ["causal", diag] if diag is not None else ["add", mask, list(node["shape"])]
            found = inner(ref_name(a.get(chain_arg)), step, _builders(mask, nodes) if diag is not None else ())
            if found is not None:
                return found
    return None


def _same_values(node: Node, nodes: dict[str, Node]) -> bool:
    """A copy, alias or reshape that keeps the last two dims and regroups only the batch dims (or an
    expand that changes nothing): the chain's values pass through it unchanged."""
    if node["op"] not in _SAME_VALUES:
        return False
    src = nodes.get(ref_name(node["args"].get("self")) or "")
    shape, before = node.get("shape"), (src or {}).get("shape")
    if shape is None or before is None or len(shape) < 2 or len(before) < 2:
        return False
    if node["op"] == "expand":
        return list(shape) == list(before)
    return list(shape[-2:]) == list(before[-2:]) and math.prod(shape[:-2]) == math.prod(before[:-2])


def _regroups(node: Node, nodes: dict[str, Node]) -> bool:
    """A view or reshape of the same elements in their row-major order under another shape (the
    scores split into a window's rows and columns, or merged back)."""
    if node["op"] not in ("view", "_unsafe_view", "reshape"):
        return False
    src = nodes.get(ref_name(node["args"].get("self")) or "")
    shape, before = node.get("shape"), (src or {}).get("shape")
    return shape is not None and before is not None and math.prod(shape) == math.prod(before)


def _logical_operand(name: str | None, nodes: dict[str, Node]) -> tuple[str, set[str]]:
    """The tensor a bmm operand is a batch reshape or copy of ([B, H, S, D] behind the [B·H, S, D]
    view, a transposed head view behind its contiguous clone), so the kernel reads it in place;
    and the nodes passed on the way."""
    walked: set[str] = set()
    node = nodes[name or ""]
    while _same_values(node, nodes):
        walked.add(node["name"])
        node = nodes[ref_name(node["args"]["self"])]
    return node["name"], walked


def _upcast_source(node: Node, nodes: dict[str, Node]) -> str | None:
    """x where `node` is x.to(float32) of an fp16/bf16 x (a plain dtype conversion), else None."""
    src = nodes.get(ref_name(node.get("args", {}).get("self")) or "")
    if node.get("target") != "aten._to_copy.default" or node.get("dtype") != "float32" or src is None:
        return None
    extra = {k: v for k, v in node["args"].items() if k not in ("self", "dtype") and v not in (None, False)}
    return src["name"] if src.get("dtype") in ("float16", "bfloat16") and not extra else None


def _causal_mask(name: str, nodes: dict[str, Node], negated: bool, shape: Sequence[int]) -> int | None:
    """The diagonal d where the mask `name`, built in the forward, keeps key j for query i exactly
    when j <= i + d: tril(ones) itself as a boolean mask to fill where false (negated: masked_fill's
    mask is then its logical_not, or == 0), or where(tril(ones), 0, -inf) as an additive one. None
    for any other mask (a buffer's values are not known when planning: it stays a mask operand)."""
    node = nodes.get(name)
    if node is None or list((node.get("shape") or [])[-2:]) != list(shape[-2:]):
        return None
    a = node.get("args", {})
    if negated:
        if node["op"] in ("logical_not", "bitwise_not"):
            return _tril_of_ones(ref_name(a.get("self")), nodes)
        if node.get("target") == "aten.eq.Scalar" and a.get("other") in (0, False):
            return _tril_of_ones(ref_name(a.get("self")), nodes)
        return None
    if node.get("target") != "aten.where.self":
        return None
    if _number(a.get("self"), nodes) != 0.0 or _number(a.get("other"), nodes) != -math.inf:
        return None
    return _tril_of_ones(ref_name(a.get("condition")), nodes)


def _tril_of_ones(name: str | None, nodes: dict[str, Node]) -> int | None:
    node = nodes.get(name or "")
    if node is None or node.get("target") != "aten.tril.default":
        return None
    ones = nodes.get(ref_name(node["args"].get("self")) or "")
    if ones is None or ones.get("target") != "aten.ones.default":
        return None
    diag = node["args"].get("diagonal", 0)
    return diag if type(diag) is int else None


def _number(value: Any, nodes: dict[str, Node]) -> float | None:
    """A Python number, or the value of a scalar_tensor node."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    node = nodes.get(ref_name(value) or "")
    if node is not None and node.get("target") == "aten.scalar_tensor.default":
        s = node["args"].get("s")
        return float(s) if isinstance(s, int | float) else None
    return None


def _builders(name: str, nodes: dict[str, Node]) -> list[str]:
    """A causal mask and what it is built from (where, tril, ones, the scalars): unused once the
    step replaces it, unless something else reads them (fuse_attention keeps those)."""
    out, todo = [], [name]
    while todo:
        n = todo.pop()
        if n in nodes and nodes[n]["op"] not in ("input", "constant") and n not in out:
            out.append(n)
            todo += node_inputs(nodes[n])
    return out


# On by default ("0" turns it off): no softmax is split (split_softmax leaves the graph as it is);
# one read only by pointwise work keeps its own kernel, which takes that work as an epilogue
# (_take_epilogues): one read of x and one write, where the split reads x twice (level 2's 91 at
# 64bf6cb: logsumexp 0.61 ms + the pointwise pass 0.56 against torch.compile's one online-softmax
# kernel, 0.98). A/B on one H200 at f178247 (2026-11-28, level 2's 13, 49, 89, 91): kept whole ran
# 1.03x, 1.29x, 0.985x, 1.21x the split's speed.
SOFTMAX_WHOLE_ENV = "STITCHCUDA_SOFTMAX_WHOLE"


def softmax_whole() -> bool:
    return os.environ.get(SOFTMAX_WHOLE_ENV, "1") != "0"


def _splittable_softmax(node: Node, readers: dict[str, list[Node]]) -> bool:
    """An fp32 softmax or log_softmax over one dim whose readers are all pointwise (split_softmax)."""
    if node["op"] not in {"_softmax", "_log_softmax"} or node.get("dtype") != "float32":
        return False
    a, users = node.get("args", {}), readers.get(node["name"], [])
    if ref_name(a.get("self")) is None or type(a.get("dim")) is not int or not node.get("shape") \
            or a.get("half_to_float") or not users:
        return False
    return not any(u["op"] == "output" or u.get("view") or codegen.pointwise_support(u) is not None for u in users)


def split_softmax(graph: list[Node], only: frozenset[str] | None = None) -> list[Node]:
    """softmax(x) -> exp(x - logsumexp(x)) and log_softmax(x) -> x - logsumexp(x), where every
    reader of the result is pointwise: a reduction kernel writes one value per row, and the
    pointwise kernel that follows computes the softmax as part of its own chain. The softmax is
    then never stored and read back (compile fuses the same way); x is read twice, as a two-pass
    softmax reads it. fp32 only: a half-precision logsumexp would round before the exp.

    With softmaxes kept whole (softmax_whole()), only those named in `only`: plan_graph names the
    ones that took no epilogue kept whole."""
    if softmax_whole() and not only:
        return graph
    readers = readers_of(graph)
    taken = {n["name"] for n in graph}
    out: list[Node] = []
    renamed: dict[str, str] = {}
    for node in graph:
        if renamed:
            node["args"] = _rename_refs(node.get("args", {}), renamed)
        out.append(node)
        if not _splittable_softmax(node, readers) or (softmax_whole() and node["name"] not in (only or ())):
            continue
        a = node["args"]
        x, dim, shape = ref_name(a["self"]), a["dim"], node["shape"]
        out.pop()
        dim %= len(shape)
        kept = [1 if k == dim else n for k, n in enumerate(shape)]
        full = {"shape": list(shape), "stride": contiguous_strides(shape), "dtype": "float32", "offset": 0, "view": False}
        lse = _fresh(taken, f"{node['name']}_lse")
        out.append({"name": lse, "op": "logsumexp", "target": "aten.logsumexp.default",
                    "args": {"self": ref(x), "dim": [dim], "keepdim": True},
                    "shape": kept, "stride": contiguous_strides(kept), "dtype": "float32", "offset": 0, "view": False})
        shifted = _fresh(taken, f"{node['name']}_shifted")
        out.append({"name": shifted, "op": "sub", "target": "aten.sub.Tensor",
                    "args": {"self": ref(x), "other": ref(lse), "alpha": 1}, **full})
        value = shifted
        if node["op"] == "_softmax":
            value = _fresh(taken, f"{node['name']}_exp")
            out.append({"name": value, "op": "exp", "target": "aten.exp.default", "args": {"self": ref(shifted)}, **full})
        renamed[node["name"]] = value
    return out


def instance_norm_as_group_norm(graph: list[Node]) -> list[Node]:
    """An instance norm as PyTorch traces it (x [N, C, *S] viewed [1, N*C, *S], a training batch
    norm without weights or running statistics, its result viewed back) becomes the group norm of
    x with one channel a group: the same statistics per (sample, channel), the same biased
    variance and eps, and a node channels_last_convs can keep in a convolution's channels-last
    tail (where the view would stop it). Only with _TAIL_INSTANCE_NORM_ENV, group norm in tails
    (_TAIL_GROUP_NORM_ENV) and emit_norm's grouped shape on: it exists for that tail. Not where the
    statistics are read or the normalised [1, N*C, *S] tensor has another reader."""
    from stitchcuda.agents.coder.emit_norm import grouped_rows_on

    if os.environ.get(_TAIL_INSTANCE_NORM_ENV) != "1" or not tail_group_norm() or not grouped_rows_on():
        return graph
    readers = readers_of(graph)
    nodes = by_name(graph)
    renamed: dict[str, str] = {}
    dropped: set[str] = set()
    replaced: dict[str, Node] = {}
    for bn in graph:
        a = bn.get("args", {})
        if bn["op"] != "native_batch_norm" or a.get("training") is not True or any(
                a.get(k) is not None for k in ("weight", "bias", "running_mean", "running_var")):
            continue
        v = nodes.get(ref_name(a.get("input")) or "")
        x = nodes.get(ref_name(v["args"].get("self")) or "") if v and v["op"] == "view" else None
        if v is None or x is None or len(readers.get(v["name"], [])) != 1 or not x.get("shape") \
                or len(x["shape"]) < 3 or not is_contiguous(x) or not is_contiguous(v):
            continue
        n, c, spatial = x["shape"][0], x["shape"][1], list(x["shape"][2:])
        if list(v["shape"]) != [1, n * c, *spatial]:
            continue
        picks_ = readers.get(bn["name"], [])
        if any(p["op"] != "getitem" for p in picks_):
            continue
        ys = [p for p in picks_ if p["args"].get("index") == 0]
        if len(ys) != 1 or any(readers.get(p["name"]) for p in picks_ if p["args"].get("index") != 0):
            continue
        y = ys[0]
        backs = readers.get(y["name"], [])
        if not backs or any(b["op"] != "view" or list(b["shape"]) != list(x["shape"]) or not is_contiguous(b)
                            for b in backs):
            continue
        hw = math.prod(spatial)
        stat = {"shape": [n, c], "dtype": x["dtype"], "stride": [c, 1], "offset": 0}
        replaced[bn["name"]] = {
            "name": bn["name"], "op": "native_group_norm", "target": "aten.native_group_norm.default",
            "args": {"input": ref(x["name"]), "weight": None, "bias": None, "N": n, "C": c, "HxW": hw, "group": c,
                     "eps": a.get("eps", 1e-5)},
            "view": False, "shape": None,
            "outputs": [{"shape": list(x["shape"]), "dtype": x["dtype"], "stride": contiguous_strides(x["shape"]),
                         "offset": 0}, stat, dict(stat)]}
        replaced[y["name"]] = {**y, "shape": list(x["shape"]), "stride": contiguous_strides(x["shape"]), "offset": 0}
        for p in picks_:
            if p is not y:
                replaced[p["name"]] = {**p, **stat}
        dropped |= {v["name"], *(b["name"] for b in backs)}
        renamed |= {b["name"]: y["name"] for b in backs}
    if not replaced:
        return graph
    out = []
    for node in graph:
        if node["name"] in dropped:
            continue
        node = replaced.get(node["name"], node)
        out.append({**node, "args": _rename_refs(node.get("args", {}), renamed)} if renamed else node)
    return out


def drop_normalised_conv_bias(graph: list[Node]) -> list[Node]:
    """convolution(x, w, b) -> convolution(x, w, None) where every reader normalises it with
    statistics of its own input (batch norm in training mode without running statistics: an
    instance norm's [1, N*C, ...] view of it, or the result itself): the mean each row subtracts
    takes b[c] with it and the variance never saw it, so the bias is work whose effect cancels (a
    pass of its own where nothing else would fuse it; 17_Conv2d_InstanceNorm: 0.55 of 2.79 ms on the
    H200). Not where a running mean would record it, where the batch mean is read, or where any
    other reader sees the biased values."""
    readers = readers_of(graph)
    nodes = by_name(graph)

    def normalises_rows(bn: Node) -> bool:
        a = bn.get("args", {})
        if bn["op"] != "native_batch_norm" or a.get("training") is not True:
            return False
        if ref_name(a.get("running_mean")) or ref_name(a.get("running_var")):
            return False
        # getitem 1 is the batch mean, which the bias moves; the output and 1/std do not see it.
        picked = readers.get(bn["name"], [])
        return not any(g["op"] != "getitem" or (g["args"].get("index") == 1 and readers.get(g["name"])) for g in picked)

    def cancels(conv: Node, user: Node) -> bool:
        shape = conv.get("shape") or []
        if user["op"] == "native_batch_norm":  # rows are the channels, over the batch and space
            return ref_name(user["args"].get("input")) == conv["name"] and normalises_rows(user)
        if user["op"] != "view" or len(shape) < 3 or ref_name(user["args"].get("self")) != conv["name"]:
            return False
        # an instance norm: rows are (sample, channel), over space; the conv's storage read as is
        if list(user.get("shape") or []) != [1, shape[0] * shape[1], *shape[2:]] or not is_contiguous(conv):
            return False
        bns = readers.get(user["name"], [])
        return bool(bns) and all(normalises_rows(bn) for bn in bns)

    for node in graph:
        bias = ref_name(node.get("args", {}).get("bias")) if node["op"] == "convolution" else None
        users = readers.get(node["name"], [])
        if bias is None or bias not in nodes or not users:
            continue
        if all(cancels(node, u) for u in users):
            node["args"] = {**node["args"], "bias": None}
    return graph


def split_conv_bias(graph: list[Node]) -> list[Node]:
    """convolution(x, w, b) -> convolution(x, w, None) + b[:, None, ...] where every reader of the
    result is a pointwise op, or a reduction or softmax reading it as its operand: the bias add then
    costs nothing in the kernel that follows (a reduction computes it as a prologue) instead of a
    pass of its own after the convolution."""
    from stitchcuda.agents.coder.emit_reduce import PROLOGUE_OPS, prologue_operand

    def takes_it(user: Node, conv: str) -> bool:
        if codegen.pointwise_support(user) is None:
            return True
        if user["op"] == "cat" and cats_join_tails() and os.environ.get(CAT_SOURCES_ENV, "1") != "0":
            return True  # the cat computes the add as it reads it (_take_cat_sources), joined or not
        if not prologues_on():
            return False
        args = user.get("args", {})
        return (user["op"] in PROLOGUE_OPS and ref_name(args.get(prologue_operand(user))) == conv
                and list(iter_refs(args)).count(conv) == 1)

    readers = readers_of(graph)
    out: list[Node] = []
    taken = {n["name"] for n in graph}
    renamed: dict[str, str] = {}
    for node in graph:
        if renamed:
            node["args"] = _rename_refs(node.get("args", {}), renamed)
        out.append(node)
        bias = ref_name(node.get("args", {}).get("bias")) if node["op"] == "convolution" else None
        users = readers.get(node["name"], [])
        if bias is None or not users or node.get("shape") is None or not is_contiguous(node):
            continue
        if any(u["op"] == "output" or u.get("view") or not takes_it(u, node["name"]) for u in users):
            continue
        # A prologue is taken only where every other reader is pointwise: with two reductions
        # reading the result, neither takes it, and a split bias would be a pass of its own.
        if sum(codegen.pointwise_support(u) is not None for u in users) > 1:
            continue
        channels = node["shape"][1]
        view_shape = [channels] + [1] * (len(node["shape"]) - 2)
        view_name, add_name = _fresh(taken, f"{node['name']}_bias"), _fresh(taken, f"{node['name']}_biased")
        node["args"] = {**node["args"], "bias": None}
        meta = {"dtype": node["dtype"], "offset": 0}
        out.append(_view_node(view_name, "view", bias, {"size": view_shape}, view_shape,
                              contiguous_strides(view_shape), 0, node["dtype"]))
        out.append(
            {
                "name": add_name, "op": "add", "target": "aten.add.Tensor", "view": False,
                "args": {"self": ref(node["name"]), "other": ref(view_name), "alpha": 1},
                "shape": list(node["shape"]), "stride": list(node["stride"]), **meta,
            }
        )  # fmt: skip
        renamed[node["name"]] = add_name
    return out


# "0" keeps every convolution's result NCHW (for same-run comparisons, and a way out).
CONV_TAIL_ENV = "STITCHCUDA_CONV_CHANNELS_LAST"


def channels_last_convs(graph: list[Node]) -> list[Node]:
    """A convolution whose result is read only by pointwise work (bias, activations, scalings,
    per-channel operands) up to forward's return keeps it channels-last: cuDNN writes N, spatial...,
    C (its NHWC kernels, as torch.compile's layout pass gets them, without the copies back to NCHW
    that cost as much as they save), the pointwise nodes run over that storage (per-channel operands
    read as [C] over the last dimension), and forward returns a permuted view: the same values, in
    channels-last strides, as a network compiled with torch.compile returns them.

    Softmax over the channels joins that work (over the last dimension now), and so do batch norm
    and group norm (statistics per channel, per sample and group of adjacent channels: the same
    rows in either layout, read channels-last by their kernels; their normalised result stays in
    the tail); a reduction whose result is laid out the same either way (one over the channels, or
    over every spatial dimension) ends it, reading the channels-last storage with its dims
    renumbered. Anything else reading the result (another norm, a view, an operand that is neither
    per-channel nor a scalar, another shape) leaves the convolution as it is."""
    if os.environ.get(CONV_TAIL_ENV, "1") == "0":
        return graph
    from stitchcuda.agents.coder.emit_conv import (
        NotSupported,
        batch_chunk,
        channels_last_shape,
        conv_params,
        depthwise_direct,
        nchw_shape,
    )

    readers = readers_of(graph)
    nodes = by_name(graph)
    taken = {n["name"] for n in graph}
    before: dict[str, list[Node]] = {}  # node name -> new nodes to insert just before it
    after: dict[str, list[Node]] = {}  # ... just after it
    renamed: dict[str, tuple[str, set[str]]] = {}  # kept reduction -> its view, and the nodes that read it as is
    # What earlier tails store channels-last (their shapes say so): "cl" where every reader reads it
    # so, "held" for a kept reduction's result, which readers outside its tail read through a view.
    laid_out: dict[str, str] = {}
    cat_views: dict[tuple[str, str], str] = {}  # (channels-last cat, NCHW source) -> the view it reads
    for conv in [n for n in graph if n["op"] == "convolution"]:
        shape, a = conv.get("shape") or [], conv.get("args", {})
        if len(shape) not in (4, 5) or conv.get("dtype") not in ("float32", "float16", "bfloat16") \
                or not is_contiguous(conv) or ref_name(a.get("bias")) is not None or a.get("channels_last"):
            continue
        x, w = nodes.get(ref_name(a.get("input")) or ""), nodes.get(ref_name(a.get("weight")) or "")
        if x is None or w is None or x.get("shape") is None or w.get("shape") is None:
            continue
        # (An input an earlier convolution's tail left channels-last has that shape by now.)
        x_shape = nchw_shape(x["shape"]) if a.get("input_channels_last") else x["shape"]
        try:
            p = conv_params(x_shape, w["shape"], a.get("stride"), a.get("padding"), a.get("dilation"),
                            bool(a.get("transposed")), a.get("output_padding", [0]), a.get("groups", 1))
            # A depthwise convolution our own NCHW kernel takes (emit_conv._depthwise; off with
            # STITCHCUDA_CONV_DEPTHWISE=0) needs no cuDNN layout.
            if p.lifted or batch_chunk(p) < p.x[0] or depthwise_direct(p, conv["dtype"]):
                continue
        except NotSupported:
            continue
        tail = _pointwise_tail(conv, readers, nodes, laid_out, cat_views)
        if tail is None:
            continue
        members, outputs, channel_operands, ends, kernels_inside, convs_after, cat_sources, rejoins = tail
        laid_out.update((n["name"], "cl") for n in [conv, *members])
        for cat, name in rejoins:  # channels-last now: the cat reads it as it is, not through its view
            view = cat_views.pop((cat["name"], name))
            cat["args"] = _rename_refs(cat["args"], {view: name})
            before[cat["name"]] = [n for n in before[cat["name"]] if n["name"] != view]
        conv["args"] = {**a, "channels_last": True}
        for node in convs_after:  # they read the tail's storage as it is (emit_conv: x_nhwc)
            node["args"] = {**node["args"], "input_channels_last": True}
        for node in kernels_inside:
            node["args"] = {**node["args"], "channels_last": True}
            # Results of the tensor's rank (a pool's values and unread indices, a norm's normalised
            # result) are stored channels-last; statistics ([C], [N, groups]) keep their shapes.
            # (A new list of new dicts: plan_graph copies nodes shallowly, the traced graph's stay as traced.)
            if node.get("outputs"):
                node["outputs"] = [
                    {**r, "shape": (cl := list(channels_last_shape(r["shape"]))), "stride": contiguous_strides(cl),
                     "offset": 0} if r and len(r.get("shape") or []) == len(shape) else r
                    for r in node["outputs"]]
        before_shapes = {n["name"]: list(n["shape"]) for n in [conv, *members]}
        for node in [conv, *members]:
            cl = list(channels_last_shape(node["shape"]))
            node["shape"], node["stride"], node["offset"] = cl, contiguous_strides(cl), 0
            if node["op"] in _CHANNEL_SOFTMAX or node["op"] == "cat":
                node["args"] = {**node["args"], "dim": _channels_last_dim(node["args"].get("dim", 0), len(shape))}
        inside = {n["name"] for n in members}
        for node in ends:
            dims = node["args"].get("dim")
            moved = [_channels_last_dim(d, len(shape)) for d in ([dims] if isinstance(dims, int) else dims)]
            node["args"] = {**node["args"], "dim": moved[0] if isinstance(dims, int) else moved}
            for held in _kept(node, readers):
                # [N, 1, H, W] and [N, H, W, 1] hold the same elements in the same order: the
                # reduction writes the channels-last one, which the tail's pointwise nodes read
                # (it broadcasts over the channels there); every other reader gets the view.
                want, kept = list(held["shape"]), list(channels_last_shape(held["shape"]))
                held["shape"], held["stride"] = kept, contiguous_strides(kept)
                view = _fresh(taken, f"{held['name']}_nchw")
                after.setdefault(held["name"], []).append(_view_node(
                    view, "view", held["name"], {"size": want}, want, contiguous_strides(want), 0, held["dtype"]))
                renamed[held["name"]] = (view, inside)
                laid_out[held["name"]] = "held"
        for user, operand in channel_operands:
            o = nodes[operand]
            dim = len(o["shape"]) - (len(shape) - 1)  # its channel dimension, right-aligned
            view = _fresh(taken, f"{operand}_channels")
            before.setdefault(user["name"], []).append(_view_node(
                view, "view", operand, {"size": [shape[1]]}, [shape[1]], [o["stride"][dim]], o.get("offset", 0),
                o["dtype"]))
            user["args"] = _rename_refs(user["args"], {operand: view})
        for cat, operand in cat_sources:  # an NCHW source of a channels-last cat, read as [N, spatial..., C]
            o = nodes[operand]
            view = _fresh(taken, f"{operand}_channels_last")
            dims = [0, *range(2, len(shape)), 1]
            before.setdefault(cat["name"], []).append(_view_node(
                view, "permute", operand, {"dims": dims}, [o["shape"][d] for d in dims], [o["stride"][d] for d in dims],
                o.get("offset", 0), o["dtype"]))
            cat["args"] = _rename_refs(cat["args"], {operand: view})
            cat_views[cat["name"], operand] = view
        for out_node, name in outputs:
            view = _fresh(taken, f"{name}_nchw")
            want = before_shapes[name]
            st = contiguous_strides(list(channels_last_shape(want)))
            before.setdefault(out_node["name"], []).append(_view_node(
                view, "permute", name, {"dims": [0, len(shape) - 1, *range(1, len(shape) - 1)]}, want,
                [st[0], st[-1], *st[1:-1]], 0, nodes[name]["dtype"]))
            out_node["args"] = _rename_refs(out_node["args"], {name: view})
    if not before and not after:
        return graph
    out: list[Node] = []
    for node in graph:
        out += before.get(node["name"], [])
        views = {held: view for held, (view, tail) in renamed.items() if node["name"] not in tail and node["name"] != held}
        if views:
            node["args"] = _rename_refs(node.get("args", {}), views)
        out.append(node)
        out += after.get(node["name"], [])
    return out


# Softmax over the channels (dim 1), which channels-last storage makes a softmax over its rows;
# reductions that may end a channels-last tail (channels_last_convs).
_CHANNEL_SOFTMAX = {"_softmax", "_log_softmax", "_safe_softmax"}
_LAYOUT_REDUCTIONS = {"sum", "mean", "amax", "amin", "max", "min", "argmax", "argmin", "logsumexp"}


def _channels_last_dim(d: int, rank: int) -> int:
    """Where dim `d` of N, C, spatial... sits in N, spatial..., C."""
    d %= rank
    return 0 if d == 0 else rank - 1 if d == 1 else d - 1


def _ends_tail(user: Node, name: str, shape: list[int]) -> bool:
    """A reduction of `name` (N, C, spatial...) whose result holds the same elements in the same
    order whichever layout it reads: over the channels, or over every spatial dimension."""
    a = user.get("args", {})
    if user["op"] not in _LAYOUT_REDUCTIONS or ref_name(a.get("self")) != name or list(iter_refs(a)) != [name]:
        return False
    if user.get("target") in ("aten.max.other", "aten.min.other", "aten.max.default", "aten.min.default"):
        return False
    dims = a.get("dim")
    if dims is None or dims == [] or isinstance(dims, bool):
        return False  # over everything (argmax's flat index depends on the layout; sums need no layout)
    items = [dims] if isinstance(dims, int) else list(dims)
    if not all(type(d) is int and -len(shape) <= d < len(shape) for d in items):
        return False
    reduced = {d % len(shape) for d in items}
    return 0 not in reduced and (1 in reduced or set(range(2, len(shape))) <= reduced)


# Norms whose rows channels-last storage keeps (emit_norm reads them there): batch norm's are the
# channels, group norm's a sample's group of adjacent channels. Group norm is left out: on the H200
# (eea9ee0, level 2's GroupNorm problems in one call, on and off) its split kernel over runs of a
# group's channels C apart lost to NCHW on 4 of 6 (0.41-0.74x: 92, 19, 27, 60); its rows want a
# kernel that reads whole channel rows and keeps per-group statistics. Batch norm (the column
# kernel over [N * spatial, C]) gained: 15 1.37x, 73 1.05x (52 0.93x, 77 1.00x).
_TAIL_NORMS = {"native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_functional",
               "_native_batch_norm_legit_no_training"}
# On by default ("0" turns it off): planner.channels_last_convs plans group norm into the tail, where
# it takes emit_norm's grouped shape (whole rows of channels a block). A/B on one H200 at f178247
# (2026-11-28, bench/results/2026-11-28-h200x2-ab-group-norm-softmax-f178247.md): 19 1.23x, 27 1.25x,
# 60 1.31x, 61 1.14x, 85 1.31x, 92 1.20x, 11 1.03x, 21 1.00x the NCHW plan's speed (23 unsolved
# either way). At 64bf6cb the NCHW convolution these problems kept took 0.66 ms on 85 against 0.37
# for its channels-last plan.
_TAIL_GROUP_NORM_ENV = "STITCHCUDA_CHANNELS_LAST_GROUP_NORM"
# "1": instance norms join the tail as group norms of one channel a group
# (instance_norm_as_group_norm). Off: in the same A/B they lost (17 0.79x, 79 0.86x, 28 1.01x); with
# one channel a group the grouped shape reads one channel a thread, where the rows want a column
# reduction per sample.
_TAIL_INSTANCE_NORM_ENV = "STITCHCUDA_CHANNELS_LAST_INSTANCE_NORM"


def tail_group_norm() -> bool:
    return os.environ.get(_TAIL_GROUP_NORM_ENV, "1") != "0"
# Group norm reads each row in runs of its group's channels: shorter runs than this many bytes
# would read most of every sector for nothing.
_MIN_GROUP_RUN_BYTES = 16


def _tail_norm(user: Node, name: str, shape: list[int], readers: dict[str, list[Node]],
               nodes: dict[str, Node]) -> list[Node] | None:
    """Where `user` is a batch or group norm of `name` (N, C, spatial...) that channels-last
    storage serves as well: the getitems of its normalised result (the statistics' getitems keep
    their shapes, [C] or [N, groups], in either layout); else None."""
    from stitchcuda.agents.coder.emit_norm import grouped_rows_on

    a = user.get("args", {})
    norms = _TAIL_NORMS | ({"native_group_norm"} if tail_group_norm() else set())
    if user["op"] not in norms or ref_name(a.get("input")) != name:
        return None
    for key, value in a.items():
        refs = list(iter_refs(value))
        if key == "input" or not refs:
            continue
        o = nodes.get(refs[0])
        if len(refs) != 1 or o is None or list(o.get("shape") or []) != [shape[1]]:
            return None  # weights, biases and running statistics are per channel
    if user["op"] == "native_group_norm":
        groups, dtype = a.get("group"), nodes[name].get("dtype")
        if a.get("N") != shape[0] or a.get("C") != shape[1] or type(groups) is not int or groups <= 0 \
                or shape[1] % groups or dtype not in codegen.ITEM_SIZE \
                or (shape[1] // groups * codegen.ITEM_SIZE[dtype] < _MIN_GROUP_RUN_BYTES and not grouped_rows_on()):
            return None
    picks = readers.get(user["name"], [])
    if any(r["op"] != "getitem" for r in picks):
        return None
    results = [r for r in picks if r["args"].get("index") == 0]
    if not results or any(list(r.get("shape") or []) != shape or not is_contiguous(r) for r in results):
        return None
    return results


# Pools whose windows channels-last storage serves as well (emit_pool reads it, a channel a thread);
# "0" in the environment leaves them out of tails.
_TAIL_POOLS = {f"{p}{nd}d{q}" for nd in (2, 3) for p, q in (
    ("max_pool", ""), ("max_pool", "_with_indices"), ("avg_pool", ""), ("adaptive_avg_pool", ""),
    ("_adaptive_avg_pool", ""), ("adaptive_max_pool", ""))}
_TAIL_POOLS_ENV = "STITCHCUDA_CHANNELS_LAST_POOLS"


def pools_in_tails() -> bool:
    return os.environ.get(_TAIL_POOLS_ENV, "1") != "0"


def _tail_pool(user: Node, name: str, shape: list[int], readers: dict[str, list[Node]]) -> list[Node] | None:
    """Where `user` pools `name` (N, C, spatial...) over its spatial dims and only its values are
    read (indices are positions in an NCHW plane): the nodes holding the pooled values; else None."""
    op, a = user["op"], user.get("args", {})
    if op not in _TAIL_POOLS or f"{len(shape) - 2}d" not in op or ref_name(a.get("self")) != name \
            or list(iter_refs(a)) != [name]:
        return None
    if user.get("outputs") is None:  # one result: the node itself
        results = [user]
    else:
        picks = readers.get(user["name"], [])
        if any(r["op"] != "getitem" for r in picks) \
                or any(readers.get(r["name"]) for r in picks if r["args"].get("index") != 0):
            return None
        results = [r for r in picks if r["args"].get("index") == 0]
    if not results or any(r.get("dtype") not in ("float32", "float16", "bfloat16") or r.get("shape") is None
                          or len(r["shape"]) != len(shape) or not is_contiguous(r) for r in results):
        return None
    return results


def _kept(end: Node, readers: dict[str, list[Node]]) -> list[Node]:
    """The nodes holding a keepdim reduction's results: the node, or for max/min over a dim (values
    and indices) its getitems. None kept: []."""
    if not end["args"].get("keepdim"):
        return []
    if end["op"] in ("max", "min"):
        return [r for r in readers.get(end["name"], []) if r["op"] == "getitem"]
    return [end]


def _pointwise_tail(conv: Node, readers: dict[str, list[Node]], nodes: dict[str, Node], laid_out: dict[str, str],
                    cat_views: dict[tuple[str, str], str]):
    """(the pointwise nodes reading `conv`'s result, transitively, and cats along the channels
    (cats_join_tails: their other sources are `cat_sources`, read through channels-last views); (output node, name) pairs where
    forward returns one of them; (node, operand) pairs of per-channel operands; the reductions that
    end it; the norms and pools inside it, whose kernels read and write channels-last; the
    convolutions that end it, reading it as their input channels-last; (cat, source) pairs; (cat,
    value) pairs where an earlier tail's cat (in `laid_out`) reads one of this tail's values through
    a view (in `cat_views`), which it then reads as it is), or None where something else reads
    them. A pool's result joins the tail with its own (smaller) shape."""
    shape = conv["shape"]
    members: list[Node] = []
    outputs: list[tuple[Node, str]] = []
    ends: list[Node] = []
    kernels_inside: list[Node] = []
    convs_after: list[Node] = []
    rejoins: list[tuple[Node, str]] = []
    inside = {conv["name"]}
    frontier = [conv["name"]]
    while frontier:
        name = frontier.pop()
        for user in readers.get(name, []):
            if user["op"] == "output":
                outputs.append((user, name))
                continue
            if user in convs_after:
                if ref_name(user["args"].get("input")) != name:
                    return None  # it reads another of the tail's values as its weight (or bias): NCHW there
                continue
            if user["name"] in inside or user in ends:
                continue
            here = list(nodes[name]["shape"])  # a pool's result is smaller than the convolution's
            if _ends_tail(user, name, here):
                ends.append(user)
                continue
            if conv.get("args", {}).get("groups", 1) == 1 and _reads_channels_last(user, name, nodes):
                convs_after.append(user)
                continue
            if user["name"] in laid_out:
                if user["op"] != "cat" or (user["name"], name) not in cat_views:
                    return None
                rejoins.append((user, name))  # an earlier tail's cat, reading this value through a view
                continue
            if _channel_cat(user, here, nodes, laid_out):
                inside.add(user["name"])
                members.append(user)
                frontier.append(user["name"])
                continue
            # A pool or norm reading and writing the layout itself: its results join the tail.
            results = _tail_pool(user, name, here, readers) if pools_in_tails() else None
            if results is None:
                results = _tail_norm(user, name, here, readers, nodes)
            if results is not None:
                kernels_inside.append(user)
                inside.add(user["name"])
                for result in results:
                    inside.add(result["name"])
                    members.append(result)
                    frontier.append(result["name"])
                continue
            # A softmax over the channels is one over channels-last storage's rows; over another dim
            # (UNetSoftmax's W), one over its columns, unless STITCHCUDA_LAYOUT_SOFTMAX=0 (emit_reduce).
            channel_softmax = (user["op"] in _CHANNEL_SOFTMAX and type(user["args"].get("dim")) is int
                               and (user["args"]["dim"] % len(shape) == 1 or layout_softmax())
                               and list(iter_refs(user["args"])) == [name])
            pointwise = codegen.pointwise_support(user) is None or channel_softmax
            # Its shape may be larger than `here` by broadcasting (a pooled [N, C, 1, 1] times the
            # conv's result), never by an operand from outside: the operand checks below refuse those.
            wide = list(user.get("shape") or [])
            fits = len(wide) == len(here) and all(h in (w, 1) for h, w in zip(here, wide, strict=True))
            if user.get("view") or not pointwise or not fits \
                    or user.get("dtype") not in codegen.C_TYPES or not is_contiguous(user):
                return None
            inside.add(user["name"])
            members.append(user)
            frontier.append(user["name"])
    if not members and not outputs and not ends and not convs_after and not rejoins:
        return None
    kept = {n["name"] for end in ends for n in _kept(end, readers)}
    channel_operands: list[tuple[Node, str]] = []
    cat_sources: list[tuple[Node, str]] = []
    for user in members:
        for operand in set(iter_refs(user.get("args", {}))):
            if operand in inside or operand in kept:
                continue
            o = nodes.get(operand)
            if user["op"] == "cat":  # another source of a joined cat: read through a channels-last view
                if operand in laid_out:
                    continue  # an earlier tail's value, channels-last already: read as it is
                if o is None or o.get("view") or len(o.get("stride") or []) != len(o.get("shape") or [None]):
                    return None
                cat_sources.append((user, operand))
                continue
            o_shape = list((o or {}).get("shape") or [])
            padded = [1] * (len(shape) - len(o_shape)) + o_shape
            if o is None or o.get("shape") is None or len(o_shape) > len(shape):
                return None
            if all(n == 1 for n in padded):
                continue  # a scalar, whatever the layout
            if any(n != 1 for i, n in enumerate(padded) if i != 1) or padded[1] != shape[1] \
                    or len(o_shape) < len(shape) - 1 or len(o.get("stride") or []) != len(o_shape):
                return None
            channel_operands.append((user, operand))
    return members, outputs, channel_operands, ends, kernels_inside, convs_after, cat_sources, rejoins


CAT_JOIN_ENV = "STITCHCUDA_CHANNELS_LAST_CAT"


def cats_join_tails() -> bool:
    """Off unless "1": not yet run on a GPU (planned, rendered as aten and built for sm_90 only)."""
    return os.environ.get(CAT_JOIN_ENV, "0") == "1"


def _channel_cat(user: Node, here: list[int], nodes: dict[str, Node], laid_out: dict[str, str]) -> bool:
    """A cat along the channels of tensors of `here`'s rank and dtype (a U-Net's skip connection, a
    DenseNet layer's concatenation): channels-last storage makes it a cat along the last dim, each
    pixel's channels one after another, and the convolution that reads it takes it as it is.
    Sources in `laid_out` are stored channels-last already (their shapes say so); a kept reduction
    there ("held") is read through an NCHW view by every reader outside its own tail, this cat too."""
    a = user.get("args", {})
    if not cats_join_tails() or user["op"] != "cat" or user.get("view") or not is_contiguous(user) \
            or user.get("dtype") not in codegen.C_TYPES or type(a.get("dim", 0)) is not int:
        return False
    rank = len(here)
    if len(user.get("shape") or []) != rank or a.get("dim", 0) % rank != 1:
        return False
    for r in iter_refs(a):
        o = nodes.get(r)
        if o is None or len(o.get("shape") or []) != rank or o.get("dtype") != user["dtype"] \
                or laid_out.get(r) == "held":
            return False
        nchw = list(o["shape"]) if r not in laid_out else [o["shape"][0], o["shape"][-1], *o["shape"][1:-1]]
        if nchw[:1] + nchw[2:] != list(here[:1]) + list(here[2:]):
            return False
    return True


# "0" keeps a convolution that reads an earlier one's channels-last tail NCHW (the tail then ends
# before it, as before 2026-11-27): for A/B timing.
CONV_CHAIN_ENV = "STITCHCUDA_CONV_CHAIN"


def _reads_channels_last(user: Node, name: str, nodes: dict[str, Node]) -> bool:
    """Whether `user` is a dense (groups 1) 2-D or 3-D convolution, forward or transposed (cuDNN's
    backward-data takes an NHWC dy as its forward takes an NHWC x), that reads `name` (N, C,
    spatial...) as its input, and only so, and can take it channels-last as it is stored (emit_conv's
    x_nhwc: one cuDNN call). Without it a chain of convolutions pays cuDNN's two layout copies at
    each (NCHW in, NHWC kernel, NCHW out): on the H200 they were a quarter of level3/11_VGG16's
    kernel time (2026-11-27 probe), and chained it ran in 1.51 ms against 2.06 (AlexNet 11.8
    against 14.3; two bench runs, bench/results/2026-11-27-h200x2-level3-chains-548d16a.md).
    Grouped and depthwise convolutions stay out of chains, at either end (_pointwise_tail asks for
    a dense producer): with them in, MobileNetV1 and EfficientNetB1 ran 21-22% slower in those runs
    (where a grouped kernel is faster NCHW, a chain link costs a copy at each end)."""
    from stitchcuda.agents.coder.emit_conv import NotSupported, batch_chunk, conv_params, depthwise_direct

    a = user.get("args", {})
    if os.environ.get(CONV_CHAIN_ENV) == "0" or user["op"] != "convolution" or a.get("input_channels_last"):
        return False
    if ref_name(a.get("input")) != name or list(iter_refs(a)).count(name) != 1 or a.get("groups", 1) != 1:
        return False
    x, w = nodes.get(name), nodes.get(ref_name(a.get("weight")) or "")
    if x is None or w is None or w.get("shape") is None or len(x.get("shape") or []) not in (4, 5) \
            or user.get("dtype") != x.get("dtype") or not is_contiguous(x):
        return False
    try:
        p = conv_params(x["shape"], w["shape"], a.get("stride"), a.get("padding"), a.get("dilation"),
                        bool(a.get("transposed")), a.get("output_padding", [0]), a.get("groups", 1))
        return not p.lifted and batch_chunk(p) == p.x[0] and not depthwise_direct(p, user["dtype"])
    except NotSupported:  # (batch_chunk's too: a sample or weight past int32 element counts)
        return False


def drop_noop_restrides(graph: list[Node]) -> list[Node]:
    """as_strided_/as_strided that keeps a tensor's shape, offset and every stride that matters (those
    of dims longer than 1) is no change at all: adaptive_avg_pool2d's output gets one on CPU when the
    layout it picks for [N, C, 1, 1] is channels-last. Readers read the tensor itself instead."""
    nodes = by_name(graph)
    renamed: dict[str, str] = {}
    out: list[Node] = []
    for node in graph:
        if renamed:
            node["args"] = _rename_refs(node.get("args", {}), renamed)
        a = node.get("args", {})
        src = nodes.get(ref_name(a.get("self")) or "")
        if node["op"] in ("as_strided_", "as_strided") and src is not None and src.get("shape") is not None:
            shape, stride = list(a.get("size") or []), list(a.get("stride") or [])
            same = shape == list(src["shape"]) and len(stride) == len(shape) and a.get("storage_offset") in (
                None, src.get("offset", 0))
            same = same and all(n == 1 or st == s0 for n, st, s0 in zip(shape, stride, src.get("stride") or [], strict=False))
            if same and len(src.get("stride") or []) == len(shape):
                renamed[node["name"]] = src["name"]
                continue
        out.append(node)
    return out


# Scalings that fold (true division only: div with a rounding_mode is another overload), and the
# views whose meaning is logical (graph.LOGICAL_VIEWS) can be replayed on another layout.
_SCALINGS = {"aten.mul.Tensor", "aten.mul.Scalar", "aten.div.Tensor", "aten.div.Scalar"}

# GEMM op -> its two product operands (aten's argument names)
_GEMM_OPERANDS = {"mm": ("self", "mat2"), "bmm": ("self", "mat2"), "addmm": ("mat1", "mat2"),
                  "baddbmm": ("batch1", "batch2")}


def fold_gemm_scalars(graph: list[Node]) -> list[Node]:
    """x * c (or x / c) read only, through views, by one operand of a matrix product: the product
    takes c into its alpha and reads x itself. (c x) @ y = c (x @ y), so the scaled copy, a pass that
    writes the operand and one that reads it back, is never made (the q and k scaling of attention's
    math path: 2 GB each on level1/97). The views are replayed on x's layout; where torch would not
    give such a view of x, nothing changes."""
    nodes = by_name(graph)
    readers: dict[str, int] = {}  # every reference counts: mm(v, v) reads v twice
    for node in graph:
        for v in node.get("args", {}).values():
            for src in iter_refs(v):
                readers[src] = readers.get(src, 0) + 1
    for g in graph:
        if g["op"] not in _GEMM_OPERANDS or g.get("dtype") not in codegen.C_TYPES:
            continue
        for arg in _GEMM_OPERANDS[g["op"]]:
            chain: list[Node] = []  # the views from the operand back towards the scaling, nearest first
            name = ref_name(g["args"].get(arg))
            while (name in nodes and nodes[name].get("view") and readers.get(name) == 1
                   and nodes[name].get("target") in LOGICAL_VIEWS):
                chain.append(nodes[name])
                name = ref_name(nodes[name]["args"].get("self"))
            scaled = nodes.get(name or "")
            if scaled is None or scaled.get("target") not in _SCALINGS or readers.get(scaled["name"]) != 1:
                continue
            c, x = scaled["args"].get("other"), ref_name(scaled["args"].get("self"))
            # c = 0 (or inf, NaN) would make cuBLAS skip reading x, where 0 * x keeps x's NaNs.
            if isinstance(c, bool) or not isinstance(c, int | float) or not math.isfinite(c) or c == 0:
                continue
            if x not in nodes or nodes[x].get("dtype") != scaled.get("dtype") or nodes[x].get("shape") is None:
                continue
            layouts = _replay_views(nodes[x], list(reversed(chain)))
            if layouts is None:
                continue
            head = chain[-1] if chain else g
            head["args"] = {**head["args"], ("self" if chain else arg): ref(x)}
            for view, (shape, stride, offset) in zip(reversed(chain), layouts, strict=True):
                view.update(shape=shape, stride=stride, offset=offset)
            factor = c if scaled["op"] == "mul" else 1.0 / c
            g["args"] = {**g["args"], "alpha": g["args"].get("alpha", 1) * factor}
            readers[x] = readers.get(x, 0) + 1
            readers[scaled["name"]] = 0
    return graph


def _replay_views(src: Node, chain: list[Node]) -> list[tuple[list[int], list[int], int]] | None:
    """(shape, stride, offset) of each view of `chain` (in order) applied to `src`'s layout, as torch
    computes them on meta tensors; None where an op refuses that layout or gives another shape."""
    import torch

    shape, stride, offset = list(src["shape"]), list(src.get("stride") or []), int(src.get("offset") or 0)
    if len(stride) != len(shape):
        return None
    span = offset + sum((n - 1) * abs(st) for n, st in zip(shape, stride, strict=True)) + 1
    try:
        t = torch.empty(max(span, 1), device="meta").as_strided(shape, stride, offset)
        out = []
        for view in chain:
            space, _, overload = view.get("target", "").partition(".")[2].partition(".")
            fn = getattr(getattr(torch.ops.aten, space), overload)
            kwargs = {k: v for k, v in view["args"].items() if k != "self"}
            t = fn(t, **kwargs)
            if list(t.shape) != list(view["shape"]):
                return None
            out.append((list(t.shape), list(t.stride()), int(t.storage_offset())))
        return out
    except Exception:  # noqa: BLE001 - a view torch would not make of this layout: no fold
        return None


def _view_node(name: str, op: str, src: str, args: dict[str, Any], shape: list[int], stride: list[int],
               offset: int, dtype: str) -> Node:
    """A view node (aten.view / aten.permute ...) of `src`, with its layout in `src`'s storage."""
    return {"name": name, "op": op, "target": f"aten.{op}.default", "view": True, "args": {"self": ref(src), **args},
            "shape": shape, "stride": stride, "offset": offset, "dtype": dtype}


def _kind(node: Node, nodes: dict[str, Node], table: dict[str, kernels.Emitter]) -> str:
    op = node["op"]
    if op in ("input", "constant", "output"):
        return op
    if node.get("view"):
        return "view"
    if op == "getitem":
        src = nodes.get(ref_name(node["args"].get("self")) or "")
        return "result" if src is not None and src["op"] in table else "other"
    if op == "copy_":
        dest = nodes.get(ref_name(node["args"].get("self")) or "")
        # Writing a buffer (a BatchNorm's step counter) is state the module keeps: a pointwise
        # kernel stores into the buffer itself. Writing a forward argument stays unsupported.
        if dest is not None and dest["op"] == "input" and dest.get("kind") == "buffer" and is_contiguous(dest):
            return "copy" if codegen.pointwise_support({**node, "op": "clone", "args": {"self": node["args"].get("src")}}) is None else "other"
        return "other"
    if op in table:
        return "kernel"
    return "pointwise" if codegen.pointwise_support(node) is None else "other"


# "0" turns prologues off (the pointwise node before a reduction, softmax or norm is stored, as
# before they existed): for same-run comparisons, and a way out should one misbehave on a GPU.
PROLOGUES_ENV = "STITCHCUDA_PROLOGUES"


def prologues_on() -> bool:
    return os.environ.get(PROLOGUES_ENV, "1") != "0"


# "0" turns depthwise prologues off: the pointwise chain before a depthwise convolution is stored
# first instead of computed as the kernel stages its input. On by default since 2026-11-29, once the
# chain was staged by cp.async and computed over the tile in shared memory (emit_conv.DW_STAGED_ENV):
# on the H200 an eval-mode MobileNetV2 block's depthwise kernel with prologue and epilogue took 95.4 us
# against 78.1 + 48.0 with the chain stored first, block GPU time 0.197 -> 0.171 ms; ConvNeXt,
# Conformer's convolution module and EfficientNet's MBConv did not move (within 1%). Computed as each
# element was loaded instead it had lost (300 us against 48 + 138:
# bench/results/2026-11-29-h200-depthwise-rows-epilogue-l3-networks-dbc45ee.md).
CONV_PROLOGUES_ENV = "STITCHCUDA_CONV_PROLOGUES"
# "0": a training-mode batch norm before a depthwise convolution writes its normalised result, as
# before train_bn_prologue (for same-run comparisons). On the H200 level 3's EfficientNetMBConv took
# 2.82 ms of GPU time with it against 3.14 without (bench/results/2026-11-29-h200-train-bn-prologue-bb43cf1.md).
TRAIN_BN_PROLOGUE_ENV = "STITCHCUDA_TRAIN_BN_PROLOGUE"
# "1": the same for a training batch norm whose normalised result (through pointwise work) only a
# softmax, a reduction or a pool reads, channels-last tails' norms included: the norm's kernel keeps
# its statistics and that kernel normalises as it reads, so the normalised tensor is never written
# and read back (torch.compile's fused batch-norm-softmax kernels on level 3's UNetSoftmax do the
# same; ours stored 18 normalised tensors there, up to 67 MB each). Off: planned and run on CPU host
# entries, not yet timed on a GPU.
BN_PROLOGUE_KERNELS_ENV = "STITCHCUDA_BN_PROLOGUE_KERNELS"


def bn_prologue_kernels_on() -> bool:
    return os.environ.get(BN_PROLOGUE_KERNELS_ENV, "0") == "1"


def conv_prologues_on() -> bool:
    return os.environ.get(CONV_PROLOGUES_ENV, "1") != "0"


def _root_readers(
    graph: list[Node], nodes: dict[str, Node], kernel_plans: dict[str, tuple[kernels.Kernel, dict[str, str]]],
    live: list[str], output: Node,
) -> tuple[dict[str, set[str]], set[str], set[str]]:
    """(the root of what each live node reads, through views -> the nodes reading it; the roots
    forward returns; the tensors forward writes in place): what decides whether a pointwise node may
    be computed where one kernel reads it instead of stored. (A buffer's copy_: a stored pointwise
    kernel reads it at its own place in the graph, a kernel at a later stage might read it after.)"""
    readers: dict[str, set[str]] = {}
    for name in live:
        if nodes[name].get("view"):
            continue
        for src in node_inputs(nodes[name]):
            readers.setdefault(_view_root(nodes, src)["name"], set()).add(name)
    returned = {_view_root(nodes, src)["name"] for v in output["args"]["values"] if (src := ref_name(v)) is not None}
    written = set().union(*_in_place_writes(graph, nodes, kernel_plans).values())
    return readers, returned, written


def _take_prologues(
    graph: list[Node], nodes: dict[str, Node], kinds: dict[str, str],
    kernel_plans: dict[str, tuple[kernels.Kernel, dict[str, str]]], getitems: dict[str, list[Node]],
    live: list[str], output: Node, target: Target, carried: set[str] = frozenset(),  # type: ignore[assignment]
) -> dict[str, dict[str, Any]]:
    """A reduction (or softmax) whose operand is a pointwise node that nothing but pointwise ops
    otherwise read computes that node as it reads it (a prologue) instead of reading it stored: the pointwise kernel's write and the
    reduction's read of the whole tensor go (a convolution's scale before a min over channels, a
    bias and activation before a mean). Where the lowering or the emitter says no, the kernel stays.
    Returns, per kernel that took one, what the Coder rebuilds it from: {"node", "members"}."""
    from stitchcuda.agents.coder.emit_reduce import PROLOGUE_OPS, prologue_operand

    taken: dict[str, dict[str, Any]] = {}
    if not prologues_on():
        return taken
    # And convolutions: the depthwise kernel computes its input's chain as it stages it (emit_conv's
    # _dw_prologue); every other convolution's emitter leaves the prologue, and its kernel stays. (Not
    # in PROLOGUE_OPS: split_conv_bias would split a bias for any convolution reading the result.)
    ops = PROLOGUE_OPS | ({"convolution"} if conv_prologues_on() else set())
    order = {n["name"]: i for i, n in enumerate(graph)}
    readers, returned, written = _root_readers(graph, nodes, kernel_plans, live, output)
    for name, (kernel, roots) in list(kernel_plans.items()):
        node = nodes[name]
        src = ref_name(node["args"].get(prologue_operand(node)))
        if node["op"] not in ops or roots or src is None:
            continue
        if list(iter_refs(node["args"])).count(src) != 1:  # read again as another argument
            continue
        root = _view_root(nodes, src)["name"]
        # Other readers that are pointwise compute the node in their own kernels as they would
        # anyway (split_softmax's exp(x - lse) beside the lse); any other reader needs it stored.
        others = readers.get(root, set()) - {name}
        if kinds.get(root) != "pointwise" or root in returned or root in carried \
                or any(kinds.get(r) != "pointwise" for r in others):
            continue
        members = _closure(order, nodes, kinds, [root], stored=carried)
        try:
            pro = codegen.prologue(graph, members, root, nodes=nodes)
            if any(_view_root(nodes, a.name)["name"] in written for a in pro.inputs):
                continue
            if node["op"] == "convolution" and _stored_by_an_epilogue(nodes, pro):
                continue
            fused = kernels.emit(graph, name, kernel.name, live=set(live), getitems=getitems, nodes=nodes,
                                 target=target, prologue=pro)
        except (codegen.NotFusable, kernels.NotSupported):
            continue
        if fused.inputs != kernel.inputs:  # the emitter took it
            kernel_plans[name] = (fused, roots)
            taken[name] = {"node": root, "members": members}
    return taken


def _stored_by_an_epilogue(nodes: dict[str, Node], pro: codegen.Prologue) -> bool:
    """Whether the chain reads, at the element, the result of a kernel that takes the chain after it
    as an epilogue (a norm's, a softmax's, a channels-last convolution's: _take_epilogues). Then that
    kernel stores the chain's end at no extra pass, and a convolution reading it keeps its own staging
    (the depthwise kernel's cp.async pipeline, which a prologue's computed values cannot take): in
    training mode, MobileNet's batch norm then ReLU before each depthwise convolution."""
    from stitchcuda.agents.coder.emit_norm import EMITTERS as NORMS

    for arg, direct in zip(pro.inputs, pro.direct or (False,) * len(pro.inputs), strict=True):
        src = nodes.get(_view_root(nodes, arg.name)["name"]) if direct and arg.name in nodes else None
        if src is not None and src["op"] == "getitem":
            src = nodes.get(ref_name(src["args"].get("self")) or "")
        if src is not None and (src["op"] in NORMS or src["op"] in SOFTMAX_EPILOGUE_OPS or _conv_epilogue(src)):
            return True
    return False


# "0" keeps a cat's pointwise sources stored first (_take_cat_sources): for same-run comparisons.
CAT_SOURCES_ENV = "STITCHCUDA_CAT_SOURCES"
CAT_OPS = frozenset({"cat", "stack"})


def _take_cat_sources(
    graph: list[Node], nodes: dict[str, Node], kinds: dict[str, str],
    kernel_plans: dict[str, tuple[kernels.Kernel, dict[str, str]]], getitems: dict[str, list[Node]],
    live: list[str], output: Node, target: Target, carried: set[str] = frozenset(),  # type: ignore[assignment]
) -> dict[str, list[dict[str, Any]]]:
    """A cat whose sources include pointwise nodes that nothing else reads computes each of them as
    it copies it (a source read through its chain's loader) instead of reading it stored: the
    pointwise kernel's write and read of every such source go. Level 3's SqueezeNet fire module
    (two convolutions, each a bias and a ReLU, then cat along channels: 4.3 GB of result) stored
    both activations in one pointwise pass and copied them in another (2.3 ms on the H200), where
    torch.compile writes the cat from the convolutions' outputs in one. Returns, per cat that took
    any, what the Coder rebuilds it from: [{"node", "members"}, ...]."""
    taken: dict[str, list[dict[str, Any]]] = {}
    if os.environ.get(CAT_SOURCES_ENV, "1") == "0":
        return taken
    order = {n["name"]: i for i, n in enumerate(graph)}
    readers, returned, written = _root_readers(graph, nodes, kernel_plans, live, output)
    for name, (kernel, roots) in list(kernel_plans.items()):
        node = nodes[name]
        if node["op"] not in CAT_OPS or roots:
            continue
        found: dict[str, Any] = {}
        chosen: list[dict[str, Any]] = []
        for src in dict.fromkeys(r for r in iter_refs(node["args"]) if r is not None):
            # The source itself (no view between), pointwise, read by this cat alone and once.
            if kinds.get(src) != "pointwise" or src in returned or src in carried or readers.get(src, set()) != {name} \
                    or list(iter_refs(node["args"])).count(src) != 1:
                continue
            members = _closure(order, nodes, kinds, [src], stored=carried)
            try:
                pro = codegen.prologue(graph, members, src, nodes=nodes)
            except codegen.NotFusable:
                continue
            if any(_view_root(nodes, a.name)["name"] in written for a in pro.inputs):
                continue
            found[src] = pro
            chosen.append({"node": src, "members": members})
        if not found:
            continue
        try:
            fused = kernels.emit(graph, name, kernel.name, live=set(live), getitems=getitems, nodes=nodes,
                                 target=target, sources=found)
        except kernels.NotSupported:
            continue
        took = {c["node"] for c in chosen} - {a.name for a in fused.inputs}
        if took:
            kernel_plans[name] = (fused, roots)
            taken[name] = [c for c in chosen if c["node"] in took]
    return taken


# "0" gathers a scatter-add's source first (_take_gathered_sources): for same-run comparisons.
GATHERED_SOURCES_ENV = "STITCHCUDA_GATHERED_SOURCES"


def _take_gathered_sources(
    graph: list[Node], nodes: dict[str, Node], kinds: dict[str, str],
    kernel_plans: dict[str, tuple[kernels.Kernel, dict[str, str]]], prologues: dict[str, dict[str, Any]],
    getitems: dict[str, list[Node]], live: list[str], output: Node, target: Target,
    cat_sources: dict[str, list[dict[str, Any]]] | None = None,
) -> dict[str, list[str]]:
    """A scatter-add whose source is rows picked from a table (x[src], index_select) that nothing
    else reads reads each message through the index as it adds it, and the gather's kernel goes:
    its write of every message and the scatter's read of them. A graph network's message passing
    (bench/networks/graph_conv_layer.py on the H200: the gather 75.8 us, the adds 57.0, where
    torch.compile does both in one kernel of 21.6). So does a cat (or stack) of such rows: message
    passing's cat([h[row], h[col], e]) before its edge MLP (bench/networks2's EGNN layer on the
    H200: two gathers of 35-37 us each, whose 32 MB results the cat copied again). Returns, per
    kernel that took any, the gather nodes' names (the Coder passes them back as `gathered`)."""
    from stitchcuda.agents.coder.emit_scatter import SOURCE_ARG

    taken: dict[str, list[str]] = {}
    if os.environ.get(GATHERED_SOURCES_ENV, "1") == "0":
        return taken
    readers, returned, written = _root_readers(graph, nodes, kernel_plans, live, output)
    for name, (kernel, roots) in list(kernel_plans.items()):
        if nodes[name]["op"] in CAT_OPS:
            _take_gathered_cat_sources(graph, nodes, kinds, kernel_plans, name, getitems, live, target,
                                       (readers, returned, written), (cat_sources or {}).get(name, []), taken)
            continue
        key = SOURCE_ARG.get(nodes[name]["op"])
        src = ref_name(nodes[name]["args"].get(key)) if key else None
        if src is None or roots or src not in kernel_plans or src in returned or readers.get(src) != {name} \
                or kernels.gather_of(nodes, src) is None or kernel_plans[src][1]:
            continue
        pro = prologues.get(name)  # (`self` computed as copied, where _take_prologues found it so)
        try:
            fused = kernels.emit(graph, name, kernel.name, live=set(live), getitems=getitems, nodes=nodes,
                                 target=target, gathered=[src],
                                 prologue=codegen.prologue(graph, pro["members"], pro["node"], nodes=nodes) if pro else None)
        except (codegen.NotFusable, kernels.NotSupported):
            continue
        if src not in {a.name for a in fused.inputs}:
            kernel_plans[name] = (fused, roots)
            # Nothing else reads the gathered rows: no kernel writes them.
            del kernel_plans[src]
            kinds[src] = "gathered"
            taken[name] = [src]
    return taken


def _take_gathered_cat_sources(
    graph: list[Node], nodes: dict[str, Node], kinds: dict[str, str],
    kernel_plans: dict[str, tuple[kernels.Kernel, dict[str, str]]], name: str, getitems: dict[str, list[Node]],
    live: list[str], target: Target, seen: tuple[dict[str, set[str]], set[str], set[str]],
    chosen: list[dict[str, Any]], taken: dict[str, list[str]],
) -> None:
    """_take_gathered_sources for cat or stack `name`: each source that is a gather's kernel, read by
    this cat alone and once, its table and index written by nothing in place, is read through the
    index as the cat copies it (the sources already computed as read, `chosen`, stay so)."""
    readers, returned, written = seen
    kernel, roots = kernel_plans[name]
    refs = list(iter_refs(nodes[name]["args"]))
    picks = []
    for src in dict.fromkeys(r for r in refs if r is not None):
        g = kernels.gather_of(nodes, src)
        if roots or src not in kernel_plans or kernel_plans[src][1] or src in returned or refs.count(src) != 1 \
                or readers.get(src) != {name} or g is None \
                or {_view_root(nodes, t.name)["name"] for t in (g.table, g.index)} & written:
            continue
        picks.append(src)
    if not picks:
        return
    loaders = {c["node"]: codegen.prologue(graph, c["members"], c["node"], nodes=nodes) for c in chosen}
    try:
        fused = kernels.emit(graph, name, kernel.name, live=set(live), getitems=getitems, nodes=nodes,
                             target=target, sources=loaders, gathered=picks)
    except (codegen.NotFusable, kernels.NotSupported):
        return
    took = [src for src in picks if src not in {a.name for a in fused.inputs}]
    if not took:
        return
    kernel_plans[name] = (fused, roots)
    for src in took:  # nothing else reads the picked rows: no kernel writes them
        del kernel_plans[src]
        kinds[src] = "gathered"
    taken[name] = took


# "0" turns epilogues off (the pointwise ops after a norm run in a kernel of their own, reading the
# stored result): for same-run comparisons, and a way out should one misbehave on a GPU.
EPILOGUES_ENV = "STITCHCUDA_EPILOGUES"


def _take_epilogues(
    graph: list[Node], nodes: dict[str, Node], kinds: dict[str, str],
    kernel_plans: dict[str, tuple[kernels.Kernel, dict[str, str]]], prologues: dict[str, dict[str, Any]],
    getitems: dict[str, list[Node]], live: list[str], output: Node, stage: dict[str, int],
    pointwise: list[FusionGroup], target: Target,
) -> dict[str, dict[str, Any]]:
    """A norm whose normalised result (or, with STITCHCUDA_CONV_FUSE=1, a convolution whose
    channels-last result) is read by one pointwise group alone, and by nothing else, computes that
    group as it stores the result and writes the group's one output instead (an
    epilogue): the result's write and the group's read of it go (a scale or activation after a
    BatchNorm, a residual add after a GroupNorm). The group's other inputs must exist before the
    norm runs, and be none of its own results. Returns, per kernel that took one, what the Coder
    rebuilds it from: {"node", "value", "members"}, and the group it replaces ("group")."""
    from stitchcuda.agents.coder.emit_norm import EMITTERS as NORMS

    taken: dict[str, dict[str, Any]] = {}
    if os.environ.get(EPILOGUES_ENV, "1") == "0":
        return taken
    readers: dict[str, set[str]] = {}
    for name in live:
        for src in node_inputs(nodes[name]):
            readers.setdefault(src, set()).add(name)
    returned = {src for v in output["args"]["values"] if (src := ref_name(v)) is not None}
    written = set().union(*_in_place_writes(graph, nodes, kernel_plans).values())
    for name, (kernel, roots) in list(kernel_plans.items()):
        conv = _conv_epilogue(nodes[name]) or _nchw_conv_epilogue(nodes[name])
        # A softmax (log_softmax) stores the chain's end as it stores its result (emit_reduce).
        whole = conv or _gemm_epilogue(nodes[name]) or nodes[name]["op"] == DIM_NORM_OP or \
            (nodes[name]["op"] in SOFTMAX_EPILOGUE_OPS and softmax_epilogues_on())
        if (nodes[name]["op"] not in NORMS and not whole) or roots:
            continue
        outs = {a.name for a in kernel.outputs}
        ys = [name] if whole and name in outs else \
            [o["name"] for o in getitems.get(name, []) if o["args"].get("index") == 0 and o["name"] in outs]
        if len(ys) != 1 or ys[0] in returned:
            continue
        y = ys[0]
        users = readers.get(y, set())
        groups = [g for g in pointwise if y in g.inputs]
        # Views of it are read through (the lowering refuses any that moves an element).
        while views := {u for u in users if nodes[u].get("view")}:
            if any(u in returned for u in views):
                break
            users = (users - views) | {r for v in views for r in readers.get(v, set())}
        else:
            views = set()
        if views or len(groups) != 1 or len(groups[0].outputs) != 1 or not users <= set(groups[0].nodes):
            continue
        # Another kernel reading it (a reduction whose prologue recomputes the same chain from it).
        if any(_view_root(nodes, a.name)["name"] == y for other, (k, _) in kernel_plans.items() if other != name
               for a in k.inputs):
            continue
        group = groups[0]
        # A group that writes a buffer (copy_) would write it at the norm's place, before kernels
        # that read the old value.
        if any(kinds.get(n) == "copy" or nodes[n]["op"] == "copy_" for n in group.nodes):
            continue
        try:
            epi = codegen.epilogue(graph, group.nodes, group.outputs[0], y, nodes=nodes)
        except codegen.NotFusable:
            continue
        mine = outs | set(kernel.mutates)
        if any((root := _view_root(nodes, a.name)["name"]) in written or a.name in mine or root in mine
               or (kinds.get(root) not in ("input", "constant") and stage.get(root, 0) >= stage[name])
               for a in epi.inputs):
            continue
        pro = prologues.get(name)
        try:
            fused = kernels.emit(
                graph, name, kernel.name, live=set(live), getitems=getitems, nodes=nodes, target=target, epilogue=epi,
                prologue=codegen.prologue(graph, pro["members"], pro["node"], nodes=nodes) if pro else None)
        except (codegen.NotFusable, kernels.NotSupported):
            continue
        if epi.node not in {a.name for a in fused.outputs}:
            continue
        kernel_plans[name] = (fused, roots)
        taken[name] = {"node": epi.node, "value": y, "members": list(group.nodes), "group": group}
    return taken


# A convolution (forward or transposed) with a channels-last fp32 result takes the pointwise chain after it
# as an epilogue, which cuDNN's runtime fusion may compute as the convolution stores its result
# (emit_conv._with_epilogue; the coder writes the same variable into conv.cuh as a constant, and
# sc_conv_fused_run keeps the fused plan only where it agrees and is faster). "0" turns it off. Measured inside
# candidates on an H200 (2026-11-27): level2/1 1.40 ms fused against 1.70 apart, 87 1.85 against
# compile's 2.89; the transposed ones tried (16, 2) found no faster fused plan and ran apart.
CONV_FUSE_ENV = "STITCHCUDA_CONV_FUSE"


# Softmax and log_softmax take the pointwise chain after them as an epilogue (a scale, a bias and
# an activation after a softmax: level 2's 38 and 91 stored the softmax for a pass of its own to
# read back). "0" turns it off; unmeasured on a GPU as of its commit.
SOFTMAX_EPILOGUE_ENV = "STITCHCUDA_SOFTMAX_EPILOGUE"
SOFTMAX_EPILOGUE_OPS = frozenset({"_softmax", "_log_softmax", "_safe_softmax"})


def softmax_epilogues_on() -> bool:
    return os.environ.get(SOFTMAX_EPILOGUE_ENV, "1") != "0"


# A linear layer (addmm with nn.Linear's bias) takes a ReLU after it as cuBLASLt's RELU_BIAS
# epilogue (emit_gemm._relu_epilogue; other chains stay a pointwise kernel of their own): one launch
# and one pass over the result fewer per hidden layer of an MLP. "0" turns it off; CPU-tested (nvcc)
# as of its commit, not yet timed on a GPU.
GEMM_EPILOGUE_ENV = "STITCHCUDA_GEMM_EPILOGUE"


def _gemm_epilogue(node: Node) -> bool:
    return os.environ.get(GEMM_EPILOGUE_ENV, "1") != "0" and node["op"] == "addmm"


def _conv_epilogue(node: Node) -> bool:
    """A convolution that may take an epilogue: its result fp32 and channels-last."""
    a = node.get("args", {})
    return (os.environ.get(CONV_FUSE_ENV, "1") != "0" and node["op"] == "convolution" and bool(a.get("channels_last"))
            and node.get("dtype") == "float32")


# A convolution whose result stays NCHW is offered the chain after it too: the depthwise kernel
# computes it as it stores (emit_conv._dw_epilogue; batch norm and ReLU6 after an inverted residual's
# depthwise convolution in eval mode); other convolutions' emitters refuse it and stay as they are.
# "0" turns it off.
NCHW_CONV_EPILOGUE_ENV = "STITCHCUDA_DW_EPILOGUE"


def _nchw_conv_epilogue(node: Node) -> bool:
    a = node.get("args", {})
    return (os.environ.get(NCHW_CONV_EPILOGUE_ENV, "1") != "0" and node["op"] == "convolution"
            and not a.get("channels_last") and not a.get("transposed"))


def _in_place_writes(graph: Sequence[Node], nodes: dict[str, Node],
                     kernel_plans: dict[str, tuple[kernels.Kernel, dict[str, str]]]) -> dict[str, set[str]]:
    """What forward writes in place, by writer: a buffer's copy_ and the tensors kernels update (a
    BatchNorm's running statistics), each by its view root."""
    writes: dict[str, set[str]] = {}
    for n in graph:
        roots = {_view_root(nodes, m)["name"] for m in (kernel_plans[n["name"]][0].mutates
                                                        if n["name"] in kernel_plans else []) if m in nodes}
        if n["op"] == "copy_" and (dest := ref_name(n.get("args", {}).get("self"))) is not None and dest in nodes:
            roots.add(_view_root(nodes, dest)["name"])
        if roots:
            writes[n["name"]] = roots
    return writes


def _emit_with_copies(
    graph: list[Node], nodes: dict[str, Node], getitems: dict[str, list[Node]], name: str, live: set[str],
    target: Target,
) -> tuple[kernels.Kernel, dict[str, str]]:
    """The kernel for `name`; when the emitter refuses, retry once with every view operand (and
    every operand whose traced layout is not contiguous) replaced by a contiguous copy."""
    node = nodes[name]
    for out in [name] + [o["name"] for o in getitems.get(name, [])]:
        meta = nodes[out]
        if meta.get("shape") is not None and not is_contiguous(meta):
            raise kernels.NotSupported(f"{node.get('target')}: its result {out} is traced with a non-contiguous layout")
    try:
        return kernels.emit(graph, name, f"k_{name}", live=live, getitems=getitems, nodes=nodes, target=target), {}
    except kernels.NotSupported as first:
        views = [
            src
            for src in dict.fromkeys(node_inputs(node))
            if nodes[src].get("view") or (nodes[src].get("shape") is not None and not is_contiguous(nodes[src]))
        ]
        if not views:
            raise
        roots: dict[str, str] = {}
        for src in views:
            copy = _contiguous_copy(graph, nodes[src])
            roots[src] = copy["name"]
        nodes.update(by_name(graph))
        try:
            return kernels.emit(
                graph, name, f"k_{name}", roots=roots, live=live, getitems=getitems, nodes=nodes, target=target
            ), roots
        except kernels.NotSupported:
            # The copies go again: nothing reads them, and the rest of the plan never classified
            # them (a float64 linear layer crashed the planner on them, 2026-11-28).
            copies = set(roots.values())
            graph[:] = [n for n in graph if n["name"] not in copies]
            for c in copies:
                nodes.pop(c, None)
            raise first from None


def _contiguous_copy(graph: list[Node], src: Node) -> Node:
    """A clone of `src`, stored row-major, inserted into the graph right after it."""
    name = _fresh({n["name"] for n in graph}, f"{src['name']}_contig")
    copy: Node = {
        "name": name,
        "op": "clone",
        "target": "aten.clone.default",
        "args": {"self": ref(src["name"]), "memory_format": None},
        "view": False,
        "shape": list(src["shape"]),
        "dtype": src["dtype"],
        "stride": contiguous_strides(src["shape"]),
        "offset": 0,
    }
    graph.insert(graph.index(src) + 1, copy)
    return copy


def _other_reason(node: Node, nodes: dict[str, Node]) -> str:
    if node["op"] == "copy_":
        dest = ref_name(node["args"].get("self"))
        if dest in nodes and nodes[dest]["op"] == "input":
            return f"forward modifies {dest} in place: the built-in coder only writes fresh outputs"
    if node["op"] == "getitem":
        src = ref_name(node["args"].get("self"))
        return _other_reason(nodes[src], nodes) if src in nodes else "getitem of an unknown node"
    return codegen.pointwise_support(node) or f"{node.get('target') or node['op']}: not supported by the built-in coder yet"


def _scalar_constant(node: Node) -> bool:
    return isinstance(node.get("value"), list) and len(node["value"]) == 1


def _live(graph: Sequence[Node], output: Node) -> list[str]:
    """Nodes the outputs depend on, plus in-place writes (whose effect is the point), in graph order."""
    todo = list(iter_refs(output["args"]))
    todo += [n["name"] for n in graph if n["op"].endswith("_") and n["op"] != "output"]
    seen = ancestors(by_name(graph), todo)
    return [n["name"] for n in graph if n["name"] in seen]


def _stages(graph: Sequence[Node], kinds: dict[str, str], after: dict[str, set[str]] | None = None) -> dict[str, int]:
    """Each node's stage: groups run stage by stage, a stage's kernels before its pointwise groups.
    `after`: nodes that must run in a later stage than the (earlier) nodes named, beyond data flow."""
    stage: dict[str, int] = {}
    for node in graph:
        name = node["name"]
        before = max((stage.get(s, 0) for s in node_inputs(node)), default=0)
        s = before + 1 if kinds[name] in ("other", "kernel") else before
        stage[name] = max([s] + [stage.get(w, 0) + 1 for w in (after or {}).get(name, ())])
    return stage


def _in_place_order(
    graph: Sequence[Node], nodes: dict[str, Node], kinds: dict[str, str],
    kernel_plans: dict[str, tuple[kernels.Kernel, dict[str, str]]], live: list[str],
) -> tuple[dict[str, set[str]], set[str]]:
    """Where forward writes a tensor in place (a kernel's running statistics, a buffer's copy_), the
    nodes reading it before the write must run before it, and those reading it after, after it:
    {node: the earlier nodes it must follow}. Data flow does not say so (a pointwise op reading a
    BatchNorm's running_var before that BatchNorm sits in the same stage, after the kernel). Also the
    pointwise readers before a write, to store: left to their consumers, a later group would compute
    them from the written value."""
    order = {n["name"]: i for i, n in enumerate(graph)}
    alive = set(live)
    writes = {w: roots for w, roots in _in_place_writes(graph, nodes, kernel_plans).items() if w in alive}
    after: dict[str, set[str]] = {}
    store: set[str] = set()
    for w, roots in writes.items():
        own = set(_closure(order, nodes, kinds, node_inputs(nodes[w])))  # computed with the write itself
        for r in live:
            if r == w or r in own or nodes[r].get("view") or \
                    not any(_view_root(nodes, src)["name"] in roots for src in node_inputs(nodes[r])):
                continue
            if order[r] < order[w]:
                after.setdefault(w, set()).add(r)
                if kinds.get(r) == "pointwise":
                    store.add(r)
            else:
                after.setdefault(r, set()).add(w)
    return after, store


# The most pointwise ops a later stage's kernel computes again from a value's chain before that value is
# stored where it is computed and read from there (_carried_values); STITCHCUDA_CARRY_OPS sets another.
# (H200, 2026-11-30: at 32 and at 64 the seven modules whose plans change came back correct; lstm_bidir_proj
# ran 2.53 ms at 32 against 2.93 at 64. mpnn_nnconv_gru missed the TF32 rung on its large-input set at 32,
# by precision, and passed the next rung at 2e-7: a bench stopped after one rung had called it incorrect.)
CARRY_OPS = int(os.environ.get("STITCHCUDA_CARRY_OPS", "32"))


def _carried_values(graph: Sequence[Node], order: dict[str, int], nodes: dict[str, Node], kinds: dict[str, str],
                    live: Sequence[str], stage: dict[str, int]) -> set[str]:
    """Pointwise values read by a later stage whose own chains are CARRY_OPS ops or longer: stored once,
    in the stage that computes them, and read from there. Left to their readers, as every other
    pointwise value is, each later stage computes them again from the start: in an unrolled recurrence
    (a loop over time steps, or an LSTM that PyTorch decomposes) every step's kernel computes every
    earlier step's cell state, code and work growing with the square of the steps (bench/coverage's
    lstm_bidir_proj: a 14 MB source that nvcc did not build in 100 s). Taken in graph order, so a
    value stored bounds the chains after it: no kernel computes more than about CARRY_OPS ops of an
    earlier stage's."""
    alive = set(live)
    crossing: set[str] = set()
    for node in graph:
        name = node["name"]
        if name not in alive or kinds.get(name) not in ("pointwise", "view", "copy"):
            continue
        for src in node_inputs(node):
            if src not in nodes:
                continue
            root = _view_root(nodes, src)["name"]
            if kinds.get(root) == "pointwise" and stage[root] < stage[name]:
                crossing.add(root)
    carried: set[str] = set()
    for name in sorted(crossing, key=order.__getitem__):
        if len(_closure(order, nodes, kinds, [name], stored=carried)) >= CARRY_OPS:
            carried.add(name)
    return carried


def _closure(
    order: dict[str, int], nodes: dict[str, Node], kinds: dict[str, str], outs: list[str],
    stored: set[str] = frozenset(),  # type: ignore[assignment]
) -> list[str]:
    """Pointwise ops and views that the outputs are computed from, up to inputs and other ops, and up
    to the `stored` nodes (read as stored, not computed again: _in_place_order's)."""
    seen: set[str] = set()
    todo = list(outs)
    while todo:
        name = todo.pop()
        if name in seen or kinds.get(name) not in ("pointwise", "view", "copy") or (name in stored and name not in outs):
            continue
        seen.add(name)
        todo += node_inputs(nodes[name])
    return sorted(seen, key=order.__getitem__)

