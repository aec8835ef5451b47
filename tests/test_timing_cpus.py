"""CPUs kept for the GPU lock's holder (stitchcuda/timing_cpus.py): a bench keeps whole physical
cores per GPU out of its own affinity and its children's, and the worker holding the GPU's lock
moves every thread onto them while it holds it. Level 3 with six workers timed eager's launch-bound
networks up to 2x slower than a quieter run while our CUDA-graph replays held their times."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from stitchcuda import timing_cpus
from stitchcuda.agents.verify import worker

needs_two_cpus = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs to move threads between")


def _sysfs(root, cores: dict[int, int]):
    """A topology tree: CPU -> its physical core (package 0)."""
    for cpu, core in cores.items():
        topo = root / f"cpu{cpu}" / "topology"
        topo.mkdir(parents=True)
        (topo / "physical_package_id").write_text("0\n")
        (topo / "core_id").write_text(f"{core}\n")
    return root


def test_whole_physical_cores_are_kept_from_the_end(tmp_path):
    # 8 CPUs, SMT siblings i and i + 4 (as Linux numbers them on most x86 hosts)
    sysfs = _sysfs(tmp_path, {c: c % 4 for c in range(8)})
    assert timing_cpus.physical_cores(set(range(8)), sysfs) == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert timing_cpus.plan(set(range(8)), ["0"], sysfs) == {"0": [3, 7]}
    assert timing_cpus.plan(set(range(8)), ["0", "1"], sysfs) == {"0": [3, 7], "1": [2, 6]}
    # A third GPU would leave 2 CPUs to the rest of the bench: nothing is kept.
    assert timing_cpus.plan(set(range(8)), ["0", "1", "2"], sysfs) == {}


def test_without_topology_each_cpu_is_a_core(tmp_path):
    cpus = set(range(16))
    assert timing_cpus.plan(cpus, ["3"], tmp_path / "none") == {"3": [14, 15]}
    assert timing_cpus.plan({0, 1}, ["0"], tmp_path / "none") == {}  # (CI's two cores: nothing kept)


@needs_two_cpus
def test_every_thread_moves_and_comes_back():
    go, seen = threading.Event(), {}

    def other() -> None:  # a thread the process started before (the CUDA driver's, a watchdog)
        go.wait()
        seen["other"] = os.sched_getaffinity(0)

    t = threading.Thread(target=other)
    t.start()
    before = os.sched_getaffinity(0)
    one = {min(before)}
    with timing_cpus.held(one) as moved:
        assert moved and os.sched_getaffinity(0) == one
        go.set()
        t.join()
    assert seen["other"] == one
    assert os.sched_getaffinity(0) == before
    # A thread started while they were held is born there, and leaves with the rest.
    born, out = threading.Event(), threading.Event()
    masks: dict[str, set[int]] = {}

    def late() -> None:
        born.set()
        out.wait()
        masks["late"] = os.sched_getaffinity(0)

    with timing_cpus.held(one):
        t = threading.Thread(target=late)
        t.start()
        born.wait()
    out.set()
    t.join()
    assert masks["late"] == before
    with timing_cpus.held(set()) as moved:  # no reservation: nothing moves
        assert not moved and os.sched_getaffinity(0) == before


@needs_two_cpus
def test_the_gpu_locks_holder_is_checked_and_timed_on_the_kept_cpus(tmp_path, monkeypatch):
    rec = worker.Recorder({})
    before = os.sched_getaffinity(0)
    kept = max(before)
    monkeypatch.setenv(timing_cpus.ENV, str(kept))
    with worker.gpu_lock(str(tmp_path / "gpu.lock"), rec):
        assert os.sched_getaffinity(0) == {kept}
    assert os.sched_getaffinity(0) == before
    assert [n for n in rec.verdict.notes if n.startswith(worker.TIMED_ON)] == [
        f"{worker.TIMED_ON} {kept}, kept for the holder of the GPU's lock (the bench's other work runs elsewhere)"]
    with worker.gpu_lock(None, rec):  # (the CPU path takes no lock, and stays where it is)
        assert os.sched_getaffinity(0) == before


@needs_two_cpus
def test_a_bench_and_what_it_starts_stay_off_the_kept_cpus(monkeypatch):
    # This host may have two CPUs (CI's): a reservation of one CPU, leaving one, is allowed here.
    monkeypatch.setattr(timing_cpus, "PER_GPU", 1)
    monkeypatch.setattr(timing_cpus, "LEFT_AT_LEAST", 1)
    before = os.sched_getaffinity(0)
    with timing_cpus.reserved(["0"]) as kept:
        assert kept == {"0": [max(before)]}
        assert os.sched_getaffinity(0) == before - {max(before)}
        child = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                               capture_output=True, text=True, check=True).stdout.strip()
        assert child == str(sorted(before - {max(before)}))
        env: dict[str, str] = {timing_cpus.ENV: "stale"}
        timing_cpus.assign(env, "0")
        assert env[timing_cpus.ENV] == str(max(before))
        timing_cpus.assign(env, "1")  # (a GPU with nothing kept)
        assert timing_cpus.ENV not in env
    assert os.sched_getaffinity(0) == before
    env = {}
    timing_cpus.assign(env, "0")
    assert env == {}  # (the reservation ended with the bench)
    monkeypatch.setenv(timing_cpus.OFF_ENV, "0")
    with timing_cpus.reserved(["0"]) as kept:
        assert kept == {} and os.sched_getaffinity(0) == before
