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
