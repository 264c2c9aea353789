"""Choices the TUI remembers between sessions (today: the last draft model), in the state dir.

Kept apart from `Settings`: settings are what the user configures, this is what the app noticed.
A missing or unreadable file just means nothing is remembered.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ValidationError

from spectui.config import state_dir


def ui_state_file() -> Path:
    return state_dir() / "ui-state.json"


class UiState(BaseModel):
    """Remembered choices."""

    last_draft_model: Path | None = None
    """The draft model last used in the spec-type picker."""

    @classmethod
    def load(cls, path: Path | None = None) -> UiState:
        path = path or ui_state_file()
        try:
            return cls.model_validate_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, ValidationError):
            return cls()

    def save(self, path: Path | None = None) -> str | None:
        """Write the file; returns a message instead of raising when it cannot."""
        path = path or ui_state_file()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(self.model_dump_json(indent=2), encoding="utf-8")
        except OSError as error:
            return f"could not remember the draft model: {error}"
        return None
