"""`spectui tune`: race this binary's spec configs on your prompts and keep what wins.

Progress (a live leaderboard, the budget with an ETA) goes to stderr; the leaderboards, the
winners' command lines, the knob curves and the hints go to stdout. The JSON document is
rewritten atomically after every run (``--json``, else one in the state dir); ``--resume``
continues it; ``--markdown`` writes the report.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from spectui.commands.command import Invocation, Subparsers
from spectui.commands.common import REQUEST_FLAGS, add_generation_flags, positive
from spectui.commands.launch_options import add_launch_options
from spectui.commands.results import ResultsOptions, add_identical_answers_flag
from spectui.commands.runs import (
    Reports,
    cut_short,
    default_output,
    divergence_prober,
    note_skipped_checkers,
    resumed,
    run_results,
    slotted,
)
from spectui.core.errors import SpectuiError

if TYPE_CHECKING:
    from spectui.config import Settings
    from spectui.core.compare.setup import CompareSetup
    from spectui.core.tune.models import TuneDocument

NAME = "tune"

DEFAULT_BUDGET_S = 600.0
"""Ten minutes: round one of the full grid on the built-in prompts, and the finals, on a laptop."""


class TuneUsageError(SpectuiError):
    """Flags that do not make sense together."""

    title = "Bad tune options"
    exit_code = 2


def parse_duration(text: str) -> float:
    """'10m', '90s', '1h30m', '600' -> seconds (an argparse type)."""
    match = re.fullmatch(
        r"\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m)?\s*(?:(\d+(?:\.\d+)?)s?)?\s*", text
    )
    if not text.strip() or match is None or not any(match.groups()):
        raise argparse.ArgumentTypeError(f"a duration is like 10m, 90s or 1h, not {text!r}")
    hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    total = hours * 3600 + minutes * 60 + seconds
    if total <= 0:
        raise argparse.ArgumentTypeError(f"the budget must be more than 0, not {text!r}")
    return total


def add_parser(commands: Subparsers) -> argparse.ArgumentParser:
    """Register `spectui tune` (with the shared --model/--server-bin/... group)."""
    tune = commands.add_parser(
        NAME,
        help="search this binary's spec configs for the one that wins on your prompts",
        argument_default=argparse.SUPPRESS,
    )
    add_launch_options(tune)
    add_generation_flags(tune.add_argument_group("generation (the same for every run)"))
    group = tune.add_argument_group("tune")
    group.add_argument(
        "--prompts", metavar="SET", help="'builtin' (default), 'builtin:KEY,KEY', or a prompt file"
    )
    group.add_argument(
        "--types",
        metavar="T,T",
        help="only these spec types (default: every type this binary lists that can run here)",
    )
    group.add_argument(
        "--grid",
        choices=["full", "defaults"],
        help="'full' (default): each type's main knobs around their defaults; 'defaults': each "
        "type once, as --help sets it",
    )
    group.add_argument(
        "--budget",
        type=parse_duration,
        metavar="TIME",
        help="wall-clock budget, e.g. 10m (default), 90s, 1h; with --resume: the new total",
    )
    group.add_argument(
        "--concurrency",
        type=positive,
        metavar="N",
        help="rank and time the candidates under N client streams at once (closed loop), on "
        "a server with N slots: your load, not one user's (default 1)",
    )
    group.add_argument(
        "--memory-budget",
        dest="memory_budget",
        metavar="SIZE|PCT",
        help="extra peak memory a config may cost before it is dropped: 512MiB or 10%% "
        "(default 10%% of RAM, or of VRAM where the server uses a GPU)",
    )
    group.add_argument("--json", type=Path, dest="json_out", metavar="FILE", help="results file")
    group.add_argument(
        "--markdown", type=Path, dest="markdown_out", metavar="FILE", help="report as Markdown"
    )
    group.add_argument("--resume", type=Path, metavar="FILE", help="continue a tune")
    group.add_argument(
        "--trust-checkers",
        action="store_true",
        dest="trust_checkers",
        help="with --resume: run the file's python checkers",
    )
    add_identical_answers_flag(group)
    group.add_argument("--no-chart", action="store_true", dest="no_chart", help="skip the curves")
    group.add_argument(
        "--tui", action="store_true", help="show the leaderboard filling in, in the TUI"
    )
    return tune


class TuneOptions(ResultsOptions):
    """`spectui tune`'s own options (the server and sampling flags are settings)."""

    prompts: str | None = None
    """--prompts: 'builtin', 'builtin:KEY,KEY' or a prompt file (None: 'builtin')."""
    types: str | None = None
    """--types: only these spec types, comma-separated (None: every type that can run here)."""
    grid: Literal["full", "defaults"] | None = None
    """--grid: each type's main knobs around their defaults ('full', None), or each type once."""
    budget: float | None = None
    """--budget: wall-clock seconds (None: `DEFAULT_BUDGET_S`; with --resume: the new total)."""
    concurrency: int | None = None
    """--concurrency: client streams at once in every run (None: one)."""


_PLAN_FLAGS = {
    "prompts": "--prompts",
    "types": "--types",
    "grid": "--grid",
    "concurrency": "--concurrency",
    "memory_budget": "--memory-budget",
    **REQUEST_FLAGS,
    "ctx_size": "--ctx-size",
    "draft_model": "--draft-model",
}
_REFUSED = {
    "spec_type": "--spec-type: tune searches the types (narrow them with --types)",
    "draft_n_max": "--spec-draft-n-max: tune searches it",
    "draft_n_min": "--spec-draft-n-min: tune searches it",
    "url": "--url: tune launches its own llama-server (it restarts it per config)",
}


def load_tune(path: Path) -> TuneDocument:
    """A tune results file; one clear line when it is not one."""
    from spectui.core.compare.store import load_results
    from spectui.core.tune.models import TuneDocument

    return load_results(path, TuneDocument, "tune")


def _new(settings: Settings, options: TuneOptions) -> tuple[TuneDocument, CompareSetup]:
    from spectui.app_setup import compare_setup
    from spectui.core.compare.budget import resolve_budget
    from spectui.core.compare.prompt_files import load_prompts
    from spectui.core.tune.setup import new_tune

    budget = resolve_budget(options.memory_budget)  # a bad one: before any start
    setup = compare_setup(settings)
    if options.concurrency is not None and options.concurrency > 1:
        setup = setup.with_slots((options.concurrency,))  # (a refusal: before any file)
    types_text = options.types
    types = [t.strip() for t in types_text.split(",") if t.strip()] if types_text else None
    document = new_tune(
        setup,
        prompts=load_prompts(options.prompts or "builtin", settings.sampling.n_predict),
        sampling=settings.sampling,
        delivery=settings.delivery,
        budget=budget,
        budget_s=options.budget or DEFAULT_BUDGET_S,
        types=types,
        draft_model=settings.draft_model,
        defaults_only=options.grid == "defaults",
        identical_answers=options.identical_answers,
        concurrency=options.concurrency or 1,
    )
    return document, setup


def _resumed(
    settings: Settings, options: TuneOptions, path: Path
) -> tuple[TuneDocument, CompareSetup]:
    from spectui.app_setup import compare_setup
    from spectui.core.tune.report import refreshed

    document = load_tune(path)
    compare, setup = resumed(settings, document.compare, path, options, compare_setup)
    setup = slotted(setup, compare)
    if options.budget is not None:
        document = document.model_copy(update={"budget_s": options.budget})
    # Findings are recomputed from the runs, so a file always reads under this version's rule.
    fresh = compare.updated(compare.runs, compare.server_starts, compare.sessions)
    return refreshed(document.model_copy(update={"compare": fresh})), setup


async def _tune(settings: Settings, options: TuneOptions) -> int:
    from spectui.core.compare.setup import slot_counter
    from spectui.core.tune.export import to_markdown
    from spectui.core.tune.runner import TuneRunner
    from spectui.ui.console.tune import TuneView, print_final

    options.refuse(NAME, _REFUSED, _PLAN_FLAGS, TuneUsageError)
    resume = options.resume
    document, setup = _resumed(settings, options, resume) if resume else _new(settings, options)
    if resume is not None and document.complete:
        print(f"spectui: {resume} is already complete; showing its results", file=sys.stderr)
    elif not document.complete:
        note_skipped_checkers(document.compare, options)
    outputs = options.outputs(lambda: default_output(NAME))
    first = document.compare.plan.configs[0]
    engine = setup.engine(first.spec)
    runner = TuneRunner(
        engine,
        document,
        outputs=outputs,
        on_save=Reports((options.markdown_out, to_markdown)),
        trust_code=options.trust_code,
        probe=divergence_prober(engine),
        slot_count=slot_counter(engine) if document.compare.plan.concurrent else None,
    )

    async def body() -> int:
        if document.complete:
            print_final(document, chart=not options.no_chart)
            return 0
        with TuneView(runner) as view:
            async for event in runner.run():
                view.update(event)
        print_final(runner.document, chart=not options.no_chart)
        return 0

    async def tui() -> int:
        from spectui.ui.apps.tune import run_tune_tui

        code = await run_tune_tui(engine, settings, runner)
        print_final(runner.document, chart=False)  # what the screen showed, kept
        return code

    def kept() -> str:
        final = runner.document
        why = "the budget ran out" if final.stopped == "budget" else "stopped"
        return f"{why} after {final.elapsed_s:.0f} s; what is settled is in {outputs[0]}"

    return await run_results(
        engine,
        headless=body,
        tui=tui if options.tui else None,
        announce=f"spectui: results in {outputs[0]} "
        f"(to continue: spectui tune --resume {outputs[0]})",
        # Only point at a file that exists: an unwritable --json fails before the first save.
        cut_short=cut_short(
            lambda: not runner.document.complete and outputs[0].exists(),
            kept,
            f"spectui tune --resume {outputs[0]} [--budget MORE]",
        ),
    )


Options = TuneOptions


def run(options: TuneOptions, invocation: Invocation) -> int:
    """Run `spectui tune`; returns the exit status."""
    return asyncio.run(_tune(invocation.settings, options))
