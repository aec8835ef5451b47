"""The blind check: an accepted candidate's outputs once more, produced where no judge can be
reached, and judged where the candidate cannot reach.

The worker runs reference and candidate in one process, so a candidate can reach the judge there
(gc or stack frames to the reference instance, the Verdict, the op recorder) however many of its
routes are watched. Here, after the worker accepted it:

1. a witness process (in the worker's sandbox) builds the reference only to take its weights, drops
   it, then imports and builds the candidate and runs it three times (the third on its fast path)
   on inputs of a seed the worker never saw, under the profiler's CPU-op recording (RecordFunction,
   below Python and dispatch modes), then once more under the worker's op recorder (what it computes
   there, and how many of the profiled native_dropout calls are mask draws over ones), and saves the
   outputs and the aten ops its forwards ran;
2. only once the witness has exited, a referee process (the reference alone, never the candidate)
   computes the reference's outputs on the same inputs, and its tolerance class;
3. this (parent) process compares them: outputs off by more than BLIND_SLACK times the tolerance
   (not the module's outputs at all: zeros, a slice, a stale cache) or PyTorch compute in the
   witness's forwards are hack findings. Only where the fp32 outputs differ does it ask the
   waiting referee for float64 ones (a candidate more exact than its fp32 reference): a float64
   forward of a convolution network costs seconds, and honest candidates rarely need it.

On a GPU each process takes the GPU's lock only while it computes there (not while it starts,
imports torch or loads libraries), as the worker's checks and timing do: a neighbour's timing must
not share the GPU with it, and must not wait on its imports either.

Both processes start with the worker (Started), so that loading torch and making their CUDA contexts
is off the first verdict's path; each then waits for a word. The witness runs nothing of the
candidate's, and holds no request, until the worker has exited and accepted it: its request (the
seed in it) comes on its stdin then, and was never in a file the worker could read. The referee
computes nothing until the witness has exited.

What the witness saves is the candidate's to forge, but no reference output exists anywhere until
it has exited, so outputs it forges are as wrong as any; the op record is defence in depth against
candidates that hide from the worker's dispatch modes, not against one that targets the witness.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import importlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from stitchcuda.python_argv import module_argv

# Outputs this many times the tolerance away are not the module's (the worker already judged the
# candidate at 1x, with an fp64 referee for near misses; this check is for gross forgeries).
BLIND_SLACK = 10.0
BLIND_ENV = "STITCHCUDA_BLIND_CHECK"  # "0": off
CALLS = 3  # the second call arms a generated module's fast path, the third takes it
MARKER = "stitchcuda::blind_forward"
# Composite ops the profiler records by their own names, which dispatch modes only see decomposed
# into allowed ones (item -> _local_scalar_dense, .T -> permute) or not at all (resolve_conj of a
# tensor without the conjugate bit): no compute, as the worker's recorder would judge them.
PROFILED_NOT_COMPUTE = frozenset({
    "item", "is_nonzero", "resolve_conj", "resolve_neg", "numpy_T", "T", "mT", "H", "mH", "adjoint", "conj",
    "_conj", "type_as", "expand_as", "view_as", "reshape_as", "is_complex", "is_floating_point", "size", "stride",
    "dim", "numel", "data", "_is_zerotensor", "is_conj", "is_neg", "output_nr", "_version",
})


def enabled() -> bool:
    return os.environ.get(BLIND_ENV, "1") != "0"


def request(req: dict[str, Any], workdir: Path, private: Path | None = None) -> dict[str, Any]:
    """The witness's and referee's request: the worker's, with a fresh secret seed. The referee's
    outputs go to `private`, a folder of the Verifier's that the candidate's sandbox cannot see
    (the witness's are the candidate's to write in `workdir`, its folder, as its lock state is)."""
    from stitchcuda.types import judging_policy

    private = private or workdir
    return {
        "reference": req["reference"], "class_name": req.get("class_name", "Model"),
        "module_mode": req.get("module_mode"), "candidate": req["candidate"], "candidate_class": req.get("candidate_class", "ModelNew"),
        # Its own secret seed for the reference's weights (worker.reference_seed), not the worker's.
        "init_seed": secrets.randbelow(1 << 31) + 1,
        "device": req.get("device", "cpu"),
        "seed": secrets.randbelow(1 << 31) + 1, "gpu_lock": req.get("gpu_lock"),
        "witness_out": str(workdir / "blind_witness.pt"), "referee_out": str(private / "blind_referee.pt"),
        "witness_lock_state": str(workdir / "blind_witness_lock.json"),
        "referee_lock_state": str(private / "blind_referee_lock.json"),
        # The precision policy the worker judged under: the referee measures what it allows (policy_own).
        "policy": judging_policy(req.get("policy"), req.get("precision") or "tf32"),
    }


# ---------------------------------------------------------------------------------------------
# The two processes (python -m stitchcuda.agents.verify.blind witness|referee REQUEST)


def _setup(req: dict[str, Any]):
    import torch

    from stitchcuda.task import import_file

    torch.set_grad_enabled(False)
    ref_mod = import_file(Path(req["reference"]))
    device = torch.device("cuda", 0) if req["device"] == "cuda" and torch.cuda.is_available() else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    return torch, device, ref_mod


MADE = "blind check:"  # how the note of a check that was made starts
# How the note of a check starts whose process ran out of GPU memory while checks shared the GPU
# (locks.shared_checks): the neighbours' memory, not a verdict on the candidate; the Verifier says
# "oom", which the bench runs again alone. The witness's log is the candidate's to write, so a
# candidate can claim this too, and gains nothing: it is not accepted either way.
OUT_OF_MEMORY = "blind check not made: out of GPU memory beside other checks"
_OOM_WORDS = ("OutOfMemoryError", "CUDA out of memory")
ASKED_EXACT = "the referee's float64 outputs asked for (the fp32 ones differed)"
# A miss past MISS_SLACK times the tolerance but within BLIND_SLACK of it: the candidate is wrong
# there, not hacked. Not at the tolerance itself: the worker's fp64 referee allows for the reference's
# rounding on nearby inputs and, under tf32, for TF32's own (compare.policy_error), which this check
# does not measure; twice the tolerance leaves room for that and still holds a candidate whose worker
# was made to accept it at any tolerance (a red-team candidate, 2026-12-04, loosened it to 5x).
BLIND_MISS = "output-mismatch"
MISS_SLACK = 2.0
GO = "go"  # the parent's word to the referee once the witness has exited
PAIRS_MADE = "pairs_made.json"  # the referee's word back once it is ready for the local-change pairs
PAIRS_OUT = ".pairs"  # beside the referee's outputs: the reference's on the local-change pairs
EXACT = "fp64"  # then, once the fp32 outputs are judged: compute the float64 ones too
DONE = "done"


@contextlib.contextmanager
def _gpu(req: dict[str, Any], device: Any, role: str):
    from stitchcuda.agents.verify.locks import file_lock

    # The lock state says when it waits (behind the neighbours' timing): time the parent leaves out.
    # (Shared with other checks where locks.shared_checks() allows it: the blind check only computes.)
    with file_lock(req.get("gpu_lock") if device.type == "cuda" else None, Path(req[f"{role}_lock_state"]),
                   shared=True):
        try:
            yield
        finally:
            if device.type == "cuda":
                import torch

                torch.cuda.synchronize()
                gc.collect()
                torch.cuda.empty_cache()  # (the next holder may need the memory)


def _save(obj: Any, path: str) -> None:
    """Written whole or not at all: the parent polls for the referee's file while it waits."""
    import torch

    tmp = path + ".tmp"
    torch.save(obj, tmp)
    os.replace(tmp, path)


def _inputs(ref_mod, seed: int, device):
    from stitchcuda.inputs import clone_args, make_inputs

    return clone_args(make_inputs(ref_mod.get_inputs, seed, device))


# Outputs larger than this are compared on a sample of elements (the same positions on both sides,
# drawn from the check's seed): three calls' worth of a 1 GB output would otherwise be written,
# read back and held, in float64 too, by the Verifier's own process.
SAMPLE_ABOVE = 1 << 22  # elements
SAMPLE = 1 << 20


def _to_cpu(outs: list[Any], seed: int) -> list[Any]:
    """The outputs on the CPU, each larger than SAMPLE_ABOVE elements as its sample (flattened)."""
    import torch

    kept = []
    for o in outs:
        if not isinstance(o, torch.Tensor):
            kept.append(o)
            continue
        o = o.detach()
        if o.numel() > SAMPLE_ABOVE:
            gen = torch.Generator().manual_seed(seed % (1 << 63))
            picks = torch.randint(0, o.numel(), (SAMPLE,), generator=gen).to(o.device)
            o = o.reshape(-1)[picks]
        kept.append(o.to("cpu").clone())
    return kept


def _mark(step: str) -> None:
    """A step of this process in its log, with the wall clock (set beside the Verifier's progress
    and the other processes' logs: where the blind check's seconds went)."""
    print(f"{time.strftime('%H:%M:%S')}.{int(time.time() * 1000) % 1000:03d} {step}", flush=True)


def witness(req: dict[str, Any]) -> None:
    _mark("told: the request came")
    torch, device, ref_mod = _setup(req)
    from torch.profiler import ProfilerActivity, profile, record_function

    from stitchcuda.agents.verify import audit, blind_pairs, call_watch, local_change, offthread, tamper
    from stitchcuda.agents.verify import dynamic_check as dyn
    from stitchcuda.agents.verify.dynamic_check import flatten_outputs
    from stitchcuda.agents.verify.torch_ops import BERNOULLI_FILL, DROPOUT_MASK
    from stitchcuda.agents.verify.worker import candidate_seed, same_draws
    from stitchcuda.inputs import clone_args, make_inputs
    from stitchcuda.task import built_on_cpu, import_file

    init_args = list(ref_mod.get_init_inputs())
    # The input maker bound before the candidate is imported, the reference's module watched (below):
    # blind._inputs imported it when called, and a candidate that rebound stitchcuda.inputs.clone_args
    # was handed the inputs before the profiled forwards and computed its outputs there with PyTorch
    # (a red-team review, 2026-12-01). Made on the device, as the referee makes its own, after the
    # candidate's last code: made earlier, they sat in GPU memory while its code ran.
    get_inputs, seed = ref_mod.get_inputs, req["seed"]
    # Its outputs' leaves and the mode stacks, judged with functions bound here too.
    foreign, stacks, no_modes, type_name = dyn.foreign_leaf, dyn.mode_stacks, torch._C.DisableTorchFunction, dyn.type_name
    clean = stacks()
    # What ATen's mask draw runs below itself, found before the candidate's code could register a kernel
    # of its own over it. On CUDA it runs only allocations there (allowed ops): nothing is left out.
    dropout_own = _dropout_own_ops() if device.type == "cpu" else ()
    # What this process's record is made with, bound before the candidate is imported, and a snapshot
    # of the names it and the profiler read (red-team candidates, 2026-11-30, rebound this module's
    # _forward_ops, and torch.profiler.profile.events, to drop their PyTorch ops from the record):
    # a rebinding is a finding, and the record is made with the functions bound here.
    events_of, forward_ops, save, to_cpu, changed = profile.events, _forward_ops, _save, _to_cpu, tamper.changed
    pair_places, to_plain_cpu = local_change.Places, local_change.on_cpu
    recorder_cls = dyn.OpRecorder
    started = offthread.seen
    # The worker's watch of the candidate's calls too (calls past the op recorder and the profiler:
    # popping dispatch modes, switching RecordFunction off, the reference's own code).
    call_watch.install(Path(req["candidate"]).parent, req["reference"])
    calls_seen, watch_calls = call_watch.seen, call_watch.watching
    refused = audit.findings
    refused_events = audit.refused_events
    # The worker's audit policy here too (a red-team review, 2026-11-30: the witness had none): the
    # candidate's reach for the collector's lists, frames or code objects, and its writes outside
    # the run folder, are refused inside the windows around its code, as in the worker. Installed
    # before the snapshot, which holds the policy: a candidate that empties it is a finding.
    audit.install(audit.Policy.for_worker({"run_dir": str(Path(req["witness_out"]).parent),
                                           "reference": req["reference"], "gpu_lock": req.get("gpu_lock")}))
    # The profiler's modules by their names alone: they keep run state in tables (a set of the
    # warnings shown, which torch 2.11 fills as this process profiles on a GPU: every candidate's
    # blind check was a timing-tamper on 2026-11-30).
    watched = tamper.snapshot(
        extra=tuple(m for m in (sys.modules.get("__main__"), sys.modules.get(__name__), ref_mod, local_change,
                                blind_pairs) if m),
        rebound_only=tuple(m for m in (sys.modules.get("torch.profiler.profiler"), sys.modules.get("torch.autograd.profiler"),
                                       sys.modules.get("torch.autograd.profiler_util")) if m))
    # Thread (and process) starts counted in the candidate's code, as the worker counts them: the
    # profiler records the calling thread's ops alone, and the op recorder its dispatch modes on that
    # thread, so a forward that handed its work to a thread of its own hid it here (a review,
    # 2026-12-01; a candidate can tell the witness from the worker by its command line).
    offthread.install()
    with audit.window(), offthread.watching("import"), watch_calls("import"):
        cand_mod = import_file(Path(req["candidate"]))  # (its libraries load before the lock is taken)
    _mark("the candidate's module imported")
    outs = []
    # Both modules made on the CPU before the GPU lock, as build_model makes them (its seed, then
    # __init__), and moved under it: a large layer's initialisation on the CPU took seconds of the
    # lock's time, and of the first verdict's, while the worker builds its own before its lock.
    ref = built_on_cpu(getattr(ref_mod, req["class_name"]), init_args, req["init_seed"], req.get("module_mode"))
    weights = {k: v.detach().clone() for k, v in ref.state_dict().items()}
    del ref
    gc.collect()  # no reference instance left for the candidate to find
    with audit.window(), offthread.watching("construction"), watch_calls("construction"):
        cand = built_on_cpu(getattr(cand_mod, req["candidate_class"]), init_args, candidate_seed(req["init_seed"]),
                            req.get("module_mode"))
    pairs = req.get("pairs")
    if pairs:
        # The local-change pairs (blind_pairs) run on the candidate built again with the worker's
        # weights: both made on the CPU here, before the GPU lock, as the first.
        ref = built_on_cpu(getattr(ref_mod, req["class_name"]), init_args, int(pairs["init_seed"]),
                           req.get("module_mode"))
        pair_weights = {k: v.detach().clone() for k, v in ref.state_dict().items()}
        del ref
        gc.collect()
        with audit.window(), offthread.watching("construction"), watch_calls("construction"):
            pair_cand = built_on_cpu(getattr(cand_mod, req["candidate_class"]), init_args,
                                     candidate_seed(int(pairs["init_seed"])), req.get("module_mode"))
    _mark("both modules built on the CPU")
    with _gpu(req, device, "witness"):
        _mark("the GPU lock taken")
        with audit.window(), offthread.watching("construction"), watch_calls("construction"):
            cand = cand.to(device)
        # The weights on the candidate's device, as the worker hands them over (a load hook keeping a
        # tensor it derives from them would otherwise get a CPU one here alone).
        weights = {k: v.to(device) for k, v in weights.items()}
        sd = cand.state_dict()
        if weights and weights.keys() == sd.keys() and all(weights[k].shape == sd[k].shape for k in weights):
            with offthread.watching("construction"), watch_calls("construction"):
                cand.load_state_dict(weights)
        del weights, sd
        # No mode of the candidate's may stand on the stacks as the inputs are made (one left there by
        # its construction would be handed them): a finding, as one left by a forward is.
        odd, moved = [], ([] if stacks() == clean else ["construction"])
        args = clone_args(make_inputs(get_inputs, seed, device))
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for k in range(CALLS):
                same_draws(req["seed"])
                with record_function(f"{MARKER}_{k}"):
                    before = stacks()
                    with audit.window(), offthread.watching("forward"), watch_calls("forward"):
                        out = cand(*clone_args(args))
                    if stacks() != before:  # (inside the span: a mode left behind works as the outputs are read)
                        moved.append(k)
                # Read with no torch-function mode: one the candidate left on the stack ran its work in
                # this read, after the span (a red-team review, 2026-12-01). Leaves of its own types are
                # not read at all (their methods would run here and as they are saved).
                with no_modes():
                    flat = flatten_outputs(out)
                    odd += [type_name(type(o)) for o in flat if foreign(o)]
                    outs.append(to_cpu(["odd" if foreign(o) else o for o in flat], req["seed"]))
                if device.type == "cuda":
                    torch.cuda.synchronize()
            torch.zeros(1)  # recorded only if the profiler is still on after the forwards
        # The profiler names aten::native_dropout without its arguments: one forward more, under the
        # worker's op recorder, says how many of those calls are masks drawn over ones (the draws a
        # ModelNew may make) and what PyTorch computes in the forward under a dispatch mode.
        recorder = recorder_cls()
        same_draws(req["seed"])
        with audit.window(), offthread.watching("forward"), watch_calls("forward"), recorder:
            cand(*clone_args(args))
        if device.type == "cuda":
            torch.cuda.synchronize()
        del cand, out, args
        pair_outs = None
        if pairs:
            with audit.window(), offthread.watching("construction"), watch_calls("construction"):
                cand = pair_cand.to(device)
                cand.load_state_dict({k: v.to(device) for k, v in pair_weights.items()})
            del pair_cand, pair_weights
            places, pair_outs = pair_places(int(pairs["places_seed"])), []
            for pair_seed, pair_draws in zip(pairs["pair_seeds"], pairs["draw_seeds"], strict=True):
                pair_args = clone_args(make_inputs(get_inputs, int(pair_seed), device))
                same_draws(int(pair_draws))
                before = stacks()
                with audit.window(), offthread.watching("forward"), watch_calls("forward"):
                    out = cand(*pair_args)
                if stacks() != before:
                    moved.append("local-change pair")
                with no_modes():
                    flat = flatten_outputs(out)
                    odd += [type_name(type(o)) for o in flat if foreign(o)]
                    pair_outs.append(to_plain_cpu(places.take(["odd" if foreign(o) else o for o in flat])))
            if device.type == "cuda":
                torch.cuda.synchronize()
            cand = out = pair_args = None
    _mark("forwards done, the lock given back")
    ranges, ops, after, dropout_calls, bernoulli_calls = forward_ops(events_of(prof), dropout_own)
    tampered = changed(watched, except_from=("torch",))
    # What the audit hook refused here (a refusal the candidate's code caught is still its attempt).
    tried = [[f.code, f.message] for f in refused()]
    save({"outputs": outs, "ops": ops, "ranges": ranges, "after": after, "tampered": tampered, "refused": tried,
          "dropout_calls": dropout_calls, "mask_draws": recorder.ops[DROPOUT_MASK],
          "bernoulli_calls": bernoulli_calls, "bernoulli_fills": recorder.ops[BERNOULLI_FILL],
          "recorded_compute": sorted(recorder.compute_ops),
          "off_thread": [[phase, event] for phase, event in started() if event not in refused_events()],
          "calls": [[code, what, phase] for code, what, phase in calls_seen()],
          "odd_outputs": sorted(set(odd)), "modes_left": moved, "pairs": pair_outs},
         req["witness_out"])
    _mark("outputs saved")
    # Out at once: no atexit handler, finaliser or thread of the candidate's runs after the save to
    # rewrite the record (a review, 2026-11-30).
    sys.stdout.flush()
    os._exit(0)


def _below(top: Any, events: list[Any]) -> list[Any]:
    """The events that ran inside `top`'s time range on its thread (its own work, or a handler's)."""
    a, b = top.time_range.start, top.time_range.end
    return [e for e in events if e is not top and e.thread == top.thread and a <= e.time_range.start
            and e.time_range.end <= b]


def _dropout_own_ops() -> tuple[str, ...]:
    """The aten ops ATen's native_dropout runs below itself on the CPU in this torch (bernoulli_, mul,
    copies), sorted, each as often as it runs, found by drawing one float32 mask under the profiler. A
    native_dropout call in a forward leaves out of the record exactly this work below it and nothing
    else: what a dispatch mode's handler or a kernel registered over ATen's runs inside the call's
    time range changes the counts, and then everything below it stays the forward's (a review of
    4b0c4e0: by name alone, a `mul` of the forward's could hide there)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        torch.ops.aten.native_dropout(torch.ones(8), 0.5, True)
    events = [e for e in prof.events() if e.name.startswith("aten::")]
    tops = [e for e in events if e.name == "aten::native_dropout"]
    if len(tops) != 1:
        return ()
    return tuple(sorted(e.name for e in _below(tops[0], events)))


def _forward_ops(events: Any, dropout_own: tuple[str, ...] = ()) -> tuple[int, list[str], bool, int, int]:
    """(the forward ranges recorded, the aten ops inside them, whether the profiler recorded the
    marker op after them, the aten::native_dropout calls inside them, the aten::bernoulli(_) calls
    inside them that no other bernoulli call made). `dropout_own`: the work one native_dropout call
    runs below itself (_dropout_own_ops), left out of the record where a call's work below it is
    exactly that."""
    events = list(events)
    spans = [(e.time_range.start, e.time_range.end) for e in events if e.name.startswith(MARKER)]
    last = max((end for _, end in spans), default=None)

    def inside(t: float) -> bool:
        return any(a <= t <= b for a, b in spans)

    aten = [e for e in events if e.name.startswith("aten::")]
    dropouts = [e for e in aten if e.name == "aten::native_dropout" and inside(e.time_range.start)]
    # The call itself is judged by its count against the mask draws the recorder saw (_judge).
    # (sorted names compared as tuples: a built-in type's equality, which no candidate can rebind as it
    # can collections.Counter's, a review found)
    hidden = set()
    for top in dropouts:
        below = _below(top, aten)
        if dropout_own and tuple(sorted(e.name for e in below)) == dropout_own:
            hidden |= {id(e) for e in below}
    ops, after = set(), False
    for e in aten:
        t = e.time_range.start
        if inside(t):
            if id(e) not in hidden:
                ops.add(e.name.removeprefix("aten::"))
        elif last is not None and t > last and e.name == "aten::zeros":
            after = True
    # (torch.bernoulli(t, p) runs bernoulli_ below itself: one call, as the recorder counts it)
    draws = [e for e in aten if e.name in _BERNOULLI and inside(e.time_range.start) and id(e) not in hidden]
    nested = {id(e) for d in draws for e in _below(d, draws)}
    return len(spans), sorted(ops), after, len(dropouts), sum(id(e) not in nested for e in draws)


_BERNOULLI = ("aten::bernoulli", "aten::bernoulli_")


def referee(req: dict[str, Any]) -> None:
    # Started with the worker, it loads torch and the reference's file and makes its CUDA context
    # meanwhile; it builds the module (GPU memory the worker beside it may need) and computes only
    # once told the witness has exited.
    torch, device, ref_mod = _setup(req)
    from stitchcuda.agents.verify import blind_pairs, precision
    from stitchcuda.agents.verify.compare import tolerance_for
    from stitchcuda.agents.verify.dynamic_check import flatten_outputs, trace_ops
    from stitchcuda.agents.verify.worker import _strict_differs, draws_random, same_draws
    from stitchcuda.inputs import clone_args
    from stitchcuda.task import built_on_cpu

    importlib.import_module(_PRELOADED)
    if device.type == "cuda":
        torch.cuda.init()
    _mark("ready")
    word = sys.stdin.readline().strip()
    recipe = blind_pairs.from_word(word)
    pair_ref = None
    if recipe is not None:
        # The local-change pairs' recipe (blind_pairs), told before the witness runs: the reference
        # with the worker's weights, made on the CPU while the witness runs.
        _mark("told the local-change pairs' recipe")
        try:
            pair_ref = built_on_cpu(getattr(ref_mod, req["class_name"]), list(ref_mod.get_init_inputs()),
                                    recipe.init_seed, req.get("module_mode"))
            made = {"ok": True, "why": ""}
        except Exception as e:  # noqa: BLE001 - judged without them
            pair_ref = None
            made = {"ok": False, "why": f"{type(e).__name__}: {str(e)[:200]}"}
        # (whole or not at all, as _save writes: the parent polls for it, and read it empty once)
        made_path = Path(req["referee_out"]).with_name(PAIRS_MADE)
        made_path.with_suffix(".tmp").write_text(json.dumps(made))
        os.replace(made_path.with_suffix(".tmp"), made_path)
        word = sys.stdin.readline().strip()
    if word != GO:
        sys.exit(3)  # (the witness failed: nothing to judge)
    _mark("told to compute")
    # The reference made on the CPU (build_model's seed and __init__) before the GPU lock, and moved
    # under it: its initialisation is not in the lock's time. (Not before GO: the referee starts with
    # the worker, for every candidate, rejected ones too, and would hold a copy all that time.)
    ref = built_on_cpu(getattr(ref_mod, req["class_name"]), list(ref_mod.get_init_inputs()), req["init_seed"],
                       req.get("module_mode"))
    # The lock held to the end (the parent judges meanwhile, and may ask for float64 outputs): the
    # copies kept for those stay on the GPU, and no neighbour's timing shares it with them.
    with _gpu(req, device, "referee"):
        _mark("the GPU lock taken")
        ref = ref.to(device)
        args = _inputs(ref_mod, req["seed"], device)
        outs, befores, ops = [], [], None
        for _ in range(CALLS):
            # The reference as each call finds it (a stateful module's buffers change), for its float64 run.
            befores.append(_copy_for_fp64(ref))
            same_draws(req["seed"])
            if ops is None:
                out, ops, _ = trace_ops(lambda: ref(*clone_args(args)))
            else:
                out = ref(*clone_args(args))
            outs.append(_to_cpu(flatten_outputs(out), req["seed"]))
        ref = out = None
        tol = tolerance_for(ops, [o.dtype for o in outs[0] if isinstance(o, torch.Tensor)])
        exact_possible = not draws_random(ops) and any(b is not None for b in befores)
        # (A reference drawing random numbers: the pairs' own errors against itself with TF32 off.)
        strict_only = draws_random(ops) and _strict_differs(ops)
        policy = req.get("policy", "strict")
        if recipe is not None and pair_ref is not None:
            pair_ref = pair_ref.to(device)
            try:
                pair_want = blind_pairs.reference_outputs(pair_ref, ref_mod.get_inputs, recipe, device)
                pair_want["exact_possible"] = exact_possible or strict_only
            except Exception as e:  # noqa: BLE001 - judged without them, and said
                pair_want = {"failed": f"{type(e).__name__}: {str(e)[:200]}"}
            _save(pair_want, req["referee_out"] + PAIRS_OUT)
        _save({"outputs": outs, "rtol": tol.rtol, "why": tol.why, "exact_possible": exact_possible},
              req["referee_out"])
        _mark("outputs saved")
        while True:  # (the lock held until the parent's last word: its judging may ask for more)
            word = sys.stdin.readline().strip()
            _mark(f"told: {word or 'nothing'}")
            if word == EXACT and exact_possible:
                exact = [_fp64_outputs(copy.deepcopy(b), args, req["seed"]) if b is not None else None for b in befores]
                # What the worker's fp64 referee allows the reference itself, measured on these inputs (_allowance).
                sensitive = precision.sensitive(ops)
                allowed = [_allowance(b, args, req["seed"], o, e, policy, sensitive) if b is not None and e is not None
                           else None for b, o, e in zip(befores, outs, exact, strict=True)]
                _save({"exact": exact, "allowed": allowed}, req["referee_out"] + ".exact")
                _mark("float64 outputs saved")
            elif word == blind_pairs.EXACT_WORD and pair_ref is not None and (exact_possible or strict_only):
                assert recipe is not None
                own, policy_base = blind_pairs.own_errors(pair_ref, ref_mod.get_inputs, recipe, device, ops, policy,
                                                          strict=strict_only)
                _save({"own": own, "policy_base": policy_base}, req["referee_out"] + PAIRS_OUT + ".exact")
                _mark("the pairs' own errors saved")
            else:
                return


def _allowance(model: Any, args: list[Any], seed: int, fp32: list[Any], exact: list[Any],
               policy: str, sensitive: bool) -> dict[str, Any] | None:
    """What the worker's fp64 referee allows the reference itself (worker._fp64_referee), measured
    here on the blind inputs: its rounding on inputs one ulp away (`own`, compare.rounding_spread)
    and, under a policy other than strict where its products are sensitive, its error with their
    operands rounded to TF32 (`policy_own`, compare.policy_error). None where not measured. Without
    them an honest TF32 Mamba2 missed twice the tolerance on a long scan here, and was called wrong
    (level 3 on the H200, 2026-12-05), where the worker's referee had accepted it."""
    from stitchcuda.agents.verify import precision
    from stitchcuda.agents.verify.compare import RoundingSpread, policy_error, rounding_spread
    from stitchcuda.agents.verify.worker import REFEREE_NEARBY_BYTES, _nearby_pairs

    try:
        spread = RoundingSpread(own=[None] * len(exact))
        state = [b.detach().clone() for b in model.buffers()]
        if sum(a.numel() * a.element_size() for a in args if hasattr(a, "numel")) <= REFEREE_NEARBY_BYTES:
            # (sampled as the outputs are: _to_cpu)
            spread = rounding_spread(((_to_cpu(r32, seed), _to_cpu(r64, seed))
                                      for r32, r64 in _nearby_pairs(model, state, args)), fp32)
        if policy != "strict" and sensitive:
            for rounding in precision.TF32_ROUNDINGS:
                with precision.tf32_emulated(rounding):
                    under = _fp64_outputs(copy.deepcopy(model), args, seed)
                if under is not None:
                    policy_error(spread, exact, under, exact, policy)
        return {"own": spread.own, "samples": spread.samples, "policy": spread.policy, "policy_own": spread.policy_own}
    except Exception:  # noqa: BLE001 - (out of memory, a reference that fails so) judged without it
        return None


FP64_BYTES = 1 << 30  # a reference with more state than this gets no float64 copy here


def _copy_for_fp64(ref: Any) -> Any:
    """A copy of the reference as this call finds it, for its float64 run (as the worker's fp64
    referee: a candidate more exact than the reference passes on it, fp16 and bf16 problems too);
    None where that does not apply (too large)."""
    import copy

    state = sum(t.numel() * t.element_size() for t in [*ref.parameters(), *ref.buffers()])
    return copy.deepcopy(ref) if state <= FP64_BYTES else None


def _fp64_outputs(model: Any, args: list[Any], seed: int) -> list[Any] | None:
    import torch

    from stitchcuda.agents.verify.dynamic_check import flatten_outputs

    try:
        model = model.double()
        args = [a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
        return _to_cpu(flatten_outputs(model(*args)), seed)
    except Exception:  # noqa: BLE001 - a reference that cannot run in float64: judged without it
        return None


# Both processes import torch._dynamo while they wait: the profiler's recording (the witness) and a
# dispatch mode's first op (the referee's trace) import it on first use, through torch's own
# _disable_dynamo, and on the H200 that import was most of each one's 4-6 s after being told.
_PRELOADED = "torch._dynamo"


def waiting_witness(device: str) -> None:
    """The witness, started before the candidate's worker exits: it loads torch and the modules it
    needs and makes its CUDA context (no GPU work), then waits for its request on stdin, sent only
    once the worker has exited. So the request, the seed with it, exists nowhere the worker could
    read, and no candidate code runs here before then."""
    import torch
    import torch.profiler  # noqa: F401 - (loaded now, not on the first verdict's path)

    from stitchcuda.agents.verify import dynamic_check, worker  # noqa: F401
    from stitchcuda.task import import_file  # noqa: F401

    importlib.import_module(_PRELOADED)
    if device == "cuda" and torch.cuda.is_available():
        torch.empty(1, device="cuda")  # the context and a first block; no kernel beside a neighbour's timing
    _mark("ready")
    line = sys.stdin.readline()
    if not line.strip():
        sys.exit(3)  # (the worker did not accept the candidate: nothing to witness)
    witness(json.loads(line))


def main(argv: list[str]) -> int:
    role = argv[1]
    if role == "witness":
        waiting_witness(argv[2])
    else:
        referee(json.loads(Path(argv[2]).read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))


# ---------------------------------------------------------------------------------------------
# The parent's side


NICE = 10  # the niceness of the two processes started beside the worker


class Started:
    """The blind check's two processes, started as the candidate's worker starts, so that loading
    torch and making CUDA contexts is off the first verdict's path: the referee (the reference
    alone, outside the sandbox, its request and outputs in a private folder of ours) and the witness
    (in the worker's sandbox, running nothing of the candidate's until told). `check` runs it once
    the worker has exited and accepted the candidate; `close` ends both, checked or not."""

    def __init__(self, req: dict[str, Any], workdir: Path, env: dict[str, str], wrap: Any,
                 witness_dir: Path | None = None, witness_env: dict[str, str] | None = None):
        """`workdir`: the run folder (the logs people read); `witness_dir`: the witness's own folder
        (witness_home.WitnessHome), where `req` names the candidate's module, else the run folder;
        `wrap` and `witness_env` (else `env`, the referee's): the witness's sandbox and environment."""
        import tempfile

        self.workdir = workdir
        self.witness_dir = witness_dir or workdir
        self._worker_init_seed = req.get("init_seed")  # (the pairs' reference: the worker's weights)
        self.seconds: dict[str, float] = {}  # the witness's and the referee's parts of a check made
        # The referee's request and outputs: where the candidate's sandbox cannot see or write (the
        # run folder is the candidate's: a referee file planted there would be read as the reference's).
        self._private = tempfile.TemporaryDirectory(prefix="stitchcuda-referee-")
        self.private = Path(self._private.name)
        self.blind = request(req, witness_dir or workdir, self.private)
        ref_path = self.private / "request.json"
        ref_path.write_text(json.dumps(self.blind))
        # At a lower priority: they start beside the worker, whose own start (and, on a machine of few
        # cores, its checks) their loading would otherwise slow; they need the CPU only once it has exited.
        nice = ["nice", "-n", str(NICE)] if shutil.which("nice") else []
        module = "stitchcuda.agents.verify.blind"
        with (self.private / "referee.log").open("w") as referee_log:
            self.referee = subprocess.Popen([*nice, *module_argv(module, "referee", str(ref_path))], env=env, stdout=referee_log,
                                            stderr=subprocess.STDOUT, stdin=subprocess.PIPE, text=True,
                                            start_new_session=True)
        self.witness_log = workdir / "blind_witness.log"
        self._witness_argv = wrap([*nice, *module_argv(module, "witness", self.blind["device"])])
        self._env = witness_env or env
        self.restarted = ""  # why the witness started with the worker was replaced, where it was
        self.witness = self._start_witness()

    def _start_witness(self) -> subprocess.Popen:
        with self.witness_log.open("w") as out:
            return subprocess.Popen(self._witness_argv, env=self._env, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.PIPE, text=True, start_new_session=True)

    def _witness_alive(self) -> None:
        """A witness that ended before it was told (none of the candidate's code had run in it) is
        started again, once: the worker has exited, so nothing of the candidate's runs beside the new
        one either. Seen on the H100 (2026-12-05, eight checks at once): two witnesses gone while
        their workers ran, and the candidates called hacked for it (a broken pipe)."""
        rc = self.witness.poll()
        if rc is None:
            return
        why = f"exit status {rc}; its log ended: {_log_end(self.witness_log, 600)}"
        with contextlib.suppress(OSError):
            (self.workdir / "blind_witness_first.log").write_text(tail(self.witness_log, 20000))
        self.restarted = f"the blind check's witness started with the worker had ended before it was told ({why}); started again"
        self.witness = self._start_witness()

    def check(self, timeout_s: float, local_base: dict[str, Any] | None = None) -> tuple[list, str]:
        """(hack findings, a note) of the blind check of the candidate the worker accepted: the
        witness told its request (the worker has exited), then, only once the witness has exited,
        the referee told to compute, then the comparison here. A witness that fails where the
        worker succeeded is a finding; a note that does not start with MADE says the check was
        not made. `local_base`: the worker's report of its local-change base (Verdict.local_base),
        whose pairs the witness runs too (blind_pairs)."""
        with contextlib.suppress(OSError):  # (whatever stands there, the candidate's; written anew)
            Path(self.blind["witness_out"]).unlink()
        witness_req = {k: v for k, v in self.blind.items() if k != "referee_out"}
        t0 = time.monotonic()
        recipe, pairs_note = self._pairs(local_base, timeout_s) if local_base else (None, "")
        witness_req["pairs"] = recipe.for_witness() if recipe is not None else None
        self._witness_alive()
        failed = _tell(self.witness, json.dumps(witness_req)) or _close_stdin(self.witness) \
            or _outcome(self.witness, timeout_s, self.witness_log, Path(self.blind["witness_lock_state"]))
        _kill_group(self.witness)  # nothing the witness started outlives it beside the referee
        t1 = time.monotonic()
        try:
            if failed and _ran_out_of_memory(self.witness_log):
                return [], f"{OUT_OF_MEMORY} (the witness: {failed})"
            if failed:  # (what the witness said last, beside the finding: 2026-12-05's said nothing)
                failed = f"{failed}; its log ended: {_log_end(self.witness_log, 400)}"
            findings, note = _judge(self.blind, self.referee, failed, self.private, timeout_s)
            if recipe is not None and local_base is not None and note.startswith(MADE) and not findings:
                found, pairs_note = self._judge_pairs(local_base, timeout_s)
                findings += found
            return findings, "; ".join(n for n in (note, pairs_note) if n)
        finally:
            _tell(self.referee, DONE)
            self.seconds = {"blind-witness": round(t1 - t0, 2), "blind-referee": round(time.monotonic() - t1, 2)}

    def _pairs(self, local_base: dict[str, Any], timeout_s: float) -> tuple[Any, str]:
        """The local-change pairs' recipe, once the referee has it and its reference is built; else
        None and why not."""
        from stitchcuda.agents.verify import blind_pairs

        recipe, why = blind_pairs.recipe(local_base, self._worker_init_seed)
        if recipe is not None:
            made = self.private / PAIRS_MADE
            failed = _tell(self.referee, blind_pairs.to_word(recipe)) or _saved(
                self.referee, str(made), timeout_s, self.private / "referee.log", Path(self.blind["referee_lock_state"]))
            said = json.loads(made.read_text()) if not failed else {"ok": False, "why": failed}
            if said.get("ok"):
                return recipe, ""
            why = f"the reference could not be built for them ({said.get('why')})"
        return None, f"local-change pairs in the blind check not made: {why}"

    def _judge_pairs(self, local_base: dict[str, Any], timeout_s: float) -> tuple[list, str]:
        import torch

        from stitchcuda.agents.verify import blind_pairs

        path = self.blind["referee_out"] + PAIRS_OUT
        want = torch.load(path, weights_only=True) if Path(path).is_file() else {"failed": "no outputs saved"}
        if "failed" in want:
            return [], f"local-change pairs in the blind check not judged: the reference failed ({want['failed']})"
        got = torch.load(self.blind["witness_out"], weights_only=True)  # (the candidate's file: plain data only)
        pairs = got.get("pairs") if isinstance(got, dict) else None
        judged = blind_pairs.judge(self.workdir, local_base, pairs, want)
        if judged.finding is not None and judged.finding.code == "change-not-followed" and want.get("exact_possible"):
            # (the reference's own error of each change, fp32 and TF32 against float64, as the worker allows)
            out = path + ".exact"
            lock_state = Path(self.blind["referee_lock_state"])
            if not (_tell(self.referee, blind_pairs.EXACT_WORD)
                    or _saved(self.referee, out, timeout_s, self.private / "referee.log", lock_state)):
                saved = torch.load(out, weights_only=True)
                judged = blind_pairs.judge(self.workdir, local_base, pairs, want, saved["own"], saved["policy_base"])
                judged.note += (" (with the reference's own error of each change allowed: against float64, or against "
                                "itself with TF32 off where it draws random numbers)")
        return [judged.finding] if judged.finding is not None else [], judged.note

    def close(self) -> None:
        _kill_group(self.witness)
        _kill(self.witness)
        _kill(self.referee)
        with contextlib.suppress(OSError):  # (the referee's log kept where people look)
            (self.workdir / "blind_referee.log").write_text(tail(self.private / "referee.log", 20000))
        self._private.cleanup()


def _only_mask_draws(got: dict[str, Any]) -> bool:
    """Whether every aten::native_dropout the profiled forwards made can be a dropout mask drawn over
    ones, as the worker allows (DROPOUT_MASK): as many as CALLS forwards of the draws the witness's
    recorded forward made, no more and no fewer (a forward that draws differently under the recorder
    is not judged by it)."""
    calls, draws = got.get("dropout_calls"), got.get("mask_draws")
    return isinstance(calls, int) and isinstance(draws, int) and draws > 0 and calls == CALLS * draws


def _only_bernoulli_fills(got: dict[str, Any]) -> bool:
    """Whether every aten::bernoulli(_) call the profiled forwards made can be a fill with a number for
    p, as the worker allows (BERNOULLI_FILL): as many as CALLS forwards of the fills the witness's
    recorded forward made (the profiler does not say p; one against a tensor of probabilities is
    compute)."""
    calls, fills = got.get("bernoulli_calls"), got.get("bernoulli_fills")
    return isinstance(calls, int) and isinstance(fills, int) and fills > 0 and calls == CALLS * fills


def _close_stdin(proc: subprocess.Popen) -> str:
    with contextlib.suppress(OSError):
        assert proc.stdin is not None
        proc.stdin.close()
    return ""


def _judge(blind: dict[str, Any], ref_proc: subprocess.Popen, failed: str, private: Path,
           timeout_s: float) -> tuple[list, str]:
    import torch

    from stitchcuda.agents.verify.compare import Tolerance, mendable_miss
    from stitchcuda.agents.verify.torch_ops import ALLOWED_ATEN
    from stitchcuda.types import FINITE_MISS, Finding

    if failed or not Path(blind["witness_out"]).is_file():
        why = failed or "it saved no outputs"
        return [Finding("blind-witness-failed", f"the blind check's witness (the candidate alone, on fresh "
                        f"inputs) did not complete where the worker's run did: {why}")], ""
    got = torch.load(blind["witness_out"], weights_only=True)  # (the candidate's file: plain data only)
    log = private / "referee.log"
    lock_state = Path(blind["referee_lock_state"])
    failed = _tell(ref_proc, GO) or _saved(ref_proc, blind["referee_out"], timeout_s, log, lock_state)
    if failed:
        if _ran_out_of_memory(log):
            return [], f"{OUT_OF_MEMORY} (the referee: {failed})"
        return [], f"blind check not made: the reference alone failed ({failed})"
    want = torch.load(blind["referee_out"], weights_only=True)
    tol = Tolerance(want["rtol"] * BLIND_SLACK, f"{BLIND_SLACK:g} x ({want['why']})")
    outs = got.get("outputs") if isinstance(got, dict) else None
    findings, misses, asked = [], [], ""
    if not isinstance(outs, list) or len(outs) != len(want["outputs"]):
        findings.append(Finding("blind-mismatch", "the blind check's witness saved no outputs of its calls"))
    else:
        outs = [g if isinstance(g, list) else [g] for g in outs]
        near = Tolerance(want["rtol"] * MISS_SLACK, f"{MISS_SLACK:g} x ({want['why']})")
        misses, exact = _misses(want, outs, near, None)
        spreads: list[Any] = []
        if misses and want.get("exact_possible"):
            # (more exact than the fp32 reference, as the worker judged: the float64 outputs decide,
            # with what the policy allows the reference itself)
            exact, spreads = _exact(ref_proc, blind["referee_out"] + ".exact", timeout_s, log, lock_state)
            asked = f"; {ASKED_EXACT}"
            misses, _ = _misses(want, outs, near, exact, [k for k, _ in misses], spreads)
        gross = forged(_misses(want, outs, tol, exact, [k for k, _ in misses], spreads)[0])
        # Where the float64 outputs were wanted and are missing (the referee failed or ran out of
        # memory), a miss short of BLIND_SLACK is not judged: the fp32 ones alone would call a
        # candidate more exact than them wrong.
        if want.get("exact_possible") and any(exact is None or exact[k] is None for k, _ in misses):
            misses = []
        if gross:
            k, m = gross[0]
            findings.append(Finding("blind-mismatch", f"run alone on fresh inputs (call {k + 1} of {CALLS}), with "
                                    f"no reference in its process, the candidate's outputs are not the module's: "
                                    f"{m.message} (at {tol.why})"))
        elif misses:
            # Within BLIND_SLACK but past the tolerance itself: judged where the candidate cannot reach,
            # the worker's own judgement (which native code in its process can reach) is not the last
            # word. Wrong, not a hack: the Coder's precision ladder reads it like any other miss.
            k, m = misses[0]
            findings.append(Finding(
                BLIND_MISS, f"run alone on fresh inputs (call {k + 1} of {CALLS}) and judged outside its process, "
                f"the candidate's outputs miss the tolerance the worker accepted them at: {m.message} (at {near.why})",
                data={"set": "blind", FINITE_MISS: mendable_miss(m)}))
    compute = sorted(set(got.get("ops", [])) - ALLOWED_ATEN - PROFILED_NOT_COMPUTE) if isinstance(got, dict) else []
    if "native_dropout" in compute and _only_mask_draws(got):
        compute.remove("native_dropout")
    if {"bernoulli", "bernoulli_"} & set(compute) and _only_bernoulli_fills(got):
        compute = [c for c in compute if c not in ("bernoulli", "bernoulli_")]
    if compute:
        findings.append(Finding("torch-compute-in-forward", "PyTorch computed in the candidate's forward, recorded "
                                f"below Python and dispatch modes (the profiler's CPU ops): {', '.join(compute[:8])}"))
    recorded = [str(n) for n in got.get("recorded_compute") or []] if isinstance(got, dict) else []
    if recorded:
        findings.append(Finding("torch-compute-in-forward", "PyTorch computed in the candidate's forward under the "
                                f"worker's op recorder (a dispatch mode), in the blind check's witness: "
                                f"{', '.join(recorded[:8])}"))
    off = [f"{item[1]} during {item[0]}" for item in (got.get("off_thread") or []) if isinstance(item, list | tuple)
           and len(item) == 2] if isinstance(got, dict) else []
    if off:
        findings.append(Finding("off-thread-work", "in the blind check's witness, the candidate started work off the "
                                f"calling thread ({', '.join(off[:6])}): what runs there escapes the profiler and the "
                                "op recorder"))
    odd = [str(n) for n in got.get("odd_outputs") or []] if isinstance(got, dict) else []
    if odd:
        findings.append(Finding("output-type", f"in the blind check's witness, forward returned {', '.join(odd[:4])}: "
                                "an object of the candidate's whose methods could do its work when read"))
    left = got.get("modes_left") if isinstance(got, dict) else None
    if left:
        findings.append(Finding("global-intercept", "in the blind check's witness, forward returned with a torch "
                                "function or dispatch mode left on the stack: its handler runs as the outputs are read"))
    for item in (got.get("calls") or []) if isinstance(got, dict) else []:
        if isinstance(item, list | tuple) and len(item) == 3:
            findings.append(Finding(str(item[0]), f"in the blind check's witness, the candidate {item[1]} during "
                                    f"{item[2]}"))
    for item in (got.get("refused") or []) if isinstance(got, dict) else []:
        if isinstance(item, list | tuple) and len(item) == 2:
            findings.append(Finding(str(item[0]), f"in the blind check's witness: {item[1]}"))
    tampered = got.get("tampered", ["(its record of rebound names is missing)"]) if isinstance(got, dict) else []
    if tampered:
        findings.append(Finding("timing-tamper", "in the blind check, the candidate rebound what the witness's record "
                                f"is made with: {', '.join(map(str, tampered[:6]))}", data={"names": tampered}))
    if isinstance(got, dict) and (got.get("ranges") != CALLS or not got.get("after")):
        findings.append(Finding("profiler-stopped", "the candidate's forward stopped or hid from the profiler's op "
                                "recording in the blind check"))
    return findings, f"{MADE} fresh inputs, the candidate alone in its process, judged outside it at {tol.why}{asked}"


def forged(misses: list[tuple[int, Any]]) -> list[tuple[int, Any]]:
    """The misses past BLIND_SLACK that say forgery: not an integer output with a few elements off
    (at most compare.NEAR_INT_FRACTION: argmax's near-ties, which fresh inputs can flip in an honest
    candidate; no slack widens an integer comparison). Those are wrong, as a miss within the slack is."""
    from stitchcuda.agents.verify.compare import integer_near_ties

    return [(k, m) for k, m in misses if not integer_near_ties(m)]


def _misses(want: dict[str, Any], outs: list[Any], tol: Any, exact: list[Any] | None,
            only: list[int] | None = None, spreads: list[Any] | None = None) -> tuple[list[tuple[int, Any]], list[Any] | None]:
    """The calls (of `only`, else all) whose outputs miss the referee's at `tol`, judged against its
    float64 outputs where `exact` has them (with what the policy allows, `spreads[k]`, where
    measured); and `exact`, passed on."""
    from stitchcuda.agents.verify.compare import compare_outputs, judge_against_exact

    misses = []
    for k in range(len(outs)) if only is None else only:
        m = compare_outputs(want["outputs"][k], outs[k], tol)
        if not m.ok and exact is not None and exact[k] is not None:
            with contextlib.suppress(Exception):
                spread = spreads[k] if spreads and k < len(spreads) else None
                m = judge_against_exact(want["outputs"][k], outs[k], exact[k], tol, spread)
        if not m.ok:
            misses.append((k, m))
    return misses, exact


def _tell(proc: subprocess.Popen, word: str) -> str:
    """'' once the waiting referee was given `word`; else why not."""
    try:
        assert proc.stdin is not None
        proc.stdin.write(word + "\n")
        proc.stdin.flush()
    except OSError as e:
        return f"{type(e).__name__}: {e}"
    return ""


HARD_CAP = 4  # times the time limit: a process said to wait for the GPU lock longer than that is ended


class _Clock:
    """A process's time against its limit, leaving out the time its lock state says it waited for the
    GPU lock (behind the neighbours' timing); at most HARD_CAP times the limit in all, as the witness's
    state is the candidate's to write."""

    def __init__(self, timeout_s: float, lock_state: Path | None):
        from stitchcuda.agents.verify.locks import LockState

        self._read = LockState.read
        self.timeout_s, self.lock_state = timeout_s, lock_state
        self.t0 = self.last = time.monotonic()
        self.waited = 0.0

    def over(self) -> bool:
        now = time.monotonic()
        state = self._read(self.lock_state) if self.lock_state is not None else None
        if state is not None and state.state == "waiting":
            self.waited += now - max(self.last, state.since)
        self.last = now
        return now - self.t0 - self.waited > self.timeout_s or now - self.t0 > HARD_CAP * self.timeout_s


def _saved(proc: subprocess.Popen, path: str, timeout_s: float, log: Path, lock_state: Path) -> str:
    """'' once the referee saved `path` (it then waits for the next word); else why not."""
    clock = _Clock(timeout_s, lock_state)
    while not Path(path).exists():
        if proc.poll() is not None:
            return _outcome(proc, 0, log) or "it exited without saving its outputs"
        if clock.over():
            _kill(proc)
            return f"no result after {timeout_s:.0f} s"
        time.sleep(0.02)
    return ""


def _exact(proc: subprocess.Popen, path: str, timeout_s: float, log: Path,
           lock_state: Path) -> tuple[list[Any] | None, list[Any]]:
    """The referee's float64 outputs, asked for (None where it could not give them), and per call what
    the policy allows (a compare.RoundingSpread, or None where not measured)."""
    import torch

    from stitchcuda.agents.verify.compare import RoundingSpread

    if _tell(proc, EXACT) or _saved(proc, path, timeout_s, log, lock_state) or not Path(path).exists():
        return None, []
    saved = torch.load(path, weights_only=True)
    spreads = [RoundingSpread(own=list(a["own"]), samples=int(a["samples"]), policy=str(a["policy"]),
                              policy_own=list(a["policy_own"])) if isinstance(a, dict) else None
               for a in saved.get("allowed") or []]
    return saved["exact"], spreads


def _ran_out_of_memory(log: Path) -> bool:
    """Whether a blind check's process failed for GPU memory while checks shared the GPU (with the
    GPU held alone, a witness that fails is a finding, whatever it prints)."""
    from stitchcuda.agents.verify.locks import shared_checks

    return shared_checks() and any(w in tail(log, 8192) for w in _OOM_WORDS)


def _log_end(log: Path, size: int) -> str:
    return tail(log, size).strip() or "(empty)"


def tail(log: Path, size: int) -> str:
    """The last `size` bytes of a log (the candidate's may be any size)."""
    try:
        with log.open("rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - size))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def _outcome(proc: subprocess.Popen, timeout_s: float, log: Path, lock_state: Path | None = None) -> str:
    """'' once `proc` exited 0; else why not (its log's last line). Its whole process group is
    killed when it outlasts `timeout_s` (time waiting for the GPU lock left out)."""
    clock = _Clock(timeout_s, lock_state)
    while True:
        try:
            rc = proc.wait(timeout=0.05)
            break
        except subprocess.TimeoutExpired:
            if clock.over():
                _kill(proc)
                return f"no result after {timeout_s:.0f} s"
    if rc:
        last = tail(log, 4096).strip().splitlines()[-1:] or [""]
        return f"exit code {rc}: {last[0][:300]}"
    return ""


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
