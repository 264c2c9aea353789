"""What a verification step costs, as far as one recorded run can tell: `whatif`'s step price.

A step that drafted ``d`` tokens costs ``fixed_ms + per_token_ms x d`` (`costmodel`: ``fixed_ms``
is ``decode_ms + step_ms``, ``per_token_ms`` is ``drafted_ms``); a decode that tried no draft
costs ``decode_ms``. From a run's own decodes (each timed by the client's token clock):

- the **mean step** (``anchor_drafted`` tokens drafted, ``anchor_ms``) is always pinned: every
  step is a measurement of it;
- the **split** of that cost into a fixed and a per-token part is pinned only as far as the
  steps' draft lengths vary. A least-squares line through the steps gives the per-token cost and
  its standard error; the plausible splits are every line through the mean step with
  ``per_token_ms >= 0`` and ``fixed_ms >= decode_ms`` (a step is at least a plain decode; 0 when
  the run has too few plain decodes to tell). The range kept is the data's interval
  (`Z` standard errors) within those bounds, or the bounds alone when every step drafted the same
  length.
- The split is **separable** when the data's interval is at most `SEPARABLE_SHARE` of the
  plausible range: then the fitted split is the point. Otherwise the point is the middle of the
  range kept, and `whatif` says in one line which run would tell (one at a second draft max).

So a single shorter step (the last one, capped by the tokens left) narrows the range only as
much as one noisy measurement can: the answer moves smoothly with the data instead of flipping
from a refusal to a confident figure.

Further runs of the same server (``--also``: another draft max, or the baseline) add their
decodes to the line's slope (each run's own speed uncertain by `ALSO_SPREAD`) and their plain
decodes to the floor; the line still goes through the recorded run's own mean step. The
prediction's ``spread`` is the machine's run-to-run speed, at least `RUN_SPREAD`, more when the
run's own stretches ran at different speeds (`_wander`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict

from spectui.core.compare.costmodel import CostModel
from spectui.core.llama.specconfig import SpecConfig

if TYPE_CHECKING:
    from spectui.core.compare.whatif import StepCounts

Z = 2.0
"""Standard errors on each side of the fitted per-token cost (about 95 %)."""
SEPARABLE_SHARE = 0.25
"""The data's interval for the per-token cost, as a share of the plausible range, at most which
the run is said to separate the costs."""
MIN_SINGLES = 3
"""Plain decodes needed before their mean bounds a step's fixed cost from below."""
MIN_STEPS = 3
"""Steps needed for a line through them (and its standard error)."""


class StepCost(BaseModel):
    """A step's price: the pinned mean step and the range of its fixed / per-token split."""

    model_config = ConfigDict(frozen=True)

    source: Literal["run", "runs", "cost-model"]
    """From this run's decodes, from this run's and further runs' decodes (``--also``), or from a
    given cost model (``--cost-model``)."""
    decode_ms: float | None
    """A decode that tried no draft (None: the run had too few to tell; it then has none to
    price either)."""
    anchor_drafted: float
    """The mean step's draft length..."""
    anchor_ms: float
    """...and its cost: what the steps pin whatever the split."""
    per_token_ms: float
    """The per-drafted-token cost used for the point."""
    per_token_low: float
    """Lowest plausible per-token cost (the most of the step fixed)."""
    per_token_high: float
    """Highest plausible per-token cost (the most of the step per token)."""
    separable: bool
    """Whether the steps tell the fixed cost from the per-token cost."""
    lengths: list[int]
    """The draft lengths the steps had, each once, in order."""
    steps: int
    """Steps priced from."""
    spread: float
    """Relative spread of the prediction for what the model does not cover (the machine's speed
    from run to run, or a given model's p90 error)."""
    median_abs_error: float | None = None
    """Median |predicted - measured| / measured rate of the decodes priced from (None: given)."""

    def fixed_ms(self, per_token_ms: float) -> float:
        """The step's fixed cost under a split: the line through the mean step."""
        return self.anchor_ms - per_token_ms * self.anchor_drafted

    def step_ms(self, drafted: float, per_token_ms: float | None = None) -> float:
        """A step of ``drafted`` tokens under a split (the point's when not given)."""
        per = self.per_token_ms if per_token_ms is None else per_token_ms
        return self.fixed_ms(per) + per * drafted


RUN_SPREAD = 0.05
"""The least run-to-run spread of the same work on one machine, which a single run cannot
show: the recorded run may have been this much faster or slower than the typical run (more
when the run's own stretches ran at different speeds: `_wander`)."""


def from_decodes(runs: Sequence[Sequence[tuple[int, float]]]) -> StepCost:
    """The step price from runs' decodes: (drafted, ms) each, 0 drafted for a plain decode; the
    first run is the one predicted from, any others (``--also``) help price a step.

    Raises ValueError when no decode verified a draft."""
    decodes = [d for run in runs for d in run]
    singles = [ms for d, ms in decodes if d == 0]
    steps = [(float(d), ms) for d, ms in decodes if d > 0]
    if not steps or sum(ms for _, ms in steps) <= 0:
        raise ValueError("no verification step was timed")
    n = len(steps)
    d_bar = statistics.fmean(d for d, _ in steps)
    t_bar = statistics.fmean(t for _, t in steps)
    # the line goes through the recorded run's own mean step (its machine's speed); further
    # runs only tell its slope
    own = [(float(d), ms) for d, ms in runs[0] if d > 0] or steps
    anchor_d, anchor_t = statistics.fmean(d for d, _ in own), statistics.fmean(t for _, t in own)
    if anchor_t <= 0:
        raise ValueError("no verification step of the run was timed")
    decode_ms = statistics.fmean(singles) if singles else None
    floor = decode_ms if decode_ms is not None and len(singles) >= MIN_SINGLES else 0.0
    low, high = 0.0, max(0.0, (anchor_t - min(floor, anchor_t)) / anchor_d)
    spread = max(RUN_SPREAD, _wander(runs[0]))
    sxx = sum((d - d_bar) ** 2 for d, _ in steps)
    fitted: float | None = None
    separable = False
    if n >= MIN_STEPS and sxx > 0:
        fitted = sum((d - d_bar) * (t - t_bar) for d, t in steps) / sxx
        residual = sum((t - t_bar - fitted * (d - d_bar)) ** 2 for d, t in steps) / (n - 2 or 1)
        error = math.sqrt(residual / sxx + _between_runs(runs, d_bar, t_bar, spread))
        fitted = min(high, max(low, fitted))
        data_low, data_high = max(low, fitted - Z * error), min(high, fitted + Z * error)
        separable = Z * error <= SEPARABLE_SHARE * (high - low) or high == low
        low, high = data_low, data_high
    point = fitted if separable and fitted is not None else (low + high) / 2
    cost = StepCost(
        source="runs" if len(runs) > 1 else "run",
        decode_ms=decode_ms,
        anchor_drafted=anchor_d,
        anchor_ms=anchor_t,
        per_token_ms=point,
        per_token_low=low,
        per_token_high=high,
        separable=separable,
        lengths=sorted({int(d) for d, _ in steps}),
        steps=n,
        spread=spread,
    )
    return cost.model_copy(update={"median_abs_error": _decode_error(cost, decodes)})


ALSO_SPREAD = 0.10
"""The least spread assumed between two runs' machine speeds (``--also``): minutes apart on a
shared machine, the same work ran up to 2x slower here, and neither run can show it."""


def _between_runs(
    runs: Sequence[Sequence[tuple[int, float]]], d_bar: float, t_bar: float, spread: float
) -> float:
    """The slope's variance from the runs' own speeds: each whole run may have run `spread`
    (two standard deviations) faster or slower, and a run of one length cannot show it apart
    from its length's cost. 0 for one run (its speed is the anchor)."""
    if len(runs) < 2:
        return 0.0
    lengths, sizes = [], []
    for run in runs:
        drafted = [d for d, _ in run if d > 0]
        if drafted:
            lengths.append(statistics.fmean(drafted))
            sizes.append(len(drafted))
    sxx = sum(n * (d - d_bar) ** 2 for d, n in zip(lengths, sizes, strict=True))
    if sxx <= 0:
        return 0.0
    sd = max(spread, ALSO_SPREAD) / Z * t_bar
    return sum((n * (d - d_bar) * sd) ** 2 for d, n in zip(lengths, sizes, strict=True)) / sxx**2


BLOCKS = 4
"""Stretches of a run, in time order, whose speeds show how much the machine wandered."""


def _wander(decodes: Sequence[tuple[int, float]]) -> float:
    """How much the machine's speed wandered during the run, as a relative spread (two
    standard deviations): the spread of its `BLOCKS` stretches' speeds beyond what their
    decodes' own noise explains.

    A machine shared with other work runs some stretches slower than others; one run cannot
    show how far the next will be, but a run whose own stretches differ says the machine is
    not steady, and by about how much. The load comes in waves longer than a run, so a whole
    run is taken to stray as far as a stretch does (not a stretch's spread over the square root
    of their number: on the shared VM, runs of the same config a minute apart differed by 1.56x
    while their stretches' spread so reduced was a few %). Each decode counts against the mean
    of its length."""
    by_length: dict[int, list[float]] = {}
    for d, ms in decodes:
        by_length.setdefault(d, []).append(ms)
    means = {d: statistics.fmean(v) for d, v in by_length.items()}
    ratios = [ms / means[d] for d, ms in decodes if means[d] > 0]
    size = len(ratios) // BLOCKS
    if size < 2:
        return 0.0
    blocks = [ratios[i * size : (i + 1) * size] for i in range(BLOCKS)]
    centres = [statistics.fmean(b) for b in blocks]
    within = statistics.fmean(statistics.variance(b) for b in blocks) / size
    between = statistics.variance(centres) - within
    centre = statistics.fmean(centres)
    if between <= 0 or centre <= 0:
        return 0.0
    return Z * math.sqrt(between) / centre


def _decode_error(cost: StepCost, decodes: Sequence[tuple[int, float]]) -> float | None:
    errors = []
    for d, ms in decodes:
        priced = cost.step_ms(d) if d else cost.decode_ms
        if priced and ms > 0:
            errors.append(abs(ms / priced - 1))
    return statistics.median(errors) if errors else None


def from_model(model: CostModel, group: str | None, drafted: Sequence[int]) -> StepCost | None:
    """The step price a given cost model states for ``group`` (None: it has none for it).

    A model with a fitted ``step_ms`` for the group separates the costs; one without (its own
    runs could not tell them apart, or an older ``linear-step`` model) pins only the step at this
    run's mean length, and the split spans the plausible range as for a run."""
    per = model.drafted_ms(group)
    if per is None or not drafted:
        return None
    d_bar = statistics.fmean(drafted)
    spread = model.p90_abs_error if model.p90_abs_error is not None else RUN_SPREAD
    fixed = model.decode_ms + model.step_ms(group)
    anchor = fixed + per * d_bar
    separable = group is not None and f"step_ms.{group}" in model.parameters
    high = per if separable else max(0.0, (anchor - model.decode_ms) / d_bar)
    low = per if separable else 0.0
    return StepCost(
        source="cost-model",
        decode_ms=model.decode_ms,
        anchor_drafted=d_bar,
        anchor_ms=anchor,
        per_token_ms=per if separable else (low + high) / 2,
        per_token_low=low,
        per_token_high=high,
        separable=separable,
        lengths=sorted(set(drafted)),
        steps=len(drafted),
        spread=spread,
    )


def cost_model_of(cost: StepCost, group: str | None) -> CostModel:
    """The point split as a `CostModel` (what ``--json`` has always printed as ``cost_model``).

    Without a measured plain decode, the step's whole fixed cost is stated as ``decode_ms``."""
    fixed = cost.fixed_ms(cost.per_token_ms)
    decode = cost.decode_ms if cost.decode_ms is not None else fixed
    key = group or "ngram"
    return CostModel(
        parameters={
            "decode_ms": round(decode, 6),
            f"step_ms.{key}": round(fixed - decode, 6),
            f"drafted_ms.{key}": round(cost.per_token_ms, 6),
        },
        median_abs_error=None if cost.median_abs_error is None else round(cost.median_abs_error, 6),
        points=cost.steps,
        source="decodes",
    )


def separation_line(cost: StepCost, draft_max: int, flag: str) -> str | None:
    """One line when the steps cannot separate a step's fixed cost from its per-token cost:
    why, and which run would (None when they can)."""
    if cost.separable:
        return None
    if len(cost.lengths) == 1:
        why = f"every step drafted {cost.lengths[0]} token{'s' if cost.lengths[0] != 1 else ''}"
    else:
        why = f"its steps' draft lengths ({_lengths(cost.lengths)}) vary too little for its noise"
    # the farther the second length, the less its run's own speed can pass for a per-token cost
    other = 1 if draft_max >= 3 else draft_max + 2
    if cost.source == "cost-model":
        return (
            "the cost model cannot separate a step's fixed cost from its per-token cost (its "
            "runs of this type drafted one length): the interval spans every split; a "
            f"comparison with this type at two {flag} values would"
        )
    return (
        f"this run cannot separate a step's fixed cost from its per-token cost ({why}): the "
        f"interval spans every split it leaves plausible; a second run at {flag} {other} "
        "right after it would (give it with --also), or --cost-model FILE"
    )


def _lengths(lengths: Sequence[int]) -> str:
    if len(lengths) <= 4:
        return ", ".join(str(v) for v in lengths)
    return f"{lengths[0]}..{lengths[-1]}"


def _flag(spec: SpecConfig | None) -> str:
    types = spec.types if spec is not None else ()
    if any(t.startswith("draft-") for t in types):
        return "--spec-draft-n-max"
    if any(t in ("ngram-simple", "ngram-map-k", "ngram-map-k4v") for t in types):
        return "size-m"
    return "draft max"


def notes(
    cost: StepCost,
    counts: StepCounts,
    ratio: float,
    spec: SpecConfig | None,
    draft_maxima: Sequence[int],
) -> list[str]:
    """`whatif`'s lines, one each: the costs not separable (and which run would separate
    them), the positions past K assumed (``ratio``: the last one's conditional acceptance), a
    chain's steps priced alike."""
    out = []
    k = counts.draft_max
    if (line := separation_line(cost, k, _flag(spec))) is not None:
        out.append(line)
    past = sorted(v for v in set(draft_maxima) if v > k)
    if past:
        out.append(
            f"positions past {k} were never drafted in this run: the point for "
            f"{', '.join(map(str, past))} assumes each accepts as often as position {k} did"
            f"{f' after {k - 1}' if k > 1 else ''} ({ratio:.0%}); the interval spans none to "
            "all of them accepted"
        )
    if counts.spread_steps:
        out.append(
            f"{counts.spread_steps} of {counts.steps} steps came several to a chunk (the server "
            "holds back a token that ends inside a UTF-8 character): each chunk's drafted and "
            "accepted tokens are spread evenly over its steps"
        )
    kinds = [t for t in (spec.types if spec is not None else ()) if t != "none"]
    if len(kinds) > 1:
        out.append(
            f"a chain ({','.join(kinds)}): every step is truncated and priced alike, whichever "
            "drafter made it"
        )
    return out
