"""The Triton-like pointwise kernel shape (codegen.pw_shape, the default; STITCHCUDA_PW_SHAPE=grid-stride
keeps the older one): kernels compute what the module does, run on
the CPU through host entries that walk every thread of the kernel's exact grid with the kernel's
own per-thread function (chunk indexing, partial last block, the n % VEC tail, the misaligned
element-by-element fallback), and every kind of kernel builds for sm_90 without warnings."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import needs_nvcc
from test_coder_builtin import (
    OPS,
    BiasChain,
    Edges,
    Mixed,
    Nested,
    Ops,
    Views,
    assert_same,
    candidate,
    plan_of,
    run_host,
    sample,
)

from stitchcuda import runtime
from stitchcuda.agents.coder import codegen
from stitchcuda.task import import_file

pytestmark = pytest.mark.usefixtures("isolated_cache")
CU = "fused_kernels.cu"


class Gated(nn.Module):
    """A per-feature affine, gelu gated by a sigmoid, a clamp and a residual: broadcast operands whose
    index runs with the element's (hoisted as vectors), two inputs read at the element."""

    def __init__(self, features: int):
        super().__init__()
        self.init_args = [features]
        self.scale = nn.Parameter(torch.randn(features))
        self.shift = nn.Parameter(torch.randn(features))

    def forward(self, x, gate):
        y = F.gelu(x * self.scale + self.shift) * torch.sigmoid(gate)
        return torch.clamp(y, -4.0, 4.0) + 0.1 * x


class IntAdd(nn.Module):
    """int64 storage: two elements a 16-byte vector."""

    def forward(self, x):
        return x + 3, x - x


def _triton(monkeypatch) -> None:
    monkeypatch.setenv(codegen.PW_SHAPE_ENV, "triton")
    monkeypatch.delenv("STITCHCUDA_PW_VEC_BROADCAST", raising=False)


def test_the_default_shape_is_the_triton_like_one(monkeypatch):
    module, x = BiasChain(), torch.randn(2, 6, 5, 7)
    monkeypatch.delenv(codegen.PW_SHAPE_ENV, raising=False)
    default = candidate(module, [x]).files[CU]
    monkeypatch.setenv(codegen.PW_SHAPE_ENV, "triton")
    assert candidate(module, [x]).files[CU] == default
    assert "_thread<" in default and "sc_grid(stitch_pw0_n" not in default
    monkeypatch.setenv(codegen.PW_SHAPE_ENV, "grid-stride")
    plain = candidate(module, [x]).files[CU]
    assert "_thread<" not in plain and "sc_grid(stitch_pw0_n" in plain and "sc_pw_grid" not in plain


class ManyInputs(nn.Module):
    """A chain reading `n` tensors at the element: as many vectors a thread to hold loaded at once."""

    def forward(self, *xs):
        acc = xs[0]
        for x in xs[1:]:
            acc = acc * torch.sigmoid(x) + x
        return acc


def test_a_chain_of_many_inputs_keeps_the_grid_stride_shape(monkeypatch):
    """Past TRITON_MAX_VECTORS loaded vectors a thread, the shape that issues every load first would
    spill them: such a kernel stays grid-stride, one of fewer inputs in the same file does not."""
    _triton(monkeypatch)
    fits = codegen.TRITON_MAX_VECTORS // codegen.triton_vectors()
    few = candidate(ManyInputs(), [torch.randn(64, 32) for _ in range(fits)]).files[CU]
    many = candidate(ManyInputs(), [torch.randn(64, 32) for _ in range(fits + 1)]).files[CU]
    assert "stitch_pw0_thread<" in few and "sc_grid(stitch_pw0_n" not in few
    assert "stitch_pw0_thread<" not in many and "sc_grid(stitch_pw0_n" in many


def test_an_unknown_shape_is_refused(monkeypatch):
    monkeypatch.setenv(codegen.PW_SHAPE_ENV, "trition")
    with pytest.raises(ValueError, match="STITCHCUDA_PW_SHAPE"):
        codegen.pw_shape()


def test_the_shape_brings_hoisted_loads_unless_they_are_turned_off(monkeypatch):
    _triton(monkeypatch)
    assert codegen.lane_loads_enabled()
    monkeypatch.setenv("STITCHCUDA_PW_VEC_BROADCAST", "0")
    assert not codegen.lane_loads_enabled()
    monkeypatch.delenv(codegen.PW_SHAPE_ENV)
    assert not codegen.lane_loads_enabled()


def test_the_grid_is_exact_and_indices_narrow_where_they_fit(monkeypatch):
    _triton(monkeypatch)
    # 5 x 1031 fp32: 1288 whole float4 chunks (6 blocks of 256 chunks, the last partial) and a tail of 3.
    source = candidate(Gated(1031), [torch.randn(5, 1031), torch.randn(5, 1031)]).files[CU]
    assert "__launch_bounds__(128)" in source and "sc_grid(" not in source.split("sc_pw_grid", 1)[1]
    assert "stitch_pw0_kernel<4><<<6, 128, 0, stream>>>" in source
    assert "stitch_pw0_kernel<1><<<21, 128, 0, stream>>>" in source  # ceil(5155 / 256)
    assert "uint32_t block" in source
    # Beyond 2^32 elements the chunk index is 64-bit (tracing costs nothing: an expanded 0-dim tensor).
    huge = torch.empty(()).expand(600, 64, 512, 256)
    kernels = [
        codegen.lower(p.graph, g, "big") for p in [plan_of(BiasChain(channels=64), [huge])] for g in p.groups
    ]
    assert "int64_t block" in codegen.render(kernels)


@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.parametrize(("vectors", "blocks", "scalar_blocks"), [("1", 11, 41), ("4", 3, 11)])
def test_vectors_a_thread_size_the_grid_and_every_element_is_computed(tmp_path, monkeypatch, vectors, blocks,
                                                                     scalar_blocks):
    """STITCHCUDA_PW_VECTORS (for an A/B of the shape on a GPU): the grid follows the vectors a thread,
    and with tails, partial blocks and the element-by-element path every output is still written."""
    _triton(monkeypatch)
    monkeypatch.setenv(codegen.PW_VECTORS_ENV, vectors)
    module, args = Gated(1031), [torch.randn(5, 1031), torch.randn(5, 1031)]
    ours, cand = run_host(module, args, tmp_path)
    source = cand.files[CU]
    assert f"stitch_pw0_kernel<4><<<{blocks}, 128, 0, stream>>>" in source  # 1288 chunks of 4
    assert f"stitch_pw0_kernel<1><<<{scalar_blocks}, 128, 0, stream>>>" in source  # 5155 elements
    assert_same(ours, module(*args), rtol=1e-5, atol=1e-5)
    monkeypatch.setenv(codegen.PW_VECTORS_ENV, "3")
    with pytest.raises(ValueError, match="STITCHCUDA_PW_VECTORS"):
        codegen.triton_vectors()


def test_the_sigmoid_divides_with_fdividef_where_exp_is_fast(monkeypatch):
    _triton(monkeypatch)
    module, args = Gated(64), [torch.randn(8, 64), torch.randn(8, 64)]
    source = candidate(module, args).files[CU]
    body = source.split("stitch_pw0_math", 1)[1]
    assert "sc_sigmoid_fdiv(" in body and "sc_sigmoid_fast(" not in body and "__fdividef" in source
    monkeypatch.setenv(codegen.FAST_EXP_ENV, "0")  # accurate exp keeps the IEEE division too
    accurate = candidate(module, args).files[CU]
    assert "sc_sigmoid(" in accurate and "__fdividef" not in accurate


# Element counts: not a multiple of the vector (tails), below one block, over several blocks.
CASES = {
    "gated-tail": (lambda: Gated(1031), lambda: [torch.randn(5, 1031), torch.randn(5, 1031)]),
    "gated-blocks": (lambda: Gated(96), lambda: [torch.randn(40, 96), torch.randn(40, 96)]),
    "gated-odd-features": (lambda: Gated(7), lambda: [torch.randn(3, 7), torch.randn(3, 7)]),
    "bias-chain": (BiasChain, lambda: [torch.randn(2, 6, 5, 7)]),
    "views": (Views, lambda: [torch.randn(3, 4, 5), torch.randn(4)]),
    "edges": (Edges, lambda: [torch.tensor(0.3), torch.randn(5, 3), torch.randn(0, 4)]),
    "nested-state": (Nested, lambda: [torch.randn(4, 5)]),
    "mixed-bool": (Mixed, lambda: [torch.randn(3, 8, dtype=torch.float16)]),
    "int64": (IntAdd, lambda: [torch.randint(-9, 9, (7, 13))]),
}


@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.parametrize("case", list(CASES))
def test_triton_shape_matches_reference_on_cpu(tmp_path, monkeypatch, case):
    _triton(monkeypatch)
    make, inputs = CASES[case]
    module, args = make(), inputs()
    ours, cand = run_host(module, args, tmp_path)
    assert "_thread<" in cand.files[CU]
    assert_same(ours, module(*args), rtol=1e-5, atol=1e-5)


@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_types_round_once(tmp_path, monkeypatch, dtype):
    _triton(monkeypatch)
    module = Gated(24).to(dtype)
    x, gate = torch.randn(9, 24, dtype=dtype), torch.randn(9, 24, dtype=dtype)
    ours, _ = run_host(module, [x, gate], tmp_path)
    ref32 = Gated(24)
    ref32.load_state_dict({k: v.float() for k, v in module.state_dict().items()})
    want = ref32(x.float(), gate.float()).to(dtype)
    eps = torch.finfo(dtype).eps
    torch.testing.assert_close(ours.float(), want.float(), rtol=eps, atol=eps)


def _shifted(t: torch.Tensor) -> torch.Tensor:
    """The same values one element into a fresh storage: not 16-byte aligned."""
    out = torch.cat([t.new_zeros(1), t.reshape(-1)])[1:].view(t.shape)
    assert out.data_ptr() % 16
    return out


@pytest.mark.nvcc
@needs_nvcc
def test_misaligned_pointers_take_the_element_by_element_grid(tmp_path, monkeypatch):
    _triton(monkeypatch)
    module = Gated(1031)
    x, gate = torch.randn(5, 1031), torch.randn(5, 1031)
    cand = candidate(module, [x, gate], host=True)
    new = import_file(cand.write(tmp_path), name="_cand_pw_shape_misaligned").ModelNew(1031)
    new.load_state_dict(module.state_dict())
    with torch.no_grad():
        assert_same(new(_shifted(x), gate), module(x, gate), rtol=1e-5, atol=1e-5)
        new.scale = nn.Parameter(_shifted(module.scale.detach()))  # a hoisted operand misaligned
        assert_same(new(x, gate), module(x, gate), rtol=1e-5, atol=1e-5)


@pytest.mark.nvcc
@needs_nvcc
def test_every_table_entry_matches_torch_in_the_triton_shape(tmp_path, monkeypatch):
    _triton(monkeypatch)
    module = Ops(OPS.values())
    x, y = sample((16, 9), 1), sample((16, 9), 2)  # 144 elements: 36 chunks, one partial block
    ours, _ = run_host(module, [x, y], tmp_path)
    with torch.no_grad():
        assert_same(ours, module(x, y), rtol=1e-5, atol=1e-5)


@pytest.mark.nvcc
@needs_nvcc
def test_triton_kernels_build_for_sm90_without_warnings(tmp_path, monkeypatch):
    _triton(monkeypatch)
    cases = [(Gated(1031), [torch.randn(5, 1031), torch.randn(5, 1031)])]
    for dtype in (torch.float16, torch.bfloat16):
        cases.append((BiasChain(dtype=dtype), [torch.randn(4, 6, 9, 9, dtype=dtype)]))
    cases += [
        (Mixed(), [torch.randn(3, 8, dtype=torch.float16)]),
        (IntAdd(), [torch.randint(-9, 9, (7, 13))]),
    ]
    cases += [(Edges(), [torch.tensor(0.3), torch.randn(5, 3), torch.randn(0, 4)])]
    cases += [(BiasChain(channels=64), [torch.empty(()).expand(600, 64, 512, 256)])]
    kernels = []
    for k, (module, inputs) in enumerate(cases):
        p = plan_of(module, inputs)
        kernels += [codegen.lower(p.graph, g, f"case{k}_pw{j}") for j, g in enumerate(p.groups)]
    src = tmp_path / "all.cu"
    src.write_text(codegen.render(kernels, host_entry=True))
    result = runtime.build([src], arch="sm_90")
    assert result.library.exists() and "warning" not in result.log.lower(), result.log


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize(
    "make, inputs, tol",
    [
        (lambda: Gated(1031), lambda: [torch.randn(37, 1031), torch.randn(37, 1031)], 1e-4),
        (lambda: Gated(4096), lambda: [torch.randn(300, 4096), torch.randn(300, 4096)], 1e-4),
        (
            lambda: BiasChain(dtype=torch.float16),
            lambda: [torch.randn(8, 6, 33, 65, dtype=torch.float16)],
            2e-3,
        ),
        (
            lambda: BiasChain(dtype=torch.bfloat16),
            lambda: [torch.randn(8, 6, 32, 63, dtype=torch.bfloat16)],
            2e-2,
        ),
        (lambda: Ops(OPS.values()), lambda: [sample((257, 129), 5), sample((257, 129), 6)], 1e-4),
        (Views, lambda: [torch.randn(3, 4, 5), torch.randn(4)], 1e-4),
        (Mixed, lambda: [torch.randn(1001, 8, dtype=torch.float16)], 1e-4),
        (IntAdd, lambda: [torch.randint(-9, 9, (513, 7))], 0),
    ],
    ids=["gated-tail", "gated-4096", "bias-fp16", "bias-bf16", "all-ops", "views", "mixed-bool", "int64"],
)
def test_triton_shape_matches_reference_on_gpu(tmp_path, monkeypatch, make, inputs, tol):
    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    _triton(monkeypatch)
    module, args = make(), inputs()
    cand = candidate(module, args)
    assert "_thread<" in cand.files[CU]
    new = import_file(cand.write(tmp_path), name=f"_cand_pw_shape_gpu_{id(cand)}").ModelNew(
        *getattr(module, "init_args", [])
    )
    module = module.cuda()
    new = new.cuda()
    new.load_state_dict(module.state_dict())
    args = [t.cuda() for t in args]
    with torch.no_grad():
        want = module(*args)
        assert_same(new(*args), want, rtol=tol, atol=tol)
        # Misaligned pointers: the element-by-element grid.
        shifted = [torch.cat([t.new_zeros(1), t.reshape(-1)])[1:].view(t.shape) for t in args]
        assert_same(new(*shifted), want, rtol=tol, atol=tol)
    torch.cuda.synchronize()
