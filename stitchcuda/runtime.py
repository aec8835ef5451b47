"""Build generated sources into a shared library and call it through ctypes.

Why not torch's cpp_extension: a translation unit that includes torch/extension.h takes about a
minute to compile cold (64 s measured on the H100 host), and every candidate is built. Kernels and
their host-side launchers need only the CUDA runtime, so we compile them with plain nvcc into a .so
(about 1.5 s) and pass raw pointers and the current stream from Python. Builds are cached by a hash
of everything that affects the binary.

This module is also what generated ModelNew files import at run time; it must stay importable with
torch alone.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stitchcuda import cuda_libs, paths


class BuildError(RuntimeError):
    def __init__(self, message: str, log: str):
        super().__init__(message)
        self.log = log


def cache_dir() -> Path:
    return paths.user_cache() / "build"


def find_nvcc() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and Path(root, "bin", "nvcc").exists():
            return str(Path(root, "bin", "nvcc"))
    return None


def default_arch() -> str:
    """STITCHCUDA_ARCH, else sm_XY of the current GPU, else the arch of the target the coder sizes
    kernels for (stitchcuda.target: STITCHCUDA_TARGET, or its default without a GPU): never an
    assumed H100."""
    env = os.environ.get("STITCHCUDA_ARCH")
    if env:
        return env
    try:
        import torch

        if torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability()
            return f"sm_{major}{minor}"
    except Exception:  # noqa: BLE001 - any failure here just means "no GPU to ask"
        pass
    from stitchcuda.target import Target

    return Target.current().arch


_tool_versions: dict[str, str] = {}


def _tool_version(tool: str) -> str:
    if tool not in _tool_versions:
        try:
            out = subprocess.run([tool, "--version"], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            out = ""
        _tool_versions[tool] = out.strip().splitlines()[-1] if out.strip() else tool
    return _tool_versions[tool]


@dataclass
class BuildResult:
    library: Path
    seconds: float
    cached: bool
    log: str
    command: list[str]
    unresolved: list[str] = field(default_factory=list)  # libraries linked unresolved (not found here)
    notes: list[str] = field(default_factory=list)  # cache entries passed over (a hash that no longer matched)


def build(
    sources: Sequence[Path | str],
    *,
    arch: str | Sequence[str] | None = None,
    libraries: Sequence[str] = (),
    extra_flags: Sequence[str] = (),
    timeout_s: float = 300.0,
    wrap: Callable[[list[str]], list[str]] | None = None,
    scratch: Path | None = None,
    env: dict[str, str] | None = None,
) -> BuildResult:
    """Compile sources (.cu with nvcc; .cpp/.c only with the host compiler) into one .so. `wrap`
    runs the compiler inside a sandbox (the Verifier's: sources are untrusted, and `#include` or
    `.incbin` of any path reads it into the build), writing into `scratch`, a folder the sandbox
    may write, with `env` (the sandbox's: its temp folder is one it can write); the library is then
    published to the cache from here."""
    paths = [Path(s) for s in sources]
    has_cuda = any(p.suffix == ".cu" for p in paths)
    arch = arch or default_arch()
    if has_cuda:
        compiler = find_nvcc()
        if compiler is None:
            raise BuildError("nvcc not found (install the CUDA toolkit or set CUDA_HOME)", "")
        flags = ["-O3", *_arch_flags(arch), "-shared", "-Xcompiler", "-fPIC", "-std=c++17", "-lineinfo"]
    else:
        compiler = shutil.which("c++") or shutil.which("g++") or "c++"
        flags = ["-O3", "-shared", "-fPIC", "-std=c++17"]
    flags += list(extra_flags)
    located = cuda_libs.locate(list(libraries), compiler if has_cuda else None)
    if located.missing_headers:
        raise BuildError(cuda_libs.install_hint(located.missing_headers), "")
    flags += located.include_flags
    link = located.link_args
    h = hashlib.sha256()
    for p in paths:
        h.update(p.name.encode())
        h.update(p.read_bytes())
    # Headers beside the sources can change the binary too.
    for p in sorted(
        {q for s in paths for q in s.parent.glob("*.cuh")} | {q for s in paths for q in s.parent.glob("*.h")}
    ):
        h.update(p.read_bytes())
    h.update(" ".join([_tool_version(compiler), *flags, *link]).encode())
    key = h.hexdigest()[:24]
    # The shared cache first, then this run's own folder: each entry only if its library still has
    # the hash recorded when it was built (a library changed since is never loaded).
    tampered: list[str] = []
    for root in lookup_roots():
        found = _cached(root / key, tampered)
        if found is not None:
            return BuildResult(found.library, 0.0, True, found.log, [], located.notes, tampered)
    out_root = private_build_dir() or cache_dir()
    out_dir = out_root / key
    out_root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"{key}.", dir=out_root))
    inner = Path(tempfile.mkdtemp(prefix=f"{key}.", dir=scratch)) if wrap is not None and scratch else tmp
    cmd = [compiler, *flags, "-o", str(inner / "lib.so"), *[str(p) for p in paths], *link]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(wrap(cmd) if wrap is not None else cmd, capture_output=True, text=True,
                              timeout=timeout_s, env=env)
        if inner != tmp and proc.returncode == 0:
            shutil.copyfile(inner / "lib.so", tmp / "lib.so")
    except subprocess.TimeoutExpired:
        shutil.rmtree(tmp, ignore_errors=True)
        raise BuildError(f"build timed out after {timeout_s:.0f} s", "") from None
    finally:
        if inner != tmp:
            shutil.rmtree(inner, ignore_errors=True)
    seconds = time.perf_counter() - t0
    log = " ".join(cmd) + "\n" + "".join(f"note: {n}\n" for n in located.notes) + proc.stdout + proc.stderr
    if proc.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise BuildError(f"build failed ({Path(compiler).name} exit {proc.returncode})", log)
    (tmp / "build.log").write_text(log)
    (tmp / HASH_FILE).write_text(_sha256(tmp / "lib.so"))
    lib = _publish(tmp, out_dir)
    return BuildResult(lib, seconds, False, log, cmd, located.notes, tampered)


HASH_FILE = "lib.sha256"  # beside lib.so: its sha256, written by the build that made it
PRIVATE_ENV = "STITCHCUDA_PRIVATE_BUILD"


def private_build_dir() -> Path | None:
    """Where builds land when set (the Verifier sets it to the run folder for every candidate's
    worker): the shared cache is then only read, so no candidate writes what another one loads."""
    root = os.environ.get(PRIVATE_ENV)
    return Path(root) if root else None


def lookup_roots() -> list[Path]:
    """The folders built libraries are looked up in: the shared cache, and the private build folder
    where one is set (also the audit hook's roots of a candidate's own libraries)."""
    private = private_build_dir()
    return [cache_dir(), *([private] if private else [])]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@dataclass
class _Hit:
    library: Path
    log: str


def _cached(out_dir: Path, tampered: list[str]) -> _Hit | None:
    """The cached library in `out_dir`, if its bytes still hash to the recorded value."""
    lib = out_dir / "lib.so"
    if not lib.exists():
        return None
    record = out_dir / HASH_FILE
    try:
        ok = record.read_text().strip() == _sha256(lib)
    except OSError:
        ok = False
    if not ok:
        tampered.append(f"cached library {lib} does not match its recorded hash (changed after its build, "
                        "or built before hashes were recorded): not loaded, rebuilt")
        return None
    log = out_dir / "build.log"
    return _Hit(lib, log.read_text() if log.exists() else "")


def _publish(tmp: Path, out_dir: Path) -> Path:
    """Move a finished build to its cache entry, atomically: concurrent builders of the same key
    both end with a whole library. A stale entry (no record, or a changed library) is moved aside."""
    for _ in range(3):
        try:
            os.replace(tmp, out_dir)
            return out_dir / "lib.so"
        except OSError:
            if _cached(out_dir, []) is not None:  # another builder's, whole and verified: use it
                shutil.rmtree(tmp, ignore_errors=True)
                return out_dir / "lib.so"
            stale = out_dir.with_name(f"{out_dir.name}.stale.{os.getpid()}.{time.monotonic_ns()}")
            try:
                os.replace(out_dir, stale)
            except OSError:
                break
            shutil.rmtree(stale, ignore_errors=True)
    return tmp / "lib.so"  # the entry cannot be replaced (read-only): this build's own folder


def _arch_flags(arch: str | Sequence[str]) -> list[str]:
    """One arch: -arch=sm_XY (its SASS and PTX). Several: a fat binary with SASS for each and the PTX
    of the newest, which the driver compiles for GPUs newer than any listed."""
    if isinstance(arch, str):
        return [f"-arch={arch}"]
    codes = [a.removeprefix("sm_") for a in arch]
    if not codes:
        raise ValueError("no GPU arch to build for")
    flags = [f"-gencode=arch=compute_{c},code=sm_{c}" for c in codes]
    newest = max(codes, key=lambda c: int("".join(ch for ch in c if ch.isdigit()) or 0))
    return flags + [f"-gencode=arch=compute_{newest},code=compute_{newest}"]


class Library:
    """A built .so whose exported launchers take (args..., stream) and return a cudaError_t."""

    def __init__(self, path: Path, *, unresolved: Sequence[str] = ()):
        self.path = path
        self.unloadable = ""  # why this library cannot run on this machine, if it cannot
        try:
            self._lib = ctypes.CDLL(str(path))
        except OSError as e:
            # Linked against a CUDA library this machine does not have (a machine without a GPU,
            # building to check the code): the build stands, and any call says why it cannot run.
            if not unresolved or "undefined symbol" not in str(e):
                raise
            self._lib = None
            self.unloadable = f"{e}; not installed here: {'; '.join(unresolved)}"
        self._fns: dict[str, ctypes._CFuncPtr] = {}
        self._all: dict[str, ctypes._CFuncPtr] = {}  # call_all's entry points, argtypes set

    def _fn(self, name: str):
        fn = self._fns.get(name)
        if fn is None:
            if self._lib is None:
                raise RuntimeError(f"{self.path.name} cannot run on this machine: {self.unloadable}")
            fn = getattr(self._lib, name)
            fn.restype = ctypes.c_int
            self._fns[name] = fn
        return fn

    def call(self, name: str, *args) -> None:
        """Call an exported launcher; tensors pass as pointers, ints as int64, floats as double.
        The current CUDA stream is appended, so the work is ordered with the caller's stream."""
        import torch

        # The per-call cost is what launch-bound modules pay for every kernel: argtypes are set once
        # per signature so ctypes converts plain ints, and the stream comes from the raw accessor.
        raw: list[int | float | None] = []
        kinds: list[type] = []
        device = None
        for a in args:
            if isinstance(a, torch.Tensor):
                raw.append(a.data_ptr())
                kinds.append(ctypes.c_void_p)
                if device is None:
                    device = a.device
            elif isinstance(a, bool | int):
                raw.append(int(a))
                kinds.append(ctypes.c_int64)
            elif isinstance(a, float):
                raw.append(a)
                kinds.append(ctypes.c_double)
            elif a is None:
                raw.append(None)
                kinds.append(ctypes.c_void_p)
            else:
                raise TypeError(f"{name}: cannot pass {type(a).__name__} to a kernel launcher")
        kinds.append(ctypes.c_void_p)
        signature = tuple(kinds)
        stream = None
        if device is not None and device.type == "cuda":
            stream = torch._C._cuda_getCurrentRawStream(device.index if device.index is not None else torch.cuda.current_device())
        fn = self._fn(name)
        if fn.argtypes != signature:
            fn.argtypes = signature
        rc = fn(*raw, stream)
        if rc != 0:
            raise RuntimeError(f"{name} failed: CUDA error {rc} ({_cuda_error_name(rc)})")


    def call_all(self, name: str, tensors: Sequence[Any], stream: int | None = None) -> None:
        """Call `name(void** pointers, stream)`: one ctypes call hands the C side every buffer of a
        forward, in order (see the built-in coder's stitch_forward), however many kernels it has.

        This is on every forward's path: the host time spent here is GPU time lost for a module
        whose kernels are short. So: argtypes are set once, the pointer array goes to C as it is
        (no cast), and the stream is looked up once (`stream`, from `stream_of`, where the caller has
        it already)."""
        fn = self._all.get(name)
        if fn is None:
            fn = self._fn(name)
            fn.argtypes = (ctypes.c_void_p, ctypes.c_void_p)
            self._all[name] = fn
        ptrs = (ctypes.c_void_p * max(1, len(tensors)))(*[t.data_ptr() for t in tensors])
        if stream is None:
            stream = stream_of(tensors[0]) if tensors else 0
        rc = fn(ptrs, stream or None)
        if rc != 0:
            raise RuntimeError(f"{name} failed: CUDA error {rc} ({_cuda_error_name(rc)})")


def stream_of(t: Any) -> int:
    """The raw cudaStream_t (as an int) of the current stream on `t`'s device; 0 for a CPU tensor.
    Generated forwards key their reusable buffers on it, so two streams never share them."""
    if not t.is_cuda:
        return 0
    import torch

    return torch._C._cuda_getCurrentRawStream(t.get_device())


def _cuda_error_name(code: int) -> str:
    try:
        import torch

        return torch.cuda.cudart().cudaGetErrorString(code)  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001
        return "see cudaError_t"


_loaded: dict[str, Library] = {}
_lock = threading.Lock()


def load(
    sources: Sequence[Path | str] | Path | str,
    *,
    libraries: Sequence[str] = (),
    extra_flags: Sequence[str] = (),
) -> Library:
    """Build (or reuse the cached build of) the sources and load the library. Used by ModelNew."""
    if isinstance(sources, str | Path):
        sources = [sources]
    with _lock:
        result = build(sources, libraries=libraries, extra_flags=extra_flags)
        key = str(result.library)
        if key not in _loaded:
            _loaded[key] = Library(result.library, unresolved=result.unresolved)
        return _loaded[key]
