"""The ngram-map-k / ngram-map-k4v replicas: behaviour pinned on hand-made tokens, and real runs
of this llama.cpp build reproduced exactly (tests/fixtures/drafters/map_real.json)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from spectui.core.drafters.ngram import replay
from spectui.core.drafters.ngram_map import (
    KEY_MAP_SIZE,
    NgramMap,
    ServerSlots,
    _hash,
    map_drafter_for,
)

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "drafters" / "map_real.json"


def _begun(
    history: list[int], *, size_m: int = 3, key_only: bool = True, min_hits: int = 1
) -> NgramMap:
    drafter = NgramMap(size_n=2, size_m=size_m, key_only=key_only, min_hits=min_hits)
    drafter.begin(history)
    return drafter


def test_hash_wraps_at_32_bits() -> None:
    tokens = [262000, 5, 7]
    expected = 0
    for t in tokens:
        expected = (expected * 2654435761 + t) % 2**32
    assert _hash(tokens, 0, 3) == expected % KEY_MAP_SIZE


def test_repeated_pattern_drafts_its_continuation() -> None:
    history = [0, 5, 6, 7, 8, 9, 10, 11, 12, 13, 5]
    assert _begun(history).draft(history, 6) == [7, 8, 9]


def test_occurrence_at_index_zero_is_no_match() -> None:
    history = [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 5]
    assert _begun(history).draft(history, 6) == []


def test_too_short_history_drafts_nothing() -> None:
    history = [0, 5, 6, 7, 5]  # under 2n + m tokens
    assert _begun(history).draft(history, 6) == []


def test_accepted_count_caps_the_keys_next_draft() -> None:
    history = [0, 5, 6, 7, 8, 9, 10, 11, 12, 13, 5]
    drafter = _begun(history)
    assert drafter.draft(history, 6) == [7, 8, 9]
    drafter.accept(1)
    assert drafter.draft(history, 6) == [7]
    drafter.accept(0)
    assert drafter.draft(history, 6) == []  # a cap of 0 never drafts that key again


def test_min_hits_holds_back_k4v_but_not_map_k() -> None:
    history = [0, 5, 6, 7, 8, 9, 10, 11, 12, 13, 5]
    k4v = _begun(history, key_only=False, min_hits=2)
    assert k4v.draft(history, 6) == []  # first hit
    assert k4v.draft(history, 6) == [7, 8, 9]  # second hit
    assert _begun(history, min_hits=2).draft(history, 6) == [7, 8, 9]


def test_k4v_needs_a_value_twice_as_frequent_as_the_others() -> None:
    tied = [0, 5, 6, 1, 2, 9, 5, 6, 3, 4, 9, 9, 9, 9, 5]
    assert _begun(tied, size_m=2, key_only=False).draft(tied, 6) == []
    assert _begun(tied, size_m=2).draft(tied, 6) == [3, 4]  # map-k has no such rule
    dominant = [0, 5, 6, 3, 4, 9, 5, 6, 1, 2, 9, 5, 6, 1, 2, 9, 9, 9, 9, 5]
    assert _begun(dominant, size_m=2, key_only=False).draft(dominant, 6) == [1, 2]


def test_k4v_drafts_from_the_matched_occurrence_not_the_dominant_value() -> None:
    # upstream checks that some value dominates, then copies what followed match_pos
    history = [0, 5, 6, 1, 2, 9, 5, 6, 1, 2, 9, 5, 6, 3, 4, 9, 9, 9, 9, 5]
    assert _begun(history, size_m=2, key_only=False).draft(history, 6) == [3, 4]


def test_state_carries_into_the_next_request_of_a_slot() -> None:
    first = [0, 5, 6, 7, 8, 9, 10, 11, 12, 13, 5]
    drafter = _begun(first)
    assert drafter.draft(first, 6) == [7, 8, 9]
    drafter.accept(2)
    longer = [*first, 6, 7, 20, 21, 22, 23, 24, 25]
    drafter.draft(longer, 26)  # the history grew past the next prompt
    second = [0, 5, 6, 7, 8, 9, 10, 11, 12, 13, 5, 6, 30]
    drafter.begin(second)  # shorter: keys from index 13 - n - m on are dropped, this one kept
    assert drafter.draft(second, 5) == []  # [30, 5] is no key
    history = [*second, 40, 5]
    assert drafter.draft(history, 6) == [7, 8]  # the key remembers its last acceptance


def test_fresh_map_drafts_the_full_continuation_where_state_caps_it() -> None:
    history = [0, 5, 6, 7, 8, 9, 10, 11, 12, 13, 5, 6, 30, 40, 5]
    assert _begun(history).draft(history, 6) == [7, 8, 9]


def test_server_slots_route_like_the_server() -> None:
    slots = ServerSlots(lambda: _begun([]))
    a = [2, *range(100, 130)]
    b = [2, *range(200, 230)]
    slots.begin(a)
    assert slots.current == 3  # all unused: the last slot
    slots.begin(a)
    assert slots.current == 3  # the same prompt: the slot holding it
    slots.begin(b)
    assert slots.current == 2  # one shared token is under 10 %: least recently used
    slots.begin(a)
    assert slots.current == 3


def test_map_drafter_for_settings() -> None:
    flags = {"--spec-ngram-map-k-size-n": 3.0, "--spec-ngram-map-k-size-m": 8.0}
    drafter = map_drafter_for("ngram-map-k", flags)
    assert isinstance(drafter, ServerSlots)
    made = drafter.drafters[0]
    assert isinstance(made, NgramMap) and (made.size_n, made.size_m, made.key_only) == (3, 8, True)
    k4v = {"--spec-ngram-map-k4v-size-n": 3.0, "--spec-ngram-map-k4v-size-m": 8.0}
    assert map_drafter_for("ngram-map-k4v", k4v) is None  # k4v reads min-hits
    assert map_drafter_for("ngram-map-k4v", {**k4v, "--spec-ngram-map-k4v-min-hits": 2}) is not None
    assert map_drafter_for("ngram-mod", flags) is None


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 3), min_size=8, max_size=60),
    st.integers(1, 3),
    st.integers(1, 5),
    st.booleans(),
)
def test_draft_copies_what_followed_an_earlier_occurrence(
    tokens: list[int], n: int, m: int, key_only: bool
) -> None:
    drafter = NgramMap(size_n=n, size_m=m, key_only=key_only)
    drafter.begin(tokens[:4])
    for cur in range(4, len(tokens)):
        history, sampled = tokens[:cur], tokens[cur]
        draft = drafter.draft(history, sampled)
        if draft:
            key = [*history[cur - n + 1 :], sampled]
            assert len(draft) <= m
            assert any(
                history[j : j + n] == key and history[j + n : j + n + len(draft)] == draft
                for j in range(1, cur - n)
            )
            drafter.accept(len(draft) // 2)


def _replay_start(config: dict[str, Any], outputs: dict[str, list[int]]) -> dict[str, list[int]]:
    """[drafted, accepted] per prompt of one server start: the warm-up request, then each prompt
    in order, on one drafter; ``outputs`` replaces the baseline's output of a prompt."""
    data = _fixture()
    drafter = map_drafter_for(config["type"], config["settings"])
    assert drafter is not None
    n_predict, requests = data["n_predict"], data["requests"]
    warmup = requests[data["warmup"]]
    replay(drafter, warmup["prompt"], outputs.get(data["warmup"], warmup["out"]), n_predict)
    got = {}
    for key, request in requests.items():
        r = replay(drafter, request["prompt"], outputs.get(key, request["out"]), n_predict)
        got[key] = [r.drafted, r.accepted]
    return got


def _fixture() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(FIXTURE.read_text())
    return data


def test_replica_reproduces_real_runs_of_unchanged_answers() -> None:
    """Over the baseline's tokens, every real run whose answer is the baseline's."""
    for config in _fixture()["configs"]:
        got = _replay_start(config, {})
        assert {k: got[k] for k in config["real"]} == config["real"], config["name"]


def test_replica_reproduces_real_runs_over_their_own_tokens() -> None:
    """Where an answer changed, over the tokens the server generated: this pins the routing of
    requests to slots (one shared map drafts nothing on code-edit here)."""
    for config in _fixture()["configs"]:
        changed = config.get("changed", {})
        if not changed:
            continue
        outputs = {k: v["out"] for k, v in changed.items()}
        expected = {**config["real"], **{k: v["real"] for k, v in changed.items()}}
        assert _replay_start(config, outputs) == expected, config["name"]
