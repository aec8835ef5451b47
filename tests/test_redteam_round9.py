"""The red-team round of 2026-12-06, fourth session. A helper wrote 70 hostile candidates against the
static reading alone; each Python one that computes with torch was also run through the CPU
verification here, where the dispatcher's watch, the audit hook or the output checks rejected all but
these: ctypes' memory functions under another name than the written one (a module-level alias, a
local name, a default argument, functools.partial), a cast pointer read through its bound
__getitem__, and a foreign function pointer made by its class's __new__. Those are named now."""

from __future__ import annotations

import pytest
from conftest import HACKS, hack_task

from stitchcuda.agents.verify.static_check import check_candidate_sources
from stitchcuda.agents.verify.verifier import VerifyOptions, verify
from stitchcuda.types import Candidate

ROUND9 = {
    "hack_rt9_cast_alias": "host-read",
    "hack_rt9_memmove_local": "host-read",
    "hack_rt9_cast_getitem_map": "host-read",
    "hack_rt9_funcptr_new": "hidden-dispatch",
}


@pytest.mark.parametrize(("name", "code"), ROUND9.items(), ids=ROUND9.keys())
def test_round9_candidates_are_named_by_the_static_reading(name, code):
    files = {"model_new.py": (HACKS / f"{name}.py").read_text()}
    found = check_candidate_sources(files, "model_new.py")
    assert code in {f.code for f in found}, [(f.code, f.message[:120]) for f in found]


HEAD = "import ctypes\nimport functools\nimport torch\nimport torch.nn as nn\nfrom ctypes import memmove as mm\n"
READ = "        return torch.tensor([p[i] for i in range(4)])\n"
COPY = "        b = (ctypes.c_float * 4)()\n"
SPELLINGS = {
    "a local name": "    def forward(self, x):\n        c = ctypes.cast\n"
                    "        p = c(x.data_ptr(), ctypes.POINTER(ctypes.c_float))\n" + READ,
    "a default argument": "    def forward(self, x, c=ctypes.cast):\n"
                          "        p = c(x.data_ptr(), ctypes.POINTER(ctypes.c_float))\n" + READ,
    "a lambda's default": "    def forward(self, x):\n        p = (lambda a, c=ctypes.cast: c(a, ctypes.POINTER(ctypes.c_float)))"
                          "(x.data_ptr())\n" + READ,
    "functools.partial": "    def forward(self, x):\n" + COPY + "        functools.partial(ctypes.memmove, b)(x.data_ptr(), 16)\n"
                         "        return torch.tensor(list(b))\n",
    "an imported name kept": "    def forward(self, x):\n" + COPY + "        g = mm\n        g(b, x.data_ptr(), 16)\n"
                             "        return torch.tensor(list(b))\n",
    "in a container": "    def forward(self, x):\n        p = [ctypes.cast][0](x.data_ptr(), ctypes.POINTER(ctypes.c_float))\n" + READ,
}


@pytest.mark.parametrize("body", SPELLINGS.values(), ids=SPELLINGS.keys())
def test_ctypes_memory_functions_kept_as_values_are_host_reads(body):
    src = HEAD + "\n\nclass ModelNew(nn.Module):\n" + body
    found = check_candidate_sources({"model_new.py": src}, "model_new.py")
    assert "host-read" in {f.code for f in found}, [(f.code, f.message[:120]) for f in found]


def test_a_cast_handed_to_a_kernel_and_the_modules_own_new_are_not_findings():
    """What honest code writes stays clean: a cast's result passed to a kernel (no read in Python), a
    module-level alias of cast called that way, and __new__ of a class the module defines."""
    src = HEAD + (
        "_cast = ctypes.cast\n\n\nclass Box:\n    def __new__(cls, n):\n        return super().__new__(cls)\n\n\n"
        "class ModelNew(nn.Module):\n    def forward(self, x, run=None):\n        Box.__new__(Box, 1)\n"
        "        run(_cast(x.data_ptr(), ctypes.c_void_p), ctypes.cast(x.data_ptr(), ctypes.c_void_p))\n"
        "        return x\n")
    found = check_candidate_sources({"model_new.py": src}, "model_new.py")
    assert not {f.code for f in found} & {"host-read", "hidden-dispatch"}, [(f.code, f.message[:120]) for f in found]


def test_a_cast_alias_forward_is_rejected_end_to_end(build_cache, tmp_path):
    """The linear layer computed in Python over memory read through `_cast = ctypes.cast`, verified on
    the CPU (where the input's memory is the host's: no copy for the dynamic watch to see)."""
    opts = VerifyOptions(cpu_only=True, timeout_s=180.0, extra_env={"STITCHCUDA_CACHE": str(build_cache)})
    cand = Candidate(name="cast_alias", files={"model_new.py": (HACKS / "hack_rt9_cast_alias.py").read_text()},
                     origin="user")
    v = verify(hack_task("ref_rt7_linear_relu"), cand, tmp_path / "v", opts)
    assert v.status == "hacked" and "host-read" in {f.code for f in v.hack_findings}, (v.status, v.message)


def test_a_getitem_map_forward_is_rejected_end_to_end(build_cache, tmp_path):
    opts = VerifyOptions(cpu_only=True, timeout_s=180.0, extra_env={"STITCHCUDA_CACHE": str(build_cache)})
    cand = Candidate(name="getitem_map",
                     files={"model_new.py": (HACKS / "hack_rt9_cast_getitem_map.py").read_text()}, origin="user")
    v = verify(hack_task("ref_rt9_relu"), cand, tmp_path / "v", opts)
    assert v.status == "hacked" and "host-read" in {f.code for f in v.hack_findings}, (v.status, v.message)


LIB = ("from pathlib import Path\nimport torch\nimport torch.nn as nn\nfrom stitchcuda import runtime\n\n"
       "_lib = runtime.load(Path(__file__).with_name('kernels.cu'))\n\n\nclass ModelNew(nn.Module):\n"
       "    def forward(self, x, y):\n        out = torch.empty_like(x)\n")


def test_a_local_name_for_the_candidates_own_library_is_its_code():
    """The round's false positive: `lib = _lib; lib.add(...)` read as Tensor.add."""
    src = LIB + "        lib = _lib\n        lib.add(x, y, out, x.numel())\n        return out\n"
    found = check_candidate_sources({"model_new.py": src}, "model_new.py")
    assert "torch-compute-in-forward" not in {f.code for f in found}, [(f.code, f.message[:120]) for f in found]


@pytest.mark.parametrize("rebind", ["        lib = x\n", "        for lib in (x,):\n            pass\n",
                                    "        (lib := x)\n"])
def test_a_local_name_also_bound_to_a_tensor_is_not_the_library(rebind):
    src = LIB + "        lib = _lib\n" + rebind + "        return lib.add(y)\n"
    found = check_candidate_sources({"model_new.py": src}, "model_new.py")
    assert "torch-compute-in-forward" in {f.code for f in found}, [(f.code, f.message[:120]) for f in found]
