"""What a comparison records: each run's numbers, text and comparison with the baseline, each
server (re)start, and each invocation that ran part of it (the plan is `models`)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, computed_field

from spectui.core.compare.models import CompareJob
from spectui.core.compare.outcomes import RunStatus
from spectui.core.compare.textdiff import Divergence


class RunRecord(BaseModel):
    """One finished run: its numbers, its text, and how it compares with the baseline."""

    model_config = ConfigDict(frozen=True)

    seq: int
    """Position in the schedule."""
    config: str
    """Config name."""
    prompt: str
    """Prompt key."""
    round: int
    """1..reps; 0 for a warm-up."""
    warmup: bool = False
    """Uncounted warm-up run."""
    level: int = 1
    """Concurrent client streams of the block it ran in (1: one at a time)."""
    client: int = 0
    """Which of the level's clients sent it."""
    sent_at: datetime | None = None
    """Wall-clock time the request was sent (UTC): with ``finished_at``, a block's span."""
    queue_ms: float | None = None
    """Request sent -> the server began its prompt (its first prompt-progress chunk): the HTTP
    round trip, the batch in flight, and any wait for a free slot."""
    waited_for_slot: bool = False
    """Sent while every server slot was busy with another of the comparison's requests, so it
    queued until one freed (never, when the server has a slot per stream of the level)."""
    session: int = 0
    """Which invocation ran it (0, then 1 after the first --resume, ...)."""
    status: RunStatus = RunStatus.OK
    """'failed': no usable result (see error)."""
    error: str | None = None
    """Why it failed."""
    finished_at: datetime | None = None
    """Wall-clock end of the run (UTC)."""
    ttft_ms: float | None = None
    """Request sent -> first token (client clock)."""
    total_ms: float | None = None
    """Request sent -> last token."""
    tokens: int = 0
    """Tokens generated."""
    tokens_per_second: float | None = None
    """Decode rate: tokens after the first / time from first to last token."""
    predicted_tokens_per_second: float | None = None
    """The decode rate the comparison's cost model predicts from this run's steps (`costmodel`)."""
    prompt_tokens: int | None = None
    """Prompt tokens the server processed."""
    prompt_tokens_per_second: float | None = None
    """The server's prompt processing rate."""
    drafted: int = 0
    """Draft tokens proposed."""
    accepted: int = 0
    """Draft tokens accepted."""
    steps: int = 0
    """Verification steps."""
    acceptance: float | None = None
    """accepted / drafted."""
    mean_acceptance_length: float | None = None
    """Tokens per verification step (1 + accepted / steps)."""
    accepted_per_position: list[int] = Field(default_factory=list)
    """Steps that accepted a draft token at each position (those with a known split)."""
    attribution_anomalies: int = 0
    """Times the server's counters did not fit the attribution model (see `RunMetrics`)."""
    steps_unsplit: int = 0
    """Steps whose accepted drafts could not be placed by position (`RunMetrics`)."""
    accepted_unplaced: int = 0
    """Their accepted drafts: ``sum(accepted_per_position) + accepted_unplaced == accepted``."""
    steps_maybe_fewer: int = 0
    """How many fewer steps than ``steps`` the server's counters allow (`RunMetrics`)."""
    steps_maybe_more: int = 0
    """How many more steps than ``steps`` the server's counters allow."""
    origin_unknown_tokens: int = 0
    """Tokens whose origin (draft or target) the stream could not tell."""
    peak_rss_bytes: int | None = None
    """Highest RSS of the server during the run."""
    peak_rss_minus_shared_bytes: int | None = None
    """Highest RSS minus shared (mmap'd weights excluded) during the run."""
    peak_gpu_bytes: int | None = None
    """Highest GPU memory of the server (None without NVML)."""
    client_cpu_percent: float | None = None
    """spectui's own CPU during the run (100 = one core): what measuring cost."""
    server_cpu_percent: float | None = None
    """The server's CPU during the run."""
    stop_reason: str = ""
    """'limit', 'eos', 'word', ..."""
    text: str = ""
    """The full response."""
    token_ids: list[int] = Field(default_factory=list)
    """The baseline's runs only: the response's token ids, which `tune`'s drafter replicas
    replay (`tune.drafters`); empty for other configs and for chat."""
    token_ends: list[int] = Field(default_factory=list)
    """Cumulative end offset of each token's text in ``text`` (for token positions in diffs)."""
    server_timings: dict[str, float] = Field(default_factory=dict)
    """The server's own final timings."""
    check_status: str | None = None
    """Checker outcome: passed, failed, error, timeout; None when the prompt has no checker."""
    check_detail: str = ""
    """Why the checker did not pass."""
    identical_to_baseline: bool | None = None
    """Same text as the baseline's run of this prompt (None: not comparable, or the reference)."""
    divergence: Divergence | None = None
    """Where the text first differs from the baseline's."""

    @property
    def ok(self) -> bool:
        """Whether the run produced a usable result."""
        return self.status == RunStatus.OK

    @computed_field  # type: ignore[prop-decorator]
    @property
    def check_passed(self) -> bool | None:
        """Checker verdict (None without a checker, or when it was skipped: not run is not
        failed)."""
        return None if self.check_status in (None, "skipped") else self.check_status == "passed"


def round_name(run: CompareJob | RunRecord) -> str:
    """'warm-up' or 'round 2': which round a planned or finished run belongs to."""
    return "warm-up" if run.warmup else f"round {run.round}"


class ServerStart(BaseModel):
    """One (re)start of the server, and why it was needed."""

    model_config = ConfigDict(frozen=True)

    before_seq: int
    """The first run that uses this start."""
    round: int
    """The round it opens (1..reps)."""
    config: str
    """The config it was started with."""
    reason: str
    """Why: 'first start', 'switch from X', 'server exited', 'resumed'."""
    ok: bool = True
    """Whether the server became ready."""
    detail: str = ""
    """Why it failed, if it did."""
    seconds: float | None = None
    """How long the (re)start took."""


class CompareSessionInfo(BaseModel):
    """One invocation that ran part of the comparison."""

    model_config = ConfigDict(frozen=True)

    started_at: datetime
    """When it began (UTC)."""
    first_seq: int
    """The first run it executed (runs before came from earlier sessions)."""
