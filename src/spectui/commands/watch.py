"""`spectui watch --url URL [--url URL2]`: watch running llama-servers, send nothing.

Text refreshed in place on a terminal (plain lines otherwise, so it works over SSH and in a
log), or ``--json``: one JSON object per server per poll; ``--once --json`` prints one snapshot
for scripts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import TYPE_CHECKING

from pydantic import Field

from spectui.commands.command import Invocation, Subparsers
from spectui.commands.options import CommandOptions
from spectui.commands.output import EXIT_PIPE_CLOSED, OutputClosed, ThrottledOutput

if TYPE_CHECKING:
    from pydantic import SecretStr

    from spectui.core.proxy.watch import ServerView

NAME = "watch"

DEFAULT_INTERVAL_S = 1.0
"""Seconds between polls."""


def _interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0.05 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"the interval must be 0.05 to 3600 s, not {text}")
    return value


def add_parser(commands: Subparsers) -> argparse.ArgumentParser:
    """Register `spectui watch`."""
    watch = commands.add_parser(
        NAME,
        help="watch running llama-servers (/slots, /metrics); sends no request",
        description="Per slot busy/idle, task, tokens and tok/s; server-wide acceptance, mean "
        "acceptance length and per-position acceptance (windowed deltas of /metrics), "
        "throughput and memory (when the server runs here).",
    )
    watch.add_argument(
        "--url",
        action="append",
        required=True,
        metavar="URL",
        help="a llama-server to watch (repeat for several)",
    )
    watch.add_argument("--api-key", help="API key of the servers (or SPECTUI_API_KEY)")
    watch.add_argument(
        "--interval",
        type=_interval,
        default=DEFAULT_INTERVAL_S,
        metavar="S",
        help=f"seconds between polls (default {DEFAULT_INTERVAL_S:g})",
    )
    watch.add_argument("--once", action="store_true", help="one snapshot, then exit")
    watch.add_argument("--json", action="store_true", help="JSON instead of text")
    return watch


class WatchOptions(CommandOptions):
    """`spectui watch`'s options."""

    url: list[str]
    """--url: the servers to watch (normalised before any poll)."""
    api_key: str | None = None
    """--api-key: the servers' API key (else SPECTUI_API_KEY)."""
    interval: float = DEFAULT_INTERVAL_S
    """--interval: seconds between polls."""
    once: bool = False
    """--once: one snapshot, then exit."""
    json_out: bool = Field(default=False, alias="json")
    """--json: JSON instead of text."""


def view_record(view: ServerView) -> dict[str, object]:
    """A poll as JSON, with the derived acceptance numbers spelled out."""
    record = view.model_dump(mode="json")
    for name in ("spec_total", "spec_window"):
        counters = getattr(view, name)
        if counters is not None:
            record[name] |= {
                "acceptance_rate": counters.acceptance_rate,
                "mean_acceptance_length": counters.mean_acceptance_length,
            }
    return record


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def _num(value: float | None, spec: str = ".1f") -> str:
    return "—" if value is None else format(value, spec)


def view_lines(view: ServerView) -> list[str]:
    """A poll as a few human lines."""
    if not view.reachable or view.problem:
        return [f"{view.url}: {view.problem}"]
    head = [view.url]
    if view.generation_tokens_per_second is not None:
        head.append(f"gen {view.generation_tokens_per_second:.1f} tok/s")
    if view.prompt_tokens_per_second is not None:
        head.append(f"prompt {view.prompt_tokens_per_second:.0f} tok/s")
    if view.rss_bytes is not None:
        head.append(f"RSS {view.rss_bytes / 2**20:.0f} MiB")
    lines = [" · ".join(head)]
    if view.slots is None:
        lines.append(f"  {view.slots_note}")
    for slot in view.slots or []:
        state = "busy" if slot.busy else "idle"
        rate = f" {slot.tokens_per_second:.1f} tok/s" if slot.tokens_per_second is not None else ""
        lines.append(f"  slot {slot.id}: {state:4} task {slot.task} · {slot.decoded} tokens{rate}")
    if view.metrics_note:
        lines.append(f"  {view.metrics_note}")
    for label, counters in (("window", view.spec_window), ("total", view.spec_total)):
        if counters is None:
            continue
        lines.append(
            f"  {label:6}: {counters.steps} steps · drafted {counters.drafted} · accepted "
            f"{counters.accepted} ({_pct(counters.acceptance_rate)}) · mean acceptance length "
            f"{_num(counters.mean_acceptance_length, '.2f')}"
        )
        if counters.accepted_per_position and counters.steps:
            shown = " ".join(
                f"{n / counters.steps:.0%}" for n in counters.accepted_per_position[:12]
            )
            more = " …" if len(counters.accepted_per_position) > 12 else ""
            lines.append(f"          per position: {shown}{more}")
    return lines


async def _watch(options: WatchOptions, key: SecretStr | None) -> int:
    from spectui.core.proxy.watch import ServerWatcher, snapshot_once

    out = ThrottledOutput(sys.stdout)
    live = sys.stdout.isatty() and not options.json_out
    if options.once:
        views = await snapshot_once(options.url, key, options.interval)
        if options.json_out:
            document: object = [view_record(v) for v in views]
            out.write(json.dumps(document if len(views) > 1 else document[0], ensure_ascii=False))  # type: ignore[index]
            out.write("\n")
        else:
            for view in views:
                out.write("\n".join(view_lines(view)) + "\n")
        out.flush()
        for view in views:
            if not view.reachable:  # also said where a script's stderr shows it
                print(f"spectui: {view.problem}", file=sys.stderr)
        return 0 if all(v.reachable and not v.problem for v in views) else 1
    watchers = [ServerWatcher(url, key) for url in options.url]
    try:
        while True:
            views = await asyncio.gather(*(w.poll() for w in watchers))
            if options.json_out:
                for view in views:
                    out.write(json.dumps(view_record(view), ensure_ascii=False) + "\n")
            else:
                text = "\n".join(line for view in views for line in view_lines(view))
                out.write(("\x1b[H\x1b[2J" if live else "\n") + text + "\n")
            await asyncio.sleep(options.interval)
    finally:
        await asyncio.gather(*(w.aclose() for w in watchers))
        out.flush()


Options = WatchOptions


def run(options: WatchOptions, invocation: Invocation) -> int:
    """Run `spectui watch` (no settings: it only attaches); returns the exit status."""
    from pydantic import SecretStr

    from spectui.core.llama.client import normalize_url

    try:
        urls = [normalize_url(url) for url in options.url]
    except ValueError as error:
        print(f"spectui: --url: {error}", file=sys.stderr)
        return 2
    options = options.model_copy(update={"url": urls})
    raw = options.api_key or os.environ.get("SPECTUI_API_KEY")
    try:
        return asyncio.run(_watch(options, SecretStr(raw) if raw else None))
    except OutputClosed:
        return EXIT_PIPE_CLOSED
    except KeyboardInterrupt:
        return 130
