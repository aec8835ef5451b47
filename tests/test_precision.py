"""The precision policy's switches (agents/verify/precision.py): set for the matched timing, put back
after it, whatever happens inside."""

from __future__ import annotations

import warnings

import pytest
import torch

from stitchcuda.agents.verify import precision


def flags() -> tuple[bool, bool, str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
                torch.get_float32_matmul_precision())


@pytest.mark.parametrize("policy, want", [("tf32", (True, True)), ("strict", (False, False))])
def test_under_sets_the_switches_and_restores_them(policy, want):
    before = flags()
    with precision.under(policy):
        assert flags()[:2] == want
    assert flags() == before


def test_switches_come_back_after_an_error():
    before = flags()
    with pytest.raises(RuntimeError), precision.under("tf32" if not before[0] else "strict"):
        raise RuntimeError("the timed call failed")
    assert flags() == before


def test_unknown_policy_is_refused():
    with pytest.raises(ValueError, match="unknown precision 'fp16'"):
        precision.check("fp16")


def test_which_references_are_sensitive_to_tf32():
    assert precision.sensitive(["aten::addmm", "aten::relu"])
    assert precision.sensitive(["convolution.default"]) and precision.sensitive(["aten.bmm.default"])
    assert not precision.sensitive(["aten::relu", "aten::sum.dim_IntList", "aten::add.Tensor"])
