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


class ElmanCat(nn.Module):
    """An Elman step written by hand over cat(x_t, h), as KernelBench's VanillaRNN is, called over
    the sequence from steps[start:]; `act` tanh or ReLU."""

    def __init__(self, inputs: int, hidden: int, outputs: int, act=torch.tanh):
        super().__init__()
        self.i2h = nn.Linear(inputs + hidden, hidden)
        self.h2o = nn.Linear(hidden, outputs)
        self.act = act

    def forward(self, x: torch.Tensor, h: torch.Tensor, start: int = 0) -> torch.Tensor:
        for t in range(start, x.shape[1]):
            h = self.act(self.i2h(torch.cat((x[:, t], h), 1)))
        return self.h2o(h)


class ElmanSplit(nn.Module):
    """h = tanh(i2h(x_t) + h2h(h)): the recurrence in a Linear of its own."""

    def __init__(self, inputs: int, hidden: int, outputs: int):
        super().__init__()
        self.i2h, self.h2h, self.h2o = nn.Linear(inputs, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, outputs)

    def forward(self, x: torch.Tensor, h: torch.Tensor, start: int = 0) -> torch.Tensor:
        for t in range(start, x.shape[1]):
            h = torch.tanh(self.i2h(x[:, t]) + self.h2h(h))
        return self.h2o(h)


class GatedByHand(nn.Module):
    """An LSTM step over one Linear(I + H, 4H): its recurrent block is not square."""

    def __init__(self, inputs: int, hidden: int):
        super().__init__()
        self.gates = nn.Linear(inputs + hidden, 4 * hidden)

    def forward(self, x: torch.Tensor, h: torch.Tensor, start: int = 0) -> torch.Tensor:
        c = torch.zeros_like(h)
        for t in range(start, x.shape[1]):
            i, f, g, o = self.gates(torch.cat((x[:, t], h), 1)).chunk(4, 1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
        return h


HAND_LOOPS = {
    "elman-cat-tanh": (lambda: ElmanCat(24, 48, 16), "i2h", range(24, 72), False),
    "elman-cat-relu": (lambda: ElmanCat(24, 48, 16, torch.relu), "i2h", range(24, 72), True),
    "elman-split": (lambda: ElmanSplit(24, 48, 16), "h2h", range(48), False),
}


@pytest.mark.parametrize("steps", [64, 400])
@pytest.mark.parametrize("name", HAND_LOOPS)
def test_a_hand_written_loop_is_found_and_given_weights_that_remember(name, steps):
    """The Linear whose next input carries its own output is found with the columns that carry it
    (for a ReLU state, the units it held at zero too); under the weights set then, the last WINDOW
    steps alone (from the given initial state) miss far, and a tenth skipped misses past the floor,
    where at the initial weights they matched to 1e-4; the honest loop matches both modules alike, and
    the weights go back bit for bit."""
    make, recurrent, cols, nonnegative = HAND_LOOPS[name]
    torch.manual_seed(0)
    ref = make()
    cand = copy.deepcopy(ref)
    x, h0 = torch.randn(4, steps, 24), torch.randn(4, 48)
    with torch.no_grad():
        first = ref(x, h0)
        assert _rel(ref(x, h0, start=steps - WINDOW), first) < 1e-4
        args = long_memory.scale_inputs([x, h0])
        loops = long_memory.find_loops(ref, lambda: ref(*args))
        assert {n: b.calls for n, b in loops.items()} == {n: steps for n in loops}
        assert loops[recurrent].recurrent == tuple(cols) and loops[recurrent].nonnegative == nonnegative
        assert all(not b.recurrent for n, b in loops.items() if n != recurrent)
        put_back, why = long_memory.set_loop_memory([ref, cand], loops, lambda: ref(*args), seed=7)
        assert put_back is not None, why
        full = ref(*args)
        assert torch.equal(cand(*args), full)
        assert _rel(ref(*args, start=steps - WINDOW), full) > 2 * LONG_MEMORY_FLOOR  # diluted by h2o's bias
        assert _rel(ref(*args, start=steps // 10), full) > LONG_MEMORY_FLOOR
        rms = long_memory._state_rms(ref, loops, lambda: ref(*args))
        assert long_memory.STATE_RMS / 2 <= rms <= long_memory.STATE_RMS * 1.5, rms
        put_back()
        assert torch.equal(ref(x, h0), first) and torch.equal(cand(x, h0), first)


def test_no_loop_is_found_in_one_step_or_a_loop_without_recurrence():
    """A cell called once (KernelBench's VanillaRNN) has no loop; a Linear applied to each of 32
    tokens in turn is in a loop but not a recurrence, and nothing is set for it."""
    step = ElmanCat(24, 48, 16)
    x, h0 = torch.randn(4, 1, 24), torch.randn(4, 48)
    with torch.no_grad():
        assert long_memory.find_loops(step, lambda: step(x, h0)) == {}

        class PerToken(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(24, 24)

            def forward(self, x):
                return torch.stack([self.proj(x[:, t]) for t in range(x.shape[1])], 1)

        m = PerToken()
        tokens = torch.randn(4, 32, 24)
        loops = long_memory.find_loops(m, lambda: m(tokens))
        assert loops == {"proj": long_memory.LoopBody(calls=32)}
        before = m.proj.weight.detach().clone()
        put_back, why = long_memory.set_loop_memory([m], loops, lambda: m(tokens), seed=1)
        assert put_back is None and "not square" in why
        assert torch.equal(m.proj.weight, before)


def test_a_gated_loop_over_one_wide_linear_is_left_alone_and_said_so():
    m = GatedByHand(24, 48)
    x, h0 = torch.randn(4, 40, 24), torch.randn(4, 48)
    with torch.no_grad():
        args = long_memory.scale_inputs([x, h0])
        loops = long_memory.find_loops(m, lambda: m(*args))
        assert loops["gates"].recurrent == tuple(range(24, 72))
        before = m.gates.weight.detach().clone()
        put_back, why = long_memory.set_loop_memory([m], loops, lambda: m(*args), seed=1)
    assert put_back is None and "not square" in why
    assert torch.equal(m.gates.weight, before)


def test_the_candidate_must_hold_the_loop_weights():
    ref = ElmanCat(24, 48, 16)
    other = nn.Sequential(nn.Linear(24, 16))  # no i2h: nothing is set in either module
    args = long_memory.scale_inputs([torch.randn(2, 32, 24), torch.randn(2, 48)])
    with torch.no_grad():
        loops = long_memory.find_loops(ref, lambda: ref(*args))
        before = ref.i2h.weight.detach().clone()
        put_back, why = long_memory.set_loop_memory([ref, other], loops, lambda: ref(*args), seed=1)
    assert put_back is None and "does not hold" in why
    assert torch.equal(ref.i2h.weight, before)


def test_a_reference_that_raises_under_the_new_weights_keeps_its_own():
    """The reference's own code may refuse weights it was never given (a range check): the error
    reaches the caller (the worker notes it) and every weight is as before."""

    class Checked(ElmanCat):
        def forward(self, x: torch.Tensor, h: torch.Tensor, start: int = 0) -> torch.Tensor:
            if bool((self.i2h.weight.abs() == 1).any()):
                raise ValueError("weights out of the trained range")
            return super().forward(x, h, start)

    torch.manual_seed(2)
    ref = Checked(24, 48, 16)
    cand = copy.deepcopy(ref)
    args = long_memory.scale_inputs([torch.randn(2, 32, 24), torch.randn(2, 48)])
    before = [t.clone() for t in ref.state_dict().values()]
    with torch.no_grad():
        loops = long_memory.find_loops(ref, lambda: ref(*args))
        with pytest.raises(ValueError, match="trained range"):
            long_memory.set_loop_memory([ref, cand], loops, lambda: ref(*args), seed=1)
    for m in (ref, cand):
        assert all(torch.equal(a, b) for a, b in zip(before, m.state_dict().values(), strict=True))
