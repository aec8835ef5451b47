"""model_new.py of a built-in candidate: ModelNew with the reference's signatures and state, whose
forward checks its inputs and runs the kernels (`_kernels`: outputs allocated, one host entry point
called). Where PyTorch must see the kernels as one operation (torch.compile, torch.export, autograd)
they run as a custom op, `_op`, whose fake implementation and backward are the reference's own math
(`_reference`, see reference_math)."""

from __future__ import annotations

import inspect
import keyword
import math
import os
import re
from collections.abc import Sequence
from typing import Any

import torch

from stitchcuda import kernel_loader, pyast
from stitchcuda.agents import random_draws
from stitchcuda.agents.coder.batch import BatchInfo
from stitchcuda.agents.coder.orchestrate import FORWARD, GRAPH_FORWARD, Step, describe, graphed, libraries
from stitchcuda.agents.coder.reference_math import Unrenderable, literal, render_reference
from stitchcuda.agents.graph import Node, by_name, is_contiguous, iter_refs, ref_name, restride
from stitchcuda.types import MODE_NAMES

CU_FILE = "fused_kernels.cu"
PY_FILE = "model_new.py"


_HEADER = '''"""ModelNew for {title}, written by StitchCUDA's built-in coder.

{kernels}
{shapes}{mode}
They run as one PyTorch custom op ({opname}) where PyTorch needs to see one (torch.compile,
torch.export, autograd) and as a direct call otherwise. {backward}
"""

@LOADER@
import torch.nn as nn

# The library StitchCUDA built beside this file (any machine with torch), else a build of the sources.
_lib = load_kernels(Path(__file__).with_name("{cu}"), {libraries!r})
_DEVICE = "{device}"
_CUDA = _DEVICE == "cuda"
# Intermediates and library workspaces, one set per device and stream, reused by every call.
_BUFFERS = {{}}


def _mismatch(checks):
    # Reached only when forward's one-line guard failed: says which tensor, and how (None: any size).
    for t, name, shape, dtype in checks:
        got = tuple(t.shape) if shape[:1] != (None,) else (None, *t.shape[1:])
        if got != shape or t.dtype != dtype or t.is_cuda != _CUDA:
            raise ValueError(
                f"ModelNew was generated for {{name}} of shape {{shape}} and {{dtype}} on {{_DEVICE}}; "
                f"got {{tuple(t.shape)}} {{t.dtype}} on {{t.device}}"
            )
    raise ValueError("ModelNew's tensor arguments must share their first (batch) dimension; got "
                     + ", ".join(f"{{name}}: {{tuple(t.shape)}}" for t, name, shape, _ in checks if shape[:1] == (None,)))
'''

_BACKWARD_REFERENCE = (
    "Backward differentiates the\nreference's own math (its traced PyTorch ops, `_reference` below), "
    "recomputed from the saved inputs."
)
_BACKWARD_NONE = (
    "They have no backward ({why}):\nasking for a gradient through ModelNew raises RuntimeError "
    "(never a silent detach)."
)

# The custom op: registered once per process (the same file over the same library, imported twice,
# reuses it), named by a digest of this file's text and of the library it calls, so that two
# different candidates never share a name.
_OP = '''

def _define_op():
    digest = hashlib.sha256(Path(__file__).read_bytes() + str(_lib.path).encode()).hexdigest()
    name = "{prefix}_" + digest[:16]
    if hasattr(torch.ops.stitchcuda_gen, name):
        return getattr(torch.ops.stitchcuda_gen, name).default
    op = torch.library.custom_op("stitchcuda_gen::" + name, _kernels_op, mutates_args=())
    op.register_fake(_fake)
    op.register_autograd(_backward, setup_context=_setup)
    return op


def _kernels_op({params}) -> list[torch.Tensor]:
{op_body}


def _fake({args}):
{fake}


def _setup(ctx, inputs, output):
    tensors = inputs[0]
    ctx.save_for_backward(*tensors{save_state}){mark_state}
    ctx.count = len(tensors)
    ctx.needs = [t.requires_grad for t in tensors]


def _backward(ctx, grads):
{backward}


_op = _define_op()
'''

_FAKE_REFERENCE = """    return [torch.empty(o.shape, dtype=o.dtype, device=o.device) for o in _reference(tensors, {state})]{more}"""

_BACKWARD_BODY = """    saved = ctx.saved_tensors
    leaves = [t.detach().requires_grad_(need) for t, need in zip(saved[: ctx.count], ctx.needs)]
    with torch.enable_grad():
        outs = _reference(leaves, [t.detach() for t in saved[ctx.count :]])
        pairs = [(o, g) for o, g in zip(outs, grads) if g is not None and o.requires_grad]
        wanted = [t for t in leaves if t.requires_grad]
        found = torch.autograd.grad([o for o, _ in pairs], wanted, [g for _, g in pairs], allow_unused=True) if pairs and wanted else [None] * len(wanted)
    found = iter(found)
    return {returned}"""

_BACKWARD_REFUSED = """    raise RuntimeError(
        "ModelNew ({title}) runs StitchCUDA's generated kernels, which have no backward here ({why}): "
        "no gradient can flow through it. Train with the original module; use ModelNew under "
        "torch.no_grad() or torch.inference_mode()."
    )"""


def render_model(
    graph: Sequence[Node],
    steps: Sequence[Step],
    cls: type,
    *,
    title: str = "",
    host: bool = False,
    batch: BatchInfo | None = None,
) -> str:
    """model_new.py: ModelNew with the reference's signatures and state; its forward checks the inputs
    and runs the kernels (`_kernels`) directly, or as the custom op `_op` where PyTorch must see one.

    With a dynamic `batch` (agents/coder/batch.py), forward takes any size of its arguments' first
    dimension: `_run` calls the kernels over chunks of the traced batch (`_chunks`)."""
    nodes = by_name(graph)
    output = next(n for n in graph if n["op"] == "output")
    title = (title or cls.__name__).replace("\"", "'")
    roots = [_root(nodes, r) for r in map(ref_name, output["args"]["values"]) if r is not None]
    used = {a.name for k in steps for a in k.inputs} | {r["name"] for r in roots}
    # What the op takes: every tensor input the graph reads (the kernels' and the reference math's),
    # with the module state the kernels write (BatchNorm's running statistics) in a list of its own.
    read = {n for node in graph if node["op"] != "input" for n in _refs(node)}
    written = {ref_name(n["args"]["self"]) for n in graph if n["op"] == "copy_"}
    written |= {name for k in steps for name in getattr(k, "mutates", [])}  # e.g. BatchNorm's running statistics
    inputs = [n for n in graph if n["op"] == "input" and "shape" in n and (n["name"] in read or n["name"] in used)]
    state = [n for n in inputs if n["name"] in written]
    tensors = [n for n in inputs if n["name"] not in written]
    produced = {o.name for k in steps for o in k.outputs}
    returned = list(dict.fromkeys(r["name"] for r in roots if r["name"] in produced))

    dynamic = batch is not None and batch.dynamic and not state
    # The fast path (FastPath) where one tensor guard can stand for forward's checks: no random
    # draws and no non-tensor arguments to check.
    fwd = _Forward(graph, cls)
    fast = (fast_path_enabled() and not fwd.value_checks()
            and not any(n.get("kind") == "draw" for n in inputs))
    kernels_text, static = _render_kernels(graph, steps, cls, tensors, state, returned, host=host, fast=fast)
    try:
        reference = render_reference(graph, [n["name"] for n in tensors], [n["name"] for n in state], returned,
                                     batch=batch if dynamic else None)
        why = ""
    except Unrenderable as e:
        reference, why = None, str(e)

    body: list[str] = []
    # State is read into locals once: nn.Module's attribute lookup costs about a microsecond a level
    # on every forward, a dict lookup a few percent of that.
    for node in inputs:
        if node.get("kind") not in ("arg", "draw"):
            # (a complex parameter or buffer is read as its float pairs: agents/plan/complex_pairs.py)
            path = f"torch.view_as_real({_state_path(node)})" if node.get("as_real") else _state_path(node)
            body.append(f"{fwd.state_local(node)} = {path}")
    # Random draws stay PyTorch's (agents/random_draws.py): the reference's calls, in its order.
    draws = [n for n in inputs if n.get("kind") == "draw"]
    device = fwd.device(graph, {n["name"] for n in inputs if n.get("kind") != "draw"})
    drawn = [f"{fwd.fresh_bind(n['name'])} = {random_draws.render(n, device)}" for n in draws]
    # One guard for every tensor the kernels read, before touching any (shapes are compile-time
    # constants in the kernels: any other shape would read out of bounds); only when it fails does
    # _mismatch look at each tensor to say which one.
    checks = [(fwd.expr(n), n["name"], tuple(n["shape"]), n["dtype"]) for n in inputs if n.get("kind") != "draw"]
    batched = [n for n in tensors if dynamic and n.get("kind") == "arg"]
    size = fwd.fresh("batch") if batched else ""
    if batched:
        # The first dimension of forward's tensor arguments is free (the batch); the rest stays.
        body.append(f"{size} = {fwd.expr(batched[0])}.shape[0]")
        checks = [(e, name, (None, *shape[1:]) if any(name == n["name"] for n in batched) else shape, d)
                  for e, name, shape, d in checks]
    # forward's own path starts here (the fast path's `else`); the batch size is read before it, as
    # the results' reshapes use it on either path.
    guarded = len(body)
    if checks:
        body.append("if (")
        for k, (expr, _, shape, dtype) in enumerate(checks):
            join = "" if k == len(checks) - 1 else " or"
            if shape[:1] == (None,):
                test = f"{expr}.shape[1:] != {shape[1:]!r}"
                if expr != fwd.expr(batched[0]):  # (the first one defines the batch)
                    test += f" or {expr}.shape[0] != {size}"
            else:
                test = f"{expr}.shape != {shape!r}"
            body.append(f"    {test} or {expr}.dtype != torch.{dtype} or {expr}.is_cuda != _CUDA{join}")
        body.append("):")
        body.append("    _mismatch((")
        body += [f"        ({expr}, {name!r}, {shape!r}, torch.{dtype})," for expr, name, shape, dtype in checks]
        body.append("    ))")
    body += fwd.value_checks()
    body += drawn  # after the checks: a refused call draws nothing
    lists = f"[{', '.join(fwd.expr(n) for n in tensors)}]"
    if state:
        lists += f", [{', '.join(fwd.expr(n) for n in state)}]"
    # The op (about 10 us of dispatch) only where PyTorch must see it: while torch.compile or
    # torch.export traces, and where autograd has a graph to record. Otherwise a direct call.
    grads = " or ".join(f"{fwd.expr(n)}.requires_grad" for n in tensors if _floating(n["dtype"]))
    needs_op = "torch.compiler.is_compiling()" + (f" or (torch.is_grad_enabled() and ({grads}))" if grads else "")
    outs = [fwd.fresh(name) for name in returned]
    for name, var in zip(returned, outs, strict=True):
        fwd.bind(name, var)
    unpack = f"{', '.join(outs)}, = " if outs else ""
    body.append(f"if {needs_op}:")
    if state:
        fresh = [fwd.fresh(f"new_{n['name']}") for n in state]
        body.append(f"    {', '.join(outs + fresh)}, = _op({lists})")
        body += [f"    {fwd.expr(n)}.copy_({v})" for n, v in zip(state, fresh, strict=True)]
    else:
        body.append(f"    {unpack}_op({lists})")
    arm = [f"    _arm({lists})"] if fast else []  # (returns at once where this stream is armed)
    if batched:
        # (_run's test, inlined: a forward pays for every call it makes)
        body.append(f"elif {size} == {batch.size}:")
        body.append(f"    {unpack}_kernels({lists})")
        body += arm
        body.append("else:")
        body.append(f"    {unpack}_chunks({lists}{'' if state else ', ()'}, {size})")
    else:
        body.append("else:")
        body.append(f"    {unpack}_kernels({lists})")
        body += arm
    if fast:
        # One C++ guard and _fast's lean call where it passes; forward's own path otherwise. The
        # guard is not traced: torch.compile and torch.export see forward's own path.
        got = fwd.fresh("fast")
        body[guarded:] = [f"if not torch.compiler.is_compiling() and ({got} := _fast({lists})) is not None:",
                          f"    {unpack}{got}", "else:"] + [f"    {line}" for line in body[guarded:]]
    # A returned view of an input is taken over its contiguous copy, as the kernels see it.
    for root in roots:
        if root["name"] not in produced and root["op"] == "input" and root.get("kind") == "arg":
            body.append(f"{fwd.local(root)} = {fwd.expr(root)}.contiguous()")
    results = [_result_expr(nodes, fwd, v, size) for v in output["args"]["values"]]
    if fast and batched and not any(re.search(rf"\b{size}\b", r) for r in results):
        # No result is shaped by the batch: only forward's own path reads it.
        body.insert(guarded + 2, "    " + body.pop(guarded - 1))
    body.append(_returned(output.get("structure", "single"), results))
    if output.get("mode_dependent"):
        # The kernels are the traced modes' math; in others forward would return it silently.
        body[:0] = ["if self._sc_modes_seen != _MODE_SETS[0]:", "    _check_modes(self)"]

    kernel_lines = "".join(f"{CU_FILE}: {k.name}: {describe(k)}\n" for k in steps)
    # Algebra the planner did on the traced graph, said in the proposal (agents/plan/linear_reductions.py).
    kernel_lines += "".join(f"planned: {n['name']}: {n['folded']}\n" for n in graph if "folded" in n)
    device = "cpu" if host else "cuda"
    text = _HEADER.format(
        title=title, kernels=kernel_lines, cu=CU_FILE, device=device, libraries=libraries(steps),
        opname="stitchcuda_gen::" + _op_prefix(title) + "_<digest>",
        backward=_BACKWARD_REFERENCE if reference else _BACKWARD_NONE.format(why=why),
        shapes=_shapes_line(batch, batched), mode=_mode_line(output),
    )
    text = text.replace("@LOADER@", kernel_loader.source_text())
    if static:
        text += "\n\ndef _buffers(device):\n"
        text += "    return (\n"
        text += "".join(f"        {made},\n" for made in static)
        text += "    )\n"
    text += "\n\n" + kernels_text
    if batched:
        text += "\n\n" + _chunked(batch, [i for i, n in enumerate(tensors) if n in batched],
                                  [(tuple(nodes[r]["shape"][1:]), nodes[r]["dtype"], batch.factors.get(r, 1))
                                   for r in returned])
    if reference:
        text += "\n\n" + reference.text
    args = "tensors, state" if state else "tensors"
    params = "tensors: list[torch.Tensor]" + (", state: list[torch.Tensor]" if state else "")
    # An op with autograd must be functional: the kernels write module state (BatchNorm's running
    # statistics) into copies the op returns after its outputs, and forward copies them back.
    more = " + [torch.empty_like(s) for s in state]" if state else ""
    op_body = ("    fresh = [s.clone() for s in state]\n    return _kernels(tensors, fresh) + fresh" if state
               else f"    return {'_run' if batched else '_kernels'}(tensors)")
    if reference:
        fake = _FAKE_REFERENCE.format(state="state" if state else "[]", more=more)
        leaf_grads = "[next(found) if t.requires_grad else None for t in leaves]"
        backward = _BACKWARD_BODY.format(returned=f"({leaf_grads}, [None] * len(saved[ctx.count :]))" if state else leaf_grads)
    else:
        made = ", ".join(
            f"torch.empty({tuple(nodes[r]['shape'])!r}, dtype=torch.{nodes[r]['dtype']}, device=tensors[0].device)"
            for r in returned
        )
        fake = f"    return [{made}]{more}"
        backward = _BACKWARD_REFUSED.format(title=title, why=why.replace('"', "'"))
    text += _OP.format(
        prefix=_op_prefix(title), params=params, args=args, fake=fake, op_body=op_body,
        save_state=f", *output[{-len(state)}:]" if state else "", backward=backward,
        mark_state=(
            "\n    # Module state as the op returned it (forward copies it into the module's buffers, which"
            "\n    # autograd would see as changed); the outputs' math does not read what the kernels wrote."
            f"\n    ctx.mark_non_differentiable(*output[{-len(state)}:])"
        ) if state else "",
    )
    if any(n["op"] == "input" and "data" in n for n in graph):
        text += _UNSAVED
    modes = _mode_watch(output)
    if modes is not None:
        traced = bool(output.get("training"))
        text += _WRONG_MODE.format(traced=MODE_NAMES[traced], other=MODE_NAMES[not traced],
                                   other_call="eval" if traced else "train", modes=modes,
                                   mixed=any(m != traced for m in modes.values()))
    text += "\n\nclass ModelNew(nn.Module):\n"
    if modes is not None:
        text += "    training = _TRAINING\n\n"
    text += f"    def __init__(self{_signature(cls.__init__, skip_first=True)}):\n"
    text += "".join(f"        {line}\n" for line in _init_body(graph, parts=modes))
    if output.get("training") is False:
        # Built as the module was when traced (its __init__ called .eval()): forward's math is that mode's.
        text += "        self.eval()\n"
    if modes is not None:
        text += "        _set_modes(self)  # each watched part in the mode it was traced in\n"
    if fast:
        text += "        _FAST.tie(self)\n"
        text += ("\n    def _apply(self, *args, **kwargs):\n"
                 "        _FAST.drop()  # moved (.to, .cuda, .cpu, .half): hold no outputs where it was\n"
                 "        return super()._apply(*args, **kwargs)\n")
    text += f"\n    def forward(self{fwd.signature}):\n"
    text += "".join(f"        {line}\n" for line in body)
    return text


def _render_kernels(
    graph: Sequence[Node],
    steps: Sequence[Step],
    cls: type,
    tensors: Sequence[Node],
    state: Sequence[Node],
    returned: Sequence[str],
    *,
    host: bool,
    fast: bool = False,
) -> tuple[str, list[str]]:
    """`def _kernels(tensors, state)`: the inputs made contiguous, the outputs allocated, one call that
    runs every kernel. Returns its text and the expression making each reused buffer (and constant)."""
    nodes = by_name(graph)
    k_ns = _Forward(graph, cls)
    # (with the names _fast binds beside the tensors')
    k_ns.taken |= {"tensors", "state", "_BUFFERS", "f", "rc", "stream", "static", "ahead",
                   "_ahead_outputs"}
    body: list[str] = []
    for group, listed in (("tensors", tensors), ("state", state)):
        if listed:
            body.append(f"{', '.join(k_ns.fresh_bind(n['name']) for n in listed)}, = {group}")
    used = {a.name for k in steps for a in k.inputs}
    args = [n for n in tensors if n.get("kind") == "arg" and n["name"] in used]
    if args:
        body.append("# Strides in the kernels are relative to contiguous inputs (a no-op when they are).")
    for node in args:
        body.append(f"{k_ns.expr(node)} = {k_ns.expr(node)}.contiguous()")
    device = k_ns.device(graph, used | {n["name"] for n in tensors})
    anchor = device.removesuffix(".device")  # a tensor on that device, for the stream
    # What forward returns is allocated on every call; every other buffer (intermediates, library
    # workspaces) is made once per device and stream and reused: no allocator calls on the forward's
    # path, and the same pointers each call, so the CUDA graph of the forward (stitch_forward_graph)
    # replays instead of recording again.
    like = {(tuple(n["shape"]), n["dtype"]): k_ns.expr(n) for n in reversed(args)}
    static: list[tuple[str, str]] = []
    static_vars: list[str] = []
    read = {a.name for k in steps for a in k.inputs}
    constants = [n for n in graph if n["op"] == "constant" and n["name"] in read and n.get("shape") is not None]
    for node in constants:
        k_ns.fresh_bind(node["name"])
    workspaces: dict[tuple[int, str], list] = {}  # (index in a kernel's scratch, dtype) -> [var, size]
    fresh: list[tuple[str, str, int]] = []  # (variable, the expression allocating it, its bytes)
    buffers: list[tuple[Step, list[str]]] = []
    for k in steps:
        for out in k.outputs:
            node = nodes[out.name]
            if node["op"] == "copy_":
                # A write into module state (a BatchNorm step counter): the kernel stores into it.
                k_ns.bind(out.name, k_ns.expr(nodes[ref_name(node["args"]["self"])]))
                continue
            var = k_ns.fresh(out.name)
            shape = tuple(node["shape"])
            if out.name in returned:
                same = like.get((shape, out.dtype))
                # empty_like of a contiguous argument is contiguous, and cheaper than torch.empty.
                fresh.append((var, f"torch.empty_like({same})" if same else
                              f"torch.empty({shape!r}, dtype=torch.{out.dtype}, device={device})",
                              math.prod(shape) * getattr(torch, out.dtype).itemsize))
            else:
                static.append((repr(shape), out.dtype))
                static_vars.append(var)
            k_ns.bind(out.name, var)
        scratch = []
        for j, (dtype, count) in enumerate(getattr(k, "scratch", [])):
            # Kernels run one after another on one stream, so the j-th workspace of every kernel
            # can be one buffer, as large as the largest asked for.
            slot = (j, dtype)
            if slot not in workspaces:
                workspaces[slot] = [k_ns.fresh(f"workspace{j}_{dtype}"), count]
                static.append(("", dtype))
                static_vars.append(workspaces[slot][0])
            workspaces[slot][1] = max(workspaces[slot][1], count)
            scratch.append(workspaces[slot][0])
        buffers.append((k, [k_ns.expr(nodes[a.name]) for a in k.inputs + k.outputs] + scratch))
    sizes = {var: f"({count},)" for var, count in workspaces.values()}
    made = [f"torch.empty({sizes.get(var, shape)}, dtype=torch.{dtype}, device=device)"
            for var, (shape, dtype) in zip(static_vars, static, strict=True)]
    # Small tensors the reference makes in forward (torch.tensor([...])): made once per device, with
    # the buffers, and read by the kernels like any input.
    for node in constants:
        made.append(f"torch.tensor({literal(node['value'])}, dtype=torch.{node['dtype']}, device=device)"
                    f".reshape({tuple(node['shape'])!r})")
        static_vars.append(k_ns.expr(node))
    stream = "0"
    if static_vars or not host:
        stream = k_ns.fresh("stream")
        body.append(f"{stream} = stream_of({anchor})")
    if static_vars:
        key = k_ns.fresh("key")
        body.append(f"{key} = ({device}, {stream})")
        body.append(f"if {key} not in _BUFFERS:")
        body.append(f"    _BUFFERS[{key}] = _buffers({device})")
        body.append(f"{', '.join(static_vars)}, = _BUFFERS[{key}]")
    body += [f"{var} = {expr}" for var, expr, _ in fresh]
    # One call runs every kernel (see orchestrator): the buffers of each, in launch order.
    forward = FORWARD + "_host" if host else (GRAPH_FORWARD if graphed(steps) else FORWARD)
    body.append(f"_lib.call_all({forward!r}, [")
    for k, a in buffers:
        body.append(f"    {', '.join(a)},  # {k.name}: {describe(k)[:70]}")
    body.append(f"], {stream})")
    body.append(f"return [{', '.join(k_ns.expr(nodes[r]) for r in returned)}]")
    text = "def _kernels(tensors, state=()):\n" + "".join(f"    {line}\n" for line in body)
    if fast:
        text += "\n\n" + _render_fast(tensors, state, k_ns, static_vars, fresh, buffers, forward,
                                       [k_ns.expr(nodes[r]) for r in returned], device)
    return text, made


def outputs_ahead_enabled() -> bool:
    """The fast path's outputs allocated by the call before (FastPath.ahead); read when the module
    is written, never by it. STITCHCUDA_OUTPUTS_AHEAD=0 leaves it out, for A/B timing of the host
    path."""
    return os.environ.get("STITCHCUDA_OUTPUTS_AHEAD", "1") != "0"


def fast_path_enabled() -> bool:
    """The generated forward's fast path (FastPath in the kernel loader); STITCHCUDA_FAST_PATH=0
    leaves it out, for A/B timing of the host path."""
    return os.environ.get("STITCHCUDA_FAST_PATH", "1") != "0"


def _render_fast(
    tensors: Sequence[Node],
    state: Sequence[Node],
    k_ns: _Forward,
    static_vars: Sequence[str],
    fresh: Sequence[tuple[str, str, int]],
    buffers: Sequence[tuple[Step, list[str]]],
    forward: str,
    returned: Sequence[str],
    device: str,
) -> str:
    """`_FAST`, `_fast(tensors[, state])` and `_arm(tensors[, state])`: _kernels' work once forward's
    guard is torch's one C++ check (FastPath): the same buffers and the same call, less what that
    check makes redundant; module state the kernels write (BatchNorm's running statistics) is
    guarded and written in place, as _kernels writes it. _fast returns None where the call must take
    forward's own path. The outputs it returns were allocated by the call before, after that call's
    launch (FastPath.ahead), where the setting allows (outputs_ahead_enabled) and FastPath finds
    them small enough."""
    count = sum(len(a) for _, a in buffers)
    unpack = f"{', '.join(k_ns.expr(n) for n in tensors)}, = tensors"
    if state:
        unpack += f"\n    {', '.join(k_ns.expr(n) for n in state)}, = state"
    params, guarded = ("tensors, state", "*tensors, *state") if state else ("tensors", "*tensors")
    static = set(static_vars)
    ptrs = ", ".join(a if a in static else f"{a}.data_ptr()" for _, args in buffers for a in args) or "0"
    ahead = outputs_ahead_enabled() and bool(fresh)
    made = f", {sum(b for _, _, b in fresh)}" if ahead else ""
    lines = [
        f"_FAST = FastPath(_lib, {forward!r}, {count}{made})",
        "",
        "",
        f"def _fast({params}):",
        "    # Checked by the guard: the dtypes, device, shapes, strides (contiguous) and requires_grad of",
        "    # a call forward ran directly; the reusable buffers are this stream's, as pointers.",
        "    f = _FAST",
        f"    if f.guard is None or not f.guard.check({guarded}) or (f.grad and torch.is_grad_enabled()) or f.capturing():",
        "        return None",
        "    stream = f.stream()",
        "    static = f.static.get(stream)",
        "    if static is None:",
        "        return None",
        f"    {unpack}",
    ]
    if static_vars:
        lines.append(f"    {', '.join(static_vars)}, = static")
    names = ", ".join(var for var, _, _ in fresh)
    allocs = ", ".join(expr for _, expr, _ in fresh)
    if ahead:
        lines += [
            # (this call's dict: another thread may build the guard again, with a new one, meanwhile)
            "    ahead = f.ahead",
            f"    {names}, = ahead.pop(stream, None) or _ahead_outputs({params})",
        ]
    else:
        lines += [f"    {var} = {expr}" for var, expr, _ in fresh]
    lines += [
        f"    rc = f.fn(f.pack({ptrs}), stream)",
        "    if rc:",
        "        f.fail(rc)",
    ]
    if ahead:
        lines += [
            "    if f.ahead_ok and f.ahead is ahead and len(ahead) < f.AHEAD_STREAMS:",
            "        # The next call's outputs, while the GPU runs this one's kernels.",
            f"        f.refill(ahead, stream, _ahead_outputs, {params})",
        ]
    lines += [
        f"    return [{', '.join(returned)}]",
        "",
        "",
        *([f"def _ahead_outputs({params}):",
           "    # What _fast returns: made for the next call (FastPath.refill), or by this one where none were.",
           f"    {unpack}",
           f"    return ({allocs},)",
           "",
           ""] if ahead else []),
        f"def _arm({params}):",
        "    # After forward ran _kernels on these: the guard from them, and this stream's buffers.",
        f"    {unpack}",
        f"    stream = stream_of({device.removesuffix('.device')})",
        f"    _FAST.arm({'tensors + state' if state else 'tensors'}, stream, _BUFFERS.get(({device}, stream), ()))",
    ]
    return "\n".join(lines) + "\n"


_CHUNKS = """def _run(tensors, state=()):
    n = tensors[{first}].shape[0]
    return _kernels(tensors, state) if n == {size} else _chunks(tensors, state, n)


def _chunks(tensors, state, n):
    # A batch other than {size}: the kernels run over chunks of {size} samples, the last one padded
    # with zeros (each sample is computed on its own, so the padding never reaches the others).
    device = tensors[{first}].device
    # Each output's storage holds `rows` rows per sample (a reshape merged the batch with what follows).
    outs = [torch.empty((n * rows, *rest), dtype=dtype, device=device) for rest, dtype, rows in _OUTPUTS]
    for start in range(0, n, {size}):
        take = min({size}, n - start)
        part = list(tensors)
        for i in {batched}:
            piece = tensors[i][start : start + take]
            if take < {size}:
                padded = torch.zeros(({size}, *piece.shape[1:]), dtype=piece.dtype, device=device)
                padded[:take].copy_(piece)
                piece = padded
            part[i] = piece
        for out, got, (_, _, rows) in zip(outs, _kernels(part, state), _OUTPUTS):
            out[start * rows : (start + take) * rows].copy_(got[: take * rows])
    return outs


_OUTPUTS = {outputs}
"""


def _chunked(batch: BatchInfo, batched: Sequence[int], outputs: Sequence[tuple[tuple[int, ...], str, int]]) -> str:
    listed = "[" + ", ".join(f"({rest!r}, torch.{dtype}, {rows})" for rest, dtype, rows in outputs) + "]"
    return _CHUNKS.format(first=batched[0], size=batch.size, outputs=listed, batched=tuple(batched))


_WRONG_MODE = '''

# Each submodule whose forward reads its mode, and that mode when the module was traced. Every
# assignment of `training` (train(), eval(), on any part) counts in _MODE_SETS; forward checks the
# modes again only after one, so a call costs one comparison.
_MODES = {modes!r}
_MODE_SETS = [0]


def _get_training(self):
    return self.__dict__["_sc_training"]


def _set_training(self, mode):
    self.__dict__["_sc_training"] = mode
    _MODE_SETS[0] += 1


_TRAINING = property(_get_training, _set_training)


class _Part(nn.Module):
    """A submodule of ModelNew: the reference's, for its state and its mode, with no forward."""

    training = _TRAINING


def _set_modes(model):
    for path, mode in _MODES.items():
        (model.get_submodule(path) if path else model).training = mode
    model.__dict__["_sc_modes_seen"] = _MODE_SETS[0]


def _check_modes(model):
    for path, mode in _MODES.items():
        if (model.get_submodule(path) if path else model).training != mode:
            _wrong_mode(path, mode)
    model.__dict__["_sc_modes_seen"] = _MODE_SETS[0]


def _wrong_mode(path, mode):
    was, now = ("training", "eval") if mode else ("eval", "training")
    if {mixed!r}:
        raise RuntimeError(
            f"ModelNew was generated from the module with each submodule in the mode it was built in "
            f"(some in training mode, some in eval mode), and its forward depends on them: "
            f"`{{path or 'the module'}}` was in {{was}} mode and is in {{now}} mode now. Put it back, or "
            f"optimise the module as it is now"
        )
    where = f" (`{{path}}` is)" if path else ""
    raise RuntimeError(
        "ModelNew was generated from the module in {traced} mode, and its forward depends on the mode "
        "(batch statistics, dropout, a branch on self.training): the kernels compute the {traced} mode's "
        f"math only, and this call is in {other} mode{{where}}. Switch it back, or optimise the module in "
        "{other} mode for that (its __init__ ending in self.{other_call}())"
    )
'''


def _mode_watch(output: Node) -> dict[str, bool] | None:
    """The submodules ModelNew checks the modes of (graph.mode_watch), for a mode-dependent forward;
    a graph traced before the watch was recorded has the module's own mode alone."""
    if not output.get("mode_dependent"):
        return None
    return dict(output.get("modes") or {"": bool(output.get("training"))})


def _mode_line(output: Node) -> str:
    if not output.get("mode_dependent"):
        return ""
    traced = MODE_NAMES[bool(output.get("training"))]
    return (f"\nTraced in {traced} mode, on which forward depends (batch statistics, dropout, a branch on "
            f"self.training):\nforward raises in the other mode rather than run this one's math.")


def _shapes_line(batch: BatchInfo | None, batched: Sequence[Node]) -> str:
    if batched:
        names = ", ".join(n["name"] for n in batched)
        return (f"Dynamic: the first (batch) dimension of {names}, any size: the kernels run over chunks of "
                f"{batch.size}\nsamples (the last one padded), fastest at multiples of {batch.size}. Every other "
                "dimension and\nevery dtype stays as traced; forward raises ValueError for others.")
    why = f" (batch not dynamic: {batch.reason})" if batch is not None and batch.reason else ""
    return (f"The kernels are specialised to the traced shapes and dtypes{why};\nforward raises ValueError "
            "for others.")


def _refs(node: Node) -> list[str]:
    return [n for v in node.get("args", {}).values() for n in iter_refs(v)]


def _floating(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat", "complex"))


def _op_prefix(title: str) -> str:
    # An operator name is an identifier: KernelBench files start with a digit (1_Pointwise).
    name = "".join(c if c.isascii() and c.isalnum() else "_" for c in title.lower()).strip("_") or "module"
    return (name if name[0].isalpha() else f"m_{name}")[:40]


def _returned(structure: str, results: Sequence[str]) -> str:
    if structure == "single":
        return f"return {results[0]}"
    if structure == "list":
        return f"return [{', '.join(results)}]"
    return f"return ({', '.join(results)}{',' if len(results) == 1 else ''})"


def _root(nodes: dict[str, Node], name: str) -> Node:
    node = nodes[name]
    while node.get("view"):
        node = nodes[ref_name(node["args"]["self"])]
    return node


def _result_expr(nodes: dict[str, Node], fwd: _Forward, value: Any, batch: str = "") -> str:
    name = ref_name(value)
    if name is None:
        return repr(value)
    node = nodes[name]
    if not node.get("view"):
        return fwd.expr(node)
    root = _root(nodes, name)
    shape = tuple(node["shape"])
    # Any chain of views is one as_strided over the root, which forward holds row-major.
    moved = restride(shape, node["stride"], node.get("offset", 0), root["shape"], root["stride"])
    if moved is None:
        raise ValueError(f"{name}: a view that cannot be taken of a row-major {root['name']}")
    strides, offset = moved
    # A dynamic batch is the first dimension of every output and its root (agents/coder/batch.py).
    text = f"({batch}, {', '.join(map(str, shape[1:]))}{',' if len(shape) == 2 else ''})" if batch else repr(shape)
    if offset == 0 and is_contiguous({"shape": shape, "stride": strides, "offset": 0}):
        return f"{fwd.expr(root)}.view({text})"
    return f"{fwd.expr(root)}.as_strided({text}, {tuple(strides)!r}, {offset})"


class _Forward:
    """Names in the generated forward: its parameters, the state it reads, the buffers it makes."""

    def __init__(self, graph: Sequence[Node], cls: type):
        self.taken: set[str] = {"self", "torch", "nn", "Path", "hashlib", "ctypes", "_lib", "_mismatch",
                                "_buffers", "_kernels", "_op", "_reference", "_DEVICE", "_CUDA", "KernelLibrary",
                                "stream_of", "load_kernels", "prebuilt_name", "_error_name", "_run", "_chunks", "_OUTPUTS",
                                "FastPath", "_FAST", "_fast", "_arm", "_BUFFERS"}
        self.bound: dict[str, str] = {}
        self.args = [n for n in graph if n["op"] == "input" and n.get("kind") == "arg"]
        self.params, self.positional, self.varargs = _forward_params(cls, len(self.args))
        self.taken |= {p.name for p in self.params}
        self.signature = _render_params(self.params)

    def expr(self, node: Node) -> str:
        if node["name"] in self.bound:
            return self.bound[node["name"]]
        if node["op"] == "input" and node.get("kind") == "arg":
            i = node["index"]
            return self.positional[i] if i < len(self.positional) else f"{self.varargs}[{i - len(self.positional)}]"
        if node["op"] == "input":
            return _attr_path("self", node["key"])
        raise ValueError(f"{node['name']} has no value in the generated forward")

    def state_local(self, node: Node) -> str:
        """The local holding a parameter or buffer, read once per forward."""
        if node["name"] not in self.bound:
            self.bound[node["name"]] = self.fresh(f"s_{node['key']}")
        return self.bound[node["name"]]

    def local(self, node: Node) -> str:
        """The variable holding the contiguous version of a forward argument."""
        if node["name"] not in self.bound:
            expr = self.expr(node)
            self.bound[node["name"]] = expr if expr.isidentifier() else self.fresh(node["name"])
        return self.bound[node["name"]]

    def bind(self, name: str, var: str) -> None:
        self.bound[name] = var

    def fresh_bind(self, name: str) -> str:
        """A new local for a graph value, bound to it."""
        var = self.fresh(name)
        self.bound[name] = var
        return var

    def fresh(self, hint: str) -> str:
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in hint)
        if not base or base[0].isdigit() or keyword.iskeyword(base):
            base = f"t_{base}"
        name, k = base, 1
        while name in self.taken:
            name, k = f"{base}_{k}", k + 1
        self.taken.add(name)
        return name

    def device(self, graph: Sequence[Node], used: set[str]) -> str:
        """Where outputs go: beside the first tensor forward reads (forward args before state)."""
        inputs = [n for n in graph if n["op"] == "input" and n["name"] in used and "shape" in n]
        for node in sorted(inputs, key=lambda n: n.get("kind") != "arg"):
            return f"{self.expr(node)}.device"
        return "_DEVICE"

    def value_checks(self) -> list[str]:
        """Non-tensor arguments were constants to the trace: other values would be ignored silently."""
        lines = []
        for node in self.args:
            if "shape" not in node and _is_literal(node.get("value")):
                lines.append(f"if {self.expr(node)} != {node['value']!r}:")
                lines.append(
                    f"    raise ValueError(\"ModelNew was generated for {node['name']}={node['value']!r}\")"
                )
        for p in self.params[len(self.args) :]:
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and _is_literal(p.default):
                lines.append(f"if {p.name} != {p.default!r}:")
                lines.append(f"    raise ValueError(\"ModelNew was generated for {p.name}={p.default!r}\")")
        return lines


def _forward_params(cls: type, count: int) -> tuple[list[inspect.Parameter], list[str], str]:
    """forward's parameters (as the reference declares them), the positional names, and *args."""
    try:
        params = list(inspect.signature(cls.forward).parameters.values())[1:]
    except (TypeError, ValueError):
        params = []
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    varargs = next((p.name for p in params if p.kind == p.VAR_POSITIONAL), "")
    if len(positional) < count and not varargs:
        extra = [inspect.Parameter(f"arg{i}", inspect.Parameter.POSITIONAL_OR_KEYWORD) for i in range(len(positional), count)]
        params = params[: len(positional)] + extra + params[len(positional) :]
        positional += [p.name for p in extra]
    return params, positional, varargs


def _signature(fn: Any, *, skip_first: bool) -> str:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return ", *args, **kwargs"
    return _render_params(params[1:] if skip_first else params)


def _render_params(params: Sequence[inspect.Parameter]) -> str:
    """Parameters without annotations; defaults that are not literals become None."""
    parts: list[str] = []
    star_done = False
    for p in params:
        if p.kind == p.VAR_POSITIONAL:
            parts.append(f"*{p.name}")
            star_done = True
            continue
        if p.kind == p.VAR_KEYWORD:
            parts.append(f"**{p.name}")
            continue
        if p.kind == p.KEYWORD_ONLY and not star_done:
            parts.append("*")
            star_done = True
        text = p.name
        if p.default is not p.empty:
            text += f"={p.default!r}" if _is_literal(p.default) else "=None"
        parts.append(text)
        if p.kind == p.POSITIONAL_ONLY and (params.index(p) + 1 == len(params) or params[params.index(p) + 1].kind != p.POSITIONAL_ONLY):
            parts.append("/")
    return "".join(f", {s}" for s in parts)


def _is_literal(value: Any) -> bool:
    try:
        return pyast.literal_eval(repr(value)) == value
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False


_UNSAVED = '''


def _unsaved(data, dtype, shape):
    # A buffer the reference registered with persistent=False, which no state dict carries: its
    # values as the trace found them, from their raw bytes.
    import base64

    raw = bytearray(base64.b64decode(data))
    return (torch.frombuffer(raw, dtype=dtype) if raw else torch.empty(0, dtype=dtype)).reshape(shape).clone()
'''


def _init_body(graph: Sequence[Node], parts: dict[str, bool] | None = None) -> list[str]:
    """super().__init__() and every parameter and buffer of the reference, same keys and shapes. With
    `parts` (a mode-dependent forward's watched submodules, _mode_watch), the submodules are _Part
    (whose mode assignments forward counts), and each watched one is made, with or without state."""
    lines = ["super().__init__()"]
    made: set[str] = set()
    part_class = "nn.Module" if parts is None else "_Part"

    def parent_of(key: str) -> tuple[str, str]:
        *path, leaf = key.split(".")
        parent = "self"
        for part in path:
            child = _attr_path(parent, part)
            if child not in made:
                made.add(child)
                lines.append(
                    f"{child} = {part_class}()" if _plain(part) else f"{parent}.add_module({part!r}, {part_class}())"
                )
            parent = child
        return parent, leaf


    for node in graph:
        if node["op"] != "input" or node.get("kind") not in ("param", "buffer"):
            continue
        parent, leaf = parent_of(node["key"])
        if "shape" not in node:
            continue
        # The module's own tensor, where the kernels read a view of it (complex_pairs' `as_real`).
        own = {**node, **node["as_real"]} if node.get("as_real") else node
        value = f"torch.zeros({tuple(own['shape'])!r}, dtype=torch.{own['dtype']})"
        if node["kind"] == "param":
            if _plain(leaf):
                lines.append(f"{parent}.{leaf} = nn.Parameter({value})")
            else:
                lines.append(f"{parent}.register_parameter({leaf!r}, nn.Parameter({value}))")
        elif "data" in node:
            # Not in the state dict (persistent=False): the values the trace kept (graph.UNSAVED_BUFFER_BYTES).
            value = (f"_unsaved({node['data']!r}, torch.{own['dtype']}, {tuple(own['shape'])!r})")
            lines.append(f"{parent}.register_buffer({leaf!r}, {value}, persistent=False)")
        else:
            persistent = "" if node.get("persistent", True) else ", persistent=False"
            lines.append(f"{parent}.register_buffer({leaf!r}, {value}{persistent})")
        # The same tensor under the module's other names (graph._tied_names), so the state dicts match.
        kept = node.get("alias_persistent") or [node.get("persistent", True)] * len(node.get("aliases", ()))
        for alias, alias_kept in zip(node.get("aliases", ()), kept, strict=True):
            a_parent, a_leaf = parent_of(alias)
            if node["kind"] == "param":
                lines.append(f"{a_parent}.register_parameter({a_leaf!r}, {parent}._parameters[{leaf!r}])")
            else:
                persistent = "" if alias_kept else ", persistent=False"
                lines.append(f"{a_parent}.register_buffer({a_leaf!r}, {parent}._buffers[{leaf!r}]{persistent})")
    for path in parts or {}:
        if path:
            parent_of(f"{path}.-")  # (the part and its parents: a dropout has no state of its own)
    return lines


def _plain(part: str) -> bool:
    return part.isidentifier() and not keyword.iskeyword(part)


def _state_path(node: Node) -> str:
    """A parameter or buffer of the module by its state-dict key, through the registries the
    generated __init__ filled (_modules, _parameters, _buffers): the same objects nn.Module's
    attribute lookup finds, without its per-level cost."""
    *path, leaf = node["key"].split(".")
    expr = "self" + "".join(f"._modules[{part!r}]" for part in path)
    table = "_parameters" if node.get("kind") == "param" else "_buffers"
    return f"{expr}.{table}[{leaf!r}]"


def _attr_path(base: str, key: str) -> str:
    expr = base
    for part in key.split("."):
        expr = f"{expr}.{part}" if _plain(part) else f"getattr({expr}, {part!r})"
    return expr
