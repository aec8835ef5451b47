"""The Ray backend (stitchcuda/cluster.py) on a real local cluster: a head and two worker nodes on
127.0.0.1, started here, benching real KernelBench problems through the no-GPU path. Its entries
match the local bench's; a node or worker killed mid-problem loses nothing: the problem is run
again elsewhere, or, once its tries run out, entered as lost (and --resume runs it again)."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import threading
import time
from pathlib import Path

import psutil
import pytest
from conftest import KERNELBENCH

from stitchcuda import bench

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed (pip install 'stitchcuda[ray]')"),
    pytest.mark.skipif(not (KERNELBENCH / "level1").is_dir(), reason=f"KernelBench is not at {KERNELBENCH} (KERNELBENCH_DIR)"),
]

LOOPBACK = "127.0.0.1"
# Small problems of both levels: without a GPU each one's candidate is built and comes back
# "unverified" (or "build-failed" where cuBLAS's headers are missing) in seconds.
PROBLEMS = [str(KERNELBENCH / p) for p in ("level1/19_ReLU.py", "level1/23_Softmax.py", "level1/100_HingeLoss.py",
                                           "level2/12_Gemm_Multiply_LeakyReLU.py")]


@pytest.fixture(scope="module")
def cluster():
    """One cluster for the module (starting one costs seconds): a head that runs no tasks, and two
    worker nodes of one CPU each."""
    # Ray turns 127.0.0.1 in an address into the machine's outward IP (its resolve_ip_for_localhost),
    # where nodes started on loopback do not listen. This switch (named for Windows and macOS, where
    # Ray keeps to loopback) keeps the driver and every node on 127.0.0.1. It is read when ray is
    # first imported, and the nodes inherit it.
    saved = os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "node_ip_address": LOOPBACK})
    for _ in range(2):
        c.add_node(num_cpus=1, node_ip_address=LOOPBACK)
    c.wait_for_nodes()
    yield c
    c.shutdown()
    if saved is None:
        os.environ.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", None)
    else:
        os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = saved


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    """The local bench's report on the same problems (it also fills the session's build cache,
    which the nodes share: they were started with this process's environment)."""
    return bench.run_bench(PROBLEMS, tmp_path_factory.mktemp("local"), jobs=2, on_event=lambda m: None)


def kinds(report: dict) -> list[tuple]:
    """What an entry says about its problem, whichever backend measured it."""
    return [(p["name"], p["level"], p["status"], p["solved"], p["candidate"], p["attempt"], p["eager_ms"])
            for p in report["problems"]]


def by_name(report: dict) -> dict[str, dict]:
    return {p["name"]: p for p in report["problems"]}


def run_ray(cluster, out: Path, nodes: Path, events: list[str], problems=PROBLEMS, **kw) -> dict:
    from stitchcuda.cluster import run_bench_ray

    return run_bench_ray(problems, out, address=cluster.address, runs_dir=str(nodes), on_event=events.append, **kw)


def started(nodes: Path, stem: str, attempt: int, timeout_s: float = 180.0) -> dict:
    """node.json of a problem's try, once its task has started on a node."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        for path in nodes.glob(f"*/{stem}-try{attempt}/node.json"):
            try:
                return json.loads(path.read_text())
            except json.JSONDecodeError:
                pass  # being written
        time.sleep(0.05)
    raise TimeoutError(f"{stem} try {attempt} never started")


def kill_stragglers(nodes: Path) -> None:
    """Verifier workers left running by a killed task (they run in their own session, as the
    Verifier starts them) are this test's to end: each by its id."""
    for proc in psutil.process_iter(["pid", "cmdline"]):
        if any(str(nodes) in arg for arg in proc.info["cmdline"] or ()):
            try:
                proc.kill()
            except psutil.Error:
                pass


def test_ray_bench_gives_the_local_bench_entries_and_resumes(cluster, local, tmp_path):
    events: list[str] = []
    out = tmp_path / "out"
    report = run_ray(cluster, out, tmp_path / "nodes", events)
    assert kinds(report) == kinds(local), [(p["name"], p["status"], p["message"]) for p in local["problems"]]
    assert [p["path"] for p in report["problems"]] == [p["path"] for p in local["problems"]]
    workers = {n.node_id for n in cluster.worker_nodes}
    for p in report["problems"]:
        assert p["tries"] == 1 and p["node_id"] in workers and p["node_ip"] == LOOPBACK
        assert (Path(p["run_dir"]) / "node.json").is_file()
    assert report["meta"]["backend"] == "ray" and report["meta"]["cluster_gpus"] == 0
    assert any("has no GPUs" in e for e in events)
    assert json.loads((out / "bench.json").read_text())["problems"] == report["problems"]
    # --resume: nothing left to do, every entry kept with the run that measured it.
    again = run_ray(cluster, out, tmp_path / "nodes2", [], resume=True)
    assert kinds(again) == kinds(local)
    assert {p["run"]["date"] for p in again["problems"]} == {report["meta"]["date"]}
    assert not (tmp_path / "nodes2").exists()


def test_a_node_that_dies_mid_problem_loses_nothing(cluster, local, tmp_path):
    """The node running the first problem is killed once its task has started: the problem is run
    again on the other node, and every problem has its entry."""
    nodes, events, killed = tmp_path / "nodes", [], {}
    stem = Path(PROBLEMS[0]).stem

    def kill_its_node() -> None:
        info = started(nodes, stem, 1)
        victim = next(n for n in cluster.worker_nodes if n.node_id == info["node_id"])
        cluster.remove_node(victim, allow_graceful=False)
        killed.update(info)

    killer = threading.Thread(target=kill_its_node, daemon=True)
    killer.start()
    try:
        report = run_ray(cluster, tmp_path / "out", nodes, events, problems=PROBLEMS[:3])
    finally:
        killer.join(timeout=200)
        kill_stragglers(nodes)
        cluster.add_node(num_cpus=1, node_ip_address=LOOPBACK)  # two workers again for the next test
        cluster.wait_for_nodes()
    assert killed, "the node was never killed"
    assert kinds(report) == kinds(local)[:3]
    first = by_name(report)[Path(PROBLEMS[0]).name]
    assert first["tries"] == 2 and first["node_id"] != killed["node_id"]
    assert [p["tries"] for p in report["problems"][1:]] == [1, 1]
    assert any("running it again (retry 1 of 2)" in e for e in events)


def test_a_problem_whose_tries_all_die_is_lost_then_resumed(cluster, local, tmp_path):
    """With one retry, the process running the first problem is killed on both tries: its entry says
    "lost" (never silently missing), the others are done, and --resume runs it again."""
    nodes, out, events = tmp_path / "nodes", tmp_path / "out", []
    stem = Path(PROBLEMS[0]).stem
    problems = PROBLEMS[:2]

    def kill_each_try() -> None:
        for attempt in (1, 2):
            os.kill(started(nodes, stem, attempt)["pid"], signal.SIGKILL)

    killer = threading.Thread(target=kill_each_try, daemon=True)
    killer.start()
    try:
        report = run_ray(cluster, out, nodes, events, problems=problems, retries=1)
    finally:
        killer.join(timeout=400)
        kill_stragglers(nodes)
    lost, done = report["problems"]
    assert (lost["status"], lost["tries"], lost["solved"]) == ("lost", 2, False)
    assert "died on each of 2 tries" in lost["message"]
    assert kinds({"problems": [done]}) == kinds(local)[1:2]
    assert any("lost" in e for e in events)
    assert json.loads((out / "bench.json").read_text())["problems"][0]["status"] == "lost"
    again = run_ray(cluster, out, tmp_path / "nodes2", [], problems=problems, resume=True)
    assert kinds(again) == kinds(local)[:2]
    redone, kept = again["problems"]
    assert redone["run"]["date"] == again["meta"]["date"] and redone["tries"] == 1
    assert kept["run"]["date"] == report["meta"]["date"]


def test_the_cli_runs_the_bench_on_ray(cluster, tmp_path):
    from stitchcuda import cli

    out = tmp_path / "out"
    assert cli.main(["bench", PROBLEMS[1], "--ray", cluster.address, "--out", str(out), "--no-profile"]) == 0
    data = json.loads((out / "bench.json").read_text())
    assert data["meta"]["backend"] == "ray" and [p["tries"] for p in data["problems"]] == [1]
    # Ray places each problem on a GPU itself: the local bench's GPU flags do not go with it.
    assert cli.main(["bench", PROBLEMS[1], "--ray", cluster.address, "--gpus", "all", "--out", str(out)]) != 0


def test_problems_past_the_deadline_are_left_for_resume(cluster, tmp_path):
    """A task that starts after --deadline returns at once; its problem is not entered, and the run
    says how many were left for --resume."""
    events: list[str] = []
    report = run_ray(cluster, tmp_path / "out", tmp_path / "nodes", events, problems=PROBLEMS[:2], deadline_s=0.001)
    assert report["problems"] == []
    assert any("2 problem(s) not started (rerun with --resume)" in e for e in events)
