"""What-if for draft length: the truncation math from recorded positions, the flagged
extrapolation, the cost of a decode fitted on the run's own steps, and the command's JSON and
one-line refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spectui.cli import main
from spectui.core.compare.costmodel import CostModel
from spectui.core.compare.whatif import StepCounts, WhatIfError, best_line, predict_at, what_if
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


def _session(steps: list[tuple[int, int]], singles_after: int = 1, k: int = 4) -> Session:
    """A run whose decodes take exactly DECODE_MS + DRAFTED_MS x drafted."""
    spec = SpecConfig(types=("draft-simple",), draft_n_max=k, draft_model=Path("d.gguf"))
    header = SessionHeader(
        request=GenerationRequest(prompt="p", n_predict=100),
        server=SessionServer(spec=spec),
    )
    events: list[object] = [TokenEvent(t=0.1, index=0, text="a", origin=TokenOrigin.TARGET)]
    t, index = 0.1, 1
    for number, (drafted, accepted) in enumerate(steps):
        t += (DECODE_MS + DRAFTED_MS * drafted) / 1000
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
            t += DECODE_MS / 1000
            events.append(TokenEvent(t=t, index=index, text="z", origin=TokenOrigin.TARGET))
            index += 1
    rate = (index - 1) / (t - 0.1) if t > 0.1 else None
    metrics = RunMetrics(tokens=index, tokens_per_second=rate)
    events.append(SummaryEvent(t=t, metrics=metrics))
    return Session(Path("run.jsonl"), header, events)  # type: ignore[arg-type]


STEPS = [(4, 4), (4, 2), (4, 0), (3, 3), (4, 1), (4, 4), (2, 2), (4, 3)] * 3


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


def test_a_run_whose_decodes_all_look_alike_needs_a_given_model() -> None:
    session = _session([(4, 4)] * 6, singles_after=0)
    with pytest.raises(WhatIfError, match="--cost-model"):
        what_if(session, [2])
    given = CostModel(parameters={"decode_ms": 10.0, "drafted_ms.draft-simple": 2.0})
    result = what_if(session, [2], given)
    assert result.predictions[0].tokens_per_step == 3.0


def test_a_shorter_draft_pays_the_steps_fixed_cost_more_often() -> None:
    # Self-draft that always accepts, at K=8: at K'=2 the same text takes 4x the steps, and each
    # pays step_ms again (the drafter's catch-up pass); the older form, without it, would call
    # K'=2 nearly as fast.
    session = _session([(8, 8)] * 8, singles_after=0, k=8)
    given = CostModel(
        parameters={
            "decode_ms": 14.0,
            "step_ms.draft-simple": 29.0,
            "drafted_ms.draft-simple": 22.0,
        }
    )
    result = what_if(session, [2, 8], given)
    by = {p.draft_max: p for p in result.predictions}
    tokens = 8 * 9  # after the first: 8 steps of 8 accepted + 1
    ms_2 = tokens / 3 * (14.0 + 29.0 + 22.0 * 2)
    ms_8 = tokens / 9 * (14.0 + 29.0 + 22.0 * 8)
    assert by[2].tokens_per_second == pytest.approx(tokens / (ms_2 / 1000), rel=1e-3)
    assert by[2].speedup_vs_recorded == pytest.approx(ms_8 / ms_2, rel=1e-3)
    linear = CostModel(
        kind="linear-step", parameters={"decode_ms": 14.0, "drafted_ms.draft-simple": 22.0}
    )
    older = {p.draft_max: p for p in what_if(session, [2, 8], linear).predictions}
    assert older[2].speedup_vs_recorded > by[2].speedup_vs_recorded


def test_a_run_without_steps_is_refused() -> None:
    with pytest.raises(WhatIfError, match="no verification steps"):
        what_if(_session([]), [2])


def _write(session: Session, path: Path) -> Path:
    writer = SessionWriter.open(path, session.header)
    for event in session.events:
        writer.write(event)  # type: ignore[arg-type]
    writer.close()
    return path


def test_json_has_exactly_the_three_parts_and_one_prediction_per_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(_session(STEPS), tmp_path / "run.jsonl")
    assert main(["whatif", str(path), "--draft-max", "2,4,8,16", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"cost_model", "recorded", "predictions"}
    assert [p["draft_max"] for p in out["predictions"]] == [2, 4, 8, 16]
    assert set(out["predictions"][0]) == {
        "draft_max",
        "tokens_per_step",
        "tokens_per_second",
        "speedup_vs_recorded",
        "extrapolated",
    }
    assert main(["whatif", str(path)]) == 0
    assert "extrapolated" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--draft-max", "2,x"], "--draft-max"),
        (["--draft-max", "0"], "--draft-max"),
        (["--cost-model", "/nonexistent.json"], "not found"),
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
    full = _session([(4, 4)] * 20)
    line = hint(full.events, None, "draft-simple")
    assert line is not None and line.startswith("n-max ") and "predicted" in line


async def test_the_metrics_pane_shows_the_hint_only_after_a_run_with_enough_data() -> None:
    from textual.app import App, ComposeResult

    from spectui.ui.widgets.metrics import MetricsPane, RunColumn

    class Host(App[None]):
        def compose(self) -> ComposeResult:
            yield MetricsPane(id="m")

    session = _session([(4, 4)] * 20)
    tokens = [e for e in session.events if isinstance(e, TokenEvent)]
    steps = [e for e in session.events if isinstance(e, StepEvent)]
    async with Host().run_test() as pilot:
        pane = pilot.app.query_one(MetricsPane)
        pane.begin(RunColumn("draft-simple", "p", RunMetrics()))
        pane.add_run_events(tokens, steps)
        assert pane.prediction is None  # not while it runs
        pane.finish("limit", RunMetrics(tokens=len(tokens)))
        assert pane.prediction is not None and pane.prediction.startswith("n-max")
        pane.begin(RunColumn("draft-simple", "p", RunMetrics()))
        assert pane.prediction is None
        pane.finish("stopped", RunMetrics())
        assert pane.prediction is None
