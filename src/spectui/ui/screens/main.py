"""The live screen: the server bar over a `RunView`; keys to run, stop, switch and restart.

Workers are thin: a server operation iterates the engine through `bridge.pump` into the handlers
below; a run is played by the `RunView`, which draws it. Two documented locks keep the engine sane:

* `operation` names the server operation in flight (start / switch / restart). While it is set,
  no other one starts, so hammering ``t`` can never run two switches at once.
* `running` says a generation is streaming. Each run gets an id (the `RunView` keeps it);
  messages from a run that was stopped or replaced are dropped before they are posted. ``x``
  asks the engine to stop (the run then ends with a 'cancelled' summary, numbers intact); a
  second ``x`` cancels the worker.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.events import Resize
from textual.message import Message
from textual.reactive import var
from textual.screen import Screen
from textual.worker import Worker, WorkerCancelled, WorkerFailed, WorkerState

from spectui.core.engine.base import Engine
from spectui.core.errors import ServerStartError, SpectuiError
from spectui.core.events import ServerState, ServerStateEvent
from spectui.core.llama.specconfig import SpecConfig
from spectui.ui.bridge import Post, pump
from spectui.ui.compositor import use_lean_compositor
from spectui.ui.messages import RunStarted, ServerStateChanged
from spectui.ui.screens.dialogs import ConfirmScreen, HelpScreen
from spectui.ui.screens.prompt_picker import PromptChoice, PromptPickerScreen
from spectui.ui.screens.slots import NO_LANES, slots_screen_for
from spectui.ui.screens.spec_picker import SpecPickerScreen, model_facts
from spectui.ui.state import UiState
from spectui.ui.widgets.charts import ChartsPane
from spectui.ui.widgets.footer import KeysFooter
from spectui.ui.widgets.metrics import MetricsPane
from spectui.ui.widgets.run_view import RUN_SCREEN, RunView
from spectui.ui.widgets.server import ServerPane
from spectui.ui.widgets.tokens import AnswerPane

BUSY_STATES = (ServerState.STARTING, ServerState.LOADING, ServerState.RESTARTING)


class MainScreen(Screen[None]):
    """A live server's runs; owns the engine workers."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("r", "run", "Run"),
        Binding("x", "stop", "Stop"),
        Binding("t", "switch_spec", "Spec"),
        Binding("R", "restart", "Restart"),
        Binding("l", "toggle_log", "Log"),
        Binding("s", "slots", "Slots", show=False),
        Binding("p", "pick_prompt", "Prompt"),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("q", "app.quit", "Quit"),
    ]

    operation: var[str | None] = var(None, init=False)
    """Server operation in flight ('start', 'switch', 'restart'); the lock for new ones."""

    def __init__(
        self,
        engine: Engine,
        prompt: PromptChoice,
        *,
        autorun: bool = False,
        n_predict: int | None = None,
    ) -> None:
        super().__init__(classes=RUN_SCREEN)
        use_lean_compositor(self)
        self.engine = engine
        self.prompt = prompt
        self.server = ServerPane(engine)
        self.run_view = RunView(self.server)
        self.n_predict = n_predict
        """The user's explicit n_predict: the prompt picker keeps it over a prompt's own."""
        self.ui_state = UiState.load()
        self._run_after_ready = autorun
        self._op_id = 0
        self._last_op: tuple[str, SpecConfig | None, bool] = ("start", None, False)
        self._run_worker: Worker[None] | None = None
        self._stopping = False
        self._operation_refused = False
        """The engine refused the operation in flight before changing anything."""

    # -- layout -------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield self.server
        yield self.run_view
        yield KeysFooter()

    def on_mount(self) -> None:
        if self.app.return_code is not None:
            return  # the app is closing (a SIGTERM at start-up): its widgets may be gone
        self.run_view.set_title(self.prompt.label, "press r to run the prompt")
        self._start_operation("start", None, adopt=False)

    def on_resize(self, event: Resize) -> None:
        self.set_class(self.run_view.fit(event.size), "-wide")

    @property
    def state(self) -> ServerState | None:
        """The server's state as shown."""
        return self.server.state

    @property
    def running(self) -> bool:
        """Whether a generation is streaming."""
        return self.run_view.running

    @property
    def answer(self) -> AnswerPane:
        return self.run_view.answer

    @property
    def metrics(self) -> MetricsPane:
        return self.run_view.metrics

    @property
    def charts(self) -> ChartsPane:
        return self.run_view.charts

    # -- workers ------------------------------------------------------------------------------

    def _op_poster(self, ident: int) -> Post:
        """A post function that drops messages once operation ``ident`` is superseded."""

        def post(message: Message) -> bool:
            return self._op_id == ident and self.post_message(message)

        return post

    @work(exclusive=True, exit_on_error=False, group="server")
    async def _server_worker(
        self, ident: int, spec: SpecConfig | None, adopt: bool, stopping: Worker[None] | None
    ) -> None:
        if stopping is not None:
            # Let the cancelled run close its stream first: never a run and a restart at once.
            with contextlib.suppress(WorkerCancelled, WorkerFailed):
                await stopping.wait()
        events = self.engine.start() if spec is None else self.engine.switch_spec(spec, adopt=adopt)
        await pump(events, self._op_poster(ident))

    @work(exclusive=True, exit_on_error=False, group="run")
    async def _generation_worker(self, ident: int) -> None:
        await self.run_view.play(self.engine.run(self.prompt.request), ident)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        worker, state = event.worker, event.state
        if state not in (WorkerState.SUCCESS, WorkerState.ERROR, WorkerState.CANCELLED):
            return
        if worker.group == "server" and self.operation is not None:
            if state is WorkerState.ERROR:
                self._server_failed(worker.error)
            self._operation_done()
        elif worker.group == "run" and worker is self._run_worker:
            self._run_worker = None
            if state is WorkerState.ERROR:
                self.run_view.worker_failed(worker.error)

    # -- server operations ----------------------------------------------------------------------

    def _start_operation(self, name: str, spec: SpecConfig | None, *, adopt: bool) -> None:
        self.operation = name
        self._op_id += 1
        self._last_op = (name, spec, adopt)
        stopping = self._run_worker
        if self.running:
            self._stop_run("stopped for " + name)
        self._server_worker(self._op_id, spec, adopt, stopping)

    def _operation_done(self) -> None:
        name = self.operation
        self.operation = None
        self.server.bar.set_info(self.engine.info)
        refused, self._operation_refused = self._operation_refused, False
        if self.state is not ServerState.READY or refused:
            return
        if name == "switch" or self._run_after_ready:
            self._run_after_ready = False
            self.action_run()

    def _server_failed(self, error: BaseException | None) -> None:
        if isinstance(error, SpectuiError):
            message = f"{error.title}: {error}"
        else:
            message = f"unexpected error: {error!r}"
        lines = error.log_tail if isinstance(error, ServerStartError) else []
        self.server.show_state(
            ServerStateEvent(state=ServerState.FAILED, detail=message, log_tail=lines)
        )
        self.notify(message, title="Server", severity="error")

    def _refuse_if_busy(self) -> bool:
        if self.operation is not None:
            self.notify(f"wait: the server is busy ({self.operation})", severity="warning")
            return True
        return False

    def action_switch_spec(self) -> None:
        if self._refuse_if_busy():
            return
        info = self.engine.info
        if not info.can_switch:
            self.notify(
                f"switching needs a server spectui launched or a local one it may adopt; "
                f"attached to {info.url}",
                title="Cannot switch",
                severity="warning",
            )
            return
        if not self.engine.spec_types:
            self.notify("this llama-server lists no spec types", severity="warning")
            return
        picker = SpecPickerScreen(
            self.engine.spec_types,
            info.spec,
            self.ui_state.last_draft_model,
            synthetic=info.synthetic_acceptance,
            target=model_facts(info),  # types this model cannot run are marked, with why
        )
        self.app.push_screen(picker, self._spec_chosen)

    def _spec_chosen(self, spec: SpecConfig | None) -> None:
        if spec is None or self._refuse_if_busy():
            return
        if spec.draft_model is not None and spec.draft_model != self.ui_state.last_draft_model:
            self.ui_state = self.ui_state.model_copy(update={"last_draft_model": spec.draft_model})
            problem = self.ui_state.save()
            if problem:
                self.notify(problem, severity="warning")
        if self.engine.info.needs_adopt:
            self._confirm_adopt(lambda: self._start_operation("switch", spec, adopt=True))
        else:
            self._start_operation("switch", spec, adopt=False)

    def _confirm_adopt(self, then: Callable[[], None]) -> None:
        info = self.engine.info
        question = (
            f"spectui did not start the llama-server at {info.url}"
            + (f" (pid {info.pid})" if info.pid else "")
            + (f", {info.binary}" if info.binary else "")
            + (f", run by user {info.owner}: it will run as spectui's user" if info.owner else "")
            + (
                f". Its {', '.join(info.dropped_env)} will not be carried over"
                if info.dropped_env
                else ""
            )
            + ". Stop it and relaunch it from spectui with the new settings?"
        )

        def answered(yes: bool | None) -> None:
            if yes and not self._refuse_if_busy():
                then()

        self.app.push_screen(ConfirmScreen(question), answered)

    def action_restart(self) -> None:
        """Retry the last server operation after a failure, else restart with the same spec."""
        if self._refuse_if_busy():
            return
        info = self.engine.info
        if self.state is ServerState.FAILED:
            name, spec, adopt = self._last_op
            self._start_operation(name, spec, adopt=adopt)
        elif not info.can_switch or info.spec is None:
            self.notify(f"cannot restart a server spectui does not control ({info.url})")
        elif info.needs_adopt:
            spec = info.spec
            self._confirm_adopt(lambda: self._start_operation("restart", spec, adopt=True))
        else:
            self._start_operation("restart", info.spec, adopt=False)

    # -- runs ---------------------------------------------------------------------------------

    def action_run(self) -> None:
        if self._refuse_if_busy():
            self._run_after_ready = True
            return
        if self.state is not ServerState.READY and not self.running:
            if self.state is ServerState.FAILED:
                self.notify("the server failed: press R to retry", severity="error")
            else:
                self.notify("the server is not ready yet", severity="warning")
            return
        if self.running:
            self._stop_run("stopped for a re-run")
        self._stopping = False
        spec = self.engine.info.spec
        spec_label = spec.label if spec else "unknown spec"
        ident = self.run_view.start(RunStarted(self.prompt.request, self.prompt.label, spec_label))
        self._run_worker = self._generation_worker(ident)

    def action_stop(self) -> None:
        """Ask the engine to stop (the run ends with its numbers); a second press forces it."""
        if not self.running:
            self.notify("nothing is generating")
        elif self._stopping:
            self._stop_run("stopped")
        else:
            self._stopping = True
            self.answer.finish("stopping… (x again to force)")
            self._cancel_engine_run()

    def _cancel_engine_run(self) -> None:
        try:
            self.engine.cancel_run()
        except Exception as error:  # a stop request must never take the app down
            self.notify(f"could not stop the run: {error}", severity="error")

    def _stop_run(self, status: str) -> None:
        """Cancel the run now; its late messages are dropped because the run id moves on."""
        self._cancel_engine_run()
        self._stopping = False
        if self._run_worker is not None:
            self._run_worker.cancel()
            self._run_worker = None
        self.run_view.stopped(status)

    # -- server state ---------------------------------------------------------------------------

    @on(ServerStateChanged)
    def _server_state(self, message: ServerStateChanged) -> None:
        event = message.event
        if event.refused:
            # Nothing changed: the server bar keeps showing the server that still runs.
            self._operation_refused = True
            self.notify(event.detail, title="Switch refused", severity="error")
            return
        self.server.show_state(event)

    def action_toggle_log(self) -> None:
        self.server.toggle_log()

    # -- pickers and help -----------------------------------------------------------------------

    def action_pick_prompt(self) -> None:
        self.app.push_screen(PromptPickerScreen(self.prompt, self.n_predict), self._prompt_chosen)

    def _prompt_chosen(self, choice: PromptChoice | None) -> None:
        if choice is not None:
            self.prompt = choice
            if not self.running:
                self.answer.border_title = choice.label
            self.notify(f"prompt: {choice.label} · press r to run")

    def action_slots(self) -> None:
        screen = slots_screen_for(self.engine)
        if screen is None:
            self.notify(NO_LANES, title="Slots")
        else:
            self.app.push_screen(screen)

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen())
