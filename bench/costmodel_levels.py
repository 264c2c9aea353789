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
``predict``, per request) against the measured paired one.

**The goal's figure** (median error <= 10 % at N = 4) is ``paired``: each config's block
predicted from the block that ran just before it (`_paired`: the neighbour's measured rate x the
model's cost ratio), so the machine's speed, which moves by up to 1.6x between rounds of one run
here, cancels as far as it held over two adjacent blocks; the per-run error above leans on one
speed factor per round instead, which a load moving within the round defeats. The load average
is sampled through the comparison (`loadavg.LoadSampler`).

Writes bench/results/costmodel_levels.json (and the comparison, costmodel_levels.compare.json).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from common import gemma_model, needs, run_spectui
from loadavg import LoadSampler

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
    load: dict[str, object] | None = None
    if not args.report_only:
        DOC.unlink(missing_ok=True)
        model = str(gemma_model())
        began = time.monotonic()
        sampler = LoadSampler()
        with sampler:
            run_spectui(
                "compare", "--model", model, "--draft-model", model,
                *[a for c in CONFIGS for a in ("--config", c)],
                "--prompts", args.prompts, "--reps", args.reps, "--n-predict", args.n_predict,
                "--concurrency", args.levels, "--ctx-size", "1024", "--json", str(DOC),
                "--no-chart",
                # one thread: two on a shared 2-core machine wait at every op's barrier
                "--", "--no-warmup", "--threads", "1",
            )  # fmt: skip
        seconds = round(time.monotonic() - began)
        load = sampler.summary()
    needs(DOC, "a run of bench/costmodel_levels.py without --report-only")
    report = analyse(json.loads(DOC.read_text()))
    saved = RESULTS / "costmodel_levels.json"
    before = json.loads(saved.read_text()) if saved.is_file() else {}
    report.update(
        # a re-score keeps the run's own time, load and command
        seconds=seconds if seconds is not None else before.get("seconds"),
        load=load if load is not None else before.get("load"),
        command=" ".join(sys.argv) if not args.report_only else before.get("command"),
        scored_by=" ".join(sys.argv),
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
            "paired": _paired(plan, mine, model),
            "wave_floor": _wave_floor(plan, mine, level),
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


def _blocks(
    plan: ComparePlan, runs: Sequence[RunRecord], model: CostModel | None
) -> list[tuple[int, str, float, float]]:
    """(round, config, measured ms, model ms) per block of counted runs, in the order they ran.

    The model's time is at a typical round's speed (no block factor): measured / model is the
    machine's speed during the block, as far as the model is right."""
    from spectui.core.compare.costmodel import run_points

    if model is None:
        return []
    points = run_points(plan, runs)
    sums: dict[tuple[int, str], list[float]] = {}
    first: dict[tuple[int, str], int] = {}
    for r in runs:
        point = points.get(r.seq)
        ms = None if point is None or r.warmup else model.point_time_ms(point)
        if point is None or not ms:
            continue
        key = (r.round, r.config)
        total = sums.setdefault(key, [0.0, 0.0])
        total[0] += point.ms
        total[1] += ms
        first[key] = min(first.get(key, r.seq), r.seq)
    return [(k[0], k[1], sums[k][0], sums[k][1]) for k in sorted(sums, key=lambda k: first[k])]


def _paired(
    plan: ComparePlan, runs: Sequence[RunRecord], model: CostModel | None
) -> dict[str, object]:
    """Each block's decode rate predicted from the block that ran just before it (another
    config, the previous block in the schedule: same round, or the last of the round before):
    predicted = the neighbour's measured rate x the model's ratio of the two blocks' costs.

    The machine's speed then cancels as far as it held over the two adjacent blocks, which is
    what a user's prediction relies on (a run measured now, a config predicted for the same
    machine now); the error is |predicted / measured - 1| per pair. ``in_sample``: the level's
    fit (as tune fits it); ``held_out``: fitted without the predicted block's round."""
    from spectui.core.compare.costmodel import fit_runs

    counted = [r for r in runs if r.ok]
    order = _blocks(plan, counted, model)
    rounds = sorted({b[0] for b in order})
    held = {n: fit_runs(plan, [r for r in counted if r.round != n]) for n in rounds}
    held_blocks = {n: {(b[0], b[1]): b for b in _blocks(plan, counted, held[n])} for n in rounds}
    pairs = []
    for before, after in itertools.pairwise(order):
        if before[1] == after[1]:
            continue  # (one config: a single-config schedule has no neighbour to predict from)
        row: dict[str, object] = {"round": after[0], "from": before[1], "to": after[1]}
        row["in_sample"] = _round(abs((after[2] / after[3]) / (before[2] / before[3]) - 1))
        mine = held_blocks[after[0]]
        b, a = mine.get(before[:2]), mine.get(after[:2])
        row["held_out"] = (
            None if a is None or b is None else _round(abs((a[2] / a[3]) / (b[2] / b[3]) - 1))
        )
        pairs.append(row)
    out: dict[str, object] = {"pairs": pairs, "count": len(pairs)}
    for way in ("in_sample", "held_out"):
        values = [float(p[way]) for p in pairs if p[way] is not None]  # type: ignore[arg-type]
        out[f"median_{way}"] = _round(statistics.median(values)) if values else None
        out[f"within_goal_{way}"] = (
            _round(sum(v <= GOAL for v in values) / len(values)) if values else None
        )
    by_config: dict[str, list[float]] = {}
    for p in pairs:
        by_config.setdefault(str(p["to"]), []).append(float(p["in_sample"]))  # type: ignore[arg-type]
    out["median_in_sample_by_config"] = {
        c: _round(statistics.median(v)) for c, v in by_config.items()
    }
    return out


def _wave_floor(
    plan: ComparePlan, runs: Sequence[RunRecord], level: int
) -> dict[str, object] | None:
    """The machine's own noise over a few seconds: in a block of N streams each client sends
    every prompt in turn, so the block's first N runs (one per client, at once) and its next N
    do the same work, the same prompts in the same batch. The baseline's two waves (no drafter
    state to carry over) differ only by the machine's speed: |second / first - 1| per block, in
    server time."""
    if level < 2:
        return None
    values = []
    for round_ in sorted({r.round for r in runs if not r.warmup}):
        mine = sorted(
            (
                r
                for r in runs
                if r.ok
                and not r.warmup
                and r.round == round_
                and r.config == plan.baseline.name
                and r.sent_at is not None
            ),
            key=lambda r: r.sent_at or 0,
        )
        if len(mine) < 2 * level:
            continue
        waves = [
            sum(r.server_timings.get("predicted_ms", 0.0) for r in part)
            for part in (mine[:level], mine[level : 2 * level])
        ]
        if all(waves):
            values.append(abs(waves[1] / waves[0] - 1))
    if not values:
        return None
    return {"blocks": len(values), "median": _round(statistics.median(values)), "values": values}


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
