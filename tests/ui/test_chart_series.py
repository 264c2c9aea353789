"""The charts' series, the header rule and the token log, without an app (#28 items 6, 3).

Property tests where a rule should hold for any run: rates tile the run and average to its rate,
step columns keep every step and never take the largest, a config wraps to any column; and the
cases seen on a real tiny-model server (a backlog read at once, 64 tokens in one read).
"""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console
from textual.renderables.sparkline import Sparkline as SparklineRenderable

from spectui.core.events import TokenEvent, TokenOrigin
from spectui.core.llama.specconfig import SpecConfig
from spectui.ui.widgets.charts import from_zero, scale_top
from spectui.ui.widgets.labels import wrap_label
from spectui.ui.widgets.metrics import HEADER_LINES
from spectui.ui.widgets.series import RateSeries, StepSeries
from spectui.ui.widgets.token_model import TokenLog


def test_a_backlog_read_at_once_does_not_flatten_the_run() -> None:
    series = RateSeries()
    times = [i / 1_500 for i in range(150)]  # 0.1 s at 1,500 tok/s,
    times += [0.16 + i * 1e-5 for i in range(60)]  # a stall, then 60 tokens read at once,
    times += [0.17 + i / 1_500 for i in range(150)]  # and 0.1 s more
    for t in times:
        series.add(t)
    rates = [rate for _, rate in series.rates(24)]
    assert max(rates) > 3 * 1_500  # (the backlog's column)
    mean = series.mean_rate
    assert mean is not None and scale_top(rates, mean) == 2 * mean
    steady = sorted(rates)[len(rates) // 2]
    assert steady / scale_top(rates, mean) > 0.4  # the run's usual rate: not at the floor


def test_n_gram_steps_of_64_tokens_at_once_give_columns_of_several_steps() -> None:
    series = RateSeries()
    series.add(0.0)
    for step in range(30):  # a step every 4 ms, each releasing 64 tokens in one read
        for _ in range(64):
            series.add(0.004 * (step + 1))
    rates = [rate for _, rate in series.rates(80)]
    assert len(rates) == 30 // 3  # three arrivals a column
    assert all(rate == pytest.approx(64 / 0.004, rel=0.35) for rate in rates), rates


@given(st.lists(st.floats(1.0, 5_000.0), min_size=1, max_size=60), st.integers(1, 60))
def test_the_sparkline_draws_each_rate_from_zero(rates: list[float], width: int) -> None:
    renderable = SparklineRenderable(from_zero(rates, width), width=width, height=1)
    console = Console(width=width, height=1, color_system=None)
    glyphs = "".join(segment.text for segment in console.render(renderable, console.options))
    expected = [rates[column * len(rates) // width] for column in range(width)]
    top = max(expected)
    assert [SparklineRenderable.BARS.index(glyph) for glyph in glyphs] == [
        int(rate / top * 7) for rate in expected
    ]


# Arrival times as a clock gives them: microseconds at the finest (a float's subnormal gap of
# 5e-324 s between two tokens would make a rate of inf, which no clock can produce).
CLOCK_READINGS = st.floats(0.0, 5.0, allow_nan=False).map(lambda t: round(t, 6))


@given(
    st.lists(CLOCK_READINGS, min_size=2, max_size=400),
    st.integers(1, 200),
    st.integers(4, 64),
)
def test_rates_tile_the_run_and_keep_every_token(
    times: list[float], columns: int, most: int
) -> None:
    series = RateSeries(most=most)
    for t in sorted(times):
        series.add(t)
    assert len(series.counts) <= most  # bounded, however long the run
    spans = series.spans(columns)
    assert len(spans) <= columns
    if series.span <= 0:
        assert spans == []
        return
    # From the first token to the newest, end to end, every token after the first in one column:
    # so the columns' rates, weighted by their time, average to the run's rate.
    assert spans[0][0] == series.origin
    assert spans[-1][1] == pytest.approx(series.newest)
    assert all(end == start for (_, end, _), (start, _, _) in pairwise(spans))
    assert all(end > start for start, end, _ in spans)
    assert sum(count for _, _, count in spans) == series.tokens == len(times) - 1
    rates = series.rates(columns)
    pairs = zip(rates, spans, strict=True)
    weighted = sum(rate * (end - start) for (_, rate), (start, end, _) in pairs)
    assert weighted == pytest.approx(series.tokens)


@given(
    st.lists(
        st.tuples(st.integers(1, 8), st.integers(0, 8), st.integers(1, 3), st.booleans()),
        max_size=300,
    ),
    st.integers(1, 80),
)
def test_step_columns_keep_every_step_and_never_take_the_largest(
    steps: list[tuple[int, int, int, bool]], columns: int
) -> None:
    series = StepSeries(most=16)
    for drafted, accepted, count, known in steps:
        series.add(drafted * count, min(accepted, drafted) * count, count, known)
    out = series.columns(columns)
    assert len(out) <= columns
    assert sum(c.steps + c.unknown for c in out) == sum(count for _, _, count, _ in steps)
    known_steps, known_accepted = series.known
    assert sum(c.steps for c in out) == known_steps
    assert sum((c.mean or 0) * c.steps for c in out) == pytest.approx(known_accepted)
    assert all(c.mean is None or c.mean <= series.top for c in out)


@given(
    st.lists(st.sampled_from(["ngram-mod", "draft-mtp", "ngram-map-k4v", "draft-eagle3"]),
             min_size=1, max_size=4, unique=True),
    st.integers(1, 8),
    st.integers(4, 40),
)  # fmt: skip
def test_a_config_wraps_to_its_column(types: list[str], n_max: int, width: int) -> None:
    label = SpecConfig(types=tuple(types), draft_n_max=n_max, draft_n_min=1).label
    lines = wrap_label(label, width, HEADER_LINES)
    assert 1 <= len(lines) <= HEADER_LINES
    assert all(len(line) <= width for line in lines)
    if len(label) <= width:
        assert lines == [label]


def test_the_header_rule_on_the_issues_config() -> None:
    def wrap(label: str, width: int) -> list[str]:
        return wrap_label(label, width, HEADER_LINES)

    assert wrap("draft-mtp (n-max 2, n-min 1)", 12) == ["draft-mtp", "(n-max 2,", "n-min 1)"]
    assert wrap("draft-mtp (n-max 2, n-min 1)", 18) == ["draft-mtp", "(n-max 2, n-min 1)"]
    assert wrap("ngram-mod,draft-mtp (n-max 2)", 12) == ["ngram-mod,", "draft-mtp", "(n-max 2)"]
    assert wrap("ngram-mod,draft-mtp (n-max 2)", 30) == ["ngram-mod,draft-mtp (n-max 2)"]
    assert wrap("ngram-map-k4v,draft-eagle3", 11) == ["ng-map-k4v,", "dr-eagle3"]
    assert wrap("SYNTHETIC draft-simple (synth len 3)", 13) == [
        "SYNTHETIC", "draft-simple", "(synth len 3)",
    ]  # fmt: skip
    assert wrap("a,b,c,d,e,f,g,h", 2) == ["a,", "b,", "c,", "d,", "e,", "f…"]


def _draft(index: int, step: int, drafter: str) -> TokenEvent:
    return TokenEvent(
        index=index, text=f" w{index}", origin=TokenOrigin.DRAFT, step=step, drafter=drafter
    )


def test_a_second_drafter_turns_the_marks_on_and_each_step_opens_one_run() -> None:
    log = TokenLog()
    first = [_draft(0, 0, "draft-mtp"), _draft(1, 0, "draft-mtp")]
    assert log.extend(first) is False and not log.chain
    target = TokenEvent(index=2, text=" t", origin=TokenOrigin.TARGET, step=0)
    # The second drafter comes: what is drawn must change (the first one's drafts get a mark).
    assert log.extend([target, _draft(3, 1, "ngram-mod"), _draft(4, 2, "ngram-mod")]) is True
    assert log.chain and list(log.drafters) == ["draft-mtp", "ngram-mod"]
    assert [t.opens_run for t in log.tokens] == [True, False, False, True, True]
    unknown = TokenEvent(index=5, text=" u", origin=TokenOrigin.UNKNOWN, step=3)
    assert log.extend([unknown]) is False and log.unknown_count == 1 and log.target_count == 1
