"""The reference's profile is kept per file content (profiling/cache.py): the second optimisation of an
unchanged module reuses it, a changed one profiles again, a failed profile is never kept."""

from __future__ import annotations

from pathlib import Path

from stitchcuda.profiling import cache, reference
from stitchcuda.task import find_task

MODULE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x @ x.t()) + {k}


def get_init_inputs():
    return []


def get_inputs():
    return [torch.randn(64, 64)]
"""


def write(tmp_path: Path, k: int) -> Path:
    path = tmp_path / "block.py"
    path.write_text(MODULE.format(k=k))
    return path


def test_second_profile_of_the_same_file_comes_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("STITCHCUDA_CACHE", str(tmp_path / "cache"))
    task = find_task(write(tmp_path, 1))
    first = reference.profile_in_subprocess(task, device="cpu", iterations=1)
    assert first.clock != "none" and first.ops, first.notes
    assert not any("from the cache" in n for n in first.notes)
    assert len(list(cache.folder().glob("*.json"))) == 1
    again = reference.profile_in_subprocess(task, device="cpu", iterations=1)
    assert any("from the cache" in n for n in again.notes)
    assert [o.op for o in again.ops] == [o.op for o in first.ops]
    assert again.total_us == first.total_us  # the stored figures, not a new measurement
    # Another iteration count is another profile.
    assert cache.load(task, "torch.profiler", "cpu", 2) is None


def test_a_changed_file_is_profiled_again(tmp_path, monkeypatch):
    monkeypatch.setenv("STITCHCUDA_CACHE", str(tmp_path / "cache"))
    task = find_task(write(tmp_path, 1))
    reference.profile_in_subprocess(task, device="cpu", iterations=1)
    write(tmp_path, 2)
    changed = reference.profile_in_subprocess(task, device="cpu", iterations=1)
    assert not any("from the cache" in n for n in changed.notes)
    assert len(list(cache.folder().glob("*.json"))) == 2


def test_a_failed_profile_is_not_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("STITCHCUDA_CACHE", str(tmp_path / "cache"))
    path = write(tmp_path, 1)
    path.write_text(path.read_text().replace("return [torch.randn(64, 64)]", "raise RuntimeError('no inputs')"))
    task = find_task(path)
    failed = reference.profile_in_subprocess(task, device="cpu", iterations=1)
    assert failed.clock == "none"
    assert not cache.folder().exists() or not list(cache.folder().glob("*.json"))
