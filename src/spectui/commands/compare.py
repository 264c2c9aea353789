"""`spectui compare`: a fair A/B of spec configs on the same prompts, with answers checked.

A live Rich table and a progress bar go to stderr while it runs; the final table and a plotext
chart of tokens/s and TTFT per config go to stdout. Results are rewritten (atomically) after
every run to the JSON file (``--json``, else one in the state dir), which ``--resume`` continues.
A resumed file's Python checkers are code from a file, not from the command line: they run only
with ``--trust-checkers`` (else they are skipped, said once on stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
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
    from spectui.core.compare.budget import MemoryBudget
    from spectui.core.compare.setup import CompareSetup
    from spectui.core.compare.store import CompareDocument

NAME = "compare"

DEFAULT_REPS = 3
"""Counted repetitions per config × prompt."""


class CompareUsageError(SpectuiError):
    """Flags that do not make sense together."""

    title = "Bad compare options"
    exit_code = 2


def add_parser(commands: Subparsers) -> argparse.ArgumentParser:
    """Register `spectui compare` (with the shared --model/--server-bin/... group)."""
    parser = commands.add_parser(
        NAME,
        help="fair A/B of spec configs on the same prompts, answers checked",
        argument_default=argparse.SUPPRESS,
    )
    add_launch_options(parser)
    group = parser.add_argument_group("compare")
    add_generation_flags(parser.add_argument_group("generation (the same for every run)"))
    group.add_argument(
        "--config",
        action="append",
        dest="configs",
        metavar="SPEC",
        help="a spec config, repeatable: 'ngram-simple', 'draft-simple --draft-model X "
        "--spec-draft-n-max 4'; only --spec-* flags (the baseline 'none' is always included; "
        "default: the settings' spec type)",
    )
    group.add_argument(
        "--prompts",
        metavar="SET",
        help="'builtin' (default), 'builtin:KEY,KEY', or a .toml/.jsonl file of prompts "
        "with optional checkers (json_fields, regex, python)",
    )
    group.add_argument(
        "--reps", type=positive, metavar="N", help=f"counted rounds (default {DEFAULT_REPS})"
    )
    group.add_argument(
        "--concurrency",
        type=levels,
        metavar="N,N",
        help="concurrency levels, e.g. 1,2,4: each config runs its prompts with N client "
        "streams at once at each level (closed loop), on a server with a slot per stream of "
        "the largest; the verdict says up to which level speculation pays (default 1)",
    )
    group.add_argument(
        "--arrivals",
        choices=("recorded",),
        help="'recorded': send a recorded workload's prompts (--prompts DIR|FILE from "
        "`spectui proxy --record`) open loop at their recorded arrival times, on a server with "
        "--concurrency N slots (default 4); the verdict is on the real mix and rate",
    )
    group.add_argument(
        "--speed",
        type=speed,
        metavar="X",
        help="with --arrivals: replay X times faster than recorded (default 1)",
    )
    group.add_argument(
        "--memory-budget",
        dest="memory_budget",
        metavar="SIZE|PCT",
        help="extra peak memory over the baseline a config may cost before it is dropped for "
        "it: 512MiB, 2GiB or 10%% (of the total RAM, or of VRAM where the server uses a GPU; "
        "default 10%%); the cost is always shown",
    )
    group.add_argument("--json", type=Path, dest="json_out", metavar="FILE", help="results file")
    group.add_argument("--csv", type=Path, dest="csv_out", metavar="FILE", help="runs as CSV")
    group.add_argument(
        "--markdown", type=Path, dest="markdown_out", metavar="FILE", help="report as Markdown"
    )
    group.add_argument(
        "--resume", type=Path, metavar="FILE", help="continue an interrupted comparison"
    )
    group.add_argument(
        "--trust-checkers",
        action="store_true",
        dest="trust_checkers",
        help="with --resume: run the results file's python checkers (they execute code; "
        "without this flag they are skipped)",
    )
    add_identical_answers_flag(group)
    group.add_argument(
        "--no-chart", action="store_true", dest="no_chart", help="skip the final chart"
    )
    group.add_argument(
        "--tui",
        action="store_true",
        help="show the comparison in the TUI (table filling in, responses and their diff)",
    )
    parser.add_argument(
        "--record", type=Path, metavar="DIR", help="also record every run to a session file in DIR"
    )
    return parser


def levels(text: str) -> tuple[int, ...]:
    """An argparse type: concurrency levels, '1,2,4' (each a whole number, 1 or more)."""
    out = []
    for part in text.split(","):
        try:
            out.append(positive(part.strip()))
        except argparse.ArgumentTypeError as error:
            raise argparse.ArgumentTypeError(
                f"levels are whole numbers of streams, 1 or more, e.g. 1,2,4 ({part.strip()!r}: "
                f"{error})"
            ) from None
    return tuple(sorted(set(out)))


def speed(text: str) -> float:
    """An argparse type: a replay speed, a number above 0."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"a number above 0, e.g. 4, not {text!r}")
    return value


class CompareOptions(ResultsOptions):
    """`spectui compare`'s own options (the server and sampling flags are settings)."""

    configs: list[str] | None = None
    """--config, repeated: the spec configs raced against the baseline (None: the settings')."""
    prompts: str | None = None
    """--prompts: 'builtin', 'builtin:KEY,KEY' or a prompt file (None: 'builtin')."""
    reps: int | None = None
    """--reps: counted rounds (None: `DEFAULT_REPS`)."""
    concurrency: tuple[int, ...] | None = None
    """--concurrency: the levels, streams at once (None: one at a time)."""
    arrivals: Literal["recorded"] | None = None
    """--arrivals: replay the prompts' recorded arrival times open loop (None: closed loop)."""
    speed: float | None = None
    """--speed: how much faster than recorded the arrivals are replayed (None: 1)."""
    csv_out: Path | None = None
    """--csv: every run as CSV, rewritten after every run."""
    record: Path | None = None
    """--record: record every run to a session file in this folder."""


_PLAN_FLAGS = {
    "configs": "--config",
    "prompts": "--prompts",
    "reps": "--reps",
    "concurrency": "--concurrency",
    "arrivals": "--arrivals",
    "speed": "--speed",
    **REQUEST_FLAGS,
    "ctx_size": "--ctx-size",
}
_REFUSED = {
    "spec_type": "--spec-type: give each config with --config",
    "draft_n_max": "--spec-draft-n-max: put it in a --config",
    "draft_n_min": "--spec-draft-n-min: put it in a --config",
}


def _new_document(
    settings: Settings, options: CompareOptions, setup: CompareSetup, budget: MemoryBudget
) -> CompareDocument:
    from spectui.core.compare.models import ComparePlan
    from spectui.core.compare.open_loop import (
        DEFAULT_SLOTS,
        plain_note,
        recorded_source,
        replay_prompts,
    )
    from spectui.core.compare.prompt_files import load_prompts
    from spectui.core.compare.setup import parse_configs
    from spectui.core.compare.store import CompareDocument

    sampling = settings.sampling
    source = recorded_source(options.prompts or "builtin")
    if options.speed is not None and options.arrivals is None:
        raise CompareUsageError("--speed scales recorded arrival times: add --arrivals recorded")
    if options.arrivals is not None and source.startswith("builtin"):
        raise CompareUsageError(
            "--arrivals recorded replays a recorded workload: give --prompts DIR|FILE "
            "(from `spectui proxy --record`), not the built-in prompts"
        )
    if options.arrivals is not None and len(options.concurrency or ()) > 1:
        raise CompareUsageError(
            "--arrivals replays on one server: give --concurrency one number (its slots)"
        )
    prompts = load_prompts(source, sampling.n_predict)
    if options.arrivals is not None:
        prompts = replay_prompts(prompts, source)
    elif (note := plain_note(prompts, source)) is not None:
        print(f"spectui: {note}", file=sys.stderr)
    slots = options.concurrency or ((DEFAULT_SLOTS,) if options.arrivals else (1,))
    texts = options.configs or [settings.spec_type]
    configs = parse_configs(texts, setup.caps, draft_model=settings.draft_model, model=setup.model)
    plan = ComparePlan(
        configs=configs,
        prompts=prompts,
        reps=options.reps or DEFAULT_REPS,
        concurrency=slots,
        arrivals=options.arrivals,
        speed=options.speed or 1.0,
        sampling=sampling,
        delivery=settings.delivery,
        memory_budget=budget,
        identical_answers=options.identical_answers,
    )
    return CompareDocument.new(
        plan, binary=setup.binary_info, model=setup.model_info, server=setup.server
    )


async def _compare(settings: Settings, options: CompareOptions) -> int:
    from spectui.app_setup import compare_setup, recorder
    from spectui.core.compare.budget import resolve_budget
    from spectui.core.compare.runner import CompareRunner
    from spectui.core.compare.setup import slot_counter
    from spectui.core.compare.store import finished_seqs, load_document
    from spectui.core.engine.base import Engine
    from spectui.ui.console.compare import LiveView, print_final

    options.refuse(NAME, _REFUSED, _PLAN_FLAGS, CompareUsageError)
    resume = options.resume
    if resume is not None:
        document, setup = resumed(settings, load_document(resume), resume, options, compare_setup)
        if document.complete:
            print(f"spectui: {resume} is already complete; nothing to resume", file=sys.stderr)
    else:
        budget = resolve_budget(options.memory_budget)  # a bad one: first
        setup = compare_setup(settings)
        document = _new_document(settings, options, setup, budget)
    setup = slotted(setup, document)  # (a refusal: before any file)
    plan = document.plan
    done = finished_seqs(document)
    pending = [job for job in plan.jobs() if job.seq not in done]
    if pending:
        note_skipped_checkers(document, options)
    first = plan.config(pending[0].config if pending else plan.configs[0].name)
    outputs = options.outputs(lambda: default_output(NAME))
    engine: Engine = setup.engine(first.spec)
    if options.record is not None or settings.record:
        # One session file per run (warm-ups included), so any run can be replayed on stage.
        folder = options.record if options.record is not None else settings.sessions_dir
        engine = recorder(engine, settings, sessions_dir=folder)
    runner = CompareRunner(
        engine,
        document,
        outputs=outputs,
        on_save=_reports(options),
        trust_code=options.trust_code,
        probe=divergence_prober(engine),
        slot_count=slot_counter(engine) if plan.concurrent or plan.arrivals else None,
    )
    started = False

    async def body() -> int:
        nonlocal started
        with LiveView(runner.document) as view:
            async for event in runner.run():
                started = True  # the results file is ours (locked) from here on
                view.update(event, runner.document)
        print_final(runner.document, chart=not options.no_chart)
        failed = _failed(runner.document)
        if failed:
            print(f"spectui: {failed} run(s) failed (see the table)", file=sys.stderr)
        return 1 if failed else 0

    async def tui() -> int:
        nonlocal started
        from spectui.ui.apps.compare import run_compare_tui

        started = True
        code = await run_compare_tui(engine, settings, runner, outputs[0])
        return code or (1 if _failed(runner.document) else 0)

    return await run_results(
        engine,
        headless=body,
        tui=tui if options.tui else None,
        announce=f"spectui: results in {outputs[0]} "
        f"(if interrupted: spectui compare --resume {outputs[0]})",
        cut_short=cut_short(
            lambda: started and not runner.document.complete,
            lambda: f"{len(runner.document.runs)} of {runner.total} runs kept in {outputs[0]}",
            f"spectui compare --resume {outputs[0]}",
        ),
    )


def _failed(document: CompareDocument) -> int:
    return sum(1 for r in document.runs if not r.ok)


def _reports(options: CompareOptions) -> Reports[CompareDocument]:
    """The runs as CSV (and the concurrency table beside it) and the Markdown report."""
    from spectui.core.compare.export import to_csv, to_markdown
    from spectui.core.compare.level_export import levels_csv

    def levels(document: CompareDocument) -> str | None:
        plan = document.plan
        return levels_csv(document) if plan.concurrency != (1,) or plan.arrivals else None

    csv = options.csv_out
    return Reports(
        (csv, to_csv),
        (levels_csv_path(csv) if csv is not None else None, levels),
        (options.markdown_out, to_markdown),
    )


def levels_csv_path(csv_path: Path) -> Path:
    """Where the concurrency table goes beside the runs' CSV: 'runs.csv' -> 'runs-levels.csv'."""
    return csv_path.with_name(f"{csv_path.stem}-levels{csv_path.suffix or '.csv'}")


Options = CompareOptions


def run(options: CompareOptions, invocation: Invocation) -> int:
    """Run `spectui compare`; returns the exit status."""
    return asyncio.run(_compare(invocation.settings, options))


__all__: Sequence[str] = (
    "NAME",
    "CompareOptions",
    "Options",
    "add_parser",
    "divergence_prober",
    "run",
)
