"""Everything a tune checks and builds before a server starts: the space and the first round.

Fairness is compare's (`CompareSetup`): one binary, model, ctx size, sampling and seed. The space
comes from this binary's ``--help`` (its spec types, flags and defaults) and the GGUF headers
(MTP layers, the draft model's architecture).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from spectui.core.compare.budget import MemoryBudget
from spectui.core.compare.models import CompareConfig, ComparePlan, ComparePrompt
from spectui.core.compare.setup import CompareSetup, parse_configs
from spectui.core.compare.store import CompareDocument
from spectui.core.errors import SpectuiError
from spectui.core.llama.binary import help_text
from spectui.core.llama.gguf_meta import architecture, gguf_metadata, mtp_layers
from spectui.core.request import Delivery, Sampling
from spectui.core.tune.models import TuneDocument
from spectui.core.tune.runner import new_document
from spectui.core.tune.space import (
    Candidate,
    ModelFacts,
    Skipped,
    build_space,
    mark_predicted,
    mark_replayed,
)


class TuneSetupError(SpectuiError):
    """A tune that cannot run as asked."""

    title = "Cannot tune"
    exit_code = 2


def model_facts(model: Path, draft_model: Path | None) -> ModelFacts:
    """The model's MTP layers and the draft model's architecture, from their GGUF headers."""
    draft_arch = architecture(gguf_metadata(draft_model)) if draft_model is not None else None
    return ModelFacts(
        draft_model=draft_model,
        draft_architecture=draft_arch or None,
        mtp_layers=mtp_layers(gguf_metadata(model)),
    )


def space_configs(
    setup: CompareSetup,
    candidates: Sequence[Candidate],
    draft_model: Path | None,
) -> tuple[tuple[CompareConfig, ...], list[Candidate], list[Skipped]]:
    """The baseline and every candidate this binary accepts; the rest skipped with the reason."""
    configs = list(parse_configs(["none"], setup.caps))
    kept: list[Candidate] = []
    skipped: list[Skipped] = []
    for candidate in candidates:
        try:
            (config,) = parse_configs(
                [candidate.text], setup.caps, draft_model=draft_model, model=setup.model
            )[1:]
        except SpectuiError as error:
            skipped.append(Skipped(type=candidate.text, reason=str(error)))
            continue
        if any(c.args == config.args for c in configs):
            continue
        configs.append(config)
        kept.append(candidate)
    return tuple(configs), kept, skipped


def launch_line(setup: CompareSetup) -> list[str]:
    """The shared part of every candidate's llama-server command line."""
    slots = ["--parallel", str(setup.parallel)] if setup.parallel > 1 else []
    return [
        str(setup.binary.path),
        "-m",
        str(setup.model),
        "--ctx-size",
        str(setup.server.ctx_size * setup.parallel),
        *slots,
        *setup.server.extra_args,
    ]


def new_tune(
    setup: CompareSetup,
    *,
    prompts: tuple[ComparePrompt, ...],
    sampling: Sampling,
    delivery: Delivery | None = None,
    budget: MemoryBudget,
    budget_s: float,
    types: Sequence[str] | None,
    draft_model: Path | None,
    defaults_only: bool = False,
    whatif: bool = True,
    identical_answers: bool = False,
    concurrency: int = 1,
) -> TuneDocument:
    """A tune document for round 1: every candidate of the space, once per prompt (``whatif``:
    but those predicted from a longer draft of the same type and knobs, and those a drafter
    replica replays, `tune.replays`; ``identical_answers``:
    the strict answer rule, any changed answer drops a candidate; ``delivery``: None, the
    defaults; ``concurrency``: every run under that many client streams at once, on a server
    with a slot per stream, ``setup.parallel``: then every candidate is measured, none
    predicted or replayed, as one stream's replicas and step costs do not hold for a batch)."""
    facts = model_facts(setup.model, draft_model)
    candidates, skipped = build_space(setup.caps, help_text(setup.binary.path), facts, types)
    if defaults_only:
        # The first point of each type's grid is the type with every knob at its default.
        firsts = {c.type: c for c in reversed(candidates)}
        candidates = [c for c in candidates if firsts[c.type] is c]
    if whatif and concurrency == 1:
        candidates = mark_predicted(candidates)
        if not (delivery and delivery.chat):  # a chat stream carries no token ids to replay
            candidates = mark_replayed(candidates)
    configs, kept, refused = space_configs(setup, candidates, draft_model)
    if len(configs) < 2:
        reasons = "; ".join(f"{s.type}: {s.reason}" for s in [*skipped, *refused]) or "none listed"
        raise TuneSetupError(f"nothing to tune: no spec type can run here ({reasons})")
    texts = {c.text for c in kept}
    kept = [
        c
        if c.predicted_from in texts or c.predicted_from is None
        else c.model_copy(update={"predicted_from": None})  # its source cannot run here
        for c in kept
    ]
    # Round one runs every candidate but those a longer draft's runs predict and those a
    # drafter replica replays (`tune.predict`).
    first = tuple(
        c.name
        for c, k in zip(configs[1:], kept, strict=True)
        if k.predicted_from is None and not k.replayed
    )
    plan = ComparePlan(
        configs=configs,
        prompts=prompts,
        reps=1,
        sampling=sampling,
        delivery=delivery or Delivery(),
        memory_budget=budget,
        active=None if len(first) == len(kept) else (first,),
        identical_answers=identical_answers,
        concurrency=(concurrency,),
    )
    compare = CompareDocument.new(
        plan, binary=setup.binary_info, model=setup.model_info, server=setup.server
    )
    return new_document(
        compare,
        budget_s=budget_s,
        launch=launch_line(setup),
        skipped=[*skipped, *refused],
        space=kept,
    )
