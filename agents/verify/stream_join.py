"""Side streams a module joins back before it goes on: PyTorch's own recipe for capturing a CUDA graph
warms up on a side stream (`s.wait_stream(current)`, `with torch.cuda.stream(s): ...`,
`current.wait_stream(s)`). Work on such a stream ends before anything after the block runs on the
caller's stream, so none of it escapes the timing; the worker's trace check judges what ran where
(kernels still running after forward returned are `side-stream` there). static_check flags every
other use of a stream API."""

from __future__ import annotations

import ast
from collections.abc import Callable

Dotted = Callable[[ast.AST], "str | None"]


def joined_stream_nodes(tree: ast.Module, dotted: Dotted) -> set[int]:
    """The ids of the stream-API attribute nodes (`torch.cuda.stream`, `torch.cuda.Stream`) of each
    stream that is only entered in blocks the caller's stream then waits for."""
    joined_withs: dict[str, list[ast.AST]] = {}  # the stream's text -> its with-items' torch.cuda.stream nodes
    entered: dict[str, int] = {}
    for body in _bodies(tree):
        for i, st in enumerate(body):
            if not isinstance(st, ast.With):
                continue
            for item in st.items:
                stream = _stream_entered(item.context_expr, dotted)
                if stream is None:
                    continue
                entered[stream] = entered.get(stream, 0) + 1
                if _joined_after(body[i + 1:], stream, dotted):
                    joined_withs.setdefault(stream, []).append(item.context_expr.func)
    out: set[int] = set()
    for stream, funcs in joined_withs.items():
        if len(funcs) != entered[stream] or not _only_joined_uses(tree, stream, dotted):
            continue
        out |= {id(f) for f in funcs}
        for node in ast.walk(tree):  # its making: s = torch.cuda.Stream()
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and ast.unparse(node.targets[0]) == stream \
                    and isinstance(node.value, ast.Call) and dotted(node.value.func) == "torch.cuda.Stream":
                out.add(id(node.value.func))
    return out


def _joined_after(rest: list[ast.stmt], stream: str, dotted: Dotted) -> bool:
    """Whether the caller's stream waits for `stream` before anything after the block can return."""
    for st in rest:
        if _waits_for(st, stream, dotted):
            return True
        if any(isinstance(n, ast.Return | ast.Yield | ast.YieldFrom) for n in ast.walk(st)):
            return False
    return False


def _bodies(tree: ast.AST):
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                yield body


def _stream_entered(expr: ast.AST, dotted: Dotted) -> str | None:
    """`s` of `torch.cuda.stream(s)`, where s is a name or self's attribute."""
    if isinstance(expr, ast.Call) and dotted(expr.func) == "torch.cuda.stream" and len(expr.args) == 1 \
            and not expr.keywords and _plain(expr.args[0]):
        return ast.unparse(expr.args[0])
    return None


def _plain(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) or (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                                          and node.value.id == "self")


def _current(node: ast.AST, dotted: Dotted) -> bool:
    return isinstance(node, ast.Call) and dotted(node.func) == "torch.cuda.current_stream"


def _waits_for(st: ast.stmt, stream: str, dotted: Dotted) -> bool:
    """`torch.cuda.current_stream().wait_stream(s)` as a statement of its own."""
    if not (isinstance(st, ast.Expr) and isinstance(st.value, ast.Call)):
        return False
    c = st.value
    return isinstance(c.func, ast.Attribute) and c.func.attr == "wait_stream" and _current(c.func.value, dotted) \
        and len(c.args) == 1 and ast.unparse(c.args[0]) == stream


def _only_joined_uses(tree: ast.AST, stream: str, dotted: Dotted) -> bool:
    """Whether every read of the stream is one of: entering it, its wait for the caller's stream,
    the caller's wait for it. Handed anywhere else (a kernel's stream argument, a list), it may carry
    work the blocks' joins do not cover."""
    parents = {id(c): n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Name | ast.Attribute) or not isinstance(node.ctx, ast.Load) or \
                ast.unparse(node) != stream:
            continue
        up = parents.get(id(node))
        if isinstance(up, ast.Attribute) and up.attr == "wait_stream" and up.value is node:
            call = parents.get(id(up))
            if isinstance(call, ast.Call) and len(call.args) == 1 and _current(call.args[0], dotted):
                continue  # s.wait_stream(torch.cuda.current_stream())
        if isinstance(up, ast.Call) and up.args == [node] and (
                dotted(up.func) == "torch.cuda.stream" or (isinstance(up.func, ast.Attribute) and
                                                          up.func.attr == "wait_stream" and
                                                          _current(up.func.value, dotted))):
            continue
        if isinstance(up, ast.Attribute) and up.value is node and isinstance(parents.get(id(up)), ast.Attribute):
            return False
        if isinstance(up, ast.Compare):
            continue  # `if self.s is None`
        return False
    return True
