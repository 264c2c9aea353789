"""Session files: one run as JSON Lines — a header, then every engine event with its ``t``.

The writer flushes each line as it is written, so a crash loses at most the line in progress.
The reader is forgiving the other way round: a truncated or damaged file yields every valid event
up to the damage plus one line saying where it stopped; only a missing header or a schema version
this spectui does not know is an error.

Secrets never reach a file: the header keeps no API key by construction, values of secret flags
(``--api-key``, ...) are masked, credentials in a URL are dropped, and the writer also masks any
secret it was given wherever it would appear in a line (a server log tail, a generated text).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from spectui import __version__
from spectui.core.errors import SpectuiError, read_bytes
from spectui.core.events import EngineEvent, SummaryEvent, engine_event_adapter
from spectui.core.files import ensure_private_dir, open_new, open_replace, open_unique
from spectui.core.llama import secrets
from spectui.core.llama.specconfig import SpecConfig
from spectui.core.request import GenerationRequest

SCHEMA_VERSION = 1
"""Version of the session file format this spectui writes and reads."""

REDACTED = "[redacted]"
"""What a secret is replaced with."""

SECRET_FLAGS = secrets.SECRET_FLAGS
"""llama-server flags whose value must never be recorded (others named like one are masked too,
see `spectui.core.llama.secrets`)."""


class SessionError(SpectuiError):
    """A file that cannot be read as a session at all (missing, no header, unknown version)."""

    title = "Session file problem"
    exit_code = 2


class SessionServer(BaseModel):
    """What ran the session: the server, the binary, the model and the spec configuration."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    mode: str = "launched"
    """'launched' or 'attached' (what spectui did), as live."""
    url: str = ""
    """Server URL, without any credentials."""
    binary: str | None = None
    """The llama-server executable."""
    binary_version: str | None = None
    """`llama-server --version` of that binary."""
    model: str | None = None
    """Model path or alias."""
    spec: SpecConfig | None = None
    """Spec configuration in effect (None when unknown, e.g. a remote server)."""
    flags: list[str] = Field(default_factory=list)
    """Launch flags beyond the spec (ctx size, extra llama-server arguments), secrets masked."""

    @property
    def spec_label(self) -> str:
        """Short name of the spec configuration."""
        return self.spec.label if self.spec is not None else "unknown spec"


class SessionHeader(BaseModel):
    """The first line of a session file."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    type: Literal["header"] = "header"
    """Marks the header line."""
    schema_version: int = SCHEMA_VERSION
    """Format version; a reader refuses versions it does not know."""
    spectui_version: str = __version__
    """The spectui that wrote the file."""
    created: datetime = Field(default_factory=lambda: datetime.now(UTC))
    """When the run started (UTC)."""
    label: str = ""
    """What the run was, for titles: the prompt's name, e.g. 'table-row'."""
    server: SessionServer = Field(default_factory=SessionServer)
    """What generated the run."""
    request: GenerationRequest
    """The prompt and the sampling parameters."""

    @property
    def title(self) -> str:
        """'<label> · <spec>' for screen titles."""
        return f"{self.label or 'session'} · {self.server.spec_label}"


def redact_flags(flags: Iterable[str]) -> list[str]:
    """Flags with the values of secret ones masked (``--api-key X`` and ``--api-key=X``)."""
    return secrets.mask_argv(flags, REDACTED)


class SessionWriter:
    """Writes one session: `open` writes the header; `write` appends an event and flushes.

    A write that fails (disk full, file removed) stops the recording and keeps the reason in
    `problem`; it never raises into the run being recorded.
    """

    def __init__(self, path: Path, *, secrets: Sequence[str] = ()) -> None:
        self.path = path
        self._secrets = _secret_forms(secrets)
        self._file: IO[str] | None = None
        self.problem: str | None = None
        """Why recording stopped early, or None."""

    @classmethod
    def open(
        cls,
        path: Path,
        header: SessionHeader,
        *,
        secrets: Sequence[str] = (),
        unique: bool = False,
        replace: bool = False,
    ) -> SessionWriter:
        """Create the file (and its folder) and write the header; SessionError if impossible.

        The file must be new; with ``unique`` a taken name becomes ``-2``, ``-3``, ... (the
        writer's ``path`` says which); with ``replace`` an existing file is rewritten. A symlink
        at the path is refused either way (`spectui.core.files`).
        """
        try:
            # Owner-only: a prompt or an answer may be private even with no key in it.
            ensure_private_dir(path.parent)
            if replace:
                fd = open_replace(path)
            elif unique:
                path, fd = open_unique(path)
            else:
                fd = open_new(path)
        except FileExistsError:
            raise SessionError(f"cannot write session file {path}: it already exists") from None
        except OSError as error:
            raise SessionError(f"cannot write session file {path}: {error.strerror}") from None
        writer = cls(path, secrets=secrets)
        writer._file = os.fdopen(fd, "w", encoding="utf-8")
        writer._line(header.model_dump_json())
        if writer.problem is not None:
            raise SessionError(writer.problem)
        return writer

    @property
    def active(self) -> bool:
        """Whether lines are still being written."""
        return self._file is not None

    def write(self, event: EngineEvent) -> None:
        """Append one event (a no-op once closed or failed)."""
        if self._file is not None:
            self._line(engine_event_adapter.dump_json(event).decode())

    def _line(self, text: str) -> None:
        assert self._file is not None
        for secret, mask in self._secrets:
            text = text.replace(secret, mask)
        try:
            self._file.write(text + "\n")
            self._file.flush()
        except OSError as error:
            self.problem = f"recording to {self.path} stopped: {error.strerror}"
            self.close()

    def close(self) -> None:
        """Stop writing; idempotent."""
        if self._file is not None:
            file, self._file = self._file, None
            try:
                file.close()
            except OSError as error:
                self.problem = self.problem or f"closing {self.path} failed: {error.strerror}"


def _secret_forms(secrets: Sequence[str]) -> list[tuple[str, str]]:
    """Each secret as it may appear in a JSON line: raw and JSON-escaped."""
    forms: list[tuple[str, str]] = []
    for secret in secrets:
        if not secret:
            continue
        for form in {
            secret,
            json.dumps(secret, ensure_ascii=False)[1:-1],
            json.dumps(secret)[1:-1],
        }:
            forms.append((form, REDACTED))
    # Longest first, so a secret that contains another is masked whole.
    return sorted(forms, key=lambda pair: -len(pair[0]))


@dataclass
class Session:
    """A session file as read: its header, its valid events, and where reading stopped."""

    path: Path
    header: SessionHeader
    events: list[EngineEvent] = field(default_factory=list)
    """Every valid event up to the end or the first damaged line."""
    problem: str | None = None
    """Where and why reading stopped before the end of the file, or None."""
    skipped: int = 0
    """Well-formed events of a type this spectui does not know (a newer writer's), left out."""

    @property
    def summary(self) -> SummaryEvent | None:
        """The summary recorded live, if the run got that far."""
        return next((e for e in reversed(self.events) if isinstance(e, SummaryEvent)), None)

    @property
    def name(self) -> str:
        """The file's name, for titles."""
        return self.path.name


def read_session(path: Path) -> Session:
    """Read a session file; SessionError when it has no usable header."""
    raw = read_bytes(path, "session file", SessionError)
    lines = raw.split(b"\n")
    header = parse_header(path, lines[0])
    session = Session(path, header)
    ends_cleanly = raw.endswith(b"\n")
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        try:
            session.events.append(engine_event_adapter.validate_json(line))
        except ValidationError as error:
            if error.errors()[0]["type"] == "union_tag_invalid":
                session.skipped += 1
                continue
            last = number == len(lines) and not ends_cleanly
            why = "cut off (the recording was interrupted)" if last else _why(error)
            session.problem = (
                f"{path.name}: stopped at line {number}: {why}; "
                f"kept the {len(session.events)} events before it"
            )
            break
    return session


def parse_header(name: str | Path, line: bytes) -> SessionHeader:
    """A session file's first line as its header; SessionError (naming the file as `name`) else."""
    try:
        raw = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raw = None
    if not isinstance(raw, dict) or raw.get("type") != "header":
        raise SessionError(f"{name} is not a spectui session file (no header on its first line)")
    version = raw.get("schema_version")
    if version != SCHEMA_VERSION:
        raise SessionError(
            f"{name} has session schema version {version!r}; this spectui ({__version__}) "
            f"reads version {SCHEMA_VERSION} only"
        )
    try:
        return SessionHeader.model_validate(raw)
    except ValidationError as error:
        raise SessionError(f"{name}: the header is damaged: {_why(error)}") from None


def _why(error: ValidationError) -> str:
    first = error.errors()[0]
    if first["type"] == "json_invalid":
        return "not valid JSON"
    where = ".".join(str(p) for p in first["loc"])
    return f"{where}: {first['msg']}" if where else str(first["msg"])
