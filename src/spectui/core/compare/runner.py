"""Run a comparison: one server, restarted per config, runs in alternating rounds.

`CompareRunner` drives an `Engine` through the plan's schedule (see `compare_models`): before each
config's block of runs it restarts the server with that config (`switch_spec`: the old server is
gone before the new one starts, so two are never loaded at once), runs every prompt, checks each
response, and rewrites the results document after every run. It reports progress as typed
events, so the CLI's live table and the TUI's screen draw the same thing.

Python checkers are code: they run only with ``trust_code`` (the plan came from a prompt file
the user named, or they said so); otherwise those checks are recorded as 'skipped'.

A config whose server cannot start is recorded as failed (its later runs too, without retrying)
while the other configs continue. Cancelling the iteration (Ctrl-C) loses only the run in flight;
`--resume` continues from the document.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from spectui.core.compare.checkers import CheckResult, run_checker
from spectui.core.compare.divergence import Answer, ProbeError, Prober, explained, pending
from spectui.core.compare.models import (
    CompareConfig,
    CompareJob,
    ComparePlan,
    CompareSessionInfo,
    RunRecord,
    ServerStart,
    round_name,
)
from spectui.core.compare.store import (
    CompareDocument,
    ResultLock,
    dump_document,
    finished_seqs,
    write_atomic,
)
from spectui.core.compare.textdiff import token_ends
from spectui.core.engine.base import Engine
from spectui.core.errors import SpectuiError
from spectui.core.events import (
    ErrorEvent,
    RunMetrics,
    ServerState,
    ServerStateEvent,
    SummaryEvent,
    TokenEvent,
)


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
        return f"{round_name(job)} · {plan.label(job.config)} · {job.prompt}"
    return None


class CompareRunner:
    """Runs the pending part of a comparison document's plan on ``engine``."""

    def __init__(
        self,
        engine: Engine,
        document: CompareDocument,
        *,
        outputs: Sequence[Path] = (),
        on_save: Callable[[CompareDocument], None] | None = None,
        trust_code: bool = False,
        running: CompareConfig | None = None,
        new_session: bool = True,
        probe: Prober | None = None,
    ) -> None:
        """``running``: the config ``engine``'s server already runs (a racing tune hands one
        engine from round to round); ``new_session``: this invocation is a new session (False
        for later rounds of the same one)."""
        self.engine = engine
        self.trust_code = trust_code
        """Whether the plan's Python checkers may run (else their checks are 'skipped')."""
        self.document = document
        """The document so far (rewritten after every run)."""
        self.plan = document.plan
        self.outputs = list(outputs)
        """Files the document is written to after every run."""
        self._on_save = on_save
        self.records: list[RunRecord] = list(document.runs)
        self.starts: list[ServerStart] = list(document.server_starts)
        self.sessions: list[CompareSessionInfo] = list(document.sessions)
        done = finished_seqs(document)
        self.jobs = self.plan.jobs()
        self.pending = [job for job in self.jobs if job.seq not in done]
        """Runs still to do, in schedule order."""
        self._started = running is not None
        self._current: CompareConfig | None = running
        """The config the server runs now (None: stopped, failed or died)."""
        self._last: CompareConfig | None = running
        """The config of the latest start attempt."""
        self._new_session = new_session
        self._died = False
        """The server died during the latest run."""
        self._broken: dict[str, str] = {}
        """Configs the server could not start with -> why (their runs are recorded as failed)."""
        self._prober = probe
        """Asks the baseline's server for its candidates where an answer changed (None: no
        probes; changed answers then stay unexplained, and count as divergent)."""

    @property
    def current(self) -> CompareConfig | None:
        """The config the server runs now (None: none is running)."""
        return self._current

    @property
    def total(self) -> int:
        """Runs planned in all."""
        return len(self.jobs)

    @property
    def done(self) -> int:
        """Runs recorded."""
        return len(self.records)

    def save(self) -> CompareDocument:
        """Rewrite the document (atomically) with every record so far."""
        self.document = self.document.updated(self.records, self.starts, self.sessions)
        text = dump_document(self.document)
        for path in self.outputs:
            write_atomic(path, text)
        if self._on_save is not None:
            self._on_save(self.document)
        return self.document

    async def run(self) -> AsyncGenerator[CompareEvent, None]:
        """Run what is pending; events as it goes. Close the iterator to stop after a run.

        The output files stay locked meanwhile: a second comparison on them is refused.
        """
        with contextlib.ExitStack() as locks:
            for path in self.outputs:
                locks.enter_context(ResultLock(path))
            async for event in self._run_pending():
                yield event

    async def _run_pending(self) -> AsyncIterator[CompareEvent]:
        yield CompareStarted(total=self.total, done=self.done)
        if self.pending and (self._new_session or not self.sessions):
            self.sessions.append(
                CompareSessionInfo(started_at=datetime.now(UTC), first_seq=self.pending[0].seq)
            )
        session = max(len(self.sessions) - 1, 0)
        self.save()
        for job in list(self.pending):
            config = self.plan.config(job.config)
            if job.config not in self._broken and (
                self._current is None or self._current.name != job.config
            ):
                if self._current is not None and self._current.is_baseline:
                    await self._probe_divergences()  # the baseline's server, before it goes
                async for event in self._switch(config, job):
                    yield event
            yield RunStarting(job=job)
            if job.config in self._broken:
                record: RunRecord | None = _failed(job, session, self._broken[job.config])
            else:
                record, self._died = await self._run(job, session)
                if self._died:
                    self._current = None  # the next run restarts it
            if record is None:
                return  # the run was cancelled under us (the engine is closing): stop here
            self.records.append(record)
            self.pending.remove(job)
            document = self.save()
            yield RunFinished(record=document.runs[-1], done=self.done, total=self.total)
        async for event in self._probe_at_end():
            yield event
        yield CompareFinished(document=self.save())

    async def _probe_at_end(self) -> AsyncIterator[CompareEvent]:
        """Probe what is still unexplained, on the baseline's server (restarted if need be)."""
        if self._prober is None:
            return
        self.records = explained(self.plan, self.records, {})  # earlier probes' answers
        left = pending(self.plan, self.records)
        if not left:
            return
        baseline = self.plan.baseline
        if self._current is None or self._current.name != baseline.name:
            after = CompareJob(
                seq=self.total, round=self.plan.reps, config=baseline.name, prompt="", segment=-1
            )
            async for event in self._switch(baseline, after, reason="divergence probes"):
                yield event
        if self._current is not None and self._current.is_baseline:
            await self._probe_divergences()
        else:
            why = "the baseline's server did not start for the probe"
            self.records = explained(self.plan, self.records, {r.key: why for r in left})
        self.save()

    async def _probe_divergences(self) -> None:
        """Fill in the baseline's candidates at each unexplained divergence (untimed, between
        runs; the server runs the baseline config)."""
        if self._prober is None:
            return
        answers: dict[tuple[str, str, bool], Answer] = {}
        for request in pending(self.plan, self.records):
            try:
                answers[request.key] = await self._prober.top_candidates(request)
            except ProbeError as error:
                answers[request.key] = str(error)
        self.records = explained(self.plan, self.records, answers)

    async def _switch(
        self, config: CompareConfig, job: CompareJob, *, reason: str = ""
    ) -> AsyncIterator[CompareEvent]:
        """(Re)start the server with ``config``; on failure mark the config broken."""
        if reason:
            pass
        elif not self._started:
            reason = "first start" if not self.records else "resumed"
        elif self._died:
            reason = "server exited during a run"
        elif self._last is not None and self._last.name == config.name:
            reason = "retry"
        else:
            reason = f"switch from {self._last.name if self._last else '?'}"
        self._last, self._died = config, False
        round_ = max(job.round, 1)
        yield ServerStatus(
            config=config.name, round=round_, state=ServerState.RESTARTING, detail=reason
        )
        began = time.monotonic()
        ok, detail, tail = False, "the server did not become ready", []
        try:
            if not self._started and self.engine.info.spec == config.spec:
                states = self.engine.start()
            else:
                states = self.engine.switch_spec(config.spec)
            self._started = True
            async for event in states:
                if not isinstance(event, ServerStateEvent):
                    continue
                if event.state is ServerState.READY:
                    ok, detail = True, ""
                elif event.state is ServerState.FAILED:
                    ok, detail, tail = False, event.detail, event.log_tail
                yield ServerStatus(
                    config=config.name, round=round_, state=event.state, detail=event.detail
                )
        except SpectuiError as error:
            ok, detail = False, str(error)
        self.starts.append(
            ServerStart(
                before_seq=job.seq,
                round=round_,
                config=config.name,
                reason=reason,
                ok=ok,
                detail=detail,
                seconds=round(time.monotonic() - began, 3),
            )
        )
        if ok:
            self._current = config
            return
        self._current = None
        self._broken[config.name] = f"the server failed to start with this config: {detail}"
        yield ConfigFailed(config=config.name, round=round_, detail=detail, log_tail=tail)

    async def _run(self, job: CompareJob, session: int) -> tuple[RunRecord | None, bool]:
        """One generation and its check; (record, whether the server died under it).

        The record is None when the run was cancelled (the engine is closing): a cut-short
        answer is not a result, and --resume must run it again.
        """
        prompt = self.plan.prompt(job.prompt)
        texts: list[str] = []
        summary: SummaryEvent | None = None
        error: str | None = None
        died = False
        async for event in self.engine.run(self.plan.request(prompt)):
            if isinstance(event, TokenEvent):
                texts.append(event.text)
            elif isinstance(event, SummaryEvent):
                summary = event
            elif isinstance(event, ErrorEvent):
                error = error or event.message
            elif isinstance(event, ServerStateEvent) and event.state is ServerState.FAILED:
                died = True
                error = error or event.detail
        if summary is not None and summary.stop_reason == "cancelled" and error is None:
            return None, died
        if summary is None or error is not None:
            return _failed(job, session, error or "the run ended without a result"), died
        check: CheckResult | None = None
        if prompt.check is not None:
            check = await run_checker(prompt.check, summary.text, trust_code=self.trust_code)
        m = summary.metrics
        record = RunRecord(
            **_job_fields(job, session),
            # The run's numbers under their own names, from the model (not copied one by one:
            # a field added to RunMetrics and RunRecord arrives by itself).
            **m.model_dump(include=_SHARED_METRICS),
            acceptance=m.acceptance_rate,
            mean_acceptance_length=m.mean_acceptance_length,
            stop_reason=summary.stop_reason,
            text=summary.text,
            token_ends=token_ends(texts),
            token_ids=summary.token_ids if job.config == self.plan.baseline.name else [],
            server_timings=summary.server_timings,
            check_status=None if check is None else check.status,
            check_detail="" if check is None else check.detail,
        )
        return record, died


_SHARED_METRICS = set(RunRecord.model_fields) & set(RunMetrics.model_fields)
"""The run's numbers a record keeps under the names `RunMetrics` gives them."""


def _job_fields(job: CompareJob, session: int) -> dict[str, object]:
    return {
        "seq": job.seq,
        "config": job.config,
        "prompt": job.prompt,
        "round": job.round,
        "warmup": job.warmup,
        "session": session,
        "finished_at": datetime.now(UTC),
    }


def _failed(job: CompareJob, session: int, error: str) -> RunRecord:
    return RunRecord(**_job_fields(job, session), status="failed", error=error)
