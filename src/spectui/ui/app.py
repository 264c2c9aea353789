"""The spectui TUI: a router that wires settings, themes and the engine to its screens.

`run_tui` is the entry point for the CLI: it runs the app on one event loop and closes the engine
on that same loop whatever happens (quit, an exception inside the app, SIGHUP when an SSH
connection drops, SIGTERM), so a server spectui launched never outlives it.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
import threading
from collections.abc import Callable, Iterable
from functools import partial
from types import FrameType
from typing import Any, ClassVar

from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen

from spectui.config import Settings
from spectui.core.engine import Engine
from spectui.core.prompts import BUILTIN_PROMPTS, DEFAULT_PROMPT_KEY, builtin_prompt
from spectui.core.recording import RecordingEngine
from spectui.core.request import GenerationRequest
from spectui.ui.screens.dialogs import NoModelScreen
from spectui.ui.screens.main import MainScreen
from spectui.ui.screens.prompt_picker import CUSTOM, PromptChoice, builtin_choice
from spectui.ui.themes import (
    DEFAULT_THEME,
    discover_themes,
    shipped_theme_dir,
    spec_variable_defaults,
    user_theme_dir,
)
from spectui.ui.widgets.recording import sync_recording

EXIT_SIGNALS = {signal.SIGHUP: 129, signal.SIGTERM: 143}
"""Signals that end the app cleanly, with the shell's 128+N exit status."""

EXIT_GRACE_S = 15.0
"""After an exit signal, how long a clean shutdown (closing the engine included) may take before
the process stops every server it launched synchronously and ends itself."""


def initial_prompt(settings: Settings, prompt_text: str | None) -> PromptChoice:
    """The preselected prompt: the given text, else the library's default task."""
    template = GenerationRequest(
        prompt="",
        chat=settings.chat,
        n_predict=settings.n_predict,
        temperature=settings.temperature,
        seed=settings.seed,
        stall_timeout_s=settings.stall_timeout_s,
    )
    if prompt_text is None:
        return builtin_choice(builtin_prompt(DEFAULT_PROMPT_KEY), template)
    for prompt in BUILTIN_PROMPTS:  # --builtin KEY arrives as the prompt's text
        if prompt.text == prompt_text:
            return builtin_choice(prompt, template)
    request = template.model_copy(update={"prompt": prompt_text})
    return PromptChoice(CUSTOM, "custom prompt", request)


class SpectuiApp(App[None]):
    """Watch speculative decoding token by token."""

    CSS_PATH = "app.tcss"
    TITLE = "spectui"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+q", "quit", "Quit", show=False),
        Binding("ctrl+r", "toggle_recording", "Rec"),
    ]

    def __init__(
        self,
        engine: Engine | None,
        settings: Settings,
        *,
        prompt_text: str | None = None,
        autorun: bool = False,
        no_model_message: str | None = None,
    ) -> None:
        super().__init__()
        self.engine = engine
        self.settings = settings
        self.prompt_text = prompt_text
        self.autorun = autorun
        self.no_model_message = no_model_message
        self._theme_problems = self._load_themes(settings.theme)

    @classmethod
    def no_model(cls, message: str, settings: Settings | None = None) -> SpectuiApp:
        """An app that only explains how to get a model or point spectui at a server."""
        return cls(None, settings or Settings(), no_model_message=message)

    def _load_themes(self, wanted: str) -> list[str]:
        """Register shipped and user themes, pick ``wanted``; return problems to show."""
        themes, problems = discover_themes(shipped_theme_dir(), user_theme_dir())
        for theme in themes:
            self.register_theme(theme)
        if wanted in self.available_themes:
            self.theme = wanted
        else:
            problems.append(f"unknown theme {wanted!r}; using {DEFAULT_THEME}")
            if DEFAULT_THEME in self.available_themes:
                self.theme = DEFAULT_THEME
        return problems

    def get_theme_variable_defaults(self) -> dict[str, str]:
        # Any theme (a built-in Textual one picked from the palette too) gets token colours.
        return spec_variable_defaults(self.current_theme)

    def on_mount(self) -> None:
        for problem in self._theme_problems:
            self.notify(problem, title="Theme", severity="warning", timeout=10)
        if self.engine is None:
            self.push_screen(NoModelScreen(self.no_model_message or ""))
            return
        prompt = initial_prompt(self.settings, self.prompt_text)
        self.push_screen(MainScreen(self.engine, prompt, autorun=self.autorun))
        self.call_later(lambda: sync_recording(self.main_screen, self.engine))

    def on_ready(self) -> None:
        # Start-up leaves objects that live as long as the app (Textual's DOM and styles, the
        # pydantic schemas, every module). Frozen after the first frame, a full collection no
        # longer walks them: that walk paused the screen 30-40 ms every few thousand tokens.
        gc.freeze()

    def on_unmount(self) -> None:
        gc.unfreeze()  # (an app run inside a longer-lived process, e.g. under a test runner)

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
        if isinstance(self.engine, RecordingEngine):
            yield SystemCommand(
                "Record", "Start/stop recording runs (ctrl+r)", self.action_toggle_recording
            )

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # The recording key exists only where the engine can record (not in a replay).
        if action == "toggle_recording":
            return isinstance(self.engine, RecordingEngine)
        return True

    def action_toggle_recording(self) -> None:
        """Start or stop recording runs to session files (the banner shows while on)."""
        if not isinstance(self.engine, RecordingEngine):
            return
        on = self.engine.toggle_recording()
        sync_recording(self.main_screen, self.engine)
        self.notify(
            f"recording runs to {self.engine.sessions_dir}" if on else "recording stopped",
            title="Sessions",
        )

    async def action_quit(self) -> None:
        """Stop the server (if spectui launched it) before leaving."""
        main = self.main_screen
        if main is not None:
            main.server.bar.set_detail("stopping…")
            self.workers.cancel_all()
        if self.engine is not None:
            await self.engine.aclose()
        self.exit()


async def run_tui_async(app: SpectuiApp, *, headless: bool = False) -> int:
    """Run ``app`` on the current loop; always close its engine on this loop afterwards.

    While the app runs, SIGHUP and SIGTERM make it exit (status 129 / 143) instead of killing
    the process, so the ``finally`` below still stops the server; the handlers that were there
    before are put back afterwards.
    """
    watchdog = _Watchdog()
    previous = _install_exit_handlers(app, watchdog)
    try:
        await app.run_async(headless=headless)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
        try:
            if app.engine is not None:
                await app.engine.aclose()
        finally:
            watchdog.cancel()
    return app.return_code or 0


SignalHandler = Callable[[int, FrameType | None], Any] | int | None


def _install_exit_handlers(app: SpectuiApp, watchdog: _Watchdog) -> dict[int, SignalHandler]:
    """Exit the app on SIGHUP / SIGTERM; returns the handlers they replaced."""
    loop = asyncio.get_running_loop()

    def handler(signum: int, _frame: FrameType | None) -> None:
        code = EXIT_SIGNALS[signal.Signals(signum)]
        watchdog.arm(code)
        if signum == signal.SIGHUP:
            # The terminal is gone, and the kernel sends SIGCONT right behind SIGHUP; Textual's
            # driver answers SIGCONT by re-entering application mode on the dead terminal, whose
            # failed writes then block the exit. Python runs pending handlers in signal-number
            # order, so this one (1) gets to disarm that (18) first.
            signal.signal(signal.SIGCONT, signal.SIG_DFL)
            _detach_terminal()
        loop.call_soon_threadsafe(partial(app.exit, return_code=code))

    previous: dict[int, SignalHandler] = {}
    for signum in EXIT_SIGNALS:
        try:
            previous[signum] = signal.signal(signum, handler)
        except ValueError:  # not the main thread: the caller handles signals
            break
    return previous


class _Watchdog:
    """Ends the process if a signalled shutdown hangs.

    When the terminal disappears (an SSH session drops), Textual's driver can block for good
    while it restores the terminal: its writer thread cannot write, its queue fills, and the
    event loop waits on it, so no ``finally`` ever runs. After `EXIT_GRACE_S` this stops every
    server spectui launched without the loop (`spectui.core.procs.kill_all_sync`) and exits.
    """

    def __init__(self) -> None:
        self._timer: threading.Timer | None = None

    def arm(self, code: int) -> None:
        if self._timer is None:
            self._timer = threading.Timer(EXIT_GRACE_S, _hard_exit, (code,))
            self._timer.daemon = True
            self._timer.start()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


def _hard_exit(code: int) -> None:
    from spectui.core.procs import kill_all_sync

    kill_all_sync()
    os._exit(code)


def _detach_terminal() -> None:
    """Point stdout and stderr at /dev/null once the terminal has hung up.

    Writes to a hung-up terminal fail, and Textual's output thread dies on the first failure,
    after which its queue fills and shutdown blocks; writes to /dev/null always succeed.
    """
    with contextlib.suppress(OSError):
        sink = os.open(os.devnull, os.O_WRONLY)
        for fd in (1, 2):
            if os.isatty(fd):
                os.dup2(sink, fd)
        os.close(sink)


def run_tui(
    engine: Engine, settings: Settings, prompt_text: str | None = None, autorun: bool = False
) -> int:
    """Run the TUI; returns the exit status. ``engine.aclose()`` is awaited on every exit."""
    app = SpectuiApp(engine, settings, prompt_text=prompt_text, autorun=autorun)
    return asyncio.run(run_tui_async(app))


def run_no_model(settings: Settings, message: str) -> int:
    """Show the "no demo model" screen until the user quits; returns the exit status."""
    return asyncio.run(run_tui_async(SpectuiApp.no_model(message, settings)))
