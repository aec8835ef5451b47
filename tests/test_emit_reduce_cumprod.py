"""cumprod along rows follows ATen's CUDA order exactly (chunks, carry folded into the first element,
Sklansky within a chunk). Products stop associating once they leave fp32's range (0 and inf stick,
0 * inf is NaN), so the host entry is checked bit for bit against a NumPy model of ATen's kernel on
inputs where a scan in any other order gives other zeros, infinities and NaNs. The inputs follow the
Verifier's near-kinks set, on which a tile-wide scan gave NaN where torch's result was finite."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
import torch
import torch.nn as nn
from conftest import needs_nvcc

from stitchcuda.agents import graph
from stitchcuda.agents.coder import emit_reduce, kernels

KINKS = (0.0, 1.0, -1.0, 3.0, -3.0, 6.0, 20.0, -20.0, 0.5, -0.5, 2.0, -2.0)


pytestmark = pytest.mark.usefixtures("isolated_cache")


class Cumprod(nn.Module):
    def __init__(self, dim: int, dtype: torch.dtype | None = None):
        super().__init__()
        self.dim, self.dtype = dim, dtype

    def forward(self, x):
        return torch.cumprod(x, dim=self.dim, dtype=self.dtype)


def _near_kinks(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    kinks = torch.tensor(KINKS)[torch.randint(len(KINKS), shape, generator=g)]
    return kinks + (torch.rand(shape, generator=g) - 0.5) * 2e-3


def _saturating(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    """Near-kinks rows, and rows that reach 0 (inf) before long runs whose products alone reach inf (0)."""
    x = _near_kinks(shape, seed)
    n = x.shape[-1]
    x[0] = 20.0
    x[0, :30] = 1e-3  # to 0, then 20s: 0 * (a tile of 20s) would be NaN
    x[1] = 1e-3
    x[1, :20] = 1e3  # to inf, then 1e-3s: torch's own 16-element partials underflow, so NaN there too
    x[2, : n // 2] = 0.5
    x[2, n // 2 :] = 3.0  # through the subnormals and back up: the digits lost there must match
    return x


def _aten_cuda_cumprod(x: np.ndarray, chunk: int) -> np.ndarray:
    """ATen's tensor_kernel_scan_innermost_dim for multiplication, in x's dtype, rows of x."""
    rows, size = x.shape
    out = np.empty_like(x)
    carry = np.ones(rows, x.dtype)
    stages = []
    s = 1
    while s < chunk:
        ks = np.array([k for k in range(chunk) if k & s])
        stages.append((ks, (ks & ~(2 * s - 1)) + s - 1))
        s <<= 1
    with np.errstate(all="ignore"):
        for c0 in range(0, size, chunk):
            w = min(chunk, size - c0)
            buf = np.ones((rows, chunk), x.dtype)
            buf[:, :w] = x[:, c0 : c0 + w]
            buf[:, 0] = buf[:, 0] * carry
            for ks, src in stages:
                buf[:, ks] = buf[:, ks] * buf[:, src]
            out[:, c0 : c0 + w] = buf[:, :w]
            carry = buf[:, chunk - 1].copy()
    return out


def _kernel(x: torch.Tensor, name: str, dim: int = -1, dtype: torch.dtype | None = None) -> kernels.Kernel:
    g = graph.trace_module(Cumprod(dim, dtype), [x])
    node = next(n for n in g if n["op"] == "cumprod")
    return emit_reduce.EMITTERS["cumprod"](kernels.context(g, node["name"], name))


def test_chunk_follows_aten():
    assert emit_reduce.torch_scan_chunk(32768, 32768) == 32  # level1/90_cumprod
    assert emit_reduce.torch_scan_chunk(64, 4096) == 256
    assert emit_reduce.torch_scan_chunk(4, 4096) == 1024
    assert emit_reduce.torch_scan_chunk(5000, 4) == 1024  # ATen's uint32 wrap-around
    assert emit_reduce.torch_scan_chunk(1, 1) == 32


def test_inputs_break_other_orders():
    """The regression inputs: a running product already 0 meets a 2048-element product that is inf, so
    a scan multiplying the carry by tile-wide partial products gives NaN where ATen's result is 0."""
    x = _saturating((64, 4096), 5).numpy()
    ref = _aten_cuda_cumprod(x, 32)
    with np.errstate(all="ignore"):
        tiles = np.prod(x.reshape(64, -1, 2048)[:, 1:], axis=-1, dtype=np.float32)
    carry = ref[:, 2047:-1:2048]
    broken = (carry == 0) & np.isinf(tiles) & np.isfinite(ref[:, -1])
    assert broken.any()


CASES = [
    # (shape, dtype, dim, dtype argument): chunks of 32 (the failing problem's), 256 and 1024, a row
    # shorter than its chunk, rows that are not contiguous, fp16 rounding every product as ATen does.
    ((1024, 1024), torch.float32, -1, None),
    ((64, 4096), torch.float32, 1, None),
    ((4, 3001), torch.float32, -1, None),
    ((37, 45), torch.float32, -1, None),
    ((64, 1000), torch.float16, -1, None),
    ((64, 1000), torch.float16, -1, torch.float32),
]


def _input(shape: tuple[int, ...], dtype: torch.dtype, seed: int) -> torch.Tensor:
    return _saturating(shape, seed).to(dtype)


@needs_nvcc
def test_host_matches_aten_order_bit_for_bit(tmp_path):
    ks = [
        _kernel(_input(shape, dt, 0), f"cp{i}", dim, want) for i, (shape, dt, dim, want) in enumerate(CASES)
    ]
    assert "chunks of 32" in ks[0].ops[0]
    lib = kernels.library(ks, tmp_path)
    for (shape, dtype, _, want), k in zip(CASES, ks, strict=True):
        for seed in (1, 2):
            x = _input(shape, dtype, seed)
            y = torch.full(shape, float("nan"), dtype=want or dtype)
            ptrs = (ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(y.data_ptr()))
            assert lib._fn(f"{k.name}_host")(*ptrs, None) == 0
            ref = _aten_cuda_cumprod(x.to(y.dtype).numpy(), emit_reduce.torch_scan_chunk(*shape))
            np.testing.assert_array_equal(y.numpy(), ref, err_msg=f"{shape} {dtype}")
            assert not (y.isnan() & torch.from_numpy(ref).isfinite()).any()


class _Sliced(nn.Module):
    def forward(self, x):
        return torch.cumprod(x[:, 1:], dim=1)


@needs_nvcc
def test_strided_and_column_cumprod_on_host():
    """A sliced row (strides, offset) takes the same chunks; a column scan is sequential, as ATen's."""
    x = _saturating((300, 301), 7)
    g = graph.trace_module(_Sliced(), [x])
    node = next(n for n in g if n["op"] == "cumprod")
    k = emit_reduce.EMITTERS["cumprod"](kernels.context(g, node["name"], "cpx"))
    assert "chunks of 32" in k.ops[0]
    y = torch.full((300, 300), float("nan"))
    kernels.run_host(k, [x, y])
    np.testing.assert_array_equal(y.numpy(), _aten_cuda_cumprod(x[:, 1:].contiguous().numpy(), 32))
    kc = _kernel(x, "cpc", 0)
    assert "cols" in kc.ops[0]
    col = torch.full((300, 301), float("nan"))
    kernels.run_host(kc, [x, col])
    with np.errstate(all="ignore"):
        seq = np.cumprod(x.numpy(), axis=0, dtype=np.float32)
    np.testing.assert_array_equal(col.numpy(), seq)


@pytest.mark.gpu
@needs_nvcc
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_matches_torch_bit_for_bit(tmp_path, monkeypatch):
    """The real launchers against torch.cumprod on the same GPU, including the failing problem's shape
    (level1/90_cumprod, traced on fake tensors, with the Verifier's near-kinks input)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    cases = [*CASES, ((32768, 32768), torch.float32, 1, None)]
    ks = []
    for i, (shape, dt, dim, want) in enumerate(cases):
        mode = FakeTensorMode()
        with mode:
            x = torch.empty(shape, dtype=dt)
        g = graph.trace_module(Cumprod(dim, want), [x], fake_mode=mode)
        node = next(n for n in g if n["op"] == "cumprod")
        ks.append(emit_reduce.EMITTERS["cumprod"](kernels.context(g, node["name"], f"cpg{i}")))
    lib = kernels.library(ks, tmp_path)
    for (shape, dtype, dim, want), k in zip(cases, ks, strict=True):
        if shape[0] < 32768:
            x = _input(shape, dtype, 3).cuda()
        else:
            gen = torch.Generator(device="cuda").manual_seed(3)
            pick = torch.randint(len(KINKS), shape, device="cuda", generator=gen)
            x = torch.tensor(KINKS, device="cuda")[pick]
            x += (torch.rand(shape, device="cuda", generator=gen) - 0.5) * 2e-3
            del pick
        ref = torch.cumprod(x, dim=dim, dtype=want)
        y = torch.full_like(ref, float("nan"))
        lib.call(k.name, x, y)
        torch.cuda.synchronize()
        assert torch.equal(y.isnan(), ref.isnan()), shape
        assert torch.equal(torch.nan_to_num(y), torch.nan_to_num(ref)), shape
        del x, y, ref


@needs_nvcc
def test_host_runs_leave_no_folder_in_the_temp_dir(tmp_path, monkeypatch):
    """kernels.run_host writes nvcc's input in a temporary folder and removes it (issue 21 item 7)."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    x = _saturating((40, 41), 3)
    k = _kernel(x, "cpt", 1)
    out = torch.full((40, 41), float("nan"))
    kernels.run_host(k, [x, out])
    assert not torch.isnan(out).any()
    assert not list(tmp_path.glob("sc-host-*"))  # (torch keeps caches of its own there)
