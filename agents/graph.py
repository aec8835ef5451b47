"""Trace a module's forward to a plain list of aten-level nodes.

The Planner and the Coders work on this list, not on torch objects, so a plan can be written to
JSON, shown in the editor and replayed in tests built from hand-written graphs. Tracing runs on
fake tensors: shapes, dtypes and strides come out exactly as on real data, while a KernelBench input
of several GiB costs nothing.

One node is a dict:

    name    unique name; graph inputs are named by their forward argument or state_dict key
    op      "input", "constant", "output", "getitem" or the aten overload packet ("add", "relu")
    target  the full overload, e.g. "aten.add.Tensor" (aten nodes only)
    args    every schema argument by name, defaults filled in; a tensor argument is {"ref": name}
    shape, dtype, stride, offset   of the result (offset: storage offset, in elements)
    view    the result aliases the storage of its first tensor argument (strides are relative to it)

Inputs also carry `kind` ("arg", "param", "buffer"), `index` (forward position) or `key` (state_dict
key) and `persistent`; non-tensor forward arguments carry `value`. Nodes returning several tensors
carry `outputs` (one shape/dtype/stride dict each) instead of `shape`.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import logging
import math
import os
import signal
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import torch
import torch.nn as nn

from stitchcuda.agents import trace_rnn
from stitchcuda.agents.eager_dropouts import EagerDropouts
from stitchcuda.agents.masked_reads import MaskedReads
from stitchcuda.types import Task

Node = dict[str, Any]

# Small constant tensors created inside forward (torch.tensor(2.5)) are kept by value.
_MAX_CONSTANT_NUMEL = 64


class TraceError(Exception):
    """The forward cannot be traced to a static graph; the message says why, for the user."""


# The floating dtypes the planner's rewrites take (their emitters compute in fp32 over these).
FLOAT_DTYPES = ("float32", "float16", "bfloat16")


def ref(name: str) -> dict[str, str]:
    """A tensor argument: a reference to the node that produced it."""
    return {"ref": name}


def ref_name(value: Any) -> str | None:
    if isinstance(value, dict) and set(value) == {"ref"}:
        return value["ref"]
    return None


def rename_refs(value: Any, renamed: dict[str, str]) -> Any:
    """`value` (a node's args, or part of them) with each reference to a key of `renamed` made to its value."""
    name = ref_name(value)
    if name is not None:
        return ref(renamed.get(name, name))
    if isinstance(value, list):
        return [rename_refs(v, renamed) for v in value]
    if isinstance(value, dict):
        return {k: rename_refs(v, renamed) for k, v in value.items()}
    return value


def iter_refs(value: Any) -> Iterator[str]:
    """Names of all nodes referenced by an argument value (nested lists included)."""
    name = ref_name(value)
    if name is not None:
        yield name
    elif isinstance(value, list | tuple):
        for v in value:
            yield from iter_refs(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from iter_refs(v)


def node_inputs(node: Node) -> list[str]:
    """Names of the nodes this node reads, in argument order, without repeats."""
    seen: dict[str, None] = {}
    for v in node.get("args", {}).values():
        for n in iter_refs(v):
            seen.setdefault(n, None)
    return list(seen)


def ancestors(nodes: dict[str, Node], start: Iterable[str]) -> set[str]:
    """The nodes named in `start` and every node they read, transitively (names `nodes` lacks are
    left out)."""
    todo = list(start)
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen or name not in nodes:
            continue
        seen.add(name)
        todo += node_inputs(nodes[name])
    return seen


def by_name(graph: Sequence[Node]) -> dict[str, Node]:
    return {n["name"]: n for n in graph}


def picks(graph: Sequence[Node]) -> dict[str, list[Node]]:
    """Node -> the getitems that pick its results (a multi-result op's; views excluded)."""
    out: dict[str, list[Node]] = {}
    for n in graph:
        if n["op"] == "getitem" and not n.get("view") and ref_name(n["args"].get("self")) is not None:
            out.setdefault(ref_name(n["args"]["self"]), []).append(n)
    return out


def python_number(value: Any) -> float | None:
    """An argument that is a Python int or float (not a bool, not a tensor), as a float."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def readers_of(graph: Sequence[Node]) -> dict[str, list[Node]]:
    """Node name -> the nodes that read it (each reader once, in graph order)."""
    readers: dict[str, list[Node]] = {}
    for node in graph:
        for src in node_inputs(node):
            readers.setdefault(src, []).append(node)
    return readers


def view_root(nodes: dict[str, Node], name: str) -> Node:
    """The node whose storage `name` is a view of (itself where it is no view)."""
    node = nodes[name]
    while node.get("view") and ref_name(node["args"].get("self")) in nodes:
        node = nodes[ref_name(node["args"]["self"])]
    return node


def reader_counts(graph: Sequence[Node]) -> dict[str, int]:
    """How many nodes read each node (one reading it twice counts once)."""
    counts: dict[str, int] = {}
    for n in graph:
        for name in set(iter_refs(n.get("args", {}))):
            counts[name] = counts.get(name, 0) + 1
    return counts


# A node rewrite for rewrite_nodes: (node, nodes by name, reader counts, names taken) -> the nodes that
# replace it and the names of the nodes that go with it, or None to leave it.
NodeRewrite = Callable[[Node, dict[str, Node], dict[str, int], set[str]], tuple[list[Node], set[str]] | None]


def rewrite_nodes(graph: list[Node], rewrite: NodeRewrite) -> list[Node]:
    """The planner's rewrites' common walk: each node offered to `rewrite` (which sees the graph as
    traced, and takes fresh names from one set), its replacements put in its place, the nodes it
    drops left out."""
    nodes, readers, taken = by_name(graph), reader_counts(graph), {n["name"] for n in graph}
    replaced: dict[str, list[Node]] = {}
    dropped: set[str] = set()
    for node in graph:
        done = rewrite(node, nodes, readers, taken)
        if done is not None:
            replaced[node["name"]], gone = done
            dropped |= gone
    if not replaced:
        return graph
    out: list[Node] = []
    for node in graph:
        if node["name"] in replaced:
            out.extend(replaced[node["name"]])
        elif node["name"] not in dropped:
            out.append(node)
    return out


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def new_node(name: str, op: str, args: dict[str, Any], shape: Sequence[int], stride: Sequence[int], dtype: str, *,
             view: bool, offset: int = 0, target: str | None = None) -> Node:
    """A node of the traced graph's form, for the planner's rewrites (default overload's target)."""
    return {"name": name, "op": op, "target": target or f"aten.{op}.default", "args": args, "view": view,
            "shape": list(shape), "dtype": dtype, "stride": list(stride), "offset": offset}


def fresh_name(taken: set[str], base: str) -> str:
    """`base`, or `base` with underscores appended, whichever is not in `taken` yet; then taken."""
    name = base
    while name in taken:
        name += "_"
    taken.add(name)
    return name


# The views whose meaning is logical (a reshape, a transpose), so they can be replayed on another
# layout; as_strided is storage-absolute and would read other elements there.
LOGICAL_VIEWS = frozenset({
    "aten.view.default", "aten._unsafe_view.default", "aten.reshape.default", "aten.transpose.int",
    "aten.permute.default", "aten.t.default", "aten.unsqueeze.default", "aten.squeeze.dim",
    "aten.squeeze.dims", "aten.squeeze.default", "aten.expand.default", "aten.slice.Tensor",
    "aten.select.int", "aten.alias.default",
})


def replay_view(view: Node, src: str, shape: Sequence[int], stride: Sequence[int],
                offset: int = 0) -> tuple[list[int], int] | None:
    """The strides and offset that `view` (a node of LOGICAL_VIEWS reading node `src`) has over a
    tensor of `shape` laid out as (stride, offset): the view called again on a meta tensor of that
    layout. None where the view is not logical, reads another tensor, or that layout cannot hold it
    (a reshape that merges dimensions the layout separates)."""
    target = view.get("target") or ""
    if target not in LOGICAL_VIEWS:
        return None
    overload = overload_of(target)
    if overload is None:
        return None
    meta = torch.empty_strided(list(shape), list(stride), dtype=torch.float32, device="meta")
    meta = meta.as_strided(list(shape), list(stride), offset)
    kwargs: dict[str, Any] = {}
    for a in overload._schema.arguments:
        if a.name not in view.get("args", {}):
            continue  # (its default)
        value = view["args"][a.name]
        if isinstance(value, dict) and "ref" in value:
            if value["ref"] != src:
                return None
            value = meta
        kwargs[a.name] = value
    try:
        got = overload(**kwargs)
    except (RuntimeError, TypeError, ValueError, AttributeError):
        return None
    if list(got.shape) != list(view.get("shape") or []):
        return None
    return list(got.stride()), int(got.storage_offset())


def replayed_view(name: str, op: str, args: dict[str, Any], src: Node, shape: Sequence[int], target: str,
                  dtype: str | None = None) -> Node | None:
    """A new view node `op(args)` of node `src`, its strides and offset those the view has on src's
    layout (replay_view); None where it has none there. For the planner's rewrites."""
    made = new_node(name, op, args, shape, [], dtype or src["dtype"], view=True, target=target)
    got = replay_view(made, src["name"], src["shape"], src["stride"], src.get("offset", 0))
    if got is None:
        return None
    made.update(stride=got[0], offset=got[1])
    return made


def contiguous_strides(shape: Sequence[int]) -> list[int]:
    strides, acc = [], 1
    for size in reversed(shape):
        strides.append(acc)
        acc *= max(int(size), 1)
    return strides[::-1]


def numel(shape: Sequence[int]) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n


def is_contiguous(node: Node) -> bool:
    """Dense row-major with no storage offset (size-1 dims may have any stride)."""
    if node.get("shape") is None or node.get("offset", 0) != 0:
        return False
    return all(
        size == 1 or stride == want
        for size, stride, want in zip(
            node["shape"], node["stride"], contiguous_strides(node["shape"]), strict=True
        )
    )


def restride(
    shape: Sequence[int],
    strides: Sequence[int],
    offset: int,
    base_shape: Sequence[int],
    base_strides: Sequence[int],
) -> tuple[list[int], int] | None:
    """A view's strides and offset over its base stored row-major, from those over the base's
    traced layout (`x.t() * w` is traced with x.t()'s strides; the kernels store it row-major).

    None when the base is not a permutation of a dense layout, or the view cannot be expressed over
    the row-major base (a reshape that merges dims which the permutation separates)."""
    if any(s < 0 for s in strides) or offset < 0:
        return None
    row_major = contiguous_strides(base_shape)
    # Base dims that are nested the same way in both layouts act as one: [size, traced, row-major].
    dims: list[list[int]] = []
    for size, traced, rm in zip(base_shape, base_strides, row_major, strict=True):
        if size == 1:
            continue
        if dims and dims[-1][1] == traced * size:
            dims[-1] = [dims[-1][0] * size, traced, rm]
        else:
            dims.append([size, traced, rm])
    order = sorted(range(len(dims)), key=lambda g: -dims[g][1])
    expect = 1
    for g in reversed(order):
        if dims[g][1] != expect:
            return None
        expect *= dims[g][0]

    def coords(value: int) -> list[int]:
        c = [0] * len(dims)
        for g in order:
            c[g], value = divmod(value, dims[g][1])
        return c

    start, steps = coords(offset), [coords(s) for s in strides]
    # Linear in the view's coordinates only if no base coordinate ever carries into the next.
    for g, (size, _, _) in enumerate(dims):
        if start[g] + sum(max(n - 1, 0) * step[g] for n, step in zip(shape, steps, strict=True)) >= size:
            return None
    return (
        [sum(step[g] * dims[g][2] for g in range(len(dims))) for step in steps],
        sum(start[g] * dims[g][2] for g in range(len(dims))),
    )


# ---------------------------------------------------------------------------------------------
# Tracing


def trace_task(task: Task) -> list[Node]:
    """Build the task's module and inputs on fake tensors and trace its forward."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from stitchcuda.task import load_task_module, set_mode

    module, cls = load_task_module(task)
    fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    try:
        with fake_mode:
            init_args = list(getattr(module, task.init_inputs_fn)())
            inputs = list(getattr(module, task.inputs_fn)())
    except Exception as fake_error:  # noqa: BLE001 - the user's helpers, any failure is reported as is
        # Helpers whose shapes depend on values (boolean-mask indexing: aten.nonzero) cannot run on
        # fakes: they are run for real, on the CPU, and the inputs made fake (the trace needs only
        # their shapes). The constructor's arguments stay real: a build reads them as given.
        try:
            with torch.no_grad(), _time_limit(TRACE_TIMEOUT_S):
                init_args = list(getattr(module, task.init_inputs_fn)())
                inputs = [fake_mode.from_tensor(v) if isinstance(v, torch.Tensor) else v
                          for v in getattr(module, task.inputs_fn)()]
        except Exception:  # noqa: BLE001 - the fake run's failure is the one reported
            raise TraceError(f"{task.inputs_fn}/{task.init_inputs_fn} failed on fake tensors: "
                             f"{_short(fake_error)}") from fake_error
    try:
        with fake_mode:
            model = cls(*init_args)
    except Exception:  # noqa: BLE001 - some constructors need real tensors (numpy, .item()): build it for real
        try:
            model = cls(*_realise(init_args))
        except Exception as e:  # noqa: BLE001
            raise TraceError(f"{task.class_name}(*{task.init_inputs_fn}()) failed: {_short(e)}") from e
    set_mode(model, task.mode)
    try:
        nodes = trace_module(model, inputs, fake_mode=fake_mode)
    except TraceError as e:
        # Say which call failed on what: a shape that forward rejects is most often get_inputs()'s.
        raise TraceError(f"{e} (tracing {task.class_name}.forward on {task.inputs_fn}() of {task.path.name}: "
                         f"{_shapes(inputs)})") from e
    _unsaved_from_a_real_module(nodes, lambda: cls(*_realise(init_args)))
    return nodes


def _unsaved_from_a_real_module(nodes: list[Node], build: Any) -> None:
    """A module built on fake tensors holds no values: where it has small buffers no state dict
    carries (persistent=False), it is built once for real, on the CPU, for their values alone. A
    constructor that fails so leaves them unsupported, as they were."""
    need = [n for n in nodes if _keepable(n) and "data" not in n and not n.get("attribute")]
    if not need:
        return
    try:
        with torch.no_grad(), _time_limit(TRACE_TIMEOUT_S):
            real = build()
    except Exception:  # noqa: BLE001 - the buffers stay unsupported, with the planner's reason
        return
    # (plain tensor attributes included: _trace may have traced them as buffers)
    values = {key: value for _, _, key, value in _plain_tensors(real)}
    _keep_unsaved_buffers(need, {**values, **dict(real.named_buffers(remove_duplicate=False))})


def _shapes(values: Sequence[Any]) -> str:
    return ", ".join(f"{tuple(v.shape)} {str(v.dtype).removeprefix('torch.')}" if isinstance(v, torch.Tensor)
                     else type(v).__name__ for v in values)


def _sdpa_math() -> Any:
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:  # torch before 2.3: no backend switch, the fused op stays unsupported
        return contextlib.nullcontext()
    return sdpa_kernel([SDPBackend.MATH])


@contextlib.contextmanager
def _causal_masks_as_given() -> Any:
    """nn.TransformerEncoder and nn.TransformerDecoder compare a mask passed without is_causal to a
    causal one (bool((mask == causal).all())), a value the trace cannot know: while tracing, the
    comparison says what is_causal says (None: not causal), and the mask itself is applied as given,
    so the result is the same, only without the causal fast path's hint."""
    try:
        from torch.nn.modules import transformer
    except ImportError:
        yield
        return
    found = getattr(transformer, "_detect_is_causal_mask", None)
    if found is None:
        yield
        return
    transformer._detect_is_causal_mask = lambda mask, is_causal=None, size=None: bool(is_causal)
    try:
        yield
    finally:
        transformer._detect_is_causal_mask = found


@contextlib.contextmanager
def _arguments_unvalidated() -> Iterator[None]:
    """torch.distributions checks its arguments by default (Normal's scale > 0, Categorical's
    probabilities summing to one) with a bool of a tensor, a value the trace cannot know. The checks
    only raise, never change a result: while tracing, distributions are made without them."""
    from torch.distributions import Distribution

    was = Distribution._validate_args
    Distribution.set_default_validate_args(False)
    try:
        yield
    finally:
        Distribution.set_default_validate_args(was)


# One trace at a time in a process. make_fx is not thread-safe (torch.fx's CURRENT_PATCHER is
# the process's: two traces at once fail), and the settings a trace changes are the process's too:
# traces in several threads (the language server's, a bench's pool), each saving and restoring a
# setting, left it changed whenever their exits interleaved (CI, 2026-11-30, twice). Reentrant: a
# trace retried with plain tensors as buffers is traced again from within.
_TRACE_LOCK = threading.RLock()


class _NoGradContext:
    """The `ctx` an old-style autograd.Function's forward is given while traced: it keeps what forward
    stores on it (saved tensors, attributes) and says no input needs a gradient, as under no_grad."""

    needs_input_grad: tuple[bool, ...] = ()

    def save_for_backward(self, *tensors: Any) -> None:
        self.saved_tensors = tensors

    def mark_dirty(self, *tensors: Any) -> None:
        pass

    def mark_non_differentiable(self, *tensors: Any) -> None:
        pass

    def set_materialize_grads(self, value: bool) -> None:
        pass


@contextlib.contextmanager
def _autograd_functions_inlined() -> Iterator[None]:
    """A custom torch.autograd.Function's `apply` runs its forward directly in the tracing thread:
    functionalize refuses one without setup_context, and traces one with it as an opaque call, while
    the trace is forward-only (no_grad), so forward's own ops are what the graph needs. Other threads
    (a worker training through the same Function) keep the real apply."""
    original = torch.autograd.Function.__dict__["apply"]
    plain_setup = torch.autograd.Function.setup_context
    tracer = threading.get_ident()

    def apply(cls: type, *args: Any, **kwargs: Any) -> Any:
        if threading.get_ident() != tracer:
            return original.__func__(cls, *args, **kwargs)
        if cls.setup_context is plain_setup:  # old style: forward(ctx, *args)
            ctx = _NoGradContext()
            ctx.needs_input_grad = tuple(False for _ in args)
            return cls.forward(ctx, *args, **kwargs)
        return cls.forward(*args, **kwargs)

    torch.autograd.Function.apply = classmethod(apply)  # type: ignore[assignment, method-assign]
    try:
        yield
    finally:
        torch.autograd.Function.apply = original  # type: ignore[method-assign]


@contextlib.contextmanager
def _one_trace_at_a_time() -> Iterator[None]:
    # scaled_dot_product_attention traces as its math decomposition (bmm, _safe_softmax, bmm),
    # which the emitters cover; the fused attention kernels are opaque ops here. cuDNN off: on CUDA
    # tensors batch_norm would trace as cudnn_batch_norm, a backend's op, where the CPU and the
    # emitters know native_batch_norm. Recurrent layers trace as one node each (trace_rnn).
    with _TRACE_LOCK, _quiet("torch._subclasses.fake_tensor"), _sdpa_math(), \
            torch.backends.cudnn.flags(enabled=False), _causal_masks_as_given(), _arguments_unvalidated(), \
            trace_rnn.recurrent_as_one_op(), _autograd_functions_inlined():
        yield


def trace_module(module: nn.Module, inputs: Sequence[Any], *, fake_mode: Any | None = None) -> list[Node]:
    """Trace module(*inputs) to aten nodes. Real inputs are replaced by fake ones of the same shape.

    Inputs and parameters are traced as contiguous tensors: the generated code makes them so at run
    time, and every stride in the graph is then relative to a contiguous base.

    The graph is the module's forward in its mode as given (`module.training`), which make_fx bakes
    in as it bakes other Python values. The output node says that mode (`training`) and whether the
    forward depends on it (`mode_dependent`: traced again in the other mode, the graph differs, or
    does not trace): ModelNew then refuses the other mode instead of running this one's math (a
    BatchNorm's batch statistics, a dropout, in a module the user has switched to .eval())."""
    nodes = _trace(module, inputs, fake_mode=fake_mode)
    dependent = _mode_dependent(module, inputs, fake_mode, nodes)
    output = next(n for n in nodes if n["op"] == "output")
    output["training"], output["mode_dependent"] = bool(module.training), dependent
    if dependent:
        output["modes"] = mode_watch(module)
    return nodes


def _mode_dependent(module: nn.Module, inputs: Sequence[Any], fake_mode: Any | None, nodes: list[Node]) -> bool:
    """Whether forward with every submodule in the other mode (`module.train(not module.training)`, as
    a user's .eval() or .train() sets them), or, for a module built with submodules in both modes (a
    frozen teacher's BatchNorm in eval mode inside a training module), with every one in training mode
    and then every one in eval mode, traces to another graph; a forward that does not trace there counts
    as dependent. Each submodule's own mode is put back after."""
    modes = [(m, m.training) for m in module.modules()]
    uniform = all(mode == module.training for _, mode in modes)
    try:
        for mode in (not module.training,) if uniform else (True, False):
            module.train(mode)
            try:
                other = _trace(module, inputs, fake_mode=fake_mode)
            except TraceError:
                return True
            if _canonical(other) != _canonical(nodes):
                return True
    finally:
        for m, mode in modes:
            m.training = mode
    return False


# Modules whose forward reads their own mode: PyTorch's (batch and instance norms, dropouts, recurrent
# layers' dropout, attention and transformer layers' dropout and fast paths), and any module whose
# forward's source names `training` (F.dropout(x, p, self.training), a branch on self.training).
_MODE_READERS: tuple[type, ...] = (
    nn.modules.batchnorm._BatchNorm, nn.modules.instancenorm._InstanceNorm, nn.modules.dropout._DropoutNd,
    nn.AlphaDropout, nn.FeatureAlphaDropout, nn.RNNBase, nn.MultiheadAttention, nn.TransformerEncoderLayer,
    nn.TransformerDecoderLayer, nn.TransformerEncoder, nn.TransformerDecoder, nn.Transformer,
)


def _reads_mode(m: nn.Module) -> bool:
    return isinstance(m, _MODE_READERS) or _forward_reads_mode(type(m))


@functools.lru_cache(maxsize=512)
def _forward_reads_mode(cls: type) -> bool:
    """Whether the class's forward names `training` in its source (nn.RReLU's, a spectral norm's
    power iteration, a user's F.dropout(x, p, self.training)); without source to read, assumed so."""
    forward = getattr(cls, "forward", None)
    if forward is None:
        return False
    try:
        return "training" in inspect.getsource(forward)
    except (OSError, TypeError):
        return True


def mode_watch(module: nn.Module) -> dict[str, bool]:
    """{submodule path ("" for the module): its mode as built} for the submodules whose forward reads
    its mode (_reads_mode), or for every submodule where none is found (the dependence is elsewhere:
    a helper method reading self.training). What ModelNew checks before a forward (model_new.py):
    `module.train()` sets a frozen submodule's mode too, which its own top-level flag does not show."""
    found = {path: bool(m.training) for path, m in module.named_modules() if _reads_mode(m)}
    return found or {path: bool(m.training) for path, m in module.named_modules()}


def _canonical(nodes: Sequence[Node]) -> str:
    # (repr for what JSON lacks: a kept buffer's data is the same tensor in both traces)
    return json.dumps(list(nodes), sort_keys=True, default=repr)


def _trace(
    module: nn.Module,
    inputs: Sequence[Any],
    *,
    fake_mode: Any | None = None,
    _plain_as_buffers: bool = False,
) -> list[Node]:
    from torch._subclasses.fake_tensor import (
        DataDependentOutputException,
        DynamicOutputShapeException,
        FakeTensor,
        FakeTensorMode,
    )
    from torch.fx.experimental.proxy_tensor import make_fx

    fake_mode = fake_mode or FakeTensorMode(allow_non_fake_inputs=True)
    # A tuple or list of tensors as one argument (nn.LSTMCell's (h, c)) would trace as several inputs
    # where the generated forward takes one: said plainly instead of failing on the count.
    for k, value in enumerate(inputs):
        if isinstance(value, list | tuple | dict) and any(
                isinstance(t, torch.Tensor) for t in torch.utils._pytree.tree_leaves(value)):
            raise TraceError(
                f"forward's argument {k} is a {type(value).__name__} of tensors (as nn.LSTMCell's (h, c) state "
                "is): only tensors passed one by one are supported yet; a wrapper module whose forward takes "
                "them as separate arguments can be optimised instead")

    def fake(t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        if isinstance(t, FakeTensor) and t.fake_mode is not fake_mode:
            # A copy made in __init__ (copy.deepcopy: nn.TransformerEncoder's layer clones, an EMA
            # teacher) has a fake mode of its own, which make_fx refuses beside ours; its values are
            # fake either way, so a tensor of its shape and dtype in ours stands for it.
            with fake_mode:
                return torch.empty(t.shape, dtype=t.dtype, device=t.device)
        if not isinstance(t, FakeTensor):
            t = fake_mode.from_tensor(t)
        with fake_mode:
            return t.contiguous()

    # One input per tensor: a tensor reachable under several names (a language model's output head
    # tied to its embedding, a submodule used twice) is traced under its first name, and
    # functional_call's tie_weights gives the others the same value; the names are kept (`aliases`)
    # so that ModelNew ties its own tensors as the module does and takes the same state dict.
    params = list(module.named_parameters(remove_duplicate=True))
    buffers = list(module.named_buffers(remove_duplicate=True))
    aliases = _tied_names(module)
    persistent = set(module.state_dict(keep_vars=True))
    keys = [k for k, _ in params] + [k for k, _ in buffers]
    state_vals = [fake(v) for _, v in params] + [fake(v) for _, v in buffers]
    arg_vals = [fake(v) for v in inputs]

    masked_reads = [False]

    def run(*flat: Any) -> Any:
        state = dict(zip(keys, flat[: len(keys)], strict=True))
        # In-place and alpha dropouts as eager draws their masks (eager_dropouts), inside the traced
        # function: they would otherwise trace as a plain dropout's mask, whose CUDA numbers differ.
        with EagerDropouts(), (MaskedReads() if masked_reads[0] else contextlib.nullcontext()):
            return torch.func.functional_call(module, state, tuple(flat[len(keys) :]))

    def traced() -> torch.fx.GraphModule:
        with _one_trace_at_a_time(), torch.no_grad(), _time_limit(TRACE_TIMEOUT_S):
            with _state_restored(module):
                return make_fx(torch.func.functionalize(run, remove="mutations"), tracing_mode="fake")(
                    *state_vals, *arg_vals
                )

    try:
        try:
            gm = traced()
        except DynamicOutputShapeException as first:
            # A boolean-mask read written back or reduced (masked_reads): traced again with such
            # reads as fixed-shape where() math; any other use keeps the first error.
            if "nonzero" not in str(first):
                raise
            masked_reads[0] = True
            try:
                gm = traced()
            except Exception:  # noqa: BLE001 - not the idiom: the first error says what stopped it
                raise first from None
    except DataDependentOutputException as e:
        raise TraceError(
            "forward depends on tensor values (data-dependent control flow or .item()): "
            f"{_short(e)}; only forwards whose operations are fixed by the input shapes can be traced"
        ) from e
    except DynamicOutputShapeException as e:
        hint = (": `y[mask]` read with a boolean mask has as many elements as the mask has True values; "
                "`torch.where(mask, b, a)` for `a[mask] = b[mask]`, or `a - mask.to(a.dtype)` for "
                "`a[mask] -= 1`, keeps every shape fixed") if "nonzero" in str(e) else ""
        raise TraceError(
            f"an output shape depends on tensor values ({_short(e)}), e.g. boolean masking{hint}"
        ) from e
    except TraceError:
        raise
    except Exception as e:  # noqa: BLE001 - whatever stops the trace, the user gets the reason
        reason = _short(e)
        plain = _plain_tensors(module)
        if not _plain_as_buffers and plain and "mutating a non-functional tensor" in str(e):
            # forward writes into a tensor kept as a plain attribute (self.h = torch.randn(...) in
            # __init__, then self.h.copy_(...)): traced again with those attributes as buffers.
            with _plain_tensors_as_buffers(plain):
                nodes = _trace(module, inputs, _plain_as_buffers=True)
            _refuse_reads_of_plain(nodes, plain)
            keys = {key for _, _, key, _ in plain}
            for node in nodes:  # their values are the attribute's, not a buffer's to carry
                if node.get("key") in keys:
                    node.pop("data", None)
                    node["attribute"] = True
            return nodes
        if "data-dependent" in reason.lower() or "data dependent" in reason.lower():
            raise TraceError(
                f"forward depends on tensor values (data-dependent control flow): {reason}"
            ) from e
        if "requires_grad_()" in str(e) or "autograd.grad" in str(e):
            raise TraceError("forward takes gradients itself (torch.autograd.grad, requires_grad_ on a tensor "
                             "it made): derivatives inside forward are not supported by the built-in coder") from e
        raise TraceError(f"forward could not be traced: {type(e).__name__}: {reason}") from e

    arg_names = _arg_names(module, len(inputs))
    kinds = (
        [("param", k) for k, _ in params]
        + [("buffer", k) for k, _ in buffers]
        + [("arg", a) for a in arg_names]
    )
    nodes = _to_nodes(gm, kinds, persistent)
    for node in nodes:
        if node["op"] == "input" and node.get("key") in aliases:
            node["aliases"] = aliases[node["key"]]
            # Each name's own persistence (a buffer one submodule keeps in its state dict, another not).
            node["alias_persistent"] = [a in persistent for a in aliases[node["key"]]]
    _keep_unsaved_buffers(nodes, dict(buffers))
    # make_fx bakes non-tensor arguments into the graph as constants; record the value it used, so
    # that ModelNew can refuse a call with another value instead of silently ignoring it.
    for node in nodes:
        if node["op"] == "input" and node.get("kind") == "arg" and "shape" not in node:
            value = inputs[node["index"]]
            if not isinstance(value, torch.Tensor):
                node["value"] = _encode(value, {})
    if not _plain_as_buffers and any(_valueless(n) for n in nodes) and (read := _read_plain_tensors(module)):
        # forward reads a tensor kept as a plain attribute (CLIP's attn_mask), which make_fx bakes in
        # as a constant too large to keep by value: traced again with such attributes as
        # non-persistent buffers, whose values the trace keeps (_keep_unsaved_buffers, or
        # _unsaved_from_a_real_module where the module was built on fake tensors).
        with _plain_tensors_as_buffers(read):
            try:
                return _trace(module, inputs, fake_mode=fake_mode, _plain_as_buffers=True)
            except TraceError:
                return nodes  # (the constants stay, with the planner's reason)
    return nodes


def _valueless(node: Node) -> bool:
    return node["op"] == "constant" and node.get("shape") is not None and "value" not in node


def _read_plain_tensors(module: nn.Module) -> list[tuple[nn.Module, str, str, torch.Tensor]]:
    """The plain tensor attributes too large to trace as constants by value, and small enough for
    the trace to keep as a non-persistent buffer's (UNSAVED_BUFFER_BYTES)."""
    return [p for p in _plain_tensors(module)
            if p[3].numel() > _MAX_CONSTANT_NUMEL and p[3].numel() * p[3].element_size() <= UNSAVED_BUFFER_BYTES]


@contextlib.contextmanager
def _state_restored(module: nn.Module) -> Iterator[None]:
    """The module's own parameters and buffers put back after the trace. functional_call swaps a
    submodule used under two names twice, and puts back the first swap's traced tensor the second
    time (torch 2.13): the module would keep functional tensors where its parameters were."""
    held = [(table, name, value) for sub in module.modules()
            for table in (sub._parameters, sub._buffers) for name, value in table.items()]
    try:
        yield
    finally:
        for table, name, value in held:
            if table.get(name) is not value:
                table[name] = value


def _tied_names(module: nn.Module) -> dict[str, list[str]]:
    """{first name: the other names of the same tensor} for the parameters and buffers reachable
    under several names."""
    tied: dict[str, list[str]] = {}
    for named in (module.named_parameters(remove_duplicate=False), module.named_buffers(remove_duplicate=False)):
        first: dict[int, str] = {}
        for key, value in named:
            if id(value) in first:
                tied.setdefault(first[id(value)], []).append(key)
            else:
                first[id(value)] = key
    return tied


# A buffer registered with persistent=False is not in the state dict, so loading the reference's
# weights cannot give ModelNew its values: up to this many bytes the trace keeps them (`data`, the
# raw little-endian bytes in base64), and ModelNew's __init__ makes the buffer from them. A rotary
# embedding's inv_freq or a position-id table fits; a large mask does not, and stays unsupported.
UNSAVED_BUFFER_BYTES = 64 << 10


def _keepable(node: Node) -> bool:
    """A non-persistent buffer small enough for the trace to keep its values (by its traced shape)."""
    if node["op"] != "input" or node.get("kind") != "buffer" or node.get("persistent", True) or "shape" not in node:
        return False
    size = torch.empty(0, dtype=getattr(torch, node["dtype"])).element_size()
    return math.prod(node["shape"]) * size <= UNSAVED_BUFFER_BYTES


def _keep_unsaved_buffers(nodes: list[Node], buffers: dict[str, torch.Tensor]) -> None:
    import base64

    from torch._subclasses.fake_tensor import FakeTensor

    for node in nodes:
        value = buffers.get(node.get("key", "")) if _keepable(node) else None
        if not isinstance(value, torch.Tensor) or isinstance(value, FakeTensor) or value.is_meta:
            continue
        raw = value.detach().to("cpu").contiguous().view(torch.uint8).numpy().tobytes() if value.numel() else b""
        node["data"] = base64.b64encode(raw).decode("ascii")


def _plain_tensors(module: nn.Module) -> list[tuple[nn.Module, str, str, torch.Tensor]]:
    """(submodule, attribute, state key, tensor) for every tensor kept as a plain attribute: neither
    a parameter nor a buffer, so functional_call does not swap it and the trace sees the real one."""
    found, seen = [], set()
    for prefix, sub in module.named_modules(remove_duplicate=False):
        for name, value in vars(sub).items():
            if isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter) and (id(sub), name) not in seen:
                seen.add((id(sub), name))  # (a submodule used under two names: its attribute once)
                found.append((sub, name, f"{prefix}.{name}" if prefix else name, value))
    return found


@contextlib.contextmanager
def _plain_tensors_as_buffers(plain: list[tuple[nn.Module, str, str, torch.Tensor]]) -> Iterator[None]:
    """Those attributes as non-persistent buffers for the trace's duration; put back as they were."""
    try:
        for sub, name, _, value in plain:
            del sub.__dict__[name]
            sub.register_buffer(name, value, persistent=False)
        yield
    finally:
        for sub, name, _, value in plain:
            sub._buffers.pop(name, None)
            sub.__dict__[name] = value


def _refuse_reads_of_plain(nodes: list[Node], plain: list[tuple[nn.Module, str, str, torch.Tensor]]) -> None:
    """A plain attribute the forward reads before it writes it holds a value no generated module can
    know (it is not part of the state dict): only overwritten ones are traced this way."""
    keys = {key for _, _, key, _ in plain}
    names = {n["name"]: n["key"] for n in nodes if n["op"] == "input" and n.get("key") in keys}
    for node in nodes:
        if node["op"] == "output":
            continue
        for arg, value in (node.get("args") or {}).items():
            for ref in iter_refs(value):
                # (copy and copy_ take only the destination's shape from `self`)
                if ref in names and not (node["op"] in ("copy", "copy_") and arg == "self"):
                    raise TraceError(
                        f"forward reads the tensor attribute {names[ref]!r}, which it also modifies in place, "
                        "and which is neither a parameter nor a buffer: its value is not part of the module's "
                        "state (register it with register_buffer to optimise this module)")


# A forward that unrolls a long Python loop can take minutes to trace; a bench must go on.
TRACE_TIMEOUT_S = float(os.environ.get("STITCHCUDA_TRACE_TIMEOUT", "120"))


class _TraceTimeout(Exception):
    pass


@contextlib.contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """SIGALRM-based limit, on the main thread only (elsewhere the trace runs unbounded)."""
    if seconds <= 0 or threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGALRM"):
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise _TraceTimeout

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except _TraceTimeout:
        raise TraceError(f"tracing took longer than {seconds:.0f} s (a long unrolled loop?); not optimised") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def _quiet(logger: str) -> Iterator[None]:
    """Fake tensors log a traceback for every op they cannot run; the TraceError says it in a line."""
    log = logging.getLogger(logger)
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        log.setLevel(level)


def _arg_names(module: nn.Module, count: int) -> list[str]:
    names: list[str] = []
    try:
        sig = inspect.signature(module.forward)
    except (TypeError, ValueError):
        sig = None
    if sig is not None:
        for p in sig.parameters.values():
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                names.append(p.name)
            elif p.kind == p.VAR_POSITIONAL:
                names += [f"{p.name}_{i}" for i in range(count - len(names))]
                break
    names += [f"arg{i}" for i in range(len(names), count)]
    return names[:count]


def _to_nodes(gm: torch.fx.GraphModule, kinds: list[tuple[str, str]], persistent: set[str]) -> list[Node]:
    fx_nodes = list(gm.graph.nodes)
    taken = {n.name for n in fx_nodes if n.op != "placeholder"}
    rename: dict[str, str] = {}
    nodes: list[Node] = []
    placeholders = [n for n in fx_nodes if n.op == "placeholder"]
    for index, (fx_node, (kind, label)) in enumerate(zip(placeholders, kinds, strict=True)):
        name = label
        while name in taken:
            name = f"{name}_input"
        taken.add(name)
        rename[fx_node.name] = name
        node: Node = {"name": name, "op": "input", "kind": kind}
        if kind == "arg":
            node["index"] = index - sum(1 for k, _ in kinds if k != "arg")
        else:
            node["key"] = label
            node["persistent"] = label in persistent
        val = fx_node.meta.get("val")
        if isinstance(val, torch.Tensor):
            node.update(_tensor_meta(val))
        else:
            node["value"] = _encode(val, rename)
        nodes.append(node)

    for fx_node in fx_nodes:
        if fx_node.op == "placeholder":
            continue
        name = rename.setdefault(fx_node.name, fx_node.name)
        if fx_node.op == "output":
            flat, structure = _flatten_output(fx_node.args[0])
            nodes.append(
                {
                    "name": name,
                    "op": "output",
                    "args": {"values": _encode(flat, rename)},
                    "structure": structure,
                }
            )
            continue
        if fx_node.op == "get_attr":
            nodes.append(_constant_node(name, getattr(gm, str(fx_node.target))))
            continue
        node = _call_node(fx_node, name, rename)
        nodes.append(node)
    _mark_views(nodes)
    return nodes


def overload_of(target: str) -> torch._ops.OpOverload | None:
    """The op a node's `target` string ("aten.view.default") names, or None where it names none."""
    parts = target.split(".")
    if len(parts) != 3:
        return None
    try:
        op = getattr(getattr(getattr(torch.ops, parts[0]), parts[1]), parts[2])
    except (AttributeError, RuntimeError):
        return None
    return op if isinstance(op, torch._ops.OpOverload) else None


def _call_node(fx_node: torch.fx.Node, name: str, rename: dict[str, str]) -> Node:
    target = fx_node.target
    node: Node = {"name": name}
    if isinstance(target, torch._ops.OpOverload):
        node["op"] = target.overloadpacket.__name__ if target.namespace == "aten" else str(target)
        node["target"] = str(target)
        node["args"] = _normalise_args(target, fx_node.args, fx_node.kwargs, rename)
        node["view"] = bool(target.is_view)
    elif getattr(target, "__name__", "") == "getitem":
        node["op"] = "getitem"
        node["args"] = {"self": _encode(fx_node.args[0], rename), "index": fx_node.args[1]}
        node["view"] = False
    else:
        node["op"] = getattr(target, "__name__", str(target))
        node["target"] = str(target)
        node["args"] = {f"arg{i}": _encode(a, rename) for i, a in enumerate(fx_node.args)}
        node["args"].update({k: _encode(v, rename) for k, v in fx_node.kwargs.items()})
        node["view"] = False
    val = fx_node.meta.get("val")
    if isinstance(val, torch.Tensor):
        node.update(_tensor_meta(val))
    elif isinstance(val, list | tuple) and all(isinstance(v, torch.Tensor) for v in val):
        node["shape"] = None
        node["outputs"] = [_tensor_meta(v) for v in val]
    else:
        node["shape"] = None
        node["value"] = _encode(val, rename)
    return node


# Ops returning several views of their input: each getitem of one is a view of that input.
_MULTI_VIEW = {"split", "split_with_sizes", "unsafe_split", "unsafe_split_with_sizes", "unbind", "chunk"}


def _mark_views(nodes: list[Node]) -> None:
    """`_unsafe_view` is a reshape that the schema does not mark as aliasing: it is one (and so
    free) when its input is contiguous; then its strides relative to that input are the plain ones.
    A getitem of split/unbind/chunk is a view of the op's input, with the strides it was traced with."""
    named = by_name(nodes)
    for node in nodes:
        if node.get("op") == "getitem" and node.get("shape") is not None:
            src = named.get(ref_name(node["args"].get("self")) or "")
            if src is not None and src.get("op") in _MULTI_VIEW and ref_name(src["args"].get("self")) is not None:
                node["args"] = {"self": src["args"]["self"], "index": node["args"].get("index")}
                node["view"] = True
                node["source"] = src["name"]  # the op it picks from, for code that reruns the graph
            continue
        if node.get("op") != "_unsafe_view":
            continue
        src = named.get(ref_name(node["args"].get("self")) or "")
        if src is not None and is_contiguous(src) and is_contiguous(node):
            node["view"] = True


def _constant_node(name: str, value: Any) -> Node:
    node: Node = {"name": name, "op": "constant"}
    if isinstance(value, torch.Tensor):
        node.update(_tensor_meta(value))
        node["offset"] = 0
        node["stride"] = contiguous_strides(node["shape"])
        fake = type(value).__name__ == "FakeTensor"
        if not fake and value.numel() <= _MAX_CONSTANT_NUMEL:
            node["value"] = value.detach().cpu().reshape(-1).tolist()
    else:
        node["value"] = _encode(value, {})
    return node


def _tensor_meta(t: torch.Tensor) -> dict[str, Any]:
    return {
        "shape": [int(s) for s in t.shape],
        "dtype": dtype_name(t.dtype),
        "stride": [int(s) for s in t.stride()],
        "offset": int(t.storage_offset()),
    }


def _normalise_args(
    op: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any], rename: dict[str, str]
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    positional = [a for a in op._schema.arguments if not a.kwarg_only]
    for a, v in zip(positional, args, strict=False):
        out[a.name] = _encode(v, rename)
    for a in op._schema.arguments:
        if a.name in kwargs:
            out[a.name] = _encode(kwargs[a.name], rename)
        elif a.name not in out and a.has_default_value():
            default = a.default_value
            if isinstance(default, int) and not isinstance(default, bool) and "ScalarType" in str(a.real_type):
                # A schema's dtype default comes as c10::ScalarType's number (tril_indices' `dtype=long`: 4).
                default = _SCALAR_TYPES[default] if 0 <= default < len(_SCALAR_TYPES) else default
            out[a.name] = _encode(default, rename)
    return out


# c10::ScalarType's numbering (a serialised, stable enum), as far as dtypes a schema defaults to go.
_SCALAR_TYPES: tuple[Any, ...] = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
                                  torch.float32, torch.float64, torch.complex32, torch.complex64, torch.complex128,
                                  torch.bool)


def _encode(value: Any, rename: dict[str, str]) -> Any:
    """A JSON-friendly form of an fx argument."""
    if isinstance(value, torch.fx.Node):
        return ref(rename.get(value.name, value.name))
    if isinstance(value, list | tuple):
        return [_encode(v, rename) for v in value]
    if isinstance(value, torch.dtype):
        return dtype_name(value)
    if isinstance(value, torch.device | torch.layout | torch.memory_format):
        return str(value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, torch.Tensor):
        return {"tensor": list(value.shape), "dtype": dtype_name(value.dtype)}
    return repr(value)


def _flatten_output(out: Any) -> tuple[list[Any], str]:
    """Flat results and how forward returned them: "single", "tuple", "list" or "other" (nested)."""
    if isinstance(out, list | tuple):
        if any(isinstance(o, list | tuple | dict) for o in out):
            return [], "other"
        return list(out), "list" if isinstance(out, list) else "tuple"
    if isinstance(out, dict):
        return [], "other"
    return [out], "single"


def _realise(values: list[Any]) -> list[Any]:
    """Fake tensors made by get_init_inputs, as real zeros (only their shapes matter to a trace)."""
    return [torch.zeros(v.shape, dtype=v.dtype) if type(v).__name__ == "FakeTensor" else v for v in values]


def _short(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0][:300] if text else type(e).__name__
