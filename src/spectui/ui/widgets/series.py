"""The charts' data at the run's own scale: tokens over time, accepted drafts per step.

A run of a quarter of a second and one of ten minutes both fill a chart's width: each series
keeps a bounded number of buckets, and when the run outgrows them neighbouring buckets merge in
pairs (a bucket then spans twice the time, or twice the steps). A chart asks for as many columns
as it has cells; each column is a group of whole buckets:

* tokens/s: the tokens of the group over the time the group covers, measured from the first
  token to the newest one (the last column ends at the newest token, not at a nominal bucket
  end), so a run of 300 tokens in 0.24 s draws 0.24 s of rates, and the columns' mean weighted by
  their time is the run's decode rate;
* accepted per step: the mean of the group's steps, never the largest (a 70 % run must not look
  like 100 %); steps whose accepted count is not known are counted apart, never guessed.

Nothing here knows Textual: the widgets in `charts` draw what these return.
"""

from __future__ import annotations

from dataclasses import dataclass

MOST_BUCKETS = 1024
"""Buckets a series keeps before pairs merge: four times the widest chart's cells, so a column
always groups several buckets and a group's boundary error stays small."""

RESOLUTION_S = 0.001
"""A rate bucket's first width: a millisecond, a few tokens at the rates a GPU reaches."""

TOKENS_PER_COLUMN = 12
"""The fewest tokens a tokens/s column counts on average: tokens come a step's worth at a time,
so a rate over fewer swings by a whole step (at 5 tokens a column, ±20 % around a steady rate)."""

ARRIVALS_PER_COLUMN = 3
"""The fewest arrivals (tokens read at one moment) a tokens/s column spans on average: an n-gram
step can release 64 tokens at once, and a column between two such arrivals would read zero,
the next one thousands."""

SAME_ARRIVAL_S = 1e-4
"""Tokens read less than this apart arrived together (one read of the stream)."""


class RateSeries:
    """Tokens counted in time buckets from the first token on (bounded, coarsening)."""

    def __init__(self, most: int = MOST_BUCKETS, resolution: float = RESOLUTION_S) -> None:
        self.most = max(2, most)
        self.resolution = resolution
        self.clear()

    def clear(self) -> None:
        """Forget the run (a new one starts)."""
        self.origin: float | None = None
        """Client time of the first token: the decode rate is counted from it."""
        self.newest = 0.0
        """Client time of the newest token."""
        self.width = self.resolution
        """Seconds a bucket spans now."""
        self.counts: list[int] = []
        """Tokens after the first, per bucket: bucket k holds [origin + k·width, + width)."""
        self.arrivals = 0
        """Moments tokens arrived at after the first token's (`SAME_ARRIVAL_S` apart)."""

    @property
    def tokens(self) -> int:
        """Tokens counted (all but the first)."""
        return sum(self.counts)

    @property
    def span(self) -> float:
        """Seconds from the first token to the newest one."""
        return 0.0 if self.origin is None else self.newest - self.origin

    @property
    def mean_rate(self) -> float | None:
        """Tokens/s from the first token to the newest (the run's decode rate); None until two
        tokens are apart in time."""
        span = self.span
        return self.tokens / span if span > 0 else None

    def add(self, t: float) -> None:
        """Count a token received at client time ``t`` (a time from the past counts where it
        falls: buckets never reorder)."""
        if self.origin is None:
            self.origin = self.newest = t
            return
        offset = max(0.0, t - self.origin)
        if t - self.newest >= SAME_ARRIVAL_S:
            self.arrivals += 1
        self.newest = max(self.newest, t)
        index = int(offset / self.width)
        while index >= self.most:
            self._coarsen()
            index = int(offset / self.width)
        if index >= len(self.counts):
            self.counts.extend([0] * (index + 1 - len(self.counts)))
        self.counts[index] += 1

    def _coarsen(self) -> None:
        pairs = range(0, len(self.counts), 2)
        self.counts = [sum(self.counts[i : i + 2]) for i in pairs]
        self.width *= 2

    def spans(self, columns: int) -> list[tuple[float, float, int]]:
        """At most ``columns`` (start, end, tokens) in client time, tiling the run from the first
        token to the newest; empty until two tokens are apart in time."""
        span = self.span
        if self.origin is None or span <= 0 or not self.counts:
            return []
        buckets = len(self.counts)
        # Two buckets a column at least: the newest bucket is only partly measured, and a column
        # that is nothing else would be one token over a sliver of time. (So every column is
        # longer than nothing: the last starts at least a bucket before the newest token.)
        tokens, arrivals = self.tokens // TOKENS_PER_COLUMN, self.arrivals // ARRIVALS_PER_COLUMN
        groups = max(1, min(columns, buckets // 2, tokens, arrivals))
        out: list[tuple[float, float, int]] = []
        for group in range(groups):
            low, high = buckets * group // groups, buckets * (group + 1) // groups
            end = span if group == groups - 1 else high * self.width  # (the newest token)
            count = sum(self.counts[low:high])
            out.append((self.origin + low * self.width, self.origin + end, count))
        return out

    def rates(self, columns: int) -> list[tuple[float, float]]:
        """(client time at the middle, tokens/s) of each of `spans`: its tokens over its time."""
        return [
            ((start + end) / 2, count / (end - start)) for start, end, count in self.spans(columns)
        ]


@dataclass(frozen=True, slots=True)
class StepColumn:
    """What one column of the accepted-per-step chart stands for."""

    steps: int
    """Steps whose accepted count is known."""
    mean: float | None
    """Their mean accepted drafts (None when the column has no such step)."""
    unknown: int = 0
    """Steps whose accepted count is not known: shown as such, in neither the mean nor the
    height."""


class StepSeries:
    """Accepted drafts per verification step, in buckets of consecutive steps (bounded)."""

    def __init__(self, most: int = MOST_BUCKETS) -> None:
        self.most = max(2, most)
        self.clear()

    def clear(self) -> None:
        """Forget the run (a new one starts)."""
        self.per_bucket = 1
        """Step events a bucket holds now (an event stands for one step, or for several that
        came in one chunk)."""
        self.events = 0
        """Step events added."""
        self.buckets: list[list[int]] = []
        """[known steps, accepted over them, unknown steps] per bucket, oldest first."""
        self.steps = 0
        """Steps added."""
        self.top = 0
        """The longest draft seen: the chart's full scale (a step accepts at most its draft)."""

    def add(self, drafted: int, accepted: int, steps: int = 1, known: bool = True) -> None:
        """``steps`` consecutive steps that drafted and accepted these many in all; ``known``
        False when their accepted drafts cannot be told apart step by step (several steps in
        one chunk, more than one split fitting the counters): they are then unknown."""
        index = self.events // self.per_bucket
        if index >= self.most:
            pairs = range(0, len(self.buckets), 2)
            merged = [self.buckets[i : i + 2] for i in pairs]
            self.buckets = [[sum(column) for column in zip(*pair, strict=True)] for pair in merged]
            self.per_bucket *= 2
            index = self.events // self.per_bucket
        if index >= len(self.buckets):
            self.buckets.append([0, 0, 0])
        bucket = self.buckets[index]  # (several steps of one chunk: all in one bucket)
        if known:
            bucket[0] += steps
            bucket[1] += accepted
        else:
            bucket[2] += steps
        self.steps += steps
        self.events += 1
        # Several steps' draft lengths are known only in sum: their mean length (rounded up)
        # is no longer than the longest of them.
        self.top = max(self.top, -(-drafted // max(1, steps)))

    @property
    def known(self) -> tuple[int, int]:
        """(steps whose count is known, accepted drafts over them)."""
        return sum(b[0] for b in self.buckets), sum(b[1] for b in self.buckets)

    @property
    def unknown(self) -> int:
        """Steps whose accepted count is not known."""
        return sum(b[2] for b in self.buckets)

    def columns(self, most: int) -> list[StepColumn]:
        """At most ``most`` columns over the whole run, oldest first: one per step while they
        fit, else groups of consecutive steps."""
        groups = min(max(1, most), len(self.buckets))
        out: list[StepColumn] = []
        for group in range(groups):
            low = len(self.buckets) * group // groups
            high = len(self.buckets) * (group + 1) // groups
            known = sum(b[0] for b in self.buckets[low:high])
            accepted = sum(b[1] for b in self.buckets[low:high])
            unknown = sum(b[2] for b in self.buckets[low:high])
            out.append(StepColumn(known, accepted / known if known else None, unknown))
        return out
