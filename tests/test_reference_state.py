"""The reference's parameters held to their values (agents/verify/reference_state.py, worker's
_reference_state_check): a candidate that wrote into them made every check compare it with a
reference of its own making (red team round 5, 2026-12-05, through load_state_dict's shared storage)."""

from __future__ import annotations

import torch
import torch.nn as nn

from stitchcuda.agents.verify import reference_state
from stitchcuda.agents.verify.worker import _reference_state_check
from stitchcuda.types import Verdict


def _linear():
    torch.manual_seed(0)
    return nn.Linear(16, 8)


def test_the_digest_moves_with_any_change_even_one_keeping_sums_and_norms():
    m = _linear()
    before = reference_state.digest(m, seed=5)
    assert len(before) == 2 and not reference_state.changed(before, reference_state.digest(m, seed=5))
    with torch.no_grad():
        m.weight[0] = m.weight[0].flip(0)  # (the same sum and norm, in another order)
    assert reference_state.changed(before, reference_state.digest(m, seed=5))
    assert reference_state.digest(object(), seed=5) == []


def test_a_change_while_the_reference_had_not_run_is_a_hack():
    m = _linear()
    before = reference_state.digest(m, seed=9)
    with torch.no_grad():
        m.weight.mul_(torch.eye(8, 16))  # (the diagonal kept: the red team's corruption)
    v = Verdict(candidate="c", status="ok")
    _reference_state_check(v, m, before, 9, None, "while imported, built or loaded")
    assert [f.code for f in v.hack_findings] == ["reference-tampered"], v.hack_findings
    assert "while imported, built or loaded" in v.hack_findings[0].message


class _SelfScaling(nn.Module):
    """A reference that changes its own parameter as it runs."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(4))

    def forward(self, x):
        with torch.no_grad():
            self.w.mul_(1.5)
        return x * self.w


def test_a_reference_that_changes_its_own_parameters_is_noted_not_judged():
    m = _SelfScaling()
    before = reference_state.digest(m, seed=3)
    m(torch.ones(4))
    v = Verdict(candidate="c", status="ok")
    _reference_state_check(v, m, before, 3, lambda: [torch.ones(4)], "while checked or timed")
    assert not v.hack_findings and any("changes its own parameters" in n for n in v.notes), v.notes
    # ... while a still reference changed behind its back is judged after it has run, too
    still = _linear()
    before = reference_state.digest(still, seed=3)
    with torch.no_grad():
        still.bias.zero_()
    v = Verdict(candidate="c", status="ok")
    _reference_state_check(v, still, before, 3, lambda: [torch.randn(2, 16)], "while checked or timed")
    assert [f.code for f in v.hack_findings] == ["reference-tampered"]
