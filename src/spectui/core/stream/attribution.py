"""Turn llama-server's cumulative counters into a per-token origin (draft or target) and steps.

How llama-server reports speculative decoding (`tools/server/server-context.cpp`, checked against
/metrics on real servers): a verification step adds its draft's size to ``timings.draft_n`` when
the draft is made, then its accepted count to ``draft_n_accepted``, then yields its ``a``
accepted drafts and one target token (the one that replaced the rejected rest of the draft), one
streamed chunk per token. Every chunk carries the cumulative counters, so both jump on the first
chunk of a step. A decode whose drafter proposed nothing (an empty n-gram draft, the last token
before ``n_predict``: the server drafts at most ``n_remaining - 1``) yields one target token and
moves no counter.

One chunk can carry several tokens: the server holds back a token whose text ends inside a UTF-8
character and sends it with the next one (byte-fallback tokens: emoji, CJK, a random drafter).
Such a chunk can span the rest of the previous step, whole steps, draftless decodes and the start
of a step whose remaining tokens come later. Tokens are therefore counted by the cumulative
``tokens_predicted`` / ``predicted_n``, and a chunk with several new tokens is solved: every split
of its tokens into steps and draftless decodes that fits the counters is considered (`_readings`),
and only what all of them agree on is reported — a token's origin, the per-position split, what is
still to come. Where they disagree the token is `TokenOrigin.UNKNOWN` and the steps are unsplit;
nothing is guessed. The number of steps of such a chunk is the one quantity that needs a rule
(see `RunMetrics.steps_maybe_fewer`): tokens minus accepted drafts, carried across chunks, kept
inside the range the readings allow.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spectui.core.events import StepEvent, TokenEvent, TokenOrigin

# The events' own validators, called directly: `TokenEvent(**fields)` adds a Python-level
# `__init__` that cost a third as much again, once per token. Validation is the same.
_validate_token = TokenEvent.__pydantic_validator__.validate_python
_validate_step = StepEvent.__pydantic_validator__.validate_python

ENUMERATE_MAX_TOKENS = 8
"""New tokens of one chunk up to which its readings are enumerated (at most ~3^n of them); a
longer chunk with accepted drafts in it is reported as unknown throughout, never guessed."""

_DRAFT, _TARGET = 1, 2
"""Bits of a token's possible origins over the readings of a chunk."""
_ORIGIN = {_DRAFT: TokenOrigin.DRAFT, _TARGET: TokenOrigin.TARGET}

Pending = tuple[int, int]
"""What the open step still has to release: (accepted drafts, 1 if its target token else 0)."""


@dataclass(slots=True)
class ChunkCounters:
    """What attribution needs from one chunk, whatever the endpoint.

    (Not frozen: a frozen dataclass's ``__init__`` costs three times as much, once per token.)
    """

    text: str
    """Text released by the chunk."""
    predicted_n: int | None
    """Cumulative tokens generated (None when the chunk does not say)."""
    draft_n: int
    """Cumulative draft tokens proposed."""
    draft_accepted: int
    """Cumulative draft tokens accepted."""


@dataclass(slots=True)
class _Readings:
    """What the readings of one chunk's tokens have in common."""

    steps: set[int] = field(default_factory=set)
    """Step counts that fit."""
    origins: list[int] = field(default_factory=list)
    """Per token of the chunk: the origin bits seen over the readings."""
    in_old_step: int = 0
    """Leading tokens that every reading gives to the step open before the chunk."""
    nonspec: int = 0
    """Draftless decodes that every reading has (the fewest of any reading)."""
    pending: set[Pending] = field(default_factory=set)
    """What may still be to come after the chunk."""


def _readings(r: int, drafted: int, accepted: int, start: int, limit: int | None) -> _Readings:
    """Every split of ``r`` new tokens (absolute index of the first: ``start``) into steps that
    drafted ``drafted`` and accepted ``accepted`` in all, and draftless decodes; the last step may
    still owe tokens. Each step drafts at least one token and at least what it accepted; none
    starts at the ``limit``'s last token (the server drafts nothing there)."""
    out = _Readings(origins=[0] * r, nonspec=r + 1)
    if accepted == 0:
        # Each step yields one target token, so every split leaves nothing pending and every
        # token is the target's: only the count varies.
        steppable = r if limit is None else max(0, min(r, limit - 1 - start))
        if start == 0:
            steppable = max(0, steppable - 1)  # the prompt's token is never a step's
        most = min(drafted, steppable)
        if most >= 1:
            out.steps.update(range(1, most + 1))
            out.origins = [_TARGET] * r
            out.nonspec = r - most
            out.pending.add((0, 0))
        return out
    if r > ENUMERATE_MAX_TOKENS:
        out.steps.update(range(1, min(drafted, r) + 1))
        out.origins = [_DRAFT | _TARGET] * r
        out.nonspec = 0
        out.pending.add((0, 0))
        out.pending.update((k, 1) for k in range(accepted))
        return out
    trail: list[int] = []

    def leaf(steps: int, nonspec: int, pending: Pending) -> None:
        out.steps.add(steps)
        out.pending.add(pending)
        out.nonspec = min(out.nonspec, nonspec)
        for i, bit in enumerate(trail):
            out.origins[i] |= bit

    def walk(pos: int, a_left: int, d_left: int, steps: int, nonspec: int) -> None:
        if pos == r:
            if a_left == 0 and steps:
                leaf(steps, nonspec, (0, 0))
            return
        trail.append(_TARGET)  # a decode without a draft
        walk(pos + 1, a_left, d_left, steps, nonspec + 1)
        trail.pop()
        if start + pos == 0 or (limit is not None and start + pos >= limit - 1):
            return  # (the first token comes from the prompt's logits, never from a step)
        room = r - pos
        for a in range(a_left + 1):
            if max(1, a) > d_left:
                break
            if a + 1 <= room:  # a whole step: its drafts, then the target's token
                trail.extend([_DRAFT] * a + [_TARGET])
                walk(pos + a + 1, a_left - a, d_left - max(1, a), steps + 1, nonspec)
                del trail[-(a + 1) :]
            elif a == a_left:  # the chunk ends inside this step: the rest comes later
                trail.extend([_DRAFT] * room)
                leaf(steps + 1, nonspec, (a - room, 1))
                del trail[-room:]

    walk(0, accepted, drafted, 0, 0)
    return out


@dataclass(slots=True)
class Attributor:
    """Stateful attribution over one response; feed chunks in order."""

    limit: int | None = None
    """The request's ``n_predict`` when known: the server drafts nothing for the last token."""
    tokens: int = 0
    """Tokens attributed so far."""
    steps: int = 0
    """Verification steps counted so far."""
    drafted: int = 0
    """Cumulative draft tokens (as last reported)."""
    accepted: int = 0
    """Cumulative accepted draft tokens (as last reported)."""
    accepted_per_position: list[int] = field(default_factory=list)
    """Steps that accepted a token at each draft position (steps with a known split only)."""
    nonspec: int = 0
    """Tokens known to come from decodes without a draft."""
    anomalies: int = 0
    """Times the counters fit no reading (a step began before the last one's tokens came out)."""
    _drafts_pending: int = 0
    _target_pending: bool = False
    _rejected_pending: int = 0
    _open_step: int | None = None
    _states: frozenset[Pending] | None = None
    """None while what the open step owes is known (the fields above); else every possibility."""

    def feed(self, chunk: ChunkCounters, t: float = 0.0) -> list[TokenEvent | StepEvent]:
        """Attribute one chunk; returns its token events and the step event (if a step began)."""
        new_drafted = chunk.draft_n - self.drafted
        new_accepted = chunk.draft_accepted - self.accepted
        predicted = chunk.predicted_n
        count = (1 if chunk.text else 0) if predicted is None else predicted - self.tokens
        if new_drafted <= 0 and new_accepted <= 0:
            if self._states is not None:
                return self._release_unsure(chunk.text, count, t)
            return self._release(chunk.text, count, t, [])
        if self._states is None:
            owed = self._drafts_pending + self._target_pending
            if count <= owed:  # a new step, yet the open one's tokens did not all come
                return self._single_step(chunk, count, new_drafted, new_accepted, t, [])
            if count == owed + 1:  # the common case: the rest of the open step, one new token
                events: list[TokenEvent | StepEvent] = []
                if owed:
                    self._release("", owed, t, events)
                return self._single_step(chunk, 1, new_drafted, new_accepted, t, events)
        return self._several(chunk, count, new_drafted, new_accepted, t)

    def _single_step(
        self,
        chunk: ChunkCounters,
        count: int,
        drafted: int,
        accepted: int,
        t: float,
        events: list[TokenEvent | StepEvent],
    ) -> list[TokenEvent | StepEvent]:
        if self._drafts_pending or self._states is not None:
            self.anomalies += 1
        self._states = None
        events.append(
            _validate_step(
                {
                    "t": t,
                    "index": self.steps,
                    "drafted": drafted,
                    "accepted": accepted,
                    "first_token": self.tokens,
                }
            )
        )
        self._open_step = self.steps
        self.steps += 1
        self.drafted, self.accepted = chunk.draft_n, chunk.draft_accepted
        self._record_positions(accepted)
        self._drafts_pending = accepted
        self._target_pending = True
        self._rejected_pending = drafted - accepted
        return self._release(chunk.text, count, t, events)

    def _release(
        self, text: str, count: int, t: float, events: list[TokenEvent | StepEvent]
    ) -> list[TokenEvent | StepEvent]:
        """``count`` tokens while what the open step owes is known: its rest, then draftless."""
        if count == 1:  # the common case: one token, which gets the chunk's text
            events.append(self._next_token(text, t))
            return events
        for offset in range(count):
            # The text belongs to the token that completed it: the last one of the chunk.
            events.append(self._next_token(text if offset == count - 1 else "", t))
        return events

    def _record_positions(self, accepted: int) -> None:
        if len(self.accepted_per_position) < accepted:
            self.accepted_per_position.extend([0] * (accepted - len(self.accepted_per_position)))
        for position in range(accepted):
            self.accepted_per_position[position] += 1

    def _next_token(self, text: str, t: float) -> TokenEvent:
        fields: dict[str, object] = {"t": t, "index": self.tokens, "text": text}
        self.tokens += 1
        if self._drafts_pending:
            self._drafts_pending -= 1
            fields["origin"] = TokenOrigin.DRAFT
            fields["step"] = self._open_step
        elif self._target_pending:
            self._target_pending = False
            fields["origin"] = TokenOrigin.TARGET
            fields["step"] = self._open_step
            fields["rejected_before"], self._rejected_pending = self._rejected_pending, 0
        else:
            fields["origin"] = TokenOrigin.TARGET  # no draft was tried for this token
            self.nonspec += 1
        token: TokenEvent = _validate_token(fields)
        return token

    def _owed(self) -> frozenset[Pending]:
        if self._states is not None:
            return self._states
        return frozenset({(self._drafts_pending, int(self._target_pending))})

    def _release_unsure(self, text: str, count: int, t: float) -> list[TokenEvent | StepEvent]:
        """``count`` tokens with no new step while what the open step owes is uncertain."""
        bits = [0] * count
        after: set[Pending] = set()
        in_old = nonspec = count
        for drafts, target in self._states or ():
            owed = drafts + target
            for i in range(count):
                bits[i] |= _DRAFT if i < drafts else _TARGET
            in_old = min(in_old, owed)
            nonspec = min(nonspec, max(0, count - owed))
            after.add((max(0, drafts - count), target if count <= drafts else 0))
        self.nonspec += nonspec
        self._set_states(after)
        return self._tokens(text, bits, in_old, (self._open_step, None), t, (0, 0))

    def _several(
        self, chunk: ChunkCounters, count: int, drafted: int, accepted: int, t: float
    ) -> list[TokenEvent | StepEvent]:
        """A chunk that began a step and holds more than one token nothing else explains."""
        merged = _Readings(origins=[0] * count, in_old_step=count, nonspec=count + 1)
        for drafts, target in self._owed():
            owed = drafts + target
            if count < owed + 1:
                continue
            found = _readings(count - owed, drafted, accepted, self.tokens + owed, self.limit)
            if not found.steps:
                continue
            merged.steps |= found.steps
            merged.pending |= found.pending
            merged.nonspec = min(merged.nonspec, found.nonspec)
            merged.in_old_step = min(merged.in_old_step, owed)
            for i in range(count):
                if i < owed:
                    merged.origins[i] |= _DRAFT if i < drafts else _TARGET
                else:
                    merged.origins[i] |= found.origins[i - owed]
        if not merged.steps:  # nothing fits: attribute as one step, as far as it goes
            return self._single_step(chunk, count, drafted, accepted, t, [])
        low, high = min(merged.steps), max(merged.steps)
        # Tokens minus accepted drafts, over the whole response so far (so a step the previous
        # chunk left open is counted once its tokens are in), within what the readings allow.
        by_rule = self.tokens + count - self.nonspec - merged.nonspec - chunk.draft_accepted
        steps = min(max(by_rule - self.steps, low), high)
        split_known = accepted == 0 or high == 1
        step: StepEvent = _validate_step(
            {
                "t": t,
                "index": self.steps,
                "drafted": drafted,
                "accepted": accepted,
                "first_token": self.tokens + merged.in_old_step,
                "steps": steps,
                "steps_min": low,
                "steps_max": high,
                "split_known": split_known,
            }
        )
        old_step, rejected_old = self._open_step, self._rejected_pending
        if self._states is not None:
            rejected_old = 0  # (given with the chunk that left the old step uncertain)
        self.steps += steps
        self.nonspec += merged.nonspec
        self.drafted, self.accepted = chunk.draft_n, chunk.draft_accepted
        if split_known and accepted:
            self._record_positions(accepted)
        self._set_states(merged.pending)
        self._open_step = step.index + steps - 1
        events = self._tokens(
            chunk.text,
            merged.origins,
            merged.in_old_step,
            (old_step, step.index),
            t,
            (rejected_old, drafted - accepted),
        )
        # The step event goes before the first token no reading gives to the old step.
        events.insert(merged.in_old_step, step)
        return events

    def _set_states(self, states: set[Pending]) -> None:
        if len(states) == 1:
            ((drafts, target),) = states
            self._states = None
            self._drafts_pending, self._target_pending = drafts, bool(target)
            self._rejected_pending = 0
        else:
            self._states = frozenset(states)
            self._drafts_pending, self._target_pending = 0, False

    def _tokens(
        self,
        text: str,
        bits: list[int],
        in_old: int,
        step_of: tuple[int | None, int | None],
        t: float,
        rejected: tuple[int, int],
    ) -> list[TokenEvent | StepEvent]:
        """Token events for a chunk solved by readings: ``bits`` per token, the first ``in_old``
        of the old step ``step_of[0]``, the rest of ``step_of[1]``; ``rejected``: the old step's
        rejected drafts (to its target token) and this chunk's (to its last token: which of its
        steps rejected them is not always known)."""
        events: list[TokenEvent | StepEvent] = []
        old_step, new_step = step_of
        rejected_old, rejected_last = rejected
        count = len(bits)
        for i, bit in enumerate(bits):
            origin = _ORIGIN.get(bit, TokenOrigin.UNKNOWN)
            fields: dict[str, object] = {
                "t": t,
                "index": self.tokens,
                "text": text if i == count - 1 else "",
                "origin": origin,
            }
            if i < in_old:
                fields["step"] = old_step
                if origin is TokenOrigin.TARGET and rejected_old:
                    fields["rejected_before"], rejected_old = rejected_old, 0
            else:
                fields["step"] = new_step
            if i == count - 1 and rejected_last:
                fields["rejected_before"] = rejected_last
            self.tokens += 1
            events.append(_validate_token(fields))
        return events
