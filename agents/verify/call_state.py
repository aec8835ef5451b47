"""Python state a forward keeps from call to call and counts with: a time bomb's fuse.

A module that counts its calls (`self.calls += 1`, a global bumped, a list grown, itertools.count)
can do the work for as many calls as any check makes and stop after: the Verifier runs a forward a
few hundred times, the user's program millions. Behaviour that changes with the number of calls
cannot be verified by running it, so keeping such a count in forward is a finding (`call-count`),
whatever the count is then used for (a tensor attribute bumped with `+=` in forward is PyTorch
compute there, a finding either way). Tensors its kernels update in place (BatchNorm's running
statistics and num_batches_tracked) are no Python state and pass; so do caches assigned whole
(`self._buf = torch.empty(...)`), which hold no count."""

from __future__ import annotations

import ast

_GROW = frozenset({"append", "extend", "insert", "add", "appendleft", "update", "setdefault"})
_COUNTERS = ("itertools.count", "collections.Counter")


def counters(fn: ast.AST, module_names: set[str], dotted) -> list[tuple[str, ast.AST]]:
    """(what it keeps, node) for each count a forward-reachable function keeps across calls.
    `module_names`: names bound at the module's top level (state that outlives a call)."""
    shared = set(module_names)
    for node in ast.walk(fn):
        if isinstance(node, ast.Global | ast.Nonlocal):
            shared |= set(node.names)
    local = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)} - {
        name for node in ast.walk(fn) if isinstance(node, ast.Global | ast.Nonlocal) for name in node.names}

    def persistent(target: ast.AST) -> str | None:
        """The state a target names where it outlives the call: self.x, cls.x, a module's name, an
        item or attribute of one."""
        node = target
        while isinstance(node, ast.Attribute | ast.Subscript):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                    node.value.id in ("self", "cls"):
                return ast.unparse(target)
            node = node.value
        if isinstance(node, ast.Name) and node.id in shared and (node.id not in local or target is not node):
            return ast.unparse(target)
        return None

    found: list[tuple[str, ast.AST]] = []
    for node in ast.walk(fn):
        if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add | ast.Sub) and \
                (where := persistent(node.target)):
            found.append((f"{where} {ast.unparse(node.op)}= ...: a count kept from call to call", node))
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.BinOp) and \
                isinstance(node.value.op, ast.Add | ast.Sub):
            for t in node.targets:
                text = ast.unparse(t)
                if (where := persistent(t)) and text in (ast.unparse(node.value.left), ast.unparse(node.value.right)):
                    found.append((f"{where} = {ast.unparse(node.value)[:40]}: a count kept from call to call", node))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _GROW and \
                (where := persistent(node.func.value)):
            found.append((f"{where}.{node.func.attr}(...): state grown from call to call (its length a count)", node))
        elif isinstance(node, ast.Call) and (dotted(node.func) or "") in ("next",) and node.args and \
                persistent(node.args[0]):
            found.append((f"next({ast.unparse(node.args[0])}): an iterator advanced from call to call", node))
        elif isinstance(node, ast.Call) and (dotted(node.func) or "").endswith(_COUNTERS):
            found.append((f"{dotted(node.func)}(): a counter", node))
    return found

