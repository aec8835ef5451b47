"""torch.distributions made in forward (a mixture density network's Normal, a policy's
Categorical): their argument checks (a bool of a tensor) are off while tracing, since they only
raise, and the log-densities plan as the math they are. The plan, and the candidate's CPU entry
points against PyTorch, whose own checks stay on."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from conftest import needs_nvcc
from torch.distributions import Categorical, Distribution, Normal

from stitchcuda.agents import graph
from stitchcuda.agents.plan import planner


class Densities(nn.Module):
    def __init__(self, d: int = 6):
        super().__init__()
        self.scale = nn.Parameter(torch.rand(d) + 0.5)

    def forward(self, mu, y, logits, action):
        normal = Normal(mu, torch.nn.functional.softplus(self.scale) + 1e-3)
        policy = Categorical(logits=logits)
        return normal.log_prob(y).sum(-1), policy.log_prob(action), policy.entropy()


def _inputs():
    return [torch.randn(4, 6), torch.randn(4, 6), torch.randn(4, 5), torch.randint(0, 5, (4,))]


@pytest.fixture(autouse=True)
def checks_on():
    """PyTorch's default, whatever an earlier test left (its setting is process-wide)."""
    Distribution.set_default_validate_args(True)


def test_the_densities_plan_and_the_checks_come_back_on():
    plan = planner.plan_graph(graph.trace_module(Densities(), _inputs()))
    assert plan.supported, plan.unsupported
    assert Distribution._validate_args  # (PyTorch's default again after the trace)
    with pytest.raises(ValueError):
        Normal(torch.zeros(2), -torch.ones(2))


def test_traces_in_several_threads_put_the_checks_back():
    """The setting is the class's: traces in several threads at once (the server's, a bench's) each
    saving and restoring it left it off (CI, 2026-11-30). The last trace out puts it back."""
    import threading

    def trace() -> None:
        for _ in range(4):
            graph.trace_module(Densities(), _inputs())

    threads = [threading.Thread(target=trace) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert Distribution._validate_args


@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.nvcc
@needs_nvcc
def test_they_match_pytorch_on_the_cpu(tmp_path):
    from conftest import planned_on_the_cpu

    torch.manual_seed(0)
    module = Densities()
    _, new = planned_on_the_cpu(module, _inputs(), tmp_path)
    with torch.no_grad():
        for _ in range(2):
            given = _inputs()
            for k, (g, w) in enumerate(zip(new(*given), module(*given), strict=True)):
                torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5, msg=lambda m, k=k: f"result {k}: {m}")
