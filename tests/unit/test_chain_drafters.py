"""Who drafted each step of a chain of spec types (`core.drafters.chain`), on hand-made tokens.

`_serve` plays llama-server's loop over a known answer as `common_speculative_draft` does: at
each draft point the chain's n-gram drafters in the server's order, the first non-empty draft
taken (cut to what may still be generated), else the model drafter's draft; only the drafter
that drafted learns from the acceptance. The namer sees only what a stream shows (steps with
their drafted/accepted counts, tokens without a step, the token ids) and must name each step as
the loop says, or say "unknown".
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from spectui.core.drafters.chain import UNKNOWN, ChainNamer, drafting_types
from spectui.core.drafters.ngram import NgramSimple
from spectui.core.drafters.settings import slot_factory
from spectui.core.events import (
    EngineEvent,
    StepEvent,
    SummaryEvent,
    TokenEvent,
    TokenOrigin,
    engine_event_adapter,
)
from spectui.core.llama.binary import parse_help
from spectui.core.llama.specconfig import SpecConfig
from spectui.core.request import GenerationRequest
from spectui.core.sessions.file import Session, SessionHeader
from spectui.core.sessions.replay import recompute
from spectui.core.stream.naming import RunNaming, namer_for, server_slots
from spectui.core.stream.run import ChunkProcessor

HELP = (Path(__file__).parent.parent / "fixtures" / "help.txt").read_text()

SIMPLE = {"--spec-ngram-simple-size-n": 2.0, "--spec-ngram-simple-size-m": 4.0}
MOD = {
    "--spec-ngram-mod-n-match": 2.0,
    "--spec-ngram-mod-n-max": 4.0,
    "--spec-ngram-mod-n-min": 1.0,
}
MAP_K = {"--spec-ngram-map-k-size-n": 2.0, "--spec-ngram-map-k-size-m": 4.0}
MODEL = {"--spec-draft-n-max": 2.0}

CYCLE = [11, 12, 13, 14, 15, 16, 17]
"""A word cycle, as the tiny target model speaks: no n-gram repeats until it comes round."""


@dataclass(frozen=True)
class Point:
    """One draft point as the stream shows it, and who really drafted there."""

    index: int
    """The token the draft was made before."""
    drafted: int
    """Draft length (0: no step)."""
    accepted: int
    """Accepted draft tokens."""
    truth: str | None
    """The drafter (None: nothing drafted)."""


def _serve(
    types: Sequence[str],
    flags: dict[str, float],
    prompt: Sequence[int],
    output: Sequence[int],
    n_predict: int,
    model_len: int = 2,
) -> list[Point]:
    """The server's steps over ``output`` (see the module); the model drafter drafts
    ``model_len`` tokens that are all right (MTP at full acceptance)."""
    order = drafting_types(types)
    pool: dict[int, int] = {}
    ngram = {t: slot_factory(t, flags, pool) for t in order if t.startswith("ngram-")}
    drafters = {t: make() for t, make in ngram.items() if make is not None}
    for d in drafters.values():
        d.begin(prompt)
    model = next((t for t in order if not t.startswith("ngram-")), None)
    points: list[Point] = []
    k = 1
    while k < len(output):
        room = n_predict - k - 1
        if room <= 0:
            break
        history = [*prompt, *output[: k - 1]]
        draft: list[int] = []
        who = None
        for t, d in drafters.items():
            draft = d.draft(history, output[k - 1])[:room]
            if draft:
                who = t
                break
        if not draft and model is not None:
            draft, who = list(output[k : k + min(model_len, room)]), model
        if not draft:
            points.append(Point(k, 0, 0, None))
            k += 1
            continue
        a = 0
        while a < len(draft) and k + a < len(output) and draft[a] == output[k + a]:
            a += 1
        if who in drafters:
            drafters[who].accept(a)
        points.append(Point(k, len(draft), a, who))
        k += a + 1
    return points


def _name(namer: ChainNamer, points: list[Point], output: Sequence[int]) -> list[str]:
    """The namer's name for each step, fed as a stream would feed it."""
    names = []
    for p in points:
        if p.drafted:
            names.append(namer.step(p.index, p.drafted, p.accepted, output[: p.index + 1]))
        else:
            namer.no_draft(p.index, output[: p.index + 1])
    return names


def _truth(points: list[Point]) -> list[str]:
    return [p.truth for p in points if p.truth is not None]


def test_the_engine_and_the_events_say_unknown_alike() -> None:
    from spectui.core.events import UNKNOWN_DRAFTER

    assert UNKNOWN == UNKNOWN_DRAFTER  # (core.drafters imports nothing of spectui's)


def test_the_server_tries_ngram_types_first_whatever_the_flag_says() -> None:
    assert drafting_types(["draft-mtp", "none", "ngram-mod", "ngram-simple"]) == (
        "ngram-simple",
        "ngram-mod",
        "draft-mtp",
    )
    assert drafting_types(["none"]) == ()


def test_a_single_type_names_every_step_without_token_ids() -> None:
    namer = ChainNamer(["none", "draft-mtp"], MODEL)
    assert namer.single == "draft-mtp" and not namer.needs_tokens
    namer.begin(None)
    assert namer.step(5, 2, 1, []) == "draft-mtp"


def test_early_steps_are_the_models_later_ones_the_ngrams() -> None:
    """The cycle has not come round yet: only MTP can draft; once it has, ngram-simple
    finds every key earlier in the history and takes the step."""
    types = ["ngram-simple", "draft-mtp"]
    flags = {**SIMPLE, **MODEL}
    prompt = [1, 11, 12]
    output = (CYCLE * 5)[2:]
    points = _serve(types, flags, prompt, output, n_predict=len(output))
    truth = _truth(points)
    assert truth[0] == "draft-mtp" and truth[-3] == "ngram-simple"
    assert {"draft-mtp", "ngram-simple"} == set(truth)
    namer = ChainNamer(types, flags)
    namer.begin(prompt, len(output))
    assert _name(namer, points, output) == truth


def test_the_last_drafts_are_cut_to_what_may_still_be_generated() -> None:
    types = ["ngram-simple", "draft-mtp"]
    flags = {"--spec-ngram-simple-size-n": 2.0, "--spec-ngram-simple-size-m": 8.0, **MODEL}
    prompt = [1, *CYCLE, *CYCLE]
    output = CYCLE * 2
    n_predict = len(output)
    points = _serve(types, flags, prompt, output, n_predict)
    cut = [p for p in points if p.truth == "ngram-simple" and p.drafted < 8]
    assert cut, "the n_predict cap shortened an n-gram draft"
    namer = ChainNamer(types, flags)
    namer.begin(prompt, n_predict)
    assert _name(namer, points, output) == _truth(points)
    # Without the limit the cut draft's length does not fit the replica's: unknown, not a guess.
    namer = ChainNamer(types, flags)
    namer.begin(prompt, None)
    names = _name(namer, points, output)
    assert UNKNOWN in names
    assert all(n in (t, UNKNOWN) for n, t in zip(names, _truth(points), strict=True))


def test_a_draft_length_that_does_not_fit_is_unknown_and_a_stateful_member_stays_lost() -> None:
    types = ["ngram-mod", "draft-mtp"]
    flags = {**MOD, **MODEL}
    prompt = [1, *CYCLE]
    output = CYCLE * 4
    points = _serve(types, flags, prompt, output, n_predict=len(output))
    first = next(i for i, p in enumerate(points) if p.truth == "ngram-mod")
    bad = points[first]
    points[first] = Point(bad.index, bad.drafted + 1, bad.accepted, bad.truth)
    namer = ChainNamer(types, flags)
    namer.begin(prompt, len(output))
    names = _name(namer, points, output)
    truth = _truth(points)
    steps_before = sum(1 for p in points[:first] if p.drafted)
    assert names[:steps_before] == truth[:steps_before]
    assert names[steps_before] == UNKNOWN
    # ngram-mod's state is not known any more: none of its later steps is named ...
    assert all(n == UNKNOWN for n, t in zip(names, truth, strict=True) if t == "ngram-mod")


def test_a_stateless_member_is_named_again_after_a_miss() -> None:
    types = ["ngram-simple", "draft-mtp"]
    flags = {**SIMPLE, **MODEL}
    prompt = [1, *CYCLE]
    output = CYCLE * 4
    points = _serve(types, flags, prompt, output, n_predict=len(output))
    first = next(i for i, p in enumerate(points) if p.truth == "ngram-simple")
    bad = points[first]
    points[first] = Point(bad.index, bad.drafted - 1, bad.accepted, bad.truth)
    namer = ChainNamer(types, flags)
    namer.begin(prompt, len(output))
    names = _name(namer, points, output)
    truth = _truth(points)
    wrong = [i for i, (n, t) in enumerate(zip(names, truth, strict=True)) if n != t]
    assert len(wrong) == 1 and names[wrong[0]] == UNKNOWN


def test_without_token_ids_a_chain_is_unknown() -> None:
    namer = ChainNamer(["ngram-simple", "draft-mtp"], {**SIMPLE, **MODEL})
    assert namer.needs_tokens
    namer.begin(None, 40)
    assert namer.step(1, 2, 2, []) == UNKNOWN


def test_a_member_without_replica_makes_every_step_unknown() -> None:
    namer = ChainNamer(["ngram-cache", "draft-mtp"], MODEL)
    prompt = [1, *CYCLE]
    output = CYCLE * 2
    namer.begin(prompt, len(output))
    assert namer.step(1, 2, 2, output[:2]) == UNKNOWN
    assert namer.step(4, 2, 2, output[:5]) == UNKNOWN


def test_two_model_drafters_cannot_be_told_apart() -> None:
    namer = ChainNamer(["draft-simple", "draft-mtp"], MODEL)
    namer.begin([1, 2, 3], 10)
    assert namer.step(1, 2, 1, [5, 6]) == UNKNOWN
    chain = ChainNamer(["ngram-simple", "draft-simple", "draft-mtp"], {**SIMPLE, **MODEL})
    chain.begin([1, 2, 3], 10)
    assert chain.step(1, 2, 1, [5, 6]) == UNKNOWN


def test_a_step_longer_than_the_model_may_draft_is_not_the_models() -> None:
    namer = ChainNamer(["ngram-simple", "draft-mtp"], {**SIMPLE, **MODEL})
    namer.begin([1, 2, 3], 20)
    assert namer.step(1, 3, 0, [5, 6]) == UNKNOWN  # n-max 2, and ngram-simple drafts nothing


def test_an_ngram_only_chain_names_each_member_and_a_step_none_drafted_is_unknown() -> None:
    types = ["ngram-mod", "ngram-simple"]
    flags = {**SIMPLE, **MOD}
    prompt = [1, *CYCLE, 21, 22, *CYCLE[:3]]
    output = [*CYCLE[3:], 23, *CYCLE, *CYCLE]
    points = _serve(types, flags, prompt, output, n_predict=len(output))
    namer = ChainNamer(types, flags)
    namer.begin(prompt, len(output))
    assert _name(namer, points, output) == _truth(points)
    namer = ChainNamer(types, flags)
    namer.begin(prompt, len(output))
    assert namer.step(1, 3, 0, output[:2]) == UNKNOWN  # neither member drafts at the start


def test_a_missed_draft_point_loses_the_stateful_members() -> None:
    types = ["ngram-map-k", "draft-mtp"]
    flags = {**MAP_K, **MODEL}
    prompt = [1, *CYCLE]
    output = CYCLE * 4
    points = _serve(types, flags, prompt, output, n_predict=len(output))
    namer = ChainNamer(types, flags)
    namer.begin(prompt, len(output))
    kept = [p for p in points if p.index != points[1].index]  # one point the stream lost
    names = _name(namer, kept, output)
    assert names[0] == _truth(points)[0]
    assert all(n == UNKNOWN for n in names[1:])


def test_requests_of_one_start_share_the_state() -> None:
    """ngram-mod's pool outlives a request: the second request drafts from the first's."""
    types = ["ngram-mod", "draft-mtp"]
    flags = {**MOD, **MODEL}
    namer = ChainNamer(types, flags)
    first_prompt, first = [1, *CYCLE, *CYCLE], CYCLE[:3]
    namer.begin(first_prompt, len(first))
    _name(namer, _serve(types, flags, first_prompt, first, len(first)), first)
    second_prompt, second = [2, 13], [*CYCLE[3:], 11]
    namer.begin(second_prompt, len(second))
    step = namer.step(1, 3, 3, second[:2])  # (cut to the 3 tokens still to come)
    assert step == "ngram-mod"  # a fresh start would not know the cycle yet
    fresh = ChainNamer(types, flags)
    fresh.begin(second_prompt, len(second))
    assert fresh.step(1, 3, 3, second[:2]) == UNKNOWN  # longer than the model's n-max 2


def test_a_server_not_started_for_spectui_names_only_stateless_members() -> None:
    types = ["ngram-simple", "ngram-mod", "draft-mtp"]
    flags = {**SIMPLE, **MOD, **MODEL}
    prompt = [1, *CYCLE]
    output = CYCLE * 3
    points = _serve(types, flags, prompt, output, n_predict=len(output))
    namer = ChainNamer(types, flags, state_known=False)
    namer.begin(prompt, len(output))
    names = _name(namer, points, output)
    for name, truth in zip(names, _truth(points), strict=True):
        assert name == (truth if truth == "ngram-simple" else UNKNOWN)


@settings(max_examples=150, deadline=None)
@given(
    chain=st.sampled_from(
        [
            ("ngram-simple", "draft-mtp"),
            ("ngram-mod", "draft-mtp"),
            ("ngram-map-k", "draft-mtp"),
            ("ngram-map-k4v", "draft-mtp"),
            ("draft-mtp", "ngram-simple", "ngram-mod"),
        ]
    ),
    prompt=st.lists(st.integers(1, 4), min_size=1, max_size=12),
    output=st.lists(st.integers(1, 4), min_size=1, max_size=60),
    extra=st.integers(0, 3),
    model_len=st.integers(1, 2),
)
def test_every_step_named_as_the_server_drafted_it(
    chain: tuple[str, ...],
    prompt: list[int],
    output: list[int],
    extra: int,
    model_len: int,
) -> None:
    flags = {
        **SIMPLE,
        **MOD,
        **MAP_K,
        "--spec-ngram-map-k4v-size-n": 2.0,
        "--spec-ngram-map-k4v-size-m": 3.0,
        "--spec-ngram-map-k4v-min-hits": 1.0,
        **MODEL,
    }
    n_predict = len(output) + extra
    points = _serve(chain, flags, prompt, output, n_predict, model_len)
    namer = ChainNamer(chain, flags)
    namer.begin(prompt, n_predict)
    names = _name(namer, points, output)
    assert names == _truth(points)
    drafted = {n: sum(p.drafted for p in points if p.truth == n) for n in set(names)}
    assert sum(drafted.values()) == sum(p.drafted for p in points)


def _payloads(output: Sequence[int], points: list[Point]) -> list[str]:
    """`/completion` chunks (one token each, with its id) of a run whose steps are ``points``."""
    chunks: list[str] = []
    drafted = accepted = 0

    def chunk(i: int) -> None:
        timings = {"predicted_n": i + 1, "draft_n": drafted, "draft_n_accepted": accepted}
        body = {"content": f" w{output[i]}", "tokens_predicted": i + 1, "tokens": [output[i]]}
        chunks.append(json.dumps({**body, "timings": timings}))

    chunk(0)
    done = 1
    for p in points:
        if p.drafted:
            drafted, accepted = drafted + p.drafted, accepted + p.accepted
        for i in range(p.index, p.index + (p.accepted + 1 if p.drafted else 1)):
            chunk(i)
            done = i + 1
    for i in range(done, len(output)):
        chunk(i)
    return chunks


def test_the_stream_names_steps_and_draft_tokens_and_sums_them_by_drafter() -> None:
    types = ["ngram-simple", "draft-mtp"]
    flags = {**SIMPLE, **MODEL}
    prompt = [1, 11, 12]
    output = (CYCLE * 5)[2:]
    points = _serve(types, flags, prompt, output, n_predict=len(output))
    sizes = ("--spec-ngram-simple-size-n", "2", "--spec-ngram-simple-size-m", "4")
    spec = SpecConfig(types=tuple(types), draft_n_max=2, extra_args=sizes)
    namer = namer_for(spec)
    assert namer is not None
    processor = ChunkProcessor(chat=False, naming=RunNaming(namer, prompt, len(output)))
    events = [
        e for i, p in enumerate(_payloads(output, points)) for e in processor.feed(p, i / 100)
    ]
    steps = [e for e in events if isinstance(e, StepEvent)]
    assert [s.drafter for s in steps] == _truth(points)
    for token in (e for e in events if isinstance(e, TokenEvent)):
        if token.origin is TokenOrigin.DRAFT:
            assert token.step is not None and token.drafter == steps[token.step].drafter
        else:
            assert token.drafter is None
    metrics = processor.summary(t=1.0).metrics
    assert len(metrics.by_drafter) == 2
    for name, share in metrics.by_drafter.items():
        mine = [p for p in points if p.truth == name]
        assert share.drafted == sum(p.drafted for p in mine)
        assert share.accepted == sum(p.accepted for p in mine)
        assert share.steps == len(mine)
    shares = metrics.by_drafter.values()
    totals = [sum(getattr(s, k) for s in shares) for k in ("drafted", "accepted", "steps")]
    assert totals == [metrics.drafted, metrics.accepted, metrics.steps]


def test_a_single_type_run_has_one_share_and_no_spec_none() -> None:
    namer = namer_for(SpecConfig(types=("draft-mtp",)))
    assert namer is not None and namer.single == "draft-mtp"
    assert namer_for(SpecConfig(types=("none",))) is None
    assert namer_for(None) is None
    processor = ChunkProcessor(chat=False, naming=RunNaming(namer, None, 10))
    output = [11, 12, 13, 14, 15, 16]
    points = [Point(1, 2, 2, "draft-mtp"), Point(4, 2, 1, "draft-mtp")]
    for i, payload in enumerate(_payloads(output, points)):
        processor.feed(payload, i / 100)
    by = processor.summary(t=1.0).metrics.by_drafter
    assert {k: (v.drafted, v.accepted, v.steps) for k, v in by.items()} == {"draft-mtp": (4, 3, 2)}


def test_the_namer_drafts_with_the_flags_the_server_got_last() -> None:
    """Spec flags after ``--`` (the launch's extra arguments) come after the spec's on the
    server's command line, so they win."""
    spec = SpecConfig.parse("ngram-simple,draft-mtp --spec-ngram-simple-size-n 5")
    extra = ("--spec-ngram-simple-size-n=2", "--spec-ngram-simple-size-m", "4")
    namer = namer_for(spec, HELP, extra_args=(*extra, "--spec-draft-n-max", "2"))
    assert namer is not None
    prompt = [1, *CYCLE]
    output = CYCLE * 3
    points = _serve(["ngram-simple", "draft-mtp"], {**SIMPLE, **MODEL}, prompt, output, 21)
    namer.begin(prompt, 21)
    assert _name(namer, points, output) == _truth(points)
    assert "ngram-simple" in _truth(points)
    # With the spec's own flags alone the replica drafts otherwise: its steps are unknown.
    alone = namer_for(spec, HELP)
    assert alone is not None
    alone.begin(prompt, 21)
    assert set(_name(alone, points, output)) - {"draft-mtp"} == {UNKNOWN}


def test_namer_reads_the_config_and_the_help() -> None:
    spec = SpecConfig.parse("ngram-mod,draft-mtp --spec-ngram-mod-n-match 12")
    namer = namer_for(spec, HELP)
    assert namer is not None and namer.needs_tokens
    assert namer.types == ("ngram-mod", "draft-mtp")
    assert server_slots(1, ()) == 1
    assert server_slots(1, ("--parallel", "3")) == 3
    assert server_slots(1, ("-np", "-1")) == 4


def test_a_recording_keeps_the_drafters_and_replay_recounts_the_shares(tmp_path: Path) -> None:
    types = ["ngram-simple", "draft-mtp"]
    flags = {**SIMPLE, **MODEL}
    prompt = [1, 11, 12]
    output = (CYCLE * 4)[2:]
    points = _serve(types, flags, prompt, output, n_predict=len(output))
    namer = ChainNamer(types, flags)
    processor = ChunkProcessor(chat=False, naming=RunNaming(namer, prompt, len(output)))
    live: list[EngineEvent] = []
    for i, payload in enumerate(_payloads(output, points)):
        live += processor.feed(payload, i / 100)
    live.append(processor.summary(t=1.0))
    # Written as JSON Lines and read back, as a session file does.
    lines = [e.model_dump_json() for e in live]
    read = [engine_event_adapter.validate_json(line) for line in lines]
    assert read == live
    header = SessionHeader(request=GenerationRequest(prompt="p", n_predict=len(output)))
    replayed = recompute(Session(path=tmp_path / "run.jsonl", header=header, events=read))
    recorded = next(e for e in live if isinstance(e, SummaryEvent)).metrics.by_drafter
    assert replayed.summary.metrics.by_drafter == recorded
    assert set(recorded) == {"ngram-simple", "draft-mtp"}
    steps = [e for e in replayed.events if isinstance(e, StepEvent)]
    assert [s.drafter for s in steps] == _truth(points)


def _simple_reference(n: int, m: int, history: Sequence[int], sampled: int) -> list[int]:
    """`common_ngram_simple_draft` as upstream writes it: every window, from the end back."""
    cur = len(history)
    if cur <= n + m + 1:
        return []
    pattern = [*history[cur - n + 1 :], sampled]
    for j in range(cur - n - 1, 0, -1):
        if list(history[j : j + n]) == pattern:
            copy = min(m, cur - (j + n))
            return [] if copy < n else list(history[j + n : j + n + copy])
    return []


@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(1, 4),
    m=st.integers(1, 6),
    history=st.lists(st.integers(0, 3), max_size=40),
    sampled=st.integers(0, 3),
)
def test_ngram_simple_finds_the_window_upstream_finds(
    n: int, m: int, history: list[int], sampled: int
) -> None:
    expected = _simple_reference(n, m, history, sampled)
    assert NgramSimple(size_n=n, size_m=m).draft(history, sampled) == expected
    assert NgramSimple(size_n=n, size_m=m).draft(tuple(history), sampled) == expected


def _merge(chunks: list[str], at: int) -> list[str]:
    """Chunks ``at`` and ``at + 1`` as one (the server holding a token back for the next)."""
    first, second = json.loads(chunks[at]), json.loads(chunks[at + 1])
    second["content"] = first["content"] + second["content"]
    second["tokens"] = first["tokens"] + second["tokens"]
    return [*chunks[:at], json.dumps(second), *chunks[at + 2 :]]


def test_a_chunk_of_several_steps_is_unknown_and_a_stateless_member_is_named_after_it() -> None:
    types = ["ngram-simple", "draft-mtp"]
    flags = {**SIMPLE, **MODEL}
    prompt = [1, 11, 12]
    output = (CYCLE * 5)[2:]
    points = _serve(types, flags, prompt, output, n_predict=len(output))
    chunks = _payloads(output, points)
    # The second and third steps' tokens in one chunk: more than one split fits it.
    for _ in range(6):
        chunks = _merge(chunks, points[1].index)
    namer = ChainNamer(types, flags)
    processor = ChunkProcessor(chat=False, naming=RunNaming(namer, prompt, len(output)))
    events = [e for i, c in enumerate(chunks) for e in processor.feed(c, i / 100)]
    truth = {p.index: p.truth for p in points if p.truth}
    steps = [e for e in events if isinstance(e, StepEvent)]
    for step in steps:
        if step.steps == 1 and step.split_known:
            assert step.drafter in (truth[step.first_token], UNKNOWN)
        else:
            assert step.drafter == UNKNOWN
    assert any(s.drafter == UNKNOWN for s in steps)
    for token in (e for e in events if isinstance(e, TokenEvent)):
        if token.origin is TokenOrigin.DRAFT:  # its step's name (an event may be several)
            assert token.step is not None
            mine = next(s for s in steps if s.index <= token.step < s.index + s.steps)
            assert token.drafter == mine.drafter
    assert steps[-1].drafter == "ngram-simple"  # stateless: named again after the merge
    metrics = processor.summary(t=1.0).metrics
    shares = metrics.by_drafter.values()
    totals = [sum(getattr(s, k) for s in shares) for k in ("drafted", "accepted", "steps")]
    assert totals == [metrics.drafted, metrics.accepted, metrics.steps]


def test_compare_takes_a_chain_as_one_config() -> None:
    from spectui.core.compare.setup import parse_configs

    configs = parse_configs(["ngram-mod,draft-mtp", "ngram-mod"], parse_help(HELP))
    assert [c.name for c in configs] == ["none", "ngram-mod,draft-mtp", "ngram-mod"]
    assert configs[1].spec.types == ("ngram-mod", "draft-mtp")
    assert "ngram-mod,draft-mtp" in configs[1].args  # one --spec-type, one server


def test_the_text_summary_gives_each_drafters_share() -> None:
    from spectui.commands.stream import summary_line
    from spectui.core.events import DrafterStats, RunMetrics

    shares = {
        "draft-mtp": DrafterStats(drafted=16, accepted=15, steps=8),
        "ngram-simple": DrafterStats(drafted=48, accepted=48, steps=6),
    }
    metrics = RunMetrics(tokens=80, drafted=64, accepted=63, steps=14, by_drafter=shares)
    assert "by drafter draft-mtp 15/16, ngram-simple 48/48" in summary_line(metrics)
    single = RunMetrics(
        tokens=80, drafted=16, accepted=15, steps=8, by_drafter=dict(list(shares.items())[:1])
    )
    assert "by drafter" not in summary_line(single)
