"""A step-cost model: what one decode of the target costs, as a function of what it verifies.

The model (``kind`` ``"step-overhead"``), for one server configuration (binary, model, ctx size,
threads: what every config of a comparison shares)::

    plain decode (ms)      = decode_ms
    verification step (ms) = decode_ms + step_ms[group] + drafted_ms[group] x drafted

One *decode* is one forward pass of the target after the first token: either a verification step
of ``drafted + 1`` tokens or a plain decode of one token (no draft was tried). ``decode_ms`` is
the cost of a batch of one. ``step_ms[group]`` is what a step costs beyond that whatever its
length: the target's batch path (a batch above one leaves the matrix-vector kernels) and, for a
draft-model type, the drafter's own per-step work (its catch-up pass over the tokens just
accepted, its sampler). ``drafted_ms[group]`` is what each drafted token adds: its row in the
verification batch (the output layer and sampling over the vocabulary for one more position)
and, for a draft-model type, one sequential forward pass of the drafter. The group is
``"ngram"`` for every n-gram type (their lookups cost next to nothing, so they share the
target's costs) and the type itself for a draft-model type (``"draft-simple"``, ...).

The older form, ``kind`` ``"linear-step"``, had no ``step_ms``: it still loads, with
``step_ms`` 0. A fit leaves ``step_ms`` out (0) when its points cannot tell it from the other
costs (every step of a group drafting the same length).

Two ways to fit it, both weighted least squares on *relative* error, then refitted once without
the points more than `TRIM` median errors (and 10 %) off (a run disturbed by a neighbour's load):

- `fit_runs`: from whole runs (a compare or tune document). A run after its first token made
  ``tokens - 1 - accepted`` decodes, ``steps`` of them verification steps, drafted ``drafted``
  tokens, and took ``(tokens - 1) / tokens_per_second``; the baseline pins ``decode_ms``, each
  group's runs at different draft lengths its ``step_ms`` and ``drafted_ms``. Pooled over every
  run, hundreds of steps decide a handful of numbers.
- `fit_decodes`: from one recorded run's decodes (a session file): each decode's own time, from
  the arrival of its first token to the next one's.

A machine shared with other work runs some rounds of a comparison slower than others, every
config alike (seen here: the same baseline run 1.2 to 10 tok/s an hour apart). Each round
(``block``) therefore gets a speed factor, fitted with the costs by alternating the two fits
(`block_speed`, geometric mean 1); a run's prediction is at its round's speed. Speedups within a
round (what tune ranks by) do not depend on the factors.

Predicted tokens/s is ``(tokens - 1) / predicted decode time``: the decode rate, as measured.
``median_abs_error`` is the median of ``|predicted - measured| / measured`` tokens/s over every
run used (trimmed ones included: the error is not flattered by what the fit left out).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from spectui.core.compare.models import ComparePlan
from spectui.core.compare.records import RunRecord

DECODE = "decode_ms"
"""Parameter name: one decode of a batch of one (ms)."""
NGRAM = "ngram"
"""The group every n-gram type shares."""
TRIM = 3.0
"""Points whose relative error is more than this many median errors are left out of the refit."""
TRIM_FLOOR = 0.1
"""...and more than this (a perfect fit's tiny errors trim nothing)."""
MIN_POINTS = 2
"""Fewer points than this fit nothing."""


def drafted_key(group: str) -> str:
    """The parameter name of a group's per-drafted-token cost: 'drafted_ms.ngram'."""
    return f"drafted_ms.{group}"


def step_key(group: str) -> str:
    """The parameter name of a group's per-step cost: 'step_ms.draft-simple'."""
    return f"step_ms.{group}"


def spec_group(types: Sequence[str]) -> str | None:
    """The cost group of a spec: its draft-model type, else 'ngram'; None for no speculation."""
    kinds = [t for t in types if t != "none"]
    if not kinds:
        return None
    return next((t for t in kinds if t.startswith("draft-")), NGRAM)


class CostModel(BaseModel):
    """A fitted step-cost model (see the module docstring for what it states)."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["step-overhead", "linear-step"] = "step-overhead"
    """The model's form: a step = decode_ms + step_ms[group] + drafted_ms[group] x drafted
    (``"linear-step"``, older documents: no step_ms)."""
    parameters: dict[str, float]
    """'decode_ms', one 'drafted_ms.<group>' and (when fitted) one 'step_ms.<group>' per group
    seen (milliseconds)."""
    median_abs_error: float | None = None
    """Median |predicted - measured| / measured tokens/s over the points fitted."""
    p90_abs_error: float | None = None
    """The 90th percentile of that error: the width of a prediction's interval."""
    points: int = 0
    """Runs (or decodes) it was fitted on."""
    trimmed: int = 0
    """Of those, left out of the refit as outliers."""
    source: Literal["runs", "decodes"] = "runs"
    """Fitted on whole runs (a comparison) or on one run's decodes (a session)."""
    block_speed: dict[str, float] = Field(default_factory=dict)
    """Round -> how much slower than typical the machine ran then (time x this; geometric mean
    1): a busy machine slows every config of a round alike. Empty: one round, or none."""

    @property
    def decode_ms(self) -> float:
        """One decode of a batch of one."""
        return self.parameters[DECODE]

    def drafted_ms(self, group: str | None) -> float | None:
        """What a drafted token of ``group`` adds (None: not fitted for it)."""
        if group is None:
            return 0.0
        return self.parameters.get(drafted_key(group))

    def step_ms(self, group: str | None) -> float:
        """What a verification step of ``group`` costs beyond a plain decode, whatever its
        length (0: not fitted, or an older model)."""
        return 0.0 if group is None else self.parameters.get(step_key(group), 0.0)

    def decode_time_ms(
        self, decodes: float, steps: float, drafted: float, group: str | None
    ) -> float | None:
        """Predicted time of ``decodes`` decodes, ``steps`` of them verification steps, that
        drafted ``drafted`` tokens in all (None: the model has no cost for ``group``)."""
        per = self.drafted_ms(group)
        if per is None:
            return None
        return self.decode_ms * decodes + self.step_ms(group) * steps + per * drafted

    def predict_run(self, record: RunRecord, group: str | None) -> float | None:
        """Predicted tokens/s (decode rate) of a finished run, at its round's machine speed."""
        point = run_point(record, group)
        if point is None:
            return None
        ms = self.decode_time_ms(point.decodes, point.steps, point.drafted, group)
        if not ms or ms <= 0:
            return None
        ms *= self.block_speed.get(str(record.round), 1.0)
        return (record.tokens - 1) / (ms / 1000)


@dataclass(frozen=True, slots=True)
class CostPoint:
    """One observation: decodes, drafted tokens, their group, the time they took, and how many
    of the decodes were verification steps."""

    decodes: float
    """Forward passes of the target."""
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


def run_point(record: RunRecord, group: str | None) -> CostPoint | None:
    """A finished run as a point (None: no usable decode rate)."""
    if not record.ok or record.tokens < 2 or not record.tokens_per_second:
        return None
    decodes = record.tokens - 1 - record.accepted
    if decodes <= 0:
        return None
    ms = (record.tokens - 1) / record.tokens_per_second * 1000
    steps = min(record.steps, decodes) if record.drafted else 0
    return CostPoint(decodes, record.drafted, group, ms, record.round, steps)


def fit_points(points: Sequence[CostPoint], source: Literal["runs", "decodes"]) -> CostModel | None:
    """Fit the model (None: too few points, or nothing fixes the cost of a decode)."""
    usable = [p for p in points if p.ms > 0 and p.decodes > 0]
    if len(usable) < MIN_POINTS:
        return None
    fitted = _fit_blocks(usable)
    if fitted is None:
        return None
    params, factors = fitted
    usable = [_scaled(p, factors) for p in usable]
    errors = _errors(usable, params)
    typical = statistics.median(errors)
    limit = max(TRIM * typical, TRIM_FLOOR)
    kept = [p for p, e in zip(usable, errors, strict=True) if e <= limit]
    trimmed = len(usable) - len(kept)
    if trimmed and len(kept) >= MIN_POINTS and (refit := _fit(kept)) is not None:
        params = refit
        errors = _errors(usable, params)
    else:
        trimmed = 0
    return CostModel(
        parameters={k: round(v, 6) for k, v in params.items()},
        median_abs_error=round(statistics.median(errors), 6),
        p90_abs_error=round(_quantile(errors, 0.9), 6),
        points=len(usable),
        trimmed=trimmed,
        source=source,
        block_speed={str(b): round(f, 6) for b, f in sorted(factors.items())}
        if len(factors) > 1
        else {},
    )


BLOCK_ITERATIONS = 10
"""Alternations between the costs and the blocks' speeds (they settle in a few)."""


def _scaled(point: CostPoint, factors: dict[int, float]) -> CostPoint:
    factor = factors.get(point.block, 1.0)
    return replace(point, ms=point.ms / factor)


def _fit_blocks(points: Sequence[CostPoint]) -> tuple[dict[str, float], dict[int, float]] | None:
    """The costs, and each block's speed factor (time x factor: a round that ran while the
    machine was busier is slower for every config alike), by alternating the two fits.

    The factors' geometric mean is 1, so the costs are those of a typical round. One block: no
    factor (1).
    """
    factors = dict.fromkeys({p.block for p in points}, 1.0)
    params = _fit(points)
    if params is None or len(factors) == 1:
        return (params, factors) if params is not None else None
    for _ in range(BLOCK_ITERATIONS):
        ratios: dict[int, list[float]] = {}
        for p in points:
            ms = _predicted_ms(p, params)
            if ms > 0:
                ratios.setdefault(p.block, []).append(p.ms / ms)
        raw = {b: statistics.median(ratios[b]) if ratios.get(b) else 1.0 for b in factors}
        mean = math.exp(statistics.fmean(math.log(v) for v in raw.values()))
        factors = {b: v / mean for b, v in raw.items()}
        refit = _fit([_scaled(p, factors) for p in points])
        if refit is None:
            break
        params = refit
    return params, factors


def fit_runs(plan: ComparePlan, records: Iterable[RunRecord]) -> CostModel | None:
    """The model from every counted, successful run of a comparison (warm-ups left out)."""
    groups = {c.name: spec_group(c.spec.types) for c in plan.configs}
    points = [
        p
        for r in records
        if not r.warmup and r.config in groups and (p := run_point(r, groups[r.config]))
    ]
    return fit_points(points, "runs")


def fit_decodes(decodes: Sequence[tuple[int, float]], group: str | None) -> CostModel | None:
    """The model from one run's decodes: (drafted, ms) each."""
    points = [CostPoint(1, d, group if d else None, ms, steps=1 if d else 0) for d, ms in decodes]
    return fit_points(points, "decodes")


def predictions(
    plan: ComparePlan, records: Sequence[RunRecord], model: CostModel | None
) -> list[RunRecord]:
    """``records`` with ``predicted_tokens_per_second`` set where ``model`` can predict it."""
    if model is None:
        return [r.model_copy(update={"predicted_tokens_per_second": None}) for r in records]
    groups = {c.name: spec_group(c.spec.types) for c in plan.configs}
    out = []
    for record in records:
        predicted = model.predict_run(record, groups.get(record.config))
        value = None if predicted is None else round(predicted, 3)
        out.append(record.model_copy(update={"predicted_tokens_per_second": value}))
    return out


def _features(point: CostPoint, names: Sequence[str]) -> list[float]:
    row = [point.decodes]
    group = point.group or ""
    for name in names[1:]:
        if name == drafted_key(group):
            row.append(point.drafted)
        elif name == step_key(group):
            row.append(point.steps)
        else:
            row.append(0.0)
    return row


def _fit(points: Sequence[CostPoint]) -> dict[str, float] | None:
    """Weighted least squares on relative error; a cost that comes out negative (noise on a
    group with little data) is refitted at zero rather than kept as a time machine, and the
    per-step costs are left out (0) when the points cannot tell them from the others."""
    groups = sorted({p.group for p in points if p.group is not None and p.drafted > 0})
    names = [DECODE, *(drafted_key(g) for g in groups)]
    names += [step_key(g) for g in groups if _lengths_vary(points, g)]
    zero: set[str] = set()
    while True:
        free = [n for n in names if n not in zero]
        rows = [[v / p.ms for v in _features(p, free)] for p in points]
        theta = _least_squares(rows, [1.0] * len(points))
        if theta is None:
            steps = [n for n in free if n.startswith("step_ms.")]
            if not steps:
                return None
            zero.update(steps)  # collinear: every step of a group drafted the same length
            continue
        fitted = dict(zip(free, theta, strict=True))
        negative = [n for n in free[1:] if fitted[n] < 0]
        if not negative:
            if fitted[DECODE] <= 0:
                return None
            # a drafted cost at zero is stated; a step cost left out is absent (step_ms() is 0)
            kept = {n for n in zero if not n.startswith("step_ms.")}
            return {**fitted, **dict.fromkeys(kept, 0.0)}
        zero.update(negative)


STEP_SPREAD = 1.25
"""A group's per-step cost is fitted only when its points' mean draft lengths (drafted per step)
span at least this ratio: with steps all of one length it cannot be told from the drafted
tokens' cost, and with nearly one length one odd step would decide it."""


def _lengths_vary(points: Sequence[CostPoint], group: str) -> bool:
    lengths = [p.drafted / p.steps for p in points if p.group == group and p.steps and p.drafted]
    return bool(lengths) and max(lengths) >= STEP_SPREAD * min(lengths)


def _least_squares(rows: Sequence[Sequence[float]], y: Sequence[float]) -> list[float] | None:
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


def _predicted_ms(p: CostPoint, params: dict[str, float]) -> float:
    if p.group is None:
        return params[DECODE] * p.decodes
    per = params.get(drafted_key(p.group), 0.0)
    step = params.get(step_key(p.group), 0.0)
    return params[DECODE] * p.decodes + step * p.steps + per * p.drafted


def _errors(points: Sequence[CostPoint], params: dict[str, float]) -> list[float]:
    """|predicted - measured| / measured *rate* (rate = work / time) per point."""
    out = []
    for p in points:
        ms = _predicted_ms(p, params)
        out.append(abs(p.ms / ms - 1) if ms > 0 else math.inf)
    return out


def _quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))
    return ordered[index]


class PredictedSpeedup(BaseModel):
    """A speedup over the baseline predicted by the cost model, with its interval."""

    model_config = ConfigDict(frozen=True)

    speedup: float
    """Predicted end-to-end throughput over the baseline's."""
    low: float
    """Low end: the speedup with the model's p90 error against it."""
    high: float
    """High end: with that error for it."""


__all__ = [
    "CostModel",
    "CostPoint",
    "PredictedSpeedup",
    "fit_decodes",
    "fit_points",
    "fit_runs",
    "predictions",
    "run_point",
    "spec_group",
    "step_key",
]
