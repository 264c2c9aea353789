"""Benchmark (not a test): how well the step-cost model predicts each run's decode rate, and the
what-if material (session files) of `bench/whatif.py`, from one `spectui compare`.

    python bench/costmodel.py [--reps 2] [--n-predict 64] [--prompts builtin:table-row,code-edit]

Configs: the baseline, ngram-simple, ngram-mod at n-max 64 (default), 32 and 16, and
draft-simple with the Gemma model as its own draft at n-max 8, 4 and 2. Every run is recorded
(``--record``) to bench/results/costmodel-sessions/. Writes bench/results/costmodel.json: the
fitted model, its median abs error over every run (goal <= 5 %), the same per config, and a
leave-one-config-out error (the model fitted without a config, predicting it; a config whose
cost group has no other config is not held out: its costs would be unfitted).

    python bench/costmodel.py --report-only   # re-score the saved comparison, no server

``--report-only`` refits the model on the saved bench/results/costmodel.compare.json with the
code as it is now (what a live run would have stored) and rewrites costmodel.json.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from common import gemma_model, needs, run_spectui

if TYPE_CHECKING:
    from spectui.core.compare.records import RunRecord

HERE = Path(__file__).parent
RESULTS = HERE / "results"
SESSIONS = RESULTS / "costmodel-sessions"
DOC = RESULTS / "costmodel.compare.json"

CONFIGS = (
    "none",
    "ngram-simple",
    "ngram-mod",
    "ngram-mod --spec-ngram-mod-n-max 32 --spec-ngram-mod-n-min 32",
    "ngram-mod --spec-ngram-mod-n-max 16 --spec-ngram-mod-n-min 16",
    "draft-simple --spec-draft-n-max 8",
    "draft-simple --spec-draft-n-max 4",
    "draft-simple --spec-draft-n-max 2",
)


def model_path() -> str:
    return str(gemma_model())


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", default="2")
    parser.add_argument("--n-predict", default="64")
    parser.add_argument("--prompts", default="builtin:table-row,code-edit")
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args()
    RESULTS.mkdir(exist_ok=True)
    seconds = None
    if not args.report_only:
        shutil.rmtree(SESSIONS, ignore_errors=True)
        DOC.unlink(missing_ok=True)
        model = model_path()
        began = time.monotonic()
        run_spectui(
            "compare", "--model", model,
            "--draft-model", model, *[a for c in CONFIGS for a in ("--config", c)],
            "--prompts", args.prompts, "--reps", args.reps, "--n-predict", args.n_predict,
            "--ctx-size", "1024", "--json", str(DOC), "--record", str(SESSIONS), "--no-chart",
            "--", "--no-warmup",
        )  # fmt: skip
        seconds = round(time.monotonic() - began)
    needs(DOC, "a run of bench/costmodel.py without --report-only")
    report = analyse(json.loads(DOC.read_text()))
    report["short_first_round"] = short_round(json.loads(DOC.read_text()))
    report["seconds"] = seconds
    report["command"] = " ".join(sys.argv)
    (RESULTS / "costmodel.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))
    return 0


def analyse(doc: dict[str, object]) -> dict[str, object]:
    """The model's error overall, per config, and fitted without each config."""
    from spectui.core.compare.costmodel import fit_runs, predictions
    from spectui.core.compare.store import CompareDocument

    compare = CompareDocument.model_validate(doc)
    plan, runs = compare.plan, [r for r in compare.runs if r.ok and not r.warmup]
    model = fit_runs(plan, runs)
    per_config: dict[str, list[float]] = {}
    for r in predictions(plan, runs, model):
        if r.predicted_tokens_per_second and r.tokens_per_second:
            error = abs(r.predicted_tokens_per_second / r.tokens_per_second - 1)
            per_config.setdefault(r.config, []).append(error)
    held_out: dict[str, float | None] = {}
    for config in plan.configs:
        if config.is_baseline:
            continue
        rest = [r for r in runs if r.config != config.name]
        group = _group(config.spec.types)
        same = [c for c in plan.configs if _group(c.spec.types) == group and c is not config]
        if not same:
            held_out[config.name] = None  # its group's costs would be unfitted
            continue
        partial = fit_runs(plan, rest)
        errors = [
            abs(p / r.tokens_per_second - 1)
            for r in runs
            if r.config == config.name
            and partial is not None
            and r.tokens_per_second
            and (p := partial.predict_run(r, _group(config.spec.types)))
        ]
        held_out[config.name] = round(statistics.median(errors), 4) if errors else None
    return {
        "runs": len(runs),
        "cost_model": None if model is None else model.model_dump(),
        "median_abs_error": None if model is None else model.median_abs_error,
        "goal": 0.05,
        "per_config_median_abs_error": {
            c: round(statistics.median(v), 4) for c, v in per_config.items()
        },
        "held_out_median_abs_error": held_out,
        "held_out_median": round(statistics.median(kept), 4)
        if (kept := [v for v in held_out.values() if v is not None])
        else None,
        "baseline_spread": _spread(runs, plan.baseline.name),
        "repeat_floor": _repeat_floor(runs),
    }


PREFIX = 32
"""Tokens of the shorter first round measured: does a run's first half predict as well?"""


def short_round(doc: dict[str, object]) -> dict[str, object]:
    """Predicted decode speedups from each recorded run's first `PREFIX` tokens and from the
    whole run, against the measured paired decode speedup (same prompt, same round)."""
    from spectui.core.compare.costmodel import fit_runs, spec_group
    from spectui.core.compare.store import CompareDocument
    from spectui.core.compare.whatif import event_counts
    from spectui.core.events import StepEvent, TokenEvent
    from spectui.core.sessions.file import read_session

    compare = CompareDocument.model_validate(doc)
    model = fit_runs(compare.plan, compare.runs)  # the model as this code fits it, not as saved
    runs = sorted(compare.runs, key=lambda r: r.seq)
    sessions = [read_session(p) for p in sorted(SESSIONS.glob("*.jsonl"))]
    if model is None or len(sessions) != len(runs):
        return {"skipped": "no model, or sessions do not pair with runs"}
    groups = {c.name: spec_group(c.spec.types) for c in compare.plan.configs}
    base = {(r.prompt, r.round): r for r in runs if r.config == "none" and r.ok and not r.warmup}
    errors: dict[str, list[float]] = {"prefix": [], "whole": []}
    for run, session in zip(runs, sessions, strict=True):
        b = base.get((run.prompt, run.round))
        if run.warmup or not run.ok or run.config == "none" or b is None:
            continue
        if not run.tokens_per_second or not b.tokens_per_second:
            continue
        measured = run.tokens_per_second / b.tokens_per_second
        for name, limit in (("prefix", PREFIX), ("whole", 10**9)):
            events = [
                e
                for e in session.events
                if (isinstance(e, TokenEvent) and e.index < limit)
                or (isinstance(e, StepEvent) and e.first_token < limit)
            ]
            counts, _ = event_counts(events, None)
            tokens = counts.tokens  # after the first
            if tokens < 2:
                continue
            decodes = counts.steps + counts.singles
            ms = model.decode_time_ms(
                decodes, counts.steps, sum(counts.drafted), groups[run.config]
            )
            if not ms:
                continue
            predicted = (tokens / ms) / (1 / model.decode_ms)
            errors[name].append(abs(predicted / measured - 1))
    return {
        "prefix_tokens": PREFIX,
        "median_abs_error_prefix": round(statistics.median(errors["prefix"]), 4)
        if errors["prefix"]
        else None,
        "median_abs_error_whole": round(statistics.median(errors["whole"]), 4)
        if errors["whole"]
        else None,
        "pairs": len(errors["whole"]),
    }


def _group(types: tuple[str, ...]) -> str | None:
    from spectui.core.compare.costmodel import spec_group

    return spec_group(types)


def _repeat_floor(runs: Sequence[RunRecord]) -> dict[str, float | int | None]:
    """The error a model would have if it were exact: runs that did the same work (config,
    prompt, drafted, accepted, steps) each predicted at their geometric mean. What is left is the
    machine's run-to-run noise, which no cost model can remove."""
    same: dict[tuple[object, ...], list[float]] = {}
    for r in runs:
        if r.tokens_per_second:
            key = (r.config, r.prompt, r.tokens, r.drafted, r.accepted, r.steps)
            same.setdefault(key, []).append(r.tokens_per_second)
    errors = []
    for values in same.values():
        if len(values) > 1:
            mean = math.exp(statistics.fmean(math.log(v) for v in values))
            errors += [abs(mean / v - 1) for v in values]
    return {
        "runs": len(errors),
        "median_abs_error": round(statistics.median(errors), 4) if errors else None,
    }


def _spread(runs: Sequence[object], baseline: str) -> dict[str, float]:
    """The baseline's own tokens/s, max / min per prompt: the machine's noise in this run."""
    by: dict[str, list[float]] = {}
    for r in runs:
        if getattr(r, "config", None) == baseline and getattr(r, "tokens_per_second", None):
            by.setdefault(r.prompt, []).append(r.tokens_per_second)  # type: ignore[attr-defined]
    return {p: round(max(v) / min(v), 3) for p, v in by.items() if len(v) > 1}


if __name__ == "__main__":
    raise SystemExit(main())
