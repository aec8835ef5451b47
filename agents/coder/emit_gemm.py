"""Matrix products through cuBLAS: mm, addmm, bmm, baddbmm and mv.

cuBLAS is column-major and our results are row-major, so every product is issued as its transpose,
C^T = B^T A^T: cuBLAS's A is the op's second operand, its B the op's first, and the row-major
[M, N] result is cuBLAS's column-major N x M matrix with leading dimension N. Each operand is read in
place from its strides (`plan_gemm`): row-major in the last two dims means no transpose, column-major
(a `.t()` view, nn.Linear's weight) means CUBLAS_OP_T, and a batch dim needs one uniform stride
(0 broadcasts). Anything else is NotSupported, and the Planner materialises a contiguous copy.

Where a bmm's operand is such a copy already in the traced graph (torch's reshape of a permuted view,
`x.view(b, s, h, d).transpose(1, 2)` batched as b*h), the copy's source is read in place instead
(_through_copy), its batch in two levels of one stride each where it has no single one: one
strided-batched call per index of the shorter level (at most MAX_BATCH_LOOPS), each over the longer.

fp32 runs on TF32 tensor cores (the Verifier's matmul tolerance, 1e-2, allows it); after a wrong
result (ctx.precise) as 3xTF32 (each operand split into a TF32 part and the rest, three products),
closer to fp32 and still on tensor cores; after a second, in full fp32. fp16 and bf16 accumulate in
fp32. The bias of addmm/baddbmm is broadcast into the output by a small kernel and
the GEMM runs with beta, except for a vector bias with beta == 1 on addmm (nn.Linear), which
cuBLASLt adds in its epilogue, saving a pass over the output (the copy path stays as the fallback
when the pointers are not 16-byte aligned or cuBLASLt has no algorithm).

Launchers return 0, a cudaError_t, or CUBLAS_ERROR_BASE + the cublasStatus_t of a failed call.
"""

from __future__ import annotations

import numbers
import os
from dataclasses import dataclass, replace
from typing import Any

from stitchcuda.agents.coder import cuda_text
from stitchcuda.agents.coder.codegen import C_TYPES, ITEM_SIZE, KernelArg, c_float
from stitchcuda.agents.coder.kernels import (
    PRECISE_FP32,
    PRECISE_SPLIT,
    PRECISE_TF32,
    EmitContext,
    Kernel,
    NotSupported,
    Operand,
    OutSpec,
    emitters,
    operand,
)
from stitchcuda.agents.graph import iter_refs, numel

SPLIT_MARGIN = 1.5  # 3xTF32 stays unless one fp32 product is estimated this many times faster (split_pays)
SMALL_PRODUCT = 64  # rows and columns of a product below which 3xTF32 runs as fp32 (emit_gemm); 0: no size rule
SPLIT_SCRATCH_BYTES = 2 << 30  # the most 3xTF32's operand copies (hi and lo of both) may take
MAX_BATCH_LOOPS = 64  # calls a batch in two levels may take (one per index of its shorter level); more: the copy
# "0" keeps a bmm's operand copies (torch's reshape of a permuted view) instead of reading their sources in place.
READ_THROUGH_ENV = "STITCHCUDA_GEMM_READ_THROUGH"
WORKSPACE_BYTES = 32 << 20  # cuBLAS's own default on Hopper; ours so the calls are graph-capturable
CUBLAS_ERROR_BASE = 20000  # above every cudaError_t, so the two kinds of failure stay apart
# "0" runs products cuBLAS would read unaligned as they are (padded_plan).
PAD_ENV = "STITCHCUDA_GEMM_PAD"
PAD_SHARE = 0.5  # the copies' time, at most this share of the product's ideal time (pad_pays)
_INT_MAX = 2**31 - 1
_BIAS_THREADS = 256

# dtype -> (cudaDataType, cublasComputeType_t)
_CUBLAS_TYPES = {
    "float32": ("CUDA_R_32F", "CUBLAS_COMPUTE_32F_FAST_TF32"),
    "float16": ("CUDA_R_16F", "CUBLAS_COMPUTE_32F"),
    "bfloat16": ("CUDA_R_16BF", "CUBLAS_COMPUTE_32F"),
}

# op -> (target, first operand, second operand, bias or None, batched)
_OPS = {
    "mm": ("aten.mm.default", "self", "mat2", None, False),
    "addmm": ("aten.addmm.default", "mat1", "mat2", "self", False),
    "bmm": ("aten.bmm.default", "self", "mat2", None, True),
    "baddbmm": ("aten.baddbmm.default", "batch1", "batch2", "self", True),
    "mv": ("aten.mv.default", "self", "vec", None, False),
}


# ---------------------------------------------------------------------------------------------
# The layout decision (pure Python, so tests can check it by simulating the cuBLAS call)


@dataclass(frozen=True)
class Side:
    """One operand as cuBLAS reads it: a column-major matrix at `offset` (elements), with leading
    dimension `ld`, used transposed when `trans`, the next batch `stride` elements on (0 broadcasts)."""

    trans: bool
    ld: int
    stride: int
    offset: int


@dataclass(frozen=True)
class GemmPlan:
    """One cublasGemm(StridedBatched)Ex call computing a row-major [batch, M, N] result in place; or
    `loops` of them, each moving A, B and C on by loop_a, loop_b and loop_c elements (a batch in
    two levels, _plan_looped)."""

    m: int  # cuBLAS m: the op's N
    n: int  # cuBLAS n: the op's M
    k: int
    batch: int
    a: Side  # cuBLAS's A: the op's second operand
    b: Side  # cuBLAS's B: the op's first operand
    ldc: int
    stride_c: int
    loops: int = 1
    loop_a: int = 0
    loop_b: int = 0
    loop_c: int = 0


def _side(rows: int, cols: int, srow: int, scol: int, sbatch: int, offset: int, what: str) -> Side:
    """cuBLAS needs X^T (cols x rows, column-major) for an op operand X [rows, cols]: a row-major X
    is exactly that (OP_N, ld = row stride); a column-major X is X itself, so OP_T (ld = column stride).
    A size-1 dim's stride is never used, so any value fits there."""
    if (cols == 1 or scol == 1) and (rows == 1 or srow >= cols):
        return Side(False, srow if rows > 1 else cols, sbatch, offset)
    if (rows == 1 or srow == 1) and (cols == 1 or scol >= rows):
        return Side(True, scol if cols > 1 else rows, sbatch, offset)
    raise NotSupported(f"{what} strides [{srow}, {scol}] are neither row- nor column-major for cuBLAS")


def _fold(mat1: Operand, mat2: Operand) -> tuple[Operand, Operand] | None:
    """A bmm whose second operand is shared by every batch, and whose first operand's batches are
    stacked rows, is one GEMM of batch*M rows: fewer, larger tiles for cuBLAS."""
    (b, m, k), (sb, sm, sk) = mat1.shape, mat1.strides
    if b == 1 or (mat2.shape[0] > 1 and mat2.strides[0] != 0):
        return None
    row = sb if m == 1 else sm
    if m > 1 and sb != m * sm:
        return None
    flat1 = Operand(mat1.name, (b * m, k), (row, sk), mat1.offset, mat1.dtype)
    flat2 = Operand(mat2.name, mat2.shape[1:], mat2.strides[1:], mat2.offset, mat2.dtype)
    return flat1, flat2


def plan_gemm(mat1: Operand, mat2: Operand) -> GemmPlan:
    """The cuBLAS call for mat1 @ mat2 (both [M, K] @ [K, N], or both batched [B, M, K] @ [B, K, N],
    or both [B_outer, B_inner, M, K] @ [B_outer, B_inner, K, N]) written row-major and contiguous;
    NotSupported where cuBLAS cannot read an operand in place."""
    if len(mat1.shape) == 4 and len(mat2.shape) == 4:
        return _plan_looped(mat1, mat2)
    return _plan(mat1, mat2)


def _plan_looped(mat1: Operand, mat2: Operand) -> GemmPlan:
    """A batch in two levels, [outer, inner] with a stride each (a copy's source read in place,
    _through_copy): one strided-batched call per index of the shorter level, over the longer one,
    the row-major result [outer * inner, M, N] written in place. At most MAX_BATCH_LOOPS calls: each
    is a launch (and, batched over few products, a small one)."""
    (bo, bi), (bo2, bi2) = mat1.shape[:2], mat2.shape[:2]
    if (bo, bi) != (bo2, bi2):
        raise NotSupported(f"batch levels {[bo, bi]} and {[bo2, bi2]}")
    m, n = mat1.shape[2], mat2.shape[3]
    inner = bi <= bo  # loop over the inner level, each call over the outer one
    loops, batch = (bi, bo) if inner else (bo, bi)
    if loops > MAX_BATCH_LOOPS:
        raise NotSupported(f"a batch of {bo} x {bi} in two levels: {loops} calls, more than {MAX_BATCH_LOOPS}")
    call, step = (0, 1) if inner else (1, 0)

    def per_call(t: Operand) -> Operand:
        return Operand(t.name, (batch, *t.shape[2:]), (t.strides[call], *t.strides[2:]), t.offset, t.dtype)

    plan = _plan(per_call(mat1), per_call(mat2), stride_c=(bi if inner else 1) * m * n)
    return replace(plan, loops=loops, loop_a=mat2.strides[step], loop_b=mat1.strides[step],
                   loop_c=(1 if inner else bi) * m * n)


def _plan(mat1: Operand, mat2: Operand, stride_c: int | None = None) -> GemmPlan:
    """plan_gemm of ranks 2 and 3; `stride_c`: elements from one batch of the result to the next,
    where not M * N (a call of _plan_looped's over the outer level)."""
    if len(mat1.shape) != len(mat2.shape) or len(mat1.shape) not in (2, 3):
        raise NotSupported(f"operand ranks {len(mat1.shape)} and {len(mat2.shape)}")
    if len(mat1.shape) == 3:
        if mat1.shape[0] != mat2.shape[0]:
            raise NotSupported(f"batch sizes {mat1.shape[0]} and {mat2.shape[0]}")
        # (Stacked rows need the result's batches stacked too.)
        folded = _fold(mat1, mat2) if stride_c in (None, mat1.shape[1] * mat2.shape[2]) else None
        if folded is not None:
            try:
                flat = _plan(*folded)
            except NotSupported:
                pass
            else:
                return flat
    batch = mat1.shape[0] if len(mat1.shape) == 3 else 1
    m, k = mat1.shape[-2:]
    k2, n = mat2.shape[-2:]
    if k != k2:
        raise NotSupported(f"inner sizes {k} and {k2} differ")
    if min(batch, m, n, k) == 0:
        raise NotSupported("an empty dimension")
    sb1 = mat1.strides[0] if batch > 1 else 0
    sb2 = mat2.strides[0] if batch > 1 else 0
    b = _side(m, k, mat1.strides[-2], mat1.strides[-1], sb1, mat1.offset, "first operand")
    a = _side(k, n, mat2.strides[-2], mat2.strides[-1], sb2, mat2.offset, "second operand")
    if max(m, n, k, a.ld, b.ld, batch) > _INT_MAX:
        raise NotSupported("a size or leading dimension past 2^31 (cuBLAS's int API)")
    return GemmPlan(n, m, k, batch, a, b, n, m * n if stride_c is None else stride_c)


def bias_strides(bias: Operand, out_shape: tuple[int, ...]) -> tuple[int, ...]:
    """Element strides of `bias` broadcast to `out_shape` (0 along broadcast dims)."""
    lead = len(out_shape) - len(bias.shape)
    if lead < 0:
        raise NotSupported(f"bias of rank {len(bias.shape)} for a rank-{len(out_shape)} result")
    strides = []
    for d, size in enumerate(out_shape):
        j = d - lead
        if j < 0 or bias.shape[j] == 1:
            strides.append(0)
        elif bias.shape[j] == size:
            strides.append(bias.strides[j])
        else:
            raise NotSupported(f"bias shape {list(bias.shape)} does not broadcast to {list(out_shape)}")
    return tuple(strides)


# ---------------------------------------------------------------------------------------------
# The emitter


def _scalar(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise NotSupported(f"{what}={value!r} is not a real number")
    return float(value)


def _as_matrix(vec: Operand) -> Operand:
    """A vector [K] as a [K, 1] matrix (mv)."""
    return Operand(vec.name, (vec.shape[0], 1), (vec.strides[0], 1), vec.offset, vec.dtype)


def emit_gemm(ctx: EmitContext) -> Kernel:
    op = ctx.node["op"]
    target, first, second, bias_arg, batched = _OPS[op]
    if ctx.node.get("target") != target:
        raise NotSupported(f"{ctx.node.get('target')}: only {target} is handled")
    out = ctx.outputs[0] if ctx.outputs else None
    if out is None:
        raise NotSupported(f"{op}: its result is never read")
    mat1, mat2 = ctx.args.get(first), ctx.args.get(second)
    if not isinstance(mat1, Operand) or not isinstance(mat2, Operand):
        raise NotSupported(f"{op}: operands are not tensors")
    bias = ctx.args.get(bias_arg) if bias_arg else None
    alpha = _scalar(ctx.args.get("alpha", 1), "alpha")
    beta = _scalar(ctx.args.get("beta", 1), "beta") if bias_arg else 0.0
    if bias_arg and not isinstance(bias, Operand):
        raise NotSupported(f"{op}: bias is not a tensor")
    tensors = [mat1, mat2] + ([bias] if beta != 0 and bias is not None else [])
    if any(t.dtype != out.dtype for t in tensors) or out.dtype not in _CUBLAS_TYPES:
        raise NotSupported(
            f"{op}: dtypes {[t.dtype for t in tensors]} -> {out.dtype} (cuBLAS path: one of fp32/fp16/bf16)"
        )
    if op == "mv":
        if len(mat1.shape) != 2 or len(mat2.shape) != 1:
            raise NotSupported("mv: expects a matrix and a vector")
        mat2 = _as_matrix(mat2)
    elif len(mat1.shape) != (3 if batched else 2) or len(mat2.shape) != len(mat1.shape):
        raise NotSupported(f"{op}: operand ranks {len(mat1.shape)}, {len(mat2.shape)}")
    plan = plan_gemm(mat1, mat2)
    full = (*mat1.shape[:-1], mat2.shape[-1])  # the row-major result the plan writes
    want = full[:1] if op == "mv" else full
    if tuple(out.shape) != want:
        raise NotSupported(f"{op}: result shape {list(out.shape)}, expected {list(want)}")
    sizes = "x".join(str(s) for s in (*mat1.shape, mat2.shape[-1]))
    precision = _precision(ctx.precise, ctx.target, plan, mat1, mat2, out.dtype)
    note = ""
    if batched and (through := _read_through(ctx, plan, mat1, mat2, out.dtype)) is not None:
        plan, mat1, mat2, sources = through
        note = f" (reading {' and '.join(sources)} in place, not a copy" \
            + (f"; {plan.loops} calls over a batch in two levels" if plan.loops > 1 else "") + ")"
    return render_gemm(
        ctx.name, f"{op} {sizes}{note}", plan, mat1, mat2, bias if beta != 0 else None, full, alpha, beta, out,
        precision, relu=_relu_epilogue(ctx, out.name), target=ctx.target
    )


def _relu_epilogue(ctx: EmitContext, result: str) -> str | None:
    """The node the planner's epilogue ends at, where that chain is one ReLU of the product's result
    (cuBLASLt's RELU_BIAS epilogue computes it as it stores: nn.Linear then nn.ReLU, every hidden
    layer of an MLP); None without an epilogue. Any other chain has no cuBLASLt form, and a pass of
    its own after the product is what the pointwise kernel it replaces already was: NotSupported,
    so the planner leaves that chain where it was."""
    ep = ctx.epilogue
    if ep is None:
        return None
    node = ctx.nodes.get(ep.node) or {}
    if ep.value != result or list(ep.members) != [ep.node] or node.get("op") != "relu" or ep.inputs \
            or ep.dtype != ep.value_dtype:
        raise NotSupported(f"{ctx.node['op']}: an epilogue other than one ReLU ({' -> '.join(ep.ops)})")
    return ep.node


def _precision(precise: int, target: Any, plan: GemmPlan, mat1: Operand, mat2: Operand, dtype: str) -> str:
    """tf32, 3xtf32 or fp32 for an fp32 product (fp16 and bf16: tf32, which leaves them as they are).
    After a wrong result, fp32 products run as 3xTF32: still on tensor cores and much closer to fp32
    than TF32 (SPLIT_K_CHUNK says why not as exact). After a second wrong result, full fp32
    (PyTorch's default, on the FMA units at a fraction of the speed)."""
    if precise >= PRECISE_FP32 and dtype == "float32":
        return "fp32"
    if precise >= PRECISE_SPLIT and dtype == "float32":
        # Four copies of large operands would not fit beside them: full fp32 instead. So too for
        # products smaller than a tensor-core tile both ways, for which cuBLAS picks its FMA kernels
        # even with TF32 allowed: three of them cost three times one fp32 product (H200, a Swin window
        # attention's 49x49x32 scores: 134 us as three FMA launches, 41 us as torch.compile's one).
        # And so for products whose three passes would cost more than one fp32 pass (split_pays).
        small = SMALL_PRODUCT > 0 and (
            (plan.m < SMALL_PRODUCT and plan.n < SMALL_PRODUCT) or not split_pays(plan, target))
        fits = 2 * (_extent(mat1) + _extent(mat2)) * 4 <= SPLIT_SCRATCH_BYTES
        return "3xtf32" if fits and not small else "fp32"
    return "tf32"


def _read_through(ctx: EmitContext, plan: GemmPlan, mat1: Operand, mat2: Operand,
                  dtype: str) -> tuple[GemmPlan, Operand, Operand, list[str]] | None:
    """(the plan, its operands, the copies' sources) with a bmm's operand copies read where they
    came from (_through_copy), where cuBLAS reads them so and the product keeps its precision path
    (a copy's source may be the larger: 3xTF32 splits all of it) and packing (one batch stride
    only); else None. The same at every precision level: the Planner leaves the copy out of the
    plan it makes at one level, and the Coder emits the kernel at each."""
    if os.environ.get(READ_THROUGH_ENV, "1") == "0" or len(mat1.shape) != 3:
        return None
    found = [_through_copy(ctx, t) for t in (mat1, mat2)]
    if found == [None, None]:
        return None
    read = [f or t for f, t in zip(found, (mat1, mat2), strict=True)]
    levels = {t.shape[:2] for t in read if len(t.shape) == 4}
    if len(levels) > 1:
        return None  # (three levels between them; a rarer shape than it is worth)
    if levels:
        ((bo, bi),) = levels
        read = [_two_levels(t, bo, bi) for t in read]
    try:
        through = plan_gemm(*read)
    except NotSupported:
        return None
    for level in (PRECISE_TF32, PRECISE_SPLIT, PRECISE_FP32):
        precision = _precision(level, ctx.target, plan, mat1, mat2, dtype)
        if _precision(level, ctx.target, through, *read, dtype) != precision:
            return None
        if precision == "3xtf32" and (packed_plan(plan) is None) != (packed_plan(through) is None):
            return None
    return through, read[0], read[1], list(dict.fromkeys(f.name for f in found if f is not None))


def _two_levels(t: Operand, outer: int, inner: int) -> Operand:
    """A [B, M, K] operand (one batch stride) as [outer, inner, M, K]; a 4-d one as it is."""
    if len(t.shape) == 4:
        return t
    s = t.strides[0]
    return Operand(t.name, (outer, inner, *t.shape[1:]), (inner * s, s, *t.strides[1:]), t.offset, t.dtype)


def _through_copy(ctx: EmitContext, t: Operand) -> Operand | None:
    """The bmm operand `t` read where it was copied from, or None. `t` must be the whole of a
    contiguous clone (through a reshape: what torch's reshape of a permuted view traces to), read by
    this product alone; the clone's source a view of a tensor stored anyway (a forward input or
    parameter, a library kernel's result: a pointwise one would be computed into the copy, at the
    same cost) that nothing writes in place. Its M and K each one stride, its batch at most two
    levels of one stride each: [B, M, K], or [outer, inner, M, K] where two."""
    nodes = ctx.nodes
    copy = nodes.get(t.name)
    if copy is None or copy.get("target") != "aten.clone.default" or not t.contiguous or len(t.shape) != 3 \
            or copy.get("args", {}).get("memory_format") not in (None, "torch.contiguous_format") \
            or copy.get("shape") is None or t.numel != numel(copy["shape"]):
        return None
    readers: dict[str, list[dict[str, Any]]] = {}
    for n in nodes.values():
        for v in n.get("args", {}).values():
            for src in iter_refs(v):
                readers.setdefault(src, []).append(n)
    cur = copy["name"]
    while (rs := readers.get(cur, [])) and all(r is rs[0] for r in rs) and rs[0] is not ctx.node:
        if not rs[0].get("view"):
            return None
        cur = rs[0]["name"]
    if not rs or any(r is not ctx.node for r in rs):
        return None
    src = copy["args"].get("self")
    if not isinstance(src, dict) or src.get("ref") not in nodes:
        return None
    try:
        source = operand(nodes, src["ref"])
    except NotSupported:
        return None
    root = nodes[source.name]
    if root.get("dtype") != t.dtype or not _stored(root, nodes) or _written(root["name"], nodes):
        return None
    dims = [(n, s) for n, s in zip(source.shape, source.strides, strict=True) if n != 1]

    def take(size: int) -> int | None:
        """The one stride of the innermost dims of `dims` that make `size` (taken off them)."""
        if size == 1:
            return 0
        run = [dims.pop()] if dims else []
        while run and numel([n for n, _ in run]) < size and dims:
            run.append(dims.pop())
        if not run or numel([n for n, _ in run]) != size:
            return None
        if any(s1 != s0 * n0 for (n0, s0), (_, s1) in zip(run, run[1:], strict=False)):
            return None
        return run[0][1]

    b, m, k = t.shape
    sk = take(k)
    sm = take(m) if sk is not None else None
    if sk is None or sm is None:
        return None
    levels: list[tuple[int, int]] = []  # the batch's dims, innermost first, merged where they can be
    for n, s in reversed(dims):
        if levels and s == levels[-1][0] * levels[-1][1]:
            levels[-1] = (levels[-1][0] * n, levels[-1][1])
        else:
            levels.append((n, s))
    if numel([n for n, _ in levels]) != b or len(levels) > 2:
        return None
    if len(levels) == 2:
        (ni, si), (no, so) = levels
        return Operand(source.name, (no, ni, m, k), (so, si, sm, sk), source.offset, t.dtype)
    sb = levels[0][1] if levels else 0
    return Operand(source.name, (b, m, k), (sb, sm, sk), source.offset, t.dtype)


def _stored(node: dict[str, Any], nodes: dict[str, Any]) -> bool:
    """A forward argument, parameter or constant (not a buffer, which forward may update), or a
    library kernel's result: stored whatever reads it."""
    if node["op"] == "getitem":
        src = node.get("args", {}).get("self")
        node = nodes.get(src.get("ref"), node) if isinstance(src, dict) else node
    if node["op"] in ("input", "constant"):
        return node.get("kind") != "buffer"
    return node["op"] in emitters()


def _written(root: str, nodes: dict[str, Any]) -> bool:
    """Whether a node writes into `root` (through any view of it) in place."""
    def root_of(name: str) -> str:
        while (n := nodes.get(name)) is not None and n.get("view") and isinstance(n["args"].get("self"), dict):
            name = n["args"]["self"].get("ref", name)
        return name

    return any(n["op"].endswith("_") and any(root_of(r) == root for r in iter_refs(n.get("args", {})))
               for n in nodes.values())


def split_pays(plan: GemmPlan, target: Any) -> bool:
    """Whether 3xTF32 beats one fp32 product on `target`'s roofline (its peaks, not an H100's): three
    tensor-core products against one on the FMA units, each also paying its memory traffic. The split
    writes hi and lo of both operands and its products read them again and c up to three times, so
    a product that is memory-bound in fp32 only gets slower (level 3's Mamba2 on the H200: batched
    64x16x64 and 3x1024x3 products, 3xTF32 on cuBLAS's FMA kernels three times over plus 0.76 ms of
    splitting, 4.3 ms against torch.compile's 1.3 in fp32). Ideal roofs, so fp32 is taken only
    where it is clearly ahead (SPLIT_MARGIN): Mamba2's products by 5x and more; attention scores
    with a short K (level 3's MinGPT, measured faster split than before) stay split."""
    flops = 2.0 * plan.batch * plan.loops * plan.m * plan.n * plan.k
    pa, pb = packed_batches(plan)
    ab = 4.0 * (pa * plan.m * plan.k + pb * plan.k * plan.n)
    c = 4.0 * plan.batch * plan.loops * plan.m * plan.n
    bw = target.roofline_dram_bytes_per_s
    fp32 = max(flops / target.fp32_flops, (ab + c) / bw)
    # Packed: the operands read and written three times, then read by one product that writes c
    # once; else read and written twice, read by three products, c written once and then read and
    # written by two more.
    traffic = 7 * ab + c if packed_plan(plan) is not None else 6 * ab + 5 * c
    return max(3 * flops / target.tf32_flops, traffic / bw) < SPLIT_MARGIN * fp32


def _extent(t: Operand) -> int:
    """Elements from the start of `t`'s storage to the last one the op reads, inclusive."""
    return t.offset + sum((n - 1) * abs(st) for n, st in zip(t.shape, t.strides, strict=True)) + 1


def render_gemm(
    name: str,
    ops: str,
    plan: GemmPlan,
    mat1: Operand,
    mat2: Operand,
    bias: Operand | None,
    full: tuple[int, ...],
    alpha: float,
    beta: float,
    out: OutSpec,
    precision: str = "tf32",  # fp32 products: tf32, 3xtf32 (split operands) or fp32 (no tensor cores)
    relu: str | None = None,  # the ReLU node stored in the result's place (_relu_epilogue)
    target: Any = None,  # the device whose peaks say whether padding a misaligned product pays (pad_plan_for)
) -> Kernel:
    ctype = C_TYPES[out.dtype]
    dtype, compute = _CUBLAS_TYPES[out.dtype]
    split = precision == "3xtf32"  # (emit_gemm asks for 3xtf32 and fp32 on fp32 products only)
    packed = packed_plan(plan) if split else None
    if precision == "fp32":
        compute = "CUBLAS_COMPUTE_32F"  # PyTorch's own default for fp32 matmul
    names: list[str] = []
    for t in (mat1, mat2, bias):
        if t is not None and t.name not in names:
            names.append(t.name)
    slot = {n: i for i, n in enumerate(names)}
    bstrides = bias_strides(bias, full) if bias is not None else ()
    # nn.Linear: the bias is one contiguous row added to every output row, with beta == 1.
    lt = bias is not None and beta == 1.0 and len(full) == 2 and plan.batch == 1 and bstrides == (0, 1)
    # Three products accumulate into c: the bias goes in first, by the copy. Packed, they are one
    # product, which takes the epilogue as TF32's does.
    if relu is not None and not lt:
        raise NotSupported("a ReLU epilogue needs nn.Linear's bias (cuBLASLt's RELU_BIAS)")
    lt = lt and (not split or packed is not None)
    # Products cuBLAS would read unaligned, over padded copies (bias and ReLU epilogues keep their paths).
    padded = pad_plan_for(plan, target, precision, out.dtype) if bias is None and relu is None else None
    # The product's own status, then (with a ReLU epilogue, on every path but cuBLASLt's, which
    # applies it as it stores) the ReLU over the result in place: what one rung computes, each does.
    done = "  return s == CUBLAS_STATUS_SUCCESS ? 0 : SC_GEMM_ERROR(s);" if relu is None else \
        f"  if (s != CUBLAS_STATUS_SUCCESS) return SC_GEMM_ERROR(s);\n  return {name}_relu(c, stream);"
    lines: list[str] = [_FAMILY] + ([_FAMILY_SPLIT] if split else []) + ([_FAMILY_PAD] if padded else [])
    if lt:
        lines.append(_FAMILY_LT)
    if bias is not None:
        lines.append(_bias_kernel(name, ctype, bias, full, bstrides))
    if relu is not None:
        lines.append(_relu_kernel(name, ctype, numel(full)))
    if lt:
        lines.append(_lt_plan(name, packed or plan, dtype, compute, relu=relu is not None))
    params = [f"const void* in{i}" for i in range(len(names))]
    extra = ((3 if packed else 5) if split else 4 if padded else 1)
    params += ["void* out0", "void* scratch0"] + [f"void* scratch{i}" for i in range(1, extra)]
    params += ["cudaStream_t stream"]
    body = [
        f'extern "C" int {name}({", ".join(params)}) {{',
        f"  const {ctype}* a = static_cast<const {ctype}*>(in{slot[mat2.name]}) + {plan.a.offset}LL;",
        f"  const {ctype}* b = static_cast<const {ctype}*>(in{slot[mat1.name]}) + {plan.b.offset}LL;",
        f"  {ctype}* c = static_cast<{ctype}*>(out0);",
        f"  const float alpha = {c_float(alpha)};",
        "  int rc = 0;",
    ]
    if packed is not None:
        pa, pb = packed_batches(plan)
        body += [
            "  // The three products as one over operands packed with K three times as long (packed_plan):",
            "  // [a_lo | a_hi | a_hi] times [b_hi; b_lo; b_hi], so c is written once.",
            "  float* ap = static_cast<float*>(scratch1);",
            "  float* bp = static_cast<float*>(scratch2);",
            f"  rc = sc_tf32_pack(a, ap, {pa}LL, {plan.m}LL, {plan.k}LL, {plan.a.ld}LL, {int(plan.a.trans)}, "
            f"{plan.a.stride}LL, 1, 0, stream);",
            "  if (rc != 0) return rc;",
            f"  rc = sc_tf32_pack(b, bp, {pb}LL, {plan.k}LL, {plan.n}LL, {plan.b.ld}LL, {int(plan.b.trans)}, "
            f"{plan.b.stride}LL, 0, 1, stream);",
            "  if (rc != 0) return rc;",
        ]
    if lt:
        body += [
            f"  const {ctype}* bias = static_cast<const {ctype}*>(in{slot[bias.name]}) + {bias.offset}LL;",
            f"  rc = {name}_lt({'ap, bp' if packed is not None else 'a, b'}, bias, c, alpha, scratch0, stream);",
            "  if (rc != SC_GEMM_LT_UNAVAILABLE) return rc;",
        ]
    if bias is not None:
        body += [
            f"  rc = {name}_bias(static_cast<const {ctype}*>(in{slot[bias.name]}), c, stream);",
            "  if (rc != 0) return rc;",
        ]
    body += [
        f"  const float beta = {c_float(beta) if bias is not None else '0.0f'};",
        "  cublasHandle_t handle;",
        "  rc = sc_gemm_handle(stream, scratch0, &handle);",
        "  if (rc != 0) return rc;",
    ]
    if padded is not None:
        pa, pb = packed_batches(plan)
        a_rows, a_cols = plan.m, plan.k  # op(A), op(B) as cuBLAS reads them
        body += [
            "  // Operands and result cuBLAS would read off 16 bytes: the product over padded copies (padded_plan).",
            f"  {ctype}* ap = static_cast<{ctype}*>(scratch1);",
            f"  {ctype}* bp = static_cast<{ctype}*>(scratch2);",
            f"  {ctype}* cp = static_cast<{ctype}*>(scratch3);",
            f"  rc = sc_gemm_pad<{ctype}>(a, ap, {pa}LL, {a_rows}LL, {a_cols}LL, {plan.a.ld}LL, {int(plan.a.trans)}, "
            f"{plan.a.stride}LL, {padded.m}LL, {padded.k}LL, stream);",
            "  if (rc != 0) return rc;",
            f"  rc = sc_gemm_pad<{ctype}>(b, bp, {pb}LL, {plan.k}LL, {plan.n}LL, {plan.b.ld}LL, {int(plan.b.trans)}, "
            f"{plan.b.stride}LL, {padded.k}LL, {plan.n}LL, stream);",
            "  if (rc != 0) return rc;",
            "  const cublasStatus_t s = " + _call(padded, dtype, compute, "ap", "bp", c="cp") + ";",
            "  if (s != CUBLAS_STATUS_SUCCESS) return SC_GEMM_ERROR(s);",
            f"  return sc_gemm_unpad<{ctype}>(cp, c, {plan.batch}LL, {plan.m}LL, {plan.n}LL, {padded.m}LL, {plan.ldc}LL, "
            f"{plan.stride_c}LL, stream);",
            "}",
        ]
    elif not split and plan.loops == 1:
        body += [
            "  const cublasStatus_t s = " + _call(plan, dtype, compute) + ";",
            done,
            "}",
        ]
    elif not split:
        body += [
            "  cublasStatus_t s = CUBLAS_STATUS_SUCCESS;",
            *_looped(plan, ctype, ["  s = " + _call(plan, dtype, compute, "a_i", "b_i", c="c_i") + ";"],
                     [(f"const {ctype}", "a", plan.loop_a), (f"const {ctype}", "b", plan.loop_b),
                      (ctype, "c", plan.loop_c)]),
            done,
            "}",
        ]
    elif packed is not None:
        body += [
            "  const cublasStatus_t s = " + _call(packed, dtype, compute, "ap", "bp") + ";",
            done,
            "}",
        ]
    else:
        ext_a, ext_b = _extent(mat2), _extent(mat1)
        body += [
            "  // a = a_hi + a_lo, a_hi on TF32's grid (exact on tensor cores), a_lo the rest; likewise b.",
            "  // c = a_lo b_hi + a_hi b_lo + a_hi b_hi (small terms first; a_lo b_lo is below fp32's ulp).",
            "  float* ah = static_cast<float*>(scratch1);",
            "  float* al = static_cast<float*>(scratch2);",
            "  float* bh = static_cast<float*>(scratch3);",
            "  float* bl = static_cast<float*>(scratch4);",
            f"  rc = sc_tf32_split(static_cast<const float*>(in{slot[mat2.name]}), ah, al, {ext_a}LL, stream);",
            "  if (rc != 0) return rc;",
            f"  rc = sc_tf32_split(static_cast<const float*>(in{slot[mat1.name]}), bh, bl, {ext_b}LL, stream);",
            "  if (rc != 0) return rc;",
            f"  const float *a_hi = ah + {plan.a.offset}LL, *a_lo = al + {plan.a.offset}LL;",
            f"  const float *b_hi = bh + {plan.b.offset}LL, *b_lo = bl + {plan.b.offset}LL;",
            "  const float one = 1.0f;",
            "  cublasStatus_t s = CUBLAS_STATUS_SUCCESS;",
            *_looped(plan, "float", _split_products(plan, dtype, compute, *(("_i", "c_i") if plan.loops > 1 else ())),
                     [("const float", "a_lo", plan.loop_a), ("const float", "a_hi", plan.loop_a),
                      ("const float", "b_lo", plan.loop_b), ("const float", "b_hi", plan.loop_b),
                      ("float", "c", plan.loop_c)]),
            done,
            "}",
        ]
    scratch = [("uint8", WORKSPACE_BYTES)]
    if packed is not None:
        pa, pb = packed_batches(plan)
        scratch += [("float32", 3 * pa * plan.m * plan.k), ("float32", 3 * pb * plan.k * plan.n)]
    elif split:
        scratch += [("float32", _extent(mat2))] * 2 + [("float32", _extent(mat1))] * 2
    elif padded is not None:
        scratch += [(out.dtype, n) for n in pad_elements(plan, ITEM_SIZE[out.dtype])]
    lines.append("\n".join(body))
    return Kernel(
        name=name,
        inputs=[KernelArg(n, out.dtype) for n in names],
        outputs=[KernelArg(relu or out.name, out.dtype)],
        source="\n\n".join(lines) + "\n",
        ops=[ops + (f" +bias{' -> relu' if relu else ''} (cublasLt epilogue)" if lt
                    else " +bias" + (" -> relu" if relu else "") if bias is not None else "")
             + (" (3xTF32: split operands, three products on tensor cores"
                + (", packed into one" if packed is not None else "") + ")" if split else "")
             + (" (fp32, no TF32)" if precision == "fp32" else "")
             + (" (over copies padded to 16 bytes)" if padded is not None else "")],
        libraries=["cublasLt", "cublas"] if lt else ["cublas"],
        scratch=scratch,
    )


def _op(side: Side) -> str:
    return "CUBLAS_OP_T" if side.trans else "CUBLAS_OP_N"


def _call(
    plan: GemmPlan, dtype: str, compute: str, a: str = "a", b: str = "b", beta: str = "beta", k: str | None = None,
    c: str = "c",
) -> str:
    """The cuBLAS call; `beta` names a float (or, starting with '*', points at one); `k` overrides K;
    a, b and c name the pointers (of one of a looped plan's calls)."""
    ab = f"handle, {_op(plan.a)}, {_op(plan.b)}, {plan.m}, {plan.n}, {k or plan.k}, &alpha"
    beta_ptr = beta[1:] if beta.startswith("*") else f"&{beta}"
    if plan.batch == 1:
        return (
            f"cublasGemmEx({ab}, {a}, {dtype}, {plan.a.ld}, {b}, {dtype}, {plan.b.ld}, {beta_ptr}, {c}, {dtype}, "
            f"{plan.ldc}, {compute}, CUBLAS_GEMM_DEFAULT)"
        )
    return (
        f"cublasGemmStridedBatchedEx({ab}, {a}, {dtype}, {plan.a.ld}, {plan.a.stride}LL, {b}, {dtype}, {plan.b.ld}, "
        f"{plan.b.stride}LL, {beta_ptr}, {c}, {dtype}, {plan.ldc}, {plan.stride_c}LL, {plan.batch}, {compute}, "
        "CUBLAS_GEMM_DEFAULT)"
    )


# 3xTF32's products run in chunks of K this long, each added into c by cuBLAS's epilogue (beta = 1,
# rounded to nearest). Why: the tensor cores truncate as they accumulate, and over a long K that bias
# builds up (on the H100, with K = 8192, 3xTF32's error to float64 was 1.5-13x fp32's own); in an
# emulation of truncating accumulation the error falls in proportion to the chunks.
SPLIT_K_CHUNK = 1024


def k_steps(plan: GemmPlan) -> tuple[int, int]:
    """Elements from one k to the next in cuBLAS's A and B: along op(A)'s columns (A itself when not
    transposed: a column, ld apart; transposed: adjacent) and op(B)'s rows (the other way round)."""
    return (plan.a.ld if not plan.a.trans else 1), (1 if not plan.b.trans else plan.b.ld)


def k_chunks(plan: GemmPlan, chunk: int = SPLIT_K_CHUNK) -> list[GemmPlan]:
    """The calls of a K-chunked product: the same plan over K[k0, k0 + chunk) each, its operands moved
    to k0. (What the emitted loop computes, for tests to simulate.)"""
    a_step, b_step = k_steps(plan)
    return [
        replace(plan, k=min(chunk, plan.k - k0), a=replace(plan.a, offset=plan.a.offset + k0 * a_step),
                b=replace(plan.b, offset=plan.b.offset + k0 * b_step))
        for k0 in range(0, plan.k, chunk)
    ]


# "0" keeps 3xTF32's three calls where packed_plan would make them one.
PACKED_SPLIT_ENV = "STITCHCUDA_PACKED_SPLIT"


def packed_batches(plan: GemmPlan) -> tuple[int, int]:
    """Batches of the packed A and B: one where the operand is broadcast over the batch (stride 0).
    (Of all the plan's calls: what split_pays counts.)"""
    return ((plan.batch if plan.a.stride else 1) * (plan.loops if plan.loop_a else 1),
            (plan.batch if plan.b.stride else 1) * (plan.loops if plan.loop_b else 1))


def packed_plan(plan: GemmPlan) -> GemmPlan | None:
    """3xTF32's three products as one call over packed operands (gemm_split.cuh's sc_tf32_pack): A
    [m, 3k] = [a_lo | a_hi | a_hi] and B [3k, n] = [b_hi; b_lo; b_hi], dense and column-major. The
    three calls read and write c three times (beta = 1 after the first); one call writes it once,
    for the same products: where k is short, c's traffic is most of the time (level 3's
    VisionAttention: scores of 8.6 GB, three calls 12.1 ms on the H200). Only while 3k is within one
    SPLIT_K_CHUNK (the accumulation length it allows) and the packed copies within
    SPLIT_SCRATCH_BYTES; None otherwise, and with PACKED_SPLIT_ENV=0.

    And only where c is at least as large as the operands: packing writes each operand three times
    (and reads it through its strides), where the split writes it twice; c's two extra writes and
    reads are what packing saves. On the H200 (6aadf96) level 3's Mamba2, whose operands are larger
    than its products, spent 3.6 ms packing where the split took 0.76."""
    if os.environ.get(PACKED_SPLIT_ENV, "1") == "0" or 3 * plan.k > SPLIT_K_CHUNK or plan.loops > 1:
        return None  # (sc_tf32_pack reads one batch stride)
    pa, pb = packed_batches(plan)
    if 3 * (pa * plan.m + pb * plan.n) * plan.k * 4 > SPLIT_SCRATCH_BYTES:
        return None
    if plan.batch * plan.m * plan.n < (pa * plan.m + pb * plan.n) * plan.k:
        return None
    return pack_geometry(plan)


def pack_geometry(plan: GemmPlan) -> GemmPlan:
    """The one call over the packed operands (packed_plan's, whatever the sizes)."""
    pa, pb = packed_batches(plan)
    k3 = 3 * plan.k
    return replace(plan, k=k3, a=Side(False, plan.m, plan.m * k3 if pa > 1 else 0, 0),
                   b=Side(False, k3, k3 * plan.n if pb > 1 else 0, 0))


def misaligned(plan: GemmPlan, itemsize: int) -> bool:
    """Whether cuBLAS would read an operand or write the result off 16 bytes: a leading dimension,
    batch stride, offset or contiguous extent (the dim each matrix is stored along) that is no
    multiple of 16 bytes' elements."""
    step = 16 // itemsize
    along = [plan.k if plan.a.trans else plan.m, plan.n if plan.b.trans else plan.k, plan.m]
    values = [plan.a.ld, plan.b.ld, plan.ldc, plan.a.offset, plan.b.offset, *along]
    if plan.batch > 1:
        values += [plan.a.stride, plan.b.stride, plan.stride_c]
    return any(v % step for v in values)


def _round_up(n: int, step: int) -> int:
    return (n + step - 1) // step * step


def padded_plan(plan: GemmPlan, itemsize: int) -> GemmPlan:
    """The call over padded copies (gemm_pad.cuh): op(A) as a dense column-major m_p x k_p, op(B) as
    k_p x n, the result m_p x n, m and k rounded up to 16 bytes' elements and zeros past their ends
    (zeros in both operands' K tail: nothing non-finite meets them). A broadcast operand is copied
    once (batch stride 0)."""
    step = 16 // itemsize
    m_p, k_p = _round_up(plan.m, step), _round_up(plan.k, step)
    return replace(plan, m=m_p, k=k_p, a=Side(False, m_p, m_p * k_p if plan.a.stride else 0, 0),
                   b=Side(False, k_p, k_p * plan.n if plan.b.stride else 0, 0), ldc=m_p, stride_c=m_p * plan.n)


def pad_elements(plan: GemmPlan, itemsize: int) -> tuple[int, int, int]:
    """The padded copies' sizes in elements: op(A)'s, op(B)'s and the result's (padded_plan); a
    broadcast operand once (packed_batches)."""
    pad = padded_plan(plan, itemsize)
    pa, pb = packed_batches(plan)
    return pa * pad.m * pad.k, pb * pad.k * pad.n, pad.batch * pad.m * pad.n


def pad_pays(plan: GemmPlan, elements: tuple[int, int, int], target: Any, precision: str, dtype: str) -> bool:
    """Whether copying a misaligned product's operands and result (`elements`: pad_elements, each read
    and written once more) costs at most PAD_SHARE of the product's ideal time on `target`'s peaks: a
    large product on the tensor cores, not a skinny or memory-bound one, where the copies would be
    most of the time."""
    itemsize = ITEM_SIZE[dtype]
    copies = 2.0 * itemsize * sum(elements) / target.roofline_dram_bytes_per_s
    peak = {"tf32": target.tf32_flops, "fp32": target.fp32_flops}[precision] if dtype == "float32" \
        else target.fp16_flops if dtype == "float16" else target.bf16_flops
    return copies <= PAD_SHARE * 2.0 * plan.batch * plan.m * plan.n * plan.k / peak


def pad_plan_for(plan: GemmPlan, target: Any, precision: str, dtype: str) -> GemmPlan | None:
    """padded_plan where a one-call product (no loops) is misaligned, padding pays, the copies fit in
    SPLIT_SCRATCH_BYTES and the padded dims in cuBLAS's int; else None (and with PAD_ENV=0)."""
    itemsize = ITEM_SIZE[dtype]
    if os.environ.get(PAD_ENV, "1") == "0" or target is None or plan.loops > 1 or precision == "3xtf32" \
            or not misaligned(plan, itemsize):
        return None
    elements = pad_elements(plan, itemsize)
    pad = padded_plan(plan, itemsize)
    if itemsize * sum(elements) > SPLIT_SCRATCH_BYTES or max(pad.m, pad.k) > _INT_MAX \
            or not pad_pays(plan, elements, target, precision, dtype):
        return None
    return pad


def _split_products(plan: GemmPlan, dtype: str, compute: str, sfx: str = "", c: str = "c") -> list[str]:
    """c = a_lo b_hi + a_hi b_lo + a_hi b_hi, in chunks of K where K is longer than one, into a
    declared `s`. `sfx`: the suffix of the operands' pointers (and `c` the result's) in one of a
    looped plan's calls."""
    a_lo, a_hi, b_lo, b_hi = (f"{n}{sfx}" for n in ("a_lo", "a_hi", "b_lo", "b_hi"))
    if plan.k <= SPLIT_K_CHUNK:
        return [
            "  if (s == CUBLAS_STATUS_SUCCESS) s = " + _call(plan, dtype, compute, a_lo, b_hi, "beta", c=c) + ";",
            "  if (s == CUBLAS_STATUS_SUCCESS) s = " + _call(plan, dtype, compute, a_hi, b_lo, "one", c=c) + ";",
            "  if (s == CUBLAS_STATUS_SUCCESS) s = " + _call(plan, dtype, compute, a_hi, b_hi, "one", c=c) + ";",
        ]
    a_step, b_step = k_steps(plan)
    kc = SPLIT_K_CHUNK
    return [
        "  // In chunks of K, each added into c by the epilogue: the tensor cores' truncating",
        "  // accumulation then runs over one chunk at a time (SPLIT_K_CHUNK in emit_gemm.py says why).",
        f"  for (int64_t k0 = 0; k0 < {plan.k}LL && s == CUBLAS_STATUS_SUCCESS; k0 += {kc}LL) {{",
        f"    const int kk = (int)({plan.k}LL - k0 < {kc}LL ? {plan.k}LL - k0 : {kc}LL);",
        "    const float* first = k0 == 0 ? &beta : &one;",
        f"    const float *alo = {a_lo} + k0 * {a_step}LL, *ahi = {a_hi} + k0 * {a_step}LL;",
        f"    const float *blo = {b_lo} + k0 * {b_step}LL, *bhi = {b_hi} + k0 * {b_step}LL;",
        "    s = " + _call(plan, dtype, compute, "alo", "bhi", "*first", k="kk", c=c) + ";",
        "    if (s == CUBLAS_STATUS_SUCCESS) s = " + _call(plan, dtype, compute, "ahi", "blo", "one", k="kk", c=c) + ";",
        "    if (s == CUBLAS_STATUS_SUCCESS) s = " + _call(plan, dtype, compute, "ahi", "bhi", "one", k="kk", c=c) + ";",
        "  }",
    ]


def _looped(plan: GemmPlan, ctype: str, body: list[str], pointers: list[tuple[str, str, int]]) -> list[str]:
    """`body` (statements into a declared `s`) once per call of a looped plan, each with `pointers`
    [(type, name, elements per call)] moved on as name + "_i"; as it is for one call."""
    if plan.loops == 1:
        return body
    moved = [f"    {t}* {n}_i = {n} + it * {step}LL;" for t, n, step in pointers]
    return [
        f"  // A batch in two levels: {plan.loops} calls, each over {plan.batch} products (_plan_looped).",
        f"  for (int64_t it = 0; it < {plan.loops}LL && s == CUBLAS_STATUS_SUCCESS; ++it) {{",
        *moved,
        *["  " + line for line in body],
        "  }",
    ]


def _bias_kernel(
    name: str, ctype: str, bias: Operand, full: tuple[int, ...], strides: tuple[int, ...]
) -> str:
    """out = bias broadcast to the result, so the GEMM can add alpha * A @ B with beta. fp32 results
    whose last dim is a multiple of 4 are stored four at a time where out is 16-byte aligned: the
    scalar stores ran at about 1 TB/s (level 3's MinGPT, 3xTF32: 587 us for a 604 MB result)."""
    total = 1
    for s in full:
        total *= s

    def at(i: str) -> str:
        terms = [f"{bias.offset}LL"]
        rest = i
        for d in range(len(full) - 1, -1, -1):
            index = f"({rest} % {full[d]}LL)" if d > 0 else rest
            if strides[d]:
                terms.append(f"{index} * {strides[d]}LL")
            rest = f"({rest} / {full[d]}LL)"
        return " + ".join(terms)

    scalar = f"""__global__ void __launch_bounds__({_BIAS_THREADS}) {name}_bias_kernel(const {ctype}* __restrict__ bias, {ctype}* __restrict__ out) {{
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < {total}LL; i += (int64_t)gridDim.x * blockDim.x)
    out[i] = bias[{at("i")}];
}}
"""
    if ctype != "float" or full[-1] % 4:
        return scalar + f"""
static int {name}_bias(const {ctype}* bias, {ctype}* out, cudaStream_t stream) {{
  {name}_bias_kernel<<<sc_grid({total}LL), {_BIAS_THREADS}, 0, stream>>>(bias, out);
  return (int)cudaGetLastError();
}}"""
    step = strides[-1]  # four neighbours along the last dim share every other index
    return scalar + f"""
__global__ void __launch_bounds__({_BIAS_THREADS}) {name}_bias_vec4(const float* __restrict__ bias, float4* __restrict__ out) {{
  for (int64_t v = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; v < {total // 4}LL; v += (int64_t)gridDim.x * blockDim.x) {{
    const int64_t i = v * 4, b = {at("i")};
    out[v] = make_float4(bias[b], bias[b + {step}LL], bias[b + {2 * step}LL], bias[b + {3 * step}LL]);
  }}
}}

static int {name}_bias(const float* bias, float* out, cudaStream_t stream) {{
  if (reinterpret_cast<uintptr_t>(out) % 16 == 0)
    {name}_bias_vec4<<<sc_grid({total // 4}LL), {_BIAS_THREADS}, 0, stream>>>(bias, reinterpret_cast<float4*>(out));
  else
    {name}_bias_kernel<<<sc_grid({total}LL), {_BIAS_THREADS}, 0, stream>>>(bias, out);
  return (int)cudaGetLastError();
}}"""


def _relu_kernel(name: str, ctype: str, total: int) -> str:
    """The ReLU epilogue where cuBLASLt does not apply it: in place over the result, NaN kept (as
    torch.relu keeps it)."""
    return f"""__global__ void __launch_bounds__({_BIAS_THREADS}) {name}_relu_kernel({ctype}* __restrict__ c) {{
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < {total}LL; i += (int64_t)gridDim.x * blockDim.x)
    if (static_cast<float>(c[i]) < 0.0f) c[i] = static_cast<{ctype}>(0.0f);
}}

static int {name}_relu({ctype}* c, cudaStream_t stream) {{
  {name}_relu_kernel<<<sc_grid({total}LL), {_BIAS_THREADS}, 0, stream>>>(c);
  return (int)cudaGetLastError();
}}"""


# STITCHCUDA_GEMM_TUNE=1: the bias-epilogue matmul times cuBLASLt's first TUNE_ALGOS heuristic
# algorithms on its first call (outside a graph capture) and keeps the fastest; otherwise it takes the
# first. Off until timed on a GPU (written 2026-12-05 without one): on the H100 level 2's 80 and 95
# lose to torch.compile by their matmul alone (ours 337 us, cuBLASLt's first pick with the bias
# epilogue; compile's mm plus a fused bias about 5% less).
TUNE_ENV = "STITCHCUDA_GEMM_TUNE"
TUNE_ALGOS = 8


def gemm_tune_on() -> bool:
    return os.environ.get(TUNE_ENV, "0").startswith("1")


def _lt_plan(name: str, plan: GemmPlan, dtype: str, compute: str, *, relu: bool = False) -> str:
    """A cuBLASLt matmul with a bias epilogue (and ReLU after it: RELU_BIAS); the descriptors and the
    algorithm are found once (with STITCHCUDA_GEMM_TUNE=1 the fastest of the heuristic's first few,
    timed on the first call's own operands). The switch is a constant in the source, fixed as it is
    written."""
    tune = TUNE_ALGOS if gemm_tune_on() else 1
    a_rows, a_cols = (plan.k, plan.m) if plan.a.trans else (plan.m, plan.k)
    b_rows, b_cols = (plan.n, plan.k) if plan.b.trans else (plan.k, plan.n)
    return f"""struct {name}_lt_state {{
  bool ok = false;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo;
  cublasLtMatmulAlgo_t algos[{tune}];  // the heuristic's first `found`, best first
  int found = 0;
}};

static {name}_lt_state {name}_lt_make(cublasLtHandle_t lt) {{
  {name}_lt_state st;
  const cublasOperation_t ta = {_op(plan.a)}, tb = {_op(plan.b)};
  const cublasLtEpilogue_t epi = {"CUBLASLT_EPILOGUE_RELU_BIAS" if relu else "CUBLASLT_EPILOGUE_BIAS"};
  // The heuristic reads the bias pointer's alignment only: 16 bytes is what every call checks.
  const void* bias16 = reinterpret_cast<const void*>(uintptr_t(16));
  const uint32_t align = 16;
  const uint64_t ws = SC_GEMM_WORKSPACE;
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulHeuristicResult_t found[{tune}];
  int count = 0;
  bool ok = cublasLtMatmulDescCreate(&st.op, {compute}, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS &&
    cublasLtMatmulDescSetAttribute(st.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)) == CUBLAS_STATUS_SUCCESS &&
    cublasLtMatmulDescSetAttribute(st.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)) == CUBLAS_STATUS_SUCCESS &&
    cublasLtMatmulDescSetAttribute(st.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)) == CUBLAS_STATUS_SUCCESS &&
    cublasLtMatmulDescSetAttribute(st.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias16, sizeof(bias16)) == CUBLAS_STATUS_SUCCESS &&
    cublasLtMatrixLayoutCreate(&st.a, {dtype}, {a_rows}, {a_cols}, {plan.a.ld}) == CUBLAS_STATUS_SUCCESS &&
    cublasLtMatrixLayoutCreate(&st.b, {dtype}, {b_rows}, {b_cols}, {plan.b.ld}) == CUBLAS_STATUS_SUCCESS &&
    cublasLtMatrixLayoutCreate(&st.c, {dtype}, {plan.m}, {plan.n}, {plan.ldc}) == CUBLAS_STATUS_SUCCESS &&
    cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS &&
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)) == CUBLAS_STATUS_SUCCESS &&
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align, sizeof(align)) == CUBLAS_STATUS_SUCCESS &&
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align, sizeof(align)) == CUBLAS_STATUS_SUCCESS &&
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align, sizeof(align)) == CUBLAS_STATUS_SUCCESS &&
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align, sizeof(align)) == CUBLAS_STATUS_SUCCESS &&
    cublasLtMatmulAlgoGetHeuristic(lt, st.op, st.a, st.b, st.c, st.c, pref, {tune}, found, &count) == CUBLAS_STATUS_SUCCESS &&
    count > 0;
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  if (ok) {{
    for (int i = 0; i < count; ++i) st.algos[i] = found[i].algo;
    st.found = count;
    st.algo = found[0].algo;
    st.ok = true;
  }}
  return st;
}}

// The fastest of the heuristic's algorithms on these operands (three timed runs each after one
// untimed, the minimum); the first where the stream is being captured or timing fails. The result
// `c` is rewritten by every run, the kept algorithm's last (the caller runs it once more).
static void {name}_lt_tune(cublasLtHandle_t lt, {name}_lt_state& st, const void* a, const void* b, void* c,
                          float alpha, void* workspace, cudaStream_t stream) {{
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  if (st.found < 2 || cudaStreamIsCapturing(stream, &capturing) != cudaSuccess ||
      capturing != cudaStreamCaptureStatusNone)
    return;
  cudaEvent_t e0, e1;
  if (cudaEventCreate(&e0) != cudaSuccess) return (void)cudaGetLastError();
  if (cudaEventCreate(&e1) != cudaSuccess) return (void)cudaEventDestroy(e0), (void)cudaGetLastError();
  const float zero = 0.0f;
  float best = -1.0f;
  int pick = 0;
  for (int i = 0; i < st.found; ++i) {{
    float fastest = -1.0f;
    for (int r = 0; r < 4; ++r) {{
      cudaEventRecord(e0, stream);
      const cublasStatus_t s = cublasLtMatmul(lt, st.op, &alpha, a, st.a, b, st.b, &zero, c, st.c, c, st.c, &st.algos[i],
                                              workspace, SC_GEMM_WORKSPACE, stream);
      cudaEventRecord(e1, stream);
      float ms = 0.0f;
      if (s != CUBLAS_STATUS_SUCCESS || cudaEventSynchronize(e1) != cudaSuccess ||
          cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess) {{
        fastest = -1.0f;
        break;
      }}
      if (r > 0 && (fastest < 0 || ms < fastest)) fastest = ms;
    }}
    if (fastest >= 0 && (best < 0 || fastest < best)) best = fastest, pick = i;
  }}
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaGetLastError();  // a refused algorithm is not the caller's error
  st.algo = st.algos[pick];
}}

// SC_GEMM_LT_UNAVAILABLE where this call cannot take the epilogue path (the caller falls back).
static int {name}_lt(const void* a, const void* b, const void* bias, void* c, float alpha, void* workspace,
                     cudaStream_t stream) {{
  if (!sc_gemm_aligned16(a) || !sc_gemm_aligned16(b) || !sc_gemm_aligned16(bias) || !sc_gemm_aligned16(c) ||
      !sc_gemm_aligned16(workspace))
    return SC_GEMM_LT_UNAVAILABLE;
  cublasLtHandle_t lt;
  const int rc = sc_gemm_lt_handle(&lt);
  if (rc != 0) return rc;
  static {name}_lt_state st = {name}_lt_make(lt);
  if (!st.ok) return SC_GEMM_LT_UNAVAILABLE;
  // One descriptor shared by every call of this launcher: calls must not overlap from several host threads.
  cublasStatus_t s = cublasLtMatmulDescSetAttribute(st.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
  if (s != CUBLAS_STATUS_SUCCESS) return SC_GEMM_ERROR(s);
  static std::once_flag tuned;
  std::call_once(tuned, [&] {{ {name}_lt_tune(lt, st, a, b, c, alpha, workspace, stream); }});
  const float zero = 0.0f;
  s = cublasLtMatmul(lt, st.op, &alpha, a, st.a, b, st.b, &zero, c, st.c, c, st.c, &st.algo, workspace,
                     SC_GEMM_WORKSPACE, stream);
  return s == CUBLAS_STATUS_SUCCESS ? 0 : SC_GEMM_LT_UNAVAILABLE;
}}"""


# The family's shared code (cuda/gemm*.cuh: handles, and the 3xTF32 operand split), each joined to
# the kernel's own code with one newline.
_FAMILY = cuda_text.fill("gemm.cuh", WORKSPACE_BYTES=WORKSPACE_BYTES, CUBLAS_ERROR_BASE=CUBLAS_ERROR_BASE).rstrip("\n")
_FAMILY_SPLIT = cuda_text.load("gemm_split.cuh").rstrip("\n")

_FAMILY_LT = cuda_text.load("gemm_lt.cuh").rstrip("\n")
_FAMILY_PAD = (cuda_text.load("gemm_unpad.cuh") + cuda_text.load("gemm_pad.cuh")).rstrip("\n")


EMITTERS = {op: emit_gemm for op in _OPS}
