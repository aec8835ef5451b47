"""The long-memory check's weights for recurrences written by hand (agents/verify/loop_memory.py): a
weight matrix multiplied once a step in a Python loop, found from one forward; under the weights set
then a candidate that ran only the last steps misses, where at the initial weights it matched. Pure
torch on the CPU, no worker."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from stitchcuda.agents.verify import loop_memory
from stitchcuda.agents.verify.long_memory import STATE_RMS
from stitchcuda.agents.verify.worker import LONG_MEMORY_FLOOR

WINDOW = 32  # the steps a truncating candidate keeps (hack_rnn_loop_truncated's)


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


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
    """An LSTM step over one Linear(I + H, 4H) (gates i, f, g, o): its recurrent block is not square."""

    def __init__(self, inputs: int, hidden: int, outputs: int = 0, bias: bool = True):
        super().__init__()
        self.gates = nn.Linear(inputs + hidden, 4 * hidden, bias=bias)

    def forward(self, x: torch.Tensor, h: torch.Tensor, start: int = 0) -> torch.Tensor:
        c = torch.zeros_like(h)
        for t in range(start, x.shape[1]):
            i, f, g, o = self.gates(torch.cat((x[:, t], h), 1)).chunk(4, 1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
        return h


class ElmanParams(nn.Module):
    """h = tanh(x_t @ W_xh + h @ W_hh + b) over bare parameters, randn-initialised and scaled as
    nn.RNN's are (no nn.Linear to recognise); `rows` multiplies as W_hh @ h on column states."""

    def __init__(self, inputs: int, hidden: int, outputs: int, columns: bool = False):
        super().__init__()
        self.W_xh = nn.Parameter(torch.randn(inputs, hidden) / inputs**0.5)
        self.W_hh = nn.Parameter(torch.randn(hidden, hidden) / (3 * hidden) ** 0.5)
        self.b = nn.Parameter(torch.zeros(hidden))
        self.W_hy = nn.Parameter(torch.randn(hidden, outputs) / hidden**0.5)
        self.columns = columns

    def forward(self, x: torch.Tensor, h: torch.Tensor, start: int = 0) -> torch.Tensor:
        for t in range(start, x.shape[1]):
            rec = (self.W_hh.T @ h.T).T if self.columns else h @ self.W_hh
            h = torch.tanh(x[:, t] @ self.W_xh + rec + self.b)
        return h @ self.W_hy


class GRUByHand(nn.Module):
    """A GRU step over Linear(I, 3H) on x and Linear(H, 3H) on h (gates r, z, n, as torch's)."""

    def __init__(self, inputs: int, hidden: int, outputs: int = 0):
        super().__init__()
        self.x2g, self.h2g = nn.Linear(inputs, 3 * hidden), nn.Linear(hidden, 3 * hidden)

    def forward(self, x: torch.Tensor, h: torch.Tensor, start: int = 0) -> torch.Tensor:
        for t in range(start, x.shape[1]):
            xr, xz, xn = self.x2g(x[:, t]).chunk(3, 1)
            hr, hz, hn = self.h2g(h).chunk(3, 1)
            r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
            h = (1 - z) * torch.tanh(xn + r * hn) + z * h
        return h


HAND_LOOPS = {
    "elman-cat-tanh": (lambda: ElmanCat(24, 48, 16), "i2h.weight", range(24, 72), False),
    "elman-cat-relu": (lambda: ElmanCat(24, 48, 16, torch.relu), "i2h.weight", range(24, 72), True),
    "elman-split": (lambda: ElmanSplit(24, 48, 16), "h2h.weight", range(48), False),
    "elman-parameters": (lambda: ElmanParams(24, 48, 16), "W_hh", range(48), False),
    "elman-parameters-columns": (lambda: ElmanParams(24, 48, 16, columns=True), "W_hh", range(48), False),
    "lstm-by-hand": (lambda: GatedByHand(24, 48), "gates.weight", range(24, 72), False),
    "gru-by-hand": (lambda: GRUByHand(24, 48), "h2g.weight", range(48), False),
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
        args = loop_memory.scale_inputs([x, h0])
        loops = loop_memory.find_loops(ref, lambda: ref(*args))
        assert {n: b.calls for n, b in loops.items()} == {n: steps for n in loops}
        assert loops[recurrent].recurrent == tuple(cols) and loops[recurrent].nonnegative == nonnegative
        assert all(not b.recurrent for n, b in loops.items() if n != recurrent)
        put_back, why = loop_memory.set_loop_memory([ref, cand], loops, lambda: ref(*args), seed=7)
        assert put_back is not None, why
        full = ref(*args)
        assert torch.equal(cand(*args), full)
        assert _rel(ref(*args, start=steps - WINDOW), full) > 2 * LONG_MEMORY_FLOOR  # diluted by h2o's bias
        assert _rel(ref(*args, start=steps // 10), full) > LONG_MEMORY_FLOOR
        rms = loop_memory._state_rms(ref, loops, lambda: ref(*args))
        assert STATE_RMS / 2 <= rms <= STATE_RMS * 1.5, rms
        put_back()
        assert torch.equal(ref(x, h0), first) and torch.equal(cand(x, h0), first)


def test_no_loop_is_found_in_one_step_or_a_loop_without_recurrence():
    """A cell called once (KernelBench's VanillaRNN) has no loop; a Linear applied to each of 32
    tokens in turn is in a loop but not a recurrence, and nothing is set for it."""
    step = ElmanCat(24, 48, 16)
    x, h0 = torch.randn(4, 1, 24), torch.randn(4, 48)
    with torch.no_grad():
        assert loop_memory.find_loops(step, lambda: step(x, h0)) == {}

        class PerToken(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(24, 24)

            def forward(self, x):
                return torch.stack([self.proj(x[:, t]) for t in range(x.shape[1])], 1)

        m = PerToken()
        tokens = torch.randn(4, 32, 24)
        loops = loop_memory.find_loops(m, lambda: m(tokens))
        assert loops == {"proj.weight": loop_memory.LoopBody(calls=32, bias="proj.bias")}
        before = m.proj.weight.detach().clone()
        put_back, why = loop_memory.set_loop_memory([m], loops, lambda: m(tokens), seed=1)
        assert put_back is None and "neither square" in why
        assert torch.equal(m.proj.weight, before)


def test_a_gated_loop_without_a_bias_to_hold_a_gate_by_is_left_alone_and_said_so():
    m = GatedByHand(24, 48, bias=False)
    x, h0 = torch.randn(4, 40, 24), torch.randn(4, 48)
    with torch.no_grad():
        args = loop_memory.scale_inputs([x, h0])
        loops = loop_memory.find_loops(m, lambda: m(*args))
        assert loops["gates.weight"].recurrent == tuple(range(24, 72))
        before = m.gates.weight.detach().clone()
        put_back, why = loop_memory.set_loop_memory([m], loops, lambda: m(*args), seed=1)
    assert put_back is None and "gates with a bias" in why
    assert torch.equal(m.gates.weight, before)


def test_the_candidate_must_hold_the_loop_weights():
    ref = ElmanCat(24, 48, 16)
    other = nn.Sequential(nn.Linear(24, 16))  # no i2h: nothing is set in either module
    args = loop_memory.scale_inputs([torch.randn(2, 32, 24), torch.randn(2, 48)])
    with torch.no_grad():
        loops = loop_memory.find_loops(ref, lambda: ref(*args))
        before = ref.i2h.weight.detach().clone()
        put_back, why = loop_memory.set_loop_memory([ref, other], loops, lambda: ref(*args), seed=1)
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
    args = loop_memory.scale_inputs([torch.randn(2, 32, 24), torch.randn(2, 48)])
    before = [t.clone() for t in ref.state_dict().values()]
    with torch.no_grad():
        loops = loop_memory.find_loops(ref, lambda: ref(*args))
        with pytest.raises(ValueError, match="trained range"):
            loop_memory.set_loop_memory([ref, cand], loops, lambda: ref(*args), seed=1)
    for m in (ref, cand):
        assert all(torch.equal(a, b) for a, b in zip(before, m.state_dict().values(), strict=True))


def test_reading_a_loop_leaves_the_global_generator_alone():
    """The tangents are drawn from a generator of their own: a reference that draws (dropout) after
    the loop draws what it would have."""
    m = ElmanSplit(24, 48, 16)
    args = [torch.randn(2, 20, 24), torch.randn(2, 48)]
    torch.manual_seed(11)
    expected = torch.rand(3)
    torch.manual_seed(11)
    with torch.no_grad():
        assert loop_memory.find_loops(m, lambda: m(*args))["h2h.weight"].recurrent == tuple(range(48))
    assert torch.equal(torch.rand(3), expected)
