"""timed_sample: the timed outputs compared in full (or at secret places) where sums alone pass."""

from __future__ import annotations

import torch

from stitchcuda.agents.verify import dynamic_check as dyn
from stitchcuda.agents.verify import timed_sample
from stitchcuda.agents.verify.compare import Tolerance

TOL = Tolerance(1e-4, "fp32 pointwise")


def _ref() -> torch.Tensor:
    return torch.relu(torch.randn(64, 33, generator=torch.Generator().manual_seed(3)))


def test_rolled_rows_keep_the_sums_and_miss_in_full():
    ref = _ref()
    rolled = ref.roll(1, dims=0)
    # What every timed output is held to cannot tell them apart...
    assert dyn.stats_match(dyn.output_stats([rolled]), dyn.output_stats([ref]), TOL.rtol)
    sample = timed_sample.keep([[ref]], trials=10)
    # ...the comparison in full can; the reference's own values pass, and so do values an ulp away.
    assert not timed_sample.compare(sample, 0, [rolled], TOL).ok
    assert timed_sample.compare(sample, 0, [ref.clone()], TOL).ok
    assert timed_sample.compare(sample, 0, [torch.nextafter(ref, torch.full_like(ref, 9.0))], TOL).ok


def test_large_outputs_are_compared_at_secret_places():
    ref = _ref()
    sample = timed_sample.keep([[ref, 7]], trials=10, elements=256)
    kept = sample.sets[0][0]
    assert kept.places is not None and kept.places.numel() == 256 and kept.shape == (64, 33)
    assert timed_sample.compare(sample, 0, [ref.clone(), 7], TOL).ok
    assert not timed_sample.compare(sample, 0, [ref.roll(1, dims=0), 7], TOL).ok
    # A share of the elements wrong: 256 places miss a quarter of them with probability 0.75^256.
    half = ref.clone()
    half[::4] += 1.0
    assert not timed_sample.compare(sample, 0, [half, 7], TOL).ok
    # Another shape with the same elements, another count of outputs, another non-tensor value.
    assert not timed_sample.compare(sample, 0, [ref.reshape(33, 64), 7], TOL).ok
    assert not timed_sample.compare(sample, 0, [ref.clone()], TOL).ok
    assert not timed_sample.compare(sample, 0, [ref.clone(), 8], TOL).ok


def test_kept_values_are_copies_and_places_differ_between_runs():
    ref = _ref()
    sample = timed_sample.keep([[ref]], trials=10)
    ref.zero_()  # the caller's buffer reused after keep: what was kept stays
    assert sample.sets[0][0].expected.abs().sum() > 0
    a = timed_sample.keep([[_ref()]], trials=10, elements=64).sets[0][0].places
    b = timed_sample.keep([[_ref()]], trials=10, elements=64).sets[0][0].places
    assert not torch.equal(a, b)  # drawn from the OS, not from a seed the candidate could set


def test_trials_picked_are_distinct_and_in_range():
    for trials in (1, 3, 10, 50):
        picked = timed_sample.pick_trials(trials)
        assert len(picked) == min(trials, timed_sample.PICKS) and all(0 <= t < trials for t in picked)
    torch.manual_seed(0)
    first = {timed_sample.pick_trials(50) for _ in range(20)}
    assert len(first) > 1  # not one fixed choice


def _tf32_product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b with both operands rounded to TF32 (10 mantissa bits): an honest TF32 kernel's error."""
    def tf32(t: torch.Tensor) -> torch.Tensor:
        bits = t.view(torch.int32)
        return ((bits + 0x1000) & ~0x1FFF).view(torch.float32)
    return tf32(a) @ tf32(b)


def _drift_of(want: torch.Tensor, own: torch.Tensor, timed: torch.Tensor, *, rerun: torch.Tensor | None = None,
              elements: int = 1 << 22) -> timed_sample.Drift | None:
    sample = timed_sample.keep([[want]], trials=10, elements=elements)
    timed_sample.keep_own(sample.sets[0], [own], [own.clone() if rerun is None else rerun])
    return timed_sample.drift(sample, 0, [timed])


def test_a_cheaper_product_while_timed_drifts_from_the_candidates_own_output():
    """The candidate's own TF32 product untimed, the same product on bf16 operands (twice as fast on
    tensor cores, within TF32's 1e-2 tolerance) on the timed calls: it passes the tolerance and drifts
    from the candidate's own output by more than twice that output's own error."""
    g = torch.Generator().manual_seed(5)
    a, b = torch.randn(128, 512, generator=g), torch.randn(512, 96, generator=g)
    want = a @ b
    own = _tf32_product(a, b)
    cheaper = (a.bfloat16().float() @ b.bfloat16().float())
    assert timed_sample.compare(timed_sample.keep([[want]], trials=10), 0, [cheaper], Tolerance(1e-2, "tf32")).ok
    d = _drift_of(want, own, cheaper)
    assert d is not None and timed_sample.drifted(d) and d.moved > 4 * d.own_error, d
    # Sampled places for a large output tell the same.
    assert timed_sample.drifted(_drift_of(want, own, cheaper, elements=4096))
    # Its untimed call made noisy on purpose (own error up to the estimate's) raises no bar the
    # checked sets' error keeps low.
    noisy = own * (1 + 2e-3 * torch.randn(own.shape, generator=g))
    d = _drift_of(want, noisy, cheaper)
    assert not timed_sample.drifted(d) and timed_sample.drifted(d, checked_error=3e-4), d


def test_honest_reruns_do_not_drift():
    """The same kernel again (bit for bit), another order of additions (fp32 rounding on top of a TF32
    error), and a bf16 kernel whose reruns differ at bf16's resolution: no drift past the bar."""
    g = torch.Generator().manual_seed(6)
    a, b = torch.randn(128, 512, generator=g), torch.randn(512, 96, generator=g)
    want = a @ b
    own = _tf32_product(a, b)

    def reordered() -> torch.Tensor:
        return own * (1 + 1e-6 * torch.randn(own.shape, generator=g))

    assert not timed_sample.drifted(_drift_of(want, own, own.clone()))
    assert not timed_sample.drifted(_drift_of(want, own, reordered(), rerun=reordered()))
    own_bf16 = (a.bfloat16() @ b.bfloat16()).float()

    def bf16_rerun() -> torch.Tensor:
        return (own_bf16 * (1 + 2 ** -9 * torch.randn(own.shape, generator=g))).bfloat16().float()

    assert not timed_sample.drifted(_drift_of(want, own_bf16, bf16_rerun(), rerun=bf16_rerun()), checked_error=1e-3)


def test_noisy_outputs_are_judged_by_their_own_reruns_and_scalars_not_at_all():
    """A result added with bf16 atomics lands elsewhere within bf16's rounding on every call, as far from
    the last call as from the reference: over 2048 elements the rerun's distance is a tight bar, and
    none of 50 such timed outputs is flagged. A scalar (one draw each) is not judged (a review,
    2026-12-04: 10 of 40 such scalars crossed a ratio of two draws)."""
    g = torch.Generator().manual_seed(7)
    want = 50 + torch.rand(2048, generator=g)

    def call() -> torch.Tensor:
        return (want * (1 + 4e-3 * torch.randn(want.shape, generator=g))).bfloat16().float()

    # (The checked sets' error of such a candidate is its noise, ~4e-3: the rerun's term is capped by it.)
    assert not any(timed_sample.drifted(_drift_of(want, own, call(), rerun=call()), checked_error=4e-3)
                   for own in (call() for _ in range(50)))
    scalar = torch.tensor([100.0])
    assert _drift_of(scalar, scalar * 1.004, scalar * 0.99, rerun=scalar) is None


def test_a_rerun_far_off_lifts_the_bar_no_further_than_the_error():
    """A rerun perturbed on purpose (the right values rolled by a row: every sum kept) was 1.4 away from
    the first call, and RERUN_RATIO x that was the bar: no estimate could cross it (a review,
    2026-12-04). Its term is now at most RERUN_RATIO x the error."""
    d = timed_sample.Drift(moved=5e-3, own_error=1e-3, rerun=1.4)
    assert timed_sample.bar(d) == timed_sample.RERUN_RATIO * 1e-3 and timed_sample.drifted(d)
    assert timed_sample.bar(timed_sample.Drift(moved=0.0, own_error=1e-3, rerun=2e-4)) == 2e-3  # (an honest rerun's)


def test_drift_skips_what_it_cannot_compare():
    """Integer outputs, outputs the candidate's own untimed call did not give, non-finite elements."""
    ints = torch.arange(2048)
    sample = timed_sample.keep([[ints]], trials=10)
    timed_sample.keep_own(sample.sets[0], [ints], [ints])
    assert timed_sample.drift(sample, 0, [ints + 1]) is None
    want = torch.arange(1.0, 2050.0)
    want[1] = float("inf")
    sample = timed_sample.keep([[want]], trials=10)
    assert timed_sample.drift(sample, 0, [want]) is None  # no untimed output kept (a refereed set)
    timed_sample.keep_own(sample.sets[0], [want.clone()], [want.clone()])
    timed = want.clone()
    timed[1] = float("nan")
    assert timed_sample.drift(sample, 0, [timed]) == timed_sample.Drift(0.0, 0.0, 0.0)
