"""The fused attention emitter (emit_attention.py, cuda/attention.cuh): modules written by hand are
traced and planned, the Planner's sc_attention node is emitted, and the kernels are checked against
PyTorch: on the CPU through their host entries (the chain's meaning: scale, masks, causal, operand
strides; every case in one nvcc build), with nvcc for sm_80 and sm_90 in each dtype, and where a GPU
is present through the real launchers against torch's own attention."""

from __future__ import annotations

import ctypes
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import needs_nvcc

from stitchcuda import runtime
from stitchcuda.agents import graph
from stitchcuda.agents.coder import emit_attention, kernels
from stitchcuda.agents.coder.codegen import render
from stitchcuda.agents.plan import planner
from stitchcuda.target import Target

H100 = Target.named("h100")
A100 = Target.named("a100")

pytestmark = pytest.mark.usefixtures("isolated_cache", "fused_attention_on")


class Attn(nn.Module):
    """forward(q, k, v, *extra) = fn(q, k, v, *extra); extra tensors are masks."""

    def __init__(self, fn: Callable):
        super().__init__()
        self.fn = fn

    def forward(self, q, k, v, *extra):
        return self.fn(q, k, v, *extra)


def _plain(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1) * (1.0 / math.sqrt(q.shape[-1])), dim=-1) @ v


def _masked_fill(q, k, v, m):
    att = (q @ k.transpose(-2, -1)) / math.sqrt(k.shape[-1])
    return F.softmax(att.masked_fill(m == 0, float("-inf")), dim=-1) @ v


def _additive(q, k, v, m):
    return torch.softmax(torch.matmul(q, k.transpose(-1, -2)) * 0.3 + m, dim=-1) @ v


def _heads(q, k, v):
    """q, k, v given as [B, S, H·D]: the heads are strided views, read in place."""
    b, s, hd = q.shape
    h = 2
    qh, kh, vh = (t.view(b, -1, h, hd // h).transpose(1, 2) for t in (q, k, v))
    att = F.softmax((qh @ kh.transpose(-2, -1)) * 0.25, dim=-1)
    return (att @ vh).transpose(1, 2).reshape(b, s, hd)


def _multi_query(q, k, v):
    """One key and value head shared by every query head (multi-query attention), as an expand."""
    b, h, s, d = q.shape
    kk, vv = k.expand(b, h, *k.shape[2:]), v.expand(b, h, *v.shape[2:])
    return torch.softmax(q @ kk.transpose(-2, -1) / math.sqrt(d), dim=-1) @ vv


def _key_padding(q, k, v, pad):
    """A [B, Sk] key padding mask broadcast over heads and queries, filled before the scale."""
    att = (q @ k.transpose(-2, -1)).masked_fill(pad[:, None, None, :], float("-inf"))
    return torch.softmax(att / math.sqrt(q.shape[-1]), dim=-1) @ v


def _sam_relpos(q, k, v, table_h, table_w):
    """SAM's ViTDet attention over a 4 x 5 window: the decomposed relative positions are made from q
    (einsum with tables [q_h, k_h, D] and [q_w, k_w, D]) and added to the scores viewed as
    [B·H, q_h, q_w, k_h, k_w]; the terms are read through the einsums' permuted results."""
    b, h, s, d = q.shape
    att = (q * d ** -0.5) @ k.transpose(-2, -1)
    r_q = q.reshape(b * h, 4, 5, d)
    rel_h = torch.einsum("bhwc,hkc->bhwk", r_q, table_h)
    rel_w = torch.einsum("bhwc,wkc->bhwk", r_q, table_w)
    att = (att.view(b * h, 4, 5, 4, 5) + rel_h[:, :, :, :, None] + rel_w[:, :, :, None, :]).view(b, h, s, s)
    return att.softmax(dim=-1) @ v


def _flat_bias(q, k, v, bias):
    """A bias over each head's scores flattened ([B, H, Sq·Sk]): no split into query and key dims,
    so the kernel finds the bias from the score's flat index."""
    b, h, sq, _ = q.shape
    att = (q @ k.transpose(-2, -1)).view(b, h, -1) + bias
    return torch.softmax(att.view(b, h, sq, -1) * 0.25, dim=-1) @ v


def _tril_regrouped(q, k, v):
    """tril of ones over the scores viewed as [B, H, Sq/2, 2, Sk]: not causal (query i keeps keys up
    to i % 2), so it must stay a mask, not become the kernel's causal step."""
    b, h, sq, sk = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
    keep = torch.tril(torch.ones(2, sk, dtype=torch.bool))
    att = (q @ k.transpose(-2, -1)).view(b, h, sq // 2, 2, sk).masked_fill(~keep, float("-inf"))
    return torch.softmax(att.view(b, h, sq, sk), dim=-1) @ v


@dataclass
class Case:
    id: str
    fn: Callable
    shapes: list[tuple[int, ...]]  # q, k, v
    dtype: torch.dtype = torch.float32
    extra: list[torch.Tensor] = field(default_factory=list)  # masks, as given to forward
    note: str = ""  # a word the kernel's note must hold
    tol: float = 1e-4

    def inputs(self, seed: int) -> list[torch.Tensor]:
        g = torch.Generator().manual_seed(seed)
        return [torch.randn(s, generator=g).to(self.dtype) for s in self.shapes] + list(self.extra)

    def reference(self, ins: list[torch.Tensor]) -> torch.Tensor:
        """torch on fp32 copies of the inputs, rounded once to the case's dtype."""
        wide = [t.float() if t.is_floating_point() else t for t in ins]
        return self.fn(*wide).to(self.dtype)


_G = torch.Generator().manual_seed(7)
_BOOL_MASK = torch.rand(37, 45, generator=_G) > 0.3
_BOOL_MASK[:, 0] = True  # every row keeps a key
_ROW_MASKED = torch.ones(1, 1, 20, 20)
_ROW_MASKED[0, 0, 3] = 0  # row 3 sees nothing: NaN from softmax
_FLOAT_MASK = torch.randn(2, 1, 33, 50, generator=_G)
_KEY_PADDING = torch.zeros(2, 45, dtype=torch.bool)
_KEY_PADDING[0, -7:] = True
_KEY_PADDING[1, 30:] = True

CASES = [
    Case("plain", _plain, [(2, 3, 37, 64), (2, 3, 45, 64), (2, 3, 45, 64)], note="scale"),
    Case("plain-3d", _plain, [(5, 70, 32), (5, 70, 32), (5, 70, 32)]),
    Case("dv-differs", _plain, [(2, 19, 40), (2, 33, 40), (2, 33, 24)]),
    Case("head-128", _plain, [(1, 2, 65, 128), (1, 2, 65, 128), (1, 2, 65, 128)]),
    Case("sdpa", lambda q, k, v: F.scaled_dot_product_attention(q, k, v), [(2, 2, 50, 64)] * 3),
    Case("sdpa-causal", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
         [(2, 2, 77, 64)] * 3, note="causal tiles skipped"),
    Case("sdpa-causal-rect", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
         [(1, 2, 30, 16), (1, 2, 90, 16), (1, 2, 90, 16)], note="causal"),
    Case("sdpa-bool-mask", lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
         [(2, 37, 32), (2, 45, 32), (2, 45, 32)], extra=[_BOOL_MASK], note="add"),
    Case("sdpa-float-mask-scale",
         lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=0.2),
         [(2, 3, 33, 16), (2, 3, 50, 16), (2, 3, 50, 16)], extra=[_FLOAT_MASK], note="add"),
    Case("masked-fill-buffer", _masked_fill, [(1, 1, 20, 8)] * 3, extra=[_ROW_MASKED], note="masked tiles skipped"),
    Case("additive", _additive, [(2, 3, 33, 16), (2, 3, 50, 16), (2, 3, 50, 16)], extra=[_FLOAT_MASK]),
    Case("heads-in-place", _heads, [(2, 41, 64)] * 3),
    Case("k-given-transposed", lambda q, kt, v: torch.softmax(q @ kt, dim=-1) @ v,
         [(3, 21, 16), (3, 16, 29), (3, 29, 16)]),
    Case("multi-query", _multi_query, [(2, 4, 40, 32), (2, 1, 40, 32), (2, 1, 40, 32)], note="scale"),
    Case("key-padding", _key_padding, [(2, 3, 37, 32), (2, 3, 45, 32), (2, 3, 45, 32)], extra=[_KEY_PADDING],
         note="fill"),
    Case("sam-relpos", _sam_relpos, [(2, 3, 20, 32)] * 3, note="add add",
         extra=[torch.randn(4, 4, 32, generator=_G), torch.randn(5, 5, 32, generator=_G)]),
    Case("flat-bias", _flat_bias, [(2, 3, 12, 16), (2, 3, 18, 16), (2, 3, 18, 16)], note="add",
         extra=[torch.randn(12 * 18, generator=_G)]),
    Case("tril-regrouped", _tril_regrouped, [(1, 2, 20, 16), (1, 2, 24, 16), (1, 2, 24, 16)], note="fill"),
    Case("fp16", _plain, [(2, 2, 70, 64)] * 3, torch.float16, note="tensor cores", tol=2e-2),
    Case("bf16", _plain, [(2, 2, 70, 64)] * 3, torch.bfloat16, note="tensor cores", tol=3e-2),
    Case("fp16-causal", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
         [(1, 2, 100, 128)] * 3, torch.float16, tol=2e-2),
    Case("bf16-head-80", _plain, [(1, 3, 45, 80)] * 3, torch.bfloat16, tol=3e-2),
]


def _trace(case: Case, ins: list[torch.Tensor]) -> list[graph.Node]:
    return graph.trace_module(Attn(case.fn), ins)


def _emit(case: Case, name: str, precise: int = kernels.PRECISE_TF32, target: Target = H100) -> kernels.Kernel:
    p = planner.plan_graph(_trace(case, case.inputs(0)), target=target)
    nodes = [n for n in p.graph if n["op"] == emit_attention.OP]
    assert len(nodes) == 1, (case.id, p.unsupported, [n["op"] for n in p.graph])
    k = kernels.emit(p.graph, nodes[0]["name"], name, precise=precise, target=target)
    assert case.note in k.ops[0], (case.id, k.ops)
    return k


def _values(case: Case, ins: list[torch.Tensor], k: kernels.Kernel) -> list[torch.Tensor]:
    """The kernel's inputs: graph inputs by name, and what the Planner materialises (a mask's
    `== 0`, computed here as torch would)."""
    g = _trace(case, ins)
    named = {n["name"]: ins[n["index"]] for n in g if n["op"] == "input" and n.get("kind") == "arg"}
    out = []
    for a in k.inputs:
        if a.name not in named:  # a pointwise op feeding a mask: evaluate the traced graph up to it
            named[a.name] = _evaluate(g, a.name, named)
        out.append(named[a.name].contiguous())
    return out


def _evaluate(g: list[graph.Node], name: str, values: dict[str, torch.Tensor]) -> torch.Tensor:
    """A node's value from its inputs by replaying the traced aten ops (for materialised masks)."""
    nodes = graph.by_name(g)
    env = dict(values)

    def value(n: str) -> torch.Tensor:
        if n not in env:
            node = nodes[n]
            space, _, overload = node["target"].partition(".")[2].partition(".")
            fn = getattr(getattr(torch.ops.aten, space), overload)
            args = {k: (value(graph.ref_name(v)) if graph.ref_name(v) else v) for k, v in node["args"].items()}
            if isinstance(args.get("dtype"), str):  # the graph spells dtypes, layouts and devices as text
                args["dtype"] = getattr(torch, args["dtype"])
            if isinstance(args.get("memory_format"), str):
                args["memory_format"] = getattr(torch, args["memory_format"].removeprefix("torch."))
            args.update({k: None for k in ("layout", "device") if k in args})
            env[n] = fn(**args)
        return env[n]

    return value(name)


def _check(case: Case, got: torch.Tensor, want: torch.Tensor, tol: float | None = None) -> None:
    tol = case.tol if tol is None else tol
    got = got.reshape(want.shape).double()
    scale = want.double().nan_to_num().abs().max().item() + 1.0
    torch.testing.assert_close(got, want.double(), rtol=tol, atol=tol * scale, equal_nan=True,
                               msg=lambda m: f"{case.id}: {m}")


# (case index, precise) for every host build: fp32 cases at both precision levels.
HOST = [(i, 0) for i in range(len(CASES))] + [
    (i, kernels.PRECISE_FP32) for i, c in enumerate(CASES) if c.dtype == torch.float32
]


@pytest.fixture(scope="module")
def host_library(tmp_path_factory) -> tuple[list[kernels.Kernel], runtime.Library]:
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv("STITCHCUDA_CACHE", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.setenv("STITCHCUDA_ARCH", "sm_90")
    try:
        ks = [_emit(CASES[i], f"att{n}", precise) for n, (i, precise) in enumerate(HOST)]
        lib = kernels.library(ks, tmp_path_factory.mktemp("attention"))
    finally:
        monkeypatch.undo()
    return ks, lib


@needs_nvcc
@pytest.mark.parametrize("n", range(len(HOST)), ids=[f"{CASES[i].id}-p{p}" for i, p in HOST])
def test_host_matches_torch(host_library, n):
    ks, lib = host_library
    case, k = CASES[HOST[n][0]], ks[n]
    for seed in (1, 2):
        ins = case.inputs(seed)
        want = case.reference(ins)
        out = torch.full((want.numel(),), math.nan, dtype=getattr(torch, k.outputs[0].dtype))
        args = _values(case, ins, k)
        rc = lib._fn(f"{k.name}_host")(*(ctypes.c_void_p(t.data_ptr()) for t in [*args, out]), None)
        assert rc == 0
        if case.id == "heads-in-place":  # the kernel writes [B·H, S, D]; the forward moves heads back
            out = out.view(2, 2, 41, 32).transpose(1, 2).reshape(want.shape)
        _check(case, out, want)


def test_masked_row_is_nan_as_softmax_gives_it(host_library):
    """_softmax of a row with every score -inf is NaN in torch, and in the kernel; the test above
    compares with equal_nan, this one makes sure the case really has such a row."""
    case = next(c for c in CASES if c.id == "masked-fill-buffer")
    assert case.reference(case.inputs(1)).isnan().any()


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_compiles_for_each_arch_and_dtype(arch, tmp_path):
    """Every dtype and path (tensor cores, TF32, fp32 FMA) with nvcc for the A100's and H100's arch,
    tiles sized for that GPU."""
    target = A100 if arch == "sm_80" else H100
    picks = [c for c in CASES if c.id in ("plain", "fp16", "bf16", "fp16-causal", "head-128", "sdpa-bool-mask")]
    ks = [_emit(c, f"a{i}", target=target) for i, c in enumerate(picks)]
    ks.append(_emit(CASES[0], "afma", precise=kernels.PRECISE_FP32, target=target))
    ks.append(_emit(CASES[0], "asplit", precise=kernels.PRECISE_SPLIT, target=target))
    assert "fp32 FMA, no TF32" in ks[-2].ops[0] and "TF32 tensor cores" in ks[0].ops[0]
    assert "3xTF32 scores" in ks[-1].ops[0]
    path = tmp_path / "attention.cu"
    path.write_text("\n".join([render([], after=[k.source for k in ks]), *(k.source for k in ks)]))
    runtime.build([path], arch=arch)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_tiles_fit_the_target(dtype):
    """Tiles shrink to the target's shared memory, on both paths; a head too large for the tensor
    cores' registers is refused, so the Planner leaves the chain on its library path."""
    for target in (A100, H100):
        for d in (16, 64, 80, 128):
            for tc, split in ((True, False), (True, dtype == "float32"), (False, False)):
                br, bc = emit_attention.tile(dtype, d, d, tc, target, split_qk=split)
                assert emit_attention.smem_bytes(dtype, br, bc, d, d, tc, split) <= target.shared_per_block_optin
            assert emit_attention.refusal(dtype, d, d, target) is None
    assert emit_attention.tile(dtype, 64, 64, True, H100) == (128, 64)
    # 128 query rows only while the grid still fills the GPU's SMs.
    assert emit_attention.tile(dtype, 64, 64, True, H100, blocks=H100.sm_count - 1) == (64, 64)
    assert "past 128" in emit_attention.refusal(dtype, 256, 256, H100)
    assert "sm_80" in emit_attention.refusal(dtype, 64, 64, Target.named("t4"))


def test_tiles_keep_the_most_warps_resident_then_the_tallest():
    """Level 3's MinGPT (head 96, fp32 with 3xTF32 tails): 128 rows fit one block of 8 warps an SM,
    64 rows one block of 4; the taller tile keeps more warps (5.16 ms on the H200 with 64 rows)."""
    assert emit_attention.tile("float32", 96, 96, True, H100, blocks=4096, split_qk=True) == (128, 64)
    one = emit_attention.smem_bytes("float32", 64, 64, 96, 96, True, True)
    assert H100.shared_per_sm // one == 1  # (why 64 rows lose here)
    # Swin's 49-query windows: not a 128-row tile three fifths empty, though the grid is large.
    assert emit_attention.tile("float32", 32, 32, True, H100, blocks=3072, split_qk=True, rows=49) == (64, 64)
    # Two m tiles a warp up to a head of 64 (they share each K and V fragment), one past it.
    assert emit_attention.warp_tiles(64, True, H100) == 2 and emit_attention.warp_tiles(96, True, H100) == 1
    assert emit_attention.warp_tiles(64, False, H100) == 1
    # ...where the grid gives every SM four blocks: a small grid keeps its warps (gpt2's 192 blocks).
    assert emit_attention.warp_tiles(64, True, H100, blocks=192) == 1
    assert emit_attention.warp_tiles(32, True, H100, blocks=1024) == 2


def test_tensor_core_rows_spread_over_the_banks():
    """A fragment load reads 8 rows x 4 words: a row 16 bytes past a multiple of 128 puts them in 32
    distinct banks (attention.cuh's tc_ld), for every head size and dtype."""
    for size in (2, 4):
        for d in (8, 16, 32, 40, 64, 80, 96, 128):
            words = (-(-d * size // 128) * 128 + 16) // 4
            banks = {(g * words + t) % 32 for g in range(8) for t in range(4)}
            assert len(banks) == 32, (size, d)


def test_refuses_other_dtypes():
    assert "float64" in emit_attention.refusal("float64", 64, 64, H100)


# ---------------------------------------------------------------------------------------------
# GPU: the real launcher against torch's attention


GPU_SHAPES = [(2, 4, 128, 64), (1, 3, 77, 64), (2, 2, 200, 128), (3, 1, 33, 32)]


def _gpu_case(dtype: torch.dtype, causal: bool, shape: tuple[int, ...]) -> Case:
    return Case(f"gpu-{dtype}-{causal}-{shape}",
                lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal), [shape] * 3, dtype,
                tol={torch.float32: 1e-2, torch.float16: 2e-2, torch.bfloat16: 4e-2}[dtype])


def _run_gpu(case: Case, k: kernels.Kernel, lib: runtime.Library, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    ins = case.inputs(seed)
    args = [t.cuda() for t in _values(case, ins, k)]
    want = case.fn(*[t.cuda() for t in ins])
    out = torch.full((want.numel(),), math.nan, dtype=getattr(torch, k.outputs[0].dtype), device="cuda")
    lib.call(k.name, *args, out)
    torch.cuda.synchronize()
    return out.cpu(), want.cpu()


@pytest.mark.gpu
@needs_nvcc
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_gpu_matches_torch_sdpa(dtype, causal, tmp_path, monkeypatch):
    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    target = Target.current()
    cases = [_gpu_case(dtype, causal, s) for s in GPU_SHAPES]
    ks = [_emit(c, f"g{i}", target=target) for i, c in enumerate(cases)]
    lib = kernels.library(ks, Path(tmp_path))
    for case, k in zip(cases, ks, strict=True):
        for seed in (3, 4):
            got, want = _run_gpu(case, k, lib, seed)
            _check(case, got, want)


@pytest.mark.gpu
@needs_nvcc
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_fp32_fma_is_fp32_exact(tmp_path, monkeypatch):
    """After a wrong result (PRECISE_FP32): no TF32 anywhere, as close as torch's fp32 attention."""
    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    target = Target.current()
    case = _gpu_case(torch.float32, True, (2, 2, 150, 64))
    k = _emit(case, "gf", precise=kernels.PRECISE_FP32, target=target)
    lib = kernels.library([k], Path(tmp_path))
    got, want = _run_gpu(case, k, lib, 5)
    _check(case, got, want, tol=1e-4)


@pytest.mark.gpu
@needs_nvcc
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("causal", [False, True])
def test_gpu_3xtf32_scores_on_long_rows(causal, tmp_path, monkeypatch):
    """The rungs after TF32: 3xTF32 scores, TF32 att·v, over many key tiles (the cp.async pipeline,
    128-row tiles), on inputs scaled up as the Verifier's large set scales them. Scores of 1e4 make
    the softmax nearly one-hot: a TF32 score product is off by a weight factor there, 3xTF32 not."""
    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    target = Target.current()
    for shape in [(2, 4, 512, 96), (1, 2, 1100, 32)]:
        case = _gpu_case(torch.float32, causal, shape)
        k = _emit(case, f"s{shape[2]}", precise=kernels.PRECISE_SPLIT, target=target)
        assert "3xTF32 scores" in k.ops[0]
        lib = kernels.library([k], Path(tmp_path / str(shape[2])))
        for scale in (1.0, 30.0):
            ins = [t * scale for t in case.inputs(7)]
            args = [t.cuda() for t in _values(case, ins, k)]
            want = case.fn(*[t.cuda().double() for t in ins]).float()
            out = torch.full((want.numel(),), math.nan, device="cuda")
            lib.call(k.name, *args, out)
            torch.cuda.synchronize()
            _check(case, out.cpu(), want.cpu(), tol=2e-3)


@pytest.mark.gpu
@needs_nvcc
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_hand_written_chains(tmp_path, monkeypatch):
    """The masked, strided and half-precision chains of the host test, on the GPU."""
    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    target = Target.current()
    ks = [_emit(c, f"h{i}", target=target) for i, c in enumerate(CASES)]
    lib = kernels.library(ks, Path(tmp_path))
    for case, k in zip(CASES, ks, strict=True):
        got, want = _run_gpu(case, k, lib, 6)
        if case.id == "heads-in-place":
            got = got.view(2, 2, 41, 32).transpose(1, 2).reshape(want.shape)
        _check(case, got, want, tol=max(case.tol, 1e-2))



class CausalSdpa(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


@needs_nvcc
def test_whole_candidate_on_cpu(tmp_path):
    """The built-in coder's whole candidate for a causal SDPA module: ModelNew runs the fused
    kernel's host entry and matches torch."""
    from test_coder_builtin import run_host

    module = CausalSdpa()
    ins = [torch.randn(2, 3, 50, 32) for _ in range(3)]
    out, cand = run_host(module, ins, tmp_path)
    assert "sc_attn::launch" in "".join(cand.files.values())
    torch.testing.assert_close(out, module(*ins), rtol=1e-4, atol=1e-5)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
