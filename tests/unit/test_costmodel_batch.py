"""The step-cost model at N streams: a step costs what its whole batch holds (every active slot's
sampled token and drafts); runs made by such a cost give it back, and which slots shared a run's
steps is read from the runs' times."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spectui.core.compare.costbatch import batch_points, run_ms
from spectui.core.compare.costfit import CostPoint
from spectui.core.compare.costmodel import BATCH, fit_points, fit_runs, predictions
from spectui.core.compare.records import RunRecord

from .compare_helpers import document, plan

T0 = datetime(2026, 12, 1, tzinfo=UTC)
CONFIGS = ("none", "ngram-mod", "ngram-simple")
GROUPS = {"none": None, "ngram-mod": "ngram", "ngram-simple": "ngram"}


def _run(
    seq: int,
    config: str,
    level: int,
    round_: int,
    *,
    decodes: int,
    steps: int,
    drafted: int,
    ms: float,
    start_ms: float = 0.0,
    span_ms: float = 1000.0,
) -> RunRecord:
    accepted = drafted // 2
    tokens = 1 + decodes + accepted
    return RunRecord(
        seq=seq,
        config=config,
        prompt="a",
        round=round_,
        level=level,
        sent_at=T0 + timedelta(milliseconds=start_ms),
        ttft_ms=50.0,
        total_ms=50.0 + span_ms,
        tokens=tokens,
        tokens_per_second=(tokens - 1) / (ms * 1.1 / 1000),  # the client's: a bit slower
        server_timings={"predicted_n": tokens, "predicted_ms": ms},
        drafted=drafted,
        accepted=accepted,
        steps=steps,
    )


def _blocks(levels: tuple[int, ...], cost: dict[str, float], seed: int) -> list[RunRecord]:
    """Blocks of one config at a time, all of a block's slots decoding over the same span, each
    run's time what the batch model gives: per step, decode + batch x (N - 1) + the sum over
    the slots of step x verifies + drafted x drafted per decode."""
    rng = random.Random(seed)
    runs: list[RunRecord] = []
    clock = 0.0
    for round_ in (1, 2):
        for level in levels:
            for config in CONFIGS:
                slots = []
                for _ in range(level):
                    decodes = rng.randint(20, 60)
                    length = 0 if config == "none" else rng.choice((2, 4, 8, 16))
                    steps = 0 if config == "none" else rng.randint(decodes // 3, decodes)
                    slots.append((decodes, steps, steps * length))
                per_step = cost["decode"] + cost["batch"] * (level - 1)
                per_step += sum((cost["step"] * s + cost["drafted"] * d) / n for n, s, d in slots)
                for decodes, steps, drafted in slots:
                    runs.append(
                        _run(
                            len(runs),
                            config,
                            level,
                            round_,
                            decodes=decodes,
                            steps=steps,
                            drafted=drafted,
                            ms=per_step * decodes,
                            start_ms=clock,
                        )
                    )
                clock += 2000.0
    return runs


@settings(max_examples=25, deadline=None)
@given(
    decode=st.floats(2, 50),
    batch=st.floats(0.2, 20),
    step=st.floats(0.5, 30),
    drafted=st.floats(0.05, 8),
    seed=st.integers(0, 10_000),
)
def test_runs_at_several_levels_give_back_a_cost_linear_in_the_batch_s_tokens(
    decode: float, batch: float, step: float, drafted: float, seed: int
) -> None:
    cost = {"decode": decode, "batch": batch, "step": step, "drafted": drafted}
    runs = _blocks((1, 2, 4), cost, seed)
    model = fit_runs(plan(CONFIGS), runs)
    assert model is not None
    assert model.levels == [1, 2, 4]
    assert model.decode_ms == pytest.approx(decode, rel=1e-3)
    assert model.batch_ms == pytest.approx(batch, rel=1e-2, abs=1e-3)
    assert model.step_ms("ngram") == pytest.approx(step, rel=1e-2, abs=1e-3)
    assert model.drafted_ms("ngram") == pytest.approx(drafted, rel=1e-2, abs=1e-3)
    assert model.median_abs_error is not None and model.median_abs_error < 1e-6


@settings(max_examples=25, deadline=None)
@given(
    decode=st.floats(2, 50),
    batch=st.floats(0.2, 20),
    step=st.floats(0.5, 30),
    drafted=st.floats(0.05, 8),
    level=st.sampled_from((2, 4)),
    seed=st.integers(0, 10_000),
)
def test_runs_at_one_level_predict_that_level_exactly(
    decode: float, batch: float, step: float, drafted: float, level: int, seed: int
) -> None:
    # At one level every step carries as many slots: a slot's cost cannot be told from a
    # decode's, so the decode holds both, and the drafts are priced per drafted token still.
    cost = {"decode": decode, "batch": batch, "step": step, "drafted": drafted}
    runs = _blocks((level,), cost, seed)
    model = fit_runs(plan(CONFIGS), runs)
    assert model is not None
    assert BATCH not in model.parameters
    assert model.decode_ms == pytest.approx(decode + batch * (level - 1), rel=1e-3)
    assert model.drafted_ms("ngram") == pytest.approx(drafted, rel=1e-2, abs=1e-3)
    assert model.median_abs_error is not None and model.median_abs_error < 1e-6
    # Each run's predicted rate, in the record's own (client's) terms, is its measured one.
    for record in predictions(plan(CONFIGS), runs, model):
        assert record.predicted_tokens_per_second == pytest.approx(
            record.tokens_per_second, rel=1e-3
        )


def test_a_run_counts_the_others_for_the_share_of_its_steps_they_shared() -> None:
    mine = _run(0, "ngram-mod", 2, 1, decodes=40, steps=20, drafted=80, ms=900.0)
    half = _run(
        1,
        "ngram-mod",
        2,
        1,
        decodes=10,
        steps=5,
        drafted=30,
        ms=300.0,
        start_ms=500.0,
        span_ms=1000.0,
    )
    points = batch_points([mine, half], GROUPS)
    point = points[0]
    assert point.others == pytest.approx(0.5 * 40)  # half of my span, one slot
    assert point.other_steps == pytest.approx(0.5 * 40 * 5 / 10)
    assert point.other_drafted == pytest.approx(0.5 * 40 * 30 / 10)
    assert points[1].others == pytest.approx(0.5 * 10)  # half of its span was mine too


def test_one_stream_and_other_sessions_count_alone() -> None:
    a = _run(0, "none", 1, 1, decodes=40, steps=0, drafted=0, ms=900.0)
    b = _run(1, "none", 1, 1, decodes=40, steps=0, drafted=0, ms=900.0)
    c = _run(2, "none", 2, 1, decodes=40, steps=0, drafted=0, ms=900.0)
    d = _run(3, "none", 2, 1, decodes=40, steps=0, drafted=0, ms=900.0).model_copy(
        update={"session": 1}
    )
    points = batch_points([a, b, c, d], GROUPS)
    assert all(p.others == 0 for p in points.values())


def test_a_run_s_time_is_the_server_s_when_its_timings_carry_it() -> None:
    run = _run(0, "none", 1, 1, decodes=40, steps=0, drafted=0, ms=900.0)
    assert run_ms(run) == 900.0
    client = run.model_copy(update={"server_timings": {}})
    assert run_ms(client) == pytest.approx(990.0)
    # Timings of another count of tokens (a cut-off stream) are not the run's: the client's.
    other = run.model_copy(update={"server_timings": {"predicted_n": 3, "predicted_ms": 5.0}})
    assert run_ms(other) == pytest.approx(990.0)


def test_another_request_s_prompt_pass_during_a_run_counts_its_overlapping_share() -> None:
    mine = _run(0, "none", 2, 1, decodes=40, steps=0, drafted=0, ms=900.0)
    # Its prompt pass runs from 50 ms after it was sent (a slot began it) to its first token.
    newcomer = _run(
        1, "none", 2, 1, decodes=40, steps=0, drafted=0, ms=900.0, start_ms=950.0
    ).model_copy(
        update={
            "queue_ms": 0.0,
            "ttft_ms": 200.0,
            "total_ms": 1200.0,
            "server_timings": {"predicted_n": 41, "predicted_ms": 900.0, "prompt_n": 80},
        }
    )
    points = batch_points([mine, newcomer], GROUPS)
    # My decoding span is 50..1050 ms; its prompt pass 950..1150: half of it inside.
    assert points[0].other_prompt == pytest.approx(40.0)
    assert points[1].other_prompt == 0.0  # (mine had no prompt_n in its timings)


def test_a_fit_whose_optional_terms_take_the_whole_cost_drops_them() -> None:
    # Two runs that other requests' prompt tokens would explain with a decode costing -10 ms
    # (2 ms a prompt token): the prompt term goes, and a decode keeps a cost.
    points = [
        CostPoint(10, 0, None, 100.0, other_prompt=100.0),
        CostPoint(20, 0, None, 400.0, other_prompt=300.0),
    ]
    model = fit_points(points, "runs")
    assert model is not None
    assert model.decode_ms > 0
    assert "prompt_ms" not in model.parameters


def test_a_compare_at_n_streams_only_fits_its_runs_at_n_not_its_warm_ups() -> None:
    # tune --concurrency 2: each config's warm-up runs alone (level 1), every counted run at 2.
    cost = {"decode": 10.0, "batch": 2.0, "step": 5.0, "drafted": 1.0}
    runs = _blocks((2,), cost, seed=1)
    warm = [
        _run(100 + i, config, 1, 0, decodes=30, steps=0, drafted=0, ms=300.0).model_copy(
            update={"warmup": True}
        )
        for i, config in enumerate(CONFIGS)
    ]
    p = plan(CONFIGS).model_copy(update={"concurrency": (2,)})
    doc = document(p).updated([*warm, *runs], [], [])
    assert doc.cost_model is not None
    assert doc.cost_model.levels == [2]
    counted = [r for r in doc.runs if not r.warmup]
    assert all(r.predicted_tokens_per_second for r in counted)
