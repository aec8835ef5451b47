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


def may_recur(module: nn.Module) -> bool:
    """Whether `module` holds a recurrence (nn.RNN/LSTM/GRU or a cell) or an nn.Linear a loop may call
    once a step (found by find_loops)."""
    return bool(recurrences(module)) or bool(_linears(module))


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
    return _apply(modules, new)


# Recurrences written by hand: an nn.Linear called once a step in a Python loop, its next input made
# from its own output (an Elman cell over cat(x, h), or i2h(x) + h2h(h)). The same initial weights
# make them forget (a red-team review, 2026-12-04: h from the last 32 of 256 steps matched at init).
MIN_LOOP_CALLS = 16  # a Linear called this often in one forward is a loop's body
MAX_LOOP_LINEARS = 4  # loop bodies looked at (one forward-mode pass each)
LOOP_INPUT_SCALE = STATE_RMS / 2  # the set's floating inputs scaled so an initial state handed in starts under STATE_RMS
NUDGE_AT = 0.1  # where in the loop the confirming nudge goes: a tenth of the way
NUDGE_MOVES = 0.1  # the least relative change a nudge there must make in the output (else no long memory found)


@dataclass
class LoopBody:
    """An nn.Linear called `calls` times in one forward: the input columns that carry its own output
    from the call before (`recurrent`, empty where it is only in the loop), and whether those columns
    were never negative (a ReLU state, kept by an unsigned permutation)."""

    calls: int
    recurrent: tuple[int, ...] = ()
    nonnegative: bool = False


def _linears(module: nn.Module) -> dict[str, nn.Linear]:
    return {n: m for n, m in module.named_modules() if type(m) is nn.Linear}


def find_loops(module: nn.Module, call: Callable[[], object]) -> dict[str, LoopBody]:
    """The nn.Linear layers `call` (one forward of `module`) runs at least MIN_LOOP_CALLS times, each
    with the input columns that depend on its own previous output: forward-mode AD with a tangent on
    that layer's outputs alone, read at its next input and taken off there, so each call's tangent is
    its previous call's. Empty where the forward has no such loop, or an op in it has no forward-mode
    rule (then no long-memory weights: said by the caller)."""
    import torch.autograd.forward_ad as fwad

    counts: dict[str, int] = {}
    handles = []
    try:
        for name, m in _linears(module).items():
            handles.append(m.register_forward_pre_hook(
                lambda _m, _a, name=name: counts.__setitem__(name, counts.get(name, 0) + 1)))
        call()
    finally:
        for h in handles:
            h.remove()
    looped = sorted((n for n, c in counts.items() if c >= MIN_LOOP_CALLS), key=lambda n: -counts[n])
    found: dict[str, LoopBody] = {}
    for name in looped[:MAX_LOOP_LINEARS]:
        body, lin = LoopBody(counts[name]), _linears(module)[name]
        cols: torch.Tensor | None = None
        low = math.inf

        def pre(_m: nn.Module, args: tuple) -> tuple | None:
            nonlocal cols, low
            if not args or not isinstance(args[0], torch.Tensor):
                return None
            primal, tangent = fwad.unpack_dual(args[0])
            if tangent is None:
                return None
            moved = tangent.detach().reshape(-1, tangent.shape[-1]).abs().sum(0) > 0
            cols = moved if cols is None else cols | moved
            if moved.any():
                low = min(low, float(primal.detach()[..., moved].min()))
            return (primal, *args[1:])

        def post(_m: nn.Module, _args: tuple, out: object) -> object:
            if isinstance(out, torch.Tensor) and out.is_floating_point():
                return fwad.make_dual(out, torch.randn_like(out))
            return None

        h1, h2 = lin.register_forward_pre_hook(pre), lin.register_forward_hook(post)
        try:
            with fwad.dual_level():
                call()
        except Exception:  # noqa: BLE001 - an op without a forward-mode rule, an inference tensor: unreadable
            return {}
        finally:
            h1.remove()
            h2.remove()
        if cols is not None and cols.any():
            body.recurrent = _state_block(tuple(int(i) for i in torch.nonzero(cols).flatten()),
                                          lin.in_features, lin.out_features)
            body.nonnegative = low >= 0
        found[name] = body
    return found


def _state_block(cols: tuple[int, ...], width: int, state: int) -> tuple[int, ...]:
    """The columns a state of `state` units takes in an input of `width`, from those seen to carry it:
    a unit a ReLU held at zero in every call carries no tangent, so a state read whole from the input's
    first or last columns (cat((h, x)) or cat((x, h))) is taken whole where the seen ones lie inside
    one such block alone."""
    if len(cols) >= state or state > width:
        return cols
    blocks = {tuple(range(lo, lo + state)) for lo in (0, width - state)
              if 0 <= lo and lo <= cols[0] and cols[-1] < lo + state}
    return blocks.pop() if len(blocks) == 1 else cols


def scale_inputs(args: list) -> list:
    """The set's floating inputs times LOOP_INPUT_SCALE: an initial state handed in at unit scale would
    hold tanh's slope under 1 for the whole loop, and forget the steps the check is about."""
    return [a * LOOP_INPUT_SCALE if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]


def _loop_tensors(module: nn.Module, loops: dict[str, LoopBody], drive: float,
                  gen: torch.Generator) -> dict[str, torch.Tensor] | None:
    """New values (float64, CPU) for the loops' Linears, by state_dict name: a recurrent one's block
    on its own output a signed (or, for a ReLU state, plain) permutation, so the state neither grows
    nor decays; everything else the loop adds a step (its other columns, the loop's other Linears)
    times `drive`, and the biases small. None where no recurrent block is square (not an Elman step)."""
    lins, new = _linears(module), {}
    for name, body in loops.items():
        lin = lins[name]
        w = lin.weight.detach().to("cpu", torch.float64)
        b = None if lin.bias is None else lin.bias.detach().to("cpu", torch.float64)
        rec = list(body.recurrent)
        w2 = w * drive
        if rec:
            if len(rec) != w.shape[0]:
                continue
            perm = torch.randperm(len(rec), generator=gen)
            sign = torch.ones(len(rec), dtype=torch.float64) if body.nonnegative else \
                torch.randint(0, 2, (len(rec),), generator=gen).double() * 2 - 1
            block = torch.zeros(len(rec), len(rec), dtype=torch.float64)
            block[torch.arange(len(rec)), perm] = sign
            w2[:, rec] = block
        new[f"{name}.weight"] = w2
        if b is not None:  # small, as nn.RNN's: a bias added every step would pile up along the permutation's cycles
            new[f"{name}.bias"] = torch.randn(b.shape, generator=gen, dtype=torch.float64) * \
                (0.1 * STATE_RMS / math.sqrt(body.calls))
    if not any(loops[n].recurrent and f"{n}.weight" in new for n in loops):
        return None
    return new


def _state_rms(module: nn.Module, loops: dict[str, LoopBody], call: Callable[[], object]) -> float:
    """The rms of the recurrent columns over the second half of the loop's calls."""
    lins = _linears(module)
    sums = [0.0, 0]
    handles = []
    for name, body in loops.items():
        if not body.recurrent:
            continue
        seen = [0]

        def pre(_m: nn.Module, args: tuple, body: LoopBody = body, seen: list[int] = seen) -> None:
            seen[0] += 1
            if seen[0] > body.calls // 2 and args and isinstance(args[0], torch.Tensor):
                cols = args[0].detach()[..., list(body.recurrent)].double()
                sums[0] += float(cols.square().sum())
                sums[1] += cols.numel()
        handles.append(lins[name].register_forward_pre_hook(pre))
    try:
        call()
    finally:
        for h in handles:
            h.remove()
    return math.sqrt(sums[0] / sums[1]) if sums[1] else 0.0


def _outputs(out: object) -> torch.Tensor:
    parts = [out] if isinstance(out, torch.Tensor) else [o for o in out if isinstance(o, torch.Tensor)] \
        if isinstance(out, tuple | list) else []
    return torch.cat([p.detach().double().flatten().cpu() for p in parts if p.is_floating_point()]) \
        if parts else torch.zeros(0, dtype=torch.float64)


def _nudge_moves(module: nn.Module, loops: dict[str, LoopBody], call: Callable[[], object],
                 gen: torch.Generator) -> float:
    """How far (relative L2) the output moves when a recurrent Linear's output is nudged by STATE_RMS
    a tenth of the way through the loop: the memory the weights give, measured."""
    name, body = next((n, b) for n, b in loops.items() if b.recurrent)
    base = _outputs(call())
    at, seen = max(1, int(body.calls * NUDGE_AT)), [0]

    def post(_m: nn.Module, _args: tuple, out: object) -> object:
        seen[0] += 1
        if seen[0] == at and isinstance(out, torch.Tensor):
            noise = torch.randn(out.shape, generator=gen, dtype=torch.float64)
            return out + (noise * STATE_RMS).to(out.dtype).to(out.device)
        return None

    h = _linears(module)[name].register_forward_hook(post)
    try:
        moved = _outputs(call())
    finally:
        h.remove()
    return float((moved - base).norm() / base.norm()) if base.numel() and base.norm() > 0 else 0.0


def set_loop_memory(modules: list[nn.Module], loops: dict[str, LoopBody], call: Callable[[], object],
                    seed: int) -> tuple[Callable[[], None] | None, str]:
    """The first module's hand-written loops given weights that remember (see _loop_tensors), in every
    module alike by state_dict name; `call` runs the first module's forward on the set's inputs (scaled
    by scale_inputs). The drive is sized by reference calls so the state's rms sits near STATE_RMS,
    and the memory confirmed: a nudge a tenth of the way in must move the output by NUDGE_MOVES.
    Returns what puts the weights back (None where no weights were set) and why not."""
    applied: list[Callable[[], None]] = []
    try:
        return _size_loop_memory(modules, loops, call, seed, applied)
    except BaseException:
        for undo in applied:  # a reference call raised under the new weights: nothing left changed
            undo()
        raise


def _size_loop_memory(modules: list[nn.Module], loops: dict[str, LoopBody], call: Callable[[], object],
                      seed: int, applied: list[Callable[[], None]]) -> tuple[Callable[[], None] | None, str]:
    """set_loop_memory's work; `applied` holds what puts the weights set so far back, while set."""
    gen = torch.Generator().manual_seed(seed)
    drive = 1.0
    perm_seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen))

    def undo() -> None:
        while applied:
            applied.pop()()

    for _ in range(8):
        new = _loop_tensors(modules[0], loops, drive, torch.Generator().manual_seed(perm_seed))
        if new is None:
            return None, "a loop's recurrent block is not square (not an Elman step)"
        undo()
        put_back = _apply(modules, new)
        if put_back is None:
            return None, "the candidate does not hold the loop's weights"
        applied.append(put_back)
        rms = _state_rms(modules[0], loops, call)
        if not math.isfinite(rms) or rms == 0.0:
            break
        if STATE_RMS / 2 <= rms <= STATE_RMS * 1.5:  # tanh' over 1 - 0.045^2: 0.36 of a nudge kept over 500 steps
            moves = _nudge_moves(modules[0], loops, call, gen)
            if moves >= NUDGE_MOVES:
                applied.clear()
                return put_back, ""
            undo()
            return None, f"no weights found under which the loop remembers (a nudge early moved the output {moves:.3g})"
        drive *= STATE_RMS / rms
    undo()
    return None, "the loop's state could not be sized to a linear range by its own weights"


def _apply(modules: list[nn.Module], new: dict[str, torch.Tensor]) -> Callable[[], None] | None:
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
