"""The worker's GPU lock and its phases: the time a worker waits for another worker's hold on the
GPU is gpu-wait (the Verifier's figure, from gpu_state), not the phase it waits in. Before, a
problem's "correctness" seconds on a busy GPU held its first wait (level 2 on one GPU, four workers:
correctness 5.3 s a problem, gpu-wait over all its lock holds 5.0 s), and read as a slower check."""

from __future__ import annotations

import fcntl
import os
import threading
import time

import pytest

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


def _watched(tmp_path, name: str, body: str, timeout_s: float):
    """(the Verifier's outcome of watching a worker that runs `body` (Python; STATE and LOCK name the
    worker's state file and the GPU's lock) and reports nothing, the seconds the watch took)."""
    import os
    import subprocess
    import sys

    from stitchcuda.agents.verify import report, verifier
    from stitchcuda.agents.verify.verifier import VerifyOptions

    run = tmp_path / "run"
    run.mkdir()
    state, lock = run / "gpu_state.json", tmp_path / "gpu.lock"
    script = run / f"{name}.py"
    script.write_text(f"import fcntl, json, sys, time\nSTATE, LOCK = {str(state)!r}, {str(lock)!r}\n"
                      f"sys.stdin.readline()\n{body}")
    req = {"run_dir": str(run), "gpu_state": str(state), "gpu_lock": str(lock)}
    read_end, write_end = report.open_pipe()
    os.close(write_end)  # (it reports nothing)
    worker = verifier._Worker(subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE,
                                               start_new_session=True),
                              open(run / f"{name}.log", "w"), report.Reader(read_end, report.new_key()).start())
    worker.proc.stdin.write(b"\n")
    worker.proc.stdin.flush()
    t0 = time.monotonic()
    outcome = verifier._watch_worker(worker, req, VerifyOptions(cpu_only=True, timeout_s=timeout_s), None, None, None)
    return outcome, time.monotonic() - t0


SAYS_WAITING = "open(STATE, 'w').write(json.dumps({'state': 'waiting', 'since': time.monotonic()}))\n"


def test_a_candidate_saying_it_waits_forever_is_timed_out(tmp_path):
    """A worker whose state file says "waiting" while nobody holds the lock: the time limit runs."""
    outcome, took = _watched(tmp_path, "liar", "while True:\n    " + SAYS_WAITING + "    time.sleep(0.05)\n", 2.0)
    assert outcome.killed_for == "timeout" and outcome.waited_s < 0.5, outcome
    assert took < 30


def test_a_candidate_holding_the_lock_and_saying_it_waits_is_timed_out(tmp_path):
    """The lock file is writable in the sandbox: a worker that takes the lock itself and says it waits
    had every second counted as a wait, and blocked its neighbours for ever. Its time in all is capped
    (HARD_CAP times the limit)."""
    from stitchcuda.agents.verify import verifier

    body = "f = open(LOCK, 'a'); fcntl.flock(f, fcntl.LOCK_EX)\n" + SAYS_WAITING + "time.sleep(600)\n"
    outcome, took = _watched(tmp_path, "squatter", body, 1.0)
    assert outcome.killed_for == "timeout" and outcome.waited_s > 1.0, outcome  # (its "waits" were believed)
    assert verifier.HARD_CAP * 1.0 <= took < verifier.HARD_CAP * 1.0 + 10, took


def _hold(lock, shared: bool, seconds: float, log: list, name: str, started: threading.Event | None = None):
    from stitchcuda.agents.verify.locks import file_lock

    with file_lock(str(lock), shared=shared):
        log.append((name, "in", time.perf_counter()))
        if started is not None:
            started.set()
        time.sleep(seconds)
        log.append((name, "out", time.perf_counter()))


def _overlap(log: list, a: str, b: str) -> bool:
    t = {(n, w): s for n, w, s in log}
    return t[(a, "in")] < t[(b, "out")] and t[(b, "in")] < t[(a, "out")]


def test_checks_share_the_gpu_only_where_asked_and_never_with_timing(tmp_path, monkeypatch):
    """STITCHCUDA_SHARED_CHECKS=1: the phases that only compute (the blind check, the weights check) hold
    the lock beside each other; timing holds it alone, and a check arriving while timing waits goes
    after it (the turnstile), so a stream of checks cannot keep timing out."""
    lock = tmp_path / "gpu.lock"
    for sharing in (False, True):
        monkeypatch.setenv("STITCHCUDA_SHARED_CHECKS", "1" if sharing else "0")
        log: list = []
        first = threading.Event()
        a = threading.Thread(target=_hold, args=(lock, True, 0.6, log, "check-a", first))
        a.start()
        first.wait()
        b = threading.Thread(target=_hold, args=(lock, True, 0.3, log, "check-b"))
        b.start()
        time.sleep(0.1)
        timing = threading.Thread(target=_hold, args=(lock, False, 0.3, log, "timing"))
        timing.start()
        time.sleep(0.1)  # (timing is waiting now; a later check must queue behind it)
        c = threading.Thread(target=_hold, args=(lock, True, 0.2, log, "check-c"))
        c.start()
        for t in (a, b, timing, c):
            t.join()
        assert _overlap(log, "check-a", "check-b") is sharing
        for check in ("check-a", "check-b", "check-c"):
            assert not _overlap(log, check, "timing"), (sharing, log)
        if sharing:
            order = {(n, w): s for n, w, s in log}
            assert order[("timing", "out")] <= order[("check-c", "in")], log  # the turnstile's order


def test_a_shared_phase_leaves_the_timing_cpus_to_the_timing_holder(tmp_path, monkeypatch):
    from stitchcuda import timing_cpus

    seen: list = []
    monkeypatch.setattr(timing_cpus, "from_env", lambda: {0})

    class Held:
        def __init__(self, cpus):
            seen.append(set(cpus))

        def __enter__(self):
            return False

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(timing_cpus, "held", Held)
    lock = str(tmp_path / "gpu.lock")
    monkeypatch.setenv("STITCHCUDA_SHARED_CHECKS", "1")
    with worker.gpu_lock(lock, shared=True):
        pass
    with worker.gpu_lock(lock):
        pass
    monkeypatch.setenv("STITCHCUDA_SHARED_CHECKS", "0")
    with worker.gpu_lock(lock, shared=True):
        pass
    assert seen == [set(), {0}, {0}]


def test_a_sandboxed_taker_shares_both_lock_files(tmp_path, monkeypatch):
    """The worker and the witness take the lock inside the sandbox, where /tmp is private: both the
    lock and the turnstile must be bound (locks.lock_files, as the Verifier binds them). Here this
    process holds the turnstile, as a timing taker does while it waits: a sandboxed check bound to
    both waits behind it. Bound to the lock alone (the first version), the check makes a turnstile
    of its own in its private /tmp and walks in, so a stream of checks could keep timing out."""
    import fcntl as f_
    import subprocess
    import sys

    from stitchcuda.agents.verify import sandbox
    from stitchcuda.agents.verify.locks import lock_files, turnstile_path

    if not sandbox.available().ok:
        pytest.skip(f"no sandbox here: {sandbox.available().why}")
    monkeypatch.setenv("STITCHCUDA_SHARED_CHECKS", "1")
    lock = str(tmp_path / "gpu.lock")
    code = ("import sys\nfrom stitchcuda.agents.verify.locks import file_lock\n"
            "with file_lock(sys.argv[1], shared=True):\n    print('in', flush=True)\n")

    def start(bound: list[str]) -> subprocess.Popen:
        run = tmp_path / f"run{len(bound)}"
        run.mkdir()
        box = sandbox.Box.for_run(run, dict(os.environ), locks=bound)
        assert box.active, box.why
        return subprocess.Popen(box.wrap([sys.executable, "-c", code, lock]), env=box.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    with open(turnstile_path(lock), "a") as turn:
        f_.flock(turn, f_.LOCK_EX)
        both, alone = start(lock_files(lock)), start([lock])
        out, err = alone.communicate(timeout=60)
        assert alone.returncode == 0 and out.strip() == "in", err[-1000:]  # through a turnstile of its own
        time.sleep(1.0)
        assert both.poll() is None, both.communicate()  # waiting at the shared turnstile
        f_.flock(turn, f_.LOCK_UN)
    out, err = both.communicate(timeout=60)
    assert both.returncode == 0 and out.strip() == "in", err[-1000:]


def test_a_sandboxed_candidate_can_take_the_lock_but_not_write_it(tmp_path):
    """Every worker's sandbox binds the GPU's lock files; were they writable, a candidate could leave
    data there for another sandbox (its own witness, a later round) to read. flock needs only a
    read-only descriptor, so they are bound read-only: taking the lock works, writing it fails."""
    import subprocess
    import sys

    from stitchcuda.agents.verify import sandbox
    from stitchcuda.agents.verify.locks import lock_files

    if not sandbox.available().ok:
        pytest.skip(f"no sandbox here: {sandbox.available().why}")
    lock = str(tmp_path / "gpu.lock")
    code = ("import sys\nfrom stitchcuda.agents.verify.locks import file_lock\n"
            "with file_lock(sys.argv[1]):\n    print('held', flush=True)\n"
            "for p in sys.argv[1:]:\n"
            "    try:\n        open(p, 'a').write('x')\n        print('wrote', p)\n"
            "    except OSError as e:\n        print('refused', e.errno)\n")
    run = tmp_path / "run"
    run.mkdir()
    box = sandbox.Box.for_run(run, dict(os.environ), locks=lock_files(lock))
    assert box.active, box.why
    done = subprocess.run(box.wrap([sys.executable, "-c", code, *lock_files(lock)]), env=box.env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-1500:]
    lines = done.stdout.split()
    assert lines[0] == "held" and lines.count("refused") == 2 and "wrote" not in lines, done.stdout
    assert all(os.path.getsize(p) == 0 for p in lock_files(lock))
