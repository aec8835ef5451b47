"""The LLM Coder's prompts: the contract every candidate must meet, and the two atomic skills of
the seed papers: (1) plan -> code, (2) code + Verifier feedback -> better code."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from stitchcuda.target import Target
from stitchcuda.types import Candidate, Plan, Task

SYSTEM = """You write CUDA C++ that replaces a PyTorch module's computation, for StitchCUDA.

Answer with complete files, each in its own fenced code block whose info string names the file:
```python model_new.py
...
```
```cuda kernels.cu
...
```

model_new.py defines `class ModelNew(nn.Module)` with the same constructor arguments as the
reference `Model` and parameters/buffers of the same names and shapes (the Verifier loads Model's
state_dict into it). It loads the compiled sources with StitchCUDA's runtime:

    from pathlib import Path
    import torch
    import torch.nn as nn
    from stitchcuda import runtime
    _lib = runtime.load(Path(__file__).with_name("kernels.cu"))  # libraries=["cublas"] links cuBLAS

and calls exported launchers: `_lib.call("name", *args)` passes tensors as device pointers, Python
ints as int64_t, floats as double, and appends the current CUDA stream as the last argument. A
launcher is `extern "C" int name(const float* x, float* out, int64_t n, cudaStream_t stream)` that
launches on that stream and returns (int)cudaGetLastError(). No torch/extension.h, no pybind11.

Hard rules (the Verifier rejects violations as reward hacking): forward() may only allocate
outputs (torch.empty*), take views/reshape and call _lib; no PyTorch math in forward, no calling
the reference or its layers, no caching outputs between calls, no work on other streams or threads,
no copying GPU data to the host (.cpu(), .item(), .tolist()), no try/except fallbacks, and nothing
that asks where it runs (command line, environment variables, working folder, process or host ids,
/proc or /sys; in the C++ also getenv, dlsym, syscall, files or sockets, or __FILE__ outside an error message) or where it lies: read or
ask about (exists, isdir, getsize) only your own files, named from your module's folder
(Path(__file__).with_name("kernels.cu")), and never test your own path or module name (compare,
search, hash, len); use os.makedirs(d, exist_ok=True), not an exists() check. Look attributes up by
written names: getattr with a name you compute is refused unless it is an __init__ argument or one
of your string constants (f"weight_l{i}" is fine). The candidate is checked on fresh random and adversarial inputs and timed
against eager PyTorch and torch.compile; correct and faster wins. It is also checked once with
autograd on and once in the other mode (after .eval() where the module was built in training mode):
where forward's math depends on self.training (BatchNorm's statistics, dropout), follow it, or
raise for the mode you do not implement; never return the other mode's answer. Integer targets of
a cross-entropy or nll_loss are also checked holding its ignore_index (-100 by default): skip those
rows, and leave them out of a mean's divisor."""


_NO_ALPHA = {"mm", "bmm", "mv"}


def graph_text(plan: Plan, limit: int = 80) -> str:
    lines = []
    for n in plan.graph[:limit]:
        shape = "x".join(map(str, n.get("shape") or [])) or "scalar"
        if n.get("op") == "input":
            lines.append(f"{n['name']}: {n.get('kind', 'input')} {n.get('dtype')}[{shape}]")
            continue
        given = dict(n.get("args") or {})
        # The planner folds a scalar factor of an operand into a product's alpha; mm, bmm and mv have
        # no such argument in aten, so it is said in words rather than shown as one.
        folded = given.pop("alpha", None) if n.get("op") in _NO_ALPHA else None
        args = ", ".join(f"{k}={v['ref'] if isinstance(v, dict) and 'ref' in v else json.dumps(v)}"
                         for k, v in given.items())
        scale = f" times {folded:g} (a scalar factor of an operand, folded in)" if folded is not None else ""
        lines.append(f"{n['name']} = {n.get('target', n.get('op'))}({args}){scale} -> {n.get('dtype')}[{shape}]")
    if len(plan.graph) > limit:
        lines.append(f"... {len(plan.graph) - limit} more nodes")
    return "\n".join(lines)


def profile_text(plan: Plan, top: int = 8) -> str:
    p = plan.profile or {}
    if not p.get("ops"):
        return "not measured (no GPU when planning)"
    rows = [f"{o['share']:.0%} {o['op']} ({o['module'] or 'top'}, line {o['line']}), {o['time_us']:.1f} us"
            for o in p["ops"][:top]]
    return f"on {p.get('device')}: " + "; ".join(rows)


def _files(files: dict[str, str]) -> str:
    fence = {".py": "python", ".cu": "cuda", ".cuh": "cuda", ".cpp": "cpp", ".h": "cpp"}
    return "\n\n".join(f"```{fence.get(Path(n).suffix, '')} {n}\n{t.rstrip()}\n```" for n, t in sorted(files.items()))


def gpu_line(target: Target | None = None) -> str:
    """The GPU the code is for, as the model should size it: this process's target by default (the
    device here, STITCHCUDA_TARGET's row, or the default, which the line says it is)."""
    t = target or Target.current()
    shared = t.shared_per_block_optin // 1024
    line = (f"{t.name}, {t.arch} (compute capability {t.capability[0]}.{t.capability[1]}), {t.sm_count} SMs, "
            f"{shared} KiB shared memory per block (opt-in), {t.l2_bytes / 2**20:.0f} MiB L2, "
            f"{t.max_threads_per_sm} threads per SM, {t.dram_bytes_per_s / 1e12:.2f} TB/s DRAM, "
            f"{t.fp32_flops / 1e12:.1f} TFLOP/s fp32, {t.tf32_flops / 1e12:.0f} TF32 and "
            f"{t.fp16_flops / 1e12:.0f} fp16/bf16 tensor TFLOP/s")
    if t.source.startswith(("default", "named")):
        line += f" ({t.source.split(';')[0]})"
    return line


def precision_line(task: Task) -> str:
    """The run's precision policy, said to the model as a rule (the Verifier holds it to it)."""
    if task.precision == "strict":
        return ("Precision: strict. No TF32 anywhere: fp32 matmuls and convolutions in full fp32 (cuBLAS "
                "CUBLAS_COMPUTE_32F, cuDNN with math type CUDNN_DEFAULT_MATH and TF32 off, no tensor-core "
                "fp32 paths); outputs are checked against fp32 PyTorch.")
    return ("Precision: tf32. fp32 matmuls and convolutions may run on TF32 tensor cores "
            "(CUBLAS_COMPUTE_32F_FAST_TF32, cuDNN's TF32); outputs of matmul-like ops are held to 1e-2 relative.")


def plan_to_code(task: Task, plan: Plan, seed: Candidate | None, gpu: str,
                 llm_plan: str | None = None) -> list[dict[str, Any]]:
    """Skill 1: the module, its traced graph and profile, the plan (and a built-in candidate to
    start from)."""
    parts = [
        f"Reference module `{task.class_name}` in {task.path.name}:\n```python\n{task.path.read_text().rstrip()}\n```",
        f"Its traced aten graph (inputs first):\n{graph_text(plan)}",
        f"Reference GPU time by op: {profile_text(plan)}",
        f"GPU: {gpu}",
        precision_line(task),
    ]
    if llm_plan:
        parts.append(f"The plan to implement (checked against the graph):\n{llm_plan}")
    if seed is not None:
        parts.append("A correct starting point from StitchCUDA's built-in coder (improve on it, or replace it):\n"
                     + _files(seed.files))
    parts.append("Write model_new.py and its CUDA sources.")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]


def code_and_feedback(previous: Candidate, feedback: str) -> dict[str, str]:
    """Skill 2: the last candidate's files and the Verifier's verdict on them."""
    return {"role": "user", "content": f"Your last candidate:\n{_files(previous.files)}\n\n{feedback}\n\n"
                                       "Fix what the Verifier reports (or, if it passed, make it faster) "
                                       "and send the complete files again."}


def another_sample(sample: int) -> dict[str, str]:
    """After the round's first answer: candidate `sample` of the same round, verified beside it."""
    return {"role": "user", "content": f"Now write candidate {sample} of this round, to be verified beside the one above "
                                       "on another GPU: take a different approach (other fusion boundaries, tiling, "
                                       "memory layout or library calls), not the same code again. Send the complete "
                                       "files, each in a fenced code block named by its file name."}


def malformed(reason: str) -> dict[str, str]:
    return {"role": "user", "content": f"Your answer could not be used: {reason}. Send the complete files again, "
                                       "each in a fenced code block named by its file name."}
