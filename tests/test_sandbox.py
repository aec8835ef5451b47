"""Issue 22: a candidate cannot touch the user's machine.

Layer by layer: the OS sandbox alone (bubblewrap, no audit hook: plain Python run in a Box), the
build cache (a private build folder, a recorded hash checked before a cached library loads), and
the escape candidates of tests/hacks/escape_*.py through the real Verifier, with both layers and
with the audit hook alone (STITCHCUDA_NO_SANDBOX=1): each attempt blocked, and named in the
verdict's hack findings. The legitimate candidates are still accepted, sandboxed.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
from conftest import HACKS, hack_candidate, hack_task, needs_nvcc

from stitchcuda import runtime
from stitchcuda.agents.verify import sandbox
from stitchcuda.agents.verify.sandbox import Box
from stitchcuda.agents.verify.verifier import VerifyOptions, verify
from stitchcuda.types import Task

needs_bwrap = pytest.mark.skipif(not sandbox.available().ok, reason=sandbox.available().why)


class Listener:
    """A TCP server on 127.0.0.1 that records every connection it gets."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            conn.settimeout(2)
            try:
                self.connections.append(conn.recv(100))
            except OSError:
                self.connections.append(b"")
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


@pytest.fixture
def listener():
    server = Listener()
    yield server
    server.close()


@pytest.fixture
def home(tmp_path) -> Path:
    """A fake home folder holding a secret."""
    h = tmp_path / "home"
    h.mkdir()
    (h / "secret.txt").write_text("the user's secret")
    return h


def _boxed(run: Path, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`code` run by this Python inside the OS sandbox alone (no audit hook)."""
    box = Box.for_run(run, dict(os.environ, **env), reference=HACKS / "ref_affine.py")
    assert box.active, box.why
    return subprocess.run(box.wrap([sys.executable, "-c", code]), env=box.env, capture_output=True, text=True,
                          timeout=120)


# --- layer 1: the OS sandbox on its own ----------------------------------------------------------


@needs_bwrap
def test_writes_land_only_in_the_run_folder(tmp_path):
    run, outside = tmp_path / "run", tmp_path / "outside"
    run.mkdir()
    outside.mkdir()
    code = f"""
import sys
from pathlib import Path
Path({str(run / 'mine.txt')!r}).write_text("ok")
for target in ({str(outside / 'x.txt')!r}, {str(HACKS / 'ref_affine.py')!r}, "/etc/stitchcuda-escape"):
    try:
        open(target, "a").write("escaped")
        print("WROTE", target)
    except OSError as e:
        print("refused", target, e.strerror)
"""
    p = _boxed(run, code)
    assert p.returncode == 0, p.stderr
    assert "WROTE" not in p.stdout and p.stdout.count("refused") == 3, p.stdout
    assert (run / "mine.txt").read_text() == "ok"
    assert not (outside / "x.txt").exists() and "escaped" not in (HACKS / "ref_affine.py").read_text()
    assert "Read-only file system" in p.stdout  # the reference file: visible, not writable


@needs_bwrap
def test_the_home_folder_is_hidden(tmp_path, home):
    run = tmp_path / "run"
    run.mkdir()
    p = _boxed(run, "import os; print(os.path.exists(os.path.expanduser('~/secret.txt')))", HOME=str(home))
    assert p.returncode == 0 and p.stdout.strip() == "False", (p.stdout, p.stderr)


@needs_bwrap
def test_there_is_no_network(tmp_path, listener):
    run = tmp_path / "run"
    run.mkdir()
    code = f"""
import socket
try:
    socket.create_connection(("127.0.0.1", {listener.port}), timeout=5).sendall(b"escaped")
    print("CONNECTED")
except OSError as e:
    print("refused", e)
"""
    p = _boxed(run, code)
    assert p.returncode == 0 and "refused" in p.stdout, (p.stdout, p.stderr)
    assert listener.connections == []


@needs_bwrap
def test_the_parent_cannot_be_signalled(tmp_path):
    """A pid namespace of its own: the Verifier's process (this one) is not there to signal."""
    run = tmp_path / "run"
    run.mkdir()
    code = f"""
import os, signal
try:
    os.kill({os.getpid()}, signal.SIGTERM)
    print("SENT")
except ProcessLookupError:
    print("no such process")
os.kill(os.getppid(), signal.SIGTERM)
"""
    p = _boxed(run, code)
    assert "no such process" in p.stdout and "SENT" not in p.stdout, (p.stdout, p.stderr)


@needs_bwrap
def test_processes_started_inside_stay_inside(tmp_path):
    """The OS layer does not forbid processes (the audit hook does): it contains them."""
    run, outside = tmp_path / "run", tmp_path / "outside"
    run.mkdir()
    outside.mkdir()
    code = f"import subprocess; print(subprocess.run(['sh', '-c', 'touch {outside}/x'], capture_output=True).returncode)"
    p = _boxed(run, code)
    assert p.stdout.strip() != "0" and not (outside / "x").exists(), (p.stdout, p.stderr)


@needs_bwrap
def test_gpu_device_nodes_are_passed_through(tmp_path, monkeypatch):
    fake = ["/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm"]
    monkeypatch.setattr(sandbox, "gpu_devices", lambda: fake)
    argv = Box.for_run(tmp_path, dict(os.environ)).wrap(["true"])
    for dev in fake:
        i = argv.index(dev)
        assert argv[i - 1] == "--dev-bind" and argv[i + 1] == dev


@pytest.mark.gpu
@needs_bwrap
def test_cuda_works_inside(tmp_path):
    p = _boxed(tmp_path, "import torch; print(torch.cuda.is_available(), torch.ones(4, device='cuda').sum().item())")
    assert p.stdout.split() == ["True", "4.0"], (p.stdout, p.stderr)


@needs_bwrap
@needs_nvcc
def test_a_build_inside_lands_in_the_run_folder(tmp_path):
    """The shared cache is read-only inside: a build lands in the run folder's own build folder."""
    shared, run = tmp_path / "shared", tmp_path / "run"
    run.mkdir()
    code = f"""
from stitchcuda import runtime
r = runtime.build([{str(HACKS / 'kernels.cpp')!r}])
print(r.library)
"""
    p = _boxed(run, code, STITCHCUDA_CACHE=str(shared))
    assert p.returncode == 0, p.stderr
    assert Path(p.stdout.strip()).is_relative_to(run / "build")
    assert not (shared / "build").exists() or not any((shared / "build").iterdir())


def test_unavailable_sandbox_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv(sandbox.OFF_ENV, "1")
    box = Box.for_run(tmp_path, dict(os.environ))
    assert not box.active and sandbox.OFF_ENV in box.why
    assert box.wrap(["python", "x.py"]) == ["python", "x.py"]
    # The private folders come either way: the audit hook keeps writes to them.
    assert box.env["TMPDIR"] == str(tmp_path.resolve() / "tmp") and (tmp_path / "tmp").is_dir()


def test_probe_names_a_missing_tool(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name, path=None: None)
    sandbox.available.cache_clear()
    try:
        status = sandbox.available()
        assert not status.ok and "apt-get install bubblewrap" in status.why
    finally:
        sandbox.available.cache_clear()


# --- layer 4: the build cache ---------------------------------------------------------------------


@needs_nvcc
def test_a_changed_cached_library_is_not_loaded(isolated_cache, tmp_path):
    src = tmp_path / "k.cpp"
    src.write_text('extern "C" int seven() { return 7; }\n')
    first = runtime.build([src])
    assert (first.library.parent / runtime.HASH_FILE).exists()
    assert runtime.build([src]).cached
    first.library.write_bytes(first.library.read_bytes() + b"\0tampered")
    again = runtime.build([src])
    assert not again.cached and any("recorded hash" in n for n in again.notes), again.notes
    assert b"tampered" not in again.library.read_bytes()
    assert runtime.build([src]).cached  # the rebuilt entry is whole again


@needs_nvcc
def test_private_builds_leave_the_shared_cache_alone(isolated_cache, tmp_path, monkeypatch):
    shared_hit = tmp_path / "shared.cpp"
    shared_hit.write_text('extern "C" int one() { return 1; }\n')
    in_shared = runtime.build([shared_hit]).library
    monkeypatch.setenv(runtime.PRIVATE_ENV, str(tmp_path / "private"))
    assert runtime.build([shared_hit]).library == in_shared  # a verified shared entry is read
    new = tmp_path / "new.cpp"
    new.write_text('extern "C" int two() { return 2; }\n')
    built = runtime.build([new]).library
    assert built.is_relative_to(tmp_path / "private")
    assert not any(p.name.startswith(built.parent.name) for p in runtime.cache_dir().iterdir())


# --- the escapes, through the Verifier --------------------------------------------------------------

LAYERS = ["bwrap+audit", "audit"]


@pytest.fixture(params=LAYERS)
def layer(request, monkeypatch):
    if request.param == "bwrap+audit" and not sandbox.available().ok:
        pytest.skip(sandbox.available().why)
    if request.param == "audit":
        monkeypatch.setenv(sandbox.OFF_ENV, "1")
    return request.param


@pytest.fixture
def escape(tmp_path, build_cache, home, listener, layer):
    """Runs an escape candidate against a copy of ref_affine; returns (verdict, where things are)."""
    ref = tmp_path / "ref" / "ref_affine.py"
    ref.parent.mkdir()
    shutil.copy(HACKS / "ref_affine.py", ref)
    outside = tmp_path / "outside"
    outside.mkdir()
    where = {"ref": ref, "outside": outside, "target": outside / "escaped.txt", "listener": listener}

    def run(stem: str, **env: str):
        full = {"STITCHCUDA_CACHE": str(build_cache), "HOME": str(home), "ESCAPE_TARGET": str(where["target"]),
                "ESCAPE_PORT": str(listener.port), **env}
        opts = VerifyOptions(cpu_only=True, timeout_s=180.0, extra_env=full)
        v = verify(Task(path=ref), hack_candidate(stem), tmp_path / "run", opts)
        assert v.sandboxed == (layer == "bwrap+audit"), v.sandbox
        assert v.status == "hacked" and not v.accepted, (v.status, v.message, v.log_tail[-2000:])
        return v

    return run, where


def _named(v, code: str, text: str) -> None:
    found = [f for f in v.hack_findings if f.code == code and not f.file and text in f.message]
    assert found, [(f.code, f.message) for f in v.hack_findings]


def test_escape_write_outside_the_run_folder(escape):
    run, where = escape
    v = run("escape_write")
    _named(v, "sandbox-write", str(where["target"]))
    assert not where["target"].exists()


def test_escape_read_a_file_in_the_home_folder(escape):
    run, _ = escape
    v = run("escape_read_home")
    _named(v, "sandbox-read", "secret.txt")
    assert "sandbox-read" in {f.code for f in v.hack_findings if f.file}  # the static check too


def test_escape_connect_to_a_local_server(escape):
    run, where = escape
    v = run("escape_network")
    _named(v, "sandbox-network", f"127.0.0.1:{where['listener'].port}")
    assert where["listener"].connections == []


@pytest.mark.parametrize(("route", "code", "named"), [
    ("subprocess", "sandbox-process", "start a process: sh -c touch"),
    ("os.system", "sandbox-process", "os.system"),
    ("fork", "sandbox-process", "os.fork"),
    ("posix_spawn", "sandbox-process", "os.posix_spawn"),
    # libc opened by name through ctypes is refused as it opens, before system() is looked up in it
    # (libc's system() through the candidate's own library's handle: tests/test_redteam_round7.py)
    ("ctypes", "sandbox-native", "load libc.so.6"),
])
def test_escape_spawn_a_process(escape, route, code, named):
    run, where = escape
    v = run("escape_spawn", ESCAPE_ROUTE=route)
    _named(v, code, named)
    assert not where["target"].exists()


def test_escape_signal_the_parent(escape):
    run, _ = escape
    v = run("escape_signal_parent")  # this test process is still here to read it
    _named(v, "sandbox-signal", "signal 15")


def test_escape_modify_the_reference(escape):
    run, where = escape
    before = where["ref"].read_text()
    v = run("escape_reference")
    _named(v, "sandbox-write", str(where["ref"]))
    assert where["ref"].read_text() == before


@needs_nvcc
def test_escape_overwrite_another_candidates_cached_library(escape, build_cache, tmp_path):
    run, _ = escape
    victim_src = tmp_path / "victim.cpp"
    victim_src.write_text('extern "C" int victim() { return 42; }\n')
    old = os.environ.get("STITCHCUDA_CACHE")
    os.environ["STITCHCUDA_CACHE"] = str(build_cache)
    try:
        victim = runtime.build([victim_src]).library
        before = victim.read_bytes()
        v = run("escape_cache")
        assert victim.read_bytes() == before
        assert runtime.build([victim_src]).cached  # still whole: its hash matches
    finally:
        if old is None:
            os.environ.pop("STITCHCUDA_CACHE")
        else:
            os.environ["STITCHCUDA_CACHE"] = old
    _named(v, "sandbox-write", str(victim))


# --- the legitimate candidates -------------------------------------------------------------------


@pytest.mark.parametrize(("ref", "stem"), [("ref_affine", "good_affine"), ("ref_linear", "good_linear"),
                                           ("ref_shifted_norm", "good_shifted_norm")])
def test_good_candidates_are_accepted_sandboxed(build_cache, tmp_path, ref, stem):
    opts = VerifyOptions(cpu_only=True, timeout_s=180.0, extra_env={"STITCHCUDA_CACHE": str(build_cache)})
    v = verify(hack_task(ref), hack_candidate(stem), tmp_path / "run", opts)
    assert v.status == "ok" and v.accepted, (v.status, v.message, v.log_tail[-2000:])
    assert v.sandboxed == sandbox.available().ok and v.sandbox


def test_torch_compile_in_the_worker_is_not_the_candidates_doing(build_cache, tmp_path, monkeypatch):
    """The revert's cause (f543bca): on a machine without bubblewrap every honest candidate was
    'hacked' because torch created /tmp/torchinductor_root while the worker timed torch.compile.
    Here the reference itself runs through torch.compile (Inductor on the CPU: caches written, the
    C++ compiler started) and makes a folder outside the run folder on every call, inside the real
    worker, hook alone: no sandbox finding, and torch's caches land in the run folder."""
    monkeypatch.setenv(sandbox.OFF_ENV, "1")
    outside = tmp_path / "torchinductor_elsewhere"
    opts = VerifyOptions(cpu_only=True, timeout_s=300.0, extra_env={"STITCHCUDA_CACHE": str(build_cache),
                                                                     "REF_OUTSIDE": str(outside)})
    v = verify(hack_task("ref_affine_compiled"), hack_candidate("good_affine"), tmp_path / "run", opts)
    assert not [f for f in v.hack_findings if f.code.startswith("sandbox-")], v.hack_findings
    assert v.status == "ok" and v.accepted and not v.sandboxed, (v.status, v.message, v.log_tail[-2000:])
    assert outside.is_dir()  # the reference's own write went through
    cache = tmp_path / "run" / "tmp" / "torchinductor"
    assert cache.is_dir() and any(cache.rglob("*")), "Inductor's cache is not in the run folder"


def test_every_worker_gets_its_caches_in_the_run_folder(tmp_path, monkeypatch):
    """Sandboxed or not: TMPDIR, Inductor's and Triton's caches, the builds, torch's extensions."""
    monkeypatch.setenv(sandbox.OFF_ENV, "1")
    box = Box.for_run(tmp_path / "run", {"TORCHINDUCTOR_CACHE_DIR": "/tmp/elsewhere", "HOME": str(tmp_path)})
    run = (tmp_path / "run").resolve()
    for var in ("TMPDIR", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "STITCHCUDA_PRIVATE_BUILD",
                "TORCH_EXTENSIONS_DIR"):
        assert Path(box.env[var]).is_relative_to(run), (var, box.env[var])
    assert Path(box.env["TORCHINDUCTOR_CACHE_DIR"]).is_relative_to(box.env["TMPDIR"])


@pytest.mark.gpu
@pytest.mark.parametrize("stem", ["gpu_good_cublas", "gpu_good_affine"])
def test_gpu_candidates_are_accepted_sandboxed(build_cache, tmp_path, stem):
    ref = "ref_matmul_relu" if "cublas" in stem else "ref_affine"
    opts = VerifyOptions(timeout_s=300.0, time_compile=False, extra_env={"STITCHCUDA_CACHE": str(build_cache)})
    v = verify(hack_task(ref), hack_candidate(stem, kernels="kernels.cu"), tmp_path / "run", opts)
    assert v.status == "ok" and v.accepted and torch.cuda.is_available(), (v.status, v.message, v.log_tail[-2000:])
    assert v.sandboxed == sandbox.available().ok



@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_the_builtin_coders_cudnn_candidate_is_accepted_sandboxed(build_cache, tmp_path):
    """Issue 22's legitimate cuDNN candidate: the built-in coder's own output for a convolution
    block (cuDNN, a channels-last result, a fused pointwise kernel), verified inside the sandbox."""
    from stitchcuda.agents.coder import builtin as coder_builtin
    from stitchcuda.agents.plan import planner
    from stitchcuda.task import load_task_module

    task = hack_task("ref_conv_block")
    plan = planner.plan(task)
    assert plan.supported, plan.unsupported
    _, cls = load_task_module(task)
    cand = coder_builtin.build_candidate(plan, cls, title=task.name)
    assert "cudnn" in cand.files["fused_kernels.cu"].lower()
    opts = VerifyOptions(timeout_s=300.0, time_compile=False, extra_env={"STITCHCUDA_CACHE": str(build_cache)})
    v = verify(task, cand, tmp_path / "run", opts)
    assert v.status == "ok" and v.accepted, (v.status, v.message, v.log_tail[-2000:])
    assert v.sandboxed == sandbox.available().ok
