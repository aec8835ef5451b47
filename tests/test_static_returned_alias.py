"""The static reading of a module-level name bound to a helper's return: torch (or one of its modules)
handed back by every return of the helper is torch under that name too; an extension loader's result is
the candidate's own code. (Left open until 2026-12-07: `_ext = _build()` returning torch read
`_ext.add(x, y)` as the candidate's own; the op recorder saw it at run time.)"""

from __future__ import annotations

import pytest

from stitchcuda.agents.verify.static_check import check_candidate_sources

BASE = "import torch\nimport torch.nn as nn\n\n{helper}\n\nclass ModelNew(nn.Module):\n    def forward(self, x, y):\n        return {call}\n"

TORCH = {
    "returns torch": ("def _build():\n    return torch\n\n_ext = _build()\n", "_ext.add(x, y)"),
    "a local import's alias": ("def _build():\n    import torch.nn.functional as G\n    return G\n\n_ext = _build()\n",
                               "_ext.relu(x)"),
    "two returns, two modules": ("def _build(flag):\n    if flag:\n        return torch\n    return torch.nn.functional\n\n"
                                 "_ext = _build(1)\n", "_ext.add(x, y)"),
    "a conditional expression": ("def _build(flag):\n    return torch if flag else torch.nn.functional\n\n_ext = _build(1)\n",
                                 "_ext.add(x, y)"),
}


@pytest.mark.parametrize(("helper", "call"), TORCH.values(), ids=TORCH.keys())
def test_a_helper_returning_torch_binds_torch(helper, call):
    found = check_candidate_sources({"model_new.py": BASE.format(helper=helper, call=call)}, "model_new.py")
    assert "torch-compute-in-forward" in {f.code for f in found}, [(f.code, f.message[:100]) for f in found]


def test_a_helper_returning_an_extension_stays_the_candidates_own():
    helper = ("from torch.utils.cpp_extension import load_inline\n\n\ndef _build():\n"
              "    return load_inline('m', cpp_sources='', functions=['add'])\n\n\n_ext = _build()\n")
    found = check_candidate_sources({"model_new.py": BASE.format(helper=helper, call="_ext.add(x, y)")}, "model_new.py")
    assert "torch-compute-in-forward" not in {f.code for f in found}, [(f.code, f.message[:100]) for f in found]
