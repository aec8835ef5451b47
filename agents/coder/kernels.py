"""Kernels for the ops the pointwise emitter cannot absorb: one emitter per op family.

An emitter is a function of one traced node (an EmitContext) that returns a Kernel: CUDA C++ text
defining an `extern "C"` launcher, the graph tensors it reads and writes, and the libraries it links.
Emitters live in `emit_*.py` modules, each exporting `EMITTERS: dict[aten op name, Emitter]`; this
module merges them and gives the Planner and the Coder one entry point, `emit`.

The launcher convention is the pointwise emitter's, so ModelNew calls every kernel the same way:

    extern "C" int NAME(const void* in0, ..., void* out0, ..., void* scratch0, ..., cudaStream_t stream)

returning a cudaError_t (0 on success). Inputs come in `Kernel.inputs` order, outputs in
`Kernel.outputs` order, scratch buffers (allocated by ModelNew with torch.empty, so they come from
the caching allocator and are stream-ordered) in `Kernel.scratch` order. Kernels built without a
library may also define `NAME_host(same pointers..., void*)`: the same arithmetic, serially on the
CPU, so tests can check the numbers without a GPU.

Sources are concatenated after codegen's prelude (sc_to_f, sc_from_f, sc_vec, sc_grid, C types),
so an emitter may use those. Code shared by every kernel of a family is fixed CUDA in
agents/coder/cuda/<family>.cuh (inlined through cuda_text, so the .cu stays one file), in a block
guarded by `#ifndef SC_<FAMILY>_H`: two kernels of one family in one .cu must not define it twice.

Emitters size their grids for `EmitContext.target` (stitchcuda.target: SM count, resident threads),
by default the GPU of this process (Target.current()); the sizes never change what a kernel computes.
"""

from __future__ import annotations

import ctypes
import functools
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stitchcuda.agents.coder.codegen import C_TYPES, Epilogue, KernelArg, Prologue
from stitchcuda.agents.graph import Node, by_name, contiguous_strides, picks, ref_name, restride
from stitchcuda.target import Target


class NotSupported(Exception):
    """The emitter cannot produce this node (the message says why, for the plan's notes)."""


@dataclass(frozen=True)
class Operand:
    """A tensor argument as the kernel receives it: a pointer to the materialised tensor `name`
    (stored row-major, contiguous) plus the element strides and offset of the op's view of it."""

    name: str  # graph node whose storage is passed (the root of any view chain)
    shape: tuple[int, ...]  # the shape the op sees
    strides: tuple[int, ...]  # element strides into `name`'s row-major storage
    offset: int
    dtype: str

    @property
    def contiguous(self) -> bool:
        want = contiguous_strides(self.shape)
        return self.offset == 0 and all(n == 1 or s == w for n, s, w in zip(self.shape, self.strides, want, strict=True))

    @property
    def numel(self) -> int:
        total = 1
        for n in self.shape:
            total *= n
        return total

    @property
    def ctype(self) -> str:
        return C_TYPES[self.dtype]


@dataclass(frozen=True)
class OutSpec:
    """One result of the op that the graph uses: written contiguous, row-major, to node `name`."""

    name: str
    shape: tuple[int, ...]
    dtype: str


@dataclass
class EmitContext:
    node: Node  # the traced node (op, target, args, shape/dtype or outputs)
    args: dict[str, Any]  # node["args"] with every tensor reference replaced by an Operand
    outputs: list[OutSpec | None]  # per result index; None where the graph never reads that result
    name: str  # prefix for every C identifier of this kernel (unique in the .cu)
    # How exact fp32 library calls are (PRECISE_* below): the Coder raises it one step after each
    # candidate that failed the comparison.
    precise: int = 0
    # The GPU the kernel is sized for (grids by its SM count and resident threads); never changes
    # what a kernel computes, only how the work is split.
    target: Target = field(default_factory=Target.current)
    # The op's tensor operand computed as it is read (the planner's pointwise node before it, never
    # stored); emitters that take one check `prologue.node` against their operand's name.
    prologue: Prologue | None = None
    # A pointwise chain computed from the op's result as it is stored (the planner's pointwise group
    # after it); emitters that take one check `epilogue.value` against their result's name, and
    # write `epilogue.node` in its place.
    epilogue: Epilogue | None = None
    # Every node of the graph by name (an epilogue's members, for emitters that hand it to a library).
    nodes: dict[str, Node] = field(default_factory=dict)
    # Of an op that reads a list of tensors (cat): those computed as they are read, by node name
    # (the planner's pointwise nodes before it, never stored); emitters check each source's name.
    sources: dict[str, Prologue] = field(default_factory=dict)
    # Operands that are rows picked from a table (x[idx], index_select), read through the index
    # where the op reads them instead of being gathered first (a scatter-add's messages), by name.
    gathers: dict[str, Gather] = field(default_factory=dict)


@dataclass(frozen=True)
class Gather:
    """Node `name` = `table` indexed along `dim` by the 1-D int64 `index` (x[..., idx] or
    index_select): its element at coordinates c is the table's at c with c[dim] = index[c[dim]]."""

    name: str
    table: Operand
    index: Operand
    dim: int


def gather_of(nodes: dict[str, Node], name: str, roots: dict[str, str] | None = None) -> Gather | None:
    """Node `name` as a Gather, where it is one: aten.index with one 1-D index tensor (full slices
    before it) or aten.index_select; None otherwise."""
    node = nodes.get(name)
    if node is None or node.get("view") or node.get("dtype") is None:
        return None
    a = node.get("args", {})
    if node["op"] == "index":
        picks = list(a.get("indices") or [])
        given = [(p, ref_name(i)) for p, i in enumerate(picks) if i is not None]
        if len(given) != 1 or given[0][1] is None:
            return None
        dim, idx = given[0]
    elif node["op"] == "index_select":
        dim, idx = int(a.get("dim", 0)), ref_name(a.get("index"))
    else:
        return None
    table = ref_name(a.get("self"))
    if table is None or idx is None:
        return None
    try:
        t, i = operand(nodes, table, roots), operand(nodes, idx, roots)
    except NotSupported:
        return None
    dim %= max(1, len(t.shape))
    if i.dtype != "int64" or len(i.shape) != 1 or len(t.shape) != len(node["shape"]):
        return None
    return Gather(name, t, i, dim)


# fp32 precision levels of library calls, the built-in Coder's answer to a wrong result.
PRECISE_TF32 = 0  # TF32 tensor cores (the Verifier's matmul/conv tolerance allows it)
# PRECISE_SPLIT for the calls whose results feed exp or a softmax, TF32 for the rest
# (precision_mix.py); a candidate's level only: make_steps gives each kernel TF32 or PRECISE_SPLIT.
PRECISE_MIXED = 1
PRECISE_SPLIT = 2  # convolution without TF32; matmul as 3xTF32 (split operands, still tensor cores)
PRECISE_FP32 = 3  # matmul in full fp32 on the FMA units too, as PyTorch's own default runs it


@dataclass
class Kernel:
    name: str  # the launcher's symbol
    inputs: list[KernelArg]  # graph tensors passed as const pointers, in launcher order
    outputs: list[KernelArg]  # graph tensors written, in launcher order
    source: str
    ops: list[str] = field(default_factory=list)  # what it computes, for notes ("addmm 1024x8192x8192")
    libraries: list[str] = field(default_factory=list)  # linked with -l, e.g. "cublas", "cudnn"
    host: bool = False  # source defines NAME_host
    scratch: list[tuple[str, int]] = field(default_factory=list)  # (dtype, numel) per scratch buffer
    mutates: list[str] = field(default_factory=list)  # inputs it also writes (running statistics)


Emitter = Callable[[EmitContext], Kernel]


@functools.cache
def emitters() -> dict[str, Emitter]:
    """Every registered emitter by aten op name (the node's `op`); built once, read per kernel."""
    table: dict[str, Emitter] = {}
    for module in _families():
        for op, fn in module.EMITTERS.items():
            if op in table:
                raise RuntimeError(f"two emitters for {op}")
            table[op] = fn
    return table


FAMILIES = ("emit_gemm", "emit_conv", "emit_reduce", "emit_norm", "emit_pool", "emit_layout", "emit_loss",
            "emit_attention", "emit_rnn", "emit_scatter", "emit_topk")


def _families() -> list[Any]:
    import importlib

    return [importlib.import_module(f"{__package__}.{name}") for name in FAMILIES]


def operand(nodes: dict[str, Node], name: str, roots: dict[str, str] | None = None) -> Operand:
    """The Operand for tensor `name`: views resolve to their materialised root.

    `roots` maps a node to the node standing for it in memory (the planner's materialised copies).
    Raises NotSupported when the view cannot be expressed over a row-major root."""
    roots = roots or {}
    node = nodes[name]
    if name in roots:
        target = nodes[roots[name]]
        return Operand(target["name"], tuple(node["shape"]), tuple(contiguous_strides(node["shape"])), 0, node["dtype"])
    root = node
    while root.get("view") and ref_name(root["args"].get("self")) in nodes and root["name"] not in roots:
        root = nodes[ref_name(root["args"]["self"])]
    if root is node:
        return Operand(name, tuple(node["shape"]), tuple(contiguous_strides(node["shape"])), 0, node["dtype"])
    moved = restride(node["shape"], node["stride"], node.get("offset", 0), root["shape"], root["stride"])
    if moved is None:
        raise NotSupported(f"{name} is a view that cannot be taken of a row-major {root['name']}")
    strides, offset = moved
    return Operand(roots.get(root["name"], root["name"]), tuple(node["shape"]), tuple(strides), offset, node["dtype"])


def context(
    graph: Sequence[Node],
    name: str,
    kernel_name: str,
    roots: dict[str, str] | None = None,
    live: set[str] | None = None,
    precise: int = PRECISE_TF32,
    getitems: dict[str, list[Node]] | None = None,
    nodes: dict[str, Node] | None = None,
    target: Target | None = None,
    prologue: Prologue | None = None,
    epilogue: Epilogue | None = None,
    sources: dict[str, Prologue] | None = None,
    gathered: Sequence[str] = (),
) -> EmitContext:
    """The EmitContext of node `name`: operands resolved, used results found from the getitems
    (only those in `live`, when given: a result nothing reads need not be written). `target`: the
    GPU to size grids for, by default this process's (Target.current())."""
    nodes = nodes if nodes is not None else by_name(graph)
    node = nodes[name]

    def convert(value: Any) -> Any:
        src = ref_name(value)
        if src is not None:
            return operand(nodes, src, roots)
        if isinstance(value, list):
            return [convert(v) for v in value]
        return value

    args = {k: convert(v) for k, v in node.get("args", {}).items()}
    if node.get("outputs") is not None:
        outs: list[OutSpec | None] = [None] * len(node["outputs"])
        for other in (getitems if getitems is not None else picks(graph)).get(name, []):
            if live is None or other["name"] in live:
                index = other["args"]["index"]
                if not isinstance(index, int) or not -len(outs) <= index < len(outs):
                    # (a graph written by hand or by another tracer: its pick names no output the node has)
                    raise NotSupported(f"{other['name']} picks output {index!r} of {name}, which has {len(outs)}")
                outs[index] = OutSpec(other["name"], tuple(other["shape"]), other["dtype"])
    else:
        outs = [OutSpec(name, tuple(node["shape"]), node["dtype"])]
    return EmitContext(node=node, args=args, outputs=outs, name=kernel_name, precise=precise,
                       target=target or Target.current(), prologue=prologue, epilogue=epilogue, nodes=nodes,
                       sources=dict(sources or {}),
                       gathers={g.name: g for n in gathered if (g := gather_of(nodes, n, roots)) is not None})


def emit(graph: Sequence[Node], name: str, kernel_name: str, **options: Any) -> Kernel:
    """The kernel for node `name`, or NotSupported with the reason; `options` are context()'s."""
    ctx = context(graph, name, kernel_name, **options)
    node = ctx.node
    fn = emitters().get(node["op"])
    if fn is None:
        raise NotSupported(f"{node.get('target') or node['op']}: not supported by the built-in coder yet")
    for key in ("dtype",):
        if node.get(key) is not None and node[key] not in C_TYPES:
            raise NotSupported(f"{node.get('target')}: dtype {node[key]} is not supported yet")
    return fn(ctx)


# ---------------------------------------------------------------------------------------------
# Launcher text shared by the emitters


def launchers(name: str, raw: Sequence[str], casts: Sequence[str], device: str, host: str) -> str:
    """The `extern "C"` pair every kernel exports: NAME(pointers..., stream) running `device` and
    returning the launch's cudaError_t, and NAME_host(pointers..., void*) running `host` on the CPU.
    `raw` are the void* parameters in launcher order, `casts` the lines giving them types."""
    cast_lines = "\n".join(casts)
    return f"""extern "C" int {name}({", ".join([*raw, "cudaStream_t stream"])}) {{
{cast_lines}
{device}
  return (int)cudaGetLastError();
}}

extern "C" int {name}_host({", ".join([*raw, "void*"])}) {{
{cast_lines}
{host}
  return 0;
}}
"""


def grid_stride_kernel(name: str, n: str, params: str, args: str, idx: str = "int64_t", one: str = "") -> str:
    """`NAME_kernel`: a grid-stride loop calling `ONE(o, args)` (default NAME_one) for every o < n."""
    from stitchcuda.agents.coder.codegen import THREADS

    return f"""__global__ void __launch_bounds__({THREADS}) {name}_kernel({params}) {{
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < {n}; o += step) {one or name + "_one"}(({idx})o, {args});
}}

"""


def per_element(name: str, n: str, params: str, args: str, raw: Sequence[str], casts: Sequence[str], idx: str = "int64_t") -> str:
    """A grid-stride kernel calling `NAME_one(o, args)` for every output element o < n, and its
    launchers; the emitter defines NAME_one (SC_INLINE, so the CPU entry runs the same code)."""
    from stitchcuda.agents.coder.codegen import THREADS

    kernel = grid_stride_kernel(name, n, params, args, idx)
    device = f"  if ({n} == 0) return 0;\n  {name}_kernel<<<sc_grid({n}), {THREADS}, 0, stream>>>({args});"
    host = f"  for (int64_t o = 0; o < {n}; ++o) {name}_one(({idx})o, {args});"
    return kernel + launchers(name, raw, casts, device, host)


# ---------------------------------------------------------------------------------------------
# Running a kernel's host entry on CPU tensors (tests)


def library(ks: Sequence[Kernel], folder: Path) -> Any:
    """Build kernels into one shared library (codegen's prelude once, then each source) and load
    it: how tests run many emitted kernels after a single nvcc call."""
    from stitchcuda import runtime
    from stitchcuda.agents.coder.codegen import render

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "kernels.cu"
    path.write_text("\n".join([render([], after=[k.source for k in ks]), *(k.source for k in ks)]))
    return runtime.Library(runtime.build([path], libraries=sorted({lib for k in ks for lib in k.libraries})).library)


def run_host(kernel: Kernel, tensors: Sequence[Any]) -> None:
    """Build prelude + kernel.source with nvcc and call NAME_host on CPU tensors (inputs, outputs,
    scratch, in launcher order). For tests: the GPU runs the same per-element code."""
    if not kernel.host:
        raise ValueError(f"{kernel.name} has no host entry")
    # The source folder is only nvcc's input (the library lands in the build cache): none is left behind.
    with tempfile.TemporaryDirectory(prefix="sc-host-") as folder:
        lib = library([kernel], Path(folder))
    ptrs = [ctypes.c_void_p(t.data_ptr()) for t in tensors]
    rc = lib._fn(f"{kernel.name}_host")(*ptrs, ctypes.c_void_p(None))
    if rc != 0:
        raise RuntimeError(f"{kernel.name}_host returned {rc}")
