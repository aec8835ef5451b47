"""The package's shape, checked on its sources: no import cycles between modules, and no module that
reaches into another package's private names (a leading underscore is that package's own business)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Folder -> the dotted package it installs as (pyproject's package-dir).
PACKAGE_DIRS = {"stitchcuda": "stitchcuda", "agents": "stitchcuda.agents", "profiling": "stitchcuda.profiling",
                "server": "stitchcuda.server"}


def modules() -> dict[str, Path]:
    out = {}
    for folder, dotted in PACKAGE_DIRS.items():
        for path in (ROOT / folder).rglob("*.py"):
            rel = path.relative_to(ROOT / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            out[".".join([dotted, *parts])] = path
    return out


MODULES = modules()


def package_of(module: str) -> str:
    path = MODULES[module]
    return module if path.name == "__init__.py" else module.rsplit(".", 1)[0]


def resolve(importer: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = package_of(importer).split(".")
    base = base[: len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def imports(module: str) -> list[tuple[str, str | None, ast.AST]]:
    """(imported module, imported name or None, node) for every import in the module, nested ones too."""
    tree = ast.parse(MODULES[module].read_text())
    out: list[tuple[str, str | None, ast.AST]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, None, node) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            src = resolve(module, node)
            for a in node.names:
                full = f"{src}.{a.name}"
                out.append((full, None, node) if full in MODULES else (src, a.name, node))
    return [(m, n, node) for m, n, node in out if m.startswith("stitchcuda")]


def private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_the_layout_is_found():
    # The test must see the subpackages it checks, or every check below passes on nothing.
    for name in ("stitchcuda.agents.plan.planner", "stitchcuda.agents.coder.builtin",
                 "stitchcuda.agents.verify.worker", "stitchcuda.agents.llm.coder", "stitchcuda.agents.loop",
                 "stitchcuda.server.server", "stitchcuda.profiling.ncu", "stitchcuda.cli"):
        assert name in MODULES


def test_no_module_imports_a_private_name_of_another_package():
    bad = []
    for mod in MODULES:
        own = package_of(mod)
        tree = ast.parse(MODULES[mod].read_text())
        other_modules: set[str] = set()  # local names bound to modules of other packages
        for target, name, node in imports(mod):
            if target not in MODULES:
                continue
            if name is not None and private(name) and package_of(target) != own:
                bad.append(f"{mod}:{node.lineno} imports {target}.{name}")
            if name is None and package_of(target) != own:
                for a in node.names:
                    if f"{getattr(node, 'module', None) or ''}.{a.name}".endswith(target.rsplit('.', 1)[-1]) or a.name == target:
                        other_modules.add(a.asname or a.name.split(".")[-1])
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and private(node.attr) and isinstance(node.value, ast.Name)
                    and node.value.id in other_modules):
                bad.append(f"{mod}:{node.lineno} uses {node.value.id}.{node.attr}")
    assert not bad, "\n".join(bad)


def test_no_import_cycles():
    graph = {m: {t for t, _, _ in imports(m) if t in MODULES and t != m} for m in MODULES}
    # A package's __init__ is imported on the way to any of its modules; ours are empty, so they are
    # not edges of a cycle.
    graph = {m: {t for t in ts if MODULES[t].name != "__init__.py"} for m, ts in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for m in graph:
        if m not in index:
            visit(m)
    assert not cycles, cycles


def test_init_files_are_empty():
    # The cycle check above leaves __init__ files out; that holds only while they import nothing.
    for mod, path in MODULES.items():
        if path.name == "__init__.py":
            assert not imports(mod), mod


def unit_of(module: str) -> str:
    """A subpackage of agents/ (plan, coder, verify, llm) and each of profiling/ and server/ is one
    unit; every other module is a unit of its own."""
    parts = module.split(".")
    if parts[:2] == ["stitchcuda", "agents"] and len(parts) > 3:
        return ".".join(parts[:3])
    if parts[1:2] in (["profiling"], ["server"]):
        return ".".join(parts[:2])
    return module


def test_no_cycles_between_subpackages():
    # The architecture, read from the imports: the coder's emitters know nothing of the planner that
    # picks them, the Verifier nothing of the coders, profiling nothing of the agents.
    edges = {(unit_of(m), unit_of(t)) for m in MODULES for t, _, _ in imports(m)
             if t in MODULES and unit_of(m) != unit_of(t) and MODULES[t].name != "__init__.py"}
    reach: dict[str, set[str]] = {}
    for a, b in edges:
        reach.setdefault(a, set()).add(b)
    changed = True
    while changed:  # transitive closure; the graph is a few dozen nodes
        changed = False
        for a in list(reach):
            more = set().union(*(reach.get(b, set()) for b in reach[a])) - reach[a]
            if more:
                reach[a] |= more
                changed = True
    cycles = sorted({tuple(sorted((a, b))) for a in reach for b in reach[a] if a in reach.get(b, set()) and a != b})
    assert not cycles, cycles
