"""`stitchcuda doctor`: what this machine can do with StitchCUDA, and what to install for the rest.

Each check is a (name, ok, detail, needed for, hint) row; nothing is fixed or installed: a check
that fails says what to install or set. Exit code 0 when every required check passes (optional
extras, the LLM coder and Ray, may be missing), 1 when one does not (README, "Exit codes").
"""

from __future__ import annotations

import importlib.util
import platform
import shutil
import subprocess
import sys
from dataclasses import dataclass


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    needed_for: str
    hint: str = ""  # what to install or set, where the check failed
    required: bool = True  # an optional extra (the LLM coder, Ray) missing does not fail doctor


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
                 f"sizing kernels (grids by SM count) and the LLM coder's prompt ({ENV} names one)",
                 f"run where the GPU is, or set {ENV} to the GPU the kernels are for (e.g. h100, a100, l4)"
                 if defaulted else "")


TORCH_CUDA_HINT = ("install a CUDA build of PyTorch, e.g. `pip install torch --index-url "
                   "https://download.pytorch.org/whl/cu130` (match your driver: nvidia-smi)")


def _torch_checks() -> list[Check]:
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - a broken torch is a finding, not a crash
        return [Check("torch", False, f"cannot import: {e}", "everything", "pip install torch")]
    built_for = torch.version.cuda
    out = [Check("torch", built_for is not None, f"{torch.__version__}, CUDA {built_for or 'none (a CPU-only build)'}",
                 "everything; GPU work needs a CUDA build", "" if built_for else TORCH_CUDA_HINT)]
    cuda = torch.cuda.is_available()
    gpu = torch.cuda.get_device_name(0) if cuda else "no CUDA GPU visible"
    hint = "" if cuda else ("a CPU-only PyTorch sees no GPU: " + TORCH_CUDA_HINT if built_for is None else
                            "check the driver (nvidia-smi) and CUDA_VISIBLE_DEVICES")
    out.append(Check("GPU", cuda, gpu, "verifying, timing and profiling candidates", hint))
    return out


def _header_checks(nvcc: str | None) -> list[Check]:
    from stitchcuda import cuda_libs

    out = []
    for lib in ("cublas", "cudnn"):
        found = cuda_libs.locate([lib], nvcc)
        header = cuda_libs.LIBRARIES[lib][0]
        ok = not found.missing_headers
        out.append(Check(f"{header}", ok, "found" if ok else "not found",
                         f"building candidates that call {lib}",
                         "" if ok else cuda_libs.install_hint([lib])))
    return out


def checks() -> list[Check]:
    from stitchcuda import runtime
    from stitchcuda.profiling.ncu import find_ncu

    out = [Check("python", sys.version_info >= (3, 10), f"{platform.python_version()} ({sys.executable})", "everything",
                 "" if sys.version_info >= (3, 10) else "Python 3.10 or newer")]
    out += _torch_checks()
    nvcc = runtime.find_nvcc()
    out.append(Check("nvcc", nvcc is not None, f"{nvcc}: {_version([nvcc, '--version'])}" if nvcc else
                     "not found (PATH, CUDA_HOME, /usr/local/cuda)", "building candidates",
                     "" if nvcc else "install the CUDA toolkit (https://developer.nvidia.com/cuda-downloads) "
                     "or put its bin/ on PATH, or set CUDA_HOME"))
    out += _header_checks(nvcc)
    out.append(Check("target arch", True, runtime.default_arch(), "building candidates"))
    out.append(_target_check())
    from stitchcuda.agents.verify import sandbox

    box = sandbox.available()  # issue 22: the OS sandbox around every candidate's worker
    hint = "" if box.ok else (sandbox.INSTALL_HINT if box.tool is None else
                              "enable unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1)")
    out.append(Check("sandbox", box.ok, box.why, "running candidates isolated (the audit hook works without it)",
                     hint, required=False))
    # The Verifier reads what the candidate's libraries call (native_symbols, native_calls) with
    # binutils; without them those readings are skipped with a note, and only the sources' text is read.
    tools = [t for t in ("nm", "objdump", "c++filt") if shutil.which(t) is None]
    out.append(Check("binutils", not tools, "nm, objdump, c++filt found" if not tools else f"missing: {', '.join(tools)}",
                     "reading what a candidate's native libraries call (hack checks)",
                     "" if not tools else "install binutils (Debian/Ubuntu: apt-get install binutils)", required=False))
    ncu = find_ncu()
    out.append(Check("ncu", ncu is not None, f"{ncu}: {_version([ncu, '--version'])}" if ncu else
                     "not found: verdicts are timing-only", "kernel profiles (Nsight Compute)",
                     "" if ncu else "install Nsight Compute (the CUDA toolkit's nsight-compute package) "
                     "and put ncu on PATH"))
    for mod, what, extra in (
        ("tree_sitter_cuda", "kernel-to-source mapping of profile findings", "server"),
        ("pygls", "the language server (stitchcuda serve)", "server"),
        ("tree_sitter_python", "the language server's code actions", "server"),
        ("openai", "the LLM coder", "llm"),
        ("ray", "bench on a Ray cluster (stitchcuda bench --ray)", "ray"),
    ):
        present = _module(mod)
        out.append(Check(mod, present, "installed" if present else "missing", what,
                         "" if present else f"pip install 'stitchcuda[{extra}]'", required=extra == "server"))
    return out


def main(as_json: bool = False) -> int:
    from rich.console import Console
    from rich.markup import escape

    rows = checks()
    code = 0 if all(c.ok for c in rows if c.required) else 1
    if as_json:
        import dataclasses
        import json

        print(json.dumps([dataclasses.asdict(c) for c in rows], indent=1))
        return code
    # One check a line, never cut: paths and versions are long, and a table on an 80-column
    # terminal ends them in "…".
    console = Console(highlight=False, soft_wrap=True)
    console.print("stitchcuda doctor")
    for c in rows:
        mark = "[green]ok[/]" if c.ok else "[yellow]--[/]"
        console.print(f"{mark} {escape(c.name)}: {escape(c.detail)} [dim](needed for {escape(c.needed_for)})[/]")
        if c.hint:
            console.print(f"   to fix: {escape(c.hint)}")
    console.print("all required checks passed" if code == 0 else
                  f"{sum(not c.ok for c in rows if c.required)} required check(s) not passed: see 'to fix' "
                  "(exit code 1)")
    return code
