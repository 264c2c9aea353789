"""The step-cost model: a fit on synthetic steps recovers the parameters it was made from, the
compare document carries it, and every run gets its prediction next to its measurement."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from spectui.core.compare.costmodel import (
    CostPoint,
    fit_decodes,
    fit_points,
    fit_runs,
    spec_group,
)
from spectui.core.compare.models import RunRecord

from .compare_helpers import document, plan


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
