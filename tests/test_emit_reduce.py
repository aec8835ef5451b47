"""Reduction, softmax and scan emitters: generated kernels against PyTorch, on the CPU through their
host entries (every case in one nvcc build) and, where a GPU is present, through the real launchers."""

from __future__ import annotations

import ctypes
import dataclasses
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
from conftest import Fn, needs_nvcc

from stitchcuda import runtime
from stitchcuda.agents import graph
from stitchcuda.agents.coder import emit_reduce, kernels
from stitchcuda.agents.graph import ref_name
from stitchcuda.target import Target


@pytest.fixture(autouse=True)
def _thread_a_column(monkeypatch):
    """The cases below pin the thread-a-column kernel's plan ("cols"); column tiles, the default
    since the H100 run at d0147ff, are set by the tests that are about them."""
    monkeypatch.setenv(emit_reduce.TILE_ENV, "0")

H100 = Target.named("h100")

pytestmark = pytest.mark.usefixtures("isolated_cache")


@dataclass
class Case:
    id: str
    fn: Callable  # what forward computes from x; tuples are (values, indices) or (var, mean)
    shape: tuple[int, ...]
    dtype: torch.dtype = torch.float32
    fill: str = "random"  # random, wide, nan, inf, ties, near1
    plan: str = ""  # a word the kernel's note must hold: the path the case is there to cover
    exact: bool = False  # max/argmax-like: bit-exact values
    tol: float = 1e-5
    exact_ref: bool = False  # the reference from float64 (an fp32 sum of cancelling terms has no digits left)

    def input(self, seed: int) -> torch.Tensor:
        g = torch.Generator().manual_seed(seed)
        shape = self.shape
        if self.fill == "ties":
            return torch.randint(-3, 4, shape, generator=g).to(self.dtype)
        if self.fill == "near1":
            x = 0.9 + 0.2 * torch.rand(shape, generator=g)
            x.view(-1)[:: max(1, x.numel() // 5)] *= -1
            return x.to(self.dtype)
        x = torch.randn(shape, generator=g) * 3 - 0.5
        if self.fill.startswith("cancel"):
            # +2^22 and -2^22 seven apart along the reduced axis (the last, or with "cancel0" the
            # first): each output's exact sum is the small terms', but a float running sum that
            # holds 2^22 keeps them to a quarter (level1/98's shared-lines set on the H200).
            axis = 0 if self.fill == "cancel0" else len(shape) - 1
            at = torch.arange(shape[axis]) % 14
            big = (at == 0).float() - (at == 7).float()
            return (x + 2.0**22 * big.reshape([-1 if d == axis else 1 for d in range(len(shape))])).to(self.dtype)
        pick = torch.rand(shape, generator=g)
        if self.fill == "wide":
            big = 1e30 if self.dtype == torch.float32 else 1e4
            x = torch.where(pick < 0.05, x * big, x)
            x = torch.where((pick > 0.05) & (pick < 0.1), x * 1e-30, x)
        if self.fill == "nan":
            x = torch.where(pick > 0.97, torch.nan, x)
        if self.fill == "inf":
            x = torch.where(pick > 0.9, -torch.inf, x)
            x = torch.where(pick < 0.01, torch.inf, x)
            x.reshape(-1, shape[-1])[0] = -torch.inf  # a whole row of -inf
        return x.to(self.dtype)

    def reference(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """torch's results; for fp16/bf16 computed in fp32 and rounded once to torch's result dtype."""
        native = self.fn(x)
        native = native if isinstance(native, tuple) else (native,)
        if self.exact_ref:
            wide = self.fn(x.double())
            wide = wide if isinstance(wide, tuple) else (wide,)
            return tuple(w.to(n.dtype) for w, n in zip(wide, native, strict=True))
        if x.dtype == torch.float32 or self.exact:
            return native
        wide = self.fn(x.float())
        wide = wide if isinstance(wide, tuple) else (wide,)
        return tuple(w.to(n.dtype) for w, n in zip(wide, native, strict=True))


def _cumsum_f32(x: torch.Tensor) -> torch.Tensor:
    return torch.cumsum(x, dim=-1, dtype=torch.float32)


CASES = [
    # sums and means: every layout and the splits
    Case("sum-col", lambda x: x.sum(dim=1, keepdim=True), (5, 37, 19), plan="cols"),
    Case("sum-row-warp", lambda x: x.sum(dim=-1), (7, 301), plan="tpr 32 vec 4"),
    Case("sum-row-2dims", lambda x: x.sum(dim=(0, 2)), (6, 5, 33), plan="vec 1"),
    Case("sum-all-split", lambda x: x.sum(), (3, 17001), plan="splits", tol=1e-4),
    # sums whose terms cancel: accumulated in double (reduce.cuh's sc_red_sum), so near the exact sum
    Case("sum-cancelling-rows", lambda x: x.sum(dim=-1), (3, 28000), fill="cancel", plan="rows", exact_ref=True),
    Case("sum-cancelling-split", lambda x: x.sum(), (2, 70000), fill="cancel", plan="splits", exact_ref=True),
    Case("mean-cancelling-cols", lambda x: x.mean(dim=0), (2800, 40), fill="cancel0", plan="cols", exact_ref=True),
    Case("norm2-big-rows", lambda x: torch.linalg.vector_norm(x, dim=-1), (3, 28000), fill="cancel", exact_ref=True,
         tol=1e-6),
    Case("sum-empty-dims", lambda x: x.sum(dim=[]), (4, 9, 5)),
    Case("mean-row-split", lambda x: x.mean(dim=1), (4, 70001), plan="splits", tol=1e-4),
    Case("mean-hw", lambda x: x.mean(dim=(-1, -2), keepdim=True), (3, 4, 9, 11), plan="tpr 8"),
    Case("sum-one-thread-rows", lambda x: x.sum(dim=-1), (37, 16), plan="tpr 1 vec 4"),
    Case("sum-short-rows", lambda x: x.sum(dim=-1), (37, 20), plan="tpr 2 vec 4"),
    # min.dim whose indices nothing reads: the value alone (sc_red_ext), NaN still winning
    Case("min-dim-values-only", lambda x: torch.min(x, dim=-1)[0], (37, 128), fill="nan", plan="tpr 8 vec 4",
         exact=True),
    Case("amax-short-rows", lambda x: x.amax(dim=-1), (37, 61), fill="nan", plan="tpr 4", exact=True),
    Case("mean-col-split", lambda x: x.mean(dim=0), (3000, 40), plan="cols, 63 splits", tol=1e-4),
    Case("mean-all", lambda x: x.mean(), (37, 129)),
    Case("sum-rows-256", lambda x: x.sum(dim=-1), (5, 5003), plan="tpr 256"),
    Case("sum-fp16", lambda x: x.sum(dim=-1), (6, 515), torch.float16, tol=1e-2),
    Case("mean-bf16", lambda x: x.mean(dim=1), (4, 33, 10), torch.bfloat16, tol=1e-2),
    Case(
        "sum-fp16-to-fp32", lambda x: x.sum(dim=1, dtype=torch.float32), (4, 33, 10), torch.float16, tol=1e-4
    ),
    Case("nansum", lambda x: x.nansum(dim=1), (6, 40, 3), fill="nan"),
    Case("sum-transposed", lambda x: x.transpose(1, 2).sum(dim=1), (3, 40, 21)),
    Case("sum-sliced", lambda x: x[:, 1:].sum(dim=-1), (6, 300), plan="rows"),
    Case("prod", lambda x: x.prod(dim=1), (5, 20, 3), fill="near1"),
    Case("prod-all", lambda x: x.prod(), (3, 70), fill="near1", tol=1e-4),
    # extrema and their indices: NaN, infinities, ties
    Case("amax-nan", lambda x: x.amax(dim=(1, 2)), (4, 6, 50), fill="nan", exact=True),
    Case("amin-keepdim", lambda x: x.amin(dim=-1, keepdim=True), (4, 6, 50), fill="nan", exact=True),
    Case("amax-permuted", lambda x: x.permute(2, 0, 1).amax(dim=(1, 2)), (4, 6, 9), exact=True),
    Case("max-dim-col", lambda x: torch.max(x, dim=1), (5, 37, 19), fill="nan", exact=True),
    Case("max-dim-row", lambda x: torch.max(x, dim=-1, keepdim=True), (9, 300), fill="nan", exact=True),
    Case("max-dim-ties", lambda x: torch.max(x, dim=-1), (9, 3000), fill="ties", exact=True),
    Case("min-dim-inf", lambda x: torch.min(x, dim=1), (6, 50), fill="inf", exact=True),
    Case("max-values-only", lambda x: torch.max(x, dim=1)[0], (5, 37, 19), fill="wide", exact=True),
    Case("min-indices-only", lambda x: torch.min(x, dim=1)[1], (5, 37, 19), fill="ties", exact=True),
    Case("max-all", lambda x: x.max(), (7, 33), fill="wide", exact=True),
    Case("min-all-nan", lambda x: x.min(), (7, 33), fill="nan", exact=True),
    Case("argmax-row-nan", lambda x: x.argmax(dim=1), (8, 1000), fill="nan", exact=True),
    Case("argmax-all-ties", lambda x: x.argmax(), (6, 7, 9), fill="ties", exact=True),
    Case("argmin-col", lambda x: x.argmin(dim=0), (50, 7), fill="ties", exact=True),
    Case("argmax-split-ties", lambda x: x.argmax(dim=-1), (2, 40000), fill="ties", plan="splits", exact=True),
    Case("argmin-col-split", lambda x: x.argmin(dim=0), (5000, 3), fill="ties", plan="splits", exact=True),
    Case("argmax-bf16", lambda x: x.argmax(dim=-1), (3, 700), torch.bfloat16, fill="ties", exact=True),
    # logsumexp, var/std, norms
    Case("logsumexp-row", lambda x: torch.logsumexp(x, dim=1), (6, 300), tol=1e-5),
    Case("logsumexp-col", lambda x: torch.logsumexp(x, dim=1, keepdim=True), (4, 5, 6)),
    Case("logsumexp-inf", lambda x: torch.logsumexp(x, dim=-1), (6, 50), fill="inf"),
    Case("logsumexp-split", lambda x: torch.logsumexp(x, dim=-1), (2, 40000), plan="splits"),
    Case("var", lambda x: torch.var(x, dim=1), (5, 300), tol=1e-4),
    Case("std-2dims", lambda x: torch.std(x, dim=(0, 2), correction=0, keepdim=True), (6, 5, 33), tol=1e-4),
    Case("var-all-split", lambda x: torch.var(x), (3, 30000), plan="splits", tol=1e-4),
    Case("var-mean", lambda x: torch.var_mean(x, dim=1), (5, 37, 19), tol=1e-4),
    Case("std-mean-col-split", lambda x: torch.std_mean(x, dim=0), (3000, 40), plan="splits", tol=1e-4),
    Case("norm2", lambda x: torch.linalg.vector_norm(x, ord=2, dim=1, keepdim=True), (32, 100)),
    Case("norm1", lambda x: torch.linalg.vector_norm(x, ord=1, dim=1), (32, 100)),
    Case("norm-inf-nan", lambda x: torch.linalg.vector_norm(x, ord=math.inf, dim=1), (32, 100), fill="nan"),
    Case("norm-neg-inf", lambda x: torch.linalg.vector_norm(x, ord=-math.inf, dim=1), (32, 100)),
    Case("norm0", lambda x: torch.linalg.vector_norm(x, ord=0, dim=0), (32, 10), fill="ties"),
    Case("norm3", lambda x: torch.linalg.vector_norm(x, ord=3.0, dim=-1), (8, 100), tol=1e-4),
    Case("frobenius", lambda x: torch.norm(x), (40, 50)),
    Case("norm-p-dim", lambda x: torch.norm(x, p=2, dim=1), (20, 64)),
    # softmax and log_softmax
    Case("softmax-warp", lambda x: torch.softmax(x, dim=-1), (7, 300), plan="registers tpr 32 vec 4"),
    Case("softmax-short-rows", lambda x: torch.softmax(x, dim=-1), (37, 32), plan="registers tpr 2 vec 4"),
    Case(
        "log-softmax-short-odd",
        lambda x: torch.log_softmax(x, dim=-1),
        (37, 45),
        plan="registers tpr 4 vec 1",  # sixteen scalars a thread, at least four threads
    ),
    Case("softmax-unaligned", lambda x: torch.softmax(x, dim=-1), (7, 301), plan="vec 1"),
    Case("softmax-256", lambda x: torch.softmax(x, dim=-1), (3, 5000), plan="registers tpr 256"),
    Case("softmax-512", lambda x: torch.softmax(x, dim=-1), (3, 12000), plan="registers tpr 512", tol=1e-4),
    Case("softmax-long", lambda x: torch.softmax(x, dim=-1), (2, 20000), plan="two passes", tol=1e-4),
    Case("softmax-col", lambda x: torch.softmax(x, dim=1), (4, 16, 5, 6), plan="cols"),
    Case("softmax-short", lambda x: torch.softmax(x, dim=-1), (9, 5), plan="cols"),
    Case("softmax-inf", lambda x: torch.softmax(x, dim=-1), (6, 64), fill="inf"),
    Case("softmax-transposed", lambda x: torch.softmax(x.transpose(0, 1), dim=-1), (40, 6)),
    # Strided rows, few of them (CLIP's cross entropy of logits.t()): a warp a row, not a thread.
    Case("log-softmax-transposed-rows", lambda x: torch.log_softmax(x.t(), dim=-1), (300, 200),
         plan="strided rows two passes tpr 32"),
    Case("softmax-transposed-rows", lambda x: torch.softmax(x.t(), dim=-1), (37, 53), plan="strided rows"),
    Case("softmax-fp16", lambda x: torch.softmax(x, dim=-1), (4, 1000), torch.float16, tol=1e-2),
    Case("softmax-bf16-long", lambda x: torch.softmax(x, dim=-1), (2, 20000), torch.bfloat16, tol=1e-2),
    Case("log-softmax", lambda x: torch.log_softmax(x, dim=-1), (7, 300)),
    Case("log-softmax-long", lambda x: torch.log_softmax(x, dim=1), (2, 20000), plan="two passes", tol=1e-4),
    Case("log-softmax-col", lambda x: torch.log_softmax(x, dim=1), (4, 16, 5, 6)),
    # _safe_softmax (scaled_dot_product_attention's math path): an all -inf row gives zeros
    Case("safe-softmax-inf", lambda x: torch.ops.aten._safe_softmax(x, -1), (6, 64), fill="inf", plan="registers"),
    Case("safe-softmax-long-inf", lambda x: torch.ops.aten._safe_softmax(x, -1), (3, 20000), fill="inf",
         plan="two passes", tol=1e-4),
    Case("safe-softmax-col-inf", lambda x: torch.ops.aten._safe_softmax(x, 1), (4, 16, 5, 6), fill="inf",
         plan="cols"),
    # scans
    Case("cumsum-warp", lambda x: torch.cumsum(x, dim=-1), (4, 100), plan="tpr 8 vec 4", tol=1e-4),
    Case("cumsum-short-rows", lambda x: torch.cumsum(x, dim=-1), (37, 24), plan="tpr 2 vec 4", tol=1e-4),
    Case("cumsum-short-odd", lambda x: torch.cumsum(x, dim=-1), (37, 13), plan="tpr 4 vec 1", tol=1e-4),
    Case("cumsum-256", lambda x: torch.cumsum(x, dim=1), (6, 1000), plan="tpr 256", tol=1e-4),
    Case("cumsum-512", lambda x: torch.cumsum(x, dim=1), (3, 10000), plan="tpr 512 vec 4", tol=1e-4),
    Case("cumsum-odd", lambda x: torch.cumsum(x, dim=1), (5, 999), plan="vec 1", tol=1e-4),
    Case("cumsum-col", lambda x: torch.cumsum(x, dim=0), (50, 33), plan="cols", tol=1e-4),
    Case("cumsum-inner", lambda x: torch.cumsum(x, dim=1), (4, 20, 7), plan="cols", tol=1e-4),
    Case("cumsum-exclusive-slice", lambda x: torch.cumsum(x[:, :-1], dim=1), (8, 513), tol=1e-4),
    Case("cumprod", lambda x: torch.cumprod(x, dim=-1), (4, 300), fill="near1", tol=1e-4),
    Case("cumprod-nan", lambda x: torch.cumprod(x, dim=1), (4, 40), fill="nan"),
    Case("cumsum-fp16", lambda x: torch.cumsum(x, dim=-1), (3, 700), torch.float16, tol=1e-2),
    Case("cumsum-bf16-to-fp32", _cumsum_f32, (3, 700), torch.bfloat16, tol=1e-4),
    # logcumsumexp (a Cox partial likelihood's risk sets): log-add-exp as ATen combines, -inf its
    # identity; -inf rows stay -inf, an inf sticks, NaN spreads
    Case("logcumsumexp", lambda x: torch.logcumsumexp(x, dim=-1), (4, 300), plan="rows", tol=1e-5),
    Case("logcumsumexp-wide", lambda x: torch.logcumsumexp(x, dim=-1), (4, 300), fill="wide", tol=1e-5),
    Case("logcumsumexp-inf", lambda x: torch.logcumsumexp(x, dim=1), (6, 64), fill="inf", tol=1e-5),
    Case("logcumsumexp-nan", lambda x: torch.logcumsumexp(x, dim=1), (4, 40), fill="nan", tol=1e-5),
    Case("logcumsumexp-col", lambda x: torch.logcumsumexp(x, dim=0), (512, 3), plan="cols", tol=1e-5),
    Case("logcumsumexp-fp16", lambda x: torch.logcumsumexp(x, dim=-1), (3, 700), torch.float16, tol=1e-2),
    # running extremes and where they were: a later equal value takes over, and any NaN, for good
    Case("cummax-ties", lambda x: torch.cummax(x, dim=-1), (9, 300), fill="ties", plan="a thread a line", exact=True),
    Case("cummin-nan-inner", lambda x: torch.cummin(x, dim=1), (5, 40, 3), fill="nan", exact=True),
    Case("cummax-values-col-inf", lambda x: torch.cummax(x, dim=0)[0], (50, 7), fill="inf", exact=True),
    Case("cummin-indices-fp16", lambda x: torch.cummin(x, dim=-1)[1], (4, 100), torch.float16, fill="ties",
         exact=True),
]


def _graph(case: Case, x: torch.Tensor) -> list[graph.Node]:
    return graph.trace_module(Fn(case.fn), [x])


def _emit(case: Case, name: str) -> tuple[kernels.Kernel, list[int]]:
    """The kernel, and which of the forward's results (tuple positions) its outputs are."""
    g = _graph(case, case.input(0))
    ops = [n for n in g if n["op"] in emit_reduce.EMITTERS]
    assert len(ops) == 1, (case.id, [n["op"] for n in g])
    # Results the forward does not return are dead, as the Planner would see them.
    returned = {ref_name(v) for v in next(n for n in g if n["op"] == "output")["args"]["values"]}
    live = {n["name"] for n in g if n["op"] != "getitem" or n["name"] in returned}
    k = kernels.context(g, ops[0]["name"], name, live=live)
    kernel = emit_reduce.EMITTERS[ops[0]["op"]](k)
    assert case.plan in kernel.ops[0], (case.id, kernel.ops)
    index = {n["name"]: n["args"]["index"] for n in g if n["op"] == "getitem"}
    return kernel, [index.get(a.name, 0) for a in kernel.outputs]


def _buffers(k: kernels.Kernel, ref: tuple[torch.Tensor, ...], device: str) -> list[torch.Tensor]:
    """NaN- or -7-poisoned outputs (every element must be written), then the scratch."""
    outs = []
    for arg, r in zip(k.outputs, ref, strict=True):
        dtype = getattr(torch, arg.dtype)
        assert dtype == r.dtype, (arg, r.dtype)
        outs.append(torch.full(r.shape, -7 if dtype == torch.int64 else math.nan, dtype=dtype, device=device))
    scratch = [torch.full((n,), math.nan, dtype=torch.float32, device=device) for _, n in k.scratch]
    return outs + scratch


def _check(case: Case, got: list[torch.Tensor], ref: tuple[torch.Tensor, ...]) -> None:
    """Indices and extrema exactly; the rest to case.tol, relative to each value and (a hundredth of
    it) to the largest finite result, where cancellation leaves small results with few digits."""
    for g, r in zip(got, ref, strict=False):
        g, r = g.cpu(), r.cpu()
        if not r.is_floating_point():
            assert torch.equal(g, r), (case.id, g, r)
            continue
        finite = r[r.isfinite()]
        scale = finite.abs().max().item() if finite.numel() else 1.0
        tol, atol = (0.0, 0.0) if case.exact else (case.tol, case.tol * scale * 1e-2)
        torch.testing.assert_close(
            g.double(), r.double(), rtol=tol, atol=atol, equal_nan=True, msg=lambda m: f"{case.id}: {m}"
        )


def _refs(case: Case, which: list[int], x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The reference results in the kernel's output order (results nobody reads are not written)."""
    ref = case.reference(x)
    return tuple(ref[i] for i in which) if len(ref) > 1 else ref


@pytest.fixture(scope="module")
def host_library(tmp_path_factory) -> tuple[list[tuple[kernels.Kernel, list[int]]], runtime.Library]:
    """Every case's kernel in one .cu, built once for the CPU entries."""
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv("STITCHCUDA_CACHE", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.setenv("STITCHCUDA_ARCH", "sm_90")
    monkeypatch.setenv(emit_reduce.TILE_ENV, "0")  # (module-scoped: before the autouse fixture)
    try:
        ks = [_emit(case, f"red{i}") for i, case in enumerate(CASES)]
        lib = kernels.library([k for k, _ in ks], tmp_path_factory.mktemp("reduce"))
    finally:
        monkeypatch.undo()
    return ks, lib


@needs_nvcc
@pytest.mark.parametrize("i", range(len(CASES)), ids=[c.id for c in CASES])
def test_host_matches_torch(host_library, i):
    ks, lib = host_library
    case, (k, which) = CASES[i], ks[i]
    for seed in (1, 2):
        x = case.input(seed)
        ref = _refs(case, which, x)
        bufs = _buffers(k, ref, "cpu")
        rc = lib._fn(f"{k.name}_host")(*(ctypes.c_void_p(t.data_ptr()) for t in [x, *bufs]), None)
        assert rc == 0
        _check(case, bufs[: len(k.outputs)], ref)


def _context(fn: Callable, x: torch.Tensor, op: str) -> kernels.EmitContext:
    g = graph.trace_module(Fn(fn), [x])
    return kernels.context(g, next(n["name"] for n in g if n["op"] == op), "k0")


@pytest.mark.parametrize(
    ("fn", "x", "op", "why"),
    [
        (lambda x: x.sum(dim=1, dtype=torch.float64), torch.randn(4, 5), "sum", "float64"),
        (lambda x: (x > 0).sum(dim=1), torch.randn(4, 5), "sum", "bool"),
        (lambda x: x.cumsum(dim=1), torch.arange(20).reshape(4, 5), "cumsum", "int64"),
        (lambda x: torch.max(x, torch.ones(5)), torch.randn(4, 5), "maximum", ""),
        (lambda x: x.sum(dim=1, dtype=torch.float16), torch.randn(4, 5), "sum", "float16"),
        (
            lambda x: torch.linalg.vector_norm(x, ord=math.nan, dim=1),
            torch.randn(4, 5),
            "linalg_vector_norm",
            "nan",
        ),
    ],
)
def test_refuses_what_it_does_not_handle(fn, x, op, why):
    if op not in emit_reduce.EMITTERS:
        assert op not in kernels.emitters()  # a pointwise op, not this family's
        return
    with pytest.raises(kernels.NotSupported, match=why):
        emit_reduce.EMITTERS[op](_context(fn, x, op))


def test_registered_and_reached_through_emit():
    table = kernels.emitters()
    for op in (
        "sum",
        "mean",
        "amax",
        "max",
        "argmin",
        "logsumexp",
        "var",
        "linalg_vector_norm",
        "_softmax",
        "cumsum",
        "logcumsumexp",
    ):
        assert table[op] is emit_reduce.EMITTERS[op]
    g = graph.trace_module(Fn(lambda x: x.argmax(dim=1)), [torch.randn(3, 4)])
    k = kernels.emit(g, "argmax", "k0")
    assert [a.dtype for a in k.outputs] == ["int64"] and k.host


def test_large_shapes_pick_parallel_plans():
    """KernelBench-sized operands (traced on fake tensors): the plans that keep an H100 busy."""
    want = {
        (lambda x: x.sum(dim=1), (128, 4096, 4095)): "cols",
        (lambda x: x.mean(), (32768, 32768)): "splits",
        (lambda x: torch.softmax(x, dim=1), (4096, 393216)): "two passes tpr 512 vec 4",
        (lambda x: torch.softmax(x, dim=-1), (1024, 8192)): "registers tpr 256 vec 4",
        (lambda x: torch.softmax(x, dim=1), (128, 128, 129, 129)): "cols",
        (lambda x: torch.cumsum(x, dim=1), (32768, 32768)): "tpr 512 vec 4",
        (lambda x: torch.linalg.vector_norm(x, dim=1, keepdim=True), (32768, 65535)): "tpr 512 vec 4",
    }
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode()
    for (fn, shape), plan in want.items():
        with mode:
            x = torch.empty(shape)
        g = graph.trace_module(Fn(fn), [x], fake_mode=mode)
        node = next(n for n in g if n["op"] in emit_reduce.EMITTERS)
        k = emit_reduce.EMITTERS[node["op"]](kernels.context(g, node["name"], "k0", target=H100))
        assert plan in k.ops[0], (shape, k.ops)


@pytest.mark.gpu
@needs_nvcc
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_matches_torch(tmp_path, monkeypatch):
    """The real launchers on CUDA tensors against torch on the same GPU."""
    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    ks = [_emit(case, f"red{i}") for i, case in enumerate(CASES)]
    _launchers_match_torch(CASES, ks, tmp_path)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


def test_min_dim_without_its_indices_carries_no_index():
    """Only the values read: the kernel reduces the value alone; both read: value and index."""
    values = next(c for c in CASES if c.id == "min-dim-values-only")
    kernel, _ = _emit(values, "k_values")
    assert "sc_red_ext<false, false>" in kernel.source and "sc_red_arg" not in kernel.source.split("// k_values")[1]
    both = Case("min-dim-both", lambda x: torch.min(x, dim=-1), (37, 128), plan="tpr 8 vec 4")
    kernel, _ = _emit(both, "k_both")
    assert "using k_both_op = sc_red_arg<false>;" in kernel.source


class _ScaledSoftmax(torch.nn.Module):
    """Attention's scores as a softmax reads them: a product by the scale, computed in both passes."""

    def forward(self, s):
        return (s * 0.17677669529663687).softmax(dim=-1)


@needs_nvcc
def test_a_softmax_subtracts_its_max_from_the_rounded_product(tmp_path):
    """nvcc fused the prologue's product with the max's subtraction (one FFMA: the unrounded product
    minus the max), while the first pass had counted the max element as exactly 1: at large scores
    each row's weights were off by exp(the product's rounding error), up to 6.4e-2 on the H200
    (bench/coverage's einsum attention on x1e3 inputs, 2026-11-30). In the sm_90 machine code the scale
    is an FMUL's operand, never an FFMA's (Hopper's opcodes with a 32-bit immediate: 0x820 FMUL,
    0x823 FFMA, the low 12 bits of an instruction's first word)."""
    import os
    import struct
    import subprocess

    from conftest import builtin_candidate

    from stitchcuda.agents.coder.model_new import CU_FILE

    cand = builtin_candidate(_ScaledSoftmax(), [torch.randn(64, 196)], host=False)
    assert "prologue mul (not stored)" in cand.files[CU_FILE]
    src, cubin = tmp_path / "k.cu", tmp_path / "k.cubin"
    src.write_text(cand.files[CU_FILE])
    includes = [f"-I{d}" for d in os.environ.get("STITCHCUDA_EXTRA_INCLUDE", "").split(os.pathsep) if d]
    done = subprocess.run([runtime.find_nvcc(), "-cubin", "-arch=sm_90", "-O3", "-std=c++17", *includes, str(src),
                           "-o", str(cubin)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    data, imm = cubin.read_bytes(), struct.pack("<f", 0.17677669529663687)
    ops: dict[int, int] = {}
    at = data.find(imm)
    while at != -1:
        op = struct.unpack_from("<Q", data, at - at % 16)[0] & 0xFFF
        ops[op] = ops.get(op, 0) + 1
        at = data.find(imm, at + 1)
    assert ops.get(0x820, 0) > 0 and ops.get(0x823, 0) == 0, {hex(k): v for k, v in ops.items()}


@needs_nvcc
@pytest.mark.parametrize("case", [c for c in CASES if c.id in ("sum-col", "max-dim-col", "argmin-col", "var-mean",
                                                                 "sum-transposed", "argmin-col-split")],
                         ids=lambda c: c.id)
def test_scalar_loads_batched_or_not_give_the_same_bits(tmp_path, monkeypatch, case):
    """The strided paths load SC_RED_US elements before reducing any (STITCHCUDA_RED_SCALAR_BATCH); each
    thread still meets its elements in the same order, so every result, ties' indices included, is
    the one-at-a-time loop's, bit for bit."""
    results = []
    for batch in ("1", "8"):
        monkeypatch.setenv("STITCHCUDA_RED_SCALAR_BATCH", batch)
        k, which = _emit(case, f"red_b{batch}")
        assert f"#define SC_RED_US {batch}" in k.source or f"#define SC_RED_US {batch}" in emit_reduce._header()
        lib = kernels.library([k], tmp_path / f"b{batch}")
        x = case.input(3)
        bufs = _buffers(k, _refs(case, which, x), "cpu")
        assert lib._fn(f"{k.name}_host")(*(ctypes.c_void_p(t.data_ptr()) for t in [x, *bufs]), None) == 0
        results.append(bufs[: len(k.outputs)])
    for one, eight in zip(*results, strict=True):
        torch.testing.assert_close(eight, one, rtol=0, atol=0, equal_nan=True)


@needs_nvcc
@pytest.mark.parametrize("shape", [(2, 5, 40, 64), (2, 3, 17, 40)])
def test_a_column_softmax_split_over_warps(tmp_path, monkeypatch, shape):
    """By default (STITCHCUDA_LAYOUT_SOFTMAX unset), a softmax over a middle dim with 32 or more
    neighbouring outputs (channels-last storage's softmax over W) runs its columns split over 8 warps:
    the device kernel builds for sm_90, and the host entry (one column at a time) matches torch.
    With the switch at 0: the thread-a-column plan, as before."""
    import subprocess

    g = graph.trace_module(Fn(lambda x: torch.softmax(x, dim=2)), [torch.randn(*shape)])
    monkeypatch.setenv(emit_reduce.LAYOUT_SOFTMAX_ENV, "0")
    assert kernels.emit(g, "_softmax", "k0").ops[0].endswith(", cols")
    monkeypatch.delenv(emit_reduce.LAYOUT_SOFTMAX_ENV)
    monkeypatch.setenv("STITCHCUDA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("STITCHCUDA_ARCH", "sm_90")
    k = kernels.emit(g, "_softmax", "k0")
    assert k.ops[0].endswith("cols split over 8 warps"), k.ops
    lib = kernels.library([k], tmp_path / "lib")
    x = torch.randn(*shape) * 4
    y = torch.empty_like(x)
    assert lib._fn("k0_host")(ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(y.data_ptr()), None) == 0
    torch.testing.assert_close(y, torch.softmax(x, dim=2), rtol=1e-5, atol=1e-6)
    src = next((tmp_path / "lib").rglob("*.cu"), None) or (tmp_path / "k.cu")
    if not src.exists():
        src.write_text(k.source)
    done = subprocess.run([runtime.find_nvcc(), "-cubin", "-arch=sm_90", "-O3", "-std=c++17", str(src), "-o",
                           str(tmp_path / "k.cubin")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert b"sc_softmax_cols_split" in (tmp_path / "k.cubin").read_bytes()


def _launchers_match_torch(cases: list[Case], ks: list[tuple[kernels.Kernel, list[int]]], folder) -> None:
    """The kernels built in one library, each real launcher run on CUDA tensors of two seeds against torch
    on the same GPU."""
    lib = kernels.library([k for k, _ in ks], folder)
    for case, (k, which) in zip(cases, ks, strict=True):
        for seed in (3, 4):
            x = case.input(seed).cuda()
            ref = _refs(case, which, x)
            bufs = _buffers(k, ref, "cuda")
            lib.call(k.name, x, *bufs)
            torch.cuda.synchronize()
            _check(case, bufs[: len(k.outputs)], ref)


def _host_entries_match_torch(cases: list[Case], ks: list[tuple[kernels.Kernel, list[int]]], folder) -> None:
    """The kernels built in one library, each host entry run on two seeds' inputs against torch."""
    lib = kernels.library([k for k, _ in ks], folder)
    for case, (k, which) in zip(cases, ks, strict=True):
        for seed in (1, 2):
            x = case.input(seed)
            ref = _refs(case, which, x)
            bufs = _buffers(k, ref, "cpu")
            assert lib._fn(f"{k.name}_host")(*(ctypes.c_void_p(t.data_ptr()) for t in [x, *bufs]), None) == 0
            _check(case, bufs[: len(k.outputs)], ref)


STRIP_CASES = [
    Case("strips-sum", lambda x: x.sum(dim=1), (3, 40, 300), plan="strips of 2 columns a thread, 2 splits"),
    Case("strips-mean-cancel", lambda x: x.mean(dim=1), (2, 112, 1000), fill="cancel0", exact_ref=True,
         plan="strips of 4 columns a thread, 7 splits"),
    Case("strips-argmax-ties", lambda x: x.argmax(dim=1), (2, 64, 257), fill="ties", exact=True, plan="strips of 2"),
    Case("strips-max-nan", lambda x: torch.max(x, dim=1), (2, 50, 260), fill="nan", exact=True, plan="strips"),
    Case("strips-amin-one-batch", lambda x: x.amin(dim=0), (40, 513), fill="wide", exact=True,
         plan="strips of 3 columns a thread, 2 splits"),
    Case("strips-sliced", lambda x: x[1:].sum(dim=1), (3, 32, 300), plan="strips"),
    Case("strips-var", lambda x: torch.var(x, dim=1), (2, 40, 300), tol=1e-4, plan="strips"),
    Case("strips-bf16", lambda x: x.sum(dim=1), (2, 40, 300), torch.bfloat16, tol=1e-2, plan="strips"),
    Case("strips-4096-wide", lambda x: x.sum(dim=1), (1, 16, 4095), plan="strips of 16 columns a thread"),
]


@needs_nvcc
def test_column_strips_match_torch(tmp_path, monkeypatch):
    """STITCHCUDA_RED_STRIPS=1: a reduction over the middle of [outer, R, inner] with inner at least a
    block wide reads whole rows, each thread keeping the states of several columns and the rows split
    over blocks; the kernels build for sm_90 and their host entries match torch (indices and extrema
    exactly, ties to the lowest index, NaN propagated). Off, the same shapes keep the thread-a-column
    plan; narrower or not whole layouts keep it with the switch on."""
    monkeypatch.setenv("STITCHCUDA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("STITCHCUDA_ARCH", "sm_90")
    assert "cols" in _emit(Case("off", lambda x: x.sum(dim=1), (3, 40, 300), plan="cols"), "k_off")[0].ops[0]
    monkeypatch.setenv(emit_reduce.STRIPS_ENV, "1")
    for narrow in (Case("narrow", lambda x: x.sum(dim=1), (5, 37, 19), plan="cols"),
                   Case("strided", lambda x: x[:, ::2].sum(dim=1), (3, 80, 300), plan="cols")):
        _emit(narrow, "k_narrow")
    ks = [_emit(case, f"strip{i}") for i, case in enumerate(STRIP_CASES)]
    _host_entries_match_torch(STRIP_CASES, ks, tmp_path / "lib")


def test_kernelbench_column_reductions_take_strips_when_on(monkeypatch):
    """Level 1's 47-53 ([128, 4096, 4095] over dim 1, traced on fake tensors) on the H100's 132
    multiprocessors: 16 columns a thread, 32 splits of 128 rows (33 wanted, each rounded up to 16 rows)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    monkeypatch.setenv(emit_reduce.STRIPS_ENV, "1")
    mode = FakeTensorMode()
    with mode:
        x = torch.empty(128, 4096, 4095)
    for fn in (lambda x: x.sum(dim=1), lambda x: x.argmin(dim=1), lambda x: torch.max(x, dim=1)[0]):
        g = graph.trace_module(Fn(fn), [x], fake_mode=mode)
        node = next(n for n in g if n["op"] in emit_reduce.EMITTERS)
        k = emit_reduce.EMITTERS[node["op"]](kernels.context(g, node["name"], "k0", target=H100))
        assert "strips of 16 columns a thread, 32 splits" in k.ops[0], k.ops


@pytest.mark.gpu
@needs_nvcc
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_column_strips_on_the_gpu(tmp_path, monkeypatch):
    """The strips' real launchers on CUDA tensors against torch on the same GPU, on the small cases
    and on one KernelBench-deep column reduction (splits over blocks, partial states merged)."""
    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    monkeypatch.setenv(emit_reduce.STRIPS_ENV, "1")
    cases = [*STRIP_CASES, Case("strips-deep-argmin", lambda x: x.argmin(dim=1), (4, 2048, 1500), fill="ties",
                                exact=True, plan="strips of 6 columns a thread")]
    ks = [_emit(case, f"gstrip{i}") for i, case in enumerate(cases)]
    _launchers_match_torch(cases, ks, tmp_path)


TILE_IDS = ("sum-col", "mean-cancelling-cols", "mean-col-split", "max-dim-col", "argmin-col",
            "argmin-col-split", "std-mean-col-split")


TILE_SHAPES = {"8": "tiles of 32 columns by 8 warps, 4 states a column",
               "16x2w2": "tiles of 64 columns by 16 warps, 2 states a column",
               "8x2w4": "tiles of 128 columns by 8 warps, 2 states a column",
               "4x1w4": "tiles of 128 columns by 4 warps, 1 states a column"}


@needs_nvcc
@pytest.mark.parametrize("shape", list(TILE_SHAPES))
def test_column_tiles_match_torch(tmp_path, monkeypatch, shape):
    """STITCHCUDA_RED_TILE=BY or BYxVTwCW: column reductions run as tiles of 32 x CW columns by BY
    warps, each warp a share of the rows with VT states a column, merged in the thread and then in
    shared memory (the splits' partial states as before). The kernels build for sm_90, and their host
    entries (each column's parts merged in the kernel's order) match torch: indices and extrema
    exactly, ties to the lowest index, NaN propagated, cancelling sums within the case's tolerance;
    columns past the end and split ranges shorter than the rest included. Row reductions keep their
    plan with the switch on."""
    monkeypatch.setenv("STITCHCUDA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("STITCHCUDA_ARCH", "sm_90")
    monkeypatch.setenv(emit_reduce.TILE_ENV, shape)
    cases = [dataclasses.replace(c, plan=TILE_SHAPES[shape]) for c in CASES if c.id in TILE_IDS]
    assert len(cases) == len(TILE_IDS)
    ks = [_emit(case, f"tile{i}") for i, case in enumerate(cases)]
    for case, (k, _) in zip(cases, ks, strict=True):
        assert TILE_SHAPES[shape] in k.ops[0], (case.id, k.ops)
    row = next(c for c in CASES if c.id == "sum-row-warp")
    assert "tpr 32 vec 4" in _emit(row, "tile_row")[0].ops[0]
    _host_entries_match_torch(cases, ks, tmp_path / "lib")


def test_kernelbench_column_reductions_take_tiles_when_on(monkeypatch):
    """Level 1's 47-53 ([128, 4096, 4095] over dim 1, on fake tensors) on the H100: 16,380 tiles of 32
    columns by 16 warps, no splits (the columns alone fill the GPU); an unknown width is refused."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    monkeypatch.setenv(emit_reduce.TILE_ENV, "16")
    mode = FakeTensorMode()
    with mode:
        x = torch.empty(128, 4096, 4095)
    # Values and indices (16 bytes: argmin, and max.dim with both of its results live here) with no
    # register cap; a sum capped for 4 blocks an SM.
    for fn, minb in ((lambda x: x.sum(dim=1), 4), (lambda x: x.argmin(dim=1), 1), (lambda x: torch.max(x, dim=1)[0], 1)):
        g = graph.trace_module(Fn(fn), [x], fake_mode=mode)
        node = next(n for n in g if n["op"] in emit_reduce.EMITTERS)
        k = emit_reduce.EMITTERS[node["op"]](kernels.context(g, node["name"], "k0", target=H100))
        assert k.ops[0].endswith("tiles of 32 columns by 16 warps, 4 states a column"), k.ops
        assert f"sc_red_tile<k0_op, k0_ix, 16, 4, 1, {minb}><<<16380, 512, 0, stream>>>" in k.source, k.ops
    monkeypatch.setenv(emit_reduce.TILE_ENV, "16x2w2")
    k = emit_reduce.EMITTERS[node["op"]](kernels.context(g, node["name"], "k0", target=H100))
    assert "sc_red_tile<k0_op, k0_ix, 16, 2, 2, 1><<<8190, 512, 0, stream>>>" in k.source
    # The register cap follows the target's threads an SM (1,536 on an sm_86 or sm_89: three blocks).
    g = graph.trace_module(Fn(lambda x: x.sum(dim=1)), [x], fake_mode=mode)
    node = next(n for n in g if n["op"] in emit_reduce.EMITTERS)
    small = dataclasses.replace(H100, max_threads_per_sm=1536)
    k = emit_reduce.EMITTERS[node["op"]](kernels.context(g, node["name"], "k0", target=small))
    assert "sc_red_tile<k0_op, k0_ix, 16, 2, 2, 3><" in k.source
    for bad in ("12", "16x3w2", "16x2", "x"):
        monkeypatch.setenv(emit_reduce.TILE_ENV, bad)
        with pytest.raises(ValueError, match="BY or BYxVTwCW"):
            emit_reduce.EMITTERS[node["op"]](kernels.context(g, node["name"], "k0", target=H100))


@pytest.mark.gpu
@needs_nvcc
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_column_tiles_on_the_gpu(tmp_path, monkeypatch):
    """The tiles' real launchers on CUDA tensors against torch on the same GPU, on the small cases and
    one KernelBench-deep column reduction with ties."""
    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    for shape in ("16", "16x2w2"):
        monkeypatch.setenv(emit_reduce.TILE_ENV, shape)
        cases = [*(dataclasses.replace(c, plan="tiles of") for c in CASES if c.id in TILE_IDS),
                 Case("tile-deep-argmin", lambda x: x.argmin(dim=1), (4, 2048, 1500), fill="ties", exact=True,
                      plan="tiles of")]
        ks = [_emit(case, f"gtile{shape}{i}") for i, case in enumerate(cases)]
        _launchers_match_torch(cases, ks, tmp_path / shape)


def test_column_tiles_by_default(monkeypatch):
    """With STITCHCUDA_RED_TILE unset, a column reduction takes tiles, shaped by its state's size:
    16 warps x 2 states x 2 columns for a sum or a max (at most 8 bytes), 16 warps x 4 states x 1 column
    for argmin's value and index. These keep their own plans: one with too few rows for two rounds of
    a warp's loads, one whose columns need splits to fill the GPU (level 2's 8192 x 8192 column sums,
    where the tiles lost on the H100), one over several dims, one with fewer contiguous columns than a
    tile is wide (a tile's row would span batches), and a row reduction."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    monkeypatch.delenv(emit_reduce.TILE_ENV)
    mode = FakeTensorMode()
    with mode:
        deep, shallow, rows = torch.empty(64, 1024, 300), torch.empty(64, 40, 300), torch.empty(300, 1024)
        few, multi, narrow = torch.empty(1, 8192, 8192), torch.empty(64, 32, 300, 32, 4), torch.empty(8192, 200, 16)
    want = {"sum": "tiles of 64 columns by 16 warps, 2 states a column",
            "amax": "tiles of 64 columns by 16 warps, 2 states a column",
            "argmin": "tiles of 32 columns by 16 warps, 4 states a column"}
    for name, fn in (("sum", lambda x: x.sum(dim=1)), ("amax", lambda x: x.amax(dim=1)),
                     ("argmin", lambda x: x.argmin(dim=1))):
        for x, plan in ((deep, want[name]), (shallow, "cols"), (rows, "tpr"), (few, "cols, "), (multi, "cols"),
                         (narrow, "cols")):
            if x is multi:  # dims 1 and 3 of five, which no layout merges (a sum or a max: argmin takes one)
                if name == "argmin":
                    continue
                g = graph.trace_module(Fn(lambda x, name=name: getattr(x, name)(dim=(1, 3))), [x], fake_mode=mode)
            else:
                g = graph.trace_module(Fn(fn), [x], fake_mode=mode)
            node = next(n for n in g if n["op"] in emit_reduce.EMITTERS)
            k = emit_reduce.EMITTERS[node["op"]](kernels.context(g, node["name"], "k0", target=H100))
            assert plan in k.ops[0], (name, tuple(x.shape), k.ops)
