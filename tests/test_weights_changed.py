"""The weights-changed checks' changes (worker._reweight): a random sixteenth of every weight's
elements (at least one), drawn per check, doubled in both modules alike and undone exactly. A fixed
pattern let a candidate key a stale copy on one element the pattern always touched (a red-team
review, 2026-11-29); now a key on k sampled elements sees no change with probability ~(15/16)^k. The
second set (rows=True) concentrates its change in half of a few rows of each matrix and one element of
each vector, which a key on k sampled elements of a matrix misses with probability ~(63/64)^k."""

from __future__ import annotations

import torch
import torch.nn as nn

from stitchcuda.agents.verify.worker import ROWS_FACTOR, _reweight


def _pair():
    torch.manual_seed(0)
    a = nn.Sequential(nn.Linear(8, 16), nn.LayerNorm(16))
    b = nn.Sequential(nn.Linear(8, 16), nn.LayerNorm(16))
    b.load_state_dict(a.state_dict())
    return a, b


def test_the_same_random_share_in_both_modules_and_undone_exactly():
    a, b = _pair()
    before = {k: v.clone() for k, v in a.state_dict().items()}
    assert _reweight([a, b], 2.0, seed=123)
    changed = {k: (a.state_dict()[k] != before[k]) for k in before}
    for k, mask in changed.items():
        assert torch.equal(a.state_dict()[k], b.state_dict()[k])
        nonzero = before[k] != 0
        assert torch.equal(a.state_dict()[k][mask], before[k][mask] * 2)
        if nonzero.sum() >= 100:  # (a fraction of few elements, or of zeros that stay zeros, says little)
            assert 0.02 < mask[nonzero].float().mean() < 0.15, (k, mask.float().mean())
        assert mask.any() or not nonzero.any()
    assert _reweight([a, b], 0.5, seed=123)
    assert all(torch.equal(a.state_dict()[k], before[k]) for k in before)


def test_another_check_changes_other_elements():
    a, b = _pair()
    w = a[0].weight.detach().clone()
    _reweight([a, b], 2.0, seed=1)
    first = a[0].weight.detach() != w
    _reweight([a, b], 0.5, seed=1)
    _reweight([a, b], 2.0, seed=2)
    second = a[0].weight.detach() != w
    assert not torch.equal(first, second)
    _reweight([a, b], 0.5, seed=2)
    assert _reweight([a, b], 2.0, seed=(1 << 63) - 3) and _reweight([a, b], 0.5, seed=(1 << 63) - 3)  # (the
    assert torch.equal(a[0].weight, w)  # worker's seeds run to 2^63)
    # Element 0, which every-third-element always doubled, is mostly left alone.
    seen = []
    for seed in range(40):
        c, d = _pair()
        w0 = float(c[0].weight.view(-1)[0])
        _reweight([c, d], 2.0, seed=seed)
        seen.append(float(c[0].weight.view(-1)[0]) != w0)
    assert 0 < sum(seen) < 12


def test_the_rows_change_is_concentrated_alike_and_undone_exactly():
    a, b = _pair()
    before = {k: v.clone() for k, v in a.state_dict().items()}
    assert _reweight([a, b], ROWS_FACTOR, seed=123, rows=True)
    for k in before:
        now = a.state_dict()[k]
        assert torch.equal(now, b.state_dict()[k])
        changed = now != before[k]
        assert torch.equal(now[changed], before[k][changed] * ROWS_FACTOR)
        if before[k].dim() >= 2:  # whole rows, few of them
            assert 1 <= int(changed.any(dim=1).sum()) <= before[k].shape[0] // 4, k
        else:
            assert int(changed.sum()) <= 1, k  # one element (none where it is zero)
    assert _reweight([a, b], 1 / ROWS_FACTOR, seed=123, rows=True)
    assert all(torch.equal(a.state_dict()[k], before[k]) for k in before)


def test_a_key_on_sampled_matrix_elements_mostly_misses_the_rows_change_and_the_output_moves():
    """What a derived copy keyed on 8 elements of a 128 x 128 weight sees: no change in most checks
    ((63/64)^8 ~ 0.88; the spread change gave (15/16)^8 ~ 0.60), so it serves its stale copy, while
    the layer's output moves far past any tolerance, in whole columns; a batch norm over the output
    channels does not undo it (half a row changes the filter's shape, not its scale)."""
    torch.manual_seed(0)
    lin = nn.Linear(128, 128)
    bn = nn.BatchNorm1d(128)
    x = torch.randn(64, 128)
    key = torch.randperm(128 * 128, generator=torch.Generator().manual_seed(1))[:8]
    missed, spread_missed, moved, normed = 0, 0, [], []
    for seed in range(200):
        w = lin.weight.detach().clone()
        y0 = lin(x).detach()
        assert _reweight([lin], ROWS_FACTOR, seed=seed, rows=True)
        missed += bool(torch.equal(lin.weight.detach().view(-1)[key], w.view(-1)[key]))
        y1 = lin(x).detach()
        # The columns that moved, each by far more than any tolerance.
        col = ((y1 - y0).norm(dim=0) / y0.norm(dim=0))
        moved.append(float(col.max()))
        ncol = ((bn(y1) - bn(y0)).norm(dim=0) / bn(y0).norm(dim=0))
        normed.append(float(ncol.max()))
        assert _reweight([lin], 1 / ROWS_FACTOR, seed=seed, rows=True) and torch.equal(lin.weight, w)
        assert _reweight([lin], 2.0, seed=seed)
        spread_missed += bool(torch.equal(lin.weight.detach().view(-1)[key], w.view(-1)[key]))
        assert _reweight([lin], 0.5, seed=seed) and torch.equal(lin.weight, w)
    assert missed >= 150 and spread_missed <= 150, (missed, spread_missed)
    assert min(moved) > 0.5 and min(normed) > 0.3, (min(moved), min(normed))


def test_a_strided_weight_changes_by_its_logical_elements_alike():
    """A weight held in transposed storage changes as its contiguous twin does (by logical element),
    and back exactly: refusing strided weights let a weight cache behind them pass (a red-team
    review, 2026-12-04, tests/hacks/hack_strided_weights_kept.py)."""
    a, b = _pair()
    b[0].weight = nn.Parameter(b[0].weight.detach().t().contiguous().t())  # (same values, transposed storage)
    before = {k: v.clone() for k, v in a.state_dict().items()}
    assert _reweight([a, b], 2.0, seed=5)
    assert not torch.equal(a[0].weight, before["0.weight"])
    assert all(torch.equal(a.state_dict()[k], b.state_dict()[k]) for k in before)
    assert _reweight([a, b], 0.5, seed=5)
    assert all(torch.equal(a.state_dict()[k], before[k]) and torch.equal(b.state_dict()[k], before[k]) for k in before)


def test_gates_that_start_closed_are_opened_alike_and_put_back():
    """LayerScale's 1e-6 and ReZero's 0 beside weights of ~0.1: drawn at the others' scale in both
    modules alike (by name), then put back exactly; ordinary weights are left to _reweight."""
    from stitchcuda.agents.verify.worker import _open_gates

    torch.manual_seed(0)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(16, 16)
            self.gamma = nn.Parameter(1e-6 * torch.ones(16))
            self.alpha = nn.Parameter(torch.zeros(()))

    a, b = Block(), Block()
    b.load_state_dict(a.state_dict())
    before = {k: t.clone() for k, t in a.state_dict().items()}
    close = _open_gates([a, b], seed=7)
    assert close is not None
    for k in ("gamma", "alpha"):
        assert torch.equal(a.state_dict()[k], b.state_dict()[k])
        assert a.state_dict()[k].abs().max() > 1e-3, k  # at the weights' scale now
    assert torch.equal(a.fc.weight, before["fc.weight"]) and torch.equal(a.fc.bias, before["fc.bias"])
    close()
    assert all(torch.equal(a.state_dict()[k], before[k]) and torch.equal(b.state_dict()[k], before[k]) for k in before)
    # Nothing near zero: nothing to open (a zero bias, LayerNorm's, is opened as a gate is). A module
    # without the gate's name: not changed alike, so not at all.
    lin = nn.Linear(8, 8)
    assert _open_gates([lin, lin], seed=7) is None
    c = nn.Linear(16, 16)
    assert _open_gates([a, c], seed=7) is None and torch.equal(a.gamma, before["gamma"])


def test_the_second_rows_set_changes_only_rows_the_first_left_alone():
    """A copy keyed on row 0 was made afresh whenever the rows set happened to change row 0 (about 1
    run in 25 for 128 rows: hack_row_keyed_weights passed a CI run); the second rows set changes rows
    the first did not, so a key on a row or two meets a change that misses it in one set or the other."""
    torch.manual_seed(0)
    a, b = nn.Linear(128, 128), nn.Linear(128, 128)
    b.load_state_dict(a.state_dict())
    w = a.weight.detach().clone()
    for first in range(30):
        assert _reweight([a, b], ROWS_FACTOR, seed=first, rows=True)
        rows1 = (a.weight.detach() != w).any(dim=1)
        assert _reweight([a, b], 1 / ROWS_FACTOR, seed=first, rows=True) and torch.equal(a.weight, w)
        assert _reweight([a, b], ROWS_FACTOR, seed=first + 1000, rows=True, avoid=first)
        rows2 = (a.weight.detach() != w).any(dim=1)
        assert torch.equal(a.weight, b.weight)
        assert _reweight([a, b], 1 / ROWS_FACTOR, seed=first + 1000, rows=True, avoid=first)
        assert torch.equal(a.weight, w)
        assert rows1.any() and rows2.any() and not (rows1 & rows2).any(), first


def test_the_halves_split_every_tensor_once_and_change_only_their_own():
    """weight_halves: every floating tensor in exactly one half, neither empty, the split drawn per
    seed; _reweight with `names` changes those tensors alone, alike in both modules, undone exactly
    (a copy keyed on the bias alone met every other set's change: red team round 5, 2026-12-05)."""
    from stitchcuda.agents.verify.worker import weight_halves

    a, b = _pair()
    keys = {k for k, t in a.state_dict().items() if t.is_floating_point()}
    splits = set()
    for seed in range(40):
        first, rest = weight_halves(a, seed)
        assert first and rest and not first & rest and first | rest == keys
        splits.add(first)
    assert len(splits) > 3
    first, rest = weight_halves(a, 7)
    before = {k: v.clone() for k, v in a.state_dict().items()}
    assert _reweight([a, b], 2.0, seed=99, names=first)
    for k in keys:
        assert torch.equal(a.state_dict()[k], b.state_dict()[k])
        same = torch.equal(a.state_dict()[k], before[k])
        assert same if k in rest else (not same or not before[k].any()), k  # (zeros doubled stay zeros)
    assert _reweight([a, b], 0.5, seed=99, names=first)
    assert all(torch.equal(a.state_dict()[k], before[k]) for k in before)
    assert weight_halves(nn.Linear(4, 4, bias=False), 1) == []  # one tensor: nothing to split


def test_masks_drawn_in_pieces_change_a_large_weight_alike_in_every_piece(monkeypatch):
    """A weight of many mask pieces (MASK_PIECE made small: level 2's 32768 x 32768 weights take 64 of
    the real size) changes in every piece, alike in its copy, even where the copy is strided (kept
    transposed), and is put back exactly; the rows set changes whole rows only."""
    from stitchcuda.agents.verify import worker

    monkeypatch.setattr(worker, "MASK_PIECE", 1000)
    torch.manual_seed(0)
    a = nn.Linear(256, 64)
    b = nn.Linear(256, 64)
    b.weight = nn.Parameter(a.weight.detach().t().contiguous().t())  # (the same values, strided)
    b.bias = nn.Parameter(a.bias.detach().clone())
    assert not b.weight.is_contiguous()
    w = a.weight.detach().clone()
    assert _reweight([a, b], 2.0, seed=77)
    changed = (a.weight.detach() != w).view(-1)
    assert torch.equal(a.weight, b.weight)
    pieces = changed.split(1000)
    assert len(pieces) == 17 and all(0.02 < float(p.float().mean()) < 0.15 for p in pieces[:-1])
    assert _reweight([a, b], 0.5, seed=77)
    assert torch.equal(a.weight, w) and torch.equal(b.weight, w) and not b.weight.is_contiguous()
    assert _reweight([a, b], ROWS_FACTOR, seed=78, rows=True)
    rows = a.weight.detach() != w
    assert torch.equal(a.weight, b.weight)
    hit = rows.any(dim=1)
    assert 1 <= int(hit.sum()) <= 16
    assert 0.3 < float(rows[hit].float().mean()) < 0.7  # (half of each chosen row)
    assert _reweight([a, b], 1 / ROWS_FACTOR, seed=78, rows=True) and torch.equal(a.weight, w)
