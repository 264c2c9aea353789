"""What-if for draft length: the truncation math from recorded positions, the flagged
extrapolation and its interval, the step's price from the run's own decodes (an interval over
every plausible split, and one line, when its steps cannot separate a step's fixed from its
per-token cost; never a refusal that hangs on one odd step), every type that drafts (draft-mtp
at n-max 1/2/3 from one n-max 2 run), a second run or a given cost model, and the command's JSON
and one-line refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spectui.cli import main
from spectui.core.compare.costmodel import CostModel
from spectui.core.compare.whatif import (
    Prediction,
    StepCounts,
    WhatIfError,
    best_line,
    event_counts,
    predict_at,
    predict_counts,
    what_if,
)
from spectui.core.compare.whatif_cost import RUN_SPREAD
from spectui.core.events import (
    RunMetrics,
    StepEvent,
    SummaryEvent,
    TokenEvent,
    TokenOrigin,
)
from spectui.core.llama.specconfig import SpecConfig
from spectui.core.request import GenerationRequest
from spectui.core.sessions.file import Session, SessionHeader, SessionServer, SessionWriter

DECODE_MS, DRAFTED_MS = 20.0, 3.0


def _session(
    steps: list[tuple[int, int]],
    singles_after: int = 1,
    k: int = 4,
    types: tuple[str, ...] = ("draft-simple",),
    noise: tuple[float, ...] = (1.0,),
) -> Session:
    """A run whose decodes take DECODE_MS + DRAFTED_MS x drafted, times the next of ``noise``'s
    factors in turn (1: exactly)."""
    draft = (
        Path("d.gguf") if any(t != "draft-mtp" and t.startswith("draft-") for t in types) else None
    )
    spec = SpecConfig(types=types, draft_n_max=k, draft_model=draft)
    header = SessionHeader(
        request=GenerationRequest(prompt="p", n_predict=100),
        server=SessionServer(spec=spec),
    )
    events: list[object] = [TokenEvent(t=0.1, index=0, text="a", origin=TokenOrigin.TARGET)]
    t, index = 0.1, 1
    factors = iter(noise * (4 * len(steps) + 4))
    for number, (drafted, accepted) in enumerate(steps):
        t += (DECODE_MS + DRAFTED_MS * drafted) / 1000 * next(factors)
        events.append(
            StepEvent(t=t, index=number, drafted=drafted, accepted=accepted, first_token=index)
        )
        for _ in range(accepted):
            events.append(
                TokenEvent(t=t, index=index, text="x", origin=TokenOrigin.DRAFT, step=number)
            )
            index += 1
        events.append(
            TokenEvent(t=t, index=index, text="y", origin=TokenOrigin.TARGET, step=number)
        )
        index += 1
        for _ in range(singles_after if number % 3 == 0 else 0):
            t += DECODE_MS / 1000 * next(factors)
            events.append(TokenEvent(t=t, index=index, text="z", origin=TokenOrigin.TARGET))
            index += 1
    rate = (index - 1) / (t - 0.1) if t > 0.1 else None
    metrics = RunMetrics(tokens=index, tokens_per_second=rate)
    events.append(SummaryEvent(t=t, metrics=metrics))
    return Session(Path("run.jsonl"), header, events)  # type: ignore[arg-type]  # EngineEvents


STEPS = [(4, 4), (4, 2), (4, 0), (3, 3), (4, 1), (4, 4), (2, 2), (4, 3)] * 3
FULL = [(4, 4), (4, 4), (4, 4), (2, 2)] * 5
"""Every draft accepted, of two lengths (the costs separate): a longer draft wins."""


def test_truncation_takes_each_position_as_recorded() -> None:
    counts = StepCounts(drafted=(4, 4, 4, 4), accepted=(4, 2, 1, 0), singles=0, draft_max=4)
    # P(a>=1)=3/4, P(a>=2)=2/4, P(a>=3)=1/4, P(a>=4)=1/4
    assert predict_at(counts, 1) == (1.75, 1.0, False)
    assert predict_at(counts, 2) == (2.25, 2.0, False)
    assert predict_at(counts, 4) == (1 + sum(counts.accepted) / 4, 4.0, False)


def test_past_the_recorded_maximum_is_geometric_and_flagged() -> None:
    counts = StepCounts(drafted=(4, 4, 4, 4), accepted=(4, 4, 2, 0), singles=0, draft_max=4)
    per_step, drafted, extrapolated = predict_at(counts, 6)
    # P(a>=4)=1/2, ratio P(a>=4)/P(a>=3) = 1: positions 5 and 6 accept 1/2 of the time each.
    assert extrapolated
    assert per_step == pytest.approx(1 + 3 / 4 + 3 / 4 + 1 / 2 + 1 / 2 + 1 / 2 + 1 / 2)
    assert drafted == 6.0


def test_the_model_reproduces_the_run_and_predicts_other_maxima() -> None:
    session = _session(STEPS)
    result = what_if(session, [1, 2, 4, 8])
    cost = result.cost_model
    assert cost.source == "decodes"
    assert cost.decode_ms == pytest.approx(DECODE_MS, rel=1e-6)
    assert cost.drafted_ms("draft-simple") == pytest.approx(DRAFTED_MS, rel=1e-6)
    rec = result.recorded
    assert rec.draft_max == 4
    assert rec.predicted_tokens_per_second == pytest.approx(rec.tokens_per_second, rel=1e-3)
    by = {p.draft_max: p for p in result.predictions}
    assert [p.draft_max for p in result.predictions] == [1, 2, 4, 8]
    assert by[4].speedup_vs_recorded == pytest.approx(1.0)
    assert not by[2].extrapolated and by[8].extrapolated
    # K'=1 by hand: a step yields 1 + P(a>=1) tokens and costs one decode plus one draft.
    counts_tokens = sum(a for _, a in STEPS) + len(STEPS)
    p1 = sum(1 for _, a in STEPS if a >= 1) / len(STEPS)
    singles = rec.singles
    ms = singles * DECODE_MS + counts_tokens / (1 + p1) * (DECODE_MS + DRAFTED_MS * 1)
    assert by[1].tokens_per_second == pytest.approx((rec.tokens - 1) / (ms / 1000), rel=1e-3)


def test_best_line_names_the_best_draft_max() -> None:
    result = what_if(_session(STEPS), [1, 2, 3, 4])
    line = best_line(result)
    best = max(result.predictions, key=lambda p: p.tokens_per_second)
    if best.draft_max == 4:
        assert line is None
    else:
        assert (
            line == f"n-max {best.draft_max} predicted {best.speedup_vs_recorded:.1f}x of this run"
        )


def _inside(p: Prediction) -> bool:
    return p.low <= p.tokens_per_second <= p.high and (
        p.tokens_per_step_low <= p.tokens_per_step <= p.tokens_per_step_high
    )


def test_one_draft_length_gives_every_split_and_the_one_line() -> None:
    # A self-draft that always accepts drafts the full length every step: the steps pin what a
    # step of 4 costs (32 ms), not how much of it is fixed. No plain decode bounds the fixed
    # part, so the splits run from all of it fixed to all of it per drafted token.
    session = _session([(4, 4)] * 6, singles_after=0)
    result = what_if(session, [2, 4])
    cost = result.step_cost
    assert not cost.separable and cost.lengths == [4]
    assert cost.anchor_ms == pytest.approx(DECODE_MS + 4 * DRAFTED_MS)
    assert cost.per_token_low == 0.0 and cost.per_token_high == pytest.approx(8.0)
    [line] = [n for n in result.notes if "cannot separate" in n]
    assert "every step drafted 4 tokens" in line and "--spec-draft-n-max 1" in line
    by = {p.draft_max: p for p in result.predictions}
    tokens = 6 * 5  # after the first: 6 steps of 4 accepted + 1; at K'=2, 10 steps of 3
    all_fixed, all_per_token = tokens / (10 * 0.032), tokens / (10 * 0.016)
    assert by[2].low == pytest.approx(all_fixed / (1 + RUN_SPREAD), rel=1e-3)
    assert by[2].high == pytest.approx(all_per_token * (1 + RUN_SPREAD), rel=1e-3)
    assert all(_inside(p) for p in result.predictions)
    assert not by[2].cost_told and by[4].cost_told
    # the recorded length itself is pinned whatever the split: only the run-to-run spread
    assert by[4].tokens_per_second == pytest.approx(result.recorded.predicted_tokens_per_second)
    assert by[4].high / by[4].low == pytest.approx((1 + RUN_SPREAD) ** 2, rel=1e-3)


NOISE = (1.1, 0.9, 1.05, 0.95)
"""A step's time off by up to 10 %, deterministic: a loaded machine's client clock."""


@pytest.mark.parametrize("odd", [None, 0, 5, 11])
def test_a_single_odd_step_neither_refuses_nor_decides_the_split(odd: int | None) -> None:
    # The accident: every step drafts 4 but one (the last one, capped by the tokens
    # left, or any other). With steps this noisy one shorter step cannot pin the split, so the
    # answer is the same in kind with or without it: an interval, the line, no refusal.
    steps = [(4, 4)] * 12
    if odd is not None:
        steps[odd] = (2, 2)
    result = what_if(_session(steps, singles_after=0, noise=NOISE), [2, 4, 8])
    assert not result.step_cost.separable
    assert any("cannot separate" in n for n in result.notes)
    assert all(_inside(p) for p in result.predictions)
    by = {p.draft_max: p for p in result.predictions}
    true_2 = 1 / ((DECODE_MS + 2 * DRAFTED_MS) / 3 / 1000)  # tokens/s at K'=2, exact costs
    assert by[2].low <= true_2 <= by[2].high


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(
        st.integers(1, 8).flatmap(lambda d: st.tuples(st.just(d), st.integers(0, d))),
        min_size=1,
        max_size=30,
    ),
    singles=st.integers(0, 2),
    noise=st.lists(st.floats(0.5, 2.0), min_size=1, max_size=5),
    maxima=st.lists(st.integers(1, 12), min_size=1, max_size=4),
)
def test_any_run_gets_an_interval_around_its_point(
    steps: list[tuple[int, int]], singles: int, noise: list[float], maxima: list[int]
) -> None:
    k = max(d for d, _ in steps)
    result = what_if(_session(steps, singles, k=k, noise=tuple(noise)), maxima)
    assert [p.draft_max for p in result.predictions] == maxima
    assert all(_inside(p) for p in result.predictions)
    cost = result.step_cost
    assert cost.per_token_low <= cost.per_token_ms <= cost.per_token_high
    separation = [n for n in result.notes if "cannot separate" in n]
    assert len(separation) == (0 if cost.separable else 1)
    if len({d for d, _ in steps}) == 1:
        assert not cost.separable


def test_steps_of_several_lengths_separate_the_costs_and_say_nothing() -> None:
    # an n-gram drafter's lengths: from 1 to the maximum, so even noisy steps tell the split
    varied = [(1, 1), (8, 8), (3, 2), (6, 1), (2, 2), (8, 0)] * 4
    result = what_if(_session(varied, k=8, noise=NOISE), [2, 4])
    cost = result.step_cost
    assert cost.separable
    assert cost.per_token_ms == pytest.approx(DRAFTED_MS, rel=0.25)
    assert cost.per_token_low <= cost.per_token_ms <= cost.per_token_high
    assert not any("cannot separate" in n for n in result.notes)


def test_a_second_run_at_another_length_separates_the_costs() -> None:
    first = _session([(4, 4)] * 6, singles_after=0)
    second = _session([(1, 1)] * 6, singles_after=0, k=1)
    alone = what_if(first, [2])
    both = what_if(first, [2], also=[second])
    assert not alone.step_cost.separable and both.step_cost.separable
    assert both.step_cost.source == "runs" and both.notes == []
    assert not alone.predictions[0].cost_told
    # each run's own speed stays uncertain (ALSO_SPREAD), but far less than every split
    narrow, wide = both.predictions[0], alone.predictions[0]
    assert narrow.high / narrow.low < wide.high / wide.low
    assert both.step_cost.per_token_ms == pytest.approx(DRAFTED_MS, rel=1e-6)
    exact = 1 / ((DECODE_MS + 2 * DRAFTED_MS) / 3 / 1000)  # at 2: neither run's length
    assert both.predictions[0].tokens_per_second == pytest.approx(exact, rel=1e-3)
    other = _session([(2, 2)] * 6, singles_after=0, k=2, types=("draft-mtp",))
    with pytest.raises(WhatIfError, match="another spec type"):
        what_if(first, [2], also=[other])
    # a baseline run of the same server pins a plain decode: the fixed cost is at least that
    baseline = _session([], types=("none",))
    baseline = Session(Path("none.jsonl"), baseline.header, [
        TokenEvent(t=0.1 + i * DECODE_MS / 1000, index=i, text="z", origin=TokenOrigin.TARGET)
        for i in range(8)
    ])  # fmt: skip
    elsewhere = Session(
        Path("b.jsonl"),
        second.header.model_copy(
            update={"server": second.header.server.model_copy(update={"model": "b.gguf"})}
        ),
        second.events,
    )
    here = Session(
        Path("a.jsonl"),
        first.header.model_copy(
            update={"server": first.header.server.model_copy(update={"model": "a.gguf"})}
        ),
        first.events,
    )
    with pytest.raises(WhatIfError, match="another model"):
        what_if(here, [2], also=[elsewhere])
    floored = what_if(first, [2], also=[baseline]).step_cost
    assert floored.decode_ms == pytest.approx(DECODE_MS)
    assert floored.per_token_high == pytest.approx(DRAFTED_MS)  # (32 - 20) / 4


def test_mtp_at_n_max_1_2_3_from_one_n_max_2_run() -> None:
    # draft-mtp drafts its full n-max every step (p-min 0): the split is never told by one run.
    steps = [(2, 2), (2, 1), (2, 0), (2, 2), (2, 2), (2, 1)] * 4
    result = what_if(_session(steps, singles_after=0, k=2, types=("draft-mtp",)), [1, 2, 3])
    assert result.recorded.draft_max == 2
    assert "drafted_ms.draft-mtp" in result.cost_model.parameters
    by = {p.draft_max: p for p in result.predictions}
    assert [by[v].extrapolated for v in (1, 2, 3)] == [False, False, True]
    assert by[1].tokens_per_step == pytest.approx(1 + 20 / 24, abs=1e-4)
    assert by[2].tokens_per_step == pytest.approx(1 + 20 / 24 + 12 / 24, abs=1e-4)
    # position 3 was never drafted: from none of it accepted to all of it (after position 2)
    assert by[3].tokens_per_step_low <= by[2].tokens_per_step
    assert by[3].tokens_per_step_high >= by[2].tokens_per_step + 12 / 24 - 1e-3
    assert all(_inside(p) for p in result.predictions)
    assert any("cannot separate" in n and "--spec-draft-n-max 4" in n for n in result.notes)
    assert any(n.startswith("positions past 2 were never drafted") for n in result.notes)


@pytest.mark.parametrize(
    "kind",
    ["draft-simple", "draft-mtp", "draft-eagle3", "draft-dflash", "draft-dspark", "ngram-mod"],
)
def test_every_type_that_drafts_is_predicted(kind: str) -> None:
    result = what_if(_session(STEPS, types=(kind,)), [1, 2, 8])
    group = kind if kind.startswith("draft-") else "ngram"
    assert f"drafted_ms.{group}" in result.cost_model.parameters
    assert len(result.predictions) == 3 and all(_inside(p) for p in result.predictions)


def test_a_chunk_of_several_steps_is_spread_over_them_and_said() -> None:
    # The server held a token back (it ended inside a UTF-8 character): one chunk carried two
    # steps, drafting 4 and accepting 1 between them, with no single split that fits.
    session = _session(STEPS)
    t = session.events[-1].t
    index = sum(1 for e in session.events if isinstance(e, TokenEvent))
    number = sum(1 for e in session.events if isinstance(e, StepEvent))
    merged: list[object] = [
        StepEvent(
            t=t + 0.05, index=number, drafted=4, accepted=1, first_token=index, steps=2,
            split_known=False,
        ),
        TokenEvent(t=t + 0.05, index=index, text="", origin=TokenOrigin.UNKNOWN, step=number),
        TokenEvent(t=t + 0.05, index=index + 1, text="", origin=TokenOrigin.UNKNOWN, step=number),
        TokenEvent(t=t + 0.05, index=index + 2, text="é", origin=TokenOrigin.TARGET, step=number),
    ]  # fmt: skip
    events = [*session.events[:-1], *merged, session.events[-1]]
    counts, decodes = event_counts(events, session.header.server.spec)
    assert counts.drafted[-2:] == (2, 2) and counts.accepted[-2:] == (1, 0)
    assert counts.spread_steps == 2 and counts.steps == len(STEPS) + 2
    assert [d for d, _ in decodes[-2:]] == [2, 2]
    assert [ms for _, ms in decodes[-2:]] == [pytest.approx(25.0)] * 2
    result = predict_counts(counts, decodes, session.header.server.spec, [2])
    assert any(n.startswith("2 of 26 steps came several to a chunk") for n in result.notes)


def test_a_chain_is_predicted_with_its_caveat() -> None:
    result = what_if(_session(STEPS, types=("ngram-mod", "draft-mtp")), [2])
    assert any(n.startswith("a chain (ngram-mod,draft-mtp)") for n in result.notes)


def test_a_given_model_prices_the_steps_and_says_when_it_cannot_split_them() -> None:
    # Self-draft that always accepts, at K=8: at K'=2 the same text takes 3x the steps, and each
    # pays the step's fixed cost again.
    session = _session([(8, 8)] * 8, singles_after=0, k=8)
    given = CostModel(
        parameters={
            "decode_ms": 14.0,
            "step_ms.draft-simple": 29.0,
            "drafted_ms.draft-simple": 22.0,
        },
        p90_abs_error=0.08,
    )
    result = what_if(session, [2, 8], given)
    assert result.step_cost.separable and result.step_cost.source == "cost-model"
    assert result.cost_model == given and result.notes == []
    by = {p.draft_max: p for p in result.predictions}
    tokens = 8 * 9  # after the first: 8 steps of 8 accepted + 1
    ms_2 = tokens / 3 * (14.0 + 29.0 + 22.0 * 2)
    ms_8 = tokens / 9 * (14.0 + 29.0 + 22.0 * 8)
    assert by[2].tokens_per_second == pytest.approx(tokens / (ms_2 / 1000), rel=1e-3)
    assert by[2].speedup_vs_recorded == pytest.approx(ms_8 / ms_2, rel=1e-3)
    assert by[2].high / by[2].low == pytest.approx(1.08**2, rel=1e-3)  # its p90 error
    # an older model (no step cost) pins the step at this run's length only
    linear = CostModel(
        kind="linear-step", parameters={"decode_ms": 14.0, "drafted_ms.draft-simple": 22.0}
    )
    older = what_if(session, [2, 8], linear)
    assert not older.step_cost.separable
    assert any("the cost model cannot separate" in n for n in older.notes)
    assert all(_inside(p) for p in older.predictions)


def test_a_run_without_steps_is_refused() -> None:
    with pytest.raises(WhatIfError, match="no verification steps"):
        what_if(_session([]), [2])


def _write(session: Session, path: Path) -> Path:
    writer = SessionWriter.open(path, session.header)
    for event in session.events:
        writer.write(event)
    writer.close()
    return path


def test_json_has_exactly_the_three_parts_and_one_prediction_per_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(_session(STEPS), tmp_path / "run.jsonl")
    assert main(["whatif", str(path), "--draft-max", "2,4,8,16", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"cost_model", "step_cost", "recorded", "predictions", "notes"}
    assert [p["draft_max"] for p in out["predictions"]] == [2, 4, 8, 16]
    assert set(out["predictions"][0]) == {
        "draft_max",
        "tokens_per_step",
        "tokens_per_step_low",
        "tokens_per_step_high",
        "tokens_per_second",
        "low",
        "high",
        "speedup_vs_recorded",
        "extrapolated",
        "cost_told",
    }
    assert main(["whatif", str(path)]) == 0
    text = capsys.readouterr().out
    assert "extrapolated" in text and "interval" in text


def test_the_table_says_the_one_line_and_takes_a_second_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(_session([(4, 4)] * 6, singles_after=0), tmp_path / "run.jsonl")
    second = _write(_session([(1, 1)] * 6, singles_after=0, k=1), tmp_path / "one.jsonl")
    assert main(["whatif", str(path), "--draft-max", "2"]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if "cannot separate" in ln]
    assert len(lines) == 1 and lines[0].startswith("note: ")
    assert main(["whatif", str(path), "--draft-max", "2", "--also", str(second)]) == 0
    assert "cannot separate" not in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--draft-max", "2,x"], "--draft-max"),
        (["--draft-max", "0"], "--draft-max"),
        (["--cost-model", "/nonexistent.json"], "not found"),
        (["--also", "/nonexistent.jsonl"], "nonexistent"),
    ],
)
def test_bad_inputs_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    path = _write(_session(STEPS), tmp_path / "run.jsonl")
    assert main(["whatif", str(path), *argv]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1


def test_a_missing_or_foreign_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["whatif", str(tmp_path / "none.jsonl")]) != 0
    assert capsys.readouterr().err.count("\n") == 1
    other = tmp_path / "other.jsonl"
    other.write_text("hello\n")
    assert main(["whatif", str(other)]) != 0
    assert capsys.readouterr().err.count("\n") == 1


def test_the_metrics_hint_needs_enough_steps_and_names_a_better_maximum() -> None:
    from spectui.core.compare.whatif import HINT_MIN_STEPS, hint

    few = _session(STEPS[: HINT_MIN_STEPS - 1])
    assert hint(few.events, None, "draft-simple") is None
    # Every step accepts everything: a longer draft is predicted to win.
    full = _session(FULL)
    line = hint(full.events, None, "draft-simple")
    assert line is not None and line.startswith("n-max ") and "predicted" in line


async def test_the_metrics_pane_shows_the_hint_only_after_a_run_with_enough_data() -> None:
    from textual.app import App, ComposeResult

    from spectui.ui.themes import spec_variable_defaults
    from spectui.ui.widgets.metrics import MetricsPane, RunColumn

    class Host(App[None]):
        def get_theme_variable_defaults(self) -> dict[str, str]:
            return spec_variable_defaults(self.current_theme)  # the token colours

        def compose(self) -> ComposeResult:
            yield MetricsPane(id="m")

    session = _session(FULL)
    tokens = [e for e in session.events if isinstance(e, TokenEvent)]
    steps = [e for e in session.events if isinstance(e, StepEvent)]
    async with Host().run_test() as pilot:
        pane = pilot.app.query_one(MetricsPane)
        pane.begin(RunColumn("draft-simple", "p", RunMetrics()))
        pane.add_run_events(tokens, steps)
        assert pane.prediction is None  # not while it runs
        pane.finish("limit", RunMetrics(tokens=len(tokens)))
        await pilot.pause()  # (worked out after the frame that shows the run's last tokens)
        assert pane.prediction is not None and pane.prediction.startswith("n-max")
        pane.begin(RunColumn("draft-simple", "p", RunMetrics()))
        assert pane.prediction is None
        pane.finish("stopped", RunMetrics())
        assert pane.prediction is None
