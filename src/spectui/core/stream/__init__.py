"""One streamed generation: SSE chunks are parsed, attributed to draft or target token by token,
and folded into live metrics.

May import `spectui.core.llama` and the shared core modules; nothing above.
"""

DEFAULT_STALL_TIMEOUT_S = 60.0
"""Seconds without a byte from the server before a run is declared stalled, unless told (here,
not in `run`, so the settings read it without loading the stream's dependencies)."""
