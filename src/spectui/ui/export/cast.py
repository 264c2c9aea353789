"""The transcript as an asciinema v2 recording that types the answer with the run's timing."""

from __future__ import annotations

import json

from rich.text import Text

from spectui.core.sessions.file import Session
from spectui.ui.export.ansi import WIDTH, escapes
from spectui.ui.export.palette import Palette
from spectui.ui.export.transcript import Transcript, Wording

CAST_HEIGHT = 30
"""Rows of the asciinema terminal."""


def to_cast(session: Session, palette: Palette, wording: Wording, width: int = WIDTH) -> str:
    """An asciinema v2 recording: header line, then [time, "o", data] events."""
    transcript = Transcript.of(session, palette, wording)
    header = {
        "version": 2,
        "width": width,
        "height": CAST_HEIGHT,
        "timestamp": int(session.header.created.timestamp()),
        "title": session.header.title,
        "env": {"TERM": "xterm-256color", "SHELL": "/bin/sh"},
    }
    lines = [json.dumps(header, ensure_ascii=False)]

    def emit(t: float, data: str) -> None:
        lines.append(json.dumps([round(t, 6), "o", data], ensure_ascii=False))

    emit(0.0, escapes(transcript.intro()))
    for t, token in transcript.timed_tokens():
        emit(t, escapes(token))
    ending = Text("\n\n")
    ending.append(transcript.headline(), style="bold")
    ending.append("\n")
    end = max([0.0, *(event.t for event in transcript.events)])
    emit(max(end, transcript.summary.t), escapes(ending))
    return "\n".join(lines) + "\n"
