"""Typed messages the engine workers post to a run screen's `RunView` (a live server's
operations: to the live screen).

Workers translate `spectui.core.events` into these; widgets never see a raw engine iterator.
They do not bubble: the view or screen they are posted to handles them, nothing above it needs to.
High-rate events arrive batched (`TokensArrived`) or coalesced (`can_replace`), so a fast server
over a slow link costs the UI at most one update per flush interval.
"""

from __future__ import annotations

from textual.message import Message

from spectui.core.events import (
    ErrorEvent,
    MemoryEvent,
    MetricsEvent,
    PromptProgressEvent,
    ServerStateEvent,
    StepEvent,
    SummaryEvent,
    TokenEvent,
)
from spectui.core.request import GenerationRequest


class ServerStateChanged(Message, bubble=False):
    """The server moved to another lifecycle state (never coalesced: every state is shown)."""

    def __init__(self, event: ServerStateEvent) -> None:
        super().__init__()
        self.event = event


class RunStarted(Message, bubble=False):
    """A generation was sent to the server."""

    def __init__(
        self, request: GenerationRequest, label: str, spec_label: str, detail: str | None = None
    ) -> None:
        super().__init__()
        self.request = request
        self.label = label
        """The prompt's label (the answer pane's title)."""
        self.spec_label = spec_label
        self.detail = detail
        """The server bar's detail while the run streams (a followed run: its file), or None."""


class TokensArrived(Message, bubble=False):
    """A batch of tokens and verification steps, in stream order."""

    def __init__(self, tokens: tuple[TokenEvent, ...], steps: tuple[StepEvent, ...]) -> None:
        super().__init__()
        self.tokens = tokens
        self.steps = steps


class MetricsUpdated(Message, bubble=False):
    """The latest metrics snapshot; a newer one replaces an unhandled older one."""

    def __init__(self, event: MetricsEvent) -> None:
        super().__init__()
        self.event = event

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, MetricsUpdated)


class MemorySampled(Message, bubble=False):
    """The latest memory sample of the server; superseded by the next one."""

    def __init__(self, event: MemoryEvent) -> None:
        super().__init__()
        self.event = event

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, MemorySampled)


class PromptProgressed(Message, bubble=False):
    """Prompt processing progress; superseded by the next report."""

    def __init__(self, event: PromptProgressEvent) -> None:
        super().__init__()
        self.event = event

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, PromptProgressed)


class RunEnded(Message, bubble=False):
    """The run's final numbers: it ended, however it ended (limit, end of sequence, stop word,
    stopped by the user, or an error; after an error `RunFailed` comes first and the summary's
    ``stop_reason`` is 'error')."""

    def __init__(self, summary: SummaryEvent) -> None:
        super().__init__()
        self.summary = summary


class RunFailed(Message, bubble=False):
    """The run ended with an error reported by the engine (an event or a raised SpectuiError)."""

    def __init__(self, error: ErrorEvent) -> None:
        super().__init__()
        self.error = error


class RunLeft(Message, bubble=False):
    """A run's stream ended without a summary, and that is no error (a followed session's file:
    the next run began, or the file was cut)."""

    def __init__(self, status: str) -> None:
        super().__init__()
        self.status = status
        """What the panes say about the run."""
