"""The channels-last copies around a convolution (conv.cuh's sc_conv_transpose): its 32x32-tile
kernel for two long sides and its narrow kernel for a side of at most 8 (in fp32 with sides multiples
of 4: 4x4 blocks through registers, 32 x 128 a block, and the narrow copy four at a time; scalar
otherwise), both ways (NCHW -> NHWC for
the input and the weight, NHWC -> NCHW with the bias for the result), on sizes that leave partial
tiles. Built for sm_90 here; on a GPU, with the channels-last plan forced, each candidate matches
its module."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from conftest import assert_builds_clean_for_sm90, builtin_candidate, load_model_new
from test_emit_conv import cudnn_include

pytestmark = pytest.mark.usefixtures("isolated_cache")


def _flat(cin: int, cout: int, k: int, transposed: bool = False, dims: int = 2) -> type[nn.Module]:
    """A module class (no constructor arguments, as the candidate's ModelNew mirrors them) whose
    result is read NCHW (flatten), so the NHWC plan copies it back with the bias."""
    conv = {(False, 2): nn.Conv2d, (True, 2): nn.ConvTranspose2d, (False, 3): nn.Conv3d,
            (True, 3): nn.ConvTranspose3d}[(transposed, dims)]

    class Flat(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = conv(cin, cout, k)

        def forward(self, x):
            return torch.relu(self.conv(x)).flatten(1)

    return Flat


class MinOverChannels(nn.Module):
    """The result kept channels-last for the reduction: only the input and weight are copied."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(65, 40, 3)

    def forward(self, x):
        return torch.min(self.conv(x) * 2.0, dim=1, keepdim=True)[0]


# (module class, input): which side of each copy is long or narrow is in the comment.
CASES = [
    # x: 70 x 437 (tiles, partial both ways); y back: 357 x 130 (tiles, partial)
    (_flat(70, 130, 3), [torch.randn(2, 70, 19, 23)]),
    # x: 3 x 1155 (narrow rows); y back: 1023 x 12 (tiles, 12 of 32 columns)
    (_flat(3, 12, 3), [torch.randn(2, 3, 33, 35)]),
    # x: 16 x 130 (tiles); y back: 130 x 5 (narrow columns); a 1x1 weight: 16 x 1 (narrow)
    (_flat(16, 5, 1), [torch.randn(3, 16, 10, 13)]),
    # transposed 3-D: x 9 x 210 (tiles), y back 504 x 10 (tiles)
    (_flat(9, 10, 3, transposed=True, dims=3), [torch.randn(2, 9, 5, 6, 7)]),
    # the input 65 x 4096 copied by tiles, the result kept channels-last
    (MinOverChannels, [torch.randn(2, 65, 64, 64)]),
    # fp32 with both sides multiples of 4 (sc_conv_transpose_reg4, 32 x 128 a block): x 64 x 1020
    # (the last block 124 wide); y back 896 x 40 with the bias (blocks 40 wide)
    (_flat(64, 40, 3), [torch.randn(2, 64, 34, 30)]),
    # x 16 x 360 (blocks of 16 rows, the last 104 wide); y back 288 x 12 (blocks 12 wide)
    (_flat(16, 12, 3), [torch.randn(3, 16, 18, 20)]),
    # the narrow copy four at a time (sc_conv_transpose_narrow4): x 3 x 1156; y back 1024 x 16 in tiles
    (_flat(3, 16, 3), [torch.randn(2, 3, 34, 34)]),
    # and the other way, with the bias: y back 80 x 6; x 16 x 80 (one block, 16 x 80 of it)
    (_flat(16, 6, 1), [torch.randn(2, 16, 8, 10)]),
]


@pytest.mark.skipif(cudnn_include() is None, reason="no cudnn.h (set STITCHCUDA_EXTRA_INCLUDE to a folder with it)")
def test_layout_copies_build_for_sm90(tmp_path):
    for k, (make, inputs) in enumerate(CASES):
        torch.manual_seed(0)
        cand = builtin_candidate(make(), inputs, host=False)
        assert "sc_conv_transpose_narrow" in "".join(cand.files.values()) and "sc_conv_transpose_reg4" in "".join(cand.files.values())
        assert_builds_clean_for_sm90(cand, tmp_path / f"c{k}.cu", cudnn_include())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_the_gpu_the_channels_last_plan_matches_each_module(tmp_path, monkeypatch, capfd):
    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    monkeypatch.setenv("STITCHCUDA_CONV_NHWC", "1")
    monkeypatch.setenv("STITCHCUDA_CONV_LOG", "1")
    for k, (make, inputs) in enumerate(CASES):
        torch.manual_seed(3)
        module = make()
        cand = builtin_candidate(module, inputs, host=False)
        module = module.cuda()
        new, _ = load_model_new(cand, module, tmp_path / f"m{k}")
        new = new.cuda()
        args = [t.cuda() for t in inputs]
        with torch.no_grad():
            want = module(*args)
            for _ in range(2):  # the first call plans (and times) the convolution, the second runs the plan
                got = new(*args)
        torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2 * want.abs().max().item())
    log = capfd.readouterr().err
    # Forced, and not refused by cuDNN for these: each module's one convolution ran channels-last
    # (an NCHW result through the copy back, or the result kept channels-last).
    ran = [ln for ln in log.splitlines() if ": channels-last layout," in ln or ": channels-last result, cuDNN NHWC" in ln]
    assert len(ran) == len(CASES) and "no channels-last plan" not in log, log[-3000:]
