"""Benchmark (not a test): the step-cost model at N concurrent streams, predicted against
measured, from one `spectui compare --concurrency 1,2,4` on Gemma 270M (``--parallel 4``).

    python bench/costmodel_levels.py [--levels 1,2,4] [--reps 2] [--n-predict 64]
    python bench/costmodel_levels.py --report-only   # re-score the saved comparison

Configs: the baseline, ngram-mod, ngram-simple, and draft-simple (Gemma as its own draft, n-max
4). Every level's block runs N client streams at once (closed loop). Per level N, as
``tune --concurrency N`` fits it (its own runs at N only: `CompareDocument.updated`), the model's
prediction of each run's decode rate against the measured one (the server's own ``predicted_ms``:
`costbatch.run_ms`), per config (median predicted and measured tok/s, median error); the same
with each n-gram config held out of the fit (predicted from the others); the one-stream model
(fitted at level 1) used at N as it was before batches were priced, for scale; and one fit over
every level (``batch_ms``: what each other slot adds to a step). Tune's predicted speedup (its
``predict``, per request) against the measured paired one. Goal: median error <= 10 % at N = 4.

Writes bench/results/costmodel_levels.json (and the comparison, costmodel_levels.compare.json).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from common import gemma_model, needs, run_spectui

if TYPE_CHECKING:
    from spectui.core.compare.costmodel import CostModel
    from spectui.core.compare.models import ComparePlan
    from spectui.core.compare.records import RunRecord

HERE = Path(__file__).parent
RESULTS = HERE / "results"
DOC = RESULTS / "costmodel_levels.compare.json"

CONFIGS = ("none", "ngram-mod", "ngram-simple", "draft-simple --spec-draft-n-max 4")
GOAL = 0.10


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--levels", default="1,2,4")
    parser.add_argument("--reps", default="2")
    parser.add_argument("--n-predict", default="64")
    parser.add_argument("--prompts", default="builtin:table-row,code-edit")
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args()
    RESULTS.mkdir(exist_ok=True)
    seconds = None
    load = os.getloadavg()[0]
    if not args.report_only:
        DOC.unlink(missing_ok=True)
        model = str(gemma_model())
        began = time.monotonic()
        run_spectui(
            "compare", "--model", model, "--draft-model", model,
            *[a for c in CONFIGS for a in ("--config", c)],
            "--prompts", args.prompts, "--reps", args.reps, "--n-predict", args.n_predict,
            "--concurrency", args.levels, "--ctx-size", "1024", "--json", str(DOC), "--no-chart",
            # one thread: two on a shared 2-core machine wait at every op's barrier
            "--", "--no-warmup", "--threads", "1",
        )  # fmt: skip
        seconds = round(time.monotonic() - began)
    needs(DOC, "a run of bench/costmodel_levels.py without --report-only")
    report = analyse(json.loads(DOC.read_text()))
    report.update(
        seconds=seconds,
        load_before=round(load, 2),
        load_after=round(os.getloadavg()[0], 2),
        command=" ".join(sys.argv),
    )
    (RESULTS / "costmodel_levels.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))
    return 0


def analyse(doc: dict[str, object]) -> dict[str, object]:
    """Per level: the fit at that level and its errors; one fit over all levels."""
    from spectui.core.compare.costmodel import fit_runs
    from spectui.core.compare.store import CompareDocument

    compare = CompareDocument.model_validate(doc)
    plan = compare.plan
    runs = [r for r in compare.runs if r.ok and not r.warmup]
    levels = sorted({r.level for r in runs})
    single = fit_runs(plan, [r for r in runs if r.level == 1]) if 1 in levels else None
    joint = fit_runs(plan, runs)
    out: dict[str, object] = {"runs": len(runs), "goal": GOAL, "levels": {}}
    per_level: dict[str, object] = {}
    for level in levels:
        mine = [r for r in compare.runs if r.level == level]  # (warm-ups share batches)
        model = fit_runs(plan, mine)
        per_level[str(level)] = {
            "runs": sum(1 for r in mine if r.ok and not r.warmup),
            "cost_model": None if model is None else model.model_dump(),
            "median_abs_error": None if model is None else model.median_abs_error,
            "per_config": _per_config(plan, mine, model),
            "held_out": _held_out(plan, mine),
            "one_stream_model_at_n": _median_error(plan, mine, single, alone=True),
            "joint_fit": _median_error(plan, mine, joint, alone=False),
            "tune_speedups": _speedups(plan, mine, model),
            "aggregate_speedups": {
                row.config: row.speedup_vs_baseline
                for row in compare.levels
                if row.level == level and row.speedup_vs_baseline is not None
            },
        }
    out["levels"] = per_level
    out["joint_cost_model"] = None if joint is None else joint.model_dump()
    return out


def _errors(
    plan: ComparePlan, runs: Sequence[RunRecord], model: CostModel | None, *, alone: bool = False
) -> dict[str, list[tuple[float, float]]]:
    """Config -> (measured, predicted) decode rate per counted run (server time); ``alone``:
    every run priced as if no other slot shared its steps (the one-stream model's view)."""
    from spectui.core.compare.costbatch import run_point
    from spectui.core.compare.costmodel import run_points, spec_group

    out: dict[str, list[tuple[float, float]]] = {}
    if model is None:
        return out
    groups = {c.name: spec_group(c.spec.types) for c in plan.configs}
    points = run_points(plan, runs)
    for r in runs:
        if r.warmup or r.seq not in points:
            continue
        point = run_point(r, groups[r.config]) if alone else points[r.seq]
        ms = None if point is None else model.predict_point_ms(point)
        if point is None or not ms:
            continue
        rate = (r.tokens - 1) / point.ms * 1000
        out.setdefault(r.config, []).append((rate, rate * point.ms / ms))
    return out


def _median_error(
    plan: ComparePlan, runs: Sequence[RunRecord], model: CostModel | None, *, alone: bool
) -> float | None:
    pairs = [p for v in _errors(plan, runs, model, alone=alone).values() for p in v]
    return _round(statistics.median(abs(p / m - 1) for m, p in pairs)) if pairs else None


def _per_config(
    plan: ComparePlan, runs: Sequence[RunRecord], model: CostModel | None
) -> dict[str, dict[str, float]]:
    out = {}
    for config, pairs in _errors(plan, runs, model).items():
        out[config] = {
            "measured_tok_s": _round(statistics.median(m for m, _ in pairs)),
            "predicted_tok_s": _round(statistics.median(p for _, p in pairs)),
            "median_abs_error": _round(statistics.median(abs(p / m - 1) for m, p in pairs)),
        }
    return out


def _held_out(plan: ComparePlan, runs: Sequence[RunRecord]) -> dict[str, float | None]:
    """Each n-gram config predicted by a fit without its runs (its group has another)."""
    from spectui.core.compare.costmodel import fit_runs

    out: dict[str, float | None] = {}
    for config in ("ngram-mod", "ngram-simple"):
        # Its runs stay in the batches (they shared them) but out of the fit's points.
        model = fit_runs(plan, [r for r in runs if r.config != config])
        pairs = _errors(plan, [r for r in runs if r.config == config or r.warmup], model)
        mine = pairs.get(config, [])
        out[config] = _round(statistics.median(abs(p / m - 1) for m, p in mine)) if mine else None
    return out


def _speedups(
    plan: ComparePlan, runs: Sequence[RunRecord], model: CostModel | None
) -> dict[str, dict[str, float | None]]:
    """Tune's predicted per-request speedup (overall) against the measured (the median over
    prompts and rounds of a run's end-to-end tok/s ÷ the baseline's same prompt and round)."""
    from spectui.core.tune.predict import predict

    predicted = predict(plan, list(runs), model, [])
    by: dict[tuple[str, int], list[float]] = {}
    for r in runs:
        if r.config == plan.baseline.name and r.ok and not r.warmup:
            by.setdefault((r.prompt, r.round), []).append(_throughput(r))
    base = {key: statistics.median(v) for key, v in by.items()}
    out: dict[str, dict[str, float | None]] = {}
    for config in plan.configs:
        if config.is_baseline:
            continue
        ratios = [
            _throughput(r) / b
            for r in runs
            if r.config == config.name
            and r.ok
            and not r.warmup
            and (b := base.get((r.prompt, r.round)))
        ]
        overall = predicted.get(config.name, (None, {}))[0]
        out[config.name] = {
            "predicted": None if overall is None else overall.speedup,
            "measured": _round(statistics.median(ratios)) if ratios else None,
        }
    return out


def _throughput(r: RunRecord) -> float:
    return r.tokens / (r.total_ms or 1e9) * 1000


def _round(value: float) -> float:
    return round(value, 4)


if __name__ == "__main__":
    raise SystemExit(main())
