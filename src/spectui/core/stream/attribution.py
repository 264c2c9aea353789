"""Turn llama-server's cumulative counters into a per-token origin (draft or target) and steps.

How llama-server reports speculative decoding (verified against /metrics on real servers): every
streamed chunk carries cumulative ``timings.draft_n`` and ``timings.draft_n_accepted``. Both jump
on the *first chunk of a verification step*. With ``a`` tokens newly accepted, that chunk's token
and the next ``a - 1`` are accepted drafts, and the token after them is the target's own (the one
that replaced the rejected rest of the draft, ``draft_n`` delta - ``a`` tokens). Tokens are counted
by the cumulative ``tokens_predicted`` / ``predicted_n``, not by chunks: held-back UTF-8 or stop
text can merge several tokens into one chunk.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spectui.core.events import StepEvent, TokenEvent, TokenOrigin

# The events' own validators, called directly: `TokenEvent(**fields)` adds a Python-level
# `__init__` that cost a third as much again, once per token. Validation is the same.
_validate_token = TokenEvent.__pydantic_validator__.validate_python
_validate_step = StepEvent.__pydantic_validator__.validate_python


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
class Attributor:
    """Stateful attribution over one response; feed chunks in order."""

    tokens: int = 0
    """Tokens attributed so far."""
    steps: int = 0
    """Verification steps seen so far."""
    drafted: int = 0
    """Cumulative draft tokens (as last reported)."""
    accepted: int = 0
    """Cumulative accepted draft tokens (as last reported)."""
    accepted_per_position: list[int] = field(default_factory=list)
    """Steps that accepted a token at each draft position."""
    anomalies: int = 0
    """Times the counters did not fit the model above (a step began before the last one ended)."""
    _drafts_pending: int = 0
    _target_pending: bool = False
    _rejected_pending: int = 0

    def feed(self, chunk: ChunkCounters, t: float = 0.0) -> list[TokenEvent | StepEvent]:
        """Attribute one chunk; returns the step (if one began) and the chunk's token events."""
        events: list[TokenEvent | StepEvent] = []
        new_drafted = chunk.draft_n - self.drafted
        new_accepted = chunk.draft_accepted - self.accepted
        if new_drafted > 0:
            if self._drafts_pending:
                self.anomalies += 1
            step: StepEvent = _validate_step(
                {
                    "t": t,
                    "index": self.steps,
                    "drafted": new_drafted,
                    "accepted": new_accepted,
                    "first_token": self.tokens,
                }
            )
            events.append(step)
            self.steps += 1
            self.drafted, self.accepted = chunk.draft_n, chunk.draft_accepted
            self._record_positions(new_accepted)
            self._drafts_pending = new_accepted
            self._target_pending = True
            self._rejected_pending = new_drafted - new_accepted

        predicted = chunk.predicted_n
        count = (1 if chunk.text else 0) if predicted is None else predicted - self.tokens
        if count == 1:  # the common case: one token, which gets the chunk's text
            events.append(self._next_token(chunk.text, t))
            return events
        for offset in range(count):
            # The text belongs to the token that completed it: the last one of the chunk.
            text = chunk.text if offset == count - 1 else ""
            events.append(self._next_token(text, t))
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
            fields["step"] = self.steps - 1
        elif self._target_pending:
            self._target_pending = False
            fields["origin"] = TokenOrigin.TARGET
            fields["step"] = self.steps - 1
            fields["rejected_before"], self._rejected_pending = self._rejected_pending, 0
        else:
            fields["origin"] = TokenOrigin.TARGET  # no draft was tried for this token
        token: TokenEvent = _validate_token(fields)
        return token
