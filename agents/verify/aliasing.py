"""Where a forward's outputs live, as the caller sees it: two checks the values alone cannot make.

- An output that shares memory with an input, a parameter or a buffer where the reference's output
  of that place does not: a view returned for a copy (`x.transpose(1, 2)` for the reference's
  `.contiguous()`) has the right values and skips the work, and it changes when the input does.
- An output that a later call overwrites: one buffer handed out by every forward, so `y1 = m(a);
  y2 = m(b)` leaves `y1` holding `y2`. Each output is snapshotted when its call returns and compared
  with that snapshot only then; a buffer reused by the next call passes every such comparison.

(A red-team review, 2026-12-01: both were accepted.)"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

from stitchcuda.types import Finding


def _storage(t: Any) -> int | None:
    if type(t) is not torch.Tensor or t.numel() == 0:
        return None
    return t.untyped_storage().data_ptr()


def aliases(outs: list[Any], inputs: Iterable[Any], state: Iterable[tuple[str, torch.Tensor]],
            written: Iterable[int] = ()) -> dict[int, str]:
    """Output index -> what it shares memory with ("input 0", "parameter conv.weight"). Inputs in
    `written` (changed by the call) are left out: a result computed over its input is work done,
    and writing the caller's input is a finding of its own (mutates-input)."""
    owners: dict[int, str] = {}
    written = set(written)
    for i, a in enumerate(inputs):
        if i not in written and (key := _storage(a)) is not None:
            owners.setdefault(key, f"input {i}")
    for name, t in state:
        if (key := _storage(t)) is not None:
            owners.setdefault(key, name)
    return {i: owners[key] for i, o in enumerate(outs) if (key := _storage(o)) is not None and key in owners}


def state_of(module: Any) -> list[tuple[str, torch.Tensor]]:
    """A module's parameters and buffers by name; [] for anything that is not a module."""
    if not isinstance(module, torch.nn.Module):
        return []
    return [(f"parameter {k}", p) for k, p in module.named_parameters()] + \
        [(f"buffer {k}", b) for k, b in module.named_buffers()]


def alias_findings(cand: dict[int, str], ref: dict[int, str], set_name: str) -> list[Finding]:
    """Candidate outputs that share memory with its inputs or state where the reference's do not."""
    extra = {i: what for i, what in cand.items() if i not in ref}
    if not extra:
        return []
    said = ", ".join(f"output {i} is a view of {what}" for i, what in sorted(extra.items()))
    return [Finding("output-aliases-input", f"{set_name}: {said}, where the reference's output is memory of its own: "
                    "the values are borrowed, not computed, and change when that tensor does")]


class KeptOutputs:
    """One call's plain tensor outputs, kept alive with a copy of each, so that the next call can be
    seen not to write them. Outputs the reference shares with its inputs or state are left out (an
    input rewritten for the next set changes them honestly), and so is anything over `limit` bytes
    in all (the copies are GPU memory the checks need)."""

    def __init__(self, limit: int):
        self.limit = limit
        self.kept: list[tuple[int, torch.Tensor, torch.Tensor]] = []
        self.set_name = ""

    def keep(self, outs: list[Any], skip: Iterable[int], set_name: str) -> None:
        skip = set(skip)
        chosen = [(i, o) for i, o in enumerate(outs) if type(o) is torch.Tensor and i not in skip and o.numel()]
        if sum(o.numel() * o.element_size() for _, o in chosen) > self.limit:
            chosen = []
        self.kept = [(i, o, o.detach().clone()) for i, o in chosen]
        self.set_name = set_name

    def findings(self, set_name: str) -> list[Finding]:
        """After the next call (`set_name`): the kept outputs that it changed."""
        from stitchcuda.agents.verify.dynamic_check import bits_equal

        changed = [i for i, o, copy in self.kept if not bits_equal(o.detach(), copy)]
        if not changed:
            return []
        return [Finding("output-overwritten", f"output(s) {changed} of {self.set_name} changed when forward ran "
                        f"again ({set_name}): a later call writes an earlier call's result (one output buffer "
                        "for every call), so a caller holding two results has one")]

    def clear(self) -> None:
        self.kept = []
