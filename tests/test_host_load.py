"""The host sampler the bench records beside its throughput (stitchcuda/host_load.py)."""

from __future__ import annotations

import statistics
import time

import pytest

from stitchcuda import host_load

CPUINFO = """processor\t: 0
model name\t: Intel(R) Xeon(R) Platinum 8480+
cpu MHz\t\t: 3800.000
cache size\t: 107520 KB

processor\t: 1
cpu MHz\t\t: 2000.5
flags\t\t: fpu vme
"""


def test_cpuinfo_gives_each_cores_clock():
    assert host_load.parse_cpuinfo_mhz(CPUINFO) == [3800.0, 2000.5]
    assert host_load.parse_cpuinfo_mhz("processor : 0\ncpu MHz : n/a\n") == []


def test_samples_through_the_block_and_at_its_end():
    with host_load.HostLoad(interval_s=0.05) as h:
        time.sleep(0.3)
    s = h.summary()
    assert s["samples"] >= 4 and s["load1_mean"] >= 0 and s["load1_max"] >= s["load1_mean"]
    mhz, source = host_load.read_core_mhz()
    if not mhz:
        pytest.skip(f"this host gives no CPU clock: {source}")
    assert s["clock_source"] == source and 0 < s["cpu_mhz_min"] <= s["cpu_mhz_mean"] <= s["cpu_mhz_max"]


def test_a_block_shorter_than_one_interval_still_has_its_ends():
    with host_load.HostLoad(interval_s=60) as h:
        pass
    assert h.summary()["samples"] == 2


def test_core_and_gil_timings_are_sampled_and_a_busy_gil_shows():
    import threading

    stop = threading.Event()

    def spin() -> None:  # pure Python: holds the GIL for its switch interval at a time
        while not stop.is_set():
            sum(range(1000))

    idle = min(host_load.gil_ms() for _ in range(5))
    threads = [threading.Thread(target=spin) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        busy = statistics.median(host_load.gil_ms() for _ in range(5))
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert busy > 2 * idle, (idle, busy)  # four threads wanting the GIL: the loop waits its turns
    with host_load.HostLoad(interval_s=0.05) as h:
        time.sleep(0.2)
    s = h.summary()
    assert 0 < s["core_ms_first"] and s["core_ms_median"] <= s["core_ms_max"]
    assert 0 < s["gil_ms_first"] and s["gil_ms_median"] <= s["gil_ms_max"]
