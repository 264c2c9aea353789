"""What a comparison reports as it runs (`CompareRunner`'s events), and its progress line.

The CLI's live table, the TUI's screen and `tune` draw the same events.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from spectui.core.compare.models import CompareJob, ComparePlan
from spectui.core.compare.records import RunRecord, round_name
from spectui.core.compare.store import CompareDocument
from spectui.core.events import ServerState


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True)


class CompareStarted(_Event):
    """The runner begins (or resumes)."""

    type: Literal["started"] = "started"
    total: int
    """Runs planned in all, warm-ups included."""
    done: int
    """Runs already recorded (a resumed comparison)."""


class ServerStatus(_Event):
    """The server is (re)starting for a config, or became ready."""

    type: Literal["server"] = "server"
    config: str
    """The config it runs."""
    round: int
    """The round being opened."""
    state: ServerState
    """Its lifecycle state."""
    detail: str = ""
    """One line about it."""


class ConfigFailed(_Event):
    """The server could not run a config; its runs are recorded as failed."""

    type: Literal["config_failed"] = "config_failed"
    config: str
    """The config."""
    round: int
    """The round it failed in."""
    detail: str
    """Why, in one line."""
    log_tail: list[str] = Field(default_factory=list)
    """The server's last log lines."""


class RunStarting(_Event):
    """A run begins."""

    type: Literal["run_starting"] = "run_starting"
    job: CompareJob
    """Which one."""


class RunFinished(_Event):
    """A run ended and is saved; ``record`` carries its comparison with the baseline."""

    type: Literal["run_finished"] = "run_finished"
    record: RunRecord
    """The run's record, as written."""
    done: int
    """Runs recorded so far, this one included."""
    total: int
    """Runs planned in all."""


class CompareFinished(_Event):
    """Every planned run has a record."""

    type: Literal["finished"] = "finished"
    document: CompareDocument
    """The final document (summary and verdicts included)."""


CompareEvent = Annotated[
    CompareStarted | ServerStatus | ConfigFailed | RunStarting | RunFinished | CompareFinished,
    Field(discriminator="type"),
]
"""Anything the runner reports."""


def progress_line(event: CompareEvent, plan: ComparePlan) -> str | None:
    """The progress line for a server status or a starting run (the CLI and the TUI show it)."""
    if isinstance(event, ServerStatus):
        return f"round {event.round} · {plan.label(event.config)}: server {event.state.value}"
    if isinstance(event, RunStarting):
        job = event.job
        streams = f" · {job.level} streams" if job.level > 1 else ""
        return f"{round_name(job)} · {plan.label(job.config)}{streams} · {job.prompt}"
    return None
