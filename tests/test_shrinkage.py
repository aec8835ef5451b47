"""shrinkage.slope: an error that is the output's own variation taken away, against rounding's."""

from __future__ import annotations

import torch

from stitchcuda.agents.verify.shrinkage import slope
from stitchcuda.agents.verify.worker import SMOOTH_SLOPE


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _tf32(x: torch.Tensor) -> torch.Tensor:
    """x with its mantissa cut to TF32's 10 bits (toward zero)."""
    return (x.view(torch.int32) & ~0x1FFF).view(torch.float32)


def test_an_average_along_an_axis_in_place_of_the_rows_is_caught():
    q, k = (torch.randn(128, 64, generator=_gen(i)) * 0.02 for i in (1, 2))
    v = torch.randn(128, 64, generator=_gen(3))
    exact = torch.softmax(q @ k.T / 8, dim=-1) @ v
    estimate = v.mean(dim=0, keepdim=True).expand_as(exact)
    s = slope([exact], [estimate])
    assert s is not None and s < -0.9


def test_rounding_is_not():
    a, b = torch.randn(256, 512, generator=_gen(6)), torch.randn(512, 256, generator=_gen(7))
    exact = (a.double() @ b.double()).float()
    for got in (a @ b,  # another order of the sums
                _tf32(a) @ _tf32(b),  # TF32 operands
                exact.bfloat16().float(),  # rounded to bf16
                exact * (1 - 1e-4)):  # a scale off by a little (a sum in another order, everywhere)
        s = slope([exact], [got])
        assert s is None or s > SMOOTH_SLOPE, s


def test_outputs_without_variation_or_too_small_are_left_out():
    flat = torch.full((64, 64), 3.0)
    assert slope([flat], [flat + 1e-3]) is None  # nothing along any axis to take away
    small = torch.randn(8, 8, generator=_gen(8))
    assert slope([small], [small.mean(0, keepdim=True).expand_as(small)]) is None  # too few elements
    assert slope([torch.arange(300)], [torch.zeros(300, dtype=torch.int64)]) is None  # not floating
