"""The spectui TUI: a router that wires settings, themes and the engine to its screens.

`run_tui` is the entry point for the CLI: it runs the app on one event loop and closes the engine
on that same loop whatever happens (quit, an exception inside the app, SIGHUP when an SSH
connection drops, SIGTERM), so a server spectui launched never outlives it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path
from typing import ClassVar

from textual.app import SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen

from spectui.app_setup import request_for
from spectui.config import Settings
from spectui.core.engine.base import Engine
from spectui.core.prompts import DEFAULT_PROMPT_KEY, BuiltinPrompt, builtin_prompt
from spectui.ui.apps.base import SpectuiBaseApp
from spectui.ui.screens.dialogs import NoModelScreen
from spectui.ui.screens.main import MainScreen
from spectui.ui.screens.prompt_picker import CUSTOM, PromptChoice, builtin_choice
from spectui.ui.widgets.recording import sync_recording


def initial_prompt(settings: Settings, prompt: str | BuiltinPrompt | None) -> PromptChoice:
    """The preselected prompt: the given one, else the library's default task."""
    if prompt is None:
        prompt = builtin_prompt(DEFAULT_PROMPT_KEY)
    request = request_for(settings, prompt)
    if isinstance(prompt, BuiltinPrompt):
        return builtin_choice(prompt, request)
    return PromptChoice(CUSTOM, "custom prompt", request)


class SpectuiApp(SpectuiBaseApp):
    """Watch speculative decoding token by token."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("ctrl+r", "toggle_recording", "Rec")]

    def __init__(
        self,
        engine: Engine | None,
        settings: Settings,
        *,
        prompt: str | BuiltinPrompt | None = None,
        autorun: bool = False,
        no_model_message: str | None = None,
    ) -> None:
        super().__init__(engine, settings)
        self.live = engine
        """The live server (the base app knows it only as a run source)."""
        self.prompt = prompt
        self.autorun = autorun
        self.no_model_message = no_model_message

    @classmethod
    def no_model(cls, message: str, settings: Settings | None = None) -> SpectuiApp:
        """An app that only explains how to get a model or point spectui at a server."""
        return cls(None, settings or Settings(), no_model_message=message)

    def show_first_screen(self) -> None:
        if self.live is None:
            self.push_screen(NoModelScreen(self.no_model_message or ""))
            return
        prompt = initial_prompt(self.settings, self.prompt)
        self.push_screen(
            MainScreen(self.live, prompt, autorun=self.autorun, n_predict=self.settings.n_predict)
        )
        self.call_later(lambda: sync_recording(self.main_screen, self.engine))
        if self.settings.broadcast and (recorder := self.live.recorder) is not None:
            self.call_later(self._note_broadcast, recorder.sessions_dir)

    def _note_broadcast(self, folder: Path) -> None:
        """Say in the server bar that every run goes to ``folder`` for followers."""
        if self.main_screen is not None:
            note = f"broadcasting to {folder} · spectui follow --live"
            self.main_screen.server.bar.set_note(note)

    @property
    def main_screen(self) -> MainScreen | None:
        for screen in self.screen_stack:
            if isinstance(screen, MainScreen):
                return screen
        return None

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        main = self.main_screen
        if main is None:
            return
        yield SystemCommand("Run", "Run the prompt again (r)", main.action_run)
        yield SystemCommand("Stop", "Stop generating (x)", main.action_stop)
        yield SystemCommand(
            "Switch spec type", "Restart with another type (t)", main.action_switch_spec
        )
        yield SystemCommand(
            "Restart server", "Restart or retry the server (R)", main.action_restart
        )
        yield SystemCommand("Server log", "Show or hide the server log (l)", main.action_toggle_log)
        yield SystemCommand("Prompt", "Choose the prompt and sampling (p)", main.action_pick_prompt)
        yield SystemCommand("Help", "Keys, legend and metrics (?)", main.action_help)
        if self.engine is not None and self.engine.recorder is not None:
            yield SystemCommand(
                "Record", "Start/stop recording runs (ctrl+r)", self.action_toggle_recording
            )

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # The recording key exists only where the engine can record.
        if action == "toggle_recording":
            return self.engine is not None and self.engine.recorder is not None
        return True

    def action_toggle_recording(self) -> None:
        """Start or stop recording runs to session files (the banner shows while on)."""
        recorder = self.engine.recorder if self.engine is not None else None
        if recorder is None:
            return
        on = recorder.toggle_recording()
        sync_recording(self.main_screen, self.engine)
        self.notify(
            f"recording runs to {recorder.sessions_dir}" if on else "recording stopped",
            title="Sessions",
        )

    def quitting(self) -> None:
        main = self.main_screen
        if main is not None:
            main.server.bar.set_detail("stopping…")


def run_tui(
    engine: Engine,
    settings: Settings,
    prompt: str | BuiltinPrompt | None = None,
    autorun: bool = False,
) -> int:
    """Run the TUI; returns the exit status. ``engine.aclose()`` is awaited on every exit."""
    app = SpectuiApp(engine, settings, prompt=prompt, autorun=autorun)
    return asyncio.run(app.run_until_quit())


def run_no_model(settings: Settings, message: str) -> int:
    """Show the "no demo model" screen until the user quits; returns the exit status."""
    return asyncio.run(SpectuiApp.no_model(message, settings).run_until_quit())
