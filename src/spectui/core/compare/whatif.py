"""What-if for draft length: one recorded run at draft max K, predicted at other draft maxima K'.

Works for every type that drafts (draft-mtp, draft-simple, draft-eagle3, draft-dflash,
draft-dspark, the n-gram types): what it needs is each verification step's drafted (``d``) and
accepted (``a``) counts, the decodes that tried no draft (``singles``), and each decode's time.
The prediction at K' assumes the text and where drafts are tried stay the same, and that a draft
position is accepted as often as it was (its acceptance does not depend on the draft's length):

- K' <= K (from the recorded positions): a step accepts ``min(a, K')`` and drafts
  ``min(d, K')``, so tokens per step are ``1 + sum_{j<=K'} P(a >= j)``; its interval is that
  mean's sampling error (`Z` standard errors of ``min(a, K')`` over the steps);
- K' > K (**extrapolated**, flagged): positions past K were never drafted, so their acceptance is
  unknown. The point takes the last recorded position's conditional rate,
  ``r = P(a >= K) / P(a >= K-1)`` (geometric: ``P(a >= j) = P(a >= K) r^(j-K)``); the interval
  spans none of them accepted (r = 0) to all of them (r = 1). Only steps that drafted the full K
  draft ``K' - K`` more.

The spec-step tokens of the run (``steps + accepted``) then take ``tokens / tokens-per-step``
steps at K', the singles stay, and the step price (`whatif_cost`) costs each decode: tokens/s at
K' = tokens after the first / (singles x decode_ms + steps' x c(mean drafted')), with
c(d) = fixed + per_token x d: a shorter draft takes more steps, and each pays the fixed cost
again. Where the run cannot tell the fixed from the per-token cost (every step drafted one
length, as a draft-mtp run always does), every plausible split is priced and the interval spans
them, with one line saying which run would tell. The interval also carries the machine's
run-to-run spread (`whatif_cost.RUN_SPREAD`, or a given cost model's p90 error).
``speedup_vs_recorded`` divides the point by the model's own figure at K.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from spectui.core.compare.costmodel import CostModel, spec_group
from spectui.core.compare.whatif_cost import (
    StepCost,
    cost_model_of,
    from_decodes,
    from_model,
    notes,
)
from spectui.core.compare.whatif_models import Prediction, Recorded, WhatIf
from spectui.core.errors import SpectuiError
from spectui.core.events import StepEvent, TokenEvent
from spectui.core.llama.specconfig import SpecConfig
from spectui.core.sessions.file import Session

Z = 2.0
"""Standard errors on each side of a recorded acceptance (about 95 %)."""
SPLIT_TOLERANCE = 0.10
"""A prediction's step cost counts as told when no plausible split moves it more than this."""


class WhatIfError(SpectuiError):
    """A run that what-if cannot predict from."""

    title = "Cannot predict"
    exit_code = 2


@dataclass(frozen=True)
class StepCounts:
    """One run's verification steps and plain decodes, as what-if needs them."""

    drafted: tuple[int, ...]
    """Per verification step, tokens drafted."""
    accepted: tuple[int, ...]
    """Per verification step, tokens accepted."""
    singles: int
    """Decodes after the first token that tried no draft."""
    draft_max: int
    """The draft maximum the run had (K)."""
    spread_steps: int = 0
    """Steps the stream released several to a chunk: their drafted and accepted sums are spread
    evenly over them (what each accepted is not known)."""

    @property
    def steps(self) -> int:
        """Verification steps."""
        return len(self.drafted)

    @property
    def tokens(self) -> int:
        """Tokens after the first (each decode's target token, plus accepted drafts)."""
        return self.steps + sum(self.accepted) + self.singles

    def at_least(self, j: int) -> float:
        """P(a step accepts at least ``j`` tokens), from the recorded steps (j <= K)."""
        return sum(1 for a in self.accepted if a >= j) / self.steps if self.steps else 0.0


def session_counts(session: Session) -> tuple[StepCounts, list[tuple[int, float]]]:
    """The run's steps and, per decode after the first token, (drafted, ms it took): on the
    server's clock where the run's final timings carry it (`server_clock`)."""
    counts, decodes = event_counts(session.events, session.header.server.spec)
    timings = session.summary.server_timings if session.summary is not None else {}
    return counts, server_clock(decodes, timings, counts.tokens + 1)


def server_clock(
    decodes: Sequence[tuple[int, float]], timings: dict[str, float], tokens: int
) -> list[tuple[int, float]]:
    """``decodes`` (timed by the client's token clock) scaled so that their sum is the
    server's own decode time (``predicted_ms``: its first token to its last), when the
    timings are of the same ``tokens``.

    At thousands of tokens a second the client reads the stream in bursts, so its clock over
    a run was 0.73x to 1.56x the server's here (the tiny model's runs; the same to 0.1 % at
    Gemma's rate): the run's cost is the server's, and only how it splits between decodes is
    left to the client's clock."""
    total = sum(ms for _, ms in decodes)
    server = timings.get("predicted_ms")
    if not server or server <= 0 or total <= 0 or timings.get("predicted_n") != tokens:
        return list(decodes)
    factor = server / total
    return [(d, ms * factor) for d, ms in decodes]


def event_counts(
    events: Iterable[object], spec: SpecConfig | None
) -> tuple[StepCounts, list[tuple[int, float]]]:
    """`session_counts` from a run's events in order (a step before its tokens)."""
    steps: dict[int, StepEvent] = {}
    decodes: list[tuple[int, float]] = []
    singles = 0
    previous: float | None = None
    for event in events:
        if isinstance(event, StepEvent):
            steps[event.index] = event
        elif isinstance(event, TokenEvent):
            if event.index == 0:
                previous = event.t
                continue
            step = None if event.step is None else steps.get(event.step)
            if event.step is None:
                drafted, starts = 0, True
                singles += 1
            else:
                drafted = step.drafted if step else 0
                starts = step is not None and event.index == step.first_token
            if starts:
                if previous is not None:
                    # a chunk of several steps (held-back UTF-8) is one interval: each its share
                    parts = _spread(drafted, step.steps if step is not None else 1)
                    ms = (event.t - previous) * 1000 / len(parts)
                    decodes += [(d, ms) for d in parts]
                previous = event.t
    ordered = [steps[i] for i in sorted(steps)]
    k = spec.draft_n_max if spec is not None and spec.draft_n_max else None
    k = k or max((max(_spread(s.drafted, s.steps)) for s in ordered), default=0)
    counts = StepCounts(
        drafted=tuple(d for s in ordered for d in _spread(s.drafted, s.steps)),
        accepted=tuple(a for s in ordered for a in _spread(min(s.accepted, s.drafted), s.steps)),
        singles=singles,
        draft_max=k,
        spread_steps=sum(s.steps for s in ordered if s.steps > 1),
    )
    return counts, decodes


def _spread(total: int, parts: int) -> list[int]:
    """``total`` over ``parts`` steps as evenly as it goes, the larger shares first (so a
    step's share of accepted drafts never exceeds its share of drafted ones)."""
    parts = max(1, parts)
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def predict_at(counts: StepCounts, k_new: int) -> tuple[float, float, bool]:
    """(tokens per step, mean drafted per step, extrapolated) at draft max ``k_new``."""
    k = counts.draft_max
    if k_new <= k:
        per_step = 1 + sum(counts.at_least(j) for j in range(1, k_new + 1))
        drafted = statistics.fmean(min(d, k_new) for d in counts.drafted)
        return per_step, drafted, False
    per_step = 1 + sum(counts.at_least(j) for j in range(1, k + 1))
    per_step += sum(counts.at_least(k) * _ratio(counts) ** (j - k) for j in range(k + 1, k_new + 1))
    drafted = statistics.fmean(d + (k_new - k if d >= k else 0) for d in counts.drafted)
    return per_step, drafted, True


def _ratio(counts: StepCounts) -> float:
    """The last recorded position's acceptance given the one before: P(a >= K) / P(a >= K-1)."""
    k = counts.draft_max
    last = counts.at_least(k)
    before = counts.at_least(k - 1) if k > 1 else 1.0
    return min(1.0, last / before) if before > 0 else 0.0


def acceptance_range(counts: StepCounts, k_new: int) -> tuple[float, float]:
    """Tokens per step at ``k_new``: (low, high) of what the run tells (see the module)."""
    k = counts.draft_max
    values = [min(a, k_new, k) for a in counts.accepted]
    error = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0
    known = 1 + statistics.fmean(values)
    low, high = max(1.0, known - Z * error), min(1.0 + min(k, k_new), known + Z * error)
    if k_new > k:
        high += (k_new - k) * counts.at_least(k)
    return low, high


def _seconds(
    counts: StepCounts, cost: StepCost, k_new: int, per_step: float, per_token: float
) -> float:
    _, drafted, _ = predict_at(counts, k_new)
    spec_tokens = counts.steps + sum(counts.accepted)
    ms = counts.singles * (cost.decode_ms or 0.0)
    ms += spec_tokens / per_step * cost.step_ms(drafted, per_token)
    return ms / 1000


def _rates(counts: StepCounts, cost: StepCost, k_new: int) -> tuple[float, float, float, bool]:
    """(point, low, high, told) tokens/s at ``k_new``: every corner of split x acceptance
    priced; ``told``: the split's range moves the point by at most `SPLIT_TOLERANCE`."""
    per_step, _, _ = predict_at(counts, k_new)
    point = counts.tokens / _seconds(counts, cost, k_new, per_step, cost.per_token_ms)
    splits = [
        counts.tokens / _seconds(counts, cost, k_new, per_step, per_token)
        for per_token in (cost.per_token_low, cost.per_token_high)
    ]
    corners = [
        counts.tokens / _seconds(counts, cost, k_new, accepted, per_token)
        for accepted in acceptance_range(counts, k_new)
        for per_token in (cost.per_token_low, cost.per_token_high)
    ]
    low = min(min(corners), point) / (1 + cost.spread)
    high = max(max(corners), point) * (1 + cost.spread)
    told = all(abs(rate / point - 1) <= SPLIT_TOLERANCE for rate in splits)
    return point, low, high, told


def what_if(
    session: Session,
    draft_maxima: Sequence[int],
    model: CostModel | None = None,
    also: Sequence[Session] = (),
) -> WhatIf:
    """Predictions at each of ``draft_maxima``; ``model``: a fitted cost model of the same server
    (else the step is priced from this run's own decodes, and those of ``also``: further runs of
    the same server and type, e.g. at another draft max)."""
    counts, decodes = session_counts(session)
    spec = session.header.server.spec
    group = spec_group(spec.types) if spec is not None else None
    for other in also:
        theirs = other.header.server.spec
        other_group = spec_group(theirs.types) if theirs is not None else None
        if other_group not in (group, None):  # a baseline run only pins a plain decode
            raise WhatIfError(
                f"{other.name}: another spec type than {session.name}, its steps cost otherwise"
            )
        models = (session.header.server.model, other.header.server.model)
        if None not in models and models[0] != models[1]:
            raise WhatIfError(f"{other.name}: another model than {session.name}'s ({models[1]})")
    more = [session_counts(other)[1] for other in also]
    summary = session.summary
    measured = summary.metrics.tokens_per_second if summary is not None else None
    return predict_counts(counts, decodes, spec, draft_maxima, model, session.name, measured, more)


def _step_cost(
    counts: StepCounts,
    decodes: Sequence[tuple[int, float]],
    group: str | None,
    model: CostModel | None,
    more: Sequence[Sequence[tuple[int, float]]],
    name: str,
) -> StepCost:
    if model is not None and (at := ", ".join(map(str, model.levels))) != "1":  # (N slots)
        raise WhatIfError(f"the cost model was fitted at {at} streams; whatif prices one")
    if model is not None:
        cost = from_model(model, group, counts.drafted)
        if cost is None:
            raise WhatIfError(
                f"the cost model has no drafted-token cost for {group} (another spec)"
            )
        return cost
    try:
        return from_decodes([decodes, *more])
    except ValueError:
        raise WhatIfError(f"{name}: no verification step of the run was timed") from None


def predict_counts(
    counts: StepCounts,
    decodes: Sequence[tuple[int, float]],
    spec: SpecConfig | None,
    draft_maxima: Sequence[int],
    model: CostModel | None = None,
    name: str = "the run",
    measured: float | None = None,
    more: Sequence[Sequence[tuple[int, float]]] = (),
) -> WhatIf:
    """`what_if` from a run's counts and decode times (``name``: the run, for messages;
    ``more``: further runs' decodes, each run's apart, that help price a step)."""
    if counts.steps == 0 or counts.draft_max < 1:
        raise WhatIfError(f"{name}: the run has no verification steps to predict from")
    group = spec_group(spec.types) if spec is not None else "ngram"
    cost = _step_cost(counts, decodes, group, model, more, name)
    recorded_rate = counts.tokens / _seconds(
        counts, cost, counts.draft_max, predict_at(counts, counts.draft_max)[0], cost.per_token_ms
    )
    out = []
    for k_new in draft_maxima:
        per_step, _, extrapolated = predict_at(counts, k_new)
        accepted_low, accepted_high = acceptance_range(counts, k_new)
        rate, low, high, told = _rates(counts, cost, k_new)
        out.append(
            Prediction(
                draft_max=k_new,
                tokens_per_step=round(per_step, 4),
                tokens_per_step_low=round(min(per_step, accepted_low), 4),
                tokens_per_step_high=round(max(per_step, accepted_high), 4),
                tokens_per_second=round(rate, 3),
                low=round(low, 3),
                high=round(high, 3),
                speedup_vs_recorded=round(rate / recorded_rate, 4),
                extrapolated=extrapolated,
                cost_told=told,
            )
        )
    return WhatIf(
        cost_model=model if model is not None else cost_model_of(cost, group),
        step_cost=cost,
        recorded=Recorded(
            draft_max=counts.draft_max,
            spec=spec.label if spec is not None else "unknown spec",
            tokens=counts.tokens + 1,
            steps=counts.steps,
            singles=counts.singles,
            drafted=sum(counts.drafted),
            accepted=sum(counts.accepted),
            accepted_per_position=[
                round(counts.at_least(j), 4) for j in range(1, counts.draft_max + 1)
            ],
            tokens_per_step=round(1 + sum(counts.accepted) / counts.steps, 4),
            tokens_per_second=None if measured is None else round(measured, 3),
            predicted_tokens_per_second=round(recorded_rate, 3),
        ),
        predictions=out,
        notes=notes(cost, counts, _ratio(counts), spec, draft_maxima),
    )


HINT_MIN_STEPS = 16
"""A run with fewer verification steps than this gets no draft-length hint."""
HINT_MAX_ERROR = 0.25
"""...nor one whose own decodes the step price fits worse than this (median error), nor one
whose steps cannot separate a step's fixed cost from its per-token cost."""
HINT_MIN_GAIN = 0.05
"""...nor a hint that predicts less than this gain."""


def hint(events: Iterable[object], spec: SpecConfig | None, spec_label: str) -> str | None:
    """'n-max 4 predicted 1.3x of this run', after a run, when its steps say enough."""
    counts, decodes = event_counts(events, spec)
    if counts.steps < HINT_MIN_STEPS or counts.draft_max < 1:
        return None
    k = counts.draft_max
    maxima = sorted({1, 2, 3, 4, 6, 8, 12, 16, k // 2, k * 2} - {0})
    try:
        result = predict_counts(counts, decodes, spec, maxima)
    except WhatIfError:
        return None
    error = result.step_cost.median_abs_error
    if not result.step_cost.separable or error is None or error > HINT_MAX_ERROR:
        return None  # a hint names one draft max: only where the run tells the costs apart
    kind = spec_label.split(" ", 1)[0]
    flag = "size-m" if kind in ("ngram-simple", "ngram-map-k", "ngram-map-k4v") else "n-max"
    line = best_line(result, flag)
    best = max(result.predictions, key=lambda p: p.tokens_per_second)
    return line if best.speedup_vs_recorded >= 1 + HINT_MIN_GAIN else None


def best_line(result: WhatIf, flag: str = "n-max") -> str | None:
    """'n-max 4 predicted 1.3x of this run': the best predicted draft max, when it beats K."""
    best = max(result.predictions, key=lambda p: p.tokens_per_second, default=None)
    if best is None or best.draft_max == result.recorded.draft_max:
        return None
    mark = " (extrapolated)" if best.extrapolated else ""
    return f"{flag} {best.draft_max} predicted {best.speedup_vs_recorded:.1f}x of this run{mark}"


__all__ = [
    "Prediction",
    "Recorded",
    "StepCounts",
    "WhatIf",
    "WhatIfError",
    "acceptance_range",
    "best_line",
    "event_counts",
    "hint",
    "predict_at",
    "predict_counts",
    "server_clock",
    "session_counts",
    "what_if",
]
