"""`spectui compare`: a fair A/B of spec configs on the same prompts, with answers checked.

A live Rich table and a progress bar go to stderr while it runs; the final table and a plotext
chart of tokens/s and TTFT per config go to stdout. Results are rewritten (atomically) after
every run to the JSON file (``--json``, else one in the state dir), which ``--resume`` continues.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from spectui.commands.compare_view import LiveView, print_final
from spectui.commands.lifecycle import run_guarded
from spectui.config import Settings, state_dir
from spectui.core.engine import Engine
from spectui.core.errors import SpectuiError
from spectui.core.recording import RecordingEngine

if TYPE_CHECKING:
    from spectui.core.compare_setup import CompareSetup
    from spectui.core.compare_store import CompareDocument

DEFAULT_REPS = 3
"""Counted repetitions per config × prompt."""


class CompareUsageError(SpectuiError):
    """Flags that do not make sense together."""

    title = "Bad compare options"
    exit_code = 2


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {value}")
    return value


def add_compare_options(parser: argparse.ArgumentParser) -> None:
    """The compare-specific flags (launch options come from the shared group)."""
    group = parser.add_argument_group("compare")
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
        "--reps", type=_positive, metavar="N", help=f"counted rounds (default {DEFAULT_REPS})"
    )
    group.add_argument(
        "--n-predict", type=_positive, metavar="N", help="tokens per run (default: per prompt)"
    )
    group.add_argument("--temperature", type=float, metavar="T", help="sampling temperature (0)")
    group.add_argument("--seed", type=int, metavar="S", help="sampling seed")
    group.add_argument("--chat", action="store_const", const=True, help="use the chat endpoint")
    group.add_argument("--json", type=Path, dest="json_out", metavar="FILE", help="results file")
    group.add_argument("--csv", type=Path, dest="csv_out", metavar="FILE", help="runs as CSV")
    group.add_argument(
        "--markdown", type=Path, dest="markdown_out", metavar="FILE", help="report as Markdown"
    )
    group.add_argument(
        "--resume", type=Path, metavar="FILE", help="continue an interrupted comparison"
    )
    group.add_argument(
        "--no-chart", action="store_true", dest="no_chart", help="skip the final chart"
    )
    group.add_argument(
        "--tui",
        action="store_true",
        help="show the comparison in the TUI (table filling in, responses and their diff)",
    )


_PLAN_FLAGS = {
    "configs": "--config",
    "prompts": "--prompts",
    "reps": "--reps",
    "n_predict": "--n-predict",
    "temperature": "--temperature",
    "seed": "--seed",
    "chat": "--chat",
    "ctx_size": "--ctx-size",
}
_REFUSED = {
    "spec_type": "--spec-type: give each config with --config",
    "draft_n_max": "--spec-draft-n-max: put it in a --config",
    "draft_n_min": "--spec-draft-n-min: put it in a --config",
}


def _default_output() -> Path:
    return state_dir() / "compare" / f"compare-{datetime.now():%Y%m%d-%H%M%S}.json"


def _new_document(
    settings: Settings, args: argparse.Namespace, setup: CompareSetup
) -> CompareDocument:
    from spectui.core.compare_models import ComparePlan, Sampling
    from spectui.core.compare_setup import parse_configs
    from spectui.core.compare_store import CompareDocument
    from spectui.core.prompt_files import load_prompts

    n_predict = getattr(args, "n_predict", None)
    prompts = load_prompts(getattr(args, "prompts", None) or "builtin", n_predict)
    texts = getattr(args, "configs", None) or [settings.spec_type]
    configs = parse_configs(texts, setup.caps, draft_model=settings.draft_model)
    sampling = Sampling(
        temperature=settings.temperature,
        seed=settings.seed,
        chat=settings.chat,
        cache_prompt=settings.cache_prompt,
        stall_timeout_s=settings.stall_timeout_s,
        n_predict=n_predict,
    )
    plan = ComparePlan(
        configs=configs,
        prompts=prompts,
        reps=getattr(args, "reps", None) or DEFAULT_REPS,
        sampling=sampling,
    )
    return CompareDocument.new(
        plan, binary=setup.binary_info, model=setup.model_info, server=setup.server
    )


def _resumed_setup(settings: Settings, document: CompareDocument) -> CompareSetup:
    """The binary and model the document was measured with (refused if they changed)."""
    from spectui.core.compare_setup import prepare
    from spectui.core.compare_store import check_same_setup

    setup = prepare(
        settings,
        binary=Path(document.binary.path),
        model=settings.model or Path(document.model.path),
        server=document.server,
    )
    check_same_setup(document, setup.binary_info, setup.model_info)
    return setup


async def _compare(settings: Settings, args: argparse.Namespace) -> int:
    from spectui.core.compare import CompareRunner
    from spectui.core.compare_setup import prepare
    from spectui.core.compare_store import finished_seqs, load_document

    for flag, why in _REFUSED.items():
        if getattr(args, flag, None) is not None:
            raise CompareUsageError(f"compare does not take {why}")
    resume: Path | None = getattr(args, "resume", None)
    if resume is not None:
        given = [name for key, name in _PLAN_FLAGS.items() if getattr(args, key, None) is not None]
        if given:
            raise CompareUsageError(
                f"--resume continues {resume} as it was planned: drop {', '.join(given)}"
            )
        document = load_document(resume)
        if document.complete:
            print(f"spectui: {resume} is already complete; nothing to resume", file=sys.stderr)
        setup = _resumed_setup(settings, document)
    else:
        setup = prepare(settings)
        document = _new_document(settings, args, setup)
    done = finished_seqs(document)
    pending = [job for job in document.plan.jobs() if job.seq not in done]
    first = document.plan.config(pending[0].config if pending else document.plan.configs[0].name)
    json_out: Path | None = getattr(args, "json_out", None)
    outputs = [resume] if resume is not None else [json_out or _default_output()]
    if json_out is not None and json_out not in outputs:
        outputs.append(json_out)
    exports = _Exports(getattr(args, "csv_out", None), getattr(args, "markdown_out", None))
    record_dir: Path | None = getattr(args, "record", None)
    engine: Engine = setup.engine(first.spec)
    if record_dir is not None or settings.record:
        # One session file per run (warm-ups included), so any run can be replayed on stage.
        folder = record_dir if record_dir is not None else settings.sessions_dir
        engine = RecordingEngine.for_settings(
            engine, settings.model_copy(update={"sessions_dir": folder})
        )
    runner = CompareRunner(engine, document, outputs=outputs, on_save=exports.write)
    print(
        f"spectui: results in {outputs[0]} (if interrupted: spectui compare --resume {outputs[0]})",
        file=sys.stderr,
    )
    view = LiveView(runner.document)

    started = False

    async def body() -> int:
        nonlocal started
        with view:
            async for event in runner.run():
                started = True  # the results file is ours (locked) from here on
                view.update(event, runner.document)
        final = runner.document
        print_final(final, chart=not getattr(args, "no_chart", False))
        failed = sum(1 for r in final.runs if not r.ok)
        if failed:
            print(f"spectui: {failed} run(s) failed (see the table)", file=sys.stderr)
        return 1 if failed else 0

    try:
        if getattr(args, "tui", False):
            from spectui.ui.compare_app import run_compare_tui

            started = True
            code = await run_compare_tui(engine, settings, runner, outputs[0])
            failed = sum(1 for r in runner.document.runs if not r.ok)
            return code or (1 if failed else 0)
        return await run_guarded(engine, body())
    finally:
        if started and not runner.document.complete:
            with contextlib.suppress(OSError):  # the terminal may be gone (SIGHUP)
                print(
                    f"spectui: {len(runner.document.runs)} of {runner.total} runs kept in "
                    f"{outputs[0]}; continue with: spectui compare --resume {outputs[0]}",
                    file=sys.stderr,
                )


class _Exports:
    """CSV and Markdown files, rewritten with the JSON after every run."""

    def __init__(self, csv_path: Path | None, markdown_path: Path | None) -> None:
        self.csv_path = csv_path
        self.markdown_path = markdown_path

    def write(self, document: CompareDocument) -> None:
        from spectui.core.compare_export import to_csv, to_markdown
        from spectui.core.compare_store import write_atomic

        if self.csv_path is not None:
            write_atomic(self.csv_path, to_csv(document))
        if self.markdown_path is not None:
            write_atomic(self.markdown_path, to_markdown(document))


def run_compare(settings: Settings, args: argparse.Namespace) -> int:
    """Run `spectui compare`; returns the exit status."""
    return asyncio.run(_compare(settings, args))


__all__: Sequence[str] = ("add_compare_options", "run_compare")
