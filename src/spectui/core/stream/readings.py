"""The ways one streamed chunk's new tokens can split into verification steps.

A chunk that carries several tokens (the server held back tokens that ended inside a UTF-8
character) can span whole steps, decodes whose drafter proposed nothing, and the start of a step
whose remaining tokens come later. `readings` lists every split that fits the chunk's counter
deltas; `spectui.core.stream.attribution` reports only what all of them agree on.

The server's rules a split must keep (`tools/server/server-context.cpp`): a step drafts at least
one token and at least what it accepts, and yields its accepted drafts then one target token; a
draftless decode yields one target token; the response's first token comes from the prompt's
logits (never a step's); the server drafts at most ``n_remaining - 1`` tokens, so nothing is
drafted for the last token before ``n_predict``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DRAFT, TARGET = 1, 2
"""Bits of a token's possible origins over the readings of a chunk."""

ENUMERATE_MAX_TOKENS = 8
"""New tokens of one chunk up to which its readings are enumerated (at most ~3^n of them); a
longer chunk with accepted drafts in it gets every count that could fit and unknown origins."""

READ_MAX_TOKENS = 256
"""New tokens of one chunk beyond which no split is read at all. A real chunk of several steps
holds a few steps' tokens (held-back UTF-8 spans a character's bytes; an n-gram step accepts at
most its n-max, 64 by default); a chunk claiming more is a broken or hostile upstream, and
reading its splits would cost ~tokens x accepted. The caller counts it as an anomaly."""

Pending = tuple[int, int]
"""What the open step still owes: (accepted drafts, 1 if its target token else 0)."""


@dataclass(slots=True)
class Readings:
    """The splits of ``tokens`` new tokens that fit: their step counts and what they leave owed,
    and each token's possible origins."""

    tokens: int
    """New tokens of the chunk (after what the previous step still owed)."""
    accepted: int
    """Drafts the chunk's steps accepted."""
    splits: set[tuple[int, Pending]] = field(default_factory=set)
    """(steps, still owed after the chunk) of every split that fits."""
    origins: list[int] = field(default_factory=list)
    """Per new token: the origin bits seen over the splits."""

    def draftless(self, steps: int, pending: Pending) -> int:
        """Draftless decodes of a split: what its steps do not yield (each yields its accepted
        drafts and one target token, less what it still owes)."""
        return self.tokens - self.accepted + sum(pending) - steps


def readings(tokens: int, drafted: int, accepted: int, start: int, limit: int | None) -> Readings:
    """Every split of ``tokens`` new tokens (the first at response index ``start``) into steps
    that drafted ``drafted`` and accepted ``accepted`` in all, and draftless decodes; the last
    step may still owe tokens. ``limit``: the request's n_predict, when known. Over
    ``READ_MAX_TOKENS`` tokens: no split."""
    if tokens > READ_MAX_TOKENS:
        return Readings(tokens, accepted)
    out = Readings(tokens, accepted, origins=[0] * tokens)
    last = tokens if limit is None else limit - 1 - start  # new tokens a step may start at
    steppable = max(0, min(tokens, last) - (1 if start == 0 else 0))
    first = 1 if start == 0 else 0
    if accepted == 0:
        # Each step yields one target token: every split leaves nothing owed, every token is
        # the target's, only the count varies.
        out.splits.update((n, (0, 0)) for n in range(1, min(drafted, steppable) + 1))
        if out.splits:
            out.origins = [TARGET] * tokens
        return out
    if tokens > ENUMERATE_MAX_TOKENS:
        for n in range(1, min(drafted, steppable) + 1):
            if out.draftless(n, (0, 0)) >= 0:
                out.splits.add((n, (0, 0)))
            # An open step owing (k, 1) fits when k >= accepted + n - 1 - tokens: at most
            # tokens + 1 values of k a step count, however many drafts the chunk claims (a
            # server claiming a million took seconds a chunk when every k was tried).
            low = max(0, accepted + n - 1 - tokens)
            out.splits.update((n, (k, 1)) for k in range(low, accepted))
        out.origins = [TARGET] * first + [DRAFT | TARGET] * (tokens - first)
        return out
    trail: list[int] = []

    def leaf(steps: int, pending: Pending) -> None:
        out.splits.add((steps, pending))
        for i, bit in enumerate(trail):
            out.origins[i] |= bit

    def walk(pos: int, a_left: int, d_left: int, steps: int) -> None:
        if pos == tokens:
            if a_left == 0 and steps:
                leaf(steps, (0, 0))
            return
        trail.append(TARGET)  # a decode without a draft
        walk(pos + 1, a_left, d_left, steps)
        trail.pop()
        if pos < first or pos >= last:
            return  # (the prompt's token, or the limit's last: never a step's)
        room = tokens - pos
        # A whole step (its drafts, then the target's token) fits in the room left; only the
        # step that takes every accepted draft left may run past the chunk's end. (Not every
        # count up to ``a_left``: a claimed million would loop a million times per position.)
        for a in range(min(a_left, room - 1) + 1):
            if max(1, a) > d_left:
                break
            trail.extend([DRAFT] * a + [TARGET])
            walk(pos + a + 1, a_left - a, d_left - max(1, a), steps + 1)
            del trail[-(a + 1) :]
        if a_left >= room and max(1, a_left) <= d_left:
            trail.extend([DRAFT] * room)  # the chunk ends inside this step: the rest comes later
            leaf(steps + 1, (a_left - room, 1))
            del trail[-room:]

    walk(0, accepted, drafted, 0)
    return out
