"""What makes time_cuda's figure for one minimal launch (timing.one_launch_us) 20 us inside the
Verifier's worker, where a plain process is said to give a few: each condition the worker adds,
alone, in a fresh child process.

Usage (on the GPU machine, after scripts/gpu_run.sh has assembled the package):
    python3 scripts/probe_launch_floor.py OUT.json
Each variant runs in a child process of its own (median of 3 rounds of one_launch_us, 50 trials
each) and, beside it, the same child's one-element allocation host time (timing.empty_us):
- plain: L2Flusher as the worker builds it;
- no-persisting-reset: the flush without cudaDeviceSetLimit/cudaCtxResetPersistingL2Cache first;
- no-flush: no flush between trials at all;
- audit-hook: a Python audit hook installed (it does nothing);
- after-profiler: after one torch.profiler run with CPU and CUDA activities (the stream check);
- thread-watch: native_threads' library preloaded (LD_PRELOAD), as the worker has it;
- sandbox: inside bubblewrap, as agents/verify/sandbox.Box runs the worker;
- sibling-context: while another process holds an idle CUDA context on the same GPU;
- sibling-busy: while another process launches small kernels on the same GPU without pause.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r"""
import json, statistics, sys
import torch
from stitchcuda.agents.verify.timing import L2Flusher, empty_us, one_launch_us, time_cuda
variant = sys.argv[1]
dev = torch.device("cuda", 0)
torch.zeros(1, device=dev)
if variant == "audit-hook":
    sys.addaudithook(lambda event, args: None)
if variant == "after-profiler":
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
        torch.ones(1024, device=dev).sum().item()
flusher = L2Flusher(dev)
if variant == "no-persisting-reset":
    flusher.reset_persisting = None
rounds = []
for _ in range(3):
    if variant == "no-flush":
        t, _ = time_cuda(lambda a: torch._C._cuda_sleep(1), [[]], trials=50, flusher=lambda: None, warmup_ms=0.0)
        rounds.append(round(t.median_ms * 1e3, 2))
    else:
        rounds.append(one_launch_us(flusher, trials=50))
print(json.dumps({"one_launch_us": statistics.median(rounds), "rounds": rounds, "empty_us": empty_us(dev)}))
"""

SIBLING_IDLE = "import time, torch; torch.zeros(1, device='cuda'); print('ready', flush=True); time.sleep(120)"
SIBLING_BUSY = ("import time, torch; x = torch.zeros(1024, device='cuda'); print('ready', flush=True)\n"
                "t = time.time()\nwhile time.time() - t < 120:\n    x.add_(1); torch.cuda.synchronize()")


def child(variant: str, env: dict[str, str], wrap=None) -> dict:
    argv = [sys.executable, "-c", CHILD, variant]
    if wrap is not None:
        argv = wrap(argv)
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        return {"error": r.stderr[-1500:]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def with_sibling(code: str, variant: str, env: dict[str, str]) -> dict:
    sib = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert sib.stdout is not None
        sib.stdout.readline()  # its context exists
        time.sleep(1.0)
        return child(variant, env)
    finally:
        sib.kill()
        sib.wait()


def main() -> None:
    out = Path(sys.argv[1])
    env = dict(os.environ)
    results: dict[str, dict] = {}
    for variant in ("plain", "no-persisting-reset", "no-flush", "audit-hook", "after-profiler"):
        results[variant] = child(variant, env)
        print(variant, results[variant], flush=True)

    from stitchcuda import runtime
    from stitchcuda.agents.verify import native_threads
    lib = native_threads.library(runtime.cache_dir())
    if lib is not None:
        pre = dict(env)
        native_threads.preload(pre, lib)
        results["thread-watch"] = child("plain", pre)
    else:
        results["thread-watch"] = {"error": "no C compiler for the preload library"}
    print("thread-watch", results["thread-watch"], flush=True)

    from stitchcuda.agents.verify.sandbox import Box
    with tempfile.TemporaryDirectory() as run:
        box = Box.for_run(Path(run), env)
        results["sandbox"] = child("plain", box.env, box.wrap) if box.active else {"error": box.why}
    print("sandbox", results["sandbox"], flush=True)

    results["sibling-context"] = with_sibling(SIBLING_IDLE, "plain", env)
    print("sibling-context", results["sibling-context"], flush=True)
    results["sibling-busy"] = with_sibling(SIBLING_BUSY, "plain", env)
    print("sibling-busy", results["sibling-busy"], flush=True)
    out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
