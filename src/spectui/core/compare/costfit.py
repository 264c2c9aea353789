"""The step-cost model's fit: its points, their features and the weighted least squares.

`costmodel` states the model; this module fits it. A point is one stretch of decodes of one
slot (a whole run, or one decode of a session) with what the server's batches held besides that
slot's own tokens: the other active slots' sampled tokens and their drafts (`costbatch`). The
fit is least squares on *relative* error, since a run's time is measured to a share of itself.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

DECODE = "decode_ms"
"""Parameter name: one decode of a batch of one (ms)."""
BATCH = "batch_ms"
"""Parameter name: what each other slot's sampled token adds to a step (ms)."""
PROMPT = "prompt_ms"
"""Parameter name: what each prompt token of another slot, processed in a step of this one's,
adds to it (ms)."""
NGRAM = "ngram"
"""The group every n-gram type shares."""
MIN_POINTS = 2
"""Fewer points than this fit nothing."""
STEP_SPREAD = 1.25
"""A group's per-step cost is fitted only when its points' mean draft lengths (drafted per step)
span at least this ratio: with steps all of one length it cannot be told from the drafted
tokens' cost, and with nearly one length one odd step would decide it."""
BATCH_SPREAD = 1.0
"""The per-slot cost (``batch_ms``) is fitted only when the points' mean count of other active
slots spans at least this many slots (e.g. runs at 1 and at 2 streams): at one level every step
carries about as many slots, so it cannot be told from a decode's own cost, which then holds the
level's typical batch."""
BLOCK_ITERATIONS = 10
"""Alternations between the costs and the blocks' speeds (they settle in a few)."""


def drafted_key(group: str) -> str:
    """The parameter name of a group's per-drafted-token cost: 'drafted_ms.ngram'."""
    return f"drafted_ms.{group}"


def step_key(group: str) -> str:
    """The parameter name of a group's per-step cost: 'step_ms.draft-simple'."""
    return f"step_ms.{group}"


@dataclass(frozen=True, slots=True)
class CostPoint:
    """One observation: one slot's decodes and drafts, their group, the time they took, how many
    were verification steps, and what the other active slots added to the same batches."""

    decodes: float
    """Forward passes of the target (each a server step this slot was part of)."""
    drafted: float
    """Draft tokens they verified."""
    group: str | None
    """Cost group (None: no speculation)."""
    ms: float
    """Measured time."""
    block: int = 0
    """Which stretch of time it ran in (a compare round): each gets its own machine speed."""
    steps: float = 0.0
    """Of the decodes, verification steps (the rest tried no draft)."""
    others: float = 0.0
    """Over those server steps, the other active slots' sampled tokens (one per slot and step:
    0 for one stream, about (N - 1) x decodes at N streams)."""
    other_steps: float = 0.0
    """...their verification steps (the same config as this slot: a block runs one config)."""
    other_drafted: float = 0.0
    """...and their drafted tokens."""
    other_prompt: float = 0.0
    """Prompt tokens of other requests the server processed while this slot was decoding (in
    the same batches: a new request's prompt joins the running slots' step)."""


def features(point: CostPoint, names: Sequence[str]) -> list[float]:
    """The point's row for the parameters ``names`` (the first is always ``decode_ms``)."""
    row = [point.decodes]
    group = point.group or ""
    for name in names[1:]:
        if name == BATCH:
            row.append(point.others)
        elif name == PROMPT:
            row.append(point.other_prompt)
        elif name == drafted_key(group):
            row.append(point.drafted + point.other_drafted)
        elif name == step_key(group):
            row.append(point.steps + point.other_steps)
        else:
            row.append(0.0)
    return row


def point_ms(p: CostPoint, params: dict[str, float]) -> float:
    """The time ``params`` give ``p``."""
    names = [DECODE, BATCH, PROMPT]
    values = [params[DECODE], params.get(BATCH, 0.0), params.get(PROMPT, 0.0)]
    if p.group is not None:
        names += [drafted_key(p.group), step_key(p.group)]
        values += [params.get(names[3], 0.0), params.get(names[4], 0.0)]
    return sum(v * f for v, f in zip(values, features(p, names), strict=True))


def fit(points: Sequence[CostPoint]) -> dict[str, float] | None:
    """Weighted least squares on relative error; a cost that comes out negative (noise on a
    group with little data) is refitted at zero rather than kept as a time machine, and the
    per-step and per-slot costs are left out (0) when the points cannot tell them from the
    others."""
    groups = sorted({p.group for p in points if p.group is not None and p.drafted > 0})
    names = [DECODE, *(drafted_key(g) for g in groups)]
    names += [step_key(g) for g in groups if _lengths_vary(points, g)]
    if _slots_vary(points):
        names.append(BATCH)
    if any(p.other_prompt > 0 for p in points):
        names.append(PROMPT)
    zero: set[str] = set()
    while True:
        free = [n for n in names if n not in zero]
        rows = [[v / p.ms for v in features(p, free)] for p in points]
        theta = least_squares(rows, [1.0] * len(points))
        if theta is None:
            optional = [n for n in free if n.startswith("step_ms.") or n in (BATCH, PROMPT)]
            if not optional:
                return None
            zero.update(optional)  # collinear: every step of a group drafted the same length
            continue
        fitted = dict(zip(free, theta, strict=True))
        negative = [n for n in free[1:] if fitted[n] < 0]
        if not negative and fitted[DECODE] <= 0:
            # The optional terms took the whole cost (few points, much noise): without them.
            optional = [n for n in free if n in (PROMPT, BATCH) or n.startswith("step_ms.")]
            if not optional:
                return None
            zero.add(optional[-1])
            continue
        if not negative:
            # a drafted cost at zero is stated; a step or slot cost left out is absent (0)
            kept = {n for n in zero if n.startswith("drafted_ms.")}
            return {**fitted, **dict.fromkeys(kept, 0.0)}
        zero.update(negative)


def _lengths_vary(points: Sequence[CostPoint], group: str) -> bool:
    lengths = [p.drafted / p.steps for p in points if p.group == group and p.steps and p.drafted]
    return bool(lengths) and max(lengths) >= STEP_SPREAD * min(lengths)


def _slots_vary(points: Sequence[CostPoint]) -> bool:
    slots = [p.others / p.decodes for p in points if p.decodes]
    return bool(slots) and max(slots) - min(slots) >= BATCH_SPREAD


def least_squares(rows: Sequence[Sequence[float]], y: Sequence[float]) -> list[float] | None:
    """min |X theta - y|^2 by the normal equations (a handful of unknowns); None if singular."""
    n = len(rows[0])
    a = [[sum(r[i] * r[j] for r in rows) for j in range(n)] for i in range(n)]
    b = [sum(r[i] * v for r, v in zip(rows, y, strict=True)) for i in range(n)]
    scale = max((abs(a[i][i]) for i in range(n)), default=0.0)
    if scale == 0:
        return None
    for col in range(n):  # Gaussian elimination, partial pivoting
        pivot = max(range(col, n), key=lambda r: abs(a[r][col]))
        if abs(a[pivot][col]) <= 1e-12 * scale:
            return None
        a[col], a[pivot] = a[pivot], a[col]
        b[col], b[pivot] = b[pivot], b[col]
        for r in range(col + 1, n):
            f = a[r][col] / a[col][col]
            for c in range(col, n):
                a[r][c] -= f * a[col][c]
            b[r] -= f * b[col]
    theta = [0.0] * n
    for r in reversed(range(n)):
        theta[r] = (b[r] - sum(a[r][c] * theta[c] for c in range(r + 1, n))) / a[r][r]
    return theta


def scaled(point: CostPoint, factors: dict[int, float]) -> CostPoint:
    """``point`` at a typical round's speed (its time ÷ its round's factor)."""
    return replace(point, ms=point.ms / factors.get(point.block, 1.0))


def fit_blocks(points: Sequence[CostPoint]) -> tuple[dict[str, float], dict[int, float]] | None:
    """The costs, and each block's speed factor (time x factor: a round that ran while the
    machine was busier is slower for every config alike), by alternating the two fits.

    The factors' geometric mean is 1, so the costs are those of a typical round. One block: no
    factor (1).
    """
    factors = dict.fromkeys({p.block for p in points}, 1.0)
    params = fit(points)
    if params is None or len(factors) == 1:
        return (params, factors) if params is not None else None
    for _ in range(BLOCK_ITERATIONS):
        ratios: dict[int, list[float]] = {}
        for p in points:
            ms = point_ms(p, params)
            if ms > 0:
                ratios.setdefault(p.block, []).append(p.ms / ms)
        raw = {b: statistics.median(ratios[b]) if ratios.get(b) else 1.0 for b in factors}
        mean = math.exp(statistics.fmean(math.log(v) for v in raw.values()))
        factors = {b: v / mean for b, v in raw.items()}
        refit = fit([scaled(p, factors) for p in points])
        if refit is None:
            break
        params = refit
    return params, factors


def errors(points: Sequence[CostPoint], params: dict[str, float]) -> list[float]:
    """|predicted - measured| / measured *rate* (rate = work / time) per point."""
    out = []
    for p in points:
        ms = point_ms(p, params)
        out.append(abs(p.ms / ms - 1) if ms > 0 else math.inf)
    return out


def quantile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q`` quantile of ``values`` (not empty)."""
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))
    return ordered[index]
