"""The bench's GPU memory shares (stitchcuda/gpu_memory.py): what a verification is expected to hold,
read off a real trace, and the admission of verifications by those bytes, on threads."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from pathlib import Path

import pytest
from conftest import hack_candidate, hack_task

from stitchcuda.agents.loop import plan_task
from stitchcuda.agents.verify.verifier import VerifierPool, VerifyOptions
from stitchcuda.gpu_memory import GIB, WORKER_OVERHEAD, MemoryShares, batch_factor, expected_bytes
from stitchcuda.task import find_task

LINEAR = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 32)

    def forward(self, x):
        return torch.relu(self.fc(x)).view(16, 2, 16)


def get_inputs():
    return [torch.randn(16, 64)]


def get_init_inputs():
    return []
"""


def test_expected_bytes_of_a_traced_module(tmp_path):
    """Linear(64, 32) then relu on a 16x64 input, its result viewed: five copies of the input (5 x 4096
    bytes), four of the output (4 x 2048, the view's size), two of addmm's and relu's results (2 x 4096),
    three of the weights and bias (3 x 8320); the transpose and the view allocate nothing."""
    (tmp_path / "lin.py").write_text(LINEAR)
    plan = plan_task(find_task(tmp_path / "lin.py"))
    grows, weights = 5 * 4096 + 4 * 2048 + 2 * 4096, 3 * 8320
    assert expected_bytes(plan.graph) - WORKER_OVERHEAD == grows + weights
    # Half precision halves every tensor's share.
    half = [{**n, "dtype": "float16"} if n.get("dtype") == "float32" else n for n in plan.graph]
    assert expected_bytes(half) - WORKER_OVERHEAD == (grows + weights) // 2
    # On a card the Verifier checks three times the batch on, what grows with the batch counts three
    # times; the weights do not grow.
    assert expected_bytes(plan.graph, 80 * GIB) - WORKER_OVERHEAD == 3 * grows + weights


def test_batch_factor_follows_the_workers_batch_checks():
    """The largest batch the worker checks a set at (agents/verify/worker.py's lean-input share and
    margin): three chunks for small inputs, two, then the traced batch alone."""
    from stitchcuda.inputs import FAR_BATCH_MARGIN, LEAN_INPUT_FRACTION

    card = 80 * GIB
    lean = card // LEAN_INPUT_FRACTION
    three = lean // (4 * FAR_BATCH_MARGIN)  # 3 x traced beside the traced set, with the margin
    two = lean // (3 * FAR_BATCH_MARGIN)
    assert batch_factor(1, card) == batch_factor(three, card) == 3
    assert 2 < batch_factor(three + (two - three) // 2, card) < 3  # a far size short of three chunks
    assert batch_factor(two, card) == pytest.approx(2)
    assert batch_factor(two + 1, card) == 1  # only traced + 1: no larger set
    assert batch_factor(1, None) == 1


MEASURED = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x{extra}):
        return {expr}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
"""


@pytest.mark.parametrize(("name", "extra", "expr", "inputs", "peak_mib"), [
    # level 1's shapes and the worker peaks measured on an H100 (bench/results/
    # 2026-12-06-h100-l1-resumed-strips-ab-18c2bf8.json, runs.l1_96: gpu_peak_mb), on its 79.2 GiB
    ("elementwise", "", "torch.relu(x)", "torch.randn(4096, 393216)", 55554),
    ("column_sum", "", "torch.sum(x, dim=1, keepdim=True)", "torch.randn(128, 4096, 4095)", 43022),
    ("batched_product", ", y", "torch.bmm(x, y)", "torch.randn(128, 512, 1024), torch.randn(128, 1024, 2048)", 25946),
])
def test_expected_bytes_cover_the_peaks_measured_on_an_h100(tmp_path, name, extra, expr, inputs, peak_mib):
    """The expectation, read off a trace on fake tensors (nothing of these sizes is made here), is at
    least what a worker held verifying the same shapes on an H100, and not more than twice that."""
    (tmp_path / f"{name}.py").write_text(MEASURED.format(extra=extra, expr=expr, inputs=inputs))
    plan = plan_task(find_task(tmp_path / f"{name}.py"))
    expected_mib = expected_bytes(plan.graph, int(79.2 * GIB)) / (1 << 20)
    assert peak_mib <= expected_mib <= 2 * peak_mib, (expected_mib, peak_mib)


class _Timeline:
    """Who held a share when, from the threads that took them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[tuple[str, str]] = []
        self.inside: set[str] = set()
        self.most: dict[str, set[str]] = {}

    def run(self, shares: MemoryShares, name: str, need: int, hold_s: float = 0.15, alone: bool = False) -> None:
        with shares.alone() if alone else shares.held(need):
            with self.lock:
                self.inside.add(name)
                self.events.append(("in", name))
                self.most[name] = set(self.inside)
            time.sleep(hold_s)
            with self.lock:
                self.inside.discard(name)
                self.events.append(("out", name))


def _start(tl: _Timeline, shares: MemoryShares, name: str, need: int, **kw) -> threading.Thread:
    asked = shares.waiting + shares.holders
    t = threading.Thread(target=tl.run, args=(shares, name, need), kwargs=kw)
    t.start()
    deadline = time.monotonic() + 30
    while shares.waiting + shares.holders == asked and t.is_alive() and time.monotonic() < deadline:
        time.sleep(0.001)  # queued (or in) before the next one asks: the order asked is this one
    return t


def test_shares_admit_what_fits_and_keep_the_order_asked():
    """Capacity 9: a (4) and b (4) run together; c (6) fits beside neither and waits; d (1),
    asked after c, would fit but waits behind c (a large need is not passed over by small ones)."""
    shares, tl = MemoryShares(9), _Timeline()
    threads = [_start(tl, shares, n, need) for n, need in (("a", 4), ("b", 4), ("c", 6), ("d", 1))]
    for t in threads:
        t.join()
    assert tl.most["b"] >= {"a", "b"}
    assert "a" not in tl.most["c"] and "b" not in tl.most["c"]
    assert tl.events.index(("in", "c")) < tl.events.index(("in", "d"))
    assert tl.most["d"] == {"c", "d"}  # 6 + 1 fit together
    assert shares.used == 0 and shares.holders == 0


def test_a_need_past_the_card_and_alone_run_by_themselves():
    shares, tl = MemoryShares(10), _Timeline()
    threads = [_start(tl, shares, "a", 2), _start(tl, shares, "big", 50), _start(tl, shares, "b", 2),
               _start(tl, shares, "solo", 0, alone=True), _start(tl, shares, "c", 2)]
    for t in threads:
        t.join()
    assert tl.most["big"] == {"big"} and tl.most["solo"] == {"solo"}
    # Those asked after a run alone wait for it; it waits for those before it.
    assert tl.events.index(("out", "a")) < tl.events.index(("in", "big"))
    assert tl.events.index(("out", "solo")) < tl.events.index(("in", "c"))
    assert shares.used == 0


class _Counted(MemoryShares):
    """MemoryShares that keeps the most holders it had at once."""

    most = 0

    @contextlib.contextmanager
    def held(self, need: int):
        with super().held(need):
            self.most = max(self.most, self.holders)
            yield


def test_pool_admits_by_the_shares_and_says_alone_in_the_request(tmp_path, monkeypatch):
    """Real verifications (on the CPU) through a pool of two workers whose GPU's shares fit one of
    them at a time: never two at once; one submitted alone tells its worker it is not beside others."""
    monkeypatch.setenv("STITCHCUDA_BESIDE_OTHERS", "1")
    shares = _Counted(100)
    pool = VerifierPool(None, jobs_per_gpu=2, opts=VerifyOptions(cpu_only=True, timeout_s=300, time_compile=False,
                                                                  profile=False, trials=3),
                        memory={None: shares})
    try:
        futures = [pool.submit(hack_task("ref_affine"), hack_candidate("good_affine"), tmp_path / n, need_bytes=60)
                   for n in ("a", "b")]
        verdicts = [f.result() for f in futures]
        alone = pool.submit(hack_task("ref_affine"), hack_candidate("good_affine"), tmp_path / "c", alone=True).result()
    finally:
        pool.shutdown()
    assert all(v.accepted for v in [*verdicts, alone]), [(v.status, v.message) for v in [*verdicts, alone]]
    assert shares.most == 1 and shares.used == 0 and shares.holders == 0
    assert json.loads((tmp_path / "a" / "request.json").read_text())["beside_others"] is True
    assert json.loads((tmp_path / "c" / "request.json").read_text())["beside_others"] is False
    # The worker reports its GPU peak where CUDA ran; on the CPU it has none.
    assert alone.gpu_peak_mb is None


def _entry(name: str, peak: float | None, expected: float, status: str = "ok", **kw) -> dict:
    """A bench entry as entry_for writes it for a problem whose verdict never came, with the figures set."""
    from stitchcuda import bench

    return {**bench.entry_for(Path(f"/p/{name}"), None, None, "", status=status), "gpu_peak_mb": peak,
            "gpu_expected_mb": expected, **kw}


def test_the_bench_says_how_its_expectation_met_the_workers_peaks():
    """bench.json's summary and bench.md compare each worker's measured peak with what its trace led
    the bench to expect: the figure a GPU run calibrates expected_bytes by."""
    from stitchcuda import bench

    problems = [_entry("1_a.py", 400.0, 1100.0), _entry("2_b.py", 3000.0, 2000.0, "oom", ran_alone=True),
                _entry("3_c.py", None, 1500.0)]
    s = bench.summarize(problems)
    assert s["gpu_peak_over_expected"] == {"measured": 2, "median": round((400 / 1100 + 1.5) / 2, 3), "max": 1.5,
                                           "over_1": 1}
    assert s["oom_after_alone"] == 1
    md = bench.markdown({"meta": {"command": "stitchcuda bench x", "commit": "abc", "date": "d", "gpu": "g", "torch": "t",
                                  "coder": "builtin"}, "problems": problems,
                         "summary": s})
    assert "median 0.93, at most 1.50 (1 of 2 over 1); out of memory even alone: 1" in md
    # Where no worker measured a peak (the CPU), the summary says nothing of it.
    assert "gpu_peak_over_expected" not in bench.summarize([_entry("3_c.py", None, 1500.0)])


@pytest.mark.gpu
def test_expected_memory_covers_the_workers_peak_on_a_gpu(tmp_path, monkeypatch):
    """Two small problems side by side on the GPU: each worker reports its peak, and what the trace
    led the bench to expect is at least that (expected_bytes is a bound where nothing is freed early)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from stitchcuda import bench

    monkeypatch.setenv("STITCHCUDA_CACHE", str(tmp_path / "cache"))
    level = tmp_path / "level1"
    level.mkdir()
    (level / "1_Linear.py").write_text(LINEAR)
    (level / "2_Linear.py").write_text(LINEAR.replace("torch.randn(16, 64)", "torch.randn(4096, 64)")
                                       .replace(".view(16, 2, 16)", ""))
    report = bench.run_bench([str(level)], tmp_path / "out", jobs=2, gpus=[0], on_event=print)
    assert report["meta"]["gpu_memory_gib"]["0"], report["meta"]  # read with nvidia-smi
    for p in report["problems"]:
        assert p["gpu_peak_mb"] and p["gpu_expected_mb"], p
        assert p["gpu_peak_mb"] <= p["gpu_expected_mb"], p
    assert report["summary"]["gpu_peak_over_expected"]["over_1"] == 0
