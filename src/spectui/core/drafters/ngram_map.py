"""Replicas of this llama.cpp build's `ngram-map-k` and `ngram-map-k4v` drafters.

Both copy `common/ngram-map.cpp` (`common_ngram_map_begin`, `_draft`, `_accept`) with the types set
up in `common/speculative.cpp` (`get_common_ngram_map`): a key is the last ``size_n`` tokens, found
earlier in the history through a 2^18-slot hash map (32-bit LCG hash, first writer wins) or, for
the positions not hashed yet, a backward scan; the draft is the up to ``size_m`` tokens that
followed the earlier occurrence, capped by how many of the key's last draft were accepted.

- `ngram-map-k` (key only) drafts from any match; ``min_hits`` is never read on that path.
- `ngram-map-k4v` counts up to 4 distinct ``size_m``-token continuations ("values") of the key and
  drafts only once the key was hit ``min_hits`` times and its most frequent value occurs at least
  twice as often as the others together.

Unlike ngram-mod's pool, this state belongs to one server slot (`config[seq_id]`), and a server
has as many slots as `--parallel` says (spectui starts compare servers with 1; llama-server's own
default, -1, gives 4): `ServerSlots` routes each request to the slot the server picks
(`get_available_slot`), so a start's requests replay on one `ServerSlots`.
Indices kept from an earlier request are read against the current history, as upstream does.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from spectui.core.drafters.ngram import Drafter

_LCG = 2654435761
_MASK32 = 0xFFFFFFFF
KEY_MAP_SIZE = 262144
"""`COMMON_NGRAM_HASH_MAP_SIZE`: slots of the hash -> key-index map."""
MAX_VALUES = 4
"""`COMMON_NGRAM_MAX_VALUES`: continuations counted per key."""
MAX_COUNT = 16380
"""`COMMON_NGRAM_MAX_VALUE_COUNT`: where hit and value counts stop."""
SERVER_SLOTS = 4
"""Slots of a server started with `--parallel -1` (auto), each with its own map."""
SLOT_SIMILARITY = 0.10
"""`--slot-prompt-similarity`'s default."""


def _hash(tokens: Sequence[int], start: int, length: int) -> int:
    value = 0
    for i in range(length):
        value = (value * _LCG + tokens[start + i]) & _MASK32
    return value % KEY_MAP_SIZE


def _same(tokens: Sequence[int], a: int, b: Sequence[int] | int, length: int) -> bool:
    """``tokens[a:a+length]`` equals ``b`` (a sequence, or the run at index ``b`` of ``tokens``).
    Upstream reads past the history's end without a check; such a read counts as a mismatch."""
    other = b if not isinstance(b, int) else tokens[b : b + length]
    run = tokens[a : a + length]
    return len(run) == length == len(other) and list(run) == list(other)


@dataclass
class MapValue:
    """`common_ngram_map_value`: one continuation seen after a key."""

    value_idx: int = 0
    """Where the continuation starts in the history (0: unused slot)."""
    value_num: int = 0
    """Times it was counted after the key."""
    n_accepted: int = -1
    """Tokens accepted of the last draft made from it: the next draft's cap."""


@dataclass
class MapKey:
    """`common_ngram_map_key`: one key that matched an earlier occurrence."""

    key_idx: int
    """Where the key was first matched in the history."""
    stat_idx: int = 0
    """Index up to which its continuations were counted."""
    key_num: int = 0
    """Draft calls that matched it."""
    values: list[MapValue] = field(default_factory=list)
    """Its `MAX_VALUES` continuation slots."""


@dataclass
class NgramMap:
    """`common_ngram_map` of one slot (see the module)."""

    size_n: int
    """Key length (`--spec-ngram-map-k*-size-n`)."""
    size_m: int
    """Longest draft, and value length (`--spec-ngram-map-k*-size-m`)."""
    key_only: bool
    """True for `ngram-map-k`, False for `ngram-map-k4v`."""
    min_hits: int = 1
    """Key hits before k4v drafts (`--spec-ngram-map-k*-min-hits`)."""
    keys: list[MapKey] = field(default_factory=list)
    """Keys matched so far, in order of creation."""
    key_map: dict[int, int] = field(default_factory=dict)
    """Hash slot -> key index; an absent slot is upstream's 0."""
    size_last_begin: int = 0
    """Prompt length at the last `begin`."""
    idx_last_check: int = 0
    """History length at the last draft call (or `begin`)."""
    key_map_last_idx: int = 0
    """Last index whose n-gram went into `key_map`."""
    last_draft: tuple[int, int] | None = None
    """(key, value) slot of the last draft call's draft; None when it made none."""

    def begin(self, prompt: Sequence[int]) -> None:
        """A shorter history than the last one seen drops the keys, values and hashes at or after
        the point from which the old history is deemed rewritten."""
        size_begin = len(prompt)
        cleanup = self.size_last_begin
        if cleanup > size_begin:
            extra = self.size_n + self.size_m
            cleanup = size_begin - extra if size_begin > extra else 0
        if size_begin < self.idx_last_check:
            self.key_map = {h: i for h, i in self.key_map.items() if i < cleanup}
            self.key_map_last_idx = cleanup - 1 if cleanup > 0 else 0
            self._drop_keys(cleanup)
        self.idx_last_check = self.size_last_begin = size_begin

    def _drop_keys(self, cleanup: int) -> None:
        for i in range(len(self.keys) - 1, -1, -1):
            key = self.keys[i]
            if key.key_idx >= cleanup:
                del self.keys[i]
                continue
            if self.key_only:
                continue
            for j in range(MAX_VALUES - 1, -1, -1):
                if key.values[j].value_idx != 0 and key.values[j].value_idx >= cleanup:
                    # shifted left; the last slot keeps its n_accepted, as upstream's copy does
                    last = key.values[-1]
                    key.values[j:-1] = [
                        MapValue(v.value_idx, v.value_num, v.n_accepted)
                        for v in key.values[j + 1 :]
                    ]
                    key.values[-1] = MapValue(0, 0, last.n_accepted)
            if key.values[0].value_idx == 0:
                del self.keys[i]

    def _find(self, tokens: Sequence[int], key: Sequence[int], cur: int) -> int:
        n, m = self.size_n, self.size_m
        idx = self.key_map.get(_hash(key, 0, n), 0)
        if idx != 0 and idx < cur - n - m - 1 and _same(tokens, idx, key, n):
            return idx
        if self.size_last_begin > n + m + 1:
            for j in range(self.size_last_begin - n - m - 1, self.key_map_last_idx, -1):
                if _same(tokens, j, key, n):
                    return j
        for j in range(cur - n - m - 1, max(self.size_last_begin, self.key_map_last_idx), -1):
            if _same(tokens, j, key, n):
                return j
        return 0

    def _hash_new(self, tokens: Sequence[int], cur: int) -> None:
        n, m = self.size_n, self.size_m
        starts: list[int] = []
        if self.size_last_begin > n + m + 1:
            starts += range(self.size_last_begin - n - m - 1, self.key_map_last_idx, -1)
        starts += range(cur - n - m - 1, max(self.size_last_begin, self.key_map_last_idx), -1)
        for j in starts:
            self.key_map.setdefault(_hash(tokens, j, n), j)
        self.key_map_last_idx = max(cur - n - m - 1, self.key_map_last_idx)

    def draft(self, history: Sequence[int], sampled: int) -> list[int]:
        """The draft (empty: no match, too few hits, no dominant value, or a cap of 0)."""
        self.last_draft = None
        n, m, cur = self.size_n, self.size_m, len(history)
        if cur < 2 * n + m:
            return []
        self.idx_last_check = cur
        key = [*history[cur - n + 1 :], sampled]
        match = self._find(history, key, cur)
        self._hash_new(history, cur)
        if match == 0:
            return []
        offset = next(
            (i for i, k in enumerate(self.keys) if _same(history, k.key_idx, key, n)),
            len(self.keys),
        )
        if offset == len(self.keys):
            values = [MapValue(0, 0, m) for _ in range(MAX_VALUES)]
            self.keys.append(MapKey(key_idx=match, values=values))
        entry = self.keys[offset]
        entry.key_num = min(entry.key_num + 1, MAX_COUNT)
        slot = 0
        if not self.key_only:
            if entry.key_num < self.min_hits:
                return []
            self._count_values(history, entry, key, match)
            slot = self._dominant(entry)
            if slot < 0:
                return []
        count = min(m, entry.values[slot].n_accepted)
        self.last_draft = (offset, slot)
        return list(history[match + n : match + n + max(count, 0)])

    def _count_values(
        self, tokens: Sequence[int], entry: MapKey, key: list[int], match: int
    ) -> None:
        n, m = self.size_n, self.size_m
        for i in range(entry.stat_idx, match + 1):  # stat_idx itself again, as upstream counts
            if not _same(tokens, i, key, n):
                continue
            begin = i + n
            for value in entry.values:
                if value.value_idx == 0:
                    value.value_idx, value.value_num, value.n_accepted = begin, 0, m
                elif not _same(tokens, begin, value.value_idx, m):
                    continue
                value.value_num = min(value.value_num + 1, MAX_COUNT)
                break
        entry.stat_idx = match

    @staticmethod
    def _dominant(entry: MapKey) -> int:
        """The most counted value's slot (the first on a tie), or -1 when it does not occur at
        least twice as often as the others together."""
        nums = [v.value_num for v in entry.values]
        slot = max(range(MAX_VALUES), key=lambda v: (nums[v], -v))
        others = sum(nums) - nums[slot]
        return -1 if others > 0 and nums[slot] < 2 * others else slot

    def accept(self, accepted: int) -> None:
        """The value drafted from caps its next draft at ``accepted``."""
        if self.last_draft is None:
            return
        k, v = self.last_draft
        self.keys[k].values[v].n_accepted = accepted


def _f32(x: float) -> float:
    return float(struct.unpack("f", struct.pack("f", x))[0])


@dataclass
class ServerSlots:
    """The server's slots, each with its own drafter; `begin` picks the slot a request goes to as
    `get_available_slot` does: the slot whose cached tokens share the longest prefix with the
    prompt, over `SLOT_SIMILARITY` of it, else the least recently used (the last slot on a tie)."""

    make: Callable[[], Drafter]
    """A fresh drafter for one slot."""
    n_slots: int = SERVER_SLOTS
    """Slots of the server."""
    drafters: list[Drafter] = field(default_factory=list)
    """Each slot's drafter."""
    tokens: list[list[int]] = field(default_factory=list)
    """Each slot's cached tokens: its last request's prompt and the output seen by `draft`."""
    last_used: list[int] = field(default_factory=list)
    """Each slot's release order (-1: never used)."""
    current: int = -1
    """The slot of the request in progress."""

    def __post_init__(self) -> None:
        self.drafters = [self.make() for _ in range(self.n_slots)]
        self.tokens = [[] for _ in range(self.n_slots)]
        self.last_used = [-1] * self.n_slots

    def _pick(self, prompt: Sequence[int]) -> int:
        best, chosen = 0.0, -1
        for s, cached in enumerate(self.tokens):
            if not cached:
                continue
            lcp = 0
            while lcp < min(len(cached), len(prompt)) and cached[lcp] == prompt[lcp]:
                lcp += 1
            sim = _f32(lcp / len(prompt))
            if sim > best and sim > _f32(SLOT_SIMILARITY):
                best, chosen = sim, s
        if chosen >= 0:
            return chosen
        oldest = min(self.last_used)
        return max(s for s, t in enumerate(self.last_used) if t == oldest)

    def begin(self, prompt: Sequence[int]) -> None:
        """The request goes to the server's choice of slot (the last one counts as released)."""
        if self.current >= 0:
            self.last_used[self.current] = max(self.last_used) + 1
        self.current = self._pick(prompt)
        self.tokens[self.current] = list(prompt)
        self.drafters[self.current].begin(prompt)

    def draft(self, history: Sequence[int], sampled: int) -> list[int]:
        """The current slot's draft."""
        self.tokens[self.current] = [*history, sampled]
        return self.drafters[self.current].draft(history, sampled)

    def accept(self, accepted: int) -> None:
        """The current slot's drafter learns."""
        self.drafters[self.current].accept(accepted)


MAP_TYPES = {"ngram-map-k": True, "ngram-map-k4v": False}
"""The ngram-map types -> whether it is key-only (`NgramMap.key_only`)."""


def map_slot_factory(type_: str, settings: Mapping[str, float]) -> Callable[[], NgramMap] | None:
    """A factory of one slot's replica of ``type_`` at ``settings`` (flag -> value), or None
    when ``type_`` is not an ngram-map type or a setting it needs is missing (`ngram-map-k` does
    not read min-hits)."""
    key_only = MAP_TYPES.get(type_)
    if key_only is None:
        return None
    prefix = f"--spec-{type_}-"
    size_n, size_m = settings.get(prefix + "size-n"), settings.get(prefix + "size-m")
    hits = settings.get(prefix + "min-hits", 1.0 if key_only else None)
    if size_n is None or size_m is None or hits is None:
        return None
    n, m, h = int(size_n), int(size_m), int(hits)
    return lambda: NgramMap(size_n=n, size_m=m, key_only=key_only, min_hits=h)


def map_drafter_for(
    type_: str, settings: Mapping[str, float], n_slots: int = SERVER_SLOTS
) -> Drafter | None:
    """A fresh replica of a server start with ``type_`` at ``settings`` (flag -> value) and
    ``n_slots`` slots, or None (see `map_slot_factory`)."""
    make = map_slot_factory(type_, settings)
    return None if make is None else ServerSlots(make, n_slots)
