"""The reference's parameters, as a digest: a candidate that writes into them changes what every
check compares with (red team round 5, 2026-12-05: its load_state_dict, handed the reference's own
storage, zeroed the weight's off-diagonal and matched the reference in O(N)). The candidate now gets
copies; the digest sees any other route (native code scanning memory, a view kept from somewhere).

A digest is each floating parameter's product with a vector drawn from a secret seed, in float64: a
change keeping sums, norms or any fixed statistic still moves it, and without the seed no change can
be made to keep it. It reads every parameter once, as a forward does."""

from __future__ import annotations

from typing import Any

import torch


def digest(module: Any, seed: int) -> list[float]:
    """One number a floating parameter (in named order), each `module`'s values against a random
    vector of `seed` and its size; [] where `module` is no nn.Module."""
    if not isinstance(module, torch.nn.Module):
        return []
    out = []
    with torch.no_grad():
        for _, p in sorted(module.named_parameters(), key=lambda kv: kv[0]):
            if not p.is_floating_point() or not p.numel():
                continue
            gen = torch.Generator(device=p.device).manual_seed((seed * 1_000_003 + p.numel()) % (1 << 63))
            r = torch.randn(p.numel(), generator=gen, device=p.device, dtype=torch.float64)
            out.append(float(torch.dot(p.detach().reshape(-1).double(), r)))
    return out


def changed(before: list[float], after: list[float]) -> bool:
    """Whether the digests differ beyond a summation's rounding (the same values give the same digest
    but for the order a parallel dot product adds in)."""
    return len(before) != len(after) or any(abs(a - b) > 1e-9 * (abs(a) + abs(b)) for a, b in zip(before, after, strict=True))
