"""A step-cost model: what one server step costs, as a function of what its batch verifies.

The model (``kind`` ``"step-overhead"``), for one server configuration (binary, model, ctx size,
threads: what every config of a comparison shares)::

    plain decode (ms) = decode_ms
    one server step   = decode_ms + batch_ms x (other slots)
                        + sum over the batch's slots of
                          (step_ms[group] if it verifies a draft) + drafted_ms[group] x drafted

One *decode* is one forward pass of the target after the first token: either a verification step
of ``drafted + 1`` tokens or a plain decode of one token (no draft was tried). ``decode_ms`` is
the cost of a batch of one. ``step_ms[group]`` is what a slot's verification costs beyond that
whatever its length: the target's batch path (a batch above one leaves the matrix-vector
kernels) and, for a draft-model type, the drafter's own per-step work (its catch-up pass over the
tokens just accepted, its sampler). ``drafted_ms[group]`` is what each drafted token adds: its
row in the verification batch (the output layer and sampling over the vocabulary for one more
position) and, for a draft-model type, one sequential forward pass of the drafter. The group is
``"ngram"`` for every n-gram type (their lookups cost next to nothing, so they share the
target's costs) and the type itself for a draft-model type (``"draft-simple"``, ...).

With N streams the server verifies every active slot in one batch, so a step's cost grows with
the batch's total tokens, the sum over the active slots of ``1 + drafted``: ``batch_ms`` is what
each other slot's sampled token adds, and every slot's drafts are priced as one stream's are
(`costbatch` reads from the runs' times which slots shared a run's steps). One stream: no other
slot, and the model is the one-stream model. ``batch_ms`` is fitted only when the runs saw
different numbers of slots (runs at several levels); at one level a decode's cost holds the
level's typical batch, and what the drafts add is still priced per drafted token. ``level``
says at which level the runs were.

The older form, ``kind`` ``"linear-step"``, had no ``step_ms``: it still loads, with
``step_ms`` 0. A fit leaves ``step_ms`` out (0) when its points cannot tell it from the other
costs (every step of a group drafting the same length).

Two ways to fit it, both weighted least squares on *relative* error (`costfit`), then refitted
once without the points more than `TRIM` median errors (and 10 %) off (a run disturbed by a
neighbour's load):

- `fit_runs`: from whole runs (a compare or tune document). A run after its first token made
  ``tokens - 1 - accepted`` decodes, ``steps`` of them verification steps, drafted ``drafted``
  tokens, and took the server's ``predicted_ms`` (`costbatch.run_ms`); the baseline pins
  ``decode_ms``, each group's runs at different draft lengths its ``step_ms`` and
  ``drafted_ms``. Pooled over every run, hundreds of steps decide a handful of numbers.
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

import statistics
from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from spectui.core.compare.costbatch import batch_points, run_point
from spectui.core.compare.costfit import (
    BATCH,
    DECODE,
    MIN_POINTS,
    NGRAM,
    CostPoint,
    drafted_key,
    errors,
    fit,
    fit_blocks,
    point_ms,
    quantile,
    scaled,
    step_key,
)
from spectui.core.compare.models import ComparePlan
from spectui.core.compare.records import RunRecord

TRIM = 3.0
"""Points whose relative error is more than this many median errors are left out of the refit."""
TRIM_FLOOR = 0.1
"""...and more than this (a perfect fit's tiny errors trim nothing)."""


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
    seen, and (when fitted) 'batch_ms', each other slot's cost in a step (milliseconds)."""
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
    levels: list[int] = Field(default_factory=lambda: [1])
    """The concurrency levels (client streams at once) of the runs it was fitted on."""

    @property
    def decode_ms(self) -> float:
        """One decode of a batch of one."""
        return self.parameters[DECODE]

    @property
    def batch_ms(self) -> float:
        """What each other active slot's sampled token adds to a step (0: not fitted)."""
        return self.parameters.get(BATCH, 0.0)

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
        """Predicted time of one stream's ``decodes`` decodes, ``steps`` of them verification
        steps, that drafted ``drafted`` tokens in all (None: the model has no cost for
        ``group``). At a level above one: in batches of the level's typical size."""
        return self.point_time_ms(CostPoint(decodes, drafted, group, 0.0, steps=steps))

    def point_time_ms(self, point: CostPoint) -> float | None:
        """Predicted time of ``point``'s decodes, with what its batches held (None: the model
        has no cost for its group)."""
        if self.drafted_ms(point.group) is None:
            return None
        return point_ms(point, self.parameters)

    def predict_point_ms(self, point: CostPoint) -> float | None:
        """Predicted time of ``point``'s decodes (as its measured ``ms``), at its round's
        machine speed."""
        ms = self.point_time_ms(point)
        if not ms or ms <= 0:
            return None
        return ms * self.block_speed.get(str(point.block), 1.0)

    def predict_run(self, record: RunRecord, group: str | None) -> float | None:
        """Predicted tokens/s (decode rate) of a finished run counted alone, at its round's
        machine speed."""
        point = run_point(record, group)
        ms = None if point is None else self.predict_point_ms(point)
        return None if ms is None else (record.tokens - 1) / (ms / 1000)


def fit_points(points: Sequence[CostPoint], source: Literal["runs", "decodes"]) -> CostModel | None:
    """Fit the model (None: too few points, or nothing fixes the cost of a decode)."""
    usable = [p for p in points if p.ms > 0 and p.decodes > 0]
    if len(usable) < MIN_POINTS:
        return None
    fitted = fit_blocks(usable)
    if fitted is None:
        return None
    params, factors = fitted
    usable = [scaled(p, factors) for p in usable]
    errs = errors(usable, params)
    typical = statistics.median(errs)
    limit = max(TRIM * typical, TRIM_FLOOR)
    kept = [p for p, e in zip(usable, errs, strict=True) if e <= limit]
    trimmed = len(usable) - len(kept)
    if trimmed and len(kept) >= MIN_POINTS and (refit := fit(kept)) is not None:
        params = refit
        errs = errors(usable, params)
    else:
        trimmed = 0
    return CostModel(
        parameters={k: round(v, 6) for k, v in params.items()},
        median_abs_error=round(statistics.median(errs), 6),
        p90_abs_error=round(quantile(errs, 0.9), 6),
        points=len(usable),
        trimmed=trimmed,
        source=source,
        block_speed={str(b): round(f, 6) for b, f in sorted(factors.items())}
        if len(factors) > 1
        else {},
    )


def run_points(plan: ComparePlan, records: Iterable[RunRecord]) -> dict[int, CostPoint]:
    """Run seq -> its point, with the other slots of its batches (warm-ups included: they
    share batches too)."""
    return batch_points(records, {c.name: spec_group(c.spec.types) for c in plan.configs})


def fit_runs(plan: ComparePlan, records: Iterable[RunRecord]) -> CostModel | None:
    """The model from every counted, successful run of a comparison (warm-ups left out)."""
    runs = list(records)
    points = run_points(plan, runs)
    counted = [r for r in runs if not r.warmup and r.seq in points]
    model = fit_points([points[r.seq] for r in counted], "runs")
    levels = sorted({r.level for r in counted})
    return model if model is None else model.model_copy(update={"levels": levels})


def fit_decodes(decodes: Sequence[tuple[int, float]], group: str | None) -> CostModel | None:
    """The model from one run's decodes: (drafted, ms) each."""
    points = [CostPoint(1, d, group if d else None, ms, steps=1 if d else 0) for d, ms in decodes]
    return fit_points(points, "decodes")


def predictions(
    plan: ComparePlan, records: Sequence[RunRecord], model: CostModel | None
) -> list[RunRecord]:
    """``records`` with ``predicted_tokens_per_second`` set where ``model`` can predict it (in
    the terms of the record's own ``tokens_per_second``)."""
    if model is None:
        return [r.model_copy(update={"predicted_tokens_per_second": None}) for r in records]
    points = run_points(plan, records)
    out = []
    for record in records:
        value = None
        point = points.get(record.seq)
        ms = None if point is None else model.predict_point_ms(point)
        if point is not None and ms is not None and record.tokens_per_second:
            # the model prices the server's time; the record's rate may be the client's
            value = round(record.tokens_per_second * point.ms / ms, 3)
        out.append(record.model_copy(update={"predicted_tokens_per_second": value}))
    return out


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
    "BATCH",
    "CostModel",
    "CostPoint",
    "PredictedSpeedup",
    "fit_decodes",
    "fit_points",
    "fit_runs",
    "predictions",
    "run_point",
    "run_points",
    "spec_group",
    "step_key",
]
