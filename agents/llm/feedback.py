"""A Verdict as the text a Coder reads before its next attempt: what failed, why, and what the
profile says, most important first. Short: the model's context is for code."""

from __future__ import annotations

from stitchcuda.types import Verdict

BUILD_LOG_LINES = 30
KERNEL_LINES = 6


def feedback_text(v: Verdict) -> str:
    out = [f"Verifier verdict for {v.candidate}: {v.status}" + (f": {v.message}" if v.message else "")]
    if v.status == "build-failed":
        errors = [ln for ln in v.build_log.splitlines() if "error" in ln.lower()]
        tail = v.build_log.strip().splitlines()[-BUILD_LOG_LINES:]
        out.append("Build errors:\n" + "\n".join(errors[:10] or tail))
    if v.hack_findings:
        out.append("Rejected as reward hacking (a hard rule: all computation must run in your CUDA code; "
                   "forward may only allocate tensors, take views and call the compiled library):")
        out += [f"- {f.code}: {f.message}" + (f" ({f.file}:{f.line})" if f.line else "") for f in v.hack_findings]
    failed = [c for c in v.checks if c.get("ok") is False]
    if failed:
        out.append(f"Wrong results on {len(failed)} of {len(v.checks)} input sets "
                   f"(tolerance rtol {v.tolerance.get('rtol')}, {v.tolerance.get('why', '')}):")
        out += [f"- {c['set']}: {c['message']}" for c in failed[:6]]
    other = [f for f in v.findings if not f.code.endswith("-bound")]
    out += [f"- {f.code}: {f.message}" for f in other[:6]]
    if v.accepted and v.ours:
        parts = [f"correct; {v.ours.median_ms:.4f} ms"]
        if v.eager:
            parts.append(f"eager {v.eager.median_ms:.4f} ms ({v.speedup_eager:.2f}x)")
        if v.compiled:
            parts.append(f"torch.compile {v.compiled.median_ms:.4f} ms ({v.speedup_compile:.2f}x)")
        out.append("Timing: " + ", ".join(parts))
    if v.kernel_us:
        out.append(_kernel_times(v))
    bound = [f for f in v.findings if f.code.endswith("-bound")]
    if bound:
        from stitchcuda.profiling.ncu import feedback_text as ncu_text

        out.append(ncu_text(bound))
    return "\n".join(out)


def _kernel_times(v: Verdict) -> str:
    """Where one forward's GPU time went, library kernels included: a cuDNN layout transform or a
    copy that outweighs the candidate's own kernels is the next thing to remove."""
    from stitchcuda.profiling.source_map import base_name

    total = sum(v.kernel_us.values()) or 1.0
    ranked = sorted(v.kernel_us.items(), key=lambda kv: -kv[1])
    lines = [f"GPU time of one forward by kernel ({len(ranked)} kernels, {total:.0f} us in all):"]
    for name, us in ranked[:KERNEL_LINES]:
        n = v.kernel_launches.get(name, 1)
        lines.append(f"- {base_name(name)[:80]}: {us:.0f} us ({us / total:.0%}){f', {n} launches' if n > 1 else ''}")
    return "\n".join(lines)
