"""GPU memory as the bench shares it among workers on one GPU.

Eight workers on an 80 GB H100 ran level 1's large problems out of memory beside each other (11 of
64 at 20c4f6d, bench/results/2026-12-06-h100-l2-full-l1-partial-20c4f6d.md): each problem's
verification holds several copies of its inputs and outputs, and a few of them at once pass the
card. The bench therefore admits a verification onto a GPU only while the bytes it is expected to
need fit beside those already admitted (`MemoryShares`), in the order asked (a large problem is not
passed over forever by small ones), and one expected to need more than the card runs alone.

The expectation (`expected_bytes`) is read off the traced graph before anything runs, and raised to
what an earlier verdict of the same problem measured (`Verdict.gpu_peak_mb`). It is a scheduling
figure, not a limit: a verification that runs out of memory beside others anyway is run again at
once with the GPU to itself (stitchcuda/bench.py)."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import threading
from collections import deque
from collections.abc import Iterator
from typing import Any

GIB = 1 << 30
# What a worker holds beyond its tensors: the CUDA context, cuBLAS/cuDNN workspaces, the candidate's
# library and the allocator's rounding (a worker with no tensors of note sits near 0.6-1 GiB).
WORKER_OVERHEAD = 1 * GIB
# The size of a GPU whose memory could not be read: every need fits, and `alone` still waits for the rest.
UNKNOWN_CAPACITY = 1 << 62

_ITEMSIZE = {"float64": 8, "complex64": 8, "int64": 8, "uint64": 8, "float32": 4, "int32": 4, "uint32": 4,
             "complex128": 16, "float16": 2, "bfloat16": 2, "int16": 2, "uint16": 2, "int8": 1, "uint8": 1,
             "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1}


def _node_bytes(node: dict[str, Any]) -> int:
    shape = node.get("shape")
    if not isinstance(shape, list | tuple) or not all(isinstance(d, int) for d in shape):
        return 0
    n = 1
    for d in shape:
        n *= d
    return n * _ITEMSIZE.get(str(node.get("dtype", "")), 4)


def expected_bytes(graph: list[dict[str, Any]]) -> int:
    """GPU bytes one verification of a module with this traced graph is expected to hold at its peak.

    The worker runs the reference and the candidate on copies of the inputs of their own (2x the
    inputs), holds both modules' weights and, while it loads the candidate's, a copy of the
    reference's (3x: level 2's 55, 56 and 59, 4 GiB of weights each, ran out of memory in that phase
    beside seven workers on the H100), the reference's and the candidate's outputs and the
    first input set's kept results (3x the outputs), and the intermediates the reference makes (at
    most all of them, where none is freed early: a bound). The fp64 referee, which only runs on a
    miss, is left out: where it does not fit, the run alone catches it."""
    # (here: agents.graph imports torch, and the verifier imports this module at its start)
    from stitchcuda.agents.graph import iter_refs

    by_name = {n.get("name"): n for n in graph}
    args = weights = outs = inter = 0
    for node in graph:
        op = node.get("op")
        if op == "input":
            if node.get("kind") == "arg":
                args += _node_bytes(node)
            else:
                weights += _node_bytes(node)
        elif op == "output":
            outs += sum(_node_bytes(by_name[r]) for r in iter_refs(node.get("args")) if r in by_name)
        elif not node.get("view"):
            inter += _node_bytes(node)
    return 2 * args + 3 * weights + 3 * outs + inter + WORKER_OVERHEAD


def device_memory_bytes(device: str) -> int | None:
    """The free memory of the GPU the CUDA_VISIBLE_DEVICES entry `device` names (an index or a UUID)
    as the bench starts, so what other programs hold on the user's GPU is not handed out; read with
    nvidia-smi so that the bench's own process makes no CUDA context. None where it cannot tell (no
    nvidia-smi, a MIG slice): every need then fits, and a run alone still waits for the rest."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run([smi, "--query-gpu=memory.free", "--format=csv,noheader,nounits", "-i", device],
                             capture_output=True, text=True, timeout=30, check=True).stdout.split()
        return int(float(out[0])) << 20 if out else None
    except (subprocess.SubprocessError, OSError, ValueError):
        return None


class MemoryShares:
    """One GPU's memory handed out in bytes: `held(need)` waits until `need` fits beside what is held
    (or nothing is held, for a need larger than the card), first come first served."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.used = 0
        self.holders = 0
        self._queue: deque[object] = deque()
        self._cond = threading.Condition()

    @property
    def waiting(self) -> int:
        """Verifications asking for a share and not yet admitted."""
        with self._cond:
            return len(self._queue)

    def _fits(self, need: int) -> bool:
        return self.holders == 0 or self.used + need <= self.capacity

    @contextlib.contextmanager
    def held(self, need: int) -> Iterator[None]:
        """`need` bytes of this GPU for the block; more than the card means the GPU alone."""
        need = min(max(0, need), self.capacity)
        ticket = object()
        with self._cond:
            self._queue.append(ticket)
            self._cond.wait_for(lambda: self._queue[0] is ticket and self._fits(need))
            self._queue.popleft()
            self.used += need
            self.holders += 1
            self._cond.notify_all()  # the next in line may fit too
        try:
            yield
        finally:
            with self._cond:
                self.used -= need
                self.holders -= 1
                self._cond.notify_all()

    def alone(self) -> contextlib.AbstractContextManager[None]:
        """The whole GPU: after those admitted before have finished, and before anyone after."""
        return self.held(self.capacity)
