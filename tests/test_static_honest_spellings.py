"""What honest candidates write that the static reading named as hacks (red-team round 9's review):
comments in native code naming ATen's internals, an attribute called `profiler`, a compiled library
reached through a cached loader function. Each one is checked both ways: the honest spelling is
clean, and the hostile spellings beside it (red-team round 10's, `tests/hacks/hack_rt10_*.py` and the
native texts below) are still findings. Python strings naming the dispatcher stay findings wherever
they stand (any string may end up compiled)."""

from __future__ import annotations

import pytest
from conftest import HACKS

from stitchcuda.agents.verify.probes import strip_comments, strip_comments_and_strings, uncommented
from stitchcuda.agents.verify.static_check import check_candidate_sources

HEAD = ("import functools\nimport torch\nimport torch.nn as nn\n"
        "from torch.utils.cpp_extension import load_inline\n\n")
CPP = '#include <torch/extension.h>\\nvoid add(at::Tensor a, at::Tensor b, at::Tensor out);\\n'


def codes(files: dict[str, str]) -> set[str]:
    return {f.code for f in check_candidate_sources(files, "model_new.py")}


def model(forward_body: str, extra: str = "") -> str:
    return HEAD + extra + "\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n" + forward_body


# --- the C++ lexer behind the native reading -------------------------------------------------------

def test_comments_go_and_code_in_strings_stays_where_the_compiler_says():
    text = ('const char* s = "// not a comment";  at::native::a();\n'
            "int n = 1'000; const char* q = \"'/*\"; at::native::b(); // */\n"
            "char c = '\"'; at::native::c(); // \"\n"
            'auto r = R"x( " /* )x"; at::native::d(); // */\n'
            "// a comment naming at::native::hidden_in_comment \\\n"
            "   still the comment after a line splice\n"
            "/* block at::native::in_block */ at::native::e();\n")
    code = strip_comments(text)
    for call in ("a", "b", "c", "d", "e"):
        assert f"at::native::{call}()" in code, (call, code)
    assert "hidden_in_comment" not in code and "still the comment" not in code and "in_block" not in code
    assert code.count("\n") == text.count("\n")  # (findings keep their line numbers)
    bare = strip_comments_and_strings(text)
    assert "not a comment" not in bare and "at::native::a()" in bare


def test_a_splice_after_a_line_comment_does_not_open_a_block_comment_over_code():
    """The compiler splices `\\` + newline first: the `/*` on the next line is still the line
    comment's, so the code after it is code (a lexer without splicing read it as one long comment)."""
    text = "// note \\\n/*\nat::native::add_out(x);\n// */\n"
    assert "at::native::add_out(x);" in strip_comments(text)


# --- native comments ---------------------------------------------------------------------------------

CU_HONEST = ('#include <torch/extension.h>\n'
             '// Row softmax, as at::native::softmax_kernel does it, without the c10::Dispatcher round trip.\n'
             '/* ThreadLocalState is not touched here. */\n'
             '__global__ void k(const float* x, float* y, int n) { int i = threadIdx.x; if (i < n) y[i] = x[i]; }\n')


def test_comments_in_a_cu_naming_aten_internals_are_not_findings():
    assert "hidden-dispatch" not in codes({"model_new.py": model("        return x\n"), "kernels.cu": CU_HONEST})


CODE = "at::Tensor f(const at::Tensor& a) { return at::native::relu(a); }\n"
# Red-team round 10: each hid CODE from the first lexer, g++ and nvcc compiling it (`U at::native::relu`
# in the built library); behind #ifdef TORCH_CHECK, the macro-expanding reading skips it as well.
HIDDEN = {
    "a string holding //": 'const char* s = "//"; ' + CODE,
    "a splice after a line comment": "// \\\n/*\n" + CODE + "// */\n",
    "a block comment closed across a splice": "#ifdef TORCH_CHECK\n/* fused relu *\\\n/ " + CODE + "#endif\n/* end */\n",
    "a character right after case": "static int k(int c) { switch (c) { case'/*': return 1; } return 0; }\n" + CODE
                                    + 'static const char* e_ = "*/";\n',
    "a splice with blanks in a string": '#ifdef TORCH_CHECK\nstatic const char* s_ = "a\\  \n/*";\n' + CODE
                                        + 'static const char* e_ = "*/";\n#endif\n',
    "a raw string delimited by a quote": 'static const char* r_ = R""(/*)"";\n' + CODE + 'static const char* e_ = "*/";\n',
    "a lone carriage return": "#ifdef TORCH_CHECK\n// note\r" + CODE + "#endif\n",
}
# Round 11: a dollar in a name or a number (gcc's `$R` is a name, so `R"(")"` is no raw string there).
for _name, _lead in (("a dollar before R", "$R"), ("a dollar in a number", "1$R")):
    HIDDEN[_name] = ('#ifdef TORCH_CHECK\n#define G(...) static const char* s_ =\nG(' + _lead + '"(")"/*";\n' + CODE
                     + 'static const char* e_ = "*/";\n#endif\n')
# Round 11: the same call spelled with other blanks or through the namespace.
SPELLED = {
    "blank before ::": "at::Tensor f(const at::Tensor& a) { return at::native ::relu(a); }\n",
    "a line break after ::": "at::Tensor f(const at::Tensor& a) { return at::native::\nrelu(a); }\n",
    "a comment after ::": "at::Tensor f(const at::Tensor& a) { return at::native::/**/relu(a); }\n",
    "a namespace alias": "namespace an = at::native;\nat::Tensor f(const at::Tensor& a) { return an::relu(a); }\n",
    "using namespace at": "using namespace at;\nTensor f(const Tensor& a) { return native::relu(a); }\n",
    "gil_scoped_acquire_simple": "void g() { pybind11::detail::gil_scoped_acquire_simple held; }\n",
}


@pytest.mark.parametrize("text", SPELLED.values(), ids=SPELLED.keys())
def test_aten_internals_however_spelled_are_read(text):
    unit = "#include <torch/extension.h>\n" + text
    assert "hidden-dispatch" in codes({"model_new.py": model("        return x\n"), "kernels.cu": unit})


@pytest.mark.parametrize("text", HIDDEN.values(), ids=HIDDEN.keys())
def test_code_made_to_look_like_a_comment_is_still_read(text):
    unit = "#include <torch/extension.h>\n" + text
    assert "hidden-dispatch" in codes({"model_new.py": model("        return x\n"), "kernels.cu": unit})
    assert "at::native::relu" in strip_comments(unit)


@pytest.mark.skipif(uncommented("int x;") is None, reason="no C preprocessor (cpp) here")
def test_the_preprocessors_lexer_agrees_on_honest_comments():
    """The second reading (gcc's own lexer, -fpreprocessed) leaves honest comments out as ours does:
    reading both brings back no false positive."""
    assert "at::native" not in uncommented(CU_HONEST) and "Dispatcher" not in uncommented(CU_HONEST)


# --- Python strings -----------------------------------------------------------------------------------

@pytest.mark.parametrize("line", [
    '        raise RuntimeError("kernel launch failed: not a c10::Dispatcher problem")\n',
    '        assert x.is_cuda, "CUDA only (no Dispatcher fallback)"\n',
    # A piece of load_inline's source: its comment may be code once glued to the piece before it
    # (one ending in an open string or a backslash), so Python strings are read comments and all.
    '        src = "#include <torch/extension.h>\\n// as at::native::softmax does"\n',
])
def test_dispatcher_names_in_python_strings_stay_findings(line):
    """A message is read back through e.args, a docstring through __doc__, print rebound to
    load_inline: red-team round 10 compiled each, so where a string stands does not clear it."""
    assert "hidden-dispatch" in codes({"model_new.py": model(line + "        return x\n")})


# --- an attribute called profiler ------------------------------------------------------------------------

def test_an_attribute_called_profiler_is_not_a_mode_probe():
    src = HEAD + ("class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                  "        self.profiler = None\n\n    def forward(self, x):\n"
                  "        if self.profiler is not None:\n            self.profiler.append(1)\n        return x\n")
    assert "mode-probe" not in codes({"model_new.py": src})


def test_torchs_profiler_is_still_a_mode_probe():
    for body in ("        if torch.autograd.profiler is None:\n            return x\n        return x\n",
                 "        self.profiler = torch.profiler\n        return x\n"):
        assert "mode-probe" in codes({"model_new.py": model(body)}), body
    # `self` that is not the instance: a module-level function handed torch.autograd; a method's
    # function, or the method bound to another object.
    src = model("        return probe(torch.autograd)\n", "def probe(self):\n    return self.profiler\n")
    assert "mode-probe" in codes({"model_new.py": src})
    for call in ("self.probe.__func__(torch.autograd)", "self.probe.__func__.__get__(torch.autograd)()",
                 "types.MethodType(self.probe.__func__, torch.autograd)()"):
        src = HEAD + "import types\n\n\nclass ModelNew(nn.Module):\n    def probe(self):\n        return self.profiler\n\n" \
            f"    def forward(self, x):\n        return {call}\n"
        assert "mode-probe" in codes({"model_new.py": src}), call


@pytest.mark.parametrize("name", ["hack_rt10_p3a_unbound_self", "hack_rt10_p3b_star_import_own_binding"])
def test_round10_mode_probes_are_named(name):
    """A method called through its class with torch.autograd as self; a star import's probe whose
    name the module also binds (the exemption is for `profiler` alone, never beside a star import)."""
    assert "mode-probe" in codes({"model_new.py": (HACKS / f"{name}.py").read_text()})


# --- a library through a loader function --------------------------------------------------------------

LOADERS = {
    "lru_cache": "@functools.lru_cache(maxsize=None)\ndef _kernels():\n"
                 f"    return load_inline('k', cpp_sources='{CPP}', functions=['add'])\n",
    "cached global": "_mod = None\n\ndef _kernels():\n    global _mod\n    if _mod is None:\n"
                     f"        _mod = load_inline('k', cpp_sources='{CPP}', functions=['add'])\n    return _mod\n",
}


@pytest.mark.parametrize("loader", LOADERS.values(), ids=LOADERS.keys())
def test_a_library_from_a_loader_function_is_the_candidates_own_code(loader):
    for body in ("        out = torch.empty_like(x)\n        _kernels().add(x, x, out)\n        return out\n",
                 "        lib = _kernels()\n        out = torch.empty_like(x)\n        lib.add(x, x, out)\n        return out\n"):
        assert "torch-compute-in-forward" not in codes({"model_new.py": model(body, loader)}), body


@pytest.mark.parametrize("helper", [
    "def _kernels(t):\n    return t\n",  # returns a tensor: .add is Tensor.add
    "def wrap(f):\n    return lambda: torch\n\n@wrap\n"  # a decorator that swaps the function
    f"def _kernels():\n    return load_inline('k', cpp_sources='{CPP}', functions=['add'])\n",
    "_mod = torch\n\ndef _kernels():\n    return _mod\n",  # a global bound to torch
])
def test_other_helpers_returning_something_are_still_read_as_torch(helper):
    call = "_kernels(x)" if "(t)" in helper else "_kernels()"
    body = f"        return {call}.add(x)\n"
    assert "torch-compute-in-forward" in codes({"model_new.py": model(body, helper)}), helper


@pytest.mark.parametrize("name", ["hack_rt10_p4a_own_cpp_extension_class", "hack_rt10_p4b_own_functools",
                                  "hack_rt10_p4c_match_rebinds_function", "hack_rt10_p4d_match_rebinds_cached_global",
                                  "hack_rt10_p4e_code_swap"])
def test_round10_loader_functions_returning_torch_are_read_as_torch(name):
    """A class of the module's own named cpp_extension or functools, a match capture rebinding the
    function or its cached global, the function's __code__ swapped: `_kernels().add` is Tensor.add."""
    assert "torch-compute-in-forward" in codes({"model_new.py": (HACKS / f"{name}.py").read_text()})


def test_round11_a_module_of_the_candidates_named_cpp_extension_is_no_loader():
    """A sibling file `cpp_extension.py` whose load returns torch: `import cpp_extension` is not
    torch's (the candidate's folder is on sys.path); only torch's own loaders make a loader function."""
    src = ("import torch\nimport torch.nn as nn\nimport cpp_extension\n\n\ndef _kernels():\n"
           "    return cpp_extension.load('k', [])\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x, y):\n"
           "        out = torch.empty_like(x)\n        _kernels().add(x, y, out=out)\n        return out\n")
    files = {"model_new.py": src, "cpp_extension.py": "import torch\n\n\ndef load(name, sources):\n    return torch\n"}
    assert "torch-compute-in-forward" in codes(files)


def test_round11_torch_modules_kept_on_self_are_read():
    """torch._C._autograd kept as self.profiler (or any name), its profiler's kind read in forward;
    torch.nn.functional kept as self.F, its relu called."""
    init = "    def __init__(self):\n        super().__init__()\n        self.{a} = {m}\n\n"
    for attr, module, call, code in (("profiler", "torch._C._autograd", "self.profiler._profiler_type().value", "mode-probe"),
                                     ("ag", "torch._C._autograd", "self.ag._profiler_type().value", "mode-probe"),
                                     ("F", "torch.nn.functional", "self.F.relu(x)", "torch-compute-in-forward")):
        src = HEAD + "class ModelNew(nn.Module):\n" + init.format(a=attr, m=module) + \
            f"    def forward(self, x):\n        return {call}\n"
        assert code in codes({"model_new.py": src}), (attr, call)
