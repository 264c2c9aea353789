"""What each spec type drafts from and what it needs, judged from GGUF headers before any start.

The rules follow this llama.cpp build's sources (``common/speculative.cpp``, ``src/models/``):
which architectures build an MTP draft graph, which expose the per-layer hidden states EAGLE-3
and DFlash drafters read, and which drafter architecture each type loads. A reason is one line
that names what is missing and where it was read; ``None`` means nothing stands in the way (or
nothing is known to).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from spectui.core.llama.gguf_meta import GgufFacts

MTP_ARCHITECTURES = frozenset(
    {
        "bailingmoe3",
        "cohere2moe",
        "deepseek2",
        "deepseek32",
        "deepseek4",
        "glm-dsa",
        "glm4moe",
        "hy_v3",
        "mimo2",
        "nemotron_h_moe",
        "qwen35",
        "qwen35moe",
        "qwen3next",
        "qwen4exp",
        "step35",
    }
)
"""Architectures whose model file builds an MTP draft graph (``LLM_GRAPH_TYPE_DECODER_MTP`` in
``src/models/*.cpp``; glm5-next's says "not implemented yet")."""

HIDDEN_STATE_ARCHITECTURES = frozenset(
    {
        "bailingmoe3",
        "clef",
        "deepseek4",
        "gemma4",
        "gpt-oss",
        "hunyuan-dense",
        "hunyuan_vl",
        "lfm2",
        "llama",
        "llama-embed",
        "mimo2",
        "minimax-01",
        "minimax-m2",
        "muse-glimmer",
        "nanbeige",
        "nemotron_h",
        "nemotron_h_moe",
        "qwen3",
        "qwen35",
        "qwen35moe",
        "qwen3moe",
        "qwen3next",
        "qwen4exp",
    }
)
"""Target architectures whose graph records each layer's input (``res->t_layer_inp``), which an
EAGLE-3 or DFlash drafter reads; any other aborts the server ("layer input tensor is null")."""

MODEL_DRAFTERS = ("draft-simple", "draft-eagle3", "draft-dflash", "draft-dspark")
"""Types that load the one ``--spec-draft-model`` llama-server takes."""

AUTO_DETECTION = (
    "naming any spec type turns llama-server's auto-detection off (without --spec-type it picks "
    "draft-dflash/draft-dspark from a -md of arch dflash, draft-mtp from a -md with MTP layers); "
    "spectui always names the type, 'none' included"
)
"""Why spectui never relies on the server choosing a type by itself."""


class SpecTypeInfo(BaseModel):
    """What one spec type drafts from and what it needs to run, in words."""

    model_config = ConfigDict(frozen=True)

    drafts_from: str
    """Where its draft tokens come from, in a few words."""
    needs: str
    """What it needs besides the target model: 'nothing', 'draft model', 'mtp', or the
    architecture word a matching drafter's GGUF carries ('eagle', 'dflash', 'dspark')."""
    needs_text: str
    """That need, in words."""


_ANY_MODEL = "needs nothing: any model"

SPEC_TYPE_INFO: dict[str, SpecTypeInfo] = {
    "none": SpecTypeInfo(
        drafts_from="no drafting: the target model generates every token",
        needs="nothing",
        needs_text="the baseline",
    ),
    "draft-simple": SpecTypeInfo(
        drafts_from="a small draft model proposes the next tokens",
        needs="draft model",
        needs_text="needs a draft GGUF with the same vocabulary (--draft-model)",
    ),
    "draft-eagle3": SpecTypeInfo(
        drafts_from="an EAGLE-3 head drafts from the target's hidden states",
        needs="eagle",
        needs_text="needs an EAGLE-3 drafter (arch eagle3) trained for this model (--draft-model)",
    ),
    "draft-mtp": SpecTypeInfo(
        drafts_from="the model's own multi-token-prediction (next-n) layers",
        needs="mtp",
        needs_text="needs a model with MTP layers",
    ),
    "draft-dflash": SpecTypeInfo(
        drafts_from="a DFlash block drafter proposes a whole block at once",
        needs="dflash",
        needs_text="needs a DFlash drafter (arch dflash) trained for this model (--draft-model)",
    ),
    "draft-dspark": SpecTypeInfo(
        drafts_from="a DSpark drafter conditioned on the target",
        needs="dspark",
        needs_text="needs a DSpark drafter (arch dflash with markov_w1) for this model "
        "(--draft-model)",
    ),
    "ngram-simple": SpecTypeInfo(
        drafts_from="copies the continuation of the last matching n-gram in the context",
        needs="nothing",
        needs_text=_ANY_MODEL,
    ),
    "ngram-map-k": SpecTypeInfo(
        drafts_from="looks n-grams of the context up in a map and copies what followed",
        needs="nothing",
        needs_text=_ANY_MODEL,
    ),
    "ngram-map-k4v": SpecTypeInfo(
        drafts_from="like ngram-map-k, keeping up to four continuations per n-gram",
        needs="nothing",
        needs_text=_ANY_MODEL,
    ),
    "ngram-mod": SpecTypeInfo(
        drafts_from="copies long n-gram matches from a hashed table of earlier text",
        needs="nothing",
        needs_text=_ANY_MODEL,
    ),
    "ngram-cache": SpecTypeInfo(
        drafts_from="n-gram statistics gathered from the context",
        needs="nothing",
        needs_text=_ANY_MODEL,
    ),
}
"""What spectui knows of each type. The binary's ``--help`` narrows this (a type it does not list
is not offered) but never widens it: a type missing here is shown as undescribed."""


def _mtp_reason(target: GgufFacts) -> str | None:
    if target.mtp_layers <= 0:
        return f"no MTP layers in this GGUF ({target.name}: {target.mtp_key} is 0 or absent)"
    if target.architecture not in MTP_ARCHITECTURES:
        return (
            f"llama.cpp builds no MTP graph for arch '{target.architecture or '?'}' "
            f"({target.name}); it does for {', '.join(sorted(MTP_ARCHITECTURES))}"
        )
    return None


def _hidden_state_reason(kind: str, target: GgufFacts) -> str | None:
    if target.architecture in HIDDEN_STATE_ARCHITECTURES:
        return None
    return (
        f"{kind} drafter needs a target that exposes its hidden states: arch "
        f"'{target.architecture or '?'}' ({target.name}) does not (llama.cpp records them for "
        "llama, qwen3, qwen35 and a few more)"
    )


def _drafter_reason(name: str, draft: GgufFacts) -> str | None:
    arch = draft.architecture or "?"
    if name == "draft-simple":
        if arch in ("eagle3", "dflash"):
            kind = "an EAGLE-3" if arch == "eagle3" else "a DFlash/DSpark"
            return f"{draft.name} is {kind} drafter (arch {arch}), not a standalone draft model"
        return None
    if name == "draft-eagle3":
        if arch != "eagle3":
            return f"--draft-model {draft.name} is arch '{arch}', not an EAGLE-3 drafter (eagle3)"
        if draft.target_layers not in (None, 3):
            return (
                f"{draft.name} reads {draft.target_layers} target layers; an EAGLE-3 drafter "
                "reads exactly 3"
            )
        return None
    if arch != "dflash":
        return f"--draft-model {draft.name} is arch '{arch}', not a DFlash/DSpark drafter (dflash)"
    if name == "draft-dspark" and not draft.markov_head:
        return f"{draft.name} has no Markov head (markov_w1): a DFlash drafter, use draft-dflash"
    return None


def target_reason(name: str, target: GgufFacts) -> str | None:
    """Why the target model alone rules ``name`` out, whatever the draft model; None if not."""
    if name == "draft-mtp":
        return _mtp_reason(target)
    if name == "draft-eagle3":
        return _hidden_state_reason("an EAGLE-3", target)
    if name in ("draft-dflash", "draft-dspark"):
        return _hidden_state_reason("a DFlash/DSpark", target)
    return None


def type_reason(
    name: str,
    *,
    target: GgufFacts | None = None,
    draft: GgufFacts | None = None,
    draft_model: Path | None = None,
) -> str | None:
    """Why ``name`` cannot run with this target and draft model, in one line; None if it can.

    ``target``/``draft``: the headers' facts (None: not known, so not held against the type);
    ``draft_model``: the draft model's path (a draft type without one cannot run).
    """
    info = SPEC_TYPE_INFO.get(name)
    if info is None or info.needs == "nothing":
        return None
    # What the target lacks first: no draft model would help.
    reason = target_reason(name, target) if target is not None else None
    if reason is not None or info.needs == "mtp":
        return reason
    if draft_model is None and draft is None:
        return f"{info.needs_text}: none given"
    return _drafter_reason(name, draft) if draft is not None else None


def chain_reason(types: Sequence[str]) -> str | None:
    """Why these types cannot run together in one server, in one line; None if they can.

    llama-server loads one draft model and gives it to every model drafter; with draft-mtp in
    the chain that draft context is created as an MTP context, which only the target can be.
    """
    if len(set(types)) != len(types):
        twice = next(t for t in types if types.count(t) > 1)
        return f"'{twice}' is named twice in the chain"
    if "none" in types and len(types) > 1:
        return "'none' cannot be part of a chain: it means no speculation"
    drafters = [t for t in types if t in MODEL_DRAFTERS]
    if len(drafters) > 1:
        return (
            f"{' and '.join(drafters)} would share llama-server's one draft model: "
            "a chain takes at most one of them"
        )
    if drafters and "draft-mtp" in types:
        return (
            f"draft-mtp and {drafters[0]} cannot share the one draft context (llama-server "
            "would open the draft model as an MTP context)"
        )
    return None


def type_problem(
    name: str,
    *,
    draft_model: Path | None = None,
    draft_architecture: str | None = None,
    mtp_layers: int | None = None,
) -> str | None:
    """Why ``name`` cannot run with what was given, in words; None when it can (or cannot tell).

    For callers that know only the draft GGUF's ``general.architecture`` and the model's MTP
    layer count (None: not known); `type_reason` judges from whole headers.
    """
    info = SPEC_TYPE_INFO.get(name)
    if info is None or info.needs == "nothing":
        return None
    if info.needs == "mtp":
        if mtp_layers is None:
            return None
        return None if mtp_layers > 0 else f"{info.needs_text} — this model has none"
    if draft_model is None:
        return f"{info.needs_text}: none given"
    if info.needs == "draft model" or draft_architecture is None:
        return None
    # DSpark drafters carry the dflash architecture (with a Markov head only the tensors show).
    wanted = "dflash" if info.needs == "dspark" else info.needs
    if wanted not in draft_architecture.lower():
        return f"{info.needs_text}: {draft_model.name} is a {draft_architecture!r} model"
    return None


def explain_type(
    name: str,
    *,
    target: GgufFacts | None = None,
    draft: GgufFacts | None = None,
    draft_model: Path | None = None,
    mtp_layers: int | None = None,
) -> str:
    """One line: what ``name`` drafts from and what it needs (or why it cannot run here)."""
    info = SPEC_TYPE_INFO.get(name)
    if info is None:
        return "listed by this llama-server; spectui has no description of it"
    if target is None and mtp_layers is not None:
        problem = type_problem(name, draft_model=draft_model, mtp_layers=mtp_layers)
    else:
        problem = type_reason(name, target=target, draft=draft, draft_model=draft_model)
    return f"{info.drafts_from}; {problem or info.needs_text}"


def describe_type(name: str) -> str:
    """One line: what ``name`` drafts from and what it needs, whatever was given."""
    info = SPEC_TYPE_INFO.get(name)
    if info is None:
        return "listed by this llama-server; spectui has no description of it"
    return f"{info.drafts_from}; {info.needs_text}"
