"""The long-memory check's weights (agents/verify/long_memory.py): under them a recurrence's last state
depends on its first steps, so a candidate that ran only the last ones misses; at the initial weights
it does not, which is why the check exists. Pure torch on the CPU, no worker."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from stitchcuda.agents.verify import long_memory
from stitchcuda.agents.verify.worker import LONG_MEMORY_FLOOR

WINDOW = 32  # the steps a truncating candidate keeps (hack_rnn_truncated's)


class Stack(nn.Module):
    """An nn.RNN/LSTM/GRU over a batch-first sequence, returning its last states (as KernelBench's
    "Hn"/"Cn" problems do)."""

    def __init__(self, rnn: nn.RNNBase):
        super().__init__()
        self.rnn = rnn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, state = self.rnn(x)
        return torch.cat([s.flatten() for s in state]) if isinstance(state, tuple) else state.flatten()


class Loop(nn.Module):
    """A cell called once a step in a Python loop, returning the last hidden state."""

    def __init__(self, cell: nn.RNNCellBase):
        super().__init__()
        self.cell = cell

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        state = None
        for t in range(x.shape[1]):
            state = self.cell(x[:, t], state)
        return torch.cat([s.flatten() for s in state]) if isinstance(state, tuple) else state.flatten()


MODULES = {
    "rnn-tanh-2-layers": lambda: Stack(nn.RNN(24, 48, 2, batch_first=True)),
    "rnn-relu": lambda: Stack(nn.RNN(24, 48, 1, nonlinearity="relu", batch_first=True)),
    "lstm-2-layers": lambda: Stack(nn.LSTM(24, 48, 2, batch_first=True)),
    "lstm-projected": lambda: Stack(nn.LSTM(24, 48, 1, proj_size=16, batch_first=True)),
    "gru-bidirectional": lambda: Stack(nn.GRU(24, 48, 1, bidirectional=True, batch_first=True)),
    "gru-cell-loop": lambda: Loop(nn.GRUCell(24, 48)),
    "rnn-cell-loop": lambda: Loop(nn.RNNCell(24, 48)),
    "lstm-cell-loop": lambda: Loop(nn.LSTMCell(24, 48)),
}


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


@pytest.mark.parametrize("steps", [96, 400])
@pytest.mark.parametrize("name", MODULES)
def test_the_last_steps_alone_miss_under_long_memory_weights_only(name, steps):
    torch.manual_seed(0)
    ref = MODULES[name]()
    cand = copy.deepcopy(ref)
    x = torch.randn(4, steps, 24)
    with torch.no_grad():
        first = ref(x)
        # The initial weights forget: the last WINDOW steps alone give the last state (the reverse
        # direction of a bidirectional layer reads the sequence from its end, so it is left out).
        if "bidirectional" not in name:
            assert _rel(ref(x[:, -WINDOW:]), first) < 1e-4
        seen = long_memory.observe(ref, lambda: ref(x))
        assert [s.steps for s in seen.values()] == [steps]
        put_back = long_memory.set_long_memory([ref, cand], seen, seed=7)
        assert put_back is not None
        full = ref(x)
        assert torch.equal(cand(x), full)  # both modules alike
        assert _rel(ref(x[:, -WINDOW:]), full) > 0.4
        assert _rel(ref(x[:, steps // 10:]), full) > LONG_MEMORY_FLOOR  # a tenth skipped is far too
        assert full.abs().max() < 50  # no blow-up: the state stays where fp32 keeps its precision
        put_back()
        assert torch.equal(ref(x), first) and torch.equal(cand(x), first)


@pytest.mark.parametrize(("steps", "scale"), [(16, 1.0), (2048, 1.0), (256, 100.0)])
def test_a_tanh_state_stays_near_linear_over_any_length(steps, scale):
    """The drive a step adds is sized from the sequence's length and its inputs' rms: the state's rms
    stays near STATE_RMS for 16 steps or 2048, and for inputs 100 times larger."""
    torch.manual_seed(1)
    m = Stack(nn.RNN(8, 32, 1, batch_first=True))
    x = torch.randn(16, steps, 8) * scale
    with torch.no_grad():
        assert long_memory.set_long_memory([m], long_memory.observe(m, lambda: m(x)), seed=3) is not None
        rms = float(m(x).square().mean().sqrt())
    assert long_memory.STATE_RMS / 3 < rms < long_memory.STATE_RMS * 3, rms


def test_nothing_changes_where_a_module_lacks_a_weight_or_the_gates_have_no_bias():
    x = torch.randn(2, 40, 24)
    ref = Stack(nn.LSTM(24, 48, 1, batch_first=True))
    other = Stack(nn.LSTM(24, 48, 1, batch_first=True, bias=False))  # no bias_ih_l0 to hold a gate with
    before = [t.clone() for t in ref.state_dict().values()]
    seen = long_memory.observe(ref, lambda: ref(x))
    assert long_memory.set_long_memory([ref, other], seen, seed=1) is None
    assert all(torch.equal(a, b) for a, b in zip(before, ref.state_dict().values(), strict=True))
    assert long_memory.set_long_memory([other], long_memory.observe(other, lambda: other(x)), seed=1) is None
    plain = nn.Sequential(nn.Linear(24, 24))
    assert long_memory.recurrences(plain) == {}
    assert long_memory.set_long_memory([plain], {}, seed=1) is None


def test_the_weights_are_drawn_from_the_seed():
    x = torch.randn(2, 64, 24)
    made = []
    for seed in (5, 5, 6):
        torch.manual_seed(0)
        m = Stack(nn.RNN(24, 48, 1, batch_first=True))
        long_memory.set_long_memory([m], long_memory.observe(m, lambda m=m: m(x)), seed=seed)
        made.append(m.rnn.weight_hh_l0.detach().clone())
    assert torch.equal(made[0], made[1]) and not torch.equal(made[0], made[2])
    # Orthogonal: a signed permutation, so the state neither grows nor decays through it.
    assert torch.equal(made[0] @ made[0].T, torch.eye(48))

