"""Who drafted each step of a chain of spec types (``--spec-type ngram-simple,draft-mtp``).

llama-server tries a chain's drafters in one fixed order, whatever order the flag names them in
(`common_speculative_init` in `common/speculative.cpp`): ngram-simple, ngram-map-k, ngram-map-k4v,
ngram-mod, ngram-cache, then draft-simple, draft-eagle3, draft-mtp, draft-dflash, draft-dspark.
At each step it calls them in that order and stops at the first non-empty draft (cut to what may
still be generated), which it verifies and credits to that drafter alone: only that drafter
learns from the step's acceptance (`common_speculative_accept`; the others' ``is_other`` accept
does nothing for the n-gram types). Neither the stream nor ``/metrics`` says which one it was.

An n-gram drafter's draft depends only on the tokens so far and its own state, so its replica
(`drafters.ngram`, `drafters.ngram_map`) run over the same calls says whether it drafted there.
`ChainNamer` does this over one server start's requests: where a member drafts, the step is
that member's, and the draft's length must be the step's (else the replica is off: "unknown");
where no n-gram member drafts, it is the model drafter's. It says `UNKNOWN` rather than guess:
a member without a replica (ngram-cache), a request without token ids, two model drafters behind
the n-gram ones, steps that do not line up with the draft points, or a stateful member (ngram-mod,
ngram-map-*) whose state is not known any more (a mismatch seen, a request it did not see,
a server attached to rather than started).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from spectui.core.drafters.ngram import Drafter
from spectui.core.drafters.ngram_map import ServerSlots
from spectui.core.drafters.settings import slot_factory

UNKNOWN = "unknown"
"""The name of a step whose drafter cannot be told."""

SERVER_ORDER = (
    "ngram-simple",
    "ngram-map-k",
    "ngram-map-k4v",
    "ngram-mod",
    "ngram-cache",
    "draft-simple",
    "draft-eagle3",
    "draft-mtp",
    "draft-dflash",
    "draft-dspark",
)
"""The order in which llama-server tries a chain's drafters (this build's priority list)."""


def drafting_types(types: Sequence[str]) -> tuple[str, ...]:
    """``types`` without 'none', in the order the server tries them (names it does not know
    last, in their own order)."""
    known = [t for t in SERVER_ORDER if t in types]
    return (*known, *dict.fromkeys(t for t in types if t not in SERVER_ORDER and t != "none"))


@dataclass
class _Members:
    """One server slot's n-gram drafters, in the server's order (a `Drafter` for `ServerSlots`,
    which routes requests to slots; the naming calls `first` and `all_empty`)."""

    drafters: list[Drafter | None]
    """Each member's replica (None: it has none)."""
    stateful: list[bool]
    """Whether each member keeps state between calls (all but ngram-simple)."""
    trusted: list[bool]
    """Whether each member's state is known (stateless members' always is)."""
    last: int | None = None
    """The member whose draft the last `first` call returned (None: none drafted)."""

    def begin(self, prompt: Sequence[int]) -> None:
        """Every member sees the request's prompt."""
        for drafter in self.drafters:
            if drafter is not None:
                drafter.begin(prompt)

    def draft(self, history: Sequence[int], sampled: int) -> list[int]:
        """`first`'s draft (the `Drafter` protocol)."""
        return self.first(history, sampled)[1]

    def first(self, history: Sequence[int], sampled: int) -> tuple[bool, list[int]]:
        """(known, draft): the first non-empty draft, as the server asks for it (the members
        after the one that drafts are not called). Not known when a member that cannot be run
        comes first: whether the members after it were called is not known either."""
        self.last = None
        for i, drafter in enumerate(self.drafters):
            if drafter is None or not self.trusted[i]:
                self.forget(after=i)
                return False, []
            out = drafter.draft(history, sampled)
            if out:
                self.last = i
                return True, out
        return True, []

    def all_empty(self, history: Sequence[int], sampled: int) -> None:
        """The server drafted nothing here: every member was called and drafted nothing. One
        that drafts now has a state that was not the server's."""
        self.last = None
        for i, drafter in enumerate(self.drafters):
            if drafter is not None and self.trusted[i] and drafter.draft(history, sampled):
                self.distrust(i)

    def distrust(self, i: int) -> None:
        """Member ``i`` drafted otherwise than the server: a stateful one's state is off (a
        stateless one drafts from the tokens alone, and is asked again at the next step)."""
        self.trusted[i] = self.trusted[i] and not self.stateful[i]

    def forget(self, after: int = -1) -> None:
        """The stateful members after index ``after`` no longer know their state."""
        for i in range(after + 1, len(self.drafters)):
            self.distrust(i)

    def accept(self, accepted: int) -> None:
        """The member that drafted learns; the others' accept does nothing upstream."""
        if self.last is not None and (drafter := self.drafters[self.last]) is not None:
            drafter.accept(accepted)


class ChainNamer:
    """Names the drafter of every step of one server start's runs (see the module).

    Feed each request in order: `begin` with its prompt's token ids, then every draft point
    as the run reaches it: `step` where a step began, `no_draft` where a token came without one.
    """

    def __init__(
        self,
        types: Sequence[str],
        settings: Mapping[str, float],
        *,
        n_slots: int = 1,
        state_known: bool = True,
    ) -> None:
        """``types``: the ``--spec-type`` list; ``settings``: every ``--spec-*`` flag's value
        the server runs with (``--spec-draft-n-max`` bounds a model drafter's draft);
        ``n_slots``: its ``--parallel``; ``state_known``: the server was started for spectui,
        so every request it served goes through this namer."""
        self.types = drafting_types(types)
        self.ngram = tuple(t for t in self.types if t.startswith("ngram-"))
        self.models = tuple(t for t in self.types if not t.startswith("ngram-"))
        pool: dict[int, int] = {}  # ngram-mod's, shared by every slot
        makers = [slot_factory(t, settings, pool) for t in self.ngram]
        stateful = [t != "ngram-simple" for t in self.ngram]

        def members() -> Drafter:
            drafters = [m() if m is not None else None for m in makers]
            trusted = [state_known or not s for s in stateful]
            return _Members(drafters, stateful, trusted)

        n_max = settings.get("--spec-draft-n-max")
        self._model_n_max = None if n_max is None else int(n_max)
        self._slots: ServerSlots | None = None
        if len(self.types) > 1 and self.ngram:
            self._slots = ServerSlots(members, n_slots)
        self._prompt: list[int] | None = None
        self._history: list[int] = []  # the prompt and the output up to the last draft point
        self._n_predict: int | None = None
        self._next = 1  # the next draft point: the index of the token it would draft before

    @property
    def single(self) -> str | None:
        """The one drafter of a config that is not a chain (every step is its), else None."""
        return self.types[0] if len(self.types) == 1 else None

    @property
    def needs_tokens(self) -> bool:
        """Whether naming needs the token ids (a chain with an n-gram member)."""
        return self._slots is not None

    def _members(self) -> _Members | None:
        if self._slots is None or self._slots.current < 0:
            return None
        members = self._slots.drafters[self._slots.current]
        assert isinstance(members, _Members)
        return members

    def begin(self, prompt: Sequence[int] | None, n_predict: int | None = None) -> None:
        """A request starts: ``prompt``, its token ids as the server read them (None: not
        known, and the stateful members' state is lost); ``n_predict``: its token limit."""
        self._prompt = None if prompt is None else list(prompt)
        self._history = [] if prompt is None else list(prompt)
        self._n_predict = n_predict
        self._next = 1
        if self._slots is None:
            return
        if prompt is None:
            self.forget()
            return
        self._slots.begin(self._prompt or [])

    def forget(self) -> None:
        """No member's state is known any more (a draft call spectui did not see)."""
        if self._slots is not None:
            for members in self._slots.drafters:
                assert isinstance(members, _Members)
                members.forget()

    def _point(self, index: int, output: Sequence[int]) -> tuple[list[int], int, _Members] | None:
        """(history, sampled, the slot's members) at the draft point before token ``index``;
        None when it cannot be run (no token ids). A point that is not the one expected means
        a draft call was not seen: every stateful member loses its state."""
        members = self._members()
        if members is None or self._prompt is None or not 0 < index <= len(output):
            self.forget()
            return None
        if index != self._next:
            self.forget()  # a draft call not seen: a stateless member can still be asked
        # Grown, not rebuilt, at each point (thousands of tokens, every step of a live run);
        # the drafters read it during the call only.
        history, start = self._history, len(self._prompt)
        if len(history) > start + index - 1:
            del history[start + index - 1 :]
        history += output[len(history) - start : index - 1]
        assert self._slots is not None
        self._slots.tokens[self._slots.current] = history  # (the slot's cache, for the next pick)
        return history, output[index - 1], members

    def _room(self, index: int) -> int | None:
        """The longest draft the server allows before token ``index`` (None: not known)."""
        return None if self._n_predict is None else self._n_predict - index - 1

    def step(self, first_token: int, drafted: int, accepted: int, output: Sequence[int]) -> str:
        """The drafter of the step whose tokens begin at ``first_token`` (the ``drafted``
        and ``accepted`` counts the server gave it; ``output``: the run's token ids so far)."""
        if (single := self.single) is not None:
            return single
        if self._slots is None:  # model drafters only: which of them is not known
            return UNKNOWN
        point = self._point(first_token, output)
        self._next = first_token + accepted + 1
        if point is None:
            return UNKNOWN
        history, sampled, members = point
        known, draft = members.first(history, sampled)
        if not known:
            return UNKNOWN
        if members.last is not None:
            room = self._room(first_token)
            if len(draft if room is None else draft[:room]) != drafted:
                members.distrust(members.last)
                members.forget(after=members.last)  # (the server may have called them)
                return UNKNOWN
            members.accept(accepted)
            return self.ngram[members.last]
        too_long = self._model_n_max is not None and drafted > self._model_n_max
        if len(self.models) == 1 and not too_long:
            return self.models[0]
        if not self.models or too_long:  # no member drafted, yet the step is theirs: one is off
            self.forget()
        return UNKNOWN

    def lost(self) -> None:
        """Where the draft points were is not known any more (a token of unknown origin):
        the stateful members lose their state; the next step is asked where it begins."""
        if self._slots is not None:
            self.forget()
            self._next = -1

    def merged(self) -> str:
        """A step event that is not one step (`StepEvent.steps`: several in one chunk, or a
        count an earlier chunk left open): where each began is not known, so neither are their
        drafters, and the stateful members lose their state."""
        if self.single is not None:
            return self.single
        self.lost()
        return UNKNOWN

    def no_draft(self, index: int, output: Sequence[int]) -> None:
        """Token ``index`` came without a step: nothing was drafted before it."""
        if self._slots is None or index == 0:
            return
        point = self._point(index, output)
        self._next = index + 1
        room = self._room(index)
        if point is not None and (room is None or room > 0):  # (no draft call for the last)
            history, sampled, members = point
            members.all_empty(history, sampled)
