"""The seed papers' four-part rubric for a candidate, from its sources, its verdict and the plan.

- anti_hacking: a hard gate (1 or 0) from the Verifier; a hacked candidate scores 0 overall.
- engineering: evidence of CUDA craft in the sources (shared-memory tiling, vectorised access,
  warp-level primitives, tensor cores, library epilogues) and, where profiled, kernels near a roof.
- coverage: the share of the reference's GPU time (or, unprofiled, of its compute ops) that runs in
  generated kernels rather than in vendor-library calls.
- compliance: whether the candidate acted on the previous round's top issue (a failure it no longer
  has, or the kernel the top NCU Finding named, changed); None in round one.
"""

from __future__ import annotations

import re
from typing import Any

from stitchcuda.types import Candidate, Plan, Verdict

EVIDENCE = {
    "shared-memory tiling": r"__shared__",
    "vectorised access": r"\b(float4|float2|int4|half2|__half2|__nv_bfloat162|__ldg)\b",
    "warp primitives": r"__shfl_\w+|cooperative_groups",
    "tensor cores": r"\b(wmma::|mma\.sync|wgmma|CUBLAS_COMPUTE_32F_FAST_TF32|CUBLAS_TF32_TENSOR_OP_MATH|"
                    r"CUDNN_TENSOR_OP_MATH)",
    "library epilogue": r"CUBLASLT_EPILOGUE_\w+",
    "fused launch (grid-stride)": r"gridDim\.x\s*\*\s*blockDim\.x|blockDim\.x\s*\*\s*gridDim\.x",
}
LIBRARY_CALLS = {"cublas": r"\bcublas\w*\(", "cudnn": r"\bcudnn\w*\("}
LIBRARY_OPS = {"cublas": ("mm", "addmm", "bmm", "baddbmm", "matmul", "linear"),
               "cudnn": ("convolution", "conv2d", "conv1d", "conv3d", "conv_transpose2d", "_convolution")}
NEAR_ROOF_PCT = 60.0


def _sources(c: Candidate) -> str:
    return "\n".join(t for n, t in c.files.items() if n.endswith((".cu", ".cuh", ".cpp", ".h")))


def engineering(c: Candidate, v: Verdict) -> tuple[float, list[str]]:
    src = _sources(c)
    found = [name for name, pat in EVIDENCE.items() if re.search(pat, src)]
    bound = [f for f in v.findings if f.code.endswith("-bound")]
    if bound:
        top = max(bound, key=lambda f: float(f.data.get("time_s", 0.0)) * float(f.data.get("launches", 1.0)))
        pct = max(float(top.data.get("memory_pct", 0.0)), float(top.data.get("compute_pct", 0.0)))
        if pct >= NEAR_ROOF_PCT:
            found.append(f"hottest kernel at {pct:.0f}% of a roof (NCU)")
    return min(1.0, len(found) / 3), found


def _op_name(op: str) -> str:
    return op.split("::")[-1].split(".")[0]


def coverage(c: Candidate, plan: Plan | None) -> tuple[float | None, str]:
    src = _sources(c)
    libs = {lib for lib, pat in LIBRARY_CALLS.items() if re.search(pat, src)}
    lib_ops = {op for lib in libs for op in LIBRARY_OPS[lib]}
    if plan is None:
        return None, "no plan"
    if plan.profile and plan.profile.get("ops"):
        ops = plan.profile["ops"]
        total = sum(o["time_us"] for o in ops) or 1.0
        in_lib = sum(o["time_us"] for o in ops if _op_name(o["op"]) in lib_ops)
        return 1.0 - in_lib / total, f"{in_lib / total:.0%} of reference GPU time in {', '.join(sorted(libs)) or 'no'} library calls"
    compute = [n for n in plan.graph if n.get("op") not in {"input", "output"} and not n.get("view")]
    if not compute:
        return None, "no compute ops"
    in_lib = sum(1 for n in compute if n.get("op") in lib_ops)
    return 1.0 - in_lib / len(compute), f"{in_lib} of {len(compute)} ops in library calls (unprofiled)"


def _top_issue(v: Verdict) -> tuple[str, str] | None:
    if v.hack_findings:
        return "hack", v.hack_findings[0].code
    if v.status == "build-failed":
        return "build", ""
    if v.status == "incorrect":
        return "incorrect", ""
    bound = sorted((f for f in v.findings if f.code.endswith("-bound")),
                   key=lambda f: -float(f.data.get("gain_total_s", 0.0)))
    if bound and bound[0].kernel:
        return "kernel", bound[0].kernel
    return None


def _kernel_text(c: Candidate, kernel: str) -> str | None:
    from stitchcuda.profiling.source_map import SourceMap, base_name

    try:
        fn = SourceMap.from_files(c.files).lookup(kernel)
    except ImportError:
        return None
    if fn is None:
        return None
    lines = c.files[fn.file].split("\n")
    return "\n".join(lines[fn.range.start_line : fn.range.end_line + 1]) or base_name(kernel)


def compliance(c: Candidate, v: Verdict, previous: tuple[Candidate, Verdict] | None) -> tuple[float | None, str]:
    if previous is None:
        return None, "first round"
    issue = _top_issue(previous[1])
    if issue is None:
        return None, "nothing to act on"
    kind, what = issue
    if kind == "hack":
        ok = what not in {f.code for f in v.hack_findings}
        return float(ok), f"previous hack finding {what}: {'gone' if ok else 'still there'}"
    if kind == "build":
        return float(v.built), f"previous build failure: {'builds now' if v.built else 'still fails'}"
    if kind == "incorrect":
        return float(v.correct), f"previous wrong result: {'correct now' if v.correct else 'still wrong'}"
    before, after = _kernel_text(previous[0], what), _kernel_text(c, what)
    changed = after is None or before != after
    return float(changed), f"top NCU finding on {what}: kernel {'changed' if changed else 'unchanged'}"


def score(c: Candidate, v: Verdict, plan: Plan | None, previous: tuple[Candidate, Verdict] | None = None) -> dict[str, Any]:
    gate = 0.0 if (v.hack_findings or v.status == "hacked") else 1.0
    eng, evidence = engineering(c, v)
    cov, cov_why = coverage(c, plan)
    comp, comp_why = compliance(c, v, previous)
    parts = [x for x in (eng, cov, comp) if x is not None]
    total = gate * (sum(parts) / len(parts) if parts else 0.0)
    return {"anti_hacking": gate, "engineering": round(eng, 3), "coverage": None if cov is None else round(cov, 3),
            "compliance": comp, "total": round(total, 3),
            "evidence": {"engineering": evidence, "coverage": cov_why, "compliance": comp_why}}
