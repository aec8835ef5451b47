"""Every module of bench/coverage (blocks, layers and losses of current networks, as users write
them) plans with the built-in coder, but those listed here with the reason they do not yet."""

from __future__ import annotations

from pathlib import Path

import pytest

from stitchcuda.agents.plan import planner
from stitchcuda.types import Task

FOLDER = Path(__file__).resolve().parent.parent / "bench" / "coverage"
NOT_YET = {
    "moe_top2.py": "nonzero",  # token dispatch by torch.where(idx == e): data-dependent shapes
    "hyena_fftconv.py": "_fft_r2c",  # torch.fft.rfft long convolution
    "ctc_asr_head_loss.py": "_ctc_loss",  # CTC's dynamic program (its trace needs target lengths' values)
}
FILES = sorted(p.name for p in FOLDER.glob("*.py"))


def test_the_set_is_there():
    assert len(FILES) >= 125 and set(NOT_YET) <= set(FILES)


@pytest.mark.parametrize("name", FILES)
def test_it_plans(name):
    plan = planner.plan(Task(FOLDER / name))
    if name in NOT_YET:
        reason = "; ".join(plan.unsupported)
        if plan.supported:
            pytest.fail(f"{name} plans now: take it off NOT_YET")
        assert NOT_YET[name] in reason, reason
        return
    assert plan.supported, plan.unsupported
