"""The direct dense convolution for few input channels (emit_conv._direct_dense, cuda/direct_conv.cuh):
fp32 FMA on the exact rungs, as cuDNN's first-call contender (the default), or with
STITCHCUDA_CONV_DIRECT=1 in place of cuDNN. On the CPU the candidate runs the kernel's
own index math through its host entry (staging slabs in chunks, channel chunks, padding, strides,
dilations, 2-D and 3-D) against PyTorch; what it leaves to cuDNN; an sm_90 build. On a GPU the built
candidate matches its module at fp32's accuracy."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from conftest import assert_builds_clean_for_sm90, builtin_candidate, load_model_new, needs_nvcc

from stitchcuda.agents.coder import kernels
from stitchcuda.agents.coder.emit_conv import DIRECT_ENV, conv_params, dense_direct
from stitchcuda.agents.coder.model_new import CU_FILE


class ConvAct(nn.Module):
    """A convolution and a saturating chain after it (the shape of level 2's 48 and 90)."""

    def forward(self, x):
        return torch.sigmoid(torch.tanh(self.conv(x) * 2.0))


class Stem3d(ConvAct):
    """3 -> 16 channels of 3x3x3: all nine slabs staged at once, one channel chunk."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(3, 16, 3)


class ManySlabs3d(ConvAct):
    """8 input channels of 3 depth taps: 24 slabs, staged in several chunks; 20 channels in chunks."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(8, 20, 3, stride=(1, 2, 1), padding=1)


class Dilated2d(ConvAct):
    """2-D, dilated columns, a partial last channel chunk (5 of 8), two column tiles, no bias."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 5, (3, 2), dilation=(1, 3), padding=(1, 2), bias=False)


class Stem7x7(ConvAct):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 7, stride=2, padding=3)


class FewOut2d(ConvAct):
    """Three output channels: one chunk of three (the weights read one at a time)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3, padding=1)


CASES = {
    "2d three output channels": (FewOut2d, (2, 2, 9, 33)),
    "3d stem": (Stem3d, (2, 3, 5, 9, 40)),
    "3d padded, strided, many slabs": (ManySlabs3d, (1, 8, 4, 11, 36)),
    "2d dilated, odd channels": (Dilated2d, (2, 4, 13, 45)),
    "2d strided 7x7 stem": (Stem7x7, (1, 3, 37, 70)),
}


def _direct_ops(cand) -> list[str]:
    return [n for n in cand.notes if "direct, fp32 FMA" in n]


@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.parametrize("make,shape", CASES.values(), ids=CASES.keys())
def test_direct_convolution_matches_pytorch_on_the_cpu(tmp_path, monkeypatch, make, shape):
    monkeypatch.setenv(DIRECT_ENV, "1")
    torch.manual_seed(0)
    module = make()
    x = torch.randn(*shape)
    cand = builtin_candidate(module, [x], host=True, precise=kernels.PRECISE_SPLIT)
    assert len(_direct_ops(cand)) == 1, cand.notes
    new, _ = load_model_new(cand, module, tmp_path)
    with torch.no_grad():
        for given in (x, torch.randn(*shape) * 100):  # large inputs: fp32's accuracy, not TF32's
            want = module(given)
            torch.testing.assert_close(new(given), want, rtol=1e-5, atol=1e-5)


def test_what_stays_with_cudnn(monkeypatch):
    monkeypatch.setenv(DIRECT_ENV, "1")

    def geom(x, w, **kw):
        return dense_direct(conv_params(x, w, kw.get("stride", 1), kw.get("padding", 0), 1, kw.get("transposed", False),
                                        [0], kw.get("groups", 1)), kw.get("dtype", "float32"))

    assert geom((2, 3, 8, 64, 64), (16, 3, 3, 3, 3)) is not None
    assert geom((2, 16, 64, 64), (16, 16, 3, 3)) is None  # many input channels: a GEMM's reuse pays
    assert geom((2, 4, 64, 64), (8, 2, 3, 3), groups=2) is None
    assert geom((2, 4, 64, 64), (4, 8, 3, 3), transposed=True) is None
    assert geom((2, 4, 64, 64), (8, 4, 3, 3), dtype="float16") is None
    assert geom((2, 4, 64, 8), (8, 4, 3, 3)) is None  # planes narrower than a tile's 32 columns


def test_only_the_exact_rungs_take_it_and_by_default_as_a_contender(monkeypatch):
    make, shape = CASES["3d stem"]
    monkeypatch.setenv(DIRECT_ENV, "0")
    off = builtin_candidate(make(), [torch.randn(*shape)], host=False, precise=kernels.PRECISE_SPLIT)
    assert not _direct_ops(off) and not any("direct" in n for n in off.notes)  # cuDNN's alone
    monkeypatch.delenv(DIRECT_ENV, raising=False)
    default = builtin_candidate(make(), [torch.randn(*shape)], host=False, precise=kernels.PRECISE_SPLIT)
    assert not _direct_ops(default)  # the default: cuDNN's launcher, the direct kernel its contender
    assert any("or a direct fp32 kernel where it wins" in n for n in default.notes), default.notes
    monkeypatch.setenv(DIRECT_ENV, "1")
    make, shape = CASES["3d stem"]
    module = make()
    assert not _direct_ops(builtin_candidate(module, [torch.randn(*shape)], host=False))  # TF32: cuDNN
    exact = builtin_candidate(module, [torch.randn(*shape)], host=False, precise=kernels.PRECISE_FP32)
    assert _direct_ops(exact)
    assert exact.precision != "tf32", exact.precision  # labelled by what it runs: fp32 FMA


@needs_nvcc
@pytest.mark.usefixtures("isolated_cache")
def test_as_cudnns_contender_it_builds_clean_for_sm90(tmp_path, monkeypatch):
    """STITCHCUDA_CONV_DIRECT=contend: the exact rung's cuDNN launcher carries the direct kernel as its
    first-call contender, in place of the 3xTF32 implicit GEMM; TF32 candidates are unchanged."""
    from conftest import cudnn_include_or_skip

    include = cudnn_include_or_skip()
    monkeypatch.setenv(DIRECT_ENV, "contend")
    make, shape = CASES["3d padded, strided, many slabs"]
    cand = builtin_candidate(make(), [torch.randn(*shape)], host=False, precise=kernels.PRECISE_SPLIT)
    assert any("or a direct fp32 kernel where it wins" in n for n in cand.notes), cand.notes
    assert "sc_dc_conv_run" in cand.files[CU_FILE] and "sc_igemm_conv" not in cand.files[CU_FILE]
    assert_builds_clean_for_sm90(cand, tmp_path / "contend.cu", include)
    tf32 = builtin_candidate(make(), [torch.randn(*shape)], host=False)
    assert "sc_dc_conv_run" not in tf32.files[CU_FILE]


@needs_nvcc
@pytest.mark.usefixtures("isolated_cache")
def test_direct_convolutions_build_clean_for_sm90(tmp_path, monkeypatch):
    from conftest import cudnn_include_or_skip

    include = cudnn_include_or_skip()
    monkeypatch.setenv(DIRECT_ENV, "1")
    for key in ("3d stem", "3d padded, strided, many slabs"):
        make, shape = CASES[key]
        cand = builtin_candidate(make(), [torch.randn(*shape)], host=False, precise=kernels.PRECISE_SPLIT)
        assert _direct_ops(cand)
        assert_builds_clean_for_sm90(cand, tmp_path / f"{len(key)}.cu", include)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.parametrize("mode", ["1", "contend"])
@pytest.mark.parametrize("make,shape", CASES.values(), ids=CASES.keys())
def test_on_the_gpu_direct_convolutions_match(tmp_path, monkeypatch, make, shape, mode):
    monkeypatch.setenv(DIRECT_ENV, mode)
    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    torch.manual_seed(4)
    module = make()
    x = torch.randn(*shape)
    cand = builtin_candidate(module, [x], host=False, precise=kernels.PRECISE_SPLIT)
    assert any("direct" in n for n in cand.notes)
    new, _ = load_model_new(cand, module, tmp_path)
    new, module, x = new.cuda(), module.cuda(), x.cuda() * 100
    with torch.no_grad(), torch.backends.cudnn.flags(allow_tf32=False):
        torch.testing.assert_close(new(x), module(x), rtol=1e-4, atol=1e-4)
