"""Convolutions (aten.convolution) through cuDNN (the legacy API, and graph-API engines where they
are faster): 1-D, 2-D and 3-D, strided, padded, dilated, grouped and transposed.

cuDNN's descriptors take int32 dims and strides, so what a kernel hands cuDNN is fixed here, in
Python (`conv_params`): 1-D convolutions become 2-D ones with a unit height, and a batch whose
tensors pass 2^31 elements is run in chunks of samples, as PyTorch splits it. A transposed
convolution is cuDNN's backward-data pass of the forward convolution that maps the op's output back
to its input, with the same weight, padding, stride, dilation and groups.

The generated launcher keeps its descriptors and algorithm in static state, set up on the first call
(shapes are compile-time constants): the algorithm is benchmarked once with cudnnFind*Ex on the
caller's buffers, and the fastest one whose workspace fits in half the free memory is kept; then
the engines cuDNN's graph API ranks first (the ones PyTorch's own convolutions run) are timed
against it the same way, and one is kept only where it is faster. The
workspace is one buffer shared by the library's conv kernels. Bias is added after the convolution by
a small broadcast kernel, in fp32 and rounded once to the storage type, as PyTorch adds it to
cuDNN's result. Math: fp32 with CUDNN_DEFAULT_MATH (TF32 allowed, PyTorch's default for
convolutions), fp16/bf16 with tensor cores and fp32 compute.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from stitchcuda.agents.coder import cuda_text, emit_igemm
from stitchcuda.agents.coder.codegen import ITEM_SIZE, THREADS, Epilogue, KernelArg, Prologue
from stitchcuda.agents.coder.kernels import (
    PRECISE_SPLIT,
    EmitContext,
    Kernel,
    NotSupported,
    Operand,
    launchers,
)

INT_MAX = 2**31 - 1
# cuDNN's data type per storage dtype; the convolution itself always computes in fp32.
DATA_TYPES = {"float32": "CUDNN_DATA_FLOAT", "float16": "CUDNN_DATA_HALF", "bfloat16": "CUDNN_DATA_BFLOAT16"}


@dataclass(frozen=True)
class ConvParams:
    """What the kernel tells cuDNN. Dims are NC + spatial, 1-D lifted to 2-D with a unit height;
    `x` is the op's input and `y` its output (for a transposed conv, cuDNN's dy and dx)."""

    transposed: bool
    groups: int
    x: tuple[int, ...]
    w: tuple[int, ...]
    y: tuple[int, ...]
    pad: tuple[int, ...]
    stride: tuple[int, ...]
    dilation: tuple[int, ...]
    lifted: bool  # a 1-D conv given a unit height

    @property
    def out_shape(self) -> tuple[int, ...]:
        """The op's output shape, as PyTorch reports it."""
        return (*self.y[:2], *self.y[3:]) if self.lifted else self.y


def conv_switches() -> dict[str, str]:
    """conv.cuh's A/B and logging switches as C++ constants, from the environment variables of the
    same names now, as the coder writes the file: the module a user keeps runs the plans it was
    verified with, not whatever its own environment says (conv.cuh once read them at run time)."""
    env = os.environ

    def char(name: str) -> str:
        first = env.get(name, "")[:1]
        return f"'{first}'" if first in ("0", "1") else "'\\0'"

    legacy = env.get("STITCHCUDA_CUDNN_LEGACY", "")
    return {
        "CUDNN_LEGACY": "true" if legacy and not legacy.startswith("0") else "false",
        "CONV_LOG": "true" if "STITCHCUDA_CONV_LOG" in env else "false",
        "COPY_VEC": "false" if env.get("STITCHCUDA_CONV_COPY_VEC", "").startswith("0") else "true",
        # Off until timed on a GPU (written 2026-12-05 without one): weights' 3x3 to 7x7 windows.
        "COPY_SHORT": "true" if env.get("STITCHCUDA_CONV_COPY_SHORT", "").startswith("1") else "false",
        "NHWC": char("STITCHCUDA_CONV_NHWC"),
        "IGEMM": char("STITCHCUDA_CONV_IGEMM"),
        "FUSE": "false" if env.get("STITCHCUDA_CONV_FUSE", "").startswith("0") else "true",
    }

def forward_dims(
    x: Sequence[int], w: Sequence[int], pad: Sequence[int], stride: Sequence[int], dilation: Sequence[int]
) -> list[int]:
    """Spatial output dims of a forward convolution (cudnnGetConvolutionNdForwardOutputDim's rule)."""
    return [
        (i + 2 * p - d * (k - 1) - 1) // s + 1
        for i, k, p, s, d in zip(x[2:], w[2:], pad, stride, dilation, strict=True)
    ]


def _spatial(name: str, value: Any, n: int) -> tuple[int, ...]:
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list | tuple) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise NotSupported(f"convolution: {name}={value!r} is not a list of ints")
    if len(value) == 1:
        value = list(value) * n
    if len(value) != n:
        raise NotSupported(f"convolution: {name}={value!r} does not have {n} entries")
    return tuple(value)


def conv_params(
    input_shape: Sequence[int],
    weight_shape: Sequence[int],
    stride: Any,
    padding: Any,
    dilation: Any,
    transposed: bool,
    output_padding: Any,
    groups: int,
) -> ConvParams:
    """cuDNN's view of aten.convolution(input, weight, ...), or NotSupported for what it cannot take."""
    rank = len(input_shape)
    if rank not in (3, 4, 5) or len(weight_shape) != rank:
        raise NotSupported(
            f"convolution: input rank {rank}, weight rank {len(weight_shape)} (need 3-5, equal)"
        )
    n = rank - 2
    pad, strides, dil = (
        _spatial("padding", padding, n),
        _spatial("stride", stride, n),
        _spatial("dilation", dilation, n),
    )
    out_pad = _spatial("output_padding", output_padding, n)
    if any(p < 0 for p in pad) or any(s < 1 for s in strides) or any(d < 1 for d in dil):
        raise NotSupported(f"convolution: padding {pad}, stride {strides}, dilation {dil}")
    if not isinstance(groups, int) or groups < 1:
        raise NotSupported(f"convolution: groups={groups!r}")
    if any(v <= 0 for v in (*input_shape, *weight_shape)):
        raise NotSupported("convolution: empty input or weight")
    batch, channels = input_shape[:2]
    if transposed:
        # Weight is [C_in, C_out / groups, k...]; cuDNN's backward-data computes exactly this
        # (the forward conv of the output would need output_padding < stride to give the input back).
        if any(op < 0 or op >= s for op, s in zip(out_pad, strides, strict=True)):
            raise NotSupported(f"convolution: output_padding {out_pad} must be below stride {strides}")
        if weight_shape[0] != channels or channels % groups:
            raise NotSupported(
                f"convolution: transposed weight {list(weight_shape)} for {channels} channels, groups {groups}"
            )
        out_channels = weight_shape[1] * groups
        spatial = [
            (i - 1) * s - 2 * p + d * (k - 1) + op + 1
            for i, k, p, s, d, op in zip(
                input_shape[2:], weight_shape[2:], pad, strides, dil, out_pad, strict=True
            )
        ]
    else:
        if weight_shape[1] * groups != channels or weight_shape[0] % groups:
            raise NotSupported(
                f"convolution: weight {list(weight_shape)} for {channels} channels, groups {groups}"
            )
        out_channels = weight_shape[0]
        spatial = forward_dims(input_shape, weight_shape, pad, strides, dil)
    if any(v < 1 for v in spatial):
        raise NotSupported(f"convolution: output spatial size {spatial} is empty")
    x, w, y = tuple(input_shape), tuple(weight_shape), (batch, out_channels, *spatial)
    lifted = n == 1
    if lifted:

        def lift(shape: Sequence[int]) -> tuple[int, ...]:
            return (*shape[:2], 1, *shape[2:])

        x, w, y = lift(x), lift(w), lift(y)
        pad, strides, dil = (0, *pad), (1, *strides), (1, *dil)
    return ConvParams(transposed, groups, x, w, y, pad, strides, dil, lifted)


def _numel(shape: Sequence[int]) -> int:
    total = 1
    for v in shape:
        total *= v
    return total


def channels_last_shape(shape: Sequence[int]) -> tuple[int, ...]:
    """N, C, spatial... stored as N, spatial..., C."""
    return (shape[0], *shape[2:], shape[1])


def nchw_shape(stored: Sequence[int]) -> tuple[int, ...]:
    """The N, C, spatial... shape of what is stored channels-last as N, spatial..., C."""
    return (stored[0], stored[-1], *stored[1:-1])


def batch_chunk(p: ConvParams) -> int:
    """Samples per cuDNN call: every tensor of one call must stay within int32 element counts."""
    per_sample = max(_numel(p.x[1:]), _numel(p.y[1:]))
    if per_sample > INT_MAX or _numel(p.w) > INT_MAX:
        raise NotSupported("convolution: one sample or the weight has more than 2^31 elements")
    return min(p.x[0], INT_MAX // per_sample)


def _ints(values: Sequence[int], size: int) -> str:
    return "{" + ", ".join(str(v) for v in (*values, *[0] * (size - len(values)))) + "}"


def _operand(value: Any, what: str) -> Operand:
    if not isinstance(value, Operand):
        raise NotSupported(f"convolution: {what} is not a tensor")
    if not value.contiguous:
        raise NotSupported(f"convolution: {what} {value.name} is not contiguous (strides {value.strides})")
    if value.dtype not in DATA_TYPES:
        raise NotSupported(f"convolution: {what} dtype {value.dtype}")
    return value


def emit_convolution(ctx: EmitContext) -> Kernel:
    a = ctx.args
    x, w = _operand(a.get("input"), "input"), _operand(a.get("weight"), "weight")
    b = None if a.get("bias") is None else _operand(a["bias"], "bias")
    out = ctx.outputs[0]
    if out is None:
        raise NotSupported("convolution: the result is never read")
    dtypes = {x.dtype, w.dtype, out.dtype} | ({b.dtype} if b else set())
    if len(dtypes) != 1:
        raise NotSupported(f"convolution: mixed dtypes {sorted(dtypes)}")
    # input_channels_last (planner.channels_last_convs): the input is an earlier convolution's
    # channels-last tail, stored N, spatial..., C; cuDNN's NHWC plan reads it without a copy.
    x_nhwc = bool(a.get("input_channels_last"))
    p = conv_params(
        nchw_shape(x.shape) if x_nhwc else x.shape,
        w.shape,
        a.get("stride"),
        a.get("padding"),
        a.get("dilation"),
        bool(a.get("transposed")),
        a.get("output_padding", [0]),
        a.get("groups", 1),
    )
    # channels_last (planner.channels_last_convs): the result is stored N, spatial..., C for the
    # pointwise work after it, and its node has that shape.
    nhwc = bool(a.get("channels_last"))
    want = channels_last_shape(p.out_shape) if nhwc else p.out_shape
    if want != tuple(out.shape):
        raise NotSupported(f"convolution: output {list(out.shape)}, expected {list(want)}")
    if b is not None and b.shape != (p.y[1],):
        raise NotSupported(f"convolution: bias {list(b.shape)} for {p.y[1]} channels")
    if nhwc and x_nhwc and depthwise_nhwc(p, out.dtype) and _fp32_epilogue(ctx, out):
        return _depthwise_nhwc(ctx, p, x, w, b, out)
    # A depthwise convolution runs our direct kernel in cuDNN's place, or with
    # STITCHCUDA_CONV_DEPTHWISE=contend as its first-call contender (fp32, no bias, no epilogue).
    dw = not nhwc and not x_nhwc and depthwise_direct(p, out.dtype)
    dw_contends = (dw and os.environ.get(DEPTHWISE_ENV) == "contend" and b is None and out.dtype == "float32"
                   and ctx.epilogue is None)
    if dw and (not dw_contends or _dw_prologue(ctx, x) is not None):
        return _depthwise(ctx, p, x, w, b, out)
    direct = os.environ.get(DIRECT_ENV, "contend")
    direct_geom = dense_direct(p, out.dtype) if not nhwc and not x_nhwc and ctx.precise >= PRECISE_SPLIT else None
    if direct == "1" and direct_geom is not None:
        return _direct_dense(ctx, p, x, w, b, out, direct_geom)
    if not nhwc and not x_nhwc and ctx.epilogue is None and pointwise_gemm(p):
        return _as_gemm(ctx, p, x, w, b, out)
    chunk = batch_chunk(p)
    if nhwc and (b is not None or chunk < p.x[0] or p.lifted):
        raise NotSupported("convolution: a channels-last result takes no bias, one chunk, 2-D or 3-D")
    if x_nhwc and (chunk < p.x[0] or p.lifted or len(x.shape) not in (4, 5)):
        raise NotSupported("convolution: a channels-last input takes a 2-D or 3-D convolution in one chunk")
    spatial = _numel(p.y[2:])
    vec = 16 // ITEM_SIZE[out.dtype]
    spec = ", ".join(
        [
            f'"{ctx.name}"',
            str(len(p.x)),
            str(int(p.transposed)),
            DATA_TYPES[out.dtype],
            str(p.groups),
            f"{p.x[0]}ll",
            f"{chunk}ll",
            _ints((1, *p.x[1:]), 5),
            _ints(p.w, 5),
            _ints((1, *p.y[1:]), 5),
            _ints(p.pad, 3),
            _ints(p.stride, 3),
            _ints(p.dilation, 3),
            f"{p.y[1]}ll",
            f"{spatial}ll",
            str(vec if spatial % vec == 0 else 1),
            str(int(ctx.precise >= PRECISE_SPLIT)),
            str(int(nhwc)),
            # x_nhwc: written only where set (sc_conv_spec's initialiser leaves it 0 otherwise).
            *(["1"] if x_nhwc else []),
        ]
    )
    # Shared by every conv kernel of a .cu: the process-wide handle, descriptor setup, the one-time
    # algorithm search, the run (chunked over the batch) and the bias kernel.
    family = cuda_text.load("layout_short.cuh") + cuda_text.fill("conv.cuh", THREADS=THREADS, **conv_switches())
    if ctx.epilogue is not None and ctx.epilogue.value == out.name:
        return _with_epilogue(ctx, p, x, w, out, spec, family)
    bias_param = "const void* in2, " if b else ""
    # A result with no bias, channels-last or NCHW: the implicit-GEMM kernel is cuDNN's contender
    # (STITCHCUDA_CONV_IGEMM_NCHW=0 leaves NCHW results to cuDNN alone). On the exact rungs, whose
    # plan keeps results NCHW, cuDNN's side is its FMA convolution and the kernel splits its operands.
    nchw_ig = not nhwc and os.environ.get(emit_igemm.NCHW_ENV) != "0"
    # STITCHCUDA_CONV_DIRECT=contend: on the exact rungs the direct kernel, not the 3xTF32 implicit GEMM,
    # is the contender of a convolution it takes (the two lost to cuDNN's FMA kernels where the direct
    # one won: level 2's 48, 2.05 and 1.16 against 1.66 ms).
    contender = ("depthwise" if dw_contends else
                 "direct" if direct == "contend" and direct_geom is not None and not b else "igemm")
    if contender == "depthwise":
        igemm, ig_fn = _depthwise_contender(ctx, p), f"{ctx.name}_dw"
    elif contender == "direct":
        assert direct_geom is not None
        igemm, ig_fn = _direct_contender(ctx, p, direct_geom), f"{ctx.name}_dc"
    elif b is None:
        igemm, ig_fn = (_implicit_gemm(ctx, p, "sc_ig_identity", "sc_ig_identity{}", [], y_nchw=not nhwc)
                        if nhwc or nchw_ig else ("", "nullptr"))
    else:
        # With a bias (NCHW results only: a channels-last one takes its bias in an epilogue), the
        # implicit GEMM adds it as it stores, where cuDNN's path adds it in a pass of its own after the
        # convolution (NAFNet's 1x1 convolution before its depthwise one: a 68.8 us bias pass, H200).
        igemm, ig_fn = _implicit_gemm(ctx, p, f"{ctx.name}_bias", f"{ctx.name}_bias{{static_cast<const float*>(in2)}}",
                                      ["in2"], y_nchw=True) if nchw_ig else ("", "nullptr")
        if igemm:
            igemm = _bias_functor(f"{ctx.name}_bias", p.y[1], spatial) + igemm
    bias_arg = "in2" if b else "nullptr"
    run = (f"  static sc_conv_ig_state ig_state;\n  return sc_conv_run_ig(spec, state, ig_state, in0, in1, {bias_arg}, out0, {ig_fn}, stream);\n"
           if igemm else f"  return sc_conv_run(spec, state, in0, in1, {bias_arg}, out0, stream);\n")
    launcher = (
        igemm
        + f'extern "C" int {ctx.name}(const void* in0, const void* in1, {bias_param}void* out0, cudaStream_t stream) {{\n'
        f"  static const sc_conv_spec spec = {{{spec}}};\n"
        "  static sc_conv_state state;\n"
        + run
        + "}\n"
    )
    if igemm and contender == "igemm":
        family += "\n" + emit_igemm.family()
    note = _describe_read(p, x, w, nhwc, x_nhwc)
    rival = ("a direct depthwise kernel" if contender == "depthwise" else
             "a direct fp32 kernel" if contender == "direct" else
             f"a{' 3xTF32' if ctx.precise >= PRECISE_SPLIT else 'n'} implicit GEMM")
    inputs = [KernelArg(x.name, x.dtype), KernelArg(w.name, w.dtype)] + (
        [KernelArg(b.name, b.dtype)] if b else []
    )
    return Kernel(
        name=ctx.name,
        inputs=inputs,
        outputs=[KernelArg(out.name, out.dtype)],
        source=family + "\n" + launcher,
        ops=[note + (" +bias" if b else "") + (f" (or {rival} where it wins)" if igemm else "") + (" (fp32, no TF32)" if ctx.precise >= PRECISE_SPLIT and out.dtype == "float32" else "")],
        libraries=["cudnn"],
    )


# "1": a 1x1 convolution kept NCHW runs as one cuBLAS batched GEMM, y[n] = W x[n] ([Cout, Cin] times
# [Cin, spatial], W shared by every sample: emit_gemm's plan reads both in place). Why: cuDNN's NCHW
# fp32 kernels for these are FMA ones (level 3's SqueezeNet: sm80 ffma nchwkcrs, 2.26 ms, where
# torch.compile's channels-last TF32 one took 1.28), and a channels-last plan pays a copy of the input
# (DenseNet121TransitionLayer: 0.59 ms before its 1x1 convolution). A GEMM reads NCHW as it is, on
# TF32 tensor cores. Off: measured on the H200 (ca1767a) it gained nothing on level 3's networks and
# lost on level 1's 87 (4.28 against 3.61 ms; bench/results/2026-11-28-h200x2-level2-igemm-a1acd41.md).
CONV_GEMM_ENV = "STITCHCUDA_CONV_1X1_GEMM"


def _bias_functor(name: str, channels: int, spatial: int) -> str:
    """The implicit GEMM's epilogue for an NCHW result with a bias: element e's channel is
    (e / spatial) % channels; the add is the bias kernel's (sc_conv_bias_kernel), so the two agree."""
    return f"""struct {name} {{
  const float* b;
  SC_INLINE float operator()(int64_t e, float v) const {{ return v + b[(e / {spatial}LL) % {channels}LL]; }}
}};
"""


def pointwise_gemm(p: ConvParams) -> bool:
    """Whether `p` is a convolution the GEMM path takes: forward, one group, 1x1 taps, unit strides,
    no padding (dilation is then moot), with the flag on."""
    return (os.environ.get(CONV_GEMM_ENV) == "1" and not p.transposed and p.groups == 1
            and all(k == 1 for k in p.w[2:]) and all(s == 1 for s in p.stride) and not any(p.pad))


def _as_gemm(ctx: EmitContext, p: ConvParams, x: Operand, w: Operand, b: Operand | None, out: Any) -> Kernel:
    """y [N, Cout, S] = W [Cout, Cin] @ x [N, Cin, S], W broadcast over the batch, bias added as
    emit_gemm adds an addmm's (broadcast into y, then the GEMM with beta 1). Precision as the
    convolution's: TF32 first, then (ctx.precise >= PRECISE_SPLIT) full fp32, as cuDNN without TF32."""
    from stitchcuda.agents.coder import emit_gemm

    mat1, mat2, bias, full = gemm_operands(p, x, w, b)
    n, cout, spatial = full
    precision = "fp32" if ctx.precise >= PRECISE_SPLIT and out.dtype == "float32" else "tf32"
    return emit_gemm.render_gemm(
        ctx.name, f"convolution 1x1 as GEMM {cout}x{mat1.shape[2]} by {n}x{mat2.shape[1]}x{spatial}",
        emit_gemm.plan_gemm(mat1, mat2), mat1, mat2, bias, full, 1.0, 1.0 if bias is not None else 0.0, out,
        precision)


def gemm_operands(p: ConvParams, x: Operand, w: Operand, b: Operand | None
                  ) -> tuple[Operand, Operand, Operand | None, tuple[int, int, int]]:
    """(W as [N, Cout, Cin] with batch stride 0, x as [N, Cin, S], the bias as [Cout, 1], the result's
    [N, Cout, S]): the batched product a 1x1 convolution is, over the operands' own storage."""
    n, cin, cout, spatial = p.x[0], p.x[1], p.y[1], _numel(p.y[2:])
    mat1 = Operand(w.name, (n, cout, cin), (0, cin, 1), w.offset, w.dtype)
    mat2 = Operand(x.name, (n, cin, spatial), (cin * spatial, spatial, 1), x.offset, x.dtype)
    bias = Operand(b.name, (cout, 1), (1, 0), b.offset, b.dtype) if b is not None else None
    return mat1, mat2, bias, (n, cout, spatial)


# The depthwise kernel's geometry (depthwise.cuh's sc_dw_geom): a 32 x 8 block, each thread R rows
# of Q columns, so an output tile of 8R x 32Q; its input tile, two of them (the next plane's staged
# while this one's outputs are computed), in static shared memory.
DW_ROWS = (8, 7, 6, 5, 4, 3, 2, 1)
DW_COLUMNS = (2, 1)
DW_SMEM_BYTES = 48 * 1024
# Taps beyond this stay with cuDNN: the kernel unrolls its taps and loads the weights per plane.
DW_MAX_TAPS = 81
DW_DTYPES = {"float32": "float", "float16": "__half", "bfloat16": "__nv_bfloat16"}


@dataclass(frozen=True)
class DwGeom:
    rows: int  # R: output rows per thread
    columns: int  # Q: output columns per thread, 32 apart
    tile: tuple[int, int]  # the input tile a block stages (rows, columns)
    fill: float  # the share of the tiles over an output plane that lies inside it

    @property
    def out_tile(self) -> tuple[int, int]:
        return 8 * self.rows, 32 * self.columns


def dw_tile_bytes(tile: tuple[int, int], stride_w: int) -> int:
    """Shared memory of depthwise.cuh's two staged tiles (sc_dw_geom::TILE floats each: rows whose
    columns are kept by phase, padded to a whole number of phases)."""
    return 2 * 4 * tile[0] * -(-tile[1] // stride_w) * stride_w


def dw_geom(p: ConvParams) -> DwGeom | None:
    """The depthwise kernel's tile for this convolution: among the tiles whose input fits one block's
    shared memory, those within 5 points of the best fill of the output plane, the largest (more
    outputs per staged halo, more rows per thread sharing each input row); None if none fits."""
    (kh, kw), (sh, sw), (dh, dw) = p.w[2:4], p.stride[:2], p.dilation[:2]
    oh, ow = p.y[2], p.y[3]
    fits = []
    for r in DW_ROWS:
        for q in DW_COLUMNS:
            th, tw = 8 * r, 32 * q
            tile = ((th - 1) * sh + (kh - 1) * dh + 1, (tw - 1) * sw + (kw - 1) * dw + 1)
            if dw_tile_bytes(tile, sw) > DW_SMEM_BYTES:
                continue
            fill = oh * ow / (-(-oh // th) * th * -(-ow // tw) * tw)
            fits.append(DwGeom(r, q, tile, fill))
    if not fits:
        return None
    best = max(g.fill for g in fits)
    # (Not below half where the best reaches it: depthwise_direct's rule reads the chosen tile's fill.)
    near = [g for g in fits if g.fill >= best - 0.05 and (g.fill >= 0.5 or g.fill == best)]
    return max(near, key=lambda g: (g.rows * g.columns, g.rows))


# "0" turns the direct depthwise kernel off (cuDNN's grouped convolution then, for A/B timing). On by
# default since 2026-11-27: on the H200, level 1's depthwise problems 82-86 went from 0.83-0.87x
# eager (cuDNN) to 0.83-1.36x with the first, runtime-geometry version of the kernel and 1.16-3.02x
# with this one (bench/results/2026-11-27-h200x4-level1-level3-depthwise-9da6cdf.md).
# "0": cuDNN for every depthwise convolution; "contend": our direct kernel as cuDNN's first-call
# contender (fp32 without bias or epilogue; CPU-tested, not yet run on a GPU); else (the default) the
# direct kernel in cuDNN's place wherever depthwise_direct takes the convolution.
DEPTHWISE_ENV = "STITCHCUDA_CONV_DEPTHWISE"


def depthwise_direct(p: ConvParams, dtype: str) -> bool:
    """Whether depthwise.cuh's direct kernel takes this convolution: 2-D, not transposed, groups equal
    to the input channels (a channel multiplier allowed), at most DW_MAX_TAPS taps, planes and a
    plane's elements below 2^31 (the kernel's plane index and offsets are 32-bit), an input tile
    within one block's shared memory, and output planes filling at least half of the tiles that
    cover them: a plane much smaller or narrower than a tile (MobileNet's 14 x 14 layers, a 512 x 2
    strip) leaves most of a block's threads idle, and stays with cuDNN. The planner leaves such a
    convolution NCHW (planner.channels_last_convs)."""
    if os.environ.get(DEPTHWISE_ENV) == "0":
        return False
    if p.transposed or p.lifted or len(p.x) != 4 or not 1 < p.groups == p.x[1] or dtype not in DW_DTYPES:
        return False
    if p.w[2] * p.w[3] > DW_MAX_TAPS:
        return False
    # Planes and offsets within a plane (halo rows included) are 32-bit in the kernel.
    if p.x[0] * p.y[1] > INT_MAX or (p.x[2] + 2 * p.pad[0] + p.w[2] * p.dilation[0]) * p.x[3] > INT_MAX // 2:
        return False
    g = dw_geom(p)
    if g is None or 2 * g.fill < 1:
        return False
    th, tw = g.out_tile
    return -(-p.y[2] // th) * -(-p.y[3] // tw) <= INT_MAX


def _dw_spec(p: ConvParams) -> tuple[str, str, tuple[int, int]]:
    """depthwise.cuh's sc_dw_spec initialiser, sc_dw_geom's arguments and the output tile."""
    g = dw_geom(p)
    assert g is not None  # depthwise_direct said so
    n, c, h, wd = p.x
    spec = ", ".join(f"{v}ll" for v in (n, c, h, wd, p.y[1], p.y[2], p.y[3])) + f", {p.pad[0]}, {p.pad[1]}, {p.y[1] // c}"
    geom = ", ".join(map(str, (*p.w[2:4], *p.stride[:2], *p.dilation[:2], g.rows, g.columns)))
    return spec, geom, g.out_tile


# "0": depthwise.cuh's blocks stage one plane each by loads and stores (no cp.async pipeline over
# planes): for same-run comparisons.
DW_PIPELINE_ENV = "STITCHCUDA_DW_PIPELINE"


def _dw_header() -> str:
    off = "#ifndef SC_DW_PIPELINE\n#define SC_DW_PIPELINE 0\n#endif\n" if os.environ.get(DW_PIPELINE_ENV) == "0" else ""
    return off + cuda_text.load("depthwise.cuh")


# "0": a depthwise prologue is computed as each element is loaded (no cp.async), as before
# 2026-11-29; else, where the chain reads one fp32 tensor at the element (Prologue.staged), that tensor
# is staged by cp.async and the chain computed over the tile in shared memory: on the H200 the
# as-loaded form's kernel took 159.2 us on an eval-mode MobileNetV2 block, the staged one 95.4
# (planner.CONV_PROLOGUES_ENV).
DW_STAGED_ENV = "STITCHCUDA_DW_STAGED"


def _dw_prologue(ctx: EmitContext, x: Operand) -> Prologue | None:
    """The pointwise chain the depthwise kernel computes as it stages its input (planner's
    _take_prologues), where the input is that chain's result, stored row-major (the loader's index is
    the input's own element index)."""
    pro = ctx.prologue
    if pro is None or pro.node != x.name or tuple(pro.shape) != tuple(x.shape) or not x.contiguous or x.offset:
        return None
    return pro


def _dw_epilogue(ctx: EmitContext, out: Any) -> Epilogue | None:
    """The pointwise chain after the depthwise convolution that its kernel computes as it stores
    (planner's _take_epilogues): the chain's end, of the result's shape and dtype, stored in its place."""
    ep = ctx.epilogue
    # (The kernel calls it a plane at a time: depthwise.cuh's sc_dw_as_is.)
    if ep is None or ep.value != out.name or tuple(ep.shape) != tuple(out.shape) or len(ep.inputs) > 16 \
            or not ep.plane_lines:
        return None
    return ep if ep.dtype == out.dtype and ep.value_dtype == out.dtype else None


def _depthwise(ctx: EmitContext, p: ConvParams, x: Operand, w: Operand, b: Operand | None, out: Any) -> Kernel:
    spec, geom, (th, tw) = _dw_spec(p)
    note = _describe(p, x, w, False) + f" depthwise, direct ({th}x{tw} tiles)" + (" +bias" if b else "")
    pro, ep = _dw_prologue(ctx, x), _dw_epilogue(ctx, out)
    if pro is None and ep is None:
        return _direct_kernel(ctx, _dw_header(), "sc_dw", spec, f"{DW_DTYPES[out.dtype]}, ", geom, x, w, b, out, note)
    # The input computed as staged: the chain's inputs come first among the kernel's, the input itself
    # is never stored (the loader is passed by value, as a cat's sources are). The chain after it
    # computed as stored: its end is the kernel's output, the convolution's result never stored.
    name, ctype = ctx.name, DW_DTYPES[out.dtype]
    staged = pro.staged if pro is not None and ctype == "float" and os.environ.get(DW_STAGED_ENV) != "0" else None
    if staged is not None:
        # The chain's one tensor read at the element (copied by cp.async), then its other inputs.
        ins = [KernelArg(staged.value, staged.value_dtype), *staged.inputs]
        raw = ["const void* in0_", *(f"const void* in{k}" for k in range(1, len(ins)))]
        casts = [f"  const auto rd = sc_dw_staged<{name}_st>{{static_cast<const float*>(in0_), "
                 f"{staged.construct(f'{name}_st', 1)}, {staged.plane}ll}};"]
    else:
        ins = [KernelArg(x.name, x.dtype)] if pro is None else list(pro.inputs)
        raw = [f"const void* in{k}_" for k in range(len(ins))]
        casts = [f"  const auto rd = sc_dw_ptr<{ctype}>{{static_cast<const {ctype}*>(in0_)}};" if pro is None
                 else f"  const auto rd = {pro.construct(f'{name}_ld')};"]
    wi = len(ins)
    ins += [KernelArg(w.name, w.dtype), *([KernelArg(b.name, b.dtype)] if b else [])]
    raw += [f"const void* in{k}_" for k in range(wi, len(ins))]
    bias = f"in{wi + 1}_" if b else "nullptr"
    ep_arg = ""
    if ep is not None:
        first = len(ins)
        ins += ep.inputs
        raw += [f"const void* in{k}" for k in range(first, len(ins))]
        casts.append(f"  const auto ep = {ep.construct(f'{name}_ep', first)};")
        ep_arg = ", ep"
        note += f", epilogue {' -> '.join(ep.ops)} (the result not stored)"
    raw.append("void* out0")
    types = f"{ctype}, {name}_geom"
    device = f"  if (int rc = sc_dw_conv_launch<{types}>({name}_spec, rd, in{wi}_, {bias}, out0, stream{ep_arg})) return rc;"
    host = f"  sc_dw_conv_host_rd<{types}>({name}_spec, rd, in{wi}_, {bias}, out0{ep_arg});"
    source = (_dw_header() + f"\nstatic const sc_dw_spec {name}_spec = {{{spec}}};\n"
              + f"using {name}_geom = sc_dw_geom<{geom}>;\n"
              + (staged.functor(f"{name}_st", planes=True) if staged is not None
                 else pro.loader(f"{name}_ld") if pro is not None else "")
              + (ep.functor(f"{name}_ep", planes=True) if ep is not None else "")
              + launchers(name, raw, casts, device, host))
    if pro is not None:
        how = "staged by cp.async, computed in shared memory" if staged is not None else "computed as loaded"
        note += f", prologue {' -> '.join(pro.ops) or 'copy'} ({how}; not stored)"
    stored = KernelArg(ep.node, ep.dtype) if ep is not None else KernelArg(out.name, out.dtype)
    return Kernel(name=name, inputs=ins, outputs=[stored], source=source, ops=[note], host=True)


# "0" leaves a depthwise convolution on channels-last storage (in and out) to cuDNN's NHWC plan.
DEPTHWISE_NHWC_ENV = "STITCHCUDA_CONV_DEPTHWISE_NHWC"
# A block's channels' filters in shared memory, [taps][128] floats: 7x7 (ConvNeXt's) is 25 KB.
DWN_MAX_TAPS = 49


def depthwise_nhwc(p: ConvParams, dtype: str) -> bool:
    """Whether depthwise_nhwc.cuh's kernel takes this convolution, read and written channels-last:
    2-D, forward, fp32, one filter a channel (no multiplier), at most DWN_MAX_TAPS taps."""
    return (os.environ.get(DEPTHWISE_NHWC_ENV) != "0" and dtype == "float32" and not p.transposed and not p.lifted
            and len(p.x) == 4 and 1 < p.groups == p.x[1] == p.y[1] and tuple(p.w[:2]) == (p.y[1], 1)
            and p.w[2] * p.w[3] <= DWN_MAX_TAPS)


def _fp32_epilogue(ctx: EmitContext, out: Any) -> bool:
    """No epilogue, or an fp32 chain over the result's own elements (codegen.epilogue: read element
    for element, both row-major; its call at a storage element). Its shape may be another view of
    them: the tokens [N, H*W, C] a Mix-FFN's GELU reads of the [N, H, W, C] result."""
    ep = ctx.epilogue
    return ep is None or (ep.dtype == ep.value_dtype == "float32" and _numel(ep.shape) == _numel(out.shape))


def _depthwise_nhwc(ctx: EmitContext, p: ConvParams, x: Operand, w: Operand, b: Operand | None, out: Any) -> Kernel:
    """depthwise_nhwc.cuh's kernel, with the planner's epilogue (ctx.epilogue) applied as it stores:
    the convolution's own result then never stored."""
    n, c, h, wd = p.x
    name, ep = ctx.name, ctx.epilogue
    spec = ", ".join(f"{v}ll" for v in (n, h, wd, c, p.y[2], p.y[3])) + ", " + ", ".join(
        str(v) for v in (*p.w[2:4], *p.stride[:2], *p.pad[:2], *p.dilation[:2]))
    inputs = [KernelArg(x.name, x.dtype), KernelArg(w.name, w.dtype)] + ([KernelArg(b.name, b.dtype)] if b else [])
    raw = [f"const void* in{k}" for k in range(len(inputs))]
    casts, functor, ep_arg = [], "", "sc_dwn_id{}"
    if ep is not None:
        first = len(inputs)
        inputs += ep.inputs
        raw += [f"const void* in{k}" for k in range(first, len(inputs))]
        casts.append(f"  const auto ep = {ep.construct(f'{name}_ep', first)};")
        functor, ep_arg = ep.functor(f"{name}_ep"), "ep"
    raw.append("void* out0")
    args = f"{name}_spec, in0, in1, {'in2' if b else 'nullptr'}, out0"
    # The kernel's register window where the row's stride and dilation are 1; int offsets where the
    # largest (either tensor's element count) fits.
    unit = "true" if p.stride[1] == 1 and p.dilation[1] == 1 else "false"
    index = "int" if max(_numel(p.x), _numel(p.y)) < 2**31 else "long long"
    source = (cuda_text.load("depthwise_nhwc.cuh") + f"\nstatic const sc_dwn_spec {name}_spec = {{{spec}}};\n" + functor
              + launchers(name, raw, casts, f"  if (int rc = sc_dwn_run<{p.w[2]}, {p.w[3]}, {unit}, {index}>({args}, stream, {ep_arg})) "
                                            "return rc;",
                          f"  sc_dwn_host({args}, {ep_arg});"))
    note = (_describe(p, x, w, True, nchw_shape(x.shape)) + " depthwise, direct over channels-last storage"
            + (" +bias" if b else "") + " (channels-last input)"
            + (f", epilogue {' -> '.join(ep.ops)} (the result not stored)" if ep is not None else ""))
    stored = KernelArg(ep.node, ep.dtype) if ep is not None else KernelArg(out.name, out.dtype)
    return Kernel(name=name, inputs=inputs, outputs=[stored], source=source, ops=[note], host=True)


def _depthwise_contender(ctx: EmitContext, p: ConvParams) -> str:
    """The depthwise kernel as the convolution launcher's contender (fp32): NAME_dw, of
    sc_conv_ig_launch's form. Why: it replaced cuDNN on level 1's depthwise problems (3.04 -> 1.32 ms on
    the H200) but ran slower on level 3's EfficientNetMBConv (5x5, stride 2: 1.18 against cuDNN's
    0.76 ms); on the first call the faster of the two stays."""
    spec, geom, _ = _dw_spec(p)
    return (_dw_header() + f"\nstatic const sc_dw_spec {ctx.name}_dw_spec = {{{spec}}};\n"
            f"using {ctx.name}_dw_geom = sc_dw_geom<{geom}>;\n"
            f"static int {ctx.name}_dw(const void* x, const void* w, const void* const*, void* out, cudaStream_t stream) {{\n"
            f"  return sc_dw_conv_run<float, {ctx.name}_dw_geom>({ctx.name}_dw_spec, x, w, nullptr, out, stream);\n}}\n")


def _direct_kernel(ctx: EmitContext, header: str, prefix: str, spec: str, types: str, geom: str, x: Operand,
                   w: Operand, b: Operand | None, out: Any, note: str) -> Kernel:
    """A kernel of one of our direct convolution headers (`header`: its text; PREFIX_spec, PREFIX_geom<...>, run and host
    entries PREFIX_conv_run / PREFIX_conv_host<types geom>), its launchers reading x, w[, b]."""
    raw = ["const void* in0", "const void* in1", *(["const void* in2"] if b else []), "void* out0"]
    args = f"{ctx.name}_spec, in0, in1, {'in2' if b else 'nullptr'}, out0"
    device = f"  if (int rc = {prefix}_conv_run<{types}{ctx.name}_geom>({args}, stream)) return rc;"
    host = f"  {prefix}_conv_host<{types}{ctx.name}_geom>({args});"
    source = (header + f"\nstatic const {prefix}_spec {ctx.name}_spec = {{{spec}}};\n"
              + f"using {ctx.name}_geom = {prefix}_geom<{geom}>;\n" + launchers(ctx.name, raw, [], device, host))
    inputs = [KernelArg(x.name, x.dtype), KernelArg(w.name, w.dtype)] + ([KernelArg(b.name, b.dtype)] if b else [])
    return Kernel(name=ctx.name, inputs=inputs, outputs=[KernelArg(out.name, out.dtype)], source=source, ops=[note],
                  host=True)


# The direct dense kernel (direct_conv.cuh) for few input channels, on the exact rungs only (it is
# fp32 FMA: at TF32 cuDNN's tensor cores are the faster path). By default ("contend") it is cuDNN's
# first-call contender, kept only where it agrees with cuDNN's result and is faster: on the H200
# (bench/results/2026-11-29-h200-level2-contend-acb9843.md) it was kept on level 2's 6 and 48 (0.57 ->
# 0.44 ms, 1.98 -> 1.48 ms: 3 input channels, 16 output ones) and cuDNN stayed on 21, 24, 82 and 90,
# where, run in cuDNN's place, it had been 1.2-1.9x slower. "1" runs it in place of cuDNN (what the
# CPU tests run, through its host entry); "0" leaves cuDNN alone.
DIRECT_ENV = "STITCHCUDA_CONV_DIRECT"
DC_MAX_CHANNELS = 8  # input channels (per sample): beyond, a GEMM's reuse pays and cuDNN stays
DC_MAX_TAPS = 125
DC_ROWS = (4, 2, 1)
DC_CHANNEL_CHUNKS = (16, 12, 8, 4)


@dataclass(frozen=True)
class DcGeom:
    rows: int  # R: output rows per thread (a 32 x 8 block's tile is 8R x 32)
    chunk: int  # M: output channels a block computes
    slabs: int  # (input channel, depth tap) slabs staged at once
    tile: tuple[int, int]  # the input tile per slab


def dense_direct(p: ConvParams, dtype: str) -> DcGeom | None:
    """direct_conv.cuh's geometry for this convolution, where it takes it: fp32, forward, one group,
    2-D or 3-D, at most DC_MAX_CHANNELS input channels and DC_MAX_TAPS taps, an output plane at least
    16 wide (a tile is 32 columns), the weights of a channel chunk and one input slab within 48 KB of
    shared memory; else None. Whether it runs is STITCHCUDA_CONV_DIRECT's (emit_convolution)."""
    if dtype != "float32" or p.transposed or p.lifted or p.groups != 1:
        return None
    if len(p.x) not in (4, 5) or p.x[1] > DC_MAX_CHANNELS or _numel(p.w[2:]) > DC_MAX_TAPS or p.y[-1] < 16:
        return None
    ci, co, taps = p.x[1], p.w[0], _numel(p.w[2:])
    chunk = min(DC_CHANNEL_CHUNKS, key=lambda m: (-(-co // m) * m - co, -m)) if co > 4 else co
    (kh, kw), (sh, sw), (dh, dw) = p.w[-2:], p.stride[-2:], p.dilation[-2:]
    slabs_all = ci * (p.w[2] if len(p.x) == 5 else 1)
    for r in DC_ROWS:
        tile = ((8 * r - 1) * sh + (kh - 1) * dh + 1, 31 * sw + (kw - 1) * dw + 1)
        room = DW_SMEM_BYTES - 4 * chunk * ci * taps
        slabs = min(slabs_all, room // (4 * tile[0] * tile[1])) if room > 0 else 0
        if slabs >= 1 and -(-p.y[-2] // (8 * r)) * -(-p.y[-1] // 32) <= INT_MAX:
            return DcGeom(r, chunk, slabs, tile)
    return None


def _direct_dense(ctx: EmitContext, p: ConvParams, x: Operand, w: Operand, b: Operand | None, out: Any,
                  g: DcGeom) -> Kernel:
    spec, geom = _direct_spec(p, g)
    # "(fp32, no TF32)": builtin.build_candidate reads it to label the candidate's precision (at
    # 7d4508e, without it, the bench called these exact-rung candidates tf32).
    return _direct_kernel(ctx, cuda_text.load("direct_conv.cuh"), "sc_dc", spec, "", geom, x, w, b, out,
                          _describe(p, x, w, False) + f" direct, fp32 FMA ({8 * g.rows}x32 tiles, {g.chunk} channels "
                          f"a block)" + (" +bias" if b else "") + " (fp32, no TF32)")


def _direct_contender(ctx: EmitContext, p: ConvParams, g: DcGeom) -> str:
    """The direct kernel as the convolution launcher's contender: NAME_dc, of sc_conv_ig_launch's form."""
    spec, geom = _direct_spec(p, g)
    return (cuda_text.load("direct_conv.cuh") + f"\nstatic const sc_dc_spec {ctx.name}_dc_spec = {{{spec}}};\n"
            f"using {ctx.name}_dc_geom = sc_dc_geom<{geom}>;\n"
            f"static int {ctx.name}_dc(const void* x, const void* w, const void* const*, void* out, cudaStream_t stream) {{\n"
            f"  return sc_dc_conv_run<{ctx.name}_dc_geom>({ctx.name}_dc_spec, x, w, nullptr, out, stream);\n}}\n")


def _direct_spec(p: ConvParams, g: DcGeom) -> tuple[str, str]:
    """sc_dc_spec's initialiser and sc_dc_geom's arguments (a 2-D convolution as a 3-D one of depth 1)."""
    three = len(p.x) == 5
    n, c = p.x[:2]
    d, h, wd = (p.x[2:] if three else (1, *p.x[2:]))
    od, oh, ow = (p.y[2:] if three else (1, *p.y[2:]))
    k = p.w[2:] if three else (1, *p.w[2:])
    pad, stride, dil = ((tuple(v) if three else (fill, *v)) for v, fill in ((p.pad, 0), (p.stride, 1), (p.dilation, 1)))
    spec = ", ".join(f"{v}ll" for v in (n, c, d, h, wd, p.y[1], od, oh, ow)) + ", " + ", ".join(map(str, pad))
    geom = ", ".join(map(str, (c, *k, *stride, *dil, g.rows, g.chunk, g.slabs)))
    return spec, geom


def _describe_read(p: ConvParams, x: Operand, w: Operand, nhwc: bool, x_nhwc: bool) -> str:
    """_describe, with the NCHW shape of an input stored channels-last (x_nhwc), which it says."""
    if not x_nhwc:
        return _describe(p, x, w, nhwc)
    return _describe(p, x, w, nhwc, nchw_shape(x.shape)) + " (channels-last input)"


def _describe(p: ConvParams, x: Operand, w: Operand, nhwc: bool, x_shape: Sequence[int] | None = None) -> str:
    """The kernel's note: "conv2d 128x64x128x128 w128x64x3x3 g2 (channels-last result)"; the input's
    N, C, spatial... shape (`x_shape`, where it is stored otherwise)."""
    shape = x.shape if x_shape is None else x_shape
    note = f"conv{'_transpose' if p.transposed else ''}{len(shape) - 2}d {'x'.join(map(str, shape))} "
    note += f"w{'x'.join(map(str, w.shape))}" + (f" g{p.groups}" if p.groups > 1 else "")
    return note + (" (channels-last result)" if nhwc else "")


def _with_epilogue(ctx: EmitContext, p: ConvParams, x: Operand, w: Operand, out: Any, spec: str, family: str) -> Kernel:
    """The convolution and the pointwise chain after it (the planner's epilogue, `ctx.epilogue`) in
    one launcher: cuDNN's fused graph where its runtime fusion builds a plan that agrees with the
    unfused pair and beats it, else the convolution into a scratch buffer and the chain's own kernel
    after it (conv.cuh `sc_conv_fused_run`). Channels-last fp32 results of 2-D and 3-D convolutions,
    forward or transposed (cuDNN's backward-data)."""
    from stitchcuda.agents.coder.cudnn_epilogue import Program, translate

    ep = ctx.epilogue
    assert ep is not None
    if not ctx.args.get("channels_last") or p.lifted or out.dtype != "float32" \
            or ep.dtype != "float32" or ep.value_dtype != "float32" or tuple(ep.shape) != tuple(out.shape):
        raise NotSupported("convolution epilogue: a channels-last fp32 result of a 2-D or 3-D convolution only")
    if len(ep.inputs) > 16:
        raise NotSupported("convolution epilogue: more than 16 inputs")
    try:
        program = translate(ctx.nodes, ep.members, ep.node, ep.value, ep.inputs, p.y[1])
    except NotSupported:
        # No cuDNN form of the chain (eval batch norm's per-channel rsqrt(var + eps), a step cuDNN's
        # pointwise ops lack): no fused cuDNN graph, but the launcher still runs the chain apart after
        # cuDNN's convolution or, where it wins, in the implicit GEMM's epilogue. Before, such a chain
        # was a pointwise pass of its own after the convolution: conv -> eval BatchNorm -> ReLU, the
        # commonest inference block, never fused.
        program = Program((), len(ep.inputs), tuple(ep.ops))
    n_in = len(ep.inputs)
    numel = _numel(p.y)
    name = ctx.name
    ins = [f"const void* in{2 + k}" for k in range(n_in)]
    igemm, ig_fn = _implicit_gemm(ctx, p, f"{name}_ep", ep.construct(f"{name}_ep", 2), [f"in{2 + k}" for k in range(n_in)])
    launcher = f"""{ep.functor(f"{name}_ep")}
__global__ void __launch_bounds__({THREADS}) {name}_epi_kernel(const float* __restrict__ raw, {name}_ep ep,
                                                               float* __restrict__ out, int64_t n, bool vec) {{
  // Four elements a thread with float4 loads and stores where both buffers are 16-byte aligned; the
  // rest (all of it where they are not) one at a time.
  const int64_t step = (int64_t)gridDim.x * blockDim.x, t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  const int64_t quads = vec ? n / 4 : 0;
  for (int64_t c = t; c < quads; c += step) {{
    const float4 r = reinterpret_cast<const float4*>(raw)[c];
    const int64_t e = 4 * c;
    reinterpret_cast<float4*>(out)[c] = make_float4(ep(e, r.x), ep(e + 1, r.y), ep(e + 2, r.z), ep(e + 3, r.w));
  }}
  for (int64_t e = quads * 4 + t; e < n; e += step) out[e] = ep(e, raw[e]);
}}

// The epilogue apart: raw (the convolution's channels-last result) -> out, reading the chain's inputs.
static void {name}_epi(const void* raw, const void* const* ins, void* out, cudaStream_t stream) {{
{chr(10).join(f"  const void* in{2 + k} = ins[{k}];" for k in range(n_in))}
  {name}_epi_kernel<<<sc_grid(({numel}LL + 3) / 4), {THREADS}, 0, stream>>>(static_cast<const float*>(raw), {ep.construct(f"{name}_ep", 2)},
      static_cast<float*>(out), {numel}LL, ((reinterpret_cast<uintptr_t>(raw) | reinterpret_cast<uintptr_t>(out)) & 15) == 0);
}}

{igemm}{program.c_table(f"{name}_steps")}
extern "C" int {name}(const void* in0, const void* in1, {"".join(i + ", " for i in ins)}void* out0, void* scratch0, cudaStream_t stream) {{
  static const sc_conv_spec spec = {{{spec}}};
  static sc_conv_state state;
  static sc_conv_fused fused;
  const void* ins[{max(1, n_in)}] = {{{", ".join(f"in{2 + k}" for k in range(n_in)) or "nullptr"}}};
  return sc_conv_fused_run(spec, state, fused, {name}_steps, {len(program.steps)}, in0, in1, ins, out0, scratch0,
                           {name}_epi, {ig_fn}, stream);
}}
"""
    how = ("cuDNN runtime fusion or an implicit GEMM where it wins" if program.steps else
           "apart after cuDNN's convolution, or in an implicit GEMM's epilogue where it wins")
    note = _describe_read(p, x, w, True, bool(ctx.args.get("input_channels_last"))) + (
        f", epilogue {' -> '.join(program.ops)} ({how})")
    if igemm:
        family += "\n" + emit_igemm.family()
    return Kernel(
        name=name,
        inputs=[KernelArg(x.name, x.dtype), KernelArg(w.name, w.dtype), *ep.inputs],
        outputs=[KernelArg(ep.node, ep.dtype)],
        source=family + "\n" + launcher,
        ops=[note],
        libraries=["cudnn"],
        scratch=[("float32", numel)],
    )


def _implicit_gemm(ctx: EmitContext, p: ConvParams, functor: str, construct: str, inputs: list[str],
                   y_nchw: bool = False) -> tuple[str, str]:
    """The implicit-GEMM contender's tables and launcher for this convolution (emit_igemm), and the
    name the launcher passes for it; ("", "nullptr") where the kernel does not take the convolution
    (grouped, fp16/bf16, the full-fp32 rung, more than 2^31 outputs per grid) or
    STITCHCUDA_CONV_IGEMM=0 left it out. On the 3xTF32 rung (PRECISE_SPLIT) it splits its operands,
    which on tensor cores keeps fp32's accuracy: the contender to cuDNN's fp32 (FMA) convolution."""
    if os.environ.get("STITCHCUDA_CONV_IGEMM") == "0" or ctx.precise > PRECISE_SPLIT or p.lifted \
            or any(o is not None and o.dtype != "float32" for o in (ctx.args.get("input"), ctx.args.get("weight"), ctx.outputs[0])):
        return "", "nullptr"
    try:
        g = emit_igemm.geometry(p.transposed, p.groups, p.x, p.w, p.y, p.pad, p.stride, p.dilation,
                                bool(ctx.args.get("input_channels_last")),
                                wide=os.environ.get(emit_igemm.WIDE_ENV) == "1", y_nchw=y_nchw,
                                split=ctx.precise >= PRECISE_SPLIT)
    except NotSupported:
        return "", "nullptr"
    return emit_igemm.render(g, ctx.name, functor, construct, inputs), f"{ctx.name}_ig"


EMITTERS = {"convolution": emit_convolution}
