"""Pointwise kernel shapes on the shipped example's chain, against torch.compile, in one process.

Run on the GPU machine from the repository root (about 30 s on an H200, builds included):
    python3 scripts/bench_pointwise.py [--trials 40] [--rounds 2] [--json OUT.json]

Times, on the same inputs (x, gate: 8192 x 4096 fp32; scale, shift: 4096) and the same way:
- the hand-written variants of scripts/bench_pointwise.cu (block size, chunks a thread, loop or
  exact grid, vector or scalar broadcast loads, __fdividef or IEEE division, 32- or 64-bit indices,
  launch bounds);
- the kernel codegen writes for the example under each pointwise flag setting (GENERATED);
- torch.compile's kernel for examples/gated_block.py's Block.
Each trial: a 256 MB memset flushes L2, a spin kernel (torch.cuda._sleep) holds the stream ~1 ms so
the host has queued the call before the GPU reaches it, CUDA events around the call; the figure is
the median of `--trials`, per round (rounds run the list in alternating order, so drift shows).
Every output is compared with the first variant's (max |diff|). The nvcc builds run while
torch.compile compiles.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
ROWS, FEAT = 8192, 4096
BYTES = (3 * ROWS * FEAT + 2 * FEAT) * 4  # x and gate read, out written, scale and shift read
PW_FLAGS = ("STITCHCUDA_PW_SHAPE", "STITCHCUDA_PW_VEC_BROADCAST", "STITCHCUDA_FAST_EXP", "STITCHCUDA_PW_VECTORS",
            "STITCHCUDA_PW_MINB")
# Label -> the pointwise flags codegen sees while writing the example's kernel (others unset).
GENERATED = {
    "codegen default": {},
    "codegen PW_MINB=12": {"STITCHCUDA_PW_MINB": "12"},
    "codegen PW_MINB=16": {"STITCHCUDA_PW_MINB": "16"},
    "codegen PW_VECTORS=1": {"STITCHCUDA_PW_VECTORS": "1"},
    "codegen PW_VECTORS=1 PW_MINB=16": {"STITCHCUDA_PW_VECTORS": "1", "STITCHCUDA_PW_MINB": "16"},
    "codegen PW_VECTORS=4": {"STITCHCUDA_PW_VECTORS": "4"},
    "codegen PW_SHAPE=grid-stride": {"STITCHCUDA_PW_SHAPE": "grid-stride"},
}


@dataclass
class Variant:
    name: str
    run: Callable[[], None]
    out: Callable[[], torch.Tensor]  # its output after run()


def nvcc_flags(arch: str) -> list[str]:
    """runtime.build's flags for a .cu, so the kernels build as the candidates' do."""
    return ["-O3", f"-arch={arch}", "-shared", "-Xcompiler", "-fPIC", "-std=c++17", "-lineinfo"]


def start_build(src: Path, lib: Path, arch: str) -> subprocess.Popen:
    return subprocess.Popen(
        ["nvcc", *nvcc_flags(arch), "-o", str(lib), str(src)], stderr=subprocess.PIPE, text=True
    )


def finish_build(proc: subprocess.Popen, lib: Path) -> ctypes.CDLL:
    _, err = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"nvcc failed for {lib.name}:\n{err}")
    return ctypes.CDLL(str(lib))


def import_stitchcuda() -> None:
    """Make `stitchcuda` importable without pip, as scripts/gpu_run.sh does: its package-dir maps
    agents/, profiling/ and server/ into it."""
    try:
        import stitchcuda.agents.coder.codegen  # noqa: F401  (installed, or gpu_run.sh's path)

        return
    except ImportError:
        pass
    pkg = Path(tempfile.mkdtemp(prefix="stitchcuda-path-")) / "stitchcuda"
    pkg.mkdir()
    for f in (ROOT / "stitchcuda").iterdir():
        (pkg / f.name).symlink_to(f)
    for sub in ("agents", "profiling", "server"):
        (pkg / sub).symlink_to(ROOT / sub)
    sys.path.insert(0, str(pkg.parent))


def example_block() -> type[torch.nn.Module]:
    spec = importlib.util.spec_from_file_location("gated_block", ROOT / "examples" / "gated_block.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Block


@contextlib.contextmanager
def pw_env(flags: dict[str, str]) -> Iterator[None]:
    saved = {k: os.environ.pop(k, None) for k in PW_FLAGS}
    os.environ.update(flags)
    try:
        yield
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None)
            if v is not None:
                os.environ[k] = v


def generated_sources(folder: Path) -> dict[str, tuple[Path, list[str]]]:
    """Label -> (the .cu codegen writes for the example's one pointwise group under those flags, the
    graph names of its launcher's inputs in order)."""
    import_stitchcuda()
    from stitchcuda.agents import graph
    from stitchcuda.agents.coder import codegen
    from stitchcuda.agents.plan import planner

    fake = torch.empty(()).expand(ROWS, FEAT)  # traced shapes only
    plan = planner.plan_graph(graph.trace_module(example_block()(FEAT), [fake, fake]))
    assert plan.supported and len(plan.groups) == 1, plan.unsupported
    sources = {}
    for k, (label, flags) in enumerate(GENERATED.items()):
        with pw_env(flags):
            kernel = codegen.lower(plan.graph, plan.groups[0], "stitch_pw0")
            src = folder / f"generated{k}.cu"
            src.write_text(codegen.render([kernel]))
        sources[label] = (src, [a.name for a in kernel.inputs])
    return sources


def spin_cycles_per_ms() -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = 0.0
    for _ in range(3):
        start.record()
        torch.cuda._sleep(1_000_000)
        end.record()
        end.synchronize()
        best = max(best, 1_000_000 / start.elapsed_time(end))
    return best


def gpu_us(run: Callable[[], None], flush: torch.Tensor, lead: int, trials: int) -> float:
    """Median GPU time of run(), L2 flushed, queued behind a spin kernel (the host is ahead)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(3):
        run()
    torch.cuda.synchronize()
    times = []
    for _ in range(trials):
        flush.zero_()
        torch.cuda._sleep(lead)
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


def ptr(t: torch.Tensor) -> ctypes.c_void_p:
    return ctypes.c_void_p(t.data_ptr())


def stream() -> ctypes.c_void_p:
    return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)


def checked(rc: int, what: str) -> None:
    if rc != 0:
        raise RuntimeError(f"{what}: CUDA error {rc}")


def hand_written(lib: ctypes.CDLL, t: dict[str, torch.Tensor], out: torch.Tensor) -> list[Variant]:
    lib.pw_name.restype = ctypes.c_char_p
    args = [ptr(t["x"]), ptr(t["gate"]), ptr(t["scale"]), ptr(t["shift"]), ptr(out)]

    def make(v: int, name: str) -> Variant:
        return Variant(name, lambda: checked(lib.pw_run(v, *args, stream()), name), lambda: out)

    return [make(v, lib.pw_name(v).decode()) for v in range(lib.pw_count())]


def generated(
    lib: ctypes.CDLL, label: str, inputs: list[str], t: dict[str, torch.Tensor], out: torch.Tensor
) -> Variant:
    args = [ptr(t[name]) for name in inputs] + [ptr(out)]
    return Variant(label, lambda: checked(lib.stitch_pw0(*args, stream()), label), lambda: out)


def compiled(block: torch.nn.Module, t: dict[str, torch.Tensor]) -> Variant:
    fn = torch.compile(block)
    result: list[torch.Tensor] = [fn(t["x"], t["gate"])]  # compiles here

    def run() -> None:
        result[0] = fn(t["x"], t["gate"])

    return Variant("torch.compile (Inductor/Triton)", run, lambda: result[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", type=Path)
    ap.add_argument("json_out", nargs="?", type=Path, help="as --json (gpu_run.sh's py: stage passes one)")
    opts = ap.parse_args()
    opts.json = opts.json or opts.json_out
    torch.set_grad_enabled(False)
    major, minor = torch.cuda.get_device_capability()
    arch = f"sm_{major}{minor}"
    folder = Path(tempfile.mkdtemp(prefix="bench-pointwise-"))
    builds = {
        "hand": (
            start_build(ROOT / "scripts" / "bench_pointwise.cu", folder / "hand.so", arch),
            folder / "hand.so",
        )
    }
    try:
        sources = generated_sources(folder)
    except Exception as e:  # the hand-written variants and torch.compile still run
        print(f"codegen's kernels skipped: {type(e).__name__}: {e}")
        sources = {}
    for k, (label, (src, _)) in enumerate(sources.items()):
        builds[label] = (start_build(src, folder / f"gen{k}.so", arch), folder / f"gen{k}.so")

    g = torch.Generator(device="cuda").manual_seed(0)
    t = {
        name: torch.randn(shape, device="cuda", generator=g)
        for name, shape in [
            ("x", (ROWS, FEAT)),
            ("gate", (ROWS, FEAT)),
            ("scale", (FEAT,)),
            ("shift", (FEAT,)),
        ]
    }
    block = example_block()(FEAT).cuda()
    block.scale.copy_(t["scale"])
    block.shift.copy_(t["shift"])
    variants = [compiled(block, t)]  # compiles while nvcc builds
    outs = {label: torch.empty(ROWS, FEAT, device="cuda") for label in builds}
    variants = hand_written(finish_build(*builds["hand"]), t, outs["hand"]) + variants
    for label, (_, inputs) in sources.items():
        variants.append(generated(finish_build(*builds[label]), label, inputs, t, outs[label]))

    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    lead = int(spin_cycles_per_ms())  # ~1 ms
    diffs = []
    for v in variants:
        v.run()
        torch.cuda.synchronize()
        diffs.append((v.out() - variants[0].out()).abs().max().item())
    times: list[list[float]] = [[] for _ in variants]
    for r in range(opts.rounds):
        order = range(len(variants)) if r % 2 == 0 else reversed(range(len(variants)))
        for k in order:
            times[k].append(gpu_us(variants[k].run, flush, lead, opts.trials))

    print(
        f"{torch.cuda.get_device_name()}  torch {torch.__version__}  {ROWS}x{FEAT} fp32, L2 flushed, "
        f"median of {opts.trials}, {opts.rounds} rounds"
    )
    print(f"{'variant':<52} {'us per round':>18} {'TB/s':>6}  max diff")
    rows = []
    for v, ts, d in zip(variants, times, diffs, strict=True):
        best = min(ts)
        print(f"{v.name:<52} {' '.join(f'{x:8.1f}' for x in ts):>18} {BYTES / best / 1e6:6.2f}  {d:.2g}")
        rows.append({"variant": v.name, "us": ts, "tb_s": BYTES / best / 1e6, "max_diff": d})
    if opts.json:
        meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "trials": opts.trials}
        opts.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
