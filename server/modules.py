"""Which classes of a Python file are nn.Module subclasses, and whether it has the task functions.

Parsed with tree-sitter-python, which keeps going past syntax errors: a half-typed line elsewhere in
the file does not hide the modules above or below it. A class counts as a module when a base is
`nn.Module`, `torch.nn.Module`, `Module`, or another module class of the same file. Ranges are
0-based lines and UTF-16 columns, as LSP counts them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from stitchcuda.profiling.source_map import Range, node_range

MODULE_BASES = {"nn.Module", "torch.nn.Module", "Module"}
TASK_FUNCTIONS = ("get_inputs", "get_init_inputs")


@dataclass
class ModuleClass:
    name: str
    name_range: Range
    range: Range  # the whole class definition
    init_params: list[str] = field(default_factory=list)  # __init__'s, without self
    forward_params: list[str] = field(default_factory=list)


@dataclass
class PythonFile:
    modules: list[ModuleClass]
    functions: set[str]  # top-level function names
    end_line: int  # last line of the file (0-based)

    @property
    def missing_task_functions(self) -> list[str]:
        return [f for f in TASK_FUNCTIONS if f not in self.functions]

    def module_at(self, line: int) -> ModuleClass | None:
        inside = [m for m in self.modules if m.range.start_line <= line <= m.range.end_line]
        return min(inside, key=lambda m: m.range.end_line - m.range.start_line, default=None)

    def module(self, name: str) -> ModuleClass | None:
        return next((m for m in self.modules if m.name == name), None)


@cache
def _parser() -> Any:
    import tree_sitter
    import tree_sitter_python

    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_python.language()))


@cache
def _classes() -> Any:
    # A query runs in C: walking every node from Python costs ~10x more on a 5,000-line file.
    import tree_sitter
    import tree_sitter_python

    return tree_sitter.QueryCursor(tree_sitter.Query(tree_sitter.Language(tree_sitter_python.language()),
                                                     "(class_definition) @c"))


def _params(cls_node: Any, method: str) -> list[str]:
    body = cls_node.child_by_field_name("body")
    for stmt in body.children if body is not None else []:
        fn = stmt.child_by_field_name("definition") if stmt.type == "decorated_definition" else stmt
        if fn is None or fn.type != "function_definition":
            continue
        name = fn.child_by_field_name("name")
        if name is None or name.text.decode() != method:
            continue
        out = []
        for p in fn.child_by_field_name("parameters").named_children:
            ident = p if p.type == "identifier" else next((c for c in p.named_children if c.type == "identifier"), None)
            if ident is not None and p.type not in {"list_splat_pattern", "dictionary_splat_pattern"}:
                out.append(ident.text.decode())
        return [p for p in out if p != "self"]
    return []


def scan(text: str) -> PythonFile:
    src = text.encode("utf-8")
    tree = _parser().parse(src)
    lines = src.split(b"\n")
    classes: dict[str, tuple[Any, list[str]]] = {}
    functions: set[str] = set()
    for node in tree.root_node.children:
        fn = node.child_by_field_name("definition") if node.type == "decorated_definition" else node
        if fn is not None and fn.type == "function_definition" and (n := fn.child_by_field_name("name")):
            functions.add(n.text.decode())
    for node in sorted(_classes().captures(tree.root_node).get("c", []), key=lambda n: n.start_byte):
        name = node.child_by_field_name("name")
        if name is None:
            continue
        supers = node.child_by_field_name("superclasses")
        bases = [b.text.decode() for b in supers.named_children] if supers is not None else []
        classes[name.text.decode()] = (node, bases)
    # Modules of modules: follow bases within the file until nothing changes.
    is_module = {n for n, (_, bases) in classes.items() if MODULE_BASES & set(bases)}
    changed = True
    while changed:
        changed = False
        for n, (_, bases) in classes.items():
            if n not in is_module and is_module & set(bases):
                is_module.add(n)
                changed = True
    modules = []
    for n, (node, _) in classes.items():
        if n in is_module:
            modules.append(ModuleClass(n, node_range(lines, node.child_by_field_name("name")), node_range(lines, node),
                                       _params(node, "__init__"), _params(node, "forward")))
    modules += _recovered(text, {m.name for m in modules}, {n for n, (node, _) in classes.items() if not node.has_error})
    modules.sort(key=lambda m: (m.range.start_line, m.range.start_col))
    return PythonFile(modules, functions, max(0, len(lines) - 1))


_CLASS_LINE = re.compile(r"^([ \t]*)class[ \t]+(\w+)[ \t]*\(([^)]*)\)[ \t]*:")


def _recovered(text: str, found: set[str], clean: set[str]) -> list[ModuleClass]:
    """Module classes that an unclosed bracket above hid from tree-sitter (it reads the rest of the
    file as part of the broken expression): found by their `class` line, ended by indentation."""
    lines = text.split("\n")
    out = []
    for i, line in enumerate(lines):
        m = _CLASS_LINE.match(line)
        if not m or m.group(2) in found or m.group(2) in clean:
            continue
        bases = {b.strip() for b in m.group(3).split(",")}
        if not (MODULE_BASES & bases or bases & found):
            continue
        indent, end = len(m.group(1)), i
        for j in range(i + 1, len(lines)):
            body = lines[j]
            if body.strip() and len(body) - len(body.lstrip()) <= indent:
                break
            if body.strip():
                end = j
        col = len(line[: m.start(2)].encode("utf-16-le")) // 2
        width = len(m.group(2).encode("utf-16-le")) // 2
        end_col = len(lines[end].encode("utf-16-le")) // 2
        out.append(ModuleClass(m.group(2), Range(i, col, i, col + width), Range(i, len(m.group(1)), end, end_col)))
        found.add(m.group(2))
    return out


def scaffold(module: ModuleClass) -> str:
    """get_init_inputs/get_inputs to append to a file that lacks them, for the user to fill in."""
    init = ", ".join(f"{p}" for p in module.init_params)
    fwd = module.forward_params or ["x"]
    lines = [
        "",
        "",
        f"# Added by StitchCUDA: the inputs it builds and runs {module.name} with. Replace the",
        "# placeholder values and shapes with real ones; the optimised kernels are specialised to them.",
    ]
    if module.init_params:
        lines += [f"{p} = None  # TODO: {module.name}'s `{p}`" for p in module.init_params]
    lines += ["", "", "def get_init_inputs():", f"    return [{init}]", "", "", "def get_inputs():"]
    lines += [f"    {p} = torch.randn(16, 64)  # TODO: a real shape for `{p}`" for p in fwd]
    lines += [f"    return [{', '.join(fwd)}]", ""]
    return "\n".join(lines)
