"""`stitchcuda doctor`: what this machine can do with StitchCUDA, and what to install for the rest.

Each check is a (name, ok, detail) row; nothing is fixed or installed. The editor shows the same
facts when it starts the server on a new machine, and a GPU session starts by reading them.
"""

from __future__ import annotations

import importlib.util
import platform
import subprocess
import sys
from dataclasses import dataclass


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    needed_for: str


def _version(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout.strip().splitlines()
    except (OSError, subprocess.SubprocessError):
        return ""
    return out[-1] if out else ""


def _module(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def _target_check() -> Check:
    """The GPU kernels are sized for and the LLM is told about (profiles use the profiled device's
    own): a default, where nothing named one, is a finding to act on."""
    from stitchcuda.target import ENV, Target

    t = Target.current()
    defaulted = t.source.startswith("default")
    return Check("target", not defaulted, "; ".join([t.describe(), *t.notes]),
                 f"sizing kernels (grids by SM count) and the LLM coder's prompt ({ENV} names one)")


def checks() -> list[Check]:
    from stitchcuda import runtime
    from stitchcuda.profiling.ncu import find_ncu

    out = [Check("python", sys.version_info >= (3, 10), f"{platform.python_version()} ({sys.executable})", "everything")]
    try:
        import torch

        cuda = torch.cuda.is_available()
        out.append(Check("torch", True, f"{torch.__version__}, CUDA {torch.version.cuda or 'none'}", "everything"))
        gpu = torch.cuda.get_device_name(0) if cuda else "no CUDA GPU visible"
        out.append(Check("GPU", cuda, gpu, "verifying, timing and profiling candidates"))
    except Exception as e:  # noqa: BLE001 - a broken torch is a finding, not a crash
        out.append(Check("torch", False, f"cannot import: {e}", "everything"))
    nvcc = runtime.find_nvcc()
    out.append(Check("nvcc", nvcc is not None, f"{nvcc}: {_version([nvcc, '--version'])}" if nvcc else
                     "not found (PATH, CUDA_HOME, /usr/local/cuda)", "building candidates"))
    out.append(Check("target arch", True, runtime.default_arch(), "building candidates"))
    out.append(_target_check())
    from stitchcuda.agents.verify import sandbox

    box = sandbox.available()  # issue 22: the OS sandbox around every candidate's worker
    out.append(Check("sandbox", box.ok, box.why, "running candidates isolated (the audit hook works without it)"))
    ncu = find_ncu()
    out.append(Check("ncu", ncu is not None, f"{ncu}: {_version([ncu, '--version'])}" if ncu else
                     "not found: verdicts are timing-only", "kernel profiles (Nsight Compute)"))
    for mod, what, extra in (
        ("tree_sitter_cuda", "kernel-to-source mapping of profile findings", ""),
        ("pygls", "the language server (stitchcuda serve)", "server"),
        ("tree_sitter_python", "the language server's code actions", "server"),
        ("openai", "the LLM coder", "llm"),
    ):
        present = _module(mod)
        hint = "" if present or not extra else f" (pip install 'stitchcuda[{extra}]')"
        out.append(Check(mod, present, ("installed" if present else "missing") + hint, what))
    return out


def main(as_json: bool = False) -> int:
    from rich.console import Console
    from rich.table import Table

    if as_json:
        import dataclasses
        import json

        print(json.dumps([dataclasses.asdict(c) for c in checks()], indent=1))
        return 0

    table = Table(title="stitchcuda doctor", show_lines=False)
    for col in ("", "check", "finding", "needed for"):
        table.add_column(col)
    rows = checks()
    for c in rows:
        table.add_row("[green]ok[/]" if c.ok else "[yellow]--[/]", c.name, c.detail, c.needed_for)
    Console(highlight=False, soft_wrap=True).print(table)
    return 0
