"""How a chain's drafters look: a colour *and* a mark for each, the same in every pane.

A chain (``--spec-type ngram-mod,draft-mtp``) has several drafters; the engine names the one
behind every accepted draft token (`TokenEvent.drafter`) and counts each (`RunMetrics.by_drafter`).
The panes tell them apart by colour (theme variables ``spec-accepted``, ``spec-drafter-2``,
``spec-drafter-3``; ``spec-drafter-unknown`` for steps whose drafter cannot be told) and by a
mark before each step's accepted drafts (``†``, ``‡``, ``§``, ``¶``; ``?`` for unknown), so
they read in 16 colours, with ``NO_COLOR`` and for colour-blind viewers. A run with one drafter
keeps the plain accepted-draft look: no marks.

A drafter keeps its colour and mark for the whole session (`DrafterKeys`, one per app), in the
order drafters were first seen, so the token pane, its legend and the metrics pane agree and a
re-run looks the same.
"""

from __future__ import annotations

from weakref import WeakKeyDictionary

from textual.app import App

from spectui.core.events import UNKNOWN_DRAFTER

DRAFTER_MARKS = ("†", "‡", "§", "¶")
"""Drawn before a step's accepted drafts, by the drafter's place (cycling past the fourth)."""

UNKNOWN_MARK = "?"
"""Drawn before accepted drafts whose drafter cannot be told."""

DRAFTER_CLASSES = ("token--draft", "token--draft-2", "token--draft-3")
"""Component classes of the drafters' colours, by place (cycling past the third: the mark
still differs)."""

UNKNOWN_CLASS = "token--draft-unknown"
"""Component class of drafts whose drafter cannot be told."""

DRAFTER_CSS = """
    & > .token--draft-2 {
        color: $spec-drafter-2;
        background: $spec-drafter-2-background;
        text-style: underline;
    }
    & > .token--draft-3 {
        color: $spec-drafter-3;
        background: $spec-drafter-3-background;
        text-style: underline;
    }
    & > .token--draft-unknown { color: $spec-drafter-unknown; text-style: underline; }
"""
"""The styles of a chain's second and third drafter and of unknown ones (the first is
``token--draft``, the plain accepted-draft style); nested in a widget's rule."""


class DrafterKeys:
    """Each drafter's place in the session: its colour class and mark."""

    def __init__(self) -> None:
        self.places: dict[str, int] = {}
        """Drafter name -> place, in the order first seen ("unknown" has none)."""

    def place(self, name: str) -> int | None:
        """The drafter's place (given one on first sight); None for "unknown"."""
        if name == UNKNOWN_DRAFTER:
            return None
        return self.places.setdefault(name, len(self.places))

    def mark(self, name: str) -> str:
        place = self.place(name)
        return UNKNOWN_MARK if place is None else DRAFTER_MARKS[place % len(DRAFTER_MARKS)]

    def style_class(self, name: str) -> str:
        place = self.place(name)
        return UNKNOWN_CLASS if place is None else DRAFTER_CLASSES[place % len(DRAFTER_CLASSES)]


_KEYS: WeakKeyDictionary[App[object], DrafterKeys] = WeakKeyDictionary()


def drafter_keys(app: App[object]) -> DrafterKeys:
    """The app's drafter keys (one set per app, so every pane of it agrees)."""
    keys = _KEYS.get(app)
    if keys is None:
        keys = _KEYS[app] = DrafterKeys()
    return keys
