"""The host's CPU clock and load while a bench runs, sampled on a thread.

Throughput over GPUs is bounded by the host: with 16 workers on a 64-core machine every CPU-bound
phase of a problem took 9-40% longer than with 4 (bench/results/2026-11-26-h200x4-level2-scaling-
epilogues-955af83.md), the GPU-locked ones included. Whether the cores ran slower (a lower
all-core clock) or were shared is what these samples tell, recorded beside each run's throughput.

A VM's /proc/cpuinfo gives the nominal clock whatever the load (H200 x4: 2,100 MHz in every sample,
2026-11-27), so two timings are sampled as well: a fixed amount of hashing, which releases the GIL
and so times one core as the host gives it (`core_ms`: slower cores or shared ones make it longer),
and a short pure-Python loop, which needs the bench process's own GIL (`gil_ms`: the bench's
threads crowding its one interpreter make it longer, cores or no cores).
"""

from __future__ import annotations

import glob
import hashlib
import os
import statistics
import threading
import time
from pathlib import Path
from typing import Any

_CPUINFO = Path("/proc/cpuinfo")
_SCALING = "/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_cur_freq"


def parse_cpuinfo_mhz(text: str) -> list[float]:
    """Each core's `cpu MHz` line of /proc/cpuinfo."""
    out = []
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "cpu MHz":
            try:
                out.append(float(value))
            except ValueError:
                continue
    return out


def read_core_mhz() -> tuple[list[float], str]:
    """Each core's current clock in MHz, and where it was read; ([], why) where the host says none."""
    scaling = []
    for f in glob.glob(_SCALING):
        try:
            scaling.append(int(Path(f).read_text()) / 1000.0)  # kHz
        except (OSError, ValueError):
            continue
    if scaling:
        return scaling, "cpufreq scaling_cur_freq"
    try:
        mhz = parse_cpuinfo_mhz(_CPUINFO.read_text())
    except OSError as e:
        return [], f"no cpufreq, and /proc/cpuinfo unreadable: {e}"
    return (mhz, "/proc/cpuinfo") if mhz else ([], "no cpufreq, and no `cpu MHz` in /proc/cpuinfo")


def core_ms() -> float:
    """Milliseconds to hash 4 MiB (the best of three): one core's speed, outside the GIL."""
    data = bytes(4 << 20)  # here, not at import: the CLI imports this module on every start
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        hashlib.sha256(data).digest()
        best = min(best, time.perf_counter() - t)
    return best * 1e3


def gil_ms() -> float:
    """Milliseconds for ten short pure-Python loops, each after letting go of the GIL (sleep(0)) and
    taking it back from this process's other threads."""
    t = time.perf_counter()
    total = 0
    for _ in range(10):
        time.sleep(0)
        for k in range(2000):
            total += k
    return (time.perf_counter() - t) * 1e3


class HostLoad:
    """Samples every `interval_s` while in its `with` block: the cores' mean clock and the load average."""

    def __init__(self, interval_s: float = 5.0):
        self.interval_s = interval_s
        self._mhz: list[float] = []
        self._load: list[float] = []
        self._core: list[float] = []
        self._gil: list[float] = []
        self._source = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="host-load", daemon=True)

    def _sample(self) -> None:
        mhz, self._source = read_core_mhz()
        if mhz:
            self._mhz.append(statistics.fmean(mhz))
        try:
            self._load.append(os.getloadavg()[0])
        except OSError:
            pass
        self._core.append(core_ms())
        self._gil.append(gil_ms())

    def _run(self) -> None:
        self._sample()
        while not self._stop.wait(self.interval_s):
            self._sample()

    def __enter__(self) -> HostLoad:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()  # the end, also for a block shorter than one interval

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"cpus": os.cpu_count(), "samples": len(self._load) or len(self._mhz),
                               "interval_s": self.interval_s, "clock_source": self._source}
        if self._mhz:
            out.update(cpu_mhz_mean=round(statistics.fmean(self._mhz), 1), cpu_mhz_min=round(min(self._mhz), 1),
                       cpu_mhz_max=round(max(self._mhz), 1))
        else:
            out["cpu_mhz_mean"] = None
        if self._load:
            out.update(load1_mean=round(statistics.fmean(self._load), 2), load1_max=round(max(self._load), 2))
        if self._core:  # the first sample is taken as the run starts, before its workers
            out.update(core_ms_first=round(self._core[0], 3), core_ms_median=round(statistics.median(self._core), 3),
                       core_ms_max=round(max(self._core), 3), gil_ms_first=round(self._gil[0], 3),
                       gil_ms_median=round(statistics.median(self._gil), 3), gil_ms_max=round(max(self._gil), 3))
        return out
