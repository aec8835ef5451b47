"""Adversarial input sets: each kind's transform, done in place on the freshly made set (no copy of
an input-sized tensor: level1/45's 16 GiB input ran the H100 out of memory with copies), integer
inputs untouched, and an input passed twice transformed once."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from stitchcuda.inputs import (
    ADVERSARIAL,
    COUPLE_MIN_AXIS,
    KINKS,
    LINE_MIN_AXIS,
    SPIKE_SCALE,
    SPIKE_SHARE,
    adversarial,
    coupling_pairs,
    float_shapes,
    quiet_scale,
)


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
    elif kind == "shared-lines":  # whole lines along the long axis, SPIKE_SCALE out, the rest as they were
        moved = out[0] != before[0]
        # whole columns (the axis of 1000 is long), no row of its own (the axis of 3 is short)
        assert torch.equal(moved.all(dim=0), moved.any(dim=0)) and int(moved.all(dim=0).sum()) >= 1
        assert float(out[0][moved].abs().min()) >= 0.5 * SPIKE_SCALE and bool((out[0][moved] > 0).all())
        columns = out[0][:, moved.all(dim=0)]
        assert torch.equal(columns, columns[:1].expand_as(columns))  # one value a line
        torch.testing.assert_close(out[0][~moved], before[0][~moved])
    elif kind == "quiet-bulk":  # one element the draw's largest, the rest quiet_scale times smaller
        kept = out[0] == before[0].abs().max()
        assert int(kept.sum()) == 1 and quiet_scale(before[0]) == SPIKE_SCALE  # 4 x sqrt(3000) < SPIKE_SCALE
        torch.testing.assert_close(out[0][~kept], before[0][~kept] / quiet_scale(before[0]))
    elif kind == "rearranged":  # the draw's own range and spread, in another order
        assert float(out[0].min()) >= float(before[0].min()) and float(out[0].max()) <= float(before[0].max())
        assert abs(float(out[0].std()) / float(before[0].std()) - 1) < 0.3 and not torch.equal(out[0], before[0])
    else:  # near-kinks: every value within the jitter of a kink
        dist = (out[0].reshape(-1, 1) - torch.tensor(KINKS)).abs().min(dim=1).values
        assert float(dist.max()) <= 1e-3 + 1e-6
        assert len(torch.unique(torch.round(out[0]))) > 5  # spread over the kinks, not one of them


@pytest.mark.parametrize("share", [1 / 2, 1 / 8, 1 / 64, 1 / 256])
@pytest.mark.parametrize("block", [1, 64])
def test_a_block_sample_of_quiet_bulk_misses_its_norm_on_every_seed(share, block):
    """The set's point: a sum of squares (a norm) estimated from a sample (blocks the sampler picks,
    scaled up by the share it read) is off by far more than any tolerance, wherever the one loud
    element falls. Its first form (1/8192 of the elements kept) met a 1/64 sample within 1e-2 now
    and then."""
    n = 1 << 18
    for seed in range(40):
        x = adversarial([torch.rand(n)], "quiet-bulk", seed=seed)[0]
        picked = torch.arange(n // block) % round(1 / share) == seed % round(1 / share)
        exact, estimate = float(x.square().sum()), float(x.view(-1, block)[picked].square().sum()) / share
        assert abs(estimate / exact - 1) > 0.3, (seed, exact, estimate)


def test_quiet_bulk_shrinks_by_the_element_counts_root_where_the_dtype_has_the_range():
    """fp32's rest keeps normal squares at any count; fp16's would not, so it keeps the first form's
    SPIKE_SCALE, where its values (not their squares) stay normal numbers. The rest's values stay
    far from the eps a norm is clamped at (a cosine loss of 8192 rows of 4096: each row's norm 3e-3)."""
    x = adversarial([torch.rand(1 << 16, dtype=torch.float16) + 0.5], "quiet-bulk", seed=3)[0]
    assert quiet_scale(x) == SPIKE_SCALE and bool(torch.isfinite(x).all())
    assert float(x[x != x.max()].float().min()) >= torch.finfo(torch.float16).tiny
    big = torch.empty(8192, 4096, dtype=torch.float32, device="meta")
    assert quiet_scale(big) == 4 * 2**12.5 and 64 / quiet_scale(big) > 1e-3


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


def test_shared_lines_are_the_same_in_every_input_of_a_shape_and_cross_every_long_axis():
    """The lines correlate inputs of one shape (places and values alike), whatever other inputs there
    are; each long axis gets lines, short ones none; zeros stay; signed only where the input was."""
    torch.manual_seed(3)
    p, t = torch.randn(256, 4096), torch.randn(256, 4096)
    t[:, :8] = 0  # a mask-like block: zeros stay zeros
    other = torch.rand(2, 300)
    out_p, out_other, out_t = adversarial([p, other, t], "shared-lines", seed=9)
    big_p, big_t = out_p.abs() >= 0.5 * SPIKE_SCALE, out_t.abs() >= 0.5 * SPIKE_SCALE
    assert big_p.all(dim=0).any() and big_p.all(dim=1).any()  # a whole column and a whole row
    both = big_p & big_t
    assert torch.equal(out_p[both], out_t[both]) and both.sum() >= big_p.sum() - 8 * 256
    assert bool((out_p[big_p] < 0).any())  # randn's domain: signed lines
    assert bool((out_t[:, :8] == 0).all())
    assert bool((out_other >= 0).all()) and float(out_other.max()) >= 0.5 * SPIKE_SCALE  # rand's: positive
    assert not (out_other.abs() >= 0.5 * SPIKE_SCALE).all(dim=1).any()  # axis 0 (2) < LINE_MIN_AXIS
    assert 2 < LINE_MIN_AXIS <= 256
    again = adversarial([torch.randn(256, 4096)], "shared-lines", seed=9)[0]
    assert torch.equal(again.abs() >= 0.5 * SPIKE_SCALE, big_p)  # the places follow the seed and shape
    moved = adversarial([torch.randn(256, 4096)], "shared-lines", seed=10)[0].abs() >= 0.5 * SPIKE_SCALE
    assert not torch.equal(moved, big_p)


def test_rearranged_keeps_the_range_and_breaks_estimates_that_assume_iid_values():
    """A range test sees an ordinary rand() set; a matmul as rowsum x colsum / K, attention as the mean
    of V, and a loss from every second row are each within tolerance on iid values and far off here
    (the red team's candidates, 2026-12-01); non-finite values stay where they were."""
    torch.manual_seed(1)
    a, b = torch.rand(32, 65536), torch.rand(65536, 32)
    iid = (a @ b - a.sum(1, keepdim=True) * b.sum(0, keepdim=True) / 65536).abs().max() / (a @ b).abs().min()
    a, b = adversarial([a, b], "rearranged", seed=4)
    assert 0 <= float(a.min()) and float(a.max()) <= 1 and 0 <= float(b.min()) and float(b.max()) <= 1
    off = (a @ b - a.sum(1, keepdim=True) * b.sum(0, keepdim=True) / 65536).abs().max() / (a @ b).abs().min()
    assert float(iid) < 1e-2 < float(off)
    q, k, v = adversarial([torch.rand(2, 128, 64) for _ in range(3)], "rearranged", seed=4)
    attn = torch.softmax(q @ k.transpose(-1, -2) / 8, -1) @ v
    assert float(((attn - v.mean(-2, keepdim=True)).abs() / attn.abs()).max()) > 1e-2
    p, t = adversarial([torch.rand(1024, 1024), torch.rand(1024, 1024)], "rearranged", seed=4)
    full, half = F.smooth_l1_loss(p, t), F.smooth_l1_loss(p[::2], t[::2])
    assert float((full - half).abs() / full) > 1e-3
    x = torch.rand(8, 300)
    x[2, 5] = float("-inf")
    out = adversarial([x], "rearranged", seed=4)[0]
    assert out[2, 5] == float("-inf") and bool(torch.isfinite(out).sum() == x.numel() - 1)


def test_coupling_pairs_are_the_last_two_axes_of_one_length_and_long_enough():
    assert coupling_pairs(float_shapes([torch.rand(32, 4096), torch.rand(4096, 64)])) == [(0, 1, 1, 0)]
    # attention's q and k: the sequence and head axes; batch and heads (leading) take no part
    assert coupling_pairs([(2, 8, 128, 64), (2, 8, 128, 64)]) == [(0, 2, 1, 2), (0, 3, 1, 3)]
    assert coupling_pairs([(4, 8), (8, 4)]) == []  # below COUPLE_MIN_AXIS
    assert 8 < COUPLE_MIN_AXIS <= 16
    # integer inputs and one-element tensors take no part; one float input has nothing to follow
    assert coupling_pairs(float_shapes([torch.arange(64), torch.rand(64), torch.tensor(1.0)])) == []


def test_coupled_keeps_each_input_an_iid_draw_and_breaks_estimates_that_assume_operands_independent():
    """Each operand alone keeps its draw's values (every moment exact) and shows no row or column
    effects a one-pass test could see; the first is untouched. rowsum x colsum / K, within 1e-2 on
    iid rand() operands, is far off where B's columns follow A's rows (the red team's candidate,
    2026-12-02); each query of attention meets the key that follows it in its own head."""
    torch.manual_seed(1)
    a, b = torch.rand(256, 65536), torch.rand(65536, 256)
    a0, b0 = a.clone(), b.clone()

    def rank1_miss(a, b):
        return float(((a @ b - a.sum(1, keepdim=True) * b.sum(0, keepdim=True) / 65536).abs() / (a @ b).abs()).max())

    iid = rank1_miss(a, b)
    a, b = adversarial([a, b], "coupled", seed=4)
    assert torch.equal(a, a0) and not torch.equal(b, b0)
    assert torch.equal(b.flatten().sort().values, b0.flatten().sort().values)
    # the dispersion of 256 column and row means, which a gate compares with iid values' (the red
    # team's: within 6 sigma of the sample variance's spread, sqrt(2 / 256)): within 4 sigma here
    for dim in (0, 1):
        ratio = float(b.mean(dim).var() / (1 / 12 / b.shape[dim]))
        assert abs(ratio - 1) < 4 * (2 / 256) ** 0.5, (dim, ratio)
    assert iid < 1e-2 < rank1_miss(a, b)
    q, k, v = adversarial([torch.rand(2, 4, 512, 256) for _ in range(3)], "coupled", seed=5)
    s = q @ k.transpose(-1, -2) / 16
    lead = (s.max(-1).values - s.mean(-1)) / s.std(-1)  # each query's largest score, in its row's spreads
    assert float(lead.median()) > 2.5
    iid_s = (lambda q, k: q @ k.transpose(-1, -2) / 16)(*[torch.rand(2, 4, 512, 256) for _ in range(2)])
    assert float(((iid_s.max(-1).values - iid_s.mean(-1)) / iid_s.std(-1)).median()) < float(lead.median()) - 0.3


def test_coupled_keeps_zeros_and_non_finite_values_in_place_and_follows_its_seed():
    torch.manual_seed(2)
    t, u = torch.triu(torch.rand(256, 256)), torch.triu(torch.rand(256, 256))
    u[3, 7] = float("nan")
    _, out = adversarial([t.clone(), u.clone()], "coupled", seed=3)
    assert torch.equal(torch.triu(out).nan_to_num(), out.nan_to_num()) and bool(out[3, 7].isnan()) and not torch.equal(out[:10], u[:10])
    again = adversarial([t.clone(), u.clone()], "coupled", seed=3)[1]
    other = adversarial([t.clone(), u.clone()], "coupled", seed=4)[1]
    assert torch.equal(again.nan_to_num(), out.nan_to_num()) and not torch.equal(other.nan_to_num(), out.nan_to_num())
    strided = torch.rand(64, 32).t()  # a view from get_inputs: filled in place
    ptr = strided.data_ptr()
    first, second = adversarial([torch.rand(16, 64), strided], "coupled", seed=1)
    assert second.data_ptr() == ptr and not torch.equal(second, strided.clone().zero_())
    single = torch.rand(64, 64)
    assert torch.equal(adversarial([single.clone()], "coupled", seed=1)[0], single)


def test_the_coupled_sets_matching_is_a_permutation_without_fixed_points():
    """Each fibre meets another's, never its own place (a fixed point would couple x and y element by
    element, which a difference or distance of the two would then see)."""
    from stitchcuda.inputs import _affine_permutation

    gen = torch.Generator().manual_seed(5)
    for n in (2, 3, 16, 1024, 1000, 4096, 65536):
        for _ in range(20):
            alpha, beta = _affine_permutation(n, gen)
            image = (alpha * torch.arange(n) + beta) % n
            assert torch.equal(image.sort().values, torch.arange(n)) and not bool((image == torch.arange(n)).any())
