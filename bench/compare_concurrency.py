"""Benchmark (not a test): does speculation pay with N users? `spectui compare --concurrency`
of ngram-mod against no speculation at 1, 2 and 4 client streams at once, on one llama-server
with 4 slots, Gemma 3 270M on this machine.

    python bench/compare_concurrency.py [--levels 1,2,4] [--reps 3] [--n-predict 64]
        [--prompts builtin:table-row,code-edit] [--report-only]

Ratios of one run: per level, ngram-mod's aggregate generated tok/s over the baseline's at the
same level in the same round (the median over rounds, its 95 % interval, the level's own noise
floor) and the verdict of compare's rule; the one-sentence verdict. Writes
bench/results/compare_concurrency.json (figures) beside the comparison's own document
(compare_concurrency-doc.json) and prints the figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from common import gemma_model, llama_binary, needs, run_spectui, write_result

HERE = Path(__file__).parent
DOCUMENT = HERE / "results" / "compare_concurrency-doc.json"


def _figures(document: dict[str, Any]) -> dict[str, Any]:
    levels: dict[str, Any] = {}
    for row in document["levels"]:
        entry = levels.setdefault(str(row["level"]), {})
        entry[row["config"]] = {
            key: row[key]
            for key in (
                "aggregate_tokens_per_second",
                "request_tokens_per_second",
                "ttft_p50_ms",
                "ttft_p95_ms",
                "latency_p50_ms",
                "latency_p95_ms",
                "acceptance",
                "waited",
                "requests",
                "speedup_vs_baseline",
                "speedup_low",
                "speedup_high",
                "noise_floor",
                "verdict",
                "reason",
            )
        }
    return {
        "document": str(DOCUMENT.relative_to(HERE.parent)),
        "levels": levels,
        "verdicts": {v["config"]: v["sentence"] for v in document["level_verdicts"]},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default="1,2,4")
    parser.add_argument("--reps", default="3")
    parser.add_argument("--n-predict", default="64")
    parser.add_argument("--prompts", default="builtin:table-row,code-edit")
    parser.add_argument("--report-only", action="store_true", help="re-read the last document")
    args = parser.parse_args()
    seconds = None
    if not args.report_only:
        began = time.monotonic()
        run_spectui(
            "compare", "--model", str(gemma_model()), "--server-bin", str(llama_binary()),
            "--config", "ngram-mod", "--prompts", args.prompts, "--reps", args.reps,
            "--n-predict", args.n_predict, "--concurrency", args.levels, "--ctx-size", "1024",
            "--no-chart", "--json", str(DOCUMENT),
        )  # fmt: skip
        seconds = round(time.monotonic() - began, 1)
    document = json.loads(needs(DOCUMENT, "a run without --report-only").read_text())
    figures = {"seconds": seconds, **_figures(document)}
    path = write_result("compare_concurrency", figures)
    json.dump(figures, sys.stdout, indent=1)
    print(f"\n{path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
