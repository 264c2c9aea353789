"""Numbers over many requests: acceptance, mean acceptance length, per-position acceptance and
tokens/s over the last N requests or the last minutes (the proxy screen's aggregate pane)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict, Field

from spectui.core.content import ContentClass, LengthBucket
from spectui.core.proxy.models import ProxyRecord


class Aggregate(BaseModel):
    """What a set of finished requests adds up to (attributed ones for steps and positions)."""

    model_config = ConfigDict(frozen=True)

    requests: int = 0
    """Requests counted."""
    attributed: int = 0
    """Of those, attributed token by token."""
    tokens: int = 0
    """Tokens generated."""
    drafted: int = 0
    """Draft tokens proposed."""
    accepted: int = 0
    """Draft tokens accepted."""
    steps: int = 0
    """Verification steps (attributed requests)."""
    accepted_per_position: list[int] = Field(default_factory=list)
    """Steps that accepted a token at each position (attributed requests; steps whose split is
    known, see `RunMetrics.steps_unsplit`)."""
    steps_unsplit: int = 0
    """Of ``steps``, those whose accepted drafts could not be placed by position."""
    decode_seconds: float = 0.0
    """Sum of first-to-last-token times (attributed requests)."""
    decode_tokens: int = 0
    """Tokens after the first, over the same requests."""

    @property
    def acceptance_rate(self) -> float | None:
        """Accepted / drafted."""
        return self.accepted / self.drafted if self.drafted else None

    @property
    def mean_acceptance_length(self) -> float | None:
        """1 + accepted / steps, over attributed requests."""
        return 1 + self.accepted_attributed / self.steps if self.steps else None

    accepted_attributed: int = 0
    """Accepted draft tokens of the attributed requests (for the mean length)."""

    @property
    def tokens_per_second(self) -> float | None:
        """Decode rate across requests: tokens after the first / time decoding."""
        return self.decode_tokens / self.decode_seconds if self.decode_seconds > 0 else None

    @property
    def position_rates(self) -> list[float]:
        """Share of the steps with a known split that accepted a token at each position."""
        split = self.steps - self.steps_unsplit
        return [n / split for n in self.accepted_per_position] if split > 0 else []


def aggregate(records: Iterable[ProxyRecord]) -> Aggregate:
    """Add ``records`` up."""
    fields: dict[str, int | float] = dict.fromkeys(
        (
            "requests",
            "attributed",
            "tokens",
            "drafted",
            "accepted",
            "steps",
            "steps_unsplit",
            "decode_tokens",
            "accepted_attributed",
        ),
        0,
    )
    fields["decode_seconds"] = 0.0
    positions: list[int] = []
    for record in records:
        fields["requests"] += 1
        fields["tokens"] += record.tokens or 0
        fields["drafted"] += record.drafted or 0
        fields["accepted"] += record.accepted or 0
        metrics = record.metrics
        if metrics is None:
            continue
        fields["attributed"] += 1
        fields["steps"] += metrics.steps
        fields["steps_unsplit"] += metrics.steps_unsplit
        fields["accepted_attributed"] += metrics.accepted
        missing = len(metrics.accepted_per_position) - len(positions)
        positions.extend([0] * max(missing, 0))
        for index, count in enumerate(metrics.accepted_per_position):
            positions[index] += count
        rate = metrics.tokens_per_second
        if rate and metrics.tokens > 1:
            fields["decode_tokens"] += metrics.tokens - 1
            fields["decode_seconds"] += (metrics.tokens - 1) / rate
    return Aggregate.model_validate({**fields, "accepted_per_position": positions})


def last_requests(records: list[ProxyRecord], count: int) -> list[ProxyRecord]:
    """The newest ``count`` (records oldest first)."""
    return records[-count:] if count else []


def last_minutes(records: list[ProxyRecord], minutes: float, now: datetime) -> list[ProxyRecord]:
    """Those that started within the last ``minutes``."""
    horizon = now - timedelta(minutes=minutes)
    return [r for r in records if r.info.started >= horizon]


def by_content(records: Iterable[ProxyRecord]) -> dict[ContentClass, Aggregate]:
    """``records`` added up per content class (classes with no request left out)."""
    groups: dict[ContentClass, list[ProxyRecord]] = {}
    for record in records:
        groups.setdefault(record.content, []).append(record)
    return {cls: aggregate(groups[cls]) for cls in ContentClass if cls in groups}


def by_prompt_length(records: Iterable[ProxyRecord]) -> dict[LengthBucket, Aggregate]:
    """``records`` added up per prompt-length bucket (buckets with no request left out)."""
    groups: dict[LengthBucket, list[ProxyRecord]] = {}
    for record in records:
        groups.setdefault(record.prompt_length, []).append(record)
    return {bucket: aggregate(groups[bucket]) for bucket in LengthBucket if bucket in groups}
