"""The recording indicator: a one-line banner on the main screen while runs are recorded.

It is mounted only when the run source can record (its `recorder`), shown only while recording
is on, and reads the recorder's state itself once a second (which file a run goes to, a write
that failed), so nothing else has to tell it.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.screen import Screen
from textual.widget import MountError, Widget

from spectui.core.engine.base import Recorder, RunSource

REFRESH_S = 1.0
"""How often the banner re-reads the engine (the file name changes once per run)."""


class RecordingIndicator(Widget):
    """'● REC' and where runs go, docked at the top of the screen while recording."""

    DEFAULT_CSS = """
    RecordingIndicator {
        dock: top;
        height: 1;
        padding: 0 1;
        background: $error;
        color: $text;
        text-style: bold;
        display: none;
    }
    RecordingIndicator.-on { display: block; }
    """

    def __init__(self, engine: Recorder) -> None:
        super().__init__(id="recording")
        self.engine = engine
        self._shown: tuple[object, ...] = ()

    def on_mount(self) -> None:
        self.sync()
        self.set_interval(REFRESH_S, self.sync)

    def sync(self) -> None:
        """Show or hide the banner to match the engine, with its current file (redrawn only
        when something it shows changed: this runs every second, run or no run)."""
        engine = self.engine
        self.set_class(engine.recording, "-on")
        shown = (engine.recording, engine.writing, engine.last_path, engine.problem)
        if shown != self._shown:
            self._shown = shown
            self.refresh()

    def render(self) -> Text:
        engine = self.engine
        # One line, never wrapped: file names, not paths (the folder is in the notification).
        text = Text("● REC ", no_wrap=True, overflow="ellipsis")
        writing = engine.writing
        if writing is not None:
            text.append(f"recording this run to {writing.name}", style="not bold")
        elif engine.last_path is not None:
            text.append(f"next run is recorded · last: {engine.last_path.name}", style="not bold")
        else:
            text.append(f"runs are recorded to {engine.sessions_dir}", style="not bold")
        if engine.problem:
            text.append(f" · {engine.problem}", style="italic")
        return text


def sync_recording(
    screen: Screen[Any] | None, source: RunSource | None
) -> RecordingIndicator | None:
    """Mount the indicator on ``screen`` for a source that can record (once) and bring it up to
    date."""
    engine = source.recorder if source is not None else None
    if screen is None or engine is None:
        return None
    found = screen.query(RecordingIndicator)
    if found:
        indicator = found.first()
        indicator.sync()
        return indicator
    indicator = RecordingIndicator(engine)
    try:
        screen.mount(indicator)
    except MountError:  # the app is closing (a SIGTERM at start-up) before the screen mounted
        return None
    return indicator
