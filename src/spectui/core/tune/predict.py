"""Tune v2's ranking: each candidate's speedup predicted from its acceptance and the step cost.

At temperature 0 a candidate's drafted/accepted sequence on a prompt is fixed while its answer
is, so one run per candidate and prompt gives its acceptance exactly; the cost model
(`compare.costmodel`, pooled over every run of the tune) prices it. Per prompt::

    predicted throughput = tokens / (TTFT + predicted decode time)
    predicted speedup    = candidate's predicted throughput / the baseline's

TTFT (which speculation does not change for n-gram types, and a draft model's prompt pass
lengthens) is the median measured over the runs of the candidate's cost group on that prompt
(the baseline's runs count for the n-gram group): a single run's first token is the noisiest
number of the run. A candidate predicted from another (``Candidate.predicted_from``: the same
type and knobs at a longer draft) takes that run's per-position acceptance truncated to its own
draft length (`whatif`'s model: a step accepts ``1 + sum_{j<=K'} P(a >= j)`` tokens and drafts
``min(mean drafted, K')``, each step paying the model's ``step_ms`` again). Overall is the
geometric mean over prompts. The interval is the cost model's p90 error either way:
``[s / (1 + e), s x (1 + e)]``.

At N streams (``tune --concurrency N``) a measured run is priced with what the other slots put
in its batches (`compare.costbatch`: the model learns a step's cost from the batch's total
tokens), so its prediction is at the load it ran under; the baseline's likewise.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet

from spectui.core.compare.costmodel import CostModel, PredictedSpeedup, run_points, spec_group
from spectui.core.compare.models import ComparePlan
from spectui.core.compare.records import RunRecord
from spectui.core.drafters.ngram import Replay
from spectui.core.drafters.ngram_map import SERVER_SLOTS
from spectui.core.tune.models import ReplicaCheck
from spectui.core.tune.replays import replay_start
from spectui.core.tune.space import Candidate

MAX_MODEL_ERROR = 0.15
"""A cost model whose median error is above this does not explain the runs: rank by timings."""


def _first_runs(records: Sequence[RunRecord]) -> dict[tuple[str, str], RunRecord]:
    """Each (config, prompt)'s earliest counted, successful run."""
    out: dict[tuple[str, str], RunRecord] = {}
    for r in sorted(records, key=lambda r: r.seq):
        if r.ok and not r.warmup and r.tokens >= 2:
            out.setdefault((r.config, r.prompt), r)
    return out


def _ttfts(plan: ComparePlan, records: Sequence[RunRecord]) -> dict[tuple[str | None, str], float]:
    """(cost group, prompt) -> median TTFT of its runs (the baseline's count for 'ngram')."""
    groups = {c.name: spec_group(c.spec.types) for c in plan.configs}
    values: dict[tuple[str | None, str], list[float]] = {}
    for r in records:
        if not r.ok or r.warmup or r.ttft_ms is None or r.config not in groups:
            continue
        group = groups[r.config]
        for key in {group, "ngram" if group is None else group}:
            values.setdefault((key, r.prompt), []).append(r.ttft_ms)
    return {k: statistics.median(v) for k, v in values.items()}


def _truncated(run: RunRecord, k_new: int, model: CostModel, group: str) -> float | None:
    """Predicted decode ms of ``run``'s text at draft length ``k_new`` (see the docstring)."""
    if run.steps == 0:
        return model.decode_time_ms(run.tokens - 1 - run.accepted, 0, run.drafted, group)
    positions = run.accepted_per_position
    split = run.steps - run.steps_unsplit  # (the steps whose acceptance by position is known)
    if split <= 0:
        return None
    per_step = 1 + sum(positions[j] / split for j in range(min(k_new, len(positions))))
    drafted = min(run.drafted / run.steps, float(k_new))
    singles = max(run.tokens - 1 - run.accepted - run.steps, 0)
    steps = (run.steps + run.accepted) / per_step
    per = model.drafted_ms(group)
    if per is None:
        return None
    return singles * model.decode_ms + steps * (
        model.decode_ms + model.step_ms(group) + per * drafted
    )


def _length(candidate: Candidate) -> int | None:
    from spectui.core.tune.space import draft_length

    value = draft_length(candidate)
    return None if value is None else int(value)


def predict(
    plan: ComparePlan,
    records: Sequence[RunRecord],
    model: CostModel | None,
    space: Sequence[Candidate],
    prompt_tokens: Mapping[str, Sequence[int]] | None = None,
    replicas: Sequence[ReplicaCheck] = (),
    n_slots: int = SERVER_SLOTS,
) -> dict[str, tuple[PredictedSpeedup | None, dict[str, PredictedSpeedup]]]:
    """Config name -> (overall prediction, prompt key -> prediction); empty without a model.

    A replayed candidate (`tune.replays`) is priced from its replay, when its type's replica
    passed its check (``replicas``); else it has no prediction and runs."""
    if model is None or model.median_abs_error is None:
        return {}
    trusted = {check.type for check in replicas if check.used}
    first = _first_runs(records)
    points = run_points(plan, records)
    ttft = _ttfts(plan, records)
    by_text = {c.text: c for c in space}
    error = model.p90_abs_error or model.median_abs_error
    base = plan.baseline.name
    out: dict[str, tuple[PredictedSpeedup | None, dict[str, PredictedSpeedup]]] = {}
    for config in plan.configs:
        if config.is_baseline:
            continue
        group = spec_group(config.spec.types)
        candidate = by_text.get(config.name)
        source = candidate.predicted_from if candidate is not None else None
        k_new = _length(candidate) if candidate is not None and source else None
        replays = None
        if candidate is not None and candidate.replayed:
            if candidate.type not in trusted or prompt_tokens is None:
                continue
            replays = replay_start(candidate, plan, records, prompt_tokens, n_slots)
            if replays is None:
                continue
        per_prompt: dict[str, PredictedSpeedup] = {}
        for prompt in plan.prompts:
            base_run = first.get((base, prompt.key))
            run = first.get((source or config.name, prompt.key))
            first_ms = ttft.get((group, prompt.key))
            base_first = ttft.get((None, prompt.key))
            if replays is not None and (rp := replays.get(prompt.key)) is not None:
                run = _as_run(rp, prompt.key)
            if base_run is None or run is None or first_ms is None or base_first is None:
                continue
            if source and k_new is not None and group is not None:
                ms = _truncated(run, k_new, model, group)
            elif run.seq in points:  # (as measured, with its batches' other slots)
                ms = model.point_time_ms(points[run.seq])
            else:
                decodes = run.tokens - 1 - run.accepted
                ms = model.decode_time_ms(decodes, run.steps, run.drafted, group)
            base_point = points.get(base_run.seq)
            base_ms = (
                model.point_time_ms(base_point)
                if base_point is not None
                else model.decode_time_ms(base_run.tokens - 1, 0, 0, None)
            )
            if ms is None or base_ms is None or ms <= 0:
                continue
            speedup = (run.tokens / (first_ms + ms)) / (base_run.tokens / (base_first + base_ms))
            per_prompt[prompt.key] = _interval(speedup, error)
        overall = None
        if per_prompt and len(per_prompt) == len(plan.prompts):
            mean = math.exp(statistics.fmean(math.log(p.speedup) for p in per_prompt.values()))
            overall = _interval(mean, error)
        out[config.name] = (overall, per_prompt)
    return out


def _as_run(replayed: Replay, prompt: str) -> RunRecord:
    """A replay in a run record's terms (the counts `decode_time_ms` prices)."""
    return RunRecord(
        seq=-1,
        config="",
        prompt=prompt,
        round=1,
        tokens=replayed.tokens,
        drafted=replayed.drafted,
        accepted=replayed.accepted,
        steps=replayed.steps,
        accepted_per_position=list(replayed.accepted_per_position),
    )


def _interval(speedup: float, error: float) -> PredictedSpeedup:
    return PredictedSpeedup(
        speedup=round(speedup, 4),
        low=round(speedup / (1 + error), 4),
        high=round(speedup * (1 + error), 4),
    )


MAX_INTERVAL_ERROR = 0.5
"""...nor one whose p90 error (the width of every interval) is above this: all would overlap."""
SPARE_POINTS = 2
"""A model needs this many runs beyond its parameters (an exact fit of as many points as
unknowns says nothing about its error)."""


def usable(model: CostModel | None) -> bool:
    """Whether ``model`` explains the runs well enough to rank by."""
    return (
        model is not None
        and model.median_abs_error is not None
        and model.median_abs_error <= MAX_MODEL_ERROR
        and (model.p90_abs_error or 0.0) <= MAX_INTERVAL_ERROR
        and model.points - model.trimmed >= len(model.parameters) + SPARE_POINTS
    )


MAX_CONTENDERS = 2
"""At most this many candidates go on to timing rounds (the best predicted that overlap)."""


def contenders(
    predicted: Mapping[str, PredictedSpeedup | None], excluded: AbstractSet[str] = frozenset()
) -> tuple[str, ...]:
    """Candidates whose predicted interval overlaps the leader's, best first (capped)."""
    ranked = sorted(
        ((name, p) for name, p in predicted.items() if p is not None and name not in excluded),
        key=lambda pair: -pair[1].speedup,
    )
    if not ranked:
        return ()
    leader = ranked[0][1]
    close = [name for name, p in ranked if p.high >= leader.low]
    return tuple(close[:MAX_CONTENDERS])
