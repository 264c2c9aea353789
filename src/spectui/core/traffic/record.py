"""`spectui proxy --record DIR`: each attributed request as a session file `spectui replay`
plays, and every generation request appended to ``DIR/workload.jsonl``, a prompt file that
`compare --prompts` / `tune --prompts` read.

Off by default: prompts and answers can be private. Files are the owner's only (0600), and no
header reaches them (keys travel in headers); any secret the proxy knows is masked anyway.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from spectui.core.engine.base import ServerInfo
from spectui.core.errors import SpectuiError
from spectui.core.events import SummaryEvent
from spectui.core.request import GenerationRequest
from spectui.core.sessions.file import SessionError, SessionWriter
from spectui.core.sessions.recording import header_for, session_path
from spectui.core.traffic.hub import LiveRequest
from spectui.core.traffic.models import EndpointKind, RequestStatus, TrafficRecord

WORKLOAD = "workload.jsonl"
"""The prompt file in the record folder."""


class RecordError(SpectuiError):
    """The record folder cannot be used."""

    title = "Recording problem"
    exit_code = 2


def prepare_folder(folder: Path) -> Path:
    """Create ``folder`` (owner-only) and check it takes files; one clear line if not."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        probe = folder / ".spectui-write-test"
        probe.touch()
        probe.unlink()
    except OSError as error:
        raise RecordError(f"cannot record to {folder}: {error.strerror}") from None
    return folder


_CHAT_KINDS = (EndpointKind.OAI_CHAT, EndpointKind.ANTHROPIC)


def prompt_text(record: TrafficRecord) -> str | None:
    """The text a prompt file carries for the request: the prompt, or for chat the last user
    message (the whole conversation is kept beside it, as ``messages``)."""
    info = record.info
    if info.prompt is not None:
        return info.prompt
    for message in reversed(info.messages or []):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):  # OpenAI / Anthropic content parts
                parts = [p.get("text") for p in content if isinstance(p, dict)]
                return "".join(p for p in parts if isinstance(p, str)) or None
    return None


def generation_request(record: TrafficRecord) -> GenerationRequest | None:
    """The request as spectui's own model states it (None when it has no text prompt)."""
    text = prompt_text(record)
    if not text:
        return None
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
    """A `TrafficListener` writing session files and the workload prompt file."""

    def __init__(
        self, folder: Path, server: ServerInfo, *, flags: Sequence[str] = (),
        secrets: Sequence[str] = (),
    ) -> None:  # fmt: skip
        self.folder = folder
        self.server = server
        self._flags = list(flags)
        self._secrets = [s for s in secrets if s]
        self.paths: list[Path] = []
        """Session files written, oldest first."""
        self.problem: str | None = None
        """The last thing that could not be written."""
        prepare_folder(folder)
        self.workload = folder / WORKLOAD

    def request_started(self, live: LiveRequest) -> None:
        """Nothing to write until it ends."""

    def request_finished(self, live: LiveRequest, record: TrafficRecord) -> None:
        """Append the request to the workload; write its session when it was attributed."""
        request = generation_request(record)
        if request is None:
            return
        self._append_workload(record, request)
        if record.metrics is not None and record.status is not RequestStatus.ERROR:
            self._write_session(live, record, request)

    def _append_workload(self, record: TrafficRecord, request: GenerationRequest) -> None:
        info = record.info
        entry: dict[str, object] = {
            "key": f"r{info.id}-{info.started:%Y%m%d%H%M%S}",
            "text": request.prompt,
            "n_predict": request.n_predict,
            "endpoint": info.endpoint,
            "sampling": info.sampling,
        }
        if info.messages is not None:
            entry["messages"] = info.messages
        line = json.dumps(entry, ensure_ascii=False)
        for secret in self._secrets:
            line = line.replace(secret, "[redacted]")
        try:
            fd = os.open(self.workload, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            with os.fdopen(fd, "a", encoding="utf-8") as file:
                file.write(line + "\n")
        except OSError as error:
            self.problem = f"cannot append to {self.workload}: {error.strerror}"

    def _write_session(
        self, live: LiveRequest, record: TrafficRecord, request: GenerationRequest
    ) -> None:
        header = header_for(self.server, request, flags=self._flags, label=f"r{record.info.id}")
        path = session_path(self.folder, header.label, header.server.spec, datetime.now(UTC))
        try:
            writer = SessionWriter.open(path, header, secrets=self._secrets)
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
        self.paths.append(path)
