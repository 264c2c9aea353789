"""Benchmark (not a test): `spectui whatif`'s intervals on unseen prompts, for draft-simple and
draft-mtp, against real runs at the draft maxima it predicts.

    python bench/whatif_types.py [--reps 3] [--n-predict N] [--prompts 2] [--only gemma|tiny]
    python bench/whatif_types.py --report-only     # re-score the saved runs, no server

Two comparisons (`spectui compare`, rounds alternate the configs, every run recorded):

- **gemma**: draft-simple with Gemma 3 270M as its own draft at n-max 8, 4 and 2, on prose
  prompts written for this benchmark (`PROSE`: none of spectui's built-in or test prompts);
- **tiny**: the tiny qwen35 target of `spectui.testing` with its partial-acceptance MTP head,
  draft-mtp at n-max 1, 2 and 3 (n-min 1), on word-cycle prompts.

From every recorded run at draft max K, `whatif` predicts each other draft max K' of its
comparison, and the prediction is set against the **real run of K' on the same prompt in the
same round** (the runs a few seconds to a minute apart, in alternating rounds, so the machine's
speed drift hits both alike as far as it holds that long); each run's decode rate on the
server's clock, as `whatif` prices it. The error is |point / real - 1| per pair, the figure the
median over pairs. Two ways:

- ``alone``: the run by itself (the way a user runs it first);
- ``also``: with the run of the third draft max and the baseline's run of the same prompt and
  round (`whatif --also`, twice), which separate a step's fixed from its per-token cost;
- ``also_rounds``: with every round's runs of the third draft max and the baseline on the same
  prompt (six runs at 3 rounds): their own speeds average out of the slope.

Each round also runs the middle draft max a second time under another name (``--spec-draft-p-min
0``, the server's default: the same config): its rate against the first's, same prompt and
round, is the **repeat floor**, what a perfect prediction would be off by on this machine at
this load. The old figure (against the median of the K' runs over every round) is kept as
``error_vs_median``. Figures against the goal: the real run inside the interval (coverage), and
the point's error where the run can tell (goal <= 10 %): the predictions `whatif` marks
``cost_told`` (no split the run leaves plausible moves the point more than 10 %). The load
average is sampled through the comparison (`loadavg.LoadSampler`). Writes
bench/results/whatif_types.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from common import RESULTS, gemma_model, needs, run_spectui, write_result
from loadavg import LoadSampler

PROSE = (
    "Describe, in a few calm paragraphs, an evening walk along a harbour after the ferries "
    "have stopped running: the light, the sounds, and the people still about.",
    "Write a short letter from a retired lighthouse keeper to a niece who has just started "
    "her first job in a big city, full of practical advice and gentle humour.",
)
"""Unseen prose prompts: nothing in spectui was tuned on them."""

WORDS = ("Hello alpha beta", "Then omega alpha beta gamma delta")
"""Prompts of the tiny target's word cycle (its MTP head is wrong after every fifth word)."""

REPEAT = " --spec-draft-p-min 0"
"""Appended to the middle draft max's config for its repeat: the server's default p-min (so the
same runs), under another config name."""

SETS: dict[str, dict[str, Any]] = {
    "gemma": {
        "maxima": (8, 4, 2),
        "repeat": 4,
        "spec": "draft-simple --spec-draft-n-max {k}",
        "n": 160,
    },
    "tiny": {
        "maxima": (1, 2, 3),
        "repeat": 2,
        "spec": "draft-mtp --spec-draft-n-max {k} --spec-draft-n-min 1",
        # at thousands of tokens a second the client's clock sees the stream in bursts of a
        # few ms: a longer run keeps them a small part of its time
        "n": 1500,
    },
}


def _folder(name: str) -> Path:
    return RESULTS / f"whatif_types-{name}"


def _prompt_file(folder: Path, texts: tuple[str, ...], n_predict: int) -> Path:
    path = folder / "prompts.jsonl"
    with path.open("w") as out:
        for number, text in enumerate(texts, 1):
            out.write(json.dumps({"key": f"p{number}", "text": text, "n_predict": n_predict}))
            out.write("\n")
    return path


def _compare(
    name: str, reps: int, n_predict: int | None, prompts_used: int
) -> tuple[float, dict[str, object]]:
    folder = _folder(name)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    spec = SETS[name]["spec"]
    specs = [spec.format(k=k) for k in SETS[name]["maxima"]]
    specs.append(spec.format(k=SETS[name]["repeat"]) + REPEAT)
    configs = [a for text in specs for a in ("--config", text)]
    n_predict = n_predict or SETS[name]["n"]
    if name == "gemma":
        model = str(gemma_model())
        prompts = _prompt_file(folder, PROSE[:prompts_used], n_predict)
        extra = ["--draft-model", model, "--ctx-size", "1024"]
    else:
        from spectui.testing.tiny_models import build_target

        model = str(build_target(folder / "target-mtp-partial.gguf", "partial"))
        prompts = _prompt_file(folder, WORDS[:prompts_used], n_predict)
        extra = ["--ctx-size", str(n_predict + 256)]
    began = time.monotonic()
    with LoadSampler() as load:
        run_spectui(
            "compare", "--model", model, *extra, *configs, "--prompts", str(prompts),
            "--reps", str(reps), "--json", str(folder / "compare.json"),
            "--record", str(folder / "sessions"), "--no-chart", "--", "--no-warmup",
            "--threads", "1",
        )  # fmt: skip
    return time.monotonic() - began, load.summary()


def _decode_rate(session: Any) -> float | None:
    """Tokens after the first over the time of the decodes: what `whatif` prices."""
    from spectui.core.compare.whatif import session_counts

    counts, decodes = session_counts(session)
    ms = sum(t for _, t in decodes)
    return counts.tokens / (ms / 1000) if ms > 0 else None


def _runs(name: str) -> list[dict[str, Any]]:
    """Every counted run: its config's draft max, whether it is the repeat, prompt, round,
    session and decode rate."""
    from spectui.core.compare.store import CompareDocument
    from spectui.core.sessions.file import read_session

    folder = _folder(name)
    doc = CompareDocument.model_validate_json(
        needs(folder / "compare.json", "bench/whatif_types.py").read_text()
    )
    texts = {p.key: p.text for p in doc.plan.prompts}
    keys = {c.name: (c.spec.draft_n_max, c.spec.extra_args) for c in doc.plan.configs}
    # Sessions are named by time and config: pair each (config, prompt)'s sessions with its
    # runs, both in the order they ran (warm-ups included: they are recorded too).
    sessions: dict[tuple[Any, str], list[Any]] = {}
    for path in sorted((folder / "sessions").glob("*.jsonl")):
        session = read_session(path)
        spec = session.header.server.spec
        key = (spec.draft_n_max, spec.extra_args) if spec is not None else (None, ())
        sessions.setdefault((key, session.header.request.prompt), []).append(session)
    out = []
    for config, prompt in {(r.config, r.prompt) for r in doc.runs}:
        runs = sorted((r for r in doc.runs if (r.config, r.prompt) == (config, prompt)),
                      key=lambda r: r.seq)  # fmt: skip
        found = sessions.get((keys[config], texts[prompt]), [])
        if len(found) != len(runs):
            raise SystemExit(f"{len(found)} sessions for {len(runs)} runs of {config}: cannot pair")
        k = keys[config][0] or 0  # the baseline: only ever a helper (its plain decodes)
        for run, session in zip(runs, found, strict=True):
            if run.warmup or not run.ok:
                continue
            rate = _decode_rate(session)
            if rate:
                out.append({"k": k, "repeat": bool(keys[config][1]), "prompt": prompt,
                            "round": run.round, "seq": run.seq, "session": session,
                            "rate": rate, "server_rate": run.tokens_per_second})  # fmt: skip
    return out


def analyse(name: str) -> dict[str, Any]:
    """Every (source run, K') pair of one round and prompt, alone and with a third draft max's
    run; the repeat floor; the figures."""
    from spectui.core.compare.whatif import what_if

    every = _runs(name)
    runs = [r for r in every if r["k"] and not r["repeat"]]
    real: dict[tuple[int, str], list[float]] = {}
    for r in runs:
        real.setdefault((r["k"], r["prompt"]), []).append(r["rate"])
    medians = {key: statistics.median(v) for key, v in real.items()}
    by_round = {(r["k"], r["prompt"], r["round"]): r for r in runs}
    maxima = SETS[name]["maxima"]
    pairs = []
    for source in runs:
        for k_new in maxima:
            target = by_round.get((k_new, source["prompt"], source["round"]))
            if k_new == source["k"] or target is None:
                continue
            third = [k for k in maxima if k not in (k_new, source["k"])]
            same = [
                r for r in every
                if (r["prompt"], r["round"]) == (source["prompt"], source["round"])
                and not r["repeat"]
            ]  # fmt: skip
            helper = [r["session"] for r in same if r["k"] in third][:1]
            helper += [r["session"] for r in same if r["k"] == 0][:1]
            # every round's runs of the third maximum and the baseline, same prompt: more
            # runs average their own speeds out of the slope (never a run at K')
            helpers = [
                r["session"] for r in every
                if r["prompt"] == source["prompt"] and r["k"] in (*third, 0) and not r["repeat"]
            ]  # fmt: skip
            row: dict[str, Any] = {
                "from": source["k"], "to": k_new, "prompt": source["prompt"],
                "round": source["round"], "real": round(target["rate"], 3),
                "runs_apart": abs(target["seq"] - source["seq"]),
                "real_median": round(medians[(k_new, source["prompt"])], 3),
            }  # fmt: skip
            for way, also in (("alone", []), ("also", helper), ("also_rounds", helpers)):
                if way != "alone" and not also:
                    continue
                result = what_if(source["session"], [k_new], also=also)
                p = result.predictions[0]
                row[way] = {
                    "point": p.tokens_per_second, "low": p.low, "high": p.high,
                    "inside": p.low <= target["rate"] <= p.high,
                    "error": round(abs(p.tokens_per_second / target["rate"] - 1), 4),
                    "error_vs_median": round(abs(p.tokens_per_second / row["real_median"] - 1), 4),
                    "separable": result.step_cost.separable, "told": p.cost_told,
                    "extrapolated": p.extrapolated,
                    "notes": result.notes,
                }  # fmt: skip
            pairs.append(row)
    return {"pairs": pairs, **_figures(pairs), "repeat_floor": _floor(name, every),
            "real_spread": _spread(real)}  # fmt: skip


def _floor(name: str, every: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The repeat's rate against the same config's, same prompt and round: |ratio - 1|."""
    k = SETS[name]["repeat"]
    first = {(r["prompt"], r["round"]): r for r in every if r["k"] == k and not r["repeat"]}
    values = []
    for r in every:
        if r["k"] == k and r["repeat"] and (other := first.get((r["prompt"], r["round"]))):
            values.append(abs(r["rate"] / other["rate"] - 1))
    if not values:
        return None
    return {
        "pairs": len(values),
        "median": round(statistics.median(values), 4),
        "max": round(max(values), 4),
        "runs_apart": "the repeat runs last in each round: as far from its first as 8 from 2",
    }


def _figures(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for way in ("alone", "also", "also_rounds"):
        rows = [p[way] for p in pairs if way in p]
        if not rows:
            continue
        told = [r["error"] for r in rows if r["told"]]
        out[way] = {
            "pairs": len(rows),
            "coverage": round(sum(r["inside"] for r in rows) / len(rows), 3),
            "separable_runs": sum(r["separable"] for r in rows),
            "told_pairs": len(told),
            "median_error_told": round(statistics.median(told), 4) if told else None,
            "within_goal_told": round(sum(e <= 0.10 for e in told) / len(told), 3)
            if told
            else None,
            "median_error_all": round(statistics.median(r["error"] for r in rows), 4),
            "median_error_vs_median_all": round(
                statistics.median(r["error_vs_median"] for r in rows), 4
            ),
            "median_width": round(statistics.median(r["high"] / r["low"] for r in rows), 3),
        }
    return out


def _spread(real: dict[tuple[int, str], list[float]]) -> float | None:
    """The real runs' own spread: median over (K, prompt) of max / min rate."""
    spreads = [max(v) / min(v) for v in real.values() if len(v) > 1]
    return round(statistics.median(spreads), 3) if spreads else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--n-predict", type=int, help="tokens per run (gemma 160, tiny 1500)")
    parser.add_argument("--only", choices=tuple(SETS))
    parser.add_argument("--prompts", type=int, default=2, help="prompts of each set (1 or 2)")
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args()
    names = [args.only] if args.only else list(SETS)
    seconds: dict[str, float] = {}
    loads: dict[str, dict[str, object]] = {}
    if not args.report_only:
        for name in names:
            took, loads[name] = _compare(name, args.reps, args.n_predict, args.prompts)
            seconds[name] = round(took, 1)
    # one set at a time keeps the other's figures (each names the command that made it)
    saved = RESULTS / "whatif_types.json"
    report: dict[str, Any] = json.loads(saved.read_text()) if saved.is_file() else {}
    report = {k: v for k, v in report.items() if k in SETS}
    report["goal_error"] = 0.10
    for name in names:
        before = report.get(name, {})
        report[name] = {**analyse(name), "seconds": seconds.get(name, before.get("seconds"))}
        report[name]["load"] = loads.get(name, before.get("load"))
        # a re-score keeps the command that ran the comparison, and says it re-scored
        report[name]["command"] = before.get("command") if args.report_only else " ".join(sys.argv)
        report[name]["scored_by"] = " ".join(sys.argv)
    path = write_result("whatif_types", report)
    brief = {n: {k: v for k, v in report[n].items() if k != "pairs"} for n in names}
    print(json.dumps(brief, indent=1))
    print(f"(every pair in {path})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
