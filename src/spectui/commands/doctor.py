"""`spectui doctor`: which llama-server, why, and what each spec type needs with your GGUF;
``--try`` starts the server once per type and reports what really runs."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TYPE_CHECKING

from spectui.commands.command import Invocation, Subparsers
from spectui.commands.common import InlinePromptOptions, add_generation_flags
from spectui.commands.launch_options import add_launch_options
from spectui.core.errors import SpectuiError

if TYPE_CHECKING:
    from spectui.config import Settings
    from spectui.core.engine.trial import TrialReport, TypeTrial

NAME = "doctor"

TRY_N_PREDICT = 48
"""Tokens each type generates under ``--try`` (short: it proves the type runs, nothing more)."""
TRY_PROMPT = "table-row"
"""The built-in prompt ``--try`` uses when none is given: it repeats text, so every n-gram type
has something to draft."""


class DoctorError(SpectuiError):
    """A doctor run that cannot go ahead as asked."""

    title = "Cannot check"
    exit_code = 2


class DoctorOptions(InlinePromptOptions):
    """`spectui doctor`'s own options."""

    try_types: bool = False
    """--try: start the server once per spec type with the model and report what runs."""
    json_out: bool = False
    """--json: print the report as one JSON object."""
    try_timeout: float | None = None
    """--try-timeout: seconds one type may take to start and generate before it counts as hung."""


def add_parser(commands: Subparsers) -> argparse.ArgumentParser:
    """Register `spectui doctor` (with the shared --model/--server-bin/... group)."""
    doctor = commands.add_parser(
        NAME,
        help="which llama-server spectui would use, and why; what each spec type needs "
        "(--try: run each one)",
        argument_default=argparse.SUPPRESS,
    )
    add_launch_options(doctor)  # the settings it checks: binary, model, spec type, draft model
    group = doctor.add_argument_group("doctor")
    group.add_argument(
        "--try",
        action="store_true",
        dest="try_types",
        help="start llama-server once per spec type with --model (and --draft-model), "
        "generate a short run, and report which types work, are refused or do not apply",
    )
    group.add_argument("--json", action="store_true", dest="json_out", help="print JSON")
    group.add_argument(
        "--try-timeout",
        type=float,
        metavar="S",
        dest="try_timeout",
        help="seconds one type may take to start and generate before it is stopped as hung (120)",
    )
    source = group.add_mutually_exclusive_group()
    source.add_argument("--prompt", help=f"the --try prompt (default: built-in {TRY_PROMPT})")
    source.add_argument("--builtin", metavar="KEY", help="a built-in prompt for --try")
    add_generation_flags(doctor.add_argument_group("generation (--try)"))
    return doctor


Options = DoctorOptions


def run(options: DoctorOptions, invocation: Invocation) -> int:
    """Run `spectui doctor`; returns the exit status."""
    settings = invocation.settings
    if options.try_types:
        return asyncio.run(_try(settings, options))
    from spectui.app_setup import engine_dirs
    from spectui.core.llama.doctor import doctor_report, format_doctor

    report = doctor_report(
        settings.server_bin,
        engine_dirs().caps_cache,
        model=settings.model,
        spec_type=settings.spec_type,
        draft_model=settings.draft_model,
    )
    print(report.model_dump_json(indent=2) if options.json_out else format_doctor(report))
    return 0 if report.binary else 2


async def _try(settings: Settings, options: DoctorOptions) -> int:
    from spectui.app_setup import engine_dirs, request_for
    from spectui.core.engine.live import demo_model
    from spectui.core.engine.trial import DEFAULT_TRY_TIMEOUT_S, Outcome, Trial
    from spectui.core.llama.binary import find_llama_server, probe_capabilities
    from spectui.core.llama.gguf import check_gguf
    from spectui.core.prompts import BuiltinPrompt, builtin_prompt
    from spectui.lifecycle import exit_signals

    if settings.url:
        raise DoctorError("doctor --try launches its own llama-server per type: use --model")
    if options.try_timeout is not None and options.try_timeout <= 0:
        raise DoctorError(f"--try-timeout must be more than 0, not {options.try_timeout:g}")
    dirs = engine_dirs()
    binary = find_llama_server(settings.server_bin)
    caps = probe_capabilities(binary.path, dirs.caps_cache)
    model = settings.model if settings.model is not None else demo_model()
    check_gguf(model)
    if settings.draft_model is not None:
        check_gguf(settings.draft_model, what="draft model")
    prompt = options.chosen_prompt() or builtin_prompt(TRY_PROMPT)
    text = prompt.text if isinstance(prompt, BuiltinPrompt) else prompt
    trial = Trial(
        binary.path,
        caps,
        model,
        request_for(settings, text, TRY_N_PREDICT),
        draft_model=settings.draft_model,
        ctx_size=settings.ctx_size,
        extra_args=tuple(settings.server_args),
        dirs=dirs,
        timeout_s=options.try_timeout or DEFAULT_TRY_TIMEOUT_S,
    )
    chains = [settings.spec_type] if "," in settings.spec_type else []
    if not options.json_out:
        print(f"trying every spec type of {binary.path} with {model.name}", file=sys.stderr)

    width = max(16, *(len(name) + 1 for name in (*caps.spec_types, *chains)))

    def progress(result: TypeTrial) -> None:
        if not options.json_out:
            print(format_trial(result, width), flush=True)

    task = asyncio.ensure_future(trial.run(chains, progress))
    received: list[int] = []

    def on_exit(code: int) -> None:
        received.append(code)
        task.cancel()

    with exit_signals(on_exit):
        try:
            report = await task
        except asyncio.CancelledError:
            if not received:
                raise
            return received[0]
    if options.json_out:
        print(report.model_dump_json(indent=2))
    else:
        print(summary_line(report), file=sys.stderr)
    # A report, whatever it found; but a model the server cannot even run plainly is a failure
    # a script should see.
    baseline = next(t for t in report.trials if t.type == "none")
    return 0 if baseline.outcome is Outcome.WORKS else 1


def format_trial(trial: TypeTrial, width: int = 16) -> str:
    """One line per type: ``type  outcome  numbers or reason`` (the type padded to ``width``)."""
    from spectui.core.engine.trial import Outcome

    head = f"{trial.type:<{width}} {trial.outcome.value:<15}"
    if trial.outcome is not Outcome.WORKS:
        return f"{head}{trial.reason or ''}".rstrip()
    parts = []
    if trial.type != "none":
        parts.append(f"drafted {trial.drafted}, accepted {trial.accepted}")
    # A type that drafted nothing ran as `none` does: its rate beside none's is only the noise
    # of two short runs, so it gets none (it read 0.21x and 30x on the tiny model, one run).
    drafted = trial.type == "none" or bool(trial.drafted)
    if trial.tokens_per_second is not None and drafted:
        speed = f"{trial.tokens_per_second:.0f} tok/s"
        if trial.speedup is not None:
            speed += f" ({trial.speedup:.2f}x none)"
        parts.append(speed)
    if trial.reason:
        parts.append(trial.reason)
    return head + " · ".join(parts)


def summary_line(report: TrialReport) -> str:
    """How many types work, were refused, hung or do not apply."""
    counts: dict[str, int] = {}
    for trial in report.trials:
        counts[trial.outcome.value] = counts.get(trial.outcome.value, 0) + 1
    tally = ", ".join(f"{n} {outcome}" for outcome, n in counts.items())
    return (
        f"{len(report.trials)} tried on {report.model.name}: {tally} (no server left running); "
        "tok/s from one short run each: an indication, `spectui compare` measures"
    )
