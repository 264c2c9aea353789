"""The adopt question names what would be stopped and relaunched: the executable, the owner of
another user's process, and the environment variables that will not be carried over."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from helpers.engines import FakeEngine
from spectui.core.engine.base import ServerInfo
from spectui.core.events import ServerState
from spectui.ui.apps.live import SpectuiApp
from spectui.ui.screens.dialogs import ConfirmScreen

from .ui_helpers import main_screen, settle


class ForeignEngine(FakeEngine):
    """Attached to a server another user runs (spectui as root may adopt it if confirmed)."""

    @property
    def info(self) -> ServerInfo:
        return super().info.model_copy(
            update={
                "binary": Path("/home/mallory/llama-server"),
                "owner": "mallory",
                "dropped_env": ("LD_PRELOAD",),
                "pid": 4242,
            }
        )


async def test_adopt_question_names_owner_executable_and_dropped_env(
    make_app: Callable[..., SpectuiApp],
) -> None:
    engine = ForeignEngine(mode="attached", needs_adopt=True)
    app = make_app(engine)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, lambda: main_screen(app).state is ServerState.READY)
        await pilot.press("t", "enter")
        assert isinstance(app.screen, ConfirmScreen)
        question = app.screen.question
        assert "/home/mallory/llama-server" in question and "user mallory" in question
        assert "pid 4242" in question and "LD_PRELOAD will not be carried over" in question
        await pilot.press("n")
        assert engine.switch_calls == []
