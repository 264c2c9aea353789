"""The machine's load while a benchmark measures: sampled, not just read before and after.

A wall-clock figure on a shared machine means little without the load it was taken at, and the
load moves within a run (seen here: 12 falling to 7 in one 14-minute benchmark). `LoadSampler`
reads the 1-minute load average every few seconds on a thread of its own while its block runs.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from types import TracebackType


class LoadSampler:
    """``with LoadSampler() as load: ...`` then ``load.summary()``."""

    def __init__(self, every_s: float = 5.0) -> None:
        self.every_s = every_s
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self.began = ""
        self.ended = ""

    def __enter__(self) -> LoadSampler:
        self.began = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append(os.getloadavg()[0])
        self.ended = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())

    def _sample(self) -> None:
        while True:
            self.samples.append(os.getloadavg()[0])
            if self._stop.wait(self.every_s):
                return

    def summary(self) -> dict[str, object]:
        """min / median / max of the 1-minute load average over the block, and when it ran."""
        values = self.samples or [os.getloadavg()[0]]
        return {
            "min": round(min(values), 2),
            "median": round(statistics.median(values), 2),
            "max": round(max(values), 2),
            "samples": len(values),
            "from": self.began,
            "to": self.ended,
            "cores": os.cpu_count(),
        }
