"""Benchmark (not a test): the winner `spectui tune` finds in a 10-minute budget against the best
config of an exhaustive grid (`spectui compare` of every candidate of the same space, 3 rounds),
on the built-in prompts, with Gemma 3 270M on this machine.

    python bench/tune_vs_grid.py [--budget 10m] [--reps 3] [--n-predict 64] [--types T,T]
        [--tune-only | --report-only]

Ratios of one run (`ratios`): tune's overall pick over the grid's best config judged by tune's own
rule (a divergent changed answer, a failed checker or run puts a config out; goal >= 0.95), the
same over the grid's raw fastest, and tune's wall time over the grid's (goal <= 0.25);
`prediction`: how tune's predicted overall speedups (from its first round) compare with the grid's
measured ones.

Writes bench/results/tune_vs_grid.json (both documents' paths and the comparison) and prints it.
Regret is the grid's speedup of its own best config over the grid's speedup of tune's winner
(1.00: tune found the best).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from common import needs, run_spectui

HERE = Path(__file__).parent
RESULTS = HERE / "results"
FULL_RUN = "a run of bench/tune_vs_grid.py without --tune-only or --report-only"


def _spectui(*args: str) -> float:
    began = time.monotonic()
    run_spectui(*args)
    return time.monotonic() - began


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else 0.0


def _last_grid_seconds() -> float:
    """The grid's wall time in the last full run's report (NaN when there is none)."""
    try:
        seconds = json.loads((RESULTS / "tune_vs_grid.json").read_text())["grid"]["seconds"]
    except (OSError, KeyError, ValueError):
        return float("nan")
    return float(seconds) if seconds is not None else float("nan")


def _put_out(row: dict[str, Any], base: dict[str, Any]) -> bool:
    """Whether tune's rule puts the row's config out (``base``: the baseline's row of the same
    prompt; a checker the baseline fails too is no fault of the config)."""
    if "divergent_changes" not in row:  # a file from before the rule: any change
        return bool(row["compared"] > row["identical"] or row["failed"])
    return bool(
        row["divergent_changes"]
        or row["failed"] > base["failed"]
        or row.get("check_failures", 0) > base.get("check_failures", 0)
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--budget", default="10m")
    parser.add_argument("--reps", default="3")
    parser.add_argument("--n-predict", default="64")
    parser.add_argument("--prompts", default="builtin")
    parser.add_argument("--types", default="", help="only these spec types (a reduced space)")
    parser.add_argument(
        "--report-only", action="store_true", help="recompute the comparison from the last files"
    )
    parser.add_argument(
        "--tune-only",
        action="store_true",
        help="run tune again against the last grid (its wall time from the last report)",
    )
    args = parser.parse_args()
    RESULTS.mkdir(exist_ok=True)
    common = ["--n-predict", args.n_predict, "--ctx-size", "1024"]
    tune_out, grid_out = RESULTS / "tune_vs_grid.tune.json", RESULTS / "tune_vs_grid.grid.json"
    if args.report_only:
        needs(tune_out, FULL_RUN)
        needs(grid_out, FULL_RUN)
        tune, grid = json.loads(tune_out.read_text()), json.loads(grid_out.read_text())
        tune_s, grid_s = tune["elapsed_s"], _last_grid_seconds()
        return _report(tune, grid, tune_s, grid_s)
    if args.tune_only:
        needs(grid_out, FULL_RUN)  # before tune runs: its minutes would be lost
    for path in (tune_out,) if args.tune_only else (tune_out, grid_out):
        path.unlink(missing_ok=True)
    types = ["--types", args.types] if args.types else []
    tune_s = _spectui(
        "tune", "--prompts", args.prompts, "--budget", args.budget, "--json", str(tune_out),
        "--no-chart", *types, *common, "--", "--no-warmup",
    )  # fmt: skip
    tune = json.loads(tune_out.read_text())
    if args.tune_only:
        return _report(tune, json.loads(grid_out.read_text()), tune_s, _last_grid_seconds())
    configs = [c["text"] for c in tune["space"]]
    config_args = [a for c in configs for a in ("--config", c)]
    grid_s = _spectui(
        "compare", *config_args, "--prompts", args.prompts, "--reps", args.reps, "--json",
        str(grid_out), "--no-chart", *common, "--", "--no-warmup",
    )  # fmt: skip
    grid = json.loads(grid_out.read_text())
    return _report(tune, grid, tune_s, grid_s)


def _report(tune: dict[str, Any], grid: dict[str, Any], tune_s: float, grid_s: float) -> int:
    configs = [c["text"] for c in tune["space"]]
    per_config: dict[str, list[float]] = {}
    verdicts: dict[str, list[str]] = {}
    for row in grid["summary"]:
        if row["config"] == "none" or row["speedup_vs_baseline"] is None:
            continue
        per_config.setdefault(row["config"], []).append(row["speedup_vs_baseline"])
        verdicts.setdefault(row["config"], []).append(f"{row['prompt']}:{row['verdict']}")
    scores = {c: _geomean(v) for c, v in per_config.items()}
    best = max(scores, key=lambda c: scores[c])
    # Judged by tune's own rule: a divergent change, a failed checker or a failed run puts a
    # config out; a change at a near-tie is a caveat (a file from before the rule: any change).
    base = {r["prompt"]: r for r in grid["summary"] if r["config"] == "none"}
    faulty = {
        r["config"]
        for r in grid["summary"]
        if r["config"] != "none" and _put_out(r, base[r["prompt"]])
    }
    clean = max((c for c in scores if c not in faulty), key=lambda c: scores[c], default=None)
    winner = (tune["winners"].get("overall") or {}).get("config")
    in_race = [c for c in tune["candidates"] if c["out_after"] is None]
    leader = max(in_race, key=lambda c: c["overall"]["speedup"] or 0.0, default=None)
    leader_config = leader["config"] if leader else None
    predicted = {
        c["config"]: (c["overall"].get("predicted") or {}).get("speedup")
        for c in tune["candidates"]
    }
    ranked = [c for c in scores if predicted.get(c)]
    rank_error = [abs((predicted[c] or 0.0) / scores[c] - 1) for c in ranked if scores[c]]
    report = {
        "command": " ".join(sys.argv),
        "space": len(configs),
        "ratios": {
            # The goal's measure: against the grid's best config by the same rule as tune's.
            "pick_over_grid_best": round(scores.get(winner or "", 0.0) / scores[clean], 3)
            if winner and clean
            else None,
            "pick_over_grid_fastest": round(scores.get(winner or "", 0.0) / scores[best], 3)
            if winner
            else None,
            "tune_wall_over_grid_wall": None if math.isnan(grid_s) else round(tune_s / grid_s, 3),
            "tune_runs_over_grid_runs": round(len(tune["compare"]["runs"]) / len(grid["runs"]), 3),
        },
        "prediction": {
            "ranked_by": tune.get("ranked_by"),
            "cost_model": tune.get("cost_model"),
            "median_abs_error_predicted_vs_grid_speedup": round(statistics.median(rank_error), 3)
            if rank_error
            else None,
            "per_config": {c: [predicted[c], round(scores[c], 3)] for c in ranked},
        },
        "tune": {
            "seconds": round(tune_s),
            "runs": len(tune["compare"]["runs"]),
            "complete": tune["complete"],
            "overall_winner": winner,
            "winner_grid_speedup": round(scores.get(winner or "", 0.0), 3),
            "per_prompt": {k: (v or {}).get("config") for k, v in tune["winners"].items()},
            "leader_in_race": leader_config,
            "leader_grid_speedup": round(scores.get(leader_config or "", 0.0), 3),
            "noise_floor": max((r["noise_floor"] or 0) for r in tune["compare"]["summary"]),
        },
        "grid": {
            "seconds": None if math.isnan(grid_s) else round(grid_s),
            "runs": len(grid["runs"]),
            "best": best,
            "best_speedup": round(scores[best], 3),
            "best_verdicts": verdicts[best],
            "top5": sorted(((round(s, 3), c) for c, s in scores.items()), reverse=True)[:5],
            "changed_answers": sorted(faulty),
            "best_clean": clean,
            "best_clean_speedup": round(scores[clean], 3) if clean else None,
            "keeps": sorted({r["config"] for r in grid["summary"] if r["verdict"] == "keep"}),
            "noise_floor": max((r["noise_floor"] or 0) for r in grid["summary"]),
        },
    }
    if winner:
        report["regret"] = round(scores[best] / scores[winner], 3)
    (RESULTS / "tune_vs_grid.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
