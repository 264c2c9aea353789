"""Tune v2 from recorded runs (no live timings): predicted speedups from the cost model and the
first round's acceptance, truncation for a shorter draft, who goes on to timing rounds."""

from __future__ import annotations

from typing import ClassVar

import pytest

from helpers.engines import ScriptedEngine
from spectui.core.compare.costmodel import PredictedSpeedup, fit_runs
from spectui.core.compare.records import RunRecord
from spectui.core.compare.summary import report_rows
from spectui.core.events import (
    EventStream,
    RunMetrics,
    SummaryEvent,
    TokenEvent,
    TokenOrigin,
)
from spectui.core.request import GenerationRequest
from spectui.core.tune.predict import contenders, predict, usable
from spectui.core.tune.runner import TuneFinished, TuneRunner, new_document
from spectui.core.tune.search import next_round
from spectui.core.tune.space import Candidate, mark_predicted

from .compare_helpers import document, plan

DECODE, PER = 10.0, 1.0
TTFT = 100.0
LONG = "ngram-simple"
SHORT = "ngram-simple --spec-ngram-simple-size-m 16"
SIZE_M = "--spec-ngram-simple-size-m"


def _run(
    config: str,
    seq: int,
    *,
    accepted: int,
    drafted: int,
    steps: int,
    tokens: int = 65,
    positions: list[int] | None = None,
) -> RunRecord:
    decodes = tokens - 1 - accepted
    ms = DECODE * decodes + PER * drafted
    return RunRecord(
        seq=seq,
        config=config,
        prompt="a",
        round=1,
        tokens=tokens,
        tokens_per_second=(tokens - 1) / (ms / 1000),
        ttft_ms=TTFT,
        total_ms=TTFT + ms,
        drafted=drafted,
        accepted=accepted,
        steps=steps,
        accepted_per_position=positions or [],
        text="same",
        token_ends=[4],
    )


def _space() -> list[Candidate]:
    return mark_predicted(
        [
            Candidate(type="ngram-simple", knobs={SIZE_M: 48.0}, text=LONG),
            Candidate(type="ngram-simple", knobs={SIZE_M: 16.0}, text=SHORT),
            Candidate(type="ngram-mod", knobs={}, text="ngram-mod"),
            Candidate(type="ngram-cache", knobs={}, text="ngram-cache"),
        ]
    )


def _records() -> list[RunRecord]:
    return [
        _run("none", 0, accepted=0, drafted=0, steps=0),
        # 8 steps of 48 drafted: 4 accept 6, 4 accept 2 (positions 1-2: 8, 3-6: 4).
        _run(LONG, 1, accepted=32, drafted=384, steps=8, positions=[8, 8, 4, 4, 4, 4]),
        _run("ngram-mod", 2, accepted=38, drafted=50, steps=10),
        _run("ngram-cache", 3, accepted=10, drafted=60, steps=10),
    ]


def test_the_longest_draft_runs_and_the_shorter_is_predicted_from_it() -> None:
    space = _space()
    by = {c.text: c for c in space}
    assert by[LONG].predicted_from is None
    assert by[SHORT].predicted_from == LONG
    assert by["ngram-mod"].predicted_from is None


def test_predicted_speedups_follow_the_model_and_truncation() -> None:
    p = plan(("none", LONG, SHORT, "ngram-mod", "ngram-cache"), ("a",), reps=1)
    records = _records()
    model = fit_runs(p, records)
    assert model is not None and usable(model)
    out = predict(p, records, model, _space())
    base = 65 / (TTFT + DECODE * 64)
    mod = 65 / (TTFT + DECODE * (64 - 38) + PER * 50)
    assert out["ngram-mod"][0] is not None
    assert out["ngram-mod"][0].speedup == pytest.approx(mod / base, rel=1e-3)
    # size-m 16 from the 48 run: a step accepts 1 + (8+8+4+4+4+4)/8 = 5 tokens and drafts 16;
    # the run's 8 + 32 spec tokens take 40 / 5 = 8 steps.
    short = 65 / (TTFT + 8 * (DECODE + PER * 16) + DECODE * (64 - 32 - 8))
    assert out[SHORT][1]["a"].speedup == pytest.approx(short / base, rel=1e-3)
    overall = out[SHORT][0]
    assert overall is not None
    assert overall.low <= overall.speedup <= overall.high


def test_only_candidates_overlapping_the_leader_go_on() -> None:
    predicted = {
        "a": PredictedSpeedup(speedup=2.0, low=1.9, high=2.1),
        "b": PredictedSpeedup(speedup=1.85, low=1.76, high=1.95),
        "c": PredictedSpeedup(speedup=1.5, low=1.4, high=1.6),
        "d": None,
    }
    assert contenders(predicted) == ("a", "b")
    assert contenders(predicted, {"a"}) == ("b",)
    assert contenders({}) == ()


def test_after_round_one_the_prediction_picks_the_next_round() -> None:
    p = plan(("none", LONG, SHORT, "ngram-mod", "ngram-cache"), ("a",), reps=1)
    p = p.model_copy(update={"active": ((LONG, "ngram-mod", "ngram-cache"),)})
    records = _records()
    model = fit_runs(p, records)
    out = predict(p, records, model, _space())
    overall = {name: pair[0] for name, pair in out.items()}
    chosen = next_round(p, report_rows(p, records), overall)
    assert chosen is not None
    speedups = {n: o.speedup for n, o in overall.items() if o is not None}
    best = max(speedups, key=speedups.__getitem__)
    assert chosen[0] == best
    assert "ngram-cache" not in chosen  # far below the leader's interval


def test_without_a_prediction_a_candidate_left_to_it_still_runs() -> None:
    p = plan(("none", LONG, SHORT, "ngram-mod"), ("a",), reps=1)
    p = p.model_copy(update={"active": ((LONG, "ngram-mod"),)})
    records = _records()[:3]
    chosen = next_round(p, report_rows(p, records), None)
    assert chosen is not None and SHORT in chosen


class _ModelEngine(ScriptedEngine):
    """Runs whose timings follow the cost model exactly, per spec type's acceptance."""

    PROFILES: ClassVar[dict[str, tuple[int, int, int]]] = {
        "none": (0, 0, 0),
        "ngram-simple": (60, 40, 10),  # drafted, accepted, steps
        "ngram-mod": (60, 38, 10),
        "ngram-cache": (60, 5, 10),
    }

    async def run(self, request: GenerationRequest) -> EventStream:
        kind = self._kind(self.spec)
        self.log.append(("run", kind, request.prompt))
        drafted, accepted, steps = self.PROFILES[kind]
        tokens = 65
        ms = DECODE * (tokens - 1 - accepted) + PER * drafted
        yield TokenEvent(index=0, text="same", origin=TokenOrigin.TARGET, t=0.0)
        metrics = RunMetrics(
            tokens=tokens,
            drafted=drafted,
            accepted=accepted,
            steps=steps,
            ttft_ms=TTFT,
            total_ms=TTFT + ms,
            tokens_per_second=(tokens - 1) / (ms / 1000),
            peak_rss_bytes=400 * 2**20,
        )
        yield SummaryEvent(metrics=metrics, text="same", stop_reason="limit")


async def test_a_tune_ranks_round_one_by_prediction_and_times_the_contenders() -> None:
    p = plan(("none", "ngram-simple", "ngram-mod", "ngram-cache"), ("a",), reps=1)
    tune = new_document(document(p), budget_s=600, launch=["llama-server"], skipped=[], space=[])
    runner = TuneRunner(_ModelEngine(), tune)
    events = [e async for e in runner.run()]
    assert isinstance(events[-1], TuneFinished)
    doc = events[-1].document
    assert doc.ranked_by == "prediction"
    assert doc.cost_model is not None and usable(doc.cost_model)
    active = doc.compare.plan.active
    assert active is not None
    # ngram-simple (1.78x predicted) and ngram-mod (1.72x) are close; ngram-cache is far below.
    assert active[1] == ("ngram-simple",) or set(active[1]) == {"ngram-simple", "ngram-mod"}
    assert "ngram-cache" not in active[1]
    by = {c.config: c for c in doc.candidates}
    assert by["ngram-cache"].predicted is not None
    assert by["ngram-cache"].rounds == 1
    for c in doc.candidates:
        assert c.overall.predicted is not None
        assert c.overall.predicted.low <= c.overall.predicted.speedup <= c.overall.predicted.high
    # What round one predicted stays as the race was picked from it, whatever later runs refit.
    assert {n: p.overall for n, p in doc.predictions.items()} == {
        c.config: c.overall.predicted for c in doc.candidates
    }


def test_a_race_too_noisy_to_call_ends_once_a_keep_s_rounds_are_run() -> None:
    from spectui.core.tune.search import extended

    from .compare_helpers import record

    p = plan(("none", "ngram-simple"), ("a",), reps=1)
    records = []
    for round_, base_ms in enumerate((1000, 3000, 1000), start=1):  # the baseline swings 3x
        records.append(record("none", "a", round_, seq=2 * round_, total_ms=base_ms))
        records.append(record("ngram-simple", "a", round_, seq=2 * round_ + 1, total_ms=600))
    p2 = extended(extended(p, ("ngram-simple",)), ("ngram-simple",))
    assert next_round(p2, report_rows(p2, records)) is None
    # Two rounds in, the same swing does not end it yet.
    p1 = extended(p, ("ngram-simple",))
    assert next_round(p1, report_rows(p1, records[:4])) is not None
