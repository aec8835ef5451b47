"""GPU timing in the manner of KernelBench's timing.py: CUDA events around each call, warm-up
first, the L2 cache flushed before every trial, a device-wide synchronise after it, the median."""

from __future__ import annotations

import ctypes
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from stitchcuda.types import Timing

# The primitives the timing calls, bound when this module is imported: the worker imports it before
# the candidate, so a candidate that rebinds torch.cuda.Event.elapsed_time, synchronize or the clock
# changes nothing here (and agents/verify/tamper.py reports that it tried).
_Event = torch.cuda.Event
_record = torch.cuda.Event.record
_elapsed = torch.cuda.Event.elapsed_time
_synchronize = torch.cuda.synchronize
_perf_counter = time.perf_counter
_median = statistics.median
_CDLL = ctypes.CDLL

# cudaLimitPersistingL2CacheSize (cuda_runtime_api.h's cudaLimit enum).
_LIMIT_PERSISTING_L2 = 0x06


def persisting_l2_reset() -> Callable[[], None] | None:
    """A function that returns every persisting L2 line to normal and the persisting carve-out to 0,
    through the CUDA runtime PyTorch loaded: lines a candidate marked persisting (an access policy
    window on its stream) would otherwise survive the flush and serve the next trial from L2. None
    where no CUDA runtime is loaded (a CPU build of torch). Errors are cleared at once: the runtime
    keeps a last error per thread, which PyTorch's next launch check would otherwise report."""
    try:
        with open("/proc/self/maps") as maps:
            paths = sorted({line.split()[-1] for line in maps if "libcudart.so" in line})
    except OSError:
        return None
    for path in paths:
        try:
            lib = _CDLL(path)
            reset, set_limit, clear = lib.cudaCtxResetPersistingL2Cache, lib.cudaDeviceSetLimit, lib.cudaGetLastError
        except (OSError, AttributeError):
            continue
        set_limit.argtypes = [ctypes.c_int, ctypes.c_size_t]

        def run(set_limit=set_limit, reset=reset, clear=clear) -> None:
            if set_limit(_LIMIT_PERSISTING_L2, 0) != 0 or reset() != 0:
                clear()  # (a GPU without persisting L2: nothing persists there to reset)

        return run
    return None


class L2Flusher:
    """Writing a buffer larger than L2 evicts the previous trial's data (H100: 50 MB of L2), after
    any lines marked persisting are made normal again (persisting_l2_reset)."""

    def __init__(self, device: torch.device):
        props = torch.cuda.get_device_properties(device)
        size = max(4 * int(getattr(props, "L2_cache_size", 50 << 20)), 256 << 20)
        self.buf = torch.empty(size // 4, dtype=torch.int32, device=device)
        self.reset_persisting = persisting_l2_reset()

    def __call__(self) -> None:
        if self.reset_persisting is not None:
            self.reset_persisting()  # persisting lines are not evicted by the flush below
        self.buf.zero_()


def time_cuda(
    fn: Callable[[list[Any]], Any],
    input_sets: Sequence[list[Any]],
    *,
    trials: int = 50,
    warmup_ms: float = 25.0,
    min_warmup: int = 3,
    flusher: L2Flusher | None = None,
    check: Callable[[int, Any], None] | None = None,
    before: Callable[[int], None] | None = None,
) -> tuple[Timing, Any]:
    """Median of `trials` calls.

    With several input sets, the inputs live in one set of buffers whose contents are rewritten
    (outside the timed window) from set `i % len(input_sets)` before trial i: the addresses stay
    and the contents change, so a cache keyed on input addresses returns stale outputs and one
    keyed on tensor versions misses. `check(set_index, output)`, if given, sees every timed output
    (also outside the timed window), so what was timed is what was checked. `before(set_index)`
    runs before each call, outside the timed window (the Verifier seeds the generator there, so a
    module's random draws are the ones its checks expect). Returns the timing and the last output."""
    device = torch.device("cuda", torch.cuda.current_device())
    flusher = flusher or L2Flusher(device)
    single = len(input_sets) == 1  # inputs too large for a second copy: timed in place
    live = (
        list(input_sets[0])
        if single
        else [a.clone() if isinstance(a, torch.Tensor) else a for a in input_sets[0]]
    )

    def load(i: int) -> list[Any]:
        if not single:
            for dst, a in zip(live, input_sets[i % len(input_sets)], strict=True):
                if isinstance(dst, torch.Tensor):
                    dst.copy_(a)
        return live

    out = None
    # Warm-up: at least `min_warmup` calls and `warmup_ms` of work (module load, handles, autotune).
    t0 = _perf_counter()
    k = 0
    while k < min_warmup or (_perf_counter() - t0) * 1e3 < warmup_ms and k < 1000:
        if before is not None:
            before(k % len(input_sets))
        out = fn(load(k))
        _synchronize()
        k += 1
    times = []
    start = _Event(enable_timing=True)
    end = _Event(enable_timing=True)
    for i in range(trials):
        if before is not None:
            before(i % len(input_sets))
        args = load(i)
        out = None  # the previous output's memory may be reused: a lazy candidate gets stale data
        flusher()
        _synchronize()
        _record(start)
        out = fn(args)
        _record(end)
        _synchronize()
        times.append(_elapsed(start, end))
        if check is not None:
            check(i % len(input_sets), out)
    return Timing(_median(times), min(times), max(times), trials), out
