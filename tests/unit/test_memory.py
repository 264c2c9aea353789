"""The memory sampler: RSS of a process tree, its CPU and spectui's own (the observer's price)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil

from helpers.wait import wait_until
from spectui.core.events import MemoryEvent
from spectui.core.llama.memory import MIN_CPU_INTERVAL_S, MemorySampler
from spectui.core.stream.metrics import MetricsTracker


def test_sample_has_memory_and_both_cpu_shares() -> None:
    # Busy until its parent (this test's process) is gone: a pytest killed mid-test leaves no
    # spinning orphan behind (the `finally` below never runs then).
    spin = f"import os\nwhile os.getppid() == {os.getpid()}: pass"
    busy = subprocess.Popen([sys.executable, "-c", spin])
    try:
        sampler = MemorySampler(busy.pid, use_gpu=False)
        assert sampler.sample(0.0) is not None  # starts the CPU intervals
        started = time.monotonic()
        child = psutil.Process(busy.pid)
        ran = child.cpu_times().user
        # Until the child has run a while and the sampler's shortest interval has passed: how
        # large its share is depends on what else this machine runs, not on the sampler.
        wait_until(
            lambda: (
                child.cpu_times().user - ran >= 0.1
                and time.monotonic() - started > MIN_CPU_INTERVAL_S
            ),
            "the busy child ran for 0.1 s of CPU",
        )
        sample = sampler.sample(0.5)
        assert sample is not None
        assert sample.rss_bytes > 0
        assert sample.server_cpu_percent is not None and sample.server_cpu_percent > 0
        assert sample.client_cpu_percent is not None and sample.client_cpu_percent >= 0
    finally:
        busy.kill()
        busy.wait()
    assert sampler.sample(1.0) is None  # gone


def test_run_summary_carries_mean_cpu_of_the_samples() -> None:
    tracker = MetricsTracker()
    assert tracker.snapshot().client_cpu_percent is None
    for client, server in ((2.0, 180.0), (4.0, 200.0)):
        tracker.on_memory(
            MemoryEvent(
                rss_bytes=1,
                rss_minus_shared_bytes=1,
                client_cpu_percent=client,
                server_cpu_percent=server,
            )
        )
    snapshot = tracker.snapshot()
    assert (snapshot.client_cpu_percent, snapshot.server_cpu_percent) == (3.0, 190.0)
