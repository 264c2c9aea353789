"""What-if for draft length: one recorded run at draft max K, predicted at other draft maxima K'.

The run gives, per verification step, how many tokens were drafted (``d``) and accepted (``a``),
plus the decodes that tried no draft at all (``singles``). The prediction at K' assumes the
text and where drafts are tried stay the same, and that a draft position is accepted as often
as it was (the acceptance of a position does not depend on how long the draft behind it is):

- K' <= K (from the recorded positions): a step accepts ``min(a, K')`` and drafts
  ``min(d, K')``, so tokens per step are ``1 + sum_{j<=K'} P(a >= j)``;
- K' > K (**extrapolated**, flagged): positions past K accept with the last recorded position's
  conditional rate, ``r = P(a >= K) / P(a >= K-1)`` (geometric: ``P(a >= j) = P(a >= K) r^(j-K)``),
  and only steps that drafted the full K draft ``K' - K`` more.

The spec-step tokens of the run (``steps + accepted``) then take ``tokens / tokens-per-step``
steps at K', the singles stay, and the cost model (`costmodel`) prices each decode:
tokens/s at K' = tokens after the first / (singles x decode_ms + steps' x c(mean drafted')),
with c(d) = decode_ms + step_ms + drafted_ms x d: a shorter draft takes more steps, and each
pays the step's fixed cost again. ``speedup_vs_recorded`` divides by the model's own figure at
the recorded K, so a bias of the model common to both cancels.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from spectui.core.compare.costmodel import CostModel, fit_decodes, spec_group
from spectui.core.errors import SpectuiError
from spectui.core.events import StepEvent, TokenEvent
from spectui.core.llama.specconfig import SpecConfig
from spectui.core.sessions.file import Session


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


class Recorded(BaseModel):
    """The recorded run, as measured and as the model sees it."""

    model_config = ConfigDict(frozen=True)

    draft_max: int
    """K: the draft maximum it ran with."""
    spec: str
    """Its spec configuration."""
    tokens: int
    """Tokens generated."""
    steps: int
    """Verification steps."""
    singles: int
    """Decodes that tried no draft."""
    drafted: int
    """Draft tokens proposed."""
    accepted: int
    """Draft tokens accepted."""
    accepted_per_position: list[float]
    """P(a step accepts at least j tokens), j = 1..K."""
    tokens_per_step: float | None
    """Tokens per verification step (1 + accepted / steps)."""
    tokens_per_second: float | None
    """Measured decode rate."""
    predicted_tokens_per_second: float | None
    """The cost model's decode rate for it."""


class Prediction(BaseModel):
    """One draft maximum's prediction."""

    model_config = ConfigDict(frozen=True)

    draft_max: int
    """K'."""
    tokens_per_step: float
    """Predicted tokens per verification step."""
    tokens_per_second: float
    """Predicted decode rate."""
    speedup_vs_recorded: float
    """That rate over the model's rate at the recorded K."""
    extrapolated: bool
    """K' > K: positions past the recorded ones follow the stated geometric model."""


class WhatIf(BaseModel):
    """`spectui whatif --json`: the model, the recorded run, one prediction per draft max."""

    model_config = ConfigDict(frozen=True)

    cost_model: CostModel
    """The step cost used."""
    recorded: Recorded
    """The run predicted from."""
    predictions: list[Prediction] = Field(default_factory=list)
    """One per draft max asked, in the order asked."""


def session_counts(session: Session) -> tuple[StepCounts, list[tuple[int, float]]]:
    """The run's steps and, per decode after the first token, (drafted, ms it took)."""
    return event_counts(session.events, session.header.server.spec)


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
            if event.step is None:
                drafted, starts = 0, True
                singles += 1
            else:
                step = steps.get(event.step)
                drafted = step.drafted if step else 0
                starts = step is not None and event.index == step.first_token
            if starts:
                if previous is not None:
                    decodes.append((drafted, (event.t - previous) * 1000))
                previous = event.t
    ordered = [steps[i] for i in sorted(steps)]
    k = spec.draft_n_max if spec is not None and spec.draft_n_max else None
    k = k or max((s.drafted for s in ordered), default=0)
    counts = StepCounts(
        drafted=tuple(s.drafted for s in ordered),
        accepted=tuple(min(s.accepted, s.drafted) for s in ordered),
        singles=singles,
        draft_max=k,
    )
    return counts, decodes


def predict_at(counts: StepCounts, k_new: int) -> tuple[float, float, bool]:
    """(tokens per step, mean drafted per step, extrapolated) at draft max ``k_new``."""
    k = counts.draft_max
    if k_new <= k:
        per_step = 1 + sum(counts.at_least(j) for j in range(1, k_new + 1))
        drafted = statistics.fmean(min(d, k_new) for d in counts.drafted)
        return per_step, drafted, False
    last = counts.at_least(k)
    before = counts.at_least(k - 1) if k > 1 else 1.0
    ratio = min(1.0, last / before) if before > 0 else 0.0
    per_step = 1 + sum(counts.at_least(j) for j in range(1, k + 1))
    per_step += sum(last * ratio ** (j - k) for j in range(k + 1, k_new + 1))
    drafted = statistics.fmean(d + (k_new - k if d >= k else 0) for d in counts.drafted)
    return per_step, drafted, True


def _rate(counts: StepCounts, model: CostModel, group: str | None, k_new: int) -> float:
    per_step, drafted, _ = predict_at(counts, k_new)
    spec_tokens = counts.steps + sum(counts.accepted)
    steps = spec_tokens / per_step
    per = model.drafted_ms(group) or 0.0
    step = model.decode_ms + model.step_ms(group) + per * drafted
    ms = counts.singles * model.decode_ms + steps * step
    return counts.tokens / (ms / 1000)


def what_if(
    session: Session, draft_maxima: Sequence[int], model: CostModel | None = None
) -> WhatIf:
    """Predictions at each of ``draft_maxima``; ``model``: a fitted cost model of the same server
    (else one is fitted on this run's own decodes)."""
    counts, decodes = session_counts(session)
    summary = session.summary
    measured = summary.metrics.tokens_per_second if summary is not None else None
    return predict_counts(
        counts, decodes, session.header.server.spec, draft_maxima, model, session.name, measured
    )


def predict_counts(
    counts: StepCounts,
    decodes: Sequence[tuple[int, float]],
    spec: SpecConfig | None,
    draft_maxima: Sequence[int],
    model: CostModel | None = None,
    name: str = "the run",
    measured: float | None = None,
) -> WhatIf:
    """`what_if` from a run's counts and decode times (``name``: the run, for messages)."""
    group = spec_group(spec.types) if spec is not None else None
    if counts.steps == 0 or counts.draft_max < 1:
        raise WhatIfError(f"{name}: the run has no verification steps to predict from")
    group = group or ("ngram" if spec is None else None)
    if model is None:
        model = fit_decodes(decodes, group)
        if model is None or len({d for d, _ in decodes}) < 2:
            raise WhatIfError(
                f"{name}: every decode of this run verified the same batch, so its step "
                "times cannot tell the cost of a decode from that of a drafted token; give "
                "--cost-model with a compare or tune file of the same server"
            )
    if model.drafted_ms(group) is None:
        raise WhatIfError(f"the cost model has no drafted-token cost for {group} (another spec)")
    recorded_rate = _rate(counts, model, group, counts.draft_max)
    out = []
    for k_new in draft_maxima:
        per_step, _, extrapolated = predict_at(counts, k_new)
        rate = _rate(counts, model, group, k_new)
        out.append(
            Prediction(
                draft_max=k_new,
                tokens_per_step=round(per_step, 4),
                tokens_per_second=round(rate, 3),
                speedup_vs_recorded=round(rate / recorded_rate, 4),
                extrapolated=extrapolated,
            )
        )
    return WhatIf(
        cost_model=model,
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
    )


HINT_MIN_STEPS = 16
"""A run with fewer verification steps than this gets no draft-length hint."""
HINT_MAX_ERROR = 0.25
"""...nor one whose own decodes the cost model fits worse than this (median error)."""
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
    error = result.cost_model.median_abs_error
    if error is None or error > HINT_MAX_ERROR:
        return None
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
