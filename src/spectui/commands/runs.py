"""The skeleton `compare` and `tune` share around their results file: a file continued (judged
again under this command line's rule flags, on the setup it was measured with), the reports
rewritten with it after every run, and the run itself, in the TUI or headless, ending with the
line that says how to continue a file left incomplete.

Each command keeps what is its own: its plan, its runner, what it prints. The runner locks the
results files while it runs (`core.compare.runner`), so two runs never write one file.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Awaitable, Callable, Coroutine
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from spectui.commands.results import ResultsOptions
    from spectui.config import Settings
    from spectui.core.compare.divergence import Prober
    from spectui.core.compare.setup import CompareSetup
    from spectui.core.compare.store import CompareDocument, ServerOptions
    from spectui.core.engine.base import Engine

Document = TypeVar("Document")


class SetupFactory(Protocol):
    """`app_setup.compare_setup`'s signature."""

    def __call__(
        self,
        settings: Settings,
        *,
        binary: Path | None = None,
        model: Path | None = None,
        server: ServerOptions | None = None,
    ) -> CompareSetup: ...


def default_output(command: str) -> Path:
    """A new results file in the state dir: ``compare/compare-20260101-120000.json``."""
    from spectui.config import state_dir

    return state_dir() / command / f"{command}-{datetime.now():%Y%m%d-%H%M%S}.json"


def resumed(
    settings: Settings,
    document: CompareDocument,
    source: Path,
    options: ResultsOptions,
    compare_setup: SetupFactory,
) -> tuple[CompareDocument, CompareSetup]:
    """A results file continued (``document``, read from ``source``): judged again under
    --memory-budget and --identical-answers when given (judgements, not measurements: the runs
    already made are judged again, none re-run), on the binary, model and server arguments it
    was measured with (refused if they changed); ``compare_setup`` is the command's own name for
    `app_setup.compare_setup`."""
    from spectui.core.compare.budget import resolve_budget
    from spectui.core.compare.store import check_same_setup

    plan = document.plan
    if options.memory_budget is not None:
        plan = plan.model_copy(update={"memory_budget": resolve_budget(options.memory_budget)})
    if options.identical_answers:
        plan = plan.model_copy(update={"identical_answers": True})
    if plan is not document.plan:
        document = document.model_copy(update={"plan": plan})
    setup = compare_setup(
        settings,
        binary=Path(document.binary.path),
        model=settings.model or Path(document.model.path),
        server=document.server.with_secrets(settings.server_args, source),
    )
    check_same_setup(document, setup.binary_info, setup.model_info)
    return document, setup


def slotted(setup: CompareSetup, document: CompareDocument) -> CompareSetup:
    """The setup with a server slot per stream of the plan's largest level, when it runs
    several at once (refused in one line when the server arguments fix fewer: before any
    file is written)."""
    plan = document.plan
    return setup.with_slots(plan.concurrency) if plan.concurrent or plan.arrivals else setup


def note_skipped_checkers(document: CompareDocument, options: ResultsOptions) -> None:
    """One line on stderr when a resumed file's Python checkers will not run (code from a
    file, not from this command line: they run only with --trust-checkers)."""
    if options.resume is None or options.trust_code:
        return
    count = sum(1 for p in document.plan.prompts if p.check is not None and p.check.runs_code)
    if count:
        print(
            f"spectui: skipping {count} python checker{'s' if count > 1 else ''} from "
            f"{options.resume} (they run code); pass --trust-checkers to run them",
            file=sys.stderr,
        )


def divergence_prober(engine: Engine) -> Prober:
    """Probes for changed answers, sent to ``engine``'s server (compare and tune launch their
    own, so no API key; the URL is read at each probe, after any restart)."""
    from spectui.core.compare.divergence import HttpProber

    return HttpProber(lambda: engine.info.url)


class Reports(Generic[Document]):
    """Reports rewritten (atomically) with the results file after every run: each a path (None:
    not asked for) and what to write there (None: nothing for this document)."""

    def __init__(self, *reports: tuple[Path | None, Callable[[Document], str | None]]) -> None:
        self.reports = [(path, render) for path, render in reports if path is not None]

    def __call__(self, document: Document) -> None:
        from spectui.core.compare.store import write_atomic

        for path, render in self.reports:
            if (text := render(document)) is not None:
                write_atomic(path, text)


def cut_short(
    left: Callable[[], bool], kept: Callable[[], str], resume: str
) -> Callable[[], str | None]:
    """`run_results`' last line, for a results file the run left incomplete (``left()``, asked
    once it ends): what the file keeps and where (``kept()``), and ``resume``, the command that
    continues it; None when there is nothing to continue."""

    def line() -> str | None:
        return f"spectui: {kept()}; continue with: {resume}" if left() else None

    return line


async def run_results(
    engine: Engine,
    *,
    headless: Callable[[], Coroutine[Any, Any, int]],
    tui: Callable[[], Awaitable[int]] | None,
    announce: str,
    cut_short: Callable[[], str | None],
) -> int:
    """Run a compare or tune on ``engine``: say where the results go (``announce``), run the
    ``tui`` when asked for (the app stops the server as it quits), else the ``headless`` body,
    guarded so the server stops however it ends; then say how to continue a file left
    incomplete (``cut_short``: that line, or None)."""
    from spectui.lifecycle import run_guarded

    print(announce, file=sys.stderr)
    try:
        if tui is not None:
            return await tui()
        return await run_guarded(engine, headless())
    finally:
        if (line := cut_short()) is not None:
            with contextlib.suppress(OSError):  # the terminal may be gone (SIGHUP)
                print(line, file=sys.stderr)
