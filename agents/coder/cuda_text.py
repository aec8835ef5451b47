"""The fixed CUDA the emitters inline into every generated .cu: files under agents/coder/cuda/.

Helper device functions and the code shared by every kernel of a family (the prelude, cuBLAS and
cuDNN handles, reduction and norm machinery) live in `.cuh` files shipped as package data, not in
Python strings, so they can be read, edited and checked as CUDA. They are inlined, never #included:
a candidate's .cu must stay one self-contained file, since the candidate folder is what the Verifier
builds and the user keeps.

A file may start with `//!` lines documenting it (what it is for, its placeholders); they are not
inlined. Placeholders are `@NAME@`, filled by `fill`; the norm family's templates use
string.Template's `$NAME` instead (emit_norm.py substitutes them per kernel).
"""

from __future__ import annotations

import functools
import re
from importlib import resources

_PLACEHOLDER = re.compile(r"@[A-Z][A-Z0-9_]*@")


@functools.cache
def load(name: str) -> str:
    """The text of cuda/NAME as the generated source gets it: its leading `//!` lines dropped."""
    text = resources.files(__package__).joinpath("cuda", name).read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    skip = 0
    while skip < len(lines) and lines[skip].startswith("//!"):
        skip += 1
    return "".join(lines[skip:])


def fill(name: str, **values: object) -> str:
    """cuda/NAME with every `@KEY@` replaced by str(values[KEY]); a placeholder left unfilled, or a
    value the file has no placeholder for, is an error (a renamed one would go unnoticed)."""
    text = load(name)
    for key, value in values.items():
        token = f"@{key}@"
        if token not in text:
            raise KeyError(f"cuda/{name} has no placeholder {token}")
        text = text.replace(token, str(value))
    left = _PLACEHOLDER.search(text)
    if left:
        raise KeyError(f"cuda/{name}: placeholder {left.group(0)} not filled")
    return text
