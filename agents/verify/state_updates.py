"""State a forward updates: a train-mode BatchNorm's running statistics and its batch count, a
buffer a module accumulates into. Only outputs are compared with the reference's, so a candidate
that computed the batch statistics and never wrote the running ones returned right outputs and
skipped that work (a red-team review, 2026-12-01: accepted, and wrong after `.eval()`). The
buffers the reference changed over the checked sets must have changed in the candidate too."""

from __future__ import annotations

from typing import Any

import torch

from stitchcuda.types import Finding


def snapshot(module: Any, limit: int, names: set[str] | None = None) -> dict[str, torch.Tensor]:
    """Copies of a module's buffers by name (only those in `names`, where given); {} where they
    exceed `limit` bytes in all (the check is then not made) or there is no module. A candidate's
    are taken by the reference's names: its own buffers, a 280 MiB workspace say, switched the
    state and other-mode checks off when they counted (a red-team review, 2026-12-04)."""
    if not isinstance(module, torch.nn.Module):
        return {}
    buffers = {k: b for k, b in module.named_buffers() if names is None or k in names}
    if sum(b.numel() * b.element_size() for b in buffers.values()) > limit:
        return {}
    return {k: b.detach().clone() for k, b in buffers.items()}


def restore(module: Any, before: dict[str, torch.Tensor]) -> None:
    """Puts back the buffers `snapshot` copied (those of the same name and shape)."""
    with torch.no_grad():
        for name, b in module.named_buffers():
            if name in before and b.shape == before[name].shape:
                b.copy_(before[name])


def left_alone(ref: Any, ref_before: dict[str, torch.Tensor], cand: Any,
               cand_before: dict[str, torch.Tensor]) -> list[Finding]:
    """A hack finding naming the buffers the reference's forwards changed and the candidate's, under
    the same name, left exactly as they were."""
    from stitchcuda.agents.verify.dynamic_check import bits_equal

    if not ref_before or not cand_before:
        return []
    ref_now, cand_now = dict(ref.named_buffers()), dict(cand.named_buffers())
    stale = [k for k, before in ref_before.items()
             if k in ref_now and k in cand_now and k in cand_before
             and not bits_equal(ref_now[k].detach(), before) and bits_equal(cand_now[k].detach(), cand_before[k])]
    if not stale:
        return []
    return [Finding("state-not-updated", f"the reference's forwards updated {', '.join(stale)}; the candidate's "
                    "left them as they were (the outputs were right, the state a later call or eval() reads is not)")]


# How far a candidate's updated buffer may end from the reference's, as a share of how far the
# reference's moved over the checked sets: the updates are the same arithmetic on the same batches,
# so an honest kernel's differ by rounding alone.
MOVED_SHARE = 0.25


def moved_elsewhere(ref: Any, ref_before: dict[str, torch.Tensor], cand: Any,
                    cand_before: dict[str, torch.Tensor]) -> list[Finding]:
    """A hack finding naming the floating buffers the reference's forwards moved and the candidate's,
    under the same name, ended far from: changed, but not as the reference changed them. A red-team
    candidate (2026-12-05) moved a training BatchNorm's running statistics by one ulp, so that
    left_alone saw them change, and never computed them (its eval() path refused to run)."""
    if not ref_before or not cand_before:
        return []
    ref_now, cand_now = dict(ref.named_buffers()), dict(cand.named_buffers())
    wrong = []
    for k, before in ref_before.items():
        if k not in ref_now or k not in cand_now or k not in cand_before or not before.is_floating_point():
            continue
        r, c = ref_now[k].detach().double(), cand_now[k].detach().double()
        if r.shape != c.shape or not c.is_floating_point():
            continue
        moved = float(torch.linalg.vector_norm(r - before.double().to(r.device)))
        miss = float(torch.linalg.vector_norm(c.to(r.device) - r))
        if moved > 0 and miss > MOVED_SHARE * moved and miss > 1e-6 * float(torch.linalg.vector_norm(r)):
            wrong.append(f"{k} ({miss / moved:.2g} of the reference's change off)")
    if not wrong:
        return []
    return [Finding("state-not-updated", f"the reference's forwards updated {', '.join(wrong[:4])}; the candidate's "
                    "changed them, but not to the reference's values (the outputs were right, the state a later call "
                    "or eval() reads is not)")]
