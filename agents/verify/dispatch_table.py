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
candidate adds under a name of its own (a custom op is its own code, dispatched and recorded), and
every namespace but ATen's, prims' and those of the reference's operators (ALWAYS).
"""

from __future__ import annotations

from typing import Any

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


# ATen's and prims' operators always; others only where the reference ran one of theirs. PyTorch's
# own lazy imports register kernels in other namespaces (torch.distributed's _c10d_functional ops
# gain Autograd kernels as it loads), and an operator the reference never runs cannot change what it
# computes.
ALWAYS = frozenset({"aten", "prims"})


def namespaces(ops: Any) -> frozenset[str]:
    """The namespaces of op names as the op recorder keeps them (ATen's bare, `addmm`; others `ns::op`)."""
    return ALWAYS | {str(op).split("::", 1)[0] for op in ops if "::" in str(op)}


def changed(before: dict[str, frozenset[str]], within: frozenset[str] = ALWAYS) -> list[str]:
    """`op: kernel line` for each kernel registered since `before` on an operator that existed then,
    in the namespaces `within` (sorted; [] where none)."""
    now = snapshot()
    out = []
    for name, kernels in before.items():
        if name.split("::", 1)[0] not in within:
            continue
        for line in sorted(now.get(name, frozenset()) - kernels):
            out.append(f"{name}: {line}")
    return out
