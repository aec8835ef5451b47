"""The worker's GPU lock and its phases: the time a worker waits for another worker's hold on the
GPU is gpu-wait (the Verifier's figure, from gpu_state), not the phase it waits in. Before, a
problem's "correctness" seconds on a busy GPU held its first wait (level 2 on one GPU, four workers:
correctness 5.3 s a problem, gpu-wait over all its lock holds 5.0 s), and read as a slower check."""

from __future__ import annotations

import fcntl
import threading
import time

from stitchcuda.agents.verify import worker


def test_a_phase_leaves_out_its_wait_for_the_gpu_lock(tmp_path):
    rec = worker.Recorder({})
    lock = tmp_path / "gpu.lock"
    held = threading.Event()

    def neighbour() -> None:  # another worker holding the GPU (flock: one holder per open file, threads too)
        with open(lock, "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            held.set()
            time.sleep(0.6)
            fcntl.flock(f, fcntl.LOCK_UN)

    t = threading.Thread(target=neighbour)
    t.start()
    held.wait()
    rec.enter("timing")
    t0 = time.perf_counter()
    with worker.gpu_lock(str(lock), rec):
        time.sleep(0.2)  # the phase's own work, under the lock
    spent = time.perf_counter() - t0
    rec.enter("after")
    t.join()
    assert spent >= 0.7  # it did wait for the neighbour
    assert 0.18 <= rec.verdict.phases["timing"] < 0.45, rec.verdict.phases
    # Without the recorder (the reference-only path) the lock works the same.
    with worker.gpu_lock(str(lock)):
        pass
