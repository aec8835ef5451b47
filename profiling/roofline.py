"""Roofline and Speed-of-Light classification of one profiled kernel.

Input is one kernel's metrics as `ncu.parse_csv` returns them (NCU metric name -> value in SI base
units: seconds, bytes, percent). A kernel is
- memory-bound when a memory unit's Speed-of-Light % is high and above the SM's,
- compute-bound when the SM (or one pipe) % is high and dominates,
- latency-bound when neither reaches HIGH_PCT.

HIGH_PCT is 60: Nsight Compute's own SOL rule calls a kernel's utilisation low when both compute
and memory throughput sit under 60% of peak, and points at latency (too few warps, long dependency
chains, tiny grids) instead of a throughput limit. Above 60% the larger of the two is the roof the
kernel is pressing against; between 60% and ~80% there is still headroom, which the estimated gain
(time over the roofline time) reports rather than the label.

The roofs (`Peaks`) are those of the device the kernel ran on: its Target (stitchcuda.target), read
from the device attributes Nsight Compute reports with the counters. The memory roof is what a copy
was measured to reach on that model where the spec table has it, else its theoretical bandwidth.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from stitchcuda.target import Target

HIGH_PCT = 60.0
# Under this a launch costs about as much as its work: a launch-bound kernel, not a slow one.
TINY_KERNEL_S = 5e-6

# NCU metric names (Nsight Compute "Metrics Reference" and the SpeedOfLight/Occupancy sections).
TIME = "gpu__time_duration.sum"
DRAM_BYTES = "dram__bytes.sum"
DRAM_READ = "dram__bytes_read.sum"
DRAM_WRITE = "dram__bytes_write.sum"
MEM_PCT = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
SM_PCT = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
LEVEL_PCT = {
    "dram": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "l2": "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "l1": "l1tex__throughput.avg.pct_of_peak_sustained_active",
}
PIPE_PCT = {
    "fma": "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
    "alu": "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active",
    "fp64": "sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_active",
    "tensor": "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
    "lsu": "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active",
}
OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
REGISTERS = "launch__registers_per_thread"
WAVES = "launch__waves_per_multiprocessor"
GRID = "launch__grid_size"
BLOCK = "launch__block_size"
# Per-thread instruction counts; an FMA is two FLOPs.
FLOP_OPS = {
    "sm__sass_thread_inst_executed_op_ffma_pred_on.sum": ("fp32", 2),
    "sm__sass_thread_inst_executed_op_fadd_pred_on.sum": ("fp32", 1),
    "sm__sass_thread_inst_executed_op_fmul_pred_on.sum": ("fp32", 1),
    "sm__sass_thread_inst_executed_op_hfma_pred_on.sum": ("fp16", 2),
    "sm__sass_thread_inst_executed_op_hadd_pred_on.sum": ("fp16", 1),
    "sm__sass_thread_inst_executed_op_hmul_pred_on.sum": ("fp16", 1),
    "sm__sass_thread_inst_executed_op_dfma_pred_on.sum": ("fp64", 2),
    "sm__sass_thread_inst_executed_op_dadd_pred_on.sum": ("fp64", 1),
    "sm__sass_thread_inst_executed_op_dmul_pred_on.sum": ("fp64", 1),
}
# Launch statistics for the hover and the Coder (not for the classification): shared memory per
# block and the occupancy the launch allows. Collected when this ncu knows them (ncu.py retries
# without them otherwise).
SHARED_STATIC = "launch__shared_mem_per_block_static"
SHARED_DYNAMIC = "launch__shared_mem_per_block_dynamic"
THEORETICAL_OCCUPANCY = "sm__maximum_warps_per_active_cycle_pct"
LAUNCH_EXTRAS = [SHARED_STATIC, SHARED_DYNAMIC, THEORETICAL_OCCUPANCY]
METRICS = sorted(
    {TIME, DRAM_BYTES, MEM_PCT, SM_PCT, OCCUPANCY, REGISTERS, WAVES, GRID, BLOCK}
    | set(LEVEL_PCT.values())
    | set(PIPE_PCT.values())
    | set(FLOP_OPS)
)


@dataclass(frozen=True)
class Peaks:
    """Per-second peaks of one GPU: bytes for DRAM, FLOPs for each math kind (dense)."""

    name: str
    dram_bytes_per_s: float
    flops: Mapping[str, float]  # fp32 (CUDA cores), tf32/fp16/bf16 (tensor cores), fp64
    source: str = "datasheet"

    def measured(self, **over: float) -> Peaks:
        """These peaks with some replaced by measured figures, e.g. dram_bytes_per_s=2.964e12."""
        flops = dict(self.flops)
        dram = over.pop("dram_bytes_per_s", self.dram_bytes_per_s)
        flops.update(over)
        return replace(self, dram_bytes_per_s=dram, flops=flops, source="measured")

    @classmethod
    def of(cls, target: Target) -> Peaks:
        """The roofs of a Target: its FLOP/s peaks, and the DRAM bandwidth a kernel was measured to
        reach on that model where the table has it (else the device's theoretical figure)."""
        source = target.source
        if target.measured_dram_bytes_per_s:
            source += f"; DRAM: {target.measured_dram_bytes_per_s / 1e12:.3f} TB/s measured on an {target.spec}"
        return cls(target.name, target.roofline_dram_bytes_per_s, target.flops(), source)

    def as_dict(self) -> dict[str, object]:
        """For Finding.data["peaks"]: which roofs a finding was judged against (results page, hover)."""
        return {"name": self.name, "dram_bytes_per_s": self.dram_bytes_per_s, "flops": dict(self.flops),
                "source": self.source}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Peaks:
        return cls(str(d["name"]), float(d["dram_bytes_per_s"]), {k: float(v) for k, v in d["flops"].items()},
                   str(d.get("source", "")))


def peaks_for(metrics: Mapping[str, Any], device_name: str | None = None) -> Peaks:
    """The roofs of the device a kernel ran on: from Nsight Compute's device attributes among its
    metrics, else (hand-made metrics, an ncu that did not report them) this process's target."""
    return Peaks.of(Target.from_ncu(metrics, device_name) or Target.current())


@dataclass
class Classification:
    bound: str  # memory | compute | latency
    level: str  # dram | l2 | l1 (memory), a pipe or "sm" (compute), "launch"/"occupancy" (latency)
    time_s: float
    bytes: float
    flops: float
    bytes_per_s: float
    flops_per_s: float
    intensity: float | None  # FLOP per DRAM byte; None when no DRAM traffic was counted
    ridge: float  # intensity where the roofline turns: peak FLOP/s / peak bytes/s
    memory_pct: float
    compute_pct: float
    roofline_s: float  # the time the roofline allows for this work
    gain_s: float  # time over the roofline: what a perfect kernel would save
    reasons: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def _get(m: Mapping[str, float], key: str) -> float | None:
    v = m.get(key)
    return float(v) if isinstance(v, int | float) else None


def classify(metrics: Mapping[str, float], peaks: Peaks | None = None) -> Classification:
    """`peaks`: the roofs to judge against; by default those of the device the metrics came from."""
    if peaks is None:
        peaks = peaks_for(metrics)
    time_s = _get(metrics, TIME) or 0.0
    dram = _get(metrics, DRAM_BYTES)
    if dram is None:
        dram = (_get(metrics, DRAM_READ) or 0.0) + (_get(metrics, DRAM_WRITE) or 0.0)
    by_kind: dict[str, float] = {}
    for key, (kind, per) in FLOP_OPS.items():
        by_kind[kind] = by_kind.get(kind, 0.0) + per * (_get(metrics, key) or 0.0)
    flops = sum(by_kind.values())
    pipes = {p: v for p, k in PIPE_PCT.items() if (v := _get(metrics, k)) is not None}
    # Tensor-core work is not in the per-thread FLOP counters; when that pipe leads, its peak applies.
    kind = "fp16" if pipes.get("tensor", 0.0) > max(pipes.get("fma", 0.0), 1.0) else "fp32"
    if kind == "fp32" and by_kind.get("fp64", 0.0) > by_kind.get("fp32", 0.0):
        kind = "fp64"
    peak_flops = peaks.flops[kind]
    bps = dram / time_s if time_s > 0 else 0.0
    fps = flops / time_s if time_s > 0 else 0.0

    levels = {lv: v for lv, k in LEVEL_PCT.items() if (v := _get(metrics, k)) is not None}
    mem_pct = _get(metrics, MEM_PCT)
    if mem_pct is None:
        mem_pct = max(levels.values()) if levels else 100.0 * bps / peaks.dram_bytes_per_s
    sm_pct = _get(metrics, SM_PCT)
    if sm_pct is None:
        sm_pct = max(pipes.values()) if pipes else 100.0 * fps / peak_flops
    compute_pct = max([sm_pct, *pipes.values()])
    roofline_s = max(dram / peaks.dram_bytes_per_s, flops / peak_flops)
    reasons: list[str] = []

    if max(mem_pct, compute_pct) < HIGH_PCT:
        bound = "latency"
        reasons.append(
            f"memory {mem_pct:.0f}% and compute {compute_pct:.0f}% of peak are both under {HIGH_PCT:.0f}%"
        )
        waves, occ = _get(metrics, WAVES), _get(metrics, OCCUPANCY)
        level = "occupancy"
        if time_s and time_s < TINY_KERNEL_S:
            level = "launch"
            reasons.append(f"{time_s * 1e6:.1f} us is launch-overhead scale: fuse it with its neighbours")
        if waves is not None and waves < 1:
            level = "launch" if level == "launch" else "grid"
            reasons.append(f"{waves:.2f} waves: the grid does not fill the SMs once")
        if occ is not None and occ < 50:
            reasons.append(f"achieved occupancy {occ:.0f}%: too few warps to hide latency")
        regs = _get(metrics, REGISTERS)
        if regs is not None and regs > 128:
            reasons.append(f"{regs:.0f} registers per thread limit occupancy")
    elif mem_pct >= compute_pct:
        bound = "memory"
        level = max(levels, key=lambda k: levels[k]) if levels else "dram"
        reasons.append(f"memory {mem_pct:.0f}% of peak (highest: {level}) over compute {compute_pct:.0f}%")
        if level != "dram" and levels:
            reasons.append(
                f"{level} leads DRAM ({levels.get('dram', 0.0):.0f}%): improve on-chip reuse/access pattern"
            )
    else:
        bound = "compute"
        # The busiest pipe says more than the SM aggregate about what to change.
        level = max(pipes, key=lambda k: pipes[k]) if pipes else "sm"
        reasons.append(f"compute {compute_pct:.0f}% of peak (pipe: {level}) over memory {mem_pct:.0f}%")
        if kind == "fp32" and level == "fma" and flops:
            reasons.append("fp32 FMA pipe saturates: tensor cores (TF32/bf16) have ~7x the peak")
    return Classification(
        bound=bound,
        level=level,
        time_s=time_s,
        bytes=dram,
        flops=flops,
        bytes_per_s=bps,
        flops_per_s=fps,
        intensity=flops / dram if dram > 0 else None,
        ridge=peak_flops / peaks.dram_bytes_per_s,
        memory_pct=mem_pct,
        compute_pct=compute_pct,
        roofline_s=roofline_s,
        gain_s=max(0.0, time_s - roofline_s),
        reasons=reasons,
    )
