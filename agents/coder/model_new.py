"""model_new.py of a built-in candidate: ModelNew with the reference's signatures and state, whose
forward checks its inputs, allocates outputs and calls the kernels through one host entry point."""

from __future__ import annotations

import ast
import inspect
import keyword
from collections.abc import Sequence
from typing import Any

from stitchcuda.agents.coder.orchestrate import FORWARD, GRAPH_FORWARD, Step, describe, libraries
from stitchcuda.agents.graph import Node, by_name, is_contiguous, ref_name, restride

CU_FILE = "fused_kernels.cu"
PY_FILE = "model_new.py"


_HEADER = '''"""ModelNew for {title}, written by StitchCUDA's built-in coder.

{kernels}
The kernels are specialised to the traced shapes and dtypes; forward raises ValueError for others.
They have no backward: where autograd would differentiate an output, asking for its gradient raises
RuntimeError (never a silent detach). Train with the original module.
"""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("{cu}"), libraries={libraries!r})
_DEVICE = "{device}"
_CUDA = _DEVICE == "cuda"


class _NoBackward(torch.autograd.Function):
    # The outputs' grad_fn where an input or parameter requires grad: backward says why it cannot
    # go on, instead of the parameters (and everything before them) silently getting no gradient.
    @staticmethod
    def forward(ctx, out, *inputs):
        return out.view_as(out)

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(
            "ModelNew ({title}) runs StitchCUDA's generated kernels, which have no backward: no gradient "
            "can flow through it. Train with the original module; use ModelNew under torch.no_grad() or "
            "torch.inference_mode()."
        )


def _no_backward(out, inputs):
    need = [t for t in inputs if t.requires_grad]
    if not need or not isinstance(out, torch.Tensor) or not out.is_floating_point():
        return out
    return _NoBackward.apply(out, *need)


def _mismatch(checks):
    # Reached only when forward's one-line guard failed: says which tensor, and how.
    for t, name, shape, dtype in checks:
        if t.shape != shape or t.dtype != dtype or t.is_cuda != _CUDA:
            raise ValueError(
                f"ModelNew was generated for {{name}} of shape {{shape}} and {{dtype}} on {{_DEVICE}}; "
                f"got {{tuple(t.shape)}} {{t.dtype}} on {{t.device}}"
            )
'''


def render_model(
    graph: Sequence[Node],
    steps: Sequence[Step],
    cls: type,
    *,
    title: str = "",
    host: bool = False,
) -> str:
    """model_new.py: ModelNew with the reference's signatures and state, calling the kernels."""
    nodes = by_name(graph)
    output = next(n for n in graph if n["op"] == "output")
    fwd = _Forward(graph, cls)
    used = {a.name for k in steps for a in k.inputs}
    used |= {_root(nodes, r)["name"] for r in map(ref_name, output["args"]["values"]) if r is not None}
    body: list[str] = []
    # State the kernels read, each into a local once: nn.Module's attribute lookup costs about a
    # microsecond a level on every forward, a dict lookup a few percent of that.
    for node in graph:
        if node["op"] == "input" and node.get("kind") != "arg" and node["name"] in used and "shape" in node:
            body.append(f"{fwd.state_local(node)} = {_state_path(node)}")
    # One guard for every tensor the kernels read, before touching any (shapes are compile-time
    # constants in the kernels: any other shape would read out of bounds); only when it fails does
    # _mismatch look at each tensor to say which one.
    checks = [(fwd.expr(n), n["name"], tuple(n["shape"]), n["dtype"]) for n in graph
              if n["op"] == "input" and n["name"] in used and n.get("shape") is not None]
    if checks:
        body.append("if (")
        for k, (expr, _, shape, dtype) in enumerate(checks):
            join = "" if k == len(checks) - 1 else " or"
            body.append(f"    {expr}.shape != {shape!r} or {expr}.dtype != torch.{dtype} or {expr}.is_cuda != _CUDA{join}")
        body.append("):")
        body.append("    _mismatch((")
        body += [f"        ({expr}, {name!r}, {shape!r}, torch.{dtype})," for expr, name, shape, dtype in checks]
        body.append("    ))")
    body += fwd.value_checks()
    args = [n for n in graph if n["op"] == "input" and n.get("kind") == "arg" and n["name"] in used and "shape" in n]
    if args:
        body.append("# Strides in the kernels are relative to contiguous inputs (a no-op when they are).")
    for node in args:
        source = fwd.expr(node)
        body.append(f"{fwd.local(node)} = {source}.contiguous()")
    device = fwd.device(graph, used)
    anchor = device.removesuffix(".device")  # a tensor on that device, for the stream
    # What forward returns is allocated on every call; every other buffer (intermediates, library
    # workspaces) is made once per device and stream and reused: no allocator calls on the forward's
    # path, and the same pointers each call, so the CUDA graph of the forward (stitch_forward_graph)
    # replays instead of recording again.
    returned = {_root(nodes, r)["name"] for r in map(ref_name, output["args"]["values"]) if r is not None}
    like = {(tuple(n["shape"]), n["dtype"]): fwd.local(n) for n in reversed(args)}
    static: list[tuple[str, str]] = []  # (shape expression, dtype) of each reused buffer, in order
    static_vars: list[str] = []
    workspaces: dict[tuple[int, str], list] = {}  # (index in a kernel's scratch, dtype) -> [var, size]
    fresh_lines: list[str] = []
    buffers: list[tuple[Step, list[str]]] = []
    for k in steps:
        for out in k.outputs:
            node = nodes[out.name]
            if node["op"] == "copy_":
                # A write into module state (a BatchNorm step counter): the kernel stores into it.
                fwd.bind(out.name, fwd.expr(nodes[ref_name(node["args"]["self"])]))
                continue
            var = fwd.fresh(out.name)
            shape = tuple(node["shape"])
            if out.name in returned:
                same = like.get((shape, out.dtype))
                # empty_like of a contiguous argument is contiguous, and cheaper than torch.empty.
                fresh_lines.append(f"{var} = torch.empty_like({same})" if same else
                                   f"{var} = torch.empty({shape!r}, dtype=torch.{out.dtype}, device={device})")
            else:
                static.append((repr(shape), out.dtype))
                static_vars.append(var)
            fwd.bind(out.name, var)
        scratch = []
        for j, (dtype, count) in enumerate(getattr(k, "scratch", [])):
            # Kernels run one after another on one stream, so the j-th workspace of every kernel
            # can be one buffer, as large as the largest asked for.
            slot = (j, dtype)
            if slot not in workspaces:
                workspaces[slot] = [fwd.fresh(f"workspace{j}_{dtype}"), count]
                static.append(("", dtype))
                static_vars.append(workspaces[slot][0])
            workspaces[slot][1] = max(workspaces[slot][1], count)
            scratch.append(workspaces[slot][0])
        buffers.append((k, [fwd.expr(nodes[a.name]) for a in k.inputs + k.outputs] + scratch))
    sizes = {var: f"({count},)" for var, count in workspaces.values()}
    static = [(sizes.get(var, shape), dtype) for var, (shape, dtype) in zip(static_vars, static, strict=True)]
    stream = "0"
    if static_vars or not host:
        stream = fwd.fresh("stream")
        body.append(f"{stream} = runtime.stream_of({anchor})")
    if static_vars:
        ws, key = fwd.fresh("ws"), fwd.fresh("key")
        body.append(f"{ws} = self.__dict__.setdefault('_stitch_buffers', {{}})")
        body.append(f"{key} = ({device}, {stream})")
        body.append(f"if {key} not in {ws}:")
        body.append(f"    {ws}[{key}] = _buffers({device})")
        body.append(f"{', '.join(static_vars)}, = {ws}[{key}]")
    body += fresh_lines
    # One call runs every kernel (see orchestrator): the buffers of each, in launch order.
    forward = FORWARD + "_host" if host else (GRAPH_FORWARD if len(steps) > 1 else FORWARD)
    body.append(f"_lib.call_all({forward!r}, [")
    for k, args in buffers:
        body.append(f"    {', '.join(args)},  # {k.name}: {describe(k)[:70]}")
    body.append(f"], {stream})")
    results = [_result_expr(nodes, fwd, v) for v in output["args"]["values"]]
    structure = output.get("structure", "single")
    # Under grad mode only (the Verifier, and inference under no_grad, never pay for it): outputs that
    # autograd would differentiate get a grad_fn that refuses, clearly, to go backward.
    read = ", ".join(expr for expr, _, _, _ in checks)
    if read:
        body.append("if torch.is_grad_enabled():")
        guarded = [f"_no_backward({r}, ({read},))" for r in results]
        body.append(f"    {_returned(structure, guarded)}")
    body.append(_returned(structure, results))

    kernel_lines = "".join(f"{CU_FILE}: {k.name}: {describe(k)}\n" for k in steps)
    device = "cpu" if host else "cuda"
    text = _HEADER.format(
        title=(title or cls.__name__).replace("\"", "'"), kernels=kernel_lines, cu=CU_FILE, device=device, libraries=libraries(steps)
    )
    if static:
        text += "\n\ndef _buffers(device):\n"
        text += "    # Intermediates and library workspaces, reused by every call on one device and stream.\n"
        text += "    return (\n"
        text += "".join(f"        torch.empty({shape}, dtype=torch.{dtype}, device=device),\n" for shape, dtype in static)
        text += "    )\n"
    text += "\n\nclass ModelNew(nn.Module):\n"
    text += f"    def __init__(self{_signature(cls.__init__, skip_first=True)}):\n"
    text += "".join(f"        {line}\n" for line in _init_body(graph))
    text += f"\n    def forward(self{fwd.signature}):\n"
    text += "".join(f"        {line}\n" for line in body)
    return text


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


def _result_expr(nodes: dict[str, Node], fwd: _Forward, value: Any) -> str:
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
    if offset == 0 and is_contiguous({"shape": shape, "stride": strides, "offset": 0}):
        return f"{fwd.expr(root)}.view({shape!r})"
    return f"{fwd.expr(root)}.as_strided({shape!r}, {tuple(strides)!r}, {offset})"


class _Forward:
    """Names in the generated forward: its parameters, the state it reads, the buffers it makes."""

    def __init__(self, graph: Sequence[Node], cls: type):
        self.taken: set[str] = {"self", "torch", "nn", "runtime", "Path", "_lib", "_mismatch", "_buffers",
                                "_NoBackward", "_no_backward"}
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
        return ast.literal_eval(repr(value)) == value
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False


def _init_body(graph: Sequence[Node]) -> list[str]:
    """super().__init__() and every parameter and buffer of the reference, same keys and shapes."""
    lines = ["super().__init__()"]
    made: set[str] = set()
    for node in graph:
        if node["op"] != "input" or node.get("kind") not in ("param", "buffer"):
            continue
        *path, leaf = node["key"].split(".")
        parent = "self"
        for part in path:
            child = _attr_path(parent, part)
            if child not in made:
                made.add(child)
                lines.append(
                    f"{child} = nn.Module()" if _plain(part) else f"{parent}.add_module({part!r}, nn.Module())"
                )
            parent = child
        if "shape" not in node:
            continue
        value = f"torch.zeros({tuple(node['shape'])!r}, dtype=torch.{node['dtype']})"
        if node["kind"] == "param":
            if _plain(leaf):
                lines.append(f"{parent}.{leaf} = nn.Parameter({value})")
            else:
                lines.append(f"{parent}.register_parameter({leaf!r}, nn.Parameter({value}))")
        else:
            persistent = "" if node.get("persistent", True) else ", persistent=False"
            lines.append(f"{parent}.register_buffer({leaf!r}, {value}{persistent})")
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
