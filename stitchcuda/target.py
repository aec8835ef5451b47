"""The GPU that kernels are generated for and judged against: one `Target`.

Three consumers, one description: the emitters size grids by its SM count and resident threads,
the roofline behind every Nsight Compute finding uses its peaks, and the LLM prompt and `stitchcuda
doctor` name it. What a device reports (name, compute capability, SMs, shared memory, L2, threads,
and DRAM bandwidth from its memory clock and bus width) comes from the device; what it cannot report
(FLOP/s peaks of its CUDA and tensor cores) comes from SPECS, a table of datasheet figures keyed by
device name and compute capability. A device missing from the table gets peaks estimated from the
nearest row, scaled by SM count, and says so in `notes`.

Where it comes from (`Target.current()`): STITCHCUDA_TARGET names a row (e.g. "h100", "h200",
"a100", "l4", "rtx4090": coding for a GPU on another machine), else the current CUDA device, else a
default (no GPU seen: CI, a laptop) recorded as such in `source`. Profiles never use the default:
Nsight Compute reports the attributes of the device each kernel ran on, and `from_ncu` reads them.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

ENV = "STITCHCUDA_TARGET"

KB = 1024
MB = 1024 * 1024


@dataclass(frozen=True)
class ArchLimits:
    """Per-SM limits of one compute capability (CUDA C++ Programming Guide, "Technical
    Specifications per Compute Capability"): what a named target without a device to ask gets."""

    max_threads_per_sm: int
    shared_per_sm: int  # bytes
    shared_per_block_optin: int  # bytes: the most one block may opt in to
    fp64_per_fp32: float  # FP64 to FP32 results per clock per SM ("Arithmetic Instructions" table)


ARCH: dict[tuple[int, int], ArchLimits] = {
    (7, 0): ArchLimits(2048, 96 * KB, 96 * KB, 1 / 2),
    (7, 5): ArchLimits(1024, 64 * KB, 64 * KB, 1 / 32),
    (8, 0): ArchLimits(2048, 164 * KB, 163 * KB, 1 / 2),
    (8, 6): ArchLimits(1536, 100 * KB, 99 * KB, 1 / 64),
    (8, 9): ArchLimits(1536, 100 * KB, 99 * KB, 1 / 64),
    (9, 0): ArchLimits(2048, 228 * KB, 227 * KB, 1 / 2),
}


@dataclass(frozen=True)
class Spec:
    """One row of the table: a GPU model's datasheet figures (dense, no sparsity)."""

    key: str  # what STITCHCUDA_TARGET names it by
    name: str
    tokens: tuple[str, ...]  # words that all appear in the device's name (lower case)
    capability: tuple[int, int]
    sm_count: int
    l2_bytes: int
    dram_bytes_per_s: float
    fp32: float  # FLOP/s: CUDA cores
    fp64: float
    tf32: float  # tensor cores; where there are none for a type, the CUDA cores' fp32 peak
    fp16: float
    bf16: float
    source: str  # which datasheet or whitepaper the figures are from
    # DRAM bandwidth a kernel was measured to reach on this model (a device-to-device copy): the
    # roofline's memory roof where known, the datasheet figure otherwise.
    measured_dram_bytes_per_s: float | None = None
    aliases: tuple[str, ...] = ()


_H100_DS = "NVIDIA H100 Tensor Core GPU datasheet (dense: half the sparsity figures)"
_H200_DS = "NVIDIA H200 Tensor Core GPU datasheet (dense: half the sparsity figures)"
_A100_DS = "NVIDIA A100 Tensor Core GPU datasheet (dense)"
_ADA_WP = "NVIDIA Ada GPU Architecture whitepaper, Appendix A (dense, FP32 accumulate)"
_GA102_WP = "NVIDIA Ampere GA102 GPU Architecture whitepaper, Appendix A (dense, FP32 accumulate)"
_FP64_GUIDE = "FP64 from the FP64:FP32 rate of the CUDA C++ Programming Guide"

# A device takes the row with the most of its words (H100 NVL: "h100 nvl" over "h100"); a device
# known only by its numbers takes the first row of its capability and SM count with the nearest
# bandwidth, so the SXM parts come before the NVL ones that tie with them.
SPECS: tuple[Spec, ...] = (
    Spec("h100-sxm", "H100 SXM", ("h100",), (9, 0), 132, 50 * MB, 3.35e12,
         67e12, 34e12, 494e12, 989e12, 989e12, _H100_DS,
         # A device-to-device copy on the lent H100 SXM (shared/notes/gpu-machine.md).
         measured_dram_bytes_per_s=2.964e12, aliases=("h100",)),
    Spec("h100-pcie", "H100 PCIe", ("h100", "pcie"), (9, 0), 114, 50 * MB, 2.0e12,
         51e12, 26e12, 378e12, 756e12, 756e12, _H100_DS),
    Spec("h100-nvl", "H100 NVL", ("h100", "nvl"), (9, 0), 132, 50 * MB, 3.9e12,
         60e12, 30e12, 417e12, 835e12, 835e12, _H100_DS),
    # The lent H200 reports 60 MiB of L2 and a 6016-bit bus at 3201 MHz (4.81 TB/s).
    Spec("h200", "H200 SXM", ("h200",), (9, 0), 132, 60 * MB, 4.8e12,
         67e12, 34e12, 494e12, 989e12, 989e12, _H200_DS,
         # A device-to-device copy on the lent H200 (2 GiB, bytes read and written, median of 20,
         # 2026-11-25), measured as the H100's figure was.
         measured_dram_bytes_per_s=4.22e12, aliases=("h200-sxm",)),
    Spec("h200-nvl", "H200 NVL", ("h200", "nvl"), (9, 0), 132, 60 * MB, 4.8e12,
         60e12, 30e12, 417e12, 835e12, 835e12, _H200_DS),
    Spec("a100", "A100 80GB SXM", ("a100",), (8, 0), 108, 40 * MB, 2.039e12,
         19.5e12, 9.7e12, 156e12, 312e12, 312e12, _A100_DS, aliases=("a100-80gb",)),
    Spec("a100-40gb", "A100 40GB", ("a100", "40gb"), (8, 0), 108, 40 * MB, 1.555e12,
         19.5e12, 9.7e12, 156e12, 312e12, 312e12, _A100_DS),
    Spec("l40s", "L40S", ("l40s",), (8, 9), 142, 96 * MB, 864e9,
         91.6e12, 91.6e12 / 64, 183e12, 362e12, 362e12, f"NVIDIA L40S datasheet (dense); {_FP64_GUIDE}"),
    Spec("l4", "L4", ("l4",), (8, 9), 58, 48 * MB, 300e9,
         30.3e12, 30.3e12 / 64, 60e12, 121e12, 121e12, f"NVIDIA L4 datasheet (dense); {_FP64_GUIDE}"),
    Spec("rtx4090", "GeForce RTX 4090", ("4090",), (8, 9), 128, 72 * MB, 1008e9,
         82.6e12, 82.6e12 / 64, 82.6e12, 165.2e12, 165.2e12, f"{_ADA_WP}; {_FP64_GUIDE}"),
    Spec("rtx3090", "GeForce RTX 3090", ("3090",), (8, 6), 82, 6 * MB, 936e9,
         35.6e12, 35.6e12 / 64, 35.6e12, 71e12, 71e12, f"{_GA102_WP}; {_FP64_GUIDE}"),
    Spec("a10", "A10", ("a10",), (8, 6), 72, 6 * MB, 600e9,
         31.2e12, 31.2e12 / 64, 62.5e12, 125e12, 125e12, f"NVIDIA A10 datasheet (dense); {_FP64_GUIDE}"),
    # Volta and Turing have no TF32 or BF16 tensor cores: those matmuls run at the FP32 peak.
    Spec("v100", "V100 SXM2", ("v100",), (7, 0), 80, 6 * MB, 900e9,
         15.7e12, 7.8e12, 15.7e12, 125e12, 15.7e12, "NVIDIA V100 Tensor Core GPU datasheet (SXM2)"),
    Spec("t4", "T4", ("t4",), (7, 5), 40, 4 * MB, 320e9,
         8.1e12, 8.1e12 / 32, 8.1e12, 65e12, 8.1e12, f"NVIDIA T4 datasheet; {_FP64_GUIDE}"),
)

# Without a GPU or a named target, kernels are sized for this row: sm_80 is the oldest
# architecture the generated code needs (bf16 storage) and its code runs on every newer GPU, and an
# A100's SMs and shared memory are at or under those of the datacenter parts after it.
DEFAULT_KEY = "a100"

# Tolerated gap between a row's datasheet bandwidth and the one a device's clock and bus imply
# before the device's figure is distrusted (a misreported clock).
_DRAM_SANITY = 2.0


@dataclass(frozen=True)
class Target:
    name: str  # the device's own name, or the row's for a named target
    capability: tuple[int, int]
    sm_count: int
    shared_per_block_optin: int  # bytes
    shared_per_sm: int  # bytes
    l2_bytes: int
    max_threads_per_sm: int
    dram_bytes_per_s: float  # from the memory clock and bus width where reported, else the table
    fp32_flops: float  # FLOP/s, dense
    fp64_flops: float
    tf32_flops: float
    fp16_flops: float
    bf16_flops: float
    measured_dram_bytes_per_s: float | None = None  # what a copy reached on this model, where known
    spec: str = ""  # the table row the peaks are from ("H100 SXM"); "" where estimated
    source: str = ""  # how this target was found: a device, STITCHCUDA_TARGET, the default
    notes: tuple[str, ...] = ()  # estimates and fallbacks, for doctor and the results page

    @property
    def arch(self) -> str:
        return f"sm_{self.capability[0]}{self.capability[1]}"

    @property
    def roofline_dram_bytes_per_s(self) -> float:
        """The memory roof: what a kernel can reach where measured, else the theoretical peak."""
        return self.measured_dram_bytes_per_s or self.dram_bytes_per_s

    def flops(self) -> dict[str, float]:
        return {"fp32": self.fp32_flops, "fp64": self.fp64_flops, "tf32": self.tf32_flops,
                "fp16": self.fp16_flops, "bf16": self.bf16_flops}

    def describe(self) -> str:
        """One line: what it is and where its figures come from."""
        shared = self.shared_per_block_optin // KB
        text = (f"{self.name} ({self.arch}, {self.sm_count} SMs, {shared} KiB shared/block, "
                f"{self.l2_bytes / MB:.0f} MiB L2, {self.dram_bytes_per_s / 1e12:.2f} TB/s, "
                f"{self.fp32_flops / 1e12:.1f} fp32 / {self.tf32_flops / 1e12:.0f} tf32 / "
                f"{self.fp16_flops / 1e12:.0f} fp16 TFLOP/s)")
        return f"{text}; {self.source}" if self.source else text

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["arch"] = self.arch
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Target:
        names = {f.name for f in dataclasses.fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        kw["capability"] = tuple(kw["capability"])
        kw["notes"] = tuple(kw.get("notes", ()))
        return cls(**kw)

    # -----------------------------------------------------------------------------------------
    # Where a Target comes from

    @classmethod
    def named(cls, key: str) -> Target:
        """A table row by key or alias ("h100", "H200", "rtx4090"), for a GPU not on this machine."""
        spec = spec_by_key(key)
        if spec is None:
            known = ", ".join(s.key for s in SPECS)
            raise ValueError(f"no GPU named {key!r} in the spec table (known: {known})")
        return _from_spec(spec, source=f"named target {key!r} (spec table, no device queried)")

    @classmethod
    def default(cls, why: str = "no CUDA GPU seen and STITCHCUDA_TARGET unset") -> Target:
        row = spec_by_key(DEFAULT_KEY)
        assert row is not None
        t = _from_spec(row, source=f"default: {why}; sized for an {row.name} (sm_80 code runs on "
                                   f"every newer GPU; set {ENV} to name yours)")
        return dataclasses.replace(t, name=f"default target ({row.name} figures)")

    @classmethod
    def from_properties(
        cls, props: Any, *, attribute: Callable[[int], int | None] | None = None, source: str = ""
    ) -> Target:
        """The Target of a device from its properties (torch.cuda.get_device_properties, or any object
        with those names); `attribute(cu_device_attribute)` answers what the properties lack."""

        def prop(name: str, attr: int) -> int | None:
            v = getattr(props, name, None)
            if isinstance(v, int) and v > 0:
                return v
            return attribute(attr) if attribute is not None else None

        return _build(
            name=str(props.name),
            capability=(int(props.major), int(props.minor)),
            sm_count=int(props.multi_processor_count),
            shared_optin=prop("shared_memory_per_block_optin", _CU_SHARED_OPTIN),
            shared_sm=prop("shared_memory_per_multiprocessor", _CU_SHARED_SM),
            l2=prop("L2_cache_size", _CU_L2),
            threads=prop("max_threads_per_multi_processor", _CU_THREADS_SM),
            mem_clock_khz=prop("memory_clock_rate", _CU_MEM_CLOCK),
            bus_bits=prop("memory_bus_width", _CU_BUS_WIDTH),
            source=source,
        )

    @classmethod
    def from_ncu(cls, metrics: Mapping[str, Any], name: str | None = None) -> Target | None:
        """The Target of the device a profiled kernel ran on, from the `device__attribute_*` values of
        Nsight Compute's raw page (numbers; the display name, a string, is passed apart). None where
        the page has no device attributes."""

        def attr(key: str) -> int | None:
            v = metrics.get(f"device__attribute_{key}")
            return int(v) if isinstance(v, int | float) and v > 0 else None

        major, sms = attr("compute_capability_major"), attr("multiprocessor_count")
        if major is None or sms is None:
            return None
        return _build(
            name=name or "",
            capability=(major, int(metrics.get("device__attribute_compute_capability_minor") or 0)),
            sm_count=sms,
            shared_optin=attr("max_shared_memory_per_block_optin"),
            shared_sm=attr("max_shared_memory_per_multiprocessor"),
            l2=attr("l2_cache_size"),
            threads=attr("max_threads_per_multiprocessor"),
            mem_clock_khz=attr("memory_clock_rate") or attr("max_mem_frequency_khz"),
            bus_bits=attr("global_memory_bus_width"),
            source="the profiled device (Nsight Compute's device attributes)",
        )

    @classmethod
    def of_device(cls, index: int | None = None) -> Target:
        """The Target of CUDA device `index` (the current one when None), as this process sees it."""
        return _device_target(_current_index() if index is None else index)

    @classmethod
    def current(cls) -> Target:
        """STITCHCUDA_TARGET's row where set, else the current CUDA device, else the default."""
        key = os.environ.get(ENV, "").strip()
        if key:
            try:
                return cls.named(key)
            except ValueError as e:
                return dataclasses.replace(cls.default(f"{ENV}={key!r} is not a known GPU"), notes=(str(e),))
        if _cuda_available():
            try:
                return cls.of_device()
            except Exception as e:  # noqa: BLE001 - a device that cannot be asked is no target
                return cls.default(f"the CUDA device could not be queried ({type(e).__name__}: {e})")
        return cls.default()


# ---------------------------------------------------------------------------------------------
# The table


def _norm_key(key: str) -> str:
    return re.sub(r"[^a-z0-9]", "", key.lower().removeprefix("nvidia"))


def spec_by_key(key: str) -> Spec | None:
    want = _norm_key(key)
    for s in SPECS:
        if want in {_norm_key(k) for k in (s.key, *s.aliases)}:
            return s
    return None


def _tokens(name: str) -> set[str]:
    return set(re.split(r"[^a-z0-9]+", name.lower())) - {""}


def match_spec(name: str, capability: tuple[int, int], sm_count: int, dram: float | None = None) -> Spec | None:
    """The row for a device: of those whose words its name holds (same compute capability), the one
    with the most; with no name, the first of that capability and SM count whose bandwidth is
    nearest the device's (one alone where the bandwidth is unknown)."""
    words = _tokens(name)
    if words:
        named = [s for s in SPECS if s.capability == capability and set(s.tokens) <= words]
        return max(named, key=lambda s: len(s.tokens)) if named else None
    same = [s for s in SPECS if s.capability == capability and s.sm_count == sm_count]
    if not same:
        return None
    if dram is None:
        return same[0] if len(same) == 1 else None
    return min(same, key=lambda s: abs(s.dram_bytes_per_s - dram))


def _nearest_spec(capability: tuple[int, int], sm_count: int) -> Spec:
    """The row to estimate an unknown device from: its compute capability, else the newest one before
    it, else the oldest row; among those, the nearest SM count."""
    caps = sorted({s.capability for s in SPECS})
    below = [c for c in caps if c <= capability]
    cap = capability if capability in caps else (below[-1] if below else caps[0])
    return min((s for s in SPECS if s.capability == cap), key=lambda s: abs(s.sm_count - sm_count))


def _limits(capability: tuple[int, int]) -> ArchLimits:
    if capability in ARCH:
        return ARCH[capability]
    below = [c for c in sorted(ARCH) if c <= capability]
    return ARCH[below[-1] if below else min(ARCH)]


def _from_spec(s: Spec, *, source: str) -> Target:
    lim = _limits(s.capability)
    return Target(
        name=s.name, capability=s.capability, sm_count=s.sm_count,
        shared_per_block_optin=lim.shared_per_block_optin, shared_per_sm=lim.shared_per_sm,
        l2_bytes=s.l2_bytes, max_threads_per_sm=lim.max_threads_per_sm,
        dram_bytes_per_s=s.dram_bytes_per_s, fp32_flops=s.fp32, fp64_flops=s.fp64, tf32_flops=s.tf32,
        fp16_flops=s.fp16, bf16_flops=s.bf16, measured_dram_bytes_per_s=s.measured_dram_bytes_per_s,
        spec=s.name, source=f"{source}; peaks: {s.source}",
    )


def _build(
    *, name: str, capability: tuple[int, int], sm_count: int, shared_optin: int | None, shared_sm: int | None,
    l2: int | None, threads: int | None, mem_clock_khz: int | None, bus_bits: int | None, source: str,
) -> Target:
    """A device's Target: what it reported, the table for the rest."""
    notes: list[str] = []
    # Double data rate: two transfers per memory clock, bus_bits / 8 bytes each (HBM and GDDR alike
    # as the CUDA attributes report them: an H100 SXM's 2619 MHz x 5120 bits gives 3.35 TB/s).
    dram = 2.0 * mem_clock_khz * 1e3 * bus_bits / 8 if mem_clock_khz and bus_bits else None
    spec = match_spec(name, capability, sm_count, dram)
    lim = _limits(capability)
    measured = None
    if spec is not None:
        peaks_from = f"{spec.name} row ({spec.source})"
        scale = 1.0
        if spec.sm_count != sm_count:
            scale = sm_count / spec.sm_count
            notes.append(f"{sm_count} SMs where the {spec.name} row has {spec.sm_count}: FLOP/s peaks scaled to match")
        if dram is None:
            dram = spec.dram_bytes_per_s
        elif not 1 / _DRAM_SANITY <= dram / spec.dram_bytes_per_s <= _DRAM_SANITY:
            notes.append(f"the memory clock and bus imply {dram / 1e12:.2f} TB/s, far from the datasheet's "
                         f"{spec.dram_bytes_per_s / 1e12:.2f}: the datasheet's is used")
            dram = spec.dram_bytes_per_s
        measured = spec.measured_dram_bytes_per_s
        label = spec.name
    else:
        spec = _nearest_spec(capability, sm_count)
        scale = sm_count / spec.sm_count
        who = name or f"sm_{capability[0]}{capability[1]} device"
        peaks_from = (f"estimated from the {spec.name} row ({spec.source}) scaled by SM count "
                      f"{sm_count}/{spec.sm_count}")
        notes.append(f"unknown device {who!r}: FLOP/s peaks {peaks_from}")
        if dram is None:
            dram = spec.dram_bytes_per_s
            notes.append(f"DRAM bandwidth not reported: the {spec.name} row's {dram / 1e12:.2f} TB/s")
        label = ""
    return Target(
        name=name or spec.name,
        capability=capability,
        sm_count=sm_count,
        shared_per_block_optin=shared_optin or lim.shared_per_block_optin,
        shared_per_sm=shared_sm or lim.shared_per_sm,
        l2_bytes=l2 or spec.l2_bytes,
        max_threads_per_sm=threads or lim.max_threads_per_sm,
        dram_bytes_per_s=dram,
        fp32_flops=spec.fp32 * scale,
        fp64_flops=spec.fp64 * scale,
        tf32_flops=spec.tf32 * scale,
        fp16_flops=spec.fp16 * scale,
        bf16_flops=spec.bf16 * scale,
        measured_dram_bytes_per_s=measured,
        spec=label,
        source=f"{source}; peaks: {peaks_from}" if source else f"peaks: {peaks_from}",
        notes=tuple(notes),
    )


# ---------------------------------------------------------------------------------------------
# Asking the device

# CUdevice_attribute values (cuda.h), for what torch's properties do not carry.
_CU_THREADS_SM = 39
_CU_L2 = 38
_CU_MEM_CLOCK = 36
_CU_BUS_WIDTH = 37
_CU_SHARED_SM = 81
_CU_SHARED_OPTIN = 97


def _cuda_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001 - no torch or a broken one: no GPU to ask
        return False


def _current_index() -> int:
    import torch

    return int(torch.cuda.current_device())


def _driver_attribute(index: int) -> Callable[[int], int | None]:
    """cuDeviceGetAttribute through the driver library, for one device ordinal (the same numbering
    as the runtime's, CUDA_VISIBLE_DEVICES applied); None for anything it cannot answer."""
    import ctypes

    try:
        lib = ctypes.CDLL("libcuda.so.1")
        dev = ctypes.c_int()
        if lib.cuInit(0) != 0 or lib.cuDeviceGet(ctypes.byref(dev), index) != 0:
            return lambda _attr: None
    except OSError:
        return lambda _attr: None

    def get(attr: int) -> int | None:
        v = ctypes.c_int()
        return v.value if lib.cuDeviceGetAttribute(ctypes.byref(v), attr, dev) == 0 and v.value > 0 else None

    return get


@functools.cache
def _device_target(index: int) -> Target:
    import torch

    props = torch.cuda.get_device_properties(index)
    return Target.from_properties(props, attribute=_driver_attribute(index), source=f"CUDA device {index}")
