"""Where speculation pays, by content: a comparison's verdict per content class.

Each prompt takes the class `spectui.core.content.classify` gives its text and the baseline's
answer to it (the same class for every config). A config's rows of one class are pooled into one
`SummaryRow` named after the class (`summary.pooled_rows`: its speedups pair each run with the
baseline's run of the same prompt in the same round and client, its noise floor is every
config's round-to-round change on the class's prompts), and `judge.judge_pooled` judges it as
tune's overall result is judged: by the rule, held to the class's prompts' own verdicts. A class
whose pairs span fewer than the rule's `MIN_KEEP_ROUNDS` rounds gets no verdict of its own: the
sentence says so ("keep for code — 1.60x; drop for prose — 0.93x; json: too few rounds").
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from spectui.core.compare.judge import MIN_KEEP_ROUNDS, judge_pooled
from spectui.core.compare.models import ComparePlan
from spectui.core.compare.outcomes import Verdict
from spectui.core.compare.records import RunRecord
from spectui.core.compare.summary import pooled_rows, report_rows
from spectui.core.compare.summary_row import SummaryRow
from spectui.core.content import ContentClass, classify


class ContentRow(BaseModel):
    """One config on one content class's prompts."""

    model_config = ConfigDict(frozen=True)

    config: str
    """Config name."""
    content: str
    """The content class: code, json, prose or other."""
    prompts: list[str]
    """The keys of the class's prompts."""
    runs: int
    """Counted runs that succeeded."""
    pairs: int
    """Rounds with a run paired with the baseline's (the rule's count)."""
    speedup: float | None = None
    """Median paired speedup over the baseline (None for the baseline)."""
    speedup_low: float | None = None
    """Low end of the bootstrap interval of the paired speedups."""
    speedup_high: float | None = None
    """High end of that interval."""
    verdict: Verdict | None = None
    """The rule's verdict on the class; None when the class has too few rounds for one."""
    reason: str = ""
    """Why (the rule's words, or why there is no verdict)."""


class ContentVerdict(BaseModel):
    """Per config, the verdicts by content class in one sentence."""

    model_config = ConfigDict(frozen=True)

    config: str
    """Config name."""
    sentence: str
    """'keep for code — 1.60x; drop for prose — 0.93x; json: too few rounds (1 of 3)'."""


def prompt_classes(plan: ComparePlan, records: Sequence[RunRecord]) -> dict[str, ContentClass]:
    """Prompt key -> its content class (its text, and the baseline's first answer to it)."""
    answers: dict[str, str] = {}
    for record in records:
        if record.config == plan.baseline.name and record.ok and record.prompt not in answers:
            answers[record.prompt] = record.text
    return {p.key: classify(p.text, answers.get(p.key, "")) for p in plan.prompts}


def content_rows(
    plan: ComparePlan, records: Sequence[RunRecord], parts: Sequence[SummaryRow] | None = None
) -> list[ContentRow]:
    """One row per config × content class (classes in a fixed order, configs in plan order),
    over the counted runs of the plan's lowest level (``records``: a document's, annotated;
    ``parts``: their judged per-prompt rows, worked out here when not given)."""
    classes = prompt_classes(plan, records)
    judged_parts = report_rows(plan, records) if parts is None else parts
    out: list[ContentRow] = []
    for content in ContentClass:
        keys = [k for k, c in classes.items() if c is content]
        if not keys:
            continue
        rows = pooled_rows(plan, content.value, records, keys)
        mine = [p for p in judged_parts if p.prompt in keys]
        for row in judge_pooled(plan, rows, mine):
            enough = row.config == plan.baseline.name or row.pairs >= MIN_KEEP_ROUNDS
            out.append(
                ContentRow(
                    config=row.config,
                    content=content.value,
                    prompts=keys,
                    runs=row.runs,
                    pairs=row.pairs,
                    speedup=row.speedup_vs_baseline,
                    speedup_low=row.speedup_low,
                    speedup_high=row.speedup_high,
                    verdict=row.verdict if enough else None,
                    reason=row.reason
                    if enough
                    else f"too few rounds ({row.pairs} of {MIN_KEEP_ROUNDS})",
                )
            )
    return out


def content_verdicts(plan: ComparePlan, rows: Sequence[ContentRow]) -> list[ContentVerdict]:
    """Per config (the baseline aside): its verdict per content class, in one sentence."""
    out = []
    for config in plan.configs:
        if config.is_baseline:
            continue
        mine = [r for r in rows if r.config == config.name]
        if mine:
            out.append(ContentVerdict(config=config.name, sentence=content_sentence(mine)))
    return out


def content_sentence(rows: Sequence[ContentRow]) -> str:
    """'keep for code — 1.60x; drop for prose — 0.93x; json: too few rounds (1 of 3)': the
    classes with a verdict first."""
    judged = [r for r in rows if r.verdict is not None]
    parts = [f"{r.verdict} for {r.content} — {_speed(r)}" for r in judged]
    parts += [f"{r.content}: {r.reason}" for r in rows if r.verdict is None]
    return "; ".join(parts)


def _speed(row: ContentRow) -> str:
    return "–" if row.speedup is None else f"{row.speedup:.2f}x"
