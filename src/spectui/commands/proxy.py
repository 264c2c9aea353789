"""`spectui proxy`: clients talk to the proxy instead of llama-server; every request passes
through, every streamed generation is attributed token by token. The proxy TUI by default,
``--format jsonl`` for one JSON line per finished request."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from spectui.commands.command import Invocation, Subparsers
from spectui.commands.launch_options import add_launch_options
from spectui.commands.options import CommandOptions
from spectui.commands.output import EXIT_PIPE_CLOSED, OutputClosed, ThrottledOutput
from spectui.core.errors import SpectuiError

# The proxy's parts (starlette, uvicorn, prometheus-client) load only when the command runs:
# the parser is built for every spectui command, and start-up time counts.
if TYPE_CHECKING:
    from pydantic import SecretStr

    from spectui.config import Settings
    from spectui.core.proxy.hub import LiveRequest
    from spectui.core.proxy.models import ProxyOptions, ProxyRecord
    from spectui.core.proxy.session import ProxySession

NAME = "proxy"

DEFAULT_LISTEN = "127.0.0.1:8081"
"""Where the proxy listens unless told otherwise: this machine only."""

CLIENT_KEY_ENV = "SPECTUI_PROXY_API_KEY"
"""The proxy's own key for its clients, from the environment (a flag shows in `ps`)."""

_SIZE = re.compile(r"(\d+)\s*([kmg]?)(?:i?b)?", re.IGNORECASE)
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def byte_size(text: str) -> int:
    """'65536', '64K', '64M', '16MiB', '1G' as bytes (an argparse type: one line when not)."""
    match = _SIZE.fullmatch(text.strip())
    if match is None or int(match[1]) <= 0:
        raise argparse.ArgumentTypeError(f"not a size in bytes: {text!r} (e.g. 64M, 16MiB)")
    return int(match[1]) * _UNITS[match[2].lower()]


def _count(text: str) -> int:
    if not text.isdigit() or int(text) <= 0:
        raise argparse.ArgumentTypeError(f"not a positive number: {text!r}")
    return int(text)


def add_parser(commands: Subparsers) -> argparse.ArgumentParser:
    """Register `spectui proxy` (with the TUI's server flags)."""
    from spectui.core.proxy.models import METRICS_PATH

    proxy = commands.add_parser(
        NAME,
        help="put spectui between your clients and llama-server: every request, token by token",
        description="Clients point at the proxy instead of the server. Every path passes "
        "through; streamed /completion, /v1/completions and /v1/chat/completions are "
        f"attributed token by token. Prometheus metrics at {METRICS_PATH}.",
        argument_default=argparse.SUPPRESS,
        conflict_handler="resolve",  # --api-key here is the proxy's own key, not upstream's
    )
    add_launch_options(proxy)
    group = proxy.add_argument_group("proxy")
    group.add_argument(
        "--listen",
        default=DEFAULT_LISTEN,
        metavar="HOST:PORT",
        help=f"where clients connect (default {DEFAULT_LISTEN}; another interface only when "
        "asked, with a warning)",
    )
    group.add_argument(
        "--format",
        choices=["tui", "jsonl"],
        default="tui",
        help="the proxy TUI (default) or one JSON line per finished request",
    )
    group.add_argument(
        "--slots",
        action="store_true",
        help="open the proxy TUI on its slots view: a lane per concurrent request (s toggles)",
    )
    group.add_argument(
        "--record",
        type=Path,
        metavar="DIR",
        help="write each request as a session file and append it to DIR/workload.jsonl "
        "(off by default: prompts can be private)",
    )
    group.add_argument(
        "--api-key",
        dest="client_key",
        metavar="KEY",
        help=f"a key the proxy's own clients must send (or {CLIENT_KEY_ENV})",
    )
    group.add_argument(
        "--upstream-api-key",
        dest="api_key",
        metavar="KEY",
        help="the key to send upstream instead of the client's (or SPECTUI_API_KEY)",
    )
    group.add_argument(
        "--max-body",
        type=byte_size,
        metavar="SIZE",
        help="largest request body a client may send (default 64M; over it: 413)",
    )
    group.add_argument(
        "--max-sse-line",
        type=byte_size,
        metavar="SIZE",
        help="longest SSE line upstream may send in a generation stream (default 16M; over "
        "it the stream ends with an SSE error event and upstream is closed)",
    )
    group.add_argument(
        "--max-concurrency",
        type=_count,
        metavar="N",
        help="requests handled at once (default 256; beyond it: 503)",
    )
    group.add_argument("--theme", help="TUI theme")
    return proxy


class ProxyUsageError(SpectuiError):
    """Flags that do not make sense together."""

    title = "Bad proxy options"
    exit_code = 2


class ProxyCommandOptions(CommandOptions):
    """`spectui proxy`'s own options (the server flags and --upstream-api-key are settings)."""

    listen: str = DEFAULT_LISTEN
    """--listen: HOST:PORT where clients connect."""
    format: Literal["tui", "jsonl"] = "tui"
    """--format: the proxy TUI, or one JSON line per finished request."""
    slots: bool = False
    """--slots: the proxy TUI opens on its slots view."""
    record: Path | None = None
    """--record: write each request as a session file into this folder (and its workload)."""
    client_key: str | None = None
    """--api-key: the key the proxy's own clients must send (else `CLIENT_KEY_ENV`)."""
    max_body: int | None = None
    """--max-body: the largest request body in bytes (None: the proxy's default)."""
    max_sse_line: int | None = None
    """--max-sse-line: the longest SSE line upstream may send, in bytes (None: the default)."""
    max_concurrency: int | None = None
    """--max-concurrency: requests handled at once (None: the default)."""


def request_record(record: ProxyRecord) -> dict[str, object]:
    """One finished request for `--format jsonl`: the `stream` summary's fields (None where the
    proxy could not know), plus the request's id, endpoint, client and how it ended."""
    from spectui.commands.stream import summary_record
    from spectui.core.events import RunMetrics, SummaryEvent
    from spectui.core.proxy.models import NO_DETAIL

    if record.metrics is not None:
        summary = summary_record(
            SummaryEvent(
                metrics=record.metrics,
                stop_reason=record.stop_reason,
                server_timings=record.server_timings,
            )
        )
    else:
        unknown: dict[str, object] = dict.fromkeys(RunMetrics.model_fields)
        rejected = None
        if record.drafted is not None and record.accepted is not None:
            rejected = record.drafted - record.accepted
        summary = {
            **unknown,
            "tokens": record.tokens,
            "prompt_tokens": record.prompt_tokens,
            "drafted": record.drafted,
            "accepted": record.accepted,
            "total_ms": record.duration_ms,
            "rejected": rejected,
            "acceptance_rate": record.acceptance_rate,
            "mean_acceptance_length": None,
            "stop_reason": record.stop_reason,
            "server_timings": record.server_timings,
        }
    info = record.info
    return {
        **summary,
        "type": "request",
        "id": info.id,
        "started": info.started.isoformat(),
        "client": info.client,
        "endpoint": info.endpoint,
        "model": info.model,
        "streamed": info.streamed,
        "per_token": info.per_token,
        "detail": None if info.per_token else NO_DETAIL,
        "content": record.content.value,
        "prompt_length": record.prompt_length.value,
        "status": record.status.value,
        "http_status": record.http_status,
        "duration_ms": round(record.duration_ms, 3),
        "error": record.error,
    }


class JsonlWriter:
    """A `ProxyListener` printing one line per finished request."""

    def __init__(self, out: ThrottledOutput, on_closed: Callable[[], None] | None = None) -> None:
        self.out = out
        self.on_closed = on_closed
        """Called once the reader has gone (the proxy then stops)."""

    def request_started(self, live: LiveRequest) -> None:
        """Nothing until it ends."""

    def request_finished(self, live: LiveRequest, record: ProxyRecord) -> None:
        """Print the record; a closed pipe stops the proxy (through ``on_closed``)."""
        # One record per request, not per token: flushing each at once costs nothing and lets
        # a closed pipe be noticed now rather than one request later.

        try:
            line = json.dumps(request_record(record), ensure_ascii=False)
            if not line.isascii():
                try:
                    line.encode()
                except UnicodeEncodeError:  # (a lone surrogate: written escaped, not lost)
                    line = json.dumps(request_record(record))
            self.out.write(line + "\n")
            self.out.flush()
        except OutputClosed:
            pass
        if self.out.closed and self.on_closed is not None:
            self.on_closed()


def client_key(options: ProxyCommandOptions) -> SecretStr | None:
    """The proxy's own key: the flag, else the environment, else none."""
    from pydantic import SecretStr

    from spectui.core.llama.secrets import check_api_key

    key = options.client_key or os.environ.get(CLIENT_KEY_ENV)
    # Refused here, at start-up, in a line that does not show it: a key with a CR (read from a
    # CRLF file) would otherwise lock every client out with a 401 nobody can explain.
    check_api_key(key or None, f"the proxy's key (--api-key or {CLIENT_KEY_ENV})")
    return SecretStr(key) if key else None


def proxy_options(options: ProxyCommandOptions, *, keep_events: bool) -> ProxyOptions:
    """The engine's proxy options from the command's."""
    from spectui.core.proxy.models import ProxyLimits, ProxyOptions

    limits = options.model_dump(
        include={"max_body", "max_sse_line", "max_concurrency"}, exclude_none=True
    )
    return ProxyOptions(
        client_key=client_key(options),
        record=options.record,
        limits=ProxyLimits(**limits),
        keep_events=keep_events,
    )


def listening_socket(
    options: ProxyCommandOptions, warn: Callable[[str], None] | None = None
) -> socket.socket:
    """Bind where `--listen` says (before any server starts: a port in use, or a record folder
    that cannot be written, fails at once)."""
    from spectui.core.proxy.record import prepare_folder
    from spectui.core.proxy.serve import bind, is_loopback, parse_listen

    if (folder := options.record) is not None and (warning := prepare_folder(folder)):
        print(f"spectui: warning: {warning}", file=sys.stderr)
        if warn is not None:
            warn(warning)

    host, port = parse_listen(options.listen)
    if not is_loopback(host):
        line = (
            f"listening on {host}, not only this machine: anyone who can reach it can use the "
            "server" + ("" if client_key(options) else " (no --api-key set)")
        )
        print(f"spectui: warning: {line}", file=sys.stderr)
        if warn is not None:
            warn(line)
    return bind(host, port)


async def _headless(settings: Settings, options: ProxyCommandOptions) -> int:
    from spectui.app_setup import build_engine, proxy_session
    from spectui.lifecycle import run_guarded

    def note(line: str) -> None:
        print(f"spectui: note: {line}", file=sys.stderr)

    sock = listening_socket(options)
    engine = build_engine(settings)
    session = proxy_session(settings, proxy_options(options, keep_events=False), engine, sock)
    out = ThrottledOutput(sys.stdout)
    # `spectui proxy --format jsonl | head -3` ends after three requests, as `cat` would.
    session.hub.listeners.append(JsonlWriter(out, on_closed=session.stop))

    async def body() -> int:
        if (problem := await session.start(on_note=note)) is not None:
            print(f"spectui: {problem}", file=sys.stderr)
            return 1
        print(f"spectui: proxy listening on {session.banner()}", file=sys.stderr)
        try:
            await session.serve()
        finally:
            for problem in session.problems():
                print(f"spectui: {problem}", file=sys.stderr)
        return 0

    try:
        status = await run_guarded(engine, body())
    finally:
        sock.close()
        out.flush()
    return EXIT_PIPE_CLOSED if out.closed else status


Options = ProxyCommandOptions


def run(options: ProxyCommandOptions, invocation: Invocation) -> int:
    """Run `spectui proxy`; returns the exit status."""
    settings = invocation.settings
    if options.format == "jsonl":
        if options.slots:
            raise ProxyUsageError("--slots is a view of the proxy TUI: not with --format jsonl")
        return asyncio.run(_headless(settings, options))
    from spectui.app_setup import build_engine, proxy_session
    from spectui.ui.apps.proxy import run_proxy_tui

    warnings: list[str] = []
    sock = listening_socket(options, warnings.append)
    engine = build_engine(settings)
    session: ProxySession = proxy_session(
        settings, proxy_options(options, keep_events=True), engine, sock
    )
    try:
        return asyncio.run(run_proxy_tui(session, settings, warnings=warnings, slots=options.slots))
    finally:
        sock.close()
        for problem in session.problems():  # said once the screen is gone, as headless does
            print(f"spectui: {problem}", file=sys.stderr)
