"""Weights under which a recurrence written by hand remembers its whole sequence, for the Verifier's
long-memory check (long_memory.py does nn.RNN/LSTM/GRU and their cells).

A hand-written Elman step multiplies its state by a weight matrix once a step in a Python loop:
nn.Linear over cat(x_t, h), i2h(x_t) + h2h(h), or `h @ self.W_hh` with a bare nn.Parameter. At the
usual initial weights (U(-1/sqrt(H), 1/sqrt(H)), or randn scaled alike) the state forgets all but the
last few dozen steps, so a candidate that ran only those matched every other set (a red-team review,
2026-12-04: an output from the last 32 of 256 steps). Nothing names the loop, so it is read from one
forward: a weight matrix used in a product MIN_LOOP_CALLS times or more is in a loop, and it is a
recurrence where its next use's input carries its own last output (forward-mode AD, a tangent on that
matrix's products alone, taken off again at its next input). Its block on those features becomes a
signed (for a ReLU state, plain) permutation, so the state neither grows nor decays; what the loop adds
a step is scaled until the state's rms sits near STATE_RMS, where tanh is nearly linear; and the memory
is confirmed by a nudge a tenth of the way in before the check relies on it. A gated loop (an LSTM or
GRU by hand: the state's matrix 2 to 4 gates wide) has no square block: each gate in turn is held
open (as long_memory holds nn.LSTM's forget gate), the state's feedback into the gates kept weak,
and the first under which the nudge is remembered is kept; one without a bias to hold it by is said
and left.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.autograd.forward_ad as fwad
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

from .dynamic_check import flatten_outputs
from .long_memory import GATE_ROWS, STATE_RMS, apply

MIN_LOOP_CALLS = 16  # a matrix used this often in one forward is in a loop's body
MAX_LOOP_MATRICES = 4  # loop matrices read (one forward-mode pass each)
LOOP_INPUT_SCALE = STATE_RMS / 2  # the set's floating inputs scaled so a state handed in starts under STATE_RMS
NUDGE_AT = 0.1  # where in the loop the confirming nudge goes: a tenth of the way
NUDGE_MOVES = 0.1  # the least relative change that nudge must make in the output (else no memory found)
SIZING_ROUNDS = 12


@dataclass
class LoopBody:
    """A weight matrix (by state_dict name, the key it is kept under) used `calls` times in one
    forward. `contracted`: the matrix's dimension that meets the input's features (1 for F.linear's
    [out, in], 0 for `x @ W`); `recurrent`: the features (along it) that carry its own last output,
    empty where it is only in the loop; `nonnegative`: those features never below zero (a ReLU state);
    `bias`: the bias added in the same product (F.linear, addmm), by name."""

    calls: int
    contracted: int = 1
    recurrent: tuple[int, ...] = ()
    nonnegative: bool = False
    bias: str | None = None


@dataclass
class _Use:
    name: str
    operand: int  # which argument is the input multiplied by the matrix
    axis: int  # the input's features axis (-1 for x @ W, -2 for W @ h)
    contracted: int
    bias: str | None


_LINEAR = {F.linear}
_PRODUCT = {torch.matmul, torch.mm, torch.Tensor.matmul, torch.Tensor.mm, torch.Tensor.__matmul__}
_ADDMM = {torch.addmm, torch.Tensor.addmm}
_ARGS = {F.linear: ("input", "weight", "bias"), torch.matmul: ("input", "other"), torch.mm: ("input", "mat2"),
         torch.Tensor.matmul: ("self", "other"), torch.Tensor.mm: ("self", "mat2"),
         torch.addmm: ("input", "mat1", "mat2"), torch.Tensor.addmm: ("self", "mat1", "mat2")}


class _Products(TorchFunctionMode):
    """Calls `before(use, input) -> input` and `after(use, output) -> output` around every product of
    an input with one of `names`' matrices (the parameter itself or its transpose)."""

    def __init__(self, names: dict[int, str], before: Callable[[_Use, torch.Tensor], torch.Tensor],
                 after: Callable[[_Use, torch.Tensor], torch.Tensor]):
        super().__init__()
        self.names, self.before, self.after = names, before, after

    def _matrix(self, t: object) -> tuple[str, bool] | None:
        """(name, transposed) where `t` is one of the matrices or a transposed view of one."""
        if not isinstance(t, torch.Tensor) or t.dim() != 2:
            return None
        if id(t) in self.names:
            return self.names[id(t)], False
        base = t._base
        if base is not None and id(base) in self.names and base.dim() == 2 and \
                tuple(t.shape) == tuple(base.shape)[::-1] and tuple(t.stride()) == tuple(base.stride())[::-1]:
            return self.names[id(base)], True
        return None

    def _use(self, func, args: tuple, kwargs: dict) -> _Use | None:
        if func in _LINEAR:
            weight = args[1] if len(args) > 1 else kwargs.get("weight")
            bias = args[2] if len(args) > 2 else kwargs.get("bias")
            got = self._matrix(weight)
            if got is None:
                return None
            b = self.names.get(id(bias)) if isinstance(bias, torch.Tensor) else None
            return _Use(got[0], 0, -1, 0 if got[1] else 1, b)
        if func not in _PRODUCT and func not in _ADDMM:
            return None
        offset = 1 if func in _ADDMM else 0  # addmm(bias, x, W)
        if len(args) < offset + 2:
            return None
        b = self.names.get(id(args[0])) if offset and isinstance(args[0], torch.Tensor) else None
        left, right = args[offset], args[offset + 1]
        got = self._matrix(right)
        if got is not None:  # x @ W: W's rows meet x's features
            return _Use(got[0], offset, -1, 1 if got[1] else 0, b)
        got = self._matrix(left)
        if got is not None and isinstance(right, torch.Tensor) and right.dim() >= 2:  # W @ h: h's columns are states
            return _Use(got[0], offset + 1, -2, 0 if got[1] else 1, b)
        return None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        names = _ARGS.get(func)
        if names is not None and any(n in kwargs for n in names):  # F.linear(input=x, weight=w): positional
            args = (*args, *(kwargs.pop(n) for n in names[len(args):] if n in kwargs))
        use = self._use(func, args, kwargs)
        if use is None:
            return func(*args, **kwargs)
        args = list(args)
        args[use.operand] = self.before(use, args[use.operand])
        return self.after(use, func(*args, **kwargs))


def _matrices(module: nn.Module) -> dict[int, str]:
    """The module's floating parameters by id, under their state_dict names (a weight matrix, or a
    bias some product adds)."""
    return {id(p): n for n, p in module.named_parameters() if p.is_floating_point() and p.dim() in (1, 2)}


def has_matrices(module: nn.Module) -> bool:
    """Whether `module` holds a weight matrix a loop might multiply by (so find_loops has work)."""
    return any(p.dim() == 2 and p.is_floating_point() for p in module.parameters())


def _same(_use: _Use, t: torch.Tensor) -> torch.Tensor:
    return t


def find_loops(module: nn.Module, call: Callable[[], object]) -> dict[str, LoopBody]:
    """The weight matrices `call` (one forward of `module`) multiplies by MIN_LOOP_CALLS times or more,
    each with the input features that carry its own last output. Empty where there is no such loop,
    or the forward cannot run under forward-mode AD (an op without its rule, inference tensors)."""
    names = _matrices(module)
    uses: dict[str, _Use] = {}
    counts: dict[str, int] = {}

    def count(use: _Use, t: torch.Tensor) -> torch.Tensor:
        counts[use.name] = counts.get(use.name, 0) + 1
        uses.setdefault(use.name, use)
        return t

    try:
        with _Products(names, count, _same):
            call()
    except Exception:  # noqa: BLE001 - a call our mode's bookkeeping cannot follow: no loop read
        return {}
    looped = sorted((n for n, c in counts.items() if c >= MIN_LOOP_CALLS), key=lambda n: -counts[n])
    tangents = torch.Generator().manual_seed(0)
    found: dict[str, LoopBody] = {}
    for name in looped[:MAX_LOOP_MATRICES]:
        first = uses[name]
        body = LoopBody(counts[name], first.contracted, bias=first.bias)
        seen: dict[str, object] = {"cols": None, "low": math.inf}

        def before(use: _Use, t: torch.Tensor, name: str = name, seen: dict = seen) -> torch.Tensor:
            if use.name != name or not isinstance(t, torch.Tensor):
                return t
            primal, tangent = fwad.unpack_dual(t)
            if tangent is None:
                return t
            feats = tangent.detach().movedim(use.axis, -1)
            moved = feats.reshape(-1, feats.shape[-1]).abs().sum(0) > 0
            seen["cols"] = moved if seen["cols"] is None else seen["cols"] | moved
            if moved.any():
                seen["low"] = min(seen["low"], float(primal.detach().movedim(use.axis, -1)[..., moved].min()))
            return primal

        def after(use: _Use, out: torch.Tensor, name: str = name) -> torch.Tensor:
            if use.name != name or not isinstance(out, torch.Tensor) or not out.is_floating_point():
                return out
            # Drawn apart from torch's global generator: the reference's own draws stay where they were.
            tangent = torch.randn(tuple(out.shape), generator=tangents, dtype=torch.float64).to(out.dtype).to(out.device)
            return fwad.make_dual(fwad.unpack_dual(out).primal, tangent)

        try:
            with fwad.dual_level(), _Products(names, before, after):
                call()
        except Exception:  # noqa: BLE001 - an op without a forward-mode rule, an inference tensor: unreadable
            return {}
        cols = seen["cols"]
        if isinstance(cols, torch.Tensor) and cols.any():
            width = int(cols.numel())
            state = _out_size(module, name, body.contracted)
            body.recurrent = _state_block(tuple(int(i) for i in torch.nonzero(cols).flatten()), width, state)
            body.nonnegative = float(seen["low"]) >= 0  # type: ignore[arg-type]
        found[name] = body
    return found


def _out_size(module: nn.Module, name: str, contracted: int) -> int:
    return int(module.get_parameter(name).shape[1 - contracted])


def _state_block(cols: tuple[int, ...], width: int, state: int) -> tuple[int, ...]:
    """The features a state of `state` units takes in an input of `width`, from those seen to carry it:
    a unit a ReLU held at zero in every call carries no tangent, so a state read whole from the input's
    first or last features (cat((h, x)) or cat((x, h))) is taken whole where the seen ones lie inside
    one such block alone."""
    if len(cols) >= state or state > width:
        return cols
    blocks = {tuple(range(lo, lo + state)) for lo in (0, width - state) if lo <= cols[0] and cols[-1] < lo + state}
    return blocks.pop() if len(blocks) == 1 else cols


def scale_inputs(args: list) -> list:
    """The set's floating inputs times LOOP_INPUT_SCALE: a state handed in at unit scale would hold
    tanh's slope under 1 for much of the loop, and forget the steps the check is about."""
    return [a * LOOP_INPUT_SCALE if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]


def _loop_tensors(module: nn.Module, loops: dict[str, LoopBody], drive: float, gen: torch.Generator,
                  hold: int | None = None) -> dict[str, torch.Tensor] | None:
    """New values (float64, CPU) by state_dict name: a recurrent matrix's block on its own output a
    signed (ReLU state: plain) permutation; everything else the loop multiplies in a step times
    `drive`, and the biases its products add small (one added every step would pile up along the
    permutation's cycles). A gated matrix (its output 2 to 4 gates of the state's width, as a
    hand-written LSTM's or GRU's) has no square block: its gate `hold` is held open instead (rows
    scaled by GATE_ROWS, bias ln(2T): a forget or update gate at 1 - 1/2T), the rest times `drive`.
    None where no recurrent matrix was set (a gated one with `hold` None, or no bias to hold it by)."""
    new: dict[str, torch.Tensor] = {}
    for name, body in loops.items():
        w = module.get_parameter(name).detach().to("cpu", torch.float64)
        w2 = w * drive
        bias = None if body.bias is None else \
            torch.randn(tuple(module.get_parameter(body.bias).shape), generator=gen, dtype=torch.float64) * \
            (0.1 * STATE_RMS / math.sqrt(body.calls))
        rec, outs = list(body.recurrent), w.shape[1 - body.contracted]
        if rec and len(rec) == outs:
            perm = torch.randperm(outs, generator=gen)
            sign = torch.ones(outs, dtype=torch.float64) if body.nonnegative else \
                torch.randint(0, 2, (outs,), generator=gen).double() * 2 - 1
            block = torch.zeros(outs, outs, dtype=torch.float64)  # [out unit, state feature]
            block[torch.arange(outs), perm] = sign
            if body.contracted == 1:
                w2[:, rec] = block
            else:
                w2[rec, :] = block.T
        elif rec:
            gates = outs // len(rec) if outs % len(rec) == 0 else 0
            if hold is None or not 2 <= gates <= 4 or hold >= gates or bias is None or bias.dim() != 1:
                continue
            held = slice(hold * len(rec), (hold + 1) * len(rec))
            # The state's own feedback into the gates kept weak (through an integrating cell it would
            # grow without bound), the held gate barely moved by anything.
            if body.contracted == 1:
                w2[:, rec] = w[:, rec] * GATE_ROWS
                w2[held, :] = w[held, :] * GATE_ROWS
            else:
                w2[rec, :] = w[rec, :] * GATE_ROWS
                w2[:, held] = w[:, held] * GATE_ROWS
            bias[held] = math.log(2 * body.calls) + 0.01 * torch.randn(len(rec), generator=gen, dtype=torch.float64)
        new[name] = w2
        if bias is not None:
            new[body.bias] = bias  # type: ignore[index]
    if not any(loops[n].recurrent and n in new for n in loops):
        return None
    return new


def _gates(loops: dict[str, LoopBody], module: nn.Module) -> int:
    """How many gates the widest gated recurrent matrix has (0 where every recurrent block is square)."""
    most = 0
    for name, body in loops.items():
        outs = module.get_parameter(name).shape[1 - body.contracted]
        if body.recurrent and len(body.recurrent) != outs and outs % len(body.recurrent) == 0:
            most = max(most, outs // len(body.recurrent))
    return most


def _state_rms(module: nn.Module, loops: dict[str, LoopBody], call: Callable[[], object]) -> float:
    """The rms of the recurrent features over the second half of the loop's steps."""
    sums, seen = [0.0, 0], dict.fromkeys(loops, 0)

    def before(use: _Use, t: torch.Tensor) -> torch.Tensor:
        body = loops.get(use.name)
        if body is None or not body.recurrent:
            return t
        seen[use.name] += 1
        if seen[use.name] > body.calls // 2:
            feats = t.detach().movedim(use.axis, -1)[..., list(body.recurrent)].double()
            sums[0] += float(feats.square().sum())
            sums[1] += feats.numel()
        return t

    with _Products(_matrices(module), before, _same):
        call()
    return math.sqrt(sums[0] / sums[1]) if sums[1] else 0.0


def _flat(out: object) -> torch.Tensor:
    """forward's floating outputs, however nested, as one float64 vector (the nudge's yardstick)."""
    parts = [p.detach().double().flatten().cpu() for p in flatten_outputs(out)
             if isinstance(p, torch.Tensor) and p.is_floating_point()]
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.float64)


def _nudge_moves(module: nn.Module, loops: dict[str, LoopBody], call: Callable[[], object],
                 gen: torch.Generator) -> float:
    """How far (relative L2) the output moves when the loop is nudged by STATE_RMS a tenth of the way
    through: the memory the weights give, measured. Two nudges, the larger kept: the recurrent
    product's output (where a gated cell's memory is written) and its state input in place (the
    state itself, where a GRU carries it past its gates)."""
    name, body = next((n, b) for n, b in loops.items() if b.recurrent)
    base = _flat(call())
    at = max(1, int(body.calls * NUDGE_AT))

    def noise(shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
        drawn = torch.randn(shape, generator=gen, dtype=torch.float64) * STATE_RMS
        return drawn.to(dtype=like.dtype, device=like.device)

    def moved_by(before: Callable, after: Callable) -> float:
        with _Products(_matrices(module), before, after):
            moved = _flat(call())
        return float((moved - base).norm() / base.norm()) if base.numel() and base.norm() > 0 else 0.0

    seen = [0, 0]

    def on_output(use: _Use, out: torch.Tensor) -> torch.Tensor:
        if use.name != name:
            return out
        seen[0] += 1
        return out + noise(tuple(out.shape), out) if seen[0] == at else out

    def on_state(use: _Use, t: torch.Tensor) -> torch.Tensor:
        if use.name != name or not isinstance(t, torch.Tensor):
            return t
        seen[1] += 1
        if seen[1] == at:
            feats = t.movedim(use.axis, -1)
            cols = list(body.recurrent)
            feats[..., cols] += noise(tuple(feats[..., cols].shape), t)  # in place: the state's other readers see it
        return t

    return max(moved_by(_same, on_output), moved_by(on_state, _same))


def set_loop_memory(modules: list[nn.Module], loops: dict[str, LoopBody], call: Callable[[], object],
                    seed: int) -> tuple[Callable[[], None] | None, str]:
    """The first module's hand-written loops given weights that remember, in every module alike by
    state_dict name; `call` runs the first module's forward on the set's inputs (scaled by
    scale_inputs). Returns what puts the weights back (None where none were set) and why not. A
    reference call that raises under the new weights leaves every weight as it was."""
    gates = _gates(loops, modules[0])
    why = ""
    # Which of a gated matrix's gates keeps the state (an LSTM's forget gate, a GRU's update gate) is
    # nowhere written: each is held open in turn, and the first under which a nudge is remembered kept.
    for hold in range(gates) if 2 <= gates <= 4 else [None]:
        applied: list[Callable[[], None]] = []
        try:
            put_back, why = _size(modules, loops, call, seed, applied, hold)
        except BaseException:
            for undo in applied:
                undo()
            raise
        if put_back is not None:
            return put_back, ""
    return None, why


def _size(modules: list[nn.Module], loops: dict[str, LoopBody], call: Callable[[], object], seed: int,
          applied: list[Callable[[], None]], hold: int | None) -> tuple[Callable[[], None] | None, str]:
    """set_loop_memory's work: the drive sized by reference calls until the state's rms sits near
    STATE_RMS, then the memory confirmed; `applied` holds what puts the weights set so far back."""
    gen = torch.Generator().manual_seed(seed)
    perm_seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen))
    drive = 1.0

    def undo() -> None:
        while applied:
            applied.pop()()

    for _ in range(SIZING_ROUNDS):
        new = _loop_tensors(modules[0], loops, drive, torch.Generator().manual_seed(perm_seed), hold)
        if new is None:
            return None, "a loop's recurrent block is neither square (an Elman step) nor 2 to 4 gates with a bias"
        undo()
        put_back = apply(modules, new)
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
        drive *= (STATE_RMS / rms) ** 0.7  # damped: a gated cell's state is not linear in its drive
    undo()
    return None, "the loop's state could not be sized to a linear range by its own weights"
