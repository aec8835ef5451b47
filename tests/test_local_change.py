"""local_change on CPU tensors: which slices a pair changes, and how a change that follows the
reference's (rounding, a TF32-like bias) is told from an estimate's (a row sample of a loss, a
product's row and column sums)."""

from __future__ import annotations

import torch
from conftest import HACKS, hack_candidate, hack_task

from stitchcuda.agents.verify import local_change
from stitchcuda.agents.verify.verifier import VerifyOptions, verify


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_a_share_of_the_slices_comes_from_the_donor_the_same_rows_for_inputs_of_one_length():
    x, t, idx = torch.randn(64, 8), torch.randn(64, 3), torch.arange(64)
    dx, dt, didx = torch.randn(64, 8), torch.randn(64, 3), torch.arange(64) + 1
    (nx, nt, nidx), changed = local_change.swap_slices([x, t, idx], [dx, dt, didx], _gen())
    assert changed == 2
    rows_x = [i for i in range(64) if torch.equal(nx[i], dx[i])]
    rows_t = [i for i in range(64) if torch.equal(nt[i], dt[i])]
    assert len(rows_x) == round(64 * local_change.SLICE_SHARE) and rows_x == rows_t
    assert all(torch.equal(nx[i], x[i]) for i in range(64) if i not in rows_x)
    assert torch.equal(nidx, idx) and nidx is not idx  # integers left alone (a copy)
    assert not torch.equal(nx, x) and torch.equal(x, x.clone())  # the given inputs untouched


def test_the_first_axis_longer_than_one_is_changed_and_one_slice_at_least():
    x, d = torch.randn(1, 3, 5), torch.randn(1, 3, 5)
    (n,), changed = local_change.swap_slices([x], [d], _gen(1))
    assert changed == 1
    same = [c for c in range(3) if torch.equal(n[0, c], d[0, c])]
    assert len(same) == 1 and all(torch.equal(n[0, c], x[0, c]) for c in range(3) if c not in same)


def _mse_pair(seed: int, estimate, bias: float = 0.0):
    """(misses of) one pair for mean((x w - t)^2), the candidate given by `estimate`."""
    g = _gen(seed)
    w = torch.randn(32, 16, generator=g) / 32 ** 0.5
    x, t = torch.randn(4096, 32, generator=g), torch.randn(4096, 16, generator=g)
    (x1, t1), _ = local_change.swap_slices([x, t], [torch.randn(4096, 32, generator=g),
                                                    torch.randn(4096, 16, generator=g)], g)

    def ref(a, b):
        return [((a @ w - b) ** 2).mean().reshape(1)]

    def cand(a, b):
        return [estimate(a, b, w) * (1 + bias)]

    return local_change.pair_misses(ref(x, t), cand(x, t), ref(x1, t1), cand(x1, t1))


def test_an_honest_loss_with_a_systematic_bias_follows_the_change():
    exact = lambda a, b, w: ((a.double() @ w.double() - b.double()) ** 2).mean().float().reshape(1)  # noqa: E731
    tally = local_change.Tally()
    for seed in range(3):
        misses = _mse_pair(seed, exact, bias=-5e-4)  # (TF32 truncation's size of bias)
        assert not local_change.over(misses), misses
        local_change.add_pair(tally, misses)
    assert local_change.finding(tally) is None


def test_a_loss_from_a_row_sample_misses_the_change():
    rows = lambda a, b, w: ((a[::4] @ w - b[::4]) ** 2).mean().reshape(1)  # noqa: E731
    tally = local_change.Tally()
    for seed in range(3):
        local_change.add_pair(tally, _mse_pair(seed, rows))
    found = local_change.finding(tally)
    assert found is not None and found.code == "change-not-followed" and found.data["pairs"] == 3
    assert found.data["miss"] > found.data["allowed"]


def test_a_product_from_row_and_column_sums_misses_the_change_of_rows():
    g = _gen(7)
    a, b = torch.rand(128, 512, generator=g), torch.rand(512, 64, generator=g)
    (a1, b1), _ = local_change.swap_slices([a, b], [torch.rand(128, 512, generator=g),
                                                    torch.rand(512, 64, generator=g)], g)
    rank1 = lambda p, q: [p.sum(1, keepdim=True) @ q.sum(0, keepdim=True) / p.shape[1]]  # noqa: E731
    misses = local_change.pair_misses([a @ b], rank1(a, b), [a1 @ b1], rank1(a1, b1))
    assert local_change.over(misses)
    # The product itself, in another order, follows.
    other = lambda p, q: [(p.double() @ q.double()).float()]  # noqa: E731
    assert not local_change.over(local_change.pair_misses([a @ b], other(a, b), [a1 @ b1], other(a1, b1)))


def test_the_references_own_error_of_the_change_is_allowed():
    """An output that cancels moves by noise alone: a candidate off by as much as the reference's own
    error of the change (`own`, from the fp64 runs) follows it."""
    r0, r1 = torch.tensor([1e-7, -2e-7]), torch.tensor([-1e-7, 3e-7])
    g0, g1 = torch.tensor([3e-5, 1e-5]), torch.tensor([-2e-5, 4e-5])
    assert local_change.over(local_change.pair_misses([r0], [g0], [r1], [g1]))
    assert not local_change.over(local_change.pair_misses([r0], [g0], [r1], [g1], own={0: 1e-4}))


def test_integer_and_mismatched_outputs_are_left_out():
    r = [torch.arange(4), torch.zeros(3)]
    g = [torch.arange(4), torch.zeros(2)]
    assert local_change.pair_misses(r, g, r, g) == {}


def test_large_outputs_are_kept_at_the_same_secret_places_and_small_ones_copied(monkeypatch):
    monkeypatch.setattr(local_change, "SAMPLE_ELEMENTS", 16)
    places = local_change.Places(seed=11)
    big, small = torch.arange(100.0), torch.ones(3)
    first = places.take([big, small, 7])
    again = places.take([big + 1, small, 7])
    assert first[0].numel() == 16 and torch.equal(again[0], first[0] + 1)  # the same places
    assert torch.equal(first[1], small) and first[1].data_ptr() != small.data_ptr() and first[2] == 7
    small.add_(1)  # a buffer the candidate writes over on its next call
    assert torch.equal(first[1], torch.ones(3))
    assert not torch.equal(local_change.Places(seed=12).take([big])[0], first[0])  # secret per run


def test_a_reference_that_refuses_mixed_slices_skips_the_pairs_and_says_so(tmp_path, build_cache):
    """Real worker, real C++ candidate: the reference raises where x is not sorted along its first
    axis, which any set of slices from two draws breaks: the pairs are skipped with a note, and the
    honest candidate is accepted. The blind check's anchors, random sets mixed from two draws, run
    again as their draws alone: every random set is checked, none mixed."""
    opts = VerifyOptions(extra_env={"STITCHCUDA_CACHE": str(build_cache)}, cpu_only=True, timeout_s=240.0,
                         time_compile=False)
    v = verify(hack_task("ref_affine_sorted"), hack_candidate("good_affine"), tmp_path / "v", opts)
    assert v.accepted and v.status == "ok", (v.status, v.message, v.hack_findings)
    assert any(n.startswith("local-change sets skipped: the reference fails on a set of mixed slices")
               for n in v.notes), v.notes
    assert not [c for c in v.checks if c["set"].startswith("local-change")], v.checks
    randoms = [c for c in v.checks if c["set"].startswith("random-")]
    assert len(randoms) == opts.random_sets and all(c["ok"] for c in randoms), randoms
    assert not any("mix" in c for c in randoms), randoms
    again = [n for n in v.notes if n.endswith("its set mixed from two draws; run again as its draw alone")]
    assert len(again) == opts.random_sets - 1 and all("the reference rejects" in n for n in again), v.notes


def test_a_candidate_that_refuses_a_mixed_set_as_its_reference_does_is_not_failed(tmp_path, build_cache):
    """As above, with a candidate that raises where its reference does (its own check of x's order):
    the mixed set runs again as its draw alone, and the honest candidate is accepted."""
    opts = VerifyOptions(extra_env={"STITCHCUDA_CACHE": str(build_cache)}, cpu_only=True, timeout_s=240.0,
                         time_compile=False)
    v = verify(hack_task("ref_affine_sorted"), hack_candidate("good_affine_checks_sorted"), tmp_path / "v", opts)
    assert v.accepted and v.status == "ok", (v.status, v.message, v.hack_findings)
    randoms = [c for c in v.checks if c["set"].startswith("random-")]
    assert len(randoms) == opts.random_sets and all(c["ok"] and "mix" not in c for c in randoms), randoms
    again = [n for n in v.notes if n.endswith("its set mixed from two draws; run again as its draw alone")]
    assert len(again) == opts.random_sets - 1, v.notes
    assert all("the candidate and the reference reject" in n for n in again), v.notes



def _module(stem: str):
    from stitchcuda.task import import_file

    mod = import_file(HACKS / f"{stem}.py")
    return mod, mod.Model(*mod.get_init_inputs())


def test_timing_sets_are_mixed_as_the_checked_random_sets_are():
    """The timed sets are the checked random sets' kind: a draw with a secret share of its slices from
    a donor draw (a plain set among mixed ones could be told apart where get_inputs keeps structure,
    red-team's known limit of 2026-12-07). Here x is sorted along its first axis by get_inputs, and a
    mixed set breaks that, as any mixed set of this reference does."""
    from stitchcuda.agents.verify.worker import timing_mixes, timing_sets
    from stitchcuda.inputs import make_inputs

    mod, _ = _module("ref_affine_sorted")
    seeds = [11, 12, 13, 14]
    mixes = timing_mixes(seeds[:2], set(seeds))
    assert set(mixes) == {11, 12} and not {d for d, _ in mixes.values()} & set(seeds)
    plain = timing_sets(mod.get_inputs, seeds, torch.device("cpu"))
    mixed = timing_sets(mod.get_inputs, seeds, torch.device("cpu"), mixes)
    for i, seed in enumerate(seeds[:2]):
        assert torch.equal(plain[i][0], make_inputs(mod.get_inputs, seed, torch.device("cpu"))[0])
        donor, picks = mixes[seed]
        want = local_change.mixed(make_inputs(mod.get_inputs, seed, torch.device("cpu")),
                                  make_inputs(mod.get_inputs, donor, torch.device("cpu")), picks)
        assert all(torch.equal(a, b) for a, b in zip(mixed[i], want, strict=True))
        assert bool((plain[i][0][1:] >= plain[i][0][:-1]).all())
        assert not bool((mixed[i][0][1:] >= mixed[i][0][:-1]).all())


def test_a_timing_set_the_reference_rejects_mixed_is_timed_as_its_draw_alone():
    from stitchcuda.agents.verify.worker import _refused_mixes, timing_mixes, timing_sets
    from stitchcuda.inputs import make_inputs
    from stitchcuda.types import Verdict

    cpu = torch.device("cpu")
    seeds = [21, 22, 23, 24]
    for stem, refuses in (("ref_affine_sorted", True), ("ref_affine", False)):
        mod, ref = _module(stem)
        mixes = timing_mixes(seeds[:2], set(seeds))
        sets = timing_sets(mod.get_inputs, seeds, cpu, mixes)
        before = [[a.clone() for a in s] for s in sets]
        v = Verdict(candidate="t", status="running")
        assert _refused_mixes(v, ref, mod.get_inputs, sets, seeds, mixes, cpu) is refuses
        for i, s in enumerate(sets):
            want = make_inputs(mod.get_inputs, seeds[i], cpu) if refuses else before[i]
            assert all(torch.equal(a, b) for a, b in zip(s, want, strict=True)), (stem, i)
        notes = [n for n in v.notes if "the reference rejects it mixed from two draws" in n]
        assert len(notes) == (2 if refuses else 0), v.notes


def test_timing_is_mixed_only_where_a_mixed_checked_set_passed():
    from stitchcuda.agents.verify.worker import _mixed_checked

    assert _mixed_checked([{"set": "random-1", "seed": 1, "ok": True, "mix": [2, 3]}])
    assert not _mixed_checked([{"set": "random-1", "seed": 1, "ok": True}])
    assert not _mixed_checked([{"set": "random-1", "seed": 1, "ok": False, "mix": [2, 3]}])
    assert not _mixed_checked([{"set": "adversarial-large", "seed": 1, "ok": True, "mix": [2, 3]}])


def test_a_reference_drawing_random_numbers_has_its_tf32_error_of_the_change_allowed(tmp_path, build_cache):
    """A reference that draws a state in forward (no float64 run draws it alike) and rounds its
    product's operands to TF32 while cuDNN's switch is on, as a cuDNN LSTM does on a GPU, with its
    output hardly moved by x: an honest fp32 candidate misses its change by the reference's own TF32
    error of it. That error is measured against the reference with TF32 off, under the same draws, in
    the worker's pairs, the blind check's pairs and the draws' own share; without it the worker's pairs
    called it an estimate (level 3's 35_LSTM on the H100, 2026-12-07). A candidate that skips x is
    still rejected."""
    opts = VerifyOptions(extra_env={"STITCHCUDA_CACHE": str(build_cache)}, cpu_only=True, timeout_s=240.0,
                         time_compile=False)
    v = verify(hack_task("ref_drawn_state_tf32"), hack_candidate("good_drawn_state_fp32"), tmp_path / "good", opts)
    assert v.accepted and v.status == "ok", (v.status, v.message, v.hack_findings)
    assert any("local-change pairs in the blind check: 3 pairs judged" in n and "TF32 off" in n for n in v.notes), v.notes
    v = verify(hack_task("ref_drawn_state_tf32"), hack_candidate("hack_drawn_state_ignores_x"), tmp_path / "hack", opts)
    assert not v.accepted and v.status == "hacked", (v.status, v.message)
