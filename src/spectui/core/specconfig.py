"""A speculative decoding configuration: which spec types, which draft model, which limits."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


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
        return f"{name} ({', '.join(details)})" if details else name

    @property
    def needs_draft_model(self) -> bool:
        """Whether a draft-* type (other than self-speculative MTP) is selected."""
        return any(t.startswith("draft-") and t != "draft-mtp" for t in self.types)
