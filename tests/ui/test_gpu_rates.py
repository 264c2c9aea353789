"""The TUI at the rates a GPU reaches (#28 item 6) and with chains of drafters (#28 item 3).

Scripted runs, their times taken from the event data (never the clock), drawn at 80×24 and
120×36: a run of 300 tokens in 0.2 s (~1,500 tok/s), a run of 70 % acceptance with far more steps
than the chart has columns, a chain whose config is longer than its metrics column, a chain with
two drafters, and a run whose steps came several to a chunk (accepted counts unknown). Beside
the pictures, each test checks what the charts were given, so a snapshot cannot pass by
showing nothing. Update with ``pytest tests/ui/test_gpu_rates.py --snapshot-update`` and look.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import pytest
from textual.pilot import Pilot
from textual.widgets import Sparkline

from helpers.engines import PASSAGE, FakeEngine, split_tokens
from spectui.config import Settings
from spectui.core.events import (
    DrafterStats,
    EngineEvent,
    EventStream,
    MetricsEvent,
    RunMetrics,
    StepEvent,
    SummaryEvent,
    TokenEvent,
    TokenOrigin,
)
from spectui.core.llama.specconfig import SpecConfig
from spectui.core.request import GenerationRequest
from spectui.ui.apps.live import SpectuiApp
from spectui.ui.widgets.bars import StepBars
from spectui.ui.widgets.charts import from_zero
from spectui.ui.widgets.metrics import MetricsPane
from spectui.ui.widgets.tokens import TokenView

from .ui_helpers import idle_after, main_screen, settle

SnapCompare = Callable[..., bool]
SIZES = {"80x24": (80, 24), "120x36": (120, 36)}
WORDS = split_tokens(PASSAGE)
KNOWN_ORIGINS = (TokenOrigin.DRAFT, TokenOrigin.TARGET)
SEVENTY = (2, 2, 1, 2, 0)
"""Accepted drafts of five steps of two: 7 of 10, so any five in a row accept 70 %."""


@dataclass(frozen=True)
class Plan:
    """One scripted run: its steps and its pace."""

    accepted: list[int]
    """Accepted drafts per step (a step drafts `drafted` and yields these plus one)."""
    drafted: int
    rate: float
    """Tokens a second: each step's tokens arrive at its first token's index / rate."""
    drafters: list[str | None] = field(default_factory=list)
    """Each step's drafter (empty: none named)."""
    unsplit_from: int | None = None
    """From this step on, steps come two to a chunk with their split unknown."""


def _metrics(plan: Plan, events: list[EngineEvent], ttft: float, t: float) -> RunMetrics:
    steps = [e for e in events if isinstance(e, StepEvent)]
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    per_position = [0] * plan.drafted
    by_drafter: dict[str, DrafterStats] = {}
    for step in steps:
        if step.split_known:
            for position in range(step.accepted):
                per_position[position] += 1
        if step.drafter is not None:
            old = by_drafter.get(step.drafter, DrafterStats())
            by_drafter[step.drafter] = DrafterStats(
                drafted=old.drafted + step.drafted,
                accepted=old.accepted + step.accepted,
                steps=old.steps + step.steps,
            )
    unsplit = [s for s in steps if not s.split_known]
    return RunMetrics(
        tokens=len(tokens),
        drafted=sum(s.drafted for s in steps),
        accepted=sum(s.accepted for s in steps),
        steps=sum(s.steps for s in steps),
        accepted_per_position=per_position,
        steps_unsplit=sum(s.steps for s in unsplit),
        accepted_unplaced=sum(s.accepted for s in unsplit),
        origin_unknown_tokens=sum(1 for e in tokens if e.origin not in KNOWN_ORIGINS),
        draft_tokens=sum(1 for e in tokens if e.origin is TokenOrigin.DRAFT),
        ttft_ms=ttft * 1000,
        total_ms=t * 1000,
        tokens_per_second=(len(tokens) - 1) / (t - ttft) if t > ttft else None,
        prompt_tokens=96,
        by_drafter=by_drafter,
    )


def script(plan: Plan) -> list[EngineEvent]:
    """The run's events, in the order the engine sends them, snapshots every 16 tokens."""
    ttft = 0.05
    events: list[EngineEvent] = [
        TokenEvent(t=ttft, index=0, text=WORDS[0], origin=TokenOrigin.TARGET)
    ]
    index, step, t = 1, 0, ttft
    while step < len(plan.accepted):
        unsplit = plan.unsplit_from is not None and step >= plan.unsplit_from
        count = 2 if unsplit and step + 1 < len(plan.accepted) else 1
        accepted = sum(plan.accepted[step : step + count])
        drafter = plan.drafters[step] if plan.drafters else None
        t = ttft + index / plan.rate
        rejected = plan.drafted * count - accepted  # (on the chunk's last token)
        events.append(StepEvent(
            t=t, index=step, drafted=plan.drafted * count, accepted=accepted, first_token=index,
            drafter=drafter, steps=count,
            split_known=not unsplit or accepted == 0,
        ))  # fmt: skip
        for offset in range(accepted + count):
            origin = TokenOrigin.DRAFT if offset < accepted else TokenOrigin.TARGET
            if unsplit and accepted:
                origin = TokenOrigin.UNKNOWN  # (the stream cannot tell these apart)
            events.append(TokenEvent(
                t=t + offset * 5e-5, index=index, text=WORDS[index % len(WORDS)], origin=origin,
                step=step, rejected_before=rejected if offset == accepted + count - 1 else 0,
                drafter=drafter if origin is TokenOrigin.DRAFT else None,
            ))  # fmt: skip
            index += 1
        step += count
        if step % 8 < count:
            events.append(MetricsEvent(t=t, snapshot=_metrics(plan, events, ttft, t)))
    summary = SummaryEvent(t=t, metrics=_metrics(plan, events, ttft, t), stop_reason="limit")
    return [*events, summary]


def gpu_fast() -> Plan:
    """~1,500 tok/s, 300 tokens in 0.2 s: draft-mtp, n-max 2, 70 %."""
    steps = [SEVENTY[k % 5] for k in range(125)]
    return Plan(steps, drafted=2, rate=1_500.0)


def seventy() -> Plan:
    """70 % acceptance over 400 steps of two drafts, in an order that varies."""
    rng = random.Random(28)
    steps: list[int] = []
    for _ in range(80):
        block = list(SEVENTY)
        rng.shuffle(block)
        steps += block
    return Plan(steps, drafted=2, rate=220.0)


def two_drafters(ngram: str = "ngram-mod") -> Plan:
    """draft-mtp serves the first steps, then an n-gram type takes over the repeated passage."""
    rng = random.Random(3)
    accepted: list[int] = []
    drafters: list[str | None] = []
    for k in range(120):
        if k < 40 or k % 4 == 0:
            drafters.append("draft-mtp")
            accepted.append(rng.choice((0, 1, 2, 2)))
        else:
            drafters.append(ngram)
            accepted.append(rng.choice((1, 3, 3, 3)))
    return Plan(accepted, drafted=3, rate=1_200.0, drafters=drafters)


def unsplit() -> Plan:
    """Byte-fallback output: from step 20 on, steps come two to a chunk."""
    return Plan([SEVENTY[k % 5] for k in range(60)], drafted=2, rate=900.0, unsplit_from=20)


@dataclass
class PlannedEngine(FakeEngine):
    """The fake engine, each run taken from `plans` in turn (the last one repeats)."""

    plans: list[Plan] = field(default_factory=list)

    async def _generate(self, request: GenerationRequest, cancel: asyncio.Event) -> EventStream:
        plan = self.plans[min(len(self.runs), len(self.plans)) - 1]
        for event in script(plan):
            yield event


MTP = SpecConfig(types=("draft-mtp",), draft_n_max=2, draft_n_min=1)
CHAIN = SpecConfig(types=("ngram-mod", "draft-mtp"), draft_n_max=3, draft_n_min=1)
LONG_CHAIN = SpecConfig(
    types=("ngram-simple", "ngram-map-k4v", "draft-mtp"), draft_n_max=3, draft_n_min=1
)


def _ended_well(app: SpectuiApp) -> None:
    current = main_screen(app).metrics.current
    assert current is not None and current.status == "limit", current


async def _one_run(pilot: Pilot[None]) -> None:
    app = pilot.app
    assert isinstance(app, SpectuiApp)
    await settle(pilot, idle_after(app, runs=1))
    _ended_well(app)
    main_screen(app).charts.replot()
    await pilot.pause()


async def _run_then_chain(pilot: Pilot[None]) -> None:
    """A draft-mtp run, then a restart with a long chain and its run: both columns headed."""
    app = pilot.app
    assert isinstance(app, SpectuiApp)
    engine = app.engine
    assert isinstance(engine, FakeEngine)
    await settle(pilot, idle_after(app, runs=1))
    engine.spec = LONG_CHAIN  # (the restart relaunches with the engine's spec)
    await pilot.press("R")
    await settle(pilot, lambda: main_screen(app).operation is None)
    await pilot.press("r")
    await settle(pilot, idle_after(app, runs=2))
    _ended_well(app)
    main_screen(app).charts.replot()
    await pilot.pause()


def _app(spec: SpecConfig, *plans: Plan) -> SpectuiApp:
    engine = PlannedEngine(spec=spec, plans=list(plans))
    return SpectuiApp(engine, Settings(), autorun=True)


Scenario = tuple[Callable[[], SpectuiApp], Callable[[Pilot[None]], Awaitable[None]]]
SCENARIOS: dict[str, Scenario] = {
    "fast": (lambda: _app(MTP, gpu_fast()), _one_run),
    "seventy": (lambda: _app(MTP, seventy()), _one_run),
    "long-chain": (lambda: _app(MTP, gpu_fast(), two_drafters("ngram-simple")), _run_then_chain),
    "two-drafters": (lambda: _app(CHAIN, two_drafters()), _one_run),
    "unsplit": (lambda: _app(MTP, unsplit()), _one_run),
}


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_gpu_rates(snap_compare: SnapCompare, scenario: str, size: tuple[int, int]) -> None:
    make, before = SCENARIOS[scenario]
    assert snap_compare(make(), terminal_size=size, run_before=before)


def test_two_drafters_without_colour(
    snap_compare: SnapCompare, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With NO_COLOR the marks alone tell the drafters apart (and underlines the drafts)."""
    monkeypatch.setenv("NO_COLOR", "1")
    assert snap_compare(_app(CHAIN, two_drafters()), terminal_size=(80, 24), run_before=_one_run)


# -- what the charts are given -----------------------------------------------------------------


async def test_a_fraction_of_a_second_fills_the_tokens_per_second_chart() -> None:
    app = _app(MTP, gpu_fast())
    async with app.run_test(size=(80, 24)) as pilot:
        await _one_run(pilot)
        charts = main_screen(app).charts
        engine = app.engine
        assert isinstance(engine, FakeEngine)
        final = engine.emitted
        spark = charts.query_one("#tps-spark", Sparkline)
        rates = charts.tps(spark.size.width)
        assert len(rates) == spark.size.width  # every cell of the chart has a column
        span = final[-1].t - final[0].t
        # Each column is its tokens over its measured time: weighted by time, the run's rate.
        widths = span / len(rates)
        mean = sum(rate * widths for _, rate in rates) / span
        assert mean == pytest.approx((len(final) - 1) / span, rel=0.02)
        assert all(1_000 < rate < 2_200 for _, rate in rates)
        assert spark.data == from_zero([rate for _, rate in rates], spark.size.width)
        assert str(charts.query_one("#tps-title").render()) == "tokens/s 0–1,625 · 0.20 s"


async def test_seventy_percent_reads_as_seventy_percent() -> None:
    app = _app(MTP, seventy())
    async with app.run_test(size=(80, 24)) as pilot:
        await _one_run(pilot)
        bars = main_screen(app).charts.query_one(StepBars)
        assert 10 * len(bars.columns) < 400  # many steps a column
        means = [column.mean for column in bars.columns]
        assert all(mean is not None and 1.2 <= mean <= 1.6 for mean in means), means
        assert bars.top == 2
        # Drawn about 70 % high: 3 rows of eighths, 0.7 of 24 is 16.8.
        assert all(14 <= eighths <= 20 for eighths in bars.eighths())


async def test_a_long_chain_is_named_whole_in_the_title_and_wrapped_in_its_column() -> None:
    app = _app(MTP, gpu_fast(), two_drafters("ngram-simple"))
    async with app.run_test(size=(80, 24)) as pilot:
        await _run_then_chain(pilot)
        assert app.title == f"spectui · {LONG_CHAIN.label}"
        metrics = main_screen(app).query_one(MetricsPane)
        lines = [metrics.render_line(y).text for y in range(6)]
        # The 11-cell column: broken after the commas and at spaces, the n-gram types' family
        # prefix shortened where a name does not fit, nothing cut.
        now = [line[12:24].strip() for line in lines[:5]]
        assert now == ["ng-simple,", "ng-map-k4v,", "draft-mtp", "(n-max 3,", "n-min 1)"], lines
        assert lines[5].startswith("accept rate")


async def test_two_drafters_are_told_apart_by_mark_and_counted_each() -> None:
    app = _app(CHAIN, two_drafters())
    async with app.run_test(size=(120, 36)) as pilot:
        await _one_run(pilot)
        screen = main_screen(app)
        view = screen.query_one(TokenView)
        assert view.model.chain and set(view.model.drafters) == {"draft-mtp", "ngram-mod"}
        text = "".join(line.plain for line in view.wrapped.lines) + view.wrapped.open.plain
        assert "†" in text and "‡" in text  # one mark per drafter, before each step's drafts
        legend = str(screen.query_one("#legend").render())
        assert "†draft-mtp" in legend and "‡ngram-mod" in legend
        rows = [screen.metrics.render_line(y).text for y in range(30)]
        assert any(row.startswith("†draft-mtp") for row in rows), rows
        assert any(row.startswith("‡ngram-mod") for row in rows), rows


async def test_steps_with_an_unknown_split_are_shown_as_unknown() -> None:
    app = _app(MTP, unsplit())
    async with app.run_test(size=(80, 24)) as pilot:
        await _one_run(pilot)
        charts = main_screen(app).charts
        bars = charts.query_one(StepBars)
        unknown = sum(column.unknown for column in bars.columns)
        metrics = main_screen(app).metrics.current
        assert metrics is not None and unknown == metrics.metrics.steps_unsplit > 0
        assert str(charts.query_one("#steps-title").render()).endswith(f" · {unknown}?")
        assert str(charts.query_one("#positions-title").render()).endswith(f" · {unknown}?")
