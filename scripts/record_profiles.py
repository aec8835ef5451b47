"""Record the profiling fixtures on a GPU (run by `scripts/gpu_run.sh profiles`; writes under $OUT).

For each case the Verifier runs in full, with Nsight Compute on: the verdict (timings, findings),
ncu's report (ncu.ncu-rep), its raw page (ncu.csv) and the candidate's sources are kept, with
the bytes and FLOPs each kernel must move or do, worked out by hand from the shapes, so the CPU
tests can check the classification against arithmetic. The reference profiles of a KernelBench MLP
and conv net are recorded as their profiler events (profiling.reference.dump_events) for the
ranking to be replayed in CI.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

from stitchcuda.agents.coder import builtin as coder_builtin
from stitchcuda.agents.plan import planner
from stitchcuda.agents.verify.verifier import VerifyOptions, verify
from stitchcuda.profiling.reference import format_table, profile_in_subprocess
from stitchcuda.types import Candidate, Task

SRC = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "profile_src"
N_PW, N_TINY, N_MM = 1 << 28, 1024, 4096

# name: (reference, matmul kernel or None for the built-in coder, bytes, FLOPs) by hand:
# the pointwise chain reads and writes each float once; x * 2 + 1 is one FMA (2 FLOPs), relu a max.
CASES = {
    "pointwise": ("pointwise_ref.py", None, 2 * 4 * N_PW, 2 * N_PW),
    "tiny": ("tiny_ref.py", None, 2 * 4 * N_TINY, 2 * N_TINY),
    "naive_matmul": ("matmul_ref.py", "naive_matmul", 3 * 4 * N_MM * N_MM, 2 * N_MM**3),
    "tiled_matmul": ("matmul_ref.py", "tiled_matmul", 3 * 4 * N_MM * N_MM, 2 * N_MM**3),
    "vec_matmul": ("matmul_ref.py", "vec_matmul", 3 * 4 * N_MM * N_MM, 2 * N_MM**3),
}


# The reference profiles (torch.profiler, then Nsight Systems) recorded as CPU-test fixtures.
REFERENCE_PROBLEMS = ("level3/1_MLP.py", "level3/5_AlexNet.py")


def candidate_for(ref: Path, kernel: str | None) -> Candidate:
    if kernel is None:
        task = Task(path=ref)
        return coder_builtin.code(task, planner.plan(task))
    module = (SRC / "matmul_new.py").read_text().replace('KERNEL = "naive_matmul"', f'KERNEL = "{kernel}"')
    files = {"model_new.py": module, "matmul_kernels.cu": (SRC / "matmul_kernels.cu").read_text()}
    return Candidate(name=kernel, files=files, origin="user")


def main(out: Path, only: list[str]) -> int:
    out.mkdir(parents=True, exist_ok=True)
    opts = VerifyOptions(time_compile=False, random_sets=2, adversarial=(), trials=30, profile=True,
                         profile_timeout_s=120.0)
    summary: dict[str, object] = {}
    for name, (ref, module, nbytes, flops) in CASES.items():
        if only and name not in only:
            continue
        work = out / name
        t0 = time.monotonic()
        cand = candidate_for(SRC / ref, module)
        v = verify(Task(path=SRC / ref), cand, work / "run", opts)
        if module is None:  # generated sources are part of the record; profile_src's stay where they are
            for fname, text in cand.files.items():
                (work / fname).write_text(text)
        if (work / "run" / "ncu.csv").exists():
            shutil.copy(work / "run" / "ncu.csv", work / "ncu.csv")
        # The Verifier keeps ncu's report as run/ncu.ncu-rep; CI reads its rule results with the
        # ncu-report package, no Nsight Compute or GPU there.
        if (work / "run" / "ncu.ncu-rep").exists():
            shutil.copy(work / "run" / "ncu.ncu-rep", work / "ncu.ncu-rep")
        (work / "verdict.json").write_text(v.to_json())
        ms = v.ours.median_ms if v.ours else None
        # The kernel's own time, measured apart from NCU (CUPTI, in the Verifier's timeline of one
        # forward); the forward's median also holds its launch and the L2 flush's write-backs.
        us = sum(v.kernel_us.values()) or None
        summary[name] = {
            "status": v.status, "message": v.message, "median_ms": ms, "kernel_us": us,
            "hand_bytes": nbytes, "hand_flops": flops,
            "hand_bytes_per_s": nbytes / (ms * 1e-3) if ms else None,
            "hand_flops_per_s": flops / (ms * 1e-3) if ms else None,
            "hand_bytes_per_kernel_s": nbytes / (us * 1e-6) if us else None,
            "hand_flops_per_kernel_s": flops / (us * 1e-6) if us else None,
            "ncu_s": v.phases.get("ncu"), "notes": v.notes,
            "findings": [f.message for f in v.findings], "seconds": round(time.monotonic() - t0, 1),
        }
        print(name, json.dumps(summary[name], indent=1), flush=True)
        shutil.rmtree(work / "run", ignore_errors=True)
    (out / "handcalc.json").write_text(json.dumps(summary, indent=2))

    kb = Path(os.environ.get("KERNELBENCH", ".carry/kernelbench")).resolve()
    for problem in REFERENCE_PROBLEMS:
        if only and "reference" not in only:
            break
        path = kb / problem
        rec = out / "reference" / f"{path.stem}.events.json"
        rec.parent.mkdir(parents=True, exist_ok=True)
        prof = profile_in_subprocess(Task(path=path), device="cuda:0", iterations=1, record=rec)
        (out / "reference" / f"{path.stem}.profile.json").write_text(json.dumps(prof.to_dict(), indent=1))
        print(format_table(prof, top=8), flush=True)

    # Nsight Systems on the same two problems: the SQLite exports are kept as CPU-test fixtures.
    from stitchcuda.profiling import nsys

    for problem in REFERENCE_PROBLEMS:
        if only and "nsys" not in only:
            break
        path = kb / problem
        keep = out / "nsys" / path.stem
        t0 = time.monotonic()
        prof = nsys.profile_in_subprocess(Task(path=path), device="cuda:0", iterations=3, keep=keep)
        for f in keep.glob("reference.*rep"):
            f.unlink()  # the SQLite export is what the tests read; the report itself is large
        (keep / "profile.json").write_text(json.dumps({**prof.to_dict(), "seconds": round(time.monotonic() - t0, 1)}, indent=1))
        print(f"nsys ({nsys.find_nsys()}), {time.monotonic() - t0:.1f} s", flush=True)
        print(format_table(prof, top=8), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(os.environ.get("OUT", "/tmp/stitchcuda-out")) / "profiles", sys.argv[1:]))
