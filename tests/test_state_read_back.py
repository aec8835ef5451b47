"""Buffers the reference's forwards updated, judged by their effect (state_updates.read_back): the
candidate's values, loaded into the reference, must give its own other-mode outputs within the
checks' tolerance. Values alone are no measure: a running mean whose target is near zero moves
less than two honest TF32 computations differ (level 3's ShuffleNet unit on the H200, 2026-12-05)."""

from __future__ import annotations

import torch
import torch.nn as nn

from stitchcuda.agents.verify import state_updates
from stitchcuda.agents.verify.compare import Tolerance, compare_outputs
from stitchcuda.agents.verify.dynamic_check import flatten_outputs

TOL = Tolerance(1e-3, "test")


def _pair():
    torch.manual_seed(0)
    ref, cand = nn.BatchNorm2d(8), nn.BatchNorm2d(8)
    before = state_updates.snapshot(ref, 1 << 20)
    for _ in range(5):
        x = 3.0 + 2.0 * torch.randn(4, 8, 5, 5)  # (an offset and a scale: the statistics move far)
        ref(x)
        cand(x)
    return ref, cand, before


def _judge(ref, cand, before):
    return state_updates.read_back(ref, before, cand, [torch.randn(4, 8, 5, 5)],
                                   lambda own, theirs: compare_outputs(own, theirs, TOL), flatten_outputs, lambda: None)


def test_statistics_left_near_their_start_are_found_and_rounding_is_not():
    ref, cand, before = _pair()
    with torch.no_grad():
        cand.running_mean.add_(1e-7 * torch.randn(8))  # (rounding's size: no effect on the outputs)
    assert _judge(ref, cand, before) == []
    assert ref.training  # (put back in its mode, and its buffers as they were)
    stale = nn.BatchNorm2d(8)
    with torch.no_grad():
        stale.running_mean.nextafter_(torch.full((8,), 1e30))  # (changed, so left_alone sees an update)
    kept = ref.running_mean.clone(), ref.running_var.clone()
    (f,) = _judge(ref, stale, before)
    assert f.code == "state-not-updated" and "running_mean" in f.message and "eval-mode" in f.message
    assert torch.equal(ref.running_mean, kept[0]) and torch.equal(ref.running_var, kept[1]) and ref.training


class _NoEval(nn.BatchNorm2d):
    def forward(self, x):
        if not self.training:
            raise RuntimeError("no eval path")
        return super().forward(x)


def test_a_reference_that_cannot_run_in_the_other_mode_is_not_judged_here():
    torch.manual_seed(0)
    ref, cand = _NoEval(8), nn.BatchNorm2d(8)
    before = state_updates.snapshot(ref, 1 << 20)
    ref(3.0 + torch.randn(4, 8, 5, 5))
    assert _judge(ref, cand, before) == [] and ref.training
