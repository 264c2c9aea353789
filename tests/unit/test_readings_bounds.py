"""Reading a chunk costs what its tokens can hold, not what its counters claim.

A server (broken or hostile) that claims a million accepted drafts in one chunk made the reading
loop over every count up to the claim. The splits are the same as the definition's, for any
chunk: a split of ``n`` steps leaving ``p`` owed fits when its draftless decodes are not
negative (`Readings.draftless`).
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from spectui.core.stream.readings import ENUMERATE_MAX_TOKENS, READ_MAX_TOKENS, readings


@given(
    tokens=st.integers(ENUMERATE_MAX_TOKENS + 1, 40),
    drafted=st.integers(0, 60),
    accepted=st.integers(1, 60),
    start=st.integers(0, 3),
)
def test_a_long_chunk_has_the_splits_the_definition_gives(
    tokens: int, drafted: int, accepted: int, start: int
) -> None:
    out = readings(tokens, drafted, accepted, start, None)
    steppable = tokens - (1 if start == 0 else 0)
    owed = [(0, 0)] + [(k, 1) for k in range(accepted)]
    expected = {
        (n, p)
        for n in range(1, min(drafted, steppable) + 1)
        for p in owed
        if out.draftless(n, p) >= 0
    }
    assert out.splits == expected


def test_a_claimed_million_drafts_reads_only_what_the_tokens_can_hold() -> None:
    for tokens in (5, ENUMERATE_MAX_TOKENS + 1, READ_MAX_TOKENS):
        out = readings(tokens, 2_000_000, 1_000_000, 1, None)
        # Every split leaves the open step owing all but the tokens' worth of the claim.
        assert out.splits
        assert all(pending[0] >= 1_000_000 - tokens for _, pending in out.splits)
        assert len(out.splits) <= tokens * (tokens + 2)
