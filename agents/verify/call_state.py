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

# (Not update or setdefault: a cache keyed by shape grows by them, bounded by the shapes it meets.)
_GROW = frozenset({"append", "extend", "insert", "add", "appendleft"})
_COUNTERS = ("itertools.count", "collections.Counter")


# A count that stays small is a warm-up, not a fuse: `self.calls += 1; if self.calls == 3: capture`
# (a module arming a CUDA graph after a few calls, as the generated fast path does) or a ping-pong
# index `self.i = (self.i + 1) % 2`. Every check makes far more calls than this.
SMALL = 16


def counters(fn: ast.AST, module_names: set[str], dotted, tree: ast.AST | None = None) -> list[tuple[str, ast.AST]]:
    """(what it keeps, node) for each count a forward-reachable function keeps across calls.
    `module_names`: names bound at the module's top level (state that outlives a call); `tree`: the
    whole module, where every read of a count is looked for (a count read only against constants
    up to SMALL, or kept modulo one, passes)."""
    shared = set(module_names)
    if tree is not None:  # the module's classes and functions: ModelNew.calls outlives a call
        shared |= {n.name for n in getattr(tree, "body", []) if isinstance(n, ast.ClassDef | ast.FunctionDef)}
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
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Call) and \
                    getattr(node.value.func, "id", None) == "type":
                return ast.unparse(target)  # type(self).calls: the class's, shared by every call
            node = node.value
        if isinstance(node, ast.Name) and node.id in shared and (node.id not in local or target is not node):
            return ast.unparse(target)
        return None

    found: list[tuple[str, ast.AST]] = []
    whole = tree if tree is not None else fn
    # A buffer the module registers (BatchNorm's num_batches_tracked) is the reference's state, loaded
    # from its state_dict and compared with it after each call (state_updates): no count of its own.
    # A non-persistent one is in no state_dict, so nothing compares it: a count like any other.
    buffers = {f"self.{c.args[0].value}" for c in ast.walk(whole) if isinstance(c, ast.Call)
               and isinstance(c.func, ast.Attribute) and c.func.attr == "register_buffer" and c.args
               and isinstance(c.args[0], ast.Constant) and not _non_persistent(c)}
    # What holds a container (a list, dict, set or deque made where it is bound): `.add` and `.update`
    # of anything else (an extension's own `add`, a tensor's) grow nothing.
    containers = {ast.unparse(t) for n in ast.walk(whole) if isinstance(n, ast.Assign | ast.AnnAssign)
                  and n.value is not None and _container(n.value, dotted)
                  for t in (n.targets if isinstance(n, ast.Assign) else [n.target])}
    for node in ast.walk(fn):
        if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add | ast.Sub) and \
                (where := persistent(node.target)) and where not in buffers:
            # (a small count steps by an int: `+= 0.01` read against 10 is a thousand calls)
            if not (_small(node.value) and _stays_small(where, whole)):
                found.append((f"{where} {'+' if isinstance(node.op, ast.Add) else '-'}= ...: a count kept from call to call",
                              node))
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                text = ast.unparse(t)
                reads = {text}
                if isinstance(t, ast.Subscript):  # d[k] = d.get(k, 0) + 1
                    reads.add(f"{ast.unparse(t.value)}.get({ast.unparse(t.slice)}")
                grows = any(isinstance(b, ast.BinOp) and isinstance(b.op, ast.Add | ast.Sub) and
                            any(ast.unparse(side).startswith(r) for side in (b.left, b.right) for r in reads)
                            for b in ast.walk(node.value))
                if grows and (where := persistent(t)) and not _stays_small(where, whole):
                    found.append((f"{where} = {ast.unparse(node.value)[:40]}: a count kept from call to call", node))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _GROW and \
                (where := persistent(node.func.value)) and where in containers:
            found.append((f"{where}.{node.func.attr}(...): state grown from call to call (its length a count)", node))
        elif isinstance(node, ast.Call) and (dotted(node.func) or "") in ("next",) and node.args and \
                persistent(node.args[0]):
            found.append((f"next({ast.unparse(node.args[0])}): an iterator advanced from call to call", node))
        elif isinstance(node, ast.Call) and (dotted(node.func) or "").endswith(_COUNTERS):
            found.append((f"{dotted(node.func)}(): a counter", node))
    return found


def _non_persistent(call: ast.Call) -> bool:
    """register_buffer(name, t, persistent=<anything but a written True>)."""
    flag = next((k.value for k in call.keywords if k.arg == "persistent"), None)
    if flag is None and len(call.args) >= 3:
        flag = call.args[2]
    return flag is not None and not (isinstance(flag, ast.Constant) and flag.value is True)


def _small(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool) \
        and abs(node.value) <= SMALL


def _named_smalls(tree: ast.AST) -> set[str]:
    """Names of small constants: `WARMUP = 3` at the module's top or in a class's body (read as
    WARMUP, self.WARMUP or C.WARMUP), bound once and never again anywhere."""
    stores: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            stores[node.id] = stores.get(node.id, 0) + 1
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store | ast.Del):
            stores[node.attr] = stores.get(node.attr, 0) + 1
        elif isinstance(node, ast.Global | ast.Nonlocal):
            for name in node.names:
                stores[name] = stores.get(name, 0) + 2
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("setattr", "delattr"):
            if not (len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)):
                return set()  # any name may be rebound
            stores[str(node.args[1].value)] = stores.get(str(node.args[1].value), 0) + 2
    out: set[str] = set()
    bodies = [getattr(tree, "body", [])] + [c.body for c in getattr(tree, "body", []) if isinstance(c, ast.ClassDef)]
    for body in bodies:
        for st in body:
            if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name) and \
                    _small(st.value) and stores.get(st.targets[0].id) == 1:
                out.add(st.targets[0].id)
    return out


def _small_or_named(node: ast.AST, named: set[str]) -> bool:
    if _small(node):
        return True
    if isinstance(node, ast.Name):
        return node.id in named
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.attr in named


def _stays_small(where: str, tree: ast.AST) -> bool:
    """Whether the count `where` (its source text) is kept modulo a small constant, or read nowhere
    but in its own updates and in comparisons with small constants (written out or named once:
    `if self.calls < WARMUP`)."""
    parents = {id(c): n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
    named = _named_smalls(tree)
    for node in ast.walk(tree):
        # `x = (x + 1) % 2`, `x %= 2`, `x = 1 - x`, `x = min(x + 1, 3)`: bounded whatever reads it
        if isinstance(node, ast.Assign) and any(ast.unparse(t) == where for t in node.targets) and (
                (isinstance(node.value, ast.BinOp) and isinstance(node.value.op, ast.Sub) and _small(node.value.left)
                 and ast.unparse(node.value.right) == where) or
                (isinstance(node.value, ast.Call) and getattr(node.value.func, "id", None) == "min" and
                 any(_small(a) for a in node.value.args))):
            return True
        if isinstance(node, ast.Assign) and any(ast.unparse(t) == where for t in node.targets) and \
                isinstance(node.value, ast.BinOp) and isinstance(node.value.op, ast.Mod) and _small(node.value.right):
            return True
        if isinstance(node, ast.AugAssign) and ast.unparse(node.target) == where and isinstance(node.op, ast.Mod) \
                and _small(node.value):
            return True
    for node in ast.walk(tree):
        # A count read by a computed name (getattr(self, n), vars(self), self.__dict__) is read unseen.
        if (isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("getattr", "vars") and not (
                len(node.args) >= 2 and isinstance(node.args[1], ast.Constant))) or \
                (isinstance(node, ast.Attribute) and node.attr == "__dict__"):
            return False
    tested = False
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute | ast.Name | ast.Subscript) or ast.unparse(node) != where:
            continue
        if isinstance(getattr(node, "ctx", None), ast.Store | ast.Del):
            continue
        up = parents.get(id(node))
        if isinstance(up, ast.AugAssign) and up.target is node:
            continue
        if isinstance(up, ast.BinOp) and isinstance(up.op, ast.Add | ast.Sub) and _small(up.right if up.left is node
                                                                                           else up.left):
            grand = parents.get(id(up))
            if isinstance(grand, ast.Assign) and any(ast.unparse(t) == where for t in grand.targets):
                continue  # its own update: x = x + 1
        if isinstance(up, ast.Compare) and len(up.comparators) == 1 and \
                _small_or_named(up.comparators[0] if up.left is node else up.left, named):
            tested = True
            continue
        if isinstance(up, ast.Attribute | ast.Subscript) and up.value is node:
            continue  # (a longer chain: judged by its own text)
        return False
    # Never read as it is kept: read some way this reading does not follow (a count is kept to be read).
    return tested


def _container(value: ast.AST, dotted) -> bool:
    if isinstance(value, ast.List | ast.Dict | ast.Set | ast.ListComp | ast.DictComp | ast.SetComp):
        return True
    return isinstance(value, ast.Call) and (dotted(value.func) or "").split(".")[-1] in (
        "list", "dict", "set", "deque", "defaultdict", "OrderedDict", "Counter")

