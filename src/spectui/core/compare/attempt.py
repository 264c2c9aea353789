"""One run of a comparison: its generation on the engine, turned into a `RunRecord`, and the
prompt's checker on the answer (apart: a concurrent block checks after its streams end)."""

from __future__ import annotations

from datetime import UTC, datetime

from spectui.core.compare.checkers import run_checker
from spectui.core.compare.models import CompareJob, ComparePlan
from spectui.core.compare.outcomes import RunStatus
from spectui.core.compare.records import RunRecord
from spectui.core.compare.textdiff import token_ends
from spectui.core.engine.base import Engine
from spectui.core.events import (
    ErrorEvent,
    PromptProgressEvent,
    RunMetrics,
    ServerState,
    ServerStateEvent,
    SummaryEvent,
    TokenEvent,
)

_SHARED_METRICS = set(RunRecord.model_fields) & set(RunMetrics.model_fields)
"""The run's numbers a record keeps under the names `RunMetrics` gives them."""


async def run_once(
    engine: Engine, plan: ComparePlan, job: CompareJob, session: int, *, waited: bool = False
) -> tuple[RunRecord | None, bool]:
    """One generation of ``job`` on ``engine``, unchecked; (record, whether the server died
    under it). ``waited``: every server slot was busy when it was sent.

    The record is None when the run was cancelled (the engine is closing): a cut-short answer
    is not a result, and --resume must run it again.
    """
    prompt = plan.prompt(job.prompt)
    texts: list[str] = []
    summary: SummaryEvent | None = None
    error: str | None = None
    died = False
    queue_ms: float | None = None
    sent_at = datetime.now(UTC)
    async for event in engine.run(plan.request(prompt)):
        if isinstance(event, TokenEvent):
            texts.append(event.text)
        elif isinstance(event, PromptProgressEvent):
            # The server's first progress chunk: a slot has begun this prompt.
            queue_ms = event.t * 1000 if queue_ms is None else queue_ms
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
        failed = failed_record(job, session, error or "the run ended without a result")
        return failed.model_copy(update={"sent_at": sent_at}), died
    m = summary.metrics
    record = RunRecord(
        **job_fields(job, session),
        sent_at=sent_at,
        queue_ms=queue_ms,
        waited_for_slot=waited,
        # The run's numbers under their own names, from the model (not copied one by one: a
        # field added to RunMetrics and RunRecord arrives by itself).
        **m.model_dump(include=_SHARED_METRICS),
        acceptance=m.acceptance_rate,
        mean_acceptance_length=m.mean_acceptance_length,
        stop_reason=summary.stop_reason,
        text=summary.text,
        token_ends=token_ends(texts),
        token_ids=summary.token_ids if job.config == plan.baseline.name else [],
        server_timings=summary.server_timings,
    )
    return record, died


async def checked(plan: ComparePlan, record: RunRecord, *, trust_code: bool) -> RunRecord:
    """``record`` with its prompt's checker outcome (unchanged: no checker, or a failed run).
    ``trust_code``: Python checkers may run (else they are 'skipped')."""
    prompt = plan.prompt(record.prompt)
    if prompt.check is None or not record.ok:
        return record
    result = await run_checker(prompt.check, record.text, trust_code=trust_code)
    return record.model_copy(update={"check_status": result.status, "check_detail": result.detail})


def job_fields(job: CompareJob, session: int) -> dict[str, object]:
    """A record's fields that come from its job (and when it ended)."""
    return {
        "seq": job.seq,
        "config": job.config,
        "prompt": job.prompt,
        "round": job.round,
        "warmup": job.warmup,
        "level": job.level,
        "client": job.client,
        "session": session,
        "finished_at": datetime.now(UTC),
    }


def failed_record(job: CompareJob, session: int, error: str) -> RunRecord:
    """The record of a run that gave no result."""
    return RunRecord(**job_fields(job, session), status=RunStatus.FAILED, error=error)
