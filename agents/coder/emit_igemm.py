"""The implicit-GEMM convolution's geometry and launcher (cuda/igemm_conv.cuh): which input position
each output pixel reads through each tap, split into stride-phases, rendered as compile-time tables.

A forward convolution reads input position o * stride - pad + r * dilation for output position o and
tap r: one phase, the input step the stride. A transposed convolution writes output position
i * stride - pad + r * dilation from input position i; read backwards, output o takes tap r only
where o + pad - r * dilation is a multiple of the stride. Output positions with the same remainder
modulo the stride (a phase) take the same taps, from input position j + (phase + pad - r * dilation)
/ stride for the phase's j-th output: per phase, a forward convolution with unit input step. The
phases of a 2-D or 3-D convolution are the products of each dim's.

`geometry` is plain data, so the tables are tested against PyTorch's convolutions on the CPU
(tests/test_igemm_conv.py gathers through them); `render` turns it into the generated source.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from stitchcuda.agents.coder import cuda_text
from stitchcuda.agents.coder.codegen import THREADS
from stitchcuda.agents.coder.kernels import NotSupported

BK = 16  # the kernel's k-tile (SC_IG_BK)
# Each block's shape by the output channels, the first row that holds them (None: any count):
# (BM, BN) output pixels and channels a block computes, (WM, WN) a warp's, and the k-tiles in flight.
# The channel tile covers the output channels where it can, so each gathered input tile is read once.
TILES = ((32, (128, 32, 32, 32, 3)), (64, (128, 64, 32, 32, 3)), (None, (64, 128, 32, 32, 3)))
# The wide tiles (STITCHCUDA_CONV_IGEMM_WIDE=1, off): 64 x 32 warps over
# 256 x 64 or 128 x 128 blocks in two stages, for more than 32 output channels. With 32 x 32 warps over
# 64-128 x 64-128 blocks, every block reads the whole packed weight for at most 128 pixels; at 64
# input channels and 3x3 taps that is 295 KB of L2 traffic per 8k outputs, which bounds level 2's
# 1 at about 80 TFLOP/s (measured: 300 GFLOP in 3.6 ms). H200, 36ecafc, first-call times on 17 of
# level 2's convolutions (bench/results/2026-11-28-h200x2-igemm-variants-36ecafc.md): 64 input channels
# 15-20% faster (4: 9.3 -> 7.8 ms, 10: 7.7 -> 6.6 ms) yet still 2x cuDNN's path; where the kernel
# already wins, 0-2%. Not worth a second contender's first-call time: it stays off.
WIDE_TILES = ((32, TILES[0][1]), (64, (256, 64, 64, 32, 2)), (None, (128, 128, 64, 32, 2)))
WIDE_ENV = "STITCHCUDA_CONV_IGEMM_WIDE"
# An NCHW result (a convolution the planner leaves NCHW, no bias) written by the kernel directly, a
# contender to cuDNN's NCHW path; STITCHCUDA_CONV_IGEMM_NCHW=0 leaves it out. On the H200 (36ecafc,
# same file) it was kept on 13 (5.62 -> 4.85 ms), 15 (0.28 -> 0.17 ms) and 21, and cuDNN on 3, 17, 20.
NCHW_ENV = "STITCHCUDA_CONV_IGEMM_NCHW"
INT_MAX = 2**31 - 1


@dataclass(frozen=True)
class Phase:
    origin: tuple[int, int, int]  # the phase's first output position (d, h, w)
    count: tuple[int, int, int]  # its outputs per dim
    taps: tuple[tuple[int, int, int, int], ...]  # (input offset d, h, w; the weight's tap index)


@dataclass(frozen=True)
class Geometry:
    transposed: bool
    batch: int
    channels: int  # C, the op's input channels
    out_channels: int  # K
    in_dims: tuple[int, int, int]  # input spatial dims (D = 1 for 2-D)
    out_dims: tuple[int, int, int]
    in_step: tuple[int, int, int]  # input positions per phase-local output index
    out_step: tuple[int, int, int]  # output positions per phase-local output index
    x_strides: tuple[int, int, int, int, int]  # elements per n, c, d, h, w of the input as stored
    taps_total: int  # the weight's taps (kd x kh x kw)
    phases: tuple[Phase, ...]
    wide: bool = False  # the wide tiles where the output channels take them
    y_nchw: bool = False  # the result stored NCHW rather than channels-last
    split: bool = False  # 3xTF32: each operand a TF32 head and tail, three products (fp32's accuracy)

    @property
    def _config(self) -> tuple[int, int, int, int, int]:
        for most, config in WIDE_TILES if self.wide else TILES:
            if most is None or self.out_channels <= most:
                return config
        raise AssertionError("the tile tables end with a row for any channel count")

    @property
    def tile(self) -> tuple[int, int]:
        """(BM, BN): output pixels and output channels a block computes."""
        return self._config[:2]

    @property
    def warp(self) -> tuple[int, int, int]:
        """(WM, WN, stages): a warp's outputs and the k-tiles in flight."""
        return self._config[2:]

    @property
    def threads(self) -> int:
        bm, bn, wm, wn, _ = self._config
        return (bm // wm) * (bn // wn) * 32

    @property
    def uniform(self) -> bool:
        """Whether every phase has the same output counts (the kernel then splits indices by constants)."""
        return len({ph.count for ph in self.phases}) == 1

    @property
    def cp(self) -> int:
        """Channels per tap in the reduction: C, or below the k-tile the power of two above it (the
        padding channels read as zeros), so that a k-tile holds whole taps."""
        if self.channels >= BK:
            return self.channels
        return 1 << (self.channels - 1).bit_length()

    def kpad(self, phase: Phase) -> int:
        return -(-len(phase.taps) * self.cp // BK) * BK

    @property
    def kpad_max(self) -> int:
        return max([BK, *(self.kpad(ph) for ph in self.phases)])

    @property
    def npad(self) -> int:
        bn = self.tile[1]
        return -(-self.out_channels // bn) * bn

    def outputs(self, phase: Phase) -> int:
        d, h, w = phase.count
        return self.batch * d * h * w


def _dims3(values: Sequence[int], fill: int) -> tuple[int, int, int]:
    values = tuple(values)
    return (fill,) * (3 - len(values)) + values  # type: ignore[return-value]


def _dim_phases(transposed: bool, size_out: int, k: int, pad: int, stride: int, dil: int) -> list[tuple[int, int, list[tuple[int, int]]]]:
    """One dim's phases: (first output position, outputs, [(input offset, tap)])."""
    if not transposed:
        return [(0, size_out, [(r * dil - pad, r) for r in range(k)])]
    phases = []
    for phi in range(stride):
        count = max(0, -(-(size_out - phi) // stride))
        if count == 0:
            continue
        taps = [((phi + pad - r * dil) // stride, r) for r in range(k) if (phi + pad - r * dil) % stride == 0]
        phases.append((phi, count, taps))
    return phases


def geometry(transposed: bool, groups: int, x: Sequence[int], w: Sequence[int], y: Sequence[int],
             pad: Sequence[int], stride: Sequence[int], dilation: Sequence[int], x_nhwc: bool,
             wide: bool = False, y_nchw: bool = False, split: bool = False) -> Geometry:
    """The kernel's view of a convolution: x, w, y as ConvParams gives them (N, C, spatial...; the
    weight in PyTorch's layout), or NotSupported."""
    rank = len(x)
    if rank not in (4, 5) or len(w) != rank or len(y) != rank:
        raise NotSupported("implicit GEMM: 2-D or 3-D convolutions only")
    if groups != 1:
        raise NotSupported("implicit GEMM: grouped convolution")
    batch, c = x[0], x[1]
    k = w[1] if transposed else w[0]
    if (w[0] if transposed else w[1]) != c or y[1] != k:
        raise NotSupported("implicit GEMM: channel counts do not match the weight")
    ind, outd, ks = _dims3(x[2:], 1), _dims3(y[2:], 1), _dims3(w[2:], 1)
    pads, strides, dils = _dims3(pad, 0), _dims3(stride, 1), _dims3(dilation, 1)
    per = [_dim_phases(transposed, outd[i], ks[i], pads[i], strides[i], dils[i]) for i in range(3)]
    phases = []
    for (od0, pd, td), (oh0, ph, th), (ow0, pw, tw) in itertools.product(*per):
        taps = tuple((dd, dh, dw, (rd * ks[1] + rh) * ks[2] + rw) for (dd, rd), (dh, rh), (dw, rw) in itertools.product(td, th, tw))
        phases.append(Phase((od0, oh0, ow0), (pd, ph, pw), taps))
    if not phases or len(phases) > 64:
        raise NotSupported(f"implicit GEMM: {len(phases)} stride-phases")
    spatial_in = ind[0] * ind[1] * ind[2]
    if x_nhwc:
        xs = (spatial_in * c, 1, ind[1] * ind[2] * c, ind[2] * c, c)
    else:
        xs = (c * spatial_in, spatial_in, ind[1] * ind[2], ind[2], 1)
    g = Geometry(
        transposed=transposed, batch=batch, channels=c, out_channels=k, in_dims=ind, out_dims=outd,
        in_step=(1, 1, 1) if transposed else strides, out_step=strides if transposed else (1, 1, 1),
        x_strides=xs, taps_total=ks[0] * ks[1] * ks[2], phases=tuple(phases), wide=wide,
        y_nchw=y_nchw, split=split,
    )
    if max(g.outputs(ph) for ph in phases) + g.tile[0] > INT_MAX or g.npad * g.kpad_max * len(phases) > INT_MAX:
        raise NotSupported("implicit GEMM: 2^31 output pixels or more in a phase")
    if sum(len(ph.taps) for ph in phases) > 2048:
        raise NotSupported("implicit GEMM: more than 2048 taps")
    return g


def render(g: Geometry, name: str, epilogue: str, construct: str, inputs: Sequence[str]) -> str:
    """The tables and `extern`-less launcher `{name}_ig`: the weight packed, then the kernel with
    the epilogue functor `epilogue` made by `construct` (from `const void* in2...` set from ins)."""
    bm, bn = g.tile
    taps = [t for ph in g.phases for t in ph.taps]
    phase_rows, first = [], 0
    for ph in g.phases:
        phase_rows.append(f"{{{ph.origin[0]}, {ph.origin[1]}, {ph.origin[2]}, {ph.count[0]}, {ph.count[1]}, "
                          f"{ph.count[2]}, {len(ph.taps)}, {first}, {g.kpad(ph)}}}")
        first += len(ph.taps)
    tap_rows = [f"{{{d}, {h}, {w}, {t}}}" for d, h, w, t in taps] or ["{0, 0, 0, 0}"]
    m_tiles = max(-(-g.outputs(ph) // bm) for ph in g.phases)
    geo = f"{name}_ig_geo"
    pack = len(g.phases) * g.kpad_max * g.npad
    return f"""__constant__ sc_ig_phase {name}_ig_phases[{len(g.phases)}] = {{{", ".join(phase_rows)}}};
// (Global memory, not __constant__: a module's constant bank holds 64 KB, which the tap tables of a
// network's large 3-D kernels could pass; a tap is read once a k-tile, the same by a whole warp.)
__device__ const int4 {name}_ig_taps[{len(tap_rows)}] = {{{", ".join(tap_rows)}}};
struct {geo} {{
  static constexpr bool TRANSPOSED = {str(g.transposed).lower()}, Y_NCHW = {str(g.y_nchw).lower()}, SPLIT3 = {str(g.split).lower()};
  static constexpr int64_t BATCH = {g.batch};
  static constexpr int C = {g.channels}, CP = {g.cp}, K = {g.out_channels}, TAPS = {g.taps_total}, PHASES = {len(g.phases)};
  static constexpr int KPAD = {g.kpad_max}, NPAD = {g.npad};
  static constexpr bool UNIFORM = {str(g.uniform).lower()};
  static constexpr int PD = {g.phases[0].count[0]}, PH = {g.phases[0].count[1]}, PW = {g.phases[0].count[2]};  // (where UNIFORM)
  static constexpr int ID = {g.in_dims[0]}, IH = {g.in_dims[1]}, IW = {g.in_dims[2]};
  static constexpr int OD = {g.out_dims[0]}, OH = {g.out_dims[1]}, OW = {g.out_dims[2]};
  static constexpr int IS_D = {g.in_step[0]}, IS_H = {g.in_step[1]}, IS_W = {g.in_step[2]};
  static constexpr int OS_D = {g.out_step[0]}, OS_H = {g.out_step[1]}, OS_W = {g.out_step[2]};
  static constexpr int64_t XS_N = {g.x_strides[0]}, XS_C = {g.x_strides[1]}, XS_D = {g.x_strides[2]}, XS_H = {g.x_strides[3]}, XS_W = {g.x_strides[4]};
  static __device__ __forceinline__ sc_ig_phase phase(int p) {{ return {name}_ig_phases[p]; }}
  static __device__ __forceinline__ int4 tap(int i) {{ return __ldg(&{name}_ig_taps[i]); }}
}};

// The whole convolution and its epilogue by the implicit-GEMM kernel (the conv launcher's contender).
static int {name}_ig(const void* x, const void* w, const void* const* ins, void* out, cudaStream_t stream) {{
  static float* wp = nullptr;  // the packed weight, {pack} floats, repacked every call (the weight may change)
  if (!wp && cudaMalloc(&wp, {pack} * sizeof(float)) != cudaSuccess) return (int)cudaGetLastError();
{"".join(f"  const void* {i} = ins[{k}];{chr(10)}" for k, i in enumerate(inputs))}  (void)ins;
  sc_ig_pack<{geo}><<<sc_grid({pack}LL), {THREADS}, 0, stream>>>(static_cast<const float*>(w), wp);
  sc_igemm_conv<{geo}, {bm}, {bn}, {epilogue}, {g.warp[0]}, {g.warp[1]}, {g.warp[2]}><<<dim3({m_tiles}, {g.npad // bn}, {len(g.phases)}), {g.threads}, 0, stream>>>(
      static_cast<const float*>(x), wp, static_cast<float*>(out), {construct});
  return (int)cudaGetLastError();
}}
"""


def family() -> str:
    """The kernel templates, inlined once per .cu (include-guarded), after the tensor-core primitives
    they share with the attention kernel."""
    return cuda_text.load("tensor_core.cuh") + cuda_text.load("igemm_conv.cuh")
