"""Round one without a run: a candidate's steps replayed from the baseline's tokens.

A replayed candidate (`Candidate.replayed`) is one its type's drafter replica (`core.drafters`)
can stand in for. Its round one is the server start it would have had, replayed over the
baseline's answers: the warm-up first (when the plan has one), then every prompt in the plan's
order, on one drafter (ngram-mod's pool lives as long as the server). What comes out is exact
while the candidate's answers are the baseline's, which holds for most runs at temperature 0;
where an answer would change, the steps after the change are the baseline's text's, not its own,
and the timing rounds then measure the real thing.

Before any replay predicts, the replica is checked (`check_replicas`): every real round-one run
of its type whose answer is the baseline's is replayed too, and must match its drafted and
accepted counts exactly. One miss, or no such run at all, and the type's candidates run instead.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

from spectui.core.compare.models import ComparePlan
from spectui.core.compare.records import RunRecord
from spectui.core.compare.store import ServerOptions
from spectui.core.drafters.ngram import Replay, replay
from spectui.core.drafters.ngram_map import SERVER_SLOTS
from spectui.core.drafters.settings import replica
from spectui.core.llama.launch import LaunchConfig
from spectui.core.stream.naming import server_slots as launched_slots
from spectui.core.tune.models import ReplicaCheck
from spectui.core.tune.space import Candidate


def server_slots(server: ServerOptions) -> int:
    """The slots the comparison's servers have: spectui's ``--parallel`` (`LaunchConfig`), or
    the last ``--parallel``/``-np`` among the extra arguments (which come after it); -1 (auto)
    is 4."""
    return launched_slots(LaunchConfig.model_fields["parallel"].default, server.extra_args)


def _baseline_answers(
    plan: ComparePlan, records: Sequence[RunRecord]
) -> tuple[dict[str, RunRecord], RunRecord | None]:
    """The baseline's first counted run of each prompt, and its warm-up (with token ids)."""
    base = plan.baseline.name
    answers: dict[str, RunRecord] = {}
    warmup = None
    for r in sorted(records, key=lambda r: r.seq):
        if r.config != base or not r.ok or not r.token_ids:
            continue
        if r.warmup:
            warmup = warmup or r
        else:
            answers.setdefault(r.prompt, r)
    return answers, warmup


Request = tuple[tuple[int, ...], tuple[int, ...], int]
"""One request of a replayed start: prompt tokens, the baseline's answer, n_predict."""


@functools.lru_cache(maxsize=512)
def _replayed(
    type_: str, settings: tuple[tuple[str, float], ...], n_slots: int, requests: tuple[Request, ...]
) -> tuple[Replay, ...] | None:
    # The document is recomputed after every run and a replay is the same every time: a
    # round's worth of them cost a tenth of a second per save before this cache.
    drafter = replica(type_, dict(settings), n_slots)
    if drafter is None:
        return None
    return tuple(replay(drafter, prompt, answer, n) for prompt, answer, n in requests)


def replay_start(
    candidate: Candidate,
    plan: ComparePlan,
    records: Sequence[RunRecord],
    prompt_tokens: Mapping[str, Sequence[int]],
    n_slots: int = SERVER_SLOTS,
) -> dict[str, Replay] | None:
    """Prompt key -> the candidate's replayed steps there, as one round-one server start; None
    when it cannot be replayed (no replica, a prompt's tokens or the baseline's answer missing).
    """
    answers, warmup = _baseline_answers(plan, records)
    if any(p.key not in prompt_tokens or p.key not in answers for p in plan.prompts):
        return None
    requests: list[Request] = []
    if plan.warmup:
        if warmup is None:
            return None
        first = plan.prompts[0]
        requests.append(
            (
                tuple(prompt_tokens[first.key]),
                tuple(warmup.token_ids),
                plan.request(first).n_predict,
            )
        )
    for prompt in plan.prompts:
        answer = tuple(answers[prompt.key].token_ids)
        requests.append((tuple(prompt_tokens[prompt.key]), answer, plan.request(prompt).n_predict))
    settings = tuple(sorted(candidate.settings.items()))
    out = _replayed(candidate.type, settings, n_slots, tuple(requests))
    if out is None:
        return None
    counted = out[1:] if plan.warmup else out
    return {p.key: r for p, r in zip(plan.prompts, counted, strict=True)}


def check_replicas(
    plan: ComparePlan,
    records: Sequence[RunRecord],
    space: Sequence[Candidate],
    prompt_tokens: Mapping[str, Sequence[int]],
    n_slots: int = SERVER_SLOTS,
) -> list[ReplicaCheck]:
    """Per type with replayed candidates: its real round-one runs of an unchanged answer,
    replayed, against their counts (see the module)."""
    answers, _ = _baseline_answers(plan, records)
    firsts: dict[tuple[str, str], RunRecord] = {}
    for r in sorted(records, key=lambda r: r.seq):
        if r.ok and not r.warmup and r.round == 1:
            firsts.setdefault((r.config, r.prompt), r)
    out = []
    for type_ in dict.fromkeys(c.type for c in space if c.replayed):
        runs = exact = 0
        for c in space:
            if c.type != type_ or c.replayed:
                continue
            replays = replay_start(c, plan, records, prompt_tokens, n_slots)
            if replays is None:
                continue  # nothing to replay with (no tokens from the server): not a miss
            for prompt in plan.prompts:
                real = firsts.get((c.text, prompt.key))
                base = answers.get(prompt.key)
                if real is None or base is None or real.text != base.text:
                    continue
                runs += 1
                got = replays.get(prompt.key)
                exact += got is not None and (got.drafted, got.accepted) == (
                    real.drafted,
                    real.accepted,
                )
        out.append(ReplicaCheck(type=type_, runs=runs, exact=exact, used=0 < runs == exact))
    return out
