"""State a forward updates: a train-mode BatchNorm's running statistics and its batch count, a
buffer a module accumulates into. Only outputs are compared with the reference's, so a candidate
that computed the batch statistics and never wrote the running ones returned right outputs and
skipped that work (a red-team review, 2026-12-01: accepted, and wrong after `.eval()`). The
buffers the reference changed over the checked sets must have changed in the candidate too."""

from __future__ import annotations

from collections.abc import Callable
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



def read_back(ref: Any, ref_before: dict[str, torch.Tensor], cand: Any, args: list[Any],
              compare: Callable[[list[Any], list[Any]], Any], flatten: Callable[[Any], list[Any]],
              draws: Callable[[], None]) -> list[Finding]:
    """A hack finding where the floating buffers the reference's forwards moved, as the candidate's
    forwards left them, make the reference's own forward in the other mode (eval() after training:
    where a BatchNorm reads its running statistics) miss its output with its own buffers, as judged
    by `compare` (the checks' tolerance). A red-team candidate (2026-12-05) moved a training
    BatchNorm's running statistics by one ulp, so that left_alone saw them change, never computed
    them, and refused eval mode, where its own forward would have read them. Judged by their effect,
    not their values: a running mean whose target is near zero differs between two honest TF32
    computations by more than it moves (level 3's ShuffleNet unit on the H200), and does not matter."""
    if not ref_before or not isinstance(ref, torch.nn.Module) or not isinstance(cand, torch.nn.Module):
        return []
    ref_now, cand_now = dict(ref.named_buffers()), dict(cand.named_buffers())
    moved = [k for k, before in ref_before.items()
             if k in ref_now and k in cand_now and before.is_floating_point() and cand_now[k].is_floating_point()
             and ref_now[k].shape == cand_now[k].shape and not torch.equal(ref_now[k].detach(), before.to(ref_now[k].device))
             and not torch.equal(ref_now[k].detach(), cand_now[k].detach().to(ref_now[k].dtype))]
    if not moved:
        return []
    saved = {k: ref_now[k].detach().clone() for k in moved}
    mode = ref.training
    try:
        return _read_back(ref, ref_now, cand_now, moved, saved, mode, args, compare, flatten, draws)
    except Exception:  # noqa: BLE001 - a reference that cannot run in the other mode: nothing to judge here
        return []


def _read_back(ref: Any, ref_now: dict[str, torch.Tensor], cand_now: dict[str, torch.Tensor], moved: list[str],
               saved: dict[str, torch.Tensor], mode: bool, args: list[Any],
               compare: Callable[[list[Any], list[Any]], Any], flatten: Callable[[Any], list[Any]],
               draws: Callable[[], None]) -> list[Finding]:
    try:
        ref.train(not mode)
        with torch.no_grad():
            draws()
            own = flatten(ref(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args]))
            for k in moved:
                ref_now[k].copy_(cand_now[k].detach().to(ref_now[k].device, ref_now[k].dtype))
            draws()
            theirs = flatten(ref(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args]))
    finally:
        with torch.no_grad():
            for k, b in saved.items():
                ref_now[k].copy_(b)
        ref.train(mode)
    m = compare(own, theirs)
    if m.ok:
        return []
    return [Finding("state-not-updated", f"the reference's forwards updated {', '.join(moved[:4])}; the candidate's "
                    f"changed them, but read by the reference's own {'training' if not mode else 'eval'}-mode forward "
                    f"the candidate's values give other outputs than the reference's: {m.message}")]
