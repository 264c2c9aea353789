"""Metrics divide by measured intervals."""

from __future__ import annotations

from spectui.core.events import MemoryEvent, StepEvent, TokenEvent, TokenOrigin
from spectui.core.stream.metrics import MetricsTracker


def token(i: int, t: float, origin: TokenOrigin = TokenOrigin.TARGET) -> TokenEvent:
    return TokenEvent(t=t, index=i, text="x", origin=origin)


def test_ttft_and_decode_rate() -> None:
    tracker = MetricsTracker()
    # First token at 0.5 s, then 10 more over exactly 1 s (in bursts, as speculation delivers).
    tracker.on_token(token(0, 0.5))
    for i in range(1, 11):
        tracker.on_token(token(i, 0.5 + (0.5 if i <= 5 else 1.0)))
    snap = tracker.snapshot()
    assert snap.ttft_ms == 500
    assert snap.tokens == 11
    assert snap.tokens_per_second == 10.0
    assert snap.total_ms == 1500


def test_rolling_rate_uses_window_span() -> None:
    tracker = MetricsTracker()
    for i in range(50):
        tracker.on_token(token(i, i * 0.1))  # 10 tok/s for 5 s
    assert tracker.rolling_rate() is not None
    assert abs((tracker.rolling_rate() or 0) - 10.0) < 1e-9


def test_steps_memory_and_derived_rates() -> None:
    tracker = MetricsTracker()
    tracker.on_step(StepEvent(index=0, drafted=4, accepted=2, first_token=0))
    tracker.on_step(StepEvent(index=1, drafted=4, accepted=0, first_token=3))
    tracker.on_memory(MemoryEvent(rss_bytes=100, rss_minus_shared_bytes=40))
    tracker.on_memory(MemoryEvent(rss_bytes=90, rss_minus_shared_bytes=50))
    snap = tracker.snapshot()
    assert snap.accepted_per_position == [1, 1]
    assert snap.acceptance_rate == 0.25
    assert snap.mean_acceptance_length == 2.0
    assert snap.rejected == 6
    assert (snap.peak_rss_bytes, snap.peak_rss_minus_shared_bytes) == (100, 50)
    assert snap.peak_gpu_bytes is None
