"""Fused attention: the `sc_attention` node the Planner makes of a q·kᵀ → (scale, masks) → softmax
→ ·v chain (agents/plan/planner.py, fuse_attention), as one flash-style kernel (cuda/attention.cuh).

The node's arguments (all from the graph; nothing is assumed of a problem's name or shape):

    query   [*B, Sq, D]   read in place through its strides (a transposed head view needs no copy)
    key     [*B, Sk, D]   where the first product read a transpose of it (as attention is written)
    key_t   [*B, D, Sk]   otherwise: kᵀ as the first product read it
    value   [*B, Sk, Dv]
    masks   tensors the steps read, each broadcast to the scores' shape at its step: [*B, Sq, Sk],
            or any view of the same elements in row-major order (a step over the scores viewed
            as [B·H, q_h, q_w, k_h, k_w], as SAM's decomposed relative positions are added)
    steps   what happens to a score s between the two products, in order:
              ["scale", c]                       s *= c
              ["fill", m, value, shape]          s = value where masks[m] is true (masked_fill)
              ["add", m, shape]                  s += masks[m] (an additive mask)
              ["causal", diagonal]               s = -inf where key j > query i + diagonal
    out_scale  the second product's alpha (a scaling of v folded into it)
    safe    _safe_softmax (a row with every score -inf gives zeros) rather than _softmax (NaN)

The result is [prod(B), Sq, Dv] contiguous, as the second bmm wrote it. On sm_80 and newer the
kernel runs on tensor cores through mma.sync with S, P and O in registers (cuda/attention.cuh's
tc_kernel): fp16 and bf16 with fp32 accumulation; fp32 as TF32 at EmitContext.precise ==
PRECISE_TF32, and with the scores' product as 3xTF32 on the rungs after it (the mixed and 3xTF32
rungs: an error in a score is a factor in its weight, precision_mix.py); att·v stays TF32 there, as
the emulation in precision_mix found enough. At PRECISE_FP32 (no TF32 anywhere) it runs on the FMA
units (fma_kernel). Tiles are sized for the target's shared memory per block; a head dim whose tiles
do not fit, or a GPU before sm_80, is NotSupported, and the Planner then leaves the chain as it was
(`refusal`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from stitchcuda.agents.coder import cuda_text
from stitchcuda.agents.coder.codegen import C_TYPES, ITEM_SIZE, KernelArg, c_float
from stitchcuda.agents.coder.kernels import (
    PRECISE_FP32,
    PRECISE_TF32,
    EmitContext,
    Kernel,
    NotSupported,
    Operand,
    launchers,
)
from stitchcuda.target import Target

OP = "sc_attention"
DTYPES = ("float32", "float16", "bfloat16")
# Past this the tensor-core path's output accumulators (DV / 2 registers a lane) spill.
MAX_HEAD_DIM = 128
MIN_CAPABILITY = (8, 0)  # mma.sync for TF32 and bf16, cp.async
# (query rows, keys) per tile. Tensor cores: `tile` picks among them by the warps each keeps resident;
# the FMA path takes the first that fits (its softmax takes keys 32 at a time, a lane each).
TC_TILES = ((128, 64), (64, 64), (32, 64), (16, 64), (64, 32), (32, 32), (16, 32))
FMA_TILES = ((64, 64), (64, 32), (32, 32), (16, 32))
# Resident warps an SM past which a taller tile (fewer reads of K and V) wins over more warps.
RESIDENT_WARPS = 16

_HEADER = cuda_text.load("tensor_core.cuh") + cuda_text.load("attention.cuh")


def _round_up(x: int, m: int) -> int:
    return (x + m - 1) // m * m


def smem_bytes(dtype: str, br: int, bc: int, d: int, dv: int, tc: bool, split_qk: bool = False,
               split_pv: bool = False) -> int:
    """Shared memory of one block (attention.cuh's TcSmem or Smem, byte for byte): 3xTF32 keeps the
    tails of a split product's shared operands beside them."""
    size = ITEM_SIZE[dtype]
    if tc:
        dp, dvp = _round_up(d, 8 if size == 4 else 16), _round_up(dv, 8)
        lq, lv = (_round_up(c * size, 128) + 16 for c in (dp, dvp))  # bytes a row
        q, k, v = (_round_up(p, 128) for p in (br * lq, bc * lq, bc * lv))
        return q + k + v + (q + k if split_qk else 0) + (v if split_pv else 0)
    dp, dvp = _round_up(d, 32), _round_up(dv, 32)
    parts = [br * (dp + 1) * size, bc * (dp + 1) * size, bc * (dvp + 1) * size,
             br * (bc + 1) * 4, br * (bc + 1) * size, br * (dvp + 1) * 4, br * 4, br * 4]
    return sum(_round_up(p, 128) for p in parts)


def warp_tiles(dv: int, tc: bool, target: Target, blocks: int | None = None) -> int:
    """m16 row tiles a warp owns on the tensor-core path (attention.cuh's Tr::WM): two share every K
    and V fragment read from shared memory, while the output accumulators (DV / 2 registers a lane
    a tile) stay within the register file; one past a head of 64. Two also halve a block's warps,
    so only where the grid (`blocks`, of 128-row tiles) gives every SM four blocks or more: on the
    H200 at 62bd474 two took VisionAttention's kernel (1024 blocks) from 5.71 to 5.52 ms and Swin's
    (3072) from 139 to 120 us, and gpt2's (192) from 51 to 80 us."""
    many = blocks is None or blocks >= 4 * target.sm_count
    return 2 if tc and dv <= 64 and many else 1


def tile(dtype: str, d: int, dv: int, tc: bool, target: Target, blocks: int | None = None,
         split_qk: bool = False, rows: int | None = None) -> tuple[int, int] | None:
    """(query rows, keys) per tile for this head size on `target`; None where none fits. On tensor
    cores, of the tiles of 64 keys that fit (32 where none does), the one that keeps the most warps
    resident on an SM (its shared memory and threads decide how many blocks fit; up to
    RESIDENT_WARPS), the taller on a tie (fewer reads of K and V); with `blocks` (the grid 128-row
    tiles give), 128 rows only where that grid still fills every SM; with `rows` (the query rows), no
    tile more than half empty where a shorter one fits (Swin's 49-row windows). Level 3's MinGPT (head 96,
    3xTF32 tails): 128 rows, one block of 8 warps an SM, 2.97 ms; 64 rows, one block of 4, 5.16."""
    if max(d, dv) > MAX_HEAD_DIM or min(d, dv) < 1:
        return None
    wm = warp_tiles(dv, tc, target, blocks)
    best: tuple[int, int, int] | None = None  # (keys, warps an SM up to RESIDENT_WARPS, rows)
    for br, bc in TC_TILES if tc else FMA_TILES:
        size = smem_bytes(dtype, br, bc, d, dv, tc, split_qk)
        if size > target.shared_per_block_optin or br < 16 * wm:
            continue
        if br == 128 and blocks is not None and blocks < target.sm_count:
            continue
        if not tc:  # (the FMA path: the largest tile that fits, as its GPU tests ran it)
            return br, bc
        if rows is not None and br > 16 * wm and br >= 2 * -(-rows // 16) * 16:
            continue
        threads = br // (16 * wm) * 32
        resident = min(target.shared_per_sm // size, target.max_threads_per_sm // threads)
        key = (bc, min(resident * threads // 32, RESIDENT_WARPS), br)
        if best is None or key > best:
            best = key
    return None if best is None else (best[2], best[0])


def refusal(dtype: str, d: int, dv: int, target: Target) -> str | None:
    """Why the kernel cannot take this chain on `target` (None: it can). The Planner asks before it
    fuses, so a refused chain keeps its library path. Every rung's tiles must fit (fp32's 3xTF32
    scores keep tails in shared memory; its last rung runs the FMA path), so no later rung refuses."""
    if dtype not in DTYPES:
        return f"attention in {dtype}: only fp32, fp16 and bf16"
    if tuple(target.capability) < MIN_CAPABILITY:
        return f"attention on {target.arch}: the fused kernel needs sm_80 or newer"
    if max(d, dv) > MAX_HEAD_DIM:
        return f"head dims {d}/{dv} past {MAX_HEAD_DIM}"
    for tc, split in ((True, dtype == "float32"), (False, False)):
        if tile(dtype, d, dv, tc, target, split_qk=split) is None:
            return f"head dims {d}/{dv}: no tile fits {target.shared_per_block_optin} bytes of shared memory"
    return None


@dataclass(frozen=True)
class Side:
    """One operand as the kernel reads it: rows and columns of one batch·head, and the batch dims."""

    rows: int
    cols: int
    row_stride: int
    col_stride: int
    batch: tuple[tuple[int, int], ...]  # (size, stride) per batch dim, row-major
    offset: int

    def vec_ok(self, vec: int) -> bool:
        """16-byte loads: columns adjacent, every row start a multiple of the vector."""
        strides = [self.row_stride, self.offset] + [s for n, s in self.batch if n > 1]
        return (self.col_stride == 1 or self.cols == 1) and self.cols % vec == 0 and all(s % vec == 0 for s in strides)


def _side(t: Operand, transposed: bool = False) -> Side:
    if len(t.shape) < 3:
        raise NotSupported(f"attention operand of rank {len(t.shape)}")
    rows, cols = t.shape[-2:]
    sr, sc = t.strides[-2:]
    if transposed:
        rows, cols, sr, sc = cols, rows, sc, sr
    return Side(rows, cols, sr, sc, tuple(zip(t.shape[:-2], t.strides[:-2], strict=True)), t.offset)


def _batch_offset(batch: Sequence[tuple[int, int]], var: str = "bh") -> str:
    """C expression of the element offset of batch·head `var` (row-major over the batch dims)."""
    terms, inner = [], 1
    for size, stride in reversed(list(batch)):
        if size > 1 and stride != 0:
            idx = f"({var} / {inner}LL)" if inner > 1 else var
            terms.append(f"(({idx} % {size}LL) * {stride}LL)")
        inner *= size
    return " + ".join(terms) or "0LL"


def _broadcast(mask: Operand, shape: Sequence[int]) -> tuple[tuple[tuple[int, int], ...], int, int]:
    """(batch dims as (size, stride), row stride, column stride) of `mask` broadcast to the scores'
    `shape` [*B, Sq, Sk]: 0 along every broadcast dim."""
    lead = len(shape) - len(mask.shape)
    if lead < 0 or len(shape) < 2:
        raise NotSupported(f"mask of shape {list(mask.shape)} for scores of shape {list(shape)}")
    strides = []
    for d, size in enumerate(shape):
        j = d - lead
        if j < 0 or mask.shape[j] == 1:
            strides.append(0)
        elif mask.shape[j] == size:
            strides.append(mask.strides[j])
        else:
            raise NotSupported(f"mask shape {list(mask.shape)} does not broadcast to {list(shape)}")
    return tuple(zip(shape[:-2], strides[:-2], strict=True)), strides[-2], strides[-1]


def _unravel(var: str, dims: Sequence[tuple[int, int]]) -> list[str]:
    """C terms of the element offset of index `var` (in [0, product of the sizes)) unravelled
    row-major over `dims` as (size, stride): none for a dim of size 1 or stride 0."""
    terms, inner = [], 1
    for k in range(len(dims) - 1, -1, -1):
        size, stride = dims[k]
        if size > 1 and stride != 0:
            idx = f"({var} / {inner}LL)" if inner > 1 else var
            if any(n > 1 for n, _ in dims[:k]):  # the outermost dim needs no wrap
                idx = f"({idx} % {size}LL)"
            terms.append(f"{idx} * {stride}LL")
        inner *= size
    return terms


def _split(shape: Sequence[int], sizes: Sequence[int]) -> tuple[int, int] | None:
    """(a, b) where shape[:a], shape[a:b] and shape[b:] multiply to the three `sizes`, else None."""
    for a in range(len(shape) + 1):
        if math.prod(shape[:a]) != sizes[0]:
            continue
        for b in range(a, len(shape) + 1):
            if math.prod(shape[a:b]) == sizes[1] and math.prod(shape[b:]) == sizes[2]:
                return a, b
    return None


def _mask_offset(m: Operand, shape: Sequence[int], bh: int, n_q: int, n_k: int) -> str:
    """C expression of the element of mask `m` that score (bh, i, j) meets at a step taken over the
    scores viewed as `shape`: [*B, Sq, Sk] itself, or any view of the same elements (the Planner's
    regrouped steps). Where `shape` splits into the batch·head, the query and the key dims, each
    index is unravelled over its own; otherwise the score's flat index over all of them."""
    batch, sr, sc = _broadcast(m, shape)
    dims = [*batch, (shape[-2], sr), (shape[-1], sc)]
    cut = _split(shape, (bh, n_q, n_k))
    if cut is None:
        terms = _unravel(f"(((int64_t)bh * {n_q}LL + i) * {n_k}LL + j)", dims)
    else:
        a, b = cut
        terms = _unravel("bh", dims[:a]) + _unravel("(int64_t)i", dims[a:b]) + _unravel("(int64_t)j", dims[b:])
    return " + ".join([f"{m.offset}LL", *terms])


def _score(steps: Sequence[Any], masks: Sequence[Operand], slot: dict[str, int],
           sizes: tuple[int, int, int]) -> tuple[list[str], bool]:
    """The body of Tr::score (one C statement per step), and whether a causal step may skip tiles:
    only when nothing after it could turn a -inf back into a number (a fill, an add, a scale <= 0).
    `sizes`: the scores' batch·heads, query rows and keys."""
    lines: list[str] = []
    causal_at = None
    for k, step in enumerate(steps):
        kind = step[0]
        if kind == "scale":
            lines.append(f"    s *= {c_float(step[1])};")
        elif kind == "causal":
            diag = int(step[1])
            lines.append(f"    if ((int64_t)j > (int64_t)i + {diag}LL) s = -INFINITY;")
            causal_at = k
        elif kind in ("fill", "add"):
            m = masks[step[1]]
            off = _mask_offset(m, step[3] if kind == "fill" else step[2], *sizes)
            ptr = f"static_cast<const {C_TYPES[m.dtype]}*>(a.in[{slot[m.name]}])"
            if kind == "fill":
                lines.append(f"    if (sc_to_f({ptr}[{off}]) != 0.0f) s = {c_float(step[2])};")
            else:
                lines.append(f"    s += sc_to_f({ptr}[{off}]);")
        else:
            raise NotSupported(f"attention step {step!r}")
    skip = causal_at is not None and all(
        s[0] == "scale" and s[1] > 0 for s in steps[causal_at + 1:]
    )
    return lines, skip


def emit_attention(ctx: EmitContext) -> Kernel:
    a = ctx.args
    # k as [*B, Sk, D], or kᵀ as [*B, D, Sk] where the forward gave the product a kᵀ of its own.
    q, kt, v = a.get("query"), a.get("key", a.get("key_t")), a.get("value")
    masks = a.get("masks") or []
    if not all(isinstance(t, Operand) for t in (q, kt, v, *masks)):
        raise NotSupported("attention operands are not tensors")
    out = ctx.outputs[0] if ctx.outputs else None
    if out is None:
        raise NotSupported("attention: its result is never read")
    dtype = q.dtype
    # The result in the operands' dtype, or fp32 from fp16/bf16 operands (upcast by the forward).
    if kt.dtype != dtype or v.dtype != dtype or out.dtype not in (dtype, "float32") or dtype not in DTYPES:
        raise NotSupported(f"attention dtypes {q.dtype}, {kt.dtype}, {v.dtype} -> {out.dtype}")
    sq, sk_ = _side(q), _side(kt, transposed="key" not in a)
    sv = _side(v)
    bh = math.prod(n for n, _ in sq.batch)
    if math.prod(n for n, _ in sk_.batch) != bh or math.prod(n for n, _ in sv.batch) != bh:
        raise NotSupported("attention operands have different batch·head counts")
    d, dv, n_q, n_k = sq.cols, sv.cols, sq.rows, sk_.rows
    if sk_.cols != d or sv.rows != n_k:
        raise NotSupported(f"attention shapes q {list(q.shape)}, kᵀ {list(kt.shape)}, v {list(v.shape)}")
    if math.prod(out.shape) != bh * n_q * dv:
        raise NotSupported(f"attention result shape {list(out.shape)}")
    # fp32: TF32 at the first rung, 3xTF32 scores on the rungs after it, the FMA units at the last.
    tc = dtype != "float32" or ctx.precise < PRECISE_FP32
    split_qk = dtype == "float32" and tc and ctx.precise > PRECISE_TF32
    why = refusal(dtype, d, dv, ctx.target)
    sizes = tile(dtype, d, dv, tc, ctx.target, blocks=bh * -(-n_q // 128), split_qk=split_qk, rows=n_q)
    if why is not None or sizes is None:
        raise NotSupported(why or f"head dims {d}/{dv}: no tile fits")
    br, bc = sizes

    names: list[str] = []
    for t in (q, kt, v, *masks):
        if t.name not in names:
            names.append(t.name)
    slot = {n: i for i, n in enumerate(names)}
    steps = list(a.get("steps") or [])
    body, causal = _score(steps, masks, slot, (bh, n_q, n_k))
    diag = next((int(s[1]) for s in steps if s[0] == "causal"), 0)
    # Tiles the masks hide entirely are found at run time (a buffer's values are not known here).
    # Where a score is NaN or inf inside such a tile, torch's row may turn NaN and the kernel's not.
    mask_skip = not causal and any(s[0] in ("fill", "add") for s in steps)
    out_scale = a.get("out_scale", 1.0)
    safe = bool(a.get("safe", False))
    vec = 16 // ITEM_SIZE[dtype]
    vec_layout = all(s.vec_ok(vec) for s in (sq, sk_, sv))
    ctype = C_TYPES[dtype]
    name = ctx.name
    n_in = len(names)
    traits = f"""// {name}: attention {bh} x ({n_q} x {n_k}), head {d}/{dv}, {dtype}
struct {name}_tr {{
  using T = {ctype};
  using TO = {C_TYPES[out.dtype]};
  struct Args {{
    const T* q;
    const T* k;
    const T* v;
    const void* in[{n_in}];
    TO* o;
  }};
  static constexpr int BR = {br}, BC = {bc}, WM = {warp_tiles(dv, tc, ctx.target, bh * -(-n_q // 128))}, D = {d}, DV = {dv}, SQ = {n_q}, SK = {n_k};
  static constexpr int64_t BH = {bh}LL;
  static constexpr int64_t QSR = {sq.row_stride}LL, QSD = {sq.col_stride}LL;
  static constexpr int64_t KSR = {sk_.row_stride}LL, KSD = {sk_.col_stride}LL;
  static constexpr int64_t VSR = {sv.row_stride}LL, VSD = {sv.col_stride}LL;
  static constexpr bool TC = {str(tc).lower()}, CAUSAL = {str(causal).lower()}, SAFE = {str(safe).lower()};
  static constexpr bool VEC_LAYOUT = {str(vec_layout).lower()}, MASK_SKIP = {str(mask_skip).lower()};
  static constexpr bool SPLIT_QK = {str(split_qk).lower()}, SPLIT_PV = false;
  static constexpr int64_t DIAG = {diag}LL;
  static constexpr float OUT_SCALE = {c_float(out_scale)};
  SC_INLINE static int64_t q_base(int64_t bh) {{ return {sq.offset}LL + {_batch_offset(sq.batch)}; }}
  SC_INLINE static int64_t k_base(int64_t bh) {{ return {sk_.offset}LL + {_batch_offset(sk_.batch)}; }}
  SC_INLINE static int64_t v_base(int64_t bh) {{ return {sv.offset}LL + {_batch_offset(sv.batch)}; }}
  SC_INLINE static float score(const Args& a, int64_t bh, int i, int j, float s) {{
    (void)a; (void)bh; (void)i; (void)j;
{chr(10).join(body)}
    return s;
  }}
}};
"""
    raw = [f"const void* in{i}" for i in range(n_in)] + ["void* out0"]
    ins = ", ".join(f"in{i}" for i in range(n_in))
    casts = [
        f"  const {name}_tr::Args args{{static_cast<const {ctype}*>(in{slot[q.name]}), "
        f"static_cast<const {ctype}*>(in{slot[kt.name]}), static_cast<const {ctype}*>(in{slot[v.name]}), "
        f"{{{ins}}}, static_cast<{C_TYPES[out.dtype]}*>(out0)}};"
    ]
    aligned = " && ".join(
        f"sc_aligned(static_cast<const {ctype}*>(in{slot[t.name]}), {vec})" for t in dict.fromkeys((q, kt, v))
    )
    device = f"  const int rc = sc_attn::launch<{name}_tr>(args, {aligned}, stream);\n  if (rc != 0) return rc;"
    host = f"  sc_attn::host<{name}_tr>(args);"
    precision = ("tensor cores" if dtype != "float32" else "3xTF32 scores, TF32 att.v" if split_qk
                 else "TF32 tensor cores" if tc else "fp32 FMA, no TF32")
    mask_note = " ".join(s[0] for s in steps)
    note = (f"attention {bh}x{n_q}x{n_k} head {d}/{dv} {dtype}"
            + (f" -> {out.dtype}" if out.dtype != dtype else "") + f" ({precision}), tiles {br}x{bc}"
            + (f", {mask_note}" if mask_note else "") + (", causal tiles skipped" if causal else "")
            + (", masked tiles skipped" if mask_skip else ""))
    return Kernel(
        name=name,
        inputs=[KernelArg(n, _dtype_of(n, (q, kt, v, *masks))) for n in names],
        outputs=[KernelArg(out.name, out.dtype)],
        source=f"{_HEADER}\n{traits}\n{launchers(name, raw, casts, device, host)}",
        ops=[note],
        host=True,
    )


def _dtype_of(name: str, ops: Sequence[Operand]) -> str:
    return next(t.dtype for t in ops if t.name == name)


EMITTERS = {OP: emit_attention}
