"""Where two responses part ways: first divergent token, with a short context diff.

At temperature 0 a speculative config should reproduce the baseline's answer; when it does not
(batched verification can round a near-tie the other way), the report shows where it diverged,
both tokens there, and (`divergence`) the baseline's own candidates at that token with their
probabilities. Token positions come from the token boundaries (the cumulative end offset of each
token's text), so no tokenizer is needed.
"""

from __future__ import annotations

import bisect
import itertools
from typing import Literal

from pydantic import BaseModel, ConfigDict

CONTEXT_CHARS = 24
"""Characters of context shown on each side of a divergence."""


DivergenceKind = Literal["near-tie", "divergent"]
"""'near-tie': the baseline's top two candidates at the divergent token were within the margin
(`divergence.NEAR_TIE_MAX_LOGIT_GAP`), and this response took one of them; 'divergent': not."""


class TokenProb(BaseModel):
    """One candidate token and its probability (the model's softmax, before sampling)."""

    model_config = ConfigDict(frozen=True)

    token: str
    """The token's text."""
    prob: float
    """Its probability, 0..1."""


class Divergence(BaseModel):
    """The first place a response differs from the baseline's."""

    model_config = ConfigDict(frozen=True)

    token: int | None
    """Index of the first differing token in the baseline's response (None: no token offsets)."""
    char: int
    """Offset of the first differing character."""
    before: str
    """The common text just before the divergence."""
    baseline: str
    """What the baseline says from there (a short excerpt)."""
    response: str
    """What this response says from there instead."""
    token_start: int | None = None
    """Offset in the baseline's text where the divergent token starts: the common prefix a probe
    continues from (None: no token offsets)."""
    baseline_token: str | None = None
    """The baseline's token there (None: no token offsets)."""
    response_token: str | None = None
    """This response's token there ('' when it ended there; None: no token offsets)."""
    baseline_top: list[TokenProb] | None = None
    """The baseline's top candidates at that token, most likely first (None: not probed)."""
    kind: DivergenceKind | None = None
    """near-tie or divergent, from ``baseline_top`` (None: not probed)."""
    probe_error: str | None = None
    """Why the probe for ``baseline_top`` failed, if it did."""

    def short(self) -> str:
        """One line: "at token 17: after '…common', baseline 'x…' vs this 'y…'"."""
        where = f"token {self.token}" if self.token is not None else f"char {self.char}"
        text = (
            f"at {where}: after {self.before!r}, "
            f"baseline {self.baseline!r} vs this {self.response!r}"
        )
        if self.kind is not None:
            text += f" ({self.kind}{self.odds()})"
        elif self.probe_error is not None:
            text += " (not probed)"
        return text

    def odds(self) -> str:
        """' 0.41/0.40': the baseline's two most likely candidates there ('' when unknown)."""
        top = self.baseline_top or []
        return f" {top[0].prob:.2f}/{top[1].prob:.2f}" if len(top) >= 2 else ""

    def same_place(self, other: Divergence) -> bool:
        """Whether ``other`` diverges at the same token with the same two tokens (so a probe
        made for one stands for the other)."""
        return (self.char, self.token, self.token_start, self.response_token) == (
            other.char,
            other.token,
            other.token_start,
            other.response_token,
        )


def token_ends(texts: list[str]) -> list[int]:
    """Cumulative end offsets of token texts (empty texts share their neighbour's end)."""
    return list(itertools.accumulate(len(text) for text in texts))


def _token_at(text: str, ends: list[int], start: int) -> str:
    """The text of the token that starts at ``start`` (by ``ends``); '' past the end."""
    index = bisect.bisect_right(ends, start)
    return text[start : ends[index]] if index < len(ends) else ""


def first_divergence(
    baseline: str,
    response: str,
    baseline_token_ends: list[int] | None = None,
    *,
    context: int = CONTEXT_CHARS,
    response_token_ends: list[int] | None = None,
) -> Divergence | None:
    """None when the texts are identical; else where ``response`` first differs (with both
    tokens there when both sides' token offsets are given)."""
    if baseline == response:
        return None
    char = next(
        (i for i, (a, b) in enumerate(zip(baseline, response, strict=False)) if a != b),
        min(len(baseline), len(response)),  # one is a prefix of the other
    )
    token = start = base_token = response_token = None
    if baseline_token_ends:
        # Token i covers [ends[i-1], ends[i]): the token whose end lies past `char` holds it.
        token = bisect.bisect_right(baseline_token_ends, char)
        start = baseline_token_ends[token - 1] if token > 0 else 0
        base_token = _token_at(baseline, baseline_token_ends, start)
        if response_token_ends and response[:start] == baseline[:start]:
            response_token = _token_at(response, response_token_ends, start)
    return Divergence(
        token=token,
        char=char,
        before=baseline[max(0, char - context) : char],
        baseline=baseline[char : char + context],
        response=response[char : char + context],
        token_start=start,
        baseline_token=base_token,
        response_token=response_token,
    )


def keep_evidence(old: Divergence | None, new: Divergence | None) -> Divergence | None:
    """``new``, with ``old``'s probe result when both are about the same place."""
    if old is None or new is None or not new.same_place(old):
        return new
    if old.kind is None and old.probe_error is None:
        return new
    return new.model_copy(
        update={"baseline_top": old.baseline_top, "kind": old.kind, "probe_error": old.probe_error}
    )
