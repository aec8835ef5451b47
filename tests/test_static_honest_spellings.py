"""What honest candidates write that the static reading named as hacks (red-team round 9's review):
comments in native code naming ATen's internals, error messages naming the dispatcher, an attribute
called `profiler`, a compiled library reached through a cached loader function. Each one is checked
both ways: the honest spelling is clean, and the hostile spelling beside it is still a finding."""

from __future__ import annotations

import pytest

from stitchcuda.agents.verify.probes import strip_comments, strip_comments_and_strings
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


def test_the_same_names_as_code_are_still_findings():
    hostile = CU_HONEST + 'const char* s = "//"; at::Tensor f(at::Tensor a) { return at::native::relu(a); }\n'
    assert "hidden-dispatch" in codes({"model_new.py": model("        return x\n"), "kernels.cu": hostile})
    spliced = CU_HONEST + "// \\\n/*\nat::Tensor f(at::Tensor a) { return at::native::relu(a); }\n// */\n"
    assert "hidden-dispatch" in codes({"model_new.py": model("        return x\n"), "kernels.cu": spliced})


# --- Python strings -----------------------------------------------------------------------------------

@pytest.mark.parametrize("line", [
    '        raise RuntimeError("kernel launch failed: not a c10::Dispatcher problem")\n',
    '        raise ValueError(f"shape {x.shape} unsupported; the Dispatcher path is not used")\n',
    '        assert x.is_cuda, "CUDA only (no Dispatcher fallback)"\n',
    '        print("skipping the Dispatcher")\n        return x\n',
])
def test_messages_naming_the_dispatcher_are_not_findings(line):
    assert "hidden-dispatch" not in codes({"model_new.py": model(line + "        return x\n")})


@pytest.mark.parametrize("line", [
    # A class of the candidate's "raised" with C++: its constructor may compile it.
    '        raise Loader("c10::Dispatcher::singleton()")\n',
    # A string kept, then compiled.
    '        src = "c10::Dispatcher::singleton()"\n',
    # print rebound by the module.
    '        print("c10::Dispatcher::singleton()")\n',
])
def test_dispatcher_strings_anywhere_else_are_still_findings(line):
    extra = "class Loader(Exception):\n    pass\n\n"
    if "print(" in line:
        extra += "print = load_inline\n"
    assert "hidden-dispatch" in codes({"model_new.py": model(line + "        return x\n", extra)})


def test_a_module_docstring_naming_the_dispatcher_is_not_a_finding():
    src = '"""Fused kernels; no c10::Dispatcher round trip per op."""\n' + model("        return x\n")
    assert "hidden-dispatch" not in codes({"model_new.py": src})


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
    # `self` that is not the instance: a module-level function handed torch.autograd.
    src = model("        return probe(torch.autograd)\n", "def probe(self):\n    return self.profiler\n")
    assert "mode-probe" in codes({"model_new.py": src})


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
