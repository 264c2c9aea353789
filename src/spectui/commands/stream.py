"""`spectui stream`: one generation, headless, as coloured text or JSON Lines."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from spectui.commands.command import Invocation, Subparsers
from spectui.commands.common import PromptError, PromptOptions, add_prompt_flags
from spectui.commands.launch_options import add_launch_options
from spectui.commands.output import EXIT_PIPE_CLOSED, OutputClosed, ThrottledOutput
from spectui.core.events import (
    EngineEvent,
    ErrorEvent,
    EventStream,
    RunMetrics,
    ServerState,
    ServerStateEvent,
    StepEvent,
    SummaryEvent,
    TokenEvent,
    TokenOrigin,
)

if TYPE_CHECKING:
    from spectui.config import Settings

NAME = "stream"

_DRAFT_STYLE = "\x1b[1;4;32m"  # bold, underlined, green: reads without colour too
_RESET = "\x1b[0m"
_UNKNOWN_STYLE = "\x1b[3m"  # italic: the counters could not say whether drafted or not


class TextWriter:
    """Tokens as they arrive; drafted spans coloured, or wrapped in [ ] without colour; tokens
    whose origin the counters could not decide (chunks of several steps) in italics, or { }."""

    def __init__(self, out: ThrottledOutput, *, colour: bool) -> None:
        self.out = out
        self.colour = colour
        self._span = TokenOrigin.TARGET

    def token(self, token: TokenEvent) -> None:
        if not token.text:
            return
        if token.origin is not self._span:
            self.out.write(self._close() + self._open(token.origin))
            self._span = token.origin
        self.out.write(token.text)

    def _open(self, origin: TokenOrigin) -> str:
        if origin is TokenOrigin.TARGET:
            return ""
        if origin is TokenOrigin.DRAFT:
            return _DRAFT_STYLE if self.colour else "["
        return _UNKNOWN_STYLE if self.colour else "{"

    def _close(self) -> str:
        if self._span is TokenOrigin.TARGET:
            return ""
        if self.colour:
            return _RESET
        return "]" if self._span is TokenOrigin.DRAFT else "}"

    def finish(self) -> None:
        self.out.write(self._close())
        self._span = TokenOrigin.TARGET
        self.out.write("\n")
        self.out.flush()


def summary_record(summary: SummaryEvent) -> dict[str, object]:
    """The JSON `summary` line: every `RunMetrics` field (serialised from the model, so a new
    field cannot be left out), the numbers derived from them, and how the run ended."""
    m = summary.metrics
    return {
        "type": "summary",
        **m.model_dump(mode="json"),
        "rejected": m.rejected,
        "acceptance_rate": m.acceptance_rate,
        "mean_acceptance_length": m.mean_acceptance_length,
        "stop_reason": summary.stop_reason,
        "server_timings": summary.server_timings,
    }


def summary_line(m: RunMetrics) -> str:
    """One human line for stderr."""
    parts = [f"{m.tokens} tokens"]
    if m.tokens_per_second is not None:
        parts.append(f"{m.tokens_per_second:.1f} tok/s")
    if m.ttft_ms is not None:
        parts.append(f"TTFT {m.ttft_ms:.0f} ms")
    if m.drafted:
        rate = f" ({m.acceptance_rate:.0%})" if m.acceptance_rate is not None else ""
        parts.append(f"drafted {m.drafted}, accepted {m.accepted}{rate}, {m.steps} steps")
        if m.steps_maybe_fewer or m.steps_maybe_more:  # chunks that carried several steps
            low, high = m.steps - m.steps_maybe_fewer, m.steps + m.steps_maybe_more
            parts.append(f"steps between {low} and {high} by the counters")
        if m.steps_unsplit:
            parts.append(f"{m.steps_unsplit} steps not placed by position")
        if len(m.by_drafter) > 1:  # a chain: each drafter's share
            shares = (f"{n} {s.accepted}/{s.drafted}" for n, s in m.by_drafter.items())
            parts.append("by drafter " + ", ".join(shares))
    else:
        parts.append("nothing drafted")
    if m.peak_rss_bytes:
        parts.append(f"peak RSS {m.peak_rss_bytes / 2**20:.0f} MiB")
    if m.client_cpu_percent is not None:  # what watching cost, next to what it watched
        server = f"{m.server_cpu_percent:.0f} %" if m.server_cpu_percent is not None else "?"
        parts.append(f"CPU spectui {m.client_cpu_percent:.1f} % · server {server}")
    if n := m.attribution_anomalies:
        noun = "anomaly" if n == 1 else "anomalies"
        parts.append(f"⚠ {n} attribution {noun} (counts may be off)")
    return " · ".join(parts)


def _emit_json(out: ThrottledOutput, record: dict[str, object]) -> None:
    out.write(json.dumps(record, ensure_ascii=False) + "\n")


def _json_record(event: EngineEvent) -> dict[str, object] | None:
    if isinstance(event, TokenEvent):
        return {
            "type": "token",
            "index": event.index,
            "text": event.text,
            "origin": event.origin.value,
            "step": event.step,
            "rejected_before": event.rejected_before,
            "drafter": event.drafter,
            "t": round(event.t, 6),
        }
    if isinstance(event, StepEvent):
        return {
            "type": "step",
            "index": event.index,
            "drafted": event.drafted,
            "accepted": event.accepted,
            "rejected": event.rejected,
            "first_token": event.first_token,
            "drafter": event.drafter,
            # (a chunk of held-back UTF-8 can carry several steps: see `StepEvent.steps`)
            "steps": event.steps,
            "split_known": event.split_known,
            "steps_maybe_fewer": event.steps_maybe_fewer,
            "steps_maybe_more": event.steps_maybe_more,
        }
    if isinstance(event, SummaryEvent):
        return summary_record(event)
    if isinstance(event, ErrorEvent):
        return {"type": "error", "message": event.message, "kind": event.kind}
    return None


def add_parser(commands: Subparsers) -> argparse.ArgumentParser:
    """Register `spectui stream` (with the TUI's server and generation flags)."""
    # SUPPRESS: options given before the command (`spectui --model X stream`) must survive the
    # subparser, which would otherwise reset them to its own None defaults.
    stream = commands.add_parser(
        NAME, help="stream one generation headless", argument_default=argparse.SUPPRESS
    )
    add_launch_options(stream)
    add_prompt_flags(stream)
    stream.add_argument("--format", choices=["text", "jsonl"], default="text")
    stream.add_argument(
        "--record", type=Path, metavar="FILE", help="also record the run to a session file"
    )
    return stream


class StreamOptions(PromptOptions):
    """`spectui stream`'s own options."""

    format: Literal["text", "jsonl"] = "text"
    """--format: coloured text (drafted spans marked), or JSON Lines of the engine's events."""
    record: Path | None = None
    """--record: also record the run to this session file."""


async def _stream(settings: Settings, options: StreamOptions) -> int:
    from spectui.app_setup import build_engine, recorder_for, request_for
    from spectui.core.sessions.recording import recording_notes
    from spectui.lifecycle import run_guarded

    prompt = options.chosen_prompt()
    if prompt is None:
        raise PromptError("give a prompt: --prompt TEXT, --prompt-file FILE or --builtin KEY")
    request = request_for(settings, prompt)
    as_json = options.format == "jsonl"
    colour = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    out = ThrottledOutput(sys.stdout)
    writer = TextWriter(out, colour=colour)
    engine = recorder_for(build_engine(settings), settings, options.record)

    async def body() -> int:
        async for event in engine.start():
            if isinstance(event, ServerStateEvent) and event.state is ServerState.FAILED:
                return _fail(out, event.detail, as_json, exit_code=1)
        events = engine.run(request)
        try:
            failed = await _print_run(events, out, None if as_json else writer)
        finally:
            # An early way out (the pipe closed) must end the run now, not when it is collected.
            await events.aclose()
        return 1 if failed else 0

    async def guarded_body() -> int:
        try:
            return await body()
        except OutputClosed:  # `| head` has what it wanted: stop generating, quietly
            return EXIT_PIPE_CLOSED

    status = await run_guarded(engine, guarded_body())
    out.flush()
    if out.closed:
        status = EXIT_PIPE_CLOSED
    for note in recording_notes(engine):
        print(f"spectui: {note}", file=sys.stderr)
    return status


async def _print_run(events: EventStream, out: ThrottledOutput, writer: TextWriter | None) -> bool:
    """Print a run as text (``writer``) or JSON Lines (no writer); True when it failed."""
    failed = False
    async for event in events:
        if writer is None:
            record = _json_record(event)
            if record is not None:
                _emit_json(out, record)
        elif isinstance(event, TokenEvent):
            writer.token(event)
        if isinstance(event, ErrorEvent):
            failed = True
            if writer is not None:
                writer.finish()
                print(f"spectui: {event.message}", file=sys.stderr)
        elif isinstance(event, SummaryEvent) and writer is not None:
            if not failed:
                writer.finish()
            print(summary_line(event.metrics), file=sys.stderr)
    return failed


def _fail(out: ThrottledOutput, message: str, as_json: bool, *, exit_code: int) -> int:
    if as_json:
        _emit_json(out, {"type": "error", "message": message, "kind": "server"})
    else:
        print(f"spectui: {message}", file=sys.stderr)
    return exit_code


Options = StreamOptions


def run(options: StreamOptions, invocation: Invocation) -> int:
    """Run `spectui stream`; returns the exit status."""
    return asyncio.run(_stream(invocation.settings, options))
