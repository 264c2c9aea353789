"""`spectui proxy --record DIR`: each attributed request as a session file `spectui replay`
plays, and every generation request appended to ``DIR/workload.jsonl``, a prompt file that
`compare --prompts` / `tune --prompts` read. Its lines are in arrival order, each with the
request's arrival time (``arrival_s``, seconds after the first request recorded), endpoint,
streaming flag and sampling fields: the traffic's shape, for `compare --arrivals recorded`.

Off by default: prompts and answers can be private. The folder is created owner-only (0700; an
existing wider one gets a warning), files are 0600 and opened so that a planted symlink is refused,
never written through (`spectui.core.files`). No header reaches them (keys travel in headers); any
secret the proxy knows is masked anyway.

Every line of ``workload.jsonl`` is one JSON object on one ``\n``-ended line: any character a
reader might take for a line break (U+2028, U+2029, U+0085, ...) is written as a JSON escape.
"""

from __future__ import annotations

import json
import os
import re
from collections import deque
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from spectui.core.engine.base import ServerInfo
from spectui.core.errors import SpectuiError
from spectui.core.events import SummaryEvent
from spectui.core.files import ensure_private_dir, open_append
from spectui.core.proxy.hub import LiveRequest
from spectui.core.proxy.models import (
    EndpointKind,
    ProxyRecord,
    RequestStatus,
    request_prompt,
)
from spectui.core.request import GenerationRequest
from spectui.core.sessions.file import SessionError, SessionWriter
from spectui.core.sessions.recording import header_for, session_path

WORKLOAD = "workload.jsonl"
"""The prompt file in the record folder."""


class RecordError(SpectuiError):
    """The record folder cannot be used."""

    title = "Recording problem"
    exit_code = 2


def prepare_folder(folder: Path) -> str | None:
    """Create ``folder`` (owner-only) and check it takes files; one clear line if not.

    Returns a one-line warning when an existing folder is open to other users, else None; the
    caller shows it (``spectui: warning: ...``).
    """
    try:
        warning = ensure_private_dir(folder)
        probe = folder / f".spectui-write-test-{os.getpid()}"
        os.close(open_append(probe))
        probe.unlink()
        workload = folder / WORKLOAD
        if os.path.lexists(workload):  # refuse a planted link now, not at the first request
            os.close(open_append(workload))
    except OSError as error:
        raise RecordError(f"cannot record to {folder}: {error.strerror}") from None
    return warning


def jsonl_line(entry: object) -> str:
    """``entry`` as one JSON line that every line-splitting reader keeps whole: non-ASCII text
    stays readable, but each character some reader takes for a line break is escaped."""
    return json.dumps(entry, ensure_ascii=False).translate(_LINE_BREAK_ESCAPES)


# json.dumps escapes U+0000-U+001F already; these are the other characters str.splitlines()
# (and JavaScript, and some editors) treat as line ends. A lone surrogate (a client's "\ud800")
# cannot be written as UTF-8 at all: escaped, it reads back as the same string.
_LINE_BREAK_ESCAPES = {
    code: f"\\u{code:04x}" for code in (0x85, 0x2028, 0x2029, *range(0xD800, 0xE000))
}


_CHAT_KINDS = (EndpointKind.OAI_CHAT, EndpointKind.ANTHROPIC)


def prompt_text(record: ProxyRecord) -> str | None:
    """The text a prompt file carries for the request: the prompt, or for chat the last user
    message (the whole conversation is kept beside it, as ``messages``)."""
    return request_prompt(record.info)


def well_formed(text: str) -> str:
    """``text`` with each lone surrogate (a client's ``"\\ud800"``, which no UTF-8 file or
    llama-server can hold) replaced by U+FFFD."""
    return _LONE_SURROGATE.sub("\ufffd", text)


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def generation_request(record: ProxyRecord) -> GenerationRequest | None:
    """The request as spectui's own model states it (None when it has no text prompt)."""
    text = prompt_text(record)
    if not text:
        return None
    text = well_formed(text)
    info = record.info
    fields: dict[str, object] = {
        key: info.sampling[key]
        for key in ("temperature", "seed", "top_k", "top_p", "cache_prompt")
        if key in info.sampling
    }
    fields["chat"] = info.kind in _CHAT_KINDS
    if info.n_predict:
        fields["n_predict"] = info.n_predict
    try:
        return GenerationRequest.model_validate({"prompt": text, **fields})
    except ValidationError:
        return GenerationRequest(prompt=text, chat=info.kind in _CHAT_KINDS)


class WorkloadRecorder:
    """A `ProxyListener` writing session files and the workload prompt file."""

    def __init__(
        self,
        folder: Path,
        server: ServerInfo,
        *,
        flags: Sequence[str] = (),
        secrets: Sequence[str] = (),
    ) -> None:
        self.folder = folder
        self.server = server
        self._flags = list(flags)
        self._secrets = [s for s in secrets if s]
        self.paths: list[Path] = []
        """Session files written, oldest first."""
        self.problem: str | None = None
        """The last thing that could not be written."""
        self.warning = prepare_folder(folder)
        """Why the folder is not private (it existed with a wider mode), or None."""
        self.workload = folder / WORKLOAD
        self._first_t0: float | None = None
        self._arrivals: dict[int, float] = {}
        # Lines wait here until every request that arrived before theirs has ended, so the
        # workload lists requests in arrival order (its arrival_s sorted) though they end in any
        # order. Bounded by the requests in flight (the proxy's max_concurrency).
        self._waiting: deque[int] = deque()
        self._ready: dict[int, str | None] = {}

    def request_started(self, live: LiveRequest) -> None:
        """Note when it arrived (relative to the first request recorded) and its place."""
        if self._first_t0 is None:
            self._first_t0 = live.t0
        self._arrivals[live.info.id] = live.t0 - self._first_t0
        self._waiting.append(live.info.id)

    def request_finished(self, live: LiveRequest, record: ProxyRecord) -> None:
        """Append the request to the workload (in arrival order); write its session when it
        was attributed."""
        request = generation_request(record)
        line = None if request is None else self._workload_line(record, request)
        self._release(record.info.id, line)
        attributed = record.metrics is not None and record.status is not RequestStatus.ERROR
        if request is not None and attributed:
            self._write_session(live, record, request)

    def _release(self, request_id: int, line: str | None) -> None:
        if request_id not in self._arrivals:  # never seen starting: nothing to wait for
            if line is not None:
                self._append_lines([line])
            return
        self._ready[request_id] = line
        lines = []
        while self._waiting and self._waiting[0] in self._ready:
            done = self._waiting.popleft()
            del self._arrivals[done]
            ready = self._ready.pop(done)
            if ready is not None:
                lines.append(ready)
        self._append_lines(lines)

    def _workload_line(self, record: ProxyRecord, request: GenerationRequest) -> str:
        info = record.info
        entry: dict[str, object] = {
            "key": f"r{info.id}-{info.started:%Y%m%d%H%M%S}",
            "text": request.prompt,
            "n_predict": request.n_predict,
            "endpoint": info.endpoint,
            "stream": info.streamed,
            "sampling": info.sampling,
        }
        arrival = self._arrivals.get(info.id)
        if arrival is not None:
            entry["arrival_s"] = round(arrival, 6)
        if info.messages is not None:
            entry["messages"] = info.messages
        line = jsonl_line(entry)
        for secret in self._secrets:
            line = line.replace(secret, "[redacted]")
        return line

    def _append_lines(self, lines: list[str]) -> None:
        if not lines:
            return
        try:
            with os.fdopen(open_append(self.workload), "a", encoding="utf-8") as file:
                file.write("".join(line + "\n" for line in lines))
        except OSError as error:
            self.problem = f"cannot append to {self.workload}: {error.strerror}"

    def _write_session(
        self, live: LiveRequest, record: ProxyRecord, request: GenerationRequest
    ) -> None:
        header = header_for(self.server, request, flags=self._flags, label=f"r{record.info.id}")
        path = session_path(self.folder, header.label, header.server.spec, datetime.now(UTC))
        try:
            writer = SessionWriter.open(path, header, secrets=self._secrets, unique=True)
        except SessionError as error:
            self.problem = str(error)
            return
        try:
            for event in live.events:
                writer.write(event)
            assert record.metrics is not None
            writer.write(
                SummaryEvent(
                    t=(record.metrics.total_ms or 0) / 1000,
                    metrics=record.metrics,
                    stop_reason=record.stop_reason,
                    server_timings=record.server_timings,
                    text=record.text,
                )
            )
        finally:
            writer.close()
        if writer.problem:
            self.problem = writer.problem
        self.paths.append(writer.path)
