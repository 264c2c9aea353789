"""Where two responses part ways: first divergent token, with a short context diff.

At temperature 0 a speculative config must reproduce the baseline's answer; when it does not
(batched verification can round a near-tie the other way), the report shows where it diverged.
Token positions come from the baseline's token boundaries (the cumulative end offset of each
token's text), so no tokenizer is needed.
"""

from __future__ import annotations

import bisect
import itertools

from pydantic import BaseModel, ConfigDict

CONTEXT_CHARS = 24
"""Characters of context shown on each side of a divergence."""


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

    def short(self) -> str:
        """One line: "at token 17: after '…common', baseline 'x…' vs this 'y…'"."""
        where = f"token {self.token}" if self.token is not None else f"char {self.char}"
        return (
            f"at {where}: after {self.before!r}, "
            f"baseline {self.baseline!r} vs this {self.response!r}"
        )


def token_ends(texts: list[str]) -> list[int]:
    """Cumulative end offsets of token texts (empty texts share their neighbour's end)."""
    return list(itertools.accumulate(len(text) for text in texts))


def first_divergence(
    baseline: str,
    response: str,
    baseline_token_ends: list[int] | None = None,
    *,
    context: int = CONTEXT_CHARS,
) -> Divergence | None:
    """None when the texts are identical; else where ``response`` first differs."""
    if baseline == response:
        return None
    char = next(
        (i for i, (a, b) in enumerate(zip(baseline, response, strict=False)) if a != b),
        min(len(baseline), len(response)),  # one is a prefix of the other
    )
    token = None
    if baseline_token_ends:
        # Token i covers [ends[i-1], ends[i]): the token whose end lies past `char` holds it.
        token = bisect.bisect_right(baseline_token_ends, char)
    return Divergence(
        token=token,
        char=char,
        before=baseline[max(0, char - context) : char],
        baseline=baseline[char : char + context],
        response=response[char : char + context],
    )
