"""A speculative decoding configuration: which spec types, which draft model, which limits.

A `SpecConfig` only ever changes ``--spec-*`` flags (and their legacy aliases): compare mode runs
several configs against the same launch and relies on that for a fair comparison.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from spectui.core.errors import ModelError, SpecConfigError
from spectui.core.llama.binary import Capabilities
from spectui.core.llama.gguf import check_gguf
from spectui.core.llama.gguf_meta import GgufFacts, gguf_facts
from spectui.core.llama.spectypes import (
    SPEC_TYPE_INFO,
    SpecTypeInfo,
    chain_reason,
    describe_type,
    explain_type,
    type_problem,
    type_reason,
)

__all__ = [
    "SPEC_TYPE_INFO",
    "SYNTH_LEN_FLAG",
    "SpecConfig",
    "SpecTypeInfo",
    "describe_type",
    "explain_type",
    "replace_spec_args",
    "type_problem",
]

_NEEDS_TARGET = frozenset({"draft-mtp", "draft-eagle3", "draft-dflash", "draft-dspark"})
"""Types whose fit depends on the target model's header (its MTP layers, its hidden states)."""

# Every name each field has had in llama-server (the first is the canonical one), plus
# '--draft-model' for people. Recognised even where the binary has dropped them, so an old
# command line can be read and cleaned.
_TYPE_FLAGS = ("--spec-type",)
_DRAFT_MODEL_FLAGS = ("--spec-draft-model", "--draft-model", "-md", "--model-draft")
_N_MAX_FLAGS = ("--spec-draft-n-max", "--draft-max", "--draft", "--draft-n")
_N_MIN_FLAGS = ("--spec-draft-n-min", "--draft-min", "--draft-n-min")
_FIELD_FLAGS = frozenset(_TYPE_FLAGS + _DRAFT_MODEL_FLAGS + _N_MAX_FLAGS + _N_MIN_FLAGS)

SYNTH_LEN_FLAG = "--spec-synth-len"
"""Forces a mean acceptance length (benchmarking only: the server's output is then not valid)."""
_SYNTH_FLAGS = (SYNTH_LEN_FLAG, "--spec-synth-rates")


def _is_flag(token: str) -> bool:
    """'--x' or '-x' is a flag; '-1' (a negative number) is a value."""
    return token.startswith("--") or re.match(r"-[A-Za-z]", token) is not None


def _split_eq(token: str) -> tuple[str, str | None]:
    """'--spec-type=a,b' -> ('--spec-type', 'a,b'); anything else -> (token, None)."""
    if token.startswith("--") and "=" in token:
        flag, _, value = token.partition("=")
        return flag, value
    return token, None


def _is_spec_flag(flag: str, caps: Capabilities | None) -> bool:
    """Whether ``flag`` belongs to the speculative configuration, under any of its names."""
    if flag in _FIELD_FLAGS or flag.startswith(("--spec-", "--no-spec-")):
        return True
    if caps is None:
        return False
    # '-ngld' is '--spec-draft-ngl'; a removed '--draft-p-min' points at its '--spec-*' heir.
    return caps.canonical.get(flag, "").startswith("--spec-") or (
        flag in caps.removed_flags and "--spec-" in caps.replacements.get(flag, "")
    )


def _takes_value(flag: str, following: str | None, caps: Capabilities | None) -> bool:
    if flag in _FIELD_FLAGS:
        return True
    if caps is not None and flag in caps.canonical:
        return flag in caps.value_flags
    # Unknown to the help (or no help at hand): a value is whatever does not look like a flag.
    return following is not None and not _is_flag(following)


def _int_value(flag: str, value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise SpecConfigError(f"{flag} wants a whole number, not '{value}'") from None
    if number < 0:
        raise SpecConfigError(f"{flag} must be 0 or more, not {number}")
    return number


def _types(value: str) -> tuple[str, ...]:
    types = tuple(t.strip() for t in value.split(",") if t.strip())
    if not types:
        raise SpecConfigError("no spec type given (use 'none' for no speculation)")
    return types


class _Reader:
    """Walks argv-style tokens, collecting what a SpecConfig holds.

    ``strict`` (a config a user typed) rejects anything that is not a spec flag or its value;
    otherwise (a whole server command line) everything else is skipped.
    """

    def __init__(self, caps: Capabilities | None, strict: bool) -> None:
        self.caps = caps
        self.strict = strict
        self.fields: dict[str, object] = {}
        self.extra: list[str] = []

    def read(self, tokens: list[str]) -> None:
        index = 0
        while index < len(tokens):
            flag, inline = _split_eq(tokens[index])
            index += 1
            if not _is_flag(flag) or not _is_spec_flag(flag, self.caps):
                if self.strict:
                    self._reject(flag)
                continue  # argv[0], or another launch flag or its value
            following = tokens[index] if index < len(tokens) else None
            value = inline
            if value is None and _takes_value(flag, following, self.caps):
                if following is None:
                    raise SpecConfigError(f"{flag} needs a value")
                value, index = following, index + 1
            self._take(flag, value)

    @staticmethod
    def _reject(token: str) -> None:
        if _is_flag(token):
            raise SpecConfigError(
                f"{token} is not a spec flag: a spec config may only change --spec-* flags "
                "(compare mode keeps every other launch flag the same)"
            )
        raise SpecConfigError(f"unexpected '{token}' in spec config")

    def _take(self, flag: str, value: str | None) -> None:
        if flag in _FIELD_FLAGS and not value:
            raise SpecConfigError(f"{flag} needs a value")
        if flag in _TYPE_FLAGS:
            self.fields["types"] = _types(value or "")
        elif flag in _DRAFT_MODEL_FLAGS:
            self.fields["draft_model"] = Path(value or "").expanduser()
        elif flag in _N_MAX_FLAGS:
            self.fields["draft_n_max"] = _int_value(flag, value or "")
        elif flag in _N_MIN_FLAGS:
            self.fields["draft_n_min"] = _int_value(flag, value or "")
        else:
            name = self.caps.canonical.get(flag, flag) if self.caps else flag
            self.extra += [name] if value is None else [name, value]

    def config(self, **defaults: object) -> SpecConfig:
        return SpecConfig.model_validate(
            {**defaults, **self.fields, "extra_args": tuple(self.extra)}
        )


class SpecConfig(BaseModel):
    """The part of a llama-server launch that spectui changes between runs."""

    model_config = ConfigDict(frozen=True)

    types: tuple[str, ...] = ("none",)
    """Spec types for ``--spec-type`` (comma-joined), e.g. ('ngram-simple',)."""
    draft_model: Path | None = None
    """Draft model for draft-* types (``--spec-draft-model``)."""
    draft_n_max: int | None = Field(default=None, ge=0)
    """``--spec-draft-n-max``: most tokens drafted per step."""
    draft_n_min: int | None = Field(default=None, ge=0)
    """``--spec-draft-n-min``: fewest tokens drafted per step."""
    extra_args: tuple[str, ...] = ()
    """Other ``--spec-*`` flags with their values, passed through after validation."""

    @property
    def label(self) -> str:
        """Short name for screens and reports, e.g. 'draft-simple (n-max 4)'."""
        name = ",".join(self.types) or "none"
        details = []
        if self.draft_n_max is not None:
            details.append(f"n-max {self.draft_n_max}")
        if self.draft_n_min is not None:
            details.append(f"n-min {self.draft_n_min}")
        for flag, value in zip(self.extra_args, self.extra_args[1:], strict=False):
            if flag in _SYNTH_FLAGS:
                details.append(f"synth {flag.removeprefix('--spec-synth-')} {value}")
        # Forced acceptance says nothing about the real thing: the warning comes first, so it
        # survives when a narrow column cuts the label short.
        prefix = "SYNTHETIC " if self.synthetic else ""
        return f"{prefix}{name} ({', '.join(details)})" if details else prefix + name

    @property
    def synthetic(self) -> bool:
        """Whether acceptance is forced (``--spec-synth-*``): a demonstration, not a result."""
        return any(flag in _SYNTH_FLAGS for flag in self.extra_args)

    @property
    def needs_draft_model(self) -> bool:
        """Whether a draft-* type (other than self-speculative MTP) is selected."""
        return any(t.startswith("draft-") and t != "draft-mtp" for t in self.types)

    @classmethod
    def parse(cls, text: str, draft_model: Path | None = None) -> SpecConfig:
        """Read a config as a user writes it: 'ngram-mod,ngram-simple', 'draft-simple -md X'.

        The types come first (or as ``--spec-type``); then ``--draft-model``/``-md``,
        ``--spec-draft-n-max``/``-n-min`` and any other ``--spec-*`` flag with its value.
        ``draft_model`` is used when the text names none (the one remembered in the settings).
        """
        try:
            tokens = shlex.split(text)
        except ValueError as error:
            raise SpecConfigError(f"cannot read spec config {text!r}: {error}") from None
        if not tokens:
            raise SpecConfigError("empty spec config (use 'none' for no speculation)")
        reader = _Reader(caps=None, strict=True)
        if not _is_flag(tokens[0]):
            reader.fields["types"] = _types(tokens.pop(0))
        reader.read(tokens)
        if "types" not in reader.fields:
            raise SpecConfigError(f"spec config {text!r} names no spec type, e.g. 'ngram-simple'")
        return reader.config(draft_model=draft_model)

    @classmethod
    def from_args(cls, args: list[str], caps: Capabilities | None = None) -> SpecConfig | None:
        """The spec config of a llama-server command line, or None if it has no spec flag.

        Legacy names are understood (``--draft-max``, ``-md``, ...). With ``caps``, other
        aliases of ``--spec-*`` flags (``-ngld``) are recognised and renamed to that form.
        """
        reader = _Reader(caps, strict=False)
        reader.read(args)
        return reader.config() if reader.fields or reader.extra else None

    def validate_for(self, caps: Capabilities, model: Path | None = None) -> None:
        """Raise `SpecConfigError` (one line) unless the binary behind ``caps`` can run this.

        The one check every launch goes through (`to_args`, hence `LaunchConfig.argv`): the
        types against the binary's ``--help``, the chain as a whole, then each type against the
        GGUF headers of the draft model and of ``model`` (the target; None: not checked), so a
        type that cannot run here is refused before any server starts.
        """
        if not self.types:
            raise SpecConfigError("no spec type given (use 'none' for no speculation)")
        chain = f" in the chain '{','.join(self.types)}'" if len(self.types) > 1 else ""
        if self.types != ("none",) or "--spec-type" in caps.all_flags:
            if not caps.spec_types:
                raise SpecConfigError("this llama-server has no --spec-type option (too old?)")
            for name in self.types:
                if name not in caps.spec_types:
                    raise SpecConfigError(
                        f"spec type '{name}'{chain} is not supported by this llama-server "
                        f"(it supports: {', '.join(caps.spec_types)})"
                    )
        problem = chain_reason(self.types)
        if problem is not None:
            raise SpecConfigError(f"spec types '{','.join(self.types)}': {problem}")
        draft: GgufFacts | None = None
        if self.needs_draft_model:
            draft = self._check_draft_model(caps)
        self._check_fit(model, draft)
        for field, flag in (
            (self.draft_n_max, "--spec-draft-n-max"),
            (self.draft_n_min, "--spec-draft-n-min"),
        ):
            if field is not None and flag not in caps.spec_flags:
                raise SpecConfigError(f"this llama-server has no {flag} option (too old?)")
        self._check_extra(caps)

    def _check_draft_model(self, caps: Capabilities) -> GgufFacts:
        kind = next(t for t in self.types if t.startswith("draft-") and t != "draft-mtp")
        if self.draft_model is None:
            raise SpecConfigError(f"spec type '{kind}' needs a draft model (--draft-model PATH)")
        if "--spec-draft-model" not in caps.spec_flags:
            raise SpecConfigError("this llama-server has no --spec-draft-model option (too old?)")
        try:
            check_gguf(self.draft_model, what="draft model")
            return gguf_facts(self.draft_model)
        except ModelError as error:
            raise SpecConfigError(str(error).replace("model ", "draft model ", 1)) from None

    def _check_fit(self, model: Path | None, draft: GgufFacts | None) -> None:
        target: GgufFacts | None = None
        if model is not None and _NEEDS_TARGET.intersection(self.types):
            try:
                target = gguf_facts(model)
            except ModelError as error:
                raise SpecConfigError(str(error)) from None
        for name in self.types:
            reason = type_reason(name, target=target, draft=draft, draft_model=self.draft_model)
            if reason is not None:
                raise SpecConfigError(f"spec type '{name}' cannot run here: {reason}")

    def _check_extra(self, caps: Capabilities) -> None:
        for index, token in enumerate(self.extra_args):
            if not _is_flag(token):
                continue
            if token in caps.removed_flags:
                hint = caps.replacements.get(token)
                advice = f": {hint}" if hint else " (see llama-server --help)"
                raise SpecConfigError(f"{token} has been removed from this llama-server{advice}")
            if not caps.is_listed(token):
                raise SpecConfigError(f"{token} is not an option of this llama-server")
            if caps.canonical[token] in _FIELD_FLAGS:
                raise SpecConfigError(f"{token} belongs in the spec config itself, not its extras")
            following = self.extra_args[index + 1] if index + 1 < len(self.extra_args) else None
            if token in caps.value_flags and (following is None or _is_flag(following)):
                raise SpecConfigError(f"{token} needs a value")

    def to_args(self, caps: Capabilities, model: Path | None = None) -> list[str]:
        """llama-server arguments for this config, always under the canonical ``--spec-*`` names.

        Raises `SpecConfigError` if the binary cannot run it (with ``model``, the target: if a
        type cannot run with it, `validate_for`). The draft model is passed only to draft types:
        the settings remember it across switches, and loading it for an n-gram type would cost
        memory and load time and skew a comparison.
        """
        self.validate_for(caps, model)
        args: list[str] = []
        if "--spec-type" in caps.all_flags:
            args += ["--spec-type", ",".join(self.types)]
        if self.needs_draft_model and self.draft_model is not None:
            args += ["--spec-draft-model", str(self.draft_model)]
        if self.draft_n_max is not None:
            args += ["--spec-draft-n-max", str(self.draft_n_max)]
        if self.draft_n_min is not None:
            args += ["--spec-draft-n-min", str(self.draft_n_min)]
        args += [caps.canonical.get(t, t) if _is_flag(t) else t for t in self.extra_args]
        return args


def replace_spec_args(
    argv: list[str], spec: SpecConfig, caps: Capabilities, model: Path | None = None
) -> list[str]:
    """``argv`` without any spec flag (under any name, removed ones too), then ``spec``'s args.

    Raises `SpecConfigError` if the binary cannot run ``spec`` (with ``model``); ``argv`` is not
    changed.
    """
    new_args = spec.to_args(caps, model)
    kept: list[str] = []
    index = 0
    while index < len(argv):
        token = argv[index]
        flag, inline = _split_eq(token)
        index += 1
        if not _is_flag(flag) or not _is_spec_flag(flag, caps):
            kept.append(token)
            continue
        following = argv[index] if index < len(argv) else None
        if inline is None and following is not None and _takes_value(flag, following, caps):
            index += 1  # drop its value too
    return kept + new_args
