"""Static (AST) anti-hacking check of a candidate module.

KernelBench's checker greps the source; a regex misses aliases (`import torch.nn.functional as
G`, `relu = torch.relu`), calls of layers kept in __init__, `@`, introspection that reaches the
reference module, and fallbacks hidden in helpers. We parse the module, resolve import aliases,
and walk every function reachable from ModelNew.forward.

What this cannot see (torch called through getattr with a computed name, or from C++) the dynamic
check in the worker sees: the static check only has to be cheap, explain itself with a line
number, and raise no false alarm on a legitimate candidate.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
import types
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from stitchcuda import kernel_loader, pyast
from stitchcuda.agents.verify import call_state, location, probes, stream_join
from stitchcuda.agents.verify.torch_ops import ALLOWED_TORCH_CALLS, COMPUTE_TENSOR_METHODS
from stitchcuda.types import Finding

_FORBIDDEN_MODULES = {
    "gc": "introspection of live objects can reach the reference module",
    "inspect": "introspection of frames can reach the reference module",
    "signal": "a signal handler is handed the interrupted frame, the Verifier's own",
    "_signal": "a signal handler is handed the interrupted frame, the Verifier's own",
    "threading": "work on another thread escapes the timing",
    "_thread": "work on another thread escapes the timing",
    "concurrent": "work on another thread escapes the timing",
    "multiprocessing": "work in another process escapes the timing",
    "pickle": "loading stored outputs",
    "numpy": "host computation instead of a kernel",
    "builtins": "reaches __import__ and friends, which hide what is imported",
    "importlib": "imports by computed name hide what is imported",
}
# Module attributes that are these modules under another name (torch.storage.np, torch._numpy's
# numpy-like API over torch ops).
_FORBIDDEN_AS_ATTRIBUTE = {"np": _FORBIDDEN_MODULES["numpy"], "_numpy": "torch's numpy-like API computes with torch ops",
                           "scipy": "host computation instead of a kernel"}
_COMPILERS = {"compile", "jit", "_dynamo", "_inductor", "export", "fx"}
# What of StitchCUDA a candidate may use: the kernels' loaders. The rest is the Verifier's own
# (its watches' records, its tolerances) or reaches it; a red-team candidate (2026-11-30) emptied
# offthread's record of the threads it had started.
_OWN_ALLOWED = frozenset({"stitchcuda", "stitchcuda.runtime", "stitchcuda.kernel_loader", "stitchcuda.cuda_libs"})


def _verifier_internal(name: str) -> bool:
    parts = name.split(".")
    return parts[0] == "stitchcuda" and len(parts) > 1 and ".".join(parts[:2]) not in _OWN_ALLOWED
_DYNAMIC_CODE = {"__import__", "importlib.import_module", "exec", "eval", "compile", "globals", "vars", "locals"}
# Streams other than the caller's: work there is not ordered before the timer's end event.
_STREAM_APIS = (
    "torch.cuda.Stream",
    "torch.cuda.stream",
    "torch.cuda.ExternalStream",
    "torch.cuda.StreamContext",
    "torch.cuda.set_stream",
    "torch.cuda.streams",
    "torch.Stream",
)
# PyTorch's ways past the Python dispatch key, where the op recorder listens: popping the modes,
# dispatching to a backend key, registering kernels for aten ops (in Python, or in C++ source held in
# a string for load_inline or in the candidate's .cu/.cpp files). call_watch sees the Python ones
# called; these are the names written out.
# What tells a forward that a dispatch mode (the op recorder) is on.
_MODE_PROBES = frozenset({"_get_current_dispatch_mode", "_get_current_dispatch_mode_stack", "_len_torch_dispatch_stack",
                          "is_in_torch_dispatch_mode", "_get_dispatch_stack_at", "_python_dispatch",
                          "_len_torch_function_stack", "_get_current_function_mode", "_get_current_function_mode_stack",
                          "_get_function_stack_at", "_is_torch_function_mode_enabled",
                          # ... and what tells it the profiler is on (the Verifier profiles some forwards
                          # and times others: a red-team review, 2026-11-28, returned nothing when profiled)
                          "_is_profiler_enabled", "_profiler_enabled", "_kineto_enabled", "profiler",
                          # (torch._C._autograd's, red-team round 11: the active profiler's kind)
                          "_profiler_type", "_is_kineto_stopped"})
# A tensor subclass's hooks (assigned as well as def'd: a red-team review assigned one) and its makers.
_SUBCLASS_HOOKS = frozenset({"__torch_function__", "__torch_dispatch__"})
_SUBCLASS_MAKERS = frozenset({"_make_wrapper_subclass", "_make_subclass"})
_DISPATCH_BYPASS = {"_disable_current_modes", "_pop_mode", "_pop_mode_temporarily", "no_dispatch", "_enable_record_function",
                    # Python functions native code calls back, on threads no recorder watches.
                    "CFUNCTYPE", "PYFUNCTYPE", "WINFUNCTYPE", "_CFuncPtr", "CFuncPtr",
                    # a library handle's function class, made at an address (the same round: an ATen
                    # kernel at a fixed distance from a BLAS symbol, through libtorch's handle)
                    "_FuncPtr",
                    "_DisableTorchDispatch", "_DisableTorchFunction", "_DisableTorchFunctionSubclass",
                    "_ExcludeDispatchKeyGuard", "_IncludeDispatchKeyGuard", "redispatch", "DispatchKeySet",
                    "_dispatch_tls_set_dispatch_key_excluded", "_dispatch_tls_set_dispatch_key_included"}
_NATIVE_BYPASS = re.compile(r"\b(ExcludeDispatchKeyGuard|IncludeDispatchKeyGuard|ForceDispatchKeyGuard|"
                            r"DispatchKeySet|TORCH_LIBRARY(_IMPL|_FRAGMENT)?|AutoDispatchBelowADInplaceOrView|"
                            r"redispatch|enableRecordFunction|(Disable)?RecordFunctionGuard|"
                            r"set_record_function_tls_|clearThreadLocalCallbacks|clearCallbacks|removeCallback|"
                            # the profiler's callbacks and this thread's dispatch keys, switched by name
                            # (red-team round, 2026-12-06)
                            r"disableCallback|reenableCallback|get_record_function_tls_|addThreadLocalCallback|"
                            r"addGlobalCallback|tls_set_dispatch_key_(excluded|included)|"
                            r"_force_tls_local_dispatch_key_set|ThreadLocalState(Guard)?|setThreadLocalState|"
                            # what asks whether a mode or the profiler watches (the round's second pass)
                            r"hasCallbacks|hasGlobalCallbacks|hasThreadLocalCallbacks|isRecordFunctionEnabled|"
                            r"tls_is_dispatch_key(set)?_(included|excluded)|tls_local_dispatch_key_set|"
                            r"TorchDispatchModeTLS|PythonDispatcherTLS|PythonTLSSnapshot|"
                            # PyTorch's and Python's thread pools (work there is watched by nobody)
                            r"c10::ThreadPool|TaskThreadPool|at::launch|intraop_launch|get_thread_pool|"
                            r"PyThread_start_new_thread|"
                            # ATen's kernel tables and structured kernels, below the dispatcher
                            # (at::native however it is reached: a namespace alias of it, `using namespace
                            # at` then native::..., red-team round 11)
                            r"DispatchStub|at::native::[A-Za-z_][A-Za-z0-9_]*|at::native|native::[A-Za-z_][A-Za-z0-9_]*|"
                            # the dispatcher's tables and registration (red team round 5, 2026-12-05;
                            # native_symbols reads the same in the built library)
                            r"Dispatcher|OperatorHandle|OperatorEntry|KernelFunction|BoxedKernel|"
                            r"callBoxed[A-Za-z]*|findSchema[A-Za-z]*|torch::Library|CppFunction|"
                            # Python called back from native code: a Python function handed in and run
                            # on a thread no recorder watches takes the GIL there (red-team round,
                            # 2026-12-06: py::function run by an OpenMP team member)
                            r"gil_scoped_acquire[A-Za-z0-9_]*|PyGILState_Ensure|PyEval_AcquireThread|PyEval_RestoreThread|"
                            r"py::function|pybind11::function)\b")
# Calls whose result is a compiled extension: calling its functions is the candidate's own code.
_EXTENSION_LOADERS = location.EXTENSION_LOADERS
# Layer-like nn classes that only hold tensors: keeping and reading them is fine.
_HOLDERS = {"Parameter", "ParameterList", "ParameterDict", "Buffer", "Module"}

Add = Callable[[str, str, "ast.AST | None"], None]


@dataclass
class _Module:
    aliases: dict[str, str] = field(default_factory=dict)  # local name -> dotted origin
    functions: dict[str, ast.FunctionDef] = field(default_factory=dict)
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    extensions: set[str] = field(default_factory=set)  # names bound to compiled code (see below)
    top_names: set[str] = field(default_factory=set)  # bound at the module's top level: outlive a call
    tree: ast.Module | None = None
    joined: set[int] | None = None  # stream_join's, once read
    parents: dict[int, ast.AST] | None = None  # child id -> parent, once needed
    loader: set[int] = field(default_factory=set)  # StitchCUDA's verbatim kernel loader's nodes
    class_names: set[str] = field(default_factory=set)  # names bound to an object's class (type(x), x.__class__)
    type_names: set[str] = field(default_factory=lambda: {"type"})  # `type`, and names bound only to it
    loader_functions: set[str] = field(default_factory=set)  # functions returning only compiled code
    star_import: bool = False  # a `from M import *` anywhere
    self_instance: bool | None = None  # _self_is_instance's answer, once asked


# Attributes that reach other modules' objects, and through them any import (torch.__builtins__'s
# __import__, a function's __globals__).
_INTROSPECTION = frozenset({"_getframe", "f_back", "f_globals", "__globals__", "__subclasses__", "__closure__",
                            "cell_contents", "__kwdefaults__", "__bases__", "__mro__", "__wrapped__", "__builtins__",
                            "__import__", "__self__"})


def _root_imported(node: ast.AST, mod: _Module) -> bool:
    return probes.root_name(node) in mod.aliases


def _check_named_lookup(call: ast.Call, mod: _Module, add: Add) -> None:
    """getattr(x, "__globals__") is x.__globals__; a name not written out that may be a dunder may be
    any of them, unless it can only be an __init__ argument or one of written constants."""
    if id(call) in mod.loader or (_dotted(call.args[0], mod.aliases) or "").startswith("torch.ops"):
        return  # the loader's symbol lookups in its own library; the generated module's own ops
    name = call.args[1]
    if (text := location.fold(name)) is not None:  # written out, or made only of written strings
        if text in _INTROSPECTION or (text == "__dict__" and _root_imported(call.args[0], mod)):
            add("introspection", f"looks up .{text}: reaches other modules' objects", call)
        return
    if mod.tree is None or not location.may_be_dunder(name):
        return
    if mod.parents is None:
        mod.parents = {id(c): n for n in ast.walk(mod.tree) for c in ast.iter_child_nodes(n)}
    if not probes.given_name(name, mod.parents, mod.tree):
        add("computed-lookup", f"looks up {ast.unparse(name)[:40]} at run time: a name that may be a dunder "
            "(__globals__, __builtins__) reaches other modules' objects", call)


def _joined(mod: _Module) -> set[int]:
    """stream_join's streams of the module, read once a module."""
    if mod.tree is None:
        return set()
    if mod.joined is None:
        mod.joined = stream_join.joined_stream_nodes(mod.tree, lambda n: _dotted(n, mod.aliases))
    return mod.joined


def _dotted(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """`F.relu` -> `torch.nn.functional.relu` using the module's import aliases."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(aliases.get(node.id, node.id))
    return ".".join(reversed(parts))


def _is_extension_load(value: ast.AST, mod: _Module) -> bool:
    """A call that yields the candidate's compiled code: an extension loader, or any call that is
    neither torch's nor a class of the candidate (`_ext = _build()`). Calling functions of what it
    returns is the candidate's own code, even where they are named `forward` or `add`."""
    if not isinstance(value, ast.Call):
        return False
    origin = _dotted(value.func, mod.aliases) or ""
    if origin.endswith(_EXTENSION_LOADERS):
        return True
    return bool(origin) and origin.split(".")[0] != "torch" and origin not in mod.classes


def _star_names(module: str) -> list[str]:
    """The names `from module import *` binds, where this process has the module loaded already (ctypes,
    torch, operator: nothing of the candidate's is imported here to find out); [] otherwise. Without
    them `from ctypes import *` left cast(...) and memmove(...) unattributed."""
    m = sys.modules.get(module)
    if m is None:
        return []
    names = getattr(m, "__all__", None)
    if not isinstance(names, list | tuple):
        names = [n for n in dir(m) if not n.startswith("_")]
    # Never a module (torch._ops's `ctypes` and `torch`): a star import that rebound the candidate's own
    # `import ctypes` to another module's attribute hid every ctypes rule (a review, 2026-12-06).
    return [n for n in names if isinstance(n, str) and n.isidentifier()
            and not isinstance(getattr(m, n, None), types.ModuleType)]


def _import_aliases(tree: ast.Module) -> dict[str, str]:
    """Every name the module's imports bind -> its dotted origin; a star import's names (_star_names)
    yield to every name the module binds itself (an import, a def, an assignment)."""
    aliases: dict[str, str] = {}
    starred: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                if a.name == "*":
                    starred.update({n: f"{node.module}.{n}" for n in _star_names(node.module)})
                else:
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    if starred:
        own = _bindings(tree)
        starred = {n: origin for n, origin in starred.items() if not own[n]}
    return {**starred, **aliases}


def _collect(tree: ast.Module) -> _Module:
    mod = _Module(tree=tree, aliases=_import_aliases(tree))
    # Names bound only to `type`, then names bound only to an object's class through it: a name bound
    # to anything else anywhere in the module is not one (a review: `k = type(v)` in one function and
    # `k = _lib.run` in forward).
    bound = _bindings(tree)
    mod.type_names = {"type"} | _bound_only_to(tree, bound, lambda v: isinstance(v, ast.Name) and v.id == "type")
    mod.class_names = _bound_only_to(tree, bound, lambda v: _class_of(v, mod.type_names))
    mod.top_names = {t.id for node in tree.body if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign)
                     for t in ast.walk(node.targets[0] if isinstance(node, ast.Assign) else node.target)
                     if isinstance(t, ast.Name)}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            mod.functions[node.name] = node
        elif isinstance(node, ast.ClassDef):
            mod.classes[node.name] = node
    mod.loader_functions = _loader_functions(tree, mod, bound)
    mod.star_import = any(isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names) for n in ast.walk(tree))
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name, value = node.targets[0].id, node.value
            returned = _returned_alias(mod.functions.get(value.func.id), mod) \
                if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and bound[name] == 1 else None
            if returned:
                # `_ext = _build()` where every return of _build gives torch (or one of its modules or
                # functions): read as the candidate's own extension, `_ext.add(x, y)` was not torch.add.
                mod.aliases[name] = returned
            elif _is_extension_load(value, mod):
                mod.extensions.add(name)
            elif isinstance(value, ast.Attribute | ast.Name):
                # `relu = torch.relu` / `G = F`: an alias as good as an import's.
                origin = _dotted(value, mod.aliases)
                # (ctypes too: `_cast = ctypes.cast` then `_cast(t.data_ptr(), P)[i]`, red-team round 9.)
                if origin and origin.split(".")[0] in _ALIASED_ROOTS:
                    mod.aliases[name] = origin
    return mod


_ALIASED_ROOTS = ("torch", "ctypes")


def _returned_alias(fn: ast.FunctionDef | None, mod: _Module) -> str | None:
    """What every `return` of a module-level function gives, where each gives a name or attribute of
    torch (or of ctypes), through either arm of a conditional too: their longest common dotted prefix
    (`torch` where one arm gives torch and another torch.nn.functional); None otherwise."""
    if fn is None:
        return None
    origins: list[str | None] = []
    for r in ast.walk(fn):
        if isinstance(r, ast.Return):
            origins += _value_origins(r.value, mod)
    if not origins or any(o is None for o in origins):
        return None
    prefix: list[str] = []
    for parts in zip(*[str(o).split(".") for o in origins], strict=False):
        if len(set(parts)) != 1:
            break
        prefix.append(parts[0])
    return ".".join(prefix) if prefix and prefix[0] in _ALIASED_ROOTS else None


def _value_origins(v: ast.AST | None, mod: _Module) -> list[str | None]:
    if isinstance(v, ast.IfExp):
        return _value_origins(v.body, mod) + _value_origins(v.orelse, mod)
    if isinstance(v, ast.BoolOp):
        return [o for x in v.values for o in _value_origins(x, mod)]
    return [_dotted(v, mod.aliases) if isinstance(v, ast.Attribute | ast.Name) else None]


_CACHES = frozenset({"functools.lru_cache", "functools.cache"})
_TORCH_LOADERS = frozenset({"torch.utils.cpp_extension.load_inline", "torch.utils.cpp_extension.load",
                            "stitchcuda.runtime.load"})


def _loader_functions(tree: ast.Module, mod: _Module, bound: Counter) -> set[str]:
    """Module-level functions every `return` of which gives an extension loader's result
    (load_inline(...)), or a module name bound only to one or to None (the cached-global idiom);
    undecorated or under functools' caches, defined once. `_kernels().add(x, y, out)` calls the
    candidate's own code: it was read as Tensor.add (red-team round 9's review)."""
    def imported(f: ast.AST, want: frozenset[str]) -> bool:
        # The name as written resolves, through an import bound nowhere else, to torch's loader or
        # functools' cache: not a class or a variable of the module's own called `cpp_extension` or
        # `functools` (red-team round 10), nor a module of the candidate's named so (round 11).
        root = probes.root_name(f)
        return (_dotted(f, mod.aliases) or "") in want and root in mod.aliases and bound[root] == 1

    def loaded(v: ast.AST | None) -> bool:
        return isinstance(v, ast.Call) and imported(v.func, _TORCH_LOADERS)

    only_called = _only_called(tree)
    cached = _bound_only_to(tree, bound, lambda v: loaded(v) or (isinstance(v, ast.Constant) and v.value is None))
    out = set()
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef) or bound[fn.name] != 1 or fn.name not in only_called or not all(
                imported(d.func if isinstance(d, ast.Call) else d, _CACHES) for d in fn.decorator_list):
            continue
        returns = [n for n in _own_nodes(fn) if isinstance(n, ast.Return)]
        if returns and all(loaded(r.value) or (isinstance(r.value, ast.Name) and r.value.id in cached)
                           for r in returns):
            out.add(fn.name)
    return out


def _only_called(tree: ast.Module) -> set[str]:
    """Names that appear in the module only as the function of a call (`f(...)`), never as a value
    (`f.__code__ = ...`, `g = f`, `partial(f)`)."""
    called: set[str] = set()
    other: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            called.add(node.func.id)
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Name) and not (isinstance(node, ast.Call) and node.func is child):
                other.add(child.id)
    return called - other


def _own_nodes(fn: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a function's body, not those of functions, lambdas or classes defined in it."""
    todo = list(ast.iter_child_nodes(fn))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            todo.extend(ast.iter_child_nodes(node))


def _draws_a_dropout_mask(origin: str, call: ast.Call, mod: _Module) -> bool:
    """`torch.ops.aten.native_dropout(torch.ones(...), ...)`: a dropout mask drawn as eager dropout
    draws it (agents/random_draws.py), not dropout of anything the forward computes. The dynamic
    check holds it to the same at run time (a tensor of ones, torch_ops.DROPOUT_MASK)."""
    if origin not in ("torch.ops.aten.native_dropout", "torch.ops.aten.native_dropout.default") or not call.args:
        return False
    first = call.args[0]
    # p a number in (0, 1) and train True, written out: otherwise the call launches no draw, and
    # would count as one where none ran (dynamic_check._launches_dropout).
    rest = list(call.args[1:]) + [k.value for k in call.keywords if k.arg in ("p", "train")]
    if len(rest) != 2 or not all(isinstance(r, ast.Constant) for r in rest):
        return False
    p, train = rest[0].value, rest[1].value
    return (isinstance(first, ast.Call) and _dotted(first.func, mod.aliases) == "torch.ones"
            and train is True and isinstance(p, float | int) and not isinstance(p, bool) and 0 < p < 1)


def _self_attr(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def _class_attributes(cls: ast.ClassDef, mod: _Module) -> tuple[dict[str, str], set[str]]:
    """From `self.<attr> = ...` assignments: attributes holding torch layers or torch functions
    (calling these in forward runs PyTorch compute), and attributes holding loaded extensions."""
    layers: dict[str, str] = {}
    extensions: set[str] = set()
    for node in ast.walk(cls):
        if not isinstance(node, ast.Assign):
            continue
        attrs = [a for a in map(_self_attr, node.targets) if a]
        value = node.value
        if _is_extension_load(value, mod) or (isinstance(value, ast.Name) and value.id in mod.extensions):
            extensions.update(attrs)
            continue
        target = value.func if isinstance(value, ast.Call) else value
        origin = _dotted(target, mod.aliases) or ""
        if not origin.startswith("torch.") or origin.startswith("torch.nn.init"):
            continue
        name = origin.rsplit(".", 1)[-1]
        if isinstance(value, ast.Call):
            # nn.Linear(...) etc.; torch.randn(...) in __init__ only makes a tensor.
            if origin.startswith("torch.nn.") and name[:1].isupper() and name not in _HOLDERS:
                layers.update(dict.fromkeys(attrs, name))
        else:
            # self.act = torch.relu / F.gelu: a torch function under another name.
            layers.update(dict.fromkeys(attrs, origin))
    return layers, extensions


# The functions that look an attribute up by a name given as a string, under the names a module may
# reach them by: getattr(x, "n") and inspect.getattr_static(x, "n") are x.n; operator.attrgetter("n")(x)
# is x.n ("a.b": x.a.b).
_GETATTR = frozenset({"getattr", "builtins.getattr", "inspect.getattr_static"})
_ATTRGETTER = frozenset({"operator.attrgetter", "_operator.attrgetter"})
_METHODCALLER = frozenset({"operator.methodcaller", "_operator.methodcaller"})
_LOOKUPS = _GETATTR | _ATTRGETTER | _METHODCALLER


def _lookup_names(tree: ast.Module) -> dict[str, str]:
    """Local names bound to a lookup function (`from operator import attrgetter as ag`, `G = getattr`,
    `import builtins as b`) -> the function's dotted name, and imported modules -> theirs. A name is a
    lookup's only where every binding of it is (`G = getattr` and elsewhere `G = torch.linalg.norm`
    would otherwise have read G(x, "fro") as x.fro: a review, 2026-12-06)."""
    names = _import_aliases(tree)
    bound = _bindings(tree)
    for _ in range(2):  # `G = getattr; H = G`
        def is_lookup(v: ast.AST) -> bool:
            return isinstance(v, ast.Name | ast.Attribute) and _lookup_origin(v, names) in _LOOKUPS

        aliases = _bound_only_to(tree, bound, is_lookup)
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and is_lookup(node.value):
                for t in node.targets:
                    if isinstance(t, ast.Name) and t.id in aliases:
                        names[t.id] = _lookup_origin(node.value, names)
    return names


def _bound_only_to(tree: ast.Module, bound: Counter, pick: Callable[[ast.AST], bool]) -> set[str]:
    """Names every binding of which, anywhere in the module, is a plain `name = value` with pick(value)
    (`bound`: _bindings(tree))."""
    hits = Counter(t.id for n in ast.walk(tree) if isinstance(n, ast.Assign) and pick(n.value)
                   for t in n.targets if isinstance(t, ast.Name))
    return {x for x, c in hits.items() if bound[x] == c}


def _bindings(tree: ast.Module) -> Counter:
    """How many times each name is bound anywhere in the module: stored (assignments, loop and with
    targets, walrus), a parameter, a def or class, an import."""
    count: Counter = Counter()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            count[node.id] += 1
        elif isinstance(node, ast.arg):
            count[node.arg] += 1
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            count[node.name] += 1
        elif isinstance(node, ast.alias):
            count[(node.asname or node.name).split(".")[0]] += 1
        elif isinstance(node, ast.MatchAs | ast.MatchStar) and node.name:
            count[node.name] += 1  # (`case f:` binds f: red-team round 10)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            count[node.rest] += 1
    return count


def _lookup_origin(node: ast.AST, names: dict[str, str]) -> str:
    """The dotted name `node` refers to, through `names`; a bare getattr is the builtin."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ""
    head = names.get(node.id, node.id)
    return ".".join([head, *reversed(parts)])


class _NamedLookups(ast.NodeTransformer):
    """getattr(x, "tolist") read as x.tolist (the name written out, or made only of written strings:
    location.fold), so every rule that reads an attribute reads the lookup too. A red-team round
    (2026-12-06) ran Tensor.tolist and Tensor.map2_ through getattr with their names written out, which
    only the attribute forms were checked for. The same for getattr under another name (`G = getattr`,
    builtins.getattr), inspect.getattr_static, operator.attrgetter("n")(x) and x.__getattribute__("n")
    (or object's, type(x)'s, a class's: T.__getattribute__(x, "n"))."""

    def __init__(self, names: dict[str, str]):
        self.names = names

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if node.keywords:
            return node
        f, args = node.func, node.args
        origin = _lookup_origin(f, self.names) if isinstance(f, ast.Name | ast.Attribute) else ""
        # A default is evaluated whatever the lookup finds: only one that computes nothing (a constant, a
        # name, an attribute) may drop out of the tree (getattr(self, "nope", torch.relu(x)) runs relu).
        if origin in _GETATTR and (len(args) == 2 or (len(args) == 3
                                                       and isinstance(args[2], ast.Constant | ast.Name | ast.Attribute))):
            return self._attribute(node, args[0], args[1])
        if isinstance(f, ast.Attribute) and f.attr == "__getattribute__":
            if len(args) == 1:
                return self._attribute(node, f.value, args[0])
            if len(args) == 2:
                return self._attribute(node, args[0], args[1])
        if isinstance(f, ast.Call) and len(args) == 1 and f.args and not f.keywords \
                and isinstance(f.func, ast.Name | ast.Attribute) \
                and _lookup_origin(f.func, self.names) in _METHODCALLER:
            # methodcaller("n", *a)(x) is x.n(*a)
            text = location.fold(f.args[0])
            if isinstance(text, str) and text.isidentifier():
                method = ast.Attribute(value=args[0], attr=text, ctx=ast.Load())
                return ast.copy_location(ast.Call(func=method, args=f.args[1:], keywords=[]), node)
        if isinstance(f, ast.Call) and len(args) == 1 and len(f.args) == 1 and not f.keywords \
                and isinstance(f.func, ast.Name | ast.Attribute) and _lookup_origin(f.func, self.names) in _ATTRGETTER:
            text = location.fold(f.args[0])
            if isinstance(text, str) and text and all(part.isidentifier() for part in text.split(".")):
                out: ast.expr = args[0]
                for part in text.split("."):
                    out = ast.Attribute(value=out, attr=part, ctx=ast.Load())
                return ast.copy_location(out, node)
        if isinstance(f, ast.Call) and len(args) == 1 and len(f.args) > 1 and not f.keywords \
                and isinstance(f.func, ast.Name | ast.Attribute) and _lookup_origin(f.func, self.names) in _ATTRGETTER:
            # attrgetter("a", "b")(x) is (x.a, x.b)
            texts = [location.fold(a) for a in f.args]
            if all(isinstance(t, str) and t and all(p.isidentifier() for p in t.split(".")) for t in texts):
                elts: list[ast.expr] = []
                for text in texts:
                    out = args[0]
                    for part in str(text).split("."):
                        out = ast.Attribute(value=out, attr=part, ctx=ast.Load())
                    elts.append(out)
                return ast.copy_location(ast.Tuple(elts=elts, ctx=ast.Load()), node)
        return node

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        # X.__dict__["n"] and vars(X)["n"] are X.n (type(x).__dict__["tolist"] is Tensor's tolist)
        self.generic_visit(node)
        v = node.value
        owner = v.value if isinstance(v, ast.Attribute) and v.attr == "__dict__" else \
            v.args[0] if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "vars" \
            and len(v.args) == 1 and not v.keywords else None
        # (A module's __dict__ stays as written: the introspection rule names it, as it reaches what the
        # module imports.)
        if owner is not None and isinstance(node.ctx, ast.Load) and probes.root_name(owner) not in self.names:
            return self._attribute(node, owner, node.slice)
        return node

    @staticmethod
    def _attribute(node: ast.expr, value: ast.expr, name: ast.expr) -> ast.AST:
        if isinstance(text := location.fold(name), str) and text.isidentifier():
            return ast.copy_location(ast.Attribute(value=value, attr=text, ctx=ast.Load()), node)
        return node


def _parse(source: str, filename: str = "<unknown>", *, named_lookups: bool = True) -> ast.Module:
    """The module's tree, its getattr lookups with written names read as attributes (`named_lookups`;
    off for the tests of the dynamic defences, whose candidates reach torch by such names to test what
    runs: VerifyOptions.name_lookups)."""
    tree = pyast.parse(source, filename=filename)
    return ast.fix_missing_locations(_NamedLookups(_lookup_names(tree)).visit(tree)) if named_lookups else tree


@functools.cache
def _kernel_loader_functions() -> dict[str, str]:
    tree = _parse(kernel_loader.source_text())
    return {n.name: ast.dump(n) for n in tree.body if isinstance(n, ast.FunctionDef)}


def _is_kernel_loader(fn: ast.FunctionDef) -> bool:
    """StitchCUDA's own kernel loader, copied verbatim into generated modules (stitchcuda.kernel_loader):
    it reads the current stream through torch._C, which is no PyTorch compute. Only a function
    identical to the loader's own (same AST) is exempt."""
    return _kernel_loader_functions().get(fn.name) == ast.dump(fn)


@functools.cache
def _kernel_loader_definitions() -> dict[str, str]:
    tree = _parse(kernel_loader.source_text())
    return {n.name: ast.dump(n) for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}


def _kernel_loader_nodes(tree: ast.Module) -> set[int]:
    """The nodes of the module's top-level functions and classes identical (same AST) to the kernel
    loader's own: its ctypes.CDLL loads the candidate's own library, built beside it or by
    StitchCUDA's runtime, so the escape checks pass it over. An edited copy is checked like any code."""
    shipped = _kernel_loader_definitions()
    return {id(sub) for node in tree.body if isinstance(node, ast.FunctionDef | ast.ClassDef)
            and shipped.get(node.name) == ast.dump(node) for sub in ast.walk(node)}


def _reachable(mod: _Module, cls: ast.ClassDef) -> list[tuple[str, ast.AST]]:
    """forward, and every method or module function it calls (transitively), except __init__."""
    methods = {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)}
    todo = [("forward", methods["forward"])] if "forward" in methods else []
    seen: dict[str, ast.AST] = {}
    while todo:
        name, fn = todo.pop()
        if name in seen:
            continue
        seen[name] = fn
        for node in ast.walk(fn):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            attr = _self_attr(f)
            if attr in methods and attr != "__init__":
                todo.append((f"{cls.name}.{attr}", methods[attr]))
            elif isinstance(f, ast.Name) and f.id in mod.functions and not _is_kernel_loader(mod.functions[f.id]):
                todo.append((f.id, mod.functions[f.id]))
            elif isinstance(f, ast.Name) and f.id in mod.classes and f.id != cls.name:
                # A helper class called from forward: its methods run in forward too.
                for m in mod.classes[f.id].body:
                    if isinstance(m, ast.FunctionDef):
                        todo.append((f"{f.id}.{m.name}", m))
    return list(seen.items())


def _collector(filename: str) -> tuple[list[Finding], Add]:
    """A findings list, and `add` for it: one finding per (code, line, message)."""
    findings: list[Finding] = []

    def add(code: str, msg: str, node: ast.AST | None) -> None:
        line = getattr(node, "lineno", None)
        if not any(f.code == code and f.line == line and f.message == msg for f in findings):
            findings.append(Finding(code=code, message=msg, line=line, file=filename))

    return findings, add


def check_source(
    source: str,
    *,
    filename: str = "model_new.py",
    reference_classes: tuple[str, ...] = ("Model",),
    reference_module: str | None = None,
    class_name: str = "ModelNew",
    own: frozenset[str] | None = None,
    named_lookups: bool = True,
) -> list[Finding]:
    """Hack findings for a candidate module's source. An empty list means no static hack found.
    `own`: the candidate's files, relative to the module's folder (location.py; None: unknown)."""
    findings, add = _collector(filename)
    try:
        tree = _parse(source, filename=filename, named_lookups=named_lookups)
    except SyntaxError as e:
        return [Finding("syntax-error", f"candidate does not parse: {e.msg}", line=e.lineno, file=filename)]
    mod = _collect(tree)
    cls = mod.classes.get(class_name)
    if cls is None:
        return [Finding("no-modelnew", f"candidate defines no class {class_name}", file=filename)]

    for base in cls.bases:
        text = ast.unparse(base)
        if text.split(".")[-1] in reference_classes:
            add("subclasses-reference", f"{class_name} subclasses the reference {text}", cls)

    _check_anywhere(tree, mod, add, reference_classes, reference_module, class_name, own)
    layers, extensions = _class_attributes(cls, mod)
    for fname, fn in _reachable(mod, cls):
        _check_function(fname, fn, mod, layers, extensions, add)
    return findings


def check_helper_source(
    source: str,
    *,
    filename: str,
    reference_classes: tuple[str, ...] = ("Model",),
    reference_module: str | None = None,
    own: frozenset[str] | None = None,
    named_lookups: bool = True,
) -> list[Finding]:
    """Hack findings for a Python file of the candidate other than the one defining ModelNew (a
    helper module it imports). Which of its functions forward reaches is not followed across
    modules, so every function in it is held to forward's rules."""
    findings, add = _collector(filename)
    try:
        tree = _parse(source, filename=filename, named_lookups=named_lookups)
    except SyntaxError as e:
        return [Finding("syntax-error", f"{filename} does not parse: {e.msg}", line=e.lineno, file=filename)]
    mod = _collect(tree)
    _check_anywhere(tree, mod, add, reference_classes, reference_module, "ModelNew", own)
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef) and not _is_kernel_loader(fn):
            _check_function(f"{filename}:{fn.name}", fn, mod, {}, set(), add)
    return findings


def check_candidate_sources(
    files: dict[str, str],
    module: str,
    *,
    reference_classes: tuple[str, ...] = ("Model",),
    reference_module: str | None = None,
    named_lookups: bool = True,
) -> list[Finding]:
    """Every file of a candidate: its module, any other Python file (a helper it imports was not
    read at all before 2026-12-05), and its native sources."""
    found = check_source(files[module], filename=module, reference_classes=reference_classes,
                         reference_module=reference_module, own=_own_files(files, module), named_lookups=named_lookups)
    for name, text in files.items():
        if name != module and name.endswith(".py"):
            found += check_helper_source(text, filename=name, reference_classes=reference_classes,
                                         reference_module=reference_module, own=_own_files(files, name),
                                         named_lookups=named_lookups)
    return found + check_native_sources(files)


# What a candidate may ask about or read of its own: its sources. A file it ships under another name
# (result.json, request.json: the run folder's own names) is no source, and asking about it tells the
# Verifier's run folder, which rewrites or removes those, from the user's project (a review, 2026-12-05).
_SOURCE_SUFFIXES = (".py", ".cu", ".cuh", ".cpp", ".cc", ".c", ".h", ".hpp")


def _own_files(files: dict[str, str], module: str) -> frozenset[str]:
    """The candidate's source files as `module`'s folder sees them (relative to it)."""
    folder = module.rsplit("/", 1)[0] + "/" if "/" in module else ""
    return frozenset(name[len(folder):] for name in files if name.startswith(folder) and name.endswith(_SOURCE_SUFFIXES))


def _check_anywhere(
    tree: ast.Module,
    mod: _Module,
    add: Add,
    reference_classes: tuple[str, ...],
    reference_module: str | None,
    class_name: str,
    own: frozenset[str] | None = None,
) -> None:
    loader = _kernel_loader_nodes(tree)  # StitchCUDA's own loader loads the candidate's own library
    mod.loader = loader
    for node in ast.walk(tree):
        _check_module_node(node, mod, add, reference_classes, reference_module, class_name)
        if id(node) not in loader:
            _check_escape(node, mod, add)
    anchored = location.own_absolute_paths(tree, lambda n: _dotted(n, mod.aliases), own)
    settled = location.settling_guards(tree, lambda n: _dotted(n, mod.aliases))
    for what, node in probes.python_probes(tree, lambda n: _dotted(n, mod.aliases)):
        if id(node) not in loader and id(node) not in anchored and id(node) not in settled:
            add("environment-probe", f"reads {what}: a module that asks where it runs can tell the Verifier's "
                "processes from the user's and do its work only under checks", node)
    for what, node in location.location_probes(tree, lambda n: _dotted(n, mod.aliases), own, loader | settled):
        add("environment-probe", f"asks {what}: a module that asks where it lies, or what lies beside it, can "
            "tell the Verifier's run folder from the user's project and do its work only under checks", node)


def _loader_call(node: ast.AST, mod: _Module) -> bool:
    """`_kernels()`: a call of one of the module's loader functions (_loader_functions)."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in mod.loader_functions


def _local_extensions(fn: ast.AST, mod: _Module, extensions: set[str]) -> set[str]:
    """Names in `fn` whose every binding there is a plain `lib = _lib` (or `lib = self._ext`) of the
    candidate's own compiled extension: their calls are its code, as the module-level name's are (a
    red-team round's false positive: `lib = _lib; lib.add(x, y, out, n)` read as Tensor.add). A name
    also bound any other way (a parameter, a loop, a walrus, another value, `global`) is not one."""
    ok: dict[str, bool] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.arg):
            ok[node.arg] = False
        elif isinstance(node, ast.Global | ast.Nonlocal):
            ok.update({n: False for n in node.names})
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            parent = _parent(node, mod)
            value = parent.value if isinstance(parent, ast.Assign) and parent.targets == [node] else None
            plain = (isinstance(value, ast.Name) and value.id in mod.extensions) or \
                (value is not None and (_self_attr(value) in extensions or _loader_call(value, mod)))
            ok[node.id] = ok.get(node.id, True) and plain
    return {name for name, plain in ok.items() if plain}


def _check_function(
    fname: str, fn: ast.AST, mod: _Module, layers: dict[str, str], extensions: set[str], add: Add
) -> None:
    """forward's rules, for one function forward reaches."""
    own_names = _local_extensions(fn, mod, extensions)
    for what, node in call_state.counters(fn, mod.top_names, lambda n: _dotted(n, mod.aliases), mod.tree):
        add("call-count", f"{fname} keeps {what}: a forward that counts its calls can do its work for as many "
            "calls as any check makes and stop after", node)
    for node in ast.walk(fn):
        if isinstance(node, ast.Try):
            add(
                "try-except-fallback",
                f"try/except in {fname}: a fallback path can hide PyTorch compute",
                node,
            )
        elif isinstance(node, ast.With) and any(
            isinstance(i.context_expr, ast.Call)
            and (_dotted(i.context_expr.func, mod.aliases) or "").endswith("contextlib.suppress")
            for i in node.items
        ):
            add("try-except-fallback", f"contextlib.suppress in {fname}: swallows a failing kernel", node)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            add("torch-compute-in-forward", f"`@` in {fname}: matrix product done by PyTorch", node)
        elif isinstance(node, ast.Call):
            _check_call(node, fname, mod, layers, extensions, own_names, add)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and node.attr in COMPUTE_TENSOR_METHODS \
                and not _root_imported(node, mod) and probes.root_name(node) not in ("self", "math") \
                and not _called(node, mod):
            # A tensor's method taken as a value and called later (`m = x.tolist; m()`, `(x.relu,)[0]()`):
            # the call rules above name only `x.relu(...)` written as a call. (A dotted name's, such as
            # `F.relu` kept as an activation, is read where it is called.)
            add("torch-compute-in-forward", f"{fname} takes .{node.attr} of a tensor as a value, to call later", node)


def check_native_sources(files: dict[str, str]) -> list[Finding]:
    """Findings for a candidate's C++/CUDA files, and the C++ its Python files carry in strings (for
    load_inline): the dispatcher's guards and op registrations, and environment probes."""
    units = [(name, name, text, 0) for name, text in files.items() if name.endswith(probes.NATIVE_SUFFIXES)]
    units += list(_inline_native(files))
    out: list[Finding] = []
    for file, name, text, offset in units:
        unit: list[Finding] = []
        # The text as written (its comments left out by our lexer), as the preprocessor's own lexer
        # leaves its comments out, then as the preprocessor expands the candidate's own macros: a name
        # pasted together (`SC_CAT(__FI, LE__)`, `PyGILState_ ## Ensure`: the 2026-12-06 round's second
        # pass) is read written out there. (Their lines do not map back: findings there name the unit.)
        # Comments are no calls: an honest candidate's "// as at::native::softmax does" was a finding;
        # code made to look like one must fool both lexers (red-team round 10), and the built library's
        # symbols are read too (native_symbols), whatever its text says.
        for as_read, where in ((text, offset), (probes.uncommented(text), None), (_expanded(text), None)):
            if as_read is None:
                continue
            # (Our lexer reads the written text only: the preprocessor's views have no comments left,
            # and re-lexed by ours they would lose what ours misreads, so both lexers would no longer
            # have to be fooled. Round 11's `$R"(")"` was hidden from both views so.)
            code = probes.strip_comments(as_read) if where is not None else as_read
            for lineno, line in enumerate(code.splitlines(), 1):
                if m := _NATIVE_BYPASS.search(line):
                    unit.append(Finding("hidden-dispatch", f"{name} uses {m.group(1)}: PyTorch work past the op "
                                        "recorder", line=where + lineno if where is not None else offset + 1, file=file))
                    break
            else:
                # `at::native ::relu`, `at::native::` then relu on the next line: the compiler's tokens
                # whatever the blanks between them (red-team round 11). (The unit's line: a joined text.)
                if m := _NATIVE_BYPASS.search(_SCOPE_BLANKS.sub("::", code)):
                    unit.append(Finding("hidden-dispatch", f"{name} uses {m.group(1)}: PyTorch work past the op "
                                        "recorder", line=offset + 1, file=file))
            if op := _threaded_aten_op(as_read):
                unit.append(Finding("hidden-dispatch", f"{name} runs OpenMP threads and calls PyTorch's {op}: an op run "
                                    "on a team member is seen by no recorder or profiler (they watch the calling thread)",
                                    file=file))
            unit += [Finding("environment-probe", f"{name} uses {what}: native code that asks where it runs (or calls "
                             "what it names only at run time) can tell the Verifier's processes from the user's",
                             line=where + lineno if where is not None else offset + 1, file=file)
                     for lineno, what in probes.native_probes(f"{name}.cpp", as_read)]
            if unit:
                break  # (the expanded text only where the written one says nothing)
        out += unit
    return out


_SCOPE_BLANKS = re.compile(r"\s*::\s*")


def _expanded(text: str) -> str | None:
    """probes.preprocessed(text) with __FILE__'s expansion and __LINE__ put back as the names, so the
    probes' reading (an error message names both) reads it as written."""
    pre = probes.preprocessed(text.replace("__LINE__", "SC_LINE_MARK_"))
    if pre is None:
        return None
    pre = pre.replace("SC_LINE_MARK_", "__LINE__")
    return re.sub(r'"[^"\n]*' + probes.PREPROCESSED_NAME + r'\.cpp"', "__FILE__", pre)


# OpenMP in a candidate's native code is allowed (its own loops over threads libgomp starts), and so
# are PyTorch's allocation and metadata calls; PyTorch's compute in a unit that runs OpenMP threads
# may run on a team member, where no recorder or profiler looks (a red-team candidate, 2026-12-06:
# at::add and at::clamp_min on omp_get_thread_num() == 1). Such a unit calling any operator that
# computes is a finding.
_OPENMP = re.compile(r"#\s*pragma\s+omp\b|\bomp_[a-z_]+\s*\(|\bGOMP_[A-Za-z_]+\s*\(")
_ATEN_CALL = re.compile(r"(?:\b(?:at|torch)::|\.|->)\s*([a-z_][a-z0-9_]*)\s*\(")
_METADATA = frozenset({"size", "sizes", "stride", "strides", "numel", "dim", "data_ptr", "options", "dtype", "device",
                       "scalar_type", "is_cuda", "is_contiguous", "item", "defined", "element_size", "nbytes",
                       "storage_offset", "mutable_data_ptr", "const_data_ptr", "get_device", "requires_grad"})


def _threaded_aten_op(text: str) -> str | None:
    """The first computing ATen operator a native unit that runs OpenMP threads calls, else None."""
    code = probes.strip_comments_and_strings(text)
    if not _OPENMP.search(code):
        return None
    from stitchcuda.agents.verify import native_symbols
    from stitchcuda.agents.verify.torch_ops import ALLOWED_ATEN

    ops = native_symbols.operator_names()
    for m in _ATEN_CALL.finditer(code):
        name = m.group(1)
        if name not in _METADATA and name not in ALLOWED_ATEN and native_symbols.is_operator(name, ops):
            return name
    return None


# A string of a Python file is C++ (load_inline's cpp_sources and cuda_sources) where it has one of
# these marks: it was not read for probes before (a review, 2026-12-05), though it is compiled and
# runs as a native source does.
_CPP_MARKS = re.compile(r'#\s*include\b|__global__|extern\s+"C"|PYBIND11_MODULE|TORCH_LIBRARY|\btorch::|\bat::Tensor\b')


def _inline_native(files: dict[str, str]) -> Iterator[tuple[str, str, str, int]]:
    """(file, name, text, line offset) for each string of a candidate's Python files that is C++;
    an f-string's written parts joined."""
    for file, source in files.items():
        if not file.endswith(".py"):
            continue
        try:
            tree = pyast.parse(source)
        except SyntaxError:
            continue  # (check_source reports it)
        inner = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
        # Docstrings are prose, whatever C++ they name (a review, 2026-12-05: one citing std::transform
        # and "one pass at a time (...)" read as a call of time).
        inner |= {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body
                  and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr):
                text = "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in inner:
                text = node.value
            else:
                continue
            if _CPP_MARKS.search(text):
                yield file, f"{file}: the string at line {node.lineno}", text, node.lineno - 1


def _check_module_node(
    node: ast.AST,
    mod: _Module,
    add: Add,
    reference_classes: tuple[str, ...],
    reference_module: str | None,
    class_name: str,
) -> None:
    """Anywhere in the module: imports and names that reach the reference or escape the checks."""
    if isinstance(node, ast.Import | ast.ImportFrom):
        names = [a.name for a in node.names] + (
            [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
        )
        for n in names:
            top = n.split(".")[0]
            if reference_module and top == reference_module:
                add("imports-reference", f"imports the reference module {n}", node)
            if top in _FORBIDDEN_MODULES:
                add(f"forbidden-import-{top}", f"imports {n}: {_FORBIDDEN_MODULES[top]}", node)
        if isinstance(node, ast.ImportFrom) and node.module == "stitchcuda":
            names = [f"stitchcuda.{a.name}" for a in node.names]
        for n in names:
            if _verifier_internal(n):
                add("verifier-internals", f"imports {n}: the Verifier's own code, which a candidate may not reach", node)
    elif isinstance(node, ast.Name):
        if node.id in reference_classes and node.id != class_name:
            add("references-reference", f"uses the reference class {node.id}", node)
        elif node.id == "__builtins__":
            add("dynamic-code", "uses __builtins__: reaches __import__ and friends", node)
    if isinstance(node, ast.Attribute) and node.attr.split(".")[0] in _FORBIDDEN_MODULES | _FORBIDDEN_AS_ATTRIBUTE:
        # A forbidden module is reached as another module's attribute as well as by import: a red-team
        # candidate (2026-12-06) computed with numpy as torch.storage.np. (An attribute only spells the
        # module's name where it is that module: honest modules name nothing so.)
        top = node.attr.split(".")[0]
        why = _FORBIDDEN_MODULES.get(top) or _FORBIDDEN_AS_ATTRIBUTE[top]
        code = "numpy" if top in ("np", "_numpy") else top
        add(f"forbidden-import-{code}", f"reaches {top} as {_dotted(node, mod.aliases) or node.attr}: {why}", node)
    if isinstance(node, ast.Attribute) and _verifier_internal(_dotted(node, mod.aliases) or ""):
        add("verifier-internals", f"uses {_dotted(node, mod.aliases)}: the Verifier's own code, which a candidate "
            "may not reach", node)
    if isinstance(node, ast.Attribute | ast.Name | ast.alias):
        name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else node.name
        if name.split(".")[-1] in _DISPATCH_BYPASS:
            add("hidden-dispatch", f"uses {name}: PyTorch work past the op recorder", node)
        elif name.split(".")[-1] in _MODE_PROBES and not _own_name(node, mod):
            add("mode-probe", f"uses {name}: a forward that asks whether a dispatch mode or the profiler is on can behave "
                "otherwise while the Verifier watches", node)
    elif isinstance(node, ast.Constant) and isinstance(node.value, str) and (m := _NATIVE_BYPASS.search(node.value)):
        # (Any string, comments and all, wherever it stands: any string may end up compiled, glued to
        # others (a piece ending in an open string or a backslash turns the next piece's comment into
        # code), a message read back through e.args, a docstring through __doc__: red-team round 10.)
        add("hidden-dispatch", f"C++ source using {m.group(1)}: PyTorch work past the op recorder", node)
    if isinstance(node, ast.FunctionDef) and node.name in _SUBCLASS_HOOKS:
        add(
            "tensor-subclass",
            f"defines {node.name}: a tensor subclass can defer its work past the timing",
            node,
        )
    elif isinstance(node, ast.Name | ast.Attribute) and (node.id if isinstance(node, ast.Name) else node.attr) in \
            _SUBCLASS_HOOKS | _SUBCLASS_MAKERS:
        name = node.id if isinstance(node, ast.Name) else node.attr
        add("tensor-subclass", f"uses {name}: a tensor subclass can run PyTorch's work past the op recorder", node)
    elif isinstance(node, ast.Call):
        origin = _dotted(node.func, mod.aliases) or ""
        if origin in _DYNAMIC_CODE:
            add("dynamic-code", f"calls {origin}(): dynamic code can hide a fallback", node)
        if origin.startswith(("sys.modules", "sys._getframe")):
            add("introspection", f"uses {origin}: reaches other modules' objects", node)
        if origin in ("getattr", "hasattr", "setattr", "delattr") and len(node.args) >= 2:
            _check_named_lookup(node, mod, add)
        parts = origin.split(".")
        if parts[0] == "torch" and len(parts) > 1 and parts[1] in _COMPILERS:
            add("torch-compiler", f"calls {origin}: the work must be in the candidate's own kernels", node)
    elif isinstance(node, ast.Attribute):
        if node.attr in _INTROSPECTION:
            add("introspection", f"uses .{node.attr}: reaches other modules' objects", node)
        elif node.attr == "__dict__" and _root_imported(node.value, mod):
            add("introspection", f"uses {ast.unparse(node)[:50]}: a module's names, which reach what it imports", node)
        elif node.attr == "modules" and _dotted(node, mod.aliases) == "sys.modules":
            add("introspection", "uses sys.modules: reaches other modules' objects", node)
        origin = _dotted(node, mod.aliases) or ""
        if origin.startswith(_STREAM_APIS) and id(node) not in _joined(mod):
            add(
                "side-stream",
                f"uses {origin}: work off the caller's stream escapes the timing",
                node,
            )
    if isinstance(node, ast.ImportFrom) and node.module:
        # `from torch.cuda import Stream` names a stream API without an attribute access.
        for a in node.names:
            if f"{node.module}.{a.name}".startswith(_STREAM_APIS):
                add("side-stream", f"imports {node.module}.{a.name}: work off the caller's stream", node)


def _check_call(
    node: ast.Call,
    fname: str,
    mod: _Module,
    layers: dict[str, str],
    extensions: set[str],
    own_names: set[str],
    add: Add,
) -> None:
    """`extensions`: self attributes holding the candidate's own compiled code; `own_names`: local
    names in the function bound only to it (_local_extensions)."""
    f = node.func
    origin = _dotted(f, mod.aliases) or ""
    parts = origin.split(".")
    if isinstance(f, ast.Attribute):
        # Functions of the candidate's own compiled extension, e.g. `_ext.forward(x)`.
        recv = f.value
        if (isinstance(recv, ast.Name) and (recv.id in mod.extensions or recv.id in own_names)) \
                or _self_attr(recv) in extensions or _loader_call(recv, mod):
            return
    if origin.startswith("torch.nn.functional."):
        add("torch-compute-in-forward", f"{fname} calls {origin}", node)
    elif origin.startswith(
        ("torch.ops.aten.", "torch.ops.prims.", "torch._C.", "torch._refs.", "torch._prims.")
    ):
        if not _draws_a_dropout_mask(origin, node, mod):
            add("torch-compute-in-forward", f"{fname} calls {origin}", node)
    elif origin.startswith("torch.nn.") and parts[-1][:1].isupper():
        add("torch-layer-in-forward", f"{fname} builds and runs {origin}", node)
    elif parts[0] == "torch" and len(parts) == 2 and parts[1] not in ALLOWED_TORCH_CALLS:
        add("torch-compute-in-forward", f"{fname} calls {origin}", node)
    elif parts[0] == "torch" and len(parts) == 3 and parts[1] in {"linalg", "fft", "special", "sparse"}:
        add("torch-compute-in-forward", f"{fname} calls {origin}", node)
    elif (
        parts[0] == "torch"
        and len(parts) == 3
        and parts[1] == "Tensor"
        and parts[2] in COMPUTE_TENSOR_METHODS
    ):
        add("torch-compute-in-forward", f"{fname} calls {origin}", node)
    elif _self_attr(f) in layers:
        attr = _self_attr(f)
        add("torch-layer-in-forward", f"{fname} runs the PyTorch layer self.{attr} ({layers[attr]})", node)
    elif isinstance(f, ast.Attribute) and "." in layers.get(_self_attr(f.value) or "", ""):
        # `self.F = torch.nn.functional` then `self.F.relu(x)`: torch's function through a module kept
        # on self (red-team round 11 kept torch._C._autograd so).
        attr = _self_attr(f.value)
        add("torch-compute-in-forward", f"{fname} calls {layers[attr]}.{f.attr} through self.{attr}", node)
    elif isinstance(f, ast.Subscript) and _self_attr(f.value) in layers:
        attr = _self_attr(f.value)
        add("torch-layer-in-forward", f"{fname} runs a layer of self.{attr} ({layers[attr]})", node)
    elif (
        isinstance(f, ast.Attribute) and f.attr in COMPUTE_TENSOR_METHODS and parts[0] not in {"self", "math"}
    ):
        add("torch-compute-in-forward", f"{fname} calls .{f.attr}() on a tensor", node)
    elif isinstance(f, ast.Attribute) and f.attr in {"forward", "__call__"}:
        add("torch-layer-in-forward", f"{fname} calls {ast.unparse(f)}: another module's forward", node)


# --- routes out of the sandbox (issue 22, layer 3) -------------------------------------------------
# The obvious ones, named with the line, under the codes the worker's audit hook uses for the same
# attempt at run time (audit.py): a candidate has no business starting processes, talking to the
# network, writing files other than its own, or loading libraries other than its own build.

# ctypes' ways for Python to read memory by its address (a red-team candidate, 2026-11-30, computed in
# a Python loop over c_float arrays made at its inputs' data_ptr()): the kernels take pointers, and
# nothing of a candidate's reads through them in Python.
_MEMORY_READS = frozenset({"from_address", "from_buffer", "from_buffer_copy", "string_at", "wstring_at"})
# ctypes' own: a pointer made from an address, bytes copied or set by address (the red-team round of
# 2026-12-06: ctypes.cast(t.data_ptr(), POINTER(c_float))[i], ctypes.memmove into arrays of its own,
# then Python arithmetic). Named by ctypes only (typing.cast is no memory read).
_CTYPES_MEMORY = frozenset({"ctypes.memmove", "ctypes.memset"})  # ... at a tensor's data_ptr()
_CTYPES_CAST = "ctypes.cast"  # ... whose result Python indexes, iterates or dereferences
# A cast pointer read through an attribute: dereferenced, or its item or iterator taken as a value
# (`map(q.__getitem__, range(n))`, red-team round 9).
_POINTER_READS = frozenset({"contents", "__getitem__", "__iter__"})

_ESCAPE_MODULES = {
    "subprocess": ("sandbox-process", "starts processes"),
    "pty": ("sandbox-process", "starts processes"),
    "socket": ("sandbox-network", "opens network connections"),
    "ssl": ("sandbox-network", "opens network connections"),
    "urllib": ("sandbox-network", "opens network connections"),
    "http": ("sandbox-network", "opens network connections"),
    "requests": ("sandbox-network", "opens network connections"),
    "ftplib": ("sandbox-network", "opens network connections"),
    "smtplib": ("sandbox-network", "opens network connections"),
    "shutil": ("sandbox-write", "copies, moves and deletes files"),
}
_OS_PROCESS = ("os.system", "os.popen", "os.fork", "os.forkpty", "os.posix_spawn", "os.exec", "os.spawn")
_OS_SIGNAL = ("os.kill", "os.killpg")
_OS_FILE = {"os.remove", "os.unlink", "os.rename", "os.replace", "os.rmdir", "os.mkdir", "os.makedirs",
            "os.truncate", "os.chmod", "os.symlink", "os.link"}
_PATH_WRITES = {"write_text", "write_bytes", "touch", "unlink", "mkdir", "rmdir", "rename", "replace",
                "symlink_to", "chmod"}
_LIB_LOADERS = {"CDLL", "PyDLL", "LoadLibrary", "find_library", "WinDLL", "OleDLL", "dlopen"}


def _cast_read(call: ast.Call, mod: _Module) -> bool:
    """Whether a ctypes.cast's result is read in Python: indexed, iterated or dereferenced (.contents)
    directly, or through a name it is bound to (a tuple's names included) anywhere in the module. A
    cast handed to a kernel as its argument reads nothing."""
    if mod.tree is None:
        return False
    names: set[str] = set()
    node: ast.AST = call
    while (parent := _parent(node, mod)) is not None:
        if isinstance(parent, ast.Subscript) and parent.value is node or \
                isinstance(parent, ast.Attribute) and parent.attr in _POINTER_READS or \
                isinstance(parent, ast.For | ast.comprehension) and parent.iter is node:
            return True
        if isinstance(parent, ast.Assign | ast.AnnAssign | ast.NamedExpr):
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            names = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            break
        if isinstance(parent, ast.stmt):
            break
        node = parent
    if not names:
        return False
    for sub in ast.walk(mod.tree):
        if isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name) and sub.value.id in names:
            return True
        if isinstance(sub, ast.Attribute) and sub.attr in _POINTER_READS and isinstance(sub.value, ast.Name) \
                and sub.value.id in names:
            return True
        if isinstance(sub, ast.For | ast.comprehension) and isinstance(sub.iter, ast.Name) and sub.iter.id in names:
            return True
    return False


def _outside_path(node: ast.AST, mod: _Module) -> str | None:
    """The path text where `node` names an absolute or home-relative path: a constant starting
    with / or ~, or anything built from expanduser / Path.home() / $HOME."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(("/", "~")):
        return node.value
    for sub in ast.walk(node):
        origin = _dotted(sub.func, mod.aliases) or "" if isinstance(sub, ast.Call) else ""
        if origin.endswith(("expanduser", "Path.home", "pathlib.Path.home")):
            return ast.unparse(node)
        if isinstance(sub, ast.Constant) and sub.value == "HOME":
            return ast.unparse(node)
    return None


def _own_library(args: list[ast.expr]) -> bool:
    """A library path built from the candidate's own folder (__file__) or a build's result."""
    if args and _bare_library_name(args[0]):
        return False  # found by the loader among what is loaded (CDLL(os.path.basename("libtorch_cpu.so")))
    for a in args:
        for sub in ast.walk(a):
            if (isinstance(sub, ast.Name) and sub.id == "__file__") or (
                isinstance(sub, ast.Attribute) and sub.attr in {"library", "path"}
            ):
                return True
    return False


def _bare_library_name(arg: ast.expr) -> bool:
    """A library named with no folder: a written name without a slash, or a path's last part
    (os.path.basename(...), PurePath(...).name). The audit hook judges the rest by where it leads."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return "/" not in arg.value
    if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and arg.func.attr == "basename":
        return True
    return isinstance(arg, ast.Attribute) and arg.attr == "name"


def _data_pointer_type(node: ast.AST, mod: _Module) -> bool:
    """ctypes.POINTER(...), one of ctypes' c_* types, or a name bound only to one of those: a cast to it
    makes a data pointer, never a function (a review, 2026-12-06: ctypes.cast(c_void_p(addr),
    type(lib.f)) is a function pointer at any address)."""
    def plain(v: ast.AST) -> bool:
        origin = _dotted(v.func if isinstance(v, ast.Call) else v, mod.aliases) or ""
        if isinstance(v, ast.Call):
            return origin == "ctypes.POINTER"
        return origin.startswith("ctypes.c_")

    if plain(node):
        return True
    if isinstance(node, ast.Name) and mod.tree is not None:
        return node.id in _bound_only_to(mod.tree, _bindings(mod.tree), plain)
    return False


def _called(node: ast.AST, mod: _Module) -> bool:
    """Whether `node` is the function of the call around it."""
    parent = _parent(node, mod)
    return isinstance(parent, ast.Call) and parent.func is node


def _own_name(node: ast.AST, mod: _Module) -> bool:
    """`self.profiler`, or a variable `profiler` the module binds itself (`profiler = None`): the
    candidate's own, however it is named; what it is bound to is read where it is bound
    (`= torch.profiler` names torch's). An honest candidate's `self.profiler = None` was a
    mode-probe (red-team round 9's review). Only `profiler`: the other probes' names are torch's
    private functions, no honest variable's. Not in a module with a star import (a binding of the
    name drops the star's alias, yet other functions still read the star's), nor where `self` may
    be something else (_self_is_instance)."""
    if isinstance(node, ast.Attribute):
        return _self_attr(node) == "profiler" and _self_is_instance(mod)
    return isinstance(node, ast.Name) and node.id == "profiler" and node.id not in mod.aliases and not mod.star_import


# What hands a method another self: its class (`x.__class__.m`), its function (`self.m.__func__`),
# a binding to another object (`f.__get__(obj)`, types.MethodType).
_REBINDS_SELF = frozenset({"__class__", "__func__", "__get__", "MethodType"})


def _self_is_instance(mod: _Module) -> bool:
    """Whether every `self` in the module is a method's first parameter, never assigned, and no
    method can be called with another self: the module never names one of its classes but to make an
    instance or in super(C, self), nor takes an object's class (`type(x)`, `x.__class__`).
    Otherwise `def probe(self): return self.profiler` is torch's once called as
    `ModelNew.probe(torch.autograd)` (red-team round 10). Asked once a module."""
    if mod.self_instance is None:
        mod.self_instance = mod.tree is not None and _no_other_self(mod)
    return mod.self_instance


def _no_other_self(mod: _Module) -> bool:
    for node in ast.walk(mod.tree):
        if isinstance(node, ast.Name) and node.id == "self" and not isinstance(node.ctx, ast.Load):
            return False
        if (isinstance(node, ast.Attribute) and node.attr in _REBINDS_SELF) or \
                (isinstance(node, ast.Name) and node.id in mod.type_names | mod.class_names | {"MethodType"}):
            return False
        if isinstance(node, ast.Name) and node.id in mod.classes:
            parent = _parent(node, mod)
            made = isinstance(parent, ast.Call) and parent.func is node
            in_super = isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) \
                and parent.func.id == "super" and parent.args[:1] == [node]
            if not (made or in_super):
                return False
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            a = node.args
            named = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)] + \
                [x.arg for x in (a.vararg, a.kwarg) if x is not None]
            first = (a.posonlyargs + a.args)[:1]
            if "self" in named and not (first and first[0].arg == "self" and not isinstance(node, ast.Lambda)
                                        and isinstance(_parent(node, mod), ast.ClassDef)):
                return False
    return True


def _parent(node: ast.AST, mod: _Module) -> ast.AST | None:
    if mod.tree is None:
        return None
    if mod.parents is None:
        mod.parents = {id(c): n for n in ast.walk(mod.tree) for c in ast.iter_child_nodes(n)}
    return mod.parents.get(id(node))


def _ctypes_memory_as_value(node: ast.AST, mod: _Module) -> str | None:
    """ctypes' cast, memmove or memset named other than as the function of a call or a module-level
    `X = ctypes.cast` (an alias _collect reads through): kept in a local name, a default argument, a
    container, functools.partial. Their calls are judged by what they read (_cast_read, a tensor's
    data_ptr()); a copy of the function hides that (red-team round 9: `c = ctypes.cast` in forward,
    `def f(x, c=ctypes.memmove)`). What it names."""
    if not (isinstance(node, ast.Name | ast.Attribute) and isinstance(node.ctx, ast.Load)):
        return None
    origin = _dotted(node, mod.aliases) or ""
    if origin not in _CTYPES_MEMORY | {_CTYPES_CAST}:
        return None
    parent = _parent(node, mod)
    if isinstance(parent, ast.Call) and parent.func is node:
        return None
    if isinstance(parent, ast.Assign) and parent.value is node and parent in (mod.tree.body if mod.tree else []) \
            and all(isinstance(t, ast.Name) for t in parent.targets):
        return None  # the module-level alias: its calls are read through it
    return origin


def _lookup_as_value(node: ast.AST, mod: _Module) -> str | None:
    """A lookup by name used other than as _NamedLookups reads it: getattr (or inspect.getattr_static,
    operator.attrgetter, operator.methodcaller, an object's __getattribute__) passed, stored in a
    container or an attribute, unpacked or wrapped (functools.partial), rather than called or aliased
    by a plain `G = getattr`; or a getter (attrgetter("n"), methodcaller("n")) kept to call later. The
    name such a lookup takes is out of the reading's sight (a review, 2026-12-06: `G, = (getattr,)`,
    `functools.partial(getattr, x)`, `ag = attrgetter("tolist")` then `ag(x)`). What it names."""
    parent = _parent(node, mod)
    if isinstance(node, ast.Name | ast.Attribute):
        origin = _dotted(node, mod.aliases) or ""
        dunder = isinstance(node, ast.Attribute) and node.attr == "__getattribute__"
        if origin not in _LOOKUPS and not dunder:
            return None
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            return None
        if isinstance(parent, ast.Call) and parent.func is node:
            if any(isinstance(a, ast.Starred) for a in parent.args) or any(k.arg is None for k in parent.keywords):
                return f"{origin or node.attr} with unpacked arguments"  # getattr(*(x, "tolist"))
            return None
        if not dunder and isinstance(parent, ast.Assign) and parent.value is node \
                and all(isinstance(t, ast.Name) for t in parent.targets):
            return None  # a plain alias of getattr: its calls are read through it
        if isinstance(parent, ast.Attribute):
            return None  # getattr.__name__, or the head of a dotted name
        return origin or node.attr
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name | ast.Attribute) \
            and (_dotted(node.func, mod.aliases) or "") in _ATTRGETTER | _METHODCALLER \
            and not (isinstance(parent, ast.Call) and parent.func is node):
        return f"{_dotted(node.func, mod.aliases)}(...) kept"
    return None


def _class_of(node: ast.AST, type_names: frozenset[str] | set[str] = frozenset({"type"})) -> bool:
    """`type(x)` or `x.__class__` (under any name bound only to `type`): an object's class, found from
    the object; not the module's own (type(self), self.__class__, cls), which honest code builds anew."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in type_names \
            and len(node.args) == 1 and not node.keywords:
        of = node.args[0]
    elif isinstance(node, ast.Attribute) and node.attr == "__class__":
        of = node.value
    else:
        return False
    return not (isinstance(of, ast.Name) and of.id in ("self", "cls"))


def _class_of_called(f: ast.AST, mod: _Module) -> bool:
    """A call of an object's class (`type(x)(...)`, `x.__class__(...)`, or a name bound to either).
    Through ctypes that makes a function pointer of a library handle's class at any address (red-team
    round 7 left it open: Linux raises no audit event for the foreign call itself)."""
    return _class_of(f, mod.type_names) or (isinstance(f, ast.Name) and f.id in mod.class_names)


def _foreign_new(f: ast.AST, mod: _Module) -> bool:
    """`K.__new__(...)` where K is not a class of the module's own, `cls` or super(): the constructor
    of any class (a foreign function pointer's, found from a handle) called around `K(...)`, which
    _class_of_called reads (red-team round 9: `_K.__new__(_K, address)`)."""
    if not (isinstance(f, ast.Attribute) and f.attr == "__new__"):
        return False
    of = f.value
    if isinstance(of, ast.Name) and (of.id in ("cls", "self") or of.id in mod.classes):
        return False
    return not (isinstance(of, ast.Call) and isinstance(of.func, ast.Name) and of.func.id == "super")


def _check_escape(node: ast.AST, mod: _Module, add: Add) -> None:
    if isinstance(node, ast.Import | ast.ImportFrom):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        for n in names:
            top = n.split(".")[0]
            if top in _ESCAPE_MODULES:
                code, why = _ESCAPE_MODULES[top]
                add(code, f"imports {n}: {why}, which a candidate may not", node)
        return
    if (what := _lookup_as_value(node, mod)) is not None:
        add("dynamic-code", f"uses {what} as a value (stored, passed, unpacked or wrapped): a lookup by a name "
            "the reading cannot follow", node)
    if (what := _ctypes_memory_as_value(node, mod)) is not None:
        add("host-read", f"uses {what} as a value (stored, passed or wrapped, not called where it is written): "
            "Python reading or writing memory by address, which the reading cannot follow", node)
    if isinstance(node, ast.Call) and (_dotted(node.func, mod.aliases) or "") in _CTYPES_MEMORY | {_CTYPES_CAST}:
        origin = _dotted(node.func, mod.aliases) or ""
        if origin == _CTYPES_CAST and _cast_read(node, mod):
            add("host-read", f"reads memory through {origin}(...) in Python: the values by their address", node)
        if origin == _CTYPES_CAST and len(node.args) >= 2 and not _data_pointer_type(node.args[1], mod):
            add("hidden-dispatch", f"{origin}(...) to {ast.unparse(node.args[1])[:40]}, a type the reading cannot tell "
                "is a data pointer: a function pointer at an address (type(handle.symbol), say)", node)
        elif origin in _CTYPES_MEMORY and any(isinstance(a, ast.Attribute) and a.attr == "data_ptr"
                                              for arg in node.args for a in ast.walk(arg)):
            add("host-read", f"uses {origin} at a tensor's address: its bytes copied or set by Python", node)
    if isinstance(node, ast.Attribute):
        origin = _dotted(node, mod.aliases) or ""
        if node.attr in _MEMORY_READS:
            add("host-read", f"uses {node.attr}: Python reading memory (a tensor's, by its address) to compute on "
                "the host", node)
        if origin.startswith(("ctypes.cdll.", "ctypes.pydll.")) and node.attr not in _LIB_LOADERS:
            add("sandbox-library", f"uses {origin}: loads a library other than the candidate's own build", node)
        elif origin == "ctypes.pythonapi":
            add("sandbox-library", "uses ctypes.pythonapi: reaches the interpreter's internals", node)
        return
    if not isinstance(node, ast.Call):
        return
    uses_ctypes = any(v.split(".")[0] == "ctypes" for v in mod.aliases.values())
    if uses_ctypes and _foreign_new(node.func, mod):
        add("hidden-dispatch", "calls __new__ of a class the module did not define, in a module using ctypes "
            "(K.__new__(K, addr)): a foreign function's class made at an address", node)
    if uses_ctypes and _class_of_called(node.func, mod):
        add("hidden-dispatch", "calls an object's own class (type(f)(...), f.__class__(...)) in a module using ctypes: "
            "a foreign function's class made at an address, which no name in the source shows", node)
    origin = _dotted(node.func, mod.aliases) or ""
    parts = origin.split(".")
    if origin.startswith(_OS_PROCESS):
        add("sandbox-process", f"calls {origin}: starts a process", node)
    elif origin in _OS_SIGNAL:
        add("sandbox-signal", f"calls {origin}: signals another process", node)
    elif parts[0] == "ctypes" and parts[-1] in _LIB_LOADERS and not _own_library(node.args):
        what = ast.unparse(node.args[0]) if node.args else "the program itself"
        add("sandbox-library", f"calls {origin}({what}): loads a library other than the candidate's own build", node)
    elif origin in {"open", "io.open", "os.open", "builtins.open"} and node.args:
        where = _outside_path(node.args[0], mod)
        mode = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "mode"), None)
        if where and (location.writing_mode(mode) or origin == "os.open"):
            add("sandbox-write", f"opens {where} for writing: outside its own run folder", node)
        elif where and any(k in where for k in ("~", "HOME", "expanduser", "home()")):
            add("sandbox-read", f"opens {where}: a file in the user's home", node)
    elif origin in _OS_FILE and node.args and (where := _outside_path(node.args[0], mod)):
        add("sandbox-write", f"calls {origin}({where}): changes files outside its own run folder", node)
    elif isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Call):
        # Path("/x").write_text(...), Path.home().joinpath(...).open("w")
        inner = node.func.value
        inner_origin = _dotted(inner.func, mod.aliases) or ""
        if inner_origin.endswith("Path") and inner.args and (where := _outside_path(inner.args[0], mod)):
            attr = node.func.attr
            if attr in _PATH_WRITES or (attr == "open" and node.args and location.writing_mode(node.args[0])):
                add("sandbox-write", f"{attr} on {where}: outside its own run folder", node)
