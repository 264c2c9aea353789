"""The transcript as text with truecolor escapes."""

from __future__ import annotations

from rich.text import Text

from spectui.core.sessions.file import Session
from spectui.ui.export.palette import Palette
from spectui.ui.export.transcript import Transcript, Wording, console, written

WIDTH = 100
"""Columns of the text exports (html, ansi, cast)."""


def to_ansi(session: Session, palette: Palette, wording: Wording, width: int = WIDTH) -> str:
    """The transcript with truecolor escapes, wrapped at ``width``."""
    out = console(width)
    out.print(Transcript.of(session, palette, wording).text(), soft_wrap=True)
    return written(out)


def escapes(text: Text) -> str:
    """``text`` as escapes, unwrapped (a player's terminal wraps), lines ended CR LF."""
    out = console(10_000)
    out.print(text, end="", soft_wrap=True)
    return written(out).replace("\n", "\r\n")
