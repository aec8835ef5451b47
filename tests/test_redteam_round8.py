"""The red-team round of 2026-12-06, third session (the forms round 7 left open, each accepted by the
static reading before this fix): attribute lookups by name under other spellings than getattr (an
alias of it, builtins.getattr, inspect.getattr_static, operator.attrgetter, __getattribute__ bound or
unbound), and names brought in by `from module import *`. Each is read as the attribute or the
dotted name it is, so every rule that names the written form names these too."""

from __future__ import annotations

import pytest
from conftest import HACKS, hack_task

from stitchcuda.agents.verify.static_check import check_candidate_sources, check_source
from stitchcuda.agents.verify.verifier import VerifyOptions, verify
from stitchcuda.types import Candidate

ROUND8 = {
    # Tensor.tolist through `G = getattr`, then Python arithmetic.
    "hack_rt8_getattr_alias_tolist": "torch-compute-in-forward",
    # Tensor.tolist through operator.attrgetter("tolist")(t).
    "hack_rt8_attrgetter_tolist": "torch-compute-in-forward",
    # F.linear and F.relu through object.__getattribute__(F, "lin" + "ear") and F.__getattribute__("relu").
    "hack_rt8_getattribute_linear": "torch-compute-in-forward",
    # ctypes' cast and POINTER from `from ctypes import *`, reading the tensors' memory in Python.
    "hack_rt8_star_ctypes_cast": "host-read",
    # linear and relu as bare names from `from torch.nn.functional import *`.
    "hack_rt8_star_functional": "torch-compute-in-forward",
    # a function pointer at an address of its choosing, made by type(handle.symbol)(address).
    "hack_rt8_funcptr_by_type": "hidden-dispatch",
    # A review of the fixes above (each accepted by them): a star import of a module without __all__
    # that holds ctypes or torch (torch._ops, torch._tensor) rebound the candidate's own `import ctypes`
    # or `import torch`; `G = getattr` then `G = torch.linalg.norm` read G(x, "fro") as x.fro;
    # operator.methodcaller("tolist")(x); `T = type`; ctypes.cast(c_void_p(addr), type(lib.f)).
    "hack_rt8b_star_shadow_ctypes_cast": "host-read",
    "hack_rt8b_star_shadow_torch": "torch-compute-in-forward",
    "hack_rt8b_getattr_alias_rebound": "torch-compute-in-forward",
    "hack_rt8b_methodcaller_tolist": "torch-compute-in-forward",
    "hack_rt8b_funcptr_type_alias": "hidden-dispatch",
    "hack_rt8b_funcptr_cast_type": "hidden-dispatch",
}


@pytest.mark.parametrize(("name", "code"), ROUND8.items(), ids=ROUND8.keys())
def test_round8_candidates_are_named_by_the_static_reading(name, code):
    files = {"model_new.py": (HACKS / f"{name}.py").read_text()}
    found = check_candidate_sources(files, "model_new.py")
    assert code in {f.code for f in found}, [(f.code, f.message[:120]) for f in found]


HEAD = "import torch\nimport torch.nn as nn\n"
SPELLINGS = {
    "builtins.getattr": ("import builtins\n", "builtins.getattr(x, 'tolist')()"),
    "an alias of an alias": ("G = getattr\nH = G\n", "H(x, 'tolist')()"),
    "getattr_static": ("import inspect\n", "inspect.getattr_static(x, 'tolist')(x)"),
    "a dotted attrgetter": ("import operator\n", "operator.attrgetter('T.tolist')(x)()"),
    "bound __getattribute__": ("", "x.__getattribute__('to' + 'list')()"),
    "a class's __getattribute__": ("", "torch.Tensor.__getattribute__(x, 'tolist')()"),
    "two names of attrgetter": ("import operator\n", "operator.attrgetter('tolist', 'shape')(x)[0]()"),
    "a class's __dict__": ("", "type(x).__dict__['tolist'](x)"),
    "vars of a class": ("T = torch.Tensor\n", "vars(T)['tolist'](x)"),
    "a method kept as a value": ("", "(x.tolist,)[0]()"),
}


@pytest.mark.parametrize("case", SPELLINGS.values(), ids=SPELLINGS.keys())
def test_each_spelling_of_a_lookup_is_the_attribute(case):
    """Tensor.tolist reached each way is named as .tolist() is (a host read of the tensor's values,
    PyTorch's compute in forward). (vars() and __dict__ of an imported module's attribute are named
    as `dynamic-code` and `introspection`, before any of this.)"""
    prelude, call = case
    src = (HEAD + prelude + "\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
           f"        return torch.tensor({call})\n")
    assert "torch-compute-in-forward" in {f.code for f in check_source(src, filename="model_new.py")}


AS_VALUES = {
    "unpacked": "G, = (getattr,)\n",
    "walrus": "",
    "a default argument": "def grab(x, g=getattr):\n    return g(x, 'tolist')\n",
    "stored on the module": "",
    "wrapped": "import functools\n",
    "a getter kept": "import operator\nTL = operator.attrgetter('tolist')\n",
    "unpacked arguments": "",
    "an alias of __getattribute__": "GA = object.__getattribute__\n",
}
AS_VALUE_CALLS = {
    "unpacked": "G(x, 'tolist')()", "walrus": "(g := getattr)(x, 'tolist')() if g else 0",
    "a default argument": "grab(x)()", "stored on the module": "[getattr][0](x, 'tolist')()",
    "wrapped": "functools.partial(getattr, x)('tolist')()", "a getter kept": "TL(x)()",
    "unpacked arguments": "getattr(*(x, 'tolist'))()", "an alias of __getattribute__": "GA(x, 'tolist')()",
}


@pytest.mark.parametrize("how", AS_VALUES, ids=AS_VALUES.keys())
def test_a_lookup_used_as_a_value_is_named(how):
    """getattr (or attrgetter, methodcaller, __getattribute__) passed, stored, unpacked or wrapped
    takes a name the reading cannot follow: `dynamic-code`, whatever it looks up."""
    src = (HEAD + AS_VALUES[how] + "\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
           f"        return torch.tensor({AS_VALUE_CALLS[how]})\n")
    assert "dynamic-code" in {f.code for f in check_source(src, filename="model_new.py")}, how


def test_a_star_import_never_replaces_the_modules_own_names():
    """`from torch._ops import *` (a loaded module without __all__, holding ctypes and torch) binds no
    module, and none of its names over the candidate's own imports."""
    src = ("import ctypes\nimport torch\nimport torch.nn as nn\nfrom torch._ops import *\n\n"
           "class ModelNew(nn.Module):\n    def forward(self, x):\n"
           "        return torch.nn.functional.layer_norm(x, x.shape[-1:])\n")
    assert "torch-compute-in-forward" in {f.code for f in check_source(src, filename="model_new.py")}


CTYPES_HONEST = """
import ctypes
from pathlib import Path

import torch
import torch.nn as nn

_lib = ctypes.CDLL(str(Path(__file__).with_name("libk.so")))
_P = ctypes.POINTER(ctypes.c_float)


def _kind(v):
    k = type(v)
    return k.__name__


class ModelNew(nn.Module):
    def __init__(self, n=4):
        super().__init__()
        self.n = n

    def clone(self):
        return type(self)(self.n)

    @classmethod
    def make(cls):
        return cls(4)

    def forward(self, x):
        k = _lib.run
        out = torch.empty_like(x)
        k(ctypes.cast(x.data_ptr(), _P), ctypes.cast(out.data_ptr(), ctypes.c_void_p), x.numel())
        return out if _kind(x) and self.__class__.__name__ else out
"""


def test_the_honest_ctypes_forms_near_the_function_pointer_rules_stay_clear():
    """In a module using ctypes: its own class built anew (type(self)(...), cls(...)), a name bound to
    an object's class in one function and to a kernel in another, casts to data pointers (POINTER, c_*,
    a name bound to one): no finding."""
    assert check_source(CTYPES_HONEST, filename="model_new.py") == []


HONEST = """
import ctypes
import operator
from pathlib import Path

import torch
import torch.nn as nn

_lib = ctypes.CDLL(str(Path(__file__).with_name("libk.so")))
G = getattr


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        w = G(self.fc, "weight")
        out = torch.empty(operator.attrgetter("shape")(x), dtype=x.dtype, device=x.device)
        b = self.fc.__getattribute__("bias")
        _lib.run(ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(w.data_ptr()), ctypes.c_void_p(b.data_ptr()),
                 ctypes.c_void_p(out.data_ptr()), x.numel())
        return out
"""


def test_a_class_called_from_an_object_is_named_only_beside_ctypes():
    """type(x)(...) in a module without ctypes (a module copying itself, say) is no finding."""
    src = HEAD + "\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return type(x)(x) * 1\n"
    assert "hidden-dispatch" not in {f.code for f in check_source(src, filename="model_new.py")}
    with_ctypes = "import ctypes\n" + src
    assert "hidden-dispatch" in {f.code for f in check_source(with_ctypes, filename="model_new.py")}


def test_the_honest_forms_near_them_stay_clear():
    """A parameter read through an alias of getattr or through __getattribute__, a shape through
    attrgetter called at once, a library beside the module called on pointers: no finding."""
    assert check_source(HONEST, filename="model_new.py") == []


def test_a_star_import_of_a_module_not_loaded_here_binds_nothing():
    """Names from `from M import *` are known only for modules this process has loaded already: the
    static reading imports nothing of the candidate's to learn them."""
    import sys

    assert "stitchcuda_no_such_module" not in sys.modules
    src = (HEAD + "from stitchcuda_no_such_module import *\n\nclass ModelNew(nn.Module):\n"
           "    def forward(self, x):\n        return x\n")
    check_source(src, filename="model_new.py")
    assert "stitchcuda_no_such_module" not in sys.modules


def test_a_star_ctypes_forward_is_rejected_end_to_end(build_cache, tmp_path):
    """The round's linear layer computed in Python over memory read through `from ctypes import *`'s
    cast, verified on the CPU."""
    opts = VerifyOptions(cpu_only=True, timeout_s=180.0, extra_env={"STITCHCUDA_CACHE": str(build_cache)})
    cand = Candidate(name="star_cast", files={"model_new.py": (HACKS / "hack_rt8_star_ctypes_cast.py").read_text()},
                     origin="user")
    v = verify(hack_task("ref_rt7_linear_relu"), cand, tmp_path / "v", opts)
    assert v.status == "hacked" and "host-read" in {f.code for f in v.hack_findings}, (v.status, v.message)
