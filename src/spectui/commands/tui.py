"""`spectui` with no command: the live TUI on a launched or attached server."""

from __future__ import annotations

import argparse

from spectui.app_setup import build_engine, recorder
from spectui.commands.common import prompt_from_args
from spectui.config import Settings
from spectui.core.engine.live import DemoModelMissingError


def run_tui_command(settings: Settings, args: argparse.Namespace) -> int:
    """Build the engine (all checks before any process starts), then run the app."""
    from spectui.ui.app import run_no_model, run_tui

    prompt = prompt_from_args(args)
    try:
        engine = build_engine(settings)
    except DemoModelMissingError as error:
        return run_no_model(settings, str(error))
    # Always wrapped, so the record key works; on from the start with the `record` setting.
    path = getattr(args, "record", None)
    wrapped = recorder(engine, settings, path=path, recording=settings.record or path is not None)
    return run_tui(wrapped, settings, prompt=prompt, autorun=bool(args.run))
