"""The local-change pairs again, their candidate outputs made in a process that never saw the base.

The worker's local-change check (local_change.py) runs the base and its pairs in one process, so a
candidate that keeps every input set it is given can answer a pair with its kept estimate of the
base plus the exact change of the slices that differ (red-team round 15): its miss is then nothing.
Here each pair's two sets run in two processes, one of which never saw the other set:

1. the worker runs every checked random set after random-0 on inputs mixed from two draws: the set
   its seed gives with a secret share of its slices from a donor draw (local_change.mixed; such a
   set is a plain draw to any statistic of independent slices). ANCHORS of them are the pairs' bases
   (one the local-change base, the others chosen in secret too). Once its own pairs passed, it
   keeps the candidate's and the reference's outputs on those sets (at
   local_change.Places) in a file of the run folder, and reports the file's digest in its signed
   verdict (`local_base`, local_change.keep_base), with each set's seeds and the places' seed;
2. the witness (the candidate alone, in a folder of its own: witness_home) builds the candidate
   again with the worker's weights and, after its blind calls, runs it on each anchor's unmixed
   set, made from the anchor's seed alone: the pair. It is told no donor's seed, nor which slices
   were swapped, so the set the worker ran is nowhere in its process, and each pair looks like any
   random set. (Nothing is written across processes: a loss's 4 GB inputs are paired too.);
3. once the witness has exited, the referee (the reference alone, outside the sandbox) makes each
   anchor's mixed set and its pair again and computes the reference on the mixed set (twice: its own
   run-to-run noise) and on the pair; the parent judges the candidate's change, the witness's pair
   outputs less the worker's anchor outputs, against the reference's, as local_change does.

An estimate made in the worker misses by its own error on the anchor, whatever the witness does:
exact there, the miss is that error whole; an estimate there too, the difference of two estimates'
errors. Pairs of one base would share that error, and a witness's later pairs its first pair's (a
candidate keeping each set answers a set of mostly the same slices from it): so each pair has a
base of its own, and their misses are drawn apart. A candidate whose outputs follow the module's in
both processes passes: the two outputs of an honest candidate on one set differ by rounding, and by
the reference's own noise where that has any (allowed twice, as in the worker).

A reference that draws random numbers (a dropout) draws them alike in every process: each call runs
under its anchor's draw seed, as the worker's pairs do.

Skipped, with a note, where the worker kept no anchor (lean inputs or no fake input set to size them
by, fewer than two random sets, weights the candidate did not take from the reference, a reference
refusing every mixed set: each such set runs again unmixed, with a note), or where the referee's
reference on an anchor is not the worker's (a module whose state moves from call to call).

Where get_inputs builds structure across slices that the reference does not check (a symmetric
matrix), a mixed set can be told from a plain one: so the timed sets are mixed too (worker.timing_mixes),
and a candidate exact on every mixed set is exact while timed. The sets still plain (random-0, the
adversarial ones, the witness's) are checked against the reference, within its tolerance.
"""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from stitchcuda.agents.verify import local_change
from stitchcuda.agents.verify.draw_tracking import AGGREGATE_ELEMENTS
from stitchcuda.types import Finding

WORD = "pairs"  # the referee's word to make ready for the pairs (the recipe follows as JSON)
EXACT_WORD = "pairs-fp64"  # ... and to measure its own error of each pair's change
BASE_FILE = local_change.BASE_FILE
FORGED_BASE = "report-forged"
REFUSED_IN_WORKER = "reference-refused-in-worker"
_ANCHOR_KEYS = ("seed", "donor_seed", "picks_seed", "draw_seed")


@dataclass
class Recipe:
    """How the referee makes the pairs: the worker's anchors (each one's seed, its donor's and its
    slices' seeds, and its draw seed), its places' seed and the reference's weights' seed."""

    anchors: list[dict[str, int]]
    places_seed: int
    init_seed: int
    # The mixed sets the worker's reference rejected (each run again unmixed there), as anchors are
    # told: the referee's reference, which the candidate never reached, must reject them too.
    refused: list[dict[str, Any]] = field(default_factory=list)

    def for_witness(self) -> dict[str, Any] | None:
        """What the witness needs: each pair's seed and draw seed, not the donors' nor the slices'
        (with them it could make the set the worker ran, and its estimate of it, for itself); None
        where there is no pair."""
        if not self.anchors:
            return None
        return {"pair_seeds": [a["seed"] for a in self.anchors], "draw_seeds": [a["draw_seed"] for a in self.anchors],
                "places_seed": self.places_seed, "init_seed": self.init_seed}


def recipe(local_base: dict[str, Any] | None, init_seed: Any) -> tuple[Recipe | None, str]:
    """The pairs' recipe from the worker's report of its anchors, or None and why not."""
    if not isinstance(local_base, dict) or init_seed is None:
        return None, "no base kept by the worker"
    try:
        r = Recipe([{k: int(a[k]) for k in _ANCHOR_KEYS} for a in local_base["anchors"]],
                   int(local_base["places_seed"]), int(init_seed),
                   [{"set": str(a.get("set", "")), **{k: int(a[k]) for k in _ANCHOR_KEYS}}
                    for a in local_base.get("refused") or []])
    except (KeyError, TypeError, ValueError):
        return None, "the worker's report of its base does not read as one"
    if not r.anchors and not r.refused:
        return None, "no base kept by the worker (lean inputs)"
    return r, ""


def to_word(r: Recipe) -> str:
    return f"{WORD} {json.dumps(asdict(r))}"


def from_word(line: str) -> Recipe | None:
    if not line.startswith(WORD + " "):
        return None
    return Recipe(**json.loads(line[len(WORD) + 1:]))


def _elements(t: Any) -> int:
    return t.numel() if isinstance(t, torch.Tensor) else 0


# ---------------------------------------------------------------------------------------------
# The referee's side (the reference alone)


def anchor_inputs(get_inputs: Any, a: dict[str, int], device: Any) -> list[Any]:
    """The set the worker ran: the anchor's draw with its donor's slices (worker._set_inputs)."""
    from stitchcuda.agents.verify.worker import _set_inputs

    return _set_inputs(get_inputs, a["seed"], None, device, (a["donor_seed"], a["picks_seed"]))


def pair_inputs(get_inputs: Any, a: dict[str, int], device: Any) -> list[Any]:
    """The set the witness ran: the anchor's draw alone."""
    from stitchcuda.inputs import make_inputs

    return make_inputs(get_inputs, a["seed"], device)


def reference_outputs(ref: Any, get_inputs: Any, r: Recipe, device: Any) -> dict[str, Any]:
    """The reference's outputs at the places: on each anchor's set twice (its run-to-run noise), then
    on its pair, each under the anchor's draw seed; one set on the device at a time. And
    `refused_accepted`: the names of the sets the worker's reference rejected mixed that this one
    accepts (reference_accepts)."""
    places = local_change.Places(r.places_seed)
    out: dict[str, Any] = {"base": [], "again": [], "pairs": [], "refused_accepted": []}
    for a in r.anchors:
        args = anchor_inputs(get_inputs, a, device)
        out["base"].append(places_of(places, _run(ref, args, a["draw_seed"], device)))
        out["again"].append(places_of(places, _run(ref, args, a["draw_seed"], device)))
        args = pair_inputs(get_inputs, a, device)
        out["pairs"].append(places_of(places, _run(ref, args, a["draw_seed"], device)))
        del args
    # (After the anchors: a module whose state moves with each call is judged on the bases as the
    # worker ran them, not after these calls too.)
    for a in r.refused:
        if reference_accepts(ref, get_inputs, a, device):
            out["refused_accepted"].append(a.get("set") or a["seed"])
    return out


def reference_accepts(ref: Any, get_inputs: Any, a: dict[str, Any], device: Any) -> bool:
    """Whether the reference computes on a set the worker ran it on mixed (anchor_inputs), under
    its draw seed. Any failure here is a refusal (out of memory too: then nothing is said)."""
    try:
        _run(ref, anchor_inputs(get_inputs, a, device), a["draw_seed"], device)
    except Exception:  # noqa: BLE001 - its refusal is the answer
        return False
    return True


def own_errors(ref: Any, get_inputs: Any, r: Recipe, device: Any, ops: Any, policy: str,
               strict: bool = False) -> tuple[list[dict[int, float]], list[dict[int, float]]]:
    """Per pair and output, the fp32 reference's own error of the change (against float64, and under
    TF32 where the policy allows it), as the worker allows it (local_change.own_change_error); and per
    anchor and output, its largest error on the anchor's set under TF32 (none under a strict policy).
    `strict` (a reference drawing random numbers, which float64 draws otherwise): its TF32 error alone,
    against itself with TF32 off under the same draws (worker._strict_outputs), as the worker measures it."""
    from stitchcuda.agents.verify.worker import _exact_and_policy, _strict_outputs

    places = local_change.Places(r.places_seed)
    buffers = [b.detach().clone() for b in ref.buffers()]

    def runs(args: list[Any], draw_seed: int) -> list[list[Any]]:
        if strict:
            return [places_of(places, _strict_outputs(ref, buffers, _on(args, device), draw_seed))]
        return [places_of(places, o) for o in _exact_and_policy(ref, buffers, _on(args, device), ops, policy)]

    own, policy_base = [], []
    for a in r.anchors:
        args = anchor_inputs(get_inputs, a, device)
        ref0, exact0 = places_of(places, _run(ref, args, a["draw_seed"], device)), runs(args, a["draw_seed"])
        args = pair_inputs(get_inputs, a, device)
        ref1, exact1 = places_of(places, _run(ref, args, a["draw_seed"], device)), runs(args, a["draw_seed"])
        del args
        own.append(local_change.own_change_error(ref0, exact0, ref1, exact1))
        # (Against TF32 off, the fp32 reference's own distance from that run is its TF32 error.)
        under = [ref0] if strict else exact0[1:]
        policy_base.append({i: max((local_change.distance(u[i], e) for u in under if i < len(u)), default=0.0)
                            for i, e in enumerate(exact0[0])})
    return own, policy_base


def _run(model: Any, args: list[Any], draw_seed: int, device: Any) -> list[Any]:
    from stitchcuda.agents.verify.dynamic_check import flatten_outputs
    from stitchcuda.agents.verify.worker import same_draws

    same_draws(draw_seed)
    return flatten_outputs(model(*_on(args, device)))


def _on(args: list[Any], device: Any) -> list[Any]:
    return [a.to(device).clone() if isinstance(a, torch.Tensor) else a for a in args]


def places_of(places: local_change.Places, outs: list[Any]) -> list[Any]:
    return local_change.on_cpu(places.take(outs))


# ---------------------------------------------------------------------------------------------
# The parent's side


@dataclass
class Judged:
    finding: Finding | None = None
    note: str = ""


# Under a TF32 policy the candidate's kernels may differ between the worker and the witness (a library
# choosing among convolution algorithms by timing on first calls), and with them TF32's rounding of
# the unchanged slices, which then does not cancel in the change: this many times the reference's own
# TF32 error on the base is allowed beside the change's. On the H100 (2026-12-07) an honest TF32
# GoogLeNet, whose logits move 9e-5 in L2 between a pair, missed by 1.08 times what was allowed
# without it. Not for an output of at most AGGREGATE_ELEMENTS (a loss): there TF32's error is mostly
# its operands' rounding, the same in any algorithm, and allowing it let red-team round 15's
# candidate through on a TF32 MSE of a linear layer (its error 2.2 times the change).
ACROSS_PROCESSES = 2.0


def judge(run_dir: Path, local_base: dict[str, Any], got: Any, want: Any,
          own: list[dict[int, float]] | None = None,
          policy_base: list[dict[int, float]] | None = None) -> Judged:
    """The candidate's change between the worker's bases and the witness's pairs against the
    referee's, as local_change judges the worker's pairs. `got`: the witness's pair outputs; `want`:
    the referee's (reference_outputs); `own`: the reference's own error of each pair's change, and
    `policy_base` its TF32 error on each base, where measured (own_errors)."""
    path = run_dir / BASE_FILE
    try:
        data = path.read_bytes()
    except OSError:
        return Judged(Finding(FORGED_BASE, f"the worker's kept base outputs ({BASE_FILE}) are gone from the run "
                              "folder, where the worker wrote them"))
    if hashlib.sha256(data).hexdigest() != local_base.get("sha256"):
        return Judged(Finding(FORGED_BASE, f"the worker's kept base outputs ({BASE_FILE}) changed after the worker "
                              "wrote them (their digest is not the one its signed report gave)"))
    accepted = want.get("refused_accepted") or []
    if accepted:
        return Judged(Finding(REFUSED_IN_WORKER, f"the reference rejected {len(accepted)} input set(s) mixed from two "
                              f"draws in the worker ({', '.join(map(str, accepted))}), where the candidate ran beside "
                              "it, and accepts them in the blind check's referee, which the candidate never reached: "
                              "something in the worker changed what the reference does, and those sets ran unmixed",
                              data={"sets": list(accepted)}))
    kept = torch.load(io.BytesIO(data), weights_only=True).get("anchors") or []
    bases, agains, ref_pairs = want["base"], want["again"], want["pairs"]
    refused = len(local_base.get("refused") or [])
    if not bases and not kept:
        return Judged(note=f"local-change pairs in the blind check: none (no mixed set kept by the worker); its "
                      f"reference's refusal of {refused} mixed set(s) is its referee's too")
    if not isinstance(got, list) or len(got) != len(ref_pairs) or not all(isinstance(g, list) for g in got):
        return Judged(Finding("blind-mismatch", "the blind check's witness saved no outputs of the local-change pairs"))
    if len(kept) != len(bases):
        return Judged(Finding(FORGED_BASE, f"the worker's kept base outputs ({BASE_FILE}) hold {len(kept)} sets "
                              f"where its signed report named {len(bases)}"))
    # The reference on each base in both processes: a module whose state moved between the worker's
    # calls computes something else here, and its change would not be the worker's.
    noise: list[dict[int, float]] = []
    apart: list[dict[int, float]] = []
    for b, (base, again) in enumerate(zip(bases, agains, strict=True)):
        ref0 = kept[b].get("ref") or []
        noise.append({i: local_change.distance(r, again[i]) if i < len(again) else 0.0 for i, r in enumerate(base)})
        apart.append({i: local_change.distance(r, ref0[i]) if i < len(ref0) else 0.0 for i, r in enumerate(base)})
        for i, r in enumerate(base):
            if isinstance(r, torch.Tensor) and r.is_floating_point() and apart[b][i] > \
                    2.0 * noise[b][i] + local_change.FLOOR * float(torch.linalg.vector_norm(r.double())) + 1e-30:
                return Judged(note="local-change pairs in the blind check skipped: the reference's outputs on the "
                              "base differ from the worker's (its state moves from call to call)")
    tally = local_change.Tally()
    for k, (ref1, got1) in enumerate(zip(ref_pairs, got, strict=True)):
        b = k % len(bases)
        base, got0 = bases[b], kept[b].get("got") or []
        # Judged by their change alone (an honest candidate more exact than the fp32 reference is far
        # from it on ill-conditioned sets, where the worker's fp64 referee judged it): but each output
        # must be there, of its shape, or it would be left out of the change.
        odd = [i for i, r in enumerate(ref1) if isinstance(r, torch.Tensor) and r.is_floating_point() and not (
            i < len(got1) and isinstance(got1[i], torch.Tensor) and got1[i].shape == r.shape
            and got1[i].is_floating_point())]
        if odd:
            return Judged(Finding("blind-mismatch", f"in the blind check's witness, the candidate's output {odd[0]} on "
                                  f"local-change pair {k} is not a floating tensor of the module's shape"))
        tf32 = (policy_base or [])[b] if policy_base and b < len(policy_base) else {}
        allowed = {i: 2.0 * noise[b][i] + apart[b][i] + ((own or [])[k].get(i, 0.0) if own and k < len(own) else 0.0)
                   + (ACROSS_PROCESSES * tf32.get(i, 0.0) if _elements(base[i]) > AGGREGATE_ELEMENTS else 0.0)
                   for i in noise[b]}
        local_change.add_pair(tally, local_change.pair_misses(base, got0, ref1, got1, allowed))
    found = local_change.finding(tally, where="run in the blind check's witness, a process that never saw the bases "
                                 "the worker ran")
    said = f"; its reference's refusal of {refused} mixed set(s) is its referee's too" if refused else ""
    return Judged(found, f"local-change pairs in the blind check: {tally.pairs} pairs judged on {len(bases)} bases{said}")
