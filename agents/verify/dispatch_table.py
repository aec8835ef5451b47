"""PyTorch's operator table as it was before the candidate's code ran, and what the candidate changed.

A kernel registered for an operator the reference runs (aten::addmm's CPU kernel, say) makes the
reference compute what the candidate wants, the fp64 referee and the blind check's too. From Python
that takes torch.library (call_watch sees it), from C++ a torch::Library or the dispatcher's entries
(native_symbols sees those linked or looked up); red team round 5 (2026-12-05) registered one from C++
and was accepted. Whatever the route, the dispatcher's own account of an operator changes: a new
kernel heads its dispatch key's list and the one it displaced is listed as "(inactive)". The table
is read before the candidate's module is imported and after its calls; an operator that existed
before and whose kernels changed is a finding. Reading all ~3,600 operators takes about 50 ms.

Registrations PyTorch makes itself as it lazily imports (the Meta key's Python kernels, from
torch._meta_registrations) compute no real output and are left out, as is every operator the
candidate adds under a name of its own (a custom op is its own code, dispatched and recorded).
"""

from __future__ import annotations

import torch

# Keys whose kernels make no real output: shape propagation and tracing.
_SHAPE_ONLY = ("Meta", "FuncTorchBatched", "BatchedNestedTensor", "Tracer")


def _kernels(dump: str) -> frozenset[str]:
    """The dump's per-key kernel lines (`CPU: registered at FILE:LINE :: ...`, `CPU (inactive): ...`),
    the shape-only keys left out."""
    out = set()
    for line in dump.splitlines():
        key, sep, _ = line.partition(": registered at ")
        if sep and key.removesuffix(" (inactive)") not in _SHAPE_ONLY:
            out.add(line)
    return frozenset(out)


def snapshot() -> dict[str, frozenset[str]]:
    """Every operator's kernels by dispatch key, as the dispatcher lists them now."""
    dump = torch._C._dispatch_dump
    return {name: _kernels(dump(name)) for name in torch._C._dispatch_get_all_op_names()}


def changed(before: dict[str, frozenset[str]]) -> list[str]:
    """`op: kernel line` for each kernel registered since `before` on an operator that existed then
    (sorted; [] where none)."""
    now = snapshot()
    out = []
    for name, kernels in before.items():
        for line in sorted(now.get(name, frozenset()) - kernels):
            out.append(f"{name}: {line}")
    return out
