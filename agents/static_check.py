"""Static (AST) anti-hacking check of a candidate module.

KernelBench's checker greps the source; a regex misses aliases (`import torch.nn.functional as
G`), calls of layers kept in __init__, `@`, introspection that reaches the reference module, and
fallbacks hidden in helpers. We parse the module, resolve import aliases, and walk every function
reachable from ModelNew.forward.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from stitchcuda.types import Finding

from .torch_ops import ALLOWED_TORCH_CALLS, COMPUTE_TENSOR_METHODS

_FORBIDDEN_MODULES = {
    "gc": "introspection of live objects can reach the reference module",
    "inspect": "introspection of frames can reach the reference module",
    "threading": "work on another thread escapes the timing",
    "concurrent": "work on another thread escapes the timing",
    "multiprocessing": "work in another process escapes the timing",
    "pickle": "loading stored outputs",
    "numpy": "host computation instead of a kernel",
}
_COMPILERS = {"compile", "jit", "_dynamo", "_inductor", "export", "fx"}


@dataclass
class _Module:
    aliases: dict[str, str] = field(default_factory=dict)  # local name -> dotted origin
    functions: dict[str, ast.FunctionDef] = field(default_factory=dict)
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)


def _dotted(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """`F.relu` -> `torch.nn.functional.relu` using the module's import aliases."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(aliases.get(node.id, node.id))
    return ".".join(reversed(parts))


def _collect(tree: ast.Module) -> _Module:
    mod = _Module()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                mod.aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                mod.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            mod.functions[node.name] = node
        elif isinstance(node, ast.ClassDef):
            mod.classes[node.name] = node
    return mod


def _layer_attributes(cls: ast.ClassDef, aliases: dict[str, str]) -> dict[str, str]:
    """self.<attr> = nn.<Layer>(...) assignments: calling these in forward runs PyTorch compute."""
    found: dict[str, str] = {}
    for node in ast.walk(cls):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            origin = _dotted(node.value.func, aliases) or ""
            if origin.startswith("torch.nn.") and not origin.startswith(
                ("torch.nn.Parameter", "torch.nn.init")
            ):
                layer = origin.rsplit(".", 1)[-1]
                if layer not in {"Parameter", "ParameterList", "ParameterDict", "Buffer", "Module"}:
                    for t in node.targets:
                        if (
                            isinstance(t, ast.Attribute)
                            and isinstance(t.value, ast.Name)
                            and t.value.id == "self"
                        ):
                            found[t.attr] = layer
    return found


def _reachable(mod: _Module, cls: ast.ClassDef) -> list[tuple[str, ast.AST]]:
    """forward, and every method or module function it calls (transitively), except __init__."""
    methods = {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)}
    todo = [("forward", methods["forward"])] if "forward" in methods else []
    seen: dict[str, ast.AST] = {}
    while todo:
        name, fn = todo.pop()
        if name in seen:
            continue
        seen[name] = fn
        for node in ast.walk(fn):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self":
                if f.attr in methods and f.attr != "__init__":
                    todo.append((f"{cls.name}.{f.attr}", methods[f.attr]))
            elif isinstance(f, ast.Name) and f.id in mod.functions:
                todo.append((f.id, mod.functions[f.id]))
            elif isinstance(f, ast.Name) and f.id in mod.classes and f.id != cls.name:
                # A helper class called from forward: its methods run in forward too.
                for m in mod.classes[f.id].body:
                    if isinstance(m, ast.FunctionDef):
                        todo.append((f"{f.id}.{m.name}", m))
    return list(seen.items())


def check_source(
    source: str,
    *,
    filename: str = "model_new.py",
    reference_classes: tuple[str, ...] = ("Model",),
    reference_module: str | None = None,
    class_name: str = "ModelNew",
) -> list[Finding]:
    """Hack findings for a candidate module's source. An empty list means no static hack found."""
    findings: list[Finding] = []

    def add(code: str, msg: str, node: ast.AST | None) -> None:
        line = getattr(node, "lineno", None)
        if not any(f.code == code and f.line == line for f in findings):
            findings.append(Finding(code=code, message=msg, line=line, file=filename))

    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as e:
        return [Finding("syntax-error", f"candidate does not parse: {e.msg}", line=e.lineno, file=filename)]
    mod = _collect(tree)
    cls = mod.classes.get(class_name)
    if cls is None:
        return [Finding("no-modelnew", f"candidate defines no class {class_name}", file=filename)]

    for base in cls.bases:
        text = ast.unparse(base)
        if text.split(".")[-1] in reference_classes:
            add("subclasses-reference", f"{class_name} subclasses the reference {text}", cls)

    # Anywhere in the module: imports and names that reach the reference or escape the checks.
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] + (
                [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
            )
            for n in names:
                top = n.split(".")[0]
                if reference_module and top == reference_module:
                    add("imports-reference", f"imports the reference module {n}", node)
                if top in _FORBIDDEN_MODULES:
                    add(f"forbidden-import-{top}", f"imports {n}: {_FORBIDDEN_MODULES[top]}", node)
        elif isinstance(node, ast.Name) and node.id in reference_classes and node.id != class_name:
            add("references-reference", f"uses the reference class {node.id}", node)
        elif isinstance(node, ast.Call):
            origin = _dotted(node.func, mod.aliases) or ""
            if origin in {
                "__import__",
                "importlib.import_module",
                "exec",
                "eval",
                "compile",
                "globals",
                "vars",
            }:
                add("dynamic-code", f"calls {origin}(): dynamic code can hide a fallback", node)
            if origin.startswith(("sys.modules", "sys._getframe")):
                add("introspection", f"uses {origin}: reaches other modules' objects", node)
            parts = origin.split(".")
            if parts[0] == "torch" and len(parts) > 1 and parts[1] in _COMPILERS:
                add(
                    "torch-compiler", f"calls {origin}: the work must be in the candidate's own kernels", node
                )
            if origin.startswith(
                ("torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.ExternalStream", "torch.Stream")
            ):
                add(
                    "side-stream",
                    f"creates or switches CUDA streams ({origin}): work off the current stream escapes the timing",
                    node,
                )
        elif isinstance(node, ast.Attribute) and node.attr in {
            "_getframe",
            "f_back",
            "f_globals",
            "__subclasses__",
        }:
            add("introspection", f"uses .{node.attr}: reaches other modules' objects", node)

    layers = _layer_attributes(cls, mod.aliases)
    for fname, fn in _reachable(mod, cls):
        for node in ast.walk(fn):
            if isinstance(node, ast.Try):
                add(
                    "try-except-fallback",
                    f"try/except in {fname}: a fallback path can hide PyTorch compute",
                    node,
                )
            elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                add("torch-compute-in-forward", f"`@` in {fname}: matrix product done by PyTorch", node)
            elif isinstance(node, ast.Call):
                _check_call(node, fname, mod, layers, add)
    return findings


def _check_call(node: ast.Call, fname: str, mod: _Module, layers: dict[str, str], add) -> None:
    f = node.func
    origin = _dotted(f, mod.aliases) or ""
    parts = origin.split(".")
    if origin.startswith("torch.nn.functional."):
        add("torch-compute-in-forward", f"{fname} calls {origin}", node)
    elif origin.startswith("torch.ops.aten.") or origin.startswith("torch._C."):
        add("torch-compute-in-forward", f"{fname} calls {origin}", node)
    elif origin.startswith("torch.nn.") and parts[-1][:1].isupper():
        add("torch-layer-in-forward", f"{fname} builds and runs {origin}", node)
    elif parts[0] == "torch" and len(parts) == 2 and parts[1] not in ALLOWED_TORCH_CALLS:
        add("torch-compute-in-forward", f"{fname} calls {origin}", node)
    elif parts[0] == "torch" and len(parts) == 3 and parts[1] in {"linalg", "fft", "special", "sparse"}:
        add("torch-compute-in-forward", f"{fname} calls {origin}", node)
    elif (
        isinstance(f, ast.Attribute)
        and isinstance(f.value, ast.Name)
        and f.value.id == "self"
        and f.attr in layers
    ):
        add(
            "torch-layer-in-forward", f"{fname} runs the PyTorch layer self.{f.attr} ({layers[f.attr]})", node
        )
    elif (
        isinstance(f, ast.Attribute) and f.attr in COMPUTE_TENSOR_METHODS and parts[0] not in {"self", "math"}
    ):
        add("torch-compute-in-forward", f"{fname} calls .{f.attr}() on a tensor", node)
    elif isinstance(f, ast.Attribute) and f.attr in {"forward", "__call__"}:
        add("torch-layer-in-forward", f"{fname} calls {ast.unparse(f)}: another module's forward", node)
