"""Chains of tune's best n-gram candidates with its model drafter, added once round one is run.

Which n-gram knobs suit a chain is not known before a run, so the first round's space holds no
chain. Round one ranks the candidates (by predicted speedup where the cost model explains the
runs, else by measured speedup: as the race itself ranks them); the best candidate of each of
the `CHAIN_TOP` best n-gram types then goes before the model drafter (its own best candidate)
as a chain (`space.chain_of`). The chains join the plan from round two, as a candidate round
one neither ran nor predicted does: measured there, then raced. A chain is one config, run and
measured as a whole; nothing is added up from its members' results.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence

from spectui.core.compare.models import CompareConfig
from spectui.core.compare.outcomes import Verdict
from spectui.core.compare.summary_row import SummaryRow
from spectui.core.errors import SpectuiError
from spectui.core.llama.specconfig import SpecConfig
from spectui.core.tune.models import CandidateResult, TuneDocument
from spectui.core.tune.predict import usable
from spectui.core.tune.space import CHAIN_MODELS, Candidate, chain_of, is_ngram

CHAIN_TOP = 2
"""Chains made: one for each of this many best n-gram types (its best candidate)."""


def round_one_score(result: CandidateResult, by_prediction: bool) -> float | None:
    """How round one ranks a candidate: ``by_prediction`` (the cost model explains the runs),
    its predicted speedup, else the one measured (None: not run, or not predicted)."""
    predicted = result.overall.predicted
    if by_prediction:
        return predicted.speedup if predicted is not None else None
    return result.overall.speedup


def _broken(rows: Sequence[SummaryRow]) -> set[str]:
    """Candidates that failed or changed an answer somewhere: never a chain's member."""
    return {
        r.config
        for r in rows
        if r.runs and (r.verdict == Verdict.FAILED or r.divergent_changes > 0)
    }


def chain_picks(
    space: Sequence[Candidate],
    results: Sequence[CandidateResult],
    rows: Sequence[SummaryRow],
    by_prediction: bool = False,
) -> list[tuple[Candidate, Candidate, Candidate]]:
    """(chain, its n-gram member, its model member) for the best n-gram candidates of round one
    (``results``: its candidates' results; ``rows``: its summary; ``by_prediction``: ranked by
    the predictions), best first; none when the space has no model drafter or round one ranked
    no n-gram candidate."""
    broken = _broken(rows)
    scores = {
        r.config: score
        for r in results
        if r.config not in broken and (score := round_one_score(r, by_prediction)) is not None
    }
    usable = [c for c in space if c.text not in broken]
    model_type = next((t for t in CHAIN_MODELS if any(c.type == t for c in usable)), None)
    if model_type is None:
        return []
    # Its best candidate; the first (its defaults) when round one ranked none of them.
    models = [c for c in usable if c.type == model_type]
    model = max(models, key=lambda c: scores.get(c.text, -math.inf))
    best: dict[str, Candidate] = {}
    for c in (c for c in usable if is_ngram(c) and c.text in scores):
        if c.type not in best or scores[c.text] > scores[best[c.type].text]:
            best[c.type] = c
    ranked = sorted(best.values(), key=lambda c: -scores[c.text])[:CHAIN_TOP]
    return [(chain_of(ngram, model), ngram, model) for ngram in ranked]


def chain_config(
    chain: Candidate, ngram: CompareConfig, model: CompareConfig
) -> CompareConfig | None:
    """The chain's config from its members' (each checked against the binary when the space
    was built): the types joined, the model's arguments, then the n-gram's. None when a member
    names no ``--spec-type`` (a build without it cannot chain) or the text does not read."""
    if ngram.args[:1] != ("--spec-type",) or model.args[:1] != ("--spec-type",):
        return None
    try:
        spec = SpecConfig.parse(chain.text, draft_model=model.spec.draft_model)
    except SpectuiError:
        return None
    if not spec.needs_draft_model:
        spec = spec.model_copy(update={"draft_model": None})
    args = ("--spec-type", chain.type, *model.args[2:], *ngram.args[2:])
    return CompareConfig(name=shlex.join(shlex.split(chain.text)), spec=spec, args=args)


def with_chains(document: TuneDocument) -> TuneDocument:
    """``document`` after round one with its chains (`chain_picks`) in the space and the plan,
    to run from round two; ``document`` itself when there are none, or none not already there
    (a resumed tune), or round one is not the last round run."""
    compare = document.compare
    plan = compare.plan
    if plan.reps != 1:
        return document
    configs = {c.name: c for c in plan.configs}
    taken = {c.args for c in plan.configs}
    added: list[tuple[Candidate, CompareConfig]] = []
    ranked = usable(document.cost_model)
    picks = chain_picks(document.space, document.candidates, compare.summary, ranked)
    for chain, ngram, model in picks:
        members = configs.get(ngram.text), configs.get(model.text)
        if members[0] is None or members[1] is None:
            continue
        config = chain_config(chain, members[0], members[1])
        if config is None or config.name in configs or config.args in taken:
            continue
        added.append((chain, config))
        taken.add(config.args)
    if not added:
        return document
    # Round one's schedule spelled out, so the chains are not read as having run in it.
    first = plan.active or (tuple(c.name for c in plan.configs if not c.is_baseline),)
    plan = plan.model_copy(
        update={"configs": (*plan.configs, *(c for _, c in added)), "active": first}
    )
    return document.model_copy(
        update={
            "space": [*document.space, *(chain for chain, _ in added)],
            "compare": compare.model_copy(update={"plan": plan}),
        }
    )
