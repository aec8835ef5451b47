"""bench/networks: the blocks of current architectures a user would bring (LLaMA, GPT-2, ViT, Swin,
ConvNeXt, ...) stay covered by the built-in coder. Each is traced, planned and coded on the CPU
(no GPU: the candidate's files are made, not run); the H200 runs are in bench/results."""

from __future__ import annotations

from pathlib import Path

import pytest

from stitchcuda.agents.coder import builtin
from stitchcuda.agents.coder.model_new import CU_FILE, PY_FILE
from stitchcuda.agents.plan import planner
from stitchcuda.task import find_task

NETWORKS = sorted((Path(__file__).resolve().parent.parent / "bench" / "networks").glob("*.py"))


def test_the_suite_is_there():
    assert len(NETWORKS) >= 13, NETWORKS


@pytest.mark.parametrize("path", NETWORKS, ids=[p.stem for p in NETWORKS])
def test_each_network_is_planned_and_coded(path):
    task = find_task(str(path))
    plan = planner.plan(task)
    assert plan.supported, plan.unsupported
    cand = builtin.code(task, plan)
    assert cand is not None and cand.files[CU_FILE] and "class ModelNew" in cand.files[PY_FILE]
