"""The cuDNN convolution emitter: descriptor parameters against torch's own output shapes, refused
cases, the emitted source compiling against cuDNN's headers, and (on a GPU) the real kernels
against torch."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
import torch.nn as nn

from stitchcuda import runtime
from stitchcuda.agents import graph
from stitchcuda.agents.coder import emit_conv, emit_igemm, kernels
from stitchcuda.agents.coder.codegen import render
from stitchcuda.agents.coder.emit_conv import NotSupported, batch_chunk, conv_params, forward_dims

pytestmark = pytest.mark.usefixtures("isolated_cache")


def cudnn_include() -> str | None:
    """A folder holding cudnn.h: STITCHCUDA_EXTRA_INCLUDE, else the system's."""
    for folder in (
        os.environ.get("STITCHCUDA_EXTRA_INCLUDE"),
        "/usr/include/x86_64-linux-gnu",
        "/usr/include",
    ):
        if folder and Path(folder, "cudnn.h").exists():
            return folder
    return None


# (spatial dims, transposed, in_ch, out_ch, kernel, stride, padding, dilation, output_padding, groups, size)
CONFIGS = [
    (1, False, 3, 5, (3,), (1,), (0,), (1,), (0,), 1, (17,)),
    (1, False, 4, 8, (5,), (3,), (2,), (2,), (0,), 2, (40,)),
    (1, True, 4, 6, (3,), (2,), (1,), (1,), (1,), 2, (9,)),
    (1, True, 6, 3, (4,), (3,), (0,), (3,), (2,), 3, (11,)),
    (2, False, 3, 8, (3, 3), (1, 1), (1, 1), (1, 1), (0, 0), 1, (13, 7)),
    (2, False, 8, 8, (3, 5), (2, 1), (1, 2), (2, 1), (0, 0), 8, (15, 16)),
    (2, False, 6, 4, (1, 1), (1, 1), (0, 0), (1, 1), (0, 0), 2, (5, 9)),
    (2, True, 8, 4, (3, 5), (2, 3), (1, 2), (2, 1), (0, 2), 4, (7, 6)),
    (2, True, 3, 5, (4, 4), (1, 1), (0, 0), (1, 1), (0, 0), 1, (5, 5)),
    (3, False, 2, 4, (3, 2, 1), (1, 2, 1), (1, 0, 0), (1, 1, 2), (0, 0, 0), 2, (6, 7, 5)),
    (3, True, 4, 8, (3, 3, 3), (2, 2, 2), (1, 2, 3), (1, 1, 1), (1, 1, 1), 4, (3, 4, 5)),
    (3, True, 2, 2, (2, 3, 2), (1, 2, 3), (0, 1, 0), (2, 1, 3), (0, 1, 2), 1, (4, 3, 2)),
]


def torch_out(cfg: tuple, dtype: torch.dtype = torch.float32, device: str = "cpu") -> tuple:
    """The config's module and input, on `device`."""
    nd, tr, ci, co, k, s, p, d, op, g, size = cfg
    if tr:
        cls = (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)[nd - 1]
        m = cls(ci, co, k, stride=s, padding=p, output_padding=op, groups=g, dilation=d)
    else:
        cls = (nn.Conv1d, nn.Conv2d, nn.Conv3d)[nd - 1]
        m = cls(ci, co, k, stride=s, padding=p, dilation=d, groups=g)
    torch.manual_seed(0)
    x = torch.randn(3, ci, *size)
    return m.to(device, dtype), x.to(device, dtype)


@pytest.mark.parametrize("cfg", CONFIGS, ids=[f"{c[0]}d{'T' if c[1] else ''}-g{c[9]}" for c in CONFIGS])
def test_params_match_torch(cfg):
    m, x = torch_out(cfg)
    want = m(x).shape
    nd, tr = cfg[0], cfg[1]
    p = conv_params(x.shape, m.weight.shape, m.stride, m.padding, m.dilation, tr, m.output_padding, m.groups)
    assert p.out_shape == tuple(want)
    assert len(p.x) == len(p.y) == len(p.w) == max(4, nd + 2)
    assert p.lifted == (nd == 1)
    # What cuDNN checks: the forward conv maps its input dims to its output dims, and the filter's
    # input channels times groups cover the forward input.
    fwd_in, fwd_out = (p.y, p.x) if tr else (p.x, p.y)
    assert forward_dims(fwd_in, p.w, p.pad, p.stride, p.dilation) == list(fwd_out[2:])
    assert p.w[1] * p.groups == fwd_in[1] and p.w[0] == fwd_out[1]
    assert batch_chunk(p) == x.shape[0]


def test_params_refused():
    with pytest.raises(NotSupported, match="output_padding"):  # torch allows op < dilation; cuDNN does not
        conv_params((1, 2, 8, 8), (2, 2, 3, 3), [1, 1], [0, 0], [3, 3], True, [2, 0], 1)
    with pytest.raises(NotSupported, match="rank"):
        conv_params((1, 2, 3, 3, 3, 3), (2, 2, 1, 1, 1, 1), [1] * 4, [0] * 4, [1] * 4, False, [0] * 4, 1)
    with pytest.raises(NotSupported, match="channels"):
        conv_params((1, 6, 8, 8), (4, 4, 3, 3), [1, 1], [0, 0], [1, 1], False, [0, 0], 2)
    with pytest.raises(NotSupported, match="empty"):
        conv_params((1, 2, 2, 2), (2, 2, 3, 3), [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    with pytest.raises(NotSupported, match="padding"):
        conv_params((1, 2, 8, 8), (2, 2, 3, 3), [1, 1], [-1, 0], [1, 1], False, [0, 0], 1)
    with pytest.raises(NotSupported, match="entries"):
        conv_params((1, 2, 8, 8), (2, 2, 3, 3), [1, 1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    # A single int broadcasts over the spatial dims, as aten does.
    p = conv_params((1, 2, 8, 8), (2, 2, 3, 3), [2], [1], [1], False, [0], 1)
    assert p.stride == (2, 2) and p.out_shape == (1, 2, 4, 4)


def test_batch_chunks_keep_int32_counts():
    p = conv_params((1000, 64, 256, 256), (64, 64, 3, 3), [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
    chunk = batch_chunk(p)
    assert chunk * 64 * 256 * 256 <= emit_conv.INT_MAX < (chunk + 1) * 64 * 256 * 256
    huge = conv_params((2, 1, 2**16, 2**16), (1, 1, 1, 1), [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    with pytest.raises(NotSupported, match="2\\^31"):
        batch_chunk(huge)


def emit_module(m: nn.Module, x: torch.Tensor, name: str = "k0") -> kernels.Kernel:
    g = graph.trace_module(m, [x])
    node = next(n["name"] for n in g if n["op"] == "convolution")
    return emit_conv.EMITTERS["convolution"](kernels.context(g, node, name))


def test_emit_kernel_args(monkeypatch):
    m, x = torch_out(CONFIGS[7])
    k = emit_module(m, x)
    assert [a.name for a in k.inputs] == ["input", "weight", "bias"]
    assert len(k.outputs) == 1 and k.libraries == ["cudnn"] and not k.host
    assert 'extern "C" int k0(const void* in0, const void* in1, const void* in2, void* out0' in k.source
    m2 = nn.Conv2d(4, 4, 3, bias=False)
    # No bias: the implicit GEMM is cuDNN's contender (test_igemm_conv.py); without it, no bias pointer.
    k2 = emit_module(m2, torch.randn(1, 4, 6, 6), "k1")
    assert [a.name for a in k2.inputs] == ["input", "weight"] and "in0, in1, nullptr, out0, k1_ig, stream" in k2.source
    monkeypatch.setenv(emit_igemm.NCHW_ENV, "0")
    k3 = emit_module(m2, torch.randn(1, 4, 6, 6), "k2")
    assert [a.name for a in k3.inputs] == ["input", "weight"] and "nullptr, out0" in k3.source


def test_the_switches_are_fixed_when_the_source_is_written(monkeypatch):
    # conv.cuh's A/B and logging switches come from the environment as the coder writes the file,
    # as constants: the module a user keeps never reads its own environment to choose its plans.
    m, x = torch_out(CONFIGS[7])
    for name in ("STITCHCUDA_CUDNN_LEGACY", "STITCHCUDA_CONV_LOG", "STITCHCUDA_CONV_COPY_VEC",
                 "STITCHCUDA_CONV_NHWC", "STITCHCUDA_CONV_IGEMM", "STITCHCUDA_CONV_FUSE"):
        monkeypatch.delenv(name, raising=False)
    default = emit_module(m, x).source
    assert "getenv" not in default
    for line in ("SC_CUDNN_LEGACY = false", "SC_CONV_LOG = false", "SC_CONV_COPY_VEC = true",
                 "SC_CONV_NHWC = '\\0'", "SC_CONV_IGEMM = '\\0'", "SC_CONV_FUSE = true"):
        assert line in default, line
    monkeypatch.setenv("STITCHCUDA_CUDNN_LEGACY", "1")
    monkeypatch.setenv("STITCHCUDA_CONV_LOG", "")
    monkeypatch.setenv("STITCHCUDA_CONV_COPY_VEC", "0")
    monkeypatch.setenv("STITCHCUDA_CONV_NHWC", "1")
    monkeypatch.setenv("STITCHCUDA_CONV_IGEMM", "0")
    monkeypatch.setenv("STITCHCUDA_CONV_FUSE", "0")
    switched = emit_module(m, x).source
    for line in ("SC_CUDNN_LEGACY = true", "SC_CONV_LOG = true", "SC_CONV_COPY_VEC = false",
                 "SC_CONV_NHWC = '1'", "SC_CONV_IGEMM = '0'", "SC_CONV_FUSE = false"):
        assert line in switched, line
    monkeypatch.setenv("STITCHCUDA_CONV_NHWC", "x")  # neither 0 nor 1: timed, as unset
    assert "SC_CONV_NHWC = '\\0'" in emit_module(m, x).source


def test_emit_refuses():
    class Permuted(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(4, 4, 3)

        def forward(self, x):
            return self.conv(x.transpose(2, 3))

    with pytest.raises(NotSupported, match="contiguous"):
        emit_module(Permuted(), torch.randn(2, 4, 8, 9))
    with pytest.raises(NotSupported, match="dtype"):
        emit_module(nn.Conv2d(2, 2, 1).double(), torch.randn(1, 2, 3, 3, dtype=torch.float64))


@pytest.mark.skipif(runtime.find_nvcc() is None, reason="nvcc is not installed")
@pytest.mark.skipif(
    cudnn_include() is None, reason="no cudnn.h (set STITCHCUDA_EXTRA_INCLUDE to a folder with it)"
)
def test_source_compiles(tmp_path):
    # Several kernels in one .cu: the family block must appear once, each launcher once.
    sources = [render([])]
    for i, cfg in enumerate([CONFIGS[0], CONFIGS[7], CONFIGS[10]]):
        for j, dtype in enumerate((torch.float32, torch.float16)):
            m, x = torch_out(cfg, dtype)
            sources.append(emit_module(m, x, f"k{i}_{j}").source)
    path = tmp_path / "conv.cu"
    path.write_text("\n".join(sources))
    result = runtime.build([path], extra_flags=[f"-I{cudnn_include()}"])
    assert "warning" not in result.log.lower(), result.log


# --------------------------------------------------------------------------------------------
# On a GPU: the real kernels against torch (which uses cuDNN too, TF32 allowed for fp32).

GPU_CASES = [
    (CONFIGS[0], torch.float32),
    (CONFIGS[4], torch.float32),
    (CONFIGS[5], torch.float32),
    (CONFIGS[9], torch.float32),
    (CONFIGS[2], torch.float32),
    (CONFIGS[7], torch.float32),
    (CONFIGS[10], torch.float32),
    (CONFIGS[11], torch.float32),
    (CONFIGS[4], torch.float16),
    (CONFIGS[7], torch.float16),
    (CONFIGS[10], torch.bfloat16),
    (
        (2, False, 16, 32, (3, 3), (1, 1), (1, 1), (1, 1), (0, 0), 1, (32, 32)),
        torch.float32,
    ),  # vectorised bias
    ((2, False, 16, 32, (3, 3), (1, 1), (1, 1), (1, 1), (0, 0), 1, (32, 32)), torch.float16),
]


def run_cases(tmp_path: Path, cases: list, prefix: str = "k") -> list[tuple[torch.Tensor, torch.Tensor, torch.dtype]]:
    """Emit every case into one .cu, build it once, run each kernel on NaN-filled outputs."""
    emitted = []
    for i, (cfg, dtype) in enumerate(cases):
        m, x = torch_out(cfg, dtype)
        emitted.append((emit_module(m, x, f"{prefix}{i}"), m.cuda(), x.cuda(), dtype))
    path = tmp_path / "conv.cu"
    path.write_text("\n".join([render([], after=[k.source for k, *_ in emitted])] + [k.source for k, *_ in emitted]))
    lib = runtime.load(path, libraries=["cudnn"])
    results = []
    for k, m, x, dtype in emitted:
        with torch.no_grad():
            want = m(x)
        got = torch.full_like(want, float("nan"))
        args = [x, m.weight] + ([m.bias] if m.bias is not None else [])
        for _ in range(2):  # the second call runs on the state the first one set up
            lib.call(k.name, *args, got)
        torch.cuda.synchronize()
        results.append((got, want, dtype))
    return results


def check(got: torch.Tensor, want: torch.Tensor, dtype: torch.dtype) -> None:
    assert not got.isnan().any()
    tol = {torch.float32: 1e-2, torch.float16: 1e-2, torch.bfloat16: 5e-2}[dtype]
    torch.testing.assert_close(
        got.float(), want.float(), rtol=tol, atol=tol * want.float().abs().max().item()
    )


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_matches_torch(tmp_path):
    for got, want, dtype in run_cases(tmp_path, GPU_CASES):
        check(got, want, dtype)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_graph_api_engine_or_legacy_algorithm(tmp_path, monkeypatch, capfd):
    """Each conv times cuDNN's graph-API engines against the legacy algorithm on its first call and
    says which it kept (STITCHCUDA_CONV_LOG); with STITCHCUDA_CUDNN_LEGACY=1 only the legacy one
    runs. Either way the result matches torch."""
    monkeypatch.setenv("STITCHCUDA_CONV_LOG", "1")
    monkeypatch.setenv("STITCHCUDA_CONV_NHWC", "0")  # one plan per conv: the channels-last one has its test
    cases = [(CONFIGS[4], torch.float32), (CONFIGS[7], torch.float32), (CONFIGS[10], torch.float32)]
    for label, legacy in (("graph", "0"), ("legacy", "1")):
        monkeypatch.setenv("STITCHCUDA_CUDNN_LEGACY", legacy)
        folder = tmp_path / label
        folder.mkdir()
        # Other kernel names: another library, with its own one-time state.
        for got, want, dtype in run_cases(folder, cases, prefix=label):
            check(got, want, dtype)
        err = capfd.readouterr().err
        lines = [ln for ln in err.splitlines() if ln.startswith(f"stitchcuda {label}")]
        assert len(lines) == len(cases), err
        if legacy == "1":
            assert all(": legacy algorithm" in ln for ln in lines), lines


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("mode", ["1", "auto"])
def test_gpu_channels_last_plan(tmp_path, monkeypatch, capfd, mode):
    """Channels-last: the input and weight copied to NHWC, cuDNN's NHWC kernels, the result copied
    back with the bias added. Forced (=1) on every case cuDNN accepts, and chosen by timing (auto);
    either way each conv says which layout it kept, with both timings, and matches torch."""
    monkeypatch.setenv("STITCHCUDA_CONV_LOG", "1")
    if mode == "auto":
        monkeypatch.delenv("STITCHCUDA_CONV_NHWC", raising=False)
    else:
        monkeypatch.setenv("STITCHCUDA_CONV_NHWC", mode)
    for got, want, dtype in run_cases(tmp_path, GPU_CASES, prefix=f"cl{mode}_"):
        check(got, want, dtype)
    err = capfd.readouterr().err
    chosen = [ln for ln in err.splitlines() if " layout, channels-last " in ln]
    refused = [ln for ln in err.splitlines() if "no channels-last plan" in ln]
    assert len(chosen) + len(refused) == len(GPU_CASES), err
    if mode == "1":
        assert all(": channels-last layout" in ln for ln in chosen), chosen
        assert len(chosen) >= len(GPU_CASES) // 2, err  # cuDNN takes NHWC for most convolutions


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_batch_chunks(tmp_path, monkeypatch):
    # A small int32 limit makes a batch of 3 run as a chunk of 2 and a tail of 1.
    cases = [(CONFIGS[4], torch.float32), (CONFIGS[7], torch.float32)]
    for cfg, _ in cases:
        m, x = torch_out(cfg)
        per_sample = max(x[0].numel(), m(x)[0].numel())
        monkeypatch.setattr(emit_conv, "INT_MAX", 2 * per_sample)
        p = conv_params(
            x.shape, m.weight.shape, m.stride, m.padding, m.dilation, cfg[1], m.output_padding, m.groups
        )
        assert batch_chunk(p) == 2
        folder = tmp_path / cfg_name(cfg)
        folder.mkdir()
        (got, want, dtype), *_ = run_cases(folder, [(cfg, torch.float32)])
        check(got, want, dtype)


def cfg_name(cfg: tuple) -> str:
    return f"{cfg[0]}d{'T' if cfg[1] else ''}"
