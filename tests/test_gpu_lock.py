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


def test_a_wait_is_counted_only_while_the_lock_is_held(tmp_path):
    """gpu_state is in the run folder, the candidate's to write: the Verifier counts a wait only
    while some process holds the GPU's lock, so "waiting" written by a hanging candidate does not
    stop its time limit."""
    import subprocess
    import sys

    from stitchcuda.agents.verify.locks import held

    lock = tmp_path / "gpu.lock"
    assert not held(str(lock)) and not held(None)
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time\n"
                               f"f = open({str(lock)!r}, 'a'); fcntl.flock(f, fcntl.LOCK_EX)\n"
                               "print('held', flush=True); time.sleep(30)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert held(str(lock))
    finally:
        holder.kill()
        holder.wait()
    assert not held(str(lock))


def test_a_candidate_saying_it_waits_forever_is_timed_out(tmp_path):
    """A worker whose state file says "waiting" while nobody holds the lock: the time limit runs."""
    import os
    import subprocess
    import sys

    from stitchcuda.agents.verify import report, verifier
    from stitchcuda.agents.verify.verifier import VerifyOptions

    run = tmp_path / "run"
    run.mkdir()
    state = run / "gpu_state.json"
    script = run / "liar.py"
    script.write_text("import json, sys, time\nsys.stdin.readline()\n"
                      f"while True:\n    open({str(state)!r}, 'w').write(json.dumps({{'state': 'waiting', "
                      "'since': time.monotonic()}))\n    time.sleep(0.05)\n")
    req = {"run_dir": str(run), "gpu_state": str(state), "gpu_lock": str(tmp_path / "gpu.lock")}
    read_end, write_end = report.open_pipe()
    os.close(write_end)  # (it reports nothing)
    liar = verifier._Worker(subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE,
                                             start_new_session=True),
                            open(run / "liar.log", "w"), report.Reader(read_end, report.new_key()).start())
    liar.proc.stdin.write(b"\n")
    liar.proc.stdin.flush()
    t0 = time.monotonic()
    outcome = verifier._watch_worker(liar, req, VerifyOptions(cpu_only=True, timeout_s=2.0), None, None, None)
    assert outcome.killed_for == "timeout" and outcome.waited_s < 0.5, outcome
    assert time.monotonic() - t0 < 30
