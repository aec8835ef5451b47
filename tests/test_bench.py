"""The bench report: fields a later script can compare across runs, and the statistics."""

import json
import math
import os
from pathlib import Path

import pytest

from stitchcuda import bench
from stitchcuda.types import Finding, Timing, Verdict

REQUIRED = {"path", "level", "solved", "hack_findings", "eager_ms", "compile_ms", "ours_ms", "build_s"}


def verdict(status="ok", eager=2.0, compiled=1.0, ours=0.5, hacks=()):
    v = Verdict(candidate="c", status=status, built=True, correct=status == "ok", build_s=1.5,
                eager=Timing(eager, eager, eager, 50), compiled=Timing(compiled, compiled, compiled, 50),
                ours=Timing(ours, ours, ours, 50) if ours else None)
    v.hack_findings = [Finding(h, f"{h} happened") for h in hacks]
    return v


def test_entry_fields_and_solved_rule():
    from stitchcuda.types import Candidate

    cand = Candidate("c", {"model_new.py": ""})
    e = bench.entry_for(Path("/x/level2/5_Foo.py"), verdict(), cand, "")
    assert REQUIRED <= set(e)
    assert e["level"] == 2 and e["solved"] and e["ours_ms"] == 0.5 and e["speedup_eager"] == 4.0
    hacked = bench.entry_for(Path("/x/level2/5_Foo.py"), verdict("hacked", hacks=["cached-output"]), cand, "")
    assert not hacked["solved"] and hacked["ours_ms"] is None
    assert hacked["hack_findings"][0]["code"] == "cached-output"
    no_cand = bench.entry_for(Path("/x/level1/1_Bar.py"), verdict("reference-only", ours=None), None, "conv not supported")
    assert not no_cand["solved"] and no_cand["eager_ms"] == 2.0 and no_cand["message"] == "conv not supported"


def test_summary_geomean_and_fast_1():
    ps = [
        {"solved": True, "speedup_eager": 2.0, "speedup_compile": 0.5, "hack_findings": [], "build_s": 1.0,
         "candidate": "a", "eager_ms": 2.0, "compile_ms": 1.0},
        {"solved": True, "speedup_eager": 8.0, "speedup_compile": 2.0, "hack_findings": [], "build_s": 3.0,
         "candidate": "b", "eager_ms": 8.0, "compile_ms": 4.0},
        {"solved": False, "speedup_eager": None, "speedup_compile": None, "hack_findings": [{"code": "x"}],
         "build_s": 2.0, "candidate": "c", "eager_ms": 1.0, "compile_ms": 2.0},
        {"solved": True, "speedup_eager": 0.5, "speedup_compile": 0.25, "hack_findings": [], "build_s": None,
         "candidate": None, "eager_ms": None, "compile_ms": None},
    ]
    s = bench.summarize(ps)
    assert s["solved"] == 3 and s["hacked"] == 1
    assert math.isclose(s["geomean_speedup_eager"], (2.0 * 8.0 * 0.5) ** (1 / 3))
    assert math.isclose(s["fast_1_eager"], 2 / 4)  # KernelBench: over all problems, not only solved
    assert math.isclose(s["fast_1_compile"], 1 / 4)
    assert s["median_build_s"] == 2.0
    assert bench.geomean([]) is None


def test_gpu_time_alone_is_set_beside_torch_compiles():
    """Small modules' timed ratios are mostly the two host paths: each solved problem also says
    default torch.compile's GPU time in full (every kernel of one forward), and the summary their ratio."""
    from stitchcuda.types import Candidate

    cand = Candidate("c", {"model_new.py": ""})
    fast, slow, unprofiled = verdict(), verdict(), verdict()
    fast.kernel_us, fast.compile_kernel_us = {"ours": 40.0}, {f"triton_{i}": 10.0 for i in range(8)}
    slow.kernel_us, slow.compile_kernel_us = {"a": 30.0, "b": 30.0}, {"triton_0": 20.0}
    unprofiled.kernel_us = {"ours": 5.0}
    problems = [bench.entry_for(Path(f"/k/level2/{i}_P.py"), v, cand, "") for i, v in enumerate([fast, slow, unprofiled])]
    # All eight of torch.compile's kernels, where compile_top_kernels_us keeps six.
    assert problems[0]["compile_kernel_ms"] == 0.08 and len(problems[0]["compile_top_kernels_us"]) == 6
    assert problems[1]["compile_kernel_ms"] == 0.02 and problems[2]["compile_kernel_ms"] is None
    s = bench.summarize(problems)
    assert (s["kernels_compared_with_compile"], s["kernels_faster_than_compile"]) == (2, 1)
    assert math.isclose(s["geomean_kernel_speedup_compile"], math.sqrt(2.0 * (1 / 3)))
    report = {"meta": {"command": "c", "commit": "abc", "gpu": "H100", "torch": "2.11", "date": "d", "coder": "builtin"},
              "problems": problems, "summary": s}
    assert "default torch.compile's over ours, geomean 0.82x, ours less on 1 of 2" in bench.markdown(report)


def test_markdown_lists_every_problem():
    report = {"meta": {"command": "stitchcuda bench x", "commit": "abc", "gpu": "H100", "torch": "2.11",
                       "date": "2026-11-22", "coder": "builtin"},
              "problems": [bench.entry_for(Path("/k/level1/19_ReLU.py"), verdict(), None, "")]}
    report["summary"] = bench.summarize(report["problems"])
    md = bench.markdown(report)
    assert "| 19_ReLU.py | no |" in md and "commit: `abc`" in md


def test_the_report_says_which_problems_ran_sandboxed():
    from stitchcuda.types import Candidate

    cand = Candidate("c", {"model_new.py": ""})
    boxed, bare = verdict(), verdict()
    boxed.sandboxed, boxed.sandbox = True, "bubblewrap 0.8.0"
    bare.sandbox = "not sandboxed: bubblewrap (bwrap) not found"
    problems = [bench.entry_for(Path(f"/k/level2/{i}_P.py"), v, cand, "") for i, v in enumerate([boxed, bare, boxed])]
    assert [p["sandboxed"] for p in problems] == [True, False, True]
    assert problems[0]["sandbox"] is None and problems[1]["sandbox"].startswith("not sandboxed")
    report = {"meta": {"command": "c", "commit": "abc", "gpu": "H100", "torch": "2.11", "date": "d", "coder": "builtin"},
              "problems": problems}
    report["summary"] = bench.summarize(problems)
    assert report["summary"]["sandboxed"] == 2
    assert "- sandbox: 2 of 3 problem(s) verified under bubblewrap (otherwise: not sandboxed: bubblewrap" \
        in bench.markdown(report)


def test_expand_paths_orders_by_problem_number(tmp_path):
    for n in ("10_b.py", "2_a.py", "1_c.py"):
        (tmp_path / n).write_text("")
    assert [p.name for p in bench.expand_paths([str(tmp_path)])] == ["1_c.py", "2_a.py", "10_b.py"]


PROBLEM = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
        return torch.sigmoid(x) * 2.0 + 1.0

def get_inputs():
    return [torch.randn(64, 128)]

def get_init_inputs():
    return []
"""

BROKEN = "import torch\nclass Model(torch.nn.Module):\n  pass\n"


def test_bench_runs_end_to_end_on_cpu(tmp_path, monkeypatch):
    monkeypatch.setenv("STITCHCUDA_CACHE", str(tmp_path / "cache"))
    level = tmp_path / "level1"
    level.mkdir()
    (level / "1_Pointwise.py").write_text(PROBLEM)
    (level / "2_NoInputs.py").write_text(BROKEN)
    out = tmp_path / "out"
    report = bench.run_bench([str(level)], out, on_event=lambda m: None)
    data = json.loads((out / "bench.json").read_text())
    assert {"command", "commit", "gpu", "torch", "date", "coder"} <= set(data["meta"])
    assert [p["name"] for p in data["problems"]] == ["1_Pointwise.py", "2_NoInputs.py"]
    for p in data["problems"]:
        assert REQUIRED <= set(p)
    broken = data["problems"][1]
    assert broken["status"] == "task-error" and "get_inputs" in broken["message"]
    first = data["problems"][0]
    # No GPU here: nothing is timed, and a CUDA candidate cannot be verified, so nothing is solved.
    assert first["eager_ms"] is None and not first["solved"]
    assert report["summary"]["problems"] == 2
    assert (out / "bench.md").read_text().count("| 1_Pointwise.py |") == 1
    from stitchcuda import runtime

    assert first["candidate"], first["message"]
    if runtime.find_nvcc():
        assert first["status"] == "unverified" and first["build_s"] is not None
    else:
        assert first["status"] == "build-failed"


HUNGRY = PROBLEM.replace("return torch.sigmoid(x) * 2.0 + 1.0", "raise MemoryError('out of memory (pretend the GPU is full)')")


def test_out_of_memory_problems_run_again_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("STITCHCUDA_CACHE", str(tmp_path / "cache"))
    level = tmp_path / "level1"
    level.mkdir()
    (level / "1_Pointwise.py").write_text(PROBLEM)
    (level / "2_Hungry.py").write_text(HUNGRY)
    events: list[str] = []
    report = bench.run_bench([str(level)], tmp_path / "out", jobs=2, on_event=events.append)
    hungry = report["problems"][1]
    assert hungry["status"] == "oom" and hungry["ran_alone"]
    assert any("running it again alone" in e for e in events)
    assert "ran_alone" not in report["problems"][0]
    # Each entry says what its trace said it would hold (stitchcuda/gpu_memory.py), the worker's
    # overhead and a few copies of its 64x128 float input and output; the CPU worker reports no GPU peak.
    from stitchcuda.gpu_memory import WORKER_OVERHEAD

    first = report["problems"][0]
    assert WORKER_OVERHEAD / 2**20 < first["gpu_expected_mb"] < WORKER_OVERHEAD / 2**20 + 1
    assert first["gpu_peak_mb"] is None
    # The Verifier's request says whether other workers share the GPU's memory: an fp64 referee out of
    # memory beside them ends the run as out of memory (tests/test_referee_memory.py), alone it does not.
    runs = tmp_path / "out" / "runs"
    assert json.loads((runs / "2_Hungry" / "request.json").read_text())["beside_others"] is True
    assert json.loads((runs / "2_Hungry-alone" / "request.json").read_text())["beside_others"] is False
    # --resume treats an out-of-memory verdict as not done.
    again = bench.run_bench([str(level)], tmp_path / "out", jobs=1, resume=True, on_event=events.append)
    assert again["problems"][1]["run"] == {"date": again["meta"]["date"], "commit": again["meta"]["commit"]}
    assert again["problems"][0]["run"]["date"] == report["meta"]["date"]


def test_resume_runs_again_a_problem_whose_second_round_never_ran(tmp_path, monkeypatch):
    """A wrong first candidate whose retry (the Verifier's feedback round) was cut off by the
    deadline is not finished: --resume runs it again instead of keeping 'incorrect' for good."""
    monkeypatch.setenv("STITCHCUDA_CACHE", str(tmp_path / "cache"))
    level = tmp_path / "level1"
    level.mkdir()
    (level / "1_Pointwise.py").write_text(PROBLEM)
    (level / "2_Other.py").write_text(PROBLEM)
    first = bench.run_bench([str(level)], tmp_path / "out", jobs=1, on_event=lambda e: None)
    data = json.loads((tmp_path / "out" / "bench.json").read_text())
    cut = data["problems"][0]
    cut.update(status="incorrect", message="output 0: 3 elements beyond tolerance", retry_pending=True)
    (tmp_path / "out" / "bench.json").write_text(json.dumps(data))
    assert "incorrect (next round not run)" in bench.markdown(data)
    again = bench.run_bench([str(level)], tmp_path / "out", jobs=1, resume=True, on_event=lambda e: None)
    redone, kept = again["problems"]
    assert redone["run"]["date"] == again["meta"]["date"] and "retry_pending" not in redone
    assert redone["status"] == first["problems"][0]["status"]
    assert kept["run"]["date"] == first["meta"]["date"]


@pytest.mark.gpu
def test_bench_on_gpu_times_and_solves(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    level = tmp_path / "level1"
    level.mkdir()
    (level / "1_Pointwise.py").write_text(PROBLEM.replace("64, 128", "4096, 4096"))
    report = bench.run_bench([str(level)], tmp_path / "out", on_event=print)
    p = report["problems"][0]
    assert p["eager_ms"] > 0 and p["compile_ms"] > 0
    assert p["solved"], p["message"]
    assert p["ours_ms"] > 0 and p["build_s"] < 30
    # Where each side's time goes: the candidate's kernels and torch.compile's, profiled.
    assert p["top_kernels_us"] and p["compile_top_kernels_us"], (p["top_kernels_us"], p["compile_top_kernels_us"])


def test_each_problem_is_benched_once_however_named(tmp_path):
    level = tmp_path / "level1"
    level.mkdir()
    for name in ("2_B.py", "10_C.py", "1_A.py"):
        (level / name).write_text(PROBLEM)
    again = level / ".." / "level1" / "1_A.py"
    got = bench.expand_paths([str(level), str(again), str(level / "2_B.py")])
    assert [p.name for p in got] == ["1_A.py", "2_B.py", "10_C.py"]
    assert all(p.is_absolute() for p in got)


def test_bench_over_several_gpus_spreads_the_problems_and_says_the_same(tmp_path, monkeypatch):
    """--gpus 0,1: each GPU's workers take that GPU's lock, the problems go to both GPUs, and the
    entries say what one GPU's say (here, without a GPU, each worker falls back to the CPU)."""
    monkeypatch.setenv("STITCHCUDA_CACHE", str(tmp_path / "cache"))
    # Two GPUs as this process numbers them: a CUDA_VISIBLE_DEVICES naming one device makes GPU 1 a
    # device that is not there, which the Verifier rightly refuses (test_worker_gpu_is_the_parents_device;
    # a CI run failed here so: "GPU 1: CUDA_VISIBLE_DEVICES='0' shows 1 device(s)" reproduces it).
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    level = tmp_path / "level1"
    level.mkdir()
    (level / "1_Pointwise.py").write_text(PROBLEM)
    (level / "2_Other.py").write_text(PROBLEM.replace("* 2.0", "* 3.0"))
    one = bench.run_bench([str(level)], tmp_path / "one", on_event=lambda m: None)
    two = bench.run_bench([str(level)], tmp_path / "two", gpus=[0, 1], on_event=lambda m: None)
    same = ("name", "status", "solved", "candidate", "attempt", "eager_ms")
    # The messages ride along in the failure's text: a status that differs says why only there.
    assert [[p[k] for k in same] for p in two["problems"]] == [[p[k] for k in same] for p in one["problems"]], \
        [p["message"] for p in two["problems"]]
    locks = {Path(json.loads(r.read_text())["gpu_lock"]).name for r in (tmp_path / "two" / "runs").glob("*/request.json")}
    assert locks == {"stitchcuda-gpu0.lock", "stitchcuda-gpu1.lock"}
    assert two["meta"]["gpus"] == [0, 1]
    assert two["meta"]["finished_this_run"] == 2 and two["meta"]["problems_per_hour"] > 0
    assert "2 problem(s) in" in (tmp_path / "two" / "bench.md").read_text()
    # What the host did meanwhile, beside the throughput (the clock where this host says it).
    host = two["meta"]["host"]
    assert host["samples"] >= 2 and host["cpus"] == os.cpu_count() and host["load1_mean"] >= 0
    assert "host while it ran: CPU clock" in (tmp_path / "two" / "bench.md").read_text()


def test_worker_gpu_is_the_parents_device(monkeypatch):
    """A bench started under CUDA_VISIBLE_DEVICES=2,3 runs its GPU-0 workers on device 2, not on the
    machine's first GPU, and locks device 2: a second bench on devices 0,1 never waits on it."""
    from stitchcuda.agents.verify.verifier import gpu_lock_path, physical_gpu

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert physical_gpu(1) == "1"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2, 3")
    assert [physical_gpu(0), physical_gpu(1)] == ["2", "3"]
    with pytest.raises(ValueError, match="shows 2 device"):
        physical_gpu(2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-8f1c/2")
    assert physical_gpu(0) == "GPU-8f1c/2"
    assert Path(gpu_lock_path(physical_gpu(0))).name == "stitchcuda-gpuGPU-8f1c_2.lock"
    assert gpu_lock_path("2") != gpu_lock_path("0")


def test_gpus_flag(monkeypatch):
    torch = pytest.importorskip("torch")
    from stitchcuda.task import UsageError

    said: list[str] = []
    count = torch.cuda.device_count()
    assert bench.parse_gpus("all", said.append) == (list(range(count)) or None)
    assert bool(said) == (count == 0) and all("the CPU path" in s for s in said)
    for bad in ("x", "0,a", f"{count}", "-1"):
        with pytest.raises(UsageError):
            bench.parse_gpus(bad)
    if count:
        assert bench.parse_gpus(" 0,0 ") == [0]


def test_optimize_takes_gpus_and_candidates_a_round(tmp_path, capsys):
    """`optimize --gpus` (a round's candidates verified at once, a GPU each) and `--per-round`: the
    flags' mistakes are usage errors, said before anything runs."""
    from stitchcuda import cli

    example = str(Path(__file__).parents[1] / "examples" / "gated_block.py")
    for argv, why in ((["--gpu", "0", "--gpus", "0"], "--gpu or --gpus, not both"),
                      (["--per-round", "0"], "--per-round 0: at least 1"),
                      (["--gpus", "0,x"], "expected 'all' or GPU indices")):
        assert cli.main(["optimize", example, "--out", str(tmp_path / "o"), *argv]) == cli.EXIT_USAGE
        assert why in capsys.readouterr().err.replace("\n", " ")
    assert not (tmp_path / "o").exists()


def test_longest_first_orders_by_an_earlier_run(tmp_path):
    files = [tmp_path / n for n in ("1_A.py", "2_B.py", "3_C.py", "4_D.py")]
    earlier = tmp_path / "bench.json"
    earlier.write_text(json.dumps({"problems": [
        {"path": "/elsewhere/1_A.py", "problem_s": 5.0},
        {"path": "/elsewhere/2_B.py", "problem_s": 40.0},
        {"path": "/elsewhere/3_C.py", "problem_s": None},  # not timed: as good as unknown
    ]}))
    # Unknown problems first (they might be the longest), then the longest known; 4_D is unknown too.
    assert [f.name for f in bench.longest_first(files, earlier)] == ["3_C.py", "4_D.py", "2_B.py", "1_A.py"]
    (tmp_path / "bad.json").write_text("{")
    from stitchcuda.task import UsageError

    with pytest.raises(UsageError, match="not a bench.json"):
        bench.longest_first(files, tmp_path / "bad.json")
    # A bench/results file: its runs' problems, the last run's time where two runs have one.
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"meta": {}, "runs": {
        "l1_old": {"problems": [{"path": "/a/1_A.py", "problem_s": 90.0}, {"path": "/a/4_D.py", "problem_s": 1.0}]},
        "l1_new": {"problems": [{"path": "/b/1_A.py", "problem_s": 2.0}, {"path": "/b/2_B.py", "problem_s": 30.0},
                                {"path": "/b/3_C.py", "problem_s": 10.0}]},
        "example": {"task": "gated_block:Block"}}}))
    assert [f.name for f in bench.longest_first(files, results)] == ["2_B.py", "3_C.py", "1_A.py", "4_D.py"]
    (tmp_path / "list.json").write_text("[]")
    with pytest.raises(UsageError, match="not a bench.json"):
        bench.longest_first(files, tmp_path / "list.json")
    (tmp_path / "odd.json").write_text(json.dumps({"runs": [1], "problems": None}))
    assert [f.name for f in bench.longest_first(files, tmp_path / "odd.json")] == [f.name for f in files]


def test_a_rounds_brief_keeps_its_misses_as_plain_json():
    """What bench.json keeps of a round: each missed set with a distance only where there is one
    (inf for an all-zero reference, 0.0 for a NaN-placement miss, are none), the referee's word cut
    short, at most six misses, nothing of the sets passed or skipped."""
    from stitchcuda.types import Candidate

    checks = [{"set": "random-0", "ok": True, "message": "match", "rel_norm": 1e-6},
              {"set": "skipped", "ok": None, "message": "skipped: reference rejects it"},
              {"set": "zeros", "ok": False, "message": "x" * 900, "rel_norm": float("inf"),
               "referee": {"ok": False, "message": "y" * 900}},
              {"set": "nan", "ok": False, "message": "NaN or infinities differ", "rel_norm": 0.0},
              *({"set": f"large-{i}", "ok": False, "message": "far", "rel_norm": 0.5} for i in range(6))]
    v = Verdict("c", "incorrect", checks=checks, message="output 0: far")
    brief = bench.round_brief(2, Candidate("c", {}), v)
    json.dumps(brief, allow_nan=False)  # (plain JSON: no Infinity)
    assert (brief["attempt"], brief["candidate"], brief["status"]) == (2, "c", "incorrect")
    assert [m["set"] for m in brief["missed"]] == ["zeros", "nan", "large-0", "large-1", "large-2", "large-3"]
    zeros, nan, large = brief["missed"][:3]
    assert zeros["rel_norm"] is None and nan["rel_norm"] is None and large["rel_norm"] == 0.5
    assert len(zeros["message"]) == 300 and zeros["referee"] == {"ok": False, "message": "y" * 300}


def test_entries_say_how_long_each_problem_took_and_a_later_run_starts_the_longest(tmp_path, monkeypatch):
    """problem_s and the worker's phases land in bench.json; a later run given that file
    (--longest-first) starts the problem that took longest first, and reports in the usual order."""
    from stitchcuda import cli

    monkeypatch.setenv("STITCHCUDA_CACHE", str(tmp_path / "cache"))
    level = tmp_path / "level1"
    level.mkdir()
    (level / "1_Pointwise.py").write_text(PROBLEM)
    (level / "2_Other.py").write_text(PROBLEM.replace("* 2.0", "* 3.0"))
    first = bench.run_bench([str(level)], tmp_path / "one", on_event=lambda m: None)
    for p in first["problems"]:
        assert p["problem_s"] > 0 and p["phases"], p
    earlier = json.loads((tmp_path / "one" / "bench.json").read_text())
    for p in earlier["problems"]:  # make the second problem the long one, against the files' order
        p["problem_s"] = 100.0 if p["name"] == "2_Other.py" else 1.0
    (tmp_path / "one" / "bench.json").write_text(json.dumps(earlier))
    said: list[str] = []
    bench.run_bench([str(level)], tmp_path / "two", order_from=tmp_path / "one" / "bench.json", on_event=said.append)
    ran = [line.split(":")[0] for line in said if line.split(":")[0].endswith(".py")]
    assert ran == ["2_Other.py", "1_Pointwise.py"], said
    second = json.loads((tmp_path / "two" / "bench.json").read_text())
    assert [p["name"] for p in second["problems"]] == ["1_Pointwise.py", "2_Other.py"]
    assert cli.main(["bench", str(level), "--out", str(tmp_path / "three"), "--longest-first",
                     str(tmp_path / "missing.json")]) != 0


def test_a_pool_shares_the_cores_among_its_workers(monkeypatch):
    """16 workers on 64 cores each defaulting to 64 CPU threads (and Inductor's compile pools) made
    every phase of a problem slower: a pool gives each worker its share, and the user's own
    settings win."""
    from stitchcuda.agents.verify import verifier

    monkeypatch.setattr(verifier, "usable_cpus", lambda: 64)
    pool = verifier.VerifierPool([0, 1, 2, 3], jobs_per_gpu=4)
    try:
        assert pool.opts.cpu_threads == 4
    finally:
        pool.shutdown()
    pool = verifier.VerifierPool(None, jobs_per_gpu=100, opts=verifier.VerifyOptions(cpu_threads=7))
    try:
        assert pool.opts.cpu_threads == 7  # said by the caller: kept
    finally:
        pool.shutdown()
    env = verifier.thread_env({"OMP_NUM_THREADS": "2", "PATH": "/bin"}, 4)
    assert env["OMP_NUM_THREADS"] == "2" and env["TORCHINDUCTOR_COMPILE_THREADS"] == "4" and env["PATH"] == "/bin"
    assert verifier.thread_env({"PATH": "/bin"}, None) == {"PATH": "/bin"}
