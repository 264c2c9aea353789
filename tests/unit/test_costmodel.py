"""The step-cost model: a fit on synthetic steps recovers the parameters it was made from, the
compare document carries it, and every run gets its prediction next to its measurement."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spectui.core.compare.costmodel import (
    CostModel,
    CostPoint,
    fit_decodes,
    fit_points,
    fit_runs,
    predictions,
    run_point,
    spec_group,
)
from spectui.core.compare.records import RunRecord

from .compare_helpers import document, plan

FIXTURES = Path(__file__).parents[1] / "fixtures"


def _points(
    decode: float, ngram: float, draft: float, noise: float, seed: int, n: int = 60
) -> list[CostPoint]:
    rng = random.Random(seed)
    per = {None: 0.0, "ngram": ngram, "draft-simple": draft}
    out = []
    for i in range(n):
        group = (None, "ngram", "draft-simple")[i % 3]
        decodes = rng.randint(20, 60)
        drafted = 0 if group is None else rng.randint(decodes, decodes * 8)
        ms = (decode * decodes + per[group] * drafted) * (1 + rng.gauss(0, noise))
        out.append(CostPoint(decodes, drafted, group, ms))
    return out


@settings(max_examples=30, deadline=None)
@given(
    decode=st.floats(2, 50),
    ngram=st.floats(0.05, 5),
    draft=st.floats(1, 40),
    seed=st.integers(0, 10_000),
)
def test_an_exact_fit_recovers_the_parameters(
    decode: float, ngram: float, draft: float, seed: int
) -> None:
    model = fit_points(_points(decode, ngram, draft, 0.0, seed), "runs")
    assert model is not None
    assert abs(model.decode_ms - decode) / decode < 1e-3
    assert abs((model.drafted_ms("ngram") or 0) - ngram) / ngram < 1e-2
    assert abs((model.drafted_ms("draft-simple") or 0) - draft) / draft < 1e-3
    assert model.median_abs_error is not None and model.median_abs_error < 1e-6


def test_a_noisy_fit_lands_near_the_parameters_and_reports_its_error() -> None:
    model = fit_points(_points(12.0, 1.5, 9.0, 0.02, seed=1), "runs")
    assert model is not None
    assert abs(model.decode_ms - 12.0) < 0.5
    assert abs((model.drafted_ms("draft-simple") or 0) - 9.0) < 0.5
    assert 0.002 < (model.median_abs_error or 0) < 0.05
    assert (model.p90_abs_error or 0) >= (model.median_abs_error or 0)


def test_a_disturbed_run_is_trimmed_from_the_refit_but_counted_in_the_error() -> None:
    points = _points(10.0, 1.0, 8.0, 0.0, seed=3)
    points[0] = CostPoint(points[0].decodes, points[0].drafted, points[0].group, points[0].ms * 3)
    model = fit_points(points, "runs")
    assert model is not None
    assert model.trimmed == 1
    assert abs(model.decode_ms - 10.0) < 1e-3
    assert model.points == len(points)


def test_a_group_whose_cost_comes_out_negative_is_fitted_at_zero() -> None:
    points = [CostPoint(10, 0, None, 100.0), CostPoint(20, 0, None, 200.0)]
    points += [CostPoint(10, 40, "ngram", 98.0), CostPoint(20, 80, "ngram", 197.0)]
    model = fit_points(points, "runs")
    assert model is not None
    assert model.drafted_ms("ngram") == 0.0


def test_nothing_to_fit_gives_no_model() -> None:
    assert fit_points([], "runs") is None
    assert fit_points([CostPoint(10, 0, None, 100.0)], "runs") is None
    # Only drafted tokens and never a plain decode: the cost of a decode is not fixed.
    assert fit_decodes([(4, 50.0), (4, 51.0)], "draft-simple") is None


def test_decodes_of_one_run_fix_both_costs() -> None:
    decodes = [(d, 10.0 + 2.5 * d) for d in (0, 1, 2, 3, 4, 0, 4, 2)]
    model = fit_decodes(decodes, "ngram")
    assert model is not None
    assert model.source == "decodes"
    assert abs(model.decode_ms - 10.0) < 1e-6
    assert abs((model.drafted_ms("ngram") or 0) - 2.5) < 1e-6


def test_spec_groups() -> None:
    assert spec_group(("none",)) is None
    assert spec_group(("ngram-mod",)) == "ngram"
    assert spec_group(("ngram-simple", "draft-simple")) == "draft-simple"


def _run(config: str, seq: int, *, decodes: int, drafted: int, ms: float) -> RunRecord:
    accepted = drafted // 2
    tokens = 1 + decodes + accepted
    return RunRecord(
        seq=seq,
        config=config,
        prompt="a",
        round=1 + seq // 2,
        tokens=tokens,
        tokens_per_second=(tokens - 1) / (ms / 1000),
        total_ms=ms + 50,
        ttft_ms=50,
        drafted=drafted,
        accepted=accepted,
        steps=decodes,
    )


def test_the_compare_document_stores_the_model_and_each_runs_prediction() -> None:
    p = plan(("none", "ngram-simple"), ("a",), reps=3)
    runs = []
    for i, drafted in enumerate((0, 30, 0, 50, 0, 70)):
        config = "none" if drafted == 0 else "ngram-simple"
        decodes = 40 + i
        runs.append(_run(config, i, decodes=decodes, drafted=drafted, ms=10 * decodes + drafted))
    doc = document(p).updated(runs, [], [])
    assert doc.cost_model is not None
    assert abs(doc.cost_model.decode_ms - 10.0) < 1e-3
    assert abs((doc.cost_model.drafted_ms("ngram") or 0) - 1.0) < 1e-3
    for run in doc.runs:
        assert run.predicted_tokens_per_second is not None
        assert abs(run.predicted_tokens_per_second / (run.tokens_per_second or 1) - 1) < 1e-3
    dumped = doc.model_dump(mode="json")
    assert set(dumped["cost_model"]) >= {"kind", "parameters", "median_abs_error"}


def test_warm_ups_and_failed_runs_are_not_fitted() -> None:
    p = plan(("none", "ngram-simple"), ("a",), reps=3)
    good = [_run("none", 0, decodes=40, drafted=0, ms=400)]
    good.append(_run("ngram-simple", 1, decodes=40, drafted=40, ms=440))
    bad = _run("none", 2, decodes=40, drafted=0, ms=4000).model_copy(update={"warmup": True})
    model = fit_runs(p, [*good, bad])
    assert model is not None
    assert model.points == 2


def _step_points(
    decode: float, steps_ms: dict[str, float], drafted_ms: dict[str, float], seed: int
) -> list[CostPoint]:
    """Runs made by the step-overhead model: the baseline's plain decodes; n-gram runs of a few
    long steps among plain decodes; draft runs that are all steps, at draft lengths 2, 4, 8."""
    rng = random.Random(seed)
    out = []
    for i in range(36):
        kind = i % 3
        if kind == 0:
            decodes, steps, drafted, group = rng.randint(40, 70), 0, 0, None
        elif kind == 1:
            steps = rng.randint(1, 5)
            decodes = steps + rng.randint(5, 40)
            drafted, group = sum(rng.randint(3, 48) for _ in range(steps)), "ngram"
        else:
            k = (2, 4, 8)[(i // 3) % 3]
            steps = rng.randint(6, 30)
            decodes, drafted, group = steps, k * steps - rng.randint(0, k - 1), "draft-simple"
        ms = decode * decodes
        if group is not None:
            ms += steps_ms[group] * steps + drafted_ms[group] * drafted
        out.append(CostPoint(decodes, drafted, group, ms, block=i % 2, steps=steps))
    return out


@settings(max_examples=40, deadline=None)
@given(
    decode=st.floats(2, 50),
    ngram_step=st.floats(0.5, 40),
    ngram=st.floats(0.05, 8),
    draft_step=st.floats(0.5, 80),
    draft=st.floats(1, 40),
    seed=st.integers(0, 10_000),
)
def test_runs_made_by_the_step_model_give_back_its_five_costs(
    decode: float, ngram_step: float, ngram: float, draft_step: float, draft: float, seed: int
) -> None:
    steps = {"ngram": ngram_step, "draft-simple": draft_step}
    drafted = {"ngram": ngram, "draft-simple": draft}
    model = fit_points(_step_points(decode, steps, drafted, seed), "runs")
    assert model is not None
    assert model.kind == "step-overhead"
    assert model.decode_ms == pytest.approx(decode, rel=1e-3)
    for group in ("ngram", "draft-simple"):
        assert model.step_ms(group) == pytest.approx(steps[group], rel=1e-2, abs=1e-3)
        assert model.drafted_ms(group) == pytest.approx(drafted[group], rel=1e-2, abs=1e-3)
    # Every round ran at the same speed: no factor strays from 1.
    assert all(v == pytest.approx(1.0, rel=1e-3) for v in model.block_speed.values())
    assert model.median_abs_error is not None and model.median_abs_error < 1e-6


@settings(max_examples=30, deadline=None)
@given(
    decode=st.floats(2, 50),
    step=st.floats(0.5, 80),
    draft=st.floats(1, 40),
    k=st.integers(1, 16),
    seed=st.integers(0, 10_000),
)
def test_steps_all_of_one_length_leave_the_step_cost_out_and_still_fit_exactly(
    decode: float, step: float, draft: float, k: int, seed: int
) -> None:
    # One draft length only: a step's fixed cost and its k drafted tokens always come together,
    # so no fit can tell them apart; the model states none and folds it into drafted_ms.
    rng = random.Random(seed)
    points = [CostPoint(n, 0, None, decode * n) for n in (rng.randint(20, 60) for _ in range(4))]
    for _ in range(6):
        s = rng.randint(5, 30)
        ms = (decode + step) * s + draft * k * s
        points.append(CostPoint(s, k * s, "draft-simple", ms, steps=s))
    model = fit_points(points, "runs")
    assert model is not None
    assert "step_ms.draft-simple" not in model.parameters
    assert model.step_ms("draft-simple") == 0.0
    assert model.drafted_ms("draft-simple") == pytest.approx(draft + step / k, rel=1e-6)
    assert model.median_abs_error is not None and model.median_abs_error < 1e-6


def test_a_model_of_the_older_kind_loads_and_prices_as_it_did() -> None:
    old = CostModel.model_validate(
        {
            "kind": "linear-step",
            "parameters": {"decode_ms": 10.0, "drafted_ms.ngram": 2.0},
            "median_abs_error": 0.05,
        }
    )
    assert old.kind == "linear-step"
    assert old.step_ms("ngram") == 0.0
    assert old.decode_time_ms(30, 4, 20, "ngram") == 10.0 * 30 + 2.0 * 20
    assert old.decode_time_ms(30, 0, 0, None) == 300.0
    assert old.decode_time_ms(30, 4, 20, "draft-simple") is None


def test_a_saved_compare_document_with_the_older_kind_still_loads() -> None:
    from spectui.core.compare.store import load_document

    doc = load_document(FIXTURES / "compare-loaded-machine.json")
    assert doc.cost_model is not None and doc.cost_model.kind == "linear-step"
    runs = [r for r in doc.runs if r.ok and not r.warmup]
    predictions(doc.plan, runs, doc.cost_model)  # prices every run without a step cost
    refit = fit_runs(doc.plan, runs)
    assert refit is not None and refit.kind == "step-overhead"


def test_one_runs_decodes_fix_the_step_cost_when_draft_lengths_vary() -> None:
    # 10 ms a plain decode; a step 6 ms more, plus 2.5 ms per drafted token.
    decodes = [(d, 10.0 + (6.0 + 2.5 * d if d else 0.0)) for d in (0, 1, 2, 3, 4, 0, 4, 2, 0)]
    model = fit_decodes(decodes, "ngram")
    assert model is not None
    assert model.decode_ms == pytest.approx(10.0)
    assert model.step_ms("ngram") == pytest.approx(6.0)
    assert model.drafted_ms("ngram") == pytest.approx(2.5)


def test_a_run_point_counts_its_verification_steps() -> None:
    record = _run("ngram-simple", 0, decodes=40, drafted=30, ms=500)
    point = run_point(record, "ngram")
    assert point is not None
    assert point.steps == record.steps
    baseline = run_point(_run("none", 1, decodes=40, drafted=0, ms=400), None)
    assert baseline is not None and baseline.steps == 0


def test_nearly_one_draft_length_does_not_decide_a_step_cost() -> None:
    # Mean lengths 8 and 7.5 (one short last step): too close to tell a step's cost apart.
    points = [CostPoint(50, 0, None, 500.0), CostPoint(60, 0, None, 600.0)]
    points += [CostPoint(7, 56, "draft-simple", 1500.0, steps=7)]
    points += [CostPoint(8, 60, "draft-simple", 1650.0, steps=8)]
    model = fit_points(points, "runs")
    assert model is not None
    assert "step_ms.draft-simple" not in model.parameters
