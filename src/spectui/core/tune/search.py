"""Racing: the baseline and a few candidates run round one; predictions pick who races on.

Round one ranks by prediction (tune v2, `tune.predict`): one run per candidate and prompt gives
its acceptance, the cost model its predicted speedup. Most candidates do not even run then: one a
longer draft predicts (`Candidate.predicted_from`), or one whose type has a drafter replica
(`tune.replays`: only each type's defaults run, and check the replica), is priced from that.
The (at most `predict.MAX_CONTENDERS`) candidates whose predicted interval overlaps the leader's
go on, with any that round one could neither run nor predict. They then race for the overall
pick (`overall_race`): a candidate leaves when it is put out, dropped, or clearly behind the
leader, and once it has the rounds a keep needs, unless more rounds could still make it the pick.
Without a cost model that explains the runs, round one runs every candidate and its timings rank
as below.

This is successive halving under the compare fairness rules: one binary, model, ctx, sampling
and seed; one server at a time; a warm-up at each config's first start; the baseline ``none`` in
every round; answers checked. Each round is a round of one growing compare plan (`ComparePlan.
active` says who runs in it), run by `CompareRunner`, each candidate's prompts on one server start.

After each round of a race ranked by timings:

- a candidate that failed, failed a checker or changed an answer the rule does not accept (no
  checker passed it and the baseline was sure there; any change with ``--identical-answers``) on
  any prompt is out;
- per prompt, candidates dropped there (slower beyond the noise, or over the memory budget) are
  out of that prompt's race; the rest are ranked by median paired speedup and, while more than
  `FINALISTS` remain, only the better half (at least `FINALISTS`) goes on;
- finalists run until the decision rule settles them (keep, drop, or a tie) or `MAX_ROUNDS`;
- a baseline that moved beyond the rule's "too noisy" line once a keep's rounds are run ends the
  race: its spread does not shrink with rounds, so nothing more could be settled.

A candidate stays in while it is in any prompt's race. The grid is small (a few dozen points:
each type's main knobs around their defaults), so racing every point costs less than a model-based
sampler's warm-up would; a space much larger than this would want one (e.g. Optuna's TPE).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from spectui.core.compare.costmodel import PredictedSpeedup
from spectui.core.compare.judge import MIN_KEEP_ROUNDS
from spectui.core.compare.models import ComparePlan
from spectui.core.compare.outcomes import SpeedCall, Verdict
from spectui.core.compare.stats import TOO_NOISY
from spectui.core.compare.summary_row import SummaryRow
from spectui.core.tune.models import PromptResult
from spectui.core.tune.predict import contenders

ETA = 2
"""Each halving keeps 1/ETA of a prompt's race."""
FINALISTS = 2
"""Halving stops at this many per prompt; they run until settled."""
MAX_ROUNDS = 6
"""No candidate runs more rounds than this: past it, what is unsettled is reported so."""


def last_active(plan: ComparePlan) -> tuple[str, ...]:
    """The candidates (baseline excluded) that ran in the plan's last round."""
    names = tuple(c.name for c in plan.configs if not c.is_baseline)
    if plan.active is None or len(plan.active) < plan.reps:
        return names
    return tuple(n for n in names if n in plan.active[plan.reps - 1])


def _faulty(row: SummaryRow, strict: bool) -> bool:
    """Failed runs, a changed answer the rule does not accept, or a failed checker: not a speed
    question. ``strict`` (``--identical-answers``): every changed answer."""
    return (
        row.verdict == Verdict.FAILED
        or (
            row.verdict == Verdict.DROP
            and row.speed_call != SpeedCall.SLOWER
            and not _over_budget(row)
        )
        # As `compare.judge` judges it: a change at a near-tie is a caveat, and one the prompt's
        # checker passed is correct by the prompt's own test; neither puts a candidate out.
        or row.divergent_changes > 0
        or (strict and row.compared > row.identical)
    )


def _over_budget(row: SummaryRow) -> bool:
    extra, budget = row.memory_extra_bytes, row.memory_budget_bytes
    return extra is not None and budget is not None and extra > budget


def _hopeless(plan: ComparePlan, rows: Sequence[SummaryRow]) -> bool:
    """The baseline moved beyond the rule's 'too noisy' line over the rounds a keep needs: more
    rounds cannot settle anything (the floor is the baseline's own spread), so the race ends."""
    noise = max((r.noise_floor for r in rows if r.noise_floor is not None), default=None)
    return plan.reps >= MIN_KEEP_ROUNDS and noise is not None and noise > TOO_NOISY


def _settled(row: SummaryRow) -> bool:
    return (
        row.verdict in (Verdict.KEEP, Verdict.DROP, Verdict.FAILED)
        or row.speed_call == SpeedCall.TIE
    )


def prompt_race(names: Sequence[str], rows: dict[str, SummaryRow]) -> list[str]:
    """Who stays in one prompt's race after a round (``rows``: each candidate's row there)."""
    alive = [n for n in names if rows[n].verdict not in (Verdict.DROP, Verdict.FAILED)]
    ranked = sorted(alive, key=lambda n: -(rows[n].speedup_vs_baseline or 0.0))
    if len(ranked) > FINALISTS:
        return ranked[: max(FINALISTS, math.ceil(len(ranked) / ETA))]
    return [n for n in ranked if not _settled(rows[n])]


def next_round(
    plan: ComparePlan,
    rows: Sequence[SummaryRow],
    predicted: Mapping[str, PredictedSpeedup | None] | None = None,
    overall: Mapping[str, PromptResult] | None = None,
) -> tuple[str, ...] | None:
    """The candidates of the next round, or None when the race is over.

    ``predicted``: after round one, each candidate's predicted overall speedup (`tune.predict`;
    given only when the cost model explains the runs): the candidates whose interval overlaps
    the leader's go on, with any that round one neither ran nor could predict. ``overall``:
    after a round one ranked so, each candidate's pooled result (`tune.report`): the race is
    then one for the overall pick (`overall_race`).
    """
    if plan.reps >= MAX_ROUNDS or _hopeless(plan, rows):
        return None
    by = {(r.config, r.prompt): r for r in rows}
    if plan.reps == 1 and predicted:
        strict = plan.identical_answers
        faulty = {r.config for r in rows if r.config in predicted and r.runs and _faulty(r, strict)}
        chosen = contenders(predicted, faulty)
        ran = set(last_active(plan))
        # Nothing says a candidate round one neither ran nor could predict loses: measure it.
        unknown = tuple(
            c.name
            for c in plan.configs
            if not c.is_baseline and c.name not in ran and predicted.get(c.name) is None
        )
        if chosen or unknown:
            return (*chosen, *(n for n in unknown if n not in chosen))
    if overall is not None:
        return overall_race(plan, rows, overall)
    names = last_active(plan)
    names = tuple(
        n
        for n in names
        if not any(
            _faulty(by[(n, p.key)], plan.identical_answers)
            for p in plan.prompts
            if (n, p.key) in by
        )
    )
    keep: set[str] = set()
    for prompt in plan.prompts:
        race = [n for n in names if (n, prompt.key) in by]
        keep.update(prompt_race(race, {n: by[(n, prompt.key)] for n in race}))
    if plan.reps == 1:
        # Without a usable prediction, a candidate round one left to prediction runs now.
        ran = set(last_active(plan))
        keep.update(c.name for c in plan.configs if not c.is_baseline and c.name not in ran)
        names = tuple(c.name for c in plan.configs if c.name in keep or c.name in names)
    chosen = tuple(n for n in names if n in keep)
    return chosen or None


def overall_race(
    plan: ComparePlan, rows: Sequence[SummaryRow], overall: Mapping[str, PromptResult]
) -> tuple[str, ...] | None:
    """Who runs next in a race for the overall pick (the best kept config over every prompt).

    Of the candidates of the last round, one leaves when: a prompt puts it out (`_faulty`);
    the rule drops it overall; before `MIN_KEEP_ROUNDS` rounds, its interval lies below the
    leader's (the best measured median); after them, it is kept (settled), or it is
    inconclusive with a median no better than the best kept one's (1.0 with none kept), so more
    rounds could not make it the pick. The race is over when none is left. Per-prompt calls
    are not raced further: they are reported with the rounds they have.
    """
    names = [
        n
        for n in last_active(plan)
        if n in overall
        and not any(_faulty(r, plan.identical_answers) for r in rows if r.config == n and r.runs)
        and overall[n].verdict != Verdict.DROP
    ]
    if not names:
        return None
    leader = overall[max(names, key=lambda n: overall[n].speedup or 0.0)]
    kept = [overall[n].speedup or 0.0 for n in names if overall[n].verdict == Verdict.KEEP]
    bar = max(kept, default=1.0)
    out = []
    for n in names:
        mine = overall[n]
        if mine.rounds < MIN_KEEP_ROUNDS:
            behind = mine.high is not None and leader.low is not None and mine.high < leader.low
            if not behind:
                out.append(n)
        elif mine.verdict in (Verdict.INCONCLUSIVE, Verdict.PENDING) and (mine.speedup or 0) > bar:
            out.append(n)
    return tuple(out) or None


def extended(plan: ComparePlan, active: tuple[str, ...]) -> ComparePlan:
    """``plan`` with one more round, run by ``active`` (and the baseline)."""
    before = plan.active or tuple(
        tuple(c.name for c in plan.configs if not c.is_baseline) for _ in range(plan.reps)
    )
    return plan.model_copy(update={"reps": plan.reps + 1, "active": (*before, active)})
