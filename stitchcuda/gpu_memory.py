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
# What a worker holds beyond its tensors: cuBLAS/cuDNN workspaces, torch.compile's and the
# candidate's libraries and the allocator's rounding (level 1's matrix products of 0.2 GiB peaked at
# 2.9 GiB reserved on the H100, 18c2bf8), and its CUDA context (about 0.5 GiB, which the peak the
# worker reports, max_memory_reserved, leaves out).
WORKER_OVERHEAD = 5 * GIB // 2
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


def batch_factor(arg_bytes: int, gpu_bytes: int | None) -> float:
    """How many times the traced batch the Verifier's largest batch-size check may hold. The worker
    (agents/verify/worker.py, by stitchcuda.inputs' constants) checks a dynamic-batch candidate past traced + 1 only at sizes n whose
    set, beside the traced one and with FAR_BATCH_MARGIN to spare, fits its lean-input share of the
    card: twice the batch, and a far size drawn up to three times it. 1 where the GPU's size is not
    known or only the near sizes fit."""
    if not gpu_bytes or arg_bytes <= 0:
        return 1.0
    from stitchcuda.inputs import FAR_BATCH_MARGIN, LEAN_INPUT_FRACTION

    most = (gpu_bytes // LEAN_INPUT_FRACTION) / (FAR_BATCH_MARGIN * arg_bytes) - 1  # n / traced that fits
    return min(3.0, most) if most >= 2 else 1.0


def expected_bytes(graph: list[dict[str, Any]], gpu_bytes: int | None = None) -> int:
    """GPU bytes one verification of a module with this traced graph is expected to hold at its peak,
    on a GPU of `gpu_bytes` (None: not known).

    Fitted to the workers' measured peaks (max_memory_reserved) on level 1 on an H100 (18c2bf8,
    bench/results/2026-12-06-h100-l1-resumed-strips-ab-18c2bf8.md), where a first form (two copies of
    the inputs, three of the outputs) was under every peak, by 2.1x at the median:
    - five copies of the inputs: the reference's and the candidate's, the kept first set, a fresh set
      being made and the allocator's cached block of the last (column sums of 8 GiB: 43 GiB);
    - four of the outputs (elementwise streams of 6 GiB in and out: 55.5 GiB) and two of each further
      intermediate the reference makes (at most all of them, where none is freed early);
    - three of the weights: both modules' and, while the candidate loads them, a copy of the reference's
      (level 2's 55, 56 and 59, 4 GiB of weights each, ran out of memory in that phase on the H100);
    - the tensors that grow with the batch, times the largest batch-size check (`batch_factor`: level
      1's batched product checked at 2.8x its batch held 25.9 GiB).
    Convolutions hold more where the card has it free (cuDNN's benchmark mode sizes its workspace by
    the free memory: a depthwise convolution of 1 GiB in and out peaked at 41.5 GiB): no fixed figure
    covers them, and a verification that runs out of memory beside others is run again alone at once
    (stitchcuda/bench.py). The fp64 referee, which only runs on a miss, is left out likewise."""
    # (here: agents.graph imports torch, and the verifier imports this module at its start)
    from stitchcuda.agents.graph import iter_refs

    by_name = {n.get("name"): n for n in graph}
    args = weights = outs = inter = 0
    out_names: set[str] = set()
    for node in graph:
        op = node.get("op")
        if op == "input":
            if node.get("kind") == "arg":
                args += _node_bytes(node)
            else:
                weights += _node_bytes(node)
        elif op == "output":
            refs = [r for r in iter_refs(node.get("args")) if r in by_name]
            outs += sum(_node_bytes(by_name[r]) for r in refs)
            out_names.update(refs)
    for node in graph:
        if node.get("op") not in ("input", "output") and not node.get("view") and node.get("name") not in out_names:
            inter += _node_bytes(node)
    grows = 5 * args + 4 * outs + 2 * inter
    return int(batch_factor(args, gpu_bytes) * grows) + 3 * weights + WORKER_OVERHEAD


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
