"""Turn llama-server's cumulative counters into a per-token origin (draft or target) and steps.

How llama-server reports speculative decoding (`tools/server/server-context.cpp`, checked against
/metrics on real servers): a verification step adds its draft's size to ``timings.draft_n`` when
the draft is made, then its accepted count to ``draft_n_accepted``, then yields its ``a``
accepted drafts and one target token (the one that replaced the rejected rest of the draft), one
streamed chunk per token. Every chunk carries the cumulative counters, so both jump on the first
chunk of a step. A decode whose drafter proposed nothing (an empty n-gram draft, the last token
before ``n_predict``) yields one target token and moves no counter.

One chunk can carry several tokens: the server holds back a token whose text ends inside a UTF-8
character and sends it with the next one (byte-fallback tokens: emoji, CJK, a random drafter).
Tokens are therefore counted by the cumulative ``tokens_predicted`` / ``predicted_n``, and a chunk
with more new tokens than one step start explains is solved (`readings`): every split of it into
steps and draftless decodes that fits the counters is kept, for every possibility of what the
previous step still owed, and only what all of them agree on is reported — a token's origin
(else `TokenOrigin.UNKNOWN`), the per-position split (else the steps are unsplit), what is still
owed. The one number that needs a rule is the step count: the split with the fewest draftless
decodes, then the fewest steps (tokens minus accepted drafts, when a chunk ends at a step's end),
or, once the response has shown a draftless decode after its first step (an n-gram drafter that
found nothing), the fewest steps; carried over the response so a step a chunk left open is
counted once the counters show it. The range of counts that fit goes with it
(`RunMetrics.steps_maybe_fewer` / ``_more``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spectui.core.events import StepEvent, TokenEvent, TokenOrigin
from spectui.core.stream.readings import DRAFT, TARGET, Pending, readings

# The events' own validators, called directly: `TokenEvent(**fields)` adds a Python-level
# `__init__` that cost a third as much again, once per token. Validation is the same.
_validate_token = TokenEvent.__pydantic_validator__.validate_python
_validate_step = StepEvent.__pydantic_validator__.validate_python

_ORIGIN = {DRAFT: TokenOrigin.DRAFT, TARGET: TokenOrigin.TARGET}

Hypothesis = tuple[int, int, int, int]
"""For one possibility of what is owed: (draftless decodes, steps by the counting rule, fewest
steps, most steps) — the counts relative to what was reported, the decodes to the fewest."""


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


def _rule(hyp: Hypothesis, fewest_steps: bool) -> tuple[int, int]:
    """What the counting rule prefers least of: draftless decodes then steps, or the reverse."""
    return (hyp[1], hyp[0]) if fewest_steps else (hyp[0], hyp[1])


def _keep(
    into: dict[Pending, Hypothesis], pending: Pending, hyp: Hypothesis, fewest_steps: bool
) -> None:
    """Merge ``hyp`` into what ``pending`` may come with: the rule's pick, and a range that
    covers both."""
    old = into.get(pending)
    if old is None:
        into[pending] = hyp
        return
    pick = min(old, hyp, key=lambda h: _rule(h, fewest_steps))
    into[pending] = (pick[0], pick[1], min(old[2], hyp[2]), max(old[3], hyp[3]))


@dataclass(slots=True)
class Attributor:
    """Stateful attribution over one response; feed chunks in order."""

    limit: int | None = None
    """The request's ``n_predict`` when known: the server drafts nothing for the last token."""
    tokens: int = 0
    """Tokens attributed so far."""
    steps: int = 0
    """Verification steps reported so far."""
    drafted: int = 0
    """Cumulative draft tokens (as last reported)."""
    accepted: int = 0
    """Cumulative accepted draft tokens (as last reported)."""
    accepted_per_position: list[int] = field(default_factory=list)
    """Steps that accepted a token at each draft position (steps with a known split only)."""
    draftless_seen: bool = False
    """A decode without a draft was seen (not the prompt's token, nor the limit's last): this
    drafter can come back empty, so a chunk of several steps is counted with the fewest steps
    that fit rather than the fewest draftless decodes (the rule; the range is the same)."""
    anomalies: int = 0
    """Times the counters fit no reading (a step began before the last one's tokens came out)."""
    _drafts_pending: int = 0
    _target_pending: bool = False
    _rejected_pending: int = 0
    _open_step: int | None = None
    _count: tuple[int, int, int] = (0, 0, 0)
    """While what is owed is known: steps (by the rule, fewest, most) not yet reported."""
    _hypotheses: dict[Pending, Hypothesis] | None = None
    """None while what the open step owes is known (the fields above); else every possibility."""

    @property
    def steps_range(self) -> tuple[int, int]:
        """How many fewer and more steps than ``steps`` may have happened so far."""
        if self._hypotheses is None:
            _, low, high = self._count
        else:
            low = min(h[2] for h in self._hypotheses.values())
            high = max(h[3] for h in self._hypotheses.values())
        return max(0, -low), max(0, high)

    def feed(self, chunk: ChunkCounters, t: float = 0.0) -> list[TokenEvent | StepEvent]:
        """Attribute one chunk; returns its token events and the step event (if a step began)."""
        new_drafted = chunk.draft_n - self.drafted
        new_accepted = chunk.draft_accepted - self.accepted
        predicted = chunk.predicted_n
        count = (1 if chunk.text else 0) if predicted is None else predicted - self.tokens
        if new_drafted <= 0 and new_accepted <= 0:
            if self._hypotheses is not None:
                return self._release_unsure(chunk.text, count, t)
            return self._release(chunk.text, count, t, [])
        if self._hypotheses is None:
            owed = self._drafts_pending + self._target_pending
            if count <= owed:  # a new step, yet the open one's tokens did not all come
                self.anomalies += 1
                return self._single_step(chunk, count, new_drafted, new_accepted, t, [])
            if count == owed + 1:  # the common case: the rest of the open step, one new token
                events: list[TokenEvent | StepEvent] = []
                if owed:
                    self._release("", owed, t, events)
                return self._single_step(chunk, 1, new_drafted, new_accepted, t, events)
        return self._several(chunk, count, new_drafted, new_accepted, t)

    def _report(self) -> tuple[int, int, int]:
        """Report the steps the rule counts now (at least the one a step start proves): returns
        (steps, how many fewer and more may have happened so far, after them)."""
        if self._hypotheses is None:
            rule = self._count[0]
        else:
            pick = min(self._hypotheses.values(), key=lambda h: _rule(h, self.draftless_seen))
            rule = pick[1]
        steps = max(1, rule)
        if self._hypotheses is None:
            rule, low, high = self._count
            self._count = (rule - steps, low - steps, high - steps)
        else:
            self._hypotheses = {
                p: (n, rule - steps, low - steps, high - steps)
                for p, (n, rule, low, high) in self._hypotheses.items()
            }
        self.steps += steps
        return (steps, *self.steps_range)

    def _single_step(
        self,
        chunk: ChunkCounters,
        count: int,
        drafted: int,
        accepted: int,
        t: float,
        events: list[TokenEvent | StepEvent],
    ) -> list[TokenEvent | StepEvent]:
        if self._hypotheses is not None:  # (only after counters that fit nothing)
            self._hypotheses = None
        fields: dict[str, object] = {
            "t": t,
            "index": self.steps,
            "drafted": drafted,
            "accepted": accepted,
            "first_token": self.tokens,
        }
        if self._count == (0, 0, 0):  # the common case: the count so far is exact
            self.steps += 1
        else:  # steps an earlier chunk left to count, or a range carried on
            rule, low, high = self._count
            self._count = (rule + 1, low + 1, high + 1)
            steps, fewer, more = self._report()
            fields.update(steps=steps, steps_maybe_fewer=fewer, steps_maybe_more=more)
        step: StepEvent = _validate_step(fields)
        events.append(step)
        self._open_step = self.steps - 1
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
            if self.tokens > 1 and (self.limit is None or self.tokens < self.limit):
                # (not the prompt's token, nor the limit's last: every drafter has those)
                self.draftless_seen = True
        token: TokenEvent = _validate_token(fields)
        return token

    def _possibilities(self) -> dict[Pending, Hypothesis]:
        if self._hypotheses is not None:
            return self._hypotheses
        rule, low, high = self._count
        return {(self._drafts_pending, int(self._target_pending)): (0, rule, low, high)}

    def _settle(self, hypotheses: dict[Pending, Hypothesis]) -> None:
        """Keep what may be owed now; back to the fast path when only one thing may be."""
        fewest = min(h[0] for h in hypotheses.values())
        if len(hypotheses) > 1:
            self._hypotheses = {p: (h[0] - fewest, *h[1:]) for p, h in hypotheses.items()}
            self._drafts_pending, self._target_pending, self._rejected_pending = 0, False, 0
            return
        ((drafts, target), (_, rule, low, high)), *_ = hypotheses.items()
        self._hypotheses = None
        self._count = (rule, low, high)
        self._drafts_pending, self._target_pending = drafts, bool(target)
        self._rejected_pending = 0

    def _release_unsure(self, text: str, count: int, t: float) -> list[TokenEvent | StepEvent]:
        """``count`` tokens with no new step while what the open step owes is uncertain."""
        bits = [0] * count
        after: dict[Pending, Hypothesis] = {}
        in_old = count
        for (drafts, target), (draftless, rule, low, high) in self._possibilities().items():
            owed = drafts + target
            for i in range(count):  # its drafts, its target token, then draftless decodes
                bits[i] |= DRAFT if i < drafts else TARGET
            in_old = min(in_old, owed)
            pending = (max(0, drafts - count), target if count <= drafts else 0)
            hyp = (draftless + max(0, count - owed), rule, low, high)
            _keep(after, pending, hyp, self.draftless_seen)
        self._settle(after)
        return self._tokens(text, bits, in_old, (self._open_step, None), t, (0, 0))

    def _several(
        self, chunk: ChunkCounters, count: int, drafted: int, accepted: int, t: float
    ) -> list[TokenEvent | StepEvent]:
        """A chunk that began a step and holds more than one token nothing else explains."""
        bits = [0] * count
        after: dict[Pending, Hypothesis] = {}
        in_old, most = count, 0
        for (drafts, target), (draftless, rule, low, high) in self._possibilities().items():
            owed = drafts + target
            if count < owed + 1:
                continue
            found = readings(count - owed, drafted, accepted, self.tokens + owed, self.limit)
            for steps, pending in found.splits:
                most = max(most, steps)
                extra = draftless + found.draftless(steps, pending)
                hyp = (extra, rule + steps, low + steps, high + steps)
                _keep(after, pending, hyp, self.draftless_seen)
            if found.splits:
                in_old = min(in_old, owed)
                for i in range(count):
                    old = DRAFT if i < drafts else TARGET
                    bits[i] |= old if i < owed else found.origins[i - owed]
        if not after:  # nothing fits: attribute as one step, as far as it goes
            self.anomalies += 1
            return self._single_step(chunk, count, drafted, accepted, t, [])
        split_known = accepted == 0 or most == 1
        first, index = self.tokens + in_old, self.steps
        self._settle(after)
        steps, fewer, more = self._report()
        step: StepEvent = _validate_step(
            {
                "t": t,
                "index": index,
                "drafted": drafted,
                "accepted": accepted,
                "first_token": first,
                "steps": steps,
                "steps_maybe_fewer": fewer,
                "steps_maybe_more": more,
                "split_known": split_known,
            }
        )
        old_step = self._open_step
        self.drafted, self.accepted = chunk.draft_n, chunk.draft_accepted
        if split_known and accepted:
            self._record_positions(accepted)
        self._open_step = step.index + step.steps - 1
        events = self._tokens(
            chunk.text, bits, in_old, (old_step, step.index), t, (0, drafted - accepted)
        )
        # The step event goes before the first token no reading gives to the old step.
        events.insert(in_old, step)
        return events

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
        count = len(bits)
        old_step, new_step = step_of
        rejected_old, rejected_last = rejected
        for i, bit in enumerate(bits):
            origin = _ORIGIN.get(bit, TokenOrigin.UNKNOWN)
            fields: dict[str, object] = {
                "t": t,
                "index": self.tokens,
                "text": text if i == count - 1 else "",
                "origin": origin,
                "step": old_step if i < in_old else new_step,
            }
            if i < in_old and origin is TokenOrigin.TARGET and rejected_old:
                fields["rejected_before"], rejected_old = rejected_old, 0
            if i == count - 1 and rejected_last:
                fields["rejected_before"] = rejected_last
            self.tokens += 1
            events.append(_validate_token(fields))
        return events
