"""The operator table read before the candidate's code and after (agents/verify/dispatch_table.py):
a kernel registered for an operator that existed is named, whatever registered it; an operator of
the candidate's own is not, and neither are the shape-only keys' kernels."""

from __future__ import annotations

import torch

from stitchcuda.agents.verify import dispatch_table


def test_a_kernel_registered_over_atens_is_named_and_a_new_operator_is_not():
    before = dispatch_table.snapshot()
    assert "aten::addmm" in before and any(line.startswith("CPU: ") for line in before["aten::addmm"])
    assert dispatch_table.changed(before) == []
    own = torch.library.Library("sc_probe_table", "DEF")
    own.define("twice(Tensor x) -> Tensor")
    own.impl("twice", lambda x: x * 2, "CPU")
    assert dispatch_table.changed(before, frozenset({"aten", "sc_probe_table"})) == []  # (its own: dispatched, recorded)
    over = torch.library.Library("aten", "IMPL")
    try:
        over.impl("sinh", lambda x: x, "CPU")
        found = dispatch_table.changed(before)
        assert any(line.startswith("aten::sinh: CPU: registered at") for line in found), found
        assert any(line.startswith("aten::sinh: CPU (inactive):") for line in found), found
        assert all(line.startswith("aten::sinh") for line in found), found
    finally:
        over._destroy()
        own._destroy()
    assert dispatch_table.changed(before) == []  # (put back as it was)


def test_shape_only_keys_are_left_out():
    dump = ("name: aten::x\nMeta: registered at a.py:1 :: (none) [ boxed ]\n"
            "CPU: registered at b.cpp:2 :: (none) [ boxed ]\nCPU (inactive): registered at c.cpp:3 :: (none)\n")
    assert dispatch_table._kernels(dump) == {"CPU: registered at b.cpp:2 :: (none) [ boxed ]",
                                             "CPU (inactive): registered at c.cpp:3 :: (none)"}


def test_the_namespaces_watched_are_atens_prims_and_the_references():
    assert dispatch_table.namespaces({"addmm": 1, "torchvision::nms": 2}) == {"aten", "prims", "torchvision"}
