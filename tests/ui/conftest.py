"""Fixtures for the TUI tests: a seeded fake engine and settings (dirs: tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from helpers.engines import FakeEngine
from spectui.config import Settings
from spectui.ui.apps.live import SpectuiApp


@pytest.fixture(autouse=True)
def _colour_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Textual reads NO_COLOR when an app is created: tests opt in explicitly."""
    monkeypatch.delenv("NO_COLOR", raising=False)


@pytest.fixture
def engine() -> FakeEngine:
    return FakeEngine()


@pytest.fixture
def settings() -> Settings:
    return Settings()


@pytest.fixture
def make_app(settings: Settings) -> Callable[..., SpectuiApp]:
    def make(engine: FakeEngine, **kwargs: Any) -> SpectuiApp:  # SpectuiApp's own keywords
        return SpectuiApp(engine, settings, **kwargs)

    return make
