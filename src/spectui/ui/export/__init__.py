"""A recorded session drawn as a file: the renderers behind `spectui export`.

* `svg`: Textual's screenshot of the full TUI after replaying the session headless.
* `html`: one self-contained page (inline styles, no script, no external resource).
* `ansi`: text with truecolor escapes, for ``cat`` in a terminal or a chat paste.
* `cast`: an asciinema v2 recording that types the answer out with the run's real timing.

The text formats draw tokens as the TUI's token pane does (`transcript`): the theme's colours
(`palette`), accepted drafts also underlined so an export reads in monochrome, a chain's
drafters each with their colour and mark, tokens of unknown origin in italics, and the same
legend. `render` picks the format; the command (`spectui.commands.export`) parses options,
loads the session and writes the file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spectui.config import Settings
    from spectui.core.sessions.file import Session
    from spectui.ui.export.transcript import Wording

FORMATS = {"svg": ".svg", "html": ".html", "ansi": ".ans", "cast": ".cast"}
"""Export formats and the suffix of their default output file."""


def render(session: Session, fmt: str, settings: Settings, wording: Wording) -> str:
    """The export of ``session`` in format ``fmt`` (a key of `FORMATS`), in the settings' theme;
    ``wording`` words the headline numbers (the command's, as `spectui stream` prints them)."""
    if fmt == "svg":
        from spectui.ui.export.svg import to_svg

        return to_svg(session, settings)
    from spectui.ui.export.ansi import to_ansi
    from spectui.ui.export.cast import to_cast
    from spectui.ui.export.html import to_html
    from spectui.ui.export.palette import Palette

    palette = Palette.for_theme(settings.theme)
    renderer = {"html": to_html, "ansi": to_ansi, "cast": to_cast}[fmt]
    return renderer(session, palette, wording)
