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
_gpu_sleep = getattr(torch._C, "_cuda_sleep", None)  # a spin kernel of N clock cycles

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
    hosts = []
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
        h0 = _perf_counter()
        out = fn(args)
        h1 = _perf_counter()
        _record(end)
        _synchronize()
        times.append(_elapsed(start, end))
        hosts.append((h1 - h0) * 1e3)
        if check is not None:
            check(i % len(input_sets), out)
    return Timing(_median(times), min(times), max(times), trials, round(_median(hosts), 5)), out


# How long the GPU is held busy ahead of a call (time_gpu_ahead): at least this, and at least
# LEAD_FACTOR times the call's own host time, up to MAX_LEAD_MS.
MIN_LEAD_MS = 0.5
LEAD_FACTOR = 4.0
MAX_LEAD_MS = 50.0


def _spin_cycles_per_ms(start: Any, end: Any) -> float:
    """Clock cycles per millisecond of the spin kernel: measured, not the device's nominal clock
    (boost varies), and the fastest of three, so a clock still rising from idle cannot make a lead
    fall short."""
    assert _gpu_sleep is not None
    cycles_per_ms = 0.0
    for _ in range(3):
        _synchronize()
        _record(start)
        _gpu_sleep(1_000_000)
        _record(end)
        _synchronize()
        cycles_per_ms = max(cycles_per_ms, 1_000_000 / max(_elapsed(start, end), 1e-3))
    return cycles_per_ms


def time_gpu_ahead(
    fn: Callable[[list[Any]], Any],
    args: list[Any],
    *,
    trials: int = 20,
    flusher: L2Flusher | None = None,
    before: Callable[[], None] | None = None,
) -> Timing | None:
    """The same call's GPU time alone: its kernels run back to back, with none of the host path in
    the figure. Each trial is time_cuda's (L2 flushed, synchronised, events around the call), with
    one difference: a spin kernel holds the stream for several times the call's host time first,
    so by the time the GPU reaches the start event every launch of the call is already queued.
    time_cuda's figure less this one is what the host path costs each forward.

    None where that cannot be measured: no spin kernel in this torch, or a call that still takes
    longer on the host than the GPU was held (it waits for the GPU: a synchronise, an .item()), so
    the GPU would idle inside the window whatever the lead."""
    if _gpu_sleep is None or trials <= 0:
        return None
    device = torch.device("cuda", torch.cuda.current_device())
    flusher = flusher or L2Flusher(device)
    start, end = _Event(enable_timing=True), _Event(enable_timing=True)
    cycles_per_ms = _spin_cycles_per_ms(start, end)
    host_ms = []
    for _ in range(3):
        if before is not None:
            before()
        _synchronize()
        t0 = _perf_counter()
        fn(args)
        host_ms.append((_perf_counter() - t0) * 1e3)
        _synchronize()
    lead_ms = max(MIN_LEAD_MS, LEAD_FACTOR * _median(host_ms))
    if lead_ms > MAX_LEAD_MS:
        return None
    times: list[float] = []
    attempts = 0
    while len(times) < trials and attempts < 2 * trials:
        attempts += 1
        if before is not None:
            before()
        flusher()
        _synchronize()
        _gpu_sleep(int(lead_ms * cycles_per_ms))
        _record(start)
        t0 = _perf_counter()
        fn(args)
        _record(end)
        took_ms = (_perf_counter() - t0) * 1e3
        _synchronize()
        if took_ms < 0.8 * lead_ms:
            times.append(_elapsed(start, end))
        elif (lead_ms := 2 * lead_ms) > MAX_LEAD_MS:
            return None  # the host caught up with the GPU: this trial's figure has host time in it
    if len(times) < trials:
        return None
    return Timing(_median(times), min(times), max(times), trials)


def host_us(fn: Callable[[list[Any]], Any], args: list[Any], *, calls: int = 20) -> dict[str, float]:
    """Host microseconds, median of `calls`, each call alone (synchronised first): `forward`, the
    call until it returns (its work queued), and `empty`, a one-element CUDA allocation, as a
    yardstick of how fast this process's host path runs at all (another process, under other load,
    runs the same Python at another speed)."""
    device = torch.device("cuda", torch.cuda.current_device())
    return {"forward": _median_host_us(lambda: fn(args), calls), "empty": empty_us(device, calls=calls)}


def _median_host_us(call: Callable[[], Any], calls: int) -> float:
    """Host microseconds of `call` until it returns, median of `calls`, each alone (synchronised first)."""
    times = []
    for _ in range(calls):
        _synchronize()
        t0 = _perf_counter()
        call()
        times.append((_perf_counter() - t0) * 1e6)
    _synchronize()
    return round(_median(times), 2)


LOOP_CALLS = 20  # forwards a loop figure (loop_us) spreads its two events over
LOOP_ROUNDS = 5


def loop_us(fn: Callable[[list[Any]], Any], args: list[Any], *, calls: int = LOOP_CALLS, rounds: int = LOOP_ROUNDS,
            before: Callable[[], None] | None = None) -> dict[str, float]:
    """A forward's cost where a loop calls it: `calls` forwards back to back between two events, no
    synchronise between them, per call (`loop_forward`, median of `rounds`); the same calls queued
    behind a spin kernel, so the GPU runs their kernels back to back with none of the host path in
    the figure (`loop_gpu`); and their difference (`loop_gap`): what the host path costs each forward
    beyond its kernels' GPU time. One call goes first, untimed, so the GPU is busy when the first
    event is recorded: time_cuda's trials each start on an idle GPU and pay its start-up latency
    (~15 us on an H200: scripts/probe_launch_floor.py), which no forward in a loop pays. Not L2-
    flushed, the two loops alike. {} where this torch has no spin kernel; without `loop_gpu` (and
    the gap) where the calls take longer on the host than MAX_LEAD_MS allows for."""
    if _gpu_sleep is None or calls <= 0 or rounds <= 0:
        return {}
    start, end = _Event(enable_timing=True), _Event(enable_timing=True)

    def run(lead_cycles: int | None) -> tuple[float, float]:
        """(event ms per call, host ms for all the calls); queued behind a spin of `lead_cycles`,
        or (None) behind one untimed call."""
        if before is not None:
            before()
        _synchronize()
        if lead_cycles is not None:
            _gpu_sleep(max(1, lead_cycles))
        else:
            fn(args)  # the GPU is busy from here on: the loop below never starts on an idle GPU
        _record(start)
        t0 = _perf_counter()
        for _ in range(calls):
            fn(args)
        host = (_perf_counter() - t0) * 1e3
        _record(end)
        _synchronize()
        return _elapsed(start, end) / calls, host

    run(None)  # warm
    plain = [run(None) for _ in range(rounds)]
    out = {"loop_forward": round(_median(t for t, _ in plain) * 1e3, 2)}
    cycles_per_ms = _spin_cycles_per_ms(start, end)
    lead_ms = max(MIN_LEAD_MS, LEAD_FACTOR * _median(h for _, h in plain))
    if lead_ms > MAX_LEAD_MS:
        return out
    queued = []
    for _ in range(2 * rounds):
        per_call, host = run(int(lead_ms * cycles_per_ms))
        if host < 0.8 * lead_ms:
            queued.append(per_call)
        if len(queued) == rounds:
            break
    if len(queued) < rounds:
        return out
    out["loop_gpu"] = round(_median(queued) * 1e3, 2)
    out["loop_gap"] = round(out["loop_forward"] - out["loop_gpu"], 2)
    return out


def one_launch_us(flusher: L2Flusher, *, trials: int = 20) -> float | None:
    """time_cuda's figure, in microseconds, for a call that launches one minimal kernel and nothing
    else: what timing itself costs a forward in this process (the host's launch, the GPU's start
    latency, whatever else delays a kernel here). A plain process gives a few microseconds; where it
    gives far more, the surplus in a candidate's timed figure is this process's, not its forward's."""
    if _gpu_sleep is None:
        return None
    timing, _ = time_cuda(lambda a: _gpu_sleep(1), [[]], trials=trials, flusher=flusher, min_warmup=3, warmup_ms=0.0)
    return round(timing.median_ms * 1e3, 2)


def empty_us(device: torch.device, *, calls: int = 20) -> float:
    """A one-element CUDA allocation's host microseconds, median of `calls`: the yardstick host_us
    sets beside a forward, also taken where the worker starts, before any candidate or profiler has
    run in it (a yardstick that grows between the two says the worker's own steps slowed its host
    path, not the candidate)."""
    return _median_host_us(lambda: torch.empty(1, device=device), calls)


def host_state() -> dict[str, float]:
    """What in this process can slow every op's host path, as counts: Python dispatch and function
    modes on the stack, an active autograd profiler, a profile or trace function, live threads."""
    import sys
    import threading

    def count(name: str) -> float:  # -1: this torch does not say (private API, as torch names it today)
        fn = getattr(torch._C, name, None)
        return float(fn()) if callable(fn) else -1.0

    enabled = getattr(torch.autograd.profiler, "_is_profiler_enabled", None)
    return {
        "dispatch_modes": count("_len_torch_dispatch_stack"),
        "function_modes": count("_len_torch_function_stack"),
        "profiler_on": -1.0 if enabled is None else float(bool(enabled)),
        "profile_fn": float(sys.getprofile() is not None or sys.gettrace() is not None),
        "threads": float(threading.active_count()),
    }
