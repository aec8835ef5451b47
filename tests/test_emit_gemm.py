"""agents/coder/emit_gemm.py: the cuBLAS layout decision (checked by simulating the column-major call with
torch), the refusals, the emitted source compiling against cuBLAS's headers, and (GPU) the real
kernels against torch."""

from __future__ import annotations

import copy
import dataclasses
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.nn as nn
from conftest import Fn, needs_nvcc

from stitchcuda import runtime
from stitchcuda.agents import graph
from stitchcuda.agents.coder import emit_gemm, kernels
from stitchcuda.agents.coder.codegen import render
from stitchcuda.agents.coder.emit_gemm import GemmPlan, bias_strides, plan_gemm
from stitchcuda.agents.coder.kernels import NotSupported, Operand

pytestmark = pytest.mark.usefixtures("isolated_cache")


# ---------------------------------------------------------------------------------------------
# The layout decision, checked by running the planned column-major call with torch


def view_of(base: torch.Tensor, make: Callable[[torch.Tensor], torch.Tensor], name: str) -> Operand:
    """The Operand of view make(base) over the contiguous tensor `base`."""
    v = make(base)
    assert v.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
    return Operand(name, tuple(v.shape), tuple(v.stride()), v.storage_offset(), "float32")


def col_major(store: torch.Tensor, offset: int, rows: int, cols: int, ld: int) -> torch.Tensor:
    return torch.as_strided(store, (rows, cols), (1, ld), offset)


def simulate(plan: GemmPlan, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, alpha=1.0, beta=0.0) -> None:
    """What cublasGemmStridedBatchedEx does with the plan, on flat storages (a: the op's second operand)."""
    assert plan.ldc >= plan.m
    for i in range(plan.batch):
        sa = (plan.k, plan.m) if plan.a.trans else (plan.m, plan.k)
        sb = (plan.n, plan.k) if plan.b.trans else (plan.k, plan.n)
        assert plan.a.ld >= max(1, sa[0]) and plan.b.ld >= max(1, sb[0])  # cuBLAS's own checks
        A = col_major(a, plan.a.offset + i * plan.a.stride, *sa, plan.a.ld)
        B = col_major(b, plan.b.offset + i * plan.b.stride, *sb, plan.b.ld)
        C = col_major(c, i * plan.stride_c, plan.m, plan.n, plan.ldc)
        A = A.t() if plan.a.trans else A
        B = B.t() if plan.b.trans else B
        C.copy_(alpha * (A @ B) + (beta * C if beta != 0 else 0))  # beta == 0: C is not read


T = torch.Tensor
MATMULS: list[tuple[str, tuple[int, ...], Callable[[T], T], tuple[int, ...], Callable[[T], T]]] = [
    # (case, base shape of mat1, its view, base shape of mat2, its view)
    ("nn", (5, 7), lambda t: t, (7, 3), lambda t: t),
    ("tn A.T@B", (7, 5), lambda t: t.t(), (7, 3), lambda t: t),
    ("nt linear", (5, 7), lambda t: t, (3, 7), lambda t: t.t()),
    ("tt", (7, 5), lambda t: t.t(), (3, 7), lambda t: t.t()),
    ("row slices", (9, 11), lambda t: t[2:7, 1:8], (10, 6), lambda t: t[3:10, 2:5]),
    ("col slices", (12, 9), lambda t: t[1:8, 2:7].t(), (6, 10), lambda t: t[2:5, 3:10].t()),
    ("matrix-vector", (5, 7), lambda t: t, (7, 1), lambda t: t),
    ("vector from a column", (5, 7), lambda t: t, (7, 4), lambda t: t[:, 2:3]),
    ("row vector", (1, 7), lambda t: t, (7, 3), lambda t: t),
    ("outer product", (5, 1), lambda t: t, (1, 3), lambda t: t),
    ("1x1", (1, 1), lambda t: t, (1, 1), lambda t: t),
    ("k=1 from a column", (4, 6), lambda t: t[:, 1:2], (6, 3), lambda t: t[1:2]),
    ("bmm", (3, 5, 7), lambda t: t, (3, 7, 4), lambda t: t),
    ("bmm transposed", (3, 7, 5), lambda t: t.transpose(1, 2), (3, 4, 7), lambda t: t.transpose(1, 2)),
    (
        "bmm batch in the middle",
        (5, 3, 7),
        lambda t: t.permute(1, 0, 2),
        (7, 3, 4),
        lambda t: t.permute(1, 0, 2),
    ),
    ("bmm broadcast second (folds)", (3, 5, 7), lambda t: t, (1, 7, 4), lambda t: t.expand(3, 7, 4)),
    ("bmm broadcast first", (1, 5, 7), lambda t: t.expand(3, 5, 7), (3, 7, 4), lambda t: t),
    ("bmm broadcast both", (1, 5, 7), lambda t: t.expand(3, 5, 7), (1, 7, 4), lambda t: t.expand(3, 7, 4)),
    ("bmm M=1 folds", (3, 1, 7), lambda t: t, (1, 7, 4), lambda t: t.expand(3, 7, 4)),
    (
        "bmm no fold (transposed)",
        (3, 7, 5),
        lambda t: t.transpose(1, 2),
        (1, 7, 4),
        lambda t: t.expand(3, 7, 4),
    ),
    ("bmm batch 1", (1, 5, 7), lambda t: t, (1, 7, 4), lambda t: t),
    ("bmm offsets", (4, 6, 9), lambda t: t[1:, 1:, 2:], (4, 8, 5), lambda t: t[:3, 1:8, 1:]),
]


def planned(case):
    """A MATMULS case's two base storages, its operand views and the planned call."""
    _, shape1, make1, shape2, make2 = case
    torch.manual_seed(0)
    base1 = torch.randn(shape1, dtype=torch.float64) * 100
    base2 = torch.randn(shape2, dtype=torch.float64) - 3
    plan = plan_gemm(view_of(base1, make1, "x"), view_of(base2, make2, "y"))
    return base1, base2, make1(base1), make2(base2), plan


@pytest.mark.parametrize("case", MATMULS, ids=[c[0] for c in MATMULS])
def test_plan_matches_torch(case):
    base1, base2, x, y, plan = planned(case)
    out = torch.full((*x.shape[:-1], y.shape[-1]), float("nan"), dtype=torch.float64)
    simulate(plan, base2.reshape(-1), base1.reshape(-1), out.view(-1))
    torch.testing.assert_close(out, x @ y, rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("case", MATMULS, ids=[c[0] for c in MATMULS])
@pytest.mark.parametrize("chunk", [1, 2, 3, 100])
def test_k_chunks_add_up_to_the_product(case, chunk):
    """3xTF32's K-chunked calls (each summed into c, beta 1 after the first), simulated as cuBLAS
    runs them, give the whole product for every layout the planner makes (the emitted loop moves its
    operands by the same k_steps)."""
    base1, base2, x, y, plan = planned(case)
    out = torch.full((*x.shape[:-1], y.shape[-1]), float("nan"), dtype=torch.float64)
    parts = emit_gemm.k_chunks(plan, chunk)
    assert len(parts) == -(-plan.k // chunk) and sum(q.k for q in parts) == plan.k
    for i, q in enumerate(parts):
        simulate(q, base2.reshape(-1), base1.reshape(-1), out.view(-1), beta=0.0 if i == 0 else 1.0)
    torch.testing.assert_close(out, x @ y, rtol=1e-12, atol=1e-9)


def padded_operand(store: T, side, rows: int, cols: int, batches: int, rows_p: int, cols_p: int) -> T:
    """What gemm_pad.cuh's sc_gemm_pad writes: op(X) (rows x cols as cuBLAS reads it) dense and
    column-major as rows_p x cols_p a batch, zeros past its ends."""
    out = torch.zeros(batches * rows_p * cols_p, dtype=store.dtype)
    for i in range(batches):
        shape = (cols, rows) if side.trans else (rows, cols)
        x = col_major(store, side.offset + i * side.stride, *shape, side.ld)
        col_major(out, i * rows_p * cols_p, rows_p, cols_p, rows_p)[:rows, :cols] = x.t() if side.trans else x
    return out


@pytest.mark.parametrize("case", MATMULS, ids=[c[0] for c in MATMULS])
def test_padded_plan_matches_torch(case):
    """Every layout the planner makes, run as the padded path runs it: both operands copied with m and
    k rounded up (zeros past them), one product over the copies into a padded result, its m rows of
    each column copied into place."""
    base1, base2, x, y, plan = planned(case)
    pad = emit_gemm.padded_plan(plan, 4)
    assert pad.m % 4 == 0 and pad.k % 4 == 0 and pad.ldc == pad.m and pad.a.ld % 4 == 0 and pad.b.ld % 4 == 0
    assert not emit_gemm.misaligned(pad, 4)
    pa, pb = (plan.batch if plan.a.stride else 1), (plan.batch if plan.b.stride else 1)
    assert emit_gemm.pad_elements(plan, 4) == (pa * pad.m * pad.k, pb * pad.k * plan.n, plan.batch * pad.m * plan.n)
    ap = padded_operand(base2.reshape(-1), plan.a, plan.m, plan.k, pa, pad.m, pad.k)
    bp = padded_operand(base1.reshape(-1), plan.b, plan.k, plan.n, pb, pad.k, plan.n)
    cp = torch.full((plan.batch * pad.m * plan.n,), float("nan"), dtype=torch.float64)
    simulate(pad, ap, bp, cp)
    out = torch.full((*x.shape[:-1], y.shape[-1]), float("nan"), dtype=torch.float64)
    for i in range(plan.batch):  # what sc_gemm_unpad copies
        col_major(out.view(-1), i * plan.stride_c, plan.m, plan.n, plan.ldc).copy_(
            col_major(cp, i * pad.m * plan.n, plan.m, plan.n, pad.m))
    torch.testing.assert_close(out, x @ y, rtol=1e-12, atol=1e-9)


_UNPAD_HARNESS = """
extern "C" void unpad4(const float* cp, float* c, long long total, long long m, long long m_p) {
  sc_gemm_unpad_dense_host<float>(cp, c, total, m, m_p);
}
extern "C" void unpad2(const short* cp, short* c, long long total, long long m, long long m_p) {
  sc_gemm_unpad_dense_host<short>(cp, c, total, m, m_p);
}
"""


@needs_nvcc
def test_the_dense_result_copy_takes_each_runs_first_m_elements(tmp_path):
    """gemm_unpad.cuh's flat copy, 16 bytes a pack (4 floats or 8 halves), through its CPU twin,
    which runs the kernel's packs: runs shorter than a pack, a run ending inside one, a tail past
    the last whole pack."""
    import ctypes

    from stitchcuda.agents.coder import cuda_text

    cu = tmp_path / "unpad.cu"
    cu.write_text(cuda_text.load("gemm_unpad.cuh") + _UNPAD_HARNESS)
    lib = ctypes.CDLL(str(runtime.build([cu]).library))
    g = torch.Generator().manual_seed(3)
    for dtype, fn, align in ((torch.float32, lib.unpad4, 4), (torch.int16, lib.unpad2, 8)):
        for m, runs in ((1, 7), (3, 5), (4, 9), (5, 3), (9, 11), (13, 6), (2949, 3)):
            m_p = -(-m // align) * align
            cp = torch.randint(-1000, 1000, (runs * m_p,), generator=g).to(dtype)
            c = torch.full((runs * m,), -7, dtype=dtype)
            fn(ctypes.c_void_p(cp.data_ptr()), ctypes.c_void_p(c.data_ptr()), ctypes.c_longlong(c.numel()),
               ctypes.c_longlong(m), ctypes.c_longlong(m_p))
            assert torch.equal(c, cp.view(runs, m_p)[:, :m].reshape(-1)), (dtype, m, runs)


def test_padding_only_where_cuBLAS_would_read_unaligned_and_the_copies_are_cheap(monkeypatch):
    """level 1's 8 (8205 x 2949 x 5921: every dim odd) pads on an H200 and an H100; aligned products, a
    skinny one (memory-bound: the copies would cost more than the product) and a bias epilogue do not;
    PAD_ENV=0 turns it off. fp16 needs 8 elements to make 16 bytes."""
    from stitchcuda.target import Target

    def op(shape: tuple[int, ...], dtype: str = "float32") -> Operand:
        return Operand("x", shape, tuple(torch.empty(shape, device="meta").stride()), 0, dtype)

    odd = plan_gemm(op((8205, 2949)), op((2949, 5921)))
    for gpu in ("h200", "h100"):
        pad = emit_gemm.pad_plan_for(odd, Target.named(gpu), "tf32", "float32")
        assert pad is not None and (pad.m, pad.k, pad.n) == (5924, 2952, 8205)
    h200 = Target.named("h200")
    assert emit_gemm.pad_plan_for(plan_gemm(op((8192, 2944)), op((2944, 5920))), h200, "tf32", "float32") is None
    assert emit_gemm.pad_plan_for(plan_gemm(op((8205, 2949)), op((2949, 3))), h200, "tf32", "float32") is None
    assert emit_gemm.pad_plan_for(odd, h200, "3xtf32", "float32") is None  # (the split has its own copies)
    assert emit_gemm.pad_plan_for(odd, None, "tf32", "float32") is None
    half = plan_gemm(op((8205, 2948), "float16"), op((2948, 5924), "float16"))
    assert emit_gemm.misaligned(half, 2) and not emit_gemm.misaligned(half, 4)
    assert emit_gemm.pad_plan_for(half, h200, "tf32", "float16") is not None
    monkeypatch.setenv(emit_gemm.PAD_ENV, "0")
    assert emit_gemm.pad_plan_for(odd, h200, "tf32", "float32") is None


def test_an_odd_product_emits_the_padded_path_and_a_linear_keeps_its_epilogue(monkeypatch):
    """(Small products here, so padding is made to pay: test_padding_only_where_... has the rule.)"""
    monkeypatch.setenv("STITCHCUDA_TARGET", "h200")
    monkeypatch.setattr(emit_gemm, "PAD_SHARE", float("inf"))
    k = emitted(Fn(torch.mm), [r(1029, 517), r(517, 1031)])
    assert "sc_gemm_pad<float>" in k.source and "sc_gemm_unpad<float>" in k.source
    assert "cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, 1032, 1029, 520, &alpha, ap, CUDA_R_32F, 1032, bp" in k.source
    assert k.scratch[1:] == [("float32", 1032 * 520), ("float32", 520 * 1029), ("float32", 1032 * 1029)]
    assert "padded to 16 bytes" in k.ops[0]
    lin = emitted(nn.Linear(517, 1031), [r(1029, 517)])
    assert "sc_gemm_pad" not in lin.source and "CUBLASLT_EPILOGUE_BIAS" in lin.source


def test_plan_layout_choices():
    a = Operand("a", (5, 7), (7, 1), 0, "float32")
    at = Operand("a", (5, 7), (1, 5), 0, "float32")
    b = Operand("b", (7, 3), (3, 1), 0, "float32")
    bt = Operand("b", (7, 3), (1, 7), 0, "float32")
    p = plan_gemm(a, b)
    assert (p.m, p.n, p.k, p.a.trans, p.b.trans, p.a.ld, p.b.ld, p.ldc) == (3, 5, 7, False, False, 3, 7, 3)
    p = plan_gemm(at, bt)
    assert (p.a.trans, p.b.trans, p.a.ld, p.b.ld) == (True, True, 7, 5)
    # A shared second operand of a bmm makes one GEMM over the stacked rows.
    p = plan_gemm(
        Operand("x", (4, 5, 7), (35, 7, 1), 0, "float32"), Operand("w", (4, 7, 3), (0, 3, 1), 0, "float32")
    )
    assert (p.batch, p.n, p.m, p.k) == (1, 20, 3, 7)


@pytest.mark.parametrize(
    "mat1, mat2, why",
    [
        (((5, 7), (14, 2)), ((7, 3), (3, 1)), "neither"),  # every other column
        (((5, 7), (0, 1)), ((7, 3), (3, 1)), "neither"),  # rows broadcast (expand)
        (((5, 7), (7, 1)), ((7, 3), (6, 2)), "neither"),
        (((5, 7), (3, 1)), ((7, 3), (3, 1)), "neither"),  # overlapping rows
        (((5, 7), (7, 1)), ((6, 3), (3, 1)), "inner sizes"),
        (((5, 0), (1, 1)), ((0, 3), (3, 1)), "empty"),
        (((2, 5, 7), (35, 7, 1)), ((3, 7, 3), (21, 3, 1)), "batch sizes"),
        (((5, 7), (7, 1)), ((2, 7, 3), (21, 3, 1)), "ranks"),
    ],
)
def test_plan_refuses(mat1, mat2, why):
    with pytest.raises(NotSupported, match=why):
        plan_gemm(Operand("a", *mat1, 0, "float32"), Operand("b", *mat2, 0, "float32"))


BIASES = [
    ((3,), lambda t: t),
    ((1, 3), lambda t: t),
    ((5, 1), lambda t: t),
    ((5, 3), lambda t: t),
    ((3, 5), lambda t: t.t()),
    ((), lambda t: t),
    ((2, 8), lambda t: t[1, 4:7]),
]


@pytest.mark.parametrize("bias_case", BIASES, ids=[str(b[0]) for b in BIASES])
@pytest.mark.parametrize("beta, alpha", [(1.0, 1.0), (0.5, -2.0)])
def test_bias_broadcast_matches_addmm(bias_case, beta, alpha):
    shape, make = bias_case
    torch.manual_seed(1)
    base = torch.randn(shape, dtype=torch.float64) * 1e3
    x, y = torch.randn(5, 7, dtype=torch.float64), torch.randn(3, 7, dtype=torch.float64).t()
    plan = plan_gemm(Operand("x", (5, 7), (7, 1), 0, "float32"), Operand("y", (7, 3), (1, 7), 0, "float32"))
    bias = view_of(base, make, "bias")
    out = torch.as_strided(base.reshape(-1), (5, 3), bias_strides(bias, (5, 3)), bias.offset)
    out = out.clone(memory_format=torch.contiguous_format)  # the kernel writes a row-major copy
    simulate(plan, y.t().contiguous().view(-1), x.view(-1), out.view(-1), alpha, beta)
    want = torch.addmm(make(base), x, y, beta=beta, alpha=alpha)
    torch.testing.assert_close(out, want, rtol=1e-12, atol=1e-9)


def test_bias_broadcast_batched():
    base = torch.randn(2, 1, 4, dtype=torch.float64)
    b = view_of(base, lambda t: t, "bias")
    assert bias_strides(b, (2, 3, 4)) == (4, 0, 1)
    with pytest.raises(NotSupported, match="broadcast"):
        bias_strides(Operand("b", (3,), (1,), 0, "float32"), (2, 3, 4))


# ---------------------------------------------------------------------------------------------
# The emitter on traced graphs


def emitted(module: nn.Module, inputs: list[T], name: str = "k0", precise: bool = False) -> kernels.Kernel:
    g = graph.trace_module(module, inputs)
    node = next(n for n in g if n["op"] in emit_gemm.EMITTERS)
    return kernels.emit(g, node["name"], name, precise=kernels.PRECISE_SPLIT if precise else kernels.PRECISE_TF32)


def r(*shape: int, dtype=torch.float32) -> T:
    return torch.randn(*shape, dtype=dtype)


def test_linear_uses_the_lt_epilogue():
    k = emitted(nn.Linear(64, 32), [r(8, 64)])
    assert k.libraries == ["cublasLt", "cublas"]
    assert [a.name for a in k.inputs] == ["input", "weight", "bias"]
    assert k.scratch == [("uint8", emit_gemm.WORKSPACE_BYTES)]
    assert "CUBLASLT_EPILOGUE_BIAS" in k.source and "CUBLAS_COMPUTE_32F_FAST_TF32" in k.source
    # The weight is read transposed in place (cuBLAS's A is the op's second operand).
    assert "cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, 32, 8, 64," in k.source


def test_addmm_beta_zero_ignores_bias():
    k = emitted(Fn(lambda b, x, y: torch.addmm(b, x, y, beta=0.0, alpha=3.0)), [r(3), r(5, 7), r(7, 3)])
    assert len(k.inputs) == 2 and k.libraries == ["cublas"]
    assert "_bias" not in k.source and "const float alpha = 3.0f;" in k.source


def test_addmm_matrix_bias_and_baddbmm_use_the_copy():
    k = emitted(Fn(lambda b, x, y: torch.addmm(b, x, y, beta=0.5)), [r(5, 1), r(5, 7), r(7, 3)])
    assert "k0_bias_kernel" in k.source and "const float beta = 0.5f;" in k.source
    k = emitted(Fn(lambda b, x, y: torch.baddbmm(b, x, y)), [r(3), r(2, 5, 7), r(2, 7, 3)])
    assert "cublasGemmStridedBatchedEx" in k.source and "CUBLASLT" not in k.source


def test_fp16_and_bf16_accumulate_in_fp32():
    for dtype, cuda in ((torch.float16, "CUDA_R_16F"), (torch.bfloat16, "CUDA_R_16BF")):
        k = emitted(Fn(torch.bmm), [r(2, 5, 7, dtype=dtype), r(2, 7, 3, dtype=dtype)])
        assert cuda in k.source and "CUBLAS_COMPUTE_32F," in k.source and "TF32" not in k.source


def tf32_split(x: T) -> tuple[T, T]:
    """The split sc_tf32_split_kernel makes: hi on TF32's grid (round to nearest, ties away), lo = x - hi."""
    u = x.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    hi = (((u + 0x1000) & 0xFFFFE000).to(torch.int64))
    hi = torch.where(hi >= 2**31, hi - 2**32, hi).to(torch.int32).view(torch.float32)
    return hi, x - hi


def tf32(x: T) -> T:
    return tf32_split(x)[0]


def test_3xtf32_is_about_as_exact_as_fp32():
    """Tensor cores take TF32 operands (10-bit mantissa) and accumulate in fp32. One TF32 product is
    ~1e-3 off; the three products of the split operands are as close to the float64 result as an
    fp32 product is. Emulated here: products of TF32-grid values are exact in fp32."""
    torch.manual_seed(0)
    a, b = torch.randn(64, 512), torch.randn(512, 48)
    exact = a.double() @ b.double()
    ah, al = tf32_split(a)
    bh, bl = tf32_split(b)
    assert torch.equal(tf32(ah), ah) and torch.equal(ah + al, a)  # the split is exact
    one = tf32(a) @ tf32(b)
    three = tf32(al) @ tf32(bh) + tf32(ah) @ tf32(bl) + ah @ bh
    fp32 = a @ b

    def err(c: T) -> float:
        return ((c.double() - exact).norm() / exact.norm()).item()

    assert err(one) > 1e-4
    assert err(three) < 4 * err(fp32) and err(three) < 1e-6


def pack(side, x: T, batches: int, rows: int, cols: int, k_cols: bool, lo_part: int) -> T:
    """What gemm_split.cuh's sc_tf32_pack writes, index for index: op(X) (rows x cols as cuBLAS
    reads `side` from the flat fp32 `x`) dense and column-major, K three times as long, the third
    `lo_part` holding lo and the others hi."""
    r3, c3 = (rows, 3 * cols) if k_cols else (3 * rows, cols)
    b, c, r = torch.meshgrid(torch.arange(batches), torch.arange(c3), torch.arange(r3), indexing="ij")
    part = (c // cols) if k_cols else (r // rows)
    c, r = (c % cols, r) if k_cols else (c, r % rows)
    hi, lo = tf32_split(x[side.offset + b * side.stride + (r * side.ld + c if side.trans else c * side.ld + r)])
    return torch.where(part == lo_part, lo, hi).reshape(-1)


@pytest.mark.parametrize("case", MATMULS, ids=[c[0] for c in MATMULS])
def test_packed_split_is_the_three_products_in_one_call(case):
    """3xTF32 with a short K as one call over packed operands (emit_gemm.packed_plan, sc_tf32_pack),
    simulated as cuBLAS runs it: a_lo b_hi + a_hi b_lo + a_hi b_hi, for every layout the planner
    makes, broadcast batches included (packed once)."""
    base1, base2, x, y, plan = planned(case)
    base1, base2 = base1.float(), base2.float()
    x, y = x.float(), y.float()
    packed = emit_gemm.pack_geometry(plan)
    assert packed.k == 3 * plan.k
    pa, pb = emit_gemm.packed_batches(plan)
    a = pack(plan.a, base2.reshape(-1), pa, plan.m, plan.k, True, 0)
    b = pack(plan.b, base1.reshape(-1), pb, plan.k, plan.n, False, 1)
    assert a.numel() == 3 * pa * plan.m * plan.k and b.numel() == 3 * pb * plan.k * plan.n
    out = torch.full((*x.shape[:-1], y.shape[-1]), float("nan"), dtype=torch.float64)
    simulate(packed, a.double(), b.double(), out.view(-1))
    (xh, xl), (yh, yl) = tf32_split(x.contiguous()), tf32_split(y.contiguous())
    want = xh.double() @ yl.double() + xl.double() @ yh.double() + xh.double() @ yh.double()
    torch.testing.assert_close(out, want, rtol=1e-12, atol=1e-9)


def test_packed_split_only_for_a_short_k_and_a_result_larger_than_its_operands(monkeypatch):
    monkeypatch.setattr(emit_gemm, "SMALL_PRODUCT", 0)  # (these shapes are small: the split itself is tested)
    def calls(module, x):
        return emitted(module, [x], precise=True).source.count("cublasGemmEx(")

    # [64, 16] @ [16, 64]: 4096 results from 2048 operand elements.
    short = emitted(nn.Linear(16, 64), [r(64, 16)], precise=True)
    assert short.source.count("cublasGemmEx(") == 1 and short.source.count("rc = sc_tf32_pack(") == 2
    assert "packed into one" in short.ops[0]
    assert short.scratch == [("uint8", emit_gemm.WORKSPACE_BYTES), ("float32", 3 * 64 * 16), ("float32", 3 * 16 * 64)]
    # [8, 16] @ [16, 32]: 256 results from 640 operand elements: packing would write more than it saves.
    assert calls(nn.Linear(16, 32), r(8, 16)) == 3
    monkeypatch.setattr(emit_gemm, "SPLIT_K_CHUNK", 47)  # 3 x 16 > 47: three calls
    assert calls(nn.Linear(16, 64), r(64, 16)) == 3
    monkeypatch.setattr(emit_gemm, "SPLIT_K_CHUNK", 48)
    assert calls(nn.Linear(16, 64), r(64, 16)) == 1
    monkeypatch.setenv(emit_gemm.PACKED_SPLIT_ENV, "0")
    assert calls(nn.Linear(16, 64), r(64, 16)) == 3


def test_precise_fp32_products_split_the_operands(monkeypatch):
    monkeypatch.setattr(emit_gemm, "SMALL_PRODUCT", 0)  # (these shapes are small: the split itself is tested)
    monkeypatch.setenv(emit_gemm.PACKED_SPLIT_ENV, "0")  # three calls (packed: test_packed_split_only_for_a_short_k)
    k = emitted(nn.Linear(64, 32), [r(8, 64)], precise=True)
    assert "sc_tf32_split(" in k.source and k.source.count("cublasGemmEx(") == 3
    assert k.libraries == ["cublas"] and "3xTF32" in k.ops[0]
    # cuBLAS's workspace, then hi and lo of its A (the weight) and of its B (the input).
    assert k.scratch == [("uint8", emit_gemm.WORKSPACE_BYTES), ("float32", 64 * 32), ("float32", 64 * 32),
                         ("float32", 8 * 64), ("float32", 8 * 64)]
    half = emitted(nn.Linear(64, 32).half(), [r(8, 64, dtype=torch.float16)], precise=True)
    assert "sc_tf32_split" not in half.source  # fp16/bf16 already accumulate in fp32


def test_precise_products_of_a_long_k_run_in_chunks(monkeypatch):
    monkeypatch.setattr(emit_gemm, "SMALL_PRODUCT", 0)  # (these shapes are small: the split itself is tested)
    monkeypatch.setattr(emit_gemm, "SPLIT_K_CHUNK", 16)
    k = emitted(nn.Linear(64, 32), [r(8, 64)], precise=True)
    loop = k.source[k.source.index("for (int64_t k0 = 0; k0 < 64LL"):]
    assert loop.count("cublasGemmEx(") == 3 and "k0 += 16LL" in loop and ", kk, &alpha" in loop
    # The weight (cuBLAS's A, transposed) moves 1 per k, the input (cuBLAS's B) 1 per k too.
    assert "a_lo + k0 * 1LL" in loop and "b_lo + k0 * 1LL" in loop and "first = k0 == 0 ? &beta : &one" in loop
    short = emitted(nn.Linear(16, 32), [r(8, 16)], precise=True)
    assert "for (int64_t k0" not in short.source and short.source.count("cublasGemmEx(") == 3


def test_precise_products_of_huge_operands_run_in_full_fp32(monkeypatch):
    """Four scratch copies of operands that big would not fit beside them: full fp32 instead."""
    monkeypatch.setattr(emit_gemm, "SPLIT_SCRATCH_BYTES", 2 * (64 * 32 + 8 * 64) * 4 - 1)
    k = emitted(nn.Linear(64, 32), [r(8, 64)], precise=True)
    assert "sc_tf32_split" not in k.source and "FAST_TF32" not in k.source
    assert "CUBLAS_COMPUTE_32F" in k.source and "no TF32" in k.ops[0]


def test_same_tensor_twice_is_passed_once():
    k = emitted(Fn(lambda a: a @ a.t()), [r(6, 4)])
    assert len(k.inputs) == 1 and "in1" not in k.source


@pytest.mark.parametrize(
    "module, inputs, why",
    [
        (Fn(torch.mm), [r(4, 5).double(), r(5, 3).double()], "float64"),
        (Fn(lambda a, b: a[:, ::2] @ b), [r(4, 10), r(5, 3)], "neither row- nor column-major"),
        (Fn(lambda a, b: a @ b[:, ::2]), [r(4, 5), r(5, 6)], "neither row- nor column-major"),
        (Fn(lambda b, x, y: torch.addmm(b, x, y)), [r(2, 5, 3), r(5, 7), r(7, 3)], "result shape"),
    ],
)
def test_emitter_refuses(module, inputs, why):
    with pytest.raises(NotSupported, match=why):
        emitted(module, inputs)


COMPILE_CASES: list[tuple[nn.Module, list[T]]] = [
    (nn.Linear(64, 32), [r(8, 64)]),
    (nn.Linear(16, 64), [r(64, 16)]),  # 3xTF32 packed, the bias by cuBLASLt's epilogue
    (nn.Linear(64, 32).half(), [r(8, 64, dtype=torch.float16)]),
    (Fn(lambda a, b: a.t() @ b), [r(7, 5), r(7, 3)]),
    (Fn(lambda b, x, y: torch.addmm(b, x, y, beta=0.5, alpha=2.0)), [r(5, 3), r(5, 7), r(7, 3)]),
    (Fn(lambda b, x, y: torch.baddbmm(b, x, y, alpha=0.25)), [r(1, 3), r(2, 5, 7), r(2, 7, 3)]),
    (Fn(torch.bmm), [r(2, 5, 7, dtype=torch.bfloat16), r(2, 7, 3, dtype=torch.bfloat16)]),
    (Fn(torch.mv), [r(5, 7), r(7)]),
]


def cublas_include() -> str | None:
    """A folder holding cublas_v2.h: STITCHCUDA_EXTRA_INCLUDE (os.pathsep-separated), else the toolkit's."""
    roots = [p for p in os.environ.get("STITCHCUDA_EXTRA_INCLUDE", "").split(os.pathsep) if p]
    nvcc = runtime.find_nvcc()
    if nvcc:
        roots.append(str(Path(nvcc).resolve().parent.parent / "include"))
    roots.append("/usr/local/cuda/include")
    return next((p for p in roots if Path(p, "cublas_v2.h").exists()), None)


@needs_nvcc
def test_emitted_source_compiles(tmp_path):
    include = cublas_include()
    if include is None:
        pytest.skip("no cublas_v2.h: set STITCHCUDA_EXTRA_INCLUDE to a folder with cuBLAS's headers")
    sources = [emitted(m, ins, f"k{i}").source for i, (m, ins) in enumerate(COMPILE_CASES)]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(emit_gemm, "SMALL_PRODUCT", 0)  # the split even for these small products
        # The 3xTF32 variants (after a wrong result), fp32 cases only.
        sources += [emitted(m, ins, f"p{i}", precise=True).source for i, (m, ins) in enumerate(COMPILE_CASES)
                    if ins[0].dtype == torch.float32]
        # 3xTF32 in chunks of K (a chunk shorter than these cases' K).
        mp.setattr(emit_gemm, "SPLIT_K_CHUNK", 2)
        sources += [emitted(m, ins, f"c{i}", precise=True).source for i, (m, ins) in enumerate(COMPILE_CASES)
                    if ins[0].dtype == torch.float32]
    # Every case over padded copies (their products too small to pay, padded all the same).
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(emit_gemm, "PAD_SHARE", float("inf"))
        sources += [emitted(m, ins, f"q{i}").source for i, (m, ins) in enumerate(COMPILE_CASES)]
        assert sum("sc_gemm_pad<" in src for src in sources) >= 3
    # Full fp32 (after 3xTF32 was wrong too).
    sources += [emitted(m, ins, f"f{i}", precise=kernels.PRECISE_FP32).source for i, (m, ins) in enumerate(COMPILE_CASES)
                if ins[0].dtype == torch.float32]
    path = tmp_path / "gemm.cu"
    path.write_text(render([], after=sources) + "\n" + "\n".join(sources))  # one .cu: the family blocks must not clash
    cmd = [
        runtime.find_nvcc(),
        "-c",
        "-std=c++17",
        "-arch=sm_90",
        "-I",
        include,
        str(path),
        "-o",
        str(tmp_path / "g.o"),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]


# ---------------------------------------------------------------------------------------------
# GPU: the real kernels against torch

GPU_CASES: list[tuple[str, nn.Module, list[T], float]] = [
    ("mm odd", Fn(torch.mm), [r(67, 129), r(129, 35)], 1e-2),
    ("A.T@B", Fn(lambda a, b: a.t() @ b), [r(129, 67), r(129, 35)], 1e-2),
    ("A.T@B.T", Fn(lambda a, b: a.t() @ b.t()), [r(129, 67), r(35, 129)], 1e-2),
    ("linear", nn.Linear(129, 67), [r(33, 129) * 100], 1e-2),
    ("linear 3d", nn.Linear(64, 48), [r(3, 17, 64)], 1e-2),
    (
        "addmm column bias",
        Fn(lambda b, x, y: torch.addmm(b, x, y, beta=0.5, alpha=-2.0)),
        [r(33, 1), r(33, 70), r(70, 19)],
        1e-2,
    ),
    # A column bias over a result whose rows are a multiple of 4 long: stored four at a time.
    ("addmm column bias vec4", Fn(lambda b, x, y: torch.addmm(b, x, y, beta=1.0)), [r(33, 1), r(33, 70), r(70, 20)], 1e-2),
    (
        "addmm full bias",
        Fn(lambda b, x, y: torch.addmm(b, x, y, beta=1.0)),
        [r(33, 19) * 1e3, r(33, 70), r(70, 19)],
        1e-2,
    ),
    ("bmm", Fn(torch.bmm), [r(5, 33, 70), r(5, 70, 19)], 1e-2),
    # Short K, results larger than the operands: 3xTF32 packs them (packed_plan), transposed, batched,
    # broadcast, and a Linear whose bias then takes cuBLASLt's epilogue.
    ("packed linear", nn.Linear(96, 288), [r(515, 96)], 1e-2),
    ("packed A.T@B", Fn(lambda a, b: a.t() @ b), [r(32, 203), r(32, 150)], 1e-2),
    ("packed bmm", Fn(torch.bmm), [r(4, 101, 24), r(4, 24, 90)], 1e-2),
    ("packed bmm broadcast", Fn(lambda a, b: torch.bmm(a, b.expand(4, 24, 90))), [r(4, 101, 24), r(1, 24, 90)], 1e-2),
    ("bmm broadcast", Fn(lambda a, b: torch.bmm(a, b.expand(5, 70, 19))), [r(5, 33, 70), r(1, 70, 19)], 1e-2),
    (
        "baddbmm",
        Fn(lambda b, x, y: torch.baddbmm(b, x, y, beta=2.0, alpha=0.5)),
        [r(19), r(5, 33, 70), r(5, 70, 19)],
        1e-2,
    ),
    ("mv", Fn(torch.mv), [r(67, 1000), r(1000)], 1e-2),
    ("linear fp16", nn.Linear(128, 64).half(), [r(32, 128, dtype=torch.float16)], 2e-2),
    ("bmm fp16", Fn(torch.bmm), [r(4, 33, 72, dtype=torch.float16), r(4, 72, 40, dtype=torch.float16)], 2e-2),
    ("mm bf16", Fn(torch.mm), [r(40, 72, dtype=torch.bfloat16), r(72, 24, dtype=torch.bfloat16)], 5e-2),
]


def build_kernel(k: kernels.Kernel, folder: Path) -> runtime.Library:
    path = folder / f"{k.name}.cu"
    path.write_text(render([], after=[k.source]) + "\n" + k.source)
    return runtime.Library(runtime.build([path], libraries=k.libraries).library)


def run_gpu(module: nn.Module, inputs: list[T], folder: Path, shift: int = 0, precise: bool = False) -> tuple[T, T]:
    """The emitted kernel's result on CUDA copies of the inputs and torch's, as CPU tensors. A graph
    input's data starts `shift` elements into its buffer (misaligned pointers for shift % 4 != 0)."""
    g = graph.trace_module(module, inputs)
    node = next(n for n in g if n["op"] in emit_gemm.EMITTERS)
    k = kernels.emit(g, node["name"], "k", precise=kernels.PRECISE_SPLIT if precise else kernels.PRECISE_TF32)
    lib = build_kernel(k, folder)
    module = copy.deepcopy(module).cuda()  # the case's module stays on the CPU for the next trace
    values = {n["name"]: inputs[n["index"]] for n in g if n["op"] == "input" and n.get("kind") == "arg"}
    values.update({key: v.detach() for key, v in module.state_dict().items()})
    args = []
    for a in k.inputs:
        v = values[a.name].cuda()
        buf = torch.empty(v.numel() + shift, dtype=v.dtype, device="cuda")
        buf[shift:] = v.reshape(-1)
        args.append(buf[shift:].view(v.shape))
    out = torch.full(tuple(node["shape"]), float("nan"), dtype=inputs[0].dtype, device="cuda")
    scratch = [torch.empty(n, dtype=getattr(torch, d), device="cuda") for d, n in k.scratch]
    lib.call("k", *args, out, *scratch)
    with torch.no_grad():
        want = module(*[x.cuda() for x in inputs])
    torch.cuda.synchronize()
    return out.cpu(), want.reshape(out.shape).cpu()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("case", GPU_CASES, ids=[c[0] for c in GPU_CASES])
def test_gpu_matches_torch(case, tmp_path):
    _, module, inputs, tol = case
    torch.manual_seed(0)
    for shift in (0, 1):  # 1: pointers off 16-byte alignment (cuBLASLt falls back to the copy path)
        got, want = run_gpu(module, inputs, tmp_path, shift)
        scale = want.float().abs().max().item() + 1
        torch.testing.assert_close(got.float(), want.float(), rtol=tol, atol=tol * scale)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("case", GPU_CASES, ids=[c[0] for c in GPU_CASES])
def test_gpu_padded_copies_match_torch(case, tmp_path, monkeypatch):
    """Every case over padded copies wherever cuBLAS would read it unaligned (made to pay: these are
    small): transposed, batched, broadcast, fp16 and bf16, from misaligned pointers too."""
    _, module, inputs, tol = case
    monkeypatch.setattr(emit_gemm, "PAD_SHARE", float("inf"))
    torch.manual_seed(0)
    for shift in (0, 1):
        got, want = run_gpu(module, inputs, tmp_path, shift)
        scale = want.float().abs().max().item() + 1
        torch.testing.assert_close(got.float(), want.float(), rtol=tol, atol=tol * scale)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("case", [c for c in GPU_CASES if c[2][0].dtype == torch.float32], ids=lambda c: c[0])
def test_gpu_3xtf32_is_as_exact_as_fp32(case, tmp_path, monkeypatch):
    """After a wrong result: the split products land about as close to float64 as torch's own fp32
    matmul (TF32 off, PyTorch's default), and much closer than plain TF32. (Split even where these
    small products would run in fp32: the split is what is tested.)"""
    monkeypatch.setattr(emit_gemm, "SMALL_PRODUCT", 0)
    _, module, inputs, _ = case
    torch.manual_seed(0)
    for shift in (0, 1):
        folder = tmp_path / f"shift{shift}"
        folder.mkdir()
        got, want = run_gpu(module, inputs, folder, shift, precise=True)
        exact = copy.deepcopy(module).double()(*[x.double() for x in inputs]).reshape(got.shape)
        err = ((got.double() - exact).norm() / exact.norm()).item()
        ref_err = ((want.double() - exact).norm() / exact.norm()).item()
        assert err <= 4 * ref_err + 1e-7, (err, ref_err)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_cuda_graph_capture(tmp_path):
    module = nn.Linear(256, 128)
    g = graph.trace_module(module, [r(64, 256)])
    node = next(n for n in g if n["op"] in emit_gemm.EMITTERS)
    k = kernels.emit(g, node["name"], "k")
    lib = build_kernel(k, tmp_path)
    module = module.cuda()
    x = torch.randn(64, 256, device="cuda")
    out = torch.empty(64, 128, device="cuda")
    scratch = torch.empty(k.scratch[0][1], dtype=torch.uint8, device="cuda")
    args = {"input": x, "weight": module.weight.detach(), "bias": module.bias.detach()}
    ins = [args[a.name] for a in k.inputs]
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        lib.call("k", *ins, out, scratch)  # first call creates the handles outside the capture
        cg = torch.cuda.CUDAGraph()
        with torch.cuda.graph(cg, stream=stream):
            lib.call("k", *ins, out, scratch)
    x.copy_(torch.randn_like(x))
    out.fill_(float("nan"))
    cg.replay()
    torch.cuda.synchronize()
    with torch.no_grad():
        torch.testing.assert_close(out, module(x), rtol=1e-2, atol=1e-2)


@needs_nvcc
@pytest.mark.parametrize("bias", [False, True], ids=["bias-free", "linear"])
def test_a_candidate_of_products_alone_builds_without_warnings(tmp_path, bias):
    """gemm.cuh's helpers that only some products call (the cuBLASLt bias path's alignment check) and
    the prelude's grid helper, which no kernel of such a file calls, are marked maybe-unused."""
    from conftest import assert_builds_clean_for_sm90, builtin_candidate

    include = cublas_include()
    if include is None:
        pytest.skip("no cublas_v2.h: set STITCHCUDA_EXTRA_INCLUDE to a folder with cuBLAS's headers")
    module = nn.Linear(16, 8) if bias else Fn(lambda a: a @ a.t())
    cand = builtin_candidate(module, [r(8, 16)], host=False)
    assert_builds_clean_for_sm90(cand, tmp_path / "k.cu", include)


def test_the_packed_cases_pack(monkeypatch):
    """The GPU cases named "packed" take packed_plan's single call (else they test nothing new), and
    a Linear's bias then goes to cuBLASLt's epilogue instead of the copy before the products."""
    monkeypatch.setattr(emit_gemm, "SMALL_PRODUCT", 0)  # (as test_gpu_3xtf32_is_as_exact_as_fp32 has it)
    for name, module, inputs, _ in GPU_CASES:
        if name.startswith("packed"):
            k = emitted(module, inputs, precise=True)
            assert "packed into one" in k.ops[0], (name, k.ops)
            assert ("cublasLt epilogue" in k.ops[0]) == (name == "packed linear"), (name, k.ops)


def test_precise_products_smaller_than_a_tile_run_in_fp32():
    """Where each product is under SMALL_PRODUCT rows and columns (a window attention's 49x49 scores),
    the exact rung runs it as fp32 (cuBLAS's FMA kernels either way), not as three products."""
    scores = emitted(Fn(torch.bmm), [r(8, 49, 32), r(8, 32, 49)], precise=True)
    assert "(fp32, no TF32)" in scores.ops[0] and "3xTF32" not in scores.ops[0], scores.ops
    square = emitted(Fn(torch.bmm), [r(2, 1024, 1024), r(2, 1024, 1024)], precise=True)
    assert "3xTF32" in square.ops[0], square.ops


def test_fp32_biases_are_stored_four_at_a_time_where_rows_allow():
    vec = emitted(Fn(lambda b, x, y: torch.addmm(b, x, y)), [r(33, 1), r(33, 70), r(70, 20)])
    assert "k0_bias_vec4<<<" in vec.source and "k0_bias_kernel<<<" in vec.source  # (unaligned out: scalar)
    odd = emitted(Fn(lambda b, x, y: torch.addmm(b, x, y)), [r(33, 1), r(33, 70), r(70, 19)])
    assert "k0_bias_vec4" not in odd.source and "k0_bias_kernel<<<" in odd.source


def _precise_on(target, module, inputs) -> str:
    g = graph.trace_module(module, inputs)
    node = next(n for n in g if n["op"] in emit_gemm.EMITTERS)
    return kernels.emit(g, node["name"], "k0", precise=kernels.PRECISE_SPLIT, target=target).ops[0]


def test_3xtf32_only_where_the_roofline_says_it_beats_one_fp32_product():
    """On the exact rung a product runs as 3xTF32 only where three tensor-core products, with the
    split's traffic, beat one fp32 product on the target's own peaks. Level 3's Mamba2 (batched
    64x64 @ 64x16 and 3x3 @ 3x1024, memory-bound in fp32) ran 3xTF32 at 4.3 ms against torch.compile's
    1.3 ms in fp32; a large Linear and attention scores (compute-bound in fp32) keep the split."""
    from stitchcuda.target import Target

    h200 = Target.named("h200")
    bmm = Fn(torch.bmm)
    # (Batches scale flops and bytes alike: a few stand for Mamba2's 32768 and 16384.)
    assert "(fp32, no TF32)" in _precise_on(h200, bmm, [r(8, 64, 64), r(8, 64, 16)])
    assert "(fp32, no TF32)" in _precise_on(h200, bmm, [r(8, 3, 3), r(8, 3, 1024)])
    assert "3xTF32" in _precise_on(h200, nn.Linear(2048, 2048), [r(1024, 2048)])
    # Scores of a 64-wide head: fp32 estimated 1.2x ahead, within SPLIT_MARGIN, so split as before.
    scores = _precise_on(h200, bmm, [r(4, 512, 64), r(4, 64, 512)])
    assert "3xTF32" in scores and "packed into one" in scores
    # The peaks are the target's: where TF32 is no faster than fp32, three products never pay.
    flat = dataclasses.replace(h200, tf32_flops=h200.fp32_flops)
    assert "(fp32, no TF32)" in _precise_on(flat, nn.Linear(2048, 2048), [r(1024, 2048)])
