"""The process table behind the Verifier's memory limit: a tree's memory includes what its
descendants hold, and many watchers share one read of the table."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

from stitchcuda.agents.verify.proc_tree import ProcessTable

# A child that starts a grandchild holding 256 MiB (touched, so resident), then waits.
_TREE = """
import subprocess, sys, time
g = subprocess.Popen([sys.executable, "-c",
    "import sys, time; b = bytearray(256 << 20); sys.stdout.write('ready'); sys.stdout.flush(); time.sleep(60)"],
    stdout=subprocess.PIPE)
sys.stdout.write(g.stdout.read(5).decode()); sys.stdout.flush()
time.sleep(60)
"""


def test_a_tree_counts_its_grandchildren_memory():
    # Its own process group, so the grandchild goes with it at the end.
    child = subprocess.Popen([sys.executable, "-c", _TREE], stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert child.stdout is not None and child.stdout.read(5) == b"ready"
        table = ProcessTable(max_age_s=0.0)
        total = table.tree_rss(child.pid)
        assert total >= 256 << 20, total
        # The child alone holds far less: the grandchild's memory is what makes the total.
        alone = table.snapshot().rss[child.pid]
        assert alone < 128 << 20, alone
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    time.sleep(0.05)
    assert ProcessTable(max_age_s=0.0).tree_rss(child.pid) == 0  # gone: nothing counted


def test_watchers_share_one_read_of_the_table():
    table = ProcessTable(max_age_s=10.0)
    barrier = threading.Barrier(16)

    def watch() -> None:
        barrier.wait()
        for _ in range(10):
            table.tree_rss(1)

    threads = [threading.Thread(target=watch) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert table.reads == 1  # 160 questions within the age limit: one read


def test_a_stale_table_is_read_again():
    table = ProcessTable(max_age_s=0.05)
    table.tree_rss(1)
    time.sleep(0.1)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert proc.pid in table.snapshot().rss  # a process started after the first read is seen
        assert table.reads == 2
    finally:
        proc.kill()
        proc.wait()
