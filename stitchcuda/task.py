"""Loading a Task from a user's Python file (KernelBench format or any named nn.Module)."""

from __future__ import annotations

import ast
import importlib.util
import sys
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

from . import pyast
from .types import Task

EXAMPLE = """\
# Add these two functions beside your module so StitchCUDA can build it and feed it inputs:
def get_init_inputs():
    return []                      # the arguments of YourModule(...)

def get_inputs():
    return [torch.randn(64, 1024)]  # the arguments of forward(...), at the size you care about
"""


class UsageError(Exception):
    """A problem the user can fix (bad file, bad option), reported as one message, not a traceback."""


class TaskError(UsageError):
    """A problem with the user's file, worded for the user (never shown as a traceback)."""


def module_classes(source: str) -> list[str]:
    """Names of classes that look like nn.Module subclasses (by their bases, without executing)."""
    tree = pyast.parse(source)
    names = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                text = ast.unparse(base)
                if text.endswith("Module") or text in names:
                    names.append(node.name)
                    break
    return names


def find_task(path: Path, class_name: str | None = None) -> Task:
    """Check a file without running it and say precisely what is missing."""
    path = Path(path)
    if path.is_dir():
        raise TaskError(f"{path} is a folder: give one .py file (plan and bench take folders)")
    if not path.is_file():
        raise TaskError(f"{path}: no such file")
    source = path.read_text()
    try:
        tree = pyast.parse(source, filename=str(path))
    except SyntaxError as e:
        raise TaskError(f"{path}:{e.lineno}: syntax error: {e.msg}") from None
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    # Module-level assignments like `get_inputs = make_inputs` count too.
    for node in tree.body:
        if isinstance(node, ast.Assign):
            functions |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    classes = module_classes(source)
    if class_name is None:
        if "Model" in classes:
            class_name = "Model"
        elif len(classes) == 1:
            class_name = classes[0]
        elif not classes:
            raise TaskError(f"{path}: no nn.Module subclass found")
        else:
            raise TaskError(f"{path}: several modules ({', '.join(classes)}); choose one with --class NAME")
    elif class_name not in {n.name for n in tree.body if isinstance(n, ast.ClassDef)}:
        raise TaskError(
            f"{path}: no class named {class_name!r} (modules here: {', '.join(classes) or 'none'})"
        )
    missing = [f for f in ("get_inputs", "get_init_inputs") if f not in functions]
    if missing:
        raise TaskError(
            f"{path}: {class_name} cannot be optimised yet: the file lacks {' and '.join(missing)}.\n"
            + EXAMPLE
        )
    return Task(path=path.resolve(), class_name=class_name)


def import_file(path: Path, name: str | None = None) -> ModuleType:
    """Import a file as a fresh module, with its folder importable (for sibling helpers)."""
    name = name or f"_stitch_{path.stem}_{uuid.uuid4().hex[:8]}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TaskError(f"{path}: cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    folder = str(path.parent)
    added = folder not in sys.path
    if added:
        sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    finally:
        if added:
            sys.path.remove(folder)
    return module


def load_task_module(task: Task) -> tuple[ModuleType, type]:
    module = import_file(task.path)
    cls = getattr(module, task.class_name, None)
    import torch.nn as nn

    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        raise TaskError(f"{task.path}: {task.class_name} is not an nn.Module subclass")
    for fn in (task.inputs_fn, task.init_inputs_fn):
        if not callable(getattr(module, fn, None)):
            raise TaskError(f"{task.path}: {fn} is not a function.\n" + EXAMPLE)
    return module, cls


def build_model(cls: type, init_args: list[Any], seed: int, device: Any, mode: str | None = None) -> Any:
    """An instance of `cls` as the Verifier and the profilers build it.

    Built on the CPU under a fixed seed, as KernelBench does, so reference and candidate draw the
    same initial weights; then moved to `device`. `mode`: the task's (Task.mode).
    """
    return built_on_cpu(cls, init_args, seed, mode).to(device)


def built_on_cpu(cls: type, init_args: list[Any], seed: int, mode: str | None = None) -> Any:
    """An instance of `cls` as build_model makes it, left on the CPU (moved later, where the move
    must wait for a GPU lock and the initialisation need not)."""
    import torch  # not at the top: the CLI's light commands (plan, doctor) import this module

    torch.manual_seed(seed)
    return set_mode(cls(*init_args), mode)


def set_mode(model: Any, mode: str | None) -> Any:
    """`model` switched to the task's mode: "train" or "eval" as .train() / .eval() set it, every
    submodule alike; "as-built" (or None) leaves it as its constructor did."""
    if mode in (None, "as-built"):
        return model
    if mode not in ("train", "eval"):
        raise ValueError(f"mode {mode!r}: expected one of as-built, train, eval")
    return model.train(mode == "train")
