"""The implicit-GEMM convolution (emit_igemm.py, cuda/igemm_conv.cuh): the convolution launcher's
contender that reads the input where it lies and writes each output once, epilogue applied. The
wide tiles (STITCHCUDA_CONV_IGEMM_WIDE=1) are off (measured: not worth a second contender); NCHW
results carry it unless STITCHCUDA_CONV_IGEMM_NCHW=0; the exact rung carries it with 3xTF32 operands.

Here, on the CPU: its geometry (stride-phases, taps, input offsets) gathered exactly as the kernel
gathers, against PyTorch's convolutions, forward and transposed, 2-D and 3-D, strided, padded,
dilated, with output padding, with taps that skip a phase, from NCHW and channels-last inputs; what
it refuses; candidates that carry it build for sm_90. On a GPU: with STITCHCUDA_CONV_IGEMM=1 the
launcher keeps the kernel (a disagreement with cuDNN is then an error), and the candidate matches
its module."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import assert_builds_clean_for_sm90, builtin_candidate, load_model_new
from test_emit_conv import cudnn_include

from stitchcuda.agents.coder import emit_igemm, kernels
from stitchcuda.agents.coder.emit_conv import DIRECT_ENV, conv_params
from stitchcuda.agents.coder.kernels import NotSupported
from stitchcuda.agents.coder.model_new import CU_FILE

pytestmark = pytest.mark.usefixtures("isolated_cache")

# (input shape, weight shape, stride, padding, dilation, transposed, output_padding)
SHAPES = {
    "2d 3x3": ((2, 5, 9, 11), (7, 5, 3, 3), 1, 0, 1, False, 0),
    "2d strided padded": ((2, 4, 13, 10), (6, 4, 3, 3), 2, 1, 1, False, 0),
    "2d dilated asymmetric": ((1, 3, 12, 14), (5, 3, 3, 2), (1, 2), (2, 0), (2, 3), False, 0),
    "2d 1x1": ((3, 6, 5, 5), (4, 6, 1, 1), 1, 0, 1, False, 0),
    "3d": ((2, 3, 6, 7, 8), (4, 3, 3, 3, 3), 1, 1, 1, False, 0),
    "transposed 2d stride 2": ((2, 5, 6, 7), (5, 3, 3, 3), 2, 1, 1, True, 1),
    "transposed 2d stride 2 k4": ((2, 4, 5, 5), (4, 6, 4, 4), 2, 1, 1, True, 0),
    "transposed 2d stride 1": ((1, 4, 6, 6), (4, 3, 5, 5), 1, 1, 1, True, 0),
    "transposed 2d stride 3 k2": ((2, 3, 4, 5), (3, 2, 2, 2), 3, 0, 1, True, 2),  # taps skip a phase
    "transposed 2d dilated": ((1, 3, 5, 6), (3, 4, 3, 3), (2, 3), (1, 2), (2, 1), True, (1, 0)),
    "transposed 3d": ((2, 3, 4, 5, 4), (3, 5, 3, 3, 3), 2, 1, 1, True, 1),
    "transposed 3d k5 stride 2 pad 2": ((1, 2, 3, 4, 3), (2, 3, 5, 5, 5), 2, 2, 1, True, 0),
}


def _reference(x, w, stride, padding, dilation, transposed, output_padding):
    if transposed:
        f = F.conv_transpose2d if x.dim() == 4 else F.conv_transpose3d
        return f(x, w, stride=stride, padding=padding, output_padding=output_padding, dilation=dilation)
    f = F.conv2d if x.dim() == 4 else F.conv3d
    return f(x, w, stride=stride, padding=padding, dilation=dilation)


def _gather(g: emit_igemm.Geometry, stored: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """The convolution as the kernel computes it, from the geometry alone: per phase and tap, the input
    at phase-local index x in-step + offset (zero outside), read through the stored tensor's strides,
    times the weight's tap; written channels-last at index x out-step + origin."""
    od, oh, ow = g.out_dims
    out = torch.zeros(g.batch, od, oh, ow, g.out_channels, dtype=torch.float64)
    flat = stored.contiguous().reshape(-1).double()
    wt = w.double().reshape(w.shape[0], w.shape[1], -1)
    sn, sc, sd, sh, sw = g.x_strides
    n = torch.arange(g.batch).view(-1, 1, 1, 1, 1)
    c = torch.arange(g.channels).view(1, -1, 1, 1, 1)
    for ph in g.phases:
        jd, jh, jw = (torch.arange(k) for k in ph.count)
        acc = torch.zeros(g.batch, *ph.count, g.out_channels, dtype=torch.float64)
        for dd, dh, dw, tap in ph.taps:
            i_d, i_h, i_w = jd * g.in_step[0] + dd, jh * g.in_step[1] + dh, jw * g.in_step[2] + dw
            ok = ((i_d >= 0) & (i_d < g.in_dims[0])).view(1, 1, -1, 1, 1) & ((i_h >= 0) & (i_h < g.in_dims[1])).view(1, 1, 1, -1, 1) \
                & ((i_w >= 0) & (i_w < g.in_dims[2])).view(1, 1, 1, 1, -1)
            idx = n * sn + c * sc + i_d.clamp(0, g.in_dims[0] - 1).view(1, 1, -1, 1, 1) * sd \
                + i_h.clamp(0, g.in_dims[1] - 1).view(1, 1, 1, -1, 1) * sh + i_w.clamp(0, g.in_dims[2] - 1).view(1, 1, 1, 1, -1) * sw
            a = torch.where(ok, flat[idx], 0.0)  # [N, C, pd, ph, pw]
            b = wt[:, :, tap] if g.transposed else wt[:, :, tap].t()  # [C, K]
            acc += torch.einsum("ncdhw,ck->ndhwk", a, b)
        d0, h0, w0 = ph.origin
        sd_, sh_, sw_ = g.out_step
        out[:, d0::sd_, h0::sh_, w0::sw_][:, : ph.count[0], : ph.count[1], : ph.count[2]] = acc
    return out


@pytest.mark.parametrize("case", list(SHAPES))
@pytest.mark.parametrize("channels_last", [False, True])
def test_the_geometry_gathers_what_pytorch_computes(case, channels_last):
    xs, ws, stride, padding, dilation, transposed, out_pad = SHAPES[case]
    torch.manual_seed(0)
    x, w = torch.randn(xs, dtype=torch.float64), torch.randn(ws, dtype=torch.float64)
    p = conv_params(xs, ws, stride, padding, dilation, transposed, out_pad, 1)
    g = emit_igemm.geometry(p.transposed, p.groups, p.x, p.w, p.y, p.pad, p.stride, p.dilation, channels_last)
    want = _reference(x, w, stride, padding, dilation, transposed, out_pad)
    stored = x.movedim(1, -1) if channels_last else x
    got = _gather(g, stored, w)
    if x.dim() == 4:
        got = got[:, 0]  # the unit depth
    torch.testing.assert_close(got, want.movedim(1, -1), rtol=1e-10, atol=1e-10)
    # Every output position belongs to exactly one phase.
    assert sum(g.outputs(ph) for ph in g.phases) == g.batch * g.out_dims[0] * g.out_dims[1] * g.out_dims[2]
    assert all(g.kpad(ph) % emit_igemm.BK == 0 and g.kpad(ph) >= len(ph.taps) * g.cp for ph in g.phases)
    # A k-tile holds whole taps where the channels are fewer than it (the loader's per-tap path).
    assert g.cp >= g.channels and (g.cp % emit_igemm.BK == 0 or emit_igemm.BK % g.cp == 0 or g.cp == g.channels)
    assert g.uniform == (len({ph.count for ph in g.phases}) == 1)


def test_a_transposed_convolution_spends_no_products_on_taps_that_miss():
    p = conv_params((2, 8, 16, 16), (8, 8, 3, 3), 2, 1, 1, True, 1, 1)
    g = emit_igemm.geometry(p.transposed, p.groups, p.x, p.w, p.y, p.pad, p.stride, p.dilation, False)
    assert len(g.phases) == 4 and sorted(len(ph.taps) for ph in g.phases) == [1, 2, 2, 4]  # 9 taps over 4 phases


def test_what_it_refuses():
    p = conv_params((2, 8, 9, 9), (8, 4, 3, 3), 1, 0, 1, False, 0, 2)
    with pytest.raises(NotSupported, match="grouped"):
        emit_igemm.geometry(p.transposed, p.groups, p.x, p.w, p.y, p.pad, p.stride, p.dilation, False)
    with pytest.raises(NotSupported, match="2-D or 3-D"):
        emit_igemm.geometry(False, 1, (2, 3, 9), (4, 3, 3), (2, 4, 7), (0,), (1,), (1,), False)


@pytest.mark.parametrize("wide", [False, True])
def test_tiles_follow_the_output_channels(wide):
    narrow = [(16, (128, 32)), (32, (128, 32)), (48, (128, 64)), (64, (128, 64)), (128, (64, 128)), (200, (64, 128))]
    wider = [(16, (128, 32)), (32, (128, 32)), (48, (256, 64)), (64, (256, 64)), (128, (128, 128)), (200, (128, 128))]
    for k, tile in wider if wide else narrow:
        p = conv_params((1, 3, 8, 8), (k, 3, 3, 3), 1, 1, 1, False, 0, 1)
        g = emit_igemm.geometry(p.transposed, p.groups, p.x, p.w, p.y, p.pad, p.stride, p.dilation, False, wide=wide)
        assert g.tile == tile and g.npad % tile[1] == 0 and g.npad >= k
        wm, wn, stages = g.warp
        # Every thread loads one pixel's column of the A tile, whole rows of it per k-tile.
        assert g.threads % tile[0] == 0 and emit_igemm.BK % (g.threads // tile[0]) == 0 and g.threads <= 1024
        assert (wm, wn, stages) == ((64, 32, 2) if wide and k > 32 else (32, 32, 3))


def ConvTail(make) -> nn.Module:
    """make()'s convolution, then a channel scale, tanh and a constant: a pointwise epilogue. Its class
    takes no constructor arguments, as the candidate's ModelNew mirrors them."""

    class Tail(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = make()
            self.scale = nn.Parameter(torch.randn(self.conv.out_channels, *([1] * (self.conv.weight.dim() - 2))))

        def forward(self, x):
            return torch.tanh(self.conv(x) * self.scale) + 0.5

    return Tail()


def ConvSoftmax(make) -> nn.Module:
    """make()'s convolution whose channels-last result a reduction reads: no epilogue (sc_conv_run_ig)."""

    class Soft(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = make()

        def forward(self, x):
            return torch.softmax(self.conv(x), dim=1)

    return Soft()


MODULES = {
    "conv2d": (lambda: nn.Conv2d(8, 32, 3), (4, 8, 34, 30)),
    "conv2d 128 channels strided": (lambda: nn.Conv2d(16, 128, 3, stride=2, padding=1), (2, 16, 33, 31)),
    "conv2d 3 input channels": (lambda: nn.Conv2d(3, 24, 3, padding=1), (4, 3, 32, 32)),
    "transposed 2d stride 2": (lambda: nn.ConvTranspose2d(16, 64, 3, stride=2, padding=1, output_padding=1), (4, 16, 17, 15)),
    "transposed 2d k4": (lambda: nn.ConvTranspose2d(32, 48, 4, stride=2, padding=1), (2, 32, 16, 16)),
    "conv3d": (lambda: nn.Conv3d(8, 16, 3), (2, 8, 10, 12, 12)),
    "conv2d 24 input channels": (lambda: nn.Conv2d(24, 40, 3, padding=2, dilation=2), (2, 24, 20, 18)),  # the per-element loader
    "transposed 3d": (lambda: nn.ConvTranspose3d(16, 32, 3, stride=2, padding=1), (2, 16, 6, 8, 8)),
}
# Cases whose convolution has no epilogue: the module is ConvSoftmax.
PLAIN = {
    "plain conv3d": (lambda: nn.Conv3d(3, 16, 3), (4, 3, 8, 16, 16)),
    "plain transposed 2d": (lambda: nn.ConvTranspose2d(32, 64, 3, stride=2, padding=1), (2, 32, 16, 16)),
}


def ConvInstanceNorm(make) -> nn.Module:
    """make()'s convolution, then an instance norm: the planner leaves its result NCHW."""

    class Norm(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = make()
            self.norm = nn.InstanceNorm2d(self.conv.out_channels) if self.conv.weight.dim() == 4 else nn.InstanceNorm3d(self.conv.out_channels)

        def forward(self, x):
            return self.norm(self.conv(x)) / 2.0

    return Norm()


# Cases whose convolution result stays NCHW (ConvInstanceNorm).
NCHW = {
    "nchw conv2d": (lambda: nn.Conv2d(8, 48, 3, bias=False), (4, 8, 20, 18)),
    "nchw transposed 3d": (lambda: nn.ConvTranspose3d(16, 32, 3, stride=2, padding=1, bias=False), (2, 16, 5, 6, 6)),
}


def ConvDepthwise(make) -> nn.Module:
    """make()'s convolution with its bias, then a depthwise one (NAFNet's, Restormer's 1x1 before a
    3x3 depthwise): the first result stays NCHW with no epilogue, so its bias is the launcher's."""

    class Pair(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = make()
            c = self.conv.out_channels
            self.dw = nn.Conv2d(c, c, 3, padding=1, groups=c)

        def forward(self, x):
            return self.dw(self.conv(x))

    return Pair()


# Cases whose convolution has a bias and an NCHW result with no epilogue (ConvDepthwise): the
# implicit GEMM adds the bias as it stores (emit_conv._bias_functor).
BIASED = {
    "nchw 1x1 bias": (lambda: nn.Conv2d(16, 32, 1), (2, 16, 24, 20)),
    "nchw transposed bias": (lambda: nn.ConvTranspose2d(16, 24, 3, stride=2, padding=1, output_padding=1), (2, 16, 9, 11)),
}


def _module(case: str) -> tuple[nn.Module, tuple[int, ...]]:
    if case in NCHW:
        make, shape = NCHW[case]
        return ConvInstanceNorm(make), shape
    if case in PLAIN:
        make, shape = PLAIN[case]
        return ConvSoftmax(make), shape
    if case in BIASED:
        make, shape = BIASED[case]
        return ConvDepthwise(make), shape
    make, shape = MODULES[case]
    return ConvTail(make), shape


@pytest.mark.skipif(cudnn_include() is None, reason="no cudnn.h (set STITCHCUDA_EXTRA_INCLUDE to a folder with it)")
@pytest.mark.parametrize("wide", ["0", "1"])
def test_candidates_carry_the_kernel_and_build_for_sm90(tmp_path, monkeypatch, wide):
    monkeypatch.setenv(emit_igemm.WIDE_ENV, wide)
    for k, case in enumerate(["transposed 3d", "conv2d 128 channels strided", "plain conv3d", "transposed 2d stride 2"]):
        torch.manual_seed(0)
        module, shape = _module(case)
        cand = builtin_candidate(module, [torch.randn(shape)], host=False)
        src = cand.files[CU_FILE]
        assert "sc_igemm_conv<" in src and "_ig, stream);" in src, src[-3000:]
        assert ("return sc_conv_run_ig(spec" in src) == (case in PLAIN)
        assert_builds_clean_for_sm90(cand, tmp_path / f"c{k}.cu", cudnn_include())


@pytest.mark.skipif(cudnn_include() is None, reason="no cudnn.h (set STITCHCUDA_EXTRA_INCLUDE to a folder with it)")
def test_an_nchw_result_carries_it_unless_turned_off(tmp_path, monkeypatch):
    torch.manual_seed(0)
    for k, case in enumerate(NCHW):
        module, shape = _module(case)
        monkeypatch.setenv(emit_igemm.NCHW_ENV, "0")
        src = builtin_candidate(module, [torch.randn(shape)], host=False).files[CU_FILE]
        assert "sc_igemm_conv<" not in src and "return sc_conv_run(spec" in src
        monkeypatch.delenv(emit_igemm.NCHW_ENV, raising=False)
        cand = builtin_candidate(module, [torch.randn(shape)], host=False)
        src = cand.files[CU_FILE]
        assert "Y_NCHW = true" in src and "return sc_conv_run_ig(spec" in src
        assert_builds_clean_for_sm90(cand, tmp_path / f"n{k}.cu", cudnn_include())


@pytest.mark.skipif(cudnn_include() is None, reason="no cudnn.h (set STITCHCUDA_EXTRA_INCLUDE to a folder with it)")
def test_a_bias_is_added_as_the_kernel_stores(tmp_path):
    """A convolution with a bias and an NCHW result no epilogue takes: the implicit GEMM contends with
    the bias as its epilogue (before, a bias left it to cuDNN and a bias pass of its own)."""
    for k, case in enumerate(BIASED):
        torch.manual_seed(0)
        module, shape = _module(case)
        cand = builtin_candidate(module, [torch.randn(shape)], host=False)
        src = cand.files[CU_FILE]
        assert "return sc_conv_run_ig(spec, state, ig_state, in0, in1, in2, out0," in src, src[-3000:]
        assert "_bias{static_cast<const float*>(in2)}" in src and "Y_NCHW = true" in src
        assert_builds_clean_for_sm90(cand, tmp_path / f"b{k}.cu", cudnn_include())


def test_half_precision_convolutions_do_not_carry_it():
    make, shape = MODULES["conv2d"]
    module = ConvTail(make).half()
    cand = builtin_candidate(module, [torch.randn(shape).half()], host=False)
    assert "sc_igemm_conv<" not in cand.files[CU_FILE]


def test_turned_off_it_is_left_out(monkeypatch):
    monkeypatch.setenv("STITCHCUDA_CONV_IGEMM", "0")
    make, shape = MODULES["conv2d"]
    cand = builtin_candidate(ConvTail(make), [torch.randn(shape)], host=False)
    src = cand.files[CU_FILE]
    assert "return sc_conv_fused_run(spec" in src and "sc_igemm_conv<" not in src and "nullptr, stream);" in src


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("wide", ["0", "1"])
@pytest.mark.parametrize("case", list(MODULES) + list(PLAIN) + list(NCHW) + list(BIASED))
def test_on_the_gpu_the_kernel_matches_the_module(case, wide, tmp_path, monkeypatch, capfd):
    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    monkeypatch.setenv(emit_igemm.WIDE_ENV, wide)
    monkeypatch.setenv(emit_igemm.NCHW_ENV, "1")
    monkeypatch.setenv("STITCHCUDA_CONV_IGEMM", "1")  # kept wherever it runs; a disagreement is an error
    monkeypatch.setenv("STITCHCUDA_CONV_LOG", "1")
    torch.manual_seed(3)
    module, shape = _module(case)
    inputs = [torch.randn(shape)]
    cand = builtin_candidate(module, inputs, host=False)
    assert "sc_igemm_conv<" in cand.files[CU_FILE]
    module = module.cuda()
    new, _ = load_model_new(cand, module, tmp_path / "m")
    new = new.cuda()
    with torch.no_grad():
        for seed in range(3):  # the first call chooses; later ones (graph-replayed) run the choice
            torch.manual_seed(seed)
            args = [torch.randn(shape, device="cuda")]
            want = module(*args)
            got = new(*args)
            torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2 * want.abs().mean().item())
    log = capfd.readouterr().err
    assert "implicit GEMM" in log and "disagrees" not in log, log[-3000:]


# ---------------------------------------------------------------------------------------------
# 3xTF32 (the exact rung, kernels.PRECISE_SPLIT): the exact plan keeps results NCHW, and every
# convolution of fp32 without a bias carries the kernel with split operands.
SPLIT_CASES = ["conv2d", "transposed 3d", "conv2d 128 channels strided", "plain conv3d"]


@pytest.mark.skipif(cudnn_include() is None, reason="no cudnn.h (set STITCHCUDA_EXTRA_INCLUDE to a folder with it)")
def test_the_exact_rung_carries_the_split_kernel(tmp_path, monkeypatch):
    monkeypatch.delenv(emit_igemm.NCHW_ENV, raising=False)
    # (few input channels take the direct fp32 kernel as cuDNN's contender by default: test_direct_conv)
    monkeypatch.setenv(DIRECT_ENV, "0")
    for k, case in enumerate(SPLIT_CASES[:2]):
        torch.manual_seed(0)
        module, shape = _module(case)
        cand = builtin_candidate(module, [torch.randn(shape)], host=False, precise=kernels.PRECISE_SPLIT)
        src = cand.files[CU_FILE]
        assert cand.precision == "3xtf32"
        assert "SPLIT3 = true" in src and "Y_NCHW = true" in src and "sc_igemm_conv<" in src, src[-3000:]
        assert any("3xTF32 implicit GEMM" in n for n in cand.notes), cand.notes
        assert_builds_clean_for_sm90(cand, tmp_path / f"s{k}.cu", cudnn_include())
    # TF32 candidates keep the unsplit kernel; '0' keeps the exact rung's NCHW results on cuDNN alone.
    module, shape = _module("conv2d")
    assert "SPLIT3 = false" in builtin_candidate(module, [torch.randn(shape)], host=False).files[CU_FILE]
    monkeypatch.setenv(emit_igemm.NCHW_ENV, "0")
    src = builtin_candidate(module, [torch.randn(shape)], host=False, precise=kernels.PRECISE_SPLIT).files[CU_FILE]
    assert "sc_igemm_conv<" not in src


def test_the_full_fp32_rung_leaves_it_out():
    module, shape = _module("conv2d")
    cand = builtin_candidate(module, [torch.randn(shape)], host=False, precise=kernels.PRECISE_FP32)
    assert "sc_igemm_conv<" not in cand.files[CU_FILE]


def _forced_error(case: str, precise: int, tmp_path, tag: str) -> float:
    """The forced kernel's largest error against the module in fp64, over its mean magnitude."""
    torch.manual_seed(3)
    module, shape = _module(case)
    cand = builtin_candidate(module, [torch.randn(shape)], host=False, precise=precise)
    assert "sc_igemm_conv<" in cand.files[CU_FILE]
    new, _ = load_model_new(cand, module, tmp_path / tag)
    new = new.cuda()
    worst = 0.0
    with torch.no_grad():
        for seed in range(3):
            torch.manual_seed(seed)
            x = torch.randn(shape, device="cuda")
            want = module.double().cuda()(x.double())
            got = new(x).double()
            worst = max(worst, ((got - want).abs().max() / want.abs().mean()).item())
    return worst


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("case", SPLIT_CASES)
def test_on_the_gpu_the_split_kernel_keeps_fp32_accuracy(case, tmp_path, monkeypatch, capfd):
    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    monkeypatch.delenv(emit_igemm.NCHW_ENV, raising=False)
    monkeypatch.setenv("STITCHCUDA_CONV_IGEMM", "1")
    monkeypatch.setenv("STITCHCUDA_CONV_LOG", "1")
    # (few input channels take the direct fp32 kernel on the exact rung by default: test_direct_conv)
    monkeypatch.setenv(DIRECT_ENV, "0")
    split = _forced_error(case, kernels.PRECISE_SPLIT, tmp_path, "split")
    log = capfd.readouterr().err
    assert "implicit GEMM" in log and "disagrees" not in log, log[-3000:]
    # fp32's own error over 72-1152 products is ~1e-6 of the mean; TF32's is ~1e-3.
    assert split < 2e-5, split
    if case == SPLIT_CASES[0]:  # the same kernel unsplit: what the split buys (the check can fail)
        tf32 = _forced_error(case, kernels.PRECISE_TF32, tmp_path, "tf32")
        assert tf32 > 20 * split, (tf32, split)
