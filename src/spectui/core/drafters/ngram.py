"""Replicas of this llama.cpp build's n-gram drafters: what an n-gram type drafts, without a run.

An n-gram drafter proposes tokens from the token history alone. At temperature 0, while a
candidate's answer is the baseline's, what it drafts at each step and how much of it the target
accepts therefore follow from the baseline's tokens: the prompt as the server tokenized it and the
tokens it generated (tune's replays). The same holds in a chain of types: whether the n-gram
member drafts at a step decides which drafter made it (`drafters.chain`).

`replay` runs the server's generation loop over them (`tools/server/server-context.cpp`): after
each sampled token the drafter proposes at most the tokens still to generate minus one; the
target verifies the sampled token and the draft in one batch; the draft's longest prefix that
matches the target's tokens is accepted, and the target's next token is emitted with it.

The drafters copy `common/ngram-map.cpp` (`common_ngram_simple_draft`; the maps of
ngram-map-k and ngram-map-k4v are in `drafters.ngram_map`) and `common/ngram-mod.cpp` with its
state in `common/speculative.cpp`. State lives as long as the server: a replay runs one start's
requests in their order, on the slots the server would give them (`ngram_map.ServerSlots`).
Another build may draft otherwise, so tune checks each replicated type against its real runs
first (`tune.replays.check_replicas`): a replica that misses one real run of an unchanged answer
is not used; a chain's naming checks every step's draft length (`drafters.chain`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

_MASK64 = (1 << 64) - 1

REPLICATED = frozenset({"ngram-simple", "ngram-mod", "ngram-map-k", "ngram-map-k4v"})
"""The spec types with a replica (`drafters.settings.replica` builds one)."""


class Drafter(Protocol):
    """One n-gram drafter's state over one server start."""

    def begin(self, prompt: Sequence[int]) -> None:
        """A request's prompt was processed (``prompt``: its tokens)."""

    def draft(self, history: Sequence[int], sampled: int) -> list[int]:
        """The draft after ``sampled``; ``history``: the tokens before it (prompt and output)."""

    def accept(self, accepted: int) -> None:
        """The target accepted ``accepted`` tokens of the last non-empty draft."""


@dataclass(frozen=True)
class Replay:
    """What a replicated drafter drafted over one generation, in `RunRecord`'s terms."""

    tokens: int
    """Tokens generated."""
    drafted: int
    """Draft tokens proposed."""
    accepted: int
    """Draft tokens accepted."""
    steps: int
    """Verification steps (steps with a non-empty draft)."""
    accepted_per_position: tuple[int, ...]
    """Steps that accepted a draft token at each position."""


@dataclass
class NgramSimple:
    """`common_ngram_simple_draft`: the last ``size_n`` tokens found earlier in the history
    (searching back) propose the up to ``size_m`` tokens that followed them. Stateless."""

    size_n: int
    size_m: int

    def begin(self, prompt: Sequence[int]) -> None:
        """Nothing to set up."""

    def draft(self, history: Sequence[int], sampled: int) -> list[int]:
        """The draft (empty: no match, or a copy shorter than ``size_n``)."""
        n, m, cur = self.size_n, self.size_m, len(history)
        if cur <= n + m + 1:
            return []
        pattern = [*history[cur - n + 1 :], sampled]
        # Upstream tries j = cur-n-1 down to 1 (0 means "no match"). The window's last token must
        # be ``sampled``: list.index finds those candidates in C, on the reversed history (the
        # naming of a chain asks at every step of a live run, over histories of thousands).
        backwards = list(reversed(history))  # backwards[i] is history[cur - 1 - i]
        i = 1  # the window j ends at cur - 1 - i: i = 1 is j = cur - n - 1
        while True:
            try:
                i = backwards.index(sampled, i, cur - n)  # (cur - n - 1: j = 1, the last)
            except ValueError:
                return []
            j = cur - i - n
            if list(history[j : j + n]) == pattern:
                copy = min(m, cur - (j + n))
                return [] if copy < n else list(history[j + n : j + n + copy])
            i += 1

    def accept(self, accepted: int) -> None:
        """Nothing to learn."""


@dataclass
class NgramMod:
    """`common_ngram_mod`, one server slot of it: a hash of each ``n_match``-gram -> the token
    after it, in a pool of 4 Mi entries shared by every slot and request of a server start; the
    draft follows the chain from the last ``n_match`` tokens, up to ``n_max`` tokens, and is
    dropped when shorter than ``n_min``. The pool is emptied when over a quarter full, or after
    5 steps in a row of one slot accepting under a quarter of their draft."""

    n_match: int
    n_max: int
    n_min: int
    pool: dict[int, int] = field(default_factory=dict)
    """Slot -> token; one pool for every slot of the server (upstream's `mod`)."""
    i_last: int = 0
    n_draft_last: int = 0
    n_low: int = 0

    SIZE = 4 * 1024 * 1024

    def _slot(self, tokens: Sequence[int], at: int) -> int:
        value = 0
        for i in range(self.n_match):
            value = (value * 6364136223846793005 + tokens[at + i]) & _MASK64
        return value % self.SIZE

    def _add(self, tokens: Sequence[int], at: int) -> None:
        self.pool[self._slot(tokens, at)] = tokens[at + self.n_match]

    def begin(self, prompt: Sequence[int]) -> None:
        """Every n-gram of the prompt goes into the pool."""
        self.i_last = self.n_draft_last = 0
        n = self.n_match
        if len(prompt) < n:
            return
        for i in range(len(prompt) - n):
            self._add(prompt, i)
        self.i_last = len(prompt) - n
        if len(self.pool) / self.SIZE > 0.25:
            self.pool.clear()

    def draft(self, history: Sequence[int], sampled: int) -> list[int]:
        """The draft (empty: the chain broke before ``n_min`` tokens)."""
        self.n_draft_last = 0
        n, cur = self.n_match, len(history)
        if cur < n:
            return []
        if self.i_last + 32 < cur:  # upstream adds the output's n-grams in chunks of 32
            for i in range(self.i_last, cur - n):
                self._add(history, i)
            self.i_last = cur - n
        chain = [*history[cur - n + 1 :], sampled]
        out: list[int] = []
        for i in range(self.n_max):
            token = self.pool.get(self._slot(chain, i))
            if token is None:
                if i < self.n_min:
                    return []
                break
            chain.append(token)
            out.append(token)
        self.n_draft_last = len(out)  # before the server's cap, as upstream counts it
        return out

    def accept(self, accepted: int) -> None:
        """A run of 5 poorly accepted drafts empties the pool."""
        if self.n_draft_last == 0:
            return
        if accepted / self.n_draft_last < 0.25:
            self.n_low += 1
            if self.n_low >= 5:
                self.pool.clear()
                self.n_low = self.i_last = 0
        else:
            self.n_low = 0


def replay(
    drafter: Drafter,
    prompt: Sequence[int],
    output: Sequence[int],
    n_predict: int,
    n_ctx: int | None = None,
) -> Replay:
    """The steps of generating ``output`` after ``prompt`` with ``drafter`` (see the module)."""
    history = list(prompt)
    drafter.begin(history)
    per_position: list[int] = []
    drafted = accepted = steps = 0
    i, generated = 0, 1  # the prompt pass samples output[0]
    while generated < n_predict and i + 1 < len(output):
        room = n_predict - generated - 1
        if n_ctx is not None:
            room = min(room, n_ctx - len(history) - 2)
        draft = drafter.draft(history, output[i])[:room] if room > 0 else []
        if not draft:
            history.append(output[i])
            i, generated = i + 1, generated + 1
            continue
        a = 0
        while a < len(draft) and i + 1 + a < len(output) and draft[a] == output[i + 1 + a]:
            a += 1
        drafted, accepted, steps = drafted + len(draft), accepted + a, steps + 1
        per_position += [0] * (a - len(per_position))
        for j in range(a):
            per_position[j] += 1
        drafter.accept(a)
        history += output[i : i + 1 + a]
        i, generated = i + a + 1, generated + a + 1
    return Replay(
        tokens=len(output),
        drafted=drafted,
        accepted=accepted,
        steps=steps,
        accepted_per_position=tuple(per_position),
    )
