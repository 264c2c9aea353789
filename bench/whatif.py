"""Benchmark (not a test): `spectui whatif` against real runs at the draft maxima it predicts.

    python bench/whatif.py        # after bench/costmodel.py (its compare and recorded runs)

From each recorded run of draft-simple at n-max 8 (the Gemma model as its own draft) and of
ngram-mod at its default n-max 64, predict tokens/s at the other maxima that comparison ran
(draft-simple 4 and 2; ngram-mod 32 and 16), and set it against the real run of the same prompt
in the same round. Two figures per pair, both from one comparison:

- ``ratio``: the measured source run x whatif's ``speedup_vs_recorded`` (the machine's speed
  that round cancels) against the measured target run;
- ``absolute``: whatif's ``tokens_per_second`` (the pooled cost model, typical round speed).

Writes bench/results/whatif.json: every pair and the median abs errors (goal <= 10 %). It runs
no server: it reads what bench/costmodel.py saved, and refits the pooled model from its runs
with the code as it is now.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from common import needs

HERE = Path(__file__).parent
RESULTS = HERE / "results"
SESSIONS = RESULTS / "costmodel-sessions"
DOC = RESULTS / "costmodel.compare.json"

PAIRS = {
    "draft-simple --spec-draft-n-max 8": {
        "draft-simple --spec-draft-n-max 4": 4,
        "draft-simple --spec-draft-n-max 2": 2,
    },
    "ngram-mod": {
        "ngram-mod --spec-ngram-mod-n-max 32 --spec-ngram-mod-n-min 32": 32,
        "ngram-mod --spec-ngram-mod-n-max 16 --spec-ngram-mod-n-min 16": 16,
    },
}


def main() -> int:
    from spectui.core.compare.costmodel import fit_runs
    from spectui.core.compare.store import CompareDocument
    from spectui.core.compare.whatif import WhatIfError, what_if
    from spectui.core.sessions.file import read_session

    needs(DOC, "bench/costmodel.py without --report-only")
    doc = CompareDocument.model_validate(json.loads(DOC.read_text()))
    pooled = fit_runs(doc.plan, doc.runs)  # as this code fits it (a saved doc may be older)
    runs = sorted(doc.runs, key=lambda r: r.seq)
    sessions = [read_session(p) for p in sorted(SESSIONS.glob("*.jsonl"))]
    if len(sessions) != len(runs):
        print(f"{len(sessions)} sessions for {len(runs)} runs: cannot pair them", file=sys.stderr)
        return 2
    by_key = {(r.config, r.prompt, r.round): r for r in runs if r.ok and not r.warmup}
    pairs = []
    for run, session in zip(runs, sessions, strict=True):
        if run.config not in PAIRS or run.warmup or not run.ok:
            continue
        for target, k_new in PAIRS[run.config].items():
            real = by_key.get((target, run.prompt, run.round))
            if real is None or not real.tokens_per_second or not run.tokens_per_second:
                continue
            row: dict[str, object] = {
                "source": run.config,
                "target": target,
                "prompt": run.prompt,
                "round": run.round,
                "draft_max": k_new,
                "measured_source": round(run.tokens_per_second, 3),
                "measured_target": round(real.tokens_per_second, 3),
            }
            for name, model in (("pooled", pooled), ("own", None)):
                try:
                    result = what_if(session, [k_new], model)
                except WhatIfError as error:
                    row[name] = str(error)
                    continue
                p = result.predictions[0]
                ratio = run.tokens_per_second * p.speedup_vs_recorded
                row[name] = {
                    "speedup_vs_recorded": p.speedup_vs_recorded,
                    "extrapolated": p.extrapolated,
                    "ratio_prediction": round(ratio, 3),
                    "ratio_error": round(abs(ratio / real.tokens_per_second - 1), 4),
                    "absolute_prediction": p.tokens_per_second,
                    "absolute_error": round(
                        abs(p.tokens_per_second / real.tokens_per_second - 1), 4
                    ),
                }
            pairs.append(row)
    report: dict[str, object] = {"command": " ".join(sys.argv), "goal": 0.10, "pairs": pairs}
    for name in ("pooled", "own"):
        for kind in ("ratio", "absolute"):
            for source in PAIRS:
                errors = [
                    r[name][f"{kind}_error"]  # type: ignore[index]
                    for r in pairs
                    if r["source"] == source and isinstance(r.get(name), dict)
                ]
                key = f"median_{kind}_error_{name}_{source.split(' ')[0]}"
                report[key] = round(statistics.median(errors), 4) if errors else None
    (RESULTS / "whatif.json").write_text(json.dumps(report, indent=1))
    print(json.dumps({k: v for k, v in report.items() if k != "pairs"}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
