"""A candidate's questions about where it lies and what lies beside it.

A module learns where it runs from its own path (`__file__`, `__spec__`) and from the files it can
see: under the Verifier it sits in a run folder (the request, the logs, a sandbox's view of the
disk), in the user's project among their files. Either is enough to do the work only under checks
(`if os.path.exists("request.json")`, `"tmp" in __file__`, `os.path.isdir(".git")`), and the
environment probes' lists of modules and names (probes.py) cannot see them: `os.path.exists` and
`Path(__file__)` are what any module that loads its own kernels uses. So these rules are about what
is asked, not with which function:

- files: whether a path exists, what kind or size it is, and what it holds may be asked only of
  the candidate's own files, named by constants from its own module's folder
  (`os.path.join(os.path.dirname(__file__), "kernels.cu")`, `Path(__file__).with_name(...)`).
  A relative name (read from wherever the process was started), an absolute one, or one built at
  run time is a probe;
- location: a value made from the module's own path may build paths, name a library, a build or a
  message, but nothing may test it: no comparison, branch, length, hash, index or lookup of it.

Both are followed through assignments, function parameters, attributes of `self` and return
values (by name: a name that holds the module's path anywhere in a scope holds it everywhere in
it). StitchCUDA's own kernel loader, copied verbatim into generated modules, is passed over by the
caller (its `prebuilt.exists()` asks about the library it ships beside the module)."""

from __future__ import annotations

import ast
import itertools
from collections.abc import Callable, Iterable

# Names and attributes that hold where a module was loaded from, or under which name (the Verifier
# imports a candidate under a name of its own choosing; the user's project, under another).
SOURCES = frozenset({"__file__", "__spec__", "__loader__", "__cached__", "__path__", "__name__", "__module__",
                     "co_filename"})
# Calls whose result is a path (or its text) made from their path arguments.
PATH_FUNCS = frozenset({
    "os.path.join", "os.path.dirname", "os.path.abspath", "os.path.realpath", "os.path.normpath",
    "os.path.basename", "os.path.split", "os.path.splitext", "os.path.relpath", "os.fspath", "os.fsencode",
    "os.fsdecode", "str", "bytes", "pathlib.Path", "pathlib.PurePath", "pathlib.PosixPath",
    "pathlib.PurePosixPath", "Path", "PurePath",
})
# Path methods and attributes that make another path of it.
PATH_METHODS = frozenset({"parent", "with_name", "with_suffix", "with_stem", "joinpath", "resolve", "absolute",
                          "as_posix", "__fspath__", "encode", "decode", "name", "stem", "suffix", "format"})
# Questions about a file: what it holds, whether it exists, its kind, size or times.
FILE_FUNCS = frozenset({
    "os.path.exists", "os.path.lexists", "os.path.isfile", "os.path.isdir", "os.path.islink", "os.path.ismount",
    "os.path.getsize", "os.path.getmtime", "os.path.getctime", "os.path.getatime", "os.path.samefile",
    "open", "io.open", "builtins.open", "torch.load", "numpy.load", "numpy.fromfile", "numpy.loadtxt",
    "json.load", "pickle.load",
})
FILE_METHODS = frozenset({"exists", "is_file", "is_dir", "is_symlink", "is_mount", "stat", "lstat", "read_text",
                          "read_bytes", "open", "samefile", "owner", "group"})
# Where a path may go without anything testing it: builds, loads, folders made, messages.
CONSUMERS = frozenset({
    "os.makedirs", "sys.path.append", "sys.path.insert", "torch.utils.cpp_extension.load",
    "torch.utils.cpp_extension.load_inline", "ctypes.CDLL", "ctypes.cdll.LoadLibrary", "ctypes.PyDLL",
    "importlib.util.spec_from_file_location", "importlib.util.module_from_spec", "print", "warnings.warn",
    "hashlib.sha256", "hashlib.sha1", "hashlib.md5", "hashlib.blake2b",
})
# A logger's methods: a message out, nothing read back.
_LOGS = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical", "log", "setLevel",
                   "addHandler", "propagate"})
# Calls whose result is an object's text (its module's name, its file's path).
_TEXT_OF = frozenset({"repr", "torch.typename", "reprlib.repr", "pprint.pformat"})
# Calls whose result is no text of their argument: a file's contents, a count of its elements is
# still made of it (len is a sink, _location_passed's).
_BREAKS = frozenset({"isinstance", "issubclass", "callable", "id", "type"})
# Calls that load a library (the extension loaders static_check knows compiled code by, and the
# generated loader's and ctypes' own), and its attributes that say where it was built.
EXTENSION_LOADERS = ("cpp_extension.load_inline", "cpp_extension.load", "runtime.load")
_LOADERS = (*EXTENSION_LOADERS, "load_kernels", "KernelLibrary", "ctypes.CDLL", "ctypes.cdll.LoadLibrary")
_LIBRARY_PLACES = frozenset({"path", "_name", "__file__", "name"})
# Writes to a path: the sandbox checks' business (static_check), not a question.
_WRITES = frozenset({"write_text", "write_bytes", "touch", "mkdir", "symlink_to", "chmod"})
# Calls whose result is what a file holds, not where it is: a path goes in, no path comes out.
_CONTENT = frozenset({"read_text", "read_bytes", "read"})

# Libraries of operations looked up by a computed name (getattr(F, self.act)): where torch lies says
# nothing of where the candidate lies. cpp_extension, whose build folder can, is not among them.
_OP_NAMESPACES = frozenset({"torch", "torch.nn", "torch.nn.functional", "torch.special", "torch.linalg", "torch.fft",
                            "torch.nn.init", "torch.Tensor", "math", "operator"})

Dotted = Callable[[ast.AST], "str | None"]


def _lead(text: str) -> bool:
    """Whether a name that begins with this written text may be a dunder."""
    return text[:2] in ("__", "_") if len(text) < 2 else text.startswith("__")


def fold(name: ast.AST) -> str | None:
    """A name made only of written strings ("__imp" + "ort__", "".join(["re", "lu"]), f"{'_'}C"),
    as the text it is; None where any part is not written out."""
    if isinstance(name, ast.Constant):
        return name.value if isinstance(name.value, str) else None
    if isinstance(name, ast.BinOp) and isinstance(name.op, ast.Add):
        left, right = fold(name.left), fold(name.right)
        return None if left is None or right is None else left + right
    if isinstance(name, ast.JoinedStr):
        parts = [fold(v.value if isinstance(v, ast.FormattedValue) and v.conversion == -1 and v.format_spec is None
                      else v) for v in name.values]
        return None if any(p is None for p in parts) else "".join(p for p in parts if p is not None)
    if isinstance(name, ast.Call) and isinstance(name.func, ast.Attribute) and name.func.attr == "join" and \
            len(name.args) == 1 and not name.keywords and isinstance(name.args[0], ast.List | ast.Tuple):
        sep, parts = fold(name.func.value), [fold(e) for e in name.args[0].elts]
        return None if sep is None or any(p is None for p in parts) else sep.join(p for p in parts if p is not None)
    return None


def may_be_dunder(name: ast.AST) -> bool:
    """Whether an attribute name may be a dunder (__file__, __module__, ...): one written out, or
    made only of written strings, that is one, or a computed name whose written beginning does not
    rule it out. f"weight_ih_l{layer}", "bias_" + k and "w{}".format(i) cannot be one."""
    if (text := fold(name)) is not None:
        return text.startswith("__")
    if isinstance(name, ast.JoinedStr):
        head = name.values[0] if name.values else None
        return not (isinstance(head, ast.Constant) and head.value) or _lead(str(head.value))
    if isinstance(name, ast.BinOp) and isinstance(name.op, ast.Add):
        return may_be_dunder_text(name.left)
    if isinstance(name, ast.BinOp) and isinstance(name.op, ast.Mod) and isinstance(name.left, ast.Constant):
        return _lead(str(name.left.value).split("%", 1)[0]) or not str(name.left.value).split("%", 1)[0]
    if isinstance(name, ast.Call) and isinstance(name.func, ast.Attribute) and name.func.attr == "format" and \
            isinstance(name.func.value, ast.Constant):
        head = str(name.func.value.value).split("{", 1)[0]
        return not head or _lead(head)
    return True


def may_be_dunder_text(left: ast.AST) -> bool:
    """may_be_dunder for the left side of a +: a constant there is a beginning, not the whole name."""
    if isinstance(left, ast.Constant):
        return not str(left.value) or _lead(str(left.value))
    return may_be_dunder(left)


def _scopes(tree: ast.Module) -> tuple[dict[int, ast.AST], dict[int, ast.AST]]:
    """Each node's parent, and each node's scope (its closest enclosing function, or the module)."""
    parents: dict[int, ast.AST] = {}
    scope: dict[int, ast.AST] = {}

    def visit(node: ast.AST, current: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
            scope[id(child)] = current
            visit(child, child if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) else current)

    scope[id(tree)] = tree
    visit(tree, tree)
    return parents, scope


class _Flow:
    """Which names, attributes of self and functions' results hold the module's own path."""

    def __init__(self, tree: ast.Module, dotted: Dotted, own: frozenset[str] | None = None):
        self.tree, self.dotted = tree, dotted
        # Modules of the candidate's own (their __name__ is the name the importer chose): the first
        # part of each of its Python files (None: any module it imports may be one).
        self.own_modules = None if own is None else frozenset(
            f.split("/")[0].removesuffix(".py") for f in own if f.endswith(".py"))
        self.imports: dict[str, str] = {}  # a name an import binds -> the module it names
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.imports[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom):
                for a in node.names:
                    self.imports[a.asname or a.name] = "." * node.level + (node.module or "") + "." + a.name
        self.parents, self.scope = _scopes(tree)
        self.functions = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
        self.classes = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
        self.local: dict[int, set[str]] = {}  # scope -> names bound there
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                self.local.setdefault(id(self.scope[id(node)]), set()).add(node.id)
            elif isinstance(node, ast.arg):
                self.local.setdefault(id(self.scope[id(node)]), set()).add(node.arg)
        # Names bound to a loaded library (runtime.load, cpp_extension.load, the generated loader):
        # its path is where the build went (the Verifier's cache, or beside the user's module).
        self.libraries: set[tuple[int, str]] = set()
        self.library_attrs: set[str] = set()  # self.lib = runtime.load(...)
        makers = {fn.name for fn in self.functions.values() for r in ast.walk(fn) if isinstance(r, ast.Return)
                  and isinstance(r.value, ast.Call) and (self.dotted(r.value.func) or "").endswith(_LOADERS)}
        for _ in range(3):  # aliases of aliases
            for node in ast.walk(tree):
                if not isinstance(node, ast.Assign):
                    continue
                v = node.value
                loaded = (isinstance(v, ast.Call) and ((self.dotted(v.func) or "").endswith(_LOADERS) or (
                    isinstance(v.func, ast.Name) and v.func.id in makers))) or self._library(v)
                if loaded:
                    for t in node.targets:
                        if isinstance(t, ast.Name):
                            self.libraries.add(self._key(t))
                        elif isinstance(t, ast.Attribute) and self._self(t):
                            self.library_attrs.add(t.attr)
        self.names: set[tuple[int, str]] = set()  # (scope, name)
        self.attrs: set[str] = set()  # self.<attr>
        self.returns: set[str] = set()  # functions whose result holds it
        self._settle()

    def _key(self, node: ast.Name) -> tuple[int, str]:
        sc = self.scope[id(node)]
        while not isinstance(sc, ast.Module) and node.id not in self.local.get(id(sc), set()):
            sc = self.scope.get(id(sc), self.tree)
        return id(sc), node.id

    def holds(self, node: ast.AST) -> bool:
        """Whether an expression's value is made from the module's own path."""
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "__dict__":
            return True  # C.__dict__["__module__"]: a name looked up past this reading
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" and \
                len(node.args) >= 2 and (self.dotted(node.args[0]) or "") not in _OP_NAMESPACES and \
                not (self.dotted(node.args[0]) or "").startswith("torch.ops") and may_be_dunder(node.args[1]):
            return True  # getattr(C, "__mod" + "ule__"): a dunder or a name that may be one
        if isinstance(node, ast.Name):
            return node.id in SOURCES or self._key(node) in self.names
        if isinstance(node, ast.Attribute):
            if (node.attr in SOURCES and (node.attr != "__name__" or self._own_module(node.value))) or (
                    self._owner(node) and node.attr in self.attrs):
                return True  # (a class's or a function's __name__ is what its source says: type(m).__name__)
            if node.attr in _LIBRARY_PLACES and self._library(node.value):
                return True
            return self.holds(node.value)  # __spec__.origin, here.parent, path.parts: made of it
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute):
                if f.attr in _CONTENT or f.attr in FILE_METHODS:
                    return False
                if self._self(f) and f.attr in self.returns:
                    return True
                if self.holds(f.value) and f.attr in PATH_METHODS | {"hexdigest", "digest"}:
                    return True
            if isinstance(f, ast.Attribute) and f.attr in ("join", "format") and any(self.holds(a) for a in
                                                                                     self._args(node)):
                return True  # "/".join([here, name]), "{}/k.cu".format(here)
            origin = self.dotted(f) or ""
            if isinstance(f, ast.Name) and f.id in self.returns:
                return True
            if origin in _TEXT_OF or (isinstance(f, ast.Name) and f.id in ("str", "format") and node.args
                                      and _names_an_object(node.args[0], self)):
                return True  # repr(type(self)), torch.typename(self), str(_lib._lib): a module's name or path
            if origin in FILE_FUNCS - {"open", "io.open", "builtins.open"} or origin in _BREAKS or \
                    origin.endswith(_LOADERS):
                return False  # what a file holds, a question's answer, a library (its places are _LIBRARY_PLACES)
            if isinstance(f, ast.Name) and f.id in self.functions:
                return False  # followed into: its parameters hold it, its returns are judged (self.returns)
            if isinstance(f, ast.Name) and self._key(f) in self.names:
                return True  # a lambda or partial made of it, called
            if origin.startswith("torch.library.") or (origin in ("hasattr", "getattr") and node.args and (
                    self.dotted(node.args[0]) or "").startswith("torch.ops")):
                return False  # an op of its own, named after a digest of its sources (the generated _define_op)
            # Anything else made from it holds it: exceptions, loggers, containers, conversions
            # (a review, 2026-12-05: an allow-list of path functions missed most of them).
            return any(self.holds(a) for a in self._args(node)) or (
                isinstance(f, ast.Attribute) and self.holds(f.value)) or (
                not isinstance(f, ast.Name | ast.Attribute) and self.holds(f))  # getattr(m, name)(...)
        if isinstance(node, ast.BinOp):
            return self.holds(node.left) or self.holds(node.right)
        if isinstance(node, ast.JoinedStr):
            return any(self.holds(v.value) for v in node.values if isinstance(v, ast.FormattedValue))
        if isinstance(node, ast.Subscript):
            return self.holds(node.value)
        if isinstance(node, ast.List | ast.Tuple | ast.Set | ast.Starred):
            elts = node.elts if not isinstance(node, ast.Starred) else [node.value]
            return any(self.holds(e) for e in elts)
        if isinstance(node, ast.IfExp):
            return self.holds(node.body) or self.holds(node.orelse)
        if isinstance(node, ast.NamedExpr):
            return self.holds(node.value)
        if isinstance(node, ast.Dict):
            return any(self.holds(v) for v in [*node.values, *(k for k in node.keys if k is not None)])
        if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            parts = [g.iter for g in node.generators] + (
                [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt])
            return any(self.holds(p) for p in parts)
        if isinstance(node, ast.Lambda):
            return self.holds(node.body)
        if isinstance(node, ast.UnaryOp | ast.Await):
            return self.holds(node.operand if isinstance(node, ast.UnaryOp) else node.value)
        if isinstance(node, ast.Compare | ast.BoolOp):
            return False  # a test's result: the test itself is the finding
        return False

    def _own_module(self, node: ast.AST) -> bool:
        """Whether `node.__name__` may be a module's name that its importer chose: a module of the
        candidate's own, imported (its own module itself is reached only through probes: sys.modules,
        inspect, __globals__)."""
        if not (isinstance(node, ast.Name) and node.id in self.imports):
            return False
        module = self.imports[node.id]
        return module.startswith(".") or self.own_modules is None or \
            module.lstrip(".").split(".")[0] in self.own_modules

    def _library(self, node: ast.AST) -> bool:
        """A loaded library, or an attribute of one (`_lib._lib`: its ctypes handle; `self.lib`)."""
        while isinstance(node, ast.Attribute):
            if self._self(node) and node.attr in getattr(self, "library_attrs", ()):
                return True
            node = node.value
        return isinstance(node, ast.Name) and self._key(node) in getattr(self, "libraries", ())

    def _holder(self, node: ast.AST) -> ast.AST | None:
        """The statement list's owner a node sits in: its closest enclosing class or function."""
        up = self.parents.get(id(node))
        while up is not None and not isinstance(up, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            up = self.parents.get(id(up))
        return up

    def _owner(self, node: ast.Attribute) -> bool:
        """self.x, cls.x, or C.x of a class of the module: attributes an instance shares."""
        return self._self(node) or (isinstance(node.value, ast.Name) and node.value.id in self.classes)

    @staticmethod
    def _self(node: ast.Attribute) -> bool:
        return isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")

    @staticmethod
    def _args(call: ast.Call) -> list[ast.expr]:
        return [*call.args, *(k.value for k in call.keywords)]

    def _bind(self, target: ast.AST) -> bool:
        grew = False
        if isinstance(target, ast.Name):
            key = self._key(target)
            grew = key not in self.names
            self.names.add(key)
            if isinstance(self._holder(target), ast.ClassDef):  # a class attribute: read as self.x or C.x
                grew |= target.id not in self.attrs
                self.attrs.add(target.id)
        elif isinstance(target, ast.Attribute) and self._owner(target):
            grew = target.attr not in self.attrs
            self.attrs.add(target.attr)
        elif isinstance(target, ast.Subscript):
            grew |= self._bind(target.value)  # d[k] = here: the container holds it now
        elif isinstance(target, ast.Tuple | ast.List | ast.Starred):
            for t in target.elts if not isinstance(target, ast.Starred) else [target.value]:
                grew |= self._bind(t)
        return grew

    def _params(self, fn: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call, skip_self: bool) -> bool:
        params = [*fn.args.posonlyargs, *fn.args.args][1 if skip_self else 0:]
        grew = False
        for param, arg in zip(params, call.args, strict=False):
            if self.holds(arg):
                key = (id(fn), param.arg)
                grew |= key not in self.names
                self.names.add(key)
        by_name = {p.arg: p for p in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]}
        for kw in call.keywords:
            if kw.arg in by_name and self.holds(kw.value):
                key = (id(fn), kw.arg)
                grew |= key not in self.names
                self.names.add(key)
        extra = [*call.args[len(params):], *(k.value for k in call.keywords if k.arg not in by_name)]
        for rest in (fn.args.vararg, fn.args.kwarg):  # *args, **kw: what lands there holds it
            if rest is not None and any(self.holds(a) for a in extra) and (id(fn), rest.arg) not in self.names:
                self.names.add((id(fn), rest.arg))
                grew = True
        return grew

    def _settle(self) -> None:
        grew = True
        while grew:
            grew = False
            for node in ast.walk(self.tree):
                if isinstance(node, ast.Assign) and self.holds(node.value):
                    for t in node.targets:
                        grew |= self._bind(t)
                elif isinstance(node, ast.AnnAssign | ast.AugAssign | ast.NamedExpr) and node.value is not None \
                        and self.holds(node.value):
                    grew |= self._bind(node.target)
                elif isinstance(node, ast.For | ast.comprehension) and self.holds(node.iter):
                    grew |= self._bind(node.target)
                    # What the loop's body stores depends on it too (`for c in here: n += 1`: n is its length).
                    for sub in (ast.walk(b) for b in getattr(node, "body", [])):
                        for st in sub:
                            if isinstance(st, ast.Assign | ast.AugAssign | ast.AnnAssign):
                                for t in (st.targets if isinstance(st, ast.Assign) else [st.target]):
                                    grew |= self._bind(t)
                elif isinstance(node, ast.Yield | ast.YieldFrom) and node.value is not None and self.holds(node.value):
                    fn = self.scope[id(node)]
                    if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) and fn.name not in self.returns:
                        self.returns.add(fn.name)
                        grew = True
                elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                    # a default made from it: `def forward(self, x, _p=__file__)`
                    a = node.args
                    positional = [*a.posonlyargs, *a.args]
                    pairs = [*zip(positional[len(positional) - len(a.defaults):], a.defaults, strict=True),
                             *((k, d) for k, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None)]
                    for param, default in pairs:
                        if self.holds(default) and (id(node), param.arg) not in self.names:
                            self.names.add((id(node), param.arg))
                            grew = True
                elif isinstance(node, ast.withitem) and node.optional_vars is not None \
                        and self.holds(node.context_expr):
                    grew |= self._bind(node.optional_vars)
                elif isinstance(node, ast.Return) and node.value is not None and self.holds(node.value):
                    fn = self.scope[id(node)]
                    if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) and fn.name not in self.returns:
                        self.returns.add(fn.name)
                        grew = True
                elif isinstance(node, ast.Call):
                    grew |= self._into_calls(node)
                elif isinstance(node, ast.Try):
                    # An error raised by what holds it, or by its library, carries it (a ctypes
                    # lookup's message names the library's path).
                    if any(self.holds(n) or self._library(n) for b in node.body for n in ast.walk(b)):
                        for h in node.handlers:
                            if h.name and (id(self.scope[id(h)]), h.name) not in self.names:
                                self.names.add((id(self.scope[id(h)]), h.name))
                                grew = True

    def _into_calls(self, call: ast.Call) -> bool:
        f = call.func
        grew = False
        if isinstance(f, ast.Attribute) and f.attr in ("update", "append", "extend", "insert", "add", "write") and \
                any(self.holds(a) for a in self._args(call)):
            grew |= self._bind(f.value)  # a hash fed, a list grown, a buffer written: they hold it now
        out = next((k.value for k in call.keywords if k.arg == "file"), None)
        if isinstance(f, ast.Name) and f.id == "print" and out is not None and any(self.holds(a) for a in call.args):
            grew |= self._bind(out)  # print(here, file=buf): the buffer holds it
        if isinstance(f, ast.Name) and f.id in self.functions:
            grew |= self._params(self.functions[f.id], call, skip_self=False)
        elif isinstance(f, ast.Name) and f.id in self.classes:
            init = next((n for n in self.classes[f.id].body if isinstance(n, ast.FunctionDef) and n.name == "__init__"),
                        None)
            if init is not None:
                grew |= self._params(init, call, skip_self=True)
        elif isinstance(f, ast.Attribute) and self._self(f):
            for fn in self.functions.values():
                if fn.name == f.attr:
                    grew |= self._params(fn, call, skip_self=True)
        return grew


class _Place:
    """Whether a path names the candidate's own files: constants from its own module's folder."""

    def __init__(self, flow: _Flow, own: frozenset[str] | None):
        self.flow, self.own = flow, own

    def kind(self, node: ast.AST, depth: int = 0) -> str | None:
        """"file" (the module itself), "dir" (its folder), "own" (a file of the candidate's), or None."""
        if depth > 8:
            return None
        dotted = self.flow.dotted
        if isinstance(node, ast.Name):
            if node.id == "__file__":
                return "file"
            values = self._assigned(node)
            kinds = {self.kind(v, depth + 1) for v in values}
            return kinds.pop() if len(kinds) == 1 else None
        if isinstance(node, ast.Attribute):
            if node.attr == "parent" and self.kind(node.value, depth + 1) in ("file", "own"):
                return "dir"
            return None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            return self._join(self.kind(node.left, depth + 1), [node.right])
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            # here + "/kernels.cu", here + os.sep + "kernels.cu"
            left, right = node.left, node.right
            if isinstance(left, ast.BinOp) and isinstance(left.op, ast.Add) and dotted(left.right) == "os.sep":
                left = left.left
                right = ast.Constant("/" + right.value) if isinstance(right, ast.Constant) \
                    and isinstance(right.value, str) else right
            if isinstance(right, ast.Constant) and isinstance(right.value, str) and right.value.startswith("/"):
                return self._join(self.kind(left, depth + 1), [ast.Constant(right.value[1:])])
            return None
        if isinstance(node, ast.JoinedStr) and len(node.values) == 2 and isinstance(node.values[0], ast.FormattedValue) \
                and isinstance(node.values[1], ast.Constant) and str(node.values[1].value).startswith("/"):
            return self._join(self.kind(node.values[0].value, depth + 1), [ast.Constant(node.values[1].value[1:])])
        if not isinstance(node, ast.Call):
            return None
        f = node.func
        origin = dotted(f) or ""
        if isinstance(f, ast.Attribute):
            base = self.kind(f.value, depth + 1)
            if f.attr in ("resolve", "absolute", "as_posix", "__fspath__"):
                return base
            if f.attr == "joinpath":
                return self._join(base, node.args)
            if f.attr == "with_name" and base in ("file", "own") and len(node.args) == 1:
                return self._join("dir", node.args)
        if origin in ("os.path.abspath", "os.path.realpath", "os.path.normpath", "str", "os.fspath") and \
                len(node.args) == 1:
            return self.kind(node.args[0], depth + 1)
        if origin == "os.path.dirname" and len(node.args) == 1 and self.kind(node.args[0], depth + 1) in ("file", "own"):
            return "dir"
        if origin == "os.path.join" and node.args:
            return self._join(self.kind(node.args[0], depth + 1), node.args[1:])
        if origin.endswith(("Path", "PurePath", "PosixPath", "PurePosixPath")) and node.args:
            return self._join(self.kind(node.args[0], depth + 1), node.args[1:])
        return None

    def _join(self, base: str | None, parts: Iterable[ast.AST]) -> str | None:
        parts = list(parts)
        if not parts:
            return base
        names = [self._texts(p) for p in parts]
        if base != "dir" or any(n is None for n in names):
            return None
        for combo in itertools.product(*names):  # every name each part can hold must be its own
            rel = "/".join(t.strip("/") for t in combo)
            if ".." in rel.split("/"):
                return None
            if not (self.own is None or rel in self.own or any(o.startswith(rel + "/") for o in self.own)):
                return None
        return "own"

    def _texts(self, node: ast.AST, depth: int = 0) -> list[str] | None:
        """The strings a path part can hold: a constant, or a name (a parameter included) every
        binding of which is one; None where any is not."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [node.value]
        if isinstance(node, ast.Name) and depth < 4:
            values = self._assigned(node)
            found = [self._texts(v, depth + 1) for v in values]
            if not values or any(f is None for f in found):
                return None
            return [t for f in found for t in f]  # type: ignore[union-attr]
        return None

    def _assigned(self, name: ast.Name) -> list[ast.AST]:
        key = self.flow._key(name)
        out: list[ast.AST] = []
        for node in ast.walk(self.flow.tree):
            if isinstance(node, ast.Assign):
                out += [node.value for t in node.targets if isinstance(t, ast.Name) and self.flow._key(t) == key]
            elif isinstance(node, ast.AnnAssign | ast.NamedExpr) and isinstance(node.target, ast.Name) \
                    and node.value is not None and self.flow._key(node.target) == key:
                out.append(node.value)
            elif isinstance(node, ast.arg) and (id(self.flow.scope[id(node)]), node.arg) == key:
                # A parameter: what every caller passes, where each call is in sight.
                values = self._passed(self.flow.scope[id(node)], node.arg)
                if values is None:
                    return []
                out += values
            elif isinstance(node, ast.AugAssign | ast.For | ast.comprehension | ast.withitem):
                target = getattr(node, "target", None) or getattr(node, "optional_vars", None)
                if isinstance(target, ast.Name) and self.flow._key(target) == key:
                    it = getattr(node, "iter", None)
                    if isinstance(it, ast.List | ast.Tuple | ast.Set) and it.elts and all(
                            isinstance(e, ast.Constant) for e in it.elts):
                        out += it.elts  # for name in ("kernels.cu", "k.cuh"): those names
                        continue
                    return []  # bound by a loop, a with or an augmented assignment: not a constant
        return out

    def _passed(self, fn: ast.AST, param: str) -> list[ast.AST] | None:
        """The expressions every call of `fn` passes for `param` (its default where a call leaves it
        out); None where a call passes it unpacked, none is in sight, or the function is handed on
        as a value (map(f, names) passes what no call site shows)."""
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            return None
        method = isinstance(self.flow.parents.get(id(fn)), ast.ClassDef)
        positional = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]][1 if method else 0:]
        defaults = dict(zip([a.arg for a in [*fn.args.posonlyargs, *fn.args.args]][::-1],
                            fn.args.defaults[::-1], strict=False))
        defaults |= {a.arg: d for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults, strict=True) if d is not None}
        values: list[ast.AST] = []
        calls = 0
        for node in ast.walk(self.flow.tree):
            named = (isinstance(node, ast.Name) and node.id == fn.name) or (
                isinstance(node, ast.Attribute) and node.attr == fn.name)
            if not named:
                continue
            call = self.flow.parents.get(id(node))
            if not (isinstance(call, ast.Call) and call.func is node):
                if isinstance(getattr(node, "ctx", None), ast.Load):
                    return None  # handed on as a value
                continue
            calls += 1
            if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
                return None
            kw = next((k.value for k in call.keywords if k.arg == param), None)
            if kw is not None:
                values.append(kw)
            elif param in positional and positional.index(param) < len(call.args):
                values.append(call.args[positional.index(param)])
            elif param in defaults:
                values.append(defaults[param])
            else:
                return None
        return values if calls else None


def location_probes(tree: ast.Module, dotted: Dotted, own: frozenset[str] | None = None,
                    skip: frozenset[int] | set[int] = frozenset()) -> list[tuple[str, ast.AST]]:
    """(what it asks, node) for each question of a parsed module about its place. `own`: the
    candidate's files, relative to its module's folder (None: any constant name there counts as
    one); `skip`: nodes not to judge (StitchCUDA's verbatim kernel loader)."""
    flow = _Flow(tree, dotted, own)
    place = _Place(flow, own)
    found: list[tuple[str, ast.AST]] = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Call):
            found += _file_question(node, flow, place)
            found += _location_passed(node, flow)
            found += _resolved_elsewhere(node, flow, place)
            found += _removal(node, flow, place)
        elif isinstance(node, ast.Compare):
            if _main_guard(node):
                continue
            if any(flow.holds(x) for x in [node.left, *node.comparators]):
                found.append((f"{ast.unparse(node)[:70]}: a comparison of its own path", node))
        elif isinstance(node, ast.If | ast.While | ast.IfExp | ast.Assert) and flow.holds(node.test) \
                and not _main_guard(node.test):
            found.append((f"{ast.unparse(node.test)[:70]}: a branch on its own path", node))
        elif isinstance(node, ast.BoolOp | ast.UnaryOp):
            operands = node.values if isinstance(node, ast.BoolOp) else [node.operand]
            if any(flow.holds(v) for v in operands):
                found.append((f"{ast.unparse(node)[:70]}: a test of its own path", node))
        elif isinstance(node, ast.Subscript) and flow.holds(node.slice):
            found.append((f"{ast.unparse(node)[:70]}: a lookup by its own path", node))
        elif isinstance(node, ast.Dict) and any(k is not None and flow.holds(k) for k in node.keys):
            found.append((f"{ast.unparse(node)[:70]}: its own path as a key", node))
    return found


def settling_guards(tree: ast.Module, dotted: Dotted) -> set[int]:
    """The nodes of each `if not os.path.exists(P): os.makedirs(P)` and `if P not in sys.path:
    sys.path.insert(0, P)`: a question whose every answer ends in the same state (P there), so
    nothing after it can tell the answers apart. Neither reading judges them (an honest module's
    commonest guards; a reading of the bare question flagged both)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.If) or node.orelse or not node.body:
            continue
        asked = _asked_missing(node.test, dotted)
        if asked is not None and all(_establishes(stmt, *asked, dotted) for stmt in node.body):
            out |= {id(n) for part in [node.test, *node.body] for n in ast.walk(part)}
    return out


def _asked_missing(test: ast.AST, dotted: Dotted) -> tuple[str, str] | None:
    """("dir", P) for `not os.path.exists(P)` / `not P.is_dir()`, ("path", P) for `P not in sys.path`;
    P as ast.dump, to match the body's."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and isinstance(test.operand, ast.Call):
        c = test.operand
        if (dotted(c.func) or "") in ("os.path.exists", "os.path.isdir") and len(c.args) == 1 and not c.keywords:
            return "dir", ast.dump(c.args[0])
        if isinstance(c.func, ast.Attribute) and c.func.attr in ("exists", "is_dir") and not c.args:
            return "dir", ast.dump(c.func.value)
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.NotIn) and \
            dotted(test.comparators[0]) == "sys.path":
        return "path", ast.dump(test.left)
    return None


def _establishes(stmt: ast.stmt, kind: str, target: str, dotted: Dotted) -> bool:
    """Whether a statement only makes the asked-for P be there."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    c, origin = stmt.value, dotted(stmt.value.func) or ""
    if kind == "dir":
        if origin in ("os.makedirs", "os.mkdir"):
            return bool(c.args) and ast.dump(c.args[0]) == target
        return isinstance(c.func, ast.Attribute) and c.func.attr == "mkdir" and ast.dump(c.func.value) == target
    if origin == "sys.path.insert":
        return len(c.args) == 2 and ast.dump(c.args[1]) == target
    return origin == "sys.path.append" and len(c.args) == 1 and ast.dump(c.args[0]) == target


def _main_guard(node: ast.AST) -> bool:
    """`__name__ == "__main__"`: true only where the file is run as a script, under the Verifier and
    in the user's project alike (both import it)."""
    if not (isinstance(node, ast.Compare) and len(node.comparators) == 1):
        return False
    sides = {ast.unparse(node.left), ast.unparse(node.comparators[0])}
    return sides == {"__name__", "'__main__'"}


def _file_question(call: ast.Call, flow: _Flow, place: _Place) -> list[tuple[str, ast.AST]]:
    f = call.func
    origin = flow.dotted(f) or ""
    if origin in FILE_FUNCS and call.args:
        if origin in ("open", "io.open", "builtins.open") and _writes(call):
            return []  # writes are the sandbox checks' (static_check: outside the run folder)
        target = call.args[0]
    elif isinstance(f, ast.Attribute) and f.attr in FILE_METHODS and origin.split(".")[0] not in ("os", "sys", "torch") \
            and (f.attr != "open" or not _writes(call, first=0)) and _path_like(f.value, flow, place):
        target = f.value
    else:
        return []
    kind = place.kind(target)
    asked = origin if origin in FILE_FUNCS else (f.attr if isinstance(f, ast.Attribute) else origin)
    if kind in ("file", "own") or (kind == "dir" and asked in ("os.path.exists", "os.path.isdir", "exists", "is_dir")):
        return []  # (of its folder only whether it is there: its size and times grow with what lies in it)
    what = f.attr if isinstance(f, ast.Attribute) and origin not in FILE_FUNCS else origin
    return [(f"{what}({ast.unparse(target)[:60]}): a question about a file not its own (only the candidate's own "
             "files, named from its module's folder, e.g. os.path.join(os.path.dirname(__file__), NAME), may be "
             "asked about or read)", call)]


_REMOVALS = frozenset({"unlink", "rmdir", "rename", "replace"})


def _removal(call: ast.Call, flow: _Flow, place: _Place) -> list[tuple[str, ast.AST]]:
    """A file of its own deleted or moved (`_lib.path.unlink()`, `Path(...).rename(...)`): a library
    gone from the run folder once loaded is not read by the native checks (native_symbols.py reads the
    folder's libraries after the worker), and an honest module never removes its own files. (os's
    removals are probes.py's: no kernel module needs them.)"""
    f = call.func
    if isinstance(f, ast.Attribute) and f.attr in _REMOVALS and _path_like(f.value, flow, place) and not (
            f.attr == "replace" and len(call.args) != 1):  # str.replace(old, new) is no Path.replace(target)
        return [(f"{ast.unparse(call)[:70]}: deletes or moves a file (a library removed once loaded is out of the "
                 "native checks' sight)", call)]
    return []


def _resolved_elsewhere(call: ast.Call, flow: _Flow, place: _Place) -> list[tuple[str, ast.AST]]:
    """`Path(".").absolute()`, `Path("x").resolve()`: a path not made from its own module's, made
    absolute against the folder the process was started from (os.path.abspath's and realpath's are
    probes.py's)."""
    f = call.func
    if not (isinstance(f, ast.Attribute) and f.attr in ("resolve", "absolute") and _path_like(f.value, flow, place)):
        return []
    if place.kind(f.value) is not None or flow.holds(f.value):
        return []
    return [(f"{ast.unparse(call)[:70]}: a path made absolute against the folder the process was started from", call)]


def _path_like(node: ast.AST, flow: _Flow, place: _Place) -> bool:
    """Whether `x.exists()`'s x is a path at all (a Path(...) call, or made from one): a tensor's or a
    dict's methods of the same names are not file questions."""
    if flow.holds(node) or place.kind(node) is not None:
        return True
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and (flow.dotted(sub.func) or "").endswith(("Path", "PurePath", "PosixPath")):
            return True
    if isinstance(node, ast.Name):
        return any(_path_like(v, flow, place) for v in place._assigned(node))
    return False


def writing_mode(mode: ast.AST | None) -> bool:
    """An open() mode that writes ("w", "a", "x", "+")."""
    return isinstance(mode, ast.Constant) and isinstance(mode.value, str) and any(c in mode.value for c in "wax+")


def _writes(call: ast.Call, first: int = 1) -> bool:
    return writing_mode(call.args[first] if len(call.args) > first else next(
        (k.value for k in call.keywords if k.arg == "mode"), None))


def _location_passed(call: ast.Call, flow: _Flow) -> list[tuple[str, ast.AST]]:
    """Its own path handed to a call that is neither a path's nor a build's: len(), re.search(),
    .startswith(), dict.get() and the like read it."""
    f = call.func
    origin = flow.dotted(f) or ""
    args = flow._args(call)
    if origin.startswith(("logging.", "warnings.")) or (isinstance(f, ast.Attribute) and f.attr in _LOGS):
        return []  # logging.getLogger(__name__).debug("%s", here): a message out, nothing read back
    if isinstance(f, ast.Attribute) and flow.holds(f.value) and f.attr not in PATH_METHODS | FILE_METHODS | \
            _CONTENT | _WRITES | _REMOVALS | {"hexdigest", "digest", "update", "glob", "rglob", "iterdir"}:
        return [(f"{ast.unparse(call)[:70]}: .{f.attr}() of its own path", call)]
    held = [a for a in args if flow.holds(a)]
    if not held:
        return []
    root = f
    while isinstance(root, ast.Attribute | ast.Call):
        root = root.value if isinstance(root, ast.Attribute) else root.func
    if (flow.dotted(root) or "") in ("logging", "warnings"):
        return []  # logging.getLogger(__name__).debug("%s", here): a message
    if origin in ("hasattr", "getattr") and call.args and (flow.dotted(call.args[0]) or "").startswith("torch.ops"):
        return []  # an op of its own, named after a digest of its sources (the generated _define_op)
    if origin.startswith("torch.library."):
        return []
    if origin in PATH_FUNCS | FILE_FUNCS | CONSUMERS or origin.startswith(("hashlib.", "logging.")) \
            or origin.endswith((".load", ".load_inline", "Error", "Exception", "Warning")):
        return []
    if isinstance(f, ast.Name) and (f.id in flow.functions or f.id in flow.classes):
        return []  # followed into its parameters
    if isinstance(f, ast.Attribute) and (flow._self(f) or f.attr in ("append", "insert", "extend", "update")
                                         or flow.holds(f.value)):
        return []  # a method of its own (followed), a list it builds, a hash it feeds
    if isinstance(f, ast.Attribute) and f.attr in ("join", "format"):
        return []  # "/".join([here, name]), "{}/k.cu".format(here): paths made of it
    return [(f"{ast.unparse(call)[:70]}: its own path handed to {origin or ast.unparse(f)}()", call)]


def own_absolute_paths(tree: ast.Module, dotted: Dotted, own: frozenset[str] | None = None) -> set[int]:
    """The function nodes of `os.path.abspath(...)` / `os.path.realpath(...)` calls whose argument is
    the module's own path or made from it (`os.path.abspath(__file__)`, the commonest way a module
    finds its folder): made absolute against nothing but itself, so not a question about the folder
    the process was started from (probes.py flags these functions otherwise)."""
    place = _Place(_Flow(tree, dotted), own)
    return {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call) and len(n.args) == 1
            and dotted(n.func) in ("os.path.abspath", "os.path.realpath")
            and place.kind(n.args[0]) in ("file", "dir", "own")}


def _names_an_object(node: ast.AST, flow: _Flow) -> bool:
    """`type(self)`, `self.__class__`, a class or module of the module's, a loaded library: objects
    whose text is a module's name or a file's path."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "type":
        return True
    if isinstance(node, ast.Attribute) and node.attr in ("__class__", "__code__", "_lib"):
        return True
    if isinstance(node, ast.Name) and (node.id in flow.classes or node.id in flow.functions
                                       or flow._key(node) in flow.libraries or node.id == "self"):
        return True
    return flow._library(node)

