"""Where Nsight Compute's time goes on a candidate of many kernels: ncu's output lines, timestamped.

Usage (on the GPU machine, after scripts/gpu_run.sh has assembled the package):
    python3 scripts/probe_ncu_overhead.py REFERENCE.py CANDIDATE_DIR [N_KERNELS]
CANDIDATE_DIR holds a candidate's model_new.py and .cu files (e.g. a bench run's runs/<problem>/).
Profiles the first N_KERNELS (6) of its pointwise kernels (stitch_pwN_kernel) as the Verifier does,
with and without `--kill yes`, and after an unprofiled warm-up forward, against the bare run.
Measured this way on the H100 for bench/results/2026-11-24-h100-ncu-many-kernels.md.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from stitchcuda.profiling import ncu, roofline, source_map

WARM_TARGET = """
import json, sys
from pathlib import Path
import torch
from stitchcuda.inputs import make_inputs
from stitchcuda.task import build_model
from stitchcuda.task import import_file
req = json.loads(Path(sys.argv[1]).read_text())
torch.cuda.set_device(0)
torch.set_grad_enabled(False)
ref, cand = import_file(Path(req["reference"])), import_file(Path(req["candidate"]))
model = build_model(cand.ModelNew, list(ref.get_init_inputs()), 42, torch.device("cuda", 0))
inputs = make_inputs(ref.get_inputs, 1, torch.device("cuda", 0))
model(*inputs)
torch.cuda.synchronize()
torch.cuda.profiler.start()
for _ in range(2):
    model(*inputs)
torch.cuda.synchronize()
torch.cuda.profiler.stop()
"""


def timed(label: str, argv: list[str]) -> None:
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert p.stdout is not None
    for line in p.stdout:
        if line.startswith("==") or "rror" in line:
            print(f"  {time.monotonic() - t0:6.1f} {line.rstrip()[:150]}", flush=True)
    p.wait()
    print(f"{label}: {time.monotonic() - t0:.1f} s, exit {p.returncode}", flush=True)


def main(reference: Path, folder: Path, n: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="ncu-probe-"))
    req = tmp / "request.json"
    req.write_text(json.dumps({"reference": str(reference.resolve()), "candidate": str((folder / "model_new.py").resolve())}))
    files = {p.name: p.read_text() for p in folder.iterdir() if p.suffix in (".py", ".cu")}
    names = [k.name for k in source_map.SourceMap.from_files(files).kernels()]
    pw = sorted((k for k in names if re.fullmatch(r"stitch_pw\d+_kernel", k)), key=lambda k: int(re.findall(r"\d+", k)[0]))
    hot = pw[1:1 + n]  # stitch_pw0 of a KernelBench net is BatchNorm's counter, launched once a forward
    print("kernels:", hot, flush=True)
    tool = ncu.find_ncu() or "ncu"
    target = [sys.executable, "-m", "stitchcuda.profiling.ncu_target", str(req), "2"]
    warm = tmp / "warm_target.py"
    warm.write_text(WARM_TARGET)
    warm_target = [sys.executable, str(warm), str(req)]

    def argv(tgt: list[str], kill: bool, extra: tuple[str, ...] = ()) -> list[str]:
        a = ncu.command(tgt, hot, ncu=tool, launch_count=2 * len(hot), metrics=roofline.METRICS + roofline.LAUNCH_EXTRAS,
                        section_set="basic", report=tmp / "probe.ncu-rep")
        if not kill:
            i = a.index("--kill")
            del a[i:i + 2]
        return a[:1] + list(extra) + a[1:]

    timed("no ncu (builds the candidate where it is not cached)", target)
    timed(f"{len(hot)} kernels x 2 forwards, counters + basic sections", argv(target, kill=False))
    t0 = time.monotonic()
    text = ncu.report_csv(tmp / "probe.ncu-rep", ncu=tool, timeout_s=60)
    print(f"ncu --import of the report: {time.monotonic() - t0:.1f} s, {len(ncu.parse_csv(text))} kernels", flush=True)
    timed("the same, --kill yes", argv(target, kill=True))
    timed("warm-up forward first, --profile-from-start off, --kill yes",
          argv(warm_target, kill=True, extra=("--profile-from-start", "off")))
    timed("no ncu, warm-up target", warm_target)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 6)
