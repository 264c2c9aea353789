"""What every llama-server the tests start shares, whoever starts it (a fixture, spectui
launched by a test, a server started outside spectui)."""

from __future__ import annotations

ONE_THREAD = ("--threads", "1")
"""Every test server computes on one thread. ggml's threads meet at a barrier after each op, so
two of them on a machine with a core kept busy by something else wait on the scheduler at every
op (seen: ~80x slower, tests at their hang guard); one thread only runs slower in proportion."""
