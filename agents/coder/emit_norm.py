"""Layer, group, batch (instance) and RMS norm: one description, five kernel shapes.

Every op is described the same way (`_Norm`): R rows of statistics, each of COUNT elements laid
out in runs of S contiguous elements SEG_STRIDE apart (one run for layer/group norm, N runs for
batch norm over [N, C, S]), plus the index of an element's weight and bias. From that, one of:

- fused: a row fits in registers (TPR threads x ITEMS vectors): one read, exact two-pass statistics,
  one write. Small rows share a warp.
- split: rows too long or too few for that (layer norm over 4M elements, batch norm over N*H*W):
  every row is cut into chunks of CH elements over many blocks, whose partial statistics (n, mean,
  M2) go to scratch; a warp per row (a block, for thousands of chunks) merges them with Chan's
  formula, then the chunks are normalised.
- column: batch norm over [N, C] (S == 1): a block reads 32*VEC adjacent channels down a slice of
  the rows (coalesced), Welford per column; then the same merge and an elementwise pass.
- eval: batch norm with the running statistics: per-channel scale from them, then elementwise.
- grouped: group norm over channels-last storage [N, spatial, C] too long for the fused shape: a
  block reads whole rows of channels down a slice of one sample's rows (a thread VEC channels of
  one group), merges its threads' statistics per group into per-(row, slice) partials for the
  split shape's merge, then an elementwise pass in storage order (STITCHCUDA_GROUP_NORM_ROWS=0:
  the split shape over runs of a group's channels, C apart).

Statistics are of x - K, K being the row's first element: the mean of a row with a huge mean and a
tiny spread then comes out rounded once (K + mean of the small differences), and the variance never
subtracts two large sums (vector-local two-pass or Welford, merged with Chan's formula). Outputs are
((x - mean) * rstd) * w + b as PyTorch computes them, never x * scale + shift, which loses the
small spread to cancellation.

Every kernel has a `NAME_host` twin that runs the same per-thread helpers (addressing, chunking,
merging, affine) serially on the CPU.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from string import Template

from stitchcuda.agents.coder import cuda_text
from stitchcuda.agents.coder.codegen import C_TYPES, ITEM_SIZE, THREADS, VECTOR_BYTES, KernelArg, c_float
from stitchcuda.agents.coder.kernels import EmitContext, Kernel, NotSupported, Operand, OutSpec
from stitchcuda.agents.graph import contiguous_strides, python_number

FUSED_ITEMS = 8  # vectors a thread holds in registers in the fused kernel
FUSED_TPR = 512  # most threads per row in the fused kernel
SPLIT_ITER = 8  # vectors per thread and chunk in the split kernels
COL_WARPS = THREADS // 32
WF_FLOATS = 4  # floats per partial statistics in scratch (norm.cuh's SC_WF_FLOATS: n, mean, m2, compensation)
FLOATS = ("float32", "float16", "bfloat16")


@dataclass
class _Norm:
    op: str
    x: Operand
    rows: int  # R: rows of statistics (layer-norm rows, (n, group) pairs, channels)
    count: int  # elements per row
    seg: int  # S: a row's elements come in runs of S contiguous ones...
    seg_stride: int  # ...SEG_STRIDE apart
    row_stride: int  # distance between the first elements of consecutive rows...
    pidx: str  # C expression of the weight/bias index of row r's element k
    run: int  # the weight index is constant over runs of RUN elements (0: it is the element's own)
    outputs: list[OutSpec | None]  # y, mean, rstd[, new running mean, new running var]
    weight: Operand | None = None
    bias: Operand | None = None
    running_mean: Operand | None = None
    running_var: Operand | None = None
    eps: float = 1e-5
    momentum: float = 0.1
    training: bool = True  # statistics of the batch; False: batch norm with the running ones
    rms: bool = False
    # ...within groups of ROW_GROUP rows, ROW_OUTER apart (0: one group): group norm over
    # channels-last storage, whose (n, group) rows start at n * spatial * C + group * C/groups.
    row_group: int = 0
    row_outer: int = 0
    update: bool = False  # write momentum-updated running statistics
    mutate: bool = False  # ...into the running buffers themselves (else into outputs 3 and 4)


# ---------------------------------------------------------------------------------------------
# Emitters: from the node's arguments to a _Norm


def _dense(op: Operand) -> bool:
    want = contiguous_strides(op.shape)
    return all(n == 1 or s == w for n, s, w in zip(op.shape, op.strides, want, strict=True))


def _operand(args: dict, key: str, numel: int | None = None) -> Operand | None:
    op = args.get(key)
    if op is None:
        return None
    if not isinstance(op, Operand):
        raise NotSupported(f"{key}={op!r} is not a tensor")
    if op.dtype not in FLOATS:
        raise NotSupported(f"{key} has dtype {op.dtype}")
    if not _dense(op):
        raise NotSupported(f"{key} is a strided view")
    if numel is not None and op.numel != numel:
        raise NotSupported(f"{key} has {op.numel} elements, expected {numel}")
    return op


def _input(ctx: EmitContext, stats_only: bool = False) -> Operand:
    """stats_only: the normalised output may be unread (a training batch norm whose statistics alone
    are read: train_bn_prologue)."""
    x = _operand(ctx.args, "input")
    if x is None:
        raise NotSupported("no input tensor")
    if x.numel == 0:
        raise NotSupported("empty input")
    out = ctx.outputs[0]
    if out is None and stats_only and x.dtype in FLOATS:
        return x
    if out is None or tuple(out.shape) != x.shape or out.dtype not in FLOATS:
        raise NotSupported("the normalised output is not used, or has another shape or dtype")
    return x


def _layer_norm(ctx: EmitContext, rms: bool = False) -> Kernel:
    x = _input(ctx)
    shape = [int(s) for s in ctx.args["normalized_shape"]]
    if not shape or tuple(shape) != x.shape[len(x.shape) - len(shape) :]:
        raise NotSupported(f"normalized_shape {shape} is not the trailing shape of {list(x.shape)}")
    count = math.prod(shape)
    eps = ctx.args.get("eps")
    if eps is None:  # _fused_rms_norm's default: the epsilon of fp32 (its math type), whatever x's dtype
        eps = 1.1920928955078125e-07
    norm = _Norm(
        op=ctx.node["op"],
        x=x,
        rows=x.numel // count,
        count=count,
        seg=count,
        seg_stride=count,
        row_stride=count,
        pidx="k",
        run=0,
        outputs=[ctx.outputs[0], None, ctx.outputs[1]] if rms else list(ctx.outputs),
        weight=_operand(ctx.args, "weight", count),
        bias=None if rms else _operand(ctx.args, "bias", count),
        eps=float(eps),
        rms=rms,
    )
    return _build(norm, ctx)


def _rms_norm(ctx: EmitContext) -> Kernel:
    return _layer_norm(ctx, rms=True)


def _group_norm(ctx: EmitContext) -> Kernel:
    x = _input(ctx)
    n, c, hw, groups = (int(ctx.args[k]) for k in ("N", "C", "HxW", "group"))
    last = bool(ctx.args.get("channels_last"))
    lead = (x.shape[0], x.shape[-1]) if last else x.shape[:2]
    if n * c * hw != x.numel or groups <= 0 or c % groups or len(x.shape) < 2 or lead != (n, c):
        raise NotSupported(f"group norm N={n} C={c} HxW={hw} group={groups} on {list(x.shape)}")
    per = c // groups
    if last and per == 1 and not grouped_rows_on():
        raise NotSupported("channels-last group norm of one channel per group (a column per row)")
    # Channels-last storage (planner.channels_last_convs): row (n, g) is hw runs of its `per`
    # adjacent channels, C apart; its weights follow the element within the run.
    norm = _Norm(
        op="native_group_norm",
        x=x,
        rows=n * groups,
        count=per * hw,
        seg=per if last else per * hw,
        seg_stride=c if last else per * hw,
        row_stride=per if last else per * hw,
        pidx=f"(r % {groups}) * {per} + k % {per}" if last else f"(r % {groups}) * {per} + k / {hw}",
        run=0 if last else hw,
        outputs=list(ctx.outputs),
        weight=_operand(ctx.args, "weight", c),
        bias=_operand(ctx.args, "bias", c),
        eps=float(ctx.args["eps"]),
        row_group=groups if last else 0,
        row_outer=hw * c if last else 0,
    )
    return _build(norm, ctx)


def _batch_norm(ctx: EmitContext) -> Kernel:
    x = _input(ctx, stats_only=True)
    op = ctx.node["op"]
    if len(x.shape) < 2:
        raise NotSupported(f"batch norm of a {len(x.shape)}-D input")
    n, c = x.shape[0], x.shape[1]
    if ctx.args.get("channels_last"):
        # Channels-last storage (planner.channels_last_convs) holds [N * spatial, C]: the column
        # shape's batch norm over rows of channels.
        c = x.shape[-1]
        n = x.numel // c
    s = x.numel // (n * c)
    training = bool(ctx.args.get("training", False))  # _no_training has no such argument
    rm = _operand(ctx.args, "running_mean", c)
    rv = _operand(ctx.args, "running_var", c)
    if (rm is None) != (rv is None):
        raise NotSupported("only one of running_mean and running_var")
    functional = op == "_native_batch_norm_legit_functional"
    if not training and rm is None:
        raise NotSupported("batch norm in eval mode without running statistics")
    if training and n * s == 1:
        raise NotSupported("training batch norm over one value per channel")
    extra = ctx.outputs[3:]
    if any(o is not None for o in extra) and not (functional and training):
        raise NotSupported(f"{op}: the updated running statistics of eval mode")
    norm = _Norm(
        op=op,
        x=x,
        rows=c,
        count=n * s,
        seg=s,
        seg_stride=c * s,
        row_stride=s,
        pidx="r",
        run=s,
        outputs=list(ctx.outputs),
        weight=_operand(ctx.args, "weight", c),
        bias=_operand(ctx.args, "bias", c),
        running_mean=rm,
        running_var=rv,
        eps=float(ctx.args["eps"]),
        momentum=float(ctx.args.get("momentum") or 0.0),
        training=training,
        update=training and rm is not None,
        mutate=training and rm is not None and not functional,
    )
    if functional and norm.update:
        # The functional form returns the new statistics instead of writing them in place.
        if all(o is None for o in extra):
            norm.update = False
        elif any(o is None for o in extra):
            raise NotSupported(f"{op}: only one of the updated running statistics is read")
    return _build(norm, ctx)


# Most elements a column of the fused shape holds in registers, a thread a column (sc_dim_norm).
COLUMN_ITEMS = 128


def _dim_norm(ctx: EmitContext) -> Kernel:
    """The planner's sc_dim_norm (agents/plan/dim_norm.py): x normalised over one dim that is not
    the last, without weights (an affine after it is the epilogue). Each column (the dim's elements
    at one place of the others, `inner` apart) is a row of statistics; neighbouring columns are
    neighbouring in memory, so the fused shape with a thread a column reads them coalesced."""
    x = _input(ctx)
    dim, eps = ctx.args.get("dim"), ctx.args.get("eps")
    if type(dim) is not int or not 0 <= dim < len(x.shape) - 1 or python_number(eps) is None:
        raise NotSupported(f"sc_dim_norm over dim {dim!r} of {list(x.shape)}")
    count, inner = x.shape[dim], math.prod(x.shape[dim + 1:])
    if count > COLUMN_ITEMS:
        raise NotSupported(f"sc_dim_norm over {count} elements: more than a thread holds ({COLUMN_ITEMS})")
    norm = _Norm(
        op="sc_dim_norm",
        x=x,
        rows=x.numel // count,
        count=count,
        seg=1,
        seg_stride=inner,
        row_stride=1,
        pidx="k",
        run=0,
        outputs=[ctx.outputs[0], None, None],
        eps=float(eps),  # type: ignore[arg-type]
        row_group=inner,
        row_outer=count * inner,
    )
    return _build(norm, ctx)


EMITTERS = {
    "sc_dim_norm": _dim_norm,
    "native_layer_norm": _layer_norm,
    "native_group_norm": _group_norm,
    "native_batch_norm": _batch_norm,
    "_native_batch_norm_legit": _batch_norm,
    "_native_batch_norm_legit_no_training": _batch_norm,
    "_native_batch_norm_legit_functional": _batch_norm,
    "_fused_rms_norm": _rms_norm,
}


# ---------------------------------------------------------------------------------------------
# C++ (cuda/norm*.cuh): the family helpers, the per-kernel description, then one of four kernel
# shapes, and the entry points; string.Templates filled per kernel by _build.

_FAMILY = cuda_text.load("norm.cuh")
_COMMON = cuda_text.load("norm_common.cuh")
_FUSED = cuda_text.load("norm_fused.cuh")
_SPLIT = cuda_text.load("norm_split.cuh")
_COLUMN = cuda_text.load("norm_column.cuh")
_EVAL = cuda_text.load("norm_eval.cuh")
_GROUPED = cuda_text.load("norm_grouped.cuh")
_LAUNCH = cuda_text.load("norm_launch.cuh")


# ---------------------------------------------------------------------------------------------
# Choosing the kernel shape and rendering it


# "0": a prologue is read element by element (VEC 1) and the split shape stores the chain first, as
# before vector loaders: for same-run comparisons on a GPU.
VEC_PROLOGUE_ENV = "STITCHCUDA_VEC_PROLOGUE"


def vec_prologues_on() -> bool:
    return os.environ.get(VEC_PROLOGUE_ENV, "1") != "0"


# "0": group norm over channels-last storage takes the split shape (runs of a group's channels, C
# apart) instead of the grouped one (whole rows of channels a warp). Only planned where
# planner._TAIL_GROUP_NORM_ENV puts group norm in a convolution's channels-last tail.
GROUPED_ENV = "STITCHCUDA_GROUP_NORM_ROWS"


def grouped_rows_on() -> bool:
    return os.environ.get(GROUPED_ENV, "1") != "0"


# "0": the statistics' merges round the running mean as before cfcfee4 (no compensation): for
# same-run comparisons of the compensation's cost on a GPU (norm.cuh, SC_WF_COMPENSATED).
COMPENSATED_ENV = "STITCHCUDA_NORM_COMPENSATED"


def _family() -> str:
    return _FAMILY if os.environ.get(COMPENSATED_ENV, "1") != "0" else "#define SC_WF_COMPENSATED 0\n" + _FAMILY


def _grouped_threads(channels: int, per: int, vec: int) -> int | None:
    """Threads across one row of `channels` in vectors of `vec` for the grouped shape: the whole row
    where it leaves at least two rows a block, else a multiple of a group's vectors (a tile of whole
    groups); None where a group alone is wider than a block."""
    cv, gv = channels // vec, per // vec
    if cv <= THREADS // 2:
        return cv
    if gv > THREADS // 2:
        return None
    return (THREADS // 2) // gv * gv


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _build(n: _Norm, ctx: EmitContext) -> Kernel:
    x = n.x
    # An epilogue: the pointwise ops after the normalised result computed as it is stored; their
    # end is written in its place (the result itself never is).
    ep = ctx.epilogue
    if ep is not None and (n.outputs[0] is None or ep.value != n.outputs[0].name):
        ep = None
    if ep is not None:
        n.outputs = [OutSpec(ep.node, tuple(ep.shape), ep.dtype), *n.outputs[1:]]
    ys = [o for o in n.outputs if o is not None]
    # No normalised result read (train_bn_prologue: a depthwise convolution normalises as it reads):
    # the statistics alone, and no normalising pass.
    has_y = n.outputs[0] is not None
    if not has_y and (not n.training or not ys):
        raise NotSupported(f"{n.op}: no result is read")
    widest = max(ITEM_SIZE[x.dtype], ITEM_SIZE[n.outputs[0].dtype if has_y else x.dtype])  # type: ignore[union-attr]
    vmax = max(1, VECTOR_BYTES // widest)
    segmented = n.seg != n.count
    numel = x.numel
    # Grids are sized to fill the target's SMs; the split never changes what a row computes.
    sms = ctx.target.sm_count

    # Which shape, and whether whole vectors stay inside a run of the layout.
    columns = n.op == "sc_dim_norm"  # a thread a row: rows one apart, each element `inner` apart
    if not n.training:
        shape = "eval"
    elif columns:
        shape = "fused"
    elif segmented and n.seg == 1:
        shape = "column"
    else:
        nvec = -(-n.count // vmax)
        tpr = min(FUSED_TPR, max(4, _pow2_at_least(-(-nvec // 4))))
        fits = nvec <= tpr * FUSED_ITEMS and (n.seg >= 32 or not segmented)
        shape = "fused" if fits and (n.rows >= 2 * sms or nvec <= 1024) else "split"
    # (One channel a group reads as a column to the test above: the grouped shape takes it.)
    if shape in ("split", "column") and n.row_group > 0 and grouped_rows_on():
        channels, per = n.seg_stride, n.seg
        v = vmax if per % vmax == 0 and channels % vmax == 0 and x.offset % vmax == 0 else 1
        if _grouped_threads(channels, per, v) is not None and _grouped_threads(channels, per, 1) is not None:
            shape, vmax = "grouped", v
    if shape == "column" and n.row_group > 0:  # (the column kernel knows nothing of row groups)
        raise NotSupported(f"{n.op}: one channel a group over channels-last storage without the grouped shape")
    if shape in ("eval", "column"):
        ok = numel % vmax == 0 and (n.seg % vmax == 0 or (n.seg == 1 and n.rows % vmax == 0))
    else:
        ok = n.count % vmax == 0 and (not segmented or n.seg % vmax == 0)
    if not ok or x.offset % vmax or columns:  # (a column's elements are `inner` apart: no vectors)
        vmax = 1
    # The split shape reads x twice over chunks of many blocks; through a prologue it did so one
    # element per thread, and on the H200 (level 2, prologues on and off in one call, 09287ef) that
    # lost to storing the chain first on 7 of the 9 split norms that took one (GroupNorm after a
    # convolution 0.81-0.95x, BatchNorm after conv + activation 0.73x): the split stores it.
    # A prologue whose loader reads vectors (codegen.Prologue.vec: the inputs read at the element
    # itself as one vector load per VEC elements) keeps the shape's VEC, and the split shape takes it
    # too: its two passes then read the chain's inputs as a pointwise kernel would, and the chain is
    # never written and read back. Unmeasured on a GPU as of 5dfc213+; STITCHCUDA_VEC_PROLOGUE=0 is
    # the behaviour before it.
    vec_pro = ctx.prologue is not None and ctx.prologue.vectorised and vec_prologues_on()
    takes_prologue = ctx.prologue is not None and ctx.prologue.node == x.name and (
        shape not in ("split", "grouped") or vec_pro)
    if takes_prologue and not vec_pro:
        # A loader computing elements one by one: with VEC consecutive elements per thread, a warp's
        # loads would be VEC apart; one element per thread keeps them adjacent (coalesced).
        vmax = 1

    subs: dict[str, str] = {"N": ctx.name, "THREADS": str(THREADS), "VMAX": str(vmax)}
    scratch: list[tuple[str, int]] = []
    if shape == "fused" and columns:
        body = Template(_FUSED).substitute(TPR=1, RB=THREADS)
        note = f"fused, a thread a column of {n.count}"
    elif shape == "fused":
        nvec = -(-n.count // vmax)
        tpr = min(FUSED_TPR, max(4, _pow2_at_least(-(-nvec // 4))))
        rb = max(1, THREADS // tpr)
        body = Template(_FUSED).substitute(TPR=tpr, RB=rb)
        note = f"fused, {tpr} threads/row"
    elif shape == "split":
        it = SPLIT_ITER
        while it > 1 and n.rows * -(-n.count // (THREADS * vmax * it)) < 8 * sms:
            it //= 2
        ch = THREADS * vmax * it  # the VEC=1 fallback walks the same chunks in more steps
        parts = -(-n.count // ch)
        body = Template(_SPLIT).substitute(CH=ch)
        scratch = [("float32", WF_FLOATS * n.rows * parts + 2 * n.rows)]
        note = f"split, {parts} chunks/row"
    elif shape == "grouped":
        # (both widths were checked when the shape was chosen; vmax may have fallen to 1 since)
        tcv, tc1 = _grouped_threads(n.seg_stride, n.seg, vmax), _grouped_threads(n.seg_stride, n.seg, 1)
        assert tcv is not None and tc1 is not None
        samples, hw = n.rows // n.row_group, n.count // n.seg
        tiles = -(-n.seg_stride // (tcv * vmax))
        # Slices of each sample's rows: enough blocks to fill the SMs, at least 4 rows a thread.
        parts = max(1, min(-(-8 * sms // (tiles * samples)), -(-hw // (4 * (THREADS // tcv)))))
        body = Template(_GROUPED).substitute(PS=parts, TCV=tcv, TC1=tc1)
        scratch = [("float32", WF_FLOATS * n.rows * parts + 2 * n.rows)]
        note = f"grouped, {parts} slices/sample"
    elif shape == "column":
        lanes = min(32, _pow2_at_least(-(-n.rows // vmax)))  # lanes a row takes (norm_column.cuh's lpr)
        tiles = -(-n.rows // (lanes * vmax))
        parts = max(1, min(-(-8 * sms // tiles), n.count // (4 * COL_WARPS * (32 // lanes))))
        rch = -(-n.count // parts)
        parts = -(-n.count // rch)
        body = Template(_COLUMN).substitute(RCH=rch)
        scratch = [("float32", WF_FLOATS * n.rows * parts + 2 * n.rows)]
        note = f"column, {parts} row slices"
    else:
        body = _EVAL
        scratch = [("float32", 2 * n.rows)]
        note = "eval"
    if numel >= 2**31 * THREADS or (shape in ("split", "grouped") and n.rows * parts >= 2**31):
        raise NotSupported(f"{n.op}: too many blocks for one launch")

    # A prologue: x's pointwise ops computed as read (rounded as storing x would round them), from
    # the prologue's own inputs, which come first among the kernel's; x itself is never stored.
    pro = ctx.prologue if takes_prologue else None
    if pro is not None and (x.offset or x.strides != tuple(contiguous_strides(x.shape))):
        pro = None
    # Pointers: inputs (x, w, b, rm, rv present), outputs (those read), scratch.
    ins: list[tuple[str, Operand]] = [("x", x)]
    ins += [(k, o) for k, o in (("w", n.weight), ("b", n.bias)) if o is not None]
    ins += [(k, o) for k, o in (("rm", n.running_mean), ("rv", n.running_var)) if o is not None]
    out_fields = ["y", "mean", "rstd", "rm_dst", "rv_dst"]
    outs = [(out_fields[i], o) for i, o in enumerate(n.outputs) if o is not None]
    if pro is not None:
        ins = ins[1:]
    first = len(pro.inputs) if pro is not None else 0  # launcher index of the first of `ins`
    n_in = first + len(ins)
    n_ep = len(ep.inputs) if ep is not None else 0  # the epilogue's inputs follow
    params = [f"const void* in{i}" for i in range(n_in + n_ep)] + [f"void* out{i}" for i in range(len(outs))]
    names = [f"in{i}" for i in range(n_in + n_ep)] + [f"out{i}" for i in range(len(outs))]
    fields = ["x", "w", "b", "rm", "rv", "y", "mean", "rstd", "rm_dst", "rv_dst"]
    type_key = dict(
        zip(fields, ["XT", "WT", "BT", "RMT", "RVT", "YT", "MT", "ST", "RMDT", "RVDT"], strict=True)
    )
    assign = []
    types = dict.fromkeys(type_key.values(), "float")
    types["XT"] = C_TYPES[x.dtype]
    if pro is not None:
        assign.append(f"  a.x = {pro.construct('ld', suffix='')};")
    for i, (field, op) in enumerate(ins, start=first):
        types[type_key[field]] = C_TYPES[op.dtype]
        assign.append(f"  a.{field} = static_cast<const {C_TYPES[op.dtype]}*>(in{i}) + {op.offset};")
    for i, (field, spec) in enumerate(outs):
        types[type_key[field]] = C_TYPES[spec.dtype]
        assign.append(f"  a.{field} = static_cast<{C_TYPES[spec.dtype]}*>(out{i});")
    if ep is not None:
        assign.append(f"  a.ep = {ep.construct('ep_t', n_in)};")
    if n.update and n.mutate:
        types["RMDT"], types["RVDT"] = types["RMT"], types["RVT"]
        assign.append("  a.rm_dst = const_cast<RMDT*>(a.rm);")
        assign.append("  a.rv_dst = const_cast<RVDT*>(a.rv);")
    if scratch:
        params.append("void* scratch0")
        names.append("scratch0")
        stat_at = scratch[0][1] - 2 * n.rows
        assign.append("  a.part = static_cast<float*>(scratch0);")
        assign.append(f"  a.stat = static_cast<float*>(scratch0) + {stat_at};")
    written = {f for f, o in outs if o is not None and math.prod(o.shape) > 0}
    for key in ("mean", "rstd"):
        if key in written and math.prod(dict(outs)[key].shape) != n.rows:
            raise NotSupported(f"{n.op}: result {key} has shape {list(dict(outs)[key].shape)}")

    def flag(b: bool) -> str:
        return "true" if b else "false"

    subs |= types
    subs |= {
        "R": str(n.rows),
        "COUNT": str(n.count),
        "S": str(n.seg),
        "SEG_STRIDE": str(n.seg_stride),
        "ROW_STRIDE": str(n.row_stride),
        "ROW_GROUP": str(n.row_group),
        "ROW_OUTER": str(n.row_outer),
        "RUN": str(n.run),
        "NUMEL": str(numel),
        "SEGMENTED": flag(segmented),
        "RMS": flag(n.rms),
        "HAS_W": flag(n.weight is not None),
        "HAS_B": flag(n.bias is not None),
        "HAS_Y": flag(has_y),
        "HAS_MEAN": flag(n.training and "mean" in written),
        "HAS_RSTD": flag(n.training and "rstd" in written),
        "UPDATE": flag(n.update),
        "COUNTF": c_float(n.count),
        "COUNT_M1F": c_float(max(n.count - 1, 1)),
        "EPS": c_float(n.eps),
        "MOMENTUM": c_float(n.momentum),
        "PIDX": n.pidx,
        "XV": "float" if pro is not None else types["XT"],
        "XS": "ld" if pro is not None else "const XT*",
        "LOADER": pro.loader("ld") if pro is not None else "",
        "EPILOGUE": ep.functor("ep_t") if ep is not None else "",
        "EPT": "ep_t" if ep is not None else "sc_no_epilogue",
        "PARAMS": ", ".join(params),
        "NAMES": ", ".join(names),
        "ASSIGN": "\n".join(assign),
    }
    source = "\n".join(
        [_family(), Template(_COMMON).substitute(subs), body, Template(_LAUNCH).substitute(subs)]
    )
    mutates = [o.name for o in (n.running_mean, n.running_var) if n.mutate and n.update and o is not None]
    if ctx.args.get("channels_last"):
        note += ", channels-last"
    if not has_y:
        note += ", statistics only"
    if pro is not None:
        note += f", prologue {' -> '.join(pro.ops) or 'copy'} (not stored)"
    if ep is not None:
        note += f", epilogue {' -> '.join(ep.ops) or 'copy'}"
    return Kernel(
        name=ctx.name,
        inputs=[*(pro.inputs if pro is not None else []), *(KernelArg(o.name, o.dtype) for _, o in ins),
                *(ep.inputs if ep is not None else [])],
        outputs=[KernelArg(o.name, o.dtype) for o in ys],
        source=source,
        ops=[f"{n.op} {n.rows}x{n.count} ({note})"],
        host=True,
        scratch=scratch,
        mutates=mutates,
    )
