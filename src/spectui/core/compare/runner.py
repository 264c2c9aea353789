"""Run a comparison: one server, restarted per config, runs in alternating rounds.

`CompareRunner` drives an `Engine` through the plan's schedule (see `models`): before each
config's block of runs it restarts the server with that config (`switch_spec`: the old server is
gone before the new one starts, so two are never loaded at once), runs every prompt, checks each
response, and rewrites the results document after every run. It reports progress as typed
events, so the CLI's live table and the TUI's screen draw the same thing.

Python checkers are code: they run only with ``trust_code`` (the plan came from a prompt file
the user named, or they said so); otherwise those checks are recorded as 'skipped'.

A config whose server cannot start is recorded as failed (its later runs too, without retrying)
while the other configs continue. Cancelling the iteration (Ctrl-C) loses only the run in flight;
`--resume` continues from the document.

A concurrency level above 1 runs as a block (`block`): its clients stream at once, each
sending its prompts one after another (or, replaying recorded arrivals, open loop at their
recorded offsets); their checkers run after the block. A block is kept whole or not at all:
cancelling it loses the block, and --resume runs it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from spectui.core.compare.attempt import checked, failed_record, run_once
from spectui.core.compare.block import BlockDone, Outcome, run_block
from spectui.core.compare.divergence import Answer, ProbeError, Prober, explained, pending
from spectui.core.compare.models import CompareConfig, CompareJob
from spectui.core.compare.progress import (
    CompareEvent,
    CompareFinished,
    CompareStarted,
    ConfigFailed,
    RunFinished,
    RunStarting,
    ServerStatus,
    progress_line,
)
from spectui.core.compare.records import CompareSessionInfo, RunRecord, ServerStart
from spectui.core.compare.store import (
    CompareDocument,
    ResultLock,
    dump_document,
    finished_seqs,
    write_atomic,
)
from spectui.core.engine.base import Engine
from spectui.core.errors import SpectuiError
from spectui.core.events import ServerState, ServerStateEvent


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
        slot_count: Callable[[], Awaitable[int | None]] | None = None,
    ) -> None:
        """``running``: the config ``engine``'s server already runs (a racing tune hands one
        engine from round to round); ``new_session``: this invocation is a new session (False
        for later rounds of the same one); ``slot_count``: reads the running server's slots
        (``/slots``) after each start of a concurrent plan (None: trust the launch)."""
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
        self._slot_count = slot_count
        self._slots: int | None = None
        """The running server's slot count, as read after its start (None: not read)."""
        self._prober = probe
        """Asks the baseline's server for its candidates where an answer changed (None: no
        probes; changed answers then stay unexplained, and count as divergent)."""
        self.clock: Callable[[], float] = time.monotonic
        """The clock and sleep of an arrivals replay's schedule (tests drive a fake one)."""
        self.sleep: Callable[[float], Awaitable[object]] = asyncio.sleep

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
            async with contextlib.aclosing(self._run_pending()) as events:
                async for event in events:
                    yield event

    async def _run_pending(self) -> AsyncGenerator[CompareEvent, None]:
        yield CompareStarted(total=self.total, done=self.done)
        if self.pending and (self._new_session or not self.sessions):
            self.sessions.append(
                CompareSessionInfo(started_at=datetime.now(UTC), first_seq=self.pending[0].seq)
            )
        session = max(len(self.sessions) - 1, 0)
        self.save()
        for _, group in itertools.groupby(list(self.pending), key=_block_key):
            block = list(group)
            job = block[0]
            async for event in self._ensure_server(job):
                yield event
            concurrent = job.level > 1 or (self.plan.arrivals is not None and not job.warmup)
            if concurrent and job.config not in self._broken:
                # Closed with this generator: a block's streams never outlive the comparison.
                async with contextlib.aclosing(self._run_block(block, session)) as items:
                    async for item in items:
                        if isinstance(item, _Cancelled):
                            return  # cancelled under us: the block is not a result
                        yield item
                continue
            for job in block:
                async for event in self._ensure_server(job):  # (again after a death)
                    yield event
                yield RunStarting(job=job)
                if job.config in self._broken:
                    record: RunRecord | None = failed_record(job, session, self._broken[job.config])
                else:
                    record, self._died = await self._run(job, session)
                    if self._died:
                        self._current = None  # the next run restarts it
                if record is None:
                    return  # the run was cancelled under us (the engine is closing): stop here
                yield self._keep(record)
        async for event in self._probe_at_end():
            yield event
        yield CompareFinished(document=self.save())

    async def _ensure_server(self, job: CompareJob) -> AsyncIterator[CompareEvent]:
        """Start the server with ``job``'s config unless it runs it (or cannot)."""
        if job.config in self._broken or (
            self._current is not None and self._current.name == job.config
        ):
            return
        if self._current is not None and self._current.is_baseline:
            await self._probe_divergences()  # the baseline's server, before it goes
        async for event in self._switch(self.plan.config(job.config), job):
            yield event

    def _keep(self, record: RunRecord) -> RunFinished:
        """Record a finished run and save the document."""
        self.records.append(record)
        self.pending = [job for job in self.pending if job.seq != record.seq]
        document = self.save()
        return RunFinished(record=document.runs[-1], done=self.done, total=self.total)

    async def _run_block(
        self, block: list[CompareJob], session: int
    ) -> AsyncGenerator[CompareEvent | _Cancelled, None]:
        """A concurrency level's block (`block.run_block`), its checkers after it. Yields
        RunStarting as runs begin, then RunFinished for each, in schedule order; `_Cancelled`
        (and nothing is kept) when a run was cancelled under it (the engine is closing)."""

        async def run(job: CompareJob, waited: bool) -> Outcome:
            return await self._run(job, session, check=False, waited=waited)

        done: dict[int, Outcome] = {}
        events = run_block(
            block, self.plan, run, slots=self._slots, clock=self.clock, sleep=self.sleep
        )
        async with contextlib.aclosing(events) as items:
            async for item in items:
                if isinstance(item, BlockDone):
                    done = item.outcomes
                else:
                    yield item
        if any(record is None for record, _ in done.values()):
            yield _Cancelled()
            return
        if any(died for _, died in done.values()):
            self._died, self._current = True, None  # the next block restarts it
        for job in block:
            record = done[job.seq][0]
            assert record is not None  # (every job ran: none was cancelled)
            yield self._keep(await self._checked(record))

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
        if ok and (few := await self._too_few_slots()) is not None:
            ok, detail = False, few
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

    async def _too_few_slots(self) -> str | None:
        """Why the server just started cannot run the plan's largest level (None: it can, or
        the plan runs one stream at a time)."""
        self._slots = None
        if not (self.plan.concurrent or self.plan.arrivals) or self._slot_count is None:
            return None
        self._slots = await self._slot_count()
        if self._slots is None or self._slots >= self.plan.slots:
            return None
        return (
            f"the server has {self._slots} slot{'s' if self._slots != 1 else ''}, "
            f"fewer than the {self.plan.slots} concurrent streams asked"
        )

    async def _run(
        self, job: CompareJob, session: int, *, check: bool = True, waited: bool = False
    ) -> tuple[RunRecord | None, bool]:
        """One generation and (``check``) its check; see `attempt.run_once`."""
        record, died = await run_once(self.engine, self.plan, job, session, waited=waited)
        if check and record is not None:
            record = await self._checked(record)
        return record, died

    async def _checked(self, record: RunRecord) -> RunRecord:
        """``record`` with its prompt's checker outcome (`attempt.checked`)."""
        return await checked(self.plan, record, trust_code=self.trust_code)


class _Cancelled:
    """A block's marker: one of its runs was cancelled under it (the engine is closing)."""


def _block_key(job: CompareJob) -> tuple[int, str, int, bool]:
    """The runs that go together: a level's block of a config's round (a warm-up alone)."""
    return (*job.block, job.warmup)


__all__ = [
    "CompareEvent",
    "CompareFinished",
    "CompareRunner",
    "CompareStarted",
    "ConfigFailed",
    "RunFinished",
    "RunStarting",
    "ServerStatus",
    "progress_line",
]
