"""Threads a candidate's own native code starts (std::thread, pthread_create in its C++/CUDA).

Python threads start through `_thread` (offthread.py counts them); native ones never pass through
Python. A small library preloaded into the worker (native_threads.c, LD_PRELOAD) records the call
stack of every pthread_create while the worker has armed it, during the candidate's import and its
forward calls. A thread whose creating stack, or start routine, lies in a library of the
candidate's own (its run folder, the build cache its sources were built into) is the candidate's;
threads CUDA, cuBLAS, OpenMP or PyTorch start for themselves are not. Where no C compiler is found
or the library cannot be built, the watch is off and the verdict's notes say so.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

SOURCE = "native_threads.c"
# Libraries between a thread's requester and pthread_create: never the requester themselves.
_MACHINERY = ("libc.so", "libc-", "libpthread", "libstdc++", "libgcc_s", "ld-linux", "native_threads.")
MAX_CALLS, DEPTH = 256, 24  # as in native_threads.c
MAX_SYMS, SYM_LEN = 64, 192  # as in native_threads.c
# More threads started in one window than the ring keeps: the watch cannot say whose the first were
# (a candidate could start them to push its own out), so it counts as the candidate's.
OVERFLOW_THREADS = "more threads than the native watch keeps"
OVERFLOW = "(more ATen kernel names looked up than the watch keeps)"


def library(cache: Path) -> Path | None:
    """The preload library, built once per source text into `cache`; None where it cannot be."""
    text = resources.files(__package__).joinpath(SOURCE).read_bytes()
    out = cache / f"native_threads.{hashlib.sha256(text).hexdigest()[:16]}.so"
    if out.exists():
        return out
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        return None
    cache.mkdir(parents=True, exist_ok=True)
    # Private names for the source and the output: verifications run side by side (threads of one
    # process, other processes) may build at the same moment; the rename is atomic.
    with tempfile.TemporaryDirectory(dir=cache, prefix="native_threads-") as folder:
        src, tmp = Path(folder) / SOURCE, Path(folder) / "native_threads.so"
        src.write_bytes(text)
        try:
            subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", str(tmp), str(src), "-ldl"],
                           check=True, capture_output=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            return None
        # Preloaded, it stands in for dlsym and dlopen: a process where it cannot find glibc's own
        # would find nothing by name, and one where its dlopen asked as itself would miss libraries
        # found along the asking library's RUNPATH. It is used only where a probe under it does both.
        if not _probe(compiler, Path(folder), tmp):
            return None
        tmp.replace(out)
    return out


_PROBE_CALLER = """#include <dlfcn.h>
void* sc_probe_open(void) { return dlopen("libsc_probe_dep.so", RTLD_NOW); }
"""
_PROBE_RUN = """import ctypes, sys
ctypes.CDLL('libm.so.6').cos
caller = ctypes.CDLL(sys.argv[1])
caller.sc_probe_open.restype = ctypes.c_void_p
sys.exit(0 if caller.sc_probe_open() else 3)
"""


def _probe(compiler: str, folder: Path, lib: Path) -> bool:
    """Under `lib` preloaded: a symbol found by name, and a library that dlopens a name found only
    along its own RUNPATH gets it."""
    (folder / "sub").mkdir()
    (folder / "dep.c").write_text("int sc_probe_dep(void) { return 7; }\n")
    (folder / "caller.c").write_text(_PROBE_CALLER)
    caller = folder / "libsc_probe_caller.so"
    try:
        subprocess.run([compiler, "-shared", "-fPIC", "-o", str(folder / "sub" / "libsc_probe_dep.so"),
                        str(folder / "dep.c")], check=True, capture_output=True, timeout=60)
        subprocess.run([compiler, "-shared", "-fPIC", "-o", str(caller), str(folder / "caller.c"), "-ldl",
                        "-Wl,--enable-new-dtags,-rpath,$ORIGIN/sub"], check=True, capture_output=True, timeout=60)
        run = subprocess.run([sys.executable, "-c", _PROBE_RUN, str(caller)],
                             env={**os.environ, "LD_PRELOAD": str(lib)}, capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return False
    return run.returncode == 0


def preload(env: dict[str, str], lib: Path | None) -> None:
    """Add the library to the worker's LD_PRELOAD (kept ahead of any the user set)."""
    if lib is not None:
        env["LD_PRELOAD"] = f"{lib}:{env['LD_PRELOAD']}" if env.get("LD_PRELOAD") else str(lib)


def without(env: Mapping[str, str]) -> dict[str, str]:
    """`env` with the watch taken out of LD_PRELOAD (the user's own entries kept, in order). Tools
    that only measure a candidate already judged (Nsight Compute) run without it: their own
    processes are preloaded too, and nothing reads the watch's record there. With any watch that
    interposes dlopen preloaded, ncu's target found no CUDA driver (the H200, 2026-12-01,
    scripts/probe_ncu_preload.py: with or without the tail jump; the same source without dlopen
    profiled)."""
    out = dict(env)
    kept = [p for p in out.get("LD_PRELOAD", "").split(":")
            if p and not (Path(p).name.startswith("native_threads.") and Path(p).suffix == ".so")]
    if kept:
        out["LD_PRELOAD"] = ":".join(kept)
    else:
        out.pop("LD_PRELOAD", None)
    return out


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


class Watch:
    """The worker's side: mark where the candidate's code begins, then name the native threads its libraries
    started since."""

    def __init__(self) -> None:
        self.available = False
        try:
            process = ctypes.CDLL(None)
            self._count = process.sc_thread_count
            self._count.restype = ctypes.c_long
            self._frame = process.sc_thread_frame
            self._frame.restype = ctypes.c_void_p
            self._frame.argtypes = [ctypes.c_long, ctypes.c_int]
            self._sym_count = process.sc_dlsym_count
            self._sym_count.restype = ctypes.c_int
            self._sym_name = process.sc_dlsym_name
            self._sym_name.restype = ctypes.c_char_p
            self._sym_name.argtypes = [ctypes.c_int]
            self._lib_count = process.sc_lib_count
            self._lib_count.restype = ctypes.c_int
            self._lib_path = process.sc_lib_path
            self._lib_path.restype = ctypes.c_char_p
            self._lib_path.argtypes = [ctypes.c_int]
            self._lib_stat = process.sc_lib_stat
            self._lib_stat.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_longlong)]
            self._dladdr = process.dladdr
            self._dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
            self.available = True
        except (OSError, ValueError, AttributeError):
            pass  # not preloaded: no native watch in this process
        self.own: list[str] = []  # folders whose libraries are the candidate's

    def mark(self) -> int:
        """Threads started in this process so far: where a window of the candidate's code begins."""
        return int(self._count()) if self.available else 0

    def started_since(self, since: int) -> list[str]:
        """The candidate's libraries that started a thread since `since` (one entry per thread);
        OVERFLOW_THREADS where more started than the ring keeps (their callers are lost)."""
        if not self.available:
            return []
        now = int(self._count())
        found = [OVERFLOW_THREADS] if now - since > MAX_CALLS else []
        for i in range(max(since, now - MAX_CALLS), now):
            start = self._library(self._frame(i, 0))
            # Who asked for the thread: the first caller outside the thread machinery (libc,
            # libstdc++'s std::thread, this watch). A thread cuBLAS starts inside a call from the
            # candidate's code is cuBLAS's; one std::thread starts for the candidate's code is not.
            callers = (self._library(self._frame(i, k)) for k in range(1, DEPTH + 1))
            caller = next((lib for lib in callers if lib and not Path(lib).name.startswith(_MACHINERY)), None)
            own = next((lib for lib in (start, caller) if lib and self._is_own(lib)), None)
            if own is not None:
                found.append(Path(own).name)
        return found

    def loaded(self) -> list[tuple[str, tuple[int, int, int, int]]]:
        """(path, (device, inode, size, mtime ns)) of every library loaded by path, as its file was
        just before it loaded."""
        if not self.available:
            return []
        out = []
        for i in range(self._lib_count()):
            st = (ctypes.c_longlong * 4)()
            if self._lib_stat(i, st) == 0:
                out.append((self._lib_path(i).decode(errors="replace"), (st[0], st[1], st[2], st[3])))
        return out

    def changed_since_loaded(self) -> list[str]:
        """The candidate's libraries (under `own`) whose file is gone or another since it loaded."""
        gone = []
        for path, (dev, ino, size, mtime) in self.loaded():
            if not self._is_own(path):
                continue
            try:
                st = os.stat(path)
                same = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) == (dev, ino, size, mtime)
            except OSError:
                same = False
            if not same:
                gone.append(path)
        return gone

    def looked_up(self) -> list[str]:
        """The names in ATen's kernel namespaces (mangled) anything in this process looked up by
        dlsym, in order; OVERFLOW first where more were looked up than the record keeps."""
        if not self.available:
            return []
        count = self._sym_count()
        if count < 0:
            return [OVERFLOW] + [self._sym_name(i).decode(errors="replace") for i in range(MAX_SYMS)]
        return [self._sym_name(i).decode(errors="replace") for i in range(min(count, MAX_SYMS))]

    def _library(self, address: int | None) -> str | None:
        if not address:
            return None
        info = _DlInfo()
        if self._dladdr(address, ctypes.byref(info)) == 0 or not info.dli_fname:
            return None
        return os.path.realpath(info.dli_fname.decode(errors="replace"))

    def _is_own(self, lib: str) -> bool:
        return any(lib.startswith(folder.rstrip("/") + "/") for folder in self.own)
