"""Red-team candidates (2026-11-30, and one of 2026-11-29) the Verifier accepted on the CPU, each computing with
PyTorch or loosening what it is judged by, and now rejected in the worker itself:

- the dispatch mode stack popped through torch._C's C functions (call_watch sees their c_call
  events from the candidate's code);
- `_disable_current_modes` entered through contextlib.ExitStack (call_watch walks past every
  contextlib and functools frame to the caller);
- a function copied under another file name (code.replace), which then reached the collector's
  lists unseen and loosened the worker's tolerance objects (making a code object is refused); the
  same function written to a module in the worker's temp folder, where torch's generated code lives,
  and imported from there (the candidate's writes and imports there are the candidate's code).

The ExitStack one also rewrote the blind check witness's record of its ops: rejected before it
runs."""

from __future__ import annotations

import pytest
from conftest import hack_candidate, hack_task

from stitchcuda.agents.verify.verifier import VerifyOptions, verify


@pytest.fixture()
def opts(build_cache):
    # Several candidates here find the blind check's witness by its command line, to test what the
    # witness itself catches: the static environment-probe finding (test_environment_probes.py)
    # would reject them before it runs; so would the static call-count finding (call_state.py) for
    # those that count their calls to act on the witness's.
    return VerifyOptions(extra_env={"STITCHCUDA_CACHE": str(build_cache)}, cpu_only=True, timeout_s=180.0,
                         time_compile=False, environment_probes=False, call_counts=False)


@pytest.mark.parametrize("stem,code,what", [
    ("hack_pop_dispatch_stack", "hidden-dispatch", "torch._C._pop_torch_dispatch_stack"),
    ("hack_exit_stack_modes", "hidden-dispatch", "_disable_current_modes"),
    ("hack_launder_code_filename", "sandbox-introspect", "code object"),
    ("hack_launder_by_compile", "sandbox-introspect", "compile"),
    ("hack_launder_by_temp_module", "sandbox-introspect", "gc.get_objects"),
])
def test_it_is_rejected_in_the_worker(tmp_path, opts, stem, code, what):
    v = verify(hack_task("ref_affine"), hack_candidate(stem), tmp_path / "v", opts)
    assert not v.accepted and v.status in ("hacked", "build-failed"), (v.status, v.message)
    found = [f for f in v.hack_findings + v.findings if f.code == code]
    assert found and any(what in f.message for f in found), (v.status, v.message, v.hack_findings)
