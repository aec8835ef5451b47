"""Where each kernel of a generated .cu lives, and which one a profiler's kernel name means.

The .cu is parsed with tree-sitter-cuda (imported lazily: the GPU machine may lack it, and the
profiler must still run there). Ranges are 0-based lines and UTF-16 columns, as the Language Server
Protocol counts them, so an editor can underline a kernel directly from a Finding.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any


@dataclass(frozen=True)
class Range:
    start_line: int
    start_col: int
    end_line: int
    end_col: int


@dataclass(frozen=True)
class Function:
    name: str
    kind: str  # "global" (a __global__ kernel) or "launcher" (an extern "C" host entry)
    file: str
    range: Range  # the whole definition, template header included
    name_range: Range

    @property
    def line(self) -> int:
        """1-based line of the name, as Finding.line wants it."""
        return self.name_range.start_line + 1


@cache
def _parser() -> Any:
    import tree_sitter
    import tree_sitter_cuda

    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_cuda.language()))


def utf16_col(lines: list[bytes], row: int, byte_col: int) -> int:
    # tree-sitter counts bytes; LSP counts UTF-16 code units (non-ASCII comments shift them).
    prefix = lines[row][:byte_col].decode("utf-8", errors="replace") if row < len(lines) else ""
    return len(prefix.encode("utf-16-le")) // 2


def node_range(lines: list[bytes], node: Any) -> Range:
    (sr, sc), (er, ec) = node.start_point, node.end_point
    return Range(sr, utf16_col(lines, sr, sc), er, utf16_col(lines, er, ec))


def _name_node(fn: Any) -> Any | None:
    decl = fn.child_by_field_name("declarator")
    # Pointer/reference return types wrap the function declarator; unwrap to the identifier.
    while decl is not None and decl.type not in {"identifier", "field_identifier"}:
        if decl.type in {"qualified_identifier", "template_function"}:
            decl = decl.child_by_field_name("name")
        else:
            decl = decl.child_by_field_name("declarator")
    return decl


def _is_extern_c(node: Any) -> bool:
    parent = node.parent
    if parent is not None and parent.type == "declaration_list":
        parent = parent.parent
    if parent is None or parent.type != "linkage_specification":
        return False
    value = parent.child_by_field_name("value")
    return value is not None and value.text == b'"C"'


def _walk(node: Any) -> Iterator[Any]:
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type == "function_definition":
            yield n
        stack.extend(reversed(n.children))


def parse(text: str, file: str = "kernels.cu") -> list[Function]:
    """Every __global__ function and extern "C" launcher defined in `text`, in source order."""
    src = text.encode("utf-8")
    lines = src.split(b"\n")
    out: list[Function] = []
    for fn in _walk(_parser().parse(src).root_node):
        is_global = any(c.type == "__global__" for c in fn.children)
        if not is_global and not _is_extern_c(fn):
            continue
        name = _name_node(fn)
        if name is None:
            continue
        # The definition starts at its `template <...>` or `extern "C"` (a single-declaration one).
        wrapped = fn.parent is not None and fn.parent.type in {
            "template_declaration",
            "linkage_specification",
        }
        outer = fn.parent if wrapped else fn
        out.append(
            Function(
                name=name.text.decode(),
                kind="global" if is_global else "launcher",
                file=file,
                range=node_range(lines, outer),
                name_range=node_range(lines, name),
            )
        )
    return out


@cache
def _cxxfilt() -> str | None:
    return shutil.which("c++filt")


def demangle(name: str) -> str:
    """`c++filt` when it is there; otherwise the mangled name is left for base_name to pick apart."""
    tool = _cxxfilt()
    if not name.startswith("_Z") or tool is None:
        return name
    try:
        res = subprocess.run([tool, name], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return name
    return res.stdout.strip() or name


def _mangled_base(name: str) -> str:
    # Itanium <nested-name> or <unqualified-name>: take the last <length><identifier> component.
    pos, last = (3 if name.startswith("_ZN") else 2), ""
    while pos < len(name) and name[pos] in "KVr":  # cv-qualifiers of a nested member
        pos += 1
    while m := re.match(r"(\d+)", name[pos:]):
        size = int(m.group(1))
        pos += len(m.group(1))
        last = name[pos : pos + size]
        pos += size
        if not name.startswith("_ZN"):
            break
    return last or name


def base_name(profiled: str) -> str:
    """The plain function name of a profiler's kernel name: `void k<4>(const float*, float*)` -> `k`."""
    name = demangle(profiled.strip())
    if name.startswith("_Z"):
        return _mangled_base(name)
    name = name.replace("(anonymous namespace)::", "")
    cut = min((i for i in (name.find("<"), name.find("(")) if i >= 0), default=len(name))
    ids = re.findall(r"[A-Za-z_]\w*", name[:cut])
    return ids[-1] if ids else name


@dataclass
class SourceMap:
    functions: list[Function] = field(default_factory=list)

    @classmethod
    def from_files(cls, files: Mapping[str, str]) -> SourceMap:
        """All .cu/.cuh sources of a candidate (Candidate.files)."""
        funcs: list[Function] = []
        for fname, text in files.items():
            if fname.endswith((".cu", ".cuh")):
                funcs.extend(parse(text, fname))
        return cls(funcs)

    def kernels(self) -> list[Function]:
        return [f for f in self.functions if f.kind == "global"]

    def lookup(self, profiled: str) -> Function | None:
        """The __global__ function a profiled kernel name (demangled or mangled) refers to."""
        base = base_name(profiled)
        for f in self.functions:
            if f.kind == "global" and f.name == base:
                return f
        return None
