"""The OS sandbox around a candidate's worker (issue 22, layer 1): bubblewrap, where it works.

The worker runs untrusted code (an LLM's, or a file someone sent): its import and forward may do
anything the user may. Inside bubblewrap it has no network (a namespace of its own, loopback
only), no view of other processes (a pid namespace: no parent to signal), no capabilities, and a
filesystem that is read-only everywhere, with the user's folders (/home, /root, /tmp, /run, ...)
hidden behind empty tmpfs mounts. Only what a build and a run need comes back: the Python prefix
and site-packages, the project's own packages, the CUDA toolkit, the shared build caches (read
only), the reference file (read only); the run folder is the one place it may write. The GPU
device nodes are passed through.

Where bubblewrap is missing, or user namespaces are off (some containers, hardened kernels), the
worker runs without it; the probe says why, once per process, and the verdict and `doctor` say so.
The audit hook (audit.py) protects either way.
"""

from __future__ import annotations

import functools
import glob
import importlib.util
import os
import shutil
import site
import subprocess
import sys
import sysconfig
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

TOOL = "bwrap"
INSTALL_HINT = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)"
OFF_ENV = "STITCHCUDA_NO_SANDBOX"  # "1": run workers without bubblewrap (debugging; the verdict says so)

# Folders that hold the user's (and other users') files, sockets and mounts: hidden behind an empty
# tmpfs; what a build needs from them is bound back read-only.
HIDDEN = ("/home", "/root", "/tmp", "/var/tmp", "/run", "/mnt", "/media", "/srv")
# Packages whose folders (editable installs live in a checkout anywhere) the worker imports.
PACKAGES = ("stitchcuda", "stitchcuda.agents", "stitchcuda.profiling", "torch", "triton", "nvidia")


@dataclass(frozen=True)
class Availability:
    ok: bool
    tool: str | None  # the bwrap binary, where found
    why: str  # one line: what works, or what is missing and how to get it


@functools.lru_cache(maxsize=1)
def available() -> Availability:
    """Whether bubblewrap can start a sandbox here: found, and a probe run with every namespace
    this module asks for succeeds. Probed once per process."""
    tool = shutil.which(TOOL)
    if tool is None:
        return Availability(False, None, f"bubblewrap ({TOOL}) not found: {INSTALL_HINT}")
    probe = [tool, *_namespace_args(), "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "true"]
    try:
        proc = subprocess.run(probe, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return Availability(False, tool, f"{tool} could not run: {e}")
    if proc.returncode != 0:
        err = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        return Availability(False, tool, f"{tool} cannot create namespaces here ({err}): user namespaces are "
                            "off (sysctl kernel.unprivileged_userns_clone=1, or a container without them)")
    return Availability(True, tool, f"{tool}: no network, read-only filesystem, home hidden")


def _namespace_args() -> list[str]:
    # --unshare-all: user (where possible), ipc, pid, net, uts, cgroup. --cap-drop ALL matters when
    # the user is root: otherwise the sandbox keeps the capabilities to remount what it was given.
    return ["--unshare-all", "--cap-drop", "ALL", "--die-with-parent"]


@dataclass
class Box:
    """How one worker runs: bubblewrap's argv (when active) and the environment it gets."""

    run_dir: Path
    active: bool
    why: str
    env: dict[str, str]
    readable: list[Path] = field(default_factory=list)  # bound back read-only
    writable: list[Path] = field(default_factory=list)  # bound read-write
    devices: list[str] = field(default_factory=list)
    locks: list[Path] = field(default_factory=list)  # lock files shared with other sandboxes: read-only
    hidden: list[Path] = field(default_factory=list)  # behind an empty tmpfs, besides HIDDEN

    @classmethod
    def for_run(cls, run_dir: Path, env: dict[str, str], *, reference: Path | None = None,
                locks: Iterable[str | Path | None] = (), hide: Iterable[Path] = ()) -> Box:
        """The sandbox of a worker whose run folder is `run_dir`. `env` is the worker's environment;
        the returned Box's env adds a private temp folder and private build folders in the run folder
        (the shared caches stay read-only: another candidate's cached library is out of reach).
        `locks`: files every worker flocks (the GPU's lock), bound read-only: flock needs no write
        access, and a file every sandbox may write would be a channel between candidates."""
        run_dir = Path(run_dir).resolve()
        env = private_env(env, run_dir)
        writable = [run_dir]
        readable = readable_paths(env, reference)
        shared = [Path(p) for p in locks if p]
        hidden = [Path(p).resolve() for p in hide]
        status = available()
        if os.environ.get(OFF_ENV) == "1":
            return cls(run_dir, False, f"not sandboxed: {OFF_ENV}=1", env, readable, writable, locks=shared, hidden=hidden)
        if not status.ok:
            return cls(run_dir, False, f"not sandboxed: {status.why}", env, readable, writable, locks=shared,
                       hidden=hidden)
        return cls(run_dir, True, status.why, env, readable, writable, gpu_devices(), shared, hidden)

    def wrap(self, argv: list[str]) -> list[str]:
        """`argv` run inside the sandbox (unchanged where there is none)."""
        if not self.active:
            return list(argv)
        tool = available().tool
        assert tool is not None
        out = [tool, *_namespace_args(), "--ro-bind", "/", "/"]
        for hidden in HIDDEN:
            if os.path.isdir(hidden) and not os.path.islink(hidden):
                out += ["--tmpfs", hidden]
        home = self.env.get("HOME")
        if home and os.path.isdir(home) and not _under(Path(home), [Path(h) for h in HIDDEN]):
            out += ["--tmpfs", home]
        for p in self.hidden:
            if p.is_dir() and not _under(p, [Path(h) for h in HIDDEN]):
                out += ["--tmpfs", str(p)]
        out += ["--dev", "/dev", "--proc", "/proc"]
        for dev in self.devices:
            out += ["--dev-bind", dev, dev]
        for p in self.readable:
            out += ["--ro-bind-try", str(p), str(p)]
        for p in self.writable:
            out += ["--bind", str(p), str(p)]
        for p in self.locks:
            if not p.exists():
                p.touch()  # bind needs it to exist, and the sandbox cannot make it
            out += ["--ro-bind", str(p), str(p)]
        out += ["--chdir", str(self.run_dir), "--", *argv]
        return out


    def returncode(self, rc: int | None) -> int | None:
        """The worker's exit status as Popen would give it unwrapped: bubblewrap reports a child
        killed by signal N as exit code 128+N (a shell's convention), Popen as -N."""
        if self.active and rc is not None and 128 < rc < 128 + 65:
            return -(rc - 128)
        return rc


def private_env(env: dict[str, str], run_dir: Path) -> dict[str, str]:
    """The worker's environment, with its temp folder, torch's compile caches and its build folders
    in the run folder: every worker, sandboxed or not. What torch writes while the worker times
    torch.compile (Inductor's and Triton's caches, compile workers' files) then lands where writes
    are allowed anyway, and nothing of it reaches the user's /tmp or home."""
    env = dict(env)
    tmp = run_dir / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    env["TMPDIR"] = str(tmp)
    env["TORCHINDUCTOR_CACHE_DIR"] = str(tmp / "torchinductor")
    env["TRITON_CACHE_DIR"] = str(tmp / "triton")
    # The shared build cache is read (a hit there is verified against its recorded hash); what this
    # candidate builds lands in its own run folder (runtime.PRIVATE_ENV).
    env["STITCHCUDA_PRIVATE_BUILD"] = str(run_dir / "build")
    # torch's load_inline builds (and locks) in its extensions folder: a private one, so a
    # candidate cannot replace another's extension.
    env["TORCH_EXTENSIONS_DIR"] = str(run_dir / "torch_extensions")
    return env


def readable_paths(env: dict[str, str], reference: Path | None) -> list[Path]:
    """What the worker must read under a hidden folder: the Python installation, the project's
    packages, the CUDA toolkit, the shared caches, and the reference file."""
    paths: set[str] = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(sys.executable)}
    paths |= {os.path.realpath(sys.executable), os.path.dirname(os.path.realpath(sys.executable))}
    paths |= {p for p in sys.path if p}
    paths |= set(site.getsitepackages()) | {site.getusersitepackages()}
    paths |= {v for v in sysconfig.get_paths().values() if v}
    for name in PACKAGES:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is not None:
            paths |= set(spec.submodule_search_locations or [])
    for var in ("CUDA_HOME", "CUDA_PATH", "STITCHCUDA_CACHE", "XDG_CACHE_HOME", "TORCH_HOME",
                "VIRTUAL_ENV", "PYTHONPATH", "STITCHCUDA_EXTRA_INCLUDE"):
        for part in (env.get(var) or "").split(os.pathsep):
            if part:
                paths.add(part)
    nvcc = shutil.which("nvcc", path=env.get("PATH"))
    if nvcc:
        paths.add(str(Path(os.path.realpath(nvcc)).parent.parent))
    from stitchcuda import runtime

    paths.add(str(runtime.cache_dir()))
    if reference is not None:
        # The file alone: its folder may be the user's home, or hold what the candidate must not read.
        paths.add(str(Path(reference).resolve()))
    hidden = [Path(h) for h in HIDDEN] + ([Path(env["HOME"])] if env.get("HOME") else [])
    found = {Path(os.path.realpath(p)) for p in paths}
    found = {q for q in found if q.exists() and _under(q, hidden) and q not in hidden}
    # A folder inside another one bound already comes with it.
    return sorted(q for q in found if not any(r in q.parents for r in found))


def gpu_devices() -> list[str]:
    """The NVIDIA device nodes: CUDA opens them by path."""
    return sorted(p for p in glob.glob("/dev/nvidia*") if os.path.exists(p))


def _under(p: Path, roots: Iterable[Path]) -> bool:
    return any(p == r or r in p.parents for r in roots)
