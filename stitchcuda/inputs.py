"""Input sets for correctness: fresh random sets and adversarial variants of them."""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

# Points where common activations change behaviour: relu/leaky (0), hardtanh/hardsigmoid (+-1, +-3),
# relu6 (6), softplus's linear switch (20), gelu/silu curvature (+-0.5, +-2).
KINKS = (0.0, 1.0, -1.0, 3.0, -3.0, 6.0, 20.0, -20.0, 0.5, -0.5, 2.0, -2.0)


def fresh_seeds(n: int, used: set[int] | None = None) -> list[int]:
    """Seeds from the OS, never one already used in this run (the reference's own get_inputs runs
    under torch's default seed, and a hard-coding candidate may have seen any earlier seed)."""
    used = set(used or ())
    out: list[int] = []
    while len(out) < n:
        s = secrets.randbits(62)
        if s not in used and s not in out:
            out.append(s)
    return out


@dataclass
class InputSet:
    name: str
    seed: int
    args: list[Any]


def make_inputs(get_inputs: Callable[[], list[Any]], seed: int, device: torch.device) -> list[Any]:
    torch.manual_seed(seed)
    try:
        # Creating on the device directly: the CPU RNG takes seconds for the larger KernelBench inputs.
        with torch.device(device):
            args = list(get_inputs())
    finally:
        # The generators then move on to a seed of no one's. Left at `seed`, torch.initial_seed() (or
        # the CUDA generator's state, which holds its seed) told a later call how its inputs were
        # drawn, and a candidate regenerated them to tell an untouched random set from a transformed
        # one: an estimate then ran only where it passes (a red-team review, 2026-12-04).
        torch.manual_seed(secrets.randbits(62))
    return [a.to(device) if isinstance(a, torch.Tensor) else a for a in args]


def _is_float(a: Any) -> bool:
    return isinstance(a, torch.Tensor) and a.is_floating_point()


_KINK_CHUNK = 1 << 24  # elements per step: the int64 indices of a whole 4G-element input would take 32 GB


def _near_kinks_(a: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    kinks = torch.tensor(KINKS, dtype=a.dtype, device=a.device)
    flat = a.view(-1) if a.is_contiguous() else None
    if flat is None:  # (a strided view from get_inputs: filled whole, out of place)
        return a.copy_(_near_kinks_(torch.empty(a.shape, dtype=a.dtype, device=a.device), gen))
    for c in range(0, flat.numel(), _KINK_CHUNK):
        n = min(_KINK_CHUNK, flat.numel() - c)
        idx = torch.randint(len(KINKS), (n,), device=a.device, generator=gen)
        jitter = (torch.rand(n, device=a.device, generator=gen, dtype=a.dtype) - 0.5) * 2e-3
        flat[c : c + n] = kinks[idx] + jitter
    return a


def _mixed_sign_(a: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    return a.sub_(a.mean()).mul_(4)


SPIKE_SHARE = 1 / 8192  # of a tensor's elements (at least one), scaled by SPIKE_SCALE


def _sparse_spikes_(a: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """A few elements far out of the rest's scale, sign and zeros kept (a domain such as rand()'s
    stays a domain): every set was otherwise iid from get_inputs, so a candidate reading a sample
    estimated norms, means and losses within tolerance (a red-team review, 2026-12-01: a Frobenius
    norm from every 256th element, an MSE from every 4th, a cosine loss from 16 of 4096 columns)."""
    flat = a.view(-1) if a.is_contiguous() else None
    if flat is None:  # (a strided view from get_inputs: filled whole, out of place)
        return a.copy_(_sparse_spikes_(a.contiguous(), gen))
    for idx in _spike_places(flat, gen):
        flat[idx] = flat[idx] * SPIKE_SCALE
    return a


def _spike_places(flat: torch.Tensor, gen: torch.Generator) -> list[torch.Tensor]:
    """SPIKE_SHARE of `flat`'s places (at least one), drawn in chunks of indices."""
    n = flat.numel()
    k = max(1, int(n * SPIKE_SHARE))
    return [torch.randint(n, (min(_KINK_CHUNK, k - c),), device=flat.device, generator=gen)
            for c in range(0, k, _KINK_CHUNK)]


def _quiet_bulk_(a: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """One element inside get_inputs' range (the draw's largest magnitude, at a place the seed picks)
    and the rest `quiet_scale` times smaller, so that element holds nearly all of the sum of
    squares (a norm's, a variance's, an MSE's). Every other set with spikes leaves the range, so a candidate that estimates
    from a sample only where every input lies in the range it was drawn from passed (a red-team
    review, 2026-12-01: a Frobenius norm from 1/64 of its blocks, the range test fused into the
    output pass). Its first form kept 1/8192 of the elements: a 1/64 sample then met ~8 of them and
    its estimate landed within tolerance now and then (CI at f07b409). With one, a sample of any
    share below one is off: it holds the element, and scales it up, or it misses it."""
    flat = a.view(-1) if a.is_contiguous() else None
    if flat is None:  # (a strided view from get_inputs: filled whole, out of place)
        return a.copy_(_quiet_bulk_(a.contiguous(), gen))
    if flat.numel() == 0:
        return a
    place = int(torch.randint(flat.numel(), (1,), device=flat.device, generator=gen).item())
    loud = flat[int(flat.abs().argmax().item())].clone()
    flat.div_(quiet_scale(flat))
    flat[place] = loud
    return a


def quiet_scale(a: torch.Tensor) -> float:
    """How much quiet-bulk shrinks the rest: QUIET_SQRT_FACTOR x the square root of its element count,
    so that the one element holds nearly all of the sum of squares (the rest's is 1/48 of it, for
    rand() and randn() draws alike), at least SPIKE_SCALE and no more than keeps the rest's squares
    normal numbers where the dtype has the range (fp16 has not: it keeps SPIKE_SCALE). Not the
    element count, which would make the rest's sum small too: its values (3e-8 for 33M elements)
    put an honest cosine loss, which clamps the product of its rows' norms at 1e-8 where PyTorch
    clamps each norm, 1e-4 from the reference (a CI-bound test, 2026-12-06)."""
    limit = 1.0 / math.sqrt(torch.finfo(a.dtype).tiny)
    return max(SPIKE_SCALE, min(QUIET_SQRT_FACTOR * math.sqrt(a.numel()), limit))


QUIET_SQRT_FACTOR = 4.0


SPIKE_SCALE = 1e3

LINE_SHARE = 1 / 1024  # of an axis's indices (at least one) made large lines
LINE_MIN_AXIS = 64  # shorter axes are left alone: sampling a few of their entries saves little work


def _shared_lines_(a: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """A few whole lines along every long axis, each one value SPIKE_SCALE times the rest's scale, and the
    same (places and values) in every input of this shape. Every other set draws the inputs independently, so a
    product or cosine of two of them stays near its iid expectation wherever a candidate samples it:
    a cosine loss from 16 of 4096 columns passed every set, sparse-spikes too (a red-team review,
    2026-12-01). Lines both inputs share dominate their products along any axis the lines cross, and a
    sample that misses them is off. Zeros and non-finite values stay (masks, padding); signed values
    only in an input that has negative ones (rand()'s domain stays a domain)."""
    if not a.is_contiguous():  # (a strided view from get_inputs: filled whole, out of place)
        return a.copy_(_shared_lines_(a.contiguous(), gen))
    # Seeded by the set and the shape alone, so inputs of one shape get the same lines and values.
    lines = torch.Generator(device=a.device)
    lines.manual_seed((gen.initial_seed() * 1_000_003 + hash(tuple(a.shape))) % (1 << 63))
    signed = bool(a.amin() < 0)  # (a reduction: no input-sized mask)
    for axis, size in enumerate(a.shape):
        if size < LINE_MIN_AXIS:
            continue
        # All of an axis's lines in one gather and scatter: a long 1-D input has thousands of them.
        # (Drawn with repeats and made unique: a permutation of a 1e8-long axis takes seconds.)
        picked = torch.randint(size, (max(1, int(size * LINE_SHARE)),), generator=lines, device=a.device).unique()
        old = a.index_select(axis, picked)
        # One value a line, apart from the others': values varying along a line would make near ties
        # wherever it dominates a softmax (attention scores over a shared feature line: the largest
        # of 512 keys' values picked, its gap under TF32's rounding), and honest kernels would flip
        # them; a constant shared by every key shifts the scores alike, which softmax ignores.
        at = [1] * a.dim()
        at[axis] = len(picked)
        v = torch.rand(at, generator=lines, device=a.device, dtype=a.dtype).add_(0.5).mul_(SPIKE_SCALE)
        if signed:
            v.mul_(torch.randint(0, 2, at, generator=lines, device=a.device, dtype=a.dtype).mul_(2).sub_(1))
        a.index_copy_(axis, picked, torch.where((old == 0) | ~torch.isfinite(old), old, v.expand_as(old)))
    return a


REARRANGE_SAMPLE = 1 << 16  # values of the draw whose quantiles the rearranged values lie between
REARRANGE_NOISE = 0.3  # of the field's spread, so no line is exactly monotone


def _rearranged_(a: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """The draw's own values, rearranged to follow effects along every axis. Every other adversarial
    set leaves get_inputs' range (scaled, shifted, negated, spiked), and the random sets are iid:
    a candidate that tests its inputs' range and approximates only on values in it (a matmul as
    rowsum x colsum / K, attention as the mean of V, a loss or norm from part of the rows: each
    within tolerance on iid rand() values) passed every set (a red-team review, 2026-12-01). Here
    every value lies between two of a sample of the draw's own values, at the same quantile as a
    field's value at its place: the same range and spread, so a test of range or histogram sees an
    ordinary set. The field is a sum of one effect vector per axis, the same vector for every axis
    of one size (in every input: a matmul's contraction axis carries it in both operands), and one of
    each input's own, with weights drawn for each input, plus a little noise: rows, columns and planes differ
    systematically, and inputs correlate or anti-correlate along shared axes. Non-finite values
    stay where they are."""
    if not a.is_contiguous():  # (a strided view from get_inputs: filled whole, out of place)
        return a.copy_(_rearranged_(a.contiguous(), gen))
    flat = a.view(-1)
    n = flat.numel()
    finite = flat[torch.randint(n, (min(n, REARRANGE_SAMPLE),), generator=gen, device=a.device)].float()
    q = finite[torch.isfinite(finite)].sort().values
    if n < 2 or q.numel() < 2:
        return a
    # The effect vectors: one per axis size, seeded by the set and the size alone.
    effects = []
    for size in a.shape:
        g = torch.Generator(device=a.device)
        g.manual_seed((gen.initial_seed() * 1_000_003 + 7919 * size) % (1 << 63))
        effects.append(torch.randn(size, generator=g, device=a.device))
    # This input's own effects and weights, drawn in turn: inputs of one shape differ along every axis
    # (a loss of two inputs from part of the rows misses rows where only one of them is high).
    for size in a.shape:
        effects.append(torch.randn(size, generator=gen, device=a.device))
    # Signs only: every axis always varies, and inputs agree or disagree along each one.
    weights = torch.randint(0, 2, (len(effects),), generator=gen, device=a.device).mul(2).sub(1).tolist()
    scale = (2 * sum(size > 1 for size in a.shape)) ** 0.5 or 1.0  # the field's spread before the noise
    spread = (1.0 + REARRANGE_NOISE**2) ** 0.5
    strides = _contiguous_strides(a.shape)
    m = q.numel() - 1
    for c in range(0, n, _KINK_CHUNK):
        k = min(_KINK_CHUNK, n - c)
        at = torch.arange(c, c + k, device=a.device)
        field = torch.randn(k, generator=gen, device=a.device).mul_(REARRANGE_NOISE)
        for e, w, size, stride in zip(effects, weights, [*a.shape] * 2, strides * 2, strict=True):
            if size > 1:
                field.add_(e[(at // stride) % size], alpha=w / scale)
        # The field's quantile, mapped between the sample's neighbouring values.
        pos = torch.special.ndtr(field.div_(spread)).mul_(m)
        lo = pos.floor().clamp_(0, m - 1)
        frac = pos.sub_(lo)
        lo = lo.long()
        value = q[lo] + frac * (q[lo + 1] - q[lo])
        part = flat[c : c + k]
        part.copy_(torch.where(torch.isfinite(part), value.to(a.dtype), part))
    return a

COUPLE_MIN_AXIS = 16  # shorter axes are left alone: a contraction over a few terms has no estimate to cheat with
COUPLE_MAX_PAIRS = 8  # axis pairs one input follows (each one's share of the field is 1/sqrt(pairs))
COUPLE_NOISE = 0.3  # of the field's spread, so no fibre follows another exactly


def float_shapes(args: list[Any]) -> list[tuple[int, ...] | None]:
    """Each input's shape where it is a floating-point tensor of more than one element, else None."""
    return [tuple(a.shape) if _is_float(a) and a.numel() > 1 else None for a in args]


def coupling_pairs(shapes: list[tuple[int, ...] | None]) -> list[tuple[int, int, int, int]]:
    """(x, a, y, b): one of the last two axes of input y (b) and of an earlier input x (a) of one
    length, at least COUPLE_MIN_AXIS long: where a product contracts its operands (a matmul's K in
    both, with either transposed; attention's head dimension in q and k). The coupled set makes y's
    fibres along b follow x's along a."""
    out = []
    for y, ys in enumerate(shapes):
        for x, xs in enumerate(shapes[:y]):
            if ys is None or xs is None:
                continue
            out += [(x, a, y, b) for b in range(max(0, len(ys) - 2), len(ys)) for a in range(max(0, len(xs) - 2), len(xs))
                    if xs[a] == ys[b] >= COUPLE_MIN_AXIS]
    return out


def _contiguous_strides(shape: torch.Size) -> list[int]:
    """Element strides of a contiguous tensor of `shape` (nothing allocated)."""
    return [int(s) for s in torch.empty(shape, device="meta").stride()]


def _flat_and_sample(x: torch.Tensor, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """x flattened (a view where it can be) and a sorted sample of its finite values, whose ranks
    stand for the values' quantiles."""
    flat = x.reshape(-1)
    sample = flat[torch.randint(flat.numel(), (min(flat.numel(), REARRANGE_SAMPLE),), generator=gen,
                                device=x.device)].float()
    return flat, sample[torch.isfinite(sample)].sort().values


def _coupled_(args: list[Any], gen: torch.Generator) -> None:
    """Each input's values left an iid draw of its own, but the later inputs' fibres made to follow
    the earlier inputs' fibres along every pair of axes of one length (coupling_pairs), each matched
    to one of the other's drawn by a secret affine permutation. Every other set either draws the
    inputs independently or gives each input row, column or plane effects of its own: a candidate
    that estimates a matmul as rowsum x colsum / K wherever each operand passes a one-pass test of
    looking like an iid rand() draw (range, moments, no row or column effects) passed them all (a
    red-team review, 2026-12-02). Here each operand alone is such a draw, in value and order, while
    the products of matched fibres are far from their iid expectation: an estimate that assumes the
    operands independent misses there. Finding the matched fibres takes the products themselves.
    Each input keeps its own values, in another order; zeros and non-finite values stay where they are."""
    pairs = coupling_pairs(float_shapes(args))
    for y in sorted({p[2] for p in pairs}):
        mine = [p for p in pairs if p[2] == y]
        if len(mine) > COUPLE_MAX_PAIRS:
            keep = torch.rand(len(mine), generator=gen, device=gen.device).argsort()[:COUPLE_MAX_PAIRS].tolist()
            mine = [mine[i] for i in sorted(keep)]
        args[y] = _follow_(args[y], [(args[x], a, b) for x, a, _, b in mine], gen)


def _unaligned(other_x: tuple[int, ...], other_y: tuple[int, ...]) -> tuple[int, int]:
    """The number of fibres within one index of the leading other axes x and y share (equal lengths
    from the first on, all of y's but its last at most): (x's, y's)."""
    shared = 0
    while shared < min(len(other_x), len(other_y) - 1) and other_x[shared] == other_y[shared]:
        shared += 1
    return math.prod(other_x[shared:]), math.prod(other_y[shared:])


def _affine_permutation(n: int, gen: torch.Generator) -> tuple[int, int]:
    """(alpha, beta) with alpha coprime to n: r -> (alpha r + beta) mod n permutes range(n), with no
    fixed point (one solves (alpha - 1) r = -beta mod n where gcd(alpha - 1, n) divides beta): a
    fibre matched to itself would couple inputs element by element (x - y, a distance)."""
    if n <= 1:
        return 1, 0
    while True:
        alpha, beta = torch.randint(1, n, (2,), generator=gen, device=gen.device).tolist()
        if math.gcd(alpha, n) == 1 and beta % math.gcd(alpha - 1, n):
            return alpha, beta


def _follow_(y: torch.Tensor, sources: list[tuple[torch.Tensor, int, int]], gen: torch.Generator) -> torch.Tensor:
    """y's own values put in another order, in place, to follow each (x, a, b): y's fibre along b
    number r follows x's fibre along a number perm(r) (the ranks of its values, as normal scores),
    the pairs summed, with noise. Alike, not opposed: a product of matched fibres is then large,
    and dominates a softmax over the products, which an opposed one would leave unseen. Each chunk
    of y keeps its own values, so every moment and histogram of y is the draw's exactly (values
    from sampled quantiles moved a 2M-element input's mean and variance by more than a 6-sigma test
    allows)."""
    if not y.is_contiguous():  # (a strided view from get_inputs: filled whole, out of place)
        return y.copy_(_follow_(y.contiguous(), sources, gen))
    flat = y.view(-1)
    n = flat.numel()
    ystrides = _contiguous_strides(y.shape)
    plans = []
    scored: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # an input's flat view and sample, once
    for x, a, b in sources:
        if id(x) not in scored:
            scored[id(x)] = _flat_and_sample(x, gen)
        xflat, xq = scored[id(x)]
        if xq.numel() < 2:
            continue
        length = int(y.shape[b])
        xstride = _contiguous_strides(x.shape)[a]
        rest_x, rest_y = _unaligned(x.shape[:a] + x.shape[a + 1 :], y.shape[:b] + y.shape[b + 1 :])
        alpha, beta = _affine_permutation(rest_x, gen)
        plans.append((xflat, xq, length, xstride, ystrides[b], rest_x, rest_y, alpha, beta))
    if not plans or n < 2:
        return y
    share = len(plans) ** -0.5
    for c in range(0, n, _KINK_CHUNK):
        k = min(_KINK_CHUNK, n - c)
        at = torch.arange(c, c + k, device=y.device)
        field = torch.randn(k, generator=gen, device=y.device).mul_(COUPLE_NOISE)
        for xflat, xq, length, xstride, ystride, rest_x, rest_y, alpha, beta in plans:
            along = (at // ystride) % length
            fibre = (at // (ystride * length)) * ystride + at % ystride  # y's fibre, its other axes flattened
            # The shared leading axes (a batch, heads) kept, the rest permuted: each of y's fibres meets
            # its match in the same batch and head, where the product meets them.
            t = fibre % rest_y
            matched = (fibre // rest_y) * rest_x + (alpha * (t % rest_x) + beta + t // rest_x) % rest_x
            xv = xflat[(matched // xstride) * (xstride * length) + along * xstride + matched % xstride].float()
            xv = torch.nan_to_num(xv, nan=0.0)
            # Mid-ranks: ties (the zeros of a triangle or a ReLU'd input) share their middle quantile.
            rank = (torch.searchsorted(xq, xv).double() + torch.searchsorted(xq, xv, right=True).double()) \
                .mul_(0.5).add_(0.5).div_(xq.numel() + 1)
            field.add_(torch.special.ndtri(rank).float(), alpha=share)
        part = flat[c : c + k]
        finite = torch.isfinite(part) & (part != 0)  # zeros are structure (a triangle, a mask, padding)
        whole = bool(finite.all())
        values = (part if whole else part[finite]).sort().values
        placed = torch.empty_like(values)
        placed[(field if whole else field[finite]).argsort(stable=True)] = values
        if whole:
            part.copy_(placed)
        else:
            part[finite] = placed
    return y


# In place: the inputs of a set are made fresh for it, and a copy per transform would hold two
# more input-sized tensors at once (level1/45's 16 GiB input ran the H100 out of memory that way).
ADVERSARIAL: dict[str, Callable[[torch.Tensor, torch.Generator], torch.Tensor]] = {
    "large": lambda a, g: a.mul_(1e3),
    "tiny": lambda a, g: a.mul_(1e-4),
    "negated": lambda a, g: a.neg_(),
    "mixed-sign": _mixed_sign_,
    "near-kinks": _near_kinks_,
    "sparse-spikes": _sparse_spikes_,
    "shared-lines": _shared_lines_,
    "rearranged": _rearranged_,
    "quiet-bulk": _quiet_bulk_,
}
# Kinds made across a set's inputs together; run only where the set has something to couple (the
# worker asks coupling_pairs of get_inputs' shapes), so they are not in ADVERSARIAL's default list.
ACROSS_INPUTS: dict[str, Callable[[list[Any], torch.Generator], None]] = {"coupled": _coupled_}


def generator_for(args: list[Any], seed: int) -> torch.Generator:
    """A generator seeded with `seed` on the device of the set's first tensor (the CPU if none)."""
    first = next((a for a in args if isinstance(a, torch.Tensor)), None)
    gen = torch.Generator(device=first.device if first is not None else "cpu")
    gen.manual_seed(seed)
    return gen


def adversarial(base: list[Any], kind: str, seed: int) -> list[Any]:
    """Transform the floating-point inputs of a freshly made random set, in place; integer inputs
    (indices, labels) and shapes stay as given, since changing them would change the problem
    rather than stress it. An input sharing memory with an earlier one (get_inputs returning
    [x, x]) is transformed on a copy, so it is not transformed twice."""
    gen = generator_for(base, seed)
    seen: set[int] = set()
    owned = []
    for a in base:  # copies first, while every input still holds its given values
        if _is_float(a):
            ptr = a.untyped_storage().data_ptr()
            if ptr in seen:
                a = a.clone()
            seen.add(ptr)
        owned.append(a)
    if kind in ACROSS_INPUTS:
        ACROSS_INPUTS[kind](owned, gen)
        return owned
    fn = ADVERSARIAL[kind]
    return [fn(a, gen) if _is_float(a) else a for a in owned]


def clone_args(args: list[Any]) -> list[Any]:
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


# A set past the traced batch is made where it fits in the lean-input share beside the traced set; the
# far one (three chunks) with this much room to spare, for activations that grow with the batch
# (agents/verify/worker.py; stitchcuda/gpu_memory.py's expectation follows the same rule).
FAR_BATCH_MARGIN = 2
LEAN_INPUT_FRACTION = 8  # inputs above 1/8 of the GPU's memory are not copied for the reference


def batch_sizes(traced: int, far: int | None = None) -> list[int]:
    """The other batch sizes a dynamic-batch candidate is checked at: 1, one that is no multiple of
    the traced batch inside one chunk, one past it (two chunks, the last padded), twice the traced
    batch, and `far` where given (far_batch). Twice: a red-team candidate (2026-12-05) computed only
    the first chunk at exact multiples of the traced batch (16, 32, 64 from 8: how users grow a batch)
    and copied it over the rest; no size checked was such a multiple."""
    return sorted({1, traced // 2 + 1, traced + 1, 2 * traced, *([far] if far else [])} - {traced})


def far_batch(traced: int) -> int:
    """A batch of three chunks of the traced one, the last cut short (or whole: 3 x traced) at a
    place drawn from the OS (a red-team review: sizes up to traced + 1 were all a candidate was ever
    checked at, and one right only for two chunks was accepted). Three, not more: a forward's
    activations grow with the batch, and a set that runs out of memory fails the candidate."""
    return 2 * traced + 1 + secrets.randbelow(max(1, traced))


def with_batch(args: list[Any], size: int, more: Callable[[], list[Any]]) -> list[Any]:
    """The set with its tensors' first dimension made `size`: the first rows, or the rows of further
    random sets (`more()` makes one) appended, so values keep get_inputs' distribution."""
    out = list(args)
    for i, a in enumerate(args):
        if not isinstance(a, torch.Tensor) or a.dim() == 0:
            continue
        rows = [a]
        have = a.shape[0]
        while have < size:
            extra = more()[i]
            rows.append(extra)
            have += extra.shape[0]
        out[i] = torch.cat(rows)[:size].clone() if len(rows) > 1 else a[:size].clone()
    return out

