"""From a tune's runs to its findings: per-candidate results, winners, curves, hints, what is
settled. Everything here is recomputed from the embedded compare document after every run."""

from __future__ import annotations

from collections.abc import Sequence

from spectui.core.compare.costmodel import PredictedSpeedup
from spectui.core.compare.judge import judge_pooled
from spectui.core.compare.models import ComparePlan
from spectui.core.compare.outcomes import SpeedCall, Verdict
from spectui.core.compare.records import RunRecord
from spectui.core.compare.summary import pooled_rows
from spectui.core.compare.summary_row import SummaryRow
from spectui.core.tune.models import (
    CandidateResult,
    Curve,
    CurvePoint,
    PromptResult,
    TuneDocument,
    Winner,
)
from spectui.core.tune.predict import predict
from spectui.core.tune.replays import check_replicas, server_slots
from spectui.core.tune.space import Candidate

ACCEPT_HINT = 0.2
"""Positions accepting less often than this are draft length spent for little."""
DRAFT_LENGTH_FLAG = {
    "ngram-mod": "--spec-ngram-mod-n-max",
    "ngram-simple": "--spec-ngram-simple-size-m",
    "ngram-map-k": "--spec-ngram-map-k-size-m",
    "ngram-map-k4v": "--spec-ngram-map-k4v-size-m",
}
"""The flag that caps the draft length, per type (draft-* types: --spec-draft-n-max)."""
OVERALL = "overall"
"""The name of every prompt pooled (the winners' and leaderboards' key)."""


def _result(row: SummaryRow) -> PromptResult:
    """A judged row (one prompt's, or every prompt's pooled) as the tune reports it."""
    return PromptResult(
        speedup=row.speedup_vs_baseline,
        low=row.speedup_low,
        high=row.speedup_high,
        rounds=row.pairs,
        verdict=row.verdict,
        unsettled=row.unsettled,
        reason=row.reason,
        ttft_ratio=row.ttft_ratio_vs_baseline,
        peak_rss_bytes=row.median_peak_rss_bytes,
        memory_extra_bytes=row.memory_extra_bytes,
        acceptance=row.median_acceptance,
        mean_acceptance_length=row.median_mean_acceptance_length,
        net_loss=row.speed_call == SpeedCall.SLOWER,
    )


def overall_rows(
    plan: ComparePlan, records: Sequence[RunRecord], rows: Sequence[SummaryRow]
) -> dict[str, SummaryRow]:
    """Config -> every prompt's runs pooled into one row, judged by compare's rule
    (`judge.judge_pooled`): the pooled interval against the noise floor, the spread check and
    the one-round guard as for a prompt, and a fault on any prompt (``rows``: the judged
    per-prompt rows) dropping it overall."""
    pooled = pooled_rows(plan, OVERALL, records, [p.key for p in plan.prompts])
    return {row.config: row for row in judge_pooled(plan, pooled, rows)}


def candidate_results(
    plan: ComparePlan,
    records: Sequence[RunRecord],
    rows: list[SummaryRow],
    space: Sequence[Candidate],
) -> list[CandidateResult]:
    """Each candidate's results (space order), with when the race left it out."""
    by_text = {c.text: c for c in space}
    rounds_of = _rounds(plan)
    overall = overall_rows(plan, records, rows)
    out = []
    for config in plan.configs:
        if config.is_baseline:
            continue
        point = by_text.get(config.name)
        ran = rounds_of.get(config.name, [])
        out.append(
            CandidateResult(
                config=config.name,
                label=point.label if point else config.label,
                type=point.type if point else config.spec.types[0],
                knobs=dict(point.knobs) if point else {},
                args=list(config.args),
                rounds=len(ran),
                out_after=_out_after(ran, plan.reps),
                results={r.prompt: _result(r) for r in rows if r.config == config.name},
                overall=_result(overall[config.name]),
            )
        )
    return out


def _out_after(ran: Sequence[int], reps: int) -> int | None:
    """The round after which the race left a candidate out (one round one only predicted or
    replayed, and the race did not take: after round 1); None while it is in."""
    if not ran:
        return 1 if reps > 1 else None
    return max(ran) if max(ran) < reps else None


def _rounds(plan: ComparePlan) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for config in plan.configs:
        out[config.name] = [r for r in range(1, plan.reps + 1) if plan.runs_in(config.name, r)]
    return out


def winners(
    results: Sequence[CandidateResult], prompts: Sequence[str], launch: Sequence[str]
) -> dict[str, Winner | None]:
    """Per prompt and 'overall': the kept candidate with the best speedup, or None."""
    out: dict[str, Winner | None] = {}
    for key in [*prompts, OVERALL]:
        kept = [
            (c, res)
            for c in results
            if (res := c.overall if key == OVERALL else c.results.get(key)) is not None
            and res.verdict == Verdict.KEEP
        ]
        best = max(kept, key=lambda pair: pair[1].speedup or 0.0, default=None)
        out[key] = (
            None
            if best is None
            else Winner(
                config=best[0].config,
                args=[*launch, *best[0].args],
                speedup=best[1].speedup,
                verdict=best[1].verdict,
            )
        )
    return out


def curves(results: Sequence[CandidateResult]) -> list[Curve]:
    """Per type and knob: the best overall speedup seen at each value."""
    out = []
    for type_ in dict.fromkeys(c.type for c in results):
        mine = [c for c in results if c.type == type_ and c.overall.speedup is not None]
        for knob in dict.fromkeys(k for c in mine for k in c.knobs):
            best: dict[float, CandidateResult] = {}
            for c in mine:
                value = c.knobs[knob]
                if value not in best or (c.overall.speedup or 0) > (
                    best[value].overall.speedup or 0
                ):
                    best[value] = c
            if len(best) > 1:
                points = [
                    CurvePoint(
                        value=v, speedup=best[v].overall.speedup or 0.0, config=best[v].config
                    )
                    for v in sorted(best)
                ]
                out.append(Curve(type=type_, knob=knob, points=points))
    return out


def acceptance_hint(
    records: Sequence[RunRecord], winner: CandidateResult, prompt: str | None = None
) -> str | None:
    """'positions 5+ accept under 20 % of the time: --spec-draft-n-max 4 keeps the win'."""
    runs = [
        r
        for r in records
        if r.config == winner.config
        and r.ok
        and not r.warmup
        and (prompt is None or r.prompt == prompt)
    ]
    steps = sum(r.steps - r.steps_unsplit for r in runs)  # (those placed by position)
    if steps <= 0:
        return None
    width = max((len(r.accepted_per_position) for r in runs), default=0)
    totals = [
        sum(r.accepted_per_position[i] for r in runs if i < len(r.accepted_per_position))
        for i in range(width)
    ]
    rates = [t / steps for t in totals]
    cut = next((i for i, rate in enumerate(rates) if rate < ACCEPT_HINT), None)
    if cut is None or cut == 0:
        return None
    flag = DRAFT_LENGTH_FLAG.get(winner.type, "--spec-draft-n-max")
    where = f" on {prompt}" if prompt else ""
    return (
        f"{winner.label}{where}: positions {cut + 1}+ accept under {ACCEPT_HINT:.0%} of the time: "
        f"{flag} {cut} keeps the win"
    )


def settled_lines(plan: ComparePlan, rows: list[SummaryRow], complete: bool) -> list[str]:
    """Per prompt: the winner if settled, else what is still open."""
    lines = []
    for prompt in plan.prompts:
        mine = [r for r in rows if r.prompt == prompt.key and r.config != plan.baseline.name]
        kept = sorted(
            (r for r in mine if r.verdict == Verdict.KEEP),
            key=lambda r: -(r.speedup_vs_baseline or 0),
        )
        # A candidate the race left out earlier is decided (it lost), not open.
        open_ = [
            r
            for r in mine
            if r.verdict in (Verdict.INCONCLUSIVE, Verdict.PENDING)
            and r.speed_call != SpeedCall.TIE
            and plan.runs_in(r.config, plan.reps)
        ]
        label = plan.label
        names = ", ".join(label(r.config) for r in open_[:3])
        names += f" and {len(open_) - 3} more" if len(open_) > 3 else ""
        if kept:
            best = kept[0]
            text = f"{prompt.key}: {label(best.config)} keeps {best.speedup_vs_baseline:.2f}x"
        elif open_:
            text = f"{prompt.key}: no keeper yet"
        else:
            text = f"{prompt.key}: nothing beats the baseline"
        if not open_:
            text += " — settled"
        elif complete:
            text += f" — left unsettled after {plan.reps} rounds: {names}"
        else:
            text += f" — not settled: {names}"
        lines.append(text)
    return lines


def with_prediction(
    result: CandidateResult,
    predicted: tuple[PredictedSpeedup | None, dict[str, PredictedSpeedup]] | None,
    space: Sequence[Candidate],
) -> CandidateResult:
    """``result`` with its predicted speedups (overall and per prompt) beside the measured."""
    source = next((c.predicted_from for c in space if c.text == result.config), None)
    if predicted is None:
        return result.model_copy(update={"predicted_from": source})
    overall, per_prompt = predicted
    results = {
        key: res.model_copy(update={"predicted": per_prompt.get(key)})
        for key, res in result.results.items()
    }
    for key, value in per_prompt.items():
        results.setdefault(key, PromptResult(predicted=value))
    return result.model_copy(
        update={
            "overall": result.overall.model_copy(update={"predicted": overall}),
            "results": results,
            "predicted_from": source,
        }
    )


def refreshed(document: TuneDocument) -> TuneDocument:
    """``document`` with every finding recomputed from its compare document."""
    compare = document.compare
    plan = compare.plan
    rows = compare.summary
    results = candidate_results(plan, compare.runs, rows, document.space)
    slots = server_slots(compare.server)
    replicas = check_replicas(plan, compare.runs, document.space, document.prompt_tokens, slots)
    predicted = (
        {name: (p.overall, p.prompts) for name, p in document.predictions.items()}
        if document.predictions
        else predict(
            plan,
            compare.runs,
            compare.cost_model,
            document.space,
            document.prompt_tokens,
            replicas,
            slots,
        )
    )
    results = [with_prediction(c, predicted.get(c.config), document.space) for c in results]
    prompts = [p.key for p in plan.prompts]
    won = winners(results, prompts, document.launch)
    by_config = {c.config: c for c in results}
    hints = []
    for key, winner in won.items():
        if winner is not None and (c := by_config.get(winner.config)) is not None:
            hint = acceptance_hint(compare.runs, c, None if key == OVERALL else key)
            if hint and hint not in hints:
                hints.append(hint)
    for c in results:
        losses = [p for p, res in c.results.items() if res.net_loss]
        if losses and c.overall.verdict != Verdict.DROP:
            hints.append(f"{c.label}: net loss on {', '.join(losses)}")
    return document.model_copy(
        update={
            "candidates": results,
            "winners": won,
            "curves": curves(results),
            "hints": hints,
            "settled": settled_lines(plan, rows, document.complete),
            "cost_model": compare.cost_model,
            "replicas": replicas,
        }
    )
