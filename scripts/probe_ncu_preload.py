"""Does Nsight Compute profile a CUDA process with the Verifier's native watch preloaded?

Usage (on the GPU machine, after scripts/gpu_run.sh has assembled the package):
    python3 scripts/probe_ncu_preload.py OUT.json
Runs `ncu` over one small torch forward four ways: nothing preloaded, the watch as this checkout
builds it, the watch's source at 8812eb1 (carried in .carry/probe/, where the example's ncu run
found no CUDA driver), and that source built without its dlopen. Records each run's exit status,
whether a kernel row came back, the last lines ncu printed, and how the machine's compiler ended
each build's dlopen (a jump keeps glibc's view of the asking library).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from stitchcuda.agents.verify import native_threads
from stitchcuda.profiling import ncu

REPO = Path(__file__).resolve().parent.parent
TARGET = "import torch; x = torch.ones(1 << 20, device='cuda'); print(float((x * 2).sum()))"


def _build(compiler: str, src: Path, out: Path) -> str:
    res = subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", str(out), str(src), "-ldl"],
                         capture_output=True, text=True, timeout=120)
    return res.stderr[-500:]


def _dlopen_ending(lib: Path) -> list[str]:
    objdump = shutil.which("objdump")
    if objdump is None:
        return ["no objdump"]
    text = subprocess.run([objdump, "-d", "--no-show-raw-insn", str(lib)], capture_output=True, text=True).stdout
    m = re.search(r"<dlopen>:\n(.*?)\n\n", text, re.S)
    return [ln.strip() for ln in (m.group(1).splitlines() if m else []) if re.search(r"\b(jmp|call|ret)\b", ln)]


def main(out: Path) -> None:
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    tool = ncu.find_ncu()
    result: dict = {"compiler": compiler, "ncu": tool, "runs": {}}
    if compiler is None or tool is None:
        out.write_text(json.dumps(result, indent=1))
        return
    result["cc_version"] = subprocess.run([compiler, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    folder = Path(tempfile.mkdtemp(prefix="probe-ncu-preload-"))
    libs: dict[str, Path | None] = {"none": None}
    libs["watch_here"] = native_threads.library(folder / "cache")
    old = REPO / ".carry" / "probe" / "native_threads_8812eb1.c"
    if old.exists():
        libs["watch_8812eb1"] = folder / "old.so"
        result["build_8812eb1"] = _build(compiler, old, folder / "old.so")
        text = old.read_text()
        cut = text.index("typedef void* (*sc_dlopen_fn)")
        (folder / "nodlopen.c").write_text(text[:cut])
        libs["watch_8812eb1_no_dlopen"] = folder / "nodlopen.so"
        result["build_no_dlopen"] = _build(compiler, folder / "nodlopen.c", folder / "nodlopen.so")
    for name, lib in libs.items():
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        if lib is not None:
            if not lib.exists():
                result["runs"][name] = {"error": "not built"}
                continue
            env["LD_PRELOAD"] = str(lib)
            result.setdefault("dlopen_ending", {})[name] = _dlopen_ending(lib)
        cmd = [tool, "--metrics", "gpu__time_duration.sum", "--csv", sys.executable, "-c", TARGET]
        try:
            res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            result["runs"][name] = {"error": "timeout"}
            continue
        text = res.stdout + res.stderr
        result["runs"][name] = {"rc": res.returncode, "kernel_rows": text.count("gpu__time_duration.sum"),
                                "tail": text.strip().splitlines()[-4:]}
        print(name, res.returncode, result["runs"][name]["kernel_rows"], flush=True)
    out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
