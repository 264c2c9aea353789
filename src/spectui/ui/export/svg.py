"""The export as Textual's SVG screenshot of the TUI (the token pane draws the drafters)."""

from __future__ import annotations

import asyncio

from spectui.config import Settings
from spectui.core.sessions.file import Session


def to_svg(session: Session, settings: Settings) -> str:
    """Textual's screenshot of the TUI after replaying the session headless."""
    from spectui.ui.apps.replay import replay_screenshot  # (the app: only for this format)

    return asyncio.run(replay_screenshot(session, settings))
