"""Round one without a run: ngram-simple and ngram-mod replicas against real runs of this build,
the server loop `replay` copies, which candidates are replayed, the replica check, predictions
from a replay, and the race for the overall pick that follows a ranked round one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spectui.core.compare.costmodel import CostModel, PredictedSpeedup
from spectui.core.compare.records import RunRecord
from spectui.core.compare.store import ServerOptions
from spectui.core.compare.summary import report_rows
from spectui.core.drafters.ngram import NgramMod, NgramSimple, replay
from spectui.core.drafters.settings import replica
from spectui.core.tune.models import PromptResult, ReplicaCheck
from spectui.core.tune.predict import predict
from spectui.core.tune.replays import check_replicas, server_slots
from spectui.core.tune.search import next_round, overall_race
from spectui.core.tune.space import Candidate, mark_replayed

from .compare_helpers import plan

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "drafters"


def _fixture() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The baseline's requests (map_real.json) and the real ngram-simple/ngram-mod runs."""
    base = json.loads((FIXTURES / "map_real.json").read_text())
    configs = json.loads((FIXTURES / "simple_mod_real.json").read_text())["configs"]
    return base, configs


def test_replicas_reproduce_real_runs_of_unchanged_answers() -> None:
    """One server start: the warm-up, then every prompt in order, on one replica."""
    base, configs = _fixture()
    requests, n_predict = base["requests"], base["n_predict"]
    for config in configs:
        drafter = replica(config["type"], config["settings"])
        assert drafter is not None, config["name"]
        warm = requests[base["warmup"]]
        replay(drafter, warm["prompt"], warm["out"], n_predict)
        got = {}
        for key, request in requests.items():
            r = replay(drafter, request["prompt"], request["out"], n_predict)
            got[key] = [r.drafted, r.accepted]
        assert {k: got[k] for k in config["real"]} == config["real"], config["name"]


def test_replay_caps_a_draft_at_the_tokens_left_and_counts_positions() -> None:
    # A repeated pattern: ngram-simple (n 2, m 4) finds "1 2" again and drafts what followed.
    prompt = [9, 1, 2, 3, 4, 5, 6, 7, 1]
    output = [2, 3, 4, 5, 0, 0]
    r = replay(NgramSimple(size_n=2, size_m=4), prompt, output, n_predict=6)
    # After "1 2": the draft 3 4 5 6 is capped at 6 - 1 - 1 = 4 tokens; 3 4 5 match, 6 does not.
    assert (r.drafted, r.accepted, r.steps) == (4, 3, 1)
    assert r.accepted_per_position == (1, 1, 1)
    assert r.tokens == len(output)


def test_ngram_mod_drops_a_draft_shorter_than_its_minimum() -> None:
    # The prompt teaches "1 2 -> 3" and "2 3 -> 4"; the chain from "1 2" breaks after 3 4.
    history, sampled = [0, 0, 0, 0, 9, 1], 2
    strict = NgramMod(n_match=2, n_max=8, n_min=3)
    strict.begin([1, 2, 3, 4])
    assert strict.draft(history, sampled) == []
    loose = NgramMod(n_match=2, n_max=8, n_min=1)
    loose.begin([1, 2, 3, 4])
    assert loose.draft(history, sampled) == [3, 4]


def test_types_without_a_replica_or_a_setting_get_none() -> None:
    assert replica("ngram-cache", {}) is None
    assert replica("ngram-simple", {"--spec-ngram-simple-size-n": 12}) is None
    assert replica("draft-simple", {"--spec-draft-n-max": 3}) is None
    assert server_slots(ServerOptions(ctx_size=1024)) == 1  # spectui's own --parallel
    assert server_slots(ServerOptions(ctx_size=1024, extra_args=["-np", "2"])) == 2
    assert server_slots(ServerOptions(ctx_size=1024, extra_args=["--parallel", "-1"])) == 4


N, M = "--spec-ngram-simple-size-n", "--spec-ngram-simple-size-m"


def _simple(n: int, m: int) -> Candidate:
    text = "ngram-simple" + (f" {N} {n}" if n != 12 else "") + (f" {M} {m}" if m != 48 else "")
    return Candidate(
        type="ngram-simple",
        knobs={N: float(n), M: float(m)},
        text=text,
        settings={N: float(n), M: float(m)},
    )


def test_a_replicated_type_runs_its_defaults_and_replays_the_rest() -> None:
    space = mark_replayed(
        [
            _simple(12, 48),
            Candidate(type="ngram-cache", knobs={}, text="ngram-cache"),
            _simple(4, 48),
        ]
    )
    assert [c.replayed for c in space] == [False, False, True]


# A baseline answer that repeats itself, so ngram-simple (n 2) drafts and is accepted.
PROMPT = [7, 1, 2, 3, 4, 1, 2, 3, 4]
ANSWER = [1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4, 9, 9, 9, 9]
TOKENS = {"a": PROMPT}


def _record(config: str, seq: int, **fields: Any) -> RunRecord:
    base: dict[str, Any] = {
        "seq": seq,
        "config": config,
        "prompt": "a",
        "round": 1,
        "tokens": len(ANSWER),
        "ttft_ms": 100.0,
        "text": "same",
    }
    return RunRecord(**{**base, **fields})


def _replayed_counts(candidate: Candidate) -> tuple[int, int, int]:
    r = replay(replica(candidate.type, candidate.settings), PROMPT, ANSWER, len(ANSWER))  # type: ignore[arg-type]  # has a replica
    return r.drafted, r.accepted, r.steps


def _case(
    real_counts: tuple[int, int, int] | None = None,
) -> tuple[Any, list[RunRecord], list[Candidate]]:
    defaults, other = _simple(2, 4), _simple(2, 8)
    space = [defaults, other.model_copy(update={"replayed": True})]
    p = plan(("none", defaults.text, other.text), ("a",), reps=1)
    prompts = tuple(pr.model_copy(update={"n_predict": len(ANSWER)}) for pr in p.prompts)
    p = p.model_copy(update={"warmup": False, "active": ((defaults.text,),), "prompts": prompts})
    drafted, accepted, steps = real_counts or _replayed_counts(defaults)
    tokens = len(ANSWER)
    records = [
        _record("none", 0, token_ids=ANSWER, total_ms=100.0 + 10.0 * (tokens - 1)),
        _record(
            defaults.text,
            1,
            drafted=drafted,
            accepted=accepted,
            steps=steps,
            total_ms=100.0 + 10.0 * (tokens - 1 - accepted) + 12.0 * steps + 1.0 * drafted,
        ),
    ]
    return p, records, space


def test_the_replica_is_used_only_when_it_matched_every_real_run() -> None:
    p, records, space = _case()
    assert check_replicas(p, records, space, TOKENS) == [
        ReplicaCheck(type="ngram-simple", runs=1, exact=1, used=True)
    ]
    drafted, accepted, steps = _replayed_counts(space[0])
    p, records, space = _case((drafted + 1, accepted, steps))
    assert check_replicas(p, records, space, TOKENS)[0].used is False
    # No tokens from the server: nothing replays (not a miss), nothing is trusted.
    assert check_replicas(p, records, space, {}) == [
        ReplicaCheck(type="ngram-simple", runs=0, exact=0, used=False)
    ]


def test_a_replayed_candidate_is_priced_from_its_replay_or_left_to_run() -> None:
    p, records, space = _case()
    model = CostModel(
        parameters={"decode_ms": 10.0, "drafted_ms.ngram": 1.0, "step_ms.ngram": 12.0},
        median_abs_error=0.02,
        p90_abs_error=0.05,
        points=20,
    )
    checks = check_replicas(p, records, space, TOKENS)
    out = predict(p, records, model, space, TOKENS, checks)
    other = space[1]
    assert other.text in out
    prediction = out[other.text][0]
    assert prediction is not None and prediction.low <= prediction.speedup <= prediction.high
    untrusted = [c.model_copy(update={"used": False}) for c in checks]
    assert other.text not in predict(p, records, model, space, TOKENS, untrusted)


def test_a_candidate_round_one_could_neither_run_nor_predict_runs_next() -> None:
    p, records, space = _case()
    rows = report_rows(p, records)
    predicted = {
        space[0].text: PredictedSpeedup(speedup=1.3, low=1.2, high=1.4),
        space[1].text: None,
    }
    assert next_round(p, rows, predicted) == (space[0].text, space[1].text)


def _result(speedup: float, low: float, high: float, rounds: int, verdict: str) -> PromptResult:
    return PromptResult(speedup=speedup, low=low, high=high, rounds=rounds, verdict=verdict)


def test_the_race_for_the_overall_pick() -> None:
    p = plan(("none", "a", "b", "c"), ("x",), reps=2)
    rows: list[Any] = []
    # Before a keep's rounds: one clearly behind the leader leaves, the others go on.
    early = {
        "a": _result(1.4, 1.3, 1.5, 2, "inconclusive"),
        "b": _result(1.35, 1.2, 1.45, 2, "inconclusive"),
        "c": _result(1.1, 1.05, 1.15, 2, "inconclusive"),
    }
    assert overall_race(p, rows, early) == ("a", "b")
    # After them: a keep is settled; one below the best keep cannot become the pick.
    p3 = plan(("none", "a", "b", "c"), ("x",), reps=3)
    late = {
        "a": _result(1.4, 1.3, 1.5, 3, "keep"),
        "b": _result(1.35, 1.0, 1.6, 3, "inconclusive"),
        "c": _result(1.5, 0.9, 2.0, 3, "inconclusive"),
    }
    assert overall_race(p3, rows, late) == ("c",)
    late["c"] = _result(1.45, 1.3, 1.6, 3, "keep")
    assert overall_race(p3, rows, late) is None
    assert overall_race(p3, rows, {"a": _result(0.8, 0.7, 0.9, 3, "drop")}) is None


@pytest.mark.parametrize("n_slots", [1, 4])
def test_ngram_mod_shares_one_pool_across_slots(n_slots: int) -> None:
    settings = {
        "--spec-ngram-mod-n-match": 2.0,
        "--spec-ngram-mod-n-max": 2.0,
        "--spec-ngram-mod-n-min": 1.0,
    }
    drafter = replica("ngram-mod", settings, n_slots)
    assert drafter is not None
    # The first request teaches the pool "5 6 -> 7 -> 8"; a second, other prompt drafts from it.
    replay(drafter, [5, 6, 7, 8, 1], [2], 1)
    r = replay(drafter, [3, 4, 5, 6], [7, 8, 0], 3)
    assert (r.drafted, r.accepted) == (1, 1)


def test_a_candidate_only_predicted_is_left_out_after_round_one() -> None:
    from spectui.core.tune.report import _out_after

    assert _out_after([], reps=1) is None  # round one still running: not decided
    assert _out_after([], reps=3) == 1
    assert _out_after([1, 2], reps=3) == 2
    assert _out_after([1, 2, 3], reps=3) is None
