"""The candidate's kernels are prebuilt (keep.prebuild_proposal, before its worker imports them) in
the candidate's own sandbox. A red-team candidate (2026-11-30) had its C++ `.incbin` a file that
bubblewrap hides; prebuilt in the Verifier's own process, the file's bytes went into the library,
and the module read them back into the run folder. Now the compiler cannot see the file: the build
fails, the verdict says so, and the secret is nowhere under the run folder. An honest candidate's
library is still prebuilt, in the same sandbox."""

from __future__ import annotations

import pytest
from conftest import HACKS, hack_task, needs_nvcc

from stitchcuda.agents.verify import sandbox
from stitchcuda.agents.verify.verifier import VerifyOptions, verify
from stitchcuda.types import Candidate

pytestmark = [needs_nvcc, pytest.mark.skipif(not sandbox.available().ok, reason="needs bubblewrap (a sandbox)")]

SECRET = "stitchcuda-prebuild-secret-0d5e"

LEAK = r'''
__asm__(".section .rodata\n.global sc_blob\nsc_blob:\n.incbin \"@PATH@\"\n.byte 0\n.previous\n");
extern "C" const char sc_blob[];
extern "C" const char* sc_leak(void) { return sc_blob; }
'''

MODULE = '''import ctypes
import hashlib
from pathlib import Path

import torch
import torch.nn as nn

_src = Path(__file__).with_name("kernels.cpp")
_lib = ctypes.CDLL(str(_src.with_name(f"kernels.{hashlib.sha256(_src.read_bytes()).hexdigest()[:16]}.so")))
@LEAK@_lib.affine_relu.restype = ctypes.c_int
_lib.affine_relu.argtypes = (ctypes.c_void_p,) * 3 + (ctypes.c_int64, ctypes.c_double, ctypes.c_void_p)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        _lib.affine_relu(x.data_ptr(), y.data_ptr(), out.data_ptr(), x.numel(), float(self.scale), None)
        return out
'''


@pytest.fixture()
def opts(build_cache):
    return VerifyOptions(extra_env={"STITCHCUDA_CACHE": str(build_cache)}, cpu_only=True, timeout_s=180.0,
                         time_compile=False, random_sets=1, adversarial=())


READ_BACK = '''_lib.sc_leak.restype = ctypes.c_char_p
Path(__file__).with_name("leaked.txt").write_bytes(_lib.sc_leak())
'''


def _candidate(name: str, cpp: str) -> Candidate:
    module = MODULE.replace("@LEAK@", READ_BACK)
    return Candidate(name=name, files={"model_new.py": module, "kernels.cpp": cpp}, origin="user",
                     kernels_source="kernels.cpp")


def test_a_source_that_embeds_a_hidden_file_does_not_build(tmp_path, opts):
    secret = tmp_path / "secret" / "secret.txt"  # (under /tmp: hidden in the sandbox)
    secret.parent.mkdir()
    secret.write_text(SECRET)
    cpp = (HACKS / "kernels.cpp").read_text() + LEAK.replace("@PATH@", str(secret))
    run = tmp_path / "run"
    v = verify(hack_task("ref_affine"), _candidate("incbin", cpp), run, opts)
    assert not v.accepted and v.status in ("build-failed", "crashed", "error"), (v.status, v.message)
    leaked = [p for p in run.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert not leaked, leaked


def test_an_honest_library_is_still_prebuilt(tmp_path, opts):
    run = tmp_path / "run"
    honest = Candidate(name="honest", files={"model_new.py": (HACKS / "good_affine.py").read_text(),
                                             "kernels.cpp": (HACKS / "kernels.cpp").read_text()},
                       origin="user", kernels_source="kernels.cpp")
    v = verify(hack_task("ref_affine"), honest, run, opts)
    assert v.accepted, (v.status, v.message, v.log_tail[-2000:])
    assert any("the library the proposal ships" in n for n in v.notes), v.notes
