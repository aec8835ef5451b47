"""PyTorch's kernels called from a candidate's native code without the dispatcher.

`at::cpu::add(...)`, `at::cuda::mm(...)` and `at::native::...` run ATen's own kernels directly: no
dispatch mode, no profiler's op recording sees them, so PyTorch does the work while every dynamic
check reads "no PyTorch compute" (a red-team review, 2026-11-29). The built libraries say what they
call: their undefined dynamic symbols (nm -D --undefined-only), demangled. One naming an ATen
operator in a kernel namespace is a hack finding. at::cuda's utilities (streams, device properties,
handles) are no operators and pass; at::_ops:: calls go through the dispatcher, where the checks
see them."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from stitchcuda.agents.verify import native_calls
from stitchcuda.types import Finding

# A function (`at::cpu::add(`), a class's member (`at::native::structured_addmm_out_cpu::impl(`) or a
# data symbol (`at::native::DispatchStub<...>::DEFAULT`, a kernel's table, no parenthesis): a red-team
# round (2026-12-06) ran ATen's CPU addmm through the structured class's impl() and its add and
# clamp_min through their dispatch stubs' DEFAULT kernels, and the pattern that asked for `NAME(`
# read neither.
_KERNEL_SPACES = re.compile(
    r"\bat::(cpu|cuda|native|meta|compositeexplicitautograd|compositeexplicitautogradnonfunctional"
    r"|compositeimplicitautograd)::([A-Za-z_][A-Za-z0-9_]*)(?=\(|::|<|\s|$)")
_ALWAYS = ("native",)  # every function there is a kernel
_KERNEL_SPACE_NAMES = frozenset({"cpu", "cuda", "native", "meta", "compositeexplicitautograd",
                                 "compositeexplicitautogradnonfunctional", "compositeimplicitautograd"})


# ATen's C++ API names an operator's forms with suffixes: at::cpu::add_out / add_outf write into a
# given tensor, *_symint take symbolic sizes. Read bare, `add_out` named no operator and passed (a
# red-team review, 2026-12-01: a library linking at::cpu::add_out and clamp_min_out was accepted).
_FORM_SUFFIXES = ("_symint", "_outf", "_out")


def is_operator(func: str, ops: frozenset[str]) -> bool:
    """Whether a kernel namespace's function `func` is an ATen operator, in any of its C++ forms."""
    name = func
    while True:
        if name in ops:
            return True
        suffix = next((x for x in _FORM_SUFFIXES if name.endswith(x) and len(name) > len(x)), None)
        if suffix is None:
            return False
        name = name[: -len(suffix)]


def operator_names() -> frozenset[str]:
    """ATen's operator names (overload packets: add, mm, _softmax, add_ ...)."""
    import torch

    names = set()
    for full in torch._C._dispatch_get_all_op_names():
        ns, _, name = full.partition("::")
        if ns == "aten":
            names.add(name.split(".")[0])
    return frozenset(names)


# ATen's switches of the profiler's op recording (RecordFunction) and of its callbacks: native code
# that turns them off inside forward hides every op the blind check's witness would record (a
# red-team review, 2026-12-01, did it from Python; at::enableRecordFunction is its C++ form).
# (disableCallback / reenableCallback and the TLS's own accessor: the red-team round of 2026-12-06
# turned the profiler's callbacks off around its ATen calls with them.)
_SWITCHES = frozenset({"enableRecordFunction", "set_record_function_tls_", "clearThreadLocalCallbacks",
                       "clearGlobalCallbacks", "clearCallbacks", "removeCallback", "disableCallback",
                       "reenableCallback", "get_record_function_tls_", "addThreadLocalCallback",
                       "addGlobalCallback"})
_SWITCH_CALLS = re.compile(r"\bat::(" + "|".join(sorted(_SWITCHES)) + r")\(")
# c10's switches of which dispatch keys run on this thread: excluding the Python key hides every op
# from the dispatch modes (the op recorder), as ExcludeDispatchKeyGuard would (the same round). A
# load_inline extension links none of them (torch/extension.h's guards are defined inside c10).
_KEY_SWITCHES = frozenset({"tls_set_dispatch_key_excluded", "tls_set_dispatch_key_included",
                           "_force_tls_local_dispatch_key_set"})
_KEY_SWITCH_CALLS = re.compile(r"\bc10::impl::(" + "|".join(sorted(_KEY_SWITCHES)) + r")\(")


def _nested_name(name: str) -> list[str]:
    """The parts of a mangled nested name (`_ZN2at3cpu3addE...` -> at, cpu, add; a const member
    function's `_ZNK...` too), each length-prefixed, up to the first part that is not; [] where the
    name is no nested one."""
    if not name.startswith("_ZN"):
        return []
    parts, at = [], 4 if name.startswith("_ZNK") else 3
    while (n := re.match(r"\d+", name[at:])) is not None:
        length, at = int(n.group(0)), at + n.end()
        parts.append(name[at:at + length])
        at += length
    return parts


def switch_of_mangled(name: str) -> str | None:
    """`at::NAME` where the mangled name (`_ZN2at20enableRecordFunctionEb`) is one of _SWITCHES, or
    `c10::impl::NAME` one of _KEY_SWITCHES."""
    parts = _nested_name(name)
    if len(parts) > 1 and parts[0] == "at" and parts[1] in _SWITCHES:
        return f"at::{parts[1]}"
    if len(parts) > 2 and parts[:2] == ["c10", "impl"] and parts[2] in _KEY_SWITCHES:
        return f"c10::impl::{parts[2]}"
    return None


# ATen's and c10's redispatch entries: an operator run below the dispatch key its caller names, so
# past the Python key (the op recorder) and RecordFunction (the profiler). A red-team library looked
# up at::_ops::mm_out::redispatch by dlsym and had PyTorch do its product (2026-12-02); at::_ops::
# OP::call goes through the whole dispatch and stays allowed.
_REDISPATCH_CALLS = re.compile(r"\b(at::_ops::[A-Za-z0-9_]+::redispatch|c10::[A-Za-z_:]*[Rr]edispatch[A-Za-z_]*)\(")


def redispatch_of_mangled(name: str) -> str | None:
    """A readable name where the mangled one (`_ZN2at4_ops6mm_out10redispatchE...`, c10's
    `..._ZNK3c1014OperatorHandle15redispatchBoxedE...`) is a redispatch entry, else None."""
    parts = _nested_name(name) if "edispatch" in name else []
    if not parts or parts[0] not in ("at", "c10") or not any("edispatch" in p for p in parts):
        return None
    return "::".join(parts)


def kernel_of_mangled(name: str, ops: frozenset[str]) -> str | None:
    """`at::SPACE::NAME` where the mangled C++ name (`_ZN2at3cpu3addE...`) is an ATen kernel by the
    rule above, else None. What a library looks up by dlsym leaves no undefined symbol: the worker's
    preloaded watch (native_threads.c) keeps those names (a red-team candidate, 2026-11-30)."""
    parts = _nested_name(name)
    if len(parts) < 3 or parts[0] != "at":
        return None
    space, func = parts[1], parts[2]
    if space in _KERNEL_SPACE_NAMES and (space in _ALWAYS or is_operator(func, ops)):
        return f"at::{space}::{func}"
    return None


# The dispatcher's own tables: the operator registry (c10::Dispatcher, OperatorHandle, OperatorEntry),
# the kernels it holds (KernelFunction, BoxedKernel) and registration (torch::Library, CppFunction,
# RegisterOperators). Red team round 5 (2026-12-05) had a library fetch aten::addmm's CPU kernel with
# findSchemaOrThrow and run it with callBoxedForDispatchKey (below the Python key and RecordFunction),
# and another register its own aten::addmm kernel through a torch::Library made in C++, which the
# reference then ran. A kernel written for StitchCUDA needs none of these: it allocates, reads sizes
# and runs its own loops; at::_ops::OP::call (at::empty, Tensor methods) reaches the dispatcher from
# inside libtorch and passes. (The dispatch-key guards are not listed: torch/extension.h's inline code
# links c10::impl::ExcludeDispatchKeyGuard into every load_inline extension.)
_DISPATCHER_CLASSES = (("c10", "Dispatcher"), ("c10", "OperatorHandle"), ("c10", "TypedOperatorHandle"),
                       ("c10", "KernelFunction"), ("c10", "BoxedKernel"), ("c10", "RegisterOperators"),
                       ("c10", "OperatorKernel"), ("c10", "impl", "OperatorEntry"), ("torch", "Library"),
                       ("torch", "CppFunction"))
_DISPATCHER_NAMES = re.compile(r"\b(" + "|".join("::".join(c) for c in _DISPATCHER_CLASSES) + r")\b(::[~A-Za-z0-9_]+)?")


def dispatcher_entry(symbol: str) -> str | None:
    """The dispatcher table a demangled symbol (`c10::Dispatcher::findSchemaOrThrow(char
    const*, char const*)`, `torch::Library::_impl(...)`) belongs to, read before its parameters: a
    parameter's type naming one (`f(c10::DispatchKey)`) is no call into it."""
    m = _DISPATCHER_NAMES.search(symbol.split("(", 1)[0])
    return m.group(0) if m else None


def dispatcher_of_mangled(name: str) -> str | None:
    """The same, for a mangled name looked up by dlsym (`_ZNK3c104impl13OperatorEntry20kernelForDispatchKeyE...`)."""
    parts = _nested_name(name)
    for cls in _DISPATCHER_CLASSES:
        if tuple(parts[:len(cls)]) == cls:
            return "::".join(parts[:len(cls) + 1])
    return None


# CPython's entries that run, compile or schedule Python code, set a trace or profile function, or
# hand out the running frame and its globals and locals. A red-team library (2026-12-04) declared
# Py_AddPendingCall and PyRun_SimpleStringFlags itself (no Python.h, no ctypes), resolved them from
# libpython as it loaded, and ran code of its own just after its call returned, with the Verifier's
# trampoline (runtime.Library.call) the first caller: that code walked the collector's lists and
# loosened the worker's tolerance. A Python extension (pybind11: torch's load_inline) links none of
# these; their names here and in native_threads.c's dlsym watch (sc_python_code) are the same list.
_PYTHON_CODE = re.compile(
    r"(PyRun_|Py_CompileString|Py_AddPendingCall|_PyEval_AddPendingCall|PyEval_EvalCode|PyEval_EvalFrame"
    r"|_PyEval_EvalFrame|PyEval_SetTrace|PyEval_SetProfile|PyImport_ExecCodeModule|PyMarshal_Read"
    r"|PyEval_GetFrame|PyThreadState_GetFrame|PyEval_GetGlobals|PyEval_GetLocals|PyFrame_GetLocals"
    r"|PyFrame_GetGlobals|PyFrame_GetBuiltins|PyFrame_FastToLocals|PyFrame_LocalsToFast|PyCode_New"
    r"|PyUnstable_Code_New|PyFunction_New|PyFunction_SetDefaults|PyFunction_SetKwDefaults|PySys_AddAuditHook"
    r"|PySys_SetObject|Py_RunMain|Py_Main|Py_BytesMain)[A-Za-z0-9_]*")


def python_code_entry(symbol: str) -> str | None:
    """`symbol` (a dynamic symbol, any @version dropped) where it is one of _PYTHON_CODE's, else None."""
    name = symbol.split("@", 1)[0]
    return name if _PYTHON_CODE.fullmatch(name) else None


# ATen's operators called through the dispatcher (at::_ops::OP_OVERLOAD::call: at::add, Tensor
# methods and C++ operators on tensors all reach it) pass, where the calling thread's recorder and
# profiler see them. A library that also runs OpenMP threads may call them on a team member, seen by
# neither (a red-team candidate, 2026-12-06); the source's spelling (at::add, x + y, x.add(y)) is
# one symbol here.
_OPS_CALL = re.compile(r"\bat::_ops::([A-Za-z0-9_]+)::call\(")
# ... and the other ways a library has its code run on threads no recorder watches: CUDA's host
# callbacks (run on the driver's thread), threads of its own.
_OPENMP_ENTRY = re.compile(r"^(GOMP_|omp_|__kmpc_|cudaLaunchHostFunc|cudaStreamAddCallback|cuLaunchHostFunc"
                           r"|cuStreamAddCallback|pthread_create|thrd_create)")
# Pools that start threads for their caller inside libc10, libtorch or libpython, where the native
# thread watch blames the pool's library, not the candidate's (red-team round 6's second pass: at::add
# on a c10::ThreadPool worker). A kernel written for StitchCUDA needs none of them.
_POOLS = re.compile(r"\b(c10::ThreadPool|c10::TaskThreadPool(Base)?|c10::ThreadPoolRegistry|at::launch\(|"
                    r"at::intraop_launch|at::get_thread_pool|at::internal::launch_no_thread_state|"
                    r"PyThread_start_new_thread|PyThread_start_joinable_thread)")
# Thread-local state set by hand: at::ThreadLocalState captured where no mode or profiler was on and
# installed around ATen calls hides them from both (the same pass).
_STATE_SETTERS = re.compile(r"\b(at::ThreadLocalState::setThreadLocalState|at::ThreadLocalStateGuard)\b")
# Native reads of whether a dispatch mode or the profiler is on: a library that asks can compute
# itself while watched and hand the work to PyTorch otherwise (the same pass).
_WATCH_READS = re.compile(r"\b(at::hasCallbacks|at::hasGlobalCallbacks|at::hasThreadLocalCallbacks|"
                          r"at::isRecordFunctionEnabled|c10::impl::tls_is_dispatch_key_(included|excluded)|"
                          r"c10::impl::tls_is_dispatch_keyset_(included|excluded)|c10::impl::tls_local_dispatch_key_set|"
                          r"c10::impl::TorchDispatchModeTLS|c10::impl::PythonDispatcherTLS)\b")
_METADATA_OPS = frozenset({"size", "stride", "numel", "dim", "sym_size", "sym_stride", "sym_numel", "is_contiguous",
                           "item", "_local_scalar_dense", "storage_offset", "sym_storage_offset"})


def op_of_struct(struct: str, ops: frozenset[str]) -> str | None:
    """The operator an at::_ops struct (`add_Tensor`, `sum_dim_IntList`, `empty_memory_format`)
    dispatches: its longest leading `_`-separated part that names one."""
    parts = struct.split("_")
    for n in range(len(parts), 0, -1):
        if (name := "_".join(parts[:n])) in ops:  # (in-place ops' structs: add__Tensor -> add_)
            return name
    return None


def _computing(struct: str, ops: frozenset[str]) -> bool:
    """Whether the at::_ops struct dispatches an operator that computes (not allocation, views,
    copies or metadata: torch_ops.ALLOWED_ATEN and _METADATA_OPS)."""
    from stitchcuda.agents.verify.torch_ops import ALLOWED_ATEN

    op = op_of_struct(struct, ops)
    return op is not None and op not in ALLOWED_ATEN and op not in _METADATA_OPS


def runs_threads(symbols: list[str]) -> bool:
    """Whether a library's undefined symbols start work on other threads (OpenMP, host callbacks,
    threads, PyTorch's or Python's pools)."""
    return any((line.split() and _OPENMP_ENTRY.match(line.split()[-1])) or _POOLS.search(line) for line in symbols)


def threaded_compute(symbols: list[str], ops: frozenset[str]) -> list[str]:
    """The computing operators a library calls through the dispatcher, where it also runs OpenMP
    threads, CUDA host callbacks or threads of its own; [] otherwise."""
    if not runs_threads(symbols):
        return []
    return sorted({f"at::_ops::{m.group(1)}" for line in symbols for m in _OPS_CALL.finditer(line)
                   if _computing(m.group(1), ops)})


def compute_op_of_mangled(name: str, ops: frozenset[str]) -> str | None:
    """`at::_ops::STRUCT` where a mangled name looked up by dlsym (`_ZN2at4_ops10add_Tensor4callE...`) is a
    computing operator's dispatcher entry: linked, such an entry is the calling thread's to see; looked
    up by name, it is meant for where no link shows it (an OpenMP team member)."""
    parts = _nested_name(name)
    return f"at::_ops::{parts[2]}" if len(parts) >= 3 and parts[:2] == ["at", "_ops"] and _computing(parts[2], ops) \
        else None


# PyTorch's libraries also export C functions of their own and of what they bundle: MKL's BLAS and
# LAPACK (sgemm_, cblas_sgemm), Sleef's vector math, AOTInductor's C shims over ATen's operators
# (aoti_torch_cpu_mm_out). A candidate's library that links one has PyTorch's code do its work with
# no C++ name a rule above reads (a red-team round, 2026-12-06: `extern "C" sgemm_` in the candidate's
# own kernel, resolved from libtorch_cpu.so). Their Python type objects (THP*) are what a load_inline
# extension's tensor conversions link, and CUDA's, OpenMP's and Python's names are theirs, not PyTorch's.
_TORCH_LIBRARIES = ("libtorch_cpu.so", "libtorch.so", "libtorch_cuda.so", "libc10.so", "libc10_cuda.so",
                    "libtorch_python.so")
_NOT_TORCHS = re.compile(r"^(THP|Py|_Py|cuda|cu[A-Z]|__cuda|cublas|cudnn|cufft|curand|cusparse|cusolver|nv|"
                         r"omp_|GOMP_|__kmpc|_init$|_fini$|__bss|_edata|_end$)")
# PyTorch's stable C API (torch/csrc/stable): a tensor's data pointer, sizes, dtypes, a library's op
# registration, made in C. An extension written against it links these, and they compute nothing. Its
# operators (aoti_torch_cpu_*, aoti_torch_cuda_*) and its dispatcher call stay findings.
_C_API = re.compile(r"^(aoti_torch_|torch_)")
_C_API_COMPUTE = re.compile(r"^aoti_torch_(cpu|cuda|mps|xpu)_|dispatch|proxy_executor|_out$")


_exports: frozenset[str] | None = None


def torch_c_exports() -> frozenset[str]:
    """The C (unmangled) functions and data PyTorch's own libraries export, less _NOT_TORCHS and the
    stable C API's accessors; read once a process (an empty reading, no nm, is read again next time)."""
    global _exports
    if _exports is None and (found := _read_c_exports()):
        _exports = found
    return _exports or frozenset()


def _read_c_exports() -> frozenset[str]:
    nm = shutil.which("nm")
    try:
        import torch
    except ImportError:
        return frozenset()
    folder = Path(torch.__file__).parent / "lib"
    names: set[str] = set()
    for lib in _TORCH_LIBRARIES:
        path = folder / lib
        if nm is None or not path.is_file():
            continue
        try:
            out = subprocess.run([nm, "-D", "--defined-only", str(path)], capture_output=True, text=True, timeout=120,
                                 check=False).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        for line in out.splitlines():
            parts = line.split()
            if len(parts) >= 3 and not parts[-1].startswith("_Z"):
                name = parts[-1].split("@")[0]
                if not _NOT_TORCHS.match(name) and (not _C_API.match(name) or _C_API_COMPUTE.search(name)):
                    names.add(name)
    return frozenset(names)


def c_exports_linked(symbols: list[str]) -> set[str]:
    """The C names among a library's undefined symbols (nm's lines) that PyTorch's libraries export."""
    exports = torch_c_exports()
    linked = set()
    for line in symbols:
        parts = line.split()
        if parts and not parts[-1].startswith("_Z") and (name := parts[-1].split("@")[0]) in exports:
            linked.add(name)
    return linked


def undefined_symbols(library: Path) -> list[str] | None:
    """Its undefined dynamic symbols, demangled; None where nm is not installed or fails."""
    nm = shutil.which("nm")
    if nm is None:
        return None
    try:
        out = subprocess.run([nm, "-D", "--undefined-only", "-C", str(library)], capture_output=True, text=True,
                             timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.splitlines() if out.returncode == 0 else None


def findings(folder: Path, ops: frozenset[str] | None = None, *, probes: bool = True) -> tuple[list[Finding], str]:
    """(hack findings, a note) for the shared libraries under `folder`, the run folder: the
    proposal's prebuilt library, and whatever the worker built (sandbox.Box puts every build folder
    of a worker there, TORCH_EXTENSIONS_DIR's and StitchCUDA's private builds). With `probes`, also
    the environment probes the candidate's own machine code calls (native_calls)."""
    libraries = sorted(p for p in Path(folder).rglob("*.so") if p.is_file())
    if not libraries:
        return [], ""
    probe_found, probe_notes = [], []
    for lib in [p for p in libraries if not _torch_cache(p, Path(folder))] if probes else []:
        calls, note = native_calls.probe_calls(lib)
        if note:
            probe_notes.append(note)
        if calls:
            named = sorted({n for names in calls.values() for n in names})
            where = ", ".join(sorted(calls)[:4])
            probe_found.append(Finding(
                "environment-probe", f"{lib.name}: its own code calls {', '.join(named[:6])} (in {where}; read from "
                "its machine code): native code that asks where it runs can tell the Verifier's processes from "
                "the user's"))
    found_more, note_more = _symbol_findings(libraries, ops, Path(folder))
    return found_more + probe_found, "; ".join(n for n in [note_more, *probe_notes] if n)


# Inductor's and Triton's caches in the run folder (sandbox.private_env): torch's own generated
# libraries (a cpp wrapper's PyInit reads the environment) when the reference or the worker's timing
# runs torch.compile, not the candidate's code (CI at 4d39188: an honest candidate beside a compiled
# reference was judged a probe). A candidate that builds its own library into them is not read here.
_TORCH_CACHES = (("tmp", "torchinductor"), ("tmp", "triton"))


def _torch_cache(lib: Path, folder: Path) -> bool:
    try:
        parts = lib.relative_to(folder).parts
    except ValueError:
        return False
    return parts[:2] in _TORCH_CACHES


def _symbol_findings(libraries: list[Path], ops: frozenset[str] | None,
                     folder: Path | None = None) -> tuple[list[Finding], str]:
    """findings()'s reading of the libraries' undefined dynamic symbols (`folder`: the run folder, whose
    torch caches hold PyTorch's libraries, not the candidate's)."""
    ops = ops if ops is not None else operator_names()
    found: dict[str, set[str]] = {}
    python: dict[str, set[str]] = {}
    switches: dict[str, set[str]] = {}
    redispatches: dict[str, set[str]] = {}
    tables: dict[str, set[str]] = {}
    team: dict[str, set[str]] = {}
    unread = []
    every: list[str] = []  # all the candidate's libraries' symbols: threads in one, PyTorch's compute in another
    pools: dict[str, set[str]] = {}
    watch_reads: dict[str, set[str]] = {}
    read: dict[Path, list[str]] = {}
    c_calls: dict[str, set[str]] = {}
    for lib in libraries:
        symbols = undefined_symbols(lib)
        if symbols is None:
            unread.append(lib.name)
            continue
        read[lib] = symbols
        if folder is not None and _torch_cache(lib, folder):
            continue  # (torch.compile's own libraries: PyTorch's code, not the candidate's)
        every += symbols
        if linked := c_exports_linked(symbols):
            c_calls.setdefault(lib.name, set()).update(linked)
        if threaded := threaded_compute(symbols, ops):
            team.setdefault(lib.name, set()).update(threaded)
        for line in symbols:
            if m := _POOLS.search(line):
                pools.setdefault(lib.name, set()).add(m.group(1).rstrip("("))
            if m := _STATE_SETTERS.search(line):
                switches.setdefault(lib.name, set()).add(m.group(1))
            if m := _WATCH_READS.search(line):
                watch_reads.setdefault(lib.name, set()).add(m.group(1))
    if not team and len(read) > 1 and (joint := threaded_compute(every, ops)):
        team["the candidate's libraries together"] = set(joint)
    for lib, symbols in read.items():
        for line in symbols:
            if line.split() and (entry := python_code_entry(line.split()[-1])):
                python.setdefault(lib.name, set()).add(entry)
            if entry := dispatcher_entry(line):
                tables.setdefault(lib.name, set()).add(entry)
            for m in _SWITCH_CALLS.finditer(line):
                switches.setdefault(lib.name, set()).add(f"at::{m.group(1)}")
            for m in _KEY_SWITCH_CALLS.finditer(line):
                switches.setdefault(lib.name, set()).add(f"c10::impl::{m.group(1)}")
            for m in _REDISPATCH_CALLS.finditer(line):
                redispatches.setdefault(lib.name, set()).add(m.group(1))
            for m in _KERNEL_SPACES.finditer(line):
                space, name = m.group(1), m.group(2)
                if space in _ALWAYS or is_operator(name, ops):
                    found.setdefault(lib.name, set()).add(f"at::{space}::{name}")
    note = f"native symbols not read (no nm): {', '.join(unread)}" if unread else ""
    return [Finding("torch-kernel-in-native-code",
                    f"{lib} calls PyTorch's kernels directly, below the dispatcher: {', '.join(sorted(calls)[:6])}")
            for lib, calls in sorted(found.items())] + [
        Finding("torch-kernel-in-native-code", f"{lib} links C functions PyTorch's own libraries export (their BLAS, "
                f"vector math or ATen shims): {', '.join(sorted(calls)[:6])}: PyTorch's code doing the work")
        for lib, calls in sorted(c_calls.items())] + [
        Finding("hidden-dispatch", f"{lib} switches the profiler's op recording or the dispatch keys its "
                f"thread runs: {', '.join(sorted(calls))}")
        for lib, calls in sorted(switches.items())] + [
        Finding("hidden-dispatch", f"{lib} runs PyTorch's operators below the dispatcher's Python key (redispatch): "
                f"{', '.join(sorted(calls)[:6])}")
        for lib, calls in sorted(redispatches.items())] + [
        Finding("hidden-dispatch", f"{lib} reaches the dispatcher's operator tables or kernel registration, to "
                f"run or replace PyTorch's kernels below its Python key: "
                f"{', '.join(sorted(calls)[:6])}")
        for lib, calls in sorted(tables.items())] + [
        Finding("hidden-dispatch", f"{lib} runs code on other threads (OpenMP, host callbacks, threads) and calls "
                f"PyTorch's compute through the dispatcher: "
                f"{', '.join(sorted(calls)[:6])}: on a team member no recorder or profiler sees it")
        for lib, calls in sorted(team.items())] + [
        Finding("off-thread-work", f"{lib} starts work on PyTorch's or Python's thread pools ({', '.join(sorted(calls))}): "
                "what runs there is seen by no recorder or profiler, and the thread watch blames the pool's library")
        for lib, calls in sorted(pools.items())] + [
        Finding("mode-probe", f"{lib} asks whether a dispatch mode or the profiler is on ({', '.join(sorted(calls))}): "
                "native code that can tell when it is watched can behave otherwise while the Verifier watches")
        for lib, calls in sorted(watch_reads.items())] + [
        Finding("sandbox-introspect", f"{lib} links Python's C API to run or schedule code of its own, or to "
                f"reach frames, in the worker's interpreter: {', '.join(sorted(calls)[:6])}")
        for lib, calls in sorted(python.items())], note
