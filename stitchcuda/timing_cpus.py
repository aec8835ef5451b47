"""CPUs kept for whichever worker holds a GPU's lock, so that what it times runs on a quiet CPU.

The GPU lock serialises the GPU work of the workers that share a GPU, not their CPU work. Beside a
timed forward, the other workers build with nvcc, compile with Inductor and start processes, and an
eager or torch.compile forward that launches hundreds of kernels is bound by the one core that
launches them: level 3 on an H200 with six workers (bench/results/2026-11-29-h200-blind-check-l3-
849099e.md) timed eager MobileNetV1 at 4.95 ms against 2.53 ms in a quieter run, while our candidates,
replayed CUDA graphs, held their times. Load on the host is then a handicap for the baselines only.

So a bench keeps whole physical cores per GPU out of its own affinity (every process it starts
inherits that), and the worker holding a GPU's lock moves its threads onto that GPU's cores while it
holds it, and back after. Nothing here assumes a core count: the plan comes from the process's
affinity and the kernel's topology files, and where too few cores would be left it reserves none.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path

ENV = "STITCHCUDA_TIMING_CPUS"  # the worker's: the CPUs it times on while it holds its GPU's lock ("3,11")
OFF_ENV = "STITCHCUDA_RESERVE_TIMING_CPUS"  # "0": no reservation
PER_GPU = 2  # logical CPUs at least, as whole physical cores: the launching thread and the driver's
LEFT_AT_LEAST = 4  # CPUs the rest of the bench keeps, or nothing is reserved
_SYSFS = Path("/sys/devices/system/cpu")
_RESERVED: dict[str, list[int]] = {}  # physical GPU id -> its CPUs, while a reservation is held


def physical_cores(cpus: set[int], sysfs: Path = _SYSFS) -> list[list[int]]:
    """`cpus` grouped by the physical core they share (SMT siblings together), in CPU order; a CPU
    whose topology cannot be read is a core of its own."""
    cores: dict[tuple[str, str] | int, list[int]] = {}
    for cpu in sorted(cpus):
        topo = sysfs / f"cpu{cpu}" / "topology"
        try:
            key: tuple[str, str] | int = ((topo / "physical_package_id").read_text().strip(),
                                          (topo / "core_id").read_text().strip())
        except OSError:
            key = cpu
        cores.setdefault(key, []).append(cpu)
    return sorted(cores.values())


def plan(cpus: set[int], gpus: list[str], sysfs: Path = _SYSFS) -> dict[str, list[int]]:
    """Each GPU's reserved CPUs: whole physical cores from the end of `cpus` (the first ones are where
    the system's own work tends to land), at least PER_GPU logical CPUs a GPU; {} where fewer than
    LEFT_AT_LEAST CPUs would be left for everything else."""
    cores = physical_cores(cpus, sysfs)
    out: dict[str, list[int]] = {}
    for gpu in gpus:
        mine: list[int] = []
        while cores and len(mine) < PER_GPU:
            mine = sorted(mine + cores.pop())
        if len(mine) < PER_GPU:
            return {}
        out[gpu] = mine
    return out if len(cpus) - sum(len(c) for c in out.values()) >= LEFT_AT_LEAST else {}


@contextlib.contextmanager
def reserved(gpus: list[str]) -> Iterator[dict[str, list[int]]]:
    """For a bench's lifetime: each GPU's timing CPUs taken out of this process's affinity (every
    process it starts from now on inherits the rest) and handed to the workers by `assign`."""
    if os.environ.get(OFF_ENV, "1") == "0" or not hasattr(os, "sched_setaffinity"):
        yield {}
        return
    before = os.sched_getaffinity(0)
    got = plan(set(before), gpus)
    if got:
        try:
            _move_threads(before - {c for cs in got.values() for c in cs})
        except OSError:
            got = {}
    _RESERVED.update(got)
    try:
        yield got
    finally:
        for gpu in got:
            _RESERVED.pop(gpu, None)
        if got:
            with contextlib.suppress(OSError):
                _move_threads(before)


def assign(env: dict[str, str], gpu: str) -> None:
    """The worker's environment: the CPUs it moves to while it holds `gpu`'s lock, where reserved."""
    if cpus := _RESERVED.get(gpu):
        env[ENV] = ",".join(map(str, cpus))
    else:
        env.pop(ENV, None)


def from_env() -> set[int]:
    try:
        return {int(c) for c in os.environ.get(ENV, "").split(",") if c.strip()}
    except ValueError:
        return set()


@contextlib.contextmanager
def held(cpus: set[int]) -> Iterator[bool]:
    """Every thread of this process on `cpus` while inside, each back on its own CPUs after; yields
    whether they moved (no reservation, or a host that refuses: timing goes on where it was)."""
    if not cpus or not hasattr(os, "sched_setaffinity"):
        yield False
        return
    try:
        saved = _move_threads(cpus)
    except OSError:
        yield False
        return
    try:
        yield True
    finally:
        for tid, mask in saved.items():
            with contextlib.suppress(OSError):  # (a thread that ended meanwhile)
                os.sched_setaffinity(tid, mask)
        # Threads started while it held them (the profiler's, a thread pool's) were born on the kept
        # CPUs: they leave with the rest, onto the CPUs this thread had.
        back = saved.get(threading.get_native_id(), next(iter(saved.values()), None))
        with contextlib.suppress(OSError):
            for t in os.listdir("/proc/self/task"):
                if back is not None and int(t) not in saved:
                    with contextlib.suppress(OSError):
                        os.sched_setaffinity(int(t), back)


def _move_threads(cpus: set[int]) -> dict[int, set[int]]:
    """Every thread of this process onto `cpus` (sched_setaffinity sets one thread's mask: a
    process's other threads, the CUDA driver's among them, keep theirs unless each is moved);
    returns each thread's mask before."""
    saved: dict[int, set[int]] = {}
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        tids = [0]
    try:
        for tid in tids:
            try:
                mask = os.sched_getaffinity(tid)
                os.sched_setaffinity(tid, cpus)
                saved[tid] = mask
            except ProcessLookupError:
                continue
    except OSError:
        for tid, mask in saved.items():  # all or none
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, mask)
        raise
    return saved
