"""Audit hooks in the worker (issue 22, layer 2): what the candidate's own Python may not do.

Installed in the worker before the candidate is imported (sys.addaudithook; it cannot be removed).
It refuses only the candidate's own attempts, decided twice over:

  when   inside a window (`window()`): the worker opens one around each call into the candidate's
         code (its import, ModelNew(...), every forward), the same calls offthread.watching counts
         threads and processes in. The reference's calls, torch.compile of the reference, the
         Verifier's own files, the profilers the worker starts run outside every window.
  whose  the call stack holds a frame of the candidate's own files (the run folder, less the
         worker's temp folder, where torch's compile caches and generated code live). Inside a
         window, torch writing its caches, or the worker writing its report, is not
         the candidate's doing; the candidate calling torch.save('/home/x') is (its forward's
         frame is on the stack).

Refused there, each named in a typed finding:

  sandbox-process  starting a process: subprocess, os.system, os.exec*/spawn*/posix_spawn, os.fork,
                   and libc's system/exec*/fork/posix_spawn looked up through ctypes
  sandbox-network  connecting, binding, sending to an address, resolving a host name
  sandbox-write    writing, creating, renaming or deleting outside the run folder and the private
                   temp folder (the reference file and the shared build cache included)
  sandbox-read     reading or listing files under the user's home, other than what a build needs
                   (the Python installation, the project's packages, the build caches)
  sandbox-signal   signalling another process (the Verifier that started the worker, say)
  sandbox-native   loading, through ctypes, a library that is neither the candidate's own (built in
                   its run folder or StitchCUDA's and torch's build caches) nor CUDA's, or looking a
                   symbol up through a handle of one (CDLL(None), ctypes.pythonapi): libtorch's
                   exported BLAS, an ATen kernel at an address worked out from a symbol's, libc's
                   functions. (A call itself raises no audit event on Linux: a function pointer made
                   from an address is the static reading's, static_check.py.)
  environment-probe  reading or listing /proc or /sys: the process's command line, environment,
                   parents, limits, which tell the Verifier's processes from the user's (probes.py)
  sandbox-introspect  reaching the worker's own objects: the garbage collector's lists (get_objects,
                   get_referrers, get_referents), frames (sys._getframe, a traceback's, a
                   generator's or coroutine's; a trace or profile function), a function's code or
                   defaults, Python's C API through ctypes: asked for by the candidate's code itself,
                   or through a standard-library function that hands frames out (inspect's,
                   logging.currentframe, traceback.walk_*) called by it. The standard library's own
                   looks (traceback.format_exc, logging's caller, asyncio), and torch's, are let be.

The builders are let through: runtime.build and torch's cpp_extension start nvcc, c++ and ninja
while the candidate's module imports (the kernel loader generated modules carry calls
runtime.load where no prebuilt library is beside them), so a process started by code of theirs
(the first caller outside the standard library) is allowed. Loading the candidate's own library
(ctypes.CDLL) raises no event refused here.

A process start the hook refuses never happens: it is one sandbox-process finding, and the
worker leaves it out of offthread's off-thread-work finding (one finding per attempt).

This is in-process: ctypes can reach past it, and code the candidate plants elsewhere (a function
rebound in torch, run by the reference outside every window) is tamper.py's to name. The OS
sandbox (sandbox.py) is the boundary where bubblewrap runs; this layer works everywhere, and names
what was tried.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stitchcuda.agents.verify import probes
from stitchcuda.types import Finding, Verdict

MAX_FINDINGS = 20  # a candidate looping over refusals needs no more than this many named


@dataclass
class Policy:
    writable: list[str]  # folders (or files) the candidate may write: the run folder, its temp folder
    readable: list[str]  # folders under `home` it may read
    home: str | None  # the user's home (its HOME)
    trusted: frozenset[str] = field(default_factory=frozenset)  # code files that may start processes
    # Where the candidate's own code lives (its run folder): a frame of a file under one of these,
    # and not under `not_candidate` (the worker's temp folder: torch's generated code), is the
    # candidate's.
    candidate: list[str] = field(default_factory=list)
    not_candidate: list[str] = field(default_factory=list)
    # The files whose functions named in NATIVE_CALLS call into a candidate's library (runtime.py's).
    native_calls: frozenset[str] = field(default_factory=lambda: _runtime_file())
    # Where the candidate's own libraries may be (besides `writable`): the build caches it loads from.
    libraries: list[str] = field(default_factory=list)

    @classmethod
    def for_worker(cls, req: dict[str, Any]) -> Policy:
        """The worker's policy: its run folder (where the candidate's module is) and its temp folder are
        writable (the GPU's lock files, shared with other workers, only readable); code under the run folder is the
        candidate's, except the temp folder's (torch's caches, sandbox.private_env)."""
        from stitchcuda.agents.verify import sandbox

        run_dir = os.path.realpath(req["run_dir"])
        tmp = os.path.realpath(tempfile.gettempdir())
        writable = [run_dir, tmp]
        from stitchcuda.agents.verify.locks import lock_files

        reference = Path(req["reference"]) if req.get("reference") else None
        readable = [str(p) for p in sandbox.readable_paths(dict(os.environ), reference)]
        # The GPU's lock files: flocked read-only (the sandbox binds them so), never written.
        readable += [os.path.realpath(p) for p in lock_files(req.get("gpu_lock"))]
        home = os.environ.get("HOME")
        return cls(writable, readable, os.path.realpath(home) if home else None, trusted_builders(),
                   candidate=[run_dir], not_candidate=[tmp] if _under(tmp, [run_dir]) else [],
                   libraries=build_roots())


NATIVE_CALLS = frozenset({"call", "call_all"})  # runtime.Library's methods that run a library's function


def _runtime_file() -> frozenset[str]:
    import importlib.util

    spec = importlib.util.find_spec("stitchcuda.runtime")
    return frozenset({os.path.realpath(spec.origin)} if spec is not None and spec.origin else set())


def build_roots() -> list[str]:
    """The folders a candidate's own libraries are built into and loaded from: StitchCUDA's build
    caches (shared and private) and torch's extension folder."""
    from stitchcuda import runtime

    roots = [str(r) for r in runtime.lookup_roots()]
    roots.append(os.environ.get("TORCH_EXTENSIONS_DIR") or os.path.join(os.path.expanduser("~"), ".cache",
                                                                        "torch_extensions"))
    return [os.path.realpath(r) for r in roots]


def trusted_builders() -> frozenset[str]:
    """The files whose code may start processes inside the window: our build runtime and torch's
    extension builder (found without importing torch's builder, which is slow to import)."""
    import importlib.util

    from stitchcuda import cuda_libs, runtime

    files = {runtime.__file__, cuda_libs.__file__}
    for name in ("torch.utils.cpp_extension", "torch.utils._cpp_extension_versioner", "torch.utils.file_baton"):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.origin:
            files.add(spec.origin)
    return frozenset(os.path.realpath(f) for f in files)


class _State:
    SEALED = ("policy",)  # set by install() before the candidate's code runs; tamper.py compares it after
    policy: Policy | None = None
    active = 0  # windows open (they nest)
    findings: list[Finding] = []  # noqa: RUF012 - one process-wide record, by design
    local = threading.local()  # set while the hook itself runs: its own file checks raise events too


_state = _State()
# The standard library's own folder (a venv's platstdlib is the venv, site-packages and all).
_STDLIB = os.path.dirname(os.path.realpath(os.__file__)) + os.sep
_NOT_STDLIB = tuple(_STDLIB + d + os.sep for d in ("site-packages", "dist-packages"))

# libc functions that start processes, signal them or open connections: looked up through ctypes,
# they would bypass every audit event above.
_LIBC: dict[str, str] = {
    **dict.fromkeys(("system", "popen", "fork", "vfork", "clone", "clone3", "execve", "execv", "execvp",
                     "execvpe", "execl", "execlp", "execle", "fexecve", "posix_spawn", "posix_spawnp",
                     "syscall"), "sandbox-process"),
    **dict.fromkeys(("kill", "killpg", "tgkill", "tkill", "sigqueue", "pidfd_send_signal"), "sandbox-signal"),
    **dict.fromkeys(("socket", "connect", "bind", "sendto", "getaddrinfo", "gethostbyname"), "sandbox-network"),
}


def install(policy: Policy) -> None:
    """Install the hook (once per process; a second call only replaces the policy). Inactive until
    activate()."""
    first = _state.policy is None
    _state.policy = policy
    _is_candidate.clear()
    _brought.clear()
    _audit_native_writers()
    # The import system writes .pyc files next to modules it compiles: not the candidate's doing.
    sys.dont_write_bytecode = True
    if first:
        sys.addaudithook(_hook)


def _audit_native_writers() -> None:
    """torch.save to a file name writes through C++ (torch._C.PyTorchFileWriter), which raises no
    audit event: raise the "open" event Python's own open() would, first, so the hook sees it."""
    try:
        import torch.serialization as ser
    except ImportError:
        return
    cls = getattr(ser, "_open_zipfile_writer_file", None)
    init = getattr(cls, "__init__", None)
    if init is None or getattr(init, "_stitchcuda_audited", False):
        return

    def __init__(self: Any, name: Any, *args: Any, **kwargs: Any) -> None:
        sys.audit("open", name, "wb", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        init(self, name, *args, **kwargs)

    __init__._stitchcuda_audited = True  # type: ignore[attr-defined]
    cls.__init__ = __init__  # type: ignore[misc]


@contextlib.contextmanager
def window() -> Iterator[None]:
    """The candidate's code may run inside (the worker opens one around each call into it)."""
    _state.active += 1
    try:
        yield
    finally:
        _state.active -= 1


def activate() -> None:
    """Open a window until deactivate() (tests drive the hook this way)."""
    _state.active += 1


def deactivate() -> None:
    _state.active = max(0, _state.active - 1)


def findings() -> list[Finding]:
    return list(_state.findings)


def refused_events() -> set[str]:
    """The audit events refused so far (offthread leaves refused process starts to this module)."""
    return {str(f.data.get("event")) for f in _state.findings}


def report(verdict: Verdict) -> bool:
    """Put the refusals so far in the verdict (once each): any refusal makes the candidate "hacked".
    Returns whether there was one."""
    new = [f for f in _state.findings if f not in verdict.hack_findings]
    verdict.hack_findings += new
    refused = [f for f in verdict.hack_findings if f.code.startswith("sandbox-") or f.code == "environment-probe"]
    if refused:
        verdict.status, verdict.correct = "hacked", False
        verdict.message = "; ".join(f.message for f in refused[:3])
    return bool(refused)


class Refused(PermissionError):
    """What a refused operation raises in the candidate's code."""


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event in ("exec", "open") and _state.policy is not None and not getattr(_state.local, "busy", False):
        _state.local.busy = True
        try:
            _mark_brought_code(_state.policy, event, args)
        finally:
            _state.local.busy = False
    check = _CHECKS.get(event)
    # Reaching for the worker's objects is refused inside a window or out of one (a finaliser of
    # the candidate's, run by a collection in the worker's own code, is outside every window).
    if check is None or getattr(_state.local, "busy", False) or not (_state.active or event in _INTROSPECT_EVENTS):
        return
    policy = _state.policy
    if policy is None:
        return
    _state.local.busy = True
    try:
        try:
            refusal = check(policy, args)
        except Exception as e:  # noqa: BLE001 - a check that cannot judge refuses (it must not raise past here)
            refusal = ("sandbox-native" if event.startswith("ctypes.") else "sandbox-introspect",
                       f"{event} with arguments the sandbox could not judge ({type(e).__name__})")
        # Only the candidate's doing: its code on the stack (not torch's caches while it runs, not
        # the worker's own files), and for a process, not a builder that its import called. Looking
        # into the process's objects is the candidate's where its own code is the first caller
        # outside the standard library (torch's own calls, under the candidate's, are not).
        if refusal and refusal[0] == INTROSPECT:
            if not _first_caller_is_candidate(policy):
                refusal = None
        elif refusal and not _candidates_doing(policy):
            refusal = None
        if refusal and refusal[0] == "sandbox-process" and _trusted_caller(policy):
            refusal = None
    finally:
        _state.local.busy = False
    if refusal is None:
        return
    code, what = refusal
    f = Finding(code, f"the candidate tried to {what}: refused by the sandbox", data={"event": event, "target": what})
    if f not in _state.findings and len(_state.findings) < MAX_FINDINGS:
        _state.findings.append(f)
    raise Refused(f"StitchCUDA sandbox: {what} is not allowed in a candidate")


_is_candidate: dict[str, bool] = {}  # a code file's name -> whether it is the candidate's
# Files under `not_candidate` that are the candidate's all the same: written by its code, or run as
# code while its code was on the stack (imported by it) or through an import it arranged. A module the candidate wrote to the temp
# folder and imported passed as torch's generated code there, and reached the collector's lists
# unrefused (a red-team route, 2026-11-30: hack_launder_by_temp_module).
_brought: set[str] = set()


def _candidates_file(policy: Policy, name: str) -> bool:
    """Whether the code file `name` (a frame's co_filename) is the candidate's own; remembered."""
    known = _is_candidate.get(name)
    if known is None:
        known = False
        if name and not name.startswith("<"):
            real = os.path.realpath(name)
            known = _under(real, policy.candidate) and (not _under(real, policy.not_candidate) or real in _brought)
        _is_candidate[name] = known
    return known


def _mark_brought_code(policy: Policy, event: str, args: tuple[Any, ...]) -> None:
    """Count a file under `not_candidate` as the candidate's where its code writes it, or where code
    from it starts to run (a module's import) while the candidate's code is on the stack or the
    candidate has altered the import system. torch's code generated there for the reference runs
    with no frame of the candidate's below it, loaded by path."""
    if not policy.not_candidate:
        return
    if event == "exec":
        code = args[0] if args else None
        name = getattr(code, "co_filename", None)
    else:
        name = _path(args[0]) if args and _opens_to_write(args) else None
    if not isinstance(name, str) or not name or name.startswith("<"):
        return
    real = os.path.realpath(name)
    if real in _brought or not _under(real, policy.not_candidate):
        return
    if not _candidates_doing(policy) and not (event == "exec" and _import_system_altered(policy)):
        return
    _brought.add(real)
    _is_candidate.clear()


def _import_system_altered(policy: Policy) -> bool:
    """Whether code from the temp folder may be running because the candidate arranged it: a folder
    under it on sys.path (torch loads its generated modules by path, never through sys.path), or a
    finder or path hook of the candidate's own classes. A module planted there (by native code,
    which raises no audit event) and imported later by the worker's own code would otherwise run as
    torch's."""
    for entry in list(sys.path):
        if isinstance(entry, str) and entry and _under(os.path.realpath(entry), policy.not_candidate):
            return True
    for hook in [*sys.meta_path, *sys.path_hooks]:
        # (a finder's or hook's code: a function's own, or its class's methods')
        cls = hook if isinstance(hook, type) else type(hook)
        functions = [hook] if hasattr(hook, "__code__") else [v for k in cls.__mro__ for v in vars(k).values()]
        for f in functions:
            file = getattr(getattr(getattr(f, "__func__", f), "__code__", None), "co_filename", None)
            if isinstance(file, str) and _candidates_file(policy, file):
                return True
    return False


def _stdlib_file(name: str) -> bool:
    """Whether the code file `name` is the standard library's (frozen modules included)."""
    if name.startswith("<frozen"):
        return True
    real = os.path.realpath(name)
    return real.startswith(_STDLIB) and not real.startswith(_NOT_STDLIB)


def _candidates_doing(policy: Policy) -> bool:
    """Whether a frame of the candidate's own files is on this thread's stack."""
    frame = sys._getframe(1)
    while frame is not None:
        if _candidates_file(policy, frame.f_code.co_filename):
            return True
        frame = frame.f_back
    return False


# Standard-library functions that hand frames to their caller: inspect's (currentframe, stack,
# trace), traceback's walk_stack and walk_tb, logging.currentframe (a lambda), bdb's (a debugger's
# callbacks get every frame), and ctypes' (its lookups of Python's own C API are refused: what those
# functions can do is frames and more). Called by the candidate, what they take is the candidate's;
# called by the standard library itself (traceback.format_exc walking a traceback, logging finding
# who logged, asyncio formatting a coroutine), nothing reaches the candidate. (None: any function.)
_HANDS_OUT_FRAMES = frozenset({("inspect", None), ("bdb", None), ("ctypes", None), ("traceback", "walk_stack"),
                               ("traceback", "walk_tb"), ("logging", "currentframe"), ("logging", "<lambda>")})


def _first_caller_is_candidate(policy: Policy) -> bool:
    """Whether the code that asked for a frame, the collector's lists or a function's code is the
    candidate's: its own code directly, or a function of the standard library that hands frames out,
    called by the candidate's code; or native code: asking with no Python frame under it at all (a
    thread native code started), or with the Verifier's call into a candidate's library the first
    caller. Code compiled from a string (PyRun_*, exec) has no file of its own, and the standard
    library's modules that run code handed to them (_RUNS_CODE) ask for nobody: their caller decides.
    (A red-team library, 2026-12-04, ran such code from its call into the collector's lists.)"""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back
    if frame is None:
        return True
    caller = frame
    while caller is not None and (_no_file(caller.f_code.co_filename) or _runs_code(caller.f_code.co_filename)):
        caller = caller.f_back
    if caller is not None and _native_call(policy, caller):
        return True
    frame = caller or frame  # (code from strings all the way down: judged as itself, not the candidate's)
    if _candidates_file(policy, frame.f_code.co_filename):
        return True
    while frame is not None and _stdlib_file(frame.f_code.co_filename):
        name = frame.f_code.co_filename
        module = os.path.splitext(os.path.basename(name))[0]
        if module == "__init__":
            module = os.path.basename(os.path.dirname(name))
        hands_out = (module, None) in _HANDS_OUT_FRAMES or (module, frame.f_code.co_name) in _HANDS_OUT_FRAMES
        if hands_out and frame.f_back is not None and _candidates_file(policy, frame.f_back.f_code.co_filename):
            return True
        frame = frame.f_back
    return False


def _no_file(name: str) -> bool:
    """Whether a code file name is none: code compiled from a string ("<string>", "<eval_with_key>"),
    not a frozen module of the standard library."""
    return name.startswith("<") and not name.startswith("<frozen")


# Standard-library modules that run code handed to them as a string or a callable (timeit.Timer(src),
# code.InteractiveInterpreter, runpy, a profiler's run): their frames pass the question to their
# caller, as code compiled from a string does (a review, 2026-12-04: a library called timeit with
# gc.get_objects() and was let be, its first caller timeit.py).
_RUNS_CODE = frozenset({"timeit", "code", "codeop", "runpy", "doctest", "cProfile", "profile", "trace", "pdb", "bdb"})


def _runs_code(name: str) -> bool:
    return _stdlib_file(name) and os.path.splitext(os.path.basename(name))[0] in _RUNS_CODE


def _native_call(policy: Policy, frame: Any) -> bool:
    """Whether `frame` is the Verifier's own call into a candidate's library (runtime.Library's), which
    itself asks for no frame, list or code: what asks there is the library."""
    return frame.f_code.co_name in NATIVE_CALLS and os.path.realpath(frame.f_code.co_filename) in policy.native_calls


def _trusted_caller(policy: Policy) -> bool:
    """Whether the first caller outside the standard library (and this module) is a builder's."""
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        if name == __file__ or _stdlib_file(name):
            frame = frame.f_back
            continue
        return os.path.realpath(name) in policy.trusted
    return False


def _path(p: Any) -> str | None:
    if isinstance(p, int) or p is None:
        return None  # a file descriptor: opened (and checked) before
    try:
        return os.path.realpath(os.fsdecode(p))
    except (TypeError, ValueError):
        return None


def _under(path: str, roots: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def _write(policy: Policy, raw: Any, verb: str = "write") -> tuple[str, str] | None:
    path = _path(raw)
    if path is None or _under(path, policy.writable) or path == os.devnull:
        return None
    return "sandbox-write", f"{verb} {path}"


def _read(policy: Policy, raw: Any, verb: str = "read") -> tuple[str, str] | None:
    path = _path(raw)
    if path is not None and _under(path, _PROCESS_RECORDS):
        # The command line, environment, parents, cgroups: where it runs (probes.py, whose static
        # reading a path computed at run time passes).
        return "environment-probe", f"{verb} {path} (the process's own records: where it runs)"
    if path is None or not policy.home or not _under(path, [policy.home]):
        return None
    if _under(path, policy.readable) or _under(path, policy.writable):
        return None
    return "sandbox-read", f"{verb} {path} (in the home folder)"


_PROCESS_RECORDS = ("/proc", "/sys")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC


def _opens_to_write(args: tuple[Any, ...]) -> bool:
    """Whether an "open" event's (path, mode, flags) open the file for writing."""
    _, mode, flags = (list(args) + [None, None, None])[:3]
    return any(c in mode for c in "wax+") if isinstance(mode, str) else bool((flags or 0) & _WRITE_FLAGS)


def _open(policy: Policy, args: tuple[Any, ...]) -> tuple[str, str] | None:
    return _write(policy, args[0]) if _opens_to_write(args) else _read(policy, args[0])


def _process(what: Callable[[tuple[Any, ...]], str]) -> Callable[[Policy, tuple[Any, ...]], tuple[str, str]]:
    return lambda _policy, args: ("sandbox-process", what(args))


def _argv(a: Any) -> str:
    text = a if isinstance(a, str | bytes) else " ".join(os.fsdecode(x) if isinstance(x, bytes) else str(x)
                                                        for x in (a or []))
    text = os.fsdecode(text) if isinstance(text, bytes) else text
    return text if len(text) <= 120 else text[:117] + "..."


def _signal(policy: Policy, args: tuple[Any, ...]) -> tuple[str, str] | None:
    pid, sig = args[0], args[1]
    if pid == os.getpid():
        # Its own process: a handler it installed runs inside the worker's code, handed its frames
        # (a red-team review, 2026-12-01); signal 0 only asks whether the process exists.
        return None if sig == 0 else ("sandbox-signal", f"send signal {sig} to itself (a handler runs in the worker's code)")
    return "sandbox-signal", f"send signal {sig} to process {pid}" + (" (the worker's parent)" if pid == os.getppid() else "")


def _address(a: Any) -> str:
    if isinstance(a, tuple) and len(a) >= 2:
        return f"{a[0]}:{a[1]}"
    return os.fsdecode(a) if isinstance(a, bytes) else str(a)


def _resolve(host: Any, port: Any) -> tuple[str, str] | None:
    """A host name's lookup is a DNS query, a message out; a numeric address's is not (the connect
    that follows is refused, naming the address)."""
    text = os.fsdecode(host) if isinstance(host, bytes) else str(host)
    try:
        ipaddress.ip_address(text)
        return None
    except ValueError:
        return "sandbox-network", f"resolve {text}" + (f" (port {port})" if port else "")


def _dlsym(policy: Policy, args: tuple[Any, ...]) -> tuple[str, str] | None:
    name = args[1] if len(args) > 1 else None
    code = _LIBC.get(name) if isinstance(name, str) else None
    if code:
        return code, f"look up libc's {name}() through ctypes"
    if isinstance(name, str) and name in probes.NATIVE_PROBE_NAMES:
        # A library handle finds libc's symbols too: _lib.call("getenv", ...) read the environment
        # from Python with no name the static reading knows (a review, 2026-12-05).
        return "environment-probe", f"look up {name}() through ctypes: where it runs"
    if isinstance(name, str) and name.startswith(("Py", "_Py")):
        # ctypes.pythonapi: the interpreter's own C API (PyEval_GetFrame, the collector's lists).
        return INTROSPECT, f"call Python's C API ({name}) through ctypes"
    # Where the symbol resolves: a handle's lookup searches the library's dependencies too (a load_inline
    # extension links libtorch_cpu, whose BLAS its handle finds), and a handle may be anything's
    # (ctypes.pythonapi, the main program's, a _handle reassigned). So the address is looked up here as
    # ctypes will, and the file that maps it must be the candidate's own library or CUDA's.
    owner = _resolves_into(args[0] if args else None, name)
    if owner is not None and not _library_allowed(policy, owner):
        where = os.path.basename(owner) if owner else "memory no library maps"
        return NATIVE, (f"look up {name}() through ctypes, which resolves into {where}: only its own libraries' and "
                        "CUDA's functions may be called")
    return None


def _resolves_into(handle: Any, name: Any) -> str | None:
    """The file that maps the code `name` resolves to through `handle` (a library object or a raw
    handle), "" where no file maps it; None where it does not resolve (ctypes then finds nothing
    either) or the name is an ordinal. Reads only exact built-in types and instance values (the hook
    runs with every check off: no property or __fspath__ of the candidate's may run here)."""
    import _ctypes
    import inspect

    if type(name) is not str:
        return None
    raw = handle if type(handle) is int else inspect.getattr_static(handle, "_handle", None)
    if type(raw) is not int:
        return ""  # (a handle the lookup cannot be judged through: as no library's)
    try:
        addr = _ctypes.dlsym(raw, name)
    except (OSError, ValueError, TypeError):
        return None
    return _mapped_file(addr)


def _mapped_file(addr: int) -> str:
    """The file /proc/self/maps says maps `addr` ("" where none does)."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(maxsplit=5)
                lo, _, hi = parts[0].partition("-")
                if int(lo, 16) <= addr < int(hi, 16):
                    return parts[5].strip() if len(parts) > 5 else ""
    except (OSError, ValueError, IndexError):
        pass
    return ""


# CUDA's own libraries, which a candidate may load and call through ctypes as it may link them (by file
# name, after symbolic links are followed: the driver's, the runtime's, the math libraries', NVML's,
# NVVM's, CUPTI's and NCCL's, wherever installed).
_CUDA_LIBRARIES = re.compile(r"^lib(cuda|cudart|cublas|cublasLt|cudnn[A-Za-z0-9_]*|nvrtc[A-Za-z0-9_.-]*|cufft|curand|"
                             r"cusparse|cusparseLt|cusolver|nvJitLink|nvToolsExt|nvtx3interop|nvvm|nvidia-ml|cupti|"
                             r"nccl)\.so(\.[0-9.]+)?$")
NATIVE = "sandbox-native"


def _as_text(name: Any) -> str | None:
    """A library's name as text, from exact built-in and pathlib types only (see _resolves_into)."""
    import pathlib

    if type(name) is str:
        return name
    if type(name) is bytes:
        return os.fsdecode(name)
    if type(name) in (pathlib.PosixPath, pathlib.PurePosixPath):
        return str(name)
    return None


def _library_allowed(policy: Policy, name: Any) -> bool:
    """Whether a library (a dlopen name or a mapped file's path) is the candidate's own or CUDA's. A
    bare name is found by the loader among what is loaded or installed: only CUDA's pass so. A path is
    judged where it leads (a link named libcuda.so.1 to libtorch_cpu.so is libtorch_cpu.so)."""
    text = _as_text(name)
    if not text or "\0" in text:
        return False  # (None: the main program's handle, every loaded library's symbols)
    if os.sep not in text:
        return bool(_CUDA_LIBRARIES.match(text))
    path = os.path.realpath(text)
    return bool(_CUDA_LIBRARIES.match(os.path.basename(path))) or _under(path, policy.writable) or \
        _under(path, policy.libraries)


def _dlopen(policy: Policy, args: tuple[Any, ...]) -> tuple[str, str] | None:
    name = args[0] if args else None
    if _library_allowed(policy, name):
        return None
    # (a red-team round, 2026-12-06: libtorch_cpu.so opened by its bare name, for its BLAS and, at an
    # offset from a BLAS symbol, an ATen kernel; libc.so.6, for getppid at an offset from labs)
    text = _as_text(name)
    what = ("the main program's symbols (CDLL(None))" if name is None
            else text if text is not None else f"a library named by a {type(name).__name__}")
    return NATIVE, f"load {what} through ctypes: only its own libraries and CUDA's may be loaded"


INTROSPECT = "sandbox-introspect"
_INTROSPECT_EVENTS = frozenset({"gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._getframe",
                                "sys._current_frames", "object.__getattr__", "object.__setattr__", "sys.settrace",
                                "sys.setprofile", "ctypes.dlsym", "ctypes.dlsym/handle", "code.__new__", "compile",
                                "exec", "marshal.loads"})
# Attributes whose reads hand over a frame, and with it every caller's local variables (the worker's
# verdict, its report's key): audited as object.__getattr__. (A frame's f_back is not audited; the
# first frame is what is refused.)
_FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
_CODE_ATTRS = frozenset({"__code__", "__defaults__", "__kwdefaults__"})


def _introspect(what: str) -> Callable[[Policy, tuple[Any, ...]], tuple[str, str]]:
    return lambda _policy, _args: (INTROSPECT, what)


_CHECKS: dict[str, Callable[[Policy, tuple[Any, ...]], tuple[str, str] | None]] = {
    # The ways to the worker's own objects from the candidate's code: the collector's lists of every
    # object, and frames (the verdict and the report's key are in the worker's locals).
    "gc.get_objects": _introspect("list every object in the process (gc.get_objects)"),
    "gc.get_referrers": _introspect("find the objects that refer to one (gc.get_referrers)"),
    "gc.get_referents": _introspect("walk objects' references (gc.get_referents)"),
    "sys._getframe": _introspect("take a frame of the call stack (sys._getframe)"),
    "sys._current_frames": _introspect("take every thread's frames (sys._current_frames)"),
    "object.__getattr__": lambda _p, a: ((INTROSPECT, f"take a frame through {type(a[0]).__name__}.{a[1]}")
                                         if len(a) > 1 and a[1] in _FRAME_ATTRS else None),
    # Replacing a function's code or its bound defaults (the worker's report binds what it calls in
    # its functions' defaults), and a trace or profile function (it is handed every frame).
    "object.__setattr__": lambda _p, a: ((INTROSPECT, f"replace {getattr(a[0], '__qualname__', type(a[0]).__name__)}"
                                          f".{a[1]}") if len(a) > 1 and a[1] in _CODE_ATTRS else None),
    # A code object of its own making (code.replace, types.CodeType): one under another file name is
    # not the candidate's to every check that tells the candidate's code by its file (a red-team
    # candidate, 2026-11-30, reached the collector's lists so and loosened the tolerances).
    "code.__new__": _introspect("make a code object (code.replace or types.CodeType), which can pass as "
                                "another file's"),
    # The other ways to code of its own under any file name (a review, 2026-11-30): compile() and exec
    # or eval of a string, marshal.loads of code. (The import system's own compile and unmarshal,
    # and the standard library's exec in dataclasses and namedtuple, have other first callers.)
    "compile": _introspect("compile source of its own (compile), which can pass as another file's"),
    "exec": _introspect("run code it made (exec or eval)"),
    "marshal.loads": _introspect("load code from bytes (marshal.loads)"),
    "sys.settrace": _introspect("install a trace function (sys.settrace)"),
    "sys.setprofile": _introspect("install a profile function (sys.setprofile)"),
    "open": _open,
    "os.listdir": lambda p, a: _read(p, a[0] if a else ".", "list"),
    "os.scandir": lambda p, a: _read(p, a[0] if a else ".", "list"),
    "os.mkdir": lambda p, a: _write(p, a[0], "create the folder"),
    "os.remove": lambda p, a: _write(p, a[0], "delete"),
    "os.rmdir": lambda p, a: _write(p, a[0], "delete"),
    "os.rename": lambda p, a: _write(p, a[0], "move") or _write(p, a[1], "move a file onto"),
    "os.link": lambda p, a: _write(p, a[1], "link"),
    "os.symlink": lambda p, a: _write(p, a[1], "link"),
    "os.truncate": lambda p, a: _write(p, a[0], "truncate"),
    "os.chmod": lambda p, a: _write(p, a[0], "chmod"),
    "os.chown": lambda p, a: _write(p, a[0], "chown"),
    "os.utime": lambda p, a: _write(p, a[0], "touch"),
    "shutil.rmtree": lambda p, a: _write(p, a[0], "delete"),
    "shutil.copyfile": lambda p, a: _write(p, a[1], "copy onto"),
    "shutil.copytree": lambda p, a: _write(p, a[1], "copy onto"),
    "shutil.move": lambda p, a: _write(p, a[0], "move") or _write(p, a[1], "move onto"),
    "subprocess.Popen": _process(lambda a: f"start a process: {_argv(a[1])}"),
    "os.system": _process(lambda a: f"run a shell command (os.system): {_argv(a[0])}"),
    "os.exec": _process(lambda a: f"replace the worker with {_argv(a[0])} (os.exec*)"),
    "os.posix_spawn": _process(lambda a: f"start a process (os.posix_spawn): {_argv(a[1])}"),
    "os.spawn": _process(lambda a: f"start a process (os.spawn*): {_argv(a[2])}"),
    "os.fork": _process(lambda a: "fork the worker (os.fork)"),
    "os.forkpty": _process(lambda a: "fork the worker (os.forkpty)"),
    "pty.spawn": _process(lambda a: f"start a process (pty.spawn): {_argv(a[0])}"),
    "os.kill": _signal,
    "os.killpg": lambda p, a: ("sandbox-signal", f"send signal {a[1]} to process group {a[0]}"),
    "signal.pthread_kill": lambda p, a: None,  # a thread of its own process: no escape
    "socket.connect": lambda p, a: ("sandbox-network", f"connect to {_address(a[1])}"),
    "socket.bind": lambda p, a: ("sandbox-network", f"listen on {_address(a[1])}"),
    "socket.sendto": lambda p, a: ("sandbox-network", f"send to {_address(a[1])}"),
    "socket.sendmsg": lambda p, a: ("sandbox-network", f"send to {_address(a[1])}"),
    "socket.getaddrinfo": lambda p, a: _resolve(a[0], a[1]),
    "socket.gethostbyname": lambda p, a: _resolve(a[0], None),
    "ctypes.dlsym": _dlsym,
    "ctypes.dlsym/handle": _dlsym,
    "ctypes.dlopen": _dlopen,
}
