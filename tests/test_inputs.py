"""Adversarial input sets: each kind's transform, done in place on the freshly made set (no copy of
an input-sized tensor: level1/45's 16 GiB input ran the H100 out of memory with copies), integer
inputs untouched, and an input passed twice transformed once."""

from __future__ import annotations

import pytest
import torch

from stitchcuda.inputs import ADVERSARIAL, KINKS, SPIKE_SCALE, SPIKE_SHARE, adversarial


def fresh() -> list:
    torch.manual_seed(0)
    return [torch.rand(3, 1000) + 0.5, torch.arange(7), 2.5]


EXPECTED = {
    "large": lambda x: x * 1e3,
    "tiny": lambda x: x * 1e-4,
    "negated": lambda x: -x,
    "mixed-sign": lambda x: (x - x.mean()) * 4,
}


@pytest.mark.parametrize("kind", sorted(ADVERSARIAL))
def test_each_kind_transforms_the_float_inputs_in_place(kind):
    base = fresh()
    before = [a.clone() if isinstance(a, torch.Tensor) else a for a in base]
    ptr = base[0].data_ptr()
    out = adversarial(base, kind, seed=1)
    assert out[0].data_ptr() == ptr  # the given tensor, not a copy
    assert torch.equal(out[1], before[1]) and out[2] == 2.5
    if kind in EXPECTED:
        torch.testing.assert_close(out[0], EXPECTED[kind](before[0]))
    elif kind == "sparse-spikes":  # a few elements SPIKE_SCALE times theirs, the rest as they were
        moved = out[0] != before[0]
        assert 1 <= int(moved.sum()) <= max(1, int(before[0].numel() * SPIKE_SHARE))
        torch.testing.assert_close(out[0][moved], before[0][moved] * SPIKE_SCALE)
    else:  # near-kinks: every value within the jitter of a kink
        dist = (out[0].reshape(-1, 1) - torch.tensor(KINKS)).abs().min(dim=1).values
        assert float(dist.max()) <= 1e-3 + 1e-6
        assert len(torch.unique(torch.round(out[0]))) > 5  # spread over the kinks, not one of them


def test_near_kinks_is_fixed_by_its_seed_and_works_on_strided_inputs():
    a = adversarial([torch.zeros(4, 300)], "near-kinks", seed=5)[0]
    b = adversarial([torch.zeros(4, 300)], "near-kinks", seed=5)[0]
    c = adversarial([torch.zeros(4, 300)], "near-kinks", seed=6)[0]
    assert torch.equal(a, b) and not torch.equal(a, c)
    strided = torch.zeros(300, 4).t()
    out = adversarial([strided], "near-kinks", seed=5)[0]
    assert out.data_ptr() == strided.data_ptr() and float(out.abs().sum()) > 0


def test_an_input_given_twice_is_transformed_once():
    x = torch.rand(100) + 0.5
    orig = x.clone()
    a, b = adversarial([x, x], "large", seed=1)
    torch.testing.assert_close(a, orig * 1e3)
    torch.testing.assert_close(b, orig * 1e3)
