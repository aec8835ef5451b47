"""Weights under which a recurrence remembers its whole sequence, for the Verifier's long-memory check.

nn.RNN, nn.LSTM and nn.GRU (and their cells, called in a loop) start from weights that make the
recurrence forget: U(-1/sqrt(H), 1/sqrt(H)) gives W_hh a spectral radius near 1/sqrt(3), an LSTM's
forget gate and a GRU's update gate sit near 0.5, so the state at the end of a 512-step sequence
holds ~1e-8 of its first steps whatever the inputs. A candidate that ran only the last few dozen
steps matched every input set and the weights-changed set (a red-team review, 2026-12-02); a trained
recurrence with long memory would be far off. These weights are such a recurrence, kept out of
saturation and without error growth, so a faithful candidate still matches to its precision:
- tanh/ReLU RNN: W_hh a random signed permutation (tanh) or permutation (ReLU): orthogonal, so the
  state neither grows nor decays; the input drive scaled so the state's rms stays near STATE_RMS
  over the whole sequence, where tanh is nearly linear and forgets nothing;
- LSTM: the forget gate held near 1 - 1/(2T) and the input gate near 1/sqrt(T) (their rows scaled
  down, their biases set), so the cell sums the whole sequence at unit scale;
- GRU: the update gate held near 1 - 1/(2T), so the state averages the whole sequence.
Each is what training gives a recurrence that must remember; none is a fixed pattern (the
permutations, signs and small biases are drawn from the check's seed).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

STATE_RMS = 0.03  # the RNN state's rms over the sequence: tanh'(0.03) = 0.9991, 0.64 kept over 500 steps
GATE_ROWS = 0.05  # how far the gates' weight rows are scaled down, so the inputs barely move the gates
_NAME = re.compile(r"(weight|bias)_(ih|hh|hr)(?:_l(\d+))?(_reverse)?$")


@dataclass
class Seen:
    """What one reference call showed of a recurrence: its steps in one call (the sequence's length,
    or a cell's calls) and the rms of the inputs it was handed."""

    steps: int = 0
    sum_sq: float = 0.0
    count: int = 0

    @property
    def rms(self) -> float:
        return math.sqrt(self.sum_sq / self.count) if self.count else 0.0


def recurrences(module: nn.Module) -> dict[str, nn.Module]:
    """The recurrent layers and cells inside `module`, by name."""
    return {n: m for n, m in module.named_modules() if isinstance(m, nn.RNNBase | nn.RNNCellBase)}


def _mode(m: nn.Module) -> str:
    if isinstance(m, nn.RNNBase):
        return str(m.mode)
    if isinstance(m, nn.LSTMCell):
        return "LSTM"
    if isinstance(m, nn.GRUCell):
        return "GRU"
    return "RNN_RELU" if getattr(m, "nonlinearity", "tanh") == "relu" else "RNN_TANH"


def observe(module: nn.Module, call: Callable[[], object]) -> dict[str, Seen]:
    """Runs `call` (one forward of `module`) with a hook on each recurrence, and returns what each saw."""
    seen: dict[str, Seen] = {}
    handles = []

    def hook(name: str, m: nn.Module):
        def pre(_m: nn.Module, args: tuple) -> None:
            if not args:
                return
            x, s = args[0], seen.setdefault(name, Seen())
            if isinstance(x, nn.utils.rnn.PackedSequence):
                s.steps += int(x.batch_sizes.numel())
                x = x.data
            elif not isinstance(x, torch.Tensor):
                return
            elif isinstance(m, nn.RNNBase):
                s.steps += int(x.shape[1 if m.batch_first and x.dim() == 3 else 0])
            else:
                s.steps += 1  # a cell: one step a call
            if x.is_floating_point() and x.numel():
                s.sum_sq += float(x.detach().double().square().sum())
                s.count += x.numel()
        return pre

    try:
        for name, m in recurrences(module).items():
            handles.append(m.register_forward_pre_hook(hook(name, m)))
        call()
    finally:
        for h in handles:
            h.remove()
    return seen


def _long_memory_tensors(m: nn.Module, seen: Seen, gen: torch.Generator) -> dict[str, torch.Tensor] | None:
    """New values (float64, CPU) for `m`'s parameters, by their names in `m`; None where `m` has no
    gate biases to hold its gates open (an LSTM or GRU built with bias=False)."""
    mode, hidden = _mode(m), int(m.hidden_size)
    steps = max(seen.steps, 4)
    params = {n: p.detach().to("cpu", torch.float64) for n, p in m.named_parameters(recurse=False)}
    if mode in ("LSTM", "GRU") and not any(n.startswith("bias_ih") for n in params):
        return None
    out: dict[str, torch.Tensor] = {}
    hold = math.log(2 * steps)  # sigmoid(hold) = 1 - 1/(2T + 1): e^-0.5 of the first step kept at the last
    for name, p in params.items():
        got = _NAME.match(name)
        if got is None:
            continue
        kind, which, layer = got.group(1), got.group(2), int(got.group(3) or 0)
        new = p.clone()
        if mode.startswith("RNN"):
            step_rms = STATE_RMS / math.sqrt(steps)
            if kind == "weight" and which == "hh":
                perm = torch.randperm(hidden, generator=gen)
                sign = torch.ones(hidden, dtype=torch.float64) if mode == "RNN_RELU" else \
                    torch.randint(0, 2, (hidden,), generator=gen).double() * 2 - 1
                new = torch.zeros_like(p)
                new[torch.arange(hidden), perm] = sign
            elif kind == "weight":  # ih: the drive a step adds, at step_rms for inputs at their rms
                inputs_rms = seen.rms if layer == 0 else STATE_RMS
                rows_rms = float(p.square().sum(1).mean().sqrt())
                new = p * (step_rms / max(inputs_rms * rows_rms, 1e-30))
            else:
                new = torch.randn(p.shape, generator=gen, dtype=torch.float64) * (0.1 * step_rms)
        else:
            held = [(1, hold)] if mode == "GRU" else [(1, hold), (0, -math.log(math.sqrt(steps)))]  # z; f, i
            for gate, bias in held:
                rows = slice(gate * hidden, (gate + 1) * hidden)
                if kind == "weight" and which in ("ih", "hh"):
                    new[rows] = p[rows] * GATE_ROWS
                elif kind == "bias" and which == "ih":
                    new[rows] = bias + 0.01 * torch.randn(hidden, generator=gen, dtype=torch.float64)
                elif kind == "bias":
                    new[rows] = p[rows] * GATE_ROWS
        out[name] = new
    return out


def set_long_memory(modules: list[nn.Module], seen: dict[str, Seen], seed: int) -> Callable[[], None] | None:
    """The first module's recurrences that `seen` saw run, given long-memory weights in every module
    alike (by state_dict name: a candidate holds the reference's); returns what puts the weights
    back, or None where there is none to change, or a module lacks one of them."""
    gen = torch.Generator().manual_seed(seed)
    new: dict[str, torch.Tensor] = {}
    for name, m in recurrences(modules[0]).items():
        if name not in seen or not seen[name].steps:
            continue
        got = _long_memory_tensors(m, seen[name], gen)
        if got is None:
            return None
        new.update({f"{name}.{k}" if name else k: t for k, t in got.items()})
    if not new:
        return None
    return apply(modules, new)


def apply(modules: list[nn.Module], new: dict[str, torch.Tensor]) -> Callable[[], None] | None:
    """`new` copied into every module's tensors of those state_dict names; what puts them back, or
    None (nothing changed) where a module lacks one or holds it in another shape."""
    states = [m.state_dict(keep_vars=True) for m in modules]
    if any(k not in sd or tuple(sd[k].shape) != tuple(t.shape) for sd in states for k, t in new.items()):
        return None
    saved = [{k: sd[k].detach().clone() for k in new} for sd in states]
    with torch.no_grad():
        for sd in states:
            for k, t in new.items():
                sd[k].detach().copy_(t.to(sd[k].dtype))

    def put_back() -> None:
        with torch.no_grad():
            for sd, kept in zip(states, saved, strict=True):
                for k, t in kept.items():
                    sd[k].detach().copy_(t)

    return put_back
